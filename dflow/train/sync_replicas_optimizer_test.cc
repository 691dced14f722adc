#include "dflow/train/sync_replicas_optimizer.h"

#include <atomic>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "dflow/distributed/rpc/local_cluster_test_util.h"
#include "dflow/train/dataset.h"
#include "dflow/train/models.h"
#include "dflow/train/replica_device_setter.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

constexpr int64_t kInputDim = 20;

// Rows [begin, begin + n) of `data` as (features, labels).
std::pair<Tensor, Tensor> Slice(const Dataset& data, int64_t begin, int64_t n) {
  std::vector<int64_t> rows(n);
  for (int64_t i = 0; i < n; ++i) rows[i] = begin + i;
  Tensor features, labels;
  data.Gather(rows, &features, &labels);
  return {features, labels};
}

std::vector<float> Values(const Tensor& t) {
  auto f = t.flat<float>();
  return std::vector<float>(f.begin(), f.end());
}

// The MLP with its variables' values read back.
struct Replica {
  Scope root = Scope::NewRootScope();
  Model model;
  Variable global_step;
  std::unique_ptr<Optimizer> opt;
  std::unique_ptr<SyncReplicasOptimizer> sync;
  Operation train_op;
  Operation init;
  std::unique_ptr<ClientSession> session;

  // Every trainable variable's value, in layer order.
  std::vector<std::vector<float>> Parameters() const {
    std::vector<Output> reads;
    for (const Variable& v : model.variables) reads.push_back(v.value());
    std::vector<Tensor> out;
    EXPECT_TRUE(session->Run(reads, &out).ok());
    std::vector<std::vector<float>> values;
    for (const Tensor& t : out) values.push_back(Values(t));
    return values;
  }
};

// Adam's epsilon is 0.1 here: with 1e-8 its first steps move a parameter by
// about lr * g / |g|, so the last-bit difference between averaging two
// 16-example means and one 32-example mean decides tiny gradients' updates
// (1.4e-4 relative after 4 steps); with 0.1 the update is smooth in g and
// the comparison tests the aggregation, not float rounding.
std::unique_ptr<Optimizer> NewOptimizer(bool adam) {
  if (adam)
    return std::make_unique<AdamOptimizer>(AdamOptions{.learning_rate = 0.01f, .epsilon = 0.1f});
  return std::make_unique<GradientDescentOptimizer>(0.5f);
}

// Worker `task` of `cluster`, building the model with a replica device
// setter and SyncReplicasOptimizer.
std::unique_ptr<Replica> SyncWorker(LocalCluster& cluster, int task, int replicas, int workers,
                                    int initial_tokens, bool adam) {
  auto r = std::make_unique<Replica>();
  const std::string device = absl::StrCat("/job:worker/task:", task);
  auto setter_options = ReplicaDeviceSetterOptions::FromCluster(cluster.spec(), device);
  EXPECT_TRUE(setter_options.ok());
  auto setter = std::make_shared<ReplicaDeviceSetter>(*setter_options);
  Scope s = r->root.WithDeviceFunction(
      [setter](const tensorflow::NodeDef& n) { return setter->DeviceFor(n); });
  auto model = BuildMlp(s, {.seed = 3, .input_dim = kInputDim});
  EXPECT_TRUE(model.ok()) << model.status();
  r->model = *model;
  r->global_step = *CreateGlobalStep(s);
  r->opt = NewOptimizer(adam);
  r->sync = std::make_unique<SyncReplicasOptimizer>(
      r->opt.get(), SyncReplicasOptions{.replicas_to_aggregate = replicas,
                                        .total_num_replicas = workers,
                                        .initial_tokens = initial_tokens,
                                        .local_device = device});
  auto train = r->sync->Minimize(s, r->model.loss, r->model.variables, &r->global_step);
  EXPECT_TRUE(train.ok()) << train.status();
  r->train_op = *train;
  r->init = GlobalVariablesInitializer(r->root);
  SessionOptions options;
  options.target = cluster.target("worker", task);
  options.config.add_device_filters("/job:ps");
  options.config.add_device_filters(device);
  options.config.set_operation_timeout_in_ms(30000);
  r->session = std::make_unique<ClientSession>(r->root, options);
  return r;
}

// Between-graph sync with R replicas at batch b ends with the parameters one
// process reaches at batch R*b on the same data order.
void ExpectSyncMatchesOneProcess(bool adam) {
  constexpr int kReplicas = 2, kBatch = 16, kSteps = 4;
  auto data = MakeSyntheticDataset(kReplicas * kBatch * kSteps, 10, kInputDim, 11);
  ASSERT_TRUE(data.ok());
  LocalCluster cluster({{"ps", 2}, {"worker", kReplicas}});
  std::vector<std::unique_ptr<Replica>> workers;
  for (int i = 0; i < kReplicas; ++i) {
    workers.push_back(SyncWorker(cluster, i, kReplicas, kReplicas, /*initial_tokens=*/0, adam));
  }
  ASSERT_TRUE(workers[0]->session->Run({}, {}, {workers[0]->init}, nullptr).ok());
  for (auto& w : workers) ASSERT_TRUE(w->sync->InitLocalStep(*w->session).ok());
  ASSERT_TRUE(workers[0]->sync->InitChief(*workers[0]->session).ok());
  auto loop = workers[0]->sync->StartChiefLoop(RunOn(workers[0]->session.get()), kSteps);
  for (int step = 0; step < kSteps; ++step) {
    // Every replica takes its slice of the global batch; no one runs ahead.
    std::vector<absl::Status> status(kReplicas);
    std::vector<std::thread> threads;
    for (int i = 0; i < kReplicas; ++i) {
      threads.emplace_back([&, i] {
        auto [x, y] = Slice(*data, (step * kReplicas + i) * kBatch, kBatch);
        std::vector<Tensor> out;
        status[i] = workers[i]->sync->RunTrainStep(
            *workers[i]->session, {{workers[i]->model.features, x}, {workers[i]->model.labels, y}},
            {}, &out);
      });
    }
    for (auto& t : threads) t.join();
    for (const absl::Status& s : status) {
      ASSERT_TRUE(s.ok()) << "step " << step << ": " << s << "; chief: " << loop->Stop();
    }
  }
  ASSERT_TRUE(loop->Stop().ok());
  std::vector<std::vector<float>> distributed = workers[0]->Parameters();
  for (auto& w : workers) EXPECT_EQ(w->sync->stale_gradients(), 0);

  // One process, batch R*b.
  Replica single;
  single.model = *BuildMlp(single.root, {.seed = 3, .input_dim = kInputDim});
  single.global_step = *CreateGlobalStep(single.root);
  single.opt = NewOptimizer(adam);
  single.train_op = *single.opt->Minimize(single.root, single.model.loss, single.model.variables,
                                          &single.global_step);
  single.init = GlobalVariablesInitializer(single.root);
  single.session = std::make_unique<ClientSession>(single.root);
  ASSERT_TRUE(single.session->Run({}, {}, {single.init}, nullptr).ok());
  for (int step = 0; step < kSteps; ++step) {
    auto [x, y] = Slice(*data, step * kReplicas * kBatch, kReplicas * kBatch);
    ASSERT_TRUE(single.session
                    ->Run({{single.model.features, x}, {single.model.labels, y}}, {},
                          {single.train_op}, nullptr)
                    .ok());
  }
  std::vector<std::vector<float>> local = single.Parameters();

  ASSERT_EQ(distributed.size(), local.size());
  double worst = 0;
  for (size_t v = 0; v < local.size(); ++v) {
    ASSERT_EQ(distributed[v].size(), local[v].size());
    for (size_t i = 0; i < local[v].size(); ++i) {
      const double scale = std::max(1e-3, std::abs(static_cast<double>(local[v][i])));
      worst = std::max(worst, std::abs(distributed[v][i] - local[v][i]) / scale);
    }
  }
  EXPECT_LE(worst, 1e-5);
  // The parameters moved: the check compares trained values.
  Replica fresh;
  fresh.model = *BuildMlp(fresh.root, {.seed = 3, .input_dim = kInputDim});
  fresh.session = std::make_unique<ClientSession>(fresh.root);
  ASSERT_TRUE(fresh.session->Run({}, {}, {GlobalVariablesInitializer(fresh.root)}, nullptr).ok());
  EXPECT_NE(fresh.Parameters(), local);
}

TEST(SyncReplicasTest, TwoReplicasMatchOneProcessAtDoubleBatchSgd) {
  ExpectSyncMatchesOneProcess(/*adam=*/false);
}

TEST(SyncReplicasTest, TwoReplicasMatchOneProcessAtDoubleBatchAdam) {
  ExpectSyncMatchesOneProcess(/*adam=*/true);
}

// Three workers, two gradients per step: a worker slowed down does not slow
// the steps, and its late gradients are dropped and counted. The straggler's
// first step waits until the others have moved the global step on (so that
// gradient is stale whatever the machine's speed); later ones sleep first.
TEST(SyncReplicasTest, BackupWorkersOutrunAStraggler) {
  constexpr int kWorkers = 3, kSteps = 60, kBatch = 8, kHeadStart = 5;
  const absl::Duration kSlow = absl::Milliseconds(200);
  auto data = MakeSyntheticDataset(kBatch * 4, 10, kInputDim, 5);
  ASSERT_TRUE(data.ok());
  LocalCluster cluster({{"ps", 1}, {"worker", kWorkers}});
  std::vector<std::unique_ptr<Replica>> workers;
  for (int i = 0; i < kWorkers; ++i) {
    workers.push_back(SyncWorker(cluster, i, /*replicas=*/2, kWorkers, -1, /*adam=*/false));
  }
  ASSERT_TRUE(workers[0]->session->Run({}, {}, {workers[0]->init}, nullptr).ok());
  for (auto& w : workers) ASSERT_TRUE(w->sync->InitLocalStep(*w->session).ok());
  ASSERT_TRUE(workers[0]->sync->InitChief(*workers[0]->session).ok());
  auto loop = workers[0]->sync->StartChiefLoop(RunOn(workers[0]->session.get()), kSteps);
  auto [x, y] = Slice(*data, 0, kBatch);
  std::vector<std::atomic<int>> steps(kWorkers);
  std::vector<absl::Status> status(kWorkers);
  const absl::Time start = absl::Now();
  std::vector<std::thread> threads;
  for (int i = 0; i < kWorkers; ++i) {
    threads.emplace_back([&, &x = x, &y = y, i] {
      for (int n = 0; n < 4 * kSteps; ++n) {  // Bounded; ends when the chief closes the queue.
        if (i == kWorkers - 1 && n == 0) {
          const absl::Time deadline = absl::Now() + absl::Seconds(10);
          while (steps[0].load() < kHeadStart && absl::Now() < deadline) {
            absl::SleepFor(absl::Milliseconds(1));
          }
        } else if (i == kWorkers - 1) {
          absl::SleepFor(kSlow);
        }
        std::vector<Tensor> out;
        absl::Status s = workers[i]->sync->RunTrainStep(
            *workers[i]->session, {{workers[i]->model.features, x}, {workers[i]->model.labels, y}},
            {}, &out);
        if (SyncReplicasOptimizer::IsEndOfTraining(s)) return;
        if (!s.ok()) {
          status[i] = s;
          return;
        }
        steps[i].fetch_add(1);
      }
    });
  }
  ASSERT_TRUE(loop->Stop().ok());
  const absl::Duration took = absl::Now() - start;
  for (auto& t : threads) t.join();
  for (const absl::Status& s : status) EXPECT_TRUE(s.ok()) << s;
  // Sixty steps at the straggler's pace would take 12 s.
  EXPECT_LT(took, kSlow * kSteps / 2) << "steps waited for the slow worker";
  EXPECT_LT(steps[kWorkers - 1].load(), steps[0].load());
  EXPECT_GT(workers[kWorkers - 1]->sync->stale_gradients(), 0)
      << "the straggler contributed " << steps[kWorkers - 1].load() << " gradients";
  std::printf("backup workers: %d steps in %.2fs; gradients per worker %d %d %d; stale %lld\n",
              kSteps, absl::ToDoubleSeconds(took), steps[0].load(), steps[1].load(), steps[2].load(),
              static_cast<long long>(workers[kWorkers - 1]->sync->stale_gradients()));
}

}  // namespace
}  // namespace dflow
