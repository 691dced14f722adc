#include "dflow/distributed/master.h"

#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "dflow/distributed/remote_session.h"
#include "dflow/distributed/worker_test_util.h"
#include "dflow/framework/attr_util.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/test_data_dir.h"
#include "dflow/runtime/session_util.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

using ::testing::HasSubstr;
using worker_test::Builder;
using worker_test::Floats;
using worker_test::PsWorkerGraph;
using worker_test::Task;

std::string Msg(const absl::Status& s) { return std::string(s.message()); }

// MasterTestSleep copies its input after 500 ms, whatever happens meanwhile;
// MasterTestFail fails once a MasterTestSleep has started (or after 5 s).
// Together they keep a failed task's RunGraph open after its error has
// reached the other tasks.
absl::Notification* g_sleep_started = nullptr;
REGISTER_OP("MasterTestSleep").Input("x: float").Output("y: float");
REGISTER_OP("MasterTestFail").Input("x: float").Output("y: float");
class SleepOp : public OpKernel {
 public:
  explicit SleepOp(OpKernelConstruction* c) : OpKernel(c) {}
  absl::Status Compute(OpKernelContext* ctx) override {
    if (!g_sleep_started->HasBeenNotified()) g_sleep_started->Notify();
    absl::SleepFor(absl::Milliseconds(500));
    ctx->set_output(0, ctx->input(0));
    return absl::OkStatus();
  }
};
class FailOp : public OpKernel {
 public:
  explicit FailOp(OpKernelConstruction* c) : OpKernel(c) {}
  absl::Status Compute(OpKernelContext* ctx) override {
    g_sleep_started->WaitForNotificationWithTimeout(absl::Seconds(5));
    return ctx->InvalidArgument("failed on purpose");
  }
};
REGISTER_KERNEL(KernelDefBuilder("MasterTestSleep").Device(kDeviceCPU), SleepOp);
REGISTER_KERNEL(KernelDefBuilder("MasterTestFail").Device(kDeviceCPU), FailOp);

// An in-process cluster: /job:ps/task:0 and /job:worker/task:0..1, each with
// two CPUs and a Worker, and a master on /job:worker/task:0.
class InProcessCluster {
 public:
  // `session_gc`, `max_sessions` and `max_graph_nodes` set the master's
  // MasterEnv fields.
  explicit InProcessCluster(absl::Duration session_gc = absl::Hours(24), int max_sessions = 1024,
                            int64_t max_graph_nodes = 0) {
    WorkerOptions opts;
    opts.worker_for_task = [this](const std::string& task) { return Lookup(task); };
    Add("ps", 0, opts);
    Add("worker", 0, opts);
    Add("worker", 1, opts);
    MasterEnv env;
    env.task_name = "/job:worker/replica:0/task:0";
    for (const auto& [name, task] : tasks_) env.cluster_tasks.push_back(name);
    env.worker_for_task = [this](const std::string& task) { return Lookup(task); };
    env.discovery_timeout = absl::Seconds(5);
    env.session_gc = session_gc;
    env.max_sessions = max_sessions;
    env.max_graph_nodes = max_graph_nodes;
    master_ = std::make_shared<Master>(std::move(env));
  }

  std::unique_ptr<RemoteSession> NewSession(tensorflow::ConfigProto config = {}) {
    SessionOptions options;
    options.config = std::move(config);
    return std::make_unique<RemoteSession>(master_, options);
  }

  Task& task(const std::string& name) { return *tasks_.at(name); }
  Master& master() { return *master_; }

 private:
  void Add(const std::string& job, int index, const WorkerOptions& opts) {
    auto t = std::make_unique<Task>(job, index, 2, opts);
    tasks_[absl::StrCat("/job:", job, "/replica:0/task:", index)] = std::move(t);
  }
  WorkerInterface* Lookup(const std::string& task) {
    auto it = tasks_.find(task);
    return it == tasks_.end() ? nullptr : it->second->worker.get();
  }

  std::map<std::string, std::unique_ptr<Task>> tasks_;
  std::shared_ptr<Master> master_;
};

const char kPs[] = "/job:ps/replica:0/task:0";
const char kWorker0[] = "/job:worker/replica:0/task:0";
const char kWorker1[] = "/job:worker/replica:0/task:1";

TEST(MasterTest, OpsRunWhereTheyArePinnedAndTensorsCrossTasks) {
  InProcessCluster cluster;
  auto session = cluster.NewSession();
  ASSERT_TRUE(session->Create(PsWorkerGraph()).ok());
  ASSERT_TRUE(session->Run({}, {}, {"init", "assign_r"}, nullptr).ok());
  // The variable lives on the ps, the resource variable on worker 1.
  Device* ps_cpu = cluster.task(kPs).mgr->HostCPU();
  EXPECT_EQ(ps_cpu->resource_manager()->NumResources(), 1);
  Device* w1_cpu = cluster.task(kWorker1).mgr->HostCPU();
  EXPECT_EQ(w1_cpu->resource_manager()->NumResources(), 1);
  EXPECT_EQ(cluster.task(kWorker0).mgr->HostCPU()->resource_manager()->NumResources(), 0);
  // y is computed on worker 1 from the ps's v and fetched through worker 0.
  for (int step = 0; step < 3; ++step) {
    std::vector<Tensor> out;
    absl::Status s = session->Run({}, {"y"}, {}, &out);
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(Floats(out[0]), (std::vector<float>{2, 4, 6}));
  }
}

TEST(MasterTest, FeedsAndFetchesWithSeveralSignatures) {
  InProcessCluster cluster;
  auto session = cluster.NewSession();
  ASSERT_TRUE(session->Create(PsWorkerGraph()).ok());
  ASSERT_TRUE(session->Run({}, {}, {"init"}, nullptr).ok());
  std::vector<Tensor> out;
  // Feeding v's value replaces the variable read.
  absl::Status s = session->Run({{"two", Tensor::Scalar(10.0f)}}, {"y:0", "two:0"}, {}, &out);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(Floats(out[0]), (std::vector<float>{10, 20, 30}));
  EXPECT_EQ(Floats(out[1]), (std::vector<float>{10}));
  s = session->Run({{"two", Tensor::Vec<int32_t>({1})}}, {"y"}, {}, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), HasSubstr("'two'"));
  s = session->Run({}, {"nope:0"}, {}, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Msg(s), HasSubstr("nope"));
}

TEST(MasterTest, ExtendChecksTheGraphVersion) {
  InProcessCluster cluster;
  auto session = cluster.NewSession();
  ASSERT_TRUE(session->Create(PsWorkerGraph()).ok());
  Builder more;
  more.Const("three", Tensor::Scalar(3.0f), "");
  more.Binary("z", "Mul", "y", "three", "");
  ASSERT_TRUE(session->Extend(more.def()).ok());
  ASSERT_TRUE(session->Run({}, {}, {"init"}, nullptr).ok());
  std::vector<Tensor> out;
  ASSERT_TRUE(session->Run({}, {"z"}, {}, &out).ok());
  EXPECT_EQ(Floats(out[0]), (std::vector<float>{6, 12, 18}));
  // A stale version is refused.
  tensorflow::ExtendSessionRequest req;
  req.set_session_handle(session->handle());
  req.set_current_graph_version(0);
  tensorflow::ExtendSessionResponse resp;
  absl::Status s = cluster.master().ExtendSession(req, &resp);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(Msg(s), HasSubstr("graph version"));
}

TEST(MasterTest, KernelErrorOnOneTaskCancelsTheOthers) {
  InProcessCluster cluster;
  tensorflow::ConfigProto config;
  config.set_operation_timeout_in_ms(30000);
  auto session = cluster.NewSession(config);
  ASSERT_TRUE(session->Create(worker_test::KernelErrorGraph()).ok());
  const absl::Time start = absl::Now();
  std::vector<Tensor> out;
  absl::Status s = session->Run({}, {"after"}, {}, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(Msg(s), HasSubstr("bad"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));  // Not the 30 s deadline.
}

// The ps fails while a kernel of its keeps its RunGraph open for 500 ms, so
// worker 1's failed Recv of 'bad' (a derived error) reaches the master first.
// The master reports the ps's root cause, not worker 1's copy of it.
TEST(MasterTest, MultiTaskFailureReportsTheRootCause) {
  absl::Notification started;
  g_sleep_started = &started;
  InProcessCluster cluster;
  tensorflow::ConfigProto config;
  config.set_operation_timeout_in_ms(30000);
  auto session = cluster.NewSession(config);
  Builder b;
  b.Const("three", Tensor::Vec<float>({1, 2, 3}), "/job:ps/task:0");
  b.Node("sleep", "MasterTestSleep", {"three"}, "/job:ps/task:0");
  b.Node("bad", "MasterTestFail", {"three"}, "/job:ps/task:0");
  b.Binary("after", "Mul", "bad", "bad", "/job:worker/task:1");
  ASSERT_TRUE(session->Create(b.def()).ok());
  const absl::Time start = absl::Now();
  std::vector<Tensor> out;
  absl::Status s = session->Run({}, {"after"}, {"sleep"}, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(Msg(s), HasSubstr("[MasterTestFail 'bad'] failed on purpose"));
  EXPECT_THAT(Msg(s), ::testing::Not(HasSubstr("RecvTensor"))) << s;
  EXPECT_THAT(Msg(s), ::testing::Not(HasSubstr("'after'"))) << s;
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(450)) << s;  // The ps's answer came last.
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  session.reset();
  g_sleep_started = nullptr;
}

TEST(MasterTest, DeviceFiltersLimitDiscoveryAndPlacement) {
  InProcessCluster cluster;
  tensorflow::ConfigProto config;
  config.add_device_filters("/job:ps");
  auto session = cluster.NewSession(config);
  ASSERT_TRUE(session->Create(PsWorkerGraph()).ok());
  absl::StatusOr<std::vector<DeviceInfo>> devices = session->ListDevices();
  ASSERT_TRUE(devices.ok()) << devices.status();
  std::vector<std::string> names;
  for (const DeviceInfo& d : *devices) names.push_back(d.name);
  EXPECT_THAT(names, ::testing::UnorderedElementsAre(absl::StrCat(kWorker0, "/device:CPU:0"),
                                                     absl::StrCat(kWorker0, "/device:CPU:1"),
                                                     absl::StrCat(kPs, "/device:CPU:0"),
                                                     absl::StrCat(kPs, "/device:CPU:1")));
  // Worker 1 is filtered out, so y cannot be placed there.
  std::vector<Tensor> out;
  absl::Status s = session->Run({}, {"y"}, {}, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(Msg(s), HasSubstr("/job:worker/task:1"));
  EXPECT_TRUE(session->Run({}, {}, {"init"}, nullptr).ok());
}

TEST(MasterTest, CloseFreesWorkerSessionsAndResetFreesVariables) {
  InProcessCluster cluster;
  auto session = cluster.NewSession();
  ASSERT_TRUE(session->Create(PsWorkerGraph()).ok());
  ASSERT_TRUE(session->Run({}, {}, {"init"}, nullptr).ok());
  const std::string handle = session->handle();
  ASSERT_TRUE(session->Close().ok());
  EXPECT_EQ(cluster.master().NumSessions(), 0);
  // The ps no longer knows the worker session.
  tensorflow::RegisterGraphRequest reg;
  reg.set_session_handle(handle);
  reg.set_create_worker_session_called(true);
  tensorflow::RegisterGraphResponse reg_resp;
  absl::Status s = cluster.task(kPs).worker->RegisterGraph(reg, &reg_resp);
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  // Variables outlive sessions (between-graph replicas share them) ...
  Device* ps_cpu = cluster.task(kPs).mgr->HostCPU();
  EXPECT_EQ(ps_cpu->resource_manager()->NumResources(), 1);
  // ... until Reset.
  auto other = cluster.NewSession();
  ASSERT_TRUE(other->Create(PsWorkerGraph()).ok());
  std::vector<Tensor> out;
  ASSERT_TRUE(other->Run({}, {"y"}, {}, &out).ok());
  ASSERT_TRUE(other->Reset({}).ok());
  EXPECT_EQ(ps_cpu->resource_manager()->NumResources(), 0);
  EXPECT_EQ(cluster.master().NumSessions(), 0);
  EXPECT_FALSE(other->Run({}, {"y"}, {}, &out).ok());  // Reset closed it.
}

// A session no call uses for session_gc is closed (its worker sessions
// too); one in use stays.
TEST(MasterTest, IdleSessionsAreCollectedAfterSessionGc) {
  InProcessCluster cluster(absl::Milliseconds(400));
  auto idle = cluster.NewSession();
  auto busy = cluster.NewSession();
  ASSERT_TRUE(idle->Create(PsWorkerGraph()).ok());
  ASSERT_TRUE(busy->Create(PsWorkerGraph()).ok());
  ASSERT_TRUE(busy->Run({}, {}, {"init"}, nullptr).ok());
  EXPECT_EQ(cluster.master().NumSessions(), 2);
  const absl::Time end = absl::Now() + absl::Seconds(10);
  std::vector<Tensor> out;
  while (cluster.master().NumSessions() == 2 && absl::Now() < end) {
    ASSERT_TRUE(busy->Run({}, {"y"}, {}, &out).ok());  // Keeps `busy` in use.
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(cluster.master().NumSessions(), 1);
  absl::Status s = idle->Run({}, {"y"}, {}, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  EXPECT_THAT(Msg(s), HasSubstr("session_gc"));
  // Its worker session on the ps went with it.
  tensorflow::RegisterGraphRequest reg;
  reg.set_session_handle(idle->handle());
  reg.set_create_worker_session_called(true);
  tensorflow::RegisterGraphResponse reg_resp;
  s = cluster.task(kPs).worker->RegisterGraph(reg, &reg_resp);
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  EXPECT_TRUE(busy->Run({}, {"y"}, {}, &out).ok());
}

TEST(MasterTest, SessionsBeyondTheCapAreResourceExhausted) {
  InProcessCluster cluster(absl::Hours(24), /*max_sessions=*/2);
  auto a = cluster.NewSession();
  auto b = cluster.NewSession();
  ASSERT_TRUE(a->Create(PsWorkerGraph()).ok());
  ASSERT_TRUE(b->Create(PsWorkerGraph()).ok());
  auto c = cluster.NewSession();
  absl::Status s = c->Create(PsWorkerGraph());
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(Msg(s), HasSubstr("max_sessions 2"));
  ASSERT_TRUE(a->Close().ok());
  auto d = cluster.NewSession();
  EXPECT_TRUE(d->Create(PsWorkerGraph()).ok());  // Room again.
  EXPECT_EQ(cluster.master().NumSessions(), 2);
}

// A graph over max_graph_nodes is refused before any device is asked or
// graph built, whether it comes at once or grows by ExtendSession; the
// session and the master keep serving.
TEST(MasterTest, GraphsOverMaxGraphNodesAreResourceExhausted) {
  const int64_t base = GraphNodeCount(PsWorkerGraph());
  InProcessCluster cluster(absl::Hours(24), 1024, /*max_graph_nodes=*/base + 2);
  Builder big;
  for (int i = 0; i < base + 3; ++i) big.Const(absl::StrCat("c", i), Tensor::Scalar(1.0f), "");
  auto refused = cluster.NewSession();
  absl::Status s = refused->Create(big.def());
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(Msg(s), HasSubstr(absl::StrCat("[Master CreateSession] the graph has ", base + 3,
                                             " nodes, over the limit of ", base + 2,
                                             " (max_graph_nodes)")));
  EXPECT_EQ(cluster.master().NumSessions(), 0);

  auto session = cluster.NewSession();
  ASSERT_TRUE(session->Create(PsWorkerGraph()).ok());
  Builder two;  // Up to the limit exactly.
  two.Const("three", Tensor::Scalar(3.0f), "");
  two.Binary("z", "Mul", "y", "three", "");
  ASSERT_TRUE(session->Extend(two.def()).ok());
  Builder one;
  one.Const("four", Tensor::Scalar(4.0f), "");
  s = session->Extend(one.def());
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(Msg(s),
              HasSubstr(absl::StrCat("[Master ExtendSession] the graph has ", base + 3, " nodes")));
  ASSERT_TRUE(session->Run({}, {}, {"init"}, nullptr).ok());
  std::vector<Tensor> out;
  ASSERT_TRUE(session->Run({}, {"z"}, {}, &out).ok());
  EXPECT_EQ(Floats(out[0]), (std::vector<float>{6, 12, 18}));
  EXPECT_EQ(session->Run({}, {"four"}, {}, &out).code(), absl::StatusCode::kNotFound);
}

TEST(MasterTest, UnknownSessionAndUnreachableTask) {
  InProcessCluster cluster;
  tensorflow::RunStepRequest req;
  req.set_session_handle("no-such-session");
  req.add_fetch("y");
  tensorflow::RunStepResponse resp;
  absl::Status s = cluster.master().RunStep(req, &resp);
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(Msg(s), HasSubstr("no-such-session"));
  req.set_store_errors_in_response_body(true);
  ASSERT_TRUE(cluster.master().RunStep(req, &resp).ok());
  EXPECT_EQ(resp.status_code(), tensorflow::error::ABORTED);

  // A task of the cluster without a worker fails discovery, naming it.
  MasterEnv env;
  env.task_name = kWorker0;
  env.cluster_tasks = {kWorker0, "/job:ps/replica:0/task:7"};
  env.worker_for_task = [&](const std::string& t) -> WorkerInterface* {
    return t == kWorker0 ? cluster.task(kWorker0).worker.get() : nullptr;
  };
  Master lonely(env);
  tensorflow::CreateSessionRequest create;
  tensorflow::CreateSessionResponse created;
  s = lonely.CreateSession(create, &created, CallOptions::WithTimeout(absl::Seconds(5)));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(Msg(s), HasSubstr("/job:ps/replica:0/task:7"));
}

// A step waiting on an empty queue on the ps ends when its session is
// closed, instead of holding Close (and the client) until its deadline.
TEST(MasterTest, CloseCancelsStepsInFlight) {
  InProcessCluster cluster;
  Builder b;
  tensorflow::NodeDef* q = b.Node("q", "FIFOQueueV2", {}, "/job:ps/task:0");
  SetAttr(q, "component_types", std::vector<DataType>{DT_FLOAT});
  tensorflow::NodeDef* deq = b.Node("deq", "QueueDequeueV2", {"q"}, "/job:ps/task:0");
  SetAttr(deq, "component_types", std::vector<DataType>{DT_FLOAT});
  b.Binary("twice", "Add", "deq", "deq", "/job:worker/task:1");
  tensorflow::ConfigProto config;
  config.set_operation_timeout_in_ms(30000);
  auto session = cluster.NewSession(config);
  ASSERT_TRUE(session->Create(b.def()).ok());
  absl::Status run_status;
  absl::Notification ran;
  std::thread runner([&] {
    std::vector<Tensor> out;
    run_status = session->Run({}, {"twice"}, {}, &out);
    ran.Notify();
  });
  absl::SleepFor(absl::Milliseconds(200));  // The step is now waiting on the queue.
  EXPECT_FALSE(ran.HasBeenNotified());
  const absl::Time start = absl::Now();
  EXPECT_TRUE(session->Close().ok());
  EXPECT_TRUE(ran.WaitForNotificationWithTimeout(absl::Seconds(5)));
  runner.join();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(run_status.code(), absl::StatusCode::kCancelled) << run_status;
  EXPECT_THAT(Msg(run_status), HasSubstr("closed"));
}

TEST(MasterTest, CallablesRunTheirSignature) {
  InProcessCluster cluster;
  auto session = cluster.NewSession();
  ASSERT_TRUE(session->Create(PsWorkerGraph()).ok());
  ASSERT_TRUE(session->Run({}, {}, {"init"}, nullptr).ok());
  tensorflow::MakeCallableRequest make;
  make.set_session_handle(session->handle());
  make.mutable_options()->add_feed("two:0");
  make.mutable_options()->add_fetch("y:0");
  tensorflow::MakeCallableResponse made;
  ASSERT_TRUE(cluster.master().MakeCallable(make, &made).ok());
  tensorflow::RunCallableRequest run;
  run.set_session_handle(session->handle());
  run.set_handle(made.handle());
  Tensor::Scalar(0.5f).AsProtoTensorContent(run.add_feed());
  tensorflow::RunCallableResponse ran;
  absl::Status s = cluster.master().RunCallable(run, &ran);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(ran.fetch_size(), 1);
  EXPECT_EQ(worker_test::Floats(ran.fetch(0)), (std::vector<float>{0.5f, 1, 1.5f}));
  tensorflow::ReleaseCallableRequest release;
  release.set_session_handle(session->handle());
  release.set_handle(made.handle());
  tensorflow::ReleaseCallableResponse released;
  EXPECT_TRUE(cluster.master().ReleaseCallable(release, &released).ok());
  EXPECT_EQ(cluster.master().ReleaseCallable(release, &released).code(),
            absl::StatusCode::kInvalidArgument);
}

// --- loops spanning tasks -------------------------------------------------------

// A TensorFlow-built loop graph (tests/data/control_flow) with its devices
// moved: each "/device:CPU:k" becomes where[k].
tensorflow::GraphDef LoopGraph(const std::string& name, const std::vector<std::string>& where) {
  std::ifstream in(TestDataDir() + "/control_flow/" + name + ".pbtxt");
  std::stringstream text;
  text << in.rdbuf();
  tensorflow::GraphDef g;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text.str(), &g)) << name;
  for (tensorflow::NodeDef& n : *g.mutable_node()) {
    for (size_t k = 0; k < where.size(); ++k) {
      if (n.device() == absl::StrCat("/device:CPU:", k)) n.set_device(where[k]);
    }
  }
  return g;
}

// while_v1_devices: s <- (tanh(s) + x * i) / 2 for i < n, x = [1, 2, 3].
std::vector<float> SpanLoop(int n) {
  std::vector<float> s(3, 0.0f);
  for (int i = 0; i < n; ++i) {
    for (int k = 0; k < 3; ++k) s[k] = (std::tanh(s[k]) + (k + 1.0f) * i) * 0.5f;
  }
  return s;
}

// The body's second half runs on worker 1: per iteration the loop state goes
// there and back (RecvTensor keyed by frame and iteration), and worker 1
// runs the loop's iterations through its control loop.
TEST(MasterTest, LoopBodySpansTwoTasks) {
  InProcessCluster cluster;
  auto session = cluster.NewSession();
  const std::string w0 = absl::StrCat(kWorker0, "/device:CPU:0");
  const std::string w1 = absl::StrCat(kWorker1, "/device:CPU:1");
  ASSERT_TRUE(session->Create(LoopGraph("while_v1_devices", {w0, w1})).ok());
  for (int n : {0, 1, 7, 300}) {
    std::vector<Tensor> out;
    absl::Status s = session->Run({{"n", Tensor::Scalar<int32_t>(n)}}, {"total:0"}, {}, &out);
    ASSERT_TRUE(s.ok()) << "n=" << n << ": " << s;
    const std::vector<float> want = SpanLoop(n);
    for (int k = 0; k < 3; ++k) EXPECT_NEAR(Floats(out[0])[k], want[k], 1e-5) << "n=" << n;
  }
}

// Nested loops whose frames span two devices of one task (the worker's own
// partitioning cuts them) and, in the second graph, two tasks.
TEST(MasterTest, NestedLoopsSpanDevicesAndTasks) {
  InProcessCluster cluster;
  for (const std::string& second :
       {absl::StrCat(kWorker0, "/device:CPU:1"), absl::StrCat(kWorker1, "/device:CPU:0")}) {
    auto session = cluster.NewSession();
    ASSERT_TRUE(session
                    ->Create(LoopGraph("while_v1_nested_devices",
                                       {absl::StrCat(kWorker0, "/device:CPU:0"), second}))
                    .ok());
    for (int n : {0, 1, 6}) {
      std::vector<Tensor> out;
      absl::Status s = session->Run({{"n", Tensor::Scalar<int32_t>(n)}}, {"total:0"}, {}, &out);
      ASSERT_TRUE(s.ok()) << second << " n=" << n << ": " << s;
      int want = 0;
      for (int i = 0; i < n; ++i) {
        for (int j = 0; j < i; ++j) want += i * j;
      }
      EXPECT_EQ(out[0].scalar<int32_t>(), want) << second << " n=" << n;
    }
  }
}

}  // namespace
}  // namespace dflow
