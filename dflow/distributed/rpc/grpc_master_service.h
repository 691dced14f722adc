// GrpcMasterService: serves a MasterInterface (the task's Master) as gRPC's
// "/tensorflow.MasterService/<Method>", with the callback API. Each call is
// forwarded with the client's deadline; the master's status goes back as the
// gRPC status. TensorFlow's own client (tf.compat.v1.Session("grpc://..."))
// calls these methods.
//
//   GrpcMasterService service(&master);
//   builder.RegisterService(&service);
#ifndef DFLOW_DISTRIBUTED_RPC_GRPC_MASTER_SERVICE_H_
#define DFLOW_DISTRIBUTED_RPC_GRPC_MASTER_SERVICE_H_

#include "dflow/distributed/master_interface.h"
#include "dflow/proto/master_service.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace dflow {

class GrpcMasterService final : public tensorflow::MasterService::CallbackService {
 public:
  // `master` (not owned) must outlive the server hosting this service.
  explicit GrpcMasterService(MasterInterface* master) : master_(master) {}
  GrpcMasterService(const GrpcMasterService&) = delete;
  GrpcMasterService& operator=(const GrpcMasterService&) = delete;

  grpc::ServerUnaryReactor* CreateSession(grpc::CallbackServerContext* ctx,
                                          const tensorflow::CreateSessionRequest* req,
                                          tensorflow::CreateSessionResponse* resp) override;
  grpc::ServerUnaryReactor* ExtendSession(grpc::CallbackServerContext* ctx,
                                          const tensorflow::ExtendSessionRequest* req,
                                          tensorflow::ExtendSessionResponse* resp) override;
  grpc::ServerUnaryReactor* PartialRunSetup(grpc::CallbackServerContext* ctx,
                                            const tensorflow::PartialRunSetupRequest* req,
                                            tensorflow::PartialRunSetupResponse* resp) override;
  grpc::ServerUnaryReactor* RunStep(grpc::CallbackServerContext* ctx,
                                    const tensorflow::RunStepRequest* req,
                                    tensorflow::RunStepResponse* resp) override;
  grpc::ServerUnaryReactor* CloseSession(grpc::CallbackServerContext* ctx,
                                         const tensorflow::CloseSessionRequest* req,
                                         tensorflow::CloseSessionResponse* resp) override;
  grpc::ServerUnaryReactor* ListDevices(grpc::CallbackServerContext* ctx,
                                        const tensorflow::ListDevicesRequest* req,
                                        tensorflow::ListDevicesResponse* resp) override;
  grpc::ServerUnaryReactor* Reset(grpc::CallbackServerContext* ctx,
                                  const tensorflow::ResetRequest* req,
                                  tensorflow::ResetResponse* resp) override;
  grpc::ServerUnaryReactor* MakeCallable(grpc::CallbackServerContext* ctx,
                                         const tensorflow::MakeCallableRequest* req,
                                         tensorflow::MakeCallableResponse* resp) override;
  grpc::ServerUnaryReactor* RunCallable(grpc::CallbackServerContext* ctx,
                                        const tensorflow::RunCallableRequest* req,
                                        tensorflow::RunCallableResponse* resp) override;
  grpc::ServerUnaryReactor* ReleaseCallable(grpc::CallbackServerContext* ctx,
                                            const tensorflow::ReleaseCallableRequest* req,
                                            tensorflow::ReleaseCallableResponse* resp) override;

 private:
  template <typename Req, typename Resp>
  using Method = void (MasterInterface::*)(const CallOptions&, const Req*, Resp*, StatusCallback);

  // Runs `method` on the master and finishes the call when it is done.
  template <typename Req, typename Resp>
  grpc::ServerUnaryReactor* Forward(grpc::CallbackServerContext* ctx, const Req* req, Resp* resp,
                                    Method<Req, Resp> method);

  MasterInterface* const master_;  // Not owned.
};

}  // namespace dflow

#endif  // DFLOW_DISTRIBUTED_RPC_GRPC_MASTER_SERVICE_H_
