#include "dflow/distributed/rpc/grpc_worker_service.h"

#include <memory>

#include "absl/synchronization/mutex.h"
#include "dflow/distributed/rpc/grpc_util.h"

namespace dflow {

namespace {

CallOptions OptionsFrom(const grpc::CallbackServerContext* ctx) {
  CallOptions opts;
  opts.deadline = FromGrpcDeadline(ctx->deadline());
  return opts;
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
    tensorflow::RecvTensorResponse resp;
  };

  RecvTensorReactor(const tensorflow::RecvTensorRequest& req, tensorflow::RecvTensorResponse* out)
      : state_(std::make_shared<State>()), out_(out) {
    state_->req = req;
  }

  void Start(WorkerInterface* worker, const CallOptions& opts) {
    std::shared_ptr<State> state = state_;
    worker->RecvTensorAsync(opts, &state->req, &state->resp,
                            [this, state](const absl::Status& s) { Done(*state, s); });
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
  // `state` outlives this reactor: only touch `this` when the call is not
  // finished yet (then OnDone has not run).
  void Done(State& state, const absl::Status& s) {
    if (!TryFinish(state)) return;
    if (s.ok()) out_->Swap(&state.resp);
    Finish(ToGrpcStatus(s));
  }

  std::shared_ptr<State> state_;
  tensorflow::RecvTensorResponse* const out_;  // Owned by gRPC until OnDone.
};

}  // namespace

template <typename Req, typename Resp>
grpc::ServerUnaryReactor* GrpcWorkerService::Forward(grpc::CallbackServerContext* ctx,
                                                     const Req* req, Resp* resp,
                                                     Method<Req, Resp> method) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  (worker_->*method)(OptionsFrom(ctx), req, resp,
                     [reactor](const absl::Status& s) { reactor->Finish(ToGrpcStatus(s)); });
  return reactor;
}

grpc::ServerUnaryReactor* GrpcWorkerService::GetStatus(grpc::CallbackServerContext* ctx,
                                                       const tensorflow::GetStatusRequest* req,
                                                       tensorflow::GetStatusResponse* resp) {
  return Forward(ctx, req, resp, &WorkerInterface::GetStatusAsync);
}

grpc::ServerUnaryReactor* GrpcWorkerService::CreateWorkerSession(
    grpc::CallbackServerContext* ctx, const tensorflow::CreateWorkerSessionRequest* req,
    tensorflow::CreateWorkerSessionResponse* resp) {
  return Forward(ctx, req, resp, &WorkerInterface::CreateWorkerSessionAsync);
}

grpc::ServerUnaryReactor* GrpcWorkerService::DeleteWorkerSession(
    grpc::CallbackServerContext* ctx, const tensorflow::DeleteWorkerSessionRequest* req,
    tensorflow::DeleteWorkerSessionResponse* resp) {
  return Forward(ctx, req, resp, &WorkerInterface::DeleteWorkerSessionAsync);
}

grpc::ServerUnaryReactor* GrpcWorkerService::RegisterGraph(
    grpc::CallbackServerContext* ctx, const tensorflow::RegisterGraphRequest* req,
    tensorflow::RegisterGraphResponse* resp) {
  return Forward(ctx, req, resp, &WorkerInterface::RegisterGraphAsync);
}

grpc::ServerUnaryReactor* GrpcWorkerService::DeregisterGraph(
    grpc::CallbackServerContext* ctx, const tensorflow::DeregisterGraphRequest* req,
    tensorflow::DeregisterGraphResponse* resp) {
  return Forward(ctx, req, resp, &WorkerInterface::DeregisterGraphAsync);
}

grpc::ServerUnaryReactor* GrpcWorkerService::RunGraph(grpc::CallbackServerContext* ctx,
                                                      const tensorflow::RunGraphRequest* req,
                                                      tensorflow::RunGraphResponse* resp) {
  return Forward(ctx, req, resp, &WorkerInterface::RunGraphAsync);
}

grpc::ServerUnaryReactor* GrpcWorkerService::CleanupGraph(
    grpc::CallbackServerContext* ctx, const tensorflow::CleanupGraphRequest* req,
    tensorflow::CleanupGraphResponse* resp) {
  return Forward(ctx, req, resp, &WorkerInterface::CleanupGraphAsync);
}

grpc::ServerUnaryReactor* GrpcWorkerService::CleanupAll(grpc::CallbackServerContext* ctx,
                                                        const tensorflow::CleanupAllRequest* req,
                                                        tensorflow::CleanupAllResponse* resp) {
  return Forward(ctx, req, resp, &WorkerInterface::CleanupAllAsync);
}

grpc::ServerUnaryReactor* GrpcWorkerService::RecvTensor(grpc::CallbackServerContext* ctx,
                                                        const tensorflow::RecvTensorRequest* req,
                                                        tensorflow::RecvTensorResponse* resp) {
  auto* reactor = new RecvTensorReactor(*req, resp);
  reactor->Start(worker_, OptionsFrom(ctx));
  return reactor;
}

}  // namespace dflow
