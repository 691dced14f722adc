// Opt-in security of a dflow task (DESIGN §9, SECURITY.md): a shared token
// checked on every gRPC call and every data-plane connection, and mutual TLS
// on the gRPC port. Both are off by default, so TensorFlow's clients keep
// working against a dflow server started without them.
//
// The token travels as gRPC metadata `authorization: Bearer <token>` (the
// HTTP convention gRPC's own token credentials use) and in the first frame of
// a data-plane connection (tensor_data_plane.h). Servers compare it in time
// that depends only on the presented token's length (TokensEqual).
//
//   SecurityFiles files{.auth_token_file = "/etc/dflow/token"};
//   ASSIGN_OR_RETURN(SecurityOptions security, LoadSecurityOptions(files));
//   GrpcServer::Options options;
//   options.security = security;          // what this server requires and its clients send
//   SetDefaultClientSecurity(security);   // what NewSession("grpc://...") sends
#ifndef DFLOW_DISTRIBUTED_RPC_SECURITY_H_
#define DFLOW_DISTRIBUTED_RPC_SECURITY_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dflow {

// What a server requires of its callers and what a client presents. Empty
// fields are off. Copyable value.
struct SecurityOptions {
  std::string auth_token;  // The shared token; "" = none.
  // Mutual TLS, PEM contents: this end's certificate chain and private key,
  // and the CA that signs the other end's certificate. All three or none.
  std::string tls_cert;
  std::string tls_key;
  std::string tls_ca;

  bool tls() const { return !tls_cert.empty(); }
};

// Paths as given on the command line or in the TF_CONFIG-style JSON; "" = off.
struct SecurityFiles {
  std::string auth_token_file;
  std::string tls_cert;
  std::string tls_key;
  std::string tls_ca;
};

// Reads the files named in `files`. The token is the file's content without
// trailing whitespace; a token file that is empty, or readable by other users
// (mode & 0004, as ssh refuses such keys), or a private key readable by other
// users, is InvalidArgument naming the file; a missing file is NotFound. TLS
// needs all of cert, key and CA (InvalidArgument naming the missing one).
absl::StatusOr<SecurityOptions> LoadSecurityOptions(const SecurityFiles& files);

// Whether `presented` equals `expected`, in time that depends on the
// presented token's length, not on where the two differ or on the expected
// token's bytes.
bool TokensEqual(absl::string_view expected, absl::string_view presented);

// Checks a presented token against `expected` ("" = no token required).
// `presented` is nullptr when the caller sent none. Unauthenticated
// "<call> missing auth token ..." / "<call> wrong auth token" otherwise.
absl::Status CheckAuthToken(absl::string_view expected, const absl::string_view* presented,
                            absl::string_view call);

// The credentials dflow's clients in this process present when nothing else
// is given (NewSession("grpc://..."), NewGrpcRemoteMaster, NewGrpcRemoteWorker).
// Set once at start-up by the command line; thread-safe.
void SetDefaultClientSecurity(const SecurityOptions& security);
SecurityOptions DefaultClientSecurity();

}  // namespace dflow

#endif  // DFLOW_DISTRIBUTED_RPC_SECURITY_H_
