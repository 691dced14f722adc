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

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "dflow/distributed/call_options.h"
#include "dflow/framework/tensor.h"
#include "dflow/proto/worker.pb.h"

namespace dflow {

// What RecvTensor delivers (TensorFlow's RecvTensorResponse, with the tensor
// decoded): in process `tensor` shares the sender's buffer; over gRPC it is a
// fresh tensor filled from the wire. `tensor` is unset when `is_dead`.
struct RecvTensorResult {
  Tensor tensor;
  bool is_dead = false;
  // When the sender started the transfer (microseconds since the epoch); 0 if unknown.
  int64_t send_start_micros = 0;
};

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
  // RunGraph with more sends: tensors of this process, each under its
  // rendezvous key. The in-process Worker hands their buffers to the step as
  // they are, with no encoding and no copy (how a master passes its client's
  // feeds to its own task); any other worker gets them encoded into a copy of
  // the request (this default).
  using TensorSends = std::vector<std::pair<std::string, Tensor>>;
  virtual void RunGraphWithTensorsAsync(const CallOptions& opts,
                                        const tensorflow::RunGraphRequest* req,
                                        TensorSends sends, tensorflow::RunGraphResponse* resp,
                                        StatusCallback done);
  virtual void CleanupGraphAsync(const CallOptions& opts,
                                 const tensorflow::CleanupGraphRequest* req,
                                 tensorflow::CleanupGraphResponse* resp, StatusCallback done) = 0;
  virtual void CleanupAllAsync(const CallOptions& opts, const tensorflow::CleanupAllRequest* req,
                               tensorflow::CleanupAllResponse* resp, StatusCallback done) = 0;
  virtual void RecvTensorAsync(const CallOptions& opts, const tensorflow::RecvTensorRequest* req,
                               RecvTensorResult* resp, StatusCallback done) = 0;

  // --- synchronous wrappers ---------------------------------------------------------

  absl::Status GetStatus(const tensorflow::GetStatusRequest& req,
                         tensorflow::GetStatusResponse* resp, const CallOptions& opts = {}) {
    return WaitForCall([&](StatusCallback d) { GetStatusAsync(opts, &req, resp, std::move(d)); });
  }
  absl::Status CreateWorkerSession(const tensorflow::CreateWorkerSessionRequest& req,
                                   tensorflow::CreateWorkerSessionResponse* resp,
                                   const CallOptions& opts = {}) {
    return WaitForCall(
        [&](StatusCallback d) { CreateWorkerSessionAsync(opts, &req, resp, std::move(d)); });
  }
  absl::Status DeleteWorkerSession(const tensorflow::DeleteWorkerSessionRequest& req,
                                   tensorflow::DeleteWorkerSessionResponse* resp,
                                   const CallOptions& opts = {}) {
    return WaitForCall(
        [&](StatusCallback d) { DeleteWorkerSessionAsync(opts, &req, resp, std::move(d)); });
  }
  absl::Status RegisterGraph(const tensorflow::RegisterGraphRequest& req,
                             tensorflow::RegisterGraphResponse* resp,
                             const CallOptions& opts = {}) {
    return WaitForCall(
        [&](StatusCallback d) { RegisterGraphAsync(opts, &req, resp, std::move(d)); });
  }
  absl::Status DeregisterGraph(const tensorflow::DeregisterGraphRequest& req,
                               tensorflow::DeregisterGraphResponse* resp,
                               const CallOptions& opts = {}) {
    return WaitForCall(
        [&](StatusCallback d) { DeregisterGraphAsync(opts, &req, resp, std::move(d)); });
  }
  absl::Status RunGraph(const tensorflow::RunGraphRequest& req, tensorflow::RunGraphResponse* resp,
                        const CallOptions& opts = {}) {
    return WaitForCall([&](StatusCallback d) { RunGraphAsync(opts, &req, resp, std::move(d)); });
  }
  absl::Status CleanupGraph(const tensorflow::CleanupGraphRequest& req,
                            tensorflow::CleanupGraphResponse* resp, const CallOptions& opts = {}) {
    return WaitForCall(
        [&](StatusCallback d) { CleanupGraphAsync(opts, &req, resp, std::move(d)); });
  }
  absl::Status CleanupAll(const tensorflow::CleanupAllRequest& req,
                          tensorflow::CleanupAllResponse* resp, const CallOptions& opts = {}) {
    return WaitForCall([&](StatusCallback d) { CleanupAllAsync(opts, &req, resp, std::move(d)); });
  }
  absl::Status RecvTensor(const tensorflow::RecvTensorRequest& req, RecvTensorResult* resp,
                          const CallOptions& opts = {}) {
    return WaitForCall([&](StatusCallback d) { RecvTensorAsync(opts, &req, resp, std::move(d)); });
  }
};

}  // namespace dflow

#endif  // DFLOW_DISTRIBUTED_WORKER_INTERFACE_H_
