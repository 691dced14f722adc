#include "dflow/distributed/rpc/grpc_util.h"

#include <algorithm>
#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "grpcpp/impl/codegen/proto_utils.h"

namespace dflow {

namespace {
constexpr int kMaxCode = 16;  // UNAUTHENTICATED, the last code of both enums.
}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  int code = static_cast<int>(status.code());
  if (code < 1 || code > kMaxCode) code = grpc::StatusCode::UNKNOWN;
  return grpc::Status(static_cast<grpc::StatusCode>(code), std::string(status.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  int code = static_cast<int>(status.error_code());
  if (code < 1 || code > kMaxCode) code = static_cast<int>(absl::StatusCode::kUnknown);
  return absl::Status(static_cast<absl::StatusCode>(code), status.error_message());
}

std::chrono::system_clock::time_point ToGrpcDeadline(absl::Time deadline) {
  if (deadline == absl::InfiniteFuture()) return std::chrono::system_clock::time_point::max();
  return absl::ToChronoTime(deadline);
}

absl::Time FromGrpcDeadline(std::chrono::system_clock::time_point deadline) {
  if (deadline == std::chrono::system_clock::time_point::max()) return absl::InfiniteFuture();
  return absl::FromChrono(deadline);
}

std::string StripGrpcScheme(absl::string_view target) {
  constexpr absl::string_view kScheme = "grpc://";
  if (absl::StartsWith(target, kScheme)) target.remove_prefix(kScheme.size());
  return std::string(target);
}

grpc::ChannelArguments DefaultChannelArguments() {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  // A peer that comes back is found within a second, not gRPC's 2 minutes.
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  // Each target gets its own connection, not one shared process-wide.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return args;
}

std::shared_ptr<grpc::Channel> NewGrpcChannel(absl::string_view target,
                                              const SecurityOptions& security) {
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (security.tls()) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = security.tls_ca;
    ssl.pem_private_key = security.tls_key;
    ssl.pem_cert_chain = security.tls_cert;
    credentials = grpc::SslCredentials(ssl);
  }
  return grpc::CreateCustomChannel(StripGrpcScheme(target), credentials, DefaultChannelArguments());
}

std::shared_ptr<grpc::ServerCredentials> ServerCredentialsFor(const SecurityOptions& security) {
  if (!security.tls()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions ssl(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  ssl.pem_root_certs = security.tls_ca;
  ssl.pem_key_cert_pairs.push_back({security.tls_key, security.tls_cert});
  return grpc::SslServerCredentials(ssl);
}

void AttachAuthToken(const std::string& token, grpc::ClientContext* ctx) {
  if (!token.empty()) ctx->AddMetadata(kAuthMetadataKey, absl::StrCat(kAuthBearerPrefix, token));
}

absl::Status CheckCallAuth(const std::string& token, const grpc::CallbackServerContext& ctx,
                           absl::string_view call) {
  if (token.empty()) return absl::OkStatus();
  const auto& metadata = ctx.client_metadata();
  auto it = metadata.find(kAuthMetadataKey);
  if (it == metadata.end()) return CheckAuthToken(token, nullptr, call);
  absl::string_view value(it->second.data(), it->second.size());
  absl::ConsumePrefix(&value, kAuthBearerPrefix);
  return CheckAuthToken(token, &value, call);
}

void ConfigureServerBuilder(grpc::ServerBuilder* builder, int64_t max_request_bytes) {
  builder->SetMaxReceiveMessageSize(
      max_request_bytes > 0
          ? static_cast<int>(std::min<int64_t>(max_request_bytes, std::numeric_limits<int>::max()))
          : -1);
  builder->SetMaxSendMessageSize(-1);
  // A taken port is an error, not a second server sharing it (SO_REUSEPORT).
  builder->AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
}

absl::Status ParseFromByteBuffer(const grpc::ByteBuffer& bytes, absl::string_view what,
                                 google::protobuf::MessageLite* msg) {
  grpc::ByteBuffer copy(bytes);  // Shares the slices; Deserialize consumes its input.
  grpc::Status s =
      grpc::GenericDeserialize<grpc::ProtoBufferReader, google::protobuf::MessageLite>(&copy, msg);
  if (s.ok()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(what, " of ", bytes.Length(),
                                                 " bytes does not parse as ",
                                                 msg->GetTypeName()));
}

grpc::ByteBuffer SerializeToByteBuffer(const google::protobuf::MessageLite& msg) {
  grpc::ByteBuffer out;
  bool own = false;
  grpc::GenericSerialize<grpc::ProtoBufferWriter, google::protobuf::MessageLite>(msg, &out, &own);
  return out;
}

GrpcChannelCache& GrpcChannelCache::Global() {
  static GrpcChannelCache* cache = new GrpcChannelCache;
  return *cache;
}

std::shared_ptr<grpc::Channel> GrpcChannelCache::FindOrCreate(absl::string_view target,
                                                              const SecurityOptions& security) {
  const std::string address = StripGrpcScheme(target);
  // A TLS channel is its own entry per identity (the key holds its PEMs).
  const std::string key =
      security.tls() ? absl::StrCat(address, "\n", security.tls_cert, "\n", security.tls_ca)
                     : address;
  absl::MutexLock lock(&mu_);
  std::shared_ptr<grpc::Channel>& channel = channels_[key];
  if (channel == nullptr) channel = NewGrpcChannel(address, security);
  return channel;
}

absl::Status AnnotateTransportError(const absl::Status& status, absl::string_view call,
                                    absl::string_view peer) {
  const absl::StatusCode code = status.code();
  if (code != absl::StatusCode::kUnavailable && code != absl::StatusCode::kDeadlineExceeded &&
      code != absl::StatusCode::kCancelled) {
    return status;
  }
  return absl::Status(code, absl::StrCat("[", call, " to ", peer, "] ", status.message()));
}

}  // namespace dflow
