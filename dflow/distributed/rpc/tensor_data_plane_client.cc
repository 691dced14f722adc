#include "dflow/distributed/rpc/tensor_data_plane.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>
#include <optional>
#include <thread>
#include <utility>

#include "absl/functional/any_invocable.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "dflow/distributed/rpc/data_plane_connection.h"
#include "dflow/distributed/rpc/grpc_util.h"
#include "dflow/runtime/executor.h"
#include "dflow/distributed/rpc/tensor_coding.h"
#include "dflow/framework/env_flag.h"
#include "dflow/distributed/rpc/wire_format.h"
#include "dflow/framework/status.h"
#include "google/protobuf/any.pb.h"
#include "grpcpp/grpcpp.h"

namespace dflow {

static_assert(std::endian::native == std::endian::little, "the data plane writes host order");


namespace {

using data_plane::RequestHeader;
using data_plane::ResponseHeader;

// --- Non-blocking I/O with a deadline (receiver) ----------------------------------------

int PollTimeoutMs(absl::Time deadline) {
  if (deadline == absl::InfiniteFuture()) return -1;
  const absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return 0;
  return static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 1 << 30));
}

// Waits for `events` on fd; DeadlineExceeded at the deadline.
absl::Status WaitFor(int fd, short events, absl::Time deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int timeout = PollTimeoutMs(deadline);
    const int r = ::poll(&p, 1, timeout);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return absl::UnavailableError(absl::StrCat("poll: ", std::strerror(errno)));
    if (r > 0) return absl::OkStatus();
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError("deadline exceeded on the tensor data plane");
    }
  }
}

// Leaves a connected socket blocking (DataConnection::SetDeadline bounds its waits).
int Blocking(int fd) {
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL, 0) & ~O_NONBLOCK);
  return fd;
}

// A connected (blocking) socket to the abstract AF_UNIX socket `name`, or -1
// (not on this host, or its backlog is full: nothing sent).
int ConnectLocal(const std::string& name) {
  sockaddr_un addr;
  const socklen_t len = data_plane::LocalAddress(name, &addr);
  if (len == 0) return -1;
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  // A local connect completes at once or fails (EAGAIN: the backlog is full).
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    ::close(fd);
    return -1;
  }
  return Blocking(fd);
}

// A connected (blocking) socket to host:port, or -1 (nothing sent).
int ConnectTcp(const std::string& host, int port, absl::Time deadline) {
  sockaddr_storage addr{};
  socklen_t len = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&addr);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&addr);
  if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port));
    len = sizeof(*v4);
  } else if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port));
    len = sizeof(*v6);
  } else {
    return -1;
  }
  int fd = ::socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  data_plane::SetBufferSize(fd, SO_RCVBUF);  // Before connect: it sets the window scale.
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    if (errno != EINPROGRESS) {
      ::close(fd);
      return -1;
    }
    // At most 10 s for the handshake; a peer that does not answer is gRPC's problem.
    const absl::Time limit = std::min(deadline, absl::Now() + absl::Seconds(10));
    int err = 0;
    socklen_t err_len = sizeof(err);
    if (!WaitFor(fd, POLLOUT, limit).ok() ||
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &err_len) != 0 || err != 0) {
      ::close(fd);
      return -1;
    }
  }
  data_plane::ConfigureSocket(fd);
  // Blocking, with SO_RCVTIMEO / SO_SNDTIMEO set to the time left before the
  // deadline (DataConnection::SetDeadline): a whole tensor arrives in one
  // recv(MSG_WAITALL) (few wake-ups), and the deadline still ends every wait.
  Blocking(fd);
  return fd;
}

// The largest tensor a response may announce: the process's tensor byte
// limit (framework/tensor.h), at most physical memory. The receiver allocates
// what the header announces before the bytes arrive, so a lying header must
// not make it reserve more.
uint64_t MaxTensorBytes() {
  static const uint64_t physical = [] {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page)
                                 : uint64_t{1} << 40;
  }();
  return std::min(physical, TensorByteLimit());
}

// --- Threads for receiver calls: cached, grown on demand --------------------------------

class CallThreads {
 public:
  static CallThreads& Global() {
    static CallThreads* threads = new CallThreads;  // Never destroyed.
    return *threads;
  }
  void Run(absl::AnyInvocable<void()> fn) {
    absl::MutexLock l(&mu_);
    queue_.push_back(std::move(fn));
    if (queue_.size() > static_cast<size_t>(idle_)) std::thread([this] { Loop(); }).detach();
  }

 private:
  void Loop() {
    absl::MutexLock l(&mu_);
    for (;;) {
      ++idle_;
      const bool got = mu_.AwaitWithTimeout(
          absl::Condition(
              +[](std::deque<absl::AnyInvocable<void()>>* q) { return !q->empty(); }, &queue_),
          absl::Seconds(30));
      --idle_;
      if (!got) return;
      absl::AnyInvocable<void()> fn = std::move(queue_.front());
      queue_.pop_front();
      mu_.Unlock();
      fn();
      fn = nullptr;
      mu_.Lock();
    }
  }

  absl::Mutex mu_;
  std::deque<absl::AnyInvocable<void()>> queue_ ABSL_GUARDED_BY(mu_);
  int idle_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace

namespace {

// The bodies of the data plane's response kinds (the header `h` has
// arrived). Each sets *reusable once the body is read whole, and checks
// every size a header announces before allocating it.

absl::Status ReadRunGraphResponse(DataConnection& conn, absl::Time deadline,
                                  const ResponseHeader& h, tensorflow::RunGraphResponse* resp,
                                  bool* reusable) {
  if (h.bytes > kMaxTensorContentBytes || h.bytes > MaxTensorBytes()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "[RunGraph] data plane header claims a RunGraphResponse of ", h.bytes, " bytes"));
  }
  std::string bytes(h.bytes, '\0');
  RETURN_IF_ERROR(conn.Recv(bytes.data(), bytes.size(), deadline));
  *reusable = true;
  if (!resp->ParseFromString(bytes)) {
    return absl::InvalidArgumentError("[RunGraph] data plane RunGraphResponse does not parse");
  }
  return absl::OkStatus();
}

// The sender's status, returned.
absl::Status ReadStatus(DataConnection& conn, absl::Time deadline, const ResponseHeader& h,
                        bool* reusable) {
  if (h.bytes > data_plane::kMaxMessageBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "[RecvTensor] data plane status message of ", h.bytes, " bytes is too long"));
  }
  std::string msg(h.bytes, '\0');
  RETURN_IF_ERROR(conn.Recv(msg.data(), msg.size(), deadline));
  *reusable = true;
  const absl::StatusCode code =
      h.a >= 1 && h.a <= 16 ? static_cast<absl::StatusCode>(h.a) : absl::StatusCode::kUnknown;
  return absl::Status(code, msg);
}

// Kind 3: a TensorProto (string and resource tensors).
absl::Status ReadProtoTensor(DataConnection& conn, absl::Time deadline, const ResponseHeader& h,
                             RecvTensorResult* resp, bool* reusable) {
  if (h.bytes > kMaxTensorContentBytes || h.bytes > MaxTensorBytes()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "[RecvTensor] data plane header claims a TensorProto of ", h.bytes, " bytes"));
  }
  std::string bytes(h.bytes, '\0');
  RETURN_IF_ERROR(conn.Recv(bytes.data(), bytes.size(), deadline));
  *reusable = true;
  tensorflow::TensorProto proto;
  if (!proto.ParseFromString(bytes)) {
    return absl::InvalidArgumentError("[RecvTensor] data plane TensorProto does not parse");
  }
  absl::StatusOr<Tensor> t = Tensor::FromProto(proto);
  if (!t.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("[RecvTensor] ", t.status().message()));
  }
  resp->tensor = *std::move(t);
  resp->is_dead = false;
  resp->send_start_micros = h.send_start_micros;
  return absl::OkStatus();
}

// Kinds 1 and 6: reads the dimensions of the tensor the header announces,
// once its dtype, rank, shape and byte count agree.
absl::StatusOr<TensorShape> ReadAnnouncedShape(DataConnection& conn, absl::Time deadline,
                                               const ResponseHeader& h) {
  const DataType dtype = static_cast<DataType>(h.a);
  if (h.a > static_cast<uint32_t>(std::numeric_limits<int32_t>::max()) ||
      !tensorflow::DataType_IsValid(static_cast<int>(h.a)) || !IsSupportedDataType(dtype) ||
      IsRefType(dtype) || dtype == DT_STRING || dtype == DT_RESOURCE) {
    return absl::InvalidArgumentError(absl::StrCat("[RecvTensor] data plane header has dtype ",
                                                   h.a,
                                                   ", not a fixed-size DataType dflow supports"));
  }
  if (h.b > data_plane::kMaxDims) {
    return absl::InvalidArgumentError(
        absl::StrCat("[RecvTensor] data plane header claims ", h.b, " dimensions"));
  }
  std::vector<int64_t> dims(h.b);
  RETURN_IF_ERROR(conn.Recv(dims.data(), dims.size() * sizeof(int64_t), deadline));
  const uint64_t elem = static_cast<uint64_t>(DataTypeSize(dtype));
  const uint64_t limit = std::min(MaxTensorBytes(), uint64_t{1} << 62);
  uint64_t elements = 1;
  for (int64_t d : dims) {
    if (d < 0 || (d != 0 && elements > limit / static_cast<uint64_t>(d))) {
      return absl::InvalidArgumentError(
          absl::StrCat("[RecvTensor] data plane header has an absurd shape (dimension ", d, ")"));
    }
    elements *= static_cast<uint64_t>(d);
  }
  if (elem == 0 || elements > limit / elem || elements * elem != h.bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("[RecvTensor] data plane header announces ", h.bytes, " bytes but ",
                     DataTypeString(dtype), TensorShape(absl::MakeConstSpan(dims)).DebugString(),
                     " needs ", elements * elem));
  }
  return TensorShape(absl::MakeConstSpan(dims));
}

// Whether a received tensor of `dtype` may borrow the shared region's bytes
// instead of a copy. Only floating-point ones: the sender can still write
// the region while the tensor is in use, which can change a number but not
// a shape, a size or an index that a kernel checked before using it.
bool MayBorrowShared(DataType dtype) { return dtype == DT_FLOAT || dtype == DT_DOUBLE; }

absl::Status ReadRawTensor(DataConnection& conn, absl::Time deadline, const ResponseHeader& h,
                           RecvTensorResult* resp, bool* reusable) {
  ASSIGN_OR_RETURN(const TensorShape shape, ReadAnnouncedShape(conn, deadline, h));
  const auto dtype = static_cast<DataType>(h.a);
  Tensor t;
  if (h.kind == data_plane::kTensorShared) {
    uint64_t offset = 0;
    RETURN_IF_ERROR(conn.Recv(&offset, sizeof(offset), deadline));
    const SharedRegion* region = conn.shared();
    if (region == nullptr || offset > region->size() || h.bytes > region->size() - offset) {
      return absl::InvalidArgumentError(absl::StrCat(
          "[RecvTensor] data plane header places ", h.bytes, " bytes at offset ", offset,
          region == nullptr ? " of a shared region this connection does not have"
                            : absl::StrCat(" of a shared region of ", region->size(), " bytes")));
    }
    if (MayBorrowShared(dtype) && offset % kTensorAlignment == 0) {
      t = Tensor::Borrow(dtype, shape, region->data() + offset, conn.shared_region());
    } else {
      t = Tensor::ForOverwrite(dtype, shape);
      std::memcpy(t.raw_data(), region->data() + offset, h.bytes);
    }
  } else {
    t = Tensor::ForOverwrite(dtype, shape);
    RETURN_IF_ERROR(conn.Recv(t.raw_data(), h.bytes, deadline));
  }
  if (t.dtype() == DT_BOOL) {  // Any nonzero byte is true; other bool bytes are UB.
    auto* b = static_cast<uint8_t*>(t.raw_data());
    for (int64_t i = 0; i < t.NumElements(); ++i) b[i] = b[i] != 0;
  }
  resp->tensor = std::move(t);
  resp->is_dead = false;
  resp->send_start_micros = h.send_start_micros;
  *reusable = true;
  return absl::OkStatus();
}

}  // namespace

// --- Receiver ---------------------------------------------------------------------------

struct DataPlaneClient::State {
  // An idle connection that still looks healthy, or nullptr.
  std::unique_ptr<DataConnection> TakeIdle() {
    absl::MutexLock l(&mu);
    while (!idle.empty()) {
      std::unique_ptr<DataConnection> conn = std::move(idle.back());
      idle.pop_back();
      pollfd p{conn->fd(), POLLIN | POLLRDHUP, 0};
      if (::poll(&p, 1, 0) == 0 && !conn->HasBuffered()) return conn;
      // Closed by the peer, or stray bytes: closed here.
    }
    return nullptr;
  }
  void GiveBack(std::unique_ptr<DataConnection> conn) {
    if (conn->Worn()) return;  // Its keys have done enough: closed; the next call opens one.
    absl::MutexLock l(&mu);
    if (phase == kReady && idle.size() < static_cast<size_t>(kMaxIdleConnections)) {
      idle.push_back(std::move(conn));
    }
  }
  // A fresh connection's TLS handshake failed (`status` says why): a
  // certificate refused by either end counts as a failed connect (three:
  // gRPC only); a peer that closed or stalled it (its connection caps) as a
  // refusal (back-off).
  void HandshakeFailed(const absl::Status& status, bool rejected) {
    const std::string message =
        absl::StrCat("[DataPlane] TLS handshake with ", peer_name, " failed: ",
                     absl::StripPrefix(status.message(), "TLS handshake failed: "));
    {
      absl::MutexLock l(&mu);
      const bool first = last_handshake_error.empty();
      last_handshake_error = message;
      if (first && rejected) std::fprintf(stderr, "%s; its tensors go over gRPC\n", message.c_str());
    }
    rejected ? ConnectFailed() : Refused();
  }
  void ConnectFailed() {
    absl::MutexLock l(&mu);
    // Ask again over gRPC (the peer may have restarted on another port); after
    // three failures in a row, gRPC only.
    phase = ++connect_failures >= 3 ? kNone : kUnknown;
  }
  void Connected() {
    absl::MutexLock l(&mu);
    connect_failures = 0;
  }
  // The peer's local socket could not be reached (another host or network
  // namespace) or refused a call: TCP from now on.
  void LocalFailed(const std::string& name) {
    absl::MutexLock l(&mu);
    if (peer.local_name == name) peer.local_name.clear();
  }
  // The peer answered "not served" on a fresh connection (it is at its
  // connection caps): gRPC only for a back-off that doubles while it lasts.
  void Refused() {
    absl::MutexLock l(&mu);
    retry_after = absl::Now() + backoff;
    backoff = std::min(backoff * 2, kMaxBackoff);
  }
  void Served() {
    absl::MutexLock l(&mu);
    backoff = kMinBackoff;
  }
  // `n` calls are no longer in flight.
  void Left(int n) {
    absl::MutexLock l(&mu);
    in_flight -= n;
  }

  absl::Status Annotate(const absl::Status& s, const Pending& call) const {
    if (s.ok()) return s;
    absl::Status a = AnnotateTransportError(
        s, call.run_graph != nullptr ? "WorkerService.RunGraph" : "WorkerService.RecvTensor",
        peer_name);
    if (a.code() == absl::StatusCode::kInvalidArgument ||
        a.code() == absl::StatusCode::kUnimplemented) {
      a = absl::Status(a.code(), absl::StrCat(a.message(), " (from ", peer_name, ")"));
    }
    return a;
  }

  // One call on `fd` whose first `sent` bytes of `frame` are already sent;
  // *reusable says whether the connection may serve another call,
  // *unserved whether the sender surely did not take the call (it answered
  // "not served", or the request did not all go out), so it may go elsewhere.
  absl::Status Call(DataConnection& conn, absl::Time deadline, const std::string& frame,
                    size_t sent, const Pending& call, bool* reusable, bool* unserved) {
    *reusable = false;
    *unserved = true;
    (void)conn.SetDeadline(deadline);  // Passed: the first wait says so.
    RETURN_IF_ERROR(conn.Send(frame.data() + sent, frame.size() - sent, deadline));
    *unserved = false;
    ResponseHeader h;
    RETURN_IF_ERROR(conn.Recv(&h, sizeof(h), deadline));
    if (h.magic == data_plane::kResponseMagic && h.kind == data_plane::kNotServed) {
      *unserved = true;
      return absl::UnavailableError("the tensor data plane did not serve the call");
    }
    if (h.magic != data_plane::kResponseMagic) {
      return absl::InvalidArgumentError(
          "[RecvTensor] the tensor data plane response does not start with its magic number");
    }
    return ReadBody(conn, deadline, h, call, reusable);
  }

  // The rest of a response whose header `h` has arrived: a status (returned,
  // *reusable set), or the result into `call`'s. Any other error leaves the
  // connection unusable.
  static absl::Status ReadBody(DataConnection& conn, absl::Time deadline, const ResponseHeader& h,
                               const Pending& call, bool* reusable) {
    *reusable = false;
    if (h.kind != data_plane::kStatus &&
        (call.run_graph != nullptr) != (h.kind == data_plane::kRunGraph)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "[", call.run_graph != nullptr ? "RunGraph" : "RecvTensor",
          "] data plane response of kind ", h.kind, " does not answer the call"));
    }
    switch (h.kind) {
      case data_plane::kRunGraph:
        return ReadRunGraphResponse(conn, deadline, h, call.run_graph, reusable);
      case data_plane::kStatus:
        return ReadStatus(conn, deadline, h, reusable);
      case data_plane::kDead:
        call.resp->is_dead = true;
        call.resp->tensor = Tensor();
        call.resp->send_start_micros = h.send_start_micros;
        *reusable = true;
        return absl::OkStatus();
      case data_plane::kProto:
        return ReadProtoTensor(conn, deadline, h, call.resp, reusable);
      case data_plane::kTensor:
      case data_plane::kTensorShared:
        return ReadRawTensor(conn, deadline, h, call.resp, reusable);
      default:
        return absl::InvalidArgumentError(
            absl::StrCat("[RecvTensor] data plane response of unknown kind ", h.kind));
    }
  }

  // Sends `frame` (a batch of `calls`) on `fd` and reads one item per call,
  // answering each as it arrives but the last, which is left in *last for
  // the caller to answer once the connection is back in the pool; returns
  // what ended the exchange early (OK: every item read). *unserved: the
  // sender took none of the calls.
  absl::Status CallBatch(DataConnection& conn, absl::Time deadline, const std::string& frame,
                         std::vector<Pending>& calls,
                         absl::FunctionRef<void(size_t, const absl::Status&)> answer,
                         bool* reusable, bool* unserved,
                         std::optional<std::pair<size_t, absl::Status>>* last) {
    *reusable = false;
    *unserved = true;
    (void)conn.SetDeadline(deadline);
    RETURN_IF_ERROR(conn.Send(frame.data(), frame.size(), deadline));
    *unserved = false;
    std::vector<bool> seen(calls.size(), false);
    for (size_t got = 0; got < calls.size(); ++got) {
      uint32_t prefix[2] = {0, 0};  // Magic, index.
      RETURN_IF_ERROR(conn.Recv(&prefix[0], sizeof(prefix[0]), deadline));
      ResponseHeader h;
      if (prefix[0] == data_plane::kResponseMagic) {  // "Not served", or the batch's status.
        h.magic = prefix[0];
        RETURN_IF_ERROR(conn.Recv(reinterpret_cast<char*>(&h) + sizeof(h.magic),
                                sizeof(h) - sizeof(h.magic), deadline));
        if (h.kind == data_plane::kNotServed) {
          *unserved = got == 0;
          return absl::UnavailableError("the tensor data plane did not serve the call");
        }
        if (h.kind != data_plane::kStatus) break;
        RecvTensorResult none;
        Pending batch;
        batch.resp = &none;
        absl::Status s = ReadBody(conn, deadline, h, batch, reusable);
        *reusable = false;
        return s.ok() ? absl::InvalidArgumentError(
                            "[RecvTensor] the tensor data plane answered a batch with OK")
                      : s;
      }
      if (prefix[0] != data_plane::kBatchItemMagic) break;
      RETURN_IF_ERROR(conn.Recv(&prefix[1], sizeof(prefix[1]), deadline));
      const uint32_t i = prefix[1];
      if (i >= calls.size() || seen[i]) {
        return absl::InvalidArgumentError(absl::StrCat(
            "[RecvTensor] data plane batch item ", i, " of ", calls.size(), " is not awaited"));
      }
      seen[i] = true;
      RETURN_IF_ERROR(conn.Recv(&h, sizeof(h), deadline));
      if (h.magic != data_plane::kResponseMagic) break;
      bool usable = false;
      absl::Status s = ReadBody(conn, deadline, h, calls[i], &usable);
      if (!usable) return s;  // Not this call's status: the stream is broken.
      if (got + 1 == calls.size()) {
        last->emplace(i, std::move(s));
      } else {
        answer(i, s);
      }
    }
    if (std::find(seen.begin(), seen.end(), false) != seen.end()) {
      return absl::InvalidArgumentError(
          "[RecvTensor] a tensor data plane batch response does not start with its magic number");
    }
    *reusable = true;
    return absl::OkStatus();
  }

  const std::string peer_name;
  const bool enabled;
  const std::string hello;  // The hello frame opening each connection; "" without a token.
  const std::shared_ptr<const DataPlaneTls> tls;  // Set: connections are TLS.
  absl::Mutex mu;
  enum Phase { kUnknown, kReady, kNone };
  Phase phase ABSL_GUARDED_BY(mu) = kUnknown;
  Endpoint peer ABSL_GUARDED_BY(mu);
  int connect_failures ABSL_GUARDED_BY(mu) = 0;
  int in_flight ABSL_GUARDED_BY(mu) = 0;
  // Calls waiting for a data-plane thread to send them (Flush), together.
  std::vector<Pending> pending ABSL_GUARDED_BY(mu);
  bool flush_scheduled ABSL_GUARDED_BY(mu) = false;
  std::vector<std::unique_ptr<DataConnection>> idle ABSL_GUARDED_BY(mu);
  std::string last_handshake_error ABSL_GUARDED_BY(mu);
  static constexpr absl::Duration kMinBackoff = absl::Milliseconds(100);
  static constexpr absl::Duration kMaxBackoff = absl::Seconds(10);
  absl::Time retry_after ABSL_GUARDED_BY(mu) = absl::InfinitePast();
  absl::Duration backoff ABSL_GUARDED_BY(mu) = kMinBackoff;
};

namespace {

std::string HelloFrame(const std::string& auth_token) {
  if (auth_token.empty()) return "";
  const RequestHeader h{data_plane::kHelloMagic, static_cast<uint32_t>(auth_token.size()), 0};
  return std::string(reinterpret_cast<const char*>(&h), sizeof(h)) + auth_token;
}

}  // namespace

DataPlaneClient::DataPlaneClient(std::string peer_name, bool enabled, const std::string& auth_token,
                                 std::shared_ptr<const DataPlaneTls> tls)
    // A token too long for a hello cannot be presented: gRPC only.
    : state_(new State{std::move(peer_name),
                       enabled && auth_token.size() <= data_plane::kMaxTokenBytes,
                       HelloFrame(auth_token), std::move(tls)}) {}

DataPlaneClient::~DataPlaneClient() = default;  // Calls in flight hold the state.

bool DataPlaneClient::ShouldQuery() const {
  if (!state_->enabled) return false;
  absl::MutexLock l(&state_->mu);
  return state_->phase == State::kUnknown;
}

void DataPlaneClient::OnNegotiated(const std::string& host, int port,
                                   const std::string& local_name) {
  if (!state_->enabled) return;
  absl::MutexLock l(&state_->mu);
  if (port <= 0 || port > 65535 || host.empty()) {
    state_->phase = State::kNone;
    return;
  }
  Endpoint& peer = state_->peer;
  if (peer.host != host || peer.port != port || peer.local_name != local_name) {
    state_->idle.clear();
  }
  state_->phase = State::kReady;
  peer = {host, port, local_name};
}

std::string DataPlaneClient::last_handshake_error() const {
  absl::MutexLock l(&state_->mu);
  return state_->last_handshake_error;
}

bool DataPlaneClient::ready() const {
  absl::MutexLock l(&state_->mu);
  return state_->enabled && state_->phase == State::kReady;
}

namespace {

// The frame asking for `calls`: a plain request for one, a batch for more;
// the deadline travels as the time left (the latest of the calls').
std::string RequestFrame(const std::vector<DataPlaneClient::Pending>& calls, absl::Time deadline) {
  RequestHeader rq{calls[0].run_graph != nullptr ? data_plane::kRunGraphMagic
                   : calls.size() == 1            ? data_plane::kRequestMagic
                                                  : data_plane::kBatchMagic,
                   0,
                   std::numeric_limits<uint64_t>::max()};
  if (deadline != absl::InfiniteFuture()) {
    const absl::Duration left = deadline - absl::Now();
    rq.timeout_us = static_cast<uint64_t>(std::max<int64_t>(0, absl::ToInt64Microseconds(left)));
  }
  std::string body;
  for (const DataPlaneClient::Pending& call : calls) {
    if (calls.size() > 1) {
      const uint32_t n = static_cast<uint32_t>(call.request.size());
      body.append(reinterpret_cast<const char*>(&n), sizeof(n));
    }
    body += call.request;
  }
  rq.request_bytes = static_cast<uint32_t>(body.size());
  return std::string(reinterpret_cast<const char*>(&rq), sizeof(rq)) + body;
}

}  // namespace

bool DataPlaneClient::TryRecvTensorAsync(const CallOptions& opts,
                                         const tensorflow::RecvTensorRequest* req,
                                         RecvTensorResult* resp, StatusCallback done,
                                         std::function<void()> fallback) {
  std::string request = req->SerializeAsString();
  bool flush = false;
  {
    absl::MutexLock l(&state_->mu);
    if (!state_->enabled || state_->phase != State::kReady || state_->in_flight >= kMaxInFlight ||
        absl::Now() < state_->retry_after || request.size() > data_plane::kMaxRequestBytes) {
      return false;
    }
    ++state_->in_flight;
    state_->pending.push_back(
        {opts.deadline, std::move(request), resp, nullptr, std::move(done), std::move(fallback)});
    flush = !std::exchange(state_->flush_scheduled, true);
  }
  // Calls that come while a data-plane thread wakes up go out with this one.
  if (flush) CallThreads::Global().Run([state = state_] { Flush(state); });
  return true;
}

bool DataPlaneClient::TryRunGraphAsync(const CallOptions& opts,
                                       const tensorflow::RunGraphRequest* req,
                                       tensorflow::RunGraphResponse* resp, StatusCallback done,
                                       std::function<void()> fallback) {
  std::vector<Pending> calls(1);
  Pending& call = calls[0];
  if (!ready() || req->ByteSizeLong() > data_plane::kMaxRunGraphRequestBytes) return false;
  call.request = req->SerializeAsString();
  Endpoint peer;
  {
    absl::MutexLock l(&state_->mu);
    if (!state_->enabled || state_->phase != State::kReady || state_->in_flight >= kMaxInFlight ||
        absl::Now() < state_->retry_after) {
      return false;
    }
    ++state_->in_flight;
    peer = state_->peer;
  }
  call.deadline = opts.deadline;
  call.run_graph = resp;
  call.done = std::move(done);
  call.fallback = std::move(fallback);
  // A small request goes out from this thread on a pooled connection, so the
  // peer starts its step without waiting for another thread to wake. The
  // answer is then awaited by this thread when it is about to wait for the
  // call anyway (the answer wakes it directly), else by a call thread.
  std::unique_ptr<DataConnection> sent;
  if (call.request.size() <= kInlineRequestBytes) {
    if (std::unique_ptr<DataConnection> conn = state_->TakeIdle(); conn != nullptr) {
      const std::string frame = RequestFrame(calls, call.deadline);
      (void)conn->SetDeadline(call.deadline);  // Passed: the send says so.
      // A send that fails closes the connection: Exchange starts over.
      if (conn->Send(frame.data(), frame.size(), call.deadline).ok()) sent = std::move(conn);
    }
  }
  const bool lend = sent != nullptr;
  absl::AnyInvocable<void()> exchange = [state = state_, peer = std::move(peer),
                                         calls = std::move(calls),
                                         sent = std::move(sent)]() mutable {
    Exchange(state, peer, calls, std::move(sent));
  };
  if (!lend || !LendWaitingThread(exchange)) CallThreads::Global().Run(std::move(exchange));
  return true;
}

void DataPlaneClient::Flush(const std::shared_ptr<State>& state) {
  std::vector<Pending> calls;
  Endpoint peer;
  bool more = false;
  {
    absl::MutexLock l(&state->mu);
    size_t bytes = sizeof(RequestHeader);
    size_t n = 0;
    while (n < state->pending.size() && n < data_plane::kMaxBatchCalls &&
           (n == 0 || bytes + sizeof(uint32_t) + state->pending[n].request.size() <=
                          data_plane::kMaxRequestBytes)) {
      bytes += sizeof(uint32_t) + state->pending[n].request.size();
      ++n;
    }
    calls.assign(std::make_move_iterator(state->pending.begin()),
                 std::make_move_iterator(state->pending.begin() + static_cast<ptrdiff_t>(n)));
    state->pending.erase(state->pending.begin(), state->pending.begin() + static_cast<ptrdiff_t>(n));
    more = !state->pending.empty();
    state->flush_scheduled = more;
    peer = state->peer;
  }
  if (more) CallThreads::Global().Run([state] { Flush(state); });
  Exchange(state, peer, calls);
}

namespace {

// Sends `prefix` (a hello, or nothing) and the frame selecting shared-region
// `slot` of `conn` (data_plane_frames.h, 'DFSM'); with `fresh`, a new region
// for it, whose descriptor rides on the first byte (a region that cannot be
// made selects none). False when they could not be sent.
bool SelectRegion(DataConnection& conn, const std::string& prefix, int slot, bool fresh,
                  absl::Time deadline) {
  (void)conn.SetDeadline(deadline);  // Passed: the send says so.
  std::unique_ptr<SharedRegion> region;
  if (fresh) {
    absl::StatusOr<std::unique_ptr<SharedRegion>> made =
        SharedRegion::Create(data_plane::kSharedRegionBytes);
    if (made.ok()) region = *std::move(made);
    if (region == nullptr) slot = DataConnection::kSharedSlots;
  }
  const RequestHeader select{data_plane::kSharedMagic, 0, static_cast<uint64_t>(slot)};
  const std::string bytes =
      prefix + std::string(reinterpret_cast<const char*>(&select), sizeof(select));
  if (region == nullptr) {
    if (!conn.Send(bytes.data(), bytes.size(), deadline).ok()) return false;
    conn.select_shared(slot);
    return true;
  }
  if (!conn.SendWithFd(bytes.data(), bytes.size(), region->fd(), deadline).ok()) return false;
  region->CloseFd();  // The peer has its own copy now.
  conn.set_shared(slot, std::move(region));
  return true;
}

// Whether no received tensor borrows `region` any longer, so that the peer
// may write it again.
bool Unborrowed(const std::shared_ptr<SharedRegion>& region) {
  const bool alone = region.use_count() == 1;  // The connection's own reference.
  // Ordered after the borrowers' last reads (their release is the reference
  // drop; use_count() is a relaxed load).
  std::atomic_thread_fence(std::memory_order_acquire);
  return alone;
}

// Readies a pooled connection for its next request: when tensors still
// borrow its selected region, selects the other slot (given a region on
// first use), or none when both are borrowed. False when the frame could not
// be sent (the connection is then unusable). Connections without regions
// (TCP, TLS) are left as they are.
bool ReadyRegion(DataConnection& conn, absl::Time deadline) {
  constexpr int kNone = DataConnection::kSharedSlots;
  const int current = conn.shared_slot();
  if (conn.shared_in(0) == nullptr && conn.shared_in(1) == nullptr) return true;
  if (current != kNone && Unborrowed(conn.shared_region())) return true;
  for (int slot = 0; slot < kNone; ++slot) {
    const std::shared_ptr<SharedRegion>& region = conn.shared_in(slot);
    if (slot != current && region != nullptr && Unborrowed(region)) {
      return SelectRegion(conn, "", slot, /*fresh=*/false, deadline);
    }
  }
  for (int slot = 0; slot < kNone; ++slot) {
    if (conn.shared_in(slot) == nullptr) return SelectRegion(conn, "", slot, true, deadline);
  }
  return current == kNone || SelectRegion(conn, "", kNone, /*fresh=*/false, deadline);
}

}  // namespace

void DataPlaneClient::Exchange(const std::shared_ptr<State>& state, const Endpoint& peer,
                               std::vector<Pending>& calls, std::unique_ptr<DataConnection> sent) {
  absl::Time deadline = absl::InfinitePast();
  for (const Pending& call : calls) deadline = std::max(deadline, call.deadline);
  const std::string frame = RequestFrame(calls, deadline);
  std::vector<bool> answered(calls.size(), false);
  size_t left = calls.size();
  // Answers call i (once) and lets the peer take another call.
  auto answer = [&](size_t i, const absl::Status& s) {
    if (answered[i]) return;
    answered[i] = true;
    --left;
    state->Left(1);
    calls[i].done(state->Annotate(s, calls[i]));
  };
  auto elsewhere = [&] {  // Nothing was served: every call goes over gRPC.
    state->Left(static_cast<int>(calls.size()));
    for (Pending& call : calls) call.fallback();
  };
  // One attempt on `fd` (`fresh`: just connected, so it opens with the hello;
  // `was_sent`: the frame already went out): false when the peer surely took
  // none of the calls, so they may go elsewhere.
  auto attempt = [&](std::unique_ptr<DataConnection> conn, bool fresh,
                     bool was_sent = false) -> bool {
    absl::Status status;
    bool reusable = false, unserved = false;
    const std::string& bytes = fresh && !state->hello.empty() ? state->hello + frame : frame;
    if (calls.size() == 1) {
      status = state->Call(*conn, deadline, bytes, was_sent ? bytes.size() : 0, calls[0],
                           &reusable, &unserved);
      if (unserved && status.code() != absl::StatusCode::kDeadlineExceeded) return false;
      if (status.ok()) state->Served();
      if (reusable) state->GiveBack(std::move(conn));
      if (calls[0].run_graph == nullptr) {  // This thread is free: the step may go on here.
        RunReadyHereScope here;
        answer(0, status);
      } else {
        answer(0, status);
      }
      return true;
    }
    std::optional<std::pair<size_t, absl::Status>> last;
    status = state->CallBatch(*conn, deadline, bytes, calls, answer, &reusable, &unserved, &last);
    if (unserved && status.code() != absl::StatusCode::kDeadlineExceeded) return false;
    if (status.ok()) state->Served();
    if (reusable) state->GiveBack(std::move(conn));  // Every item was read.
    if (last.has_value()) {  // This thread is free: the step may go on here.
      RunReadyHereScope here;
      answer(last->first, last->second);
    }
    for (size_t i = 0; i < calls.size(); ++i) answer(i, status.ok() ? absl::InternalError(
        "the tensor data plane batch ended without this call's answer") : status);
    return true;
  };
  if (sent != nullptr && attempt(std::move(sent), false, /*was_sent=*/true)) return;
  if (auto conn = state->TakeIdle();
      conn != nullptr && ReadyRegion(*conn, deadline) && attempt(std::move(conn), false)) {
    return;
  }
  // No pooled connection, or a stale one: a fresh one, local when the peer
  // offers a local socket this process can reach (never under TLS: the
  // socket has none).
  if (!peer.local_name.empty() && state->tls == nullptr) {
    if (const int fd = ConnectLocal(peer.local_name); fd >= 0) {
      auto conn = std::make_unique<DataConnection>(fd, nullptr);
      if (SelectRegion(*conn, state->hello, 0, /*fresh=*/true, deadline) &&
          attempt(std::move(conn), false)) {
        state->Connected();
        return;
      }
    }
    state->LocalFailed(peer.local_name);  // Refused or unreachable: TCP.
  }
  const int fd = ConnectTcp(peer.host, peer.port, deadline);
  if (fd < 0) {
    state->ConnectFailed();
    elsewhere();
    return;
  }
  auto conn = std::make_unique<DataConnection>(fd, state->tls);
  // At most 10 s for the TLS handshake, like the TCP one.
  if (absl::Status s = conn->Handshake(std::min(deadline, absl::Now() + absl::Seconds(10)));
      !s.ok()) {
    state->HandshakeFailed(s, /*rejected=*/!conn->closed() &&
                                  s.code() != absl::StatusCode::kDeadlineExceeded);
    elsewhere();
    return;
  }
  state->Connected();
  if (!attempt(std::move(conn), true)) {  // Refused (the peer's connection caps): gRPC serves them.
    state->Refused();
    elsewhere();
  }
}

}  // namespace dflow
