#include "dflow/distributed/rpc/echo_service.h"

#include <chrono>
#include <utility>

#include "absl/synchronization/notification.h"
#include "dflow/distributed/rpc/grpc_util.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"

namespace dflow {

namespace {

// Answers every call with its request bytes.
class Echo final : public grpc::CallbackGenericService {
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext*) override {
    class Reactor final : public grpc::ServerGenericBidiReactor {
     public:
      Reactor() { StartRead(&message_); }
      void OnReadDone(bool ok) override {
        if (ok) {
          StartWrite(&message_);
        } else {
          Finish(grpc::Status::OK);
        }
      }
      void OnWriteDone(bool ok) override {
        if (ok) {
          StartRead(&message_);
        } else {
          Finish(grpc::Status::OK);
        }
      }
      void OnDone() override { delete this; }

     private:
      grpc::ByteBuffer message_;
    };
    return new Reactor;
  }
};

}  // namespace

struct EchoServer::Impl {
  Echo service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
};

EchoServer::EchoServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

EchoServer::~EchoServer() {
  impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
}

absl::StatusOr<std::unique_ptr<EchoServer>> EchoServer::Start() {
  auto impl = std::make_unique<Impl>();
  grpc::ServerBuilder builder;
  ConfigureServerBuilder(&builder);
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &impl->port);
  builder.RegisterCallbackGenericService(&impl->service);
  impl->server = builder.BuildAndStart();
  if (impl->server == nullptr || impl->port == 0) {
    return absl::UnavailableError("[EchoServer] cannot listen on 127.0.0.1");
  }
  return std::unique_ptr<EchoServer>(new EchoServer(std::move(impl)));
}

int EchoServer::port() const { return impl_->port; }

struct EchoClient::Impl {
  explicit Impl(const std::string& target) : stub(NewGrpcChannel(target)) {}
  grpc::GenericStub stub;
};

EchoClient::EchoClient(const std::string& target) : impl_(std::make_unique<Impl>(target)) {}
EchoClient::~EchoClient() = default;

absl::Status EchoClient::Call(const std::string& payload, absl::Duration timeout) {
  grpc::ClientContext ctx;
  ctx.set_deadline(ToGrpcDeadline(absl::Now() + timeout));
  grpc::Slice slice(payload);
  grpc::ByteBuffer request(&slice, 1), response;
  absl::Notification done;
  grpc::Status status;
  impl_->stub.UnaryCall(&ctx, "/dflow.Echo/Echo", grpc::StubOptions(), &request, &response,
                        [&](grpc::Status s) {
                          status = std::move(s);
                          done.Notify();
                        });
  done.WaitForNotification();
  return FromGrpcStatus(status);
}

}  // namespace dflow
