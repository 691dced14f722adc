#include "dflow/train/cluster_trainer.h"

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "dflow/distributed/rpc/local_cluster_test_util.h"
#include "dflow/train/batch_iterator.h"
#include "dflow/train/trainer_internal.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

using namespace train_internal;  // NOLINT

std::vector<std::vector<float>> Values(const std::vector<Tensor>& tensors) {
  std::vector<std::vector<float>> out;
  for (const Tensor& t : tensors) {
    auto f = t.flat<float>();
    out.emplace_back(f.begin(), f.end());
  }
  return out;
}

// The model's parameters as they are on the ps (one ps task), read through
// `target` by a graph declaring the same variables.
std::vector<std::vector<float>> ParametersOnPs(const TrainOptions& o, const std::string& target) {
  Scope root = Scope::NewRootScope();
  auto model = BuildModel(root.WithDevice("/job:ps/task:0"), o);
  EXPECT_TRUE(model.ok());
  std::vector<Output> reads;
  for (const Variable& v : model->variables) reads.push_back(v.value());
  ClientSession session(root, target);
  std::vector<Tensor> out;
  absl::Status s = session.Run(reads, &out);
  EXPECT_TRUE(s.ok()) << s;
  return Values(out);
}

// One process at batch `batch`, `steps` steps in the cluster trainer's data
// order (seeded global batches).
std::vector<std::vector<float>> OneProcess(const TrainOptions& o, int64_t batch, int steps) {
  auto data = LoadData(o);
  EXPECT_TRUE(data.ok());
  Scope root = Scope::NewRootScope();
  auto model = BuildModel(root, o);
  auto step = CreateGlobalStep(root);
  auto opt = *MakeOptimizer(o.optimizer, static_cast<float>(o.learning_rate));
  auto train = opt->Minimize(root, model->loss, model->variables, &*step);
  EXPECT_TRUE(train.ok());
  Operation init = GlobalVariablesInitializer(root);
  ClientSession session(root);
  EXPECT_TRUE(session.Run({}, {}, {init}, nullptr).ok());
  auto batches = BatchIterator::Create(*data->train, {.batch_size = batch,
                                                     .seed = static_cast<uint64_t>(o.seed),
                                                     .drop_remainder = true,
                                                     .num_epochs = 0});
  for (int i = 0; i < steps; ++i) {
    auto b = (*batches)->Next();
    EXPECT_TRUE(session
                    .Run({{model->features, b->features}, {model->labels, b->labels}}, {}, {*train},
                         nullptr)
                    .ok());
  }
  std::vector<Output> reads;
  for (const Variable& v : model->variables) reads.push_back(v.value());
  std::vector<Tensor> out;
  EXPECT_TRUE(session.Run(reads, &out).ok());
  return Values(out);
}

double WorstRelativeDifference(const std::vector<std::vector<float>>& a,
                               const std::vector<std::vector<float>>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t v = 0; v < a.size() && v < b.size(); ++v) {
    EXPECT_EQ(a[v].size(), b[v].size());
    for (size_t i = 0; i < a[v].size() && i < b[v].size(); ++i) {
      const double scale = std::max(1e-3, std::abs(static_cast<double>(b[v][i])));
      worst = std::max(worst, std::abs(a[v][i] - b[v][i]) / scale);
    }
  }
  return worst;
}

TrainOptions SmallRun(const std::string& mode, const std::string& cluster_json) {
  TrainOptions o;
  o.data = "synthetic";
  o.synthetic_examples = 512;
  o.optimizer = "sgd";
  o.learning_rate = 0.1;
  o.batch_size = 16;
  o.epochs = 1;
  o.max_steps = 5;
  o.mode = mode;
  o.cluster = cluster_json;
  o.job = "worker";
  o.task = 0;
  o.startup_timeout_seconds = 30;
  return o;
}

// In-graph sync: two towers (one per worker task) at batch b end with the
// parameters one process reaches at batch 2b; the variables live on the ps.
TEST(ClusterTrainerTest, InGraphSyncMatchesOneProcessAtDoubleBatch) {
  LocalCluster cluster({{"ps", 1}, {"worker", 2}}, /*cpus=*/1);
  TrainOptions o = SmallRun("in-graph-sync", cluster.spec().ToJson());
  o.session_target = cluster.target("worker", 0);
  std::ostringstream progress;
  auto metrics = TrainOnCluster(o, progress);
  ASSERT_TRUE(metrics.ok()) << metrics.status() << progress.str();
  EXPECT_EQ(metrics->steps, 5);
  EXPECT_EQ(metrics->local_steps, 5);
  std::vector<std::vector<float>> distributed = ParametersOnPs(o, o.session_target);
  std::vector<std::vector<float>> local = OneProcess(o, 2 * o.batch_size, 5);
  EXPECT_LE(WorstRelativeDifference(distributed, local), 1e-5);
  // Tower 0 alone (batch b) differs: the check sees the second tower.
  EXPECT_GT(WorstRelativeDifference(OneProcess(o, o.batch_size, 5), local), 1e-3);
}

// Two towers on one worker's two CPUs, between-graph with one worker: the
// averaged gradient equals one process at batch 2b.
TEST(ClusterTrainerTest, TowersInsideAWorkerMatchOneProcessAtDoubleBatch) {
  LocalCluster cluster({{"ps", 1}, {"worker", 1}}, /*cpus=*/2);
  TrainOptions o = SmallRun("between-async", cluster.spec().ToJson());
  o.towers = 2;
  o.session_target = cluster.target("worker", 0);
  std::ostringstream progress;
  auto metrics = TrainOnCluster(o, progress);
  ASSERT_TRUE(metrics.ok()) << metrics.status() << progress.str();
  EXPECT_EQ(metrics->steps, 5);
  EXPECT_LE(WorstRelativeDifference(ParametersOnPs(o, o.session_target),
                                    OneProcess(o, 2 * o.batch_size, 5)),
            1e-5);
}

TEST(ClusterTrainerTest, BadClusterFlagsNameWhatIsWrong) {
  LocalCluster cluster({{"ps", 1}, {"worker", 2}}, /*cpus=*/1);
  std::ostringstream progress;
  TrainOptions o = SmallRun("between-async", cluster.spec().ToJson());
  o.session_target = cluster.target("worker", 0);
  o.mode = "ring-allreduce";
  EXPECT_THAT(std::string(TrainOnCluster(o, progress).status().message()),
              ::testing::HasSubstr("--mode 'ring-allreduce'"));
  o.mode = "in-graph-sync";
  o.task = 1;
  EXPECT_THAT(std::string(TrainOnCluster(o, progress).status().message()),
              ::testing::HasSubstr("worker 0"));
  o.mode = "between-sync";
  o.task = 0;
  o.replicas_to_aggregate = 3;
  EXPECT_THAT(std::string(TrainOnCluster(o, progress).status().message()),
              ::testing::HasSubstr("--replicas-to-aggregate"));
  o.replicas_to_aggregate = 0;
  o.task = 5;
  EXPECT_THAT(std::string(TrainOnCluster(o, progress).status().message()),
              ::testing::HasSubstr("--task 5"));
}

}  // namespace
}  // namespace dflow
