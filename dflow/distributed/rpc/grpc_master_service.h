// GrpcMasterService: serves a MasterInterface (the task's Master) as gRPC's
// "/tensorflow.MasterService/<Method>", with the callback API. Each call is
// forwarded with the client's deadline; the master's status goes back as the
// gRPC status. TensorFlow's own client (tf.compat.v1.Session("grpc://..."))
// calls these methods. Requests arrive as raw bytes and are parsed here, so a
// request that does not parse gets INVALID_ARGUMENT naming the method
// ("[MasterService.RunStep] request of 11 bytes does not parse as
// tensorflow.RunStepRequest") instead of gRPC's bare UNIMPLEMENTED.
// With an auth token, every method first checks the call's
// `authorization: Bearer <token>` metadata (security.h): UNAUTHENTICATED
// "[MasterService.RunStep] missing auth token ..." / "... wrong auth token".
//
//   GrpcMasterService service(&master);
//   builder.RegisterService(&service);
#ifndef DFLOW_DISTRIBUTED_RPC_GRPC_MASTER_SERVICE_H_
#define DFLOW_DISTRIBUTED_RPC_GRPC_MASTER_SERVICE_H_

#include <string>
#include <utility>

#include "dflow/distributed/master_interface.h"
#include "dflow/proto/master_service.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace dflow {

namespace internal {
using RawMasterService = tensorflow::MasterService::WithRawCallbackMethod_CreateSession<
    tensorflow::MasterService::WithRawCallbackMethod_ExtendSession<
        tensorflow::MasterService::WithRawCallbackMethod_PartialRunSetup<
            tensorflow::MasterService::WithRawCallbackMethod_RunStep<
                tensorflow::MasterService::WithRawCallbackMethod_CloseSession<
                    tensorflow::MasterService::WithRawCallbackMethod_ListDevices<
                        tensorflow::MasterService::WithRawCallbackMethod_Reset<
                            tensorflow::MasterService::WithRawCallbackMethod_MakeCallable<
                                tensorflow::MasterService::WithRawCallbackMethod_RunCallable<
                                    tensorflow::MasterService::
                                        WithRawCallbackMethod_ReleaseCallable<
                                            tensorflow::MasterService::CallbackService>>>>>>>>>>;
}  // namespace internal

class GrpcMasterService final : public internal::RawMasterService {
 public:
  // `master` (not owned) must outlive the server hosting this service.
  // `auth_token` non-empty: calls must carry it.
  explicit GrpcMasterService(MasterInterface* master, std::string auth_token = "")
      : master_(master), auth_token_(std::move(auth_token)) {}
  GrpcMasterService(const GrpcMasterService&) = delete;
  GrpcMasterService& operator=(const GrpcMasterService&) = delete;

  using Ctx = grpc::CallbackServerContext;
  using Bytes = grpc::ByteBuffer;
  grpc::ServerUnaryReactor* CreateSession(Ctx* ctx, const Bytes* req, Bytes* resp) override;
  grpc::ServerUnaryReactor* ExtendSession(Ctx* ctx, const Bytes* req, Bytes* resp) override;
  grpc::ServerUnaryReactor* PartialRunSetup(Ctx* ctx, const Bytes* req, Bytes* resp) override;
  grpc::ServerUnaryReactor* RunStep(Ctx* ctx, const Bytes* req, Bytes* resp) override;
  grpc::ServerUnaryReactor* CloseSession(Ctx* ctx, const Bytes* req, Bytes* resp) override;
  grpc::ServerUnaryReactor* ListDevices(Ctx* ctx, const Bytes* req, Bytes* resp) override;
  grpc::ServerUnaryReactor* Reset(Ctx* ctx, const Bytes* req, Bytes* resp) override;
  grpc::ServerUnaryReactor* MakeCallable(Ctx* ctx, const Bytes* req, Bytes* resp) override;
  grpc::ServerUnaryReactor* RunCallable(Ctx* ctx, const Bytes* req, Bytes* resp) override;
  grpc::ServerUnaryReactor* ReleaseCallable(Ctx* ctx, const Bytes* req, Bytes* resp) override;

 private:
  template <typename Req, typename Resp>
  using Method = void (MasterInterface::*)(const CallOptions&, const Req*, Resp*, StatusCallback);

  // Parses the request, runs `method` on the master and finishes the call
  // with the serialized response when it is done.
  template <typename Req, typename Resp>
  grpc::ServerUnaryReactor* Forward(const char* name, Ctx* ctx, const Bytes* req, Bytes* resp,
                                    Method<Req, Resp> method);

  MasterInterface* const master_;  // Not owned.
  const std::string auth_token_;
};

}  // namespace dflow

#endif  // DFLOW_DISTRIBUTED_RPC_GRPC_MASTER_SERVICE_H_
