// Trains an MLP 784-256-256-10 on Fashion-MNIST for 50 steps with dflow and
// checks every step's loss, and the final parameters, against the trajectory
// real TensorFlow followed from the same initial weights and batch order
// (tests/data/gen_mlp_trajectory.py wrote tests/data/mlp_trajectory/ and
// documents its files). The model is built here from the client API alone.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "dflow/client/client_session.h"
#include "dflow/client/ops.h"
#include "dflow/framework/test_data_dir.h"
#include "dflow/train/dataset.h"
#include "dflow/train/optimizer.h"
#include "dflow/train/variables.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace dflow {
namespace {

constexpr int kSteps = 50;
constexpr int kBatch = 64;
constexpr double kRelTol = 1e-4;
const std::string kDir = TestDataDir() + "/mlp_trajectory/";

struct ParamSpec {
  const char* name;
  std::vector<int64_t> dims;
};
// The order of the parameters in init_weights.bin.
const std::vector<ParamSpec> kParams = {{"w1", {784, 256}}, {"b1", {256}},     {"w2", {256, 256}},
                                        {"b2", {256}},      {"w3", {256, 10}}, {"b3", {10}}};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The little-endian 32-bit word at `bytes[4 * i]`.
uint32_t Word(const std::string& bytes, size_t i) {
  uint32_t w = 0;
  for (int b = 3; b >= 0; --b) w = (w << 8) | static_cast<uint8_t>(bytes[4 * i + b]);
  return w;
}

// The initial parameters, in kParams order.
std::vector<Tensor> LoadInitialWeights() {
  const std::string bytes = ReadFile(kDir + "init_weights.bin");
  std::vector<Tensor> params;
  size_t pos = 0;
  for (const ParamSpec& p : kParams) {
    Tensor t(DT_FLOAT, TensorShape(p.dims));
    for (float& v : t.flat<float>()) {
      if (4 * (pos + 1) > bytes.size()) return {};
      uint32_t w = Word(bytes, pos++);
      std::memcpy(&v, &w, sizeof(v));
    }
    params.push_back(std::move(t));
  }
  return pos * 4 == bytes.size() ? params : std::vector<Tensor>{};
}

// kSteps batches of kBatch indices into the train split.
std::vector<std::vector<int64_t>> LoadBatchOrder() {
  const std::string bytes = ReadFile(kDir + "batch_order.bin");
  if (bytes.size() != 4u * kSteps * kBatch) return {};
  std::vector<std::vector<int64_t>> batches(kSteps);
  for (size_t i = 0; i < kSteps * kBatch; ++i) {
    batches[i / kBatch].push_back(static_cast<int32_t>(Word(bytes, i)));
  }
  return batches;
}

struct Mlp {
  Output x, y, loss;
  std::vector<Variable> params;
};

// relu(x w1 + b1) -> relu(. w2 + b2) -> . w3 + b3 -> mean sparse softmax
// cross-entropy, with variables initialised to `init`.
Mlp BuildMlp(const Scope& root, const std::vector<Tensor>& init) {
  Mlp m;
  m.x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, {PartialShape({-1, 784})});
  m.y = ops::Placeholder(root.WithOpName("y"), DT_INT32, {PartialShape({-1})});
  for (size_t i = 0; i < kParams.size(); ++i) {
    absl::StatusOr<Variable> v = MakeVariable(root, kParams[i].name, init[i]);
    if (!v.ok()) return m;
    m.params.push_back(*v);
  }
  Output h = m.x;
  for (size_t layer = 0; layer < 3; ++layer) {
    const Variable& w = m.params[2 * layer];
    const Variable& b = m.params[2 * layer + 1];
    h = ops::BiasAdd(root, ops::MatMul(root, h, w.value()), b.value());
    if (layer < 2) h = ops::Relu(root, h);
  }
  Output xent = ops::SparseSoftmaxCrossEntropyWithLogits(root, h, m.y).loss;
  m.loss = ops::Mean(root.WithOpName("loss"), xent, {0});
  return m;
}

double RelErr(double got, double want) { return std::abs(got - want) / std::abs(want); }

// Trains with `optimizer` and compares with TensorFlow's trajectory `name`
// ("sgd" or "adam") in trajectory.json.
void CheckTrajectory(const std::string& name, Optimizer& optimizer) {
  absl::StatusOr<Dataset> train = LoadFashionMnist(kFashionMnistDir, "train");
  if (!train.ok()) {
    GTEST_SKIP() << "Fashion-MNIST unavailable (" << train.status()
                 << "); install Debian's dataset-fashion-mnist";
  }
  const std::vector<Tensor> init = LoadInitialWeights();
  const std::vector<std::vector<int64_t>> order = LoadBatchOrder();
  ASSERT_EQ(init.size(), kParams.size()) << "bad " << kDir << "init_weights.bin";
  ASSERT_EQ(order.size(), size_t{kSteps}) << "bad " << kDir << "batch_order.bin";
  const nlohmann::json golden =
      nlohmann::json::parse(ReadFile(kDir + "trajectory.json"), nullptr, false)[name];
  ASSERT_TRUE(golden.is_object()) << "bad " << kDir << "trajectory.json";
  const std::vector<double> want_losses = golden["losses"].get<std::vector<double>>();
  ASSERT_EQ(want_losses.size(), size_t{kSteps});

  Scope root = Scope::NewRootScope();
  Mlp mlp = BuildMlp(root, init);
  absl::StatusOr<Operation> train_op = optimizer.Minimize(root, mlp.loss, mlp.params);
  ASSERT_TRUE(train_op.ok()) << train_op.status();
  Operation init_op = GlobalVariablesInitializer(root);
  ASSERT_TRUE(root.ok()) << root.status();
  ClientSession session(root);
  std::vector<Tensor> out;
  ASSERT_TRUE(session.Run({}, {}, {init_op}, &out).ok());

  double max_err = 0;
  for (int step = 0; step < kSteps; ++step) {
    Tensor x, y;
    train->Gather(order[step], &x, &y);
    absl::Status s = session.Run({{mlp.x, x}, {mlp.y, y}}, {mlp.loss}, {*train_op}, &out);
    ASSERT_TRUE(s.ok()) << "step " << step << ": " << s;
    const double err = RelErr(out[0].scalar<float>(), want_losses[step]);
    max_err = std::max(max_err, err);
    EXPECT_LE(err, kRelTol) << name << " step " << step << ": loss " << out[0].scalar<float>()
                            << ", TensorFlow " << want_losses[step];
  }
  std::cout << name << ": max relative loss error over " << kSteps << " steps " << max_err << "\n";

  for (const Variable& v : mlp.params) {
    ASSERT_TRUE(session.Run({v.value()}, &out).ok());
    double sum = 0, sum_sq = 0;
    for (float f : out[0].flat<float>()) {
      sum += f;
      sum_sq += static_cast<double>(f) * f;
    }
    const std::vector<double> want = golden["final"][v.name()].get<std::vector<double>>();
    ASSERT_EQ(want.size(), 2u) << v.name();
    std::cout << name << " " << v.name() << ": relative error of sum " << RelErr(sum, want[0])
              << ", of sum of squares " << RelErr(sum_sq, want[1]) << "\n";
    EXPECT_LE(RelErr(sum, want[0]), kRelTol) << v.name() << " sum " << sum << " vs " << want[0];
    EXPECT_LE(RelErr(sum_sq, want[1]), kRelTol)
        << v.name() << " sum of squares " << sum_sq << " vs " << want[1];
  }
}

TEST(TrajectoryTest, GradientDescentFollowsTensorFlow) {
  GradientDescentOptimizer sgd(0.1f);
  CheckTrajectory("sgd", sgd);
}

TEST(TrajectoryTest, AdamFollowsTensorFlow) {
  AdamOptimizer adam({.learning_rate = 1e-3f});
  CheckTrajectory("adam", adam);
}

}  // namespace
}  // namespace dflow
