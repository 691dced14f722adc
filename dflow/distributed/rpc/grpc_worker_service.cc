#include "dflow/distributed/rpc/grpc_worker_service.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "dflow/distributed/rpc/grpc_util.h"
#include "dflow/distributed/rpc/tensor_coding.h"
#include "dflow/distributed/rpc/tensor_data_plane.h"

namespace dflow {

namespace {

CallOptions OptionsFrom(const grpc::CallbackServerContext* ctx) {
  CallOptions opts;
  opts.deadline = FromGrpcDeadline(ctx->deadline());
  return opts;
}

grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* ctx, const absl::Status& s) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpcStatus(s));
  return reactor;
}

// A RecvTensor that may wait long for its tensor: the worker works on copies
// owned here, so the call can finish with CANCELLED as soon as the client
// goes away (or the server shuts down) while the worker still holds them.
class RecvTensorReactor final : public grpc::ServerUnaryReactor {
 public:
  struct State {
    absl::Mutex mu;
    bool finished ABSL_GUARDED_BY(mu) = false;
    tensorflow::RecvTensorRequest req;
    RecvTensorResult result;
  };

  // A non-empty `data_plane_offer` (EncodeDataPlaneOffer) is appended to the
  // response (the request asked).
  RecvTensorReactor(tensorflow::RecvTensorRequest req, grpc::ByteBuffer* out,
                    std::string data_plane_offer)
      : state_(std::make_shared<State>()), out_(out), offer_(std::move(data_plane_offer)) {
    state_->req = std::move(req);
  }

  void Start(WorkerInterface* worker, const CallOptions& opts) {
    std::shared_ptr<State> state = state_;
    worker->RecvTensorAsync(opts, &state->req, &state->result,
                            [this, state](const absl::Status& s) {
                              // After a cancellation `this` is gone: no member call then.
                              if (TryFinish(*state)) Done(*state, s);
                            });
  }

  void OnCancel() override {
    if (TryFinish(*state_)) Finish(grpc::Status::CANCELLED);
  }
  void OnDone() override { delete this; }

 private:
  static bool TryFinish(State& state) {
    absl::MutexLock lock(&state.mu);
    if (state.finished) return false;
    state.finished = true;
    return true;
  }
  // REQUIRES: TryFinish(state) just succeeded (so OnDone has not run).
  void Done(State& state, const absl::Status& s) {
    absl::Status status = s;
    // The encoded bytes hold their own reference to the tensor's buffer.
    if (status.ok()) status = EncodeRecvTensorResponse(state.result, out_);
    if (status.ok() && !offer_.empty()) AppendDataPlaneOffer(offer_, out_);
    Finish(ToGrpcStatus(status));
  }

  std::shared_ptr<State> state_;
  grpc::ByteBuffer* const out_;  // Owned by gRPC until OnDone.
  const std::string offer_;
};

}  // namespace

template <typename Req, typename Resp>
grpc::ServerUnaryReactor* GrpcWorkerService::Forward(const char* name, Ctx* ctx,
                                                     const Bytes* req_bytes, Bytes* resp_bytes,
                                                     Method<Req, Resp> method) {
  struct Call {
    Req req;
    Resp resp;
  };
  auto call = std::make_shared<Call>();
  absl::Status parsed =
      CheckCallAuth(auth_token_, *ctx, absl::StrCat("[WorkerService.", name, "]"));
  if (parsed.ok()) {
    parsed = ParseFromByteBuffer(*req_bytes, absl::StrCat("[WorkerService.", name, "] request"),
                                 &call->req);
  }
  if (!parsed.ok()) return FinishNow(ctx, parsed);
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  (worker_->*method)(OptionsFrom(ctx), &call->req, &call->resp,
                     [reactor, call, resp_bytes](const absl::Status& s) {
                       if (s.ok()) *resp_bytes = SerializeToByteBuffer(call->resp);
                       reactor->Finish(ToGrpcStatus(s));
                     });
  return reactor;
}

grpc::ServerUnaryReactor* GrpcWorkerService::GetStatus(Ctx* ctx, const Bytes* req, Bytes* resp) {
  return Forward("GetStatus", ctx, req, resp, &WorkerInterface::GetStatusAsync);
}

grpc::ServerUnaryReactor* GrpcWorkerService::CreateWorkerSession(Ctx* ctx, const Bytes* req,
                                                                 Bytes* resp) {
  return Forward("CreateWorkerSession", ctx, req, resp,
                 &WorkerInterface::CreateWorkerSessionAsync);
}

grpc::ServerUnaryReactor* GrpcWorkerService::DeleteWorkerSession(Ctx* ctx, const Bytes* req,
                                                                 Bytes* resp) {
  return Forward("DeleteWorkerSession", ctx, req, resp,
                 &WorkerInterface::DeleteWorkerSessionAsync);
}

grpc::ServerUnaryReactor* GrpcWorkerService::RegisterGraph(Ctx* ctx, const Bytes* req,
                                                           Bytes* resp) {
  return Forward("RegisterGraph", ctx, req, resp, &WorkerInterface::RegisterGraphAsync);
}

grpc::ServerUnaryReactor* GrpcWorkerService::DeregisterGraph(Ctx* ctx, const Bytes* req,
                                                             Bytes* resp) {
  return Forward("DeregisterGraph", ctx, req, resp, &WorkerInterface::DeregisterGraphAsync);
}

grpc::ServerUnaryReactor* GrpcWorkerService::RunGraph(Ctx* ctx, const Bytes* req, Bytes* resp) {
  return Forward("RunGraph", ctx, req, resp, &WorkerInterface::RunGraphAsync);
}

grpc::ServerUnaryReactor* GrpcWorkerService::CleanupGraph(Ctx* ctx, const Bytes* req,
                                                          Bytes* resp) {
  return Forward("CleanupGraph", ctx, req, resp, &WorkerInterface::CleanupGraphAsync);
}

grpc::ServerUnaryReactor* GrpcWorkerService::CleanupAll(Ctx* ctx, const Bytes* req,
                                                        Bytes* resp) {
  return Forward("CleanupAll", ctx, req, resp, &WorkerInterface::CleanupAllAsync);
}

void GrpcWorkerService::set_data_plane(const DataPlanePort& offer) {
  absl::MutexLock l(&offer_mu_);
  data_plane_offer_ = offer.port() > 0 ? EncodeDataPlaneOffer(offer) : "";
}

grpc::ServerUnaryReactor* GrpcWorkerService::RecvTensor(Ctx* ctx, const Bytes* req,
                                                        Bytes* resp) {
  tensorflow::RecvTensorRequest request;
  absl::Status parsed = CheckCallAuth(auth_token_, *ctx, "[WorkerService.RecvTensor]");
  if (parsed.ok()) {
    parsed = ParseFromByteBuffer(*req, "[WorkerService.RecvTensor] request", &request);
  }
  if (!parsed.ok()) return FinishNow(ctx, parsed);
  std::string offer;
  if (request.has_transport_options() &&
      request.transport_options().type_url() == kDataPlaneQueryTypeUrl) {
    absl::MutexLock l(&offer_mu_);
    offer = data_plane_offer_;
  }
  auto* reactor = new RecvTensorReactor(std::move(request), resp, std::move(offer));
  reactor->Start(worker_, OptionsFrom(ctx));
  return reactor;
}

}  // namespace dflow
