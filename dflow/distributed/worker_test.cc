#include "dflow/distributed/worker.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "dflow/distributed/deadline_timer.h"
#include "dflow/distributed/worker_test_util.h"
#include "dflow/framework/attr_util.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/rendezvous.h"
#include "dflow/framework/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

using ::testing::HasSubstr;
using worker_test::Builder;
using worker_test::Floats;
using worker_test::Named;
using worker_test::Register;
using worker_test::Task;

std::string Msg(const absl::Status& s) { return std::string(s.message()); }

// x (fed on CPU:0) * 3 (on CPU:1) -> y (fetched on CPU:0): two local devices,
// so the worker must re-partition and pass a tensor between them.
struct FeedFetchGraph {
  explicit FeedFetchGraph(const Task& t) {
    feed_key = t.Key(0, t.Cpu(0), "x");
    fetch_key = t.Key(0, t.Cpu(0), "y");
    b.Recv("x", "x", t.Cpu(0), t.Incarnation(0), t.Cpu(0), true, t.Cpu(0));
    b.Const("three", Tensor::Scalar(3.0f), t.Cpu(1));
    b.Binary("mul", "Mul", "x", "three", t.Cpu(1));
    b.Send("y", "mul", "y", t.Cpu(0), t.Incarnation(0), t.Cpu(0), true, t.Cpu(0));
  }
  Builder b;
  std::string feed_key, fetch_key;
};

// WorkerTestSleep outputs 1.0 after 300 ms; a root and expensive, so the
// executor starts it on the pool. It tells `g_sleep_started` when it begins.
absl::Notification* g_sleep_started = nullptr;
REGISTER_OP("WorkerTestSleep").Output("y: float");
class SleepOp : public OpKernel {
 public:
  explicit SleepOp(OpKernelConstruction* c) : OpKernel(c) {}
  absl::Status Compute(OpKernelContext* ctx) override {
    g_sleep_started->Notify();
    absl::SleepFor(absl::Milliseconds(300));
    ctx->set_output(0, Tensor::Scalar(1.0f));
    return absl::OkStatus();
  }
};
REGISTER_KERNEL(KernelDefBuilder("WorkerTestSleep").Device(kDeviceCPU), SleepOp);

TEST(WorkerTest, GetStatusListsDevices) {
  Task t("worker", 1, 2);
  EXPECT_EQ(t.worker->task_name(), "/job:worker/replica:0/task:1");
  tensorflow::GetStatusResponse resp;
  ASSERT_TRUE(t.worker->GetStatus({}, &resp).ok());
  ASSERT_EQ(resp.device_attributes_size(), 2);
  EXPECT_EQ(resp.device_attributes(1).name(), "/job:worker/replica:0/task:1/device:CPU:1");
  EXPECT_EQ(resp.device_attributes(0).device_type(), "CPU");
  EXPECT_EQ(resp.device_attributes(0).memory_limit(), kCpuMemoryLimit);
  EXPECT_EQ(resp.device_attributes(0).incarnation(), t.Incarnation(0));
  EXPECT_NE(resp.device_attributes(0).incarnation(), 0u);
}

TEST(WorkerTest, RegisterAndRunWithFeedsAndFetches) {
  Task t("worker", 0, 2);
  FeedFetchGraph g(t);
  absl::StatusOr<std::string> handle = Register(t.worker.get(), g.b.def());
  ASSERT_TRUE(handle.ok()) << handle.status();
  for (int step = 1; step <= 3; ++step) {
    tensorflow::RunGraphRequest req;
    req.set_graph_handle(*handle);
    req.set_step_id(100 + step);
    *req.add_send() = Named(g.feed_key, Tensor::Vec<float>({1.0f, float(step)}));
    req.add_recv_key(g.fetch_key);
    tensorflow::RunGraphResponse resp;
    absl::Status s = t.worker->RunGraph(req, &resp);
    ASSERT_TRUE(s.ok()) << s;
    ASSERT_EQ(resp.recv_size(), 1);
    EXPECT_EQ(resp.recv(0).name(), g.fetch_key);
    EXPECT_EQ(Floats(resp.recv(0).tensor()), (std::vector<float>{3.0f, 3.0f * step}));
  }
  EXPECT_EQ(t.worker->NumLiveSteps(), 3);  // Kept until CleanupGraph.
  tensorflow::CleanupGraphRequest cleanup;
  cleanup.set_step_id(102);
  tensorflow::CleanupGraphResponse cresp;
  ASSERT_TRUE(t.worker->CleanupGraph(cleanup, &cresp).ok());
  EXPECT_EQ(t.worker->NumLiveSteps(), 2);
}

// A dflow master cleans finished steps up with its next RunGraph instead of
// a CleanupGraph call each: the steps it names are gone before it runs, and
// a straggler for one of them fails at once.
TEST(WorkerTest, RunGraphCleansUpTheStepsItNames) {
  Task t("worker", 0, 2);
  FeedFetchGraph g(t);
  tensorflow::RegisterGraphRequest reg;
  *reg.mutable_graph_def() = g.b.def();
  tensorflow::RegisterGraphResponse registered;
  ASSERT_TRUE(t.worker->RegisterGraph(reg, &registered).ok());
  EXPECT_TRUE(registered.dflow_cleanup_with_run_graph());  // What a master asks first.
  absl::StatusOr<std::string> handle = registered.graph_handle();
  auto run = [&](int64_t step, std::vector<int64_t> cleanups) {
    tensorflow::RunGraphRequest req;
    req.set_graph_handle(*handle);
    req.set_step_id(step);
    for (int64_t over : cleanups) req.add_dflow_cleanup_step_id(over);
    *req.add_send() = Named(g.feed_key, Tensor::Vec<float>({1.0f}));
    req.add_recv_key(g.fetch_key);
    tensorflow::RunGraphResponse resp;
    return t.worker->RunGraph(req, &resp);
  };
  ASSERT_TRUE(run(101, {}).ok());
  ASSERT_TRUE(run(102, {}).ok());
  EXPECT_EQ(t.worker->NumLiveSteps(), 2);
  ASSERT_TRUE(run(103, {101, 102}).ok());
  EXPECT_EQ(t.worker->NumLiveSteps(), 1);  // Only 103.
  absl::Status late = run(101, {});
  EXPECT_EQ(late.code(), absl::StatusCode::kAborted) << late;
  EXPECT_THAT(Msg(late), HasSubstr("step 101 was already cleaned up"));
  EXPECT_EQ(t.worker->NumLiveSteps(), 1);
}

// Sends handed over as tensors (a master's feeds to its own task) are fed
// like the request's encoded ones, together with them.
TEST(WorkerTest, TensorSendsFeedTheGraphBesideEncodedOnes) {
  Task t("worker", 0, 2);
  Builder b;
  const std::string x = t.Key(0, t.Cpu(0), "x"), z = t.Key(0, t.Cpu(0), "z");
  const std::string y = t.Key(0, t.Cpu(0), "y");
  b.Recv("x", "x", t.Cpu(0), t.Incarnation(0), t.Cpu(0), true, t.Cpu(0));
  b.Recv("z", "z", t.Cpu(0), t.Incarnation(0), t.Cpu(0), true, t.Cpu(0));
  b.Binary("mul", "Mul", "x", "z", t.Cpu(1));
  b.Send("y", "mul", "y", t.Cpu(0), t.Incarnation(0), t.Cpu(0), true, t.Cpu(0));
  absl::StatusOr<std::string> handle = Register(t.worker.get(), b.def());
  ASSERT_TRUE(handle.ok()) << handle.status();
  tensorflow::RunGraphRequest req;
  req.set_graph_handle(*handle);
  req.set_step_id(7);
  *req.add_send() = Named(x, Tensor::Vec<float>({1.0f, 2.0f}));
  req.add_recv_key(y);
  tensorflow::RunGraphResponse resp;
  absl::Status s = WaitForCall([&](StatusCallback done) {
    t.worker->RunGraphWithTensorsAsync({}, &req, {{z, Tensor::Vec<float>({5.0f, 7.0f})}}, &resp,
                                       std::move(done));
  });
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_EQ(resp.recv_size(), 1);
  EXPECT_EQ(Floats(resp.recv(0).tensor()), (std::vector<float>{5.0f, 14.0f}));
  // A bad key among them fails the step like a bad encoded send.
  tensorflow::RunGraphResponse bad;
  req.set_step_id(8);
  s = WaitForCall([&](StatusCallback done) {
    t.worker->RunGraphWithTensorsAsync({}, &req, {{"no key", Tensor::Scalar(1.0f)}}, &bad,
                                       std::move(done));
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
}

// A graph over WorkerOptions::max_graph_nodes is refused, naming its size
// and the limit; the worker registers and runs the next graph that fits.
TEST(WorkerTest, RegisterRefusesGraphsOverMaxGraphNodes) {
  WorkerOptions opts;
  opts.max_graph_nodes = 4;
  Task t("worker", 0, 2, opts);
  Builder big;
  for (int i = 0; i < 5; ++i) big.Const(absl::StrCat("c", i), Tensor::Scalar(1.0f), t.Cpu(0));
  absl::StatusOr<std::string> handle = Register(t.worker.get(), big.def());
  EXPECT_EQ(handle.status().code(), absl::StatusCode::kResourceExhausted) << handle.status();
  EXPECT_THAT(std::string(handle.status().message()),
              HasSubstr("[Worker RegisterGraph] the graph has 5 nodes, over the limit of 4 "
                        "(the worker's max_graph_nodes)"));
  FeedFetchGraph g(t);  // 4 nodes.
  handle = Register(t.worker.get(), g.b.def());
  ASSERT_TRUE(handle.ok()) << handle.status();
  tensorflow::RunGraphRequest req;
  req.set_graph_handle(*handle);
  req.set_step_id(7);
  *req.add_send() = Named(g.feed_key, Tensor::Vec<float>({1.0f, 2.0f}));
  req.add_recv_key(g.fetch_key);
  tensorflow::RunGraphResponse resp;
  ASSERT_TRUE(t.worker->RunGraph(req, &resp).ok());
  EXPECT_EQ(Floats(resp.recv(0).tensor()), (std::vector<float>{3.0f, 6.0f}));
}

TEST(WorkerTest, WorkerSessionsAndUnknownHandles) {
  Task t("worker", 0, 2);
  FeedFetchGraph g(t);
  tensorflow::CreateWorkerSessionRequest create;
  tensorflow::CreateWorkerSessionResponse cresp;
  EXPECT_EQ(t.worker->CreateWorkerSession(create, &cresp).code(),
            absl::StatusCode::kInvalidArgument);
  create.set_session_handle("sess1");
  ASSERT_TRUE(t.worker->CreateWorkerSession(create, &cresp).ok());
  EXPECT_EQ(t.worker->CreateWorkerSession(create, &cresp).code(), absl::StatusCode::kAlreadyExists);

  tensorflow::RegisterGraphRequest reg;
  reg.set_session_handle("nope");
  reg.set_create_worker_session_called(true);
  *reg.mutable_graph_def() = g.b.def();
  tensorflow::RegisterGraphResponse rresp;
  absl::Status s = t.worker->RegisterGraph(reg, &rresp);
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(Msg(s), HasSubstr("session handle 'nope' is not found"));

  reg.set_session_handle("sess1");
  ASSERT_TRUE(t.worker->RegisterGraph(reg, &rresp).ok());
  tensorflow::RunGraphRequest run;
  run.set_session_handle("sess1");
  run.set_create_worker_session_called(true);
  run.set_graph_handle("graph_999");
  tensorflow::RunGraphResponse resp;
  s = t.worker->RunGraph(run, &resp);
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(Msg(s), HasSubstr("graph handle 'graph_999' is not found"));

  // The graph lives in sess1, not in the default session.
  run.set_graph_handle(rresp.graph_handle());
  run.set_create_worker_session_called(false);
  EXPECT_EQ(t.worker->RunGraph(run, &resp).code(), absl::StatusCode::kAborted);

  tensorflow::DeregisterGraphRequest dereg;
  dereg.set_session_handle("sess1");
  dereg.set_create_worker_session_called(true);
  dereg.set_graph_handle(rresp.graph_handle());
  tensorflow::DeregisterGraphResponse dresp;
  ASSERT_TRUE(t.worker->DeregisterGraph(dereg, &dresp).ok());
  EXPECT_EQ(t.worker->DeregisterGraph(dereg, &dresp).code(), absl::StatusCode::kAborted);

  tensorflow::DeleteWorkerSessionRequest del;
  del.set_session_handle("sess1");
  tensorflow::DeleteWorkerSessionResponse delresp;
  ASSERT_TRUE(t.worker->DeleteWorkerSession(del, &delresp).ok());
  EXPECT_EQ(t.worker->RegisterGraph(reg, &rresp).code(), absl::StatusCode::kAborted);
}

TEST(WorkerTest, RegisterRejectsDevicesOfOtherTasks) {
  Task t("worker", 0, 1);
  Builder b;
  b.Const("c", Tensor::Scalar(1.0f), "/job:ps/replica:0/task:0/device:CPU:0");
  absl::StatusOr<std::string> h = Register(t.worker.get(), b.def());
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(h.status()), HasSubstr("node 'c' is placed on '/job:ps/replica:0/task:0"));
  EXPECT_THAT(Msg(h.status()), HasSubstr("/job:worker/replica:0/task:0/device:CPU:0"));
}

TEST(WorkerTest, KernelErrorReachesTheCaller) {
  Task t("worker", 0, 2);
  Builder b;
  const std::string feed = t.Key(0, t.Cpu(0), "a");
  b.Recv("a", "a", t.Cpu(0), t.Incarnation(0), t.Cpu(0), true, t.Cpu(0));
  b.Const("w", Tensor::FromVector<float>({1, 2, 3, 4}, TensorShape({2, 2})), t.Cpu(1));
  b.Binary("mm", "MatMul", "a", "w", t.Cpu(1));
  // A receive nobody sends to, on the other device: only the abort ends it.
  b.Recv("never", "never", t.Cpu(0), t.Incarnation(0), t.Cpu(0), false, t.Cpu(0));
  b.Send("out", "mm", "out", t.Cpu(1), t.Incarnation(1), t.Cpu(0), true, t.Cpu(1));
  absl::StatusOr<std::string> h = Register(t.worker.get(), b.def());
  ASSERT_TRUE(h.ok()) << h.status();
  tensorflow::RunGraphRequest req;
  req.set_graph_handle(*h);
  req.set_step_id(7);
  *req.add_send() = Named(feed, Tensor::FromVector<float>({1, 2, 3}, TensorShape({1, 3})));
  tensorflow::RunGraphResponse resp;
  absl::Status s = t.worker->RunGraph(req, &resp, CallOptions::WithTimeout(absl::Seconds(30)));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(Msg(s), HasSubstr("'mm'"));
  EXPECT_THAT(Msg(s), HasSubstr("inner dimensions differ"));

  // The same error, in the response body.
  req.set_step_id(8);
  req.set_store_errors_in_response_body(true);
  ASSERT_TRUE(t.worker->RunGraph(req, &resp).ok());
  EXPECT_EQ(resp.status_code(), tensorflow::error::INVALID_ARGUMENT);
  EXPECT_THAT(resp.status_error_message(), HasSubstr("inner dimensions differ"));
}

TEST(WorkerTest, BadKeysAndMissingFetches) {
  Task t("worker", 0, 2);
  FeedFetchGraph g(t);
  absl::StatusOr<std::string> h = Register(t.worker.get(), g.b.def());
  ASSERT_TRUE(h.ok()) << h.status();
  tensorflow::RunGraphRequest req;
  req.set_graph_handle(*h);
  req.set_step_id(1);
  *req.add_send() = Named("garbage-key", Tensor::Scalar(1.0f));
  tensorflow::RunGraphResponse resp;
  absl::Status s = t.worker->RunGraph(req, &resp);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), HasSubstr("garbage-key"));

  req.clear_send();
  req.set_step_id(2);
  *req.add_send() = Named(g.feed_key, Tensor::Scalar(2.0f));
  const std::string missing = t.Key(0, t.Cpu(0), "not_a_fetch");
  req.add_recv_key(missing);
  s = t.worker->RunGraph(req, &resp);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), HasSubstr("'" + missing + "' was not produced"));

  req.clear_recv_key();
  req.set_step_id(3);
  tensorflow::NamedTensorProto* bad = req.mutable_send(0);
  bad->mutable_tensor()->set_dtype(tensorflow::DT_FLOAT);
  bad->mutable_tensor()->mutable_tensor_shape()->add_dim()->set_size(1000);
  bad->mutable_tensor()->set_tensor_content("abc");
  s = t.worker->RunGraph(req, &resp);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), HasSubstr("cannot be decoded"));
}

TEST(WorkerTest, RunGraphDeadlineNamesTheMissingTensor) {
  Task t("worker", 0, 1);
  Builder b;
  b.Recv("wait", "lost_tensor", t.Cpu(0), t.Incarnation(0), t.Cpu(0), false, t.Cpu(0));
  b.Send("out", "wait", "out", t.Cpu(0), t.Incarnation(0), t.Cpu(0), true, t.Cpu(0));
  absl::StatusOr<std::string> h = Register(t.worker.get(), b.def());
  ASSERT_TRUE(h.ok()) << h.status();
  tensorflow::RunGraphRequest req;
  req.set_graph_handle(*h);
  req.set_step_id(5);
  tensorflow::RunGraphResponse resp;
  absl::Status s =
      t.worker->RunGraph(req, &resp, CallOptions::WithTimeout(absl::Milliseconds(200)));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(Msg(s), HasSubstr("lost_tensor"));
}

TEST(WorkerTest, RecvTensorParksUntilTheSendRuns) {
  Task t("ps", 0, 1);
  const std::string dst = "/job:worker/replica:0/task:0/device:CPU:0";
  Builder b;
  b.Const("c", Tensor::Vec<float>({4, 5}), t.Cpu(0));
  b.Send("s", "c", "edge_c", t.Cpu(0), t.Incarnation(0), dst, false, t.Cpu(0));
  absl::StatusOr<std::string> h = Register(t.worker.get(), b.def());
  ASSERT_TRUE(h.ok()) << h.status();

  tensorflow::RecvTensorRequest rreq;
  rreq.set_step_id(9);
  rreq.set_rendezvous_key(t.Key(0, dst, "edge_c"));
  RecvTensorResult rresp;
  absl::Notification got;
  absl::Status rstatus;
  t.worker->RecvTensorAsync(CallOptions::WithTimeout(absl::Seconds(30)), &rreq, &rresp,
                            [&](const absl::Status& s) {
                              rstatus = s;
                              got.Notify();
                            });
  EXPECT_FALSE(got.HasBeenNotified());
  tensorflow::RunGraphRequest req;
  req.set_graph_handle(*h);
  req.set_step_id(9);
  tensorflow::RunGraphResponse resp;
  ASSERT_TRUE(t.worker->RunGraph(req, &resp).ok());
  got.WaitForNotification();
  ASSERT_TRUE(rstatus.ok()) << rstatus;
  EXPECT_FALSE(rresp.is_dead);
  ASSERT_EQ(rresp.tensor.dtype(), DT_FLOAT);
  auto got_values = rresp.tensor.flat<float>();
  EXPECT_EQ(std::vector<float>(got_values.begin(), got_values.end()), (std::vector<float>{4, 5}));
}

// A RecvTensor for a step that never runs here: with no deadline it gets the
// worker's default, and the step's state goes once it is answered.
TEST(WorkerTest, RecvTensorForAStepThatNeverRunsEndsAndLeavesNoState) {
  WorkerOptions options;
  options.default_timeout = absl::Milliseconds(300);
  Task t("ps", 0, 1, options);
  const std::string dst = "/job:worker/replica:0/task:0/device:CPU:0";
  tensorflow::RecvTensorRequest req;
  req.set_rendezvous_key(t.Key(0, dst, "never_sent"));
  for (const bool with_deadline : {false, true}) {
    const CallOptions opts =
        with_deadline ? CallOptions::WithTimeout(absl::Milliseconds(200)) : CallOptions();
    req.set_step_id(req.step_id() + 1);
    RecvTensorResult resp;
    absl::Notification done;
    absl::Status status;
    t.worker->RecvTensorAsync(opts, &req, &resp, [&](const absl::Status& s) {
      status = s;
      done.Notify();
    });
    EXPECT_EQ(t.worker->NumLiveSteps(), 1);
    ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
    EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
    EXPECT_THAT(Msg(status), HasSubstr("never_sent"));
    EXPECT_EQ(t.worker->NumLiveSteps(), 0);
  }
}

// Calls for tensors that never come are bounded: past max_waiting_recvs the
// next is RESOURCE_EXHAUSTED at once (no step state made), and a freed place
// is taken again.
TEST(WorkerTest, RecvTensorCallsWaitingAtOnceAreBounded) {
  WorkerOptions options;
  options.max_waiting_recvs = 3;
  Task t("ps", 0, 1, options);
  const std::string dst = "/job:worker/replica:0/task:0/device:CPU:0";
  struct Waiting {
    tensorflow::RecvTensorRequest req;
    RecvTensorResult resp;
    absl::Status status;
    absl::Notification done;
  };
  auto ask = [&](Waiting* w, int64_t step, absl::Duration timeout) {
    w->req.set_rendezvous_key(t.Key(0, dst, "never_sent"));
    w->req.set_step_id(step);
    t.worker->RecvTensorAsync(CallOptions::WithTimeout(timeout), &w->req, &w->resp,
                              [w](const absl::Status& s) {
                                w->status = s;
                                w->done.Notify();
                              });
  };
  std::vector<std::unique_ptr<Waiting>> parked;
  for (int64_t step = 1; step <= 3; ++step) {
    parked.push_back(std::make_unique<Waiting>());
    ask(parked.back().get(), step, absl::Milliseconds(step == 1 ? 200 : 600));
  }
  EXPECT_EQ(t.worker->NumWaitingRecvs(), 3);
  Waiting refused;
  ask(&refused, 4, absl::Seconds(30));
  ASSERT_TRUE(refused.done.WaitForNotificationWithTimeout(absl::Seconds(1)));
  EXPECT_EQ(refused.status.code(), absl::StatusCode::kResourceExhausted) << refused.status;
  EXPECT_THAT(Msg(refused.status), HasSubstr("3 RecvTensor calls already wait on /job:ps"));
  EXPECT_THAT(Msg(refused.status), HasSubstr("max_waiting_recvs"));
  EXPECT_EQ(t.worker->NumLiveSteps(), 3);  // Step 4 left nothing behind.
  // Step 1's deadline frees a place; the next call waits in it.
  ASSERT_TRUE(parked[0]->done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(parked[0]->status.code(), absl::StatusCode::kDeadlineExceeded);
  Waiting again;
  ask(&again, 5, absl::Milliseconds(100));
  ASSERT_TRUE(again.done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(again.status.code(), absl::StatusCode::kDeadlineExceeded) << again.status;
  // Every answered call gave its place back.
  for (int i = 1; i < 3; ++i) {
    ASSERT_TRUE(parked[i]->done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  }
  EXPECT_EQ(t.worker->NumWaitingRecvs(), 0);
  EXPECT_EQ(t.worker->NumLiveSteps(), 0);
}

// Without a deadline a RecvTensor waits as long as its step may run, and a
// step that did run keeps its state until CleanupGraph.
TEST(WorkerTest, RecvTensorWithoutADeadlineTakesTheStepsAndRunGraphTheDefault) {
  WorkerOptions options;
  options.default_timeout = absl::Milliseconds(300);
  Task t("ps", 0, 1, options);
  const std::string dst = "/job:worker/replica:0/task:0/device:CPU:0";
  Builder b;
  b.Recv("wait", "lost_tensor", t.Cpu(0), t.Incarnation(0), t.Cpu(0), false, t.Cpu(0));
  b.Send("s", "wait", "edge", t.Cpu(0), t.Incarnation(0), dst, false, t.Cpu(0));
  absl::StatusOr<std::string> h = Register(t.worker.get(), b.def());
  ASSERT_TRUE(h.ok()) << h.status();
  tensorflow::RunGraphRequest run;
  run.set_graph_handle(*h);
  run.set_step_id(3);
  tensorflow::RunGraphResponse ran;
  absl::Notification run_done;
  absl::Status run_status;
  t.worker->RunGraphAsync(CallOptions::WithTimeout(absl::Seconds(2)), &run, &ran,
                          [&](const absl::Status& s) {
                            run_status = s;
                            run_done.Notify();
                          });
  tensorflow::RecvTensorRequest req;
  req.set_step_id(3);
  req.set_rendezvous_key(t.Key(0, dst, "edge"));
  RecvTensorResult resp;
  absl::Notification done;
  absl::Status status;
  const absl::Time start = absl::Now();
  t.worker->RecvTensorAsync({}, &req, &resp, [&](const absl::Status& s) {
    status = s;
    done.Notify();
  });
  // Not at the worker's 0.3 s default: the step may run for 2 s.
  EXPECT_FALSE(done.WaitForNotificationWithTimeout(absl::Milliseconds(800)));
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(800));
  EXPECT_FALSE(status.ok());
  ASSERT_TRUE(run_done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(run_status.code(), absl::StatusCode::kDeadlineExceeded) << run_status;
  EXPECT_EQ(t.worker->NumLiveSteps(), 1);  // It ran: kept for CleanupGraph.
  tensorflow::CleanupGraphRequest cleanup;
  cleanup.set_step_id(3);
  tensorflow::CleanupGraphResponse cleaned;
  ASSERT_TRUE(t.worker->CleanupGraph(cleanup, &cleaned).ok());
  EXPECT_EQ(t.worker->NumLiveSteps(), 0);
  // A RunGraph without a deadline ends at the worker's default.
  run.set_step_id(4);
  absl::Status s = t.worker->RunGraph(run, &ran);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(Msg(s), HasSubstr("lost_tensor"));
}

TEST(WorkerTest, RecvTensorErrors) {
  Task t("ps", 0, 1);
  const std::string dst = "/job:worker/replica:0/task:0/device:CPU:0";
  tensorflow::RecvTensorRequest req;
  RecvTensorResult resp;
  req.set_step_id(1);
  req.set_rendezvous_key("not;a;key");
  EXPECT_EQ(t.worker->RecvTensor(req, &resp).code(), absl::StatusCode::kInvalidArgument);

  req.set_rendezvous_key(Rendezvous::CreateKey(dst, 1, t.Cpu(0), "x"));
  absl::Status s = t.worker->RecvTensor(req, &resp);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Msg(s), HasSubstr("is not a device of /job:ps/replica:0/task:0"));

  req.set_rendezvous_key(Rendezvous::CreateKey(t.Cpu(0), t.Incarnation(0) + 1, dst, "x"));
  s = t.worker->RecvTensor(req, &resp);
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(Msg(s), HasSubstr("restarted"));

  req.set_rendezvous_key(t.Key(0, dst, "x"));
  s = t.worker->RecvTensor(req, &resp, CallOptions::WithTimeout(absl::Milliseconds(100)));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(Msg(s), HasSubstr("'" + t.Key(0, dst, "x") + "'"));

  // A parked RecvTensor fails when its step is cleaned up.
  req.set_step_id(2);
  absl::Notification got;
  absl::Status rstatus;
  t.worker->RecvTensorAsync({}, &req, &resp, [&](const absl::Status& st) {
    rstatus = st;
    got.Notify();
  });
  tensorflow::CleanupGraphRequest cleanup;
  cleanup.set_step_id(2);
  tensorflow::CleanupGraphResponse cresp;
  ASSERT_TRUE(t.worker->CleanupGraph(cleanup, &cresp).ok());
  got.WaitForNotification();
  EXPECT_EQ(rstatus.code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(Msg(rstatus), HasSubstr("cleaned up"));
}

// Two tasks in one process: the worker's _Recv pulls the ps's tensor through
// the ps worker's WorkerInterface.
struct TwoTasks {
  TwoTasks() {
    WorkerOptions opts;
    opts.worker_for_task = [this](const std::string& task) -> WorkerInterface* {
      if (ps != nullptr && task == ps->worker->task_name()) return ps->worker.get();
      return nullptr;
    };
    ps = std::make_unique<Task>("ps", 0, 1, opts);
    worker = std::make_unique<Task>("worker", 0, 1, opts);
  }
  std::unique_ptr<Task> ps, worker;
};

TEST(WorkerTest, TwoWorkersExchangeATensor) {
  TwoTasks c;
  const std::string w0 = c.worker->Cpu(0);
  worker_test::PsWorkerGraphs graphs = worker_test::DoubleOnWorker(*c.ps, *c.worker);
  absl::StatusOr<std::string> hp = Register(c.ps->worker.get(), graphs.ps);
  absl::StatusOr<std::string> hw = Register(c.worker->worker.get(), graphs.worker);
  ASSERT_TRUE(hp.ok()) << hp.status();
  ASSERT_TRUE(hw.ok()) << hw.status();

  for (int64_t step : {77, 78}) {
    // The worker starts first: its RecvTensor waits on the ps until the ps runs.
    tensorflow::RunGraphRequest wreq;
    wreq.set_graph_handle(*hw);
    wreq.set_step_id(step);
    wreq.add_recv_key(c.worker->Key(0, w0, "y"));
    tensorflow::RunGraphResponse wresp;
    absl::Notification wdone;
    absl::Status wstatus;
    c.worker->worker->RunGraphAsync(CallOptions::WithTimeout(absl::Seconds(30)), &wreq, &wresp,
                                    [&](const absl::Status& s) {
                                      wstatus = s;
                                      wdone.Notify();
                                    });
    tensorflow::RunGraphRequest preq;
    preq.set_graph_handle(*hp);
    preq.set_step_id(step);
    tensorflow::RunGraphResponse presp;
    ASSERT_TRUE(c.ps->worker->RunGraph(preq, &presp).ok());
    wdone.WaitForNotification();
    ASSERT_TRUE(wstatus.ok()) << wstatus;
    ASSERT_EQ(wresp.recv_size(), 1);
    EXPECT_EQ(Floats(wresp.recv(0).tensor()), (std::vector<float>{2, 4, 6}));
  }
}

TEST(WorkerTest, ErrorOnThePsEndsTheWaitingWorker) {
  TwoTasks c;
  const std::string w0 = c.worker->Cpu(0);
  const std::string p0 = c.ps->Cpu(0);
  Builder psb;
  psb.Const("a", Tensor::FromVector<float>({1, 2}, TensorShape({1, 2})), p0);
  psb.Const("b", Tensor::FromVector<float>({1, 2, 3}, TensorShape({3, 1})), p0);
  psb.Binary("bad_mm", "MatMul", "a", "b", p0);
  psb.Send("send_v", "bad_mm", "edge_v", p0, c.ps->Incarnation(0), w0, false, p0);
  Builder wb;
  wb.Recv("recv_v", "edge_v", p0, c.ps->Incarnation(0), w0, false, w0);
  wb.Send("y", "recv_v", "y", w0, c.worker->Incarnation(0), w0, true, w0);
  absl::StatusOr<std::string> hp = Register(c.ps->worker.get(), psb.def());
  absl::StatusOr<std::string> hw = Register(c.worker->worker.get(), wb.def());
  ASSERT_TRUE(hp.ok() && hw.ok());
  tensorflow::RunGraphRequest wreq;
  wreq.set_graph_handle(*hw);
  wreq.set_step_id(21);
  tensorflow::RunGraphResponse wresp;
  absl::Notification wdone;
  absl::Status wstatus;
  c.worker->worker->RunGraphAsync(CallOptions::WithTimeout(absl::Seconds(30)), &wreq, &wresp,
                                  [&](const absl::Status& s) {
                                    wstatus = s;
                                    wdone.Notify();
                                  });
  tensorflow::RunGraphRequest preq;
  preq.set_graph_handle(*hp);
  preq.set_step_id(21);
  tensorflow::RunGraphResponse presp;
  absl::Status ps_status = c.ps->worker->RunGraph(preq, &presp);
  EXPECT_THAT(Msg(ps_status), HasSubstr("inner dimensions differ"));
  wdone.WaitForNotification();
  EXPECT_FALSE(wstatus.ok());
  EXPECT_THAT(Msg(wstatus), HasSubstr("RecvTensor from /job:ps/replica:0/task:0"));
  EXPECT_THAT(Msg(wstatus), HasSubstr("inner dimensions differ"));
}

TEST(WorkerTest, StalledRemoteRecvNamesTaskAndKey) {
  TwoTasks c;
  const std::string w0 = c.worker->Cpu(0);
  Builder wb;
  wb.Recv("recv_v", "edge_v", c.ps->Cpu(0), c.ps->Incarnation(0), w0, false, w0);
  wb.Send("y", "recv_v", "y", w0, c.worker->Incarnation(0), w0, true, w0);
  absl::StatusOr<std::string> hw = Register(c.worker->worker.get(), wb.def());
  ASSERT_TRUE(hw.ok()) << hw.status();
  tensorflow::RunGraphRequest req;
  req.set_graph_handle(*hw);
  req.set_step_id(11);
  tensorflow::RunGraphResponse resp;
  // The ps never runs step 11.
  absl::Status s =
      c.worker->worker->RunGraph(req, &resp, CallOptions::WithTimeout(absl::Milliseconds(200)));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(Msg(s), HasSubstr("edge_v"));
  EXPECT_THAT(Msg(s), HasSubstr("/job:ps/replica:0/task:0"));
  // The ps holds the step (opened by the RecvTensor) until it is cleaned up.
  EXPECT_EQ(c.ps->worker->NumLiveSteps(), 1);
  tensorflow::CleanupGraphRequest cleanup;
  cleanup.set_step_id(11);
  tensorflow::CleanupGraphResponse cresp;
  ASSERT_TRUE(c.ps->worker->CleanupGraph(cleanup, &cresp).ok());
  ASSERT_TRUE(c.worker->worker->CleanupGraph(cleanup, &cresp).ok());
  EXPECT_EQ(c.ps->worker->NumLiveSteps(), 0);
  EXPECT_EQ(c.worker->worker->NumLiveSteps(), 0);
}

// A master aborting a step cleans it up everywhere: the worker's receive in
// flight to the ps ends at once, and a straggling RunGraph or RecvTensor of
// that step fails instead of waiting for a step that is over.
TEST(WorkerTest, CleanupEndsRemoteRecvsAndRefusesStragglers) {
  TwoTasks c;
  const std::string w0 = c.worker->Cpu(0);
  worker_test::PsWorkerGraphs graphs = worker_test::DoubleOnWorker(*c.ps, *c.worker);
  absl::StatusOr<std::string> hp = Register(c.ps->worker.get(), graphs.ps);
  absl::StatusOr<std::string> hw = Register(c.worker->worker.get(), graphs.worker);
  ASSERT_TRUE(hp.ok() && hw.ok());
  tensorflow::RunGraphRequest wreq;
  wreq.set_graph_handle(*hw);
  wreq.set_step_id(31);
  tensorflow::RunGraphResponse wresp;
  absl::Notification wdone;
  absl::Status wstatus;
  const absl::Time start = absl::Now();
  c.worker->worker->RunGraphAsync(CallOptions::WithTimeout(absl::Seconds(30)), &wreq, &wresp,
                                  [&](const absl::Status& s) {
                                    wstatus = s;
                                    wdone.Notify();
                                  });
  // The worker's RecvTensor now waits on the ps, which never runs step 31.
  for (int i = 0; i < 200 && c.ps->worker->NumLiveSteps() == 0; ++i) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  tensorflow::CleanupGraphRequest cleanup;
  cleanup.set_step_id(31);
  tensorflow::CleanupGraphResponse cresp;
  ASSERT_TRUE(c.worker->worker->CleanupGraph(cleanup, &cresp).ok());
  ASSERT_TRUE(wdone.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_EQ(wstatus.code(), absl::StatusCode::kCancelled) << wstatus;
  EXPECT_THAT(Msg(wstatus), HasSubstr("cleaned up"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));

  // Stragglers of step 31 on the ps, after its cleanup.
  ASSERT_TRUE(c.ps->worker->CleanupGraph(cleanup, &cresp).ok());
  tensorflow::RunGraphRequest preq;
  preq.set_graph_handle(*hp);
  preq.set_step_id(31);
  tensorflow::RunGraphResponse presp;
  absl::Status s =
      c.ps->worker->RunGraph(preq, &presp, CallOptions::WithTimeout(absl::Seconds(30)));
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  EXPECT_THAT(Msg(s), HasSubstr("step 31 was already cleaned up"));
  tensorflow::RecvTensorRequest rreq;
  rreq.set_step_id(31);
  rreq.set_rendezvous_key(c.ps->Key(0, w0, "edge_v"));
  RecvTensorResult rresp;
  s = c.ps->worker->RecvTensor(rreq, &rresp, CallOptions::WithTimeout(absl::Seconds(30)));
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  EXPECT_EQ(c.ps->worker->NumLiveSteps(), 0);
  // A new step runs as usual.
  wreq.set_step_id(32);
  preq.set_step_id(32);
  absl::Notification again;
  c.worker->worker->RunGraphAsync(CallOptions::WithTimeout(absl::Seconds(30)), &wreq, &wresp,
                                  [&](const absl::Status& st) {
                                    wstatus = st;
                                    again.Notify();
                                  });
  ASSERT_TRUE(c.ps->worker->RunGraph(preq, &presp).ok());
  ASSERT_TRUE(again.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_TRUE(wstatus.ok()) << wstatus;
}

TEST(WorkerTest, RemoteRecvReportsStaleIncarnation) {
  TwoTasks c;
  const std::string w0 = c.worker->Cpu(0);
  Builder wb;
  wb.Recv("recv_v", "edge_v", c.ps->Cpu(0), c.ps->Incarnation(0) ^ 1, w0, false, w0);
  wb.Send("y", "recv_v", "y", w0, c.worker->Incarnation(0), w0, true, w0);
  absl::StatusOr<std::string> hw = Register(c.worker->worker.get(), wb.def());
  ASSERT_TRUE(hw.ok()) << hw.status();
  tensorflow::RunGraphRequest req;
  req.set_graph_handle(*hw);
  req.set_step_id(3);
  tensorflow::RunGraphResponse resp;
  absl::Status s =
      c.worker->worker->RunGraph(req, &resp, CallOptions::WithTimeout(absl::Seconds(30)));
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  EXPECT_THAT(Msg(s), HasSubstr("RecvTensor from /job:ps/replica:0/task:0"));
  EXPECT_THAT(Msg(s), HasSubstr("restarted"));
}

TEST(WorkerTest, RemoteRecvFromUnknownTaskIsUnavailable) {
  TwoTasks c;
  const std::string w0 = c.worker->Cpu(0);
  Builder wb;
  wb.Recv("recv_v", "edge_v", "/job:ps/replica:0/task:5/device:CPU:0", 1, w0, false, w0);
  wb.Send("y", "recv_v", "y", w0, c.worker->Incarnation(0), w0, true, w0);
  absl::StatusOr<std::string> hw = Register(c.worker->worker.get(), wb.def());
  ASSERT_TRUE(hw.ok()) << hw.status();
  tensorflow::RunGraphRequest req;
  req.set_graph_handle(*hw);
  req.set_step_id(3);
  tensorflow::RunGraphResponse resp;
  absl::Status s = c.worker->worker->RunGraph(req, &resp);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(Msg(s), HasSubstr("/job:ps/replica:0/task:5"));
}

struct TestResource : ResourceBase {
  static constexpr char kTypeName[] = "TestResource";
  std::string DebugString() const override { return "test"; }
};

TEST(WorkerTest, CleanupAllClearsContainers) {
  Task t("ps", 0, 2);
  ResourceMgr* rm1 = t.mgr->ListDevices()[1]->resource_manager();
  const std::string def = rm1->default_container();
  ASSERT_TRUE(rm1->Create(def, "v", std::make_shared<TestResource>()).ok());
  ASSERT_TRUE(rm1->Create("other", "v", std::make_shared<TestResource>()).ok());
  tensorflow::CleanupAllRequest req;
  tensorflow::CleanupAllResponse resp;
  ASSERT_TRUE(t.worker->CleanupAll(req, &resp).ok());
  EXPECT_FALSE(rm1->Lookup<TestResource>(def, "v").ok());
  EXPECT_TRUE(rm1->Lookup<TestResource>("other", "v").ok());
  req.add_container("other");
  ASSERT_TRUE(t.worker->CleanupAll(req, &resp).ok());
  EXPECT_FALSE(rm1->Lookup<TestResource>("other", "v").ok());
}

// A server shutting down destroys its worker while a kernel of a step still
// runs on the (shared) pool: the worker aborts the step and waits for it to
// end, so the step's caller is answered before the worker is gone and the
// kernel's completion finds the worker still there.
TEST(WorkerTest, DestroyingAWorkerEndsItsRunningStepsFirst) {
  absl::Notification started;
  g_sleep_started = &started;
  ThreadPool pool("shared", 2);  // Outlives the worker, as InterOpPool() does.
  WorkerOptions opts;
  opts.inter_op_pool = &pool;
  auto t = std::make_unique<Task>("worker", 0, 1, opts);
  Builder b;
  const std::string cpu = t->Cpu(0);
  b.Node("slow", "WorkerTestSleep", {}, cpu);
  absl::StatusOr<std::string> handle = Register(t->worker.get(), b.def());
  ASSERT_TRUE(handle.ok()) << handle.status();
  tensorflow::RunGraphRequest req;
  req.set_graph_handle(*handle);
  req.set_step_id(5);
  tensorflow::RunGraphResponse resp;
  absl::Notification answered;
  absl::Status status;
  t->worker->RunGraphAsync(CallOptions::WithTimeout(absl::Seconds(30)), &req, &resp,
                           [&](const absl::Status& s) {
                             status = s;
                             answered.Notify();
                           });
  ASSERT_TRUE(started.WaitForNotificationWithTimeout(absl::Seconds(10)));
  t->worker.reset();
  EXPECT_TRUE(answered.HasBeenNotified());
  answered.WaitForNotificationWithTimeout(absl::Seconds(10));  // Not to leave it dangling.
  // The kernel had nothing left to cancel: the step may still have succeeded.
  EXPECT_TRUE(status.ok() || status.code() == absl::StatusCode::kCancelled) << status;
}

TEST(DeadlineTimerTest, RunsInOrderAndCancels) {
  DeadlineTimer timer;
  absl::Mutex mu;
  std::vector<int> order;
  absl::Notification last;
  auto push = [&](int i) {
    absl::MutexLock l(&mu);
    order.push_back(i);
  };
  timer.Schedule(absl::Now() + absl::Milliseconds(60), [&] {
    push(2);
    last.Notify();
  });
  timer.Schedule(absl::Now() + absl::Milliseconds(20), [&] { push(1); });
  DeadlineTimer::Id cancelled =
      timer.Schedule(absl::Now() + absl::Milliseconds(40), [&] { push(9); });
  EXPECT_EQ(timer.Schedule(absl::InfiniteFuture(), [] {}), DeadlineTimer::kNone);
  EXPECT_TRUE(timer.Cancel(cancelled));
  last.WaitForNotification();
  absl::MutexLock l(&mu);
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
}

}  // namespace
}  // namespace dflow
