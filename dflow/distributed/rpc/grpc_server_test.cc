#include "dflow/distributed/rpc/grpc_server.h"

#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "dflow/distributed/local_master.h"
#include "dflow/distributed/remote_session.h"
#include "dflow/distributed/rpc/grpc_remote_master.h"
#include "dflow/distributed/rpc/grpc_remote_worker.h"
#include "dflow/distributed/rpc/grpc_util.h"
#include "dflow/distributed/rpc/local_cluster_test_util.h"
#include "dflow/distributed/worker_test_util.h"
#include "dflow/framework/attr_util.h"
#include "dflow/runtime/session_factory.h"
#include "gmock/gmock.h"
#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

using ::testing::HasSubstr;
using worker_test::Builder;
using worker_test::Floats;
using worker_test::PsWorkerGraph;

std::string Msg(const absl::Status& s) { return std::string(s.message()); }

const char kPs[] = "/job:ps/replica:0/task:0";

// 1 ps and 2 workers; sessions through worker 0's master.
class PsAndTwoWorkers : public LocalCluster {
 public:
  PsAndTwoWorkers() : LocalCluster({{"ps", 1}, {"worker", 2}}) {}

  std::string worker0_target() { return target("worker", 0); }

  // Over gRPC, although the server is in this process (where dflow::NewSession
  // would call its master directly: see the LocalMaster test).
  std::unique_ptr<Session> NewSession(tensorflow::ConfigProto config = {}) {
    SessionOptions options;
    options.target = worker0_target();
    options.config = std::move(config);
    return std::make_unique<RemoteSession>(NewGrpcRemoteMaster(options.target), options);
  }
  // What a trainer in worker 0's process gets: its master, called directly.
  absl::StatusOr<std::unique_ptr<Session>> NewInProcessSession() {
    SessionOptions options;
    options.target = worker0_target();
    return dflow::NewSession(options);
  }
};

TEST(GrpcServerTest, SessionsOfThisProcessCallItsServersMasterDirectlyUntilItStops) {
  PsAndTwoWorkers cluster;
  ASSERT_NE(LocalMaster::Lookup(cluster.worker0_target()), nullptr);
  EXPECT_EQ(LocalMaster::Lookup("grpc://127.0.0.1:1"), nullptr);
  auto session = cluster.NewInProcessSession();  // Through LocalMaster.
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE((*session)->Create(PsWorkerGraph()).ok());
  ASSERT_TRUE((*session)->Run({}, {}, {"init", "assign_r"}, nullptr).ok());
  std::vector<Tensor> out;
  absl::Status s = (*session)->Run({{"two", Tensor::Scalar(3.0f)}}, {"y"}, {}, &out);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(Floats(out[0]), (std::vector<float>{3, 6, 9}));
  EXPECT_EQ(cluster.server("/job:worker/replica:0/task:0").master()->NumSessions(), 1);

  cluster.server("/job:worker/replica:0/task:0").Stop();
  EXPECT_EQ(LocalMaster::Lookup(cluster.worker0_target()), nullptr);
  s = (*session)->Run({{"two", Tensor::Scalar(3.0f)}}, {"y"}, {}, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(Msg(s), HasSubstr("in this process has stopped"));
}

// Between dflow tasks a finished step is cleaned up by the next step's
// RunGraph, not by a CleanupGraph call per task and step: each task holds
// the last step only, and nothing once the session is closed.
TEST(GrpcServerTest, FinishedStepsAreCleanedUpByTheNextStep) {
  PsAndTwoWorkers cluster;
  auto session = cluster.NewInProcessSession();  // Through LocalMaster.
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE((*session)->Create(PsWorkerGraph()).ok());
  ASSERT_TRUE((*session)->Run({}, {}, {"init", "assign_r"}, nullptr).ok());
  Worker* ps = cluster.server(kPs).worker();
  Worker* worker0 = cluster.server("/job:worker/replica:0/task:0").worker();
  Worker* worker1 = cluster.server("/job:worker/replica:0/task:1").worker();
  for (int step = 0; step < 20; ++step) {
    std::vector<Tensor> out;
    absl::Status s = (*session)->Run({{"two", Tensor::Scalar(float(step))}}, {"y"}, {}, &out);
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(Floats(out[0]), (std::vector<float>{1.0f * step, 2.0f * step, 3.0f * step}));
  }
  EXPECT_EQ(worker0->NumLiveSteps(), 1);
  EXPECT_EQ(worker1->NumLiveSteps(), 1);
  EXPECT_EQ(ps->NumLiveSteps(), 1);
  ASSERT_TRUE((*session)->Close().ok());  // Returns once the last cleanups are done.
  EXPECT_EQ(worker0->NumLiveSteps(), 0);
  EXPECT_EQ(worker1->NumLiveSteps(), 0);
  EXPECT_EQ(ps->NumLiveSteps(), 0);
}

// Feeds given as tensors must match the feeds the request names, whether
// the master is in this process or reached over gRPC (which encodes them).
TEST(GrpcServerTest, FeedTensorsMustMatchTheNamedFeeds) {
  PsAndTwoWorkers cluster;
  auto session = cluster.NewSession();
  ASSERT_TRUE(session->Create(PsWorkerGraph()).ok());
  std::vector<std::unique_ptr<MasterInterface>> masters;
  masters.push_back(LocalMaster::Lookup(cluster.worker0_target()));
  masters.push_back(NewGrpcRemoteMaster(cluster.worker0_target()));
  for (const std::unique_ptr<MasterInterface>& master : masters) {
    ASSERT_NE(master, nullptr);
    tensorflow::RunStepRequest run;
    run.set_session_handle(dynamic_cast<RemoteSession*>(session.get())->handle());
    run.add_feed()->set_name("two:0");
    run.add_feed()->set_name("three:0");
    run.add_fetch("y:0");
    tensorflow::RunStepResponse ran;
    absl::Status s = master->RunStepWithTensors(&run, {Tensor::Scalar(2.0f)}, &ran,
                                                CallOptions::WithTimeout(absl::Seconds(10)));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(Msg(s), HasSubstr("2 feeds named, 1 values given"));
  }
}

TEST(GrpcServerTest, SessionOverGrpcRunsOpsWhereTheyArePinned) {
  PsAndTwoWorkers cluster;
  EXPECT_THAT(cluster.worker0_target(), ::testing::StartsWith("grpc://127.0.0.1:"));
  auto session = cluster.NewSession();
  absl::Status s = session->Create(PsWorkerGraph());
  ASSERT_TRUE(s.ok()) << s;
  s = session->Run({}, {}, {"init", "assign_r"}, nullptr);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(cluster.server(kPs).device_mgr()->HostCPU()->resource_manager()->NumResources(), 1);
  for (int step = 0; step < 3; ++step) {
    std::vector<Tensor> out;
    s = session->Run({{"two", Tensor::Scalar(3.0f)}}, {"y"}, {}, &out);
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(Floats(out[0]), (std::vector<float>{3, 6, 9}));
  }
  auto devices = session->ListDevices();
  ASSERT_TRUE(devices.ok()) << devices.status();
  EXPECT_EQ(devices->size(), 6u);  // 3 tasks x 2 CPUs.
  ASSERT_TRUE(session->Close().ok());
  EXPECT_EQ(cluster.server("/job:worker/replica:0/task:0").master()->NumSessions(), 0);
}

TEST(GrpcServerTest, ResetOverGrpcFreesVariablesOnThePs) {
  PsAndTwoWorkers cluster;
  auto session = cluster.NewSession();
  ASSERT_TRUE(session->Create(PsWorkerGraph()).ok());
  ASSERT_TRUE(session->Run({}, {}, {"init"}, nullptr).ok());
  ResourceMgr* ps_resources = cluster.server(kPs).device_mgr()->HostCPU()->resource_manager();
  EXPECT_EQ(ps_resources->NumResources(), 1);
  auto remote = dynamic_cast<RemoteSession*>(session.get());
  ASSERT_NE(remote, nullptr);
  absl::Status s = remote->Reset({});
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(ps_resources->NumResources(), 0);
}

TEST(GrpcServerTest, KernelErrorOnTheServerReachesTheClient) {
  PsAndTwoWorkers cluster;
  tensorflow::ConfigProto config;
  config.set_operation_timeout_in_ms(30000);
  auto session = cluster.NewSession(config);
  ASSERT_TRUE(session->Create(worker_test::KernelErrorGraph()).ok());
  const absl::Time start = absl::Now();
  std::vector<Tensor> out;
  absl::Status s = session->Run({}, {"after"}, {}, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(Msg(s), HasSubstr("bad"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  // The cluster serves the next good request.
  ASSERT_TRUE(session->Extend(PsWorkerGraph()).ok());
  ASSERT_TRUE(session->Run({}, {}, {"init"}, nullptr).ok());
}

TEST(GrpcServerTest, BadRequestsGetClearErrorsAndTheServerStaysUp) {
  PsAndTwoWorkers cluster;
  std::unique_ptr<MasterInterface> master = NewGrpcRemoteMaster(cluster.worker0_target());
  const CallOptions opts = CallOptions::WithTimeout(absl::Seconds(10));
  // Unknown session handle.
  tensorflow::RunStepRequest run;
  run.set_session_handle("no-such-session");
  run.add_fetch("y:0");
  tensorflow::RunStepResponse ran;
  absl::Status s = master->RunStep(run, &ran, opts);
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  EXPECT_THAT(Msg(s), HasSubstr("no-such-session"));
  // A node pinned to a task the cluster lacks.
  Builder b;
  b.Const("c", Tensor::Scalar(1.0f), "/job:ps/task:9");
  tensorflow::CreateSessionRequest create;
  *create.mutable_graph_def() = b.def();
  tensorflow::CreateSessionResponse created;
  s = master->CreateSession(create, &created, opts);
  ASSERT_TRUE(s.ok()) << s;
  run.set_session_handle(created.session_handle());
  run.clear_fetch();
  run.add_fetch("c:0");
  s = master->RunStep(run, &ran, opts);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(Msg(s), HasSubstr("/job:ps/task:9"));
  // An op no kernel implements.
  Builder unknown;
  unknown.Node("u", "NoSuchOp", {}, "/job:worker/task:0");
  *create.mutable_graph_def() = unknown.def();
  s = master->CreateSession(create, &created, opts);
  if (s.ok()) {
    run.set_session_handle(created.session_handle());
    run.clear_fetch();
    run.add_target("u");
    s = master->RunStep(run, &ran, opts);
  }
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(Msg(s), HasSubstr("NoSuchOp"));
  // The server still serves a good session.
  auto session = cluster.NewSession();
  ASSERT_TRUE(session->Create(PsWorkerGraph()).ok());
  std::vector<Tensor> out;
  ASSERT_TRUE(session->Run({}, {}, {"init"}, nullptr).ok());
  s = session->Run({{"two", Tensor::Scalar(1.0f)}}, {"y"}, {}, &out);
  EXPECT_TRUE(s.ok()) << s;
}

// `max_graph_nodes` on a server: over gRPC, CreateSession of a bigger graph
// and RegisterGraph of one over twice as big are RESOURCE_EXHAUSTED naming
// the size and the limit, and the server then serves a graph at the limit
// (its partition, with the fetch's _Send, over it).
TEST(GrpcServerTest, GraphsOverMaxGraphNodesAreResourceExhaustedOverGrpc) {
  ClusterSpec spec;
  ASSERT_TRUE(spec.AddTask("worker", 0, "127.0.0.1:0").ok());
  GrpcServer::Options options;
  options.max_graph_nodes = 3;
  auto server = GrpcServer::Create(ServerDefFor(spec, "worker", 0), options);
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_TRUE((*server)->Start().ok());
  const std::string address = absl::StrCat("127.0.0.1:", (*server)->bound_port());
  const CallOptions opts = CallOptions::WithTimeout(absl::Seconds(10));
  Builder big;
  for (int i = 0; i < 4; ++i) big.Const(absl::StrCat("c", i), Tensor::Scalar(1.0f), "");
  std::unique_ptr<MasterInterface> master = NewGrpcRemoteMaster(address);
  tensorflow::CreateSessionRequest create;
  *create.mutable_graph_def() = big.def();
  tensorflow::CreateSessionResponse created;
  absl::Status s = master->CreateSession(create, &created, opts);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(Msg(s), HasSubstr("[Master CreateSession] the graph has 4 nodes, over the limit "
                                "of 3 (max_graph_nodes)"));
  std::unique_ptr<WorkerInterface> worker =
      NewGrpcRemoteWorker(address, "/job:worker/replica:0/task:0");
  for (int i = 4; i < 7; ++i) big.Const(absl::StrCat("c", i), Tensor::Scalar(1.0f), "");
  tensorflow::RegisterGraphRequest reg;
  *reg.mutable_graph_def() = big.def();
  tensorflow::RegisterGraphResponse registered;
  s = worker->RegisterGraph(reg, &registered, opts);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(Msg(s),
              HasSubstr("[Worker RegisterGraph] the graph has 7 nodes, over the limit of 6"));
  // A graph that fits runs.
  Builder small;
  small.Const("a", Tensor::Scalar(2.0f), "");
  small.Const("b", Tensor::Scalar(3.0f), "");
  small.Binary("c", "Mul", "a", "b", "");
  SessionOptions session_options;
  session_options.target = (*server)->target();
  auto session = NewSession(session_options);
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE((*session)->Create(small.def()).ok());
  std::vector<Tensor> out;
  ASSERT_TRUE((*session)->Run({}, {"c"}, {}, &out).ok());
  EXPECT_EQ(Floats(out[0]), (std::vector<float>{6}));
}

TEST(GrpcServerTest, RequestsOverMaxRequestBytesAreRefusedAndTheServerGoesOn) {
  ClusterSpec spec;
  ASSERT_TRUE(spec.AddTask("worker", 0, "127.0.0.1:0").ok());
  GrpcServer::Options options;
  options.max_request_bytes = 64 << 10;
  auto server = GrpcServer::Create(ServerDefFor(spec, "worker", 0), options);
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_TRUE((*server)->Start().ok());
  const std::string address = absl::StrCat("127.0.0.1:", (*server)->bound_port());
  const CallOptions opts = CallOptions::WithTimeout(absl::Seconds(10));
  std::unique_ptr<MasterInterface> master = NewGrpcRemoteMaster(address);
  Builder small;
  small.Const("a", Tensor::Scalar(2.0f), "");
  small.Const("b", Tensor::Scalar(3.0f), "");
  small.Binary("c", "Mul", "a", "b", "");
  tensorflow::CreateSessionRequest create;
  *create.mutable_graph_def() = small.def();
  tensorflow::CreateSessionResponse created;
  ASSERT_TRUE(master->CreateSession(create, &created, opts).ok());
  // A 256 KiB feed: refused whole by gRPC, before the master parses it.
  tensorflow::RunStepRequest run;
  run.set_session_handle(created.session_handle());
  *run.add_feed() = worker_test::Named("a:0", Tensor(DT_FLOAT, TensorShape({65536})));
  run.add_fetch("c:0");
  tensorflow::RunStepResponse ran;
  absl::Status s = master->RunStep(run, &ran, opts);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(Msg(s), HasSubstr("larger than max")) << s;
  // So is a graph over the cap, on the worker service too.
  std::unique_ptr<WorkerInterface> worker =
      NewGrpcRemoteWorker(address, "/job:worker/replica:0/task:0");
  Builder big;
  big.Const("w", Tensor(DT_FLOAT, TensorShape({32768})), "");
  tensorflow::RegisterGraphRequest reg;
  *reg.mutable_graph_def() = big.def();
  tensorflow::RegisterGraphResponse registered;
  s = worker->RegisterGraph(reg, &registered, opts);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  // Requests under the cap still run, in the same session.
  run.clear_feed();
  *run.add_feed() = worker_test::Named("a:0", Tensor::Scalar(5.0f));
  ASSERT_TRUE(master->RunStep(run, &ran, opts).ok());
  ASSERT_EQ(ran.tensor_size(), 1);
  EXPECT_EQ(Floats(ran.tensor(0).tensor()), (std::vector<float>{15}));
}

TEST(GrpcServerTest, GarbageToEveryMasterMethodIsInvalidArgumentNamingTheMethod) {
  PsAndTwoWorkers cluster;
  grpc::GenericStub stub(NewGrpcChannel(cluster.worker0_target()));
  std::mt19937 rng(5);
  for (const char* method :
       {"CreateSession", "ExtendSession", "PartialRunSetup", "RunStep", "CloseSession",
        "ListDevices", "Reset", "MakeCallable", "RunCallable", "ReleaseCallable"}) {
    std::string garbage(64, '\0');
    for (char& c : garbage) c = static_cast<char>(rng());
    garbage[0] = '\xff';  // Field 31, wire type 7: never valid.
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    grpc::Slice slice(garbage);
    grpc::ByteBuffer request(&slice, 1), response;
    absl::Notification done;
    grpc::Status status;
    stub.UnaryCall(&ctx, absl::StrCat("/tensorflow.MasterService/", method), grpc::StubOptions(),
                   &request, &response, [&](grpc::Status st) {
                     status = std::move(st);
                     done.Notify();
                   });
    done.WaitForNotification();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << method;
    EXPECT_THAT(status.error_message(),
                HasSubstr(absl::StrCat("[MasterService.", method, "] request of 64 bytes")));
    EXPECT_THAT(status.error_message(), HasSubstr("does not parse as tensorflow."));
  }
  // A feed claiming a huge tensor with no bytes behind it (v initialized
  // first, so the feed is the only thing wrong).
  auto session = cluster.NewSession();
  ASSERT_TRUE(session->Create(PsWorkerGraph()).ok());
  ASSERT_TRUE(session->Run({}, {}, {"init"}, nullptr).ok());
  tensorflow::RunStepRequest run;
  run.set_session_handle(dynamic_cast<RemoteSession*>(session.get())->handle());
  run.add_fetch("y:0");
  tensorflow::NamedTensorProto* feed = run.add_feed();
  feed->set_name("two:0");
  feed->mutable_tensor()->set_dtype(tensorflow::DT_FLOAT);
  feed->mutable_tensor()->mutable_tensor_shape()->add_dim()->set_size(int64_t{1} << 40);
  tensorflow::RunStepResponse ran;
  std::unique_ptr<MasterInterface> master = NewGrpcRemoteMaster(cluster.worker0_target());
  absl::Status s = master->RunStep(run, &ran, CallOptions::WithTimeout(absl::Seconds(10)));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(Msg(s), HasSubstr("two"));
  // The server still serves.
  ASSERT_TRUE(session->Run({}, {}, {"init"}, nullptr).ok());
}

TEST(GrpcServerTest, DeadPsIsReportedAsUnavailableNamingTheTask) {
  PsAndTwoWorkers cluster;
  tensorflow::ConfigProto config;
  config.set_operation_timeout_in_ms(5000);
  auto session = cluster.NewSession(config);
  ASSERT_TRUE(session->Create(PsWorkerGraph()).ok());
  ASSERT_TRUE(session->Run({}, {}, {"init"}, nullptr).ok());
  cluster.Kill(kPs);
  const absl::Time start = absl::Now();
  std::vector<Tensor> out;
  absl::Status s = session->Run({}, {"y"}, {}, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(Msg(s), HasSubstr("/job:ps/replica:0/task:0"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(8));
  // Closing the session is not an error: the dead ps holds no session to
  // delete (TensorFlow's client retries an UNAVAILABLE close, then logs the
  // session as not found).
  const absl::Time close_start = absl::Now();
  EXPECT_TRUE(session->Close().ok());
  EXPECT_LT(absl::Now() - close_start, absl::Seconds(5));
}

TEST(GrpcServerTest, CreateAndStartCheckTheirInput) {
  ClusterSpec spec;
  ASSERT_TRUE(spec.AddTask("worker", 0, "127.0.0.1:0").ok());
  auto s = GrpcServer::Create(ServerDefFor(spec, "ps", 0));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s.status()), HasSubstr("'ps'"));
  s = GrpcServer::Create(ServerDefFor(spec, "worker", 3));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);

  auto first = GrpcServer::Create(ServerDefFor(spec, "worker", 0));
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE((*first)->Start().ok());
  EXPECT_EQ((*first)->Start().code(), absl::StatusCode::kFailedPrecondition);
  // A second server on the port the first holds.
  ClusterSpec taken;
  ASSERT_TRUE(taken.AddTask("worker", 0, absl::StrCat("127.0.0.1:", (*first)->bound_port())).ok());
  auto second = GrpcServer::Create(ServerDefFor(taken, "worker", 0));
  ASSERT_TRUE(second.ok());
  absl::Status started = (*second)->Start();
  EXPECT_EQ(started.code(), absl::StatusCode::kUnavailable) << started;
  EXPECT_THAT(Msg(started), HasSubstr(absl::StrCat((*first)->bound_port())));
  (*first)->Stop();
  (*first)->Join();  // Returns once stopped.
}

TEST(GrpcServerTest, UnknownTargetIsAnError) {
  SessionOptions options;
  options.target = "tcp://127.0.0.1:1";
  auto session = NewSession(options);
  EXPECT_EQ(session.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(session.status()), HasSubstr("tcp://127.0.0.1:1"));
}

}  // namespace
}  // namespace dflow
