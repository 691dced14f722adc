// The data plane's wire: how two dflow tasks agree to use it (over gRPC),
// the frames on its connections and their size caps, and the socket set-up
// both ends share. The ends are in tensor_data_plane.h.
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
//   shared:   u32 magic 'DFSM' | u32 0 | u64 slot (0, 1, or 2: none); on a local
//             socket without TLS, from the receiver, no response. With a memfd
//             passed (SCM_RIGHTS) with its first byte (the first one right after
//             the hello): the region for that slot (SharedRegion,
//             data_plane_connection.h), replacing the slot's earlier one. Either
//             way the slot is selected: the sender then may answer a tensor of 64
//             KiB or more with kind 6, writing it into the selected region instead
//             of the socket, at offsets that start from 0 again at each request.
//             The receiver selects another slot (or none) before a request when its
//             tensors still borrow the selected region. A region the sender cannot
//             take (not sealed, out of bounds) or an empty slot selects none: the
//             tensors come inline. A slot over 2 closes the connection.
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
#ifndef DFLOW_DISTRIBUTED_RPC_DATA_PLANE_FRAMES_H_
#define DFLOW_DISTRIBUTED_RPC_DATA_PLANE_FRAMES_H_

#include <sys/socket.h>
#include <sys/un.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "dflow/proto/data_plane.pb.h"

namespace grpc {
class ByteBuffer;
}  // namespace grpc

namespace dflow {

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

}  // namespace dflow

#endif  // DFLOW_DISTRIBUTED_RPC_DATA_PLANE_FRAMES_H_
