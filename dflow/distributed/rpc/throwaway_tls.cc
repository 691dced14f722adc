#include "dflow/distributed/rpc/throwaway_tls.h"

#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <memory>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "dflow/framework/status.h"

namespace dflow {

namespace {

struct Free {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
  void operator()(X509* x) const { X509_free(x); }
  void operator()(BIO* b) const { BIO_free(b); }
};
using Key = std::unique_ptr<EVP_PKEY, Free>;
using Cert = std::unique_ptr<X509, Free>;

absl::Status OpenSslError(absl::string_view step) {
  char buf[256] = "unknown error";
  if (unsigned long e = ERR_get_error(); e != 0) ERR_error_string_n(e, buf, sizeof(buf));
  ERR_clear_error();
  return absl::InternalError(absl::StrCat("[ThrowawayTls] ", step, ": ", buf));
}

absl::Status AddExtension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (ext == nullptr) return OpenSslError(absl::StrCat("extension ", OBJ_nid2sn(nid)));
  const int ok = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  return ok == 1 ? absl::OkStatus() : OpenSslError("X509_add_ext");
}

// A certificate for `key` named `cn`, signed by `issuer_key` as `issuer`
// (nullptr: self-signed).
absl::StatusOr<Cert> MakeCert(EVP_PKEY* key, const char* cn, X509* issuer, EVP_PKEY* issuer_key,
                              bool ca, int days) {
  Cert cert(X509_new());
  if (cert == nullptr) return OpenSslError("X509_new");
  uint64_t serial = 0;
  if (RAND_bytes(reinterpret_cast<unsigned char*>(&serial), sizeof(serial)) != 1) {
    return OpenSslError("RAND_bytes");
  }
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set_uint64(X509_get_serialNumber(cert.get()), serial >> 1);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), int64_t{days} * 86400);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("dflow throwaway"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn),
                             -1, -1, 0);
  X509* signer = issuer != nullptr ? issuer : cert.get();
  X509_set_issuer_name(cert.get(), X509_get_subject_name(signer));
  RETURN_IF_ERROR(AddExtension(cert.get(), signer, NID_subject_key_identifier, "hash"));
  if (ca) {
    RETURN_IF_ERROR(AddExtension(cert.get(), signer, NID_basic_constraints, "critical,CA:TRUE"));
    RETURN_IF_ERROR(
        AddExtension(cert.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign"));
  } else {
    RETURN_IF_ERROR(AddExtension(cert.get(), signer, NID_authority_key_identifier, "keyid"));
    RETURN_IF_ERROR(AddExtension(cert.get(), signer, NID_basic_constraints, "CA:FALSE"));
    RETURN_IF_ERROR(AddExtension(cert.get(), signer, NID_key_usage, "critical,digitalSignature"));
    RETURN_IF_ERROR(AddExtension(cert.get(), signer, NID_ext_key_usage, "serverAuth,clientAuth"));
    RETURN_IF_ERROR(
        AddExtension(cert.get(), signer, NID_subject_alt_name, "DNS:localhost,IP:127.0.0.1"));
  }
  if (X509_sign(cert.get(), issuer_key != nullptr ? issuer_key : key, EVP_sha256()) == 0) {
    return OpenSslError("X509_sign");
  }
  return cert;
}

// PEM text written by `write` into a memory BIO.
template <typename Write>
absl::StatusOr<std::string> Pem(Write write) {
  std::unique_ptr<BIO, Free> bio(BIO_new(BIO_s_mem()));
  if (bio == nullptr || write(bio.get()) != 1) return OpenSslError("PEM_write");
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

absl::Status WriteFile(const std::string& path, const std::string& bytes, mode_t mode) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  const bool ok = fd >= 0 && ::fchmod(fd, mode) == 0 &&
                  ::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size());
  if (fd >= 0) ::close(fd);
  if (!ok) return absl::InternalError(absl::StrCat("[ThrowawayTls] cannot write ", path));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ThrowawayTls> MakeThrowawayTls(int days) {
  Key ca_key(EVP_EC_gen("P-256"));
  Key key(EVP_EC_gen("P-256"));
  if (ca_key == nullptr || key == nullptr) return OpenSslError("EVP_EC_gen");
  ASSIGN_OR_RETURN(Cert ca, MakeCert(ca_key.get(), "dflow throwaway CA", nullptr, nullptr,
                                     /*ca=*/true, days));
  ASSIGN_OR_RETURN(Cert cert, MakeCert(key.get(), "localhost", ca.get(), ca_key.get(),
                                       /*ca=*/false, days));
  ThrowawayTls out;
  ASSIGN_OR_RETURN(out.ca_cert, Pem([&](BIO* b) { return PEM_write_bio_X509(b, ca.get()); }));
  ASSIGN_OR_RETURN(out.cert, Pem([&](BIO* b) { return PEM_write_bio_X509(b, cert.get()); }));
  ASSIGN_OR_RETURN(out.key, Pem([&](BIO* b) {
                     return PEM_write_bio_PrivateKey(b, key.get(), nullptr, nullptr, 0, nullptr,
                                                     nullptr);
                   }));
  return out;
}

absl::StatusOr<SecurityFiles> WriteThrowawaySecurity(const std::string& dir) {
  ASSIGN_OR_RETURN(ThrowawayTls tls, MakeThrowawayTls());
  unsigned char raw[32];
  if (RAND_bytes(raw, sizeof(raw)) != 1) return OpenSslError("RAND_bytes");
  const std::string token =
      absl::BytesToHexString(absl::string_view(reinterpret_cast<char*>(raw), sizeof(raw)));
  SecurityFiles files{absl::StrCat(dir, "/token"), absl::StrCat(dir, "/cert.pem"),
                      absl::StrCat(dir, "/key.pem"), absl::StrCat(dir, "/ca.pem")};
  RETURN_IF_ERROR(WriteFile(files.auth_token_file, token + "\n", 0600));
  RETURN_IF_ERROR(WriteFile(files.tls_cert, tls.cert, 0644));
  RETURN_IF_ERROR(WriteFile(files.tls_key, tls.key, 0600));
  RETURN_IF_ERROR(WriteFile(files.tls_ca, tls.ca_cert, 0644));
  return files;
}

}  // namespace dflow
