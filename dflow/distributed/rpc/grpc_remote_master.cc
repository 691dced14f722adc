#include "dflow/distributed/rpc/grpc_remote_master.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "dflow/distributed/local_master.h"
#include "dflow/distributed/remote_session.h"
#include "dflow/distributed/rpc/grpc_util.h"
#include "dflow/proto/master_service.grpc.pb.h"
#include "dflow/runtime/session_factory.h"
#include "grpcpp/grpcpp.h"

namespace dflow {

namespace {

class GrpcRemoteMaster final : public MasterInterface {
 public:
  GrpcRemoteMaster(std::shared_ptr<grpc::Channel> channel, std::string target,
                   std::string auth_token)
      : stub_(tensorflow::MasterService::NewStub(std::move(channel))),
        target_(std::move(target)),
        auth_token_(std::move(auth_token)) {}

  void CreateSessionAsync(const CallOptions& opts, const tensorflow::CreateSessionRequest* req,
                          tensorflow::CreateSessionResponse* resp, StatusCallback done) override {
    Call("CreateSession", &Async::CreateSession, opts, req, resp, std::move(done));
  }
  void ExtendSessionAsync(const CallOptions& opts, const tensorflow::ExtendSessionRequest* req,
                          tensorflow::ExtendSessionResponse* resp, StatusCallback done) override {
    Call("ExtendSession", &Async::ExtendSession, opts, req, resp, std::move(done));
  }
  void PartialRunSetupAsync(const CallOptions& opts, const tensorflow::PartialRunSetupRequest* req,
                            tensorflow::PartialRunSetupResponse* resp,
                            StatusCallback done) override {
    Call("PartialRunSetup", &Async::PartialRunSetup, opts, req, resp, std::move(done));
  }
  void RunStepAsync(const CallOptions& opts, const tensorflow::RunStepRequest* req,
                    tensorflow::RunStepResponse* resp, StatusCallback done) override {
    Call("RunStep", &Async::RunStep, opts, req, resp, std::move(done));
  }
  void CloseSessionAsync(const CallOptions& opts, const tensorflow::CloseSessionRequest* req,
                         tensorflow::CloseSessionResponse* resp, StatusCallback done) override {
    Call("CloseSession", &Async::CloseSession, opts, req, resp, std::move(done));
  }
  void ListDevicesAsync(const CallOptions& opts, const tensorflow::ListDevicesRequest* req,
                        tensorflow::ListDevicesResponse* resp, StatusCallback done) override {
    Call("ListDevices", &Async::ListDevices, opts, req, resp, std::move(done));
  }
  void ResetAsync(const CallOptions& opts, const tensorflow::ResetRequest* req,
                  tensorflow::ResetResponse* resp, StatusCallback done) override {
    Call("Reset", &Async::Reset, opts, req, resp, std::move(done));
  }
  void MakeCallableAsync(const CallOptions& opts, const tensorflow::MakeCallableRequest* req,
                         tensorflow::MakeCallableResponse* resp, StatusCallback done) override {
    Call("MakeCallable", &Async::MakeCallable, opts, req, resp, std::move(done));
  }
  void RunCallableAsync(const CallOptions& opts, const tensorflow::RunCallableRequest* req,
                        tensorflow::RunCallableResponse* resp, StatusCallback done) override {
    Call("RunCallable", &Async::RunCallable, opts, req, resp, std::move(done));
  }
  void ReleaseCallableAsync(const CallOptions& opts, const tensorflow::ReleaseCallableRequest* req,
                            tensorflow::ReleaseCallableResponse* resp,
                            StatusCallback done) override {
    Call("ReleaseCallable", &Async::ReleaseCallable, opts, req, resp, std::move(done));
  }

 private:
  using Async = tensorflow::MasterService::StubInterface::async_interface;
  template <typename Req, typename Resp>
  using Method = void (Async::*)(grpc::ClientContext*, const Req*, Resp*,
                                 std::function<void(grpc::Status)>);

  template <typename Req, typename Resp>
  void Call(const char* method_name, Method<Req, Resp> method, const CallOptions& opts,
            const Req* req, Resp* resp, StatusCallback done) {
    auto ctx = std::make_shared<grpc::ClientContext>();
    if (opts.deadline != absl::InfiniteFuture()) ctx->set_deadline(ToGrpcDeadline(opts.deadline));
    AttachAuthToken(auth_token_, ctx.get());
    (stub_->async()->*method)(
        ctx.get(), req, resp,
        [ctx, method_name, target = target_, done = std::move(done)](grpc::Status s) {
          done(AnnotateTransportError(FromGrpcStatus(s),
                                      absl::StrCat("MasterService.", method_name), target));
        });
  }

  std::unique_ptr<tensorflow::MasterService::Stub> stub_;
  const std::string target_;
  const std::string auth_token_;
};

const bool kRegistered = [] {
  RegisterGrpcSessionFactory();
  return true;
}();

}  // namespace

std::unique_ptr<MasterInterface> NewGrpcRemoteMaster(const std::string& target,
                                                     const SecurityOptions& security) {
  return std::make_unique<GrpcRemoteMaster>(
      GrpcChannelCache::Global().FindOrCreate(target, security), StripGrpcScheme(target),
      security.auth_token);
}

std::unique_ptr<MasterInterface> NewGrpcRemoteMaster(const std::string& target) {
  return NewGrpcRemoteMaster(target, DefaultClientSecurity());
}

void RegisterGrpcSessionFactory() {
  RegisterSessionFactory(
      "grpc://", [](const SessionOptions& options) -> absl::StatusOr<std::unique_ptr<Session>> {
        // A server of this process is called directly (LocalMaster).
        std::unique_ptr<MasterInterface> master = LocalMaster::Lookup(options.target);
        if (master == nullptr) master = NewGrpcRemoteMaster(options.target);
        return std::unique_ptr<Session>(
            std::make_unique<RemoteSession>(std::move(master), options));
      });
}

}  // namespace dflow
