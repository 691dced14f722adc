// WorkerInterface: the worker service of one task, independent of the
// transport (TensorFlow's WorkerService: tensorflow.WorkerService/<Method>).
// The in-process Worker implements it directly; the gRPC client (in
// distributed/rpc/) implements it over the wire. Every method is
// asynchronous: `done` is called exactly once, possibly on another thread or
// before the method returns; request and response must stay alive until
// then. The sync wrappers wait for `done`.
//
//   tensorflow::GetStatusResponse resp;
//   RETURN_IF_ERROR(worker->GetStatus({}, &resp, CallOptions::WithTimeout(absl::Seconds(5))));
#ifndef DFLOW_DISTRIBUTED_WORKER_INTERFACE_H_
#define DFLOW_DISTRIBUTED_WORKER_INTERFACE_H_

#include <functional>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "dflow/proto/worker.pb.h"

namespace dflow {

// Per-call options. A call still running at `deadline` fails with
// DeadlineExceeded (transports may report it as soon as the deadline passes).
struct CallOptions {
  absl::Time deadline = absl::InfiniteFuture();

  static CallOptions WithTimeout(absl::Duration timeout) {
    CallOptions o;
    o.deadline = absl::Now() + timeout;
    return o;
  }
};

using StatusCallback = std::function<void(const absl::Status&)>;

class WorkerInterface {
 public:
  virtual ~WorkerInterface() = default;

  virtual void GetStatusAsync(const CallOptions& opts, const tensorflow::GetStatusRequest* req,
                              tensorflow::GetStatusResponse* resp, StatusCallback done) = 0;
  virtual void CreateWorkerSessionAsync(const CallOptions& opts,
                                        const tensorflow::CreateWorkerSessionRequest* req,
                                        tensorflow::CreateWorkerSessionResponse* resp,
                                        StatusCallback done) = 0;
  virtual void DeleteWorkerSessionAsync(const CallOptions& opts,
                                        const tensorflow::DeleteWorkerSessionRequest* req,
                                        tensorflow::DeleteWorkerSessionResponse* resp,
                                        StatusCallback done) = 0;
  virtual void RegisterGraphAsync(const CallOptions& opts,
                                  const tensorflow::RegisterGraphRequest* req,
                                  tensorflow::RegisterGraphResponse* resp, StatusCallback done) = 0;
  virtual void DeregisterGraphAsync(const CallOptions& opts,
                                    const tensorflow::DeregisterGraphRequest* req,
                                    tensorflow::DeregisterGraphResponse* resp,
                                    StatusCallback done) = 0;
  virtual void RunGraphAsync(const CallOptions& opts, const tensorflow::RunGraphRequest* req,
                             tensorflow::RunGraphResponse* resp, StatusCallback done) = 0;
  virtual void CleanupGraphAsync(const CallOptions& opts,
                                 const tensorflow::CleanupGraphRequest* req,
                                 tensorflow::CleanupGraphResponse* resp, StatusCallback done) = 0;
  virtual void CleanupAllAsync(const CallOptions& opts, const tensorflow::CleanupAllRequest* req,
                               tensorflow::CleanupAllResponse* resp, StatusCallback done) = 0;
  virtual void RecvTensorAsync(const CallOptions& opts, const tensorflow::RecvTensorRequest* req,
                               tensorflow::RecvTensorResponse* resp, StatusCallback done) = 0;

  // --- synchronous wrappers ---------------------------------------------------------

  absl::Status GetStatus(const tensorflow::GetStatusRequest& req,
                         tensorflow::GetStatusResponse* resp, const CallOptions& opts = {}) {
    return Wait([&](StatusCallback d) { GetStatusAsync(opts, &req, resp, std::move(d)); });
  }
  absl::Status CreateWorkerSession(const tensorflow::CreateWorkerSessionRequest& req,
                                   tensorflow::CreateWorkerSessionResponse* resp,
                                   const CallOptions& opts = {}) {
    return Wait(
        [&](StatusCallback d) { CreateWorkerSessionAsync(opts, &req, resp, std::move(d)); });
  }
  absl::Status DeleteWorkerSession(const tensorflow::DeleteWorkerSessionRequest& req,
                                   tensorflow::DeleteWorkerSessionResponse* resp,
                                   const CallOptions& opts = {}) {
    return Wait(
        [&](StatusCallback d) { DeleteWorkerSessionAsync(opts, &req, resp, std::move(d)); });
  }
  absl::Status RegisterGraph(const tensorflow::RegisterGraphRequest& req,
                             tensorflow::RegisterGraphResponse* resp,
                             const CallOptions& opts = {}) {
    return Wait([&](StatusCallback d) { RegisterGraphAsync(opts, &req, resp, std::move(d)); });
  }
  absl::Status DeregisterGraph(const tensorflow::DeregisterGraphRequest& req,
                               tensorflow::DeregisterGraphResponse* resp,
                               const CallOptions& opts = {}) {
    return Wait([&](StatusCallback d) { DeregisterGraphAsync(opts, &req, resp, std::move(d)); });
  }
  absl::Status RunGraph(const tensorflow::RunGraphRequest& req, tensorflow::RunGraphResponse* resp,
                        const CallOptions& opts = {}) {
    return Wait([&](StatusCallback d) { RunGraphAsync(opts, &req, resp, std::move(d)); });
  }
  absl::Status CleanupGraph(const tensorflow::CleanupGraphRequest& req,
                            tensorflow::CleanupGraphResponse* resp, const CallOptions& opts = {}) {
    return Wait([&](StatusCallback d) { CleanupGraphAsync(opts, &req, resp, std::move(d)); });
  }
  absl::Status CleanupAll(const tensorflow::CleanupAllRequest& req,
                          tensorflow::CleanupAllResponse* resp, const CallOptions& opts = {}) {
    return Wait([&](StatusCallback d) { CleanupAllAsync(opts, &req, resp, std::move(d)); });
  }
  absl::Status RecvTensor(const tensorflow::RecvTensorRequest& req,
                          tensorflow::RecvTensorResponse* resp, const CallOptions& opts = {}) {
    return Wait([&](StatusCallback d) { RecvTensorAsync(opts, &req, resp, std::move(d)); });
  }

 private:
  template <typename Start>
  static absl::Status Wait(Start start) {
    absl::Notification n;
    absl::Status status;
    start([&](const absl::Status& s) {
      status = s;
      n.Notify();
    });
    n.WaitForNotification();
    return status;
  }
};

}  // namespace dflow

#endif  // DFLOW_DISTRIBUTED_WORKER_INTERFACE_H_
