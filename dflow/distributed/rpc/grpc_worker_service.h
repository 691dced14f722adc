// GrpcWorkerService: serves a WorkerInterface (usually the task's Worker) as
// gRPC's "/tensorflow.WorkerService/<Method>", with the callback API. Each
// call is forwarded with the client's deadline; the worker's status goes back
// as the gRPC status (code and message). Methods dflow does not implement
// (RecvBuf, Logging, Tracing, collectives) answer UNIMPLEMENTED.
// Requests arrive as raw bytes and are parsed here, so a request that does
// not parse gets INVALID_ARGUMENT naming the method ("[WorkerService.RunGraph]
// request of 11 bytes does not parse as tensorflow.RunGraphRequest") instead
// of gRPC's bare UNIMPLEMENTED.
// With an auth token, every method first checks the call's
// `authorization: Bearer <token>` metadata (security.h): UNAUTHENTICATED
// "[WorkerService.RunGraph] missing auth token ..." / "... wrong auth token".
// RecvTensor's response is written by tensor_coding.h around the tensor's own
// buffer (no copy); a RecvTensor parked on a tensor ends with CANCELLED when
// its caller goes away or the server shuts down.
//
//   GrpcWorkerService service(&worker);
//   grpc::ServerBuilder builder;
//   ConfigureServerBuilder(&builder);
//   builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
//   builder.RegisterService(&service);
//   std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
#ifndef DFLOW_DISTRIBUTED_RPC_GRPC_WORKER_SERVICE_H_
#define DFLOW_DISTRIBUTED_RPC_GRPC_WORKER_SERVICE_H_

#include <string>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "dflow/distributed/worker_interface.h"
#include "dflow/proto/data_plane.pb.h"
#include "dflow/proto/worker_service.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace dflow {

namespace internal {
using RawWorkerService = tensorflow::WorkerService::WithRawCallbackMethod_GetStatus<
    tensorflow::WorkerService::WithRawCallbackMethod_CreateWorkerSession<
        tensorflow::WorkerService::WithRawCallbackMethod_DeleteWorkerSession<
            tensorflow::WorkerService::WithRawCallbackMethod_RegisterGraph<
                tensorflow::WorkerService::WithRawCallbackMethod_DeregisterGraph<
                    tensorflow::WorkerService::WithRawCallbackMethod_RunGraph<
                        tensorflow::WorkerService::WithRawCallbackMethod_CleanupGraph<
                            tensorflow::WorkerService::WithRawCallbackMethod_CleanupAll<
                                tensorflow::WorkerService::WithRawCallbackMethod_RecvTensor<
                                    tensorflow::WorkerService::CallbackService>>>>>>>>>;
}  // namespace internal

class GrpcWorkerService final : public internal::RawWorkerService {
 public:
  // `worker` (not owned) must outlive the server hosting this service.
  // `auth_token` non-empty: calls must carry it.
  explicit GrpcWorkerService(WorkerInterface* worker, std::string auth_token = "")
      : worker_(worker), auth_token_(std::move(auth_token)) {}
  GrpcWorkerService(const GrpcWorkerService&) = delete;
  GrpcWorkerService& operator=(const GrpcWorkerService&) = delete;

  using Ctx = grpc::CallbackServerContext;
  using Bytes = grpc::ByteBuffer;
  grpc::ServerUnaryReactor* GetStatus(Ctx* ctx, const Bytes* req, Bytes* resp) override;
  grpc::ServerUnaryReactor* CreateWorkerSession(Ctx* ctx, const Bytes* req, Bytes* resp) override;
  grpc::ServerUnaryReactor* DeleteWorkerSession(Ctx* ctx, const Bytes* req, Bytes* resp) override;
  grpc::ServerUnaryReactor* RegisterGraph(Ctx* ctx, const Bytes* req, Bytes* resp) override;
  grpc::ServerUnaryReactor* DeregisterGraph(Ctx* ctx, const Bytes* req, Bytes* resp) override;
  grpc::ServerUnaryReactor* RunGraph(Ctx* ctx, const Bytes* req, Bytes* resp) override;
  grpc::ServerUnaryReactor* CleanupGraph(Ctx* ctx, const Bytes* req, Bytes* resp) override;
  grpc::ServerUnaryReactor* CleanupAll(Ctx* ctx, const Bytes* req, Bytes* resp) override;
  grpc::ServerUnaryReactor* RecvTensor(Ctx* ctx, const Bytes* req, Bytes* resp) override;

  // This task's tensor data plane (tensor_data_plane.h), offered to receivers
  // that ask for it in RecvTensorRequest.transport_options; port 0: none.
  void set_data_plane(const DataPlanePort& offer);

 private:
  template <typename Req, typename Resp>
  using Method = void (WorkerInterface::*)(const CallOptions&, const Req*, Resp*, StatusCallback);

  // Parses the request, runs `method` on the worker and finishes the call
  // with the serialized response when it is done.
  template <typename Req, typename Resp>
  grpc::ServerUnaryReactor* Forward(const char* name, Ctx* ctx, const Bytes* req, Bytes* resp,
                                    Method<Req, Resp> method);

  WorkerInterface* const worker_;  // Not owned.
  const std::string auth_token_;
  absl::Mutex offer_mu_;
  std::string data_plane_offer_ ABSL_GUARDED_BY(offer_mu_);  // Encoded; "": none.
};

}  // namespace dflow

#endif  // DFLOW_DISTRIBUTED_RPC_GRPC_WORKER_SERVICE_H_
