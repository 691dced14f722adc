#include "dflow/distributed/rpc/tensor_data_plane.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "dflow/distributed/cluster_spec.h"
#include "dflow/distributed/rpc/data_connection_pair_test_util.h"
#include "dflow/distributed/rpc/data_plane_connection.h"
#include "dflow/distributed/rpc/grpc_remote_worker.h"
#include "dflow/distributed/rpc/grpc_server.h"
#include "dflow/distributed/rpc/grpc_util.h"
#include "dflow/distributed/rpc/grpc_worker_service.h"
#include "dflow/distributed/rpc/throwaway_tls.h"
#include "dflow/distributed/worker.h"
#include "dflow/distributed/worker_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

using ::testing::HasSubstr;
using worker_test::Builder;
using worker_test::RandomBits;
using worker_test::SameBytes;
using worker_test::Task;

constexpr char kDst[] = "/job:worker/replica:0/task:0/device:CPU:0";
constexpr char kPeer[] = "/job:ps/replica:0/task:0 (data plane test)";

CallOptions Timeout(absl::Duration d) { return CallOptions::WithTimeout(d); }

// A task whose graph forwards the fed "x" to "edge" (bound for kDst), served
// by a data plane on 127.0.0.1; `client` is negotiated to it.
struct DataPlaneTask {
  explicit DataPlaneTask(DataPlaneServer::Options options = {},
                         std::shared_ptr<const DataPlaneTls> client_tls = nullptr)
      : task("ps", 0, 1),
        server(task.worker.get(), options),
        client(kPeer, true, "", std::move(client_tls)) {
    EXPECT_TRUE(server.Start("127.0.0.1").ok());
    client.OnNegotiated("127.0.0.1", server.port());
    const std::string c0 = task.Cpu(0);
    Builder b;
    b.Recv("x", "x", c0, task.Incarnation(0), c0, true, c0);
    b.Send("send", "x", "edge", c0, task.Incarnation(0), kDst, false, c0);
    absl::StatusOr<std::string> h =
        worker_test::Register(task.worker.get(), b.def(), Timeout(absl::Seconds(30)));
    EXPECT_TRUE(h.ok()) << h.status();
    handle = h.value_or("");
  }
  absl::Status Feed(int64_t step, const Tensor& value) {
    tensorflow::RunGraphRequest req;
    req.set_graph_handle(handle);
    req.set_step_id(step);
    *req.add_send() = worker_test::Named(task.Key(0, task.Cpu(0), "x"), value);
    tensorflow::RunGraphResponse resp;
    return task.worker->RunGraph(req, &resp, Timeout(absl::Seconds(30)));
  }
  tensorflow::RecvTensorRequest Request(int64_t step) const {
    tensorflow::RecvTensorRequest req;
    req.set_step_id(step);
    req.set_rendezvous_key(task.Key(0, kDst, "edge"));
    return req;
  }

  Task task;
  DataPlaneServer server;
  DataPlaneClient client;
  std::string handle;
};

// An asynchronous receive through `client`; `fell_back` is set when the
// client gave the call to the fallback.
struct PendingRecv {
  PendingRecv(DataPlaneClient* client, tensorflow::RecvTensorRequest request,
              const CallOptions& opts)
      : req(std::move(request)) {
    const bool started = client->TryRecvTensorAsync(
        opts, &req, &result,
        [this](const absl::Status& s) {
          status = s;
          done.Notify();
        },
        [this] {
          fell_back = true;
          done.Notify();
        });
    EXPECT_TRUE(started);
    if (!started) done.Notify();
  }
  ~PendingRecv() { done.WaitForNotificationWithTimeout(absl::Seconds(30)); }
  bool Wait(absl::Duration d = absl::Seconds(30)) { return done.WaitForNotificationWithTimeout(d); }

  tensorflow::RecvTensorRequest req;
  RecvTensorResult result;
  absl::Status status;
  bool fell_back = false;
  absl::Notification done;
};

TEST(TensorDataPlaneTest, RandomTensorsRoundTripBitExact) {
  DataPlaneTask t;
  int64_t step = 1;
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{1000}, int64_t{1} << 20, int64_t{3} << 20}) {
    const Tensor value = RandomBits(n, static_cast<uint32_t>(n + 7));
    ASSERT_TRUE(t.Feed(step, value).ok());
    PendingRecv r(&t.client, t.Request(step), Timeout(absl::Seconds(30)));
    ASSERT_TRUE(r.Wait());
    ASSERT_FALSE(r.fell_back);
    ASSERT_TRUE(r.status.ok()) << n << ": " << r.status;
    EXPECT_FALSE(r.result.is_dead);
    EXPECT_GT(r.result.send_start_micros, 0);
    EXPECT_EQ(r.result.tensor.shape(), value.shape());
    EXPECT_TRUE(SameBytes(r.result.tensor, value)) << n;
    ++step;
  }
}

// A tensor over 2 GiB (gRPC's and protobuf's limit) crosses the data plane
// whole: 600M floats made by Fill on the sender.
TEST(TensorDataPlaneTest, ATensorOverTwoGibCrosses) {
  constexpr int64_t kElements = 600'000'000;  // 2.4 GB
  Task task("ps", 0, 1);
  DataPlaneServer server(task.worker.get());
  ASSERT_TRUE(server.Start("127.0.0.1").ok());
  DataPlaneClient client(kPeer, true);
  client.OnNegotiated("127.0.0.1", server.port());
  const std::string c0 = task.Cpu(0);
  Builder b;
  b.Const("dims", Tensor::Vec<int64_t>({kElements}), c0);
  b.Const("value", Tensor::Scalar(1.5f), c0);
  tensorflow::NodeDef* fill = b.Node("big", "Fill", {"dims", "value"}, c0);
  SetAttr(fill, "T", DT_FLOAT);
  SetAttr(fill, "index_type", DT_INT64);
  b.Send("send", "big", "edge", c0, task.Incarnation(0), kDst, false, c0);
  auto handle = worker_test::Register(task.worker.get(), b.def(), Timeout(absl::Seconds(60)));
  ASSERT_TRUE(handle.ok()) << handle.status();
  tensorflow::RunGraphRequest run;
  run.set_graph_handle(*handle);
  run.set_step_id(99);
  tensorflow::RunGraphResponse ran;
  ASSERT_TRUE(task.worker->RunGraph(run, &ran, Timeout(absl::Seconds(60))).ok());
  tensorflow::RecvTensorRequest req;
  req.set_step_id(99);
  req.set_rendezvous_key(task.Key(0, kDst, "edge"));
  PendingRecv r(&client, req, Timeout(absl::Seconds(120)));
  ASSERT_TRUE(r.Wait(absl::Seconds(120)));
  ASSERT_FALSE(r.fell_back);
  ASSERT_TRUE(r.status.ok()) << r.status;
  ASSERT_EQ(r.result.tensor.NumElements(), kElements);
  auto f = r.result.tensor.flat<float>();
  for (int64_t i : {int64_t{0}, kElements / 2, (int64_t{1} << 29) + 3, kElements - 1}) {
    EXPECT_EQ(f[i], 1.5f) << i;
  }
}

// Feeds `step` a random tensor and receives it over the data plane (no
// fallback to gRPC), bit-exact.
// Step `step`'s tensor of `elements` random floats crosses the data plane bit-exact.
void ExpectServes(DataPlaneTask& t, int64_t step, int64_t elements = 1 << 16);

TEST(TensorDataPlaneTest, ARecvParksUntilTheSendHappens) {
  DataPlaneTask t;
  PendingRecv r(&t.client, t.Request(9), Timeout(absl::Seconds(30)));
  EXPECT_FALSE(r.Wait(absl::Milliseconds(300)));
  const Tensor value = RandomBits(1 << 18, 3);
  ASSERT_TRUE(t.Feed(9, value).ok());
  ASSERT_TRUE(r.Wait());
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_TRUE(SameBytes(r.result.tensor, value));
}

// A call parked at the sender is answered by the thread whose send finishes
// it while the loop waits for events; one the worker answers at once (inside
// the loop's own request handling) is the loop's to write.
TEST(TensorDataPlaneTest, AParkedCallIsAnsweredByTheThreadThatFinishesIt) {
  DataPlaneTask t;
  ExpectServes(t, 1);  // Fed before it is asked for.
  EXPECT_EQ(t.server.num_answered_inline(), 0);
  for (int64_t step = 2; step <= 4; ++step) {  // Parked, single and then in a batch.
    std::vector<std::unique_ptr<PendingRecv>> parked;
    for (int64_t k = 0; k < (step == 2 ? 1 : 3); ++k) {
      parked.push_back(std::make_unique<PendingRecv>(&t.client, t.Request(10 * step + k),
                                                     Timeout(absl::Seconds(30))));
    }
    EXPECT_FALSE(parked[0]->Wait(absl::Milliseconds(100)));
    for (int64_t k = 0; k < static_cast<int64_t>(parked.size()); ++k) {
      ASSERT_TRUE(t.Feed(10 * step + k, RandomBits(3000 + k, step + k)).ok());
    }
    for (int64_t k = 0; k < static_cast<int64_t>(parked.size()); ++k) {
      ASSERT_TRUE(parked[k]->Wait());
      ASSERT_FALSE(parked[k]->fell_back) << step;
      ASSERT_TRUE(parked[k]->status.ok()) << parked[k]->status;
      EXPECT_TRUE(SameBytes(parked[k]->result.tensor, RandomBits(3000 + k, step + k)));
    }
  }
  EXPECT_GE(t.server.num_answered_inline(), 1);
  EXPECT_LE(t.server.num_answered_inline(), 7);
}

TEST(TensorDataPlaneTest, APassedDeadlineEndsTheCallQuickly) {
  DataPlaneTask t;
  const absl::Time start = absl::Now();
  PendingRecv r(&t.client, t.Request(4), Timeout(absl::Milliseconds(500)));
  ASSERT_TRUE(r.Wait(absl::Seconds(10)));
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  EXPECT_EQ(r.status.code(), absl::StatusCode::kDeadlineExceeded) << r.status;
  EXPECT_THAT(std::string(r.status.message()), HasSubstr(kPeer));
  // The connection still serves.
  const Tensor value = RandomBits(100, 5);
  ASSERT_TRUE(t.Feed(5, value).ok());
  PendingRecv ok(&t.client, t.Request(5), Timeout(absl::Seconds(30)));
  ASSERT_TRUE(ok.Wait());
  ASSERT_TRUE(ok.status.ok()) << ok.status;
  EXPECT_TRUE(SameBytes(ok.result.tensor, value));
}

TEST(TensorDataPlaneTest, StoppingTheServerMidCallIsUnavailableNamingThePeer) {
  DataPlaneTask t;
  PendingRecv r(&t.client, t.Request(6), {});  // No deadline.
  EXPECT_FALSE(r.Wait(absl::Milliseconds(300)));
  const absl::Time start = absl::Now();
  t.server.Stop();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  ASSERT_TRUE(r.Wait(absl::Seconds(10)));
  EXPECT_FALSE(r.fell_back);
  EXPECT_EQ(r.status.code(), absl::StatusCode::kUnavailable) << r.status;
  EXPECT_THAT(std::string(r.status.message()),
              HasSubstr(std::string("[WorkerService.RecvTensor to ") + kPeer + "]"));
  // A new call cannot connect: it goes to the fallback (gRPC).
  PendingRecv again(&t.client, t.Request(7), Timeout(absl::Seconds(10)));
  ASSERT_TRUE(again.Wait());
  EXPECT_TRUE(again.fell_back);
}

int ConnectTo(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  return fd;
}

// Whether the peer closes `fd` within `d` (after any bytes it sends).
bool ClosedWithin(int fd, absl::Duration d) {
  const absl::Time end = absl::Now() + d;
  char buf[256];
  while (absl::Now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    if (::recv(fd, buf, sizeof(buf), 0) <= 0) return true;
  }
  return false;
}

TEST(TensorDataPlaneTest, GarbageClosesTheConnectionAndTheServerServesOn) {
  DataPlaneTask t;
  for (const std::string& garbage :
       {std::string("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), std::string(64, '\xff')}) {
    int fd = ConnectTo(t.server.port());
    ASSERT_EQ(::send(fd, garbage.data(), garbage.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(garbage.size()));
    EXPECT_TRUE(ClosedWithin(fd, absl::Seconds(5)));
    ::close(fd);
  }
  // A well-framed request that does not parse gets a status.
  {
    int fd = ConnectTo(t.server.port());
    const std::string body = "\x12\x7fkey";
    data_plane::RequestHeader h{data_plane::kRequestMagic, static_cast<uint32_t>(body.size()),
                                1000000};
    std::string frame(reinterpret_cast<const char*>(&h), sizeof(h));
    frame += body;
    ASSERT_EQ(::send(fd, frame.data(), frame.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(frame.size()));
    data_plane::ResponseHeader rh{};
    ASSERT_EQ(::recv(fd, &rh, sizeof(rh), MSG_WAITALL), static_cast<ssize_t>(sizeof(rh)));
    EXPECT_EQ(rh.kind, data_plane::kStatus);
    EXPECT_EQ(rh.a, static_cast<uint32_t>(absl::StatusCode::kInvalidArgument));
    ::close(fd);
  }
  const Tensor value = RandomBits(1 << 18, 11);
  ASSERT_TRUE(t.Feed(5, value).ok());
  PendingRecv r(&t.client, t.Request(5), Timeout(absl::Seconds(30)));
  ASSERT_TRUE(r.Wait());
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_TRUE(SameBytes(r.result.tensor, value));
}

// A fake sender: answers one request on each connection with `reply`, then
// waits for the receiver to hang up (or, with `die`, hangs up at once, as a
// killed process would).
class FakeSender {
 public:
  explicit FakeSender(std::string reply, bool die = false) : reply_(std::move(reply)) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    EXPECT_EQ(::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(::listen(listen_fd_, 4), 0);
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this, die] {
      while (!stop_) {
        pollfd p{listen_fd_, POLLIN, 0};
        if (::poll(&p, 1, 50) <= 0) continue;
        int fd = ::accept(listen_fd_, nullptr, nullptr);
        if (fd < 0) continue;
        data_plane::RequestHeader h;
        if (::recv(fd, &h, sizeof(h), MSG_WAITALL) == sizeof(h)) {
          std::string body(h.request_bytes, '\0');
          if (!body.empty()) ::recv(fd, body.data(), body.size(), MSG_WAITALL);
          ::send(fd, reply_.data(), reply_.size(), MSG_NOSIGNAL);
        }
        if (!die) ClosedWithin(fd, absl::Seconds(5));  // Until the receiver hangs up.
        ::close(fd);
      }
    });
  }
  ~FakeSender() {
    stop_ = true;
    thread_.join();
    ::close(listen_fd_);
  }
  int port() const { return port_; }

 private:
  std::string reply_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// A raw tensor answer's header and dims, of kind `kind`.
std::string TensorReplyHead(uint32_t kind, uint32_t dtype, const std::vector<int64_t>& dims,
                            uint64_t bytes) {
  data_plane::ResponseHeader h{data_plane::kResponseMagic,
                               kind,
                               1,
                               dtype,
                               static_cast<uint32_t>(dims.size()),
                               bytes};
  std::string out(reinterpret_cast<const char*>(&h), sizeof(h));
  out.append(reinterpret_cast<const char*>(dims.data()), dims.size() * sizeof(int64_t));
  return out;
}

std::string TensorReply(uint32_t dtype, std::vector<int64_t> dims, uint64_t bytes,
                        size_t body_bytes) {
  return TensorReplyHead(data_plane::kTensor, dtype, dims, bytes) + std::string(body_bytes, 'z');
}

// A kind 6 answer: `bytes` of `dims` at `offset` of the receiver's shared region.
std::string SharedReply(std::vector<int64_t> dims, uint64_t bytes, uint64_t offset) {
  return TensorReplyHead(data_plane::kTensorShared, DT_FLOAT, dims, bytes) +
         std::string(reinterpret_cast<const char*>(&offset), sizeof(offset));
}

TEST(TensorDataPlaneTest, LyingHeadersAreInvalidArgument) {
  struct Case {
    const char* what;
    std::string reply;
  };
  const Case cases[] = {
      {"size mismatch", TensorReply(DT_FLOAT, {10}, 8, 8)},
      {"absurd size", TensorReply(DT_FLOAT, {int64_t{1} << 50}, uint64_t{4} << 50, 16)},
      {"overflowing shape", TensorReply(DT_FLOAT, {1 << 30, 1 << 30, 1 << 30}, 16, 16)},
      {"negative dim", TensorReply(DT_FLOAT, {-4}, 16, 16)},
      {"bad dtype", TensorReply(999, {4}, 16, 16)},
      {"string dtype raw", TensorReply(DT_STRING, {1}, 32, 32)},
      {"too many dims", TensorReply(DT_FLOAT, std::vector<int64_t>(65, 1), 4, 4)},
      {"bad magic", std::string(64, 'q')},
      // Over TCP a connection has no shared region to point into.
      {"shared tensor without a region", SharedReply({1 << 16}, 1 << 18, 0)},
  };
  for (const Case& c : cases) {
    FakeSender fake(c.reply);
    DataPlaneClient client(kPeer, true);
    client.OnNegotiated("127.0.0.1", fake.port());
    tensorflow::RecvTensorRequest req;
    req.set_step_id(1);
    PendingRecv r(&client, req, Timeout(absl::Seconds(10)));
    ASSERT_TRUE(r.Wait()) << c.what;
    EXPECT_EQ(r.status.code(), absl::StatusCode::kInvalidArgument) << c.what << ": " << r.status;
    EXPECT_THAT(std::string(r.status.message()), HasSubstr(kPeer)) << c.what;
  }
}

// A header announcing more than the tensor byte limit is refused before the
// receiver allocates it (found by fuzz/dataplane_fuzz: 2 GiB reserved for a
// 32-byte reply).
TEST(TensorDataPlaneTest, HeadersOverTheTensorByteLimitAreRefusedBeforeAllocating) {
  const uint64_t saved = TensorByteLimit();
  SetTensorByteLimit(uint64_t{1} << 20);
  data_plane::ResponseHeader proto{data_plane::kResponseMagic, data_plane::kProto, 1, 0, 0,
                                   uint64_t{64} << 20};
  const std::string replies[] = {
      TensorReply(DT_FLOAT, {int64_t{16} << 20}, uint64_t{64} << 20, 16),
      std::string(reinterpret_cast<const char*>(&proto), sizeof(proto)) + "zz"};
  for (const std::string& reply : replies) {
    FakeSender fake(reply);
    DataPlaneClient client(kPeer, true);
    client.OnNegotiated("127.0.0.1", fake.port());
    tensorflow::RecvTensorRequest req;
    req.set_step_id(1);
    PendingRecv r(&client, req, Timeout(absl::Seconds(10)));
    ASSERT_TRUE(r.Wait());
    EXPECT_EQ(r.status.code(), absl::StatusCode::kInvalidArgument) << r.status;
    EXPECT_THAT(std::string(r.status.message()), HasSubstr("[RecvTensor] data plane header"))
        << r.status;
  }
  SetTensorByteLimit(saved);
}

TEST(TensorDataPlaneTest, ASenderDyingMidTensorIsUnavailableNamingThePeer) {
  FakeSender fake(TensorReply(DT_FLOAT, {1000}, 4000, 1000), /*die=*/true);
  DataPlaneClient client(kPeer, true);
  client.OnNegotiated("127.0.0.1", fake.port());
  tensorflow::RecvTensorRequest req;
  const absl::Time start = absl::Now();
  PendingRecv r(&client, req, {});  // No deadline: the hang-up alone ends it.
  ASSERT_TRUE(r.Wait(absl::Seconds(10)));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(r.status.code(), absl::StatusCode::kUnavailable) << r.status;
  EXPECT_THAT(std::string(r.status.message()),
              HasSubstr(std::string("[WorkerService.RecvTensor to ") + kPeer + "]"));
}

TEST(TensorDataPlaneTest, ConcurrentParkedRecvsAllArrive) {
  DataPlaneTask t;
  std::vector<std::unique_ptr<PendingRecv>> pending;
  for (int64_t step = 1; step <= 8; ++step) {
    pending.push_back(
        std::make_unique<PendingRecv>(&t.client, t.Request(step), Timeout(absl::Seconds(30))));
  }
  std::vector<Tensor> values;
  for (int64_t step = 8; step >= 1; --step) {  // In reverse order.
    values.insert(values.begin(), RandomBits(1000 * step, step));
    ASSERT_TRUE(t.Feed(step, values.front()).ok());
  }
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(pending[i]->Wait());
    ASSERT_TRUE(pending[i]->status.ok()) << pending[i]->status;
    EXPECT_TRUE(SameBytes(pending[i]->result.tensor, values[i])) << i;
  }
}

// Calls waiting together go out as one batch request on one connection, each
// answered as its tensor comes.
TEST(TensorDataPlaneTest, ParkedRecvsForOnePeerTravelAsOneBatch) {
  DataPlaneTask t;
  std::vector<std::unique_ptr<PendingRecv>> pending;
  for (int64_t step = 1; step <= 12; ++step) {
    pending.push_back(
        std::make_unique<PendingRecv>(&t.client, t.Request(step), Timeout(absl::Seconds(30))));
  }
  std::vector<Tensor> values;
  for (int64_t step = 1; step <= 12; ++step) {
    values.push_back(RandomBits(5000 * step, static_cast<uint32_t>(step)));
  }
  for (int64_t step : {7, 2, 12, 1, 9, 3, 4, 11, 5, 6, 10, 8}) {  // Out of order.
    ASSERT_TRUE(t.Feed(step, values[step - 1]).ok());
  }
  for (int i = 0; i < 12; ++i) {
    ASSERT_TRUE(pending[i]->Wait());
    ASSERT_FALSE(pending[i]->fell_back);
    ASSERT_TRUE(pending[i]->status.ok()) << pending[i]->status;
    EXPECT_TRUE(SameBytes(pending[i]->result.tensor, values[i])) << i;
  }
  // One call each would have taken 12 connections. The calls queued while a
  // data-plane thread wakes go together: the first usually alone, the rest in
  // one batch; a loaded machine may split them a few more times.
  EXPECT_LE(t.server.num_connections(), 6);
}

TEST(TensorDataPlaneTest, AnErrorInABatchReachesOnlyItsCall) {
  DataPlaneTask t;
  tensorflow::RecvTensorRequest bad = t.Request(3);
  bad.set_rendezvous_key("not a key");
  std::vector<std::unique_ptr<PendingRecv>> pending;
  pending.push_back(std::make_unique<PendingRecv>(&t.client, t.Request(1), Timeout(absl::Seconds(30))));
  pending.push_back(std::make_unique<PendingRecv>(&t.client, bad, Timeout(absl::Seconds(30))));
  pending.push_back(std::make_unique<PendingRecv>(&t.client, t.Request(2), Timeout(absl::Seconds(30))));
  const Tensor one = RandomBits(300, 1), two = RandomBits(400, 2);
  ASSERT_TRUE(t.Feed(1, one).ok());
  ASSERT_TRUE(t.Feed(2, two).ok());
  for (auto& p : pending) ASSERT_TRUE(p->Wait());
  EXPECT_EQ(pending[1]->status.code(), absl::StatusCode::kInvalidArgument) << pending[1]->status;
  EXPECT_THAT(std::string(pending[1]->status.message()), HasSubstr("not a key"));
  ASSERT_TRUE(pending[0]->status.ok()) << pending[0]->status;
  ASSERT_TRUE(pending[2]->status.ok()) << pending[2]->status;
  EXPECT_TRUE(SameBytes(pending[0]->result.tensor, one));
  EXPECT_TRUE(SameBytes(pending[2]->result.tensor, two));
  ExpectServes(t, 4);  // And the connection serves on.
}

// Answers every RecvTensor with `result` (other methods are never called).
class FixedRecvWorker final : public WorkerInterface {
 public:
  explicit FixedRecvWorker(RecvTensorResult result) : result_(std::move(result)) {}
  void RecvTensorAsync(const CallOptions&, const tensorflow::RecvTensorRequest*,
                       RecvTensorResult* resp, StatusCallback done) override {
    *resp = result_;
    done(absl::OkStatus());
  }
#define DFLOW_UNUSED_METHOD(Name)                                               \
  void Name##Async(const CallOptions&, const tensorflow::Name##Request*,        \
                   tensorflow::Name##Response*, StatusCallback done) override { \
    done(absl::UnimplementedError(#Name));                                      \
  }
  DFLOW_UNUSED_METHOD(GetStatus)
  DFLOW_UNUSED_METHOD(CreateWorkerSession)
  DFLOW_UNUSED_METHOD(DeleteWorkerSession)
  DFLOW_UNUSED_METHOD(RegisterGraph)
  DFLOW_UNUSED_METHOD(DeregisterGraph)
  DFLOW_UNUSED_METHOD(RunGraph)
  DFLOW_UNUSED_METHOD(CleanupGraph)
  DFLOW_UNUSED_METHOD(CleanupAll)
#undef DFLOW_UNUSED_METHOD

 private:
  const RecvTensorResult result_;
};

TEST(TensorDataPlaneTest, DeadStringAndBoolTensorsCrossTheDataPlane) {
  RecvTensorResult dead;
  dead.is_dead = true;
  RecvTensorResult text;
  text.tensor = Tensor::Vec<std::string>({"", std::string(3000, 'z'), "x\ty"});
  RecvTensorResult flags;
  flags.tensor = Tensor::Vec<bool>({true, false, true});
  for (const RecvTensorResult* want : {&dead, &text, &flags}) {
    FixedRecvWorker worker(*want);
    DataPlaneServer server(&worker);
    ASSERT_TRUE(server.Start("127.0.0.1").ok());
    DataPlaneClient client(kPeer, true);
    client.OnNegotiated("127.0.0.1", server.port());
    PendingRecv r(&client, {}, Timeout(absl::Seconds(10)));
    ASSERT_TRUE(r.Wait());
    ASSERT_TRUE(r.status.ok()) << r.status;
    EXPECT_EQ(r.result.is_dead, want->is_dead);
    if (want->is_dead) continue;
    ASSERT_EQ(r.result.tensor.dtype(), want->tensor.dtype());
    EXPECT_EQ(r.result.tensor.DebugString(10), want->tensor.DebugString(10));
  }
}

TEST(TensorDataPlaneTest, AClientWithoutANegotiatedPortDoesNothing) {
  DataPlaneClient off("x", false);
  off.OnNegotiated("127.0.0.1", 1234);
  EXPECT_FALSE(off.ready());
  EXPECT_FALSE(off.ShouldQuery());
  DataPlaneClient none("x", true);
  EXPECT_TRUE(none.ShouldQuery());
  none.OnNegotiated("127.0.0.1", 0);  // A peer without a data plane.
  EXPECT_FALSE(none.ShouldQuery());
  EXPECT_FALSE(none.ready());
  tensorflow::RecvTensorRequest req;
  RecvTensorResult result;
  EXPECT_FALSE(none.TryRecvTensorAsync(
      {}, &req, &result, [](const absl::Status&) {}, [] {}));
}

TEST(TensorDataPlaneTest, NegotiationHelpers) {
  EXPECT_EQ(HostOfGrpcPeer("ipv4:127.0.0.1:5555"), "127.0.0.1");
  EXPECT_EQ(HostOfGrpcPeer("ipv6:[::1]:5555"), "::1");
  EXPECT_EQ(HostOfGrpcPeer("ipv6:%5B::1%5D:5555"), "::1");
  EXPECT_EQ(HostOfGrpcPeer("unix:/tmp/x"), "");
  tensorflow::RecvTensorResponse resp;
  resp.set_is_dead(true);
  resp.set_send_start_micros(77);
  const grpc::ByteBuffer plain = SerializeToByteBuffer(resp);
  EXPECT_EQ(FindDataPlaneOffer(plain).port(), 0u);
  DataPlanePort offer;
  offer.set_port(40001);
  offer.set_local_name("dflow-data-plane-1-abc");
  grpc::ByteBuffer bytes = plain;
  AppendDataPlaneOffer(EncodeDataPlaneOffer(offer), &bytes);
  EXPECT_EQ(FindDataPlaneOffer(bytes).port(), 40001u);
  EXPECT_EQ(FindDataPlaneOffer(bytes).local_name(), "dflow-data-plane-1-abc");
  tensorflow::RecvTensorResponse parsed;  // Still a RecvTensorResponse to protobuf.
  ASSERT_TRUE(ParseFromByteBuffer(bytes, "response", &parsed).ok());
  EXPECT_EQ(parsed.send_start_micros(), 77);
  EXPECT_EQ(parsed.transport_options().type_url(), kDataPlanePortTypeUrl);
  // An earlier dflow's offer (a port only) still reads.
  grpc::ByteBuffer port_only = plain;
  offer.clear_local_name();
  AppendDataPlaneOffer(EncodeDataPlaneOffer(offer), &port_only);
  EXPECT_EQ(FindDataPlaneOffer(port_only).port(), 40001u);
  EXPECT_EQ(FindDataPlaneOffer(port_only).local_name(), "");
  // Offers a client must not follow: no offer at all.
  for (const std::string& name : {std::string("has space"), std::string("nul\0x", 5),
                                  std::string(200, 'n')}) {
    grpc::ByteBuffer bad = plain;
    offer.set_local_name(name);
    AppendDataPlaneOffer(EncodeDataPlaneOffer(offer), &bad);
    EXPECT_EQ(FindDataPlaneOffer(bad).port(), 0u) << name;
  }
  offer.set_local_name("");
  offer.set_port(70000);
  grpc::ByteBuffer bad_port = plain;
  AppendDataPlaneOffer(EncodeDataPlaneOffer(offer), &bad_port);
  EXPECT_EQ(FindDataPlaneOffer(bad_port).port(), 0u);
}

// The whole path: GrpcRemoteWorker asks over gRPC, then uses the data plane.
struct ServedWithDataPlane {
  explicit ServedWithDataPlane(bool offer, DataPlaneServer::Options options = {})
      : t(options), service(t.task.worker.get()) {
    if (offer) service.set_data_plane(t.server.offer());
    grpc::ServerBuilder builder;
    ConfigureServerBuilder(&builder);
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service);
    server = builder.BuildAndStart();
    address = "127.0.0.1:" + std::to_string(port);
  }
  ~ServedWithDataPlane() {
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  }
  DataPlaneTask t;  // `t.server` is the offered data plane.
  GrpcWorkerService service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  std::string address;
};

TEST(TensorDataPlaneTest, GrpcRemoteWorkerNegotiatesAndUsesTheDataPlane) {
  ServedWithDataPlane s(/*offer=*/true);
  GrpcRemoteWorker remote(NewGrpcChannel(s.address), "/job:ps (" + s.address + ")", true);
  GrpcRemoteWorker grpc_only(NewGrpcChannel(s.address), "/job:ps (" + s.address + ")", false);
  EXPECT_FALSE(remote.data_plane_ready());
  for (int64_t step = 1; step <= 4; ++step) {
    const Tensor value = RandomBits((step % 2 == 0 ? 1 << 20 : 3) + step, step);
    ASSERT_TRUE(s.t.Feed(step, value).ok());
    RecvTensorResult got;
    WorkerInterface* w = step == 4 ? &grpc_only : &remote;
    absl::Status st = w->RecvTensor(s.t.Request(step), &got, Timeout(absl::Seconds(30)));
    ASSERT_TRUE(st.ok()) << step << ": " << st;
    EXPECT_TRUE(SameBytes(got.tensor, value)) << step;
    EXPECT_TRUE(remote.data_plane_ready()) << step;  // Learned from the first answer.
  }
  EXPECT_FALSE(grpc_only.data_plane_ready());
  // Both ends in this process: the offered local socket carried the calls.
  EXPECT_FALSE(s.t.server.local_name().empty());
  EXPECT_GE(s.t.server.num_local_accepted(), 1);
  // Errors from the data plane read like gRPC's.
  RecvTensorResult got;
  tensorflow::RecvTensorRequest bad;
  bad.set_rendezvous_key("no;such;key");
  absl::Status st = remote.RecvTensor(bad, &got, Timeout(absl::Seconds(10)));
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
}

std::string RawExchange(int port, const std::string& bytes, size_t enough = SIZE_MAX);

tensorflow::RunGraphRequest FeedRequest(const DataPlaneTask& t, int64_t step, const Tensor& x) {
  tensorflow::RunGraphRequest req;
  req.set_graph_handle(t.handle);
  req.set_step_id(step);
  *req.add_send() = worker_test::Named(t.task.Key(0, t.task.Cpu(0), "x"), x);
  return req;
}

// Once a RecvTensor has found the peer's data plane, RunGraph goes there too: it
// still works with the peer's gRPC server gone.
TEST(TensorDataPlaneTest, GrpcRemoteWorkerRunsGraphsOverTheDataPlane) {
  ServedWithDataPlane s(/*offer=*/true);
  GrpcRemoteWorker remote(NewGrpcChannel(s.address), "/job:ps (" + s.address + ")", true);
  const Tensor first = RandomBits(100, 1);
  ASSERT_TRUE(s.t.Feed(1, first).ok());
  RecvTensorResult got;
  ASSERT_TRUE(remote.RecvTensor(s.t.Request(1), &got, Timeout(absl::Seconds(30))).ok());
  ASSERT_TRUE(remote.data_plane_ready());
  s.server->Shutdown(std::chrono::system_clock::now());
  const Tensor value = RandomBits(1 << 16, 2);
  tensorflow::RunGraphResponse resp;
  absl::Status st = remote.RunGraph(FeedRequest(s.t, 2, value), &resp, Timeout(absl::Seconds(30)));
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_TRUE(remote.RecvTensor(s.t.Request(2), &got, Timeout(absl::Seconds(30))).ok());
  EXPECT_TRUE(SameBytes(got.tensor, value));
  // An error of the step comes back as the worker gave it (as over gRPC).
  tensorflow::RunGraphRequest bad = FeedRequest(s.t, 3, value);
  bad.set_graph_handle("no such graph");
  st = remote.RunGraph(bad, &resp, Timeout(absl::Seconds(30)));
  EXPECT_FALSE(st.ok());
  EXPECT_THAT(std::string(st.message()), HasSubstr("graph handle 'no such graph' is not found"));
}

// Runs `run` through the client and returns the id of the thread its answer
// came on; `waited`: from inside WaitForCall, as a synchronous caller does.
std::thread::id RunGraphAnsweredOn(DataPlaneTask& t, const tensorflow::RunGraphRequest& run,
                                   bool waited) {
  tensorflow::RunGraphResponse ran;
  std::thread::id answered_on;
  auto start = [&](StatusCallback done) {
    auto answer = [&answered_on, done](const absl::Status& s) {
      answered_on = std::this_thread::get_id();
      done(s);
    };
    if (!t.client.TryRunGraphAsync(Timeout(absl::Seconds(30)), &run, &ran, answer, [] {})) {
      done(absl::InternalError("the data plane did not take the RunGraph"));
    }
  };
  absl::Status st;
  if (waited) {
    st = WaitForCall(start);
  } else {
    absl::Notification n;
    start([&](const absl::Status& s) {
      st = s;
      n.Notify();
    });
    EXPECT_TRUE(n.WaitForNotificationWithTimeout(absl::Seconds(60)));
  }
  EXPECT_TRUE(st.ok()) << st;
  return answered_on;
}

// A RunGraph whose caller waits for it goes out from the caller's thread on a
// pooled connection, and its answer comes on that thread: no call thread
// wakes in between. A caller that does not wait leaves the answer to a call
// thread, and the first RunGraph (no pooled connection yet) is a call
// thread's too.
TEST(TensorDataPlaneTest, ARunGraphIsAwaitedByTheThreadThatWaitsForIt) {
  DataPlaneTask t;
  const std::thread::id me = std::this_thread::get_id();
  EXPECT_NE(RunGraphAnsweredOn(t, FeedRequest(t, 1, RandomBits(100, 1)), true), me);
  for (int64_t step = 2; step <= 4; ++step) {
    const Tensor fed = RandomBits(1000, static_cast<uint32_t>(step));
    const bool waited = step != 3;
    EXPECT_EQ(RunGraphAnsweredOn(t, FeedRequest(t, step, fed), waited) == me, waited) << step;
    PendingRecv back(&t.client, t.Request(step), Timeout(absl::Seconds(30)));
    ASSERT_TRUE(back.Wait());
    ASSERT_TRUE(back.status.ok()) << back.status;
    EXPECT_TRUE(SameBytes(back.result.tensor, fed));
  }
  // An error of the step still comes back as the worker gave it.
  tensorflow::RunGraphRequest bad = FeedRequest(t, 5, RandomBits(10, 5));
  bad.set_graph_handle("no such graph");
  tensorflow::RunGraphResponse resp;
  const absl::Status st = WaitForCall([&](StatusCallback done) {
    if (!t.client.TryRunGraphAsync(Timeout(absl::Seconds(30)), &bad, &resp, done, [] {})) {
      done(absl::InternalError("the data plane did not take the RunGraph"));
    }
  });
  EXPECT_THAT(std::string(st.message()), HasSubstr("graph handle 'no such graph' is not found"));
  EXPECT_EQ(t.server.num_connections(), 1);  // One pooled connection carried them all.
}

TEST(TensorDataPlaneTest, ARunGraphFrameThatDoesNotParseGetsAStatusAndBigOnesStayOnGrpc) {
  DataPlaneTask t;
  data_plane::RequestHeader h{data_plane::kRunGraphMagic, 5, 1000000};
  const std::string got = RawExchange(
      t.server.port(), std::string(reinterpret_cast<const char*>(&h), sizeof(h)) + "\x0a\xff\xff\xff\x0f",
      sizeof(data_plane::ResponseHeader));
  ASSERT_GE(got.size(), sizeof(data_plane::ResponseHeader));
  data_plane::ResponseHeader rh;
  std::memcpy(&rh, got.data(), sizeof(rh));
  EXPECT_EQ(rh.kind, data_plane::kStatus);
  EXPECT_EQ(rh.a, static_cast<uint32_t>(absl::StatusCode::kInvalidArgument));
  // A request over 1 MiB (a big feed) is not taken: gRPC carries it.
  tensorflow::RunGraphResponse resp;
  const tensorflow::RunGraphRequest big = FeedRequest(t, 1, RandomBits((1 << 20) + 1000, 1));
  EXPECT_FALSE(t.client.TryRunGraphAsync(Timeout(absl::Seconds(5)), &big, &resp,
                                         [](const absl::Status&) {}, [] {}));
  ExpectServes(t, 2);
}

TEST(TensorDataPlaneTest, APeerWithoutADataPlaneStaysOnGrpc) {
  ServedWithDataPlane s(/*offer=*/false);  // As a TensorFlow worker would answer.
  GrpcRemoteWorker remote(NewGrpcChannel(s.address), "/job:ps (" + s.address + ")", true);
  for (int64_t step = 1; step <= 2; ++step) {
    const Tensor value = RandomBits(1000, step);
    ASSERT_TRUE(s.t.Feed(step, value).ok());
    RecvTensorResult got;
    absl::Status st = remote.RecvTensor(s.t.Request(step), &got, Timeout(absl::Seconds(30)));
    ASSERT_TRUE(st.ok()) << st;
    EXPECT_TRUE(SameBytes(got.tensor, value));
    EXPECT_FALSE(remote.data_plane_ready());
  }
}

// --- Bounds ------------------------------------------------------------------------------

// A field of /proc/self/status ("Threads", "VmRSS" in kB); -1 when absent.
int64_t ProcStatus(const std::string& field) {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return -1;
  char line[256];
  int64_t value = -1;
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    if (std::strncmp(line, field.c_str(), field.size()) == 0 && line[field.size()] == ':') {
      value = std::strtoll(line + field.size() + 1, nullptr, 10);
      break;
    }
  }
  std::fclose(f);
  return value;
}

template <typename Pred>
bool WaitUntil(Pred pred, absl::Duration d = absl::Seconds(10)) {
  const absl::Time end = absl::Now() + d;
  while (!pred()) {
    if (absl::Now() >= end) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return true;
}

// The first response header on `fd` (magic 0 when none came within 5 s).
data_plane::ResponseHeader FirstResponse(int fd) {
  data_plane::ResponseHeader h{};
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, 5000) == 1) ::recv(fd, &h, sizeof(h), MSG_WAITALL);
  return h;
}

std::string RequestFrame(const tensorflow::RecvTensorRequest& req) {
  const std::string body = req.SerializeAsString();
  data_plane::RequestHeader h{data_plane::kRequestMagic, static_cast<uint32_t>(body.size()),
                              30'000'000};
  return std::string(reinterpret_cast<const char*>(&h), sizeof(h)) + body;
}

void ExpectServes(DataPlaneTask& t, int64_t step, int64_t elements) {
  const Tensor value = RandomBits(elements, static_cast<uint32_t>(step));
  ASSERT_TRUE(t.Feed(step, value).ok());
  PendingRecv r(&t.client, t.Request(step), Timeout(absl::Seconds(30)));
  ASSERT_TRUE(r.Wait());
  ASSERT_FALSE(r.fell_back) << step;
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_TRUE(SameBytes(r.result.tensor, value));
}

TEST(TensorDataPlaneBoundsTest, IdleConnectionsAreClosedAsNotServed) {
  DataPlaneServer::Options options;
  options.idle_timeout = absl::Seconds(1);
  DataPlaneTask t(options);
  ExpectServes(t, 1);  // Leaves a pooled connection, which the idle timeout closes too.
  std::vector<int> fds;
  for (int i = 0; i < 20; ++i) fds.push_back(ConnectTo(t.server.port()));
  ASSERT_TRUE(WaitUntil([&] { return t.server.num_connections() == 21; }));
  for (int fd : fds) {
    EXPECT_EQ(FirstResponse(fd).kind, data_plane::kNotServed);
    EXPECT_TRUE(ClosedWithin(fd, absl::Seconds(5)));
    ::close(fd);
  }
  EXPECT_TRUE(WaitUntil([&] { return t.server.num_connections() == 0; }));
  EXPECT_GE(t.server.num_timed_out(), 21);
  ExpectServes(t, 2);  // The client notices its pooled connection went away.
  ExpectServes(t, 3);
}

TEST(TensorDataPlaneBoundsTest, HalfWrittenFramesAreClosedAfterTheFrameTimeout) {
  DataPlaneServer::Options options;
  options.frame_timeout = absl::Milliseconds(300);  // The idle timeout stays a minute.
  DataPlaneTask t(options);
  const std::string frame = RequestFrame(t.Request(1));
  int idle = ConnectTo(t.server.port());
  int half_header = ConnectTo(t.server.port());
  int half_body = ConnectTo(t.server.port());
  ASSERT_EQ(::send(half_header, frame.data(), 7, MSG_NOSIGNAL), 7);
  const size_t most = frame.size() - 3;
  ASSERT_EQ(::send(half_body, frame.data(), most, MSG_NOSIGNAL), static_cast<ssize_t>(most));
  EXPECT_TRUE(ClosedWithin(half_header, absl::Seconds(5)));
  EXPECT_TRUE(ClosedWithin(half_body, absl::Seconds(5)));
  EXPECT_FALSE(ClosedWithin(idle, absl::Milliseconds(500)));  // Not mid-frame.
  EXPECT_EQ(t.server.num_connections(), 1);
  for (int fd : {idle, half_header, half_body}) ::close(fd);
  ExpectServes(t, 2);
}

TEST(TensorDataPlaneBoundsTest, ADeclaredLengthReservesNothingUntilItsBytesArrive) {
  DataPlaneServer::Options options;
  options.max_connections = 2000;
  options.max_connections_per_peer = 2000;
  DataPlaneTask t(options);
  ExpectServes(t, 1);  // Warm up allocations.
  // Every header announces the largest request and no body follows.
  const data_plane::RequestHeader h{data_plane::kRequestMagic, data_plane::kMaxRequestBytes, 1000};
  constexpr int kConnections = 600;  // 600 x 64 KiB = 37.5 MiB if reserved.
  const int64_t rss_before_kb = ProcStatus("VmRSS");
  std::vector<int> fds;
  for (int i = 0; i < kConnections; ++i) {
    fds.push_back(ConnectTo(t.server.port()));
    ASSERT_EQ(::send(fds.back(), &h, sizeof(h), MSG_NOSIGNAL), static_cast<ssize_t>(sizeof(h)));
  }
  ASSERT_TRUE(WaitUntil([&] { return t.server.num_connections() == kConnections + 1; }));
  absl::SleepFor(absl::Milliseconds(200));  // Let the loop read every header.
  const int64_t grown_kb = ProcStatus("VmRSS") - rss_before_kb;
  EXPECT_LT(grown_kb, 8 * 1024) << "RSS grew by " << grown_kb << " kB for " << kConnections
                                << " announced 64 KiB requests";
  // A header announcing more than the largest request closes its connection.
  const data_plane::RequestHeader huge{data_plane::kRequestMagic, 1u << 31, 1000};
  int fd = ConnectTo(t.server.port());
  ASSERT_EQ(::send(fd, &huge, sizeof(huge), MSG_NOSIGNAL), static_cast<ssize_t>(sizeof(huge)));
  EXPECT_TRUE(ClosedWithin(fd, absl::Seconds(5)));
  ::close(fd);
  for (int f : fds) ::close(f);
  EXPECT_TRUE(WaitUntil([&] { return t.server.num_connections() <= 1; }));
  ExpectServes(t, 2);
}

TEST(TensorDataPlaneBoundsTest, ConnectionsUseNoThreadEach) {
  DataPlaneServer::Options options;
  options.max_connections = 2000;
  options.max_connections_per_peer = 2000;
  DataPlaneTask t(options);
  ExpectServes(t, 1);
  const int64_t threads_before = ProcStatus("Threads");
  std::vector<int> fds;
  for (int i = 0; i < 300; ++i) fds.push_back(ConnectTo(t.server.port()));
  ASSERT_TRUE(WaitUntil([&] { return t.server.num_connections() == 301; }));
  EXPECT_LT(ProcStatus("Threads") - threads_before, 5);
  ExpectServes(t, 2);  // Served among them.
  for (int fd : fds) ::close(fd);
  EXPECT_TRUE(WaitUntil([&] { return t.server.num_connections() <= 1; }));
}

TEST(TensorDataPlaneBoundsTest, ConnectionsOverTheCapsAreRefusedAndTheCallFallsBack) {
  for (const bool per_peer : {true, false}) {
    DataPlaneServer::Options options;
    options.max_connections = per_peer ? 100 : 2;
    options.max_connections_per_peer = per_peer ? 2 : 100;
    DataPlaneTask t(options);
    std::vector<int> held = {ConnectTo(t.server.port()), ConnectTo(t.server.port())};
    ASSERT_TRUE(WaitUntil([&] { return t.server.num_connections() == 2; }));
    int extra = ConnectTo(t.server.port());
    EXPECT_EQ(FirstResponse(extra).kind, data_plane::kNotServed) << per_peer;
    EXPECT_TRUE(ClosedWithin(extra, absl::Seconds(5)));
    ::close(extra);
    // The client's call is not served on the data plane: the fallback takes it.
    ASSERT_TRUE(t.Feed(1, RandomBits(100, 1)).ok());
    PendingRecv r(&t.client, t.Request(1), Timeout(absl::Seconds(30)));
    ASSERT_TRUE(r.Wait());
    EXPECT_TRUE(r.fell_back) << per_peer << ": " << r.status;
    EXPECT_GE(t.server.num_refused(), 2);
    EXPECT_EQ(t.server.num_connections(), 2);
    // After the flood (and the client's back-off) the data plane serves again.
    for (int fd : held) ::close(fd);
    ASSERT_TRUE(WaitUntil([&] { return t.server.num_connections() == 0; }));
    absl::SleepFor(absl::Milliseconds(300));  // The first back-off is 0.1 s.
    ExpectServes(t, 3);
  }
}

// Over gRPC: a data plane refusing every connection costs speed, not the call.
TEST(TensorDataPlaneBoundsTest, GrpcRemoteWorkerFallsBackWhenTheDataPlaneRefuses) {
  DataPlaneServer::Options options;
  options.max_connections = 0;
  ServedWithDataPlane s(/*offer=*/true, options);
  GrpcRemoteWorker remote(NewGrpcChannel(s.address), "/job:ps (" + s.address + ")", true);
  for (int64_t step = 1; step <= 6; ++step) {
    const Tensor value = RandomBits(1000 + step, step);
    ASSERT_TRUE(s.t.Feed(step, value).ok());
    RecvTensorResult got;
    absl::Status st = remote.RecvTensor(s.t.Request(step), &got, Timeout(absl::Seconds(30)));
    ASSERT_TRUE(st.ok()) << step << ": " << st;
    EXPECT_TRUE(SameBytes(got.tensor, value)) << step;
    absl::SleepFor(absl::Milliseconds(120));  // Past the first back-off: tried again.
  }
  EXPECT_TRUE(remote.data_plane_ready());
  EXPECT_GE(s.t.server.num_refused(), 2);
}

// A request sent into a pooled connection just as the sender closes it as
// idle is answered "not served" and retried on a fresh connection.
TEST(TensorDataPlaneBoundsTest, APooledConnectionClosedAsIdleIsRetriedFresh) {
  auto header = [](data_plane::Kind kind) {
    const data_plane::ResponseHeader h{data_plane::kResponseMagic, kind, 7, 0, 0, 0};
    return std::string(reinterpret_cast<const char*>(&h), sizeof(h));
  };
  int listen_fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::bind(listen_fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(listen_fd, 4), 0);
  getsockname(listen_fd, reinterpret_cast<sockaddr*>(&addr), &len);
  auto read_request = [](int fd) {
    data_plane::RequestHeader h{};
    if (::recv(fd, &h, sizeof(h), MSG_WAITALL) != sizeof(h)) return false;
    std::string body(h.request_bytes, '\0');
    return body.empty() || ::recv(fd, body.data(), body.size(), MSG_WAITALL) > 0;
  };
  // First connection: serves one call (a dead tensor), then answers the next
  // "not served" and closes. Second connection: serves.
  std::thread fake([&] {
    int first = ::accept(listen_fd, nullptr, nullptr);
    const std::string dead = header(data_plane::kDead);
    if (read_request(first)) ::send(first, dead.data(), dead.size(), MSG_NOSIGNAL);
    const std::string refused = header(data_plane::kNotServed);
    if (read_request(first)) ::send(first, refused.data(), refused.size(), MSG_NOSIGNAL);
    ::close(first);
    pollfd p{listen_fd, POLLIN, 0};
    if (::poll(&p, 1, 5000) != 1) return;
    int second = ::accept(listen_fd, nullptr, nullptr);
    if (read_request(second)) ::send(second, dead.data(), dead.size(), MSG_NOSIGNAL);
    ClosedWithin(second, absl::Seconds(5));
    ::close(second);
  });
  {
    DataPlaneClient client(kPeer, true);
    client.OnNegotiated("127.0.0.1", ntohs(addr.sin_port));
    for (int call = 0; call < 2; ++call) {
      PendingRecv r(&client, {}, Timeout(absl::Seconds(10)));
      ASSERT_TRUE(r.Wait());
      EXPECT_FALSE(r.fell_back) << call;
      EXPECT_TRUE(r.status.ok()) << call << ": " << r.status;
      EXPECT_TRUE(r.result.is_dead) << call;
    }
  }  // The client closes its pooled connection.
  fake.join();
  ::close(listen_fd);
}

// A GrpcServer offers its data plane; a remote worker finds and uses it.
TEST(TensorDataPlaneTest, AGrpcServerServesItsDataPlane) {
  ClusterSpec spec;
  ASSERT_TRUE(spec.AddTask("ps", 0, "127.0.0.1:0").ok());
  tensorflow::ServerDef def;
  *def.mutable_cluster() = spec.ToClusterDef();
  def.set_job_name("ps");
  def.set_task_index(0);
  def.set_protocol("grpc");
  absl::StatusOr<std::unique_ptr<GrpcServer>> server = GrpcServer::Create(def);
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_TRUE((*server)->Start().ok());
  WorkerInterface* local = (*server)->worker();
  const std::string c0 = (*server)->device_mgr()->ListDevices()[0]->name();
  const uint64_t inc = (*server)->device_mgr()->ListDevices()[0]->incarnation();
  Builder b;
  b.Recv("x", "x", c0, inc, c0, true, c0);
  b.Send("send", "x", "edge", c0, inc, kDst, false, c0);
  absl::StatusOr<std::string> h = worker_test::Register(local, b.def(), Timeout(absl::Seconds(30)));
  ASSERT_TRUE(h.ok()) << h.status();
  const std::string address = "127.0.0.1:" + std::to_string((*server)->bound_port());
  GrpcRemoteWorker remote(NewGrpcChannel(address), "/job:ps/replica:0/task:0 (" + address + ")",
                          true);
  for (int64_t step = 1; step <= 3; ++step) {
    const Tensor value = RandomBits(100000 + step, step);
    tensorflow::RunGraphRequest run;
    run.set_graph_handle(*h);
    run.set_step_id(step);
    *run.add_send() = worker_test::Named(Rendezvous::CreateKey(c0, inc, c0, "x"), value);
    tensorflow::RunGraphResponse run_resp;
    ASSERT_TRUE(local->RunGraph(run, &run_resp, Timeout(absl::Seconds(30))).ok());
    tensorflow::RecvTensorRequest req;
    req.set_step_id(step);
    req.set_rendezvous_key(Rendezvous::CreateKey(c0, inc, kDst, "edge"));
    RecvTensorResult got;
    absl::Status st = remote.RecvTensor(req, &got, Timeout(absl::Seconds(30)));
    ASSERT_TRUE(st.ok()) << st;
    EXPECT_TRUE(SameBytes(got.tensor, value));
    EXPECT_TRUE(remote.data_plane_ready());
  }
  (*server)->Stop();  // Closes the data plane too, without hanging.
}

// --- The shared token on the data plane ---------------------------------------------------

DataPlaneServer::Options WithToken(const std::string& token) {
  DataPlaneServer::Options options;
  options.auth_token = token;
  return options;
}

// Sends `bytes` on a fresh raw connection to `port` and returns every byte
// the server sends back before it closes the connection (within 10 s) or
// `enough` have arrived.
std::string RawExchange(int port, const std::string& bytes, size_t enough) {
  int fd = ConnectTo(port);
  EXPECT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(bytes.size()));
  std::string got;
  const absl::Time end = absl::Now() + absl::Seconds(10);
  char buf[4096];
  while (absl::Now() < end && got.size() < enough) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const ssize_t r = ::recv(fd, buf, sizeof(buf), 0);
    if (r <= 0) break;
    got.append(buf, r);
  }
  ::close(fd);
  return got;
}

std::string BatchFrame(const std::vector<std::string>& items) {
  std::string body;
  for (const std::string& item : items) {
    const uint32_t n = static_cast<uint32_t>(item.size());
    body.append(reinterpret_cast<const char*>(&n), sizeof(n));
    body += item;
  }
  data_plane::RequestHeader h{data_plane::kBatchMagic, static_cast<uint32_t>(body.size()),
                              30'000'000};
  return std::string(reinterpret_cast<const char*>(&h), sizeof(h)) + body;
}

TEST(TensorDataPlaneTest, ARawBatchIsAnsweredItemByItemAndABadOneWithOneStatus) {
  DataPlaneTask t;
  const Tensor one = RandomBits(64, 1), two = RandomBits(64, 2);
  ASSERT_TRUE(t.Feed(1, one).ok());
  ASSERT_TRUE(t.Feed(2, two).ok());
  // Two items: two frames "DFRI" index, each a response with its tensor.
  const size_t item_bytes = 8 + sizeof(data_plane::ResponseHeader) + 8 + 64 * sizeof(float);
  std::string got = RawExchange(
      t.server.port(),
      BatchFrame({t.Request(1).SerializeAsString(), t.Request(2).SerializeAsString()}),
      2 * item_bytes);
  ASSERT_EQ(got.size(), 2 * item_bytes);
  std::set<uint32_t> indices;
  for (size_t off = 0; off < got.size(); off += item_bytes) {
    uint32_t prefix[2];
    std::memcpy(prefix, got.data() + off, sizeof(prefix));
    EXPECT_EQ(prefix[0], data_plane::kBatchItemMagic);
    indices.insert(prefix[1]);
    data_plane::ResponseHeader h;
    std::memcpy(&h, got.data() + off + 8, sizeof(h));
    EXPECT_EQ(h.kind, data_plane::kTensor);
    EXPECT_EQ(h.bytes, 64 * sizeof(float));
  }
  EXPECT_EQ(indices, (std::set<uint32_t>{0, 1}));
  // An item running past the request, a request that does not parse, too many
  // items: one status frame naming what was wrong.
  const std::string item = t.Request(1).SerializeAsString();
  std::string past = BatchFrame({item});
  const uint32_t lie = 1000;
  past.replace(sizeof(data_plane::RequestHeader), sizeof(lie),
               reinterpret_cast<const char*>(&lie), sizeof(lie));
  for (const std::string& frame :
       {past, BatchFrame({item, "\x12\x7fkey"}), BatchFrame(std::vector<std::string>(65, item))}) {
    got = RawExchange(t.server.port(), frame, sizeof(data_plane::ResponseHeader));
    ASSERT_GE(got.size(), sizeof(data_plane::ResponseHeader));
    data_plane::ResponseHeader h;
    std::memcpy(&h, got.data(), sizeof(h));
    EXPECT_EQ(h.magic, data_plane::kResponseMagic);
    EXPECT_EQ(h.kind, data_plane::kStatus);
    EXPECT_EQ(h.a, static_cast<uint32_t>(absl::StatusCode::kInvalidArgument));
  }
  ExpectServes(t, 3);
}

std::string HelloFrame(const std::string& token) {
  data_plane::RequestHeader h{data_plane::kHelloMagic, static_cast<uint32_t>(token.size()), 0};
  return std::string(reinterpret_cast<const char*>(&h), sizeof(h)) + token;
}

// Only a "not served" header (32 bytes, kind 4), then the close: no tensor.
void ExpectNotServedOnly(const std::string& got) {
  ASSERT_EQ(got.size(), sizeof(data_plane::ResponseHeader));
  data_plane::ResponseHeader h;
  std::memcpy(&h, got.data(), sizeof(h));
  EXPECT_EQ(h.magic, data_plane::kResponseMagic);
  EXPECT_EQ(h.kind, data_plane::kNotServed);
  EXPECT_EQ(h.bytes, 0u);
}

TEST(TensorDataPlaneAuthTest, ARawClientWithoutTheTokenGetsNoTensorBytes) {
  DataPlaneTask t(WithToken("s3cret-token"));
  const Tensor value = RandomBits(1 << 16, 3);
  ASSERT_TRUE(t.Feed(1, value).ok());  // The tensor is there to be taken.
  // A request without a hello; a wrong token; an oversized hello.
  ExpectNotServedOnly(RawExchange(t.server.port(), RequestFrame(t.Request(1))));
  ExpectNotServedOnly(
      RawExchange(t.server.port(), HelloFrame("s3cret-tokeN") + RequestFrame(t.Request(1))));
  ExpectNotServedOnly(RawExchange(t.server.port(), HelloFrame(std::string(5000, 'x'))));
  EXPECT_EQ(t.server.num_unauthenticated(), 3);
  // The right token on a raw connection is served, and the tensor was still there.
  const size_t full = sizeof(data_plane::ResponseHeader) + sizeof(int64_t) + value.TotalBytes();
  const std::string got =
      RawExchange(t.server.port(), HelloFrame("s3cret-token") + RequestFrame(t.Request(1)), full);
  ASSERT_EQ(got.size(), full);
  data_plane::ResponseHeader h;
  std::memcpy(&h, got.data(), sizeof(h));
  EXPECT_EQ(h.kind, data_plane::kTensor);
  EXPECT_EQ(h.bytes, value.TotalBytes());
  EXPECT_EQ(std::memcmp(got.data() + got.size() - value.TotalBytes(), value.raw_data(),
                        value.TotalBytes()),
            0);
}

TEST(TensorDataPlaneAuthTest, AClientWithTheTokenIsServedOthersFallBack) {
  DataPlaneTask t(WithToken("s3cret-token"));
  DataPlaneClient right(kPeer, true, "s3cret-token");
  DataPlaneClient wrong(kPeer, true, "other-token");
  right.OnNegotiated("127.0.0.1", t.server.port());
  wrong.OnNegotiated("127.0.0.1", t.server.port());
  // t.client has no token at all.
  for (DataPlaneClient* refused : {&t.client, &wrong}) {
    PendingRecv r(refused, t.Request(1), Timeout(absl::Seconds(10)));
    ASSERT_TRUE(r.Wait());
    EXPECT_TRUE(r.fell_back);  // To gRPC, which checks the token itself.
  }
  EXPECT_EQ(t.server.num_unauthenticated(), 2);
  for (int64_t step = 1; step <= 3; ++step) {  // Pooled connections after the first.
    const Tensor value = RandomBits(1000 * step, step);
    ASSERT_TRUE(t.Feed(step, value).ok());
    PendingRecv r(&right, t.Request(step), Timeout(absl::Seconds(30)));
    ASSERT_TRUE(r.Wait());
    ASSERT_FALSE(r.fell_back);
    ASSERT_TRUE(r.status.ok()) << r.status;
    EXPECT_TRUE(SameBytes(r.result.tensor, value));
  }
  EXPECT_EQ(t.server.num_unauthenticated(), 2);
}

TEST(TensorDataPlaneAuthTest, AServerWithoutATokenServesClientsThatSendOne) {
  DataPlaneTask t;
  DataPlaneClient with_token(kPeer, true, "s3cret-token");
  with_token.OnNegotiated("127.0.0.1", t.server.port());
  const Tensor value = RandomBits(4096, 9);
  ASSERT_TRUE(t.Feed(1, value).ok());
  PendingRecv r(&with_token, t.Request(1), Timeout(absl::Seconds(30)));
  ASSERT_TRUE(r.Wait());
  ASSERT_FALSE(r.fell_back);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_TRUE(SameBytes(r.result.tensor, value));
}

TEST(TensorDataPlaneAuthTest, AGrpcServerWithATokenGuardsItsDataPlane) {
  ClusterSpec spec;
  ASSERT_TRUE(spec.AddTask("ps", 0, "127.0.0.1:0").ok());
  tensorflow::ServerDef def;
  *def.mutable_cluster() = spec.ToClusterDef();
  def.set_job_name("ps");
  def.set_task_index(0);
  def.set_protocol("grpc");
  GrpcServer::Options options;
  options.security.auth_token = "s3cret-token";
  absl::StatusOr<std::unique_ptr<GrpcServer>> server = GrpcServer::Create(def, options);
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_TRUE((*server)->Start().ok());
  ASSERT_NE((*server)->data_plane_port(), 0);
  WorkerInterface* local = (*server)->worker();
  const std::string c0 = (*server)->device_mgr()->ListDevices()[0]->name();
  const uint64_t inc = (*server)->device_mgr()->ListDevices()[0]->incarnation();
  Builder b;
  b.Recv("x", "x", c0, inc, c0, true, c0);
  b.Send("send", "x", "edge", c0, inc, kDst, false, c0);
  absl::StatusOr<std::string> h = worker_test::Register(local, b.def(), Timeout(absl::Seconds(30)));
  ASSERT_TRUE(h.ok()) << h.status();
  auto feed = [&](int64_t step, const Tensor& value) {
    tensorflow::RunGraphRequest run;
    run.set_graph_handle(*h);
    run.set_step_id(step);
    *run.add_send() = worker_test::Named(Rendezvous::CreateKey(c0, inc, c0, "x"), value);
    tensorflow::RunGraphResponse run_resp;
    return local->RunGraph(run, &run_resp, Timeout(absl::Seconds(30)));
  };
  auto request = [&](int64_t step) {
    tensorflow::RecvTensorRequest req;
    req.set_step_id(step);
    req.set_rendezvous_key(Rendezvous::CreateKey(c0, inc, kDst, "edge"));
    return req;
  };
  // The server gave its data plane the token: a raw request gets no tensor.
  const Tensor first = RandomBits(4096, 1);
  ASSERT_TRUE(feed(1, first).ok());
  ExpectNotServedOnly(RawExchange((*server)->data_plane_port(), RequestFrame(request(1))));
  const std::string address = "127.0.0.1:" + std::to_string((*server)->bound_port());
  const std::string name = "/job:ps/replica:0/task:0 (" + address + ")";
  GrpcRemoteWorker without(NewGrpcChannel(address), name, true);
  RecvTensorResult got;
  absl::Status st = without.RecvTensor(request(1), &got, Timeout(absl::Seconds(30)));
  EXPECT_EQ(st.code(), absl::StatusCode::kUnauthenticated) << st;
  EXPECT_THAT(st.message(), HasSubstr("[WorkerService.RecvTensor] missing auth token"));
  EXPECT_FALSE(without.data_plane_ready());  // Refused before it could negotiate.
  // With the token: negotiated over gRPC, then served by the data plane; the
  // refused calls left step 1's tensor in place.
  GrpcRemoteWorker with(NewGrpcChannel(address), name, true, "s3cret-token");
  for (int64_t step = 1; step <= 3; ++step) {
    const Tensor value = step == 1 ? first : RandomBits(100000 + step, step);
    if (step > 1) ASSERT_TRUE(feed(step, value).ok());
    st = with.RecvTensor(request(step), &got, Timeout(absl::Seconds(30)));
    ASSERT_TRUE(st.ok()) << step << ": " << st;
    EXPECT_TRUE(SameBytes(got.tensor, value)) << step;
    EXPECT_TRUE(with.data_plane_ready());
  }
  (*server)->Stop();
}

// --- The local socket (receivers on the sender's host) ---------------------------------

// A raw connection to the data plane's abstract local socket, or -1.
int RawLocalConnect(const std::string& name) {
  sockaddr_un addr;
  const socklen_t len = data_plane::LocalAddress(name, &addr);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Receives steps 1..n through `client`, each a fresh random tensor; several
// sizes, the larger ones over the socket buffers.
void ExpectRecvsArrive(DataPlaneTask& t, DataPlaneClient* client, int64_t first, int64_t n) {
  for (int64_t step = first; step < first + n; ++step) {
    const Tensor value = RandomBits(step % 2 == 0 ? (3 << 20) + step : 100 + step, step);
    ASSERT_TRUE(t.Feed(step, value).ok());
    PendingRecv r(client, t.Request(step), Timeout(absl::Seconds(30)));
    ASSERT_TRUE(r.Wait());
    ASSERT_FALSE(r.fell_back) << step;
    ASSERT_TRUE(r.status.ok()) << step << ": " << r.status;
    EXPECT_TRUE(SameBytes(r.result.tensor, value)) << step;
  }
}

TEST(TensorDataPlaneLocalTest, AReceiverOnThisHostUsesTheLocalSocket) {
  DataPlaneTask t;
  ASSERT_FALSE(t.server.local_name().empty());
  EXPECT_EQ(t.server.offer().local_name(), t.server.local_name());
  EXPECT_EQ(t.server.offer().port(), static_cast<uint32_t>(t.server.port()));
  DataPlaneClient local(kPeer, true);
  local.OnNegotiated("127.0.0.1", t.server.port(), t.server.local_name());
  ExpectRecvsArrive(t, &local, 1, 4);
  // One connection, pooled and reused.
  EXPECT_EQ(t.server.num_local_accepted(), 1);
  // Parked receives for one peer still travel as one batch.
  std::vector<std::unique_ptr<PendingRecv>> parked;
  for (int64_t step = 10; step < 14; ++step) {
    parked.push_back(std::make_unique<PendingRecv>(&local, t.Request(step), Timeout(absl::Seconds(30))));
  }
  for (int64_t step = 10; step < 14; ++step) ASSERT_TRUE(t.Feed(step, RandomBits(1 << 16, step)).ok());
  for (auto& r : parked) {
    ASSERT_TRUE(r->Wait());
    EXPECT_TRUE(r->status.ok()) << r->status;
    EXPECT_TRUE(SameBytes(r->result.tensor, RandomBits(1 << 16, r->req.step_id())));
  }
  // A receiver told only the TCP port never touches the local socket.
  const int64_t local_before = t.server.num_local_accepted();
  ExpectRecvsArrive(t, &t.client, 20, 2);
  EXPECT_EQ(t.server.num_local_accepted(), local_before);
}

TEST(TensorDataPlaneLocalTest, LargeTensorsCrossThroughTheSharedRegion) {
  DataPlaneTask t;
  DataPlaneClient local(kPeer, true);
  local.OnNegotiated("127.0.0.1", t.server.port(), t.server.local_name());
  auto recv = [&](int64_t step, size_t bytes) {
    const Tensor value = RandomBits(bytes / sizeof(float), step);
    ASSERT_TRUE(t.Feed(step, value).ok());
    PendingRecv r(&local, t.Request(step), Timeout(absl::Seconds(30)));
    ASSERT_TRUE(r.Wait());
    ASSERT_FALSE(r.fell_back) << step;
    ASSERT_TRUE(r.status.ok()) << step << ": " << r.status;
    EXPECT_TRUE(SameBytes(r.result.tensor, value)) << step;
  };
  recv(1, 3 << 20);  // Through the region.
  EXPECT_EQ(t.server.num_shared_bytes(), 3 << 20);
  recv(2, 1000);     // Small: inline.
  recv(3, 5 << 20);  // Over 4 MiB: inline (the socket overlaps the two ends' copies).
  EXPECT_EQ(t.server.num_shared_bytes(), 3 << 20);
  recv(4, 4 << 20);
  EXPECT_EQ(t.server.num_shared_bytes(), 7 << 20);
}

TEST(TensorDataPlaneLocalTest, AReceivedFloatTensorBorrowsTheRegionUntilItIsDropped) {
  DataPlaneTask t;
  DataPlaneClient local(kPeer, true);
  local.OnNegotiated("127.0.0.1", t.server.port(), t.server.local_name());
  std::vector<Tensor> sent;
  // One call at a time, so every call reuses the one pooled connection.
  auto recv = [&](int64_t step) -> Tensor {
    sent.push_back(RandomBits((1 << 20) / sizeof(float), step));
    EXPECT_TRUE(t.Feed(step, sent.back()).ok());
    PendingRecv r(&local, t.Request(step), Timeout(absl::Seconds(30)));
    EXPECT_TRUE(r.Wait());
    EXPECT_FALSE(r.fell_back) << step;
    EXPECT_TRUE(r.status.ok()) << step << ": " << r.status;
    EXPECT_TRUE(SameBytes(r.result.tensor, sent.back())) << step;
    return r.result.tensor;
  };
  Tensor first = recv(1);
  EXPECT_TRUE(first.IsBorrowed());  // No copy out of the region.
  // Kept while the next answers arrive: the peer writes them elsewhere.
  const Tensor second = recv(2);
  EXPECT_TRUE(second.IsBorrowed());
  EXPECT_NE(second.raw_data(), first.raw_data());
  const int64_t shared_bytes = t.server.num_shared_bytes();
  EXPECT_EQ(shared_bytes, 2 << 20);
  const Tensor third = recv(3);  // Both regions borrowed: inline.
  EXPECT_FALSE(third.IsBorrowed());
  EXPECT_EQ(t.server.num_shared_bytes(), shared_bytes);
  EXPECT_TRUE(SameBytes(first, sent[0]));
  EXPECT_TRUE(SameBytes(second, sent[1]));
  const void* freed = first.raw_data();
  first = Tensor();
  const Tensor fourth = recv(4);  // Into the region `first` left.
  EXPECT_TRUE(fourth.IsBorrowed());
  EXPECT_EQ(fourth.raw_data(), freed);
  EXPECT_TRUE(SameBytes(second, sent[1]));
}

TEST(TensorDataPlaneLocalTest, IntegerTensorsAreCopiedOutOfTheRegion) {
  // A peer could rewrite the region under a borrowed index after a kernel
  // checked it: only floating-point tensors borrow.
  RecvTensorResult ints;
  ints.tensor = Tensor(DT_INT32, TensorShape({1 << 18}));
  for (int32_t i = 0; i < (1 << 18); ++i) ints.tensor.flat<int32_t>()[i] = i * 7;
  FixedRecvWorker worker(ints);
  DataPlaneServer server(&worker);
  ASSERT_TRUE(server.Start("127.0.0.1").ok());
  DataPlaneClient client(kPeer, true);
  client.OnNegotiated("127.0.0.1", server.port(), server.local_name());
  PendingRecv r(&client, {}, Timeout(absl::Seconds(10)));
  ASSERT_TRUE(r.Wait());
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(server.num_shared_bytes(), 1 << 20);
  EXPECT_FALSE(r.result.tensor.IsBorrowed());
  EXPECT_TRUE(SameBytes(r.result.tensor, ints.tensor));
}

TEST(TensorDataPlaneLocalTest, TheSenderWritesTheSlotTheReceiverSelected) {
  DataPlaneTask t;
  const int fd = RawLocalConnect(t.server.local_name());
  ASSERT_GE(fd, 0);
  DataConnection conn(fd, nullptr);
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  std::vector<std::unique_ptr<SharedRegion>> regions;
  for (uint64_t slot = 0; slot < 2; ++slot) {
    absl::StatusOr<std::unique_ptr<SharedRegion>> region =
        SharedRegion::Create(data_plane::kSharedRegionBytes);
    ASSERT_TRUE(region.ok()) << region.status();
    const data_plane::RequestHeader offer{data_plane::kSharedMagic, 0, slot};
    ASSERT_TRUE(conn.SendWithFd(&offer, sizeof(offer), (*region)->fd(), deadline).ok());
    regions.push_back(*std::move(region));
  }
  const size_t floats = (1 << 20) / sizeof(float);
  // Slot 1 (the last offered), then 0, then none, each selected by a frame.
  const std::vector<std::pair<uint64_t, const SharedRegion*>> rounds = {
      {1, regions[1].get()}, {0, regions[0].get()}, {2, nullptr}, {1, regions[1].get()}};
  for (size_t round = 0; round < rounds.size(); ++round) {
    if (round > 0) {
      const data_plane::RequestHeader select{data_plane::kSharedMagic, 0, rounds[round].first};
      ASSERT_TRUE(conn.Send(&select, sizeof(select), deadline).ok());
    }
    const int64_t step = static_cast<int64_t>(round) + 1;
    const Tensor want = RandomBits(floats, step);
    std::memset(regions[0]->data(), 0, want.TotalBytes());
    std::memset(regions[1]->data(), 0, want.TotalBytes());
    ASSERT_TRUE(t.Feed(step, want).ok());
    const std::string frame = RequestFrame(t.Request(step));
    ASSERT_TRUE(conn.Send(frame.data(), frame.size(), deadline).ok());
    data_plane::ResponseHeader h{};
    ASSERT_TRUE(conn.Recv(&h, sizeof(h), deadline).ok());
    std::vector<int64_t> dims(h.b);
    ASSERT_TRUE(conn.Recv(dims.data(), dims.size() * sizeof(int64_t), deadline).ok());
    std::string bytes(h.bytes, '\0');
    const SharedRegion* into = rounds[round].second;
    if (into == nullptr) {
      ASSERT_EQ(h.kind, data_plane::kTensor) << round;
      ASSERT_TRUE(conn.Recv(bytes.data(), bytes.size(), deadline).ok());
    } else {
      ASSERT_EQ(h.kind, data_plane::kTensorShared) << round;
      uint64_t offset = 0;
      ASSERT_TRUE(conn.Recv(&offset, sizeof(offset), deadline).ok());
      ASSERT_EQ(offset, 0u);
      bytes.assign(into->data(), h.bytes);
      const SharedRegion* other = into == regions[0].get() ? regions[1].get() : regions[0].get();
      EXPECT_EQ(static_cast<uint64_t>(std::count(other->data(), other->data() + h.bytes, 0)),
                h.bytes)
          << round;
    }
    EXPECT_EQ(bytes, std::string(static_cast<const char*>(want.raw_data()), want.TotalBytes()))
        << round;
  }
  // A slot past "none" is not our protocol: closed.
  const data_plane::RequestHeader bad{data_plane::kSharedMagic, 0, 3};
  ASSERT_TRUE(conn.Send(&bad, sizeof(bad), deadline).ok());
  EXPECT_TRUE(ClosedWithin(fd, absl::Seconds(10)));
}

TEST(TensorDataPlaneLocalTest, ABatchFillsTheSharedRegionFromItsStartEachRequest) {
  DataPlaneTask t;
  const int fd = RawLocalConnect(t.server.local_name());
  ASSERT_GE(fd, 0);
  DataConnection conn(fd, nullptr);
  absl::StatusOr<std::unique_ptr<SharedRegion>> region =
      SharedRegion::Create(data_plane::kSharedRegionBytes);
  ASSERT_TRUE(region.ok()) << region.status();
  const data_plane::RequestHeader offer{data_plane::kSharedMagic, 0, 0};
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  ASSERT_TRUE(conn.SendWithFd(&offer, sizeof(offer), (*region)->fd(), deadline).ok());
  const size_t floats = (3 << 20) / sizeof(float);
  for (int round = 0; round < 2; ++round) {
    // Three 3 MiB answers: two fit in the 8 MiB region, the third comes inline;
    // the second round's start again at offset 0.
    std::vector<std::string> items;
    for (int64_t i = 0; i < 3; ++i) {
      const int64_t step = 10 * round + i + 1;
      ASSERT_TRUE(t.Feed(step, RandomBits(floats, step)).ok());
      items.push_back(t.Request(step).SerializeAsString());
    }
    const std::string frame = BatchFrame(items);
    ASSERT_TRUE(conn.Send(frame.data(), frame.size(), deadline).ok());
    std::vector<uint32_t> kinds(3, 99);
    for (int got = 0; got < 3; ++got) {
      uint32_t prefix[2];
      data_plane::ResponseHeader h{};
      ASSERT_TRUE(conn.Recv(prefix, sizeof(prefix), deadline).ok());
      ASSERT_EQ(prefix[0], data_plane::kBatchItemMagic);
      ASSERT_LT(prefix[1], 3u);
      ASSERT_TRUE(conn.Recv(&h, sizeof(h), deadline).ok());
      std::vector<int64_t> dims(h.b);
      ASSERT_TRUE(conn.Recv(dims.data(), dims.size() * sizeof(int64_t), deadline).ok());
      std::string bytes(h.bytes, '\0');
      if (h.kind == data_plane::kTensorShared) {
        uint64_t offset = 0;
        ASSERT_TRUE(conn.Recv(&offset, sizeof(offset), deadline).ok());
        ASSERT_LE(offset + h.bytes, (*region)->size());
        EXPECT_EQ(offset % 64, 0u);
        std::memcpy(bytes.data(), (*region)->data() + offset, h.bytes);
      } else {
        ASSERT_EQ(h.kind, data_plane::kTensor);
        ASSERT_TRUE(conn.Recv(bytes.data(), bytes.size(), deadline).ok());
      }
      const Tensor want = RandomBits(floats, 10 * round + prefix[1] + 1);
      EXPECT_EQ(bytes, std::string(static_cast<const char*>(want.raw_data()), want.TotalBytes()));
      kinds[prefix[1]] = h.kind;
    }
    EXPECT_EQ(std::count(kinds.begin(), kinds.end(), data_plane::kTensorShared), 2) << round;
    EXPECT_EQ(std::count(kinds.begin(), kinds.end(), data_plane::kTensor), 1) << round;
  }
  EXPECT_EQ(t.server.num_shared_bytes(), 4 * (3 << 20));
}

TEST(TensorDataPlaneLocalTest, ADescriptorThatIsNoSealedRegionIsIgnored) {
  DataPlaneTask t;
  const Tensor value = RandomBits(1 << 18, 4);  // 1 MiB.
  ASSERT_TRUE(t.Feed(1, value).ok());
  ASSERT_TRUE(t.Feed(2, value).ok());
  // An unsealed memfd (which the receiver could shrink under the sender), and
  // then no descriptor at all: both ignored, the tensor comes inline.
  const int unsealed = ::memfd_create("not-sealed", MFD_CLOEXEC);
  ASSERT_GE(unsealed, 0);
  ASSERT_EQ(::ftruncate(unsealed, 16 << 20), 0);
  for (int64_t step : {1, 2}) {
    const int fd = RawLocalConnect(t.server.local_name());
    ASSERT_GE(fd, 0);
    DataConnection conn(fd, nullptr);
    const data_plane::RequestHeader offer{data_plane::kSharedMagic, 0, 0};
    const std::string frame =
        std::string(reinterpret_cast<const char*>(&offer), sizeof(offer)) + RequestFrame(t.Request(step));
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    ASSERT_TRUE((step == 1 ? conn.SendWithFd(frame.data(), frame.size(), unsealed, deadline)
                           : conn.Send(frame.data(), frame.size(), deadline))
                    .ok());
    data_plane::ResponseHeader h{};
    ASSERT_TRUE(conn.Recv(&h, sizeof(h), deadline).ok());
    EXPECT_EQ(h.kind, data_plane::kTensor) << step;
    std::vector<int64_t> dims(h.b);
    ASSERT_TRUE(conn.Recv(dims.data(), dims.size() * sizeof(int64_t), deadline).ok());
    std::string bytes(h.bytes, '\0');
    ASSERT_TRUE(conn.Recv(bytes.data(), bytes.size(), deadline).ok());
    EXPECT_EQ(bytes, std::string(static_cast<const char*>(value.raw_data()), value.TotalBytes()));
  }
  ::close(unsealed);
  EXPECT_EQ(t.server.num_shared_bytes(), 0);
}

// A read that finds no bytes hands over no descriptor. The control block of
// a failed recvmsg still held the last one passed, long closed; taking it
// again closed whatever connection had reused its number since.
TEST(TensorDataPlaneLocalTest, AReadWithoutBytesPassesNoDescriptor) {
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, pair), 0);
  DataConnection sender(pair[0], nullptr), receiver(pair[1], nullptr);
  const int passed = ::memfd_create("passed", MFD_CLOEXEC);
  ASSERT_GE(passed, 0);
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  ASSERT_TRUE(sender.SendWithFd("ab", 2, passed, deadline).ok());
  ::close(passed);
  char buf[4];
  size_t got = 0;
  for (size_t total = 0; total < 2; total += got) {
    ASSERT_EQ(receiver.Read(buf, sizeof(buf), &got), DataConnection::Io::kDone);
  }
  const int taken = receiver.TakeReceivedFd();
  ASSERT_GE(taken, 0);
  ::close(taken);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(receiver.Read(buf, sizeof(buf), &got), DataConnection::Io::kWantRead);
    EXPECT_EQ(receiver.TakeReceivedFd(), -1) << i;
  }
}

TEST(TensorDataPlaneLocalTest, AnUnreachableLocalSocketFallsBackToTcp) {
  DataPlaneTask t;
  DataPlaneClient client(kPeer, true);
  // What a receiver on another host (or network namespace) sees.
  client.OnNegotiated("127.0.0.1", t.server.port(), "dflow-data-plane-0-nobody-listens-here");
  ExpectRecvsArrive(t, &client, 1, 3);
  EXPECT_EQ(t.server.num_local_accepted(), 0);
}

TEST(TensorDataPlaneLocalTest, ASenderWithoutALocalSocketOffersNone) {
  DataPlaneServer::Options options;
  options.local_socket = false;
  DataPlaneTask t(options);
  EXPECT_EQ(t.server.local_name(), "");
  EXPECT_EQ(t.server.offer().local_name(), "");
  EXPECT_GT(t.server.offer().port(), 0u);
}

TEST(TensorDataPlaneLocalTest, TheLocalSocketChecksTheToken) {
  DataPlaneTask t(WithToken("s3cret-token"));
  const Tensor value = RandomBits(1 << 16, 3);
  ASSERT_TRUE(t.Feed(1, value).ok());
  // A raw local request without the hello gets "not served" and no tensor byte.
  const int fd = RawLocalConnect(t.server.local_name());
  ASSERT_GE(fd, 0);
  const std::string frame = RequestFrame(t.Request(1));
  ASSERT_EQ(::send(fd, frame.data(), frame.size(), MSG_NOSIGNAL), static_cast<ssize_t>(frame.size()));
  std::string got(4096, '\0');
  size_t n = 0;
  for (ssize_t r; (r = ::recv(fd, got.data() + n, got.size() - n, 0)) > 0;) n += static_cast<size_t>(r);
  ::close(fd);
  got.resize(n);
  ExpectNotServedOnly(got);
  // A client with a wrong token falls back (to gRPC, which checks it again);
  // the right one is served on the local socket.
  DataPlaneClient wrong(kPeer, true, "other-token");
  wrong.OnNegotiated("127.0.0.1", t.server.port(), t.server.local_name());
  PendingRecv refused(&wrong, t.Request(1), Timeout(absl::Seconds(10)));
  ASSERT_TRUE(refused.Wait());
  EXPECT_TRUE(refused.fell_back);
  DataPlaneClient right(kPeer, true, "s3cret-token");
  right.OnNegotiated("127.0.0.1", t.server.port(), t.server.local_name());
  const int64_t local_before = t.server.num_local_accepted();
  PendingRecv served(&right, t.Request(1), Timeout(absl::Seconds(30)));
  ASSERT_TRUE(served.Wait());
  ASSERT_FALSE(served.fell_back);
  ASSERT_TRUE(served.status.ok()) << served.status;
  EXPECT_TRUE(SameBytes(served.result.tensor, value));
  EXPECT_EQ(t.server.num_local_accepted(), local_before + 1);
}

TEST(TensorDataPlaneLocalTest, LocalConnectionsCountAgainstTheCapsPerProcess) {
  DataPlaneServer::Options options;
  options.max_connections_per_peer = 2;
  DataPlaneTask t(options);
  std::vector<int> fds;
  for (int i = 0; i < 3; ++i) fds.push_back(RawLocalConnect(t.server.local_name()));
  for (int fd : fds) ASSERT_GE(fd, 0);
  // The third connection from this process is answered "not served" and closed.
  std::string got(sizeof(data_plane::ResponseHeader), '\0');
  ASSERT_EQ(::recv(fds[2], got.data(), got.size(), MSG_WAITALL), static_cast<ssize_t>(got.size()));
  ExpectNotServedOnly(got);
  EXPECT_EQ(t.server.num_refused(), 1);
  for (int fd : fds) ::close(fd);
}

// --- Mutual TLS on the data plane -----------------------------------------------------------

std::shared_ptr<const DataPlaneTls> TlsContext(const SecurityOptions& security,
                                               DataPlaneTls::Role role) {
  absl::StatusOr<std::shared_ptr<const DataPlaneTls>> made = DataPlaneTls::Create(security, role);
  EXPECT_TRUE(made.ok()) << made.status();
  return made.value_or(nullptr);
}

// A task whose data plane speaks TLS with `tls`'s certificate; its client too.
struct TlsTask {
  explicit TlsTask(const ThrowawayTls& tls, DataPlaneServer::Options options = {})
      : security(tls.security()),
        t((options.tls = TlsContext(security, DataPlaneTls::kServer), options),
          TlsContext(security, DataPlaneTls::kClient)) {}
  SecurityOptions security;
  DataPlaneTask t;
};

TEST(TensorDataPlaneTlsTest, TensorsCrossOverMutualTlsBitExact) {
  absl::StatusOr<ThrowawayTls> tls = MakeThrowawayTls();
  ASSERT_TRUE(tls.ok()) << tls.status();
  TlsTask task(*tls);
  DataPlaneTask& t = task.t;
  // Small, several MiB (many TLS records), empty, and 24 MiB (records queued
  // until the socket takes them) tensors; pooled connections after the first.
  const int64_t sizes[] = {1, 3 << 20, 0, 1 << 16, 6 << 20};
  for (int64_t step = 1; step <= 5; ++step) ExpectServes(t, step, sizes[step - 1]);
  // A RunGraph near the 1 MiB limit goes out as several gathered writes of records.
  const Tensor fed = RandomBits(250000, 6);
  const tensorflow::RunGraphRequest run = FeedRequest(t, 6, fed);
  tensorflow::RunGraphResponse ran;
  absl::Notification done;
  absl::Status run_status;
  ASSERT_TRUE(t.client.TryRunGraphAsync(
      Timeout(absl::Seconds(30)), &run, &ran,
      [&](const absl::Status& st) {
        run_status = st;
        done.Notify();
      },
      [] {}));
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(60)));
  ASSERT_TRUE(run_status.ok()) << run_status;
  PendingRecv back(&t.client, t.Request(6), Timeout(absl::Seconds(30)));
  ASSERT_TRUE(back.Wait());
  ASSERT_TRUE(back.status.ok()) << back.status;
  EXPECT_TRUE(SameBytes(back.result.tensor, fed));
  EXPECT_EQ(t.server.num_requests(), 7);
  EXPECT_EQ(t.server.num_handshake_failures(), 0);
  EXPECT_EQ(t.server.num_connections(), 1);  // One pooled connection served them all.
  EXPECT_EQ(t.client.last_handshake_error(), "");
}

// A pooled connection whose record keys have sealed half their limit is
// closed, not reused: the next call opens a fresh one (fresh keys).
TEST(TensorDataPlaneTlsTest, AConnectionWhoseKeysAreWornIsNotPooled) {
  absl::StatusOr<ThrowawayTls> tls = MakeThrowawayTls();
  ASSERT_TRUE(tls.ok()) << tls.status();
  TlsTask task(*tls);
  DataPlaneTask& t = task.t;
  ScopedKeyLimit limit(800 << 10);  // Worn past 400 KiB.
  // Open at the sender after each call: pooled; worn at 600 KiB, so closed;
  // a fresh one.
  const int connections[] = {1, 0, 1};
  for (int64_t step = 1; step <= 3; ++step) {
    ExpectServes(t, step, 75 << 10);  // 300 KiB.
    EXPECT_TRUE(WaitUntil([&] { return t.server.num_connections() == connections[step - 1]; }))
        << step << ": " << t.server.num_connections();
  }
}

// A TLS Write counts plaintext as written once sealed into records; records
// the socket cannot take yet stay queued, go before anything else, and arrive
// whole once the receiver reads.
TEST(TensorDataPlaneTlsTest, RecordsTheSocketCannotTakeStayQueuedUntilFlushed) {
  absl::StatusOr<ThrowawayTls> tls = MakeThrowawayTls();
  ASSERT_TRUE(tls.ok()) << tls.status();
  const SecurityOptions security = tls->security();
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  const int small = 32 << 10;
  ASSERT_EQ(::setsockopt(pair[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
  ASSERT_EQ(::fcntl(pair[0], F_SETFL, ::fcntl(pair[0], F_GETFL) | O_NONBLOCK), 0);
  DataConnection sender(pair[0], TlsContext(security, DataPlaneTls::kServer));
  DataConnection receiver(pair[1], TlsContext(security, DataPlaneTls::kClient));
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  absl::Status handshake;
  std::thread receiving([&] { handshake = receiver.Handshake(deadline); });
  DataConnection::Io io;
  while ((io = sender.StepHandshake()) != DataConnection::Io::kDone && absl::Now() < deadline) {
    ASSERT_TRUE(io == DataConnection::Io::kWantRead || io == DataConnection::Io::kWantWrite);
    pollfd p{pair[0], static_cast<short>(io == DataConnection::Io::kWantRead ? POLLIN : POLLOUT), 0};
    ::poll(&p, 1, 100);
  }
  receiving.join();
  ASSERT_EQ(io, DataConnection::Io::kDone);
  ASSERT_TRUE(handshake.ok()) << handshake;

  const Tensor value = RandomBits(1 << 18, 9);  // 1 MiB, far over the socket's buffer.
  const char* bytes = static_cast<const char*>(value.raw_data());
  const size_t n = value.TotalBytes();
  size_t total = 0;
  for (int i = 0; i < 100 && total < n; ++i) {  // Nobody reads yet.
    iovec v{const_cast<char*>(bytes + total), n - total};
    size_t wrote = 0;
    io = sender.Write(&v, 1, &wrote);
    ASSERT_TRUE(io == DataConnection::Io::kDone || io == DataConnection::Io::kWantWrite);
    if (wrote == 0) break;
    total += wrote;
  }
  ASSERT_GT(total, 0u);
  ASSERT_LT(total, n);
  EXPECT_TRUE(sender.HasPendingWrite());
  size_t sent = 0;
  EXPECT_EQ(sender.FlushPendingWrite(&sent), DataConnection::Io::kWantWrite);

  std::string got(n, '\0');
  absl::Status received;
  std::thread reading([&] { received = receiver.Recv(got.data(), n, deadline); });
  // The queued records go by FlushPendingWrite alone (a Write would send them
  // first itself); then the rest of the plaintext.
  while (sender.HasPendingWrite() && absl::Now() < deadline) {
    io = sender.FlushPendingWrite(&sent);
    ASSERT_TRUE(io == DataConnection::Io::kDone || io == DataConnection::Io::kWantWrite);
    pollfd p{pair[0], POLLOUT, 0};
    ::poll(&p, 1, 100);
  }
  EXPECT_GT(sent, 0u);
  while ((total < n || sender.HasPendingWrite()) && absl::Now() < deadline) {
    size_t wrote = 0;
    if (total < n) {
      iovec v{const_cast<char*>(bytes + total), n - total};
      io = sender.Write(&v, 1, &wrote);
    } else {
      io = sender.FlushPendingWrite(&sent);
    }
    ASSERT_TRUE(io == DataConnection::Io::kDone || io == DataConnection::Io::kWantWrite);
    total += wrote;
    pollfd p{pair[0], POLLOUT, 0};
    ::poll(&p, 1, 100);
  }
  reading.join();
  ASSERT_TRUE(received.ok()) << received;
  EXPECT_FALSE(sender.HasPendingWrite());
  EXPECT_EQ(std::memcmp(got.data(), bytes, n), 0);
}

TEST(TensorDataPlaneTlsTest, ARawPlaintextClientGetsNoTensorByte) {
  absl::StatusOr<ThrowawayTls> tls = MakeThrowawayTls();
  ASSERT_TRUE(tls.ok()) << tls.status();
  TlsTask task(*tls);
  DataPlaneTask& t = task.t;
  const Tensor value = RandomBits(1 << 16, 5);
  ASSERT_TRUE(t.Feed(1, value).ok());  // The tensor is there to be taken.
  const std::string got = RawExchange(t.server.port(), RequestFrame(t.Request(1)), 1 << 20);
  // At most a TLS alert record (content type 21), never a response frame.
  EXPECT_LT(got.size(), 64u);
  if (!got.empty()) EXPECT_EQ(got[0], 21);
  EXPECT_EQ(got.find("DFRS"), std::string::npos);
  EXPECT_TRUE(WaitUntil([&] { return t.server.num_handshake_failures() == 1; }));
  EXPECT_EQ(t.server.num_requests(), 0);
  // The tensor was not taken: the TLS client gets it.
  PendingRecv r(&t.client, t.Request(1), Timeout(absl::Seconds(30)));
  ASSERT_TRUE(r.Wait());
  ASSERT_FALSE(r.fell_back);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_TRUE(SameBytes(r.result.tensor, value));
}

TEST(TensorDataPlaneTlsTest, ACertificateFromAnotherCaIsRefusedAndTheCallFallsBack) {
  absl::StatusOr<ThrowawayTls> tls = MakeThrowawayTls();
  absl::StatusOr<ThrowawayTls> other = MakeThrowawayTls();
  ASSERT_TRUE(tls.ok() && other.ok()) << tls.status() << other.status();
  TlsTask task(*tls);
  DataPlaneTask& t = task.t;
  // Trusts the server's CA, but presents a certificate from another CA: the
  // server refuses it.
  SecurityOptions foreign = other->security();
  foreign.tls_ca = tls->ca_cert;
  // Trusts only another CA: it refuses the server.
  SecurityOptions stranger = other->security();
  int failures = 0;
  for (const SecurityOptions* security : {&foreign, &stranger}) {
    DataPlaneClient client(kPeer, true, "", TlsContext(*security, DataPlaneTls::kClient));
    client.OnNegotiated("127.0.0.1", t.server.port());
    PendingRecv r(&client, t.Request(1), Timeout(absl::Seconds(10)));
    ASSERT_TRUE(r.Wait());
    EXPECT_TRUE(r.fell_back);  // To gRPC, whose own TLS refuses it too.
    const std::string error = client.last_handshake_error();
    EXPECT_THAT(error, HasSubstr(std::string("TLS handshake with ") + kPeer + " failed"));
    EXPECT_THAT(error, HasSubstr(security == &foreign ? "alert" : "certificate verify failed"));
    ++failures;  // The server may count it a moment after the client gave up.
    EXPECT_TRUE(WaitUntil([&] { return t.server.num_handshake_failures() == failures; }))
        << t.server.num_handshake_failures();
  }
  EXPECT_EQ(t.server.num_requests(), 0);
  ExpectServes(t, 2);  // The right certificate is served.
}

TEST(TensorDataPlaneTlsTest, AStalledHandshakeIsClosedByTheFrameTimeoutAndOthersAreServed) {
  absl::StatusOr<ThrowawayTls> tls = MakeThrowawayTls();
  ASSERT_TRUE(tls.ok()) << tls.status();
  DataPlaneServer::Options options;
  options.frame_timeout = absl::Milliseconds(500);  // The idle timeout stays a minute.
  TlsTask task(*tls, options);
  DataPlaneTask& t = task.t;
  const int silent = ConnectTo(t.server.port());  // Opens TCP, never says hello.
  const int partial = ConnectTo(t.server.port());
  // A handshake record header announcing 512 bytes, then nothing.
  const char record[] = {0x16, 0x03, 0x01, 0x02, 0x00, 0x01};
  ASSERT_EQ(::send(partial, record, sizeof(record), MSG_NOSIGNAL),
            static_cast<ssize_t>(sizeof(record)));
  ASSERT_TRUE(WaitUntil([&] { return t.server.num_connections() == 2; }));
  ExpectServes(t, 1);  // While they stall, the loop serves others.
  EXPECT_TRUE(ClosedWithin(silent, absl::Seconds(5)));
  EXPECT_TRUE(ClosedWithin(partial, absl::Seconds(5)));
  ::close(silent);
  ::close(partial);
  EXPECT_GE(t.server.num_timed_out(), 2);
  EXPECT_EQ(t.server.num_handshake_failures(), 2);
  EXPECT_TRUE(WaitUntil([&] { return t.server.num_connections() == 1; }));  // The pooled one.
  ExpectServes(t, 2);
}

TEST(TensorDataPlaneTlsTest, ConnectionsOverTheCapsAreClosedBeforeTheHandshakeAndTheCallFallsBack) {
  absl::StatusOr<ThrowawayTls> tls = MakeThrowawayTls();
  ASSERT_TRUE(tls.ok()) << tls.status();
  DataPlaneServer::Options options;
  options.max_connections_per_peer = 1;
  TlsTask task(*tls, options);
  DataPlaneTask& t = task.t;
  const int held = ConnectTo(t.server.port());
  ASSERT_TRUE(WaitUntil([&] { return t.server.num_connections() == 1; }));
  ASSERT_TRUE(t.Feed(1, RandomBits(100, 1)).ok());
  PendingRecv r(&t.client, t.Request(1), Timeout(absl::Seconds(30)));
  ASSERT_TRUE(r.Wait());
  EXPECT_TRUE(r.fell_back) << r.status;  // A refusal: gRPC takes the call.
  EXPECT_GE(t.server.num_refused(), 1);
  EXPECT_EQ(t.server.num_handshake_failures(), 0);  // It never started one.
  EXPECT_THAT(t.client.last_handshake_error(), HasSubstr("failed"));
  ::close(held);
  ASSERT_TRUE(WaitUntil([&] { return t.server.num_connections() == 0; }));
  absl::SleepFor(absl::Milliseconds(300));  // The first back-off is 0.1 s.
  ExpectServes(t, 2);
}

}  // namespace
}  // namespace dflow
