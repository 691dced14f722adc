#include "dflow/distributed/rpc/grpc_master_service.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "dflow/distributed/rpc/grpc_util.h"

namespace dflow {

template <typename Req, typename Resp>
grpc::ServerUnaryReactor* GrpcMasterService::Forward(const char* name, Ctx* ctx,
                                                     const Bytes* req_bytes, Bytes* resp_bytes,
                                                     Method<Req, Resp> method) {
  struct Call {
    Req req;
    Resp resp;
  };
  auto call = std::make_shared<Call>();
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  absl::Status parsed =
      CheckCallAuth(auth_token_, *ctx, absl::StrCat("[MasterService.", name, "]"));
  if (parsed.ok()) {
    parsed = ParseFromByteBuffer(*req_bytes, absl::StrCat("[MasterService.", name, "] request"),
                                 &call->req);
  }
  if (!parsed.ok()) {
    reactor->Finish(ToGrpcStatus(parsed));
    return reactor;
  }
  CallOptions opts;
  opts.deadline = FromGrpcDeadline(ctx->deadline());
  (master_->*method)(opts, &call->req, &call->resp,
                     [reactor, call, resp_bytes](const absl::Status& s) {
                       if (s.ok()) *resp_bytes = SerializeToByteBuffer(call->resp);
                       reactor->Finish(ToGrpcStatus(s));
                     });
  return reactor;
}

grpc::ServerUnaryReactor* GrpcMasterService::CreateSession(Ctx* ctx, const Bytes* req,
                                                           Bytes* resp) {
  return Forward("CreateSession", ctx, req, resp, &MasterInterface::CreateSessionAsync);
}

grpc::ServerUnaryReactor* GrpcMasterService::ExtendSession(Ctx* ctx, const Bytes* req,
                                                           Bytes* resp) {
  return Forward("ExtendSession", ctx, req, resp, &MasterInterface::ExtendSessionAsync);
}

grpc::ServerUnaryReactor* GrpcMasterService::PartialRunSetup(Ctx* ctx, const Bytes* req,
                                                             Bytes* resp) {
  return Forward("PartialRunSetup", ctx, req, resp, &MasterInterface::PartialRunSetupAsync);
}

grpc::ServerUnaryReactor* GrpcMasterService::RunStep(Ctx* ctx, const Bytes* req, Bytes* resp) {
  return Forward("RunStep", ctx, req, resp, &MasterInterface::RunStepAsync);
}

grpc::ServerUnaryReactor* GrpcMasterService::CloseSession(Ctx* ctx, const Bytes* req, Bytes* resp) {
  return Forward("CloseSession", ctx, req, resp, &MasterInterface::CloseSessionAsync);
}

grpc::ServerUnaryReactor* GrpcMasterService::ListDevices(Ctx* ctx, const Bytes* req, Bytes* resp) {
  return Forward("ListDevices", ctx, req, resp, &MasterInterface::ListDevicesAsync);
}

grpc::ServerUnaryReactor* GrpcMasterService::Reset(Ctx* ctx, const Bytes* req, Bytes* resp) {
  return Forward("Reset", ctx, req, resp, &MasterInterface::ResetAsync);
}

grpc::ServerUnaryReactor* GrpcMasterService::MakeCallable(Ctx* ctx, const Bytes* req, Bytes* resp) {
  return Forward("MakeCallable", ctx, req, resp, &MasterInterface::MakeCallableAsync);
}

grpc::ServerUnaryReactor* GrpcMasterService::RunCallable(Ctx* ctx, const Bytes* req, Bytes* resp) {
  return Forward("RunCallable", ctx, req, resp, &MasterInterface::RunCallableAsync);
}

grpc::ServerUnaryReactor* GrpcMasterService::ReleaseCallable(Ctx* ctx, const Bytes* req,
                                                             Bytes* resp) {
  return Forward("ReleaseCallable", ctx, req, resp, &MasterInterface::ReleaseCallableAsync);
}

}  // namespace dflow
