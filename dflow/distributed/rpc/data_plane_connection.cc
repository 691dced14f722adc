#include "dflow/distributed/rpc/data_plane_connection.h"

#include <openssl/bio.h>
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

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

namespace dflow {

namespace {

// Plaintext a TLS Write/Send takes at a time: its records (16 KiB each) are
// gathered and sent in one call, and then the event loop gives others a turn.
constexpr size_t kMaxWritePerCall = 256 << 10;
constexpr size_t kReadAhead = 256 << 10;       // The receiver's ciphertext buffer.

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

// What the BIO writes to: the socket, or, while `gather` (a Write or Send),
// `out`, whose records then go in one send instead of one each 16 KiB (a
// syscall a record cost the TLS sender ~10% of its CPU). Records a later
// write makes while `out` still holds some queue behind them, in order.
// The receiver also reads ahead into `in` itself (OpenSSL's own read-ahead
// copies too much, see Create), so a tensor's records take a few large recv
// calls instead of two per 16 KiB record.
struct DataConnectionBio {
  int fd = -1;
  bool gather = false;
  std::string out;  // Records not yet sent: [out_pos, size()).
  size_t out_pos = 0;
  std::vector<char> in;  // Empty: no read-ahead (the sender).
  size_t in_pos = 0;
  size_t in_end = 0;
};

namespace {

bool Retryable(int err) { return err == EAGAIN || err == EWOULDBLOCK || err == EINTR; }

int BioWrite(BIO* b, const char* data, int n) {
  BIO_clear_retry_flags(b);
  DataConnectionBio* target = static_cast<DataConnectionBio*>(BIO_get_data(b));
  if (target->gather || target->out_pos < target->out.size()) {
    target->out.append(data, static_cast<size_t>(n));
    return n;
  }
  const ssize_t w = ::send(target->fd, data, static_cast<size_t>(n), MSG_NOSIGNAL);
  if (w < 0 && Retryable(errno)) BIO_set_retry_write(b);
  return static_cast<int>(w);
}

int BioRead(BIO* b, char* data, int n) {
  BIO_clear_retry_flags(b);
  DataConnectionBio* t = static_cast<DataConnectionBio*>(BIO_get_data(b));
  const size_t want = static_cast<size_t>(n);
  if (t->in.empty() || want >= t->in.size()) {
    // OpenSSL (no read-ahead) asks for exactly what the record still needs,
    // so waiting for all of it never waits past the record, and a 16 KiB
    // record arrives in one call, not one per segment.
    const ssize_t r = ::recv(t->fd, data, want, MSG_WAITALL);
    if (r < 0 && Retryable(errno)) BIO_set_retry_read(b);
    return static_cast<int>(r);
  }
  if (t->in_pos == t->in_end) {
    // What this record needs (waiting for it), then whatever else has arrived.
    t->in_pos = t->in_end = 0;
    const ssize_t r = ::recv(t->fd, t->in.data(), want, MSG_WAITALL);
    if (r <= 0) {
      if (r < 0 && Retryable(errno)) BIO_set_retry_read(b);
      return static_cast<int>(r);
    }
    t->in_end = static_cast<size_t>(r);
    if (t->in_end == want) {
      const ssize_t more =
          ::recv(t->fd, t->in.data() + t->in_end, t->in.size() - t->in_end, MSG_DONTWAIT);
      if (more > 0) t->in_end += static_cast<size_t>(more);
    }
  }
  const size_t k = std::min(want, t->in_end - t->in_pos);
  std::memcpy(data, t->in.data() + t->in_pos, k);
  t->in_pos += k;
  return static_cast<int>(k);
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
  // Not SSL_MODE_RELEASE_BUFFERS: freeing the record buffer after each record
  // costs fresh pages (page faults) every 16 KiB; an idle connection keeps
  // about 34 KiB of OpenSSL buffers instead.
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (role == kServer) {
    SSL_CTX_set_num_tickets(ctx, 1);  // The receiver's "you are accepted".
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    static const unsigned char kContext[] = "dflow-data-plane";
    SSL_CTX_set_session_id_context(ctx, kContext, sizeof(kContext) - 1);
  } else {
    SSL_CTX_set_session_cache_mode(ctx,
                                   SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(ctx, OnSessionTicket);
    // Not OpenSSL's read-ahead: OpenSSL 3.0 moves what it read ahead to the
    // front of its buffer for every record, so a large buffer copies each byte
    // many times (1 MiB: TLS data plane ~0.1 of plaintext). BioRead reads
    // ahead without that.
    SSL_CTX_clear_mode(ctx, SSL_MODE_AUTO_RETRY);
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
  if (tls_->role() == DataPlaneTls::kClient) bio_target_->in.resize(kReadAhead);
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
    p = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
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
  if (tls_ == nullptr) return Io::kDone;
  if (ssl_ == nullptr) {
    error_ = "cannot create a TLS session";
    return Io::kError;
  }
  ERR_clear_error();
  const int r = SSL_do_handshake(ssl_);
  return r == 1 ? Io::kDone : SslResult(r, "TLS handshake failed");
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
  if (ssl_ == nullptr) return Io::kError;
  ERR_clear_error();
  const int r = SSL_read_ex(ssl_, buf, n, got);
  return r == 1 ? Io::kDone : SslResult(r, "TLS read failed");
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
  if (ssl_ == nullptr) return Io::kError;
  // Records still queued go first; new ones only when they are all out.
  if (Io io = SendGathered(/*wait=*/false); io != Io::kDone) return io;
  bio_target_->gather = true;
  Io io = Io::kDone;
  for (int i = 0; i < count && *wrote < kMaxWritePerCall && io == Io::kDone; ++i) {
    const char* p = static_cast<const char*>(iov[i].iov_base);
    size_t left = iov[i].iov_len;
    while (left > 0 && *wrote < kMaxWritePerCall) {
      size_t w = 0;
      ERR_clear_error();
      const int r = SSL_write_ex(ssl_, p, std::min(left, kMaxWritePerCall - *wrote), &w);
      if (r != 1) {
        io = SslResult(r, "TLS write failed");
        if (io == Io::kWantRead) io = Io::kWantWrite;
        break;
      }
      p += w;
      left -= w;
      *wrote += w;
    }
  }
  bio_target_->gather = false;
  if (io != Io::kDone) return io;
  // The plaintext taken counts as written; records the socket does not take
  // now stay queued (HasPendingWrite) and go first on the next call.
  io = SendGathered(/*wait=*/false);
  return io == Io::kWantWrite ? Io::kDone : io;
}

DataConnection::Io DataConnection::SendGathered(bool wait, size_t* sent) {
  if (bio_target_ == nullptr) return Io::kDone;
  std::string& out = bio_target_->out;
  size_t& pos = bio_target_->out_pos;
  while (pos < out.size()) {
    const ssize_t w =
        ::send(fd_, out.data() + pos, out.size() - pos, MSG_NOSIGNAL | (wait ? 0 : MSG_DONTWAIT));
    if (w < 0) {
      if (Retryable(errno)) return Io::kWantWrite;
      error_ = std::strerror(errno);
      closed_ = errno == ECONNRESET || errno == EPIPE;
      return closed_ ? Io::kClosed : Io::kError;
    }
    pos += static_cast<size_t>(w);
    if (sent != nullptr) *sent += static_cast<size_t>(w);
  }
  out.clear();  // Keeps its capacity (~kMaxWritePerCall) for the next write.
  pos = 0;
  return Io::kDone;
}

bool DataConnection::HasPendingWrite() const {
  return bio_target_ != nullptr && bio_target_->out_pos < bio_target_->out.size();
}

DataConnection::Io DataConnection::FlushPendingWrite(size_t* sent) {
  return SendGathered(/*wait=*/false, sent);
}

bool DataConnection::HasBuffered() const {
  return ssl_ != nullptr && bio_target_ != nullptr &&
         (SSL_has_pending(ssl_) == 1 || bio_target_->in_pos < bio_target_->in_end);
}

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
  if (tls_ == nullptr) return absl::OkStatus();
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
  const char* p = static_cast<const char*>(buf);
  while (n > 0 || HasPendingWrite()) {
    size_t w = 0;
    Io io;
    if (HasPendingWrite()) {
      io = SendGathered(/*wait=*/true);  // Within SO_SNDTIMEO (SetDeadline).
    } else if (tls_ == nullptr) {
      const ssize_t r = ::send(fd_, p, n, MSG_NOSIGNAL);
      io = r >= 0 ? Io::kDone : Retryable(errno) ? Io::kWantWrite : Io::kError;
      if (r >= 0) w = static_cast<size_t>(r);
      if (io == Io::kError) error_ = std::strerror(errno);
    } else {
      bio_target_->gather = true;  // Then sent together on the next turn.
      ERR_clear_error();
      const int r = SSL_write_ex(ssl_, p, std::min(n, kMaxWritePerCall), &w);
      bio_target_->gather = false;
      io = r == 1 ? Io::kDone : SslResult(r, "TLS write failed");
    }
    if (io == Io::kDone) {
      p += w;
      n -= w;
    } else if (io == Io::kWantRead || io == Io::kWantWrite) {
      if (auto s = SetDeadline(deadline); !s.ok()) return s;  // Woke early: wait for the rest.
    } else {
      return absl::UnavailableError(absl::StrCat("tensor data plane send failed: ", error_));
    }
  }
  return absl::OkStatus();
}

absl::Status DataConnection::Recv(void* buf, size_t n, absl::Time deadline) {
  char* p = static_cast<char*>(buf);
  while (n > 0) {
    size_t got = 0;
    Io io;
    if (tls_ == nullptr) {
      const ssize_t r = ::recv(fd_, p, n, MSG_WAITALL);  // A whole tensor in one call.
      io = r > 0 ? Io::kDone : r == 0 ? Io::kClosed : Retryable(errno) ? Io::kWantRead : Io::kError;
      if (r > 0) got = static_cast<size_t>(r);
      if (io == Io::kError) error_ = std::strerror(errno);
    } else {
      ERR_clear_error();
      const int r = SSL_read_ex(ssl_, p, n, &got);
      io = r == 1 ? Io::kDone : SslResult(r, "TLS read failed");
    }
    if (io == Io::kDone) {
      p += got;
      n -= got;
    } else if (io == Io::kWantRead || io == Io::kWantWrite) {
      if (auto s = SetDeadline(deadline); !s.ok()) return s;
    } else if (io == Io::kClosed && !peer_alert_) {
      return absl::UnavailableError("the tensor data plane connection was closed by the peer");
    } else {
      return absl::UnavailableError(absl::StrCat("tensor data plane receive failed: ", error_));
    }
  }
  return absl::OkStatus();
}

}  // namespace dflow
