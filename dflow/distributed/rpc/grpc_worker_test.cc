#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "dflow/distributed/rpc/grpc_remote_worker.h"
#include "dflow/distributed/rpc/grpc_util.h"
#include "dflow/distributed/rpc/grpc_worker_service.h"
#include "dflow/distributed/worker.h"
#include "dflow/distributed/worker_test_util.h"
#include "dflow/framework/attr_util.h"
#include "dflow/framework/rendezvous.h"
#include "dflow/framework/status.h"
#include "gmock/gmock.h"
#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

using ::testing::HasSubstr;
using worker_test::Builder;
using worker_test::Floats;
using worker_test::Named;
using worker_test::RandomBits;
using worker_test::SameBytes;
using worker_test::Task;

std::string Msg(const absl::Status& s) { return std::string(s.message()); }

CallOptions Timeout(int seconds) { return CallOptions::WithTimeout(absl::Seconds(seconds)); }

// One task served over gRPC on 127.0.0.1:<port>, with a remote client.
struct ServedTask : Task {
  ServedTask(const std::string& job, int index, int cpus, WorkerOptions opts = {})
      : Task(job, index, cpus, std::move(opts)) {
    service = std::make_unique<GrpcWorkerService>(worker.get());
    grpc::ServerBuilder builder;
    ConfigureServerBuilder(&builder);
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service.get());
    server = builder.BuildAndStart();
    EXPECT_NE(port, 0);
    address = "127.0.0.1:" + std::to_string(port);
    remote = std::make_unique<GrpcRemoteWorker>(NewGrpcChannel(address),
                                                worker->task_name() + " (" + address + ")");
  }
  ~ServedTask() { Stop(); }
  void Stop() {
    if (server) server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    server.reset();
  }
  std::unique_ptr<GrpcWorkerService> service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  std::string address;
  std::unique_ptr<GrpcRemoteWorker> remote;
};

// gRPC 1.51 runs callbacks on a shared completion queue that it tears down
// when the last channel or server using it goes away; a teardown racing with
// the next test's first call aborts the process ("prior > 0" in
// grpc_cq_internal_unref; grpc/grpc#32584). One cached channel that has made
// a callback call keeps that queue alive for the whole test binary, as the
// channel cache does in a real task.
class KeepCallbackQueueAlive : public ::testing::Environment {
 public:
  void SetUp() override {
    grpc::GenericStub stub(GrpcChannelCache::Global().FindOrCreate("127.0.0.1:1"));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    grpc::Slice slice(std::string(""));
    grpc::ByteBuffer request(&slice, 1), response;
    absl::Notification done;
    stub.UnaryCall(&ctx, "/tensorflow.WorkerService/GetStatus", grpc::StubOptions(), &request,
                   &response, [&](grpc::Status) { done.Notify(); });
    done.WaitForNotification();
  }
};
const ::testing::Environment* const kKeepCallbackQueueAlive =
    ::testing::AddGlobalTestEnvironment(new KeepCallbackQueueAlive);

absl::StatusOr<std::string> Register(WorkerInterface* w, const tensorflow::GraphDef& def) {
  return worker_test::Register(w, def, Timeout(30));
}

TEST(GrpcUtilTest, StatusRoundTripsCodesAndMessages) {
  for (int code = 1; code <= 16; ++code) {
    absl::Status s(static_cast<absl::StatusCode>(code), "[Op 'x'] bad \xff value");
    grpc::Status g = ToGrpcStatus(s);
    EXPECT_EQ(static_cast<int>(g.error_code()), code);
    EXPECT_EQ(g.error_message(), "[Op 'x'] bad \xff value");
    EXPECT_EQ(FromGrpcStatus(g), s);
  }
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK).ok());
  EXPECT_EQ(StripGrpcScheme("grpc://h:1"), "h:1");
  EXPECT_EQ(StripGrpcScheme("h:1"), "h:1");
  EXPECT_EQ(FromGrpcDeadline(ToGrpcDeadline(absl::InfiniteFuture())), absl::InfiniteFuture());
  EXPECT_EQ(GrpcChannelCache::Global().FindOrCreate("grpc://127.0.0.1:1"),
            GrpcChannelCache::Global().FindOrCreate("127.0.0.1:1"));
}

TEST(GrpcWorkerTest, GetStatusListsDevices) {
  ServedTask t("worker", 1, 2);
  tensorflow::GetStatusResponse resp;
  absl::Status s = t.remote->GetStatus({}, &resp, Timeout(10));
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(resp.device_attributes_size(), 2);
  EXPECT_EQ(resp.device_attributes(1).name(), "/job:worker/replica:0/task:1/device:CPU:1");
  EXPECT_EQ(resp.device_attributes(0).incarnation(), t.Incarnation(0));
}

TEST(GrpcWorkerTest, RegisterAndRunWithFeedAndFetch) {
  ServedTask t("worker", 0, 2);
  Builder b;
  const std::string feed = t.Key(0, t.Cpu(0), "x");
  const std::string fetch = t.Key(0, t.Cpu(0), "y");
  b.Recv("x", "x", t.Cpu(0), t.Incarnation(0), t.Cpu(0), true, t.Cpu(0));
  b.Const("three", Tensor::Scalar(3.0f), t.Cpu(1));
  b.Binary("mul", "Mul", "x", "three", t.Cpu(1));
  b.Send("y", "mul", "y", t.Cpu(0), t.Incarnation(0), t.Cpu(0), true, t.Cpu(0));
  absl::StatusOr<std::string> h = Register(t.remote.get(), b.def());
  ASSERT_TRUE(h.ok()) << h.status();
  for (int step = 1; step <= 3; ++step) {
    tensorflow::RunGraphRequest req;
    req.set_graph_handle(*h);
    req.set_step_id(step);
    const Tensor value = Tensor::Vec<float>({1.0f, float(step)});
    req.add_recv_key(fetch);
    tensorflow::RunGraphResponse resp;
    absl::Status s;
    if (step == 2) {  // Tensors handed over in process travel encoded.
      s = WaitForCall([&](StatusCallback done) {
        t.remote->RunGraphWithTensorsAsync(Timeout(30), &req, {{feed, value}}, &resp,
                                           std::move(done));
      });
    } else {
      *req.add_send() = Named(feed, value);
      s = t.remote->RunGraph(req, &resp, Timeout(30));
    }
    ASSERT_TRUE(s.ok()) << s;
    ASSERT_EQ(resp.recv_size(), 1);
    EXPECT_EQ(resp.recv(0).name(), fetch);
    EXPECT_EQ(Floats(resp.recv(0).tensor()), (std::vector<float>{3.0f, 3.0f * step}));
    tensorflow::CleanupGraphRequest cleanup;
    cleanup.set_step_id(step);
    tensorflow::CleanupGraphResponse cresp;
    ASSERT_TRUE(t.remote->CleanupGraph(cleanup, &cresp, Timeout(10)).ok());
  }
  EXPECT_EQ(t.worker->NumLiveSteps(), 0);
  tensorflow::DeregisterGraphRequest dereg;
  dereg.set_graph_handle(*h);
  tensorflow::DeregisterGraphResponse dresp;
  EXPECT_TRUE(t.remote->DeregisterGraph(dereg, &dresp, Timeout(10)).ok());
  absl::Status s = t.remote->DeregisterGraph(dereg, &dresp, Timeout(10));
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
}

TEST(GrpcWorkerTest, SessionsAndCleanupAllOverTheWire) {
  ServedTask t("ps", 0, 1);
  tensorflow::CreateWorkerSessionRequest create;
  tensorflow::CreateWorkerSessionResponse cresp;
  create.set_session_handle("sess");
  ASSERT_TRUE(t.remote->CreateWorkerSession(create, &cresp, Timeout(10)).ok());
  absl::Status s = t.remote->CreateWorkerSession(create, &cresp, Timeout(10));
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists) << s;
  tensorflow::DeleteWorkerSessionRequest del;
  del.set_session_handle("sess");
  tensorflow::DeleteWorkerSessionResponse dresp;
  EXPECT_TRUE(t.remote->DeleteWorkerSession(del, &dresp, Timeout(10)).ok());
  tensorflow::CleanupAllRequest all;
  tensorflow::CleanupAllResponse aresp;
  EXPECT_TRUE(t.remote->CleanupAll(all, &aresp, Timeout(10)).ok());
}

TEST(GrpcWorkerTest, KernelErrorReachesTheClient) {
  ServedTask t("worker", 0, 1);
  Builder b;
  b.Const("a", Tensor::FromVector<float>({1, 2}, TensorShape({1, 2})), t.Cpu(0));
  b.Const("w", Tensor::FromVector<float>({1, 2, 3}, TensorShape({3, 1})), t.Cpu(0));
  b.Binary("mm", "MatMul", "a", "w", t.Cpu(0));
  b.Send("out", "mm", "out", t.Cpu(0), t.Incarnation(0), t.Cpu(0), true, t.Cpu(0));
  absl::StatusOr<std::string> h = Register(t.remote.get(), b.def());
  ASSERT_TRUE(h.ok()) << h.status();
  tensorflow::RunGraphRequest req;
  req.set_graph_handle(*h);
  req.set_step_id(7);
  tensorflow::RunGraphResponse resp;
  absl::Status s = t.remote->RunGraph(req, &resp, Timeout(30));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(Msg(s), HasSubstr("'mm'"));
  EXPECT_THAT(Msg(s), HasSubstr("inner dimensions differ"));
}

TEST(GrpcWorkerTest, UnimplementedMethodsSaySo) {
  ServedTask t("worker", 0, 1);
  auto stub = tensorflow::WorkerService::NewStub(NewGrpcChannel(t.address));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  tensorflow::LoggingRequest req;
  tensorflow::LoggingResponse resp;
  EXPECT_EQ(stub->Logging(&ctx, req, &resp).error_code(), grpc::StatusCode::UNIMPLEMENTED);
}

// Sends raw bytes as the request of `method`; returns the call's status.
grpc::Status SendBytes(grpc::GenericStub* stub, const std::string& method,
                       const std::string& bytes) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  absl::Notification done;
  grpc::Status status;
  stub->UnaryCall(&ctx, "/tensorflow.WorkerService/" + method, grpc::StubOptions(), &request,
                  &response, [&](grpc::Status s) {
                    status = std::move(s);
                    done.Notify();
                  });
  done.WaitForNotification();
  return status;
}

TEST(GrpcWorkerTest, GarbageRequestsAreRefusedAndTheServerKeepsServing) {
  ServedTask t("worker", 0, 1);
  grpc::GenericStub stub(NewGrpcChannel(t.address));
  const std::vector<std::string> methods = {
      "GetStatus", "CreateWorkerSession", "DeleteWorkerSession", "RegisterGraph", "DeregisterGraph",
      "RunGraph",  "CleanupGraph",        "CleanupAll",          "RecvTensor"};
  // A varint that never ends, then a field longer than the message: no
  // message type parses these.
  const std::string invalid[] = {std::string(11, '\xff'), std::string("\x0a\x10"
                                                                      "abc",
                                                                      5)};
  std::mt19937 rng(42);
  for (const std::string& method : methods) {
    for (const std::string& bytes : invalid) {
      grpc::Status s = SendBytes(&stub, method, bytes);
      EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
          << method << ": " << s.error_message();
      EXPECT_THAT(
          s.error_message(),
          HasSubstr("[WorkerService." + method + "] request of " + std::to_string(bytes.size()) +
                    " bytes does not parse as tensorflow." + method + "Request"));
    }
    // Random bytes may happen to parse; whatever they mean, the server answers.
    std::string noise(64, '\0');
    for (char& c : noise) c = static_cast<char>(rng());
    grpc::Status s = SendBytes(&stub, method, noise);
    EXPECT_NE(s.error_code(), grpc::StatusCode::UNAVAILABLE) << method;
  }
  tensorflow::GetStatusResponse resp;
  absl::Status s = t.remote->GetStatus({}, &resp, Timeout(10));
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(resp.device_attributes_size(), 1);
}

TEST(GrpcWorkerTest, StoppedServerIsUnavailableWithinTheDeadline) {
  ServedTask t("ps", 0, 1);
  tensorflow::GetStatusResponse resp;
  ASSERT_TRUE(t.remote->GetStatus({}, &resp, Timeout(10)).ok());
  t.Stop();
  const absl::Time start = absl::Now();
  absl::Status s = t.remote->GetStatus({}, &resp, Timeout(5));
  EXPECT_LT(absl::Now() - start, absl::Seconds(6));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(Msg(s), HasSubstr("[WorkerService.GetStatus to /job:ps/replica:0/task:0 (" +
                                t.address + ")]"));
}

TEST(GrpcWorkerTest, ParkedRecvTensorHonoursTheDeadline) {
  ServedTask t("ps", 0, 1);
  tensorflow::RecvTensorRequest req;
  req.set_step_id(4);
  req.set_rendezvous_key(t.Key(0, "/job:worker/replica:0/task:0/device:CPU:0", "never"));
  RecvTensorResult resp;
  const absl::Time start = absl::Now();
  absl::Status s = t.remote->RecvTensor(req, &resp, CallOptions::WithTimeout(absl::Seconds(1)));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  // A parked call without deadline ends when the server shuts down.
  absl::Notification done;
  absl::Status parked;
  req.set_step_id(5);
  t.remote->RecvTensorAsync({}, &req, &resp, [&](const absl::Status& st) {
    parked = st;
    done.Notify();
  });
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_FALSE(done.HasBeenNotified());
  t.Stop();
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_FALSE(parked.ok());
}

// ps and worker in one process, each behind its own gRPC server; the worker's
// _Recv pulls the ps's tensor with RecvTensor over gRPC.
TEST(GrpcWorkerTest, TwoTasksExchangeATensorOverGrpc) {
  std::unique_ptr<WorkerInterface> ps_client;
  auto ps = std::make_unique<ServedTask>("ps", 0, 1);
  ps_client = NewGrpcRemoteWorker("grpc://" + ps->address, ps->worker->task_name());
  WorkerOptions opts;
  opts.worker_for_task = [&](const std::string& task) -> WorkerInterface* {
    return task == "/job:ps/replica:0/task:0" ? ps_client.get() : nullptr;
  };
  ServedTask w("worker", 0, 1, opts);
  const std::string w0 = w.Cpu(0);
  worker_test::PsWorkerGraphs graphs = worker_test::DoubleOnWorker(*ps, w);
  absl::StatusOr<std::string> hp = Register(ps->remote.get(), graphs.ps);
  absl::StatusOr<std::string> hw = Register(w.remote.get(), graphs.worker);
  ASSERT_TRUE(hp.ok()) << hp.status();
  ASSERT_TRUE(hw.ok()) << hw.status();

  for (int64_t step : {77, 78}) {
    // The worker starts first: its RecvTensor is parked on the ps until the ps runs.
    tensorflow::RunGraphRequest wreq;
    wreq.set_graph_handle(*hw);
    wreq.set_step_id(step);
    wreq.add_recv_key(w.Key(0, w0, "y"));
    tensorflow::RunGraphResponse wresp;
    absl::Notification wdone;
    absl::Status wstatus;
    w.remote->RunGraphAsync(Timeout(30), &wreq, &wresp, [&](const absl::Status& s) {
      wstatus = s;
      wdone.Notify();
    });
    tensorflow::RunGraphRequest preq;
    preq.set_graph_handle(*hp);
    preq.set_step_id(step);
    tensorflow::RunGraphResponse presp;
    absl::Status ps_status = ps->remote->RunGraph(preq, &presp, Timeout(30));
    ASSERT_TRUE(ps_status.ok()) << ps_status;
    wdone.WaitForNotification();
    ASSERT_TRUE(wstatus.ok()) << wstatus;
    ASSERT_EQ(wresp.recv_size(), 1);
    EXPECT_EQ(Floats(wresp.recv(0).tensor()), (std::vector<float>{2, 4, 6}));
  }

  // With the ps gone, the worker's step fails naming the ps, within its deadline.
  ps->Stop();
  tensorflow::RunGraphRequest wreq;
  wreq.set_graph_handle(*hw);
  wreq.set_step_id(79);
  tensorflow::RunGraphResponse wresp;
  const absl::Time start = absl::Now();
  absl::Status s = w.remote->RunGraph(wreq, &wresp, Timeout(10));
  EXPECT_LT(absl::Now() - start, absl::Seconds(11));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(Msg(s), HasSubstr("/job:ps/replica:0/task:0"));
}

// On `t`, a graph that forwards the fed key "x" to "edge" (bound for a
// worker); Feed(step, value) runs it, leaving `value` for RecvTensor(EdgeKey).
struct Forwarder {
  explicit Forwarder(ServedTask* t) : task(t) {
    const std::string c0 = t->Cpu(0);
    Builder b;
    b.Recv("x", "x", c0, t->Incarnation(0), c0, true, c0);
    b.Send("send", "x", "edge", c0, t->Incarnation(0), kDst, false, c0);
    absl::StatusOr<std::string> h = Register(t->remote.get(), b.def());
    EXPECT_TRUE(h.ok()) << h.status();
    handle = h.value_or("");
  }
  absl::Status Feed(int64_t step, const Tensor& value) {
    tensorflow::RunGraphRequest req;
    req.set_graph_handle(handle);
    req.set_step_id(step);
    *req.add_send() = Named(task->Key(0, task->Cpu(0), "x"), value);
    tensorflow::RunGraphResponse resp;
    return task->remote->RunGraph(req, &resp, Timeout(30));
  }
  tensorflow::RecvTensorRequest Request(int64_t step) const {
    tensorflow::RecvTensorRequest req;
    req.set_step_id(step);
    req.set_rendezvous_key(task->Key(0, kDst, "edge"));
    return req;
  }
  static constexpr const char* kDst = "/job:worker/replica:0/task:0/device:CPU:0";
  ServedTask* task;
  std::string handle;
};

TEST(GrpcRecvTensorTest, LargeAndSmallTensorsArriveBitExact) {
  ServedTask t("ps", 0, 1);
  Forwarder f(&t);
  int64_t step = 1;
  for (int64_t n : {int64_t{2} << 20, int64_t{3}, int64_t{0}, int64_t{300}}) {  // 8 MiB first.
    const Tensor value = RandomBits(n, static_cast<uint32_t>(n));
    ASSERT_TRUE(f.Feed(step, value).ok());
    RecvTensorResult got;
    absl::Status s = t.remote->RecvTensor(f.Request(step), &got, Timeout(30));
    ASSERT_TRUE(s.ok()) << n << ": " << s;
    EXPECT_FALSE(got.is_dead);
    EXPECT_GT(got.send_start_micros, 0);
    EXPECT_TRUE(SameBytes(got.tensor, value)) << n << ": " << got.tensor.DebugString();
    ++step;
  }
}

TEST(GrpcRecvTensorTest, GarbageThenAGoodRequestIsServed) {
  ServedTask t("ps", 0, 1);
  Forwarder f(&t);
  grpc::GenericStub stub(NewGrpcChannel(t.address));
  grpc::Status g = SendBytes(&stub, "RecvTensor",
                             std::string("\x12\x7f"
                                         "key",
                                         5));
  EXPECT_EQ(g.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << g.error_message();
  EXPECT_THAT(g.error_message(), HasSubstr("[WorkerService.RecvTensor] request of 5 bytes"));
  // A malformed rendezvous key and an absurd step id parse but are refused by the worker.
  tensorflow::RecvTensorRequest bad;
  bad.set_step_id(-1);
  bad.set_rendezvous_key("no;such;key");
  RecvTensorResult got;
  absl::Status s = t.remote->RecvTensor(bad, &got, Timeout(10));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;

  const Tensor value = RandomBits(1 << 18, 11);  // 1 MiB.
  ASSERT_TRUE(f.Feed(5, value).ok());
  s = t.remote->RecvTensor(f.Request(5), &got, Timeout(30));
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(SameBytes(got.tensor, value));
}

TEST(GrpcRecvTensorTest, AProtobufClientReadsTheResponse) {
  // What a TensorFlow client does: parse RecvTensorResponse with protobuf.
  ServedTask t("ps", 0, 1);
  Forwarder f(&t);
  const Tensor value = RandomBits(5000, 2);
  ASSERT_TRUE(f.Feed(3, value).ok());
  auto stub = tensorflow::WorkerService::NewStub(NewGrpcChannel(t.address));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  tensorflow::RecvTensorResponse resp;
  grpc::Status g = stub->RecvTensor(&ctx, f.Request(3), &resp);
  ASSERT_TRUE(g.ok()) << g.error_message();
  absl::StatusOr<Tensor> got = Tensor::FromProto(resp.tensor());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(SameBytes(*got, value));
}

// Answers every RecvTensor with `result`; nothing else.
class FixedRecvWorker final : public WorkerInterface {
 public:
  explicit FixedRecvWorker(RecvTensorResult result) : result_(std::move(result)) {}
  void RecvTensorAsync(const CallOptions&, const tensorflow::RecvTensorRequest*,
                       RecvTensorResult* resp, StatusCallback done) override {
    *resp = result_;
    done(absl::OkStatus());
  }
  void GetStatusAsync(const CallOptions&, const tensorflow::GetStatusRequest*,
                      tensorflow::GetStatusResponse*, StatusCallback done) override {
    done(absl::UnimplementedError("GetStatus"));
  }
  void CreateWorkerSessionAsync(const CallOptions&, const tensorflow::CreateWorkerSessionRequest*,
                                tensorflow::CreateWorkerSessionResponse*,
                                StatusCallback done) override {
    done(absl::UnimplementedError("CreateWorkerSession"));
  }
  void DeleteWorkerSessionAsync(const CallOptions&, const tensorflow::DeleteWorkerSessionRequest*,
                                tensorflow::DeleteWorkerSessionResponse*,
                                StatusCallback done) override {
    done(absl::UnimplementedError("DeleteWorkerSession"));
  }
  void RegisterGraphAsync(const CallOptions&, const tensorflow::RegisterGraphRequest*,
                          tensorflow::RegisterGraphResponse*, StatusCallback done) override {
    done(absl::UnimplementedError("RegisterGraph"));
  }
  void DeregisterGraphAsync(const CallOptions&, const tensorflow::DeregisterGraphRequest*,
                            tensorflow::DeregisterGraphResponse*, StatusCallback done) override {
    done(absl::UnimplementedError("DeregisterGraph"));
  }
  void RunGraphAsync(const CallOptions&, const tensorflow::RunGraphRequest*,
                     tensorflow::RunGraphResponse*, StatusCallback done) override {
    done(absl::UnimplementedError("RunGraph"));
  }
  void CleanupGraphAsync(const CallOptions&, const tensorflow::CleanupGraphRequest*,
                         tensorflow::CleanupGraphResponse*, StatusCallback done) override {
    done(absl::UnimplementedError("CleanupGraph"));
  }
  void CleanupAllAsync(const CallOptions&, const tensorflow::CleanupAllRequest*,
                       tensorflow::CleanupAllResponse*, StatusCallback done) override {
    done(absl::UnimplementedError("CleanupAll"));
  }

 private:
  const RecvTensorResult result_;
};

// A GrpcWorkerService over `worker` on 127.0.0.1:<port>, with a client.
struct FixedServer {
  explicit FixedServer(RecvTensorResult result) : worker(std::move(result)), service(&worker) {
    grpc::ServerBuilder builder;
    ConfigureServerBuilder(&builder);
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service);
    server = builder.BuildAndStart();
    remote = NewGrpcRemoteWorker("127.0.0.1:" + std::to_string(port), "/job:fixed");
  }
  ~FixedServer() { server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2)); }
  FixedRecvWorker worker;
  GrpcWorkerService service;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<WorkerInterface> remote;
};

TEST(GrpcRecvTensorTest, DeadAndStringTensorsCrossTheWire) {
  RecvTensorResult dead;
  dead.is_dead = true;
  FixedServer d(dead);
  RecvTensorResult got;
  absl::Status s = d.remote->RecvTensor({}, &got, Timeout(10));
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(got.is_dead);

  RecvTensorResult text;
  text.tensor = Tensor::Vec<std::string>({"", std::string(3000, 'z')});
  FixedServer str(text);
  RecvTensorResult got_text;
  s = str.remote->RecvTensor({}, &got_text, Timeout(10));
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(got_text.tensor.dtype(), DT_STRING);
  EXPECT_EQ(got_text.tensor.flat<std::string>()[1], std::string(3000, 'z'));
}

}  // namespace
}  // namespace dflow
