// DataPlaneServer: the sending side of the tensor data plane (frames in
// tensor_data_plane.h), every connection served by one event-loop thread.
//
// A connection is in one of four states:
//   handshaking  (TLS only) SSL_accept's steps as the socket allows; bounded
//            by frame_timeout from the accept, like a request's bytes;
//   reading  a request's header and body arrive (EPOLLIN); nothing yet: idle;
//   waiting  the worker was asked for the tensor (or a batch's tensors); any
//            byte or hang-up from the receiver now abandons the call
//            (EPOLLIN | EPOLLRDHUP);
//   writing  the response goes out as the socket takes it (EPOLLOUT), straight
//            from the tensor's buffer; then reading again (a batch: the next
//            answered item, or waiting again until all are written).
// The worker's answer comes on its own thread: when the loop is idle, waiting
// for events, that thread writes it (Completions::Post); else it is queued and
// the loop woken through an eventfd. Either way one thread at a time touches
// the connections. Every state has a deadline (Options), checked each turn.
// Connections come from the TCP listener and, when Options::local_socket, from
// an abstract AF_UNIX listener for receivers on this host; both are served the
// same way.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "dflow/distributed/rpc/data_plane_connection.h"
#include "dflow/distributed/rpc/security.h"
#include "dflow/distributed/rpc/tensor_data_plane.h"
#include "dflow/framework/status.h"

namespace dflow {

namespace {

using data_plane::RequestHeader;
using data_plane::ResponseHeader;

constexpr uint64_t kListenId = 0;
constexpr uint64_t kWakeId = 1;
constexpr uint64_t kLocalListenId = 2;
constexpr size_t kReadChunk = 16 << 10;     // Request bytes read at a time.
constexpr size_t kWriteQuantum = 16 << 20;  // Then other connections get a turn.
constexpr int kAcceptsPerTurn = 256;

// One RecvTensor handed to the worker. The worker's callback fills `status`
// and `result` before queueing it; the loop reads them after taking it off
// the queue (the queue's mutex orders the two).
struct ServerCall {
  uint64_t connection_id = 0;
  uint64_t batch_id = 0;  // 0: a single call; else its batch and its index there.
  uint32_t index = 0;
  tensorflow::RecvTensorRequest req;
  RecvTensorResult result;
  absl::Status status;
  // A RunGraph call instead (a 'DFRG' request) when set.
  struct RunGraph {
    tensorflow::RunGraphRequest req;
    tensorflow::RunGraphResponse resp;
  };
  std::unique_ptr<RunGraph> run_graph;
};

// Calls the worker has answered, shared with the worker's callbacks so that a
// callback arriving after Stop finds it closed.
struct Completions {
  ~Completions() {
    if (efd >= 0) ::close(efd);
  }
  // Queues `call`'s answer. When the loop's state is free (its thread waits
  // for events), the thread that finished the call writes the answer itself
  // (`drain`): waking the loop would cost a wake-up and two context switches
  // on the step's path (a ps's parameters, a worker's gradient, a RunGraph's
  // end). Else the loop is woken, or will find it: whoever holds `loop_mu`
  // takes the whole queue after this push.
  void Post(std::shared_ptr<ServerCall> call) {
    const bool drain_here = loop_mu.TryLock();  // Never waits: the loop may be busy.
    {
      absl::MutexLock l(&mu);
      if (closed) {  // Set under loop_mu: the loop is gone, and with it `drain`'s target.
        if (drain_here) loop_mu.Unlock();
        return;
      }
      done.push_back(std::move(call));
      if (!drain_here && done.size() == 1) Wake();
    }
    if (drain_here) {
      drain();
      loop_mu.Unlock();
    }
  }
  void Wake() {
    const uint64_t one = 1;
    (void)!::write(efd, &one, sizeof(one));
  }

  int efd = -1;
  // The loop's state (its connections): held by the loop's thread except
  // while it waits in epoll_wait, or by a thread answering in Post. Taken
  // before `mu`, never after.
  absl::Mutex loop_mu;
  // Writes the queued answers; with loop_mu held. Set before the loop starts.
  std::function<void()> drain;
  absl::Mutex mu;
  bool closed ABSL_GUARDED_BY(mu) = false;
  bool stop ABSL_GUARDED_BY(mu) = false;
  std::vector<std::shared_ptr<ServerCall>> done ABSL_GUARDED_BY(mu);
};

int EpollTimeoutMs(absl::Time now, absl::Time deadline) {
  if (deadline == absl::InfiniteFuture()) return 1000;
  const int64_t ms = absl::ToInt64Milliseconds(deadline - now) + 1;
  return static_cast<int>(std::clamp<int64_t>(ms, 0, 1000));
}

}  // namespace

class DataPlaneServer::Loop {
 public:
  // Owns both listening sockets; `local_fd` is -1 without a local socket.
  Loop(DataPlaneServer* server, int listen_fd, int local_fd)
      : server_(server), listen_fd_(listen_fd), local_fd_(local_fd) {}
  ~Loop() {
    connections_.clear();  // Closes their sockets.
    if (epoll_fd_ >= 0) ::close(epoll_fd_);
    ::close(listen_fd_);
    if (local_fd_ >= 0) ::close(local_fd_);
  }

  absl::Status Start() {
    epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
    completions_->efd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    completions_->drain = [this] {
      TakeCompletions(absl::Now(), /*on_loop=*/false);  // A stop is the loop thread's to act on.
    };
    if (epoll_fd_ < 0 || completions_->efd < 0 || !Watch(listen_fd_, kListenId, EPOLLIN) ||
        (local_fd_ >= 0 && !Watch(local_fd_, kLocalListenId, EPOLLIN)) ||
        !Watch(completions_->efd, kWakeId, EPOLLIN)) {
      return absl::InternalError(
          absl::StrCat("[DataPlane] cannot set up its event loop: ", std::strerror(errno)));
    }
    thread_ = std::thread([this] { Run(); });
    return absl::OkStatus();
  }

  // Ends the loop (connections closed, parked calls abandoned) and joins it.
  void Stop() {
    {
      absl::MutexLock l(&completions_->mu);
      completions_->stop = true;
      completions_->Wake();
    }
    if (thread_.joinable()) thread_.join();
  }

 private:
  enum class State { kHandshaking, kReading, kWaiting, kWriting };
  // The calls of one batch request: answered items wait in `ready` until the
  // connection is free to write them, in the order the worker answered.
  struct Batch {
    uint64_t id = 0;
    int size = 0;
    int written = 0;
    std::deque<std::shared_ptr<ServerCall>> ready;
  };
  struct Connection {
    uint64_t id = 0;
    int fd = -1;                         // io's socket.
    std::unique_ptr<DataConnection> io;  // Owns fd; plaintext or TLS.
    uint64_t peer = 0;  // PeerKey: what the per-peer cap counts by.
    uint32_t events = 0;
    State state = State::kReading;
    absl::Time last_activity;  // Reading: when the connection became idle.
    absl::Time accepted;       // Handshaking: since when.
    bool authenticated = false;  // Its hello carried the token (or none is needed).
    // The request being read.
    absl::Time frame_start;
    RequestHeader header{};
    size_t header_got = 0;
    std::string body;
    // The call with the worker, or the batch of calls.
    std::shared_ptr<ServerCall> call;
    std::unique_ptr<Batch> batch;
    absl::Time call_deadline = absl::InfiniteFuture();
    // The response being written; its iovecs point into these.
    uint32_t item_prefix[2] = {};  // A batch item's magic and index.
    ResponseHeader response{};
    std::vector<int64_t> dims;
    std::string payload;
    Tensor tensor;
    uint64_t shared_offset = 0;  // Of a kTensorShared answer.
    uint64_t shared_used = 0;    // Bytes of the shared region this request's answers took.
    iovec iov[4] = {};
    int iov_next = 0;
    int iov_count = 0;
    absl::Time last_progress;

    bool mid_frame() const { return header_got > 0; }
    // The frame read so far is consumed: the next one starts.
    void NextFrame() {
      header_got = 0;
      std::string().swap(body);
    }
  };

  bool Watch(int fd, uint64_t id, uint32_t events) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = id;
    return ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) == 0;
  }
  void SetEvents(Connection* c, uint32_t events) {
    if (c->events == events) return;
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = c->id;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c->fd, &ev);
    c->events = events;
  }
  void ListenFor(uint32_t events) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = kListenId;
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, &ev);
    if (local_fd_ >= 0) {
      ev.data.u64 = kLocalListenId;
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, local_fd_, &ev);
    }
  }

  void Run() {
    std::vector<epoll_event> events(256);
    absl::Time next = absl::InfiniteFuture();
    absl::Mutex& state = completions_->loop_mu;
    state.Lock();
    for (;;) {
      state.Unlock();  // Answers may be written meanwhile (Completions::Post).
      const int n = ::epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()),
                                 EpollTimeoutMs(absl::Now(), next));
      state.Lock();
      const absl::Time now = absl::Now();
      for (int i = 0; i < n; ++i) {
        const uint64_t id = events[i].data.u64;
        if (id == kListenId || id == kLocalListenId) {
          Accept(id == kLocalListenId, now);
        } else if (id == kWakeId) {
          uint64_t count;
          (void)!::read(completions_->efd, &count, sizeof(count));
        } else if (auto it = connections_.find(id); it != connections_.end()) {
          OnEvent(it->second.get(), events[i].events, now);
        }
      }
      if (TakeCompletions(now)) break;
      next = Expire(now);
    }
    {
      absl::MutexLock l(&completions_->mu);
      completions_->closed = true;  // Later answers from the worker are dropped.
      completions_->done.clear();
    }
    state.Unlock();
  }

  // --- accepting ---------------------------------------------------------------------------

  // What the per-peer cap counts by: a TCP peer's IPv4 address; a local peer's
  // process (several local processes are several peers).
  static uint64_t PeerKey(int fd, bool local, const sockaddr_in& addr) {
    if (!local) return addr.sin_addr.s_addr;
    ucred cred{};
    socklen_t len = sizeof(cred);
    const uint32_t pid = ::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 ? cred.pid : 0;
    return (uint64_t{1} << 32) | pid;
  }

  void Accept(bool local, absl::Time now) {
    for (int i = 0; i < kAcceptsPerTurn; ++i) {
      sockaddr_in addr{};
      socklen_t len = sizeof(addr);
      const int fd = local ? ::accept4(local_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC)
                           : ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len,
                                       SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          ListenFor(0);  // Out of descriptors: stop accepting for a moment.
          accept_paused_until_ = now + absl::Milliseconds(100);
        }
        return;
      }
      const uint64_t peer = PeerKey(fd, local, addr);
      auto per_peer = per_peer_.find(peer);
      const int from_peer = per_peer == per_peer_.end() ? 0 : per_peer->second;
      if (connections_.size() >= static_cast<size_t>(server_->options_.max_connections) ||
          from_peer >= server_->options_.max_connections_per_peer) {
        // Counted before the answer, so that whoever reads it sees the count.
        server_->num_refused_.fetch_add(1);
        if (server_->options_.tls == nullptr) SendNotServed(fd);  // TLS: no word before a handshake.
        ::close(fd);
        continue;
      }
      if (!local) data_plane::ConfigureSocket(fd);
      data_plane::SetBufferSize(fd, SO_SNDBUF);
      auto c = std::make_unique<Connection>();
      c->id = next_id_++;
      c->fd = fd;
      c->io = std::make_unique<DataConnection>(fd, server_->options_.tls);
      c->peer = peer;
      c->last_activity = now;
      c->accepted = now;
      c->state = c->io->tls() ? State::kHandshaking : State::kReading;
      c->authenticated = server_->options_.auth_token.empty();
      c->events = EPOLLIN | EPOLLRDHUP;
      if (!Watch(fd, c->id, c->events)) continue;  // c's destructor closes fd.
      ++per_peer_[peer];
      connections_.emplace(c->id, std::move(c));
      server_->num_connections_.store(static_cast<int>(connections_.size()));
      if (local) server_->num_local_accepted_.fetch_add(1);
    }
  }

  static void SendNotServed(int fd) {
    const ResponseHeader h{data_plane::kResponseMagic, data_plane::kNotServed, 0, 0, 0, 0};
    (void)!::send(fd, &h, sizeof(h), MSG_NOSIGNAL | MSG_DONTWAIT);
  }

  // Forgets `c` (gone after this) and closes its socket; with `not_served`,
  // first tells the receiver that no request of it was read.
  void Close(Connection* c, bool not_served = false) {
    if (not_served) {
      const ResponseHeader h{data_plane::kResponseMagic, data_plane::kNotServed, 0, 0, 0, 0};
      const iovec iov{const_cast<ResponseHeader*>(&h), sizeof(h)};
      size_t wrote = 0;
      (void)c->io->Write(&iov, 1, &wrote);  // Best effort: the socket is not waited for.
    }
    auto per_peer = per_peer_.find(c->peer);
    if (per_peer != per_peer_.end() && --per_peer->second <= 0) per_peer_.erase(per_peer);
    connections_.erase(c->id);  // Closes the socket, which leaves the epoll set.
    server_->num_connections_.store(static_cast<int>(connections_.size()));
  }

  // --- events ------------------------------------------------------------------------------

  void OnEvent(Connection* c, uint32_t events, absl::Time now) {
    switch (c->state) {
      case State::kHandshaking:
        OnHandshake(c, now);
        return;
      case State::kReading:
        OnReadable(c, now);
        return;
      case State::kWaiting:
        // The receiver hung up or sent bytes out of turn: abandon the call.
        Close(c);
        return;
      case State::kWriting:
        if (events & (EPOLLERR | EPOLLHUP)) {
          Close(c);
        } else {
          Flush(c, now);
        }
        return;
    }
  }

  // A TLS handshake step on `c`; reading once done. May close `c`.
  void OnHandshake(Connection* c, absl::Time now) {
    switch (c->io->StepHandshake()) {
      case DataConnection::Io::kDone:
        c->state = State::kReading;
        c->last_activity = now;
        SetEvents(c, EPOLLIN | EPOLLRDHUP);
        OnReadable(c, now);  // The hello may have come with the handshake's end.
        return;
      case DataConnection::Io::kWantRead:
        SetEvents(c, EPOLLIN | EPOLLRDHUP);
        return;
      case DataConnection::Io::kWantWrite:
        SetEvents(c, EPOLLOUT);
        return;
      default:  // Not TLS, a certificate the CA did not sign, a peer gone.
        server_->num_handshake_failures_.fetch_add(1);
        Close(c);
        return;
    }
  }

  void OnReadable(Connection* c, absl::Time now) {
    for (;;) {
      char* into;
      size_t want;
      if (c->header_got < sizeof(RequestHeader)) {
        into = reinterpret_cast<char*>(&c->header) + c->header_got;
        want = sizeof(RequestHeader) - c->header_got;
      } else {  // The body grows as its bytes arrive, never by the declared length.
        into = scratch_.data();
        want = std::min<size_t>(c->header.request_bytes - c->body.size(), scratch_.size());
      }
      size_t r = 0;
      const DataConnection::Io io = c->io->Read(into, want, &r);
      if (io == DataConnection::Io::kWantRead || io == DataConnection::Io::kWantWrite) return;
      if (io != DataConnection::Io::kDone) {  // Hung up, reset, or broken TLS.
        Close(c);
        return;
      }
      if (into == scratch_.data()) c->body.append(scratch_.data(), r);
      if (!c->mid_frame()) c->frame_start = now;
      if (c->header_got < sizeof(RequestHeader)) {
        c->header_got += r;
        if (c->header_got < sizeof(RequestHeader)) continue;
        if (c->header.magic == data_plane::kHelloMagic) {
          if (c->header.request_bytes > data_plane::kMaxTokenBytes) {
            Unauthenticated(c);
            return;
          }
        } else if (c->header.magic == data_plane::kSharedMagic
                       ? c->header.request_bytes != 0 ||
                             c->header.timeout_us > DataConnection::kSharedSlots
                   : c->header.magic == data_plane::kRunGraphMagic
                       ? c->header.request_bytes > data_plane::kMaxRunGraphRequestBytes
                       : (c->header.magic != data_plane::kRequestMagic &&
                          c->header.magic != data_plane::kBatchMagic) ||
                             c->header.request_bytes > data_plane::kMaxRequestBytes) {
          Close(c);  // Not our protocol.
          return;
        } else if (!c->authenticated) {
          Unauthenticated(c);  // A request before the hello: nothing is served.
          return;
        }
      }
      if (c->body.size() == c->header.request_bytes) {
        if (c->header.magic == data_plane::kRequestMagic ||
            c->header.magic == data_plane::kRunGraphMagic) {
          Dispatch(c, now, c->header.magic == data_plane::kRunGraphMagic);
          return;
        }
        if (c->header.magic == data_plane::kBatchMagic) {
          DispatchBatch(c, now);
          return;
        }
        if (c->header.magic == data_plane::kSharedMagic) {
          OnShared(c);
          continue;
        }
        if (!OnHello(c)) return;
      }
    }
  }

  // A complete hello on `c`: true when its token is right (or none is
  // needed) and the next frame may be read; else `c` is closed.
  bool OnHello(Connection* c) {
    const std::string& token = server_->options_.auth_token;
    if (!token.empty() && !TokensEqual(token, c->body)) {
      Unauthenticated(c);
      return false;
    }
    c->authenticated = true;
    c->NextFrame();
    return true;
  }

  // A receiver's selection of a shared-region slot (the header's timeout
  // field), with the slot's new region when a descriptor came with the
  // frame's first byte: this connection's later tensors may go through it.
  // A descriptor that is not a sealed region of the allowed size, or an empty
  // slot, selects none (the tensors come inline).
  void OnShared(Connection* c) {
    const int slot = static_cast<int>(c->header.timeout_us);
    c->NextFrame();
    const int fd = c->io->TakeReceivedFd();
    if (slot == DataConnection::kSharedSlots || !server_->options_.shared_memory) {
      if (fd >= 0) ::close(fd);
      c->io->select_shared(DataConnection::kSharedSlots);
      return;
    }
    if (fd >= 0) {
      absl::StatusOr<std::unique_ptr<SharedRegion>> region = SharedRegion::Adopt(fd);
      c->io->set_shared(slot, region.ok() ? std::move(*region) : nullptr);
    } else {
      c->io->select_shared(slot);
    }
  }

  // Closes `c` answering "not served": it sent no token, or a wrong one.
  // The bytes already sent (a request after the hello) are read and dropped
  // first, so that the close does not reset the connection before the
  // receiver has read the answer.
  void Unauthenticated(Connection* c) {
    server_->num_unauthenticated_.fetch_add(1);
    for (size_t drained = 0; drained < 2 * data_plane::kMaxRequestBytes;) {
      size_t r = 0;
      if (c->io->Read(scratch_.data(), scratch_.size(), &r) != DataConnection::Io::kDone) break;
      drained += r;
    }
    Close(c, /*not_served=*/true);
  }

  // A single request: a RecvTensor, or with `run_graph` a RunGraph (the worker
  // runs the step; its RunGraphResponse is the answer).
  void Dispatch(Connection* c, absl::Time now, bool run_graph) {
    auto call = std::make_shared<ServerCall>();
    call->connection_id = c->id;
    if (run_graph) call->run_graph = std::make_unique<ServerCall::RunGraph>();
    google::protobuf::MessageLite& req =
        run_graph ? static_cast<google::protobuf::MessageLite&>(call->run_graph->req)
                  : call->req;
    const bool parsed = req.ParseFromString(c->body);
    const size_t request_bytes = c->body.size();
    const uint64_t timeout_us = c->header.timeout_us;
    c->NextFrame();
    c->shared_used = 0;  // The receiver selected a region no tensor borrows.
    if (!parsed) {
      Respond(c,
              absl::InvalidArgumentError(absl::StrCat(
                  "[DataPlane ", run_graph ? "RunGraph" : "RecvTensor", "] request of ",
                  request_bytes, " bytes does not parse as ", req.GetTypeName())),
              nullptr, now);
      return;
    }
    const CallOptions opts = Wait(c, timeout_us, now);
    c->call = call;
    server_->num_requests_.fetch_add(1);
    Ask(opts, call);
  }

  // A batch request: its body is items of u32 length + RecvTensorRequest. Each
  // item is asked of the worker at once and answered as it comes.
  void DispatchBatch(Connection* c, absl::Time now) {
    std::vector<std::shared_ptr<ServerCall>> calls;
    absl::Status bad;
    std::string_view body = c->body;
    while (!body.empty() && bad.ok()) {
      uint32_t n = 0;
      if (body.size() < sizeof(n) ||
          (std::memcpy(&n, body.data(), sizeof(n)), n > body.size() - sizeof(n))) {
        bad = absl::InvalidArgumentError(absl::StrCat(
            "[DataPlane RecvTensor] batch item ", calls.size(), " runs past its request"));
        break;
      }
      auto call = std::make_shared<ServerCall>();
      if (!call->req.ParseFromArray(body.data() + sizeof(n), static_cast<int>(n))) {
        bad = absl::InvalidArgumentError(
            absl::StrCat("[DataPlane RecvTensor] batch item ", calls.size(), " of ", n,
                         " bytes does not parse as tensorflow.RecvTensorRequest"));
      }
      body.remove_prefix(sizeof(n) + n);
      calls.push_back(std::move(call));
    }
    if (bad.ok() && (calls.empty() || calls.size() > data_plane::kMaxBatchCalls)) {
      bad = absl::InvalidArgumentError(absl::StrCat("[DataPlane RecvTensor] a batch of ",
                                                    calls.size(), " calls (1 to ",
                                                    data_plane::kMaxBatchCalls, " allowed)"));
    }
    const uint64_t timeout_us = c->header.timeout_us;
    c->NextFrame();
    c->shared_used = 0;  // The receiver selected a region no tensor borrows.
    if (!bad.ok()) {
      Respond(c, bad, nullptr, now);  // One status frame for the whole batch.
      return;
    }
    const CallOptions opts = Wait(c, timeout_us, now);
    server_->num_requests_.fetch_add(1);
    c->batch = std::make_unique<Batch>();
    c->batch->id = next_batch_id_++;
    c->batch->size = static_cast<int>(calls.size());
    for (uint32_t i = 0; i < calls.size(); ++i) {
      calls[i]->connection_id = c->id;
      calls[i]->batch_id = c->batch->id;
      calls[i]->index = i;
      Ask(opts, calls[i]);
    }
  }

  // Puts `c` in waiting until a request's timeout; returns the worker call's
  // options. The worker answers at the deadline (or its default when none);
  // the loop gives up a second later should that answer not come.
  CallOptions Wait(Connection* c, uint64_t timeout_us, absl::Time now) {
    CallOptions opts;
    if (timeout_us != std::numeric_limits<uint64_t>::max()) {
      opts.deadline = now + absl::Microseconds(static_cast<int64_t>(
                                std::min<uint64_t>(timeout_us, uint64_t{1} << 50)));
    }
    c->call_deadline = opts.deadline == absl::InfiniteFuture() ? absl::InfiniteFuture()
                                                               : opts.deadline + absl::Seconds(1);
    c->state = State::kWaiting;
    SetEvents(c, EPOLLIN | EPOLLRDHUP);
    return opts;
  }

  void Ask(const CallOptions& opts, const std::shared_ptr<ServerCall>& call) {
    auto done = [call, completions = completions_](const absl::Status& s) {
      call->status = s;
      completions->Post(call);
    };
    if (call->run_graph != nullptr) {
      server_->worker_->RunGraphAsync(opts, &call->run_graph->req, &call->run_graph->resp,
                                      std::move(done));
    } else {
      server_->worker_->RecvTensorAsync(opts, &call->req, &call->result, std::move(done));
    }
  }

  // Whether the loop should end.
  // Off the loop's thread (`on_loop` false: Completions::drain), answers on
  // TLS connections are left to the loop: after them, bytes TLS already read
  // may hold the next request, which would call the worker from inside the
  // worker's callback.
  bool TakeCompletions(absl::Time now, bool on_loop = true) {
    std::vector<std::shared_ptr<ServerCall>> done, left;
    {
      absl::MutexLock l(&completions_->mu);
      if (completions_->stop) return true;
      done.swap(completions_->done);
    }
    for (const std::shared_ptr<ServerCall>& call : done) {
      auto it = connections_.find(call->connection_id);
      if (it == connections_.end()) continue;  // Abandoned.
      Connection* c = it->second.get();
      if (!on_loop && c->io->tls()) {
        left.push_back(call);
        continue;
      }
      if (!on_loop) server_->num_answered_inline_.fetch_add(1);
      if (call->batch_id != 0) {
        if (c->batch == nullptr || c->batch->id != call->batch_id) continue;  // Abandoned.
        c->batch->ready.push_back(call);
        if (c->state == State::kWaiting) WriteNextItem(c, now);
        continue;
      }
      if (c->call != call) continue;  // Abandoned.
      c->call.reset();
      if (call->run_graph != nullptr && call->status.ok()) {
        RespondRunGraph(c, call->run_graph->resp, now);
        continue;
      }
      Respond(c, call->status, &call->result, now);
    }
    if (!left.empty()) {
      absl::MutexLock l(&completions_->mu);
      completions_->done.insert(completions_->done.begin(), left.begin(), left.end());
      completions_->Wake();
    }
    return false;
  }

  // --- responses ---------------------------------------------------------------------------

  // Starts writing a RunGraphResponse on `c`.
  void RespondRunGraph(Connection* c, const tensorflow::RunGraphResponse& resp, absl::Time now) {
    c->payload = resp.SerializeAsString();
    c->response = ResponseHeader{data_plane::kResponseMagic, data_plane::kRunGraph, 0, 0, 0,
                                 c->payload.size()};
    c->iov[0] = {&c->response, sizeof(ResponseHeader)};
    c->iov[1] = {c->payload.data(), c->payload.size()};
    c->iov_count = 2;
    c->iov_next = 0;
    c->state = State::kWriting;
    c->last_progress = now;
    Flush(c, now);
  }

  // Writes the next answered item of `c`'s batch.
  void WriteNextItem(Connection* c, absl::Time now) {
    const std::shared_ptr<ServerCall> call = std::move(c->batch->ready.front());
    c->batch->ready.pop_front();
    Respond(c, call->status, &call->result, now, static_cast<int>(call->index));
  }

  // Starts writing `status` (or, when OK, `result`) on `c`; as batch item
  // `item` when >= 0.
  void Respond(Connection* c, const absl::Status& status, const RecvTensorResult* result,
               absl::Time now, int item = -1) {
    ResponseHeader& h = c->response;
    h = ResponseHeader{data_plane::kResponseMagic, data_plane::kStatus, 0, 0, 0, 0};
    c->iov_count = 0;
    if (item >= 0) {
      c->item_prefix[0] = data_plane::kBatchItemMagic;
      c->item_prefix[1] = static_cast<uint32_t>(item);
      c->iov[c->iov_count++] = {c->item_prefix, sizeof(c->item_prefix)};
    }
    c->iov[c->iov_count++] = {&c->response, sizeof(ResponseHeader)};
    if (!status.ok()) {
      c->payload = std::string(status.message().substr(0, data_plane::kMaxMessageBytes));
      h.a = static_cast<uint32_t>(status.code());
      h.bytes = c->payload.size();
      c->iov[c->iov_count++] = {c->payload.data(), c->payload.size()};
    } else if (result->is_dead) {
      h.kind = data_plane::kDead;
      h.send_start_micros = result->send_start_micros;
    } else if (const Tensor& t = result->tensor;
               t.dtype() == DT_STRING || t.dtype() == DT_RESOURCE) {
      tensorflow::TensorProto proto;
      t.AsProtoTensorContent(&proto);
      c->payload = proto.SerializeAsString();
      h.kind = data_plane::kProto;
      h.send_start_micros = result->send_start_micros;
      h.bytes = c->payload.size();
      c->iov[c->iov_count++] = {c->payload.data(), c->payload.size()};
    } else {
      c->dims.resize(t.dims());
      for (int d = 0; d < t.dims(); ++d) c->dims[d] = t.dim_size(d);
      h.kind = data_plane::kTensor;
      h.send_start_micros = result->send_start_micros;
      h.a = static_cast<uint32_t>(t.dtype());
      h.b = static_cast<uint32_t>(c->dims.size());
      h.bytes = t.TotalBytes();
      c->iov[c->iov_count++] = {c->dims.data(), c->dims.size() * sizeof(int64_t)};
      if (WriteShared(c, t)) {
        h.kind = data_plane::kTensorShared;
        c->iov[c->iov_count++] = {&c->shared_offset, sizeof(c->shared_offset)};
      } else {
        c->tensor = t;  // Keeps the buffer alive while it is written from.
        c->iov[c->iov_count++] = {c->tensor.raw_data(), h.bytes};
      }
    }
    c->iov_next = 0;
    c->state = State::kWriting;
    c->last_progress = now;
    Flush(c, now);
  }

  // Copies `t` into `c`'s shared region after this request's earlier answers
  // (64-byte aligned), setting c->shared_offset; false when there is no
  // region, `t` is small, or it does not fit in what is left.
  bool WriteShared(Connection* c, const Tensor& t) {
    const SharedRegion* region = c->io->shared();
    const uint64_t bytes = t.TotalBytes();
    if (region == nullptr || bytes < data_plane::kMinSharedTensorBytes ||
        bytes > data_plane::kMaxSharedTensorBytes || bytes > region->size() - c->shared_used) {
      return false;
    }
    std::memcpy(region->data() + c->shared_used, t.raw_data(), bytes);
    c->shared_offset = c->shared_used;
    c->shared_used = std::min<uint64_t>(region->size(), (c->shared_used + bytes + 63) & ~uint64_t{63});
    server_->num_shared_bytes_.fetch_add(static_cast<int64_t>(bytes));
    return true;
  }

  // Writes what the socket takes (at most kWriteQuantum a turn); back to
  // reading when all is out. May close `c`.
  void Flush(Connection* c, absl::Time now) {
    size_t written = 0;
    while (c->iov_next < c->iov_count && written < kWriteQuantum) {
      if (c->iov[c->iov_next].iov_len == 0) {
        ++c->iov_next;
        continue;
      }
      size_t w = 0;
      const DataConnection::Io io =
          c->io->Write(&c->iov[c->iov_next], c->iov_count - c->iov_next, &w);
      if (io != DataConnection::Io::kDone && io != DataConnection::Io::kWantWrite) {
        Close(c);
        return;
      }
      if (w == 0) break;  // The socket takes nothing now.
      c->last_progress = now;
      written += w;
      size_t left = w;
      while (left > 0 && left >= c->iov[c->iov_next].iov_len) {
        left -= c->iov[c->iov_next].iov_len;
        c->iov[c->iov_next].iov_len = 0;
        ++c->iov_next;
      }
      if (left > 0) {
        iovec& v = c->iov[c->iov_next];
        v.iov_base = static_cast<char*>(v.iov_base) + left;
        v.iov_len -= left;
      }
    }
    if (c->iov_next == c->iov_count && c->io->HasPendingWrite()) {  // TLS records queued.
      size_t sent = 0;
      const DataConnection::Io io = c->io->FlushPendingWrite(&sent);
      if (io != DataConnection::Io::kDone && io != DataConnection::Io::kWantWrite) {
        Close(c);
        return;
      }
      if (sent > 0) c->last_progress = now;
    }
    if (c->iov_next < c->iov_count || c->io->HasPendingWrite()) {
      SetEvents(c, EPOLLOUT);
      return;
    }
    c->tensor = Tensor();
    std::string().swap(c->payload);
    c->dims.clear();
    if (c->batch != nullptr && ++c->batch->written < c->batch->size) {
      if (!c->batch->ready.empty()) {
        WriteNextItem(c, now);
      } else {
        c->state = State::kWaiting;
        SetEvents(c, EPOLLIN | EPOLLRDHUP);
      }
      return;
    }
    c->batch.reset();
    c->state = State::kReading;
    c->last_activity = now;
    SetEvents(c, EPOLLIN | EPOLLRDHUP);
    // TLS may hold bytes already taken off the socket, which epoll will not announce.
    if (c->io->HasBuffered()) OnReadable(c, now);
  }

  // --- deadlines ---------------------------------------------------------------------------

  // Acts on every deadline that has passed; returns the next one.
  absl::Time Expire(absl::Time now) {
    const Options& o = server_->options_;
    if (accept_paused_until_ != absl::InfinitePast() && now >= accept_paused_until_) {
      accept_paused_until_ = absl::InfinitePast();
      ListenFor(EPOLLIN);
    }
    absl::Time next = accept_paused_until_ == absl::InfinitePast() ? absl::InfiniteFuture()
                                                                   : accept_paused_until_;
    std::vector<std::pair<uint64_t, State>> overdue;
    for (const auto& [id, c] : connections_) {
      absl::Time due;
      switch (c->state) {
        case State::kHandshaking:
          due = c->accepted + o.frame_timeout;
          break;
        case State::kReading:
          due =
              c->mid_frame() ? c->frame_start + o.frame_timeout : c->last_activity + o.idle_timeout;
          break;
        case State::kWaiting:
          due = c->call_deadline;
          break;
        case State::kWriting:
          due = c->last_progress + o.send_stall_timeout;
          break;
      }
      if (now >= due) {
        overdue.emplace_back(id, c->state);
      } else {
        next = std::min(next, due);
      }
    }
    for (const auto& [id, state] : overdue) {
      Connection* c = connections_.find(id)->second.get();
      if (state == State::kWaiting && c->batch != nullptr) {
        // The worker answers each call at its deadline; this one did not.
        server_->num_timed_out_.fetch_add(1);
        Close(c);
        continue;
      }
      if (state == State::kWaiting) {  // The call is abandoned; the connection serves on.
        const std::shared_ptr<ServerCall> call = std::move(c->call);
        Respond(c,
                absl::DeadlineExceededError(
                    call->run_graph != nullptr
                        ? absl::StrCat("[Worker RunGraph] step ", call->run_graph->req.step_id(),
                                       " did not end by its deadline")
                        : absl::StrCat("[Worker RecvTensor] timed out waiting for '",
                                       call->req.rendezvous_key(), "' of step ",
                                       call->req.step_id())),
                nullptr, now);
        continue;
      }
      server_->num_timed_out_.fetch_add(1);
      if (state == State::kHandshaking) server_->num_handshake_failures_.fetch_add(1);
      Close(c, /*not_served=*/state == State::kReading);
    }
    return overdue.empty() ? next : now;  // A response started: look again soon.
  }

  DataPlaneServer* const server_;
  const int listen_fd_;  // Owned.
  const int local_fd_;   // Owned; -1: no local socket.
  int epoll_fd_ = -1;
  std::thread thread_;
  const std::shared_ptr<Completions> completions_ = std::make_shared<Completions>();
  // Touched by the loop thread only.
  uint64_t next_id_ = kLocalListenId + 1;
  uint64_t next_batch_id_ = 1;
  absl::flat_hash_map<uint64_t, std::unique_ptr<Connection>> connections_;
  absl::flat_hash_map<uint64_t, int> per_peer_;
  std::vector<char> scratch_ = std::vector<char>(kReadChunk);  // Request bytes land here first.
  absl::Time accept_paused_until_ = absl::InfinitePast();
};

DataPlaneServer::DataPlaneServer(WorkerInterface* worker, Options options)
    : worker_(worker), options_(options) {}

namespace {

// A listening abstract AF_UNIX socket named "dflow-data-plane-<pid>-<128 random
// bits>" (`*name`), or -1 (then no local socket; TCP still serves). The random
// part keeps anyone from binding the name first and posing as this sender.
int ListenLocal(std::string* name) {
  absl::BitGen gen;
  *name = absl::StrFormat("dflow-data-plane-%d-%016x%016x", ::getpid(), absl::Uniform<uint64_t>(gen),
                          absl::Uniform<uint64_t>(gen));
  sockaddr_un addr;
  const socklen_t len = data_plane::LocalAddress(*name, &addr);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), len) == 0 &&
      ::listen(fd, 1024) == 0) {
    return fd;
  }
  if (fd >= 0) ::close(fd);
  name->clear();
  return -1;
}

}  // namespace

DataPlanePort DataPlaneServer::offer() const {
  DataPlanePort offer;
  offer.set_port(static_cast<uint32_t>(port_));
  offer.set_local_name(local_name_);
  return offer;
}

DataPlaneServer::~DataPlaneServer() { Stop(); }

absl::Status DataPlaneServer::Start(const std::string& bind_host) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  if (inet_pton(AF_INET, bind_host.c_str(), &addr.sin_addr) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("[DataPlane] cannot listen on '", bind_host, "': not an IPv4 address"));
  }
  absl::MutexLock l(&mu_);
  if (started_ || stopped_) {
    return absl::FailedPreconditionError("[DataPlane] already started or stopped");
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  socklen_t len = sizeof(addr);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(fd, 1024) != 0 || getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const int err = errno;
    if (fd >= 0) ::close(fd);
    return absl::UnavailableError(
        absl::StrCat("[DataPlane] cannot listen on ", bind_host, ": ", std::strerror(err)));
  }
  std::string local_name;
  const int local_fd =
      options_.local_socket && options_.tls == nullptr ? ListenLocal(&local_name) : -1;
  auto loop = std::make_unique<Loop>(this, fd, local_fd);  // Owns both from here.
  RETURN_IF_ERROR(loop->Start());
  port_ = ntohs(addr.sin_port);
  local_name_ = std::move(local_name);
  loop_ = std::move(loop);
  started_ = true;
  return absl::OkStatus();
}

void DataPlaneServer::Stop() {
  std::unique_ptr<Loop> loop;
  {
    absl::MutexLock l(&mu_);
    if (stopped_) return;
    stopped_ = true;
    loop = std::move(loop_);
  }
  if (loop != nullptr) loop->Stop();
  num_connections_.store(0);
}

}  // namespace dflow
