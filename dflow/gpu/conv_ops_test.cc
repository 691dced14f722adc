// GPU convolution and pooling against the CPU's: Conv2D and both of its
// gradients over SAME/VALID, strides 1 and 2, 3x3 and 5x5 filters, batches
// 1 and 7, channels 1/3/32; MaxPool, MaxPoolGrad, AvgPool and AvgPoolGrad
// likewise; error cases.
#include <cmath>

#include "absl/strings/match.h"
#include "dflow/gpu/gpu_test_util.h"

namespace dflow {
namespace gpu {
namespace {


constexpr char kGpu[] = "/device:GPU:0";
constexpr char kCpu[] = "/device:CPU:0";

struct ConvCase {
  std::string padding;
  int stride, k, batch, in_depth, out_depth;
  int rows = 12, cols = 13;  // 12 rows with stride 2 pad SAME asymmetrically.
};

std::string Describe(const ConvCase& c) {
  return absl::StrCat(c.padding, " stride ", c.stride, " ", c.k, "x", c.k, " batch ", c.batch,
                      " depth ", c.in_depth, "->", c.out_depth, " image ", c.rows, "x", c.cols);
}

void SetConvAttrs(tensorflow::NodeDef* n, const ConvCase& c) {
  SetAttr(n, "T", DT_FLOAT);
  SetAttr(n, "strides", std::vector<int64_t>{1, c.stride, c.stride, 1});
  SetAttr(n, "padding", c.padding);
}

// y = Conv2D(x, w); dx = Conv2DBackpropInput(x's shape, w, dy);
// dw = Conv2DBackpropFilter(x, w's shape, dy).
tensorflow::GraphDef ConvGraph(const ConvCase& c) {
  tensorflow::GraphDef g;
  AddPlaceholder(&g, "x");
  AddPlaceholder(&g, "w");
  AddPlaceholder(&g, "dy");
  AddHostConst(&g, "x_shape", Tensor::Vec<int32_t>({c.batch, c.rows, c.cols, c.in_depth}));
  AddHostConst(&g, "w_shape", Tensor::Vec<int32_t>({c.k, c.k, c.in_depth, c.out_depth}));
  SetConvAttrs(Node(&g, "y", "Conv2D", {"x", "w"}), c);
  SetConvAttrs(Node(&g, "dx", "Conv2DBackpropInput", {"x_shape", "w", "dy"}), c);
  SetConvAttrs(Node(&g, "dw", "Conv2DBackpropFilter", {"x", "w_shape", "dy"}), c);
  return g;
}

int64_t OutSize(const ConvCase& c, int64_t in) {
  return c.padding == "SAME" ? (in + c.stride - 1) / c.stride : (in - c.k + c.stride) / c.stride;
}

absl::StatusOr<std::vector<Tensor>> RunConv(const ConvCase& c, const std::string& device) {
  const TensorShape x({c.batch, c.rows, c.cols, c.in_depth});
  const TensorShape w({c.k, c.k, c.in_depth, c.out_depth});
  const TensorShape y({c.batch, OutSize(c, c.rows), OutSize(c, c.cols), c.out_depth});
  DeviceSession s(ConvGraph(c), device);
  return s.Run({{"x", RandomTensor(x, 1)}, {"w", RandomTensor(w, 2)}, {"dy", RandomTensor(y, 3)}},
               {"y", "dx", "dw"});
}

// A sum of n products of numbers in [-1, 1]: float rounding grows with n,
// more so for cuDNN's FFT and Winograd algorithms.
float SumTolerance(int64_t n) { return 1e-5f + 1e-6f * static_cast<float>(n); }

TEST(GpuConvTest, ConvolutionAndGradientsMatchTheCpu) {
  DFLOW_SKIP_WITHOUT_GPU();
  const std::vector<std::pair<int, int>> depths = {{1, 1}, {3, 32}, {32, 3}};
  for (const char* padding : {"SAME", "VALID"}) {
    for (int stride : {1, 2}) {
      for (int k : {3, 5}) {
        for (int batch : {1, 7}) {
          for (auto [in_depth, out_depth] : depths) {
            const ConvCase c{padding, stride, k, batch, in_depth, out_depth};
            const std::string what = Describe(c);
            auto gpu = RunConv(c, kGpu);
            auto cpu = RunConv(c, kCpu);
            ASSERT_TRUE(gpu.ok()) << what << ": " << gpu.status();
            ASSERT_TRUE(cpu.ok()) << what << ": " << cpu.status();
            const int64_t out_pixels = batch * OutSize(c, c.rows) * OutSize(c, c.cols);
            ExpectSame((*gpu)[0], (*cpu)[0], 1e-4f, SumTolerance(k * k * in_depth), what + " y");
            ExpectSame((*gpu)[1], (*cpu)[1], 1e-4f, SumTolerance(k * k * out_depth), what + " dx");
            ExpectSame((*gpu)[2], (*cpu)[2], 1e-4f, SumTolerance(out_pixels), what + " dw");
          }
        }
      }
    }
  }
}

TEST(GpuConvTest, OddImagesAndEmptyBatches) {
  DFLOW_SKIP_WITHOUT_GPU();
  for (ConvCase c : {ConvCase{"SAME", 2, 3, 2, 3, 5, 7, 1}, ConvCase{"SAME", 2, 5, 1, 2, 2, 4, 9},
                     ConvCase{"VALID", 2, 3, 3, 4, 4, 8, 6}, ConvCase{"SAME", 1, 3, 0, 3, 4},
                     ConvCase{"VALID", 1, 5, 2, 3, 4, 5, 5}}) {
    const std::string what = Describe(c);
    auto gpu = RunConv(c, kGpu);
    auto cpu = RunConv(c, kCpu);
    ASSERT_TRUE(gpu.ok()) << what << ": " << gpu.status();
    ASSERT_TRUE(cpu.ok()) << what << ": " << cpu.status();
    for (int i = 0; i < 3; ++i) {
      ExpectSame((*gpu)[i], (*cpu)[i], 1e-4f, SumTolerance(1000), absl::StrCat(what, " ", i));
    }
  }
}

TEST(GpuConvTest, BadShapesAreInvalidArguments) {
  DFLOW_SKIP_WITHOUT_GPU();
  const ConvCase c{"SAME", 1, 3, 1, 2, 2};
  DeviceSession s(ConvGraph(c), kGpu);
  ASSERT_TRUE(s.create_status().ok()) << s.create_status();
  // Depth 3 does not match the filter's 2.
  auto depth = s.Run({{"x", RandomTensor(TensorShape({1, 12, 13, 3}), 1)},
                      {"w", RandomTensor(TensorShape({3, 3, 2, 2}), 2)}},
                     {"y"});
  ASSERT_FALSE(depth.ok());
  EXPECT_EQ(depth.status().code(), absl::StatusCode::kInvalidArgument) << depth.status();
  auto rank = s.Run({{"x", RandomTensor(TensorShape({12, 13, 2}), 1)},
                     {"w", RandomTensor(TensorShape({3, 3, 2, 2}), 2)}},
                    {"y"});
  ASSERT_FALSE(rank.ok());
  EXPECT_TRUE(absl::StrContains(rank.status().message(), "4-dimensional")) << rank.status();
  auto dy = s.Run({{"w", RandomTensor(TensorShape({3, 3, 2, 2}), 2)},
                   {"dy", RandomTensor(TensorShape({1, 5, 5, 2}), 3)}},
                  {"dx"});
  ASSERT_FALSE(dy.ok());
  EXPECT_TRUE(absl::StrContains(dy.status().message(), "does not match the convolution's output"))
      << dy.status();
}

// --- max pooling ------------------------------------------------------------------------

struct PoolCase {
  std::string padding;
  int window, stride, batch, depth;
  int rows = 11, cols = 12;
};

tensorflow::GraphDef PoolGraph(const PoolCase& c) {
  tensorflow::GraphDef g;
  AddPlaceholder(&g, "x");
  AddPlaceholder(&g, "dy");
  for (const char* name : {"y", "dx"}) {
    tensorflow::NodeDef* n = std::string(name) == "y" ? Node(&g, "y", "MaxPool", {"x"})
                                                      : Node(&g, "dx", "MaxPoolGrad", {"x", "y", "dy"});
    SetAttr(n, "T", DT_FLOAT);
    SetAttr(n, "ksize", std::vector<int64_t>{1, c.window, c.window, 1});
    SetAttr(n, "strides", std::vector<int64_t>{1, c.stride, c.stride, 1});
    SetAttr(n, "padding", c.padding);
  }
  return g;
}

int64_t PoolOut(const PoolCase& c, int64_t in) {
  return c.padding == "SAME" ? (in + c.stride - 1) / c.stride
                             : (in - c.window + c.stride) / c.stride;
}

absl::StatusOr<std::vector<Tensor>> RunPool(const PoolCase& c, const std::string& device,
                                            const Tensor& x) {
  const TensorShape y({c.batch, PoolOut(c, c.rows), PoolOut(c, c.cols), c.depth});
  DeviceSession s(PoolGraph(c), device);
  return s.Run({{"x", x}, {"dy", RandomTensor(y, 5)}}, {"y", "dx"});
}

TEST(GpuPoolTest, MaxPoolAndItsGradientMatchTheCpu) {
  DFLOW_SKIP_WITHOUT_GPU();
  for (const char* padding : {"SAME", "VALID"}) {
    for (int window : {2, 3}) {
      for (int stride : {1, 2}) {
        for (int batch : {1, 7}) {
          for (int depth : {1, 3, 32}) {
            const PoolCase c{padding, window, stride, batch, depth};
            const std::string what = absl::StrCat(padding, " window ", window, " stride ", stride,
                                                  " batch ", batch, " depth ", depth);
            const Tensor x = RandomTensor(TensorShape({batch, c.rows, c.cols, depth}), 4);
            auto gpu = RunPool(c, kGpu, x);
            auto cpu = RunPool(c, kCpu, x);
            ASSERT_TRUE(gpu.ok()) << what << ": " << gpu.status();
            ASSERT_TRUE(cpu.ok()) << what << ": " << cpu.status();
            ExpectSame((*gpu)[0], (*cpu)[0], 0, 0, what + " y");
            ExpectSame((*gpu)[1], (*cpu)[1], 0, 0, what + " dx");  // The CPU's order of adds.
          }
        }
      }
    }
  }
}

TEST(GpuPoolTest, TiesGoToTheFirstMaximumAndEmptyBatchesWork) {
  DFLOW_SKIP_WITHOUT_GPU();
  const PoolCase c{"SAME", 3, 2, 2, 3};
  const Tensor zeros(DT_FLOAT, TensorShape({2, c.rows, c.cols, 3}));
  auto gpu = RunPool(c, kGpu, zeros);
  auto cpu = RunPool(c, kCpu, zeros);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  ExpectSame((*gpu)[1], (*cpu)[1], 0, 0, "ties");
  const PoolCase empty{"VALID", 2, 2, 0, 3};
  auto out = RunPool(empty, kGpu, Tensor(DT_FLOAT, TensorShape({0, c.rows, c.cols, 3})));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), TensorShape({0, 5, 6, 3}));
  EXPECT_EQ((*out)[1].shape(), TensorShape({0, c.rows, c.cols, 3}));
}

TEST(GpuPoolTest, MismatchedGradientIsAnInvalidArgument) {
  DFLOW_SKIP_WITHOUT_GPU();
  const PoolCase c{"VALID", 2, 2, 1, 3};
  DeviceSession s(PoolGraph(c), kGpu);
  ASSERT_TRUE(s.create_status().ok()) << s.create_status();
  auto out = s.Run({{"x", RandomTensor(TensorShape({1, c.rows, c.cols, 3}), 1)},
                    {"dy", RandomTensor(TensorShape({1, 4, 4, 3}), 2)}},
                   {"dx"});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  EXPECT_TRUE(absl::StrContains(out.status().message(), "Expected grad shape")) << out.status();
}

// --- average pooling --------------------------------------------------------------------

// y = AvgPool(x), dx = AvgPoolGrad(Shape(x), dy): Shape's output is in host
// memory, where AvgPoolGrad's GPU kernel reads orig_input_shape.
tensorflow::GraphDef AvgPoolGraph(const PoolCase& c) {
  tensorflow::GraphDef g;
  AddPlaceholder(&g, "x");
  AddPlaceholder(&g, "dy");
  SetAttr(AddNode(&g, "shape", "Shape", {"x"}), "out_type", DT_INT32);
  for (tensorflow::NodeDef* n :
       {AddNode(&g, "y", "AvgPool", {"x"}), AddNode(&g, "dx", "AvgPoolGrad", {"shape", "dy"})}) {
    SetAttr(n, "ksize", std::vector<int64_t>{1, c.window, c.window, 1});
    SetAttr(n, "strides", std::vector<int64_t>{1, c.stride, c.stride, 1});
    SetAttr(n, "padding", c.padding);
  }
  return g;
}

TEST(GpuPoolTest, AvgPoolAndItsGradientMatchTheCpu) {
  DFLOW_SKIP_WITHOUT_GPU();
  for (const char* padding : {"SAME", "VALID"}) {
    for (int window : {2, 3}) {
      for (int stride : {1, 2}) {
        for (int batch : {1, 7}) {
          for (int depth : {1, 3, 32}) {
            const PoolCase c{padding, window, stride, batch, depth};
            const TensorShape y({batch, PoolOut(c, c.rows), PoolOut(c, c.cols), depth});
            CompareGpuCpu(AvgPoolGraph(c),
                          {{"x", RandomTensor(TensorShape({batch, c.rows, c.cols, depth}), 4)},
                           {"dy", RandomTensor(y, 5)}},
                          {"y", "dx"}, 1e-6, 1e-6,
                          absl::StrCat("AvgPool ", padding, " window ", window, " stride ", stride,
                                       " batch ", batch, " depth ", depth));
          }
        }
      }
    }
  }
}

// A window larger than the image (VALID) pools nothing: y is empty and the
// gradient all zeros; a grad of the wrong shape is refused.
TEST(GpuPoolTest, AvgPoolEdgeCases) {
  DFLOW_SKIP_WITHOUT_GPU();
  PoolCase big{"VALID", 3, 1, 2, 3};
  big.rows = 2;
  auto out = RunPinned(AvgPoolGraph(big), kGpu,
                       {{"x", RandomTensor(TensorShape({2, 2, 12, 3}), 1)},
                        {"dy", Tensor(DT_FLOAT, TensorShape({2, 0, 10, 3}))}},
                       {"y", "dx"});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), TensorShape({2, 0, 10, 3}));
  ASSERT_EQ((*out)[1].shape(), TensorShape({2, 2, 12, 3}));
  for (float v : (*out)[1].flat<float>()) ASSERT_EQ(v, 0.0f);
  const PoolCase c{"VALID", 2, 2, 1, 3};
  absl::Status bad = GpuRunStatus(AvgPoolGraph(c),
                                  {{"x", RandomTensor(TensorShape({1, c.rows, c.cols, 3}), 1)},
                                   {"dy", RandomTensor(TensorShape({1, 4, 4, 3}), 2)}},
                                  {"dx"});
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument) << bad;
  EXPECT_TRUE(absl::StrContains(bad.message(), "Expected grad shape")) << bad;
}

}  // namespace
}  // namespace gpu
}  // namespace dflow
