// Helpers at the gRPC edge: status conversion both ways, deadlines, and
// channels with dflow's settings (no 4 MiB message cap), cached per target.
// Only dflow/distributed/rpc/ includes gRPC headers.
//
//   std::shared_ptr<grpc::Channel> ch = GrpcChannelCache::Global().FindOrCreate("grpc://h:2222");
//   return FromGrpcStatus(stub->GetStatus(&ctx, req, &resp));
#ifndef DFLOW_DISTRIBUTED_RPC_GRPC_UTIL_H_
#define DFLOW_DISTRIBUTED_RPC_GRPC_UTIL_H_

#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dflow/distributed/rpc/security.h"
#include "google/protobuf/message_lite.h"
#include "grpcpp/grpcpp.h"

namespace dflow {

// Codes map one to one (both follow google.rpc.Code); the message is kept.
grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

// absl::InfiniteFuture() <-> gRPC's infinite deadline.
std::chrono::system_clock::time_point ToGrpcDeadline(absl::Time deadline);
absl::Time FromGrpcDeadline(std::chrono::system_clock::time_point deadline);

// Transport failures (UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED) get
// "[<call> to <peer>] " in front; a peer's own errors already say what failed
// and pass through unchanged.
absl::Status AnnotateTransportError(const absl::Status& status, absl::string_view call,
                                    absl::string_view peer);

// "grpc://host:port" -> "host:port"; other strings are returned as given.
std::string StripGrpcScheme(absl::string_view target);

// Unlimited send/receive message sizes, quick reconnects to a restarted peer.
// (gRPC sets TCP_NODELAY on every TCP socket itself.)
grpc::ChannelArguments DefaultChannelArguments();
// A channel to `target` ("host:port" or "grpc://host:port"): TLS presenting
// security.tls_cert and verifying the server against security.tls_ca when
// security.tls(), else insecure. (The token goes on each call: AttachAuthToken.)
std::shared_ptr<grpc::Channel> NewGrpcChannel(absl::string_view target,
                                              const SecurityOptions& security = {});
// Unlimited message sizes on the server side too, unless
// `max_request_bytes` > 0: then a request of more bytes is refused
// RESOURCE_EXHAUSTED by gRPC before any of it is parsed (capped at 2 GiB - 1,
// gRPC's most).
void ConfigureServerBuilder(grpc::ServerBuilder* builder, int64_t max_request_bytes = 0);
// Mutual TLS (client certificates required and verified against
// security.tls_ca) when security.tls(), else insecure.
std::shared_ptr<grpc::ServerCredentials> ServerCredentialsFor(const SecurityOptions& security);

// The metadata key and value prefix carrying the shared token on a call.
inline constexpr char kAuthMetadataKey[] = "authorization";
inline constexpr char kAuthBearerPrefix[] = "Bearer ";
// Adds `authorization: Bearer <token>` to `ctx` unless `token` is empty.
void AttachAuthToken(const std::string& token, grpc::ClientContext* ctx);
// OK when `token` is empty or the call carries it; else Unauthenticated
// naming `call` ("[MasterService.RunStep]") and what is missing.
absl::Status CheckCallAuth(const std::string& token, const grpc::CallbackServerContext& ctx,
                           absl::string_view call);

// Parses a message received as raw bytes. InvalidArgument naming `what`
// (e.g. "[WorkerService.RunGraph] request") and the size when the bytes are
// not a `msg->GetTypeName()`.
absl::Status ParseFromByteBuffer(const grpc::ByteBuffer& bytes, absl::string_view what,
                                 google::protobuf::MessageLite* msg);
// `msg` serialized as gRPC would send it.
grpc::ByteBuffer SerializeToByteBuffer(const google::protobuf::MessageLite& msg);

// One channel per target and TLS identity, shared by every stub calling it.
// Thread-safe.
class GrpcChannelCache {
 public:
  static GrpcChannelCache& Global();
  std::shared_ptr<grpc::Channel> FindOrCreate(absl::string_view target,
                                              const SecurityOptions& security = {});

 private:
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<grpc::Channel>> channels_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dflow

#endif  // DFLOW_DISTRIBUTED_RPC_GRPC_UTIL_H_
