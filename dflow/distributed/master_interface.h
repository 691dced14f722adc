// MasterInterface: the master service of one task, independent of the
// transport (TensorFlow's MasterService: tensorflow.MasterService/<Method>).
// The in-process Master implements it; the gRPC client (distributed/rpc/)
// implements it over the wire; RemoteSession turns it into a Session.
// Asynchronous like WorkerInterface: `done` runs exactly once, possibly on
// another thread or before the method returns; request and response must
// stay alive until then. The sync wrappers wait for `done`.
//
//   tensorflow::CreateSessionResponse created;
//   RETURN_IF_ERROR(master->CreateSession(req, &created,
//   CallOptions::WithTimeout(absl::Seconds(30))));
#ifndef DFLOW_DISTRIBUTED_MASTER_INTERFACE_H_
#define DFLOW_DISTRIBUTED_MASTER_INTERFACE_H_

#include <vector>

#include "dflow/distributed/call_options.h"
#include "dflow/framework/tensor.h"
#include "dflow/proto/master.pb.h"

namespace dflow {

// OK when `num_values` gives one value per feed that `req` names (what
// RunStepWithTensorsAsync takes); InvalidArgument naming both counts else.
absl::Status CheckFeedValues(const tensorflow::RunStepRequest& req, size_t num_values);

class MasterInterface {
 public:
  virtual ~MasterInterface() = default;

  virtual void CreateSessionAsync(const CallOptions& opts,
                                  const tensorflow::CreateSessionRequest* req,
                                  tensorflow::CreateSessionResponse* resp, StatusCallback done) = 0;
  virtual void ExtendSessionAsync(const CallOptions& opts,
                                  const tensorflow::ExtendSessionRequest* req,
                                  tensorflow::ExtendSessionResponse* resp, StatusCallback done) = 0;
  virtual void PartialRunSetupAsync(const CallOptions& opts,
                                    const tensorflow::PartialRunSetupRequest* req,
                                    tensorflow::PartialRunSetupResponse* resp,
                                    StatusCallback done) = 0;
  virtual void RunStepAsync(const CallOptions& opts, const tensorflow::RunStepRequest* req,
                            tensorflow::RunStepResponse* resp, StatusCallback done) = 0;
  // RunStep with feeds that are tensors of this process: `req`'s feeds carry
  // their names only and `feed_values[i]` is the value of feed i. The
  // in-process Master hands the buffers to its own task as they are, with no
  // encoding and no copy (how a trainer in a server's process feeds its
  // batches), and may start the step on the calling thread, which is then
  // busy until the step's partitions are sent; any other master gets them
  // encoded into `req` (this default).
  virtual void RunStepWithTensorsAsync(const CallOptions& opts, tensorflow::RunStepRequest* req,
                                       std::vector<Tensor> feed_values,
                                       tensorflow::RunStepResponse* resp, StatusCallback done);
  virtual void CloseSessionAsync(const CallOptions& opts,
                                 const tensorflow::CloseSessionRequest* req,
                                 tensorflow::CloseSessionResponse* resp, StatusCallback done) = 0;
  virtual void ListDevicesAsync(const CallOptions& opts, const tensorflow::ListDevicesRequest* req,
                                tensorflow::ListDevicesResponse* resp, StatusCallback done) = 0;
  virtual void ResetAsync(const CallOptions& opts, const tensorflow::ResetRequest* req,
                          tensorflow::ResetResponse* resp, StatusCallback done) = 0;
  virtual void MakeCallableAsync(const CallOptions& opts,
                                 const tensorflow::MakeCallableRequest* req,
                                 tensorflow::MakeCallableResponse* resp, StatusCallback done) = 0;
  virtual void RunCallableAsync(const CallOptions& opts, const tensorflow::RunCallableRequest* req,
                                tensorflow::RunCallableResponse* resp, StatusCallback done) = 0;
  virtual void ReleaseCallableAsync(const CallOptions& opts,
                                    const tensorflow::ReleaseCallableRequest* req,
                                    tensorflow::ReleaseCallableResponse* resp,
                                    StatusCallback done) = 0;

  // --- synchronous wrappers ---------------------------------------------------------

  absl::Status CreateSession(const tensorflow::CreateSessionRequest& req,
                             tensorflow::CreateSessionResponse* resp,
                             const CallOptions& opts = {}) {
    return WaitForCall(
        [&](StatusCallback d) { CreateSessionAsync(opts, &req, resp, std::move(d)); });
  }
  absl::Status ExtendSession(const tensorflow::ExtendSessionRequest& req,
                             tensorflow::ExtendSessionResponse* resp,
                             const CallOptions& opts = {}) {
    return WaitForCall(
        [&](StatusCallback d) { ExtendSessionAsync(opts, &req, resp, std::move(d)); });
  }
  absl::Status RunStep(const tensorflow::RunStepRequest& req, tensorflow::RunStepResponse* resp,
                       const CallOptions& opts = {}) {
    return WaitForCall([&](StatusCallback d) { RunStepAsync(opts, &req, resp, std::move(d)); });
  }
  absl::Status RunStepWithTensors(tensorflow::RunStepRequest* req, std::vector<Tensor> feed_values,
                                  tensorflow::RunStepResponse* resp, const CallOptions& opts = {}) {
    return WaitForCall([&](StatusCallback d) {
      RunStepWithTensorsAsync(opts, req, std::move(feed_values), resp, std::move(d));
    });
  }
  absl::Status CloseSession(const tensorflow::CloseSessionRequest& req,
                            tensorflow::CloseSessionResponse* resp, const CallOptions& opts = {}) {
    return WaitForCall(
        [&](StatusCallback d) { CloseSessionAsync(opts, &req, resp, std::move(d)); });
  }
  absl::Status ListDevices(const tensorflow::ListDevicesRequest& req,
                           tensorflow::ListDevicesResponse* resp, const CallOptions& opts = {}) {
    return WaitForCall([&](StatusCallback d) { ListDevicesAsync(opts, &req, resp, std::move(d)); });
  }
  absl::Status Reset(const tensorflow::ResetRequest& req, tensorflow::ResetResponse* resp,
                     const CallOptions& opts = {}) {
    return WaitForCall([&](StatusCallback d) { ResetAsync(opts, &req, resp, std::move(d)); });
  }
  absl::Status MakeCallable(const tensorflow::MakeCallableRequest& req,
                            tensorflow::MakeCallableResponse* resp, const CallOptions& opts = {}) {
    return WaitForCall(
        [&](StatusCallback d) { MakeCallableAsync(opts, &req, resp, std::move(d)); });
  }
  absl::Status RunCallable(const tensorflow::RunCallableRequest& req,
                           tensorflow::RunCallableResponse* resp, const CallOptions& opts = {}) {
    return WaitForCall([&](StatusCallback d) { RunCallableAsync(opts, &req, resp, std::move(d)); });
  }
  absl::Status ReleaseCallable(const tensorflow::ReleaseCallableRequest& req,
                               tensorflow::ReleaseCallableResponse* resp,
                               const CallOptions& opts = {}) {
    return WaitForCall(
        [&](StatusCallback d) { ReleaseCallableAsync(opts, &req, resp, std::move(d)); });
  }
};

}  // namespace dflow

#endif  // DFLOW_DISTRIBUTED_MASTER_INTERFACE_H_
