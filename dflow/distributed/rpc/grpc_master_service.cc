#include "dflow/distributed/rpc/grpc_master_service.h"

#include "dflow/distributed/rpc/grpc_util.h"

namespace dflow {

template <typename Req, typename Resp>
grpc::ServerUnaryReactor* GrpcMasterService::Forward(grpc::CallbackServerContext* ctx,
                                                     const Req* req, Resp* resp,
                                                     Method<Req, Resp> method) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  CallOptions opts;
  opts.deadline = FromGrpcDeadline(ctx->deadline());
  (master_->*method)(opts, req, resp,
                     [reactor](const absl::Status& s) { reactor->Finish(ToGrpcStatus(s)); });
  return reactor;
}

grpc::ServerUnaryReactor* GrpcMasterService::CreateSession(
    grpc::CallbackServerContext* ctx, const tensorflow::CreateSessionRequest* req,
    tensorflow::CreateSessionResponse* resp) {
  return Forward(ctx, req, resp, &MasterInterface::CreateSessionAsync);
}

grpc::ServerUnaryReactor* GrpcMasterService::ExtendSession(
    grpc::CallbackServerContext* ctx, const tensorflow::ExtendSessionRequest* req,
    tensorflow::ExtendSessionResponse* resp) {
  return Forward(ctx, req, resp, &MasterInterface::ExtendSessionAsync);
}

grpc::ServerUnaryReactor* GrpcMasterService::PartialRunSetup(
    grpc::CallbackServerContext* ctx, const tensorflow::PartialRunSetupRequest* req,
    tensorflow::PartialRunSetupResponse* resp) {
  return Forward(ctx, req, resp, &MasterInterface::PartialRunSetupAsync);
}

grpc::ServerUnaryReactor* GrpcMasterService::RunStep(grpc::CallbackServerContext* ctx,
                                                     const tensorflow::RunStepRequest* req,
                                                     tensorflow::RunStepResponse* resp) {
  return Forward(ctx, req, resp, &MasterInterface::RunStepAsync);
}

grpc::ServerUnaryReactor* GrpcMasterService::CloseSession(
    grpc::CallbackServerContext* ctx, const tensorflow::CloseSessionRequest* req,
    tensorflow::CloseSessionResponse* resp) {
  return Forward(ctx, req, resp, &MasterInterface::CloseSessionAsync);
}

grpc::ServerUnaryReactor* GrpcMasterService::ListDevices(grpc::CallbackServerContext* ctx,
                                                         const tensorflow::ListDevicesRequest* req,
                                                         tensorflow::ListDevicesResponse* resp) {
  return Forward(ctx, req, resp, &MasterInterface::ListDevicesAsync);
}

grpc::ServerUnaryReactor* GrpcMasterService::Reset(grpc::CallbackServerContext* ctx,
                                                   const tensorflow::ResetRequest* req,
                                                   tensorflow::ResetResponse* resp) {
  return Forward(ctx, req, resp, &MasterInterface::ResetAsync);
}

grpc::ServerUnaryReactor* GrpcMasterService::MakeCallable(
    grpc::CallbackServerContext* ctx, const tensorflow::MakeCallableRequest* req,
    tensorflow::MakeCallableResponse* resp) {
  return Forward(ctx, req, resp, &MasterInterface::MakeCallableAsync);
}

grpc::ServerUnaryReactor* GrpcMasterService::RunCallable(grpc::CallbackServerContext* ctx,
                                                         const tensorflow::RunCallableRequest* req,
                                                         tensorflow::RunCallableResponse* resp) {
  return Forward(ctx, req, resp, &MasterInterface::RunCallableAsync);
}

grpc::ServerUnaryReactor* GrpcMasterService::ReleaseCallable(
    grpc::CallbackServerContext* ctx, const tensorflow::ReleaseCallableRequest* req,
    tensorflow::ReleaseCallableResponse* resp) {
  return Forward(ctx, req, resp, &MasterInterface::ReleaseCallableAsync);
}

}  // namespace dflow
