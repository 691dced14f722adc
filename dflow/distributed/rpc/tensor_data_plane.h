// The RecvTensor data plane: tensors move over plain TCP connections beside
// gRPC, written by the sender straight from the tensor's buffer and received
// straight into the destination tensor (no HTTP/2 framing, no protobuf, no 2
// GiB cap). gRPC stays the control plane and the fallback, as TensorFlow's
// verbs/gdr/mpi transports did.
//
// Negotiation (over gRPC, compatible with TensorFlow peers):
//   - the receiver (GrpcRemoteWorker) sends its first RecvTensor to a peer over
//     gRPC with RecvTensorRequest.transport_options = Any{type_url
//     kDataPlaneQueryTypeUrl, value ""}. TensorFlow ignores the field.
//   - a dflow sender with a data plane appends RecvTensorResponse.transport_options
//     (field 4) = Any{type_url kDataPlanePortTypeUrl, value = DataPlanePort
//     (dflow/proto/data_plane.proto): its TCP port and, unless
//     DFLOW_DATA_PLANE_LOCAL=0 there, the name of an abstract AF_UNIX socket} to
//     that response. No answer (a TensorFlow peer, or DFLOW_DATA_PLANE=0 there)
//     means gRPC only, for good.
//   - the receiver then connects to the local socket when the sender offers one
//     and it can reach it (same host and network namespace: connecting proves it,
//     the name is random), else to <the gRPC peer's IP address>:<port>. Same
//     frames either way; a local socket skips TCP/IP (loopback TCP costs about 3x
//     a Unix socket per 64 KiB message here, 1.4x per MiB). When no connection
//     can be made (nothing sent yet), that call goes over gRPC and the next gRPC
//     call asks again (after 3 failures in a row: gRPC only).
//
// Mutual TLS: with DataPlaneServer::Options::tls / DataPlaneClient's `tls`
// (a task started with --tls-cert/--tls-key/--tls-ca) every connection is TLS 1.3
// (data_plane_connection.h) and the frames below travel inside it unchanged.
//
// Frames on a data connection (all integers little-endian; one call at a time
// per connection, connections are pooled and reused):
//   hello:    u32 magic 'DFHL' | u32 token_bytes (<= 4 KiB) | u64 0 | the shared token
//             (security.h). Sent first on every connection by a receiver that has a
//             token; no response. A sender with a token serves nothing else first: a
//             request before a hello, or a wrong token, is answered "not served" and
//             the connection closed. A sender without a token skips hellos.
//   request:  u32 magic 'DFRQ' | u32 request_bytes (<= 64 KiB) | u64 timeout_us
//             (UINT64_MAX: no deadline) | RecvTensorRequest bytes
//   batch:    u32 magic 'DFRB' | u32 request_bytes (<= 64 KiB) | u64 timeout_us (of
//             every item) | 1 to 64 items of u32 n | n bytes of RecvTensorRequest.
//             Answered by one item frame per request, each as soon as its tensor is
//             there (any order): u32 magic 'DFRI' | u32 item index | a response
//             frame below. A batch that does not parse gets one bare status frame.
//             The receiver sends the calls waiting for a peer together (what a
//             step's executor asks for in one burst: a step's parameters, its
//             gradients), so a step makes one exchange per peer, not one per tensor.
//   shared:   u32 magic 'DFSM' | u32 0 | u64 0, passing a memfd (SCM_RIGHTS) with its
//             first byte: on a local socket without TLS, sent by the receiver right
//             after its hello (SharedRegion, data_plane_connection.h); no response.
//             The sender then may answer a tensor of 64 KiB or more with kind 6,
//             writing it into the region instead of the socket, at offsets that start
//             from 0 again at each request. A region it cannot take (not sealed, out of
//             bounds) is ignored: the tensors come inline.
//   run graph: u32 magic 'DFRG' | u32 request_bytes (<= 1 MiB) | u64 timeout_us |
//             RunGraphRequest bytes. Answered by a status frame or a kind 5 frame. A
//             master reaches a dflow peer whose data plane it knows this way (larger
//             requests, e.g. big feeds, stay on gRPC): a step's round trip without
//             HTTP/2 and gRPC's threads.
//   response: u32 magic 'DFRS' | u32 kind | i64 send_start_micros | u32 a | u32 b | u64 bytes
//             kind 0 status: a = absl code, b = 0, then `bytes` (<= 1 MiB) of message
//             kind 1 tensor: a = dtype (fixed-size), b = dims (<= 64), then b x i64 dims,
//                            then `bytes` (= elements x dtype size) of raw content
//             kind 2 dead:   a = b = bytes = 0
//             kind 3 proto:  (string / resource tensors) `bytes` of TensorProto
//             kind 4 not served: a = b = bytes = 0; the sender closes the
//                            connection without having read a request on it
//                            (refused at accept, idle, or a request too slow to
//                            arrive): the receiver sends its call elsewhere.
//             kind 5 run graph: `bytes` of RunGraphResponse (the answer to a 'DFRG')
//             kind 6 shared tensor: as kind 1, but for the raw content a u64 offset:
//                            the content is in the shared region at [offset, offset +
//                            bytes), which the receiver checks against its size
// A request the sender cannot frame (bad magic, oversized) closes the
// connection; one that does not parse gets a status frame. The sender waits
// for the tensor until the frame's timeout, the receiver closing the
// connection, or Stop.
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

#include <sys/socket.h>
#include <sys/un.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dflow/distributed/worker_interface.h"
#include "dflow/proto/data_plane.pb.h"

namespace grpc {
class ByteBuffer;
}  // namespace grpc

namespace dflow {

class DataPlaneTls;

inline constexpr char kDataPlaneQueryTypeUrl[] = "type.googleapis.com/dflow.DataPlaneQuery";
inline constexpr char kDataPlanePortTypeUrl[] = "type.googleapis.com/dflow.DataPlanePort";

// False when the environment sets DFLOW_DATA_PLANE=0 (gRPC only, both sides).
bool DataPlaneEnabledByEnv();
// False when the environment sets DFLOW_DATA_PLANE_LOCAL=0: a sender offers no
// local socket (TCP only).
bool LocalDataPlaneEnabledByEnv();
// False when the environment sets DFLOW_DATA_PLANE_SHARED=0: a sender answers
// local receivers through the socket only, never their shared regions.
bool SharedDataPlaneEnabledByEnv();

// Negotiation helpers on gRPC's raw bytes.
// The RecvTensorResponse field transport_options = Any{kDataPlanePortTypeUrl,
// offer} (field 4), encoded: what AppendDataPlaneOffer appends.
std::string EncodeDataPlaneOffer(const DataPlanePort& offer);
void AppendDataPlaneOffer(const std::string& encoded_offer, grpc::ByteBuffer* response);
// The offer in a RecvTensorResponse's transport_options; port 0 when none or
// malformed (a port out of range, a local name that is not a short printable
// string).
DataPlanePort FindDataPlaneOffer(const grpc::ByteBuffer& response);
// The address of a gRPC peer string: "ipv4:127.0.0.1:5" -> "127.0.0.1",
// "ipv6:[::1]:5" -> "::1"; "" for other forms.
std::string HostOfGrpcPeer(const std::string& peer);

namespace data_plane {
inline constexpr uint32_t kRequestMagic = 0x51524644;   // "DFRQ"
inline constexpr uint32_t kResponseMagic = 0x53524644;  // "DFRS"
inline constexpr uint32_t kHelloMagic = 0x4c484644;     // "DFHL"
inline constexpr uint32_t kBatchMagic = 0x42524644;     // "DFRB"
inline constexpr uint32_t kBatchItemMagic = 0x49524644;  // "DFRI"
inline constexpr size_t kMaxBatchCalls = 64;
inline constexpr uint32_t kRunGraphMagic = 0x47524644;  // "DFRG"
inline constexpr uint32_t kSharedMagic = 0x4d534644;    // "DFSM"
// Tensors from 64 KiB to 4 MiB go through a shared region: smaller ones cost
// more to place than to send, and for larger ones the socket wins by
// overlapping the two ends' copies (the region's are one after the other).
inline constexpr uint64_t kMinSharedTensorBytes = 64 << 10;
inline constexpr uint64_t kMaxSharedTensorBytes = 4 << 20;
inline constexpr size_t kSharedRegionBytes = 8 << 20;  // A receiver's, per connection.
inline constexpr uint32_t kMaxRunGraphRequestBytes = 1 << 20;
inline constexpr uint32_t kMaxTokenBytes = 4 << 10;
inline constexpr uint32_t kMaxRequestBytes = 64 << 10;
inline constexpr uint32_t kMaxMessageBytes = 1 << 20;
inline constexpr uint32_t kMaxDims = 64;
enum Kind : uint32_t {
  kStatus = 0,
  kTensor = 1,
  kDead = 2,
  kProto = 3,
  kNotServed = 4,
  kRunGraph = 5,
  kTensorShared = 6
};
struct RequestHeader {
  uint32_t magic;
  uint32_t request_bytes;
  uint64_t timeout_us;
};
struct ResponseHeader {
  uint32_t magic;
  uint32_t kind;
  int64_t send_start_micros;
  uint32_t a;
  uint32_t b;
  uint64_t bytes;
};
static_assert(sizeof(RequestHeader) == 16 && sizeof(ResponseHeader) == 32);

// Socket set-up shared by both ends: no Nagle delay and TCP keepalive (TCP
// only); a 4 MiB buffer (`option` SO_SNDBUF / SO_RCVBUF) where the kernel
// allows it.
void ConfigureSocket(int fd);
void SetBufferSize(int fd, int option);
// Fills `addr` with the abstract AF_UNIX address `name` (sun_path[0] = 0, no
// file); returns its length, 0 when `name` is empty or does not fit.
socklen_t LocalAddress(const std::string& name, sockaddr_un* addr);
}  // namespace data_plane

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
// connections. Thread-safe. Calls block a data-plane thread (a process-wide
// cached pool), never the caller; at most kMaxInFlight calls per peer, more
// go over gRPC.
class DataPlaneClient {
 public:
  static constexpr int kMaxInFlight = 32;
  static constexpr int kMaxIdleConnections = 32;

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
  // answers each, or runs every fallback when the peer took none.
  struct Endpoint {
    std::string host;
    int port = 0;
    std::string local_name;  // "": TCP only.
  };
  static void Exchange(const std::shared_ptr<State>& state, const Endpoint& peer,
                       std::vector<Pending>& calls);
  std::shared_ptr<State> state_;
};

}  // namespace dflow

#endif  // DFLOW_DISTRIBUTED_RPC_TENSOR_DATA_PLANE_H_
