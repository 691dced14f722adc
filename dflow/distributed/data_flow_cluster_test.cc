// Queues and accumulators (ops/data_flow_ops) shared by two sessions through
// an in-process cluster, as SyncReplicasOptimizer uses them: the token queue
// and the gradient accumulator live on the ps, each replica's session names
// them by shared_name, and a waiting dequeue ends at its step's deadline.
#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "dflow/distributed/master.h"
#include "dflow/distributed/remote_session.h"
#include "dflow/distributed/worker_test_util.h"
#include "dflow/framework/attr_util.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

using worker_test::Task;

constexpr char kPs[] = "/job:ps/replica:0/task:0";

// A Worker that counts the CleanupGraph calls it is inside of.
class CleanupCountingWorker : public Worker {
 public:
  CleanupCountingWorker(DeviceMgr* devices, WorkerOptions opts, std::atomic<int>* running)
      : Worker(devices, std::move(opts)), running_(running) {}
  void CleanupGraphAsync(const CallOptions& opts, const tensorflow::CleanupGraphRequest* req,
                         tensorflow::CleanupGraphResponse* resp, StatusCallback done) override {
    running_->fetch_add(1);
    Worker::CleanupGraphAsync(opts, req, resp, std::move(done));
    running_->fetch_sub(1);
  }

 private:
  std::atomic<int>* const running_;
};

// /job:ps/task:0 and /job:worker/task:0..1, one CPU each, and a master.
class Cluster {
 public:
  Cluster() {
    WorkerOptions opts;
    opts.worker_for_task = [this](const std::string& task) { return Lookup(task); };
    for (const auto& [job, index] :
         std::vector<std::pair<std::string, int>>{{"ps", 0}, {"worker", 0}, {"worker", 1}}) {
      auto task = std::make_unique<Task>(job, index, 1, opts);
      task->worker =
          std::make_unique<CleanupCountingWorker>(task->mgr.get(), opts, &cleanups_running_);
      tasks_[absl::StrCat("/job:", job, "/replica:0/task:", index)] = std::move(task);
    }
    MasterEnv env;
    env.task_name = "/job:worker/replica:0/task:0";
    for (const auto& [name, task] : tasks_) env.cluster_tasks.push_back(name);
    env.worker_for_task = [this](const std::string& task) { return Lookup(task); };
    env.discovery_timeout = absl::Seconds(5);
    master_ = std::make_shared<Master>(std::move(env));
  }
  std::unique_ptr<RemoteSession> NewSession() {
    return std::make_unique<RemoteSession>(master_, SessionOptions());
  }
  Master& master() { return *master_; }
  // How many CleanupGraph calls some worker is inside of now.
  int cleanups_running() const { return cleanups_running_.load(); }

 private:
  WorkerInterface* Lookup(const std::string& task) {
    auto it = tasks_.find(task);
    return it == tasks_.end() ? nullptr : it->second->worker.get();
  }
  std::atomic<int> cleanups_running_{0};
  std::map<std::string, std::unique_ptr<Task>> tasks_;
  std::shared_ptr<Master> master_;
};

tensorflow::NodeDef* Node(tensorflow::GraphDef* g, const std::string& name, const std::string& op,
                          std::vector<std::string> inputs, const std::string& device) {
  tensorflow::NodeDef* n = g->add_node();
  n->set_name(name);
  n->set_op(op);
  for (auto& in : inputs) n->add_input(in);
  n->set_device(device);
  return n;
}

// One replica's graph: the shared token queue and accumulator on the ps, and
// the ops a replica runs on them (from its own task).
tensorflow::GraphDef ReplicaGraph(const std::string& worker) {
  tensorflow::GraphDef g;
  tensorflow::NodeDef* q = Node(&g, "sync_token_q", "FIFOQueueV2", {}, kPs);
  SetAttr(q, "component_types", std::vector<DataType>{DT_INT64});
  tensorflow::AttrValue shapes;
  shapes.mutable_list()->add_shape();
  (*q->mutable_attr())["shapes"] = shapes;
  SetAttr(q, "shared_name", "sync_token_q");
  SetAttr(Node(&g, "token", "QueueDequeueV2", {"sync_token_q"}, kPs), "component_types",
          std::vector<DataType>{DT_INT64});
  tensorflow::NodeDef* tokens = Node(&g, "tokens", "Const", {}, worker);
  SetAttr(tokens, "dtype", DT_INT64);
  SetAttr(tokens, "value", Tensor::Vec<int64_t>({1, 1}));
  SetAttr(Node(&g, "push_tokens", "QueueEnqueueManyV2", {"sync_token_q", "tokens"}, kPs),
          "Tcomponents", std::vector<DataType>{DT_INT64});

  tensorflow::NodeDef* acc = Node(&g, "acc", "ResourceConditionalAccumulator", {}, kPs);
  SetAttr(acc, "dtype", DT_FLOAT);
  SetAttr(acc, "shape", TensorShape({2}));
  SetAttr(acc, "shared_name", "w_grad");
  tensorflow::NodeDef* grad = Node(&g, "grad", "Placeholder", {}, worker);
  SetAttr(grad, "dtype", DT_FLOAT);
  tensorflow::NodeDef* step = Node(&g, "local_step", "Placeholder", {}, worker);
  SetAttr(step, "dtype", DT_INT64);
  SetAttr(Node(&g, "apply", "ResourceAccumulatorApplyGradient", {"acc", "local_step", "grad"}, kPs),
          "dtype", DT_FLOAT);
  tensorflow::NodeDef* n = Node(&g, "num_required", "Const", {}, kPs);
  SetAttr(n, "dtype", DT_INT32);
  SetAttr(n, "value", Tensor::Scalar<int32_t>(2));
  SetAttr(Node(&g, "take", "ResourceAccumulatorTakeGradient", {"acc", "num_required"}, kPs),
          "dtype", DT_FLOAT);
  return g;
}

TEST(DataFlowClusterTest, TwoSessionsShareTheTokenQueueOnThePs) {
  Cluster cluster;
  auto replica0 = cluster.NewSession();
  auto replica1 = cluster.NewSession();
  ASSERT_TRUE(replica0->Create(ReplicaGraph("/job:worker/replica:0/task:0")).ok());
  ASSERT_TRUE(replica1->Create(ReplicaGraph("/job:worker/replica:0/task:1")).ok());

  // Replica 0 waits for a token that replica 1's session pushes.
  absl::Status waited;
  std::vector<Tensor> token;
  std::thread waiter([&] {
    tensorflow::RunOptions opts;
    opts.set_timeout_in_ms(5000);
    waited = replica0->Run(opts, {}, {"token"}, {}, &token, nullptr);
  });
  absl::SleepFor(absl::Milliseconds(30));
  absl::Status pushed = replica1->Run({}, {}, {"push_tokens"}, nullptr);
  waiter.join();
  ASSERT_TRUE(pushed.ok()) << pushed;
  ASSERT_TRUE(waited.ok()) << waited;
  EXPECT_EQ(token[0].scalar<int64_t>(), 1);
  // One token left, seen by either session.
  std::vector<Tensor> out;
  ASSERT_TRUE(replica1->Run({}, {"token"}, {}, &out).ok());

  // The queue is empty now: a dequeue ends at the step's deadline.
  tensorflow::RunOptions opts;
  opts.set_timeout_in_ms(100);
  const absl::Time start = absl::Now();
  absl::Status late = replica0->Run(opts, {}, {"token"}, {}, &out, nullptr);
  EXPECT_EQ(late.code(), absl::StatusCode::kDeadlineExceeded) << late;
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
}

// Worker 0's part fails while the ps's waits in a dequeue. The master's
// CleanupGraph to the ps ends the ps's part on the master's own thread, and
// with it the step; the step is answered only once the master's last call for
// it has returned, since its caller may then close the session and free the
// workers (a race that once crashed this suite).
TEST(DataFlowClusterTest, AFailedStepIsAnsweredAfterItsCleanupCalls) {
  Cluster cluster;
  auto session = cluster.NewSession();
  tensorflow::GraphDef g = ReplicaGraph("/job:worker/replica:0/task:0");
  tensorflow::NodeDef* no = Node(&g, "no", "Const", {}, "/job:worker/replica:0/task:0");
  SetAttr(no, "dtype", DT_BOOL);
  SetAttr(no, "value", Tensor::Scalar(false));
  SetAttr(Node(&g, "check", "Assert", {"no", "no"}, "/job:worker/replica:0/task:0"), "T",
          std::vector<DataType>{DT_BOOL});
  ASSERT_TRUE(session->Create(g).ok());

  tensorflow::RunStepRequest req;
  req.set_session_handle(session->handle());
  req.add_target("token");
  req.add_target("check");
  req.mutable_options()->set_timeout_in_ms(5000);
  tensorflow::RunStepResponse resp;
  absl::Notification answered;
  absl::Status status;
  int cleanups_at_answer = -1;
  cluster.master().RunStepAsync({}, &req, &resp, [&](const absl::Status& s) {
    cleanups_at_answer = cluster.cleanups_running();
    status = s;
    answered.Notify();
  });
  ASSERT_TRUE(answered.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "assertion failed")) << status;
  EXPECT_EQ(cleanups_at_answer, 0);
}

TEST(DataFlowClusterTest, ReplicasFeedOneAccumulatorOnThePs) {
  Cluster cluster;
  auto replica0 = cluster.NewSession();
  auto replica1 = cluster.NewSession();
  ASSERT_TRUE(replica0->Create(ReplicaGraph("/job:worker/replica:0/task:0")).ok());
  ASSERT_TRUE(replica1->Create(ReplicaGraph("/job:worker/replica:0/task:1")).ok());
  auto apply = [](Session* s, int64_t step, std::vector<float> g) {
    return s->Run({{"grad", Tensor::Vec<float>(g)}, {"local_step", Tensor::Scalar(step)}}, {},
                  {"apply"}, nullptr);
  };
  ASSERT_TRUE(apply(replica0.get(), 0, {1, 2}).ok());
  ASSERT_TRUE(apply(replica1.get(), 0, {3, 4}).ok());
  std::vector<Tensor> out;
  absl::Status s = replica0->Run({}, {"take"}, {}, &out);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(worker_test::Floats(out[0]), (std::vector<float>{2, 3}));
  // Step 0's straggler is dropped; the next take needs two of step 1.
  ASSERT_TRUE(apply(replica1.get(), 0, {100, 100}).ok());
  ASSERT_TRUE(apply(replica0.get(), 1, {5, 5}).ok());
  ASSERT_TRUE(apply(replica1.get(), 1, {7, 7}).ok());
  s = replica1->Run({}, {"take"}, {}, &out);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(worker_test::Floats(out[0]), (std::vector<float>{6, 6}));
}

}  // namespace
}  // namespace dflow
