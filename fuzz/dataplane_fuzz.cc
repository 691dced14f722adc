// Fuzzes the RecvTensor data plane's frame handling (tensor_data_plane.h) on
// both ends, in-process over loopback TCP:
//   first byte even: the rest is what a peer writes to a DataPlaneServer (the
//     sender's event loop: hello, request, batch and RunGraph framing and
//     parsing), on a server with a token when the byte's bit 1 is set; the
//     connection is then half-closed and read until the server closes it or
//     300 ms pass;
//   first byte odd: the rest is what a peer answers a DataPlaneClient's
//     request with (the receiver's response parsing: status, tensor, dead,
//     proto and "not served" frames), then it closes the connection; with bit
//     1 set the client asks for three tensors at once (a batch request, whose
//     answer is item frames).
// Timeouts are short so an incomplete frame costs milliseconds.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "dflow/distributed/rpc/tensor_data_plane.h"
#include "dflow/framework/rendezvous.h"
#include "fuzz/cluster_util.h"
#include "fuzz/fuzz_util.h"

namespace dflow::fuzz {
namespace {

constexpr char kToken[] = "fuzz-token";
FuzzCluster* cluster;
DataPlaneServer* open_server;    // No token.
DataPlaneServer* token_server;   // Token kToken.

int Connect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Writes all of `bytes` (the peer may close first: then stops).
void WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0) return;
    p += w;
    n -= w;
  }
}

// Reads until EOF, an error or `ms` milliseconds.
void Drain(int fd, int ms) {
  char buf[4096];
  const absl::Time end = absl::Now() + absl::Milliseconds(ms);
  while (true) {
    int left = static_cast<int>(absl::ToInt64Milliseconds(end - absl::Now()));
    if (left <= 0) return;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, left) <= 0) return;
    if (::recv(fd, buf, sizeof(buf), 0) <= 0) return;
  }
}

// A fake sender for the client side: answers each connection's first request
// frame with the current response bytes, then closes it.
class FakeSender {
 public:
  FakeSender() {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::listen(listen_fd_, 16) != 0 ||
        ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      std::abort();
    }
    port_ = ntohs(addr.sin_port);
    std::thread([this] { Serve(); }).detach();
  }
  int port() const { return port_; }
  void set_response(std::string r) {
    absl::MutexLock l(&mu_);
    response_ = std::move(r);
  }

 private:
  void Serve() {
    while (true) {
      int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) continue;
      data_plane::RequestHeader h;
      if (ReadFull(fd, &h, sizeof(h)) && h.request_bytes <= data_plane::kMaxRequestBytes) {
        std::string body(h.request_bytes, '\0');
        if (ReadFull(fd, body.data(), body.size())) {
          std::string r;
          {
            absl::MutexLock l(&mu_);
            r = response_;
          }
          WriteAll(fd, r.data(), r.size());
        }
      }
      ::close(fd);
    }
  }
  static bool ReadFull(int fd, void* p, size_t n) {
    char* c = static_cast<char*>(p);
    while (n > 0) {
      pollfd pf{fd, POLLIN, 0};
      if (::poll(&pf, 1, 300) <= 0) return false;
      ssize_t r = ::recv(fd, c, n, 0);
      if (r <= 0) return false;
      c += r;
      n -= r;
    }
    return true;
  }

  int listen_fd_ = -1;
  int port_ = 0;
  absl::Mutex mu_;
  std::string response_ ABSL_GUARDED_BY(mu_);
};
FakeSender* fake;

std::string Frame(uint32_t magic, const std::string& body, uint64_t timeout_us) {
  data_plane::RequestHeader h{magic, static_cast<uint32_t>(body.size()), timeout_us};
  return std::string(reinterpret_cast<const char*>(&h), sizeof(h)) + body;
}

std::string Response(uint32_t kind, uint32_t a, uint32_t b, const std::string& rest) {
  data_plane::ResponseHeader h{data_plane::kResponseMagic, kind, 1, a, b, 0};
  h.bytes = rest.size() - (kind == data_plane::kTensor ? b * 8 : 0);
  return std::string(reinterpret_cast<const char*>(&h), sizeof(h)) + rest;
}

std::string Item(uint32_t index, const std::string& response) {
  const uint32_t prefix[2] = {data_plane::kBatchItemMagic, index};
  return std::string(reinterpret_cast<const char*>(prefix), sizeof(prefix)) + response;
}

std::string Batch(const std::vector<std::string>& requests, uint64_t timeout_us) {
  std::string body;
  for (const std::string& r : requests) {
    const uint32_t n = static_cast<uint32_t>(r.size());
    body.append(reinterpret_cast<const char*>(&n), sizeof(n));
    body += r;
  }
  return Frame(data_plane::kBatchMagic, body, timeout_us);
}

}  // namespace

std::vector<std::string> Seeds() {
  // Requests: for a tensor that is never sent (the call times out), with a
  // hello before it for the token server, and a malformed key.
  tensorflow::RecvTensorRequest req;
  req.set_step_id(3);
  req.set_rendezvous_key(
      Rendezvous::CreateKey("/job:worker/replica:0/task:0/device:CPU:0", 1,
                            "/job:worker/replica:0/task:0/device:CPU:1", "t", {0, 0}));
  const std::string request = Frame(data_plane::kRequestMagic, req.SerializeAsString(), 2000);
  const std::string good_req = req.SerializeAsString();
  req.set_rendezvous_key("bad;key");
  const std::string bad = Frame(data_plane::kRequestMagic, req.SerializeAsString(), 2000);
  const std::string batch = Batch({good_req, req.SerializeAsString(), good_req}, 2000);
  tensorflow::RunGraphRequest rg;  // A graph that is not registered: an error status.
  rg.set_graph_handle("g");
  rg.set_step_id(5);
  const std::string run_graph = rg.SerializeAsString();
  const std::string hello = Frame(data_plane::kHelloMagic, kToken, 0);
  // Responses: a float tensor [2,2], a status, dead, a string tensor proto, not served.
  std::string floats(16, '\0');
  const float v[4] = {1, 2, 3, 4};
  std::memcpy(floats.data(), v, 16);
  std::string dims(16, '\0');
  const int64_t d[2] = {2, 2};
  std::memcpy(dims.data(), d, 16);
  tensorflow::TensorProto strings;
  Tensor::Vec<std::string>({"a", "bc"}).AsProtoField(&strings);
  return {
      std::string(1, '\0') + request,
      std::string(1, '\0') + bad + request,
      std::string(1, '\2') + hello + request,
      std::string(1, '\2') + Frame(data_plane::kHelloMagic, "wrong", 0) + request,
      std::string(1, '\1') + Response(data_plane::kTensor, DT_FLOAT, 2, dims + floats),
      std::string(1, '\1') + Response(data_plane::kStatus, 3, 0, "bad key"),
      std::string(1, '\1') + Response(data_plane::kDead, 0, 0, ""),
      std::string(1, '\1') + Response(data_plane::kProto, 0, 0, strings.SerializeAsString()),
      std::string(1, '\1') + Response(data_plane::kNotServed, 0, 0, ""),
      std::string(1, '\0') + batch,
      std::string(1, '\2') + hello + batch,
      std::string(1, '\3') + Item(2, Response(data_plane::kDead, 0, 0, "")) +
          Item(0, Response(data_plane::kStatus, 3, 0, "bad key")) +
          Item(1, Response(data_plane::kTensor, DT_FLOAT, 2, dims + floats)),
      std::string(1, '\3') + Response(data_plane::kStatus, 3, 0, "bad batch"),
      std::string(1, '\0') + Frame(data_plane::kRunGraphMagic, run_graph, 2000),
  };
}

}  // namespace dflow::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  using namespace dflow;
  using namespace dflow::fuzz;
  InitCommon();
  cluster = new FuzzCluster();
  cluster->NewWorkers();
  DataPlaneServer::Options opts;
  opts.idle_timeout = absl::Milliseconds(200);
  opts.frame_timeout = absl::Milliseconds(100);
  opts.send_stall_timeout = absl::Milliseconds(200);
  open_server = new DataPlaneServer(cluster->worker(kWorkerTask), opts);
  opts.auth_token = kToken;
  token_server = new DataPlaneServer(cluster->worker(kWorkerTask), opts);
  if (!open_server->Start("127.0.0.1").ok() || !token_server->Start("127.0.0.1").ok()) {
    std::abort();
  }
  fake = new FakeSender();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dflow;
  using namespace dflow::fuzz;
  if (size < 1 || size > kMaxInputBytes) return -1;
  const uint8_t mode = data[0];
  const char* rest = reinterpret_cast<const char*>(data + 1);
  if ((mode & 1) == 0) {
    int fd = Connect(((mode & 2) ? token_server : open_server)->port());
    if (fd < 0) return 0;
    WriteAll(fd, rest, size - 1);
    ::shutdown(fd, SHUT_WR);
    Drain(fd, 300);
    ::close(fd);
    return 0;
  }
  fake->set_response(std::string(rest, size - 1));
  DataPlaneClient client("/job:worker/replica:0/task:0 (fuzz)", true);
  client.OnNegotiated("127.0.0.1", fake->port());
  const int calls = (mode & 2) ? 3 : 1;
  tensorflow::RecvTensorRequest req[3];
  RecvTensorResult result[3];
  absl::Notification finished[3];
  bool took[3] = {false, false, false};
  for (int i = 0; i < calls; ++i) {
    req[i].set_step_id(1);
    req[i].set_rendezvous_key(std::string(1, static_cast<char>('k' + i)));
    took[i] = client.TryRecvTensorAsync(
        CallOptions::WithTimeout(absl::Milliseconds(300)), &req[i], &result[i],
        [&finished, i](const absl::Status&) { finished[i].Notify(); },
        [&finished, i] { finished[i].Notify(); });
  }
  for (int i = 0; i < calls; ++i) {
    if (took[i]) finished[i].WaitForNotification();
  }
  return 0;
}
