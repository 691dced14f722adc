// GrpcRemoteWorker: the WorkerInterface of another task, called over gRPC
// ("/tensorflow.WorkerService/<Method>", callback stub API). Every call
// carries CallOptions::deadline as its gRPC deadline. Errors keep the remote
// status code and message; transport failures (UNAVAILABLE, a passed
// deadline) name the call and the peer:
//   "[WorkerService.RunGraph to /job:ps/replica:0/task:0 (127.0.0.1:2222)] ..."
// Calls do not wait for a peer that is down: they fail with UNAVAILABLE.
// Thread-safe.
//
//   std::unique_ptr<WorkerInterface> ps = NewGrpcRemoteWorker("127.0.0.1:2222", "/job:ps/replica:0/task:0");
//   RETURN_IF_ERROR(ps->GetStatus({}, &resp, CallOptions::WithTimeout(absl::Seconds(5))));
#ifndef DFLOW_DISTRIBUTED_RPC_GRPC_REMOTE_WORKER_H_
#define DFLOW_DISTRIBUTED_RPC_GRPC_REMOTE_WORKER_H_

#include <memory>
#include <string>

#include "dflow/distributed/rpc/security.h"
#include "dflow/distributed/rpc/tensor_data_plane.h"
#include "dflow/distributed/worker_interface.h"
#include "dflow/proto/worker_service.grpc.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"

namespace dflow {

class GrpcRemoteWorker final : public WorkerInterface {
 public:
  // `name` names the peer in errors, e.g. "/job:ps/replica:0/task:0 (host:port)".
  // `use_data_plane`: RecvTensor moves tensors over the peer's data plane
  // (tensor_data_plane.h) once negotiated; false: gRPC only. `auth_token`
  // (may be empty) goes with every call and every data-plane connection.
  // `data_plane_tls` set: data-plane connections are mutual TLS.
  GrpcRemoteWorker(std::shared_ptr<grpc::Channel> channel, std::string name,
                   bool use_data_plane = DataPlaneEnabledByEnv(), std::string auth_token = "",
                   std::shared_ptr<const DataPlaneTls> data_plane_tls = nullptr);
  GrpcRemoteWorker(const GrpcRemoteWorker&) = delete;
  GrpcRemoteWorker& operator=(const GrpcRemoteWorker&) = delete;

  void GetStatusAsync(const CallOptions& opts, const tensorflow::GetStatusRequest* req,
                      tensorflow::GetStatusResponse* resp, StatusCallback done) override;
  void CreateWorkerSessionAsync(const CallOptions& opts,
                                const tensorflow::CreateWorkerSessionRequest* req,
                                tensorflow::CreateWorkerSessionResponse* resp,
                                StatusCallback done) override;
  void DeleteWorkerSessionAsync(const CallOptions& opts,
                                const tensorflow::DeleteWorkerSessionRequest* req,
                                tensorflow::DeleteWorkerSessionResponse* resp,
                                StatusCallback done) override;
  void RegisterGraphAsync(const CallOptions& opts, const tensorflow::RegisterGraphRequest* req,
                          tensorflow::RegisterGraphResponse* resp, StatusCallback done) override;
  void DeregisterGraphAsync(const CallOptions& opts, const tensorflow::DeregisterGraphRequest* req,
                            tensorflow::DeregisterGraphResponse* resp,
                            StatusCallback done) override;
  void RunGraphAsync(const CallOptions& opts, const tensorflow::RunGraphRequest* req,
                     tensorflow::RunGraphResponse* resp, StatusCallback done) override;
  void CleanupGraphAsync(const CallOptions& opts, const tensorflow::CleanupGraphRequest* req,
                         tensorflow::CleanupGraphResponse* resp, StatusCallback done) override;
  void CleanupAllAsync(const CallOptions& opts, const tensorflow::CleanupAllRequest* req,
                       tensorflow::CleanupAllResponse* resp, StatusCallback done) override;
  // Over the peer's tensor data plane when negotiated (received straight into
  // a fresh tensor; gRPC when the data connection cannot be made). Over gRPC
  // the response is decoded by tensor_coding.h straight into a fresh tensor
  // (one copy from gRPC's buffers). A response that does not decode is
  // InvalidArgument naming the peer.
  void RecvTensorAsync(const CallOptions& opts, const tensorflow::RecvTensorRequest* req,
                       RecvTensorResult* resp, StatusCallback done) override;

  const std::string& name() const { return name_; }
  // Whether RecvTensor uses the peer's data plane now (after negotiation).
  bool data_plane_ready() const { return data_plane_->ready(); }

 private:
  using Async = tensorflow::WorkerService::StubInterface::async_interface;
  template <typename Req, typename Resp>
  using Method = void (Async::*)(grpc::ClientContext*, const Req*, Resp*,
                                 std::function<void(grpc::Status)>);

  // Starts `method` with a fresh context carrying opts.deadline.
  template <typename Req, typename Resp>
  void Call(const char* method_name, Method<Req, Resp> method, const CallOptions& opts,
            const Req* req, Resp* resp, StatusCallback done) {
    CallOn(stub_, name_, auth_token_, method_name, method, opts, req, resp, std::move(done));
  }
  template <typename Req, typename Resp>
  static void CallOn(const std::shared_ptr<tensorflow::WorkerService::Stub>& stub,
                     const std::string& name, const std::string& auth_token,
                     const char* method_name, Method<Req, Resp> method, const CallOptions& opts,
                     const Req* req, Resp* resp, StatusCallback done);

  static void RecvTensorOverGrpc(const std::shared_ptr<grpc::GenericStub>& stub,
                                 const std::string& name, const std::string& auth_token,
                                 const std::shared_ptr<DataPlaneClient>& data_plane,
                                 const CallOptions& opts, const tensorflow::RecvTensorRequest* req,
                                 RecvTensorResult* resp, StatusCallback done);

  std::shared_ptr<grpc::Channel> channel_;
  // Shared with calls that may outlive this object (a data-plane RunGraph's fallback).
  std::shared_ptr<tensorflow::WorkerService::Stub> stub_;
  std::shared_ptr<grpc::GenericStub> raw_stub_;  // RecvTensor: raw bytes both ways.
  const std::string name_;
  const std::string auth_token_;
  std::shared_ptr<DataPlaneClient> data_plane_;
};

// A remote worker on the cached channel to `address` ("host:port" or
// "grpc://host:port"); `task_name` (may be empty) joins the address in errors.
// It presents `security` (default: DefaultClientSecurity()); under TLS its
// tensors stay on the TLS gRPC channel (no data plane: see SECURITY.md).
std::unique_ptr<WorkerInterface> NewGrpcRemoteWorker(const std::string& address,
                                                     const std::string& task_name,
                                                     const SecurityOptions& security);
std::unique_ptr<WorkerInterface> NewGrpcRemoteWorker(const std::string& address,
                                                     const std::string& task_name);

}  // namespace dflow

#endif  // DFLOW_DISTRIBUTED_RPC_GRPC_REMOTE_WORKER_H_
