// One connection of the tensor data plane (tensor_data_plane.h), plaintext or
// TLS: the framing code on both ends reads and writes through it and never
// sees OpenSSL.
//
// TLS (when the task has --tls-cert/--tls-key/--tls-ca, SecurityOptions::tls):
// a TLS 1.3 handshake, mutual: each end presents the task's certificate and
// requires the other's, verified against the CA (the same material as the
// gRPC port), and both must agree on the application protocol "dflow-dp/2"
// (ALPN). The sender issues one session ticket at the end of its handshake,
// after it has verified the receiver's certificate; the receiver waits for
// that ticket before sending anything, so a refused certificate is a
// handshake failure (nothing sent, the call may go elsewhere), never a
// half-sent request. No session is ever resumed.
//
// After the handshake the bytes travel as sealed records, not TLS records:
// AES-128-GCM under a key and IV per direction exported from the TLS session
// (RFC 8446 section 7.5; the way DTLS-SRTP keys SRTP, RFC 5764), each record
//   [plaintext length: 4 bytes, big-endian, authenticated][ciphertext][16-byte tag]
// with the nonce the IV xor the record's sequence number in its direction
// (RFC 8446 section 5.3), so a record replayed, dropped, reordered or moved
// to the other direction fails to open. A record holds up to 256 KiB, and a
// tensor starts a record of its own, so the receiver reads its records
// straight into the tensor and decrypts them there: one pass over each byte
// at each end besides the socket's copy, where TLS's 16 KiB records cost two
// more copies at the receiver and one at the sender. A connection seals at
// most 64 GiB each way (AES-GCM's usage limit, with a wide margin); the
// receiver retires it from its pool at half that (Worn). The cipher is
// sealed_records.h. Kernel TLS is not used (this kernel offers no "tls" ULP;
// see SECURITY.md).
//
//   ASSIGN_OR_RETURN(auto tls, DataPlaneTls::Create(security, DataPlaneTls::kClient));
//   DataConnection conn(fd, tls.get());
//   RETURN_IF_ERROR(conn.Handshake(deadline));   // receiver: blocking, bounded
//   RETURN_IF_ERROR(conn.Send(frame.data(), frame.size(), deadline));
#ifndef DFLOW_DISTRIBUTED_RPC_DATA_PLANE_CONNECTION_H_
#define DFLOW_DISTRIBUTED_RPC_DATA_PLANE_CONNECTION_H_

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dflow/distributed/rpc/security.h"

typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;

namespace dflow {

struct DataConnectionBio;
class SealedRecords;

// An OpenSSL context for one end of the data plane. Immutable once made;
// shared by every connection of that end.
class DataPlaneTls {
 public:
  enum Role { kServer, kClient };

  // InvalidArgument naming what OpenSSL could not take (the certificate, the
  // key, the CA, a key that does not match its certificate).
  static absl::StatusOr<std::shared_ptr<const DataPlaneTls>> Create(
      const SecurityOptions& security, Role role);
  // The kClient context for `security`, made once per distinct certificate,
  // key and CA in this process (every remote worker shares it).
  static absl::StatusOr<std::shared_ptr<const DataPlaneTls>> ForClient(
      const SecurityOptions& security);
  ~DataPlaneTls();
  DataPlaneTls(const DataPlaneTls&) = delete;
  DataPlaneTls& operator=(const DataPlaneTls&) = delete;

  Role role() const { return role_; }
  SSL_CTX* ctx() const { return ctx_; }

 private:
  DataPlaneTls(Role role, SSL_CTX* ctx) : role_(role), ctx_(ctx) {}
  const Role role_;
  SSL_CTX* const ctx_;  // Owned.
};

// Memory shared by the two ends of a local (AF_UNIX) data-plane connection,
// so that a tensor crosses as one memcpy instead of a socket's copies and
// wake-ups. The receiver makes it (a memfd sealed against shrinking, which
// the sender could otherwise use to make the receiver fault, and vice
// versa) and passes its descriptor with a kSharedMagic frame; the sender
// writes each answered tensor of a request at increasing offsets, from 0
// again at the next request, and sends the offset in place of the bytes
// (tensor_data_plane.h, kTensorShared). The receiver's floating-point
// tensors borrow the bytes where they lie (no copy out), so a connection
// has two regions (slots) and, before each request, the receiver selects
// one that no tensor borrows any longer, or none (the answers then come
// inline) when both are still borrowed.
class SharedRegion {
 public:
  static constexpr size_t kMinBytes = 1 << 20;
  static constexpr size_t kMaxBytes = 64 << 20;

  // The receiver's region of `bytes` (within [kMinBytes, kMaxBytes]),
  // mapped read-write (kernels may write a borrowing tensor in place); fd()
  // is for the peer.
  static absl::StatusOr<std::unique_ptr<SharedRegion>> Create(size_t bytes);
  // The sender's mapping (read-write) of a descriptor a peer passed; takes
  // `fd` (closed here). InvalidArgument unless it is sealed against
  // shrinking, growing and further sealing and its size is within bounds.
  static absl::StatusOr<std::unique_ptr<SharedRegion>> Adopt(int fd);
  ~SharedRegion();
  SharedRegion(const SharedRegion&) = delete;
  SharedRegion& operator=(const SharedRegion&) = delete;

  char* data() const { return data_; }
  size_t size() const { return size_; }
  // The receiver's descriptor, for the peer, until CloseFd; -1 at the sender.
  int fd() const { return fd_; }
  // Closes the receiver's descriptor once it went to the peer: the mapping
  // stays, and a pooled connection holds no descriptor for it.
  void CloseFd();

 private:
  SharedRegion(char* data, size_t size, int fd) : data_(data), size_(size), fd_(fd) {}
  char* const data_;
  const size_t size_;
  int fd_;
};

// A connected socket, owned (closed by the destructor), plaintext or TLS.
// Not thread-safe: one thread uses it at a time.
class DataConnection {
 public:
  // `tls` nullptr: plaintext. Else the handshake (Handshake or StepHandshake)
  // must finish before any Read/Write.
  DataConnection(int fd, std::shared_ptr<const DataPlaneTls> tls);
  ~DataConnection();
  DataConnection(const DataConnection&) = delete;
  DataConnection& operator=(const DataConnection&) = delete;

  int fd() const { return fd_; }
  bool tls() const { return tls_ != nullptr; }

  // --- non-blocking use (the sender's event loop) ---------------------------------------
  enum class Io { kDone, kWantRead, kWantWrite, kClosed, kError };
  // One step of the sender's handshake: kDone when finished (always, in
  // plaintext), kWantRead/kWantWrite: call again when the socket is
  // readable/writable; kClosed/kError: give up (error() says why).
  Io StepHandshake();
  // Up to `n` bytes into `buf`; *got set on kDone (> 0). kClosed: the peer
  // closed; kWantRead/kWantWrite: nothing now.
  Io Read(void* buf, size_t n, size_t* got);
  // Writes from `iov[0..count)` in order what the socket takes now; *wrote
  // set (may be 0 with kWantWrite). After kWantWrite, call again with the
  // same remaining bytes.
  Io Write(const iovec* iov, int count, size_t* wrote);
  // TLS: Write counts plaintext as written once it is sealed into records
  // (at most 256 KiB a call), which may still wait for the socket; they go before anything else, and a
  // response is out only when none are left. FlushPendingWrite sends what
  // the socket takes now, adding its bytes to *sent (kDone: none left;
  // kWantWrite: some).
  bool HasPendingWrite() const;
  Io FlushPendingWrite(size_t* sent);
  // Bytes already received and decrypted (or not yet processed) that a
  // readable socket would not announce.
  bool HasBuffered() const;
  // TLS: this connection's keys have sealed or opened so much that it should
  // not be reused (see above).
  bool Worn() const;
  // Lowers the bytes a connection's keys may seal each way (tests).
  static void SetKeyLimitForTest(uint64_t bytes);
  // Why the last call failed: OpenSSL's reason or errno's text.
  const std::string& error() const { return error_; }
  // A descriptor the peer passed (SCM_RIGHTS, plaintext only) with bytes
  // Read returned, now owned by the caller; -1 when none came. Descriptors
  // not taken before the next one arrives, or before destruction, are closed.
  int TakeReceivedFd();

  // --- blocking use with a deadline (the receiver) -----------------------------------------
  // The socket must be blocking, and SetDeadline(deadline) called before the
  // first Send/Recv of a call (it arms the socket's timeouts, two syscalls a
  // call rather than a call's every frame); after that every wait ends at
  // `deadline` (DeadlineExceeded), bytes arriving or leaving a few at a time
  // included. Handshake arms its own.
  // The receiver's handshake, including the sender's ticket (see above).
  // Unavailable "TLS handshake failed: <OpenSSL's reason>" when refused.
  absl::Status Handshake(absl::Time deadline);
  absl::Status Send(const void* buf, size_t n, absl::Time deadline);
  // Send, passing descriptor `fd` with the bytes (plaintext local sockets).
  absl::Status SendWithFd(const void* buf, size_t n, int fd, absl::Time deadline);
  absl::Status Recv(void* buf, size_t n, absl::Time deadline);
  // Bounds the socket's blocking calls by `deadline` (SO_RCVTIMEO /
  // SO_SNDTIMEO); DeadlineExceeded when it has passed.
  absl::Status SetDeadline(absl::Time deadline);
  // Whether the peer rejected this end's TLS (a fatal alert it sent).
  bool peer_alert() const { return peer_alert_; }
  // Whether the last failure was the peer closing (or resetting) the socket.
  bool closed() const { return closed_; }

  // The regions shared with the peer over this connection (SharedRegion):
  // kSharedSlots slots, one selected (or none: kSharedSlots). shared() is the
  // selected region, or nullptr.
  static constexpr int kSharedSlots = 2;
  SharedRegion* shared() const { return shared_region().get(); }
  const std::shared_ptr<SharedRegion>& shared_region() const {
    static const std::shared_ptr<SharedRegion> kNone;
    return slot_ < kSharedSlots ? shared_[slot_] : kNone;
  }
  int shared_slot() const { return slot_; }
  const std::shared_ptr<SharedRegion>& shared_in(int slot) const { return shared_[slot]; }
  // Puts `region` in `slot` and selects it.
  void set_shared(int slot, std::shared_ptr<SharedRegion> region) {
    shared_[slot] = std::move(region);
    slot_ = slot;
  }
  // Selects `slot` (kSharedSlots: none).
  void select_shared(int slot) { slot_ = slot; }

 private:
  Io SslResult(int ret, const char* what);
  Io SslResultOf(int ret, const char* what);
  // Once the handshake is done: checks the agreed protocol and derives the
  // record keys. False (error_ set) when either fails.
  bool StartSealing();
  // Seals plaintext from `iov[0..count)` into records queued in out_, at most
  // `limit` bytes; *taken set. False (error_ set) past the key limit.
  bool SealInto(const iovec* iov, int count, size_t limit, size_t* taken);
  // Sends the queued records, adding to *sent when given; `wait`: a blocking
  // send.
  Io SendPending(bool wait, size_t* sent = nullptr);
  // Received bytes not yet opened.
  size_t Raw() const { return in_end_ - in_pos_; }
  // The plaintext length of the record whose header starts the raw bytes
  // (at least 4 of them); 0 when out of bounds (error_ set).
  size_t RecordLength();
  // Opens the record whole in the raw bytes; its plaintext is then returned
  // first. False (error_ set) when it does not authenticate.
  bool OpenBuffered();
  size_t TakePlain(void* buf, size_t n);
  // Receives into in_ what the socket has, with room for `need` raw bytes
  // (and, with `read_ahead`, up to 16 KiB more); recv's result.
  ssize_t FillIn(size_t need, bool read_ahead, int flags);
  // Exactly `n` bytes from the socket (blocking, within the deadline): a
  // plaintext Recv, and a sealed record's body and tag.
  absl::Status RecvExactly(char* p, size_t n, absl::Time deadline);
  absl::Status SealedRecv(char* p, size_t n, absl::Time deadline);
  Io SealedRead(void* buf, size_t n, size_t* got);
  Io SealedReadSome(void* buf, size_t n, size_t* got);
  // TLS: whether an earlier failure left the stream unusable (error_ then
  // says so).
  bool Broken();

  const int fd_;
  std::shared_ptr<const DataPlaneTls> tls_;
  std::unique_ptr<DataConnectionBio> bio_target_;  // The TLS BIO's socket.
  SSL* ssl_ = nullptr;  // Owned; nullptr: plaintext.
  std::string error_;
  bool peer_alert_ = false;
  bool closed_ = false;
  bool ticket_ = false;  // The sender's session ticket arrived (receiver).
  int received_fd_ = -1;
  std::shared_ptr<SharedRegion> shared_[kSharedSlots];
  int slot_ = kSharedSlots;
  // TLS, once the handshake is done.
  std::unique_ptr<SealedRecords> sealed_;
  // A record failed to open or seal, or a wait ended inside one: every later
  // call fails, and the connection reads as Worn and HasBuffered (not reused).
  bool broken_ = false;
  std::unique_ptr<char[]> out_;  // Sealed records not yet sent: [out_pos_, out_end_).
  size_t out_capacity_ = 0;
  size_t out_pos_ = 0;
  size_t out_end_ = 0;
  // Received: raw bytes in [in_pos_, in_end_), and before them the opened
  // record's plaintext not yet returned, [plain_pos_, plain_pos_ + plain_left_).
  std::vector<char> in_;
  size_t in_pos_ = 0;
  size_t in_end_ = 0;
  size_t plain_pos_ = 0;
  size_t plain_left_ = 0;
};

}  // namespace dflow

#endif  // DFLOW_DISTRIBUTED_RPC_DATA_PLANE_CONNECTION_H_
