// Queues and accumulators (ops/data_flow_ops) through the runtime: a waiting
// dequeue holds no pool thread, graphs of two sessions share a queue by
// shared_name on one device, a step's deadline ends a wait, and the
// accumulator loop SyncReplicasOptimizer builds runs in a DirectSession with
// both handle flavours (TensorFlow 1.x's Ref(string) and resource).
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "dflow/framework/attr_util.h"
#include "dflow/framework/thread_pool.h"
#include "dflow/ops/data_flow_ops.h"
#include "dflow/runtime/call_frame.h"
#include "dflow/runtime/direct_session.h"
#include "dflow/runtime/executor.h"
#include "dflow/runtime/graph.h"
#include "dflow/runtime/rendezvous_local.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

constexpr char kDevice[] = "/job:localhost/replica:0/task:0/device:CPU:0";

tensorflow::NodeDef* Node(tensorflow::GraphDef* g, const std::string& name, const std::string& op,
                          std::vector<std::string> inputs = {}) {
  tensorflow::NodeDef* n = g->add_node();
  n->set_name(name);
  n->set_op(op);
  for (auto& in : inputs) n->add_input(in);
  return n;
}

void Const(tensorflow::GraphDef* g, const std::string& name, const Tensor& value) {
  tensorflow::NodeDef* n = Node(g, name, "Const");
  SetAttr(n, "value", value);
  SetAttr(n, "dtype", value.dtype());
}

void Placeholder(tensorflow::GraphDef* g, const std::string& name, DataType dtype) {
  SetAttr(Node(g, name, "Placeholder"), "dtype", dtype);
}

// FIFOQueueV2 of int64 scalars, as SyncReplicasOptimizer's token queue.
void TokenQueue(tensorflow::GraphDef* g, const std::string& name, const std::string& shared_name) {
  tensorflow::NodeDef* n = Node(g, name, "FIFOQueueV2");
  SetAttr(n, "component_types", std::vector<DataType>{DT_INT64});
  tensorflow::AttrValue shapes;
  shapes.mutable_list()->add_shape();  // []
  (*n->mutable_attr())["shapes"] = shapes;
  SetAttr(n, "capacity", int64_t{-1});
  SetAttr(n, "shared_name", shared_name);
}

void Dequeue(tensorflow::GraphDef* g, const std::string& name, const std::string& queue) {
  SetAttr(Node(g, name, "QueueDequeueV2", {queue}), "component_types",
          std::vector<DataType>{DT_INT64});
}

void Enqueue(tensorflow::GraphDef* g, const std::string& name, const std::string& queue,
             const std::string& value) {
  SetAttr(Node(g, name, "QueueEnqueueV2", {queue, value}), "Tcomponents",
          std::vector<DataType>{DT_INT64});
}

absl::StatusOr<std::unique_ptr<Executor>> MakeExecutor(const tensorflow::GraphDef& def,
                                                       Device* device) {
  ASSIGN_OR_RETURN(std::unique_ptr<Graph> g, Graph::FromGraphDef(def));
  return Executor::Create(std::move(g), device);
}

std::unique_ptr<DirectSession> NewSession() {
  absl::StatusOr<std::unique_ptr<DirectSession>> s = DirectSession::New(SessionOptions());
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

TEST(DataFlowRuntimeTest, WaitingDequeueHoldsNoThreadOfAOneThreadPool) {
  Device device(*DeviceName::Parse(kDevice), 1, 0);
  ThreadPool pool("one_thread", 1);
  auto runner = [&pool](std::function<void()> fn) { pool.Schedule(std::move(fn)); };

  // Two graphs, as two sessions (or replicas) on one worker would send.
  tensorflow::GraphDef consumer;
  TokenQueue(&consumer, "q_consumer", "sync_token_q");
  Dequeue(&consumer, "dequeue", "q_consumer");
  SetAttr(Node(&consumer, "r", "_Retval", {"dequeue"}), "T", DT_INT64);
  SetAttr(consumer.mutable_node(consumer.node_size() - 1), "index", 0);
  tensorflow::GraphDef producer;
  TokenQueue(&producer, "q_producer", "sync_token_q");
  Const(&producer, "token", Tensor::Scalar<int64_t>(7));
  Enqueue(&producer, "enqueue", "q_producer", "token");

  absl::StatusOr<std::unique_ptr<Executor>> consume = MakeExecutor(consumer, &device);
  ASSERT_TRUE(consume.ok()) << consume.status();
  absl::StatusOr<std::unique_ptr<Executor>> produce = MakeExecutor(producer, &device);
  ASSERT_TRUE(produce.ok()) << produce.status();

  FunctionCallFrame frame({}, 1);
  LocalRendezvous rendezvous1, rendezvous2;
  CancellationManager cm;
  Executor::Args args;
  args.runner = runner;
  args.call_frame = &frame;
  args.rendezvous = &rendezvous1;
  args.cancellation_manager = &cm;
  absl::Notification consumed;
  absl::Status consume_status;
  (*consume)->RunAsync(args, [&](absl::Status s) {
    consume_status = s;
    consumed.Notify();
  });
  EXPECT_FALSE(consumed.WaitForNotificationWithTimeout(absl::Milliseconds(50)))
      << "the queue is empty: " << consume_status;

  // If the waiting dequeue held the pool's only thread, this step could not
  // run and would end at its deadline.
  Executor::Args produce_args;
  produce_args.runner = runner;
  produce_args.rendezvous = &rendezvous2;
  produce_args.deadline = absl::Now() + absl::Seconds(3);
  absl::Status s = (*produce)->Run(produce_args);
  EXPECT_TRUE(s.ok()) << s;
  if (!consumed.WaitForNotificationWithTimeout(absl::Seconds(3))) {
    cm.StartCancel();  // Bounded failure: never leave the step running.
    consumed.WaitForNotification();
    FAIL() << "the dequeue never finished";
  }
  ASSERT_TRUE(consume_status.ok()) << consume_status;
  absl::StatusOr<std::vector<Tensor>> out = frame.ConsumeRetvals();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].scalar<int64_t>(), 7);
}

TEST(DataFlowRuntimeTest, SessionDeadlineEndsAWaitingDequeue) {
  tensorflow::GraphDef g;
  TokenQueue(&g, "q", "");
  Dequeue(&g, "dequeue", "q");
  Const(&g, "token", Tensor::Scalar<int64_t>(3));
  Enqueue(&g, "enqueue", "q", "token");
  Node(&g, "close", "QueueCloseV2", {"q"});
  Node(&g, "size", "QueueSizeV2", {"q"});
  auto s = NewSession();
  ASSERT_TRUE(s->Create(g).ok());

  tensorflow::RunOptions opts;
  opts.set_timeout_in_ms(100);
  std::vector<Tensor> out;
  const absl::Time start = absl::Now();
  absl::Status st = s->Run(opts, {}, {"dequeue"}, {}, &out, nullptr);
  EXPECT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded) << st;
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));

  // The queue still works after the aborted step, across runs of the session.
  ASSERT_TRUE(s->Run({}, {}, {"enqueue"}, nullptr).ok());
  ASSERT_TRUE(s->Run({}, {}, {"enqueue"}, nullptr).ok());
  ASSERT_TRUE(s->Run({}, {"size"}, {}, &out).ok());
  EXPECT_EQ(out[0].scalar<int32_t>(), 2);
  ASSERT_TRUE(s->Run({}, {"dequeue"}, {}, &out).ok());
  EXPECT_EQ(out[0].scalar<int64_t>(), 3);
  ASSERT_TRUE(s->Run({}, {}, {"close"}, nullptr).ok());
  ASSERT_TRUE(s->Run({}, {"dequeue"}, {}, &out).ok()) << "closed, one element left";
  st = s->Run({}, {"dequeue"}, {}, &out);
  EXPECT_EQ(st.code(), absl::StatusCode::kOutOfRange) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "is closed and has insufficient elements")) << st;
}

// The accumulator loop of SyncReplicasOptimizer: replicas apply gradients
// tagged with their step; the chief takes the mean of num_required.
class AccumulatorSessionTest : public ::testing::TestWithParam<bool> {
 protected:
  tensorflow::GraphDef Graph() {
    const bool resource = GetParam();
    const std::string prefix = resource ? "Resource" : "";
    tensorflow::GraphDef g;
    tensorflow::NodeDef* acc = Node(&g, "acc", prefix + "ConditionalAccumulator");
    SetAttr(acc, "dtype", DT_FLOAT);
    SetAttr(acc, "shape", TensorShape({2}));
    SetAttr(acc, "shared_name", "grad_acc");
    Placeholder(&g, "grad", DT_FLOAT);
    Placeholder(&g, "local_step", DT_INT64);
    SetAttr(Node(&g, "apply", prefix + "AccumulatorApplyGradient", {"acc", "local_step", "grad"}),
            "dtype", DT_FLOAT);
    Const(&g, "num_required", Tensor::Scalar<int32_t>(2));
    SetAttr(Node(&g, "take", prefix + "AccumulatorTakeGradient", {"acc", "num_required"}), "dtype",
            DT_FLOAT);
    Node(&g, "num", prefix + "AccumulatorNumAccumulated", {"acc"});
    return g;
  }
  absl::Status Apply(Session* s, int64_t step, std::vector<float> grad) {
    return s->Run({{"grad", Tensor::Vec<float>(grad)}, {"local_step", Tensor::Scalar(step)}}, {},
                  {"apply"}, nullptr);
  }
};

INSTANTIATE_TEST_SUITE_P(RefAndResource, AccumulatorSessionTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Resource" : "Ref"; });

TEST_P(AccumulatorSessionTest, TakeWaitsForReplicasAndReturnsTheMean) {
  auto s = NewSession();
  ASSERT_TRUE(s->Create(Graph()).ok());
  // The chief's take starts first and waits for two gradients.
  absl::Status take_status;
  std::vector<Tensor> taken;
  std::thread chief([&] {
    tensorflow::RunOptions opts;
    opts.set_timeout_in_ms(5000);
    take_status = s->Run(opts, {}, {"take"}, {}, &taken, nullptr);
  });
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_TRUE(Apply(s.get(), 0, {1, 2}).ok());
  EXPECT_TRUE(Apply(s.get(), 0, {3, 6}).ok());
  chief.join();
  ASSERT_TRUE(take_status.ok()) << take_status;
  ASSERT_EQ(taken[0].NumElements(), 2);
  EXPECT_FLOAT_EQ(taken[0].flat<float>()[0], 2);
  EXPECT_FLOAT_EQ(taken[0].flat<float>()[1], 4);

  // Step 0 is over: its late gradients are dropped, step 1's count.
  EXPECT_TRUE(Apply(s.get(), 0, {9, 9}).ok());
  EXPECT_TRUE(Apply(s.get(), 1, {5, 5}).ok());
  std::vector<Tensor> out;
  ASSERT_TRUE(s->Run({}, {"num"}, {}, &out).ok());
  EXPECT_EQ(out[0].scalar<int32_t>(), 1);

  absl::Status bad = Apply(s.get(), 1, {1, 2, 3});
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument) << bad;
  EXPECT_TRUE(absl::StrContains(bad.message(), "ConditionalAccumulator 'grad_acc'")) << bad;
}

}  // namespace
}  // namespace dflow
