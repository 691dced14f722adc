#include "dflow/distributed/rpc/data_plane_connection.h"

#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "dflow/distributed/rpc/sealed_records.h"
#include "dflow/framework/status.h"

namespace dflow {

namespace {

// Plaintext a TLS Write/Send seals at a time, sent in one call; then the
// event loop gives others a turn.
constexpr size_t kMaxWritePerCall = 256 << 10;

// Sealed records (sealed_records.h).
using sealed::kMaxRecord;
using sealed::kRecordHeader;
using sealed::kTagBytes;
// A piece of a write this large (a tensor) starts a record of its own, and a
// receive this large reads no further ahead than the next record's header:
// its records then go straight between the tensor and the socket.
constexpr size_t kBulkBytes = 64 << 10;
constexpr size_t kReadAhead = 16 << 10;  // Small records: several per recv.
constexpr int kMaxPiecesPerRecord = 16;
// The application protocol both ends must agree on (ALPN, length-prefixed).
constexpr unsigned char kAlpn[] = "\x0a" "dflow-dp/2";

// OpenSSL's queued errors as one line, queue cleared; `fallback` when empty.
std::string OpenSslErrors(const std::string& fallback) {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? fallback : out;
}

// --- A socket BIO that never raises SIGPIPE (send with MSG_NOSIGNAL) -------------------

}  // namespace

// The socket the handshake's TLS records go through. OpenSSL reads without
// read-ahead, exactly the record it is in, so nothing sealed after the
// handshake is taken off the socket by it.
struct DataConnectionBio {
  int fd = -1;
};

namespace {

bool Retryable(int err) { return err == EAGAIN || err == EWOULDBLOCK || err == EINTR; }

int BioWrite(BIO* b, const char* data, int n) {
  BIO_clear_retry_flags(b);
  const int fd = static_cast<DataConnectionBio*>(BIO_get_data(b))->fd;
  const ssize_t w = ::send(fd, data, static_cast<size_t>(n), MSG_NOSIGNAL);
  if (w < 0 && Retryable(errno)) BIO_set_retry_write(b);
  return static_cast<int>(w);
}

int BioRead(BIO* b, char* data, int n) {
  BIO_clear_retry_flags(b);
  // OpenSSL (no read-ahead) asks for exactly what the record still needs, so
  // waiting for all of it never waits past the record.
  const int fd = static_cast<DataConnectionBio*>(BIO_get_data(b))->fd;
  const ssize_t r = ::recv(fd, data, static_cast<size_t>(n), MSG_WAITALL);
  if (r < 0 && Retryable(errno)) BIO_set_retry_read(b);
  return static_cast<int>(r);
}

long BioCtrl(BIO*, int cmd, long, void*) { return cmd == BIO_CTRL_FLUSH ? 1 : 0; }

const BIO_METHOD* SocketMethod() {
  static const BIO_METHOD* method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "dflow data plane");
    BIO_meth_set_write(m, BioWrite);
    BIO_meth_set_read(m, BioRead);
    BIO_meth_set_ctrl(m, BioCtrl);
    return m;
  }();
  return method;
}

// The sender refuses a receiver that offers no application protocol (a dflow
// from before the sealed records) at its first message, before it is told
// anything, so the receiver's handshake fails and its calls go to gRPC.
int RequireProtocol(SSL* ssl, int* alert, void*) {
  const unsigned char* offered = nullptr;
  size_t length = 0;
  if (SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_application_layer_protocol_negotiation,
                                &offered, &length) == 1) {
    return SSL_CLIENT_HELLO_SUCCESS;
  }
  *alert = SSL_AD_NO_APPLICATION_PROTOCOL;
  return SSL_CLIENT_HELLO_ERROR;
}

// The sender agrees to the sealed records (kAlpn) or refuses the handshake.
int SelectProtocol(SSL*, const unsigned char** out, unsigned char* outlen,
                   const unsigned char* in, unsigned int inlen, void*) {
  unsigned char* chosen = nullptr;
  if (SSL_select_next_proto(&chosen, outlen, kAlpn, sizeof(kAlpn) - 1, in, inlen) !=
      OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_ALERT_FATAL;  // no_application_protocol
  }
  *out = chosen;
  return SSL_TLSEXT_ERR_OK;
}

// The receiver learns that the sender accepted its certificate from the
// session ticket the sender issues after verifying it.
int OnSessionTicket(SSL* ssl, SSL_SESSION*) {
  *static_cast<bool*>(SSL_get_app_data(ssl)) = true;
  return 0;  // Not kept: sessions are never resumed.
}

absl::Status LoadCredentials(SSL_CTX* ctx, const SecurityOptions& security) {
  auto bio = [](const std::string& pem) {
    return BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  };
  auto fail = [](const std::string& what) {
    return absl::InvalidArgumentError(
        absl::StrCat("[DataPlane TLS] ", what, ": ", OpenSslErrors("no reason given")));
  };
  BIO* cert_bio = bio(security.tls_cert);
  X509* cert = PEM_read_bio_X509(cert_bio, nullptr, nullptr, nullptr);
  bool ok = cert != nullptr && SSL_CTX_use_certificate(ctx, cert) == 1;
  X509_free(cert);
  while (ok) {  // The rest of the chain, if any.
    X509* extra = PEM_read_bio_X509(cert_bio, nullptr, nullptr, nullptr);
    if (extra == nullptr) break;
    if (SSL_CTX_add0_chain_cert(ctx, extra) != 1) {
      X509_free(extra);
      ok = false;
    }
  }
  BIO_free(cert_bio);
  ERR_clear_error();  // The chain's end reads as an error.
  if (!ok) return fail("cannot use the TLS certificate");
  BIO* key_bio = bio(security.tls_key);
  EVP_PKEY* key = PEM_read_bio_PrivateKey(key_bio, nullptr, nullptr, nullptr);
  BIO_free(key_bio);
  ok = key != nullptr && SSL_CTX_use_PrivateKey(ctx, key) == 1;
  EVP_PKEY_free(key);
  if (!ok) return fail("cannot use the TLS private key");
  if (SSL_CTX_check_private_key(ctx) != 1) {
    return fail("the TLS private key does not match the certificate");
  }
  BIO* ca_bio = bio(security.tls_ca);
  X509_STORE* store = SSL_CTX_get_cert_store(ctx);
  int cas = 0;
  while (X509* ca = PEM_read_bio_X509(ca_bio, nullptr, nullptr, nullptr)) {
    cas += X509_STORE_add_cert(store, ca) == 1;
    X509_free(ca);
  }
  BIO_free(ca_bio);
  ERR_clear_error();
  if (cas == 0) return fail("the TLS CA holds no certificate");
  return absl::OkStatus();
}

}  // namespace

// --- DataPlaneTls -----------------------------------------------------------------------

absl::StatusOr<std::shared_ptr<const DataPlaneTls>> DataPlaneTls::Create(
    const SecurityOptions& security, Role role) {
  if (!security.tls()) {
    return absl::InvalidArgumentError("[DataPlane TLS] the task has no TLS certificate");
  }
  ERR_clear_error();
  SSL_CTX* ctx = SSL_CTX_new(role == kServer ? TLS_server_method() : TLS_client_method());
  if (ctx == nullptr) {
    return absl::InternalError(
        absl::StrCat("[DataPlane TLS] SSL_CTX_new: ", OpenSslErrors("failed")));
  }
  std::shared_ptr<const DataPlaneTls> tls(new DataPlaneTls(role, ctx));
  SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
  SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
  // AES-GCM first: the CPU accelerates it. All three are TLS 1.3's AEADs.
  SSL_CTX_set_ciphersuites(ctx,
                           "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:"
                           "TLS_CHACHA20_POLY1305_SHA256");
  // Both ends verify the other against the CA; the sender requires a certificate.
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  // TLS records carry the handshake only: their buffers go once it is done.
  SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
  if (role == kServer) {
    SSL_CTX_set_num_tickets(ctx, 1);  // The receiver's "you are accepted".
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    static const unsigned char kContext[] = "dflow-data-plane";
    SSL_CTX_set_session_id_context(ctx, kContext, sizeof(kContext) - 1);
    SSL_CTX_set_client_hello_cb(ctx, RequireProtocol, nullptr);
    SSL_CTX_set_alpn_select_cb(ctx, SelectProtocol, nullptr);
    // The ticket is stateful (a session ID in no cache): nothing to resume with.
    SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
  } else {
    SSL_CTX_set_session_cache_mode(ctx,
                                   SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(ctx, OnSessionTicket);
    // Reading the ticket returns instead of waiting for application data.
    SSL_CTX_clear_mode(ctx, SSL_MODE_AUTO_RETRY);
    SSL_CTX_set_alpn_protos(ctx, kAlpn, sizeof(kAlpn) - 1);  // 0 on success.
  }
  absl::Status loaded = LoadCredentials(ctx, security);
  if (!loaded.ok()) return loaded;
  return tls;
}

DataPlaneTls::~DataPlaneTls() { SSL_CTX_free(ctx_); }

absl::StatusOr<std::shared_ptr<const DataPlaneTls>> DataPlaneTls::ForClient(
    const SecurityOptions& security) {
  static absl::Mutex mu(absl::kConstInit);
  static std::string* key ABSL_GUARDED_BY(mu) = new std::string;
  static std::shared_ptr<const DataPlaneTls>* cached ABSL_GUARDED_BY(mu) =
      new std::shared_ptr<const DataPlaneTls>;
  const std::string wanted =
      absl::StrCat(security.tls_cert, "\n--\n", security.tls_key, "\n--\n", security.tls_ca);
  absl::MutexLock l(&mu);
  if (*cached != nullptr && *key == wanted) return *cached;
  absl::StatusOr<std::shared_ptr<const DataPlaneTls>> made = Create(security, kClient);
  if (!made.ok()) return made.status();
  *key = wanted;
  *cached = *made;
  return made;
}

// --- DataConnection ---------------------------------------------------------------------

DataConnection::DataConnection(int fd, std::shared_ptr<const DataPlaneTls> tls)
    : fd_(fd), tls_(std::move(tls)) {
  if (tls_ == nullptr) return;
  ssl_ = SSL_new(tls_->ctx());
  BIO* bio = ssl_ != nullptr ? BIO_new(SocketMethod()) : nullptr;
  if (bio == nullptr) {  // The handshake reports it; nothing is read or written.
    SSL_free(ssl_);
    ssl_ = nullptr;
    return;
  }
  bio_target_ = std::make_unique<DataConnectionBio>();
  bio_target_->fd = fd;
  BIO_set_data(bio, bio_target_.get());
  BIO_set_init(bio, 1);
  SSL_set_bio(ssl_, bio, bio);
  SSL_set_app_data(ssl_, &ticket_);
  if (tls_->role() == DataPlaneTls::kServer) {
    SSL_set_accept_state(ssl_);
  } else {
    SSL_set_connect_state(ssl_);
  }
}

DataConnection::~DataConnection() {
  if (ssl_ != nullptr) SSL_free(ssl_);  // No close_notify: the socket just closes.
  if (fd_ >= 0) ::close(fd_);
  if (received_fd_ >= 0) ::close(received_fd_);
}

int DataConnection::TakeReceivedFd() {
  const int fd = received_fd_;
  received_fd_ = -1;
  return fd;
}

// --- SharedRegion -------------------------------------------------------------------------

namespace {

constexpr int kRegionSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

// A message of `n` bytes at `buf` with room for one descriptor (zeroed).
struct OneFdMessage {
  OneFdMessage(void* buf, size_t n) : iov{buf, n} {
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
  }
  OneFdMessage(const OneFdMessage&) = delete;
  OneFdMessage& operator=(const OneFdMessage&) = delete;

  iovec iov;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
};

}  // namespace

absl::StatusOr<std::unique_ptr<SharedRegion>> SharedRegion::Create(size_t bytes) {
  if (bytes < kMinBytes || bytes > kMaxBytes) {
    return absl::InvalidArgumentError(absl::StrCat("a shared region of ", bytes, " bytes"));
  }
  const int fd = ::memfd_create("dflow-data-plane", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("memfd_create: ", std::strerror(errno)));
  void* p = MAP_FAILED;
  if (::ftruncate(fd, static_cast<off_t>(bytes)) == 0 &&
      ::fcntl(fd, F_ADD_SEALS, kRegionSeals) == 0) {
    p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  if (p == MAP_FAILED) {
    const int e = errno;
    ::close(fd);
    return absl::UnavailableError(absl::StrCat("a shared region: ", std::strerror(e)));
  }
  return std::unique_ptr<SharedRegion>(new SharedRegion(static_cast<char*>(p), bytes, fd));
}

absl::StatusOr<std::unique_ptr<SharedRegion>> SharedRegion::Adopt(int fd) {
  struct stat st {};
  const int seals = ::fcntl(fd, F_GET_SEALS);
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || seals < 0 ||
      (seals & kRegionSeals) != kRegionSeals || st.st_size < static_cast<off_t>(kMinBytes) ||
      st.st_size > static_cast<off_t>(kMaxBytes)) {
    ::close(fd);
    return absl::InvalidArgumentError(
        "the passed descriptor is not a sealed memory region of 1 to 64 MiB");
  }
  const size_t bytes = static_cast<size_t>(st.st_size);
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) {
    return absl::UnavailableError(absl::StrCat("mapping a shared region: ", std::strerror(errno)));
  }
  return std::unique_ptr<SharedRegion>(new SharedRegion(static_cast<char*>(p), bytes, -1));
}

SharedRegion::~SharedRegion() {
  ::munmap(data_, size_);
  CloseFd();
}

void SharedRegion::CloseFd() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

DataConnection::Io DataConnection::SslResult(int ret, const char* what) {
  const Io io = SslResultOf(ret, what);
  closed_ = io == Io::kClosed;
  return io;
}

DataConnection::Io DataConnection::SslResultOf(int ret, const char* what) {
  const int err = SSL_get_error(ssl_, ret);
  switch (err) {
    case SSL_ERROR_WANT_READ:
      return Io::kWantRead;
    case SSL_ERROR_WANT_WRITE:
      return Io::kWantWrite;
    case SSL_ERROR_ZERO_RETURN:
      error_ = "the peer closed the TLS session";
      return Io::kClosed;
    case SSL_ERROR_SYSCALL:
      if (Retryable(errno)) return Io::kWantRead;
      error_ = errno == 0 ? "the peer closed the connection"
                          : absl::StrCat(what, ": ", std::strerror(errno));
      ERR_clear_error();
      return errno == 0 || errno == ECONNRESET || errno == EPIPE ? Io::kClosed : Io::kError;
    default: {
      const unsigned long e = ERR_peek_error();
      peer_alert_ = ERR_GET_LIB(e) == ERR_LIB_SSL && ERR_GET_REASON(e) >= SSL_AD_REASON_OFFSET;
      const bool eof = ERR_GET_LIB(e) == ERR_LIB_SSL &&
                       ERR_GET_REASON(e) == SSL_R_UNEXPECTED_EOF_WHILE_READING;
      error_ = absl::StrCat(what, ": ", OpenSslErrors("TLS error"));
      return eof ? Io::kClosed : Io::kError;
    }
  }
}

DataConnection::Io DataConnection::StepHandshake() {
  if (tls_ == nullptr || sealed_ != nullptr) return Io::kDone;
  if (ssl_ == nullptr) {
    error_ = "cannot create a TLS session";
    return Io::kError;
  }
  ERR_clear_error();
  const int r = SSL_do_handshake(ssl_);
  if (r != 1) return SslResult(r, "TLS handshake failed");
  // The sender's handshake ends with its ticket sent: records from here on.
  if (tls_->role() == DataPlaneTls::kServer && !StartSealing()) return Io::kError;
  return Io::kDone;
}

bool DataConnection::StartSealing() {
  if (sealed_ != nullptr) {  // Keys derived twice would repeat their nonces.
    error_ = "the TLS handshake already finished";
    return false;
  }
  const unsigned char* protocol = nullptr;
  unsigned int length = 0;
  SSL_get0_alpn_selected(ssl_, &protocol, &length);
  if (length != sizeof(kAlpn) - 2 || std::memcmp(protocol, kAlpn + 1, length) != 0) {
    error_ = absl::StrCat(
        "TLS handshake failed: the peer does not speak the data plane's sealed records (",
        reinterpret_cast<const char*>(kAlpn + 1), "); a dflow of another version?");
    return false;
  }
  std::string why;
  sealed_ = SealedRecords::FromSession(ssl_, tls_->role() == DataPlaneTls::kServer, &why);
  if (sealed_ == nullptr) {
    error_ = absl::StrCat("TLS handshake failed: ", why, ": ", OpenSslErrors("no reason given"));
    return false;
  }
  return true;
}

bool DataConnection::Worn() const {
  return broken_ || (sealed_ != nullptr && sealed_->most_bytes() > SealedRecords::key_limit() / 2);
}

bool DataConnection::Broken() {
  static constexpr char kEarlier[] = "the connection failed earlier: ";
  if (broken_ && !absl::StartsWith(error_, kEarlier)) error_ = absl::StrCat(kEarlier, error_);
  return broken_;
}

void DataConnection::SetKeyLimitForTest(uint64_t bytes) {
  SealedRecords::SetKeyLimitForTest(bytes);
}

DataConnection::Io DataConnection::Read(void* buf, size_t n, size_t* got) {
  *got = 0;
  if (tls_ == nullptr) {
    // recvmsg, to take a descriptor the peer may pass (SharedRegion).
    OneFdMessage m(buf, n);
    msghdr& msg = m.msg;
    const ssize_t r = ::recvmsg(fd_, &msg, MSG_CMSG_CLOEXEC);
    // Descriptors come with bytes only. A failed call leaves msg_controllen
    // as it was, so its control block must not be read: it would hand over
    // whatever number was there (once, a descriptor since closed and reused
    // for another connection, which its later close then cut).
    for (cmsghdr* c = r > 0 ? CMSG_FIRSTHDR(&msg) : nullptr; c != nullptr;
         c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      const size_t fds = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < fds; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        if (received_fd_ >= 0) ::close(received_fd_);  // Only the latest is kept.
        received_fd_ = fd;
      }
    }
    if (r > 0) {
      *got = static_cast<size_t>(r);
      return Io::kDone;
    }
    if (r == 0) return Io::kClosed;
    if (Retryable(errno)) return Io::kWantRead;
    error_ = std::strerror(errno);
    return Io::kClosed;
  }
  return SealedRead(buf, n, got);
}

DataConnection::Io DataConnection::SealedRead(void* buf, size_t n, size_t* got) {
  if (sealed_ == nullptr) {
    error_ = "read before the TLS handshake finished";
    return Io::kError;
  }
  if (Broken()) return Io::kError;
  const Io io = SealedReadSome(buf, n, got);
  broken_ = io == Io::kError || io == Io::kClosed;
  return io;
}

DataConnection::Io DataConnection::SealedReadSome(void* buf, size_t n, size_t* got) {
  for (;;) {
    if (plain_left_ > 0) {
      *got = TakePlain(buf, n);
      return Io::kDone;
    }
    size_t need = kRecordHeader;
    if (Raw() >= kRecordHeader) {
      const size_t length = RecordLength();
      if (length == 0) return Io::kError;
      need = kRecordHeader + length + kTagBytes;
      if (Raw() >= need) {
        if (!OpenBuffered()) return Io::kError;
        continue;
      }
    }
    const ssize_t r = FillIn(need, /*read_ahead=*/true, MSG_DONTWAIT);
    if (r > 0) continue;
    if (r < 0 && Retryable(errno)) return Io::kWantRead;
    error_ = r == 0 ? "the peer closed the connection" : std::strerror(errno);
    closed_ = r == 0 || errno == ECONNRESET;
    return closed_ ? Io::kClosed : Io::kError;
  }
}

size_t DataConnection::RecordLength() {
  const size_t length =
      SealedRecords::GetLength(reinterpret_cast<const unsigned char*>(in_.data() + in_pos_));
  if (length == 0 || length > kMaxRecord) {
    error_ = absl::StrCat("a sealed record announced ", length, " bytes (1 to ", kMaxRecord,
                          " allowed)");
    return 0;
  }
  return length;
}

bool DataConnection::OpenBuffered() {
  const unsigned char* header = reinterpret_cast<const unsigned char*>(in_.data() + in_pos_);
  const size_t length = SealedRecords::GetLength(header);
  char* body = in_.data() + in_pos_ + kRecordHeader;
  if (const char* why = sealed_->Open(header, body, length,
                                      reinterpret_cast<const unsigned char*>(body + length))) {
    error_ = why;
    return false;
  }
  plain_pos_ = in_pos_ + kRecordHeader;
  plain_left_ = length;
  in_pos_ += kRecordHeader + length + kTagBytes;
  return true;
}

size_t DataConnection::TakePlain(void* buf, size_t n) {
  const size_t k = std::min(n, plain_left_);
  std::memcpy(buf, in_.data() + plain_pos_, k);
  plain_pos_ += k;
  plain_left_ -= k;
  if (plain_left_ == 0 && Raw() == 0 && in_.size() > 4 * kReadAhead) {
    std::vector<char>().swap(in_);  // A large record's room is not kept while idle.
    plain_pos_ = in_pos_ = in_end_ = 0;
  }
  return k;
}

ssize_t DataConnection::FillIn(size_t need, bool read_ahead, int flags) {
  if (plain_left_ == 0 && in_pos_ > 0) {  // Only raw bytes left: to the front.
    std::memmove(in_.data(), in_.data() + in_pos_, Raw());
    in_end_ -= in_pos_;
    in_pos_ = 0;
  }
  const size_t size = in_pos_ + (read_ahead ? std::max(need, kReadAhead) : need);
  if (in_.size() < size) in_.resize(size);
  const ssize_t r = ::recv(fd_, in_.data() + in_end_, size - in_end_, flags);
  if (r > 0) in_end_ += static_cast<size_t>(r);
  return r;
}

DataConnection::Io DataConnection::Write(const iovec* iov, int count, size_t* wrote) {
  *wrote = 0;
  if (tls_ == nullptr) {
    msghdr msg{};
    msg.msg_iov = const_cast<iovec*>(iov);
    msg.msg_iovlen = static_cast<size_t>(count);
    const ssize_t w = ::sendmsg(fd_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w >= 0) {
      *wrote = static_cast<size_t>(w);
      return Io::kDone;
    }
    if (Retryable(errno)) return Io::kWantWrite;
    error_ = std::strerror(errno);
    return Io::kClosed;
  }
  if (Broken()) return Io::kError;
  // Records still queued go first; new ones only when they are all out.
  if (Io io = SendPending(/*wait=*/false); io != Io::kDone) return io;
  if (!SealInto(iov, count, kMaxWritePerCall, wrote)) return Io::kError;
  // The plaintext sealed counts as written; records the socket does not take
  // now stay queued (HasPendingWrite) and go first on the next call.
  const Io io = SendPending(/*wait=*/false);
  return io == Io::kWantWrite ? Io::kDone : io;
}

bool DataConnection::SealInto(const iovec* iov, int count, size_t limit, size_t* taken) {
  *taken = 0;
  if (sealed_ == nullptr) {
    error_ = "write before the TLS handshake finished";
    return false;
  }
  int i = 0;
  size_t offset = 0;  // Into iov[i].
  while (i < count && *taken < limit) {
    iovec pieces[kMaxPiecesPerRecord];
    int num_pieces = 0;
    size_t n = 0;
    while (i < count && num_pieces < kMaxPiecesPerRecord && n < kMaxRecord &&
           *taken + n < limit) {
      const size_t left = iov[i].iov_len - offset;
      if (left == 0) {
        ++i;
        offset = 0;
        continue;
      }
      if (n > 0 && left >= kBulkBytes) break;  // A tensor starts its own record.
      const size_t k = std::min({left, kMaxRecord - n, limit - *taken - n});
      pieces[num_pieces++] = {static_cast<char*>(iov[i].iov_base) + offset, k};
      n += k;
      offset += k;
    }
    if (n == 0) break;
    const size_t record = kRecordHeader + n + kTagBytes;
    if (out_end_ + record > out_capacity_) {  // Not zeroed first, as a string's resize would.
      const size_t capacity =
          std::max({out_end_ + record, 2 * out_capacity_, kMaxWritePerCall + 4096});
      std::unique_ptr<char[]> bigger(new char[capacity]);
      if (out_end_ > 0) std::memcpy(bigger.get(), out_.get(), out_end_);
      out_ = std::move(bigger);
      out_capacity_ = capacity;
    }
    if (const char* why = sealed_->Seal(pieces, num_pieces, n, out_.get() + out_end_)) {
      error_ = why;
      broken_ = true;
      return false;
    }
    out_end_ += record;
    *taken += n;
  }
  return true;
}

DataConnection::Io DataConnection::SendPending(bool wait, size_t* sent) {
  while (out_pos_ < out_end_) {
    const ssize_t w = ::send(fd_, out_.get() + out_pos_, out_end_ - out_pos_,
                             MSG_NOSIGNAL | (wait ? 0 : MSG_DONTWAIT));
    if (w < 0) {
      if (Retryable(errno)) return Io::kWantWrite;
      error_ = std::strerror(errno);
      closed_ = errno == ECONNRESET || errno == EPIPE;
      broken_ = tls_ != nullptr;
      return closed_ ? Io::kClosed : Io::kError;
    }
    out_pos_ += static_cast<size_t>(w);
    if (sent != nullptr) *sent += static_cast<size_t>(w);
    // A blocking send that took some: kWantWrite, so the caller re-arms its
    // deadline before waiting again (a slow reader must not stretch it).
    if (wait && out_pos_ < out_end_) return Io::kWantWrite;
  }
  out_pos_ = out_end_ = 0;  // The buffer (~kMaxWritePerCall) stays for the next write.
  return Io::kDone;
}

bool DataConnection::HasPendingWrite() const { return out_pos_ < out_end_; }

DataConnection::Io DataConnection::FlushPendingWrite(size_t* sent) {
  return SendPending(/*wait=*/false, sent);
}

bool DataConnection::HasBuffered() const { return broken_ || plain_left_ > 0 || Raw() > 0; }

absl::Status DataConnection::SetDeadline(absl::Time deadline) {
  timeval tv{0, 0};  // Zero: no timeout.
  if (deadline != absl::InfiniteFuture()) {
    const int64_t us = std::clamp<int64_t>(absl::ToInt64Microseconds(deadline - absl::Now()), 1000,
                                           int64_t{1} << 40);
    tv.tv_sec = static_cast<time_t>(us / 1000000);
    tv.tv_usec = static_cast<suseconds_t>(us % 1000000);
  }
  setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  if (deadline != absl::InfiniteFuture() && absl::Now() >= deadline) {
    return absl::DeadlineExceededError("deadline exceeded on the tensor data plane");
  }
  return absl::OkStatus();
}

absl::Status DataConnection::Handshake(absl::Time deadline) {
  if (tls_ == nullptr || sealed_ != nullptr) return absl::OkStatus();
  if (tls_->role() == DataPlaneTls::kServer) {
    return absl::FailedPreconditionError("the sender's handshake is StepHandshake");
  }
  if (auto s = SetDeadline(deadline); !s.ok()) return s;
  for (;;) {
    const Io io = StepHandshake();
    if (io == Io::kDone) break;
    if (io == Io::kWantRead || io == Io::kWantWrite) {
      if (auto s = SetDeadline(deadline); !s.ok()) return s;
      continue;
    }
    return absl::UnavailableError(error_);
  }
  // The ticket says the sender verified this end's certificate; a refusal
  // arrives as an alert instead.
  while (!ticket_) {
    char byte;
    size_t got = 0;
    ERR_clear_error();
    const int r = SSL_read_ex(ssl_, &byte, 1, &got);
    if (r == 1) {
      return absl::UnavailableError("TLS handshake failed: the sender spoke before being asked");
    }
    const Io io = SslResult(r, "TLS handshake failed");
    if (io == Io::kWantRead || io == Io::kWantWrite) {
      if (auto s = SetDeadline(deadline); !s.ok()) return s;
      continue;
    }
    return absl::UnavailableError(error_);
  }
  if (!StartSealing()) return absl::UnavailableError(error_);
  return absl::OkStatus();
}

absl::Status DataConnection::SendWithFd(const void* buf, size_t n, int fd, absl::Time deadline) {
  if (tls_ != nullptr || n == 0) {
    return absl::InvalidArgumentError("a descriptor goes with plaintext bytes only");
  }
  OneFdMessage m(const_cast<void*>(buf), 1);  // The descriptor rides on the first byte.
  msghdr& msg = m.msg;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  if (absl::Status s = SetDeadline(deadline); !s.ok()) return s;
  if (::sendmsg(fd_, &msg, MSG_NOSIGNAL) != 1) {
    error_ = std::strerror(errno);
    return absl::UnavailableError(absl::StrCat("passing a descriptor: ", error_));
  }
  return Send(static_cast<const char*>(buf) + 1, n - 1, deadline);
}

absl::Status DataConnection::Send(const void* buf, size_t n, absl::Time deadline) {
  if (tls_ != nullptr && Broken()) {
    return absl::UnavailableError(absl::StrCat("tensor data plane send failed: ", error_));
  }
  const char* p = static_cast<const char*>(buf);
  while (n > 0 || HasPendingWrite()) {
    size_t w = 0;
    Io io = Io::kDone;
    if (HasPendingWrite()) {
      io = SendPending(/*wait=*/true);  // Within SO_SNDTIMEO (SetDeadline).
    } else if (tls_ == nullptr) {
      const ssize_t r = ::send(fd_, p, n, MSG_NOSIGNAL);
      io = r >= 0 ? Io::kDone : Retryable(errno) ? Io::kWantWrite : Io::kError;
      if (r >= 0) w = static_cast<size_t>(r);
      if (io == Io::kError) error_ = std::strerror(errno);
    } else {
      const iovec v{const_cast<char*>(p), n};
      if (!SealInto(&v, 1, kMaxWritePerCall, &w)) io = Io::kError;  // Sent on the next turn.
    }
    if (io == Io::kDone) {
      p += w;
      n -= w;
      // A blocking send cut short by its timeout: the next wait re-armed.
      if (tls_ == nullptr && n > 0) RETURN_IF_ERROR(SetDeadline(deadline));
    } else if (io == Io::kWantRead || io == Io::kWantWrite) {
      if (auto s = SetDeadline(deadline); !s.ok()) return s;  // Woke early: wait for the rest.
    } else {
      return absl::UnavailableError(absl::StrCat("tensor data plane send failed: ", error_));
    }
  }
  return absl::OkStatus();
}

absl::Status DataConnection::Recv(void* buf, size_t n, absl::Time deadline) {
  if (tls_ != nullptr) {
    if (Broken()) {
      return absl::UnavailableError(absl::StrCat("tensor data plane receive failed: ", error_));
    }
    absl::Status s = SealedRecv(static_cast<char*>(buf), n, deadline);
    broken_ = !s.ok();
    return s;
  }
  return RecvExactly(static_cast<char*>(buf), n, deadline);
}

absl::Status DataConnection::RecvExactly(char* p, size_t n, absl::Time deadline) {
  while (n > 0) {
    const ssize_t r = ::recv(fd_, p, n, MSG_WAITALL);  // A whole tensor in one call.
    if (r > 0) {
      p += r;
      n -= static_cast<size_t>(r);
      if (n > 0) RETURN_IF_ERROR(SetDeadline(deadline));  // Bytes dripping in: re-armed.
    } else if (r == 0) {
      closed_ = true;
      return absl::UnavailableError("the tensor data plane connection was closed by the peer");
    } else if (Retryable(errno)) {
      if (auto s = SetDeadline(deadline); !s.ok()) return s;
    } else {
      error_ = std::strerror(errno);
      return absl::UnavailableError(absl::StrCat("tensor data plane receive failed: ", error_));
    }
  }
  return absl::OkStatus();
}

// A record the caller's buffer holds whole goes straight into it and is
// opened there; others are opened in in_ and copied out.
absl::Status DataConnection::SealedRecv(char* p, size_t n, absl::Time deadline) {
  if (sealed_ == nullptr) return absl::FailedPreconditionError("receive before the TLS handshake");
  auto failed = [this] {
    return absl::UnavailableError(absl::StrCat("tensor data plane receive failed: ", error_));
  };
  bool waited = false;  // Each wait after the first is re-armed to the deadline.
  while (n > 0) {
    if (plain_left_ > 0) {
      const size_t k = TakePlain(p, n);
      p += k;
      n -= k;
      continue;
    }
    size_t need = kRecordHeader;
    if (Raw() >= kRecordHeader) {
      const size_t length = RecordLength();
      if (length == 0) return failed();
      need = kRecordHeader + length + kTagBytes;
      if (Raw() < need && n >= length) {
        unsigned char header[kRecordHeader];
        unsigned char tag[kTagBytes];
        std::memcpy(header, in_.data() + in_pos_, kRecordHeader);
        const size_t have = std::min(Raw() - kRecordHeader, length);
        std::memcpy(p, in_.data() + in_pos_ + kRecordHeader, have);
        in_pos_ += kRecordHeader + have;
        RETURN_IF_ERROR(RecvExactly(p + have, length - have, deadline));
        const size_t tag_have = std::min(Raw(), kTagBytes);
        std::memcpy(tag, in_.data() + in_pos_, tag_have);
        in_pos_ += tag_have;
        RETURN_IF_ERROR(RecvExactly(reinterpret_cast<char*>(tag) + tag_have,
                                    kTagBytes - tag_have, deadline));
        if (const char* why = sealed_->Open(header, p, length, tag)) {
          OPENSSL_cleanse(p, length);  // Nothing of a record that did not open stays.
          error_ = why;
          return failed();
        }
        p += length;
        n -= length;
        continue;
      }
      if (Raw() >= need) {
        if (!OpenBuffered()) return failed();
        continue;
      }
    }
    // Before a tensor's records, only the next header: the rest goes straight in.
    const bool read_ahead = !(need == kRecordHeader && n >= kBulkBytes);
    if (waited) RETURN_IF_ERROR(SetDeadline(deadline));
    waited = true;
    const ssize_t r = FillIn(need, read_ahead, 0);
    if (r == 0) {
      closed_ = true;
      return absl::UnavailableError("the tensor data plane connection was closed by the peer");
    }
    if (r < 0 && !Retryable(errno)) {
      error_ = std::strerror(errno);
      return failed();
    }  // Woke by the timeout: the next turn re-arms, or says the deadline passed.
  }
  return absl::OkStatus();
}

}  // namespace dflow
