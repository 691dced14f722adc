#include "dflow/distributed/rpc/security.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "dflow/framework/status.h"

namespace dflow {

namespace {

// The file's bytes. NotFound when it cannot be opened; InvalidArgument when
// other users may read it and it holds a secret.
absl::StatusOr<std::string> ReadFile(const std::string& path, absl::string_view what, bool secret) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat("[Security] ", what, " ", path, " does not exist"));
  }
  if (secret && (st.st_mode & S_IROTH) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "[Security] ", what, " ", path, " is readable by every user; make it private (chmod 600)"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("[Security] cannot read ", what, " ", path));
  }
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

absl::Mutex default_mu(absl::kConstInit);
SecurityOptions* default_security ABSL_GUARDED_BY(default_mu) = nullptr;

}  // namespace

absl::StatusOr<SecurityOptions> LoadSecurityOptions(const SecurityFiles& files) {
  SecurityOptions out;
  if (!files.auth_token_file.empty()) {
    ASSIGN_OR_RETURN(std::string token,
                     ReadFile(files.auth_token_file, "auth token file", /*secret=*/true));
    out.auth_token = std::string(absl::StripTrailingAsciiWhitespace(token));
    if (out.auth_token.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("[Security] auth token file ", files.auth_token_file, " is empty"));
    }
  }
  const bool any_tls = !files.tls_cert.empty() || !files.tls_key.empty() || !files.tls_ca.empty();
  if (!any_tls) return out;
  const char* missing = files.tls_cert.empty()  ? "--tls-cert"
                        : files.tls_key.empty() ? "--tls-key"
                        : files.tls_ca.empty()  ? "--tls-ca"
                                                : nullptr;
  if (missing != nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "[Security] TLS needs --tls-cert, --tls-key and --tls-ca; ", missing, " is missing"));
  }
  ASSIGN_OR_RETURN(out.tls_cert, ReadFile(files.tls_cert, "TLS certificate", false));
  ASSIGN_OR_RETURN(out.tls_key, ReadFile(files.tls_key, "TLS private key", true));
  ASSIGN_OR_RETURN(out.tls_ca, ReadFile(files.tls_ca, "TLS CA certificate", false));
  return out;
}

bool TokensEqual(absl::string_view expected, absl::string_view presented) {
  // Every presented byte is compared, against the expected bytes cycled, and the
  // lengths' mismatch is folded in: no early exit, no secret-dependent index.
  // (Hashing both with SHA-256 first did the same, at ~7 us a call in a server.)
  unsigned char diff = expected.size() != presented.size() ? 1 : 0;
  if (expected.empty()) return presented.empty();
  for (size_t i = 0; i < presented.size(); ++i) {
    diff |= static_cast<unsigned char>(presented[i] ^ expected[i % expected.size()]);
  }
  return diff == 0;
}

absl::Status CheckAuthToken(absl::string_view expected, const absl::string_view* presented,
                            absl::string_view call) {
  if (expected.empty()) return absl::OkStatus();
  if (presented == nullptr) {
    return absl::UnauthenticatedError(
        absl::StrCat(call,
                     " missing auth token: this server requires the shared token (dflow: "
                     "--auth-token-file; gRPC metadata 'authorization: Bearer <token>')"));
  }
  if (!TokensEqual(expected, *presented)) {
    return absl::UnauthenticatedError(absl::StrCat(call, " wrong auth token"));
  }
  return absl::OkStatus();
}

void SetDefaultClientSecurity(const SecurityOptions& security) {
  absl::MutexLock l(&default_mu);
  delete default_security;
  default_security = new SecurityOptions(security);
}

SecurityOptions DefaultClientSecurity() {
  absl::MutexLock l(&default_mu);
  return default_security != nullptr ? *default_security : SecurityOptions();
}

}  // namespace dflow
