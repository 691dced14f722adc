#include "dflow/distributed/rpc/grpc_remote_worker.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "dflow/distributed/rpc/data_plane_connection.h"
#include "dflow/distributed/rpc/grpc_util.h"
#include "dflow/distributed/rpc/tensor_coding.h"
#include "dflow/framework/status.h"

namespace dflow {

namespace {

absl::Status Annotate(const grpc::Status& s, const char* method, const std::string& peer) {
  return AnnotateTransportError(FromGrpcStatus(s), absl::StrCat("WorkerService.", method), peer);
}

}  // namespace

GrpcRemoteWorker::GrpcRemoteWorker(std::shared_ptr<grpc::Channel> channel, std::string name,
                                   bool use_data_plane, std::string auth_token,
                                   std::shared_ptr<const DataPlaneTls> data_plane_tls)
    : channel_(std::move(channel)),
      stub_(tensorflow::WorkerService::NewStub(channel_)),
      raw_stub_(std::make_shared<grpc::GenericStub>(channel_)),
      name_(std::move(name)),
      auth_token_(std::move(auth_token)),
      data_plane_(std::make_shared<DataPlaneClient>(name_, use_data_plane, auth_token_,
                                                    std::move(data_plane_tls))) {}

template <typename Req, typename Resp>
void GrpcRemoteWorker::CallOn(const std::shared_ptr<tensorflow::WorkerService::Stub>& stub,
                              const std::string& name, const std::string& auth_token,
                              const char* method_name, Method<Req, Resp> method,
                              const CallOptions& opts, const Req* req, Resp* resp,
                              StatusCallback done) {
  auto ctx = std::make_shared<grpc::ClientContext>();
  if (opts.deadline != absl::InfiniteFuture()) ctx->set_deadline(ToGrpcDeadline(opts.deadline));
  AttachAuthToken(auth_token, ctx.get());
  (stub->async()->*method)(ctx.get(), req, resp,
                           [ctx, method_name, name, stub, done = std::move(done)](
                               grpc::Status s) { done(Annotate(s, method_name, name)); });
}

void GrpcRemoteWorker::GetStatusAsync(const CallOptions& opts,
                                      const tensorflow::GetStatusRequest* req,
                                      tensorflow::GetStatusResponse* resp, StatusCallback done) {
  Call("GetStatus", &Async::GetStatus, opts, req, resp, std::move(done));
}

void GrpcRemoteWorker::CreateWorkerSessionAsync(const CallOptions& opts,
                                                const tensorflow::CreateWorkerSessionRequest* req,
                                                tensorflow::CreateWorkerSessionResponse* resp,
                                                StatusCallback done) {
  Call("CreateWorkerSession", &Async::CreateWorkerSession, opts, req, resp, std::move(done));
}

void GrpcRemoteWorker::DeleteWorkerSessionAsync(const CallOptions& opts,
                                                const tensorflow::DeleteWorkerSessionRequest* req,
                                                tensorflow::DeleteWorkerSessionResponse* resp,
                                                StatusCallback done) {
  Call("DeleteWorkerSession", &Async::DeleteWorkerSession, opts, req, resp, std::move(done));
}

void GrpcRemoteWorker::RegisterGraphAsync(const CallOptions& opts,
                                          const tensorflow::RegisterGraphRequest* req,
                                          tensorflow::RegisterGraphResponse* resp,
                                          StatusCallback done) {
  Call("RegisterGraph", &Async::RegisterGraph, opts, req, resp, std::move(done));
}

void GrpcRemoteWorker::DeregisterGraphAsync(const CallOptions& opts,
                                            const tensorflow::DeregisterGraphRequest* req,
                                            tensorflow::DeregisterGraphResponse* resp,
                                            StatusCallback done) {
  Call("DeregisterGraph", &Async::DeregisterGraph, opts, req, resp, std::move(done));
}

void GrpcRemoteWorker::RunGraphAsync(const CallOptions& opts,
                                     const tensorflow::RunGraphRequest* req,
                                     tensorflow::RunGraphResponse* resp, StatusCallback done) {
  // The data plane when a RecvTensor negotiated it (a dflow peer), else gRPC.
  auto fallback = [stub = stub_, name = name_, token = auth_token_, opts, req, resp, done] {
    CallOn(stub, name, token, "RunGraph", &Async::RunGraph, opts, req, resp, done);
  };
  if (data_plane_->TryRunGraphAsync(opts, req, resp, done, std::move(fallback))) return;
  Call("RunGraph", &Async::RunGraph, opts, req, resp, std::move(done));
}

void GrpcRemoteWorker::CleanupGraphAsync(const CallOptions& opts,
                                         const tensorflow::CleanupGraphRequest* req,
                                         tensorflow::CleanupGraphResponse* resp,
                                         StatusCallback done) {
  Call("CleanupGraph", &Async::CleanupGraph, opts, req, resp, std::move(done));
}

void GrpcRemoteWorker::CleanupAllAsync(const CallOptions& opts,
                                       const tensorflow::CleanupAllRequest* req,
                                       tensorflow::CleanupAllResponse* resp, StatusCallback done) {
  Call("CleanupAll", &Async::CleanupAll, opts, req, resp, std::move(done));
}

void GrpcRemoteWorker::RecvTensorAsync(const CallOptions& opts,
                                       const tensorflow::RecvTensorRequest* req,
                                       RecvTensorResult* resp, StatusCallback done) {
  // The data plane when negotiated; its connection failing falls back to gRPC.
  auto fallback = [opts, req, resp, done, stub = raw_stub_, name = name_, token = auth_token_,
                   dp = data_plane_] {
    RecvTensorOverGrpc(stub, name, token, dp, opts, req, resp, done);
  };
  if (data_plane_->TryRecvTensorAsync(opts, req, resp, done, std::move(fallback))) return;
  RecvTensorOverGrpc(raw_stub_, name_, auth_token_, data_plane_, opts, req, resp, std::move(done));
}

void GrpcRemoteWorker::RecvTensorOverGrpc(const std::shared_ptr<grpc::GenericStub>& stub,
                                          const std::string& name, const std::string& auth_token,
                                          const std::shared_ptr<DataPlaneClient>& data_plane,
                                          const CallOptions& opts,
                                          const tensorflow::RecvTensorRequest* req,
                                          RecvTensorResult* resp, StatusCallback done) {
  static const std::string* const kMethod = new std::string("/tensorflow.WorkerService/RecvTensor");
  struct RawCall {
    grpc::ClientContext ctx;
    grpc::ByteBuffer request;
    grpc::ByteBuffer response;
  };
  auto call = std::make_shared<RawCall>();
  if (opts.deadline != absl::InfiniteFuture()) {
    call->ctx.set_deadline(ToGrpcDeadline(opts.deadline));
  }
  AttachAuthToken(auth_token, &call->ctx);
  const bool query = data_plane->ShouldQuery();
  if (query) {  // Ask a dflow peer for its data port (TensorFlow ignores the field).
    tensorflow::RecvTensorRequest asking = *req;
    asking.mutable_transport_options()->set_type_url(kDataPlaneQueryTypeUrl);
    call->request = SerializeToByteBuffer(asking);
  } else {
    call->request = SerializeToByteBuffer(*req);
  }
  stub->UnaryCall(&call->ctx, *kMethod, grpc::StubOptions(), &call->request, &call->response,
                  [call, resp, name, query, data_plane, done = std::move(done)](grpc::Status s) {
                    if (query && s.ok()) {
                      const DataPlanePort offer = FindDataPlaneOffer(call->response);
                      data_plane->OnNegotiated(HostOfGrpcPeer(call->ctx.peer()),
                                               static_cast<int>(offer.port()), offer.local_name());
                    }
                    if (!s.ok()) {
                      done(Annotate(s, "RecvTensor", name));
                      return;
                    }
                    absl::Status decoded = DecodeRecvTensorResponse(call->response, resp);
                    call->response.Clear();
                    done(WithMessage(decoded,
                                     absl::StrCat(decoded.message(), " (from ", name, ")")));
                  });
}

std::unique_ptr<WorkerInterface> NewGrpcRemoteWorker(const std::string& address,
                                                     const std::string& task_name,
                                                     const SecurityOptions& security) {
  std::string target = StripGrpcScheme(address);
  std::string name = task_name.empty() ? target : absl::StrCat(task_name, " (", target, ")");
  // Under TLS the data plane is mutual TLS too; without a usable context, gRPC only.
  absl::StatusOr<std::shared_ptr<const DataPlaneTls>> tls =
      security.tls() ? DataPlaneTls::ForClient(security) : nullptr;
  return std::make_unique<GrpcRemoteWorker>(
      GrpcChannelCache::Global().FindOrCreate(target, security), std::move(name),
      DataPlaneEnabledByEnv() && tls.ok(), security.auth_token, tls.value_or(nullptr));
}

std::unique_ptr<WorkerInterface> NewGrpcRemoteWorker(const std::string& address,
                                                     const std::string& task_name) {
  return NewGrpcRemoteWorker(address, task_name, DefaultClientSecurity());
}

}  // namespace dflow
