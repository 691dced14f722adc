// Throwaway TLS material for a local run (`dflow cluster --secure`) and for
// tests: a fresh CA and one certificate it signs, good for both ends of a
// mutual-TLS connection (serverAuth and clientAuth) on this machine
// (subjectAltName DNS:localhost, IP:127.0.0.1). ECDSA P-256 keys, SHA-256
// signatures, valid from an hour ago for `days`. Made with OpenSSL's C API;
// nothing is written to disk unless WriteThrowawaySecurity is called.
//
//   ASSIGN_OR_RETURN(ThrowawayTls tls, MakeThrowawayTls());
//   SecurityOptions security = tls.security();
#ifndef DFLOW_DISTRIBUTED_RPC_THROWAWAY_TLS_H_
#define DFLOW_DISTRIBUTED_RPC_THROWAWAY_TLS_H_

#include <string>

#include "absl/status/statusor.h"
#include "dflow/distributed/rpc/security.h"

namespace dflow {

struct ThrowawayTls {
  std::string ca_cert;  // PEM
  std::string cert;     // PEM, signed by the CA
  std::string key;      // PEM (PKCS#8), the certificate's private key

  // The options a task given this material uses (no token).
  SecurityOptions security() const {
    SecurityOptions s;
    s.tls_cert = cert;
    s.tls_key = key;
    s.tls_ca = ca_cert;
    return s;
  }
};

// Internal naming OpenSSL's failure when a step fails.
absl::StatusOr<ThrowawayTls> MakeThrowawayTls(int days = 2);

// A fresh CA, certificate and key, and a random 256-bit token (hex), written
// as ca.pem, cert.pem, key.pem (0600) and token (0600) into the existing
// directory `dir`; returns the paths. Internal naming the file on failure.
absl::StatusOr<SecurityFiles> WriteThrowawaySecurity(const std::string& dir);

}  // namespace dflow

#endif  // DFLOW_DISTRIBUTED_RPC_THROWAWAY_TLS_H_
