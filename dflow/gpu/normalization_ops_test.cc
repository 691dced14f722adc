// The GPU normalization kernels against the CPU's on the same graphs and
// inputs: fused batch norm (forward and gradient, every version and data
// format; the two devices' halves of a training step exchanging reserve
// spaces) and LRN with its gradient. Skipped without a GPU.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dflow/gpu/gpu_test_util.h"

namespace dflow {
namespace gpu {
namespace {

constexpr double kRtol = 1e-5, kAtol = 1e-5;

struct Config {
  int version = 3;
  std::string format = "NHWC";
  bool is_training = true;
  float avg_factor = 1.0f;
  std::string what() const {
    return absl::StrCat("V", version, " ", format, is_training ? " training" : " inference",
                        " avg ", avg_factor);
  }
};

std::string Versioned(const std::string& base, int version) {
  return version == 1 ? base : absl::StrCat(base, "V", version);
}

void SetBatchNormAttrs(tensorflow::NodeDef* n, const Config& c) {
  if (c.version > 1) SetAttr(n, "U", DT_FLOAT);
  SetAttr(n, "epsilon", 0.001f);
  SetAttr(n, "data_format", c.format);
  SetAttr(n, "is_training", c.is_training);
}

// bn = FusedBatchNorm*(x, scale, offset, mean, variance), and its gradient
// "grad" for dy from its reserve spaces (the training step's pair).
tensorflow::GraphDef BatchNormGraph(const Config& c) {
  tensorflow::GraphDef g;
  for (const char* in : {"x", "scale", "offset", "mean", "variance", "dy"}) AddPlaceholder(&g, in);
  tensorflow::NodeDef* bn = AddNode(&g, "bn", Versioned("FusedBatchNorm", c.version),
                                    {"x", "scale", "offset", "mean", "variance"});
  SetBatchNormAttrs(bn, c);
  SetAttr(bn, "exponential_avg_factor", c.avg_factor);
  std::vector<std::string> grad_in = {"dy", "x", "scale", "bn:3", "bn:4"};
  if (c.version == 3) grad_in.push_back("bn:5");
  SetBatchNormAttrs(AddNode(&g, "grad", Versioned("FusedBatchNormGrad", c.version), grad_in), c);
  return g;
}

// Inputs for x of `shape`: x away from zero (a variance that the mean's
// square would swamp in one pass), running statistics of the channels.
Feeds BatchNormFeeds(const TensorShape& shape, const Config& c, int seed) {
  const int64_t channels =
      c.format[1] == 'C' ? shape.dim_size(1) : shape.dim_size(shape.dims() - 1);
  const bool stats_read = !c.is_training || c.avg_factor != 1.0f;
  const TensorShape stats({stats_read ? channels : 0});
  return {{"x", RandomTensor(shape, seed, 4, 6)},
          {"scale", RandomTensor(TensorShape({channels}), seed + 1, 0.5, 2)},
          {"offset", RandomTensor(TensorShape({channels}), seed + 2)},
          {"mean", RandomTensor(stats, seed + 3, 4, 6)},
          {"variance", RandomTensor(stats, seed + 4, 0.1, 1)},
          {"dy", RandomTensor(shape, seed + 5)}};
}

const std::vector<std::string> kFetches = {"bn:0", "bn:1", "bn:2", "bn:3", "bn:4",
                                           "grad:0", "grad:1", "grad:2"};

// 4-D and 5-D, channels last and first; small and large enough to split
// each channel's sum across many blocks; one value per channel; an empty
// batch (NaN statistics, as the CPU's).
TEST(GpuBatchNormTest, ForwardAndGradientMatchTheCpu) {
  DFLOW_SKIP_WITHOUT_GPU();
  struct Case {
    std::string format;
    TensorShape shape;
  };
  const std::vector<Case> cases = {
      {"NHWC", TensorShape({2, 3, 4, 5})},       {"NHWC", TensorShape({64, 14, 14, 32})},
      {"NHWC", TensorShape({8, 7, 7, 100})},     {"NCHW", TensorShape({2, 5, 3, 4})},
      {"NCHW", TensorShape({16, 8, 28, 28})},    {"NDHWC", TensorShape({2, 3, 4, 5, 6})},
      {"NCDHW", TensorShape({2, 3, 4, 5, 6})},   {"NHWC", TensorShape({1, 1, 1, 3})},
      {"NHWC", TensorShape({0, 2, 2, 3})},       {"NCHW", TensorShape({3, 2, 0, 4})},
  };
  int seed = 1;
  for (const Case& k : cases) {
    for (const Config& base : {Config{3, k.format, true, 1.0f}, Config{3, k.format, true, 0.3f},
                               Config{3, k.format, false, 1.0f}}) {
      Config c = base;
      const std::string what = c.what() + " " + k.shape.DebugString();
      CompareGpuCpu(BatchNormGraph(c), BatchNormFeeds(k.shape, c, seed), kFetches, kRtol, kAtol,
                    what);
      seed += 10;
    }
  }
}

TEST(GpuBatchNormTest, EveryVersionMatchesTheCpu) {
  DFLOW_SKIP_WITHOUT_GPU();
  for (int version = 1; version <= 3; ++version) {
    for (const std::string format : {"NHWC", "NCHW"}) {
      const Config c{version, format, true, 1.0f};
      CompareGpuCpu(BatchNormGraph(c), BatchNormFeeds(TensorShape({4, 6, 6, 8}), c, version),
                    kFetches, kRtol, kAtol, c.what());
    }
  }
}

// The forward op on one device and its gradient on the other read each
// other's reserve spaces: the values equal those of one device.
TEST(GpuBatchNormTest, ReserveSpacesCrossBetweenDevices) {
  DFLOW_SKIP_WITHOUT_GPU();
  const Config c;
  const Feeds feeds = BatchNormFeeds(TensorShape({8, 5, 5, 16}), c, 3);
  absl::StatusOr<std::vector<Tensor>> cpu =
      RunPinned(BatchNormGraph(c), "/device:CPU:0", feeds, kFetches);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  for (const std::string forward : {"/device:GPU:0", "/device:CPU:0"}) {
    tensorflow::GraphDef g = BatchNormGraph(c);
    for (tensorflow::NodeDef& n : *g.mutable_node()) {
      if (n.name() == "bn") n.set_device(forward);
    }
    const std::string gradient = forward == "/device:CPU:0" ? "/device:GPU:0" : "/device:CPU:0";
    absl::StatusOr<std::vector<Tensor>> mixed = RunPinned(g, gradient, feeds, kFetches);
    ASSERT_TRUE(mixed.ok()) << mixed.status();
    for (size_t i = 0; i < kFetches.size(); ++i) {
      ExpectSame((*mixed)[i], (*cpu)[i], kRtol, kAtol, "forward on " + forward + " " + kFetches[i]);
    }
  }
}

TEST(GpuBatchNormTest, BadShapesFailAsOnTheCpu) {
  DFLOW_SKIP_WITHOUT_GPU();
  const Config c;
  Feeds feeds = BatchNormFeeds(TensorShape({2, 3, 3, 4}), c, 1);
  feeds[1].second = RandomTensor(TensorShape({3}), 9);  // scale: 3 values for 4 channels.
  for (const std::string device : {"/device:GPU:0", "/device:CPU:0"}) {
    for (const std::string fetch : {"bn:0", "grad:0"}) {
      absl::Status s = RunPinned(BatchNormGraph(c), device, feeds, {fetch}).status();
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << device << ": " << s;
      EXPECT_TRUE(absl::StrContains(s.message(), "scale must be a vector of 4 values")) << s;
    }
  }
  feeds = BatchNormFeeds(TensorShape({2, 3, 4}), c, 1);
  absl::Status s = RunPinned(BatchNormGraph(c), "/device:GPU:0", feeds, {"bn:0"}).status();
  EXPECT_TRUE(absl::StrContains(s.message(), "input must be 4-dimensional or 5-dimensional")) << s;
}

// lrn = LRN(x) with the given attrs, and grad = LRNGrad(dy, x, lrn).
tensorflow::GraphDef LrnGraph(int64_t radius, float bias, float alpha, float beta) {
  tensorflow::GraphDef g;
  AddPlaceholder(&g, "x");
  AddPlaceholder(&g, "dy");
  for (tensorflow::NodeDef* n : {AddNode(&g, "lrn", "LRN", {"x"}),
                                 AddNode(&g, "grad", "LRNGrad", {"dy", "x", "lrn"})}) {
    SetAttr(n, "depth_radius", radius);
    SetAttr(n, "bias", bias);
    SetAttr(n, "alpha", alpha);
    SetAttr(n, "beta", beta);
  }
  return g;
}

// CIFAR-10's parameters and the op's defaults, a radius of 0 and one past
// the channels, one channel, and no elements.
TEST(GpuLrnTest, LrnAndItsGradientMatchTheCpu) {
  DFLOW_SKIP_WITHOUT_GPU();
  struct Case {
    int64_t radius;
    float bias, alpha, beta;
    TensorShape shape;
  };
  const std::vector<Case> cases = {
      {4, 1.0f, 0.001f / 9, 0.75f, TensorShape({8, 12, 12, 64})},
      {5, 1.0f, 1.0f, 0.5f, TensorShape({2, 5, 5, 16})},
      {0, 2.0f, 0.5f, 0.75f, TensorShape({2, 3, 3, 7})},
      {100, 1.0f, 0.1f, 0.6f, TensorShape({3, 2, 2, 8})},
      {2, 1.0f, 0.2f, 0.75f, TensorShape({4, 3, 3, 1})},
      {2, 1.0f, 0.2f, 0.75f, TensorShape({0, 3, 3, 5})},
  };
  int seed = 1;
  for (const Case& c : cases) {
    const Feeds feeds = {{"x", RandomTensor(c.shape, seed, -2, 2)},
                         {"dy", RandomTensor(c.shape, seed + 1)}};
    seed += 2;
    CompareGpuCpu(LrnGraph(c.radius, c.bias, c.alpha, c.beta), feeds, {"lrn", "grad"}, kRtol,
                  kAtol, absl::StrCat("radius ", c.radius, " ", c.shape.DebugString()));
  }
}

TEST(GpuLrnTest, BadShapesFailAsOnTheCpu) {
  DFLOW_SKIP_WITHOUT_GPU();
  const tensorflow::GraphDef g = LrnGraph(2, 1, 1, 0.5);
  const Tensor x = RandomTensor(TensorShape({2, 3, 4}), 1);
  for (const std::string device : {"/device:GPU:0", "/device:CPU:0"}) {
    absl::Status s = RunPinned(g, device, {{"x", x}, {"dy", x}}, {"lrn"}).status();
    EXPECT_TRUE(absl::StrContains(s.message(), "input must be 4-dimensional, got [2,3,4]")) << s;
    tensorflow::GraphDef grad_only;
    AddPlaceholder(&grad_only, "dy");
    AddPlaceholder(&grad_only, "x");
    AddPlaceholder(&grad_only, "y");
    SetAttr(AddNode(&grad_only, "grad", "LRNGrad", {"dy", "x", "y"}), "depth_radius", int64_t{2});
    const Tensor image = RandomTensor(TensorShape({1, 2, 2, 3}), 2);
    s = RunPinned(grad_only, device,
                  {{"dy", image}, {"x", image}, {"y", RandomTensor(TensorShape({1, 2, 2, 4}), 3)}},
                  {"grad"})
            .status();
    EXPECT_TRUE(absl::StrContains(s.message(), "must have the same shape")) << device << ": " << s;
  }
}

}  // namespace
}  // namespace gpu
}  // namespace dflow
