#include "dflow/runtime/executor.h"

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "dflow/framework/attr_util.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/runtime/call_frame.h"
#include "dflow/runtime/device_test_util.h"
#include "dflow/runtime/graph.h"
#include "dflow/runtime/rendezvous_local.h"
#include "dflow/runtime/step_stats_collector.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

constexpr char kDevice[] = "/job:localhost/replica:0/task:0/device:CPU:0";

// --- test ops -------------------------------------------------------------------

REGISTER_OP("ExecTestConst").Output("out: int64").Attr("value: int").SetShapeFn(ScalarShape);
REGISTER_OP("ExecTestAdd")
    .Input("a: int64")
    .Input("b: int64")
    .Output("sum: int64")
    .SetShapeFn(ScalarShape);
REGISTER_OP("ExecTestIdentity").Input("x: T").Output("y: T").Attr("T: type");
// Expensive: adds one after waiting (up to 5 s) until `wait_for` of its kind run at once.
REGISTER_OP("ExecTestSlow").Input("x: int64").Output("y: int64").Attr("wait_for: int = 1");
REGISTER_OP("ExecTestFail").Input("x: int64").Output("y: int64").Attr("delay_ms: int = 0");
// Async: adds one on another thread after `delay_ms`; with `lend`, that thread
// completes it inside a RunReadyHereScope and records its id in g_completer.
REGISTER_OP("ExecTestAsync")
    .Input("x: int64")
    .Output("y: int64")
    .Attr("delay_ms: int = 0")
    .Attr("lend: bool = false");
// Appends its name to a global log.
REGISTER_OP("ExecTestRecord").SetIsStateful();
REGISTER_OP("ExecTestThread").SetIsStateful();
REGISTER_OP("ExecTestMake").Output("y: int64");
REGISTER_OP("ExecTestTake").Input("x: int64").SetIsStateful();
REGISTER_OP("ExecTestRefVar").Output("ref: Ref(int64)").SetIsStateful();
REGISTER_OP("ExecTestRefAdd").Input("ref: Ref(int64)").Input("x: int64").SetIsStateful();

std::atomic<int> g_running{0};
std::atomic<int> g_max_running{0};
absl::Mutex g_log_mu;
std::vector<std::string> g_log;

class ConstOp : public OpKernel {
 public:
  explicit ConstOp(OpKernelConstruction* c) : OpKernel(c) { (void)c->GetAttr("value", &v_); }
  absl::Status Compute(OpKernelContext* ctx) override {
    ctx->set_output(0, Tensor::Scalar<int64_t>(v_));
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }

 private:
  int64_t v_ = 0;
};

class AddOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    ctx->set_output(0, Tensor::Scalar<int64_t>(ctx->input(0).scalar<int64_t>() +
                                               ctx->input(1).scalar<int64_t>()));
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }
};

class IdentityOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    ctx->set_output(0, ctx->input(0));
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }
};

class SlowOp : public OpKernel {
 public:
  explicit SlowOp(OpKernelConstruction* c) : OpKernel(c) { (void)c->GetAttr("wait_for", &n_); }
  absl::Status Compute(OpKernelContext* ctx) override {
    int now = ++g_running;
    int prev = g_max_running.load();
    while (now > prev && !g_max_running.compare_exchange_weak(prev, now)) {
    }
    const absl::Time until = absl::Now() + absl::Seconds(5);
    while (g_max_running.load() < n_ && absl::Now() < until) absl::SleepFor(absl::Milliseconds(1));
    --g_running;
    ctx->set_output(0, Tensor::Scalar<int64_t>(ctx->input(0).scalar<int64_t>() + 1));
    return absl::OkStatus();
  }

 private:
  int64_t n_ = 1;
};

class FailOp : public OpKernel {
 public:
  explicit FailOp(OpKernelConstruction* c) : OpKernel(c) { (void)c->GetAttr("delay_ms", &ms_); }
  absl::Status Compute(OpKernelContext* ctx) override {
    absl::SleepFor(absl::Milliseconds(ms_));
    return ctx->InvalidArgument("boom ", ctx->input(0).scalar<int64_t>());
  }

 private:
  int64_t ms_ = 0;
};

std::thread::id g_completer;

class AsyncAddOp : public AsyncOpKernel {
 public:
  explicit AsyncAddOp(OpKernelConstruction* c) : AsyncOpKernel(c) {
    (void)c->GetAttr("delay_ms", &ms_);
    (void)c->GetAttr("lend", &lend_);
  }
  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    int64_t x = ctx->input(0).scalar<int64_t>();
    std::thread([ctx, done = std::move(done), x, ms = ms_, lend = lend_] {
      absl::SleepFor(absl::Milliseconds(ms));
      ctx->set_output(0, Tensor::Scalar<int64_t>(x + 1));
      if (!lend) {
        done(absl::OkStatus());
        return;
      }
      {
        absl::MutexLock l(&g_log_mu);
        g_completer = std::this_thread::get_id();
      }
      RunReadyHereScope here;
      done(absl::OkStatus());
    }).detach();
  }

 private:
  int64_t ms_ = 0;
  bool lend_ = false;
};

class RecordOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    absl::MutexLock l(&g_log_mu);
    g_log.push_back(name());
    return absl::OkStatus();
  }
};

// Cheap, but does not say so (OpKernel's default: expensive); records the
// thread it ran on.
std::vector<std::thread::id> g_threads;
class ThreadOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    absl::MutexLock l(&g_log_mu);
    g_threads.push_back(std::this_thread::get_id());
    return absl::OkStatus();
  }
};

class RefVarOp : public OpKernel {
 public:
  explicit RefVarOp(OpKernelConstruction* c) : OpKernel(c), var_(Tensor::Scalar<int64_t>(10)) {}
  absl::Status Compute(OpKernelContext* ctx) override {
    ctx->set_output_ref(0, &mu_, &var_);
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }

 private:
  absl::Mutex mu_;
  Tensor var_;
};

class RefAddOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    absl::MutexLock l(ctx->input_ref_mutex(0));
    ctx->mutable_input(0)->scalar<int64_t>() += ctx->input(1).scalar<int64_t>();
    return absl::OkStatus();
  }
};

REGISTER_KERNEL(KernelDefBuilder("ExecTestConst").Device(kDeviceCPU), ConstOp);
REGISTER_KERNEL(KernelDefBuilder("ExecTestAdd").Device(kDeviceCPU), AddOp);
REGISTER_KERNEL(KernelDefBuilder("ExecTestIdentity").Device(kDeviceCPU), IdentityOp);
REGISTER_KERNEL(KernelDefBuilder("ExecTestSlow").Device(kDeviceCPU), SlowOp);
REGISTER_KERNEL(KernelDefBuilder("ExecTestFail").Device(kDeviceCPU), FailOp);
REGISTER_KERNEL(KernelDefBuilder("ExecTestAsync").Device(kDeviceCPU), AsyncAddOp);
REGISTER_KERNEL(KernelDefBuilder("ExecTestRecord").Device(kDeviceCPU), RecordOp);
REGISTER_KERNEL(KernelDefBuilder("ExecTestThread").Device(kDeviceCPU), ThreadOp);
REGISTER_KERNEL(KernelDefBuilder("ExecTestThread").Device(kDeviceGPU), ThreadOp);
REGISTER_KERNEL(KernelDefBuilder("ExecTestRefVar").Device(kDeviceCPU), RefVarOp);
REGISTER_KERNEL(KernelDefBuilder("ExecTestRefAdd").Device(kDeviceCPU), RefAddOp);

// --- helpers ----------------------------------------------------------------------

Device* TestDevice() {
  static Device* d = new Device(*DeviceName::Parse(kDevice), 1, 0);
  return d;
}

tensorflow::NodeDef* AddNode(tensorflow::GraphDef* g, const std::string& name,
                             const std::string& op, std::vector<std::string> inputs = {}) {
  tensorflow::NodeDef* n = g->add_node();
  n->set_name(name);
  n->set_op(op);
  for (auto& in : inputs) n->add_input(in);
  return n;
}

void Const(tensorflow::GraphDef* g, const std::string& name, int64_t v) {
  SetAttr(AddNode(g, name, "ExecTestConst"), "value", v);
}

void Retval(tensorflow::GraphDef* g, const std::string& name, const std::string& input, int index,
            DataType dtype = DT_INT64) {
  tensorflow::NodeDef* n = AddNode(g, name, "_Retval", {input});
  SetAttr(n, "T", dtype);
  SetAttr(n, "index", index);
}

absl::StatusOr<std::unique_ptr<Executor>> MakeExecutor(const tensorflow::GraphDef& def) {
  ASSIGN_OR_RETURN(std::unique_ptr<Graph> g, Graph::FromGraphDef(def));
  return Executor::Create(std::move(g), TestDevice());
}

class ExecutorTest : public ::testing::Test {
 protected:
  ExecutorTest() : pool_("exec_test", 8) {
    args_.runner = [this](std::function<void()> fn) { pool_.Schedule(std::move(fn)); };
    args_.rendezvous = &rendezvous_;
  }

  // Runs `def` returning `num_retvals` values.
  absl::StatusOr<std::vector<Tensor>> RunGraph(const tensorflow::GraphDef& def, int num_retvals,
                                               std::vector<Tensor> feeds = {}) {
    ASSIGN_OR_RETURN(std::unique_ptr<Executor> exec, MakeExecutor(def));
    FunctionCallFrame frame(std::move(feeds), num_retvals);
    args_.call_frame = &frame;
    RETURN_IF_ERROR(exec->Run(args_));
    return frame.ConsumeRetvals();
  }

  ThreadPool pool_;
  LocalRendezvous rendezvous_;
  Executor::Args args_;
};

int64_t Scalar(const Tensor& t) { return t.scalar<int64_t>(); }

// --- tests ------------------------------------------------------------------------

TEST_F(ExecutorTest, DiamondComputesSums) {
  // a=2, b=a+a, c=a+b, d=b+c → b=4, c=6, d=10.
  tensorflow::GraphDef g;
  Const(&g, "a", 2);
  AddNode(&g, "b", "ExecTestAdd", {"a", "a"});
  AddNode(&g, "c", "ExecTestAdd", {"a", "b"});
  AddNode(&g, "d", "ExecTestAdd", {"b", "c"});
  Retval(&g, "r0", "d", 0);
  Retval(&g, "r1", "b", 1);
  absl::StatusOr<std::vector<Tensor>> out = RunGraph(g, 2);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Scalar((*out)[0]), 10);
  EXPECT_EQ(Scalar((*out)[1]), 4);
}

TEST_F(ExecutorTest, ArgsFlowThroughCallFrame) {
  tensorflow::GraphDef g;
  tensorflow::NodeDef* x = AddNode(&g, "x", "_Arg");
  SetAttr(x, "T", DT_INT64);
  SetAttr(x, "index", 0);
  AddNode(&g, "y", "ExecTestAdd", {"x", "x"});
  Retval(&g, "r", "y", 0);
  absl::StatusOr<std::vector<Tensor>> out = RunGraph(g, 1, {Tensor::Scalar<int64_t>(21)});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Scalar((*out)[0]), 42);
}

TEST_F(ExecutorTest, ControlEdgesOrderExecution) {
  tensorflow::GraphDef g;
  AddNode(&g, "first", "ExecTestRecord");
  AddNode(&g, "second", "ExecTestRecord", {"^first"});
  AddNode(&g, "third", "ExecTestRecord", {"^second"});
  AddNode(&g, "fourth", "ExecTestRecord", {"^third", "^first"});
  {
    absl::MutexLock l(&g_log_mu);
    g_log.clear();
  }
  ASSERT_TRUE(RunGraph(g, 0).ok());
  absl::MutexLock l(&g_log_mu);
  EXPECT_EQ(g_log, (std::vector<std::string>{"first", "second", "third", "fourth"}));
}

TEST_F(ExecutorTest, IndependentExpensiveNodesRunInParallel) {
  // Eight expensive nodes that each wait until eight run at once: only a
  // parallel executor finishes them without hitting their 5 s timeout.
  tensorflow::GraphDef g;
  Const(&g, "c", 1);
  g_max_running = 0;
  for (int i = 0; i < 8; ++i) {
    SetAttr(AddNode(&g, absl::StrCat("slow", i), "ExecTestSlow", {"c"}), "wait_for", 8);
    Retval(&g, absl::StrCat("r", i), absl::StrCat("slow", i), i);
  }
  absl::StatusOr<std::vector<Tensor>> out = RunGraph(g, 8);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(g_max_running.load(), 8);
  for (const Tensor& t : *out) EXPECT_EQ(Scalar(t), 2);
}

// As TensorFlow's executor: kernels that call themselves expensive but run in
// microseconds go to the pool at first, and run inline once timed as cheap,
// so a loop of small ops does not hand every iteration to another thread.
TEST_F(ExecutorTest, ExpensiveKernelsTimedAsCheapRunInline) {
  tensorflow::GraphDef g;
  Const(&g, "c", 1);
  AddNode(&g, "a", "ExecTestThread", {"^c"});
  AddNode(&g, "b", "ExecTestThread", {"^c"});  // Ready with a: one of them goes to the pool.
  absl::StatusOr<std::unique_ptr<Executor>> exec = MakeExecutor(g);
  ASSERT_TRUE(exec.ok()) << exec.status();
  auto threads_of_one_run = [&]() -> std::vector<std::thread::id> {
    {
      absl::MutexLock l(&g_log_mu);
      g_threads.clear();
    }
    EXPECT_TRUE((*exec)->Run(args_).ok());
    absl::MutexLock l(&g_log_mu);
    return g_threads;
  };
  const std::thread::id here = std::this_thread::get_id();
  std::vector<std::thread::id> first = threads_of_one_run();
  ASSERT_EQ(first.size(), 2u);
  EXPECT_TRUE(first[0] != here || first[1] != here) << "one of two expensive nodes is handed off";
  for (int i = 0; i < 300; ++i) threads_of_one_run();
  std::vector<std::thread::id> last = threads_of_one_run();
  ASSERT_EQ(last.size(), 2u);
  EXPECT_EQ(last[0], here);
  EXPECT_EQ(last[1], here);
}

// A GPU-typed device with memory of its own (host-backed).
testing_util::HostMemoryGpu* OwnMemoryDevice() {
  static auto* gpu =
      new testing_util::HostMemoryGpu(*DeviceName::Parse("/job:a/replica:0/task:0/device:GPU:0"));
  return gpu;
}

// Makes a scalar in device memory.
class MakeOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    ctx->allocate_output(0, TensorShape({}));
    return absl::OkStatus();
  }
};
REGISTER_KERNEL(KernelDefBuilder("ExecTestMake").Device(kDeviceGPU), MakeOp);
// Reads its input in host memory: the executor copies it out of the
// device first, which on a GPU waits for the device's queued work.
REGISTER_KERNEL(KernelDefBuilder("ExecTestTake").Device(kDeviceGPU).HostMemory("x"), ThreadOp);

// On a GPU a kernel's Compute only queues work on the stream: as in
// TensorFlow, none is expensive, so both ready nodes run inline from the
// first run on (on a CPU one of them goes to the pool: the test above).
TEST_F(ExecutorTest, KernelsOnADeviceWithItsOwnMemoryRunInline) {
  tensorflow::GraphDef g;
  AddNode(&g, "a", "ExecTestThread");
  AddNode(&g, "b", "ExecTestThread");
  absl::StatusOr<std::unique_ptr<Graph>> graph = Graph::FromGraphDef(g);
  ASSERT_TRUE(graph.ok()) << graph.status();
  absl::StatusOr<std::unique_ptr<Executor>> exec =
      Executor::Create(*std::move(graph), OwnMemoryDevice());
  ASSERT_TRUE(exec.ok()) << exec.status();
  for (int run = 0; run < 3; ++run) {
    {
      absl::MutexLock l(&g_log_mu);
      g_threads.clear();
    }
    ASSERT_TRUE((*exec)->Run(args_).ok());
    absl::MutexLock l(&g_log_mu);
    ASSERT_EQ(g_threads.size(), 2u);
    EXPECT_EQ(g_threads[0], std::this_thread::get_id()) << run;
    EXPECT_EQ(g_threads[1], std::this_thread::get_id()) << run;
  }
}

// A node whose input must first be copied out of device memory waits for
// the device: it always goes to the pool, so the thread that made it ready
// goes on launching the rest (here: "launch", inline).
TEST_F(ExecutorTest, ANodeWaitingForACopyOutOfTheDeviceGoesToThePool) {
  tensorflow::GraphDef g;
  AddNode(&g, "make", "ExecTestMake");
  AddNode(&g, "take", "ExecTestTake", {"make"});
  AddNode(&g, "launch", "ExecTestThread", {"^make"});
  absl::StatusOr<std::unique_ptr<Graph>> graph = Graph::FromGraphDef(g);
  ASSERT_TRUE(graph.ok()) << graph.status();
  absl::StatusOr<std::unique_ptr<Executor>> exec =
      Executor::Create(*std::move(graph), OwnMemoryDevice());
  ASSERT_TRUE(exec.ok()) << exec.status();
  for (int run = 0; run < 50; ++run) {  // Still so once timed as cheap.
    {
      absl::MutexLock l(&g_log_mu);
      g_threads.clear();
    }
    ASSERT_TRUE((*exec)->Run(args_).ok());
    absl::MutexLock l(&g_log_mu);
    ASSERT_EQ(g_threads.size(), 2u);
    // One ran here (launch), the other (take) on a pool thread.
    EXPECT_NE(g_threads[0] == std::this_thread::get_id(),
              g_threads[1] == std::this_thread::get_id())
        << run;
  }
}

TEST_F(ExecutorTest, AsyncKernelCompletesOnAnotherThread) {
  tensorflow::GraphDef g;
  Const(&g, "c", 5);
  SetAttr(AddNode(&g, "a1", "ExecTestAsync", {"c"}), "delay_ms", 20);
  AddNode(&g, "a2", "ExecTestAsync", {"a1"});
  AddNode(&g, "sum", "ExecTestAdd", {"a2", "c"});
  Retval(&g, "r", "sum", 0);
  absl::StatusOr<std::vector<Tensor>> out = RunGraph(g, 1);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Scalar((*out)[0]), 12);  // (5+1+1)+5
}

// A thread that completes an async kernel inside RunReadyHereScope runs what
// the completion makes ready itself, expensive nodes included, as a pool
// thread would (one of two expensive nodes still goes to the pool); without
// the scope they are handed to the pool.
TEST_F(ExecutorTest, ALentCompletingThreadRunsTheReadyNodes) {
  for (const bool lend : {false, true}) {
    tensorflow::GraphDef g;
    Const(&g, "c", 5);
    tensorflow::NodeDef* a = AddNode(&g, "a", "ExecTestAsync", {"c"});
    SetAttr(a, "delay_ms", 10);
    SetAttr(a, "lend", lend);
    AddNode(&g, "t1", "ExecTestThread", {"^a"});
    AddNode(&g, "t2", "ExecTestThread", {"^a"});
    Retval(&g, "r", "a", 0);
    {
      absl::MutexLock l(&g_log_mu);
      g_threads.clear();
      g_completer = std::thread::id();
    }
    absl::StatusOr<std::vector<Tensor>> out = RunGraph(g, 1);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(Scalar((*out)[0]), 6);
    absl::MutexLock l(&g_log_mu);
    ASSERT_EQ(g_threads.size(), 2u);
    const int here = static_cast<int>(std::count(g_threads.begin(), g_threads.end(), g_completer));
    EXPECT_EQ(here, lend ? 1 : 0) << "lend " << lend;
  }
}

TEST_F(ExecutorTest, RunsWithoutRunnerInline) {
  tensorflow::GraphDef g;
  Const(&g, "c", 1);
  AddNode(&g, "s", "ExecTestSlow", {"c"});
  AddNode(&g, "a", "ExecTestAsync", {"s"});
  Retval(&g, "r", "a", 0);
  args_.runner = nullptr;
  absl::StatusOr<std::vector<Tensor>> out = RunGraph(g, 1);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Scalar((*out)[0]), 3);
}

TEST_F(ExecutorTest, LongChainOfCheapNodes) {
  tensorflow::GraphDef g;
  Const(&g, "n0", 7);
  for (int i = 1; i <= 5000; ++i) {
    SetAttr(AddNode(&g, absl::StrCat("n", i), "ExecTestIdentity", {absl::StrCat("n", i - 1)}), "T",
            DT_INT64);
  }
  Retval(&g, "r", "n5000", 0);
  absl::StatusOr<std::vector<Tensor>> out = RunGraph(g, 1);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Scalar((*out)[0]), 7);
}

TEST_F(ExecutorTest, FirstErrorAbortsStepWithoutHang) {
  // "bad" fails; "recv" waits for a tensor nobody sends, so only the abort
  // ends the step; "after" depends on "bad" and must never run.
  tensorflow::GraphDef g;
  Const(&g, "c", 3);
  AddNode(&g, "bad", "ExecTestFail", {"c"});
  AddNode(&g, "after", "ExecTestRecord", {"^bad"});
  tensorflow::NodeDef* recv = AddNode(&g, "recv", "_Recv");
  SetAttr(recv, "tensor_type", DT_INT64);
  SetAttr(recv, "tensor_name", "never_sent");
  SetAttr(recv, "send_device", kDevice);
  SetAttr(recv, "send_device_incarnation", int64_t{1});
  SetAttr(recv, "recv_device", kDevice);
  Retval(&g, "r", "recv", 0);
  {
    absl::MutexLock l(&g_log_mu);
    g_log.clear();
  }
  absl::StatusOr<std::vector<Tensor>> out = RunGraph(g, 1);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  EXPECT_NE(out.status().message().find("ExecTestFail 'bad'"), std::string::npos) << out.status();
  EXPECT_NE(out.status().message().find("boom 3"), std::string::npos) << out.status();
  absl::MutexLock l(&g_log_mu);
  EXPECT_TRUE(g_log.empty());
}

TEST_F(ExecutorTest, DoneIsCalledExactlyOnceAfterError) {
  // Two failures racing plus in-flight expensive work.
  tensorflow::GraphDef g;
  Const(&g, "c", 1);
  SetAttr(AddNode(&g, "bad1", "ExecTestFail", {"c"}), "delay_ms", 5);
  SetAttr(AddNode(&g, "bad2", "ExecTestFail", {"c"}), "delay_ms", 5);
  for (int i = 0; i < 4; ++i) AddNode(&g, absl::StrCat("s", i), "ExecTestSlow", {"c"});
  absl::StatusOr<std::unique_ptr<Executor>> exec = MakeExecutor(g);
  ASSERT_TRUE(exec.ok()) << exec.status();
  for (int step = 0; step < 20; ++step) {
    LocalRendezvous rendez;
    args_.rendezvous = &rendez;
    std::atomic<int> calls{0};
    absl::Notification n;
    absl::Status status;
    (*exec)->RunAsync(args_, [&](absl::Status s) {
      status = s;
      if (++calls == 1) n.Notify();
    });
    ASSERT_TRUE(n.WaitForNotificationWithTimeout(absl::Seconds(10)));
    absl::SleepFor(absl::Milliseconds(5));
    EXPECT_EQ(calls.load(), 1);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  }
}

TEST_F(ExecutorTest, KernelCreationErrorNamesNode) {
  tensorflow::GraphDef g;
  Const(&g, "c", 1);
  tensorflow::NodeDef* r = AddNode(&g, "badretval", "_Retval", {"c"});
  SetAttr(r, "T", DT_INT64);
  SetAttr(r, "index", -1);  // violates "index: int >= 0"
  absl::StatusOr<std::unique_ptr<Graph>> graph = Graph::FromGraphDef(g);
  if (!graph.ok()) {  // The graph builder may already reject it.
    EXPECT_NE(graph.status().message().find("badretval"), std::string::npos);
    return;
  }
  absl::StatusOr<std::unique_ptr<Executor>> exec =
      Executor::Create(std::move(*graph), TestDevice());
  ASSERT_FALSE(exec.ok());
  EXPECT_NE(exec.status().message().find("badretval"), std::string::npos) << exec.status();
}

TEST_F(ExecutorTest, RefOutputIsDereferencedForValueConsumers) {
  // var (=10) -> add var + c twice through a ref input, then read the value.
  tensorflow::GraphDef g;
  AddNode(&g, "var", "ExecTestRefVar");
  Const(&g, "c", 5);
  AddNode(&g, "inc", "ExecTestRefAdd", {"var", "c"});
  AddNode(&g, "read", "ExecTestAdd", {"var", "c", "^inc"});
  Retval(&g, "r", "read", 0);
  absl::StatusOr<std::vector<Tensor>> out = RunGraph(g, 1);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Scalar((*out)[0]), 20);  // (10+5) + 5
}

TEST_F(ExecutorTest, SendAndRecvHandOverTensors) {
  // One graph sends a value, another receives it through the same rendezvous.
  tensorflow::GraphDef sender;
  Const(&sender, "c", 9);
  tensorflow::NodeDef* send = AddNode(&sender, "send", "_Send", {"c"});
  SetAttr(send, "T", DT_INT64);
  tensorflow::GraphDef receiver;
  tensorflow::NodeDef* recv = AddNode(&receiver, "recv", "_Recv");
  SetAttr(recv, "tensor_type", DT_INT64);
  for (tensorflow::NodeDef* n : {send, recv}) {
    SetAttr(n, "tensor_name", "edge_c");
    SetAttr(n, "send_device", kDevice);
    SetAttr(n, "send_device_incarnation", int64_t{1});
    SetAttr(n, "recv_device", kDevice);
  }
  AddNode(&receiver, "sum", "ExecTestAdd", {"recv", "recv"});
  Retval(&receiver, "r", "sum", 0);
  auto recv_exec = MakeExecutor(receiver);
  auto send_exec = MakeExecutor(sender);
  ASSERT_TRUE(recv_exec.ok() && send_exec.ok());
  FunctionCallFrame frame({}, 1);
  args_.call_frame = &frame;
  absl::Notification done;
  absl::Status recv_status;
  (*recv_exec)->RunAsync(args_, [&](absl::Status s) {
    recv_status = s;
    done.Notify();
  });
  ASSERT_TRUE((*send_exec)->Run(args_).ok());
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  ASSERT_TRUE(recv_status.ok()) << recv_status;
  auto out = frame.ConsumeRetvals();
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(Scalar((*out)[0]), 18);
}

TEST_F(ExecutorTest, DeadTensorsPropagateToSend) {
  // A dead value arrives at recv; identity is skipped and send passes the
  // deadness on; the retval is never set.
  tensorflow::GraphDef g;
  tensorflow::NodeDef* recv = AddNode(&g, "recv", "_Recv");
  SetAttr(recv, "tensor_type", DT_INT64);
  SetAttr(recv, "tensor_name", "in");
  AddNode(&g, "id", "ExecTestIdentity", {"recv"});
  SetAttr(g.mutable_node(1), "T", DT_INT64);
  tensorflow::NodeDef* send = AddNode(&g, "send", "_Send", {"id"});
  SetAttr(send, "T", DT_INT64);
  SetAttr(send, "tensor_name", "out");
  for (tensorflow::NodeDef* n : {recv, send}) {
    SetAttr(n, "send_device", kDevice);
    SetAttr(n, "send_device_incarnation", int64_t{1});
    SetAttr(n, "recv_device", kDevice);
  }
  Retval(&g, "r", "id", 0);
  auto in_key = Rendezvous::ParseKey(Rendezvous::CreateKey(kDevice, 1, kDevice, "in"));
  auto out_key = Rendezvous::ParseKey(Rendezvous::CreateKey(kDevice, 1, kDevice, "out"));
  ASSERT_TRUE(in_key.ok() && out_key.ok());
  ASSERT_TRUE(rendezvous_.Send(*in_key, Tensor(), /*is_dead=*/true).ok());
  auto exec = MakeExecutor(g);
  ASSERT_TRUE(exec.ok()) << exec.status();
  FunctionCallFrame frame({}, 1);
  args_.call_frame = &frame;
  ASSERT_TRUE((*exec)->Run(args_).ok());
  Tensor v;
  bool dead = false;
  ASSERT_TRUE(rendezvous_.Recv(*out_key, absl::Seconds(5), &v, &dead).ok());
  EXPECT_TRUE(dead);
  EXPECT_FALSE(frame.ConsumeRetvals().ok());
}

TEST_F(ExecutorTest, RunHonoursDeadline) {
  tensorflow::GraphDef g;
  tensorflow::NodeDef* recv = AddNode(&g, "recv", "_Recv");
  SetAttr(recv, "tensor_type", DT_INT64);
  SetAttr(recv, "tensor_name", "never");
  SetAttr(recv, "send_device", kDevice);
  SetAttr(recv, "send_device_incarnation", int64_t{1});
  SetAttr(recv, "recv_device", kDevice);
  auto exec = MakeExecutor(g);
  ASSERT_TRUE(exec.ok()) << exec.status();
  args_.deadline = absl::Now() + absl::Milliseconds(50);
  absl::Status s = (*exec)->Run(args_);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
}

TEST_F(ExecutorTest, ConcurrentStepsOnOneExecutor) {
  tensorflow::GraphDef g;
  tensorflow::NodeDef* x = AddNode(&g, "x", "_Arg");
  SetAttr(x, "T", DT_INT64);
  SetAttr(x, "index", 0);
  AddNode(&g, "a", "ExecTestAsync", {"x"});
  AddNode(&g, "s", "ExecTestSlow", {"a"});
  AddNode(&g, "y", "ExecTestAdd", {"s", "x"});
  Retval(&g, "r", "y", 0);
  auto exec = MakeExecutor(g);
  ASSERT_TRUE(exec.ok()) << exec.status();
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        int64_t v = t * 1000 + i;
        FunctionCallFrame frame({Tensor::Scalar<int64_t>(v)}, 1);
        Executor::Args a = args_;
        a.call_frame = &frame;
        LocalRendezvous r;
        a.rendezvous = &r;
        auto out = (*exec)->Run(a).ok()
                       ? frame.ConsumeRetvals()
                       : absl::StatusOr<std::vector<Tensor>>(absl::UnknownError(""));
        if (!out.ok() || Scalar((*out)[0]) != 2 * v + 2) ++failures;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

// --- step stats (traced steps) ------------------------------------------------------

std::map<std::string, tensorflow::NodeExecStats> ByName(const tensorflow::DeviceStepStats& dev) {
  std::map<std::string, tensorflow::NodeExecStats> out;
  for (const auto& ns : dev.node_stats()) out[ns.node_name()] = ns;
  return out;
}

TEST_F(ExecutorTest, TracedStepRecordsEveryNodeWithOrderedTimes) {
  // c=5 → a1 (async, 20 ms) → a2 (async) → sum=a2+c → r.
  tensorflow::GraphDef g;
  Const(&g, "c", 5);
  SetAttr(AddNode(&g, "a1", "ExecTestAsync", {"c"}), "delay_ms", 20);
  AddNode(&g, "a2", "ExecTestAsync", {"a1"});
  AddNode(&g, "sum", "ExecTestAdd", {"a2", "c"});
  Retval(&g, "r", "sum", 0);
  StepStatsCollector stats(kDevice);
  args_.stats = &stats;
  const int64_t before = StepStatsCollector::NowMicros();
  absl::StatusOr<std::vector<Tensor>> out = RunGraph(g, 1);
  const int64_t after = StepStatsCollector::NowMicros();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Scalar((*out)[0]), 12);
  tensorflow::DeviceStepStats dev;
  stats.Finalize(&dev);
  EXPECT_EQ(dev.device(), kDevice);
  ASSERT_EQ(dev.node_stats_size(), 5);
  auto nodes = ByName(dev);
  ASSERT_EQ(nodes.size(), 5u);
  for (const auto& [name, ns] : nodes) {
    SCOPED_TRACE(name);
    EXPECT_GE(ns.all_start_micros(), before);
    EXPECT_LE(ns.all_start_micros() + ns.all_end_rel_micros(), after);
    EXPECT_GE(ns.op_start_rel_micros(), 0);
    EXPECT_GE(ns.op_end_rel_micros(), ns.op_start_rel_micros());
    EXPECT_GE(ns.all_end_rel_micros(), ns.op_end_rel_micros());
    EXPECT_NE(ns.thread_id(), 0u);
    EXPECT_TRUE(dev.thread_names().contains(ns.thread_id()));
  }
  // A consumer starts after its producer's kernel ended.
  auto end = [&](const std::string& n) {
    return nodes[n].all_start_micros() + nodes[n].op_end_rel_micros();
  };
  EXPECT_GE(nodes["a1"].all_start_micros(), end("c"));
  EXPECT_GE(nodes["a2"].all_start_micros(), end("a1"));
  EXPECT_GE(nodes["sum"].all_start_micros(), end("a2"));
  EXPECT_GE(nodes["r"].all_start_micros(), end("sum"));
  // The async kernel's 20 ms sleep is inside its op time.
  EXPECT_GE(nodes["a1"].op_end_rel_micros(), 20000);
  EXPECT_EQ(nodes["sum"].timeline_label(), "sum = ExecTestAdd(a2, c)");
  EXPECT_EQ(nodes["c"].timeline_label(), "c = ExecTestConst()");
  // Sorted by start time.
  for (int i = 1; i < dev.node_stats_size(); ++i) {
    EXPECT_LE(dev.node_stats(i - 1).all_start_micros(), dev.node_stats(i).all_start_micros());
  }
}

TEST_F(ExecutorTest, UntracedStepRecordsNothing) {
  tensorflow::GraphDef g;
  Const(&g, "a", 2);
  AddNode(&g, "b", "ExecTestAdd", {"a", "a"});
  Retval(&g, "r", "b", 0);
  auto exec = MakeExecutor(g);
  ASSERT_TRUE(exec.ok()) << exec.status();
  StepStatsCollector stats(kDevice);
  {  // One traced step, then untraced steps on the same executor.
    FunctionCallFrame frame({}, 1);
    args_.call_frame = &frame;
    args_.stats = &stats;
    ASSERT_TRUE((*exec)->Run(args_).ok());
  }
  args_.stats = nullptr;
  for (int i = 0; i < 3; ++i) {
    FunctionCallFrame frame({}, 1);
    args_.call_frame = &frame;
    ASSERT_TRUE((*exec)->Run(args_).ok());
  }
  tensorflow::DeviceStepStats dev;
  stats.Finalize(&dev);
  EXPECT_EQ(dev.node_stats_size(), 3);  // a, b, r of the traced step only.
  tensorflow::DeviceStepStats again;
  stats.Finalize(&again);
  EXPECT_EQ(again.node_stats_size(), 0);
}

TEST_F(ExecutorTest, TracedSendAndRecvNameTensorPeerAndBytes) {
  tensorflow::GraphDef sender;
  SetAttr(AddNode(&sender, "c", "ExecTestConst"), "value", int64_t{9});
  tensorflow::NodeDef* send = AddNode(&sender, "send", "_Send", {"c"});
  SetAttr(send, "T", DT_INT64);
  tensorflow::GraphDef receiver;
  tensorflow::NodeDef* recv = AddNode(&receiver, "recv", "_Recv");
  SetAttr(recv, "tensor_type", DT_INT64);
  for (tensorflow::NodeDef* n : {send, recv}) {
    SetAttr(n, "tensor_name", "edge_c");
    SetAttr(n, "send_device", kDevice);
    SetAttr(n, "send_device_incarnation", int64_t{1});
    SetAttr(n, "recv_device", kDevice);
  }
  Retval(&receiver, "r", "recv", 0);
  auto recv_exec = MakeExecutor(receiver);
  auto send_exec = MakeExecutor(sender);
  ASSERT_TRUE(recv_exec.ok() && send_exec.ok());
  StepStatsCollector recv_stats(kDevice), send_stats(kDevice);
  FunctionCallFrame frame({}, 1);
  args_.call_frame = &frame;
  Executor::Args recv_args = args_;
  recv_args.stats = &recv_stats;
  absl::Notification done;
  absl::Status recv_status;
  (*recv_exec)->RunAsync(recv_args, [&](absl::Status s) {
    recv_status = s;
    done.Notify();
  });
  absl::SleepFor(absl::Milliseconds(5));  // The Recv waits: its time shows the wait.
  Executor::Args send_args = args_;
  send_args.stats = &send_stats;
  ASSERT_TRUE((*send_exec)->Run(send_args).ok());
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  ASSERT_TRUE(recv_status.ok()) << recv_status;
  tensorflow::DeviceStepStats r, s;
  recv_stats.Finalize(&r);
  send_stats.Finalize(&s);
  auto rn = ByName(r), sn = ByName(s);
  // Each names its peer: the receiving and the sending device (here the same).
  EXPECT_EQ(sn["send"].timeline_label(),
            absl::StrCat("send = _Send(edge_c @", kDevice, "; 8 bytes)"));
  EXPECT_EQ(rn["recv"].timeline_label(),
            absl::StrCat("recv = _Recv(edge_c @", kDevice, "; 8 bytes)"));
  EXPECT_GE(rn["recv"].op_end_rel_micros(), 4000);
}

TEST(TimelineLabelTest, TensorFlowsFormAndPeers) {
  tensorflow::NodeDef def;
  def.set_name("mul");
  def.set_op("Mul");
  def.add_input("x:0");
  def.add_input("w/read:1");
  def.add_input("^init");
  EXPECT_EQ(TimelineLabel(def, -1), "mul = Mul(x, w/read:1, ^init)");
  constexpr char kPs[] = "/job:ps/replica:0/task:0/device:CPU:0";
  constexpr char kWorker[] = "/job:worker/replica:0/task:0/device:CPU:0";
  tensorflow::NodeDef send;
  send.set_name("w/_1");
  send.set_op("_Send");
  send.add_input("w:0");
  SetAttr(&send, "tensor_name", "edge_1_w");
  SetAttr(&send, "send_device", kPs);
  SetAttr(&send, "recv_device", kWorker);
  tensorflow::NodeDef recv = send;
  recv.set_name("w/_2");
  recv.set_op("_Recv");
  recv.clear_input();
  EXPECT_EQ(TimelineLabel(send, 64),
            absl::StrCat("w/_1 = _Send(edge_1_w @", kWorker, "; 64 bytes)"));
  EXPECT_EQ(TimelineLabel(recv, -1), absl::StrCat("w/_2 = _Recv(edge_1_w @", kPs, ")"));
}

}  // namespace
}  // namespace dflow
