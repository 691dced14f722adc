// Tests for the models and the training loop behind `dflow train`.
#include "dflow/train/trainer.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "dflow/client/scope.h"
#include "dflow/client/client_session.h"
#include "dflow/train/models.h"
#include "dflow/train/trainer_internal.h"
#include "dflow/train/variables.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace dflow {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

TrainOptions Synthetic(const std::string& model, int64_t examples, int64_t batch_size) {
  TrainOptions o;
  o.model = model;
  o.data = "synthetic";
  o.synthetic_examples = examples;
  o.batch_size = batch_size;
  o.epochs = 1;
  o.seed = 3;
  return o;
}

TEST(TrainerModels, MlpHasThreeLayersOfVariables) {
  Scope root = Scope::NewRootScope();
  absl::StatusOr<Model> m = BuildMlp(root);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->variables.size(), 6);
  EXPECT_EQ(m->variables[0].shape(), TensorShape({784, 256}));
  EXPECT_EQ(m->variables[3].shape(), TensorShape({256}));
  EXPECT_EQ(m->variables[4].shape(), TensorShape({256, 10}));
  EXPECT_TRUE(m->variables[0].is_resource());
}

TEST(TrainerModels, CnnNeedsImagesOf784Pixels) {
  Scope root = Scope::NewRootScope();
  absl::StatusOr<Model> m = BuildCnn(root, {.input_dim = 100});
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(m.status().message(), AllOf(HasSubstr("BuildCnn"), HasSubstr("100")));
  Scope ok = Scope::NewRootScope();
  absl::StatusOr<Model> cnn = BuildCnn(ok);
  ASSERT_TRUE(cnn.ok()) << cnn.status();
  ASSERT_EQ(cnn->variables.size(), 8);
  EXPECT_EQ(cnn->variables[0].shape(), TensorShape({3, 3, 1, 16}));
  EXPECT_EQ(cnn->variables[4].shape(), TensorShape({7 * 7 * 32, 128}));
}

TEST(TrainerTrain, MlpLearnsSyntheticData) {
  TrainOptions o = Synthetic("mlp", 4096, 32);  // 128 steps per epoch
  o.epochs = 2;
  std::ostringstream progress;
  absl::StatusOr<TrainMetrics> m = Train(o, progress);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->steps, 256);
  EXPECT_GE(m->test_accuracy, 0.95);
  EXPECT_LT(m->final_loss, 0.5);
  EXPECT_GT(m->examples_per_sec, 0);
}

// A run stopped at step 40 and resumed from its checkpoint ends exactly
// where an uninterrupted run does: the variables, the optimizer's slots and
// the global step are restored, and the input goes on with the batches not
// trained on yet.
class TrainerResume : public ::testing::TestWithParam<std::string> {};

// With each learning-rate schedule (cosine decay reads the global step).
TEST_P(TrainerResume, ResumingFromACheckpointEqualsAnUninterruptedRun) {
  // Per schedule: ctest runs the two at once.
  const std::string dir = ::testing::TempDir() + "/dflow_resume_test_" + GetParam();
  std::filesystem::remove_all(dir);
  TrainOptions o = Synthetic("mlp", 2048, 32);  // 64 steps
  o.learning_rate_decay = GetParam();
  std::ostringstream progress;
  absl::StatusOr<TrainMetrics> straight = Train(o, progress);
  ASSERT_TRUE(straight.ok()) << straight.status();

  o.checkpoint_dir = dir;
  o.save_checkpoint_steps = 25;
  o.keep_checkpoints = 2;
  o.max_steps = 40;
  absl::StatusOr<TrainMetrics> first = Train(o, progress);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->steps, 40);
  EXPECT_EQ(first->start_step, 0);
  EXPECT_TRUE(first->restored_from.empty());
  // Saved at 0 (the start), 25 and 40 (the end); the two newest are kept.
  EXPECT_FALSE(std::filesystem::exists(dir + "/model.ckpt-0.index"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/model.ckpt-25.index"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/model.ckpt-40.index"));

  o.max_steps = 0;
  absl::StatusOr<TrainMetrics> resumed = Train(o, progress);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed->restored_from, dir + "/model.ckpt-40");
  EXPECT_EQ(resumed->start_step, 40);
  EXPECT_EQ(resumed->steps, 64);
  EXPECT_EQ(resumed->test_accuracy, straight->test_accuracy);
  EXPECT_THAT(progress.str(), HasSubstr("restored " + dir + "/model.ckpt-40 (global step 40)"));

  // A run whose checkpoint is already at the last step trains nothing more.
  absl::StatusOr<TrainMetrics> done = Train(o, progress);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->start_step, 64);
  EXPECT_EQ(done->steps, 64);
  EXPECT_EQ(done->test_accuracy, straight->test_accuracy);
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Decays, TrainerResume, ::testing::Values("none", "cosine"));

TEST(TrainerLearningRate, CosineDecayIsTensorFlows) {
  Scope root = Scope::NewRootScope();
  absl::StatusOr<Variable> step = CreateGlobalStep(root);
  ASSERT_TRUE(step.ok()) << step.status();
  TrainOptions o;
  o.learning_rate_decay = "cosine";
  Output lr = train_internal::LearningRate(root, o, 0.1, *step, 100).output();
  ClientSession session(root);
  // tf.compat.v1.train.cosine_decay(0.1, step, 100) at these steps, TensorFlow 2.21.
  const std::vector<std::pair<int64_t, float>> expected = {
      {0, 0.1f}, {25, 0.08535534f}, {50, 0.05f}, {99, 2.4673343e-05f}, {100, 0}, {150, 0}};
  for (const auto& [at, want] : expected) {
    std::vector<Tensor> out;
    ASSERT_TRUE(session.Run({{step->value(), Tensor::Scalar<int64_t>(at)}}, {lr}, &out).ok());
    EXPECT_NEAR(out[0].scalar<float>(), want, 1e-7) << "step " << at;
  }

  o.learning_rate_decay = "none";
  EXPECT_EQ(train_internal::LearningRate(root, o, 0.1, *step, 100).tensor().scalar<float>(), 0.1f);
  o = TrainOptions();
  o.learning_rate_decay = "linear";
  std::ostringstream progress;
  EXPECT_THAT(Train(o, progress).status().message(),
              AllOf(HasSubstr("linear"), HasSubstr("none, cosine")));
}

TEST(TrainerTrain, CnnLearnsSyntheticData) {
  std::ostringstream progress;
  absl::StatusOr<TrainMetrics> m = Train(Synthetic("cnn", 1024, 16), progress);  // 64 steps
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->steps, 64);
  EXPECT_GE(m->test_accuracy, 0.9);
}

TEST(TrainerTrain, EveryOptimizerLearns) {
  for (const std::string& opt : TrainOptimizers()) {
    TrainOptions o = Synthetic("mlp", 1024, 16);
    o.optimizer = opt;
    std::ostringstream progress;
    absl::StatusOr<TrainMetrics> m = Train(o, progress);
    ASSERT_TRUE(m.ok()) << opt << ": " << m.status();
    EXPECT_GE(m->test_accuracy, 0.9) << opt;
    EXPECT_GT(m->learning_rate, 0) << opt;
  }
}

TEST(TrainerTrain, SameSeedSameResult) {
  std::ostringstream progress;
  absl::StatusOr<TrainMetrics> a = Train(Synthetic("mlp", 512, 32), progress);
  absl::StatusOr<TrainMetrics> b = Train(Synthetic("mlp", 512, 32), progress);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->final_loss, b->final_loss);
  EXPECT_EQ(a->test_accuracy, b->test_accuracy);
}

TEST(TrainerTrain, PrintsProgressLines) {
  TrainOptions o = Synthetic("mlp", 640, 32);  // 20 steps
  o.log_every = 10;
  std::ostringstream progress;
  ASSERT_TRUE(Train(o, progress).ok());
  const std::string text = progress.str();
  EXPECT_THAT(text, AllOf(HasSubstr("step 10/20  epoch 1/1  loss "), HasSubstr("step 20/20"),
                          HasSubstr("examples/s"), HasSubstr("ETA")));
  EXPECT_EQ(text.find('\r'), std::string::npos);
  o.tty = true;
  std::ostringstream live;
  ASSERT_TRUE(Train(o, live).ok());
  EXPECT_THAT(live.str(), AllOf(HasSubstr("\rstep 20/20"), HasSubstr("\n")));
}

TEST(TrainerTrain, WritesMetricsFile) {
  TrainOptions o = Synthetic("mlp", 256, 32);
  o.metrics_out = (std::filesystem::path(::testing::TempDir()) / "trainer_metrics.json").string();
  std::ostringstream progress;
  absl::StatusOr<TrainMetrics> m = Train(o, progress);
  ASSERT_TRUE(m.ok()) << m.status();
  std::ifstream file(o.metrics_out);
  ASSERT_TRUE(file.good());
  nlohmann::json j = nlohmann::json::parse(file, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded());
  for (const char* key : {"test_accuracy", "examples_per_sec", "steps", "final_loss",
                          "wall_seconds", "model", "optimizer", "batch_size", "epochs"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["steps"], 8);
  EXPECT_EQ(j["model"], "mlp");
  EXPECT_EQ(j["batch_size"], 32);
  EXPECT_NEAR(j["test_accuracy"].get<double>(), m->test_accuracy, 1e-4);
}

TEST(TrainerTrain, MetricsFileThatCannotBeWritten) {
  TrainOptions o = Synthetic("mlp", 64, 32);
  o.metrics_out = "/nonexistent-dir/metrics.json";
  std::ostringstream progress;
  absl::StatusOr<TrainMetrics> m = Train(o, progress);
  EXPECT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("/nonexistent-dir/metrics.json"));
}

TEST(TrainerOptions, BadValuesSayWhatIsAllowed) {
  std::ostringstream progress;
  TrainOptions o;
  o.model = "resnet";
  absl::StatusOr<TrainMetrics> m = Train(o, progress);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(m.status().message(), AllOf(HasSubstr("resnet"), HasSubstr("mlp, cnn")));

  o = TrainOptions();
  o.optimizer = "lbfgs";
  m = Train(o, progress);
  EXPECT_THAT(m.status().message(),
              AllOf(HasSubstr("lbfgs"), HasSubstr("sgd, momentum, adam, adagrad, rmsprop")));

  absl::StatusOr<std::unique_ptr<Optimizer>> unknown =
      train_internal::MakeOptimizer("lbfgs", Tensor::Scalar(0.1f));
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown.status().message(), HasSubstr("'lbfgs' is not one of: sgd, momentum"));
  for (const std::string& name : TrainOptimizers()) {
    EXPECT_TRUE(train_internal::MakeOptimizer(name, Tensor::Scalar(0.1f)).ok()) << name;
    EXPECT_GT(train_internal::DefaultLearningRate(name), 0) << name;
  }

  o = TrainOptions();
  o.data = "cifar";
  m = Train(o, progress);
  EXPECT_THAT(m.status().message(), HasSubstr("fashion-mnist, synthetic"));

  o = TrainOptions();
  o.epochs = 0;
  EXPECT_THAT(Train(o, progress).status().message(), HasSubstr("--epochs must be >= 1, got 0"));
  o = TrainOptions();
  o.batch_size = -5;
  EXPECT_THAT(Train(o, progress).status().message(), HasSubstr("--batch-size must be >= 1, got -5"));
  // Towers are a cluster worker's; a single process does not drop the flag.
  o = TrainOptions();
  o.towers = 2;
  m = Train(o, progress);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(m.status().message(),
              AllOf(HasSubstr("--towers 2 needs --cluster"),
                    HasSubstr("dflow cluster --ps 1 --workers 1 -- --towers 2")));
}

TEST(TrainerOptions, MissingDatasetSaysWhatToInstall) {
  TrainOptions o;
  o.data_dir = "/nonexistent-fashion-mnist";
  std::ostringstream progress;
  absl::StatusOr<TrainMetrics> m = Train(o, progress);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(m.status().message(), HasSubstr("dataset-fashion-mnist"));
}

}  // namespace
}  // namespace dflow
