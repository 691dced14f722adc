// GrpcWorkerService: serves a WorkerInterface (usually the task's Worker) as
// gRPC's "/tensorflow.WorkerService/<Method>", with the callback API. Each
// call is forwarded with the client's deadline; the worker's status goes back
// as the gRPC status (code and message). Methods dflow does not implement
// (RecvBuf, Logging, Tracing, collectives) answer UNIMPLEMENTED. A request
// that does not parse is refused by gRPC before it reaches the worker (gRPC
// 1.51 answers it with UNIMPLEMENTED and an empty message).
// A RecvTensor parked on a tensor ends with CANCELLED when its caller goes
// away or the server shuts down.
//
//   GrpcWorkerService service(&worker);
//   grpc::ServerBuilder builder;
//   ConfigureServerBuilder(&builder);
//   builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
//   builder.RegisterService(&service);
//   std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
#ifndef DFLOW_DISTRIBUTED_RPC_GRPC_WORKER_SERVICE_H_
#define DFLOW_DISTRIBUTED_RPC_GRPC_WORKER_SERVICE_H_

#include "dflow/distributed/worker_interface.h"
#include "dflow/proto/worker_service.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace dflow {

class GrpcWorkerService final : public tensorflow::WorkerService::CallbackService {
 public:
  // `worker` (not owned) must outlive the server hosting this service.
  explicit GrpcWorkerService(WorkerInterface* worker) : worker_(worker) {}
  GrpcWorkerService(const GrpcWorkerService&) = delete;
  GrpcWorkerService& operator=(const GrpcWorkerService&) = delete;

  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* ctx,
                                      const tensorflow::GetStatusRequest* req,
                                      tensorflow::GetStatusResponse* resp) override;
  grpc::ServerUnaryReactor* CreateWorkerSession(
      grpc::CallbackServerContext* ctx, const tensorflow::CreateWorkerSessionRequest* req,
      tensorflow::CreateWorkerSessionResponse* resp) override;
  grpc::ServerUnaryReactor* DeleteWorkerSession(
      grpc::CallbackServerContext* ctx, const tensorflow::DeleteWorkerSessionRequest* req,
      tensorflow::DeleteWorkerSessionResponse* resp) override;
  grpc::ServerUnaryReactor* RegisterGraph(grpc::CallbackServerContext* ctx,
                                          const tensorflow::RegisterGraphRequest* req,
                                          tensorflow::RegisterGraphResponse* resp) override;
  grpc::ServerUnaryReactor* DeregisterGraph(grpc::CallbackServerContext* ctx,
                                            const tensorflow::DeregisterGraphRequest* req,
                                            tensorflow::DeregisterGraphResponse* resp) override;
  grpc::ServerUnaryReactor* RunGraph(grpc::CallbackServerContext* ctx,
                                     const tensorflow::RunGraphRequest* req,
                                     tensorflow::RunGraphResponse* resp) override;
  grpc::ServerUnaryReactor* CleanupGraph(grpc::CallbackServerContext* ctx,
                                         const tensorflow::CleanupGraphRequest* req,
                                         tensorflow::CleanupGraphResponse* resp) override;
  grpc::ServerUnaryReactor* CleanupAll(grpc::CallbackServerContext* ctx,
                                       const tensorflow::CleanupAllRequest* req,
                                       tensorflow::CleanupAllResponse* resp) override;
  grpc::ServerUnaryReactor* RecvTensor(grpc::CallbackServerContext* ctx,
                                       const tensorflow::RecvTensorRequest* req,
                                       tensorflow::RecvTensorResponse* resp) override;

 private:
  template <typename Req, typename Resp>
  using Method = void (WorkerInterface::*)(const CallOptions&, const Req*, Resp*, StatusCallback);

  // Runs `method` on the worker and finishes the call when it is done.
  template <typename Req, typename Resp>
  grpc::ServerUnaryReactor* Forward(grpc::CallbackServerContext* ctx, const Req* req, Resp* resp,
                                    Method<Req, Resp> method);

  WorkerInterface* const worker_;  // Not owned.
};

}  // namespace dflow

#endif  // DFLOW_DISTRIBUTED_RPC_GRPC_WORKER_SERVICE_H_
