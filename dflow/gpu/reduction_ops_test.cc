// The GPU reductions, BiasAddGrad, softmax and cross entropies against the
// CPU kernels on the same graphs and inputs. Skipped without a GPU.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dflow/gpu/gpu_test_util.h"

namespace dflow {
namespace gpu {
namespace {

constexpr double kRtol = 1e-4, kAtol = 1e-5;

// Sum, Mean, Max, Min and Prod of one input over `axes` (int32 or int64).
tensorflow::GraphDef ReductionGraph(const Tensor& axes, bool keep_dims) {
  tensorflow::GraphDef g;
  AddPlaceholder(&g, "x");
  AddHostConst(&g, "axes", axes);
  for (const std::string op : {"Sum", "Mean", "Max", "Min", "Prod"}) {
    tensorflow::NodeDef* n = AddNode(&g, op, op, {"x", "axes"});
    SetAttr(n, "Tidx", axes.dtype());
    SetAttr(n, "keep_dims", keep_dims);
  }
  return g;
}

// Rows, columns, inner and outer axes, several groups, no axes, size-1
// axes, empty inputs, and one long row (two passes on the GPU). Inputs
// are in [0.9, 1.1) so that sums do not cancel and products stay finite.
TEST(GpuReductionTest, ReductionsMatchTheCpu) {
  DFLOW_SKIP_WITHOUT_GPU();
  struct Case {
    TensorShape shape;
    std::vector<int32_t> axes;
  };
  const std::vector<Case> cases = {
      {TensorShape({128, 256}), {0}},      {TensorShape({128, 256}), {1}},
      {TensorShape({128}), {0}},           {TensorShape({3, 4, 5, 6}), {1, 3}},
      {TensorShape({3, 4, 5, 6}), {0, 2}}, {TensorShape({3, 4, 5, 6}), {-1}},
      {TensorShape({3, 4, 5, 6}), {2, 0, 3, 1}}, {TensorShape({2, 3}), {}},
      {TensorShape({2, 1, 3}), {1}},       {TensorShape({7, 1, 1}), {1, 2}},
      {TensorShape({1, 1}), {0, 1}},       {TensorShape({}), {}},
      {TensorShape({0, 5}), {0}},          {TensorShape({5, 0}), {1}},
      {TensorShape({0, 5}), {1}},          {TensorShape({3, 1000}), {1}},
      {TensorShape({1001, 3}), {0}},       {TensorShape({5, 9, 11}), {0, 2}},
      // Long columns: two passes over chunks of rows.
      {TensorShape({5000, 16}), {0}},      {TensorShape({3001, 300}), {0}},
      // A middle axis kept (NCHW's channels): rows, then columns of the rows' results.
      {TensorShape({4, 8, 6, 5}), {0, 2, 3}}, {TensorShape({3, 4, 5, 6}), {-1, 0, 2}},
  };
  int seed = 1;
  for (const Case& c : cases) {
    for (bool keep_dims : {false, true}) {
      const Tensor x = RandomTensor(c.shape, seed++, 0.9f, 1.1f);
      const std::string what = absl::StrCat(c.shape.DebugString(), " axes [",
                                            absl::StrJoin(c.axes, ","), "] keep_dims ", keep_dims);
      CompareGpuCpu(ReductionGraph(Tensor::Vec<int32_t>(c.axes), keep_dims), {{"x", x}},
                    {"Sum", "Mean", "Max", "Min", "Prod"}, kRtol, kAtol, what);
    }
  }
}

TEST(GpuReductionTest, OneLongRowAndInt64Axes) {
  DFLOW_SKIP_WITHOUT_GPU();
  const Tensor x = RandomTensor(TensorShape({300001}), 7, 0, 1);
  tensorflow::GraphDef g = ReductionGraph(Tensor::Vec<int64_t>({0}), false);
  CompareGpuCpu(g, {{"x", x}}, {"Sum", "Mean", "Max", "Min"}, 5e-4, kAtol, "long row");
  // Mixed signs over short rows.
  CompareGpuCpu(ReductionGraph(Tensor::Vec<int64_t>({-1}), true),
                {{"x", RandomTensor(TensorShape({33, 17}), 8)}}, {"Sum", "Mean", "Max", "Min"},
                kRtol, kAtol, "mixed signs");
}

TEST(GpuReductionTest, BadAxesAreErrors) {
  DFLOW_SKIP_WITHOUT_GPU();
  const Tensor x = RandomTensor(TensorShape({2, 3}), 1);
  absl::Status s = GpuRunStatus(ReductionGraph(Tensor::Vec<int32_t>({2}), false), {{"x", x}},
                                {"Sum"});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "Invalid reduction dimension 2")) << s;
  s = GpuRunStatus(ReductionGraph(Tensor::Vec<int32_t>({1, -1}), false), {{"x", x}}, {"Max"});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "duplicate")) << s;
}

// ArgMax and ArgMin over each axis of several shapes, float and double,
// int32 and int64 indices: inputs are multiples of 0.25 (ties: the first
// index wins), with NaN, -inf and the type's lowest value planted (never
// chosen / chosen by the CPU's rule).
TEST(GpuReductionTest, ArgMaxAndArgMinMatchTheCpu) {
  DFLOW_SKIP_WITHOUT_GPU();
  const std::vector<TensorShape> shapes = {TensorShape({128, 10}), TensorShape({3, 4, 5}),
                                           TensorShape({1000}), TensorShape({0, 4}),
                                           TensorShape({6, 1})};
  int seed = 1;
  for (const DataType t : {DT_FLOAT, DT_DOUBLE}) {
    for (const TensorShape& shape : shapes) {
      Tensor x(t, shape);
      const Tensor f = RandomTensor(shape, seed++, -2, 2, 0.25f);
      for (int64_t i = 0; i < x.NumElements(); ++i) {
        double v = f.flat<float>()[i];
        if (i % 7 == 3) v = std::nan("");
        if (i % 11 == 5) v = -INFINITY;
        if (i % 13 == 6) v = t == DT_FLOAT ? std::numeric_limits<float>::lowest()
                                          : std::numeric_limits<double>::lowest();
        if (t == DT_FLOAT) x.flat<float>()[i] = static_cast<float>(v);
        if (t == DT_DOUBLE) x.flat<double>()[i] = v;
      }
      for (int axis = -shape.dims(); axis < shape.dims(); ++axis) {
        if (shape.dim_size(axis < 0 ? axis + shape.dims() : axis) == 0) continue;
        tensorflow::GraphDef g;
        AddPlaceholder(&g, "x", t);
        AddHostConst(&g, "axis", Tensor::Scalar<int32_t>(axis));
        std::vector<std::string> fetches;
        for (const std::string op : {"ArgMax", "ArgMin"}) {
          for (const DataType index : {DT_INT32, DT_INT64}) {
            const std::string name = op + DataTypeString(index);
            tensorflow::NodeDef* n = AddNode(&g, name, op, {"x", "axis"}, t);
            SetAttr(n, "output_type", index);
            fetches.push_back(name);
          }
        }
        CompareGpuCpu(g, {{"x", x}}, fetches, 0, 0,
                      absl::StrCat(DataTypeString(t), " ", shape.DebugString(), " axis ", axis));
      }
    }
  }
  // The CPU's messages: an axis out of range, an empty axis.
  tensorflow::GraphDef g;
  AddPlaceholder(&g, "x");
  AddHostConst(&g, "axis", Tensor::Scalar<int32_t>(2));
  AddNode(&g, "argmax", "ArgMax", {"x", "axis"});
  absl::Status s = GpuRunStatus(g, {{"x", RandomTensor(TensorShape({2, 3}), 1)}}, {"argmax"});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "Expected dimension in the range [-2, 2), but got 2"))
      << s;
  s = GpuRunStatus(g, {{"x", RandomTensor(TensorShape({2, 3, 0}), 1)}}, {"argmax"});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "Reduction axis 2 is empty in shape [2,3,0]")) << s;
}

TEST(GpuReductionTest, BiasAddGradMatchesTheCpu) {
  DFLOW_SKIP_WITHOUT_GPU();
  const std::vector<std::pair<std::string, TensorShape>> cases = {
      {"NHWC", TensorShape({4, 5, 6, 7})}, {"NCHW", TensorShape({4, 7, 5, 6})},
      {"NHWC", TensorShape({128, 256})},   {"NCHW", TensorShape({1, 300})},
      {"NCHW", TensorShape({1, 7, 1, 1})}, {"NHWC", TensorShape({0, 5})},
      {"NHWC", TensorShape({8, 50, 50, 16})},  // 20000 rows: the two-pass column path.
      {"NCHW", TensorShape({32, 16, 28, 28})}};  // Rows of H*W, then the batch's columns.
  int seed = 1;
  for (const auto& [format, shape] : cases) {
    tensorflow::GraphDef g;
    AddPlaceholder(&g, "dy");
    SetAttr(AddNode(&g, "db", "BiasAddGrad", {"dy"}), "data_format", format);
    CompareGpuCpu(g, {{"dy", RandomTensor(shape, seed++)}}, {"db"}, kRtol, kAtol,
                  format + " " + shape.DebugString());
  }
}

TEST(GpuSoftmaxTest, SoftmaxAndLogSoftmaxMatchTheCpu) {
  DFLOW_SKIP_WITHOUT_GPU();
  int seed = 1;
  for (const TensorShape& shape : {TensorShape({37, 1000}), TensorShape({5}), TensorShape({3, 1}),
                                   TensorShape({2, 3, 0}), TensorShape({4, 2, 300})}) {
    tensorflow::GraphDef g;
    AddPlaceholder(&g, "x");
    AddNode(&g, "sm", "Softmax", {"x"});
    AddNode(&g, "lsm", "LogSoftmax", {"x"});
    CompareGpuCpu(g, {{"x", RandomTensor(shape, seed++, -20, 20)}}, {"sm", "lsm"}, kRtol, 1e-6,
                  shape.DebugString());
  }
}

TEST(GpuSoftmaxTest, SparseCrossEntropyMatchesTheCpu) {
  DFLOW_SKIP_WITHOUT_GPU();
  for (DataType label_type : {DT_INT32, DT_INT64}) {
    for (const auto& [batch, classes] : std::vector<std::pair<int64_t, int64_t>>{
             {64, 10}, {3, 1000}, {5, 1}, {0, 4}}) {
      tensorflow::GraphDef g;
      AddPlaceholder(&g, "x");
      AddPlaceholder(&g, "labels", label_type);
      SetAttr(AddNode(&g, "xent", "SparseSoftmaxCrossEntropyWithLogits", {"x", "labels"}),
              "Tlabels", label_type);
      Tensor labels(label_type, TensorShape({batch}));
      for (int64_t i = 0; i < batch; ++i) {
        const int64_t label = (i * 7 + 3) % classes;
        if (label_type == DT_INT32) labels.flat<int32_t>()[i] = static_cast<int32_t>(label);
        if (label_type == DT_INT64) labels.flat<int64_t>()[i] = label;
      }
      CompareGpuCpu(g,
                    {{"x", RandomTensor(TensorShape({batch, classes}), static_cast<int>(classes),
                                        -5, 5)},
                     {"labels", labels}},
                    {"xent", "xent:1"}, kRtol, 1e-6,
                    absl::StrCat(DataTypeString(label_type), " [", batch, ",", classes, "]"));
    }
  }
}

// TensorFlow's GPU kernel: a label out of range gives NaN for its row only.
TEST(GpuSoftmaxTest, AnOutOfRangeLabelGivesNaNForItsRow) {
  DFLOW_SKIP_WITHOUT_GPU();
  tensorflow::GraphDef g;
  AddPlaceholder(&g, "x");
  AddPlaceholder(&g, "labels", DT_INT32);
  SetAttr(AddNode(&g, "xent", "SparseSoftmaxCrossEntropyWithLogits", {"x", "labels"}), "Tlabels",
          DT_INT32);
  auto out = RunPinned(g, "/device:GPU:0",
                       {{"x", RandomTensor(TensorShape({3, 4}), 1)},
                        {"labels", Tensor::Vec<int32_t>({0, 4, 3})}},
                       {"xent", "xent:1"});
  ASSERT_TRUE(out.ok()) << out.status();
  auto loss = (*out)[0].flat<float>();
  auto back = (*out)[1].flat<float>();
  EXPECT_FALSE(std::isnan(loss[0]));
  EXPECT_TRUE(std::isnan(loss[1]));
  EXPECT_FALSE(std::isnan(loss[2]));
  for (int c = 0; c < 4; ++c) {
    EXPECT_FALSE(std::isnan(back[c]));
    EXPECT_TRUE(std::isnan(back[4 + c]));
  }
}

TEST(GpuSoftmaxTest, DenseCrossEntropyMatchesTheCpuWithBroadcasting) {
  DFLOW_SKIP_WITHOUT_GPU();
  const std::vector<std::pair<TensorShape, TensorShape>> cases = {
      {TensorShape({64, 10}), TensorShape({64, 10})},
      {TensorShape({64, 10}), TensorShape({1, 10})},
      {TensorShape({10}), TensorShape({64, 10})},
      {TensorShape({3, 1000}), TensorShape({3, 1})},
      {TensorShape({0, 10}), TensorShape({0, 10})}};
  int seed = 1;
  for (const auto& [xs, ls] : cases) {
    tensorflow::GraphDef g;
    AddPlaceholder(&g, "x");
    AddPlaceholder(&g, "labels");
    AddNode(&g, "xent", "SoftmaxCrossEntropyWithLogits", {"x", "labels"});
    CompareGpuCpu(g, {{"x", RandomTensor(xs, seed++, -5, 5)}, {"labels", RandomTensor(ls, seed++, 0, 1)}},
                  {"xent", "xent:1"}, kRtol, 1e-5, xs.DebugString() + " " + ls.DebugString());
  }
  tensorflow::GraphDef g;
  AddPlaceholder(&g, "x");
  AddPlaceholder(&g, "labels");
  AddNode(&g, "xent", "SoftmaxCrossEntropyWithLogits", {"x", "labels"});
  absl::Status s = GpuRunStatus(
      g, {{"x", RandomTensor(TensorShape({4, 3}), 1)}, {"labels", RandomTensor(TensorShape({5, 3}), 2)}},
      {"xent"});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
}

}  // namespace
}  // namespace gpu
}  // namespace dflow
