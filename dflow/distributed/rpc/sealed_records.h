// The records the TLS data plane's bytes travel in after its handshake
// (data_plane_connection.h has the format; SECURITY.md what it keeps and
// changes from TLS's own records): AES-128-GCM under a key and IV per
// direction exported from the TLS 1.3 session, a nonce per record from its
// sequence number. This file is the cipher; DataConnection frames the records
// on the socket.
//
//   std::string why;
//   std::unique_ptr<SealedRecords> records = SealedRecords::FromSession(ssl, server, &why);
//   if (const char* failed = records->Seal(pieces, count, n, out)) ...
#ifndef DFLOW_DISTRIBUTED_RPC_SEALED_RECORDS_H_
#define DFLOW_DISTRIBUTED_RPC_SEALED_RECORDS_H_

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

typedef struct ssl_st SSL;

namespace dflow {

namespace sealed {
inline constexpr size_t kRecordHeader = 4;  // The plaintext length, big-endian.
inline constexpr size_t kTagBytes = 16;
inline constexpr size_t kIvBytes = 12;  // A direction's IV, and each record's nonce.
inline constexpr size_t kMaxRecord = 256 << 10;  // Plaintext bytes a record may hold.
}  // namespace sealed

class GcmKey;

// The record keys of one connection: one direction seals, the other opens.
// Not thread-safe (one connection's thread uses it).
class SealedRecords {
 public:
  // Keys exported from `ssl`'s finished TLS 1.3 handshake; `server`: this
  // end is the TLS server (the sender of tensors). nullptr with *error set
  // when OpenSSL or the cipher fails (OpenSSL's queue then says why).
  static std::unique_ptr<SealedRecords> FromSession(SSL* ssl, bool server, std::string* error);
  ~SealedRecords();
  SealedRecords(const SealedRecords&) = delete;
  SealedRecords& operator=(const SealedRecords&) = delete;

  // Writes one record of `pieces[0..count)` (n bytes in all, 1..kMaxRecord)
  // to `out`, which has room for kRecordHeader + n + kTagBytes. nullptr, or
  // why not (past the key limit).
  const char* Seal(const iovec* pieces, int count, size_t n, char* out);
  // Decrypts the record `header` announced, `body` (n bytes, in place), and
  // checks it against `tag`. nullptr, or why not (forged, damaged, replayed,
  // out of order, or past the key limit); the connection is then unusable.
  const char* Open(const unsigned char* header, char* body, size_t n, const unsigned char* tag);

  // The larger of the bytes sealed and opened so far.
  uint64_t most_bytes() const;
  // What one connection's keys may seal each way.
  static uint64_t key_limit();
  static void SetKeyLimitForTest(uint64_t bytes);

  static void PutLength(size_t n, unsigned char* header);
  static size_t GetLength(const unsigned char* header);

 private:
  SealedRecords() = default;

  struct Direction {  // Its key and IV, and the records and bytes done so far.
    Direction();
    ~Direction();
    std::unique_ptr<GcmKey> key;
    unsigned char iv[sealed::kIvBytes] = {};
    uint64_t seq = 0;
    uint64_t bytes = 0;
  };
  Direction seal_;  // This end's records.
  Direction open_;  // The peer's.
};

}  // namespace dflow

#endif  // DFLOW_DISTRIBUTED_RPC_SEALED_RECORDS_H_
