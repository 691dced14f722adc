// The RecvTensor data plane's two ends (sender: DataPlaneServer, whose loop
// is tensor_data_plane_server.cc; receiver: DataPlaneClient,
// tensor_data_plane_client.cc). Tensors move over plain TCP connections beside
// gRPC, written by the sender straight from the tensor's buffer and received
// straight into the destination tensor (no HTTP/2 framing, no protobuf, no 2
// GiB cap). gRPC stays the control plane and the fallback, as TensorFlow's
// verbs/gdr/mpi transports did.
//
// How the two ends agree to use it, the frames and the mutual TLS they may
// travel in: data_plane_frames.h.
//
// Bounds (DataPlaneServer::Options): one event-loop thread serves every
// connection; connections are capped per peer address and in all (more are
// answered "not served" and closed at once; under TLS just closed); an idle
// connection is closed after idle_timeout, a request that has not fully
// arrived frame_timeout after its first byte (a TLS handshake: after the
// accept), a response the receiver takes no byte of for
// send_stall_timeout. A request's buffer grows as its bytes arrive. The
// receiver (DataPlaneClient) falls back to gRPC whenever the data plane cannot
// serve a call (no connection, "not served"), and after a refusal stays on
// gRPC for a back-off of 0.1 s doubling to 10 s. Connections use TCP
// keepalive (a vanished host fails a parked call within about a minute).
//
//   DataPlaneServer dp(&worker);
//   RETURN_IF_ERROR(dp.Start("127.0.0.1"));                // sender, port dp.port()
//   DataPlaneClient client("/job:ps/replica:0/task:0 (127.0.0.1:2222)", true);
//   client.OnNegotiated("127.0.0.1", dp.port(), dp.local_name());  // receiver
//   client.TryRecvTensorAsync(opts, &req, &result, done, fallback);
#ifndef DFLOW_DISTRIBUTED_RPC_TENSOR_DATA_PLANE_H_
#define DFLOW_DISTRIBUTED_RPC_TENSOR_DATA_PLANE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dflow/distributed/rpc/data_plane_frames.h"
#include "dflow/distributed/worker_interface.h"

namespace dflow {

class DataConnection;

class DataPlaneTls;

// Sender side: serves RecvTensor of `worker` on its own TCP port, every
// connection on one event-loop thread (nonblocking sockets, epoll). Start and
// Stop may be called from any thread; the rest is the loop's.
class DataPlaneServer {
 public:
  struct Options {
    int max_connections = 1024;                             // In all.
    int max_connections_per_peer = 128;                     // Per remote IP address.
    absl::Duration idle_timeout = absl::Seconds(60);        // No call, no request byte.
    absl::Duration frame_timeout = absl::Seconds(10);       // A request, from its first byte.
    absl::Duration send_stall_timeout = absl::Seconds(60);  // A response not read on.
    std::string auth_token;  // Non-empty: a connection's first frame must be a hello with it.
    // Set (a kServer context): every connection is TLS (data_plane_connection.h);
    // its handshake is bounded by frame_timeout from the accept.
    std::shared_ptr<const DataPlaneTls> tls;
    // Also listen on an abstract AF_UNIX socket with a random name, for
    // receivers on this host. It is as open as the TCP port without TLS (any
    // local process may connect; the token is the check), so it is never
    // opened when `tls` is set.
    bool local_socket = true;
    // Answer tensors of 64 KiB and more through the shared region a local
    // receiver offers (kind 6); false: always inline.
    bool shared_memory = true;
  };

  explicit DataPlaneServer(WorkerInterface* worker) : DataPlaneServer(worker, Options()) {}
  DataPlaneServer(WorkerInterface* worker, Options options);
  ~DataPlaneServer();  // Stops.
  DataPlaneServer(const DataPlaneServer&) = delete;
  DataPlaneServer& operator=(const DataPlaneServer&) = delete;

  // Listens on `bind_host` ("127.0.0.1", "0.0.0.0"), kernel-chosen port.
  absl::Status Start(const std::string& bind_host);
  int port() const { return port_; }
  // The local socket's abstract name (no leading NUL); "" when none.
  const std::string& local_name() const { return local_name_; }
  // What the sender offers in negotiation: port() and local_name().
  DataPlanePort offer() const;
  // Closes the listener and every connection (parked calls are abandoned),
  // joins the loop. Idempotent.
  void Stop();

  // Connections open now, and those refused (caps) or closed by a timeout so
  // far; for tests and monitoring.
  int num_connections() const { return num_connections_.load(); }
  int64_t num_refused() const { return num_refused_.load(); }
  int64_t num_timed_out() const { return num_timed_out_.load(); }
  // Connections closed for a missing or wrong token.
  int64_t num_unauthenticated() const { return num_unauthenticated_.load(); }
  // Connections accepted on the local socket so far.
  int64_t num_local_accepted() const { return num_local_accepted_.load(); }
  // Tensor bytes answered through receivers' shared regions (kind 6).
  int64_t num_shared_bytes() const { return num_shared_bytes_.load(); }
  // TLS handshakes that failed (a refused certificate, not TLS, a peer gone).
  int64_t num_handshake_failures() const { return num_handshake_failures_.load(); }
  // Requests (single, batch or RunGraph frames) handed to the worker so far.
  int64_t num_requests() const { return num_requests_.load(); }
  // Answers taken up by the thread that finished the call, the loop being
  // idle, rather than by the loop's thread (plaintext connections only).
  int64_t num_answered_inline() const { return num_answered_inline_.load(); }

 private:
  class Loop;

  WorkerInterface* const worker_;
  const Options options_;
  int port_ = 0;
  std::string local_name_;
  std::atomic<int> num_connections_{0};
  std::atomic<int64_t> num_local_accepted_{0};
  std::atomic<int64_t> num_shared_bytes_{0};
  std::atomic<int64_t> num_refused_{0};
  std::atomic<int64_t> num_timed_out_{0};
  std::atomic<int64_t> num_unauthenticated_{0};
  std::atomic<int64_t> num_handshake_failures_{0};
  std::atomic<int64_t> num_requests_{0};
  std::atomic<int64_t> num_answered_inline_{0};
  absl::Mutex mu_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  std::unique_ptr<Loop> loop_ ABSL_GUARDED_BY(mu_);
};

// Receiver side, one per peer: the negotiation state and a pool of idle
// connections. Thread-safe. Calls wait on a data-plane thread (a
// process-wide cached pool), or for a RunGraph on the thread that waits for
// it (LendWaitingThread), which never waits for anything else; at most
// kMaxInFlight calls per peer, more go over gRPC. A data-plane thread that
// has read the last answer of its exchange has nothing else to do: it
// answers that call inside a RunReadyHereScope (runtime/executor.h), so the
// step goes on on that thread rather than waking a pool thread.
class DataPlaneClient {
 public:
  static constexpr int kMaxInFlight = 32;
  static constexpr int kMaxIdleConnections = 32;
  // A RunGraph request up to this size goes out from the caller's thread on a
  // pooled connection: far below any socket's send buffer, so the send never
  // waits for the peer.
  static constexpr size_t kInlineRequestBytes = 16 << 10;

  // `peer_name` names the peer in errors; `enabled` false: never used.
  // `auth_token` non-empty: every fresh connection starts with a hello
  // carrying it.
  // `tls` set (a kClient context): connections are mutual TLS
  // (data_plane_connection.h); a failed handshake sends the call to gRPC.
  DataPlaneClient(std::string peer_name, bool enabled, const std::string& auth_token = "",
                  std::shared_ptr<const DataPlaneTls> tls = nullptr);
  ~DataPlaneClient();

  // Whether the next gRPC RecvTensor should carry the query.
  bool ShouldQuery() const;
  // The peer answered: `port` 0 means it has no data plane. A non-empty
  // `local_name` is its local socket, tried first (and, once it cannot be
  // reached, no more).
  void OnNegotiated(const std::string& host, int port, const std::string& local_name = "");
  bool ready() const;
  // The last failed TLS handshake, naming the peer and OpenSSL's reason; ""
  // when none failed.
  std::string last_handshake_error() const;

  // When ready, not too busy and not backing off, runs the call on the data
  // plane and returns true: `done` gets its status (errors name the peer like
  // the gRPC path), or, when the peer surely did not take the call (no
  // connection, "not served", the request not all sent), `fallback` runs
  // instead. Returns false and does nothing otherwise.
  // Calls waiting together for a data-plane thread go out as one batch
  // request (at most kMaxBatchCalls, 64 KiB), answered item by item.
  bool TryRecvTensorAsync(const CallOptions& opts, const tensorflow::RecvTensorRequest* req,
                          RecvTensorResult* resp, StatusCallback done,
                          std::function<void()> fallback);

  // RunGraph on the peer over the data plane (kRunGraphMagic), like
  // TryRecvTensorAsync: false when not ready or the request is over 1 MiB.
  // A small request on a pooled connection is sent before this returns, and
  // its answer is awaited by the caller's thread when that thread is waiting
  // for the call (WaitForCall), else by a data-plane thread.
  bool TryRunGraphAsync(const CallOptions& opts, const tensorflow::RunGraphRequest* req,
                        tensorflow::RunGraphResponse* resp, StatusCallback done,
                        std::function<void()> fallback);

  // A call waiting to be sent: a RecvTensor into `resp`, or a RunGraph into
  // `run_graph` when set.
  struct Pending {
    absl::Time deadline = absl::InfiniteFuture();
    std::string request;  // RecvTensorRequest or RunGraphRequest bytes.
    RecvTensorResult* resp = nullptr;
    tensorflow::RunGraphResponse* run_graph = nullptr;
    StatusCallback done;
    std::function<void()> fallback;
  };

 private:
  struct State;
  // On a data-plane thread: sends what is pending (one batch), and again
  // while more is.
  static void Flush(const std::shared_ptr<State>& state);
  // Sends `calls` to host:port (a pooled connection, else a fresh one) and
  // answers each, or runs every fallback when the peer took none. `sent`:
  // a pooled connection on which the calls' whole frame already went out.
  struct Endpoint {
    std::string host;
    int port = 0;
    std::string local_name;  // "": TCP only.
  };
  static void Exchange(const std::shared_ptr<State>& state, const Endpoint& peer,
                       std::vector<Pending>& calls,
                       std::unique_ptr<DataConnection> sent = nullptr);
  std::shared_ptr<State> state_;
};

}  // namespace dflow

#endif  // DFLOW_DISTRIBUTED_RPC_TENSOR_DATA_PLANE_H_
