// The element-wise GPU kernels against the CPU kernels on the same graphs
// and inputs. Skipped without a GPU.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dflow/gpu/gpu_test_util.h"

namespace dflow {
namespace gpu {
namespace {

constexpr double kRtol = 1e-5, kAtol = 1e-6;

// Runs without a GPU: the kernels are registered for the types claimed, and
// int32 arithmetic is left to the CPU (shape computations stay on the host).
TEST(GpuKernelRegistryTest, KernelsAreRegisteredForTheirTypes) {
  auto node = [](const std::string& op, std::vector<std::pair<std::string, DataType>> attrs) {
    tensorflow::NodeDef n;
    n.set_name("n");
    n.set_op(op);
    for (const auto& [name, type] : attrs) SetAttr(&n, name, type);
    return n;
  };
  const KernelRegistry* r = KernelRegistry::Global();
  for (const std::string op : {"AddV2", "Mul", "Maximum", "Greater", "Relu", "Sigmoid", "TanhGrad",
                               "SelectV2", "AddN", "BiasAdd", "BiasAddGrad", "Softmax"}) {
    EXPECT_TRUE(r->HasKernel(kDeviceGPU, node(op, {{"T", DT_FLOAT}}))) << op;
  }
  // int32 arithmetic (shapes) runs on a GPU in host memory, as TensorFlow's.
  absl::StatusOr<const KernelDef*> int32_add = r->Find(kDeviceGPU, node("AddV2", {{"T", DT_INT32}}));
  ASSERT_TRUE(int32_add.ok()) << int32_add.status();
  EXPECT_EQ((*int32_add)->host_memory_args, (std::vector<std::string>{"x", "y", "z"}));
  for (const std::string op : {"Sum", "Mean", "Max", "Min", "Prod"}) {
    EXPECT_TRUE(r->HasKernel(kDeviceGPU, node(op, {{"T", DT_FLOAT}, {"Tidx", DT_INT64}}))) << op;
  }
  EXPECT_TRUE(r->HasKernel(kDeviceGPU, node("Cast", {{"SrcT", DT_INT32}, {"DstT", DT_FLOAT}})));
  EXPECT_TRUE(r->HasKernel(kDeviceGPU, node("Reshape", {{"T", DT_INT32}, {"Tshape", DT_INT32}})));
  EXPECT_TRUE(r->HasKernel(kDeviceGPU, node("Shape", {{"T", DT_FLOAT}, {"out_type", DT_INT32}})));
  EXPECT_TRUE(r->HasKernel(kDeviceGPU, node("Tile", {{"T", DT_FLOAT}, {"Tmultiples", DT_INT32}})));
  EXPECT_TRUE(r->HasKernel(kDeviceGPU, node("SparseSoftmaxCrossEntropyWithLogits",
                                            {{"T", DT_FLOAT}, {"Tlabels", DT_INT64}})));
  EXPECT_TRUE(r->HasKernel(kDeviceGPU, node("Fill", {{"T", DT_INT64}, {"index_type", DT_INT32}})));
  // int64 and double: the arithmetic and comparisons of metrics and summaries.
  for (const DataType t : {DT_INT64, DT_DOUBLE}) {
    for (const std::string op : {"AddV2", "Sub", "Mul", "Maximum", "Minimum", "Equal", "NotEqual",
                                 "Greater", "Less", "GreaterEqual", "LessEqual"}) {
      EXPECT_TRUE(r->HasKernel(kDeviceGPU, node(op, {{"T", t}}))) << op << " " << DataTypeString(t);
    }
    EXPECT_FALSE(r->HasKernel(kDeviceGPU, node("FloorMod", {{"T", t}}))) << DataTypeString(t);
  }
  EXPECT_TRUE(r->HasKernel(kDeviceGPU, node("RealDiv", {{"T", DT_DOUBLE}})));
  // A classifier's accuracy: ArgMax of the logits, the axis in host memory.
  absl::StatusOr<const KernelDef*> arg_max =
      r->Find(kDeviceGPU, node("ArgMax", {{"T", DT_FLOAT}, {"output_type", DT_INT64}}));
  ASSERT_TRUE(arg_max.ok()) << arg_max.status();
  EXPECT_EQ((*arg_max)->host_memory_args, (std::vector<std::string>{"dimension"}));
}

// x op y for each pair of shapes; inputs are multiples of 0.25 in [-2, 2]
// (zeros, ties and equal elements happen; NaN and inf results must agree).
TEST(GpuCwiseTest, BinaryOpsBroadcastLikeTheCpu) {
  DFLOW_SKIP_WITHOUT_GPU();
  const std::vector<std::string> ops = {
      "Add",     "AddV2",   "Sub",   "Mul",      "RealDiv", "DivNoNan",     "FloorDiv",
      "FloorMod", "Maximum", "Minimum", "Pow",   "Equal",   "NotEqual",     "Greater",
      "Less",    "GreaterEqual", "LessEqual"};
  const std::vector<std::pair<TensorShape, TensorShape>> shapes = {
      {TensorShape({1000}), TensorShape({1000})},
      {TensorShape({37, 300}), TensorShape({})},
      {TensorShape({}), TensorShape({5, 7})},
      {TensorShape({}), TensorShape({})},
      {TensorShape({37, 300}), TensorShape({300})},
      {TensorShape({37, 1}), TensorShape({37, 300})},
      {TensorShape({4, 1, 3}), TensorShape({5, 1})},
      {TensorShape({2, 3, 1, 5, 1, 7}), TensorShape({3, 4, 1, 6, 1})},
      {TensorShape({0, 3}), TensorShape({3})},
      {TensorShape({2, 1, 3}), TensorShape({2, 1, 3})},
  };
  tensorflow::GraphDef g;
  AddPlaceholder(&g, "x");
  AddPlaceholder(&g, "y");
  std::vector<std::string> fetches;
  for (const std::string& op : ops) {
    AddNode(&g, op, op, {"x", "y"});
    fetches.push_back(op);
  }
  int seed = 1;
  for (const auto& [xs, ys] : shapes) {
    const Tensor x = RandomTensor(xs, seed++, -2, 2, 0.25f);
    const Tensor y = RandomTensor(ys, seed++, -2, 2, 0.25f);
    CompareGpuCpu(g, {{"x", x}, {"y", y}}, fetches, kRtol, kAtol,
                  xs.DebugString() + " op " + ys.DebugString());
  }
}

// The ops that also run on double and int64, broadcasting as the float ones
// do: double inputs are multiples of 0.25 in [-2, 2] (NaN among them), int64
// ones span [-2^40, 2^40] in steps of 2^38 (ties, and sums past 32 bits).
TEST(GpuCwiseTest, BinaryOpsOfDoubleAndInt64MatchTheCpu) {
  DFLOW_SKIP_WITHOUT_GPU();
  const std::vector<std::pair<TensorShape, TensorShape>> shapes = {
      {TensorShape({1000}), TensorShape({1000})},
      {TensorShape({37, 300}), TensorShape({})},
      {TensorShape({37, 1}), TensorShape({37, 300})},
      {TensorShape({2, 3, 1, 5, 1, 7}), TensorShape({3, 4, 1, 6, 1})},
  };
  for (const DataType t : {DT_DOUBLE, DT_INT64}) {
    std::vector<std::string> ops = {"AddV2", "Sub", "Mul", "Maximum", "Minimum", "Equal",
                                    "NotEqual", "Greater", "Less", "GreaterEqual", "LessEqual"};
    if (t == DT_DOUBLE) ops.push_back("RealDiv");
    tensorflow::GraphDef g;
    AddPlaceholder(&g, "x", t);
    AddPlaceholder(&g, "y", t);
    std::vector<std::string> fetches;
    for (const std::string& op : ops) {
      AddNode(&g, op, op, {"x", "y"}, t);
      fetches.push_back(op);
    }
    auto typed = [t](const Tensor& f) {
      Tensor out(t, f.shape());
      for (int64_t i = 0; i < f.NumElements(); ++i) {
        const float v = f.flat<float>()[i];
        if (t == DT_DOUBLE) {
          out.flat<double>()[i] = i == 3 ? std::nan("") : v;
        } else {
          out.flat<int64_t>()[i] = static_cast<int64_t>(v * 4) << 38;
        }
      }
      return out;
    };
    int seed = 1;
    for (const auto& [xs, ys] : shapes) {
      const Tensor x = typed(RandomTensor(xs, seed++, -2, 2, 0.25f));
      const Tensor y = typed(RandomTensor(ys, seed++, -2, 2, 0.25f));
      CompareGpuCpu(g, {{"x", x}, {"y", y}}, fetches, 0, 0,
                    DataTypeString(t) + " " + xs.DebugString() + " op " + ys.DebugString());
    }
  }
}

TEST(GpuCwiseTest, IncompatibleShapesAreAnError) {
  DFLOW_SKIP_WITHOUT_GPU();
  tensorflow::GraphDef g;
  AddPlaceholder(&g, "x");
  AddPlaceholder(&g, "y");
  AddNode(&g, "z", "Mul", {"x", "y"});
  absl::Status s = GpuRunStatus(
      g, {{"x", RandomTensor(TensorShape({2, 3}), 1)}, {"y", RandomTensor(TensorShape({4}), 2)}},
      {"z"});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "Incompatible shapes: [2,3] vs. [4]")) << s;
}

TEST(GpuCwiseTest, EqualityOfIncompatibleShapesCanBeAScalar) {
  DFLOW_SKIP_WITHOUT_GPU();
  tensorflow::GraphDef g;
  AddPlaceholder(&g, "x");
  AddPlaceholder(&g, "y");
  SetAttr(AddNode(&g, "eq", "Equal", {"x", "y"}), "incompatible_shape_error", false);
  SetAttr(AddNode(&g, "ne", "NotEqual", {"x", "y"}), "incompatible_shape_error", false);
  auto out = RunPinned(
      g, "/device:GPU:0",
      {{"x", RandomTensor(TensorShape({2, 3}), 1)}, {"y", RandomTensor(TensorShape({4}), 2)}},
      {"eq", "ne"});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ((*out)[0].shape(), TensorShape());
  EXPECT_FALSE((*out)[0].scalar<bool>());
  EXPECT_TRUE((*out)[1].scalar<bool>());
}

// Each unary op over inputs from its domain: an odd size and an empty one.
TEST(GpuCwiseTest, UnaryOpsMatchTheCpu) {
  DFLOW_SKIP_WITHOUT_GPU();
  struct Case {
    std::string op;
    float lo, hi, step;
  };
  const std::vector<Case> cases = {
      {"Neg", -4, 4, 0},        {"Abs", -4, 4, 0},       {"Square", -4, 4, 0},
      {"Sqrt", 0.01f, 9, 0},    {"Rsqrt", 0.01f, 9, 0},  {"Exp", -10, 10, 0},
      {"Log", 0.01f, 100, 0},   {"Log1p", -0.9f, 5, 0},  {"Expm1", -3, 3, 0},
      {"Tanh", -5, 5, 0},       {"Sigmoid", -8, 8, 0},   {"Reciprocal", 0.1f, 5, 0},
      {"Floor", -4, 4, 0.25f},  {"Ceil", -4, 4, 0.25f},  {"Round", -4, 4, 0.25f},
      {"Sin", -4, 4, 0},        {"Cos", -4, 4, 0},       {"Relu", -4, 4, 0.25f},
      {"Softplus", -30, 30, 0},
  };
  int seed = 10;
  for (const Case& c : cases) {
    tensorflow::GraphDef g;
    AddPlaceholder(&g, "x");
    AddNode(&g, "y", c.op, {"x"});
    for (int64_t n : {1001, 0}) {
      const Tensor x = RandomTensor(TensorShape({n}), seed++, c.lo, c.hi, c.step);
      CompareGpuCpu(g, {{"x", x}}, {"y"}, 2e-5, kAtol, absl::StrCat(c.op, " n=", n));
    }
  }
}

// The element-wise backprops: (gradients, features) and (y, dy).
TEST(GpuCwiseTest, ElementwiseGradientsMatchTheCpu) {
  DFLOW_SKIP_WITHOUT_GPU();
  for (const std::string op : {"ReluGrad", "SoftplusGrad", "SqrtGrad", "RsqrtGrad", "TanhGrad",
                               "SigmoidGrad", "ReciprocalGrad"}) {
    tensorflow::GraphDef g;
    AddPlaceholder(&g, "a");
    AddPlaceholder(&g, "b");
    AddNode(&g, "z", op, {"a", "b"});
    const bool y_first = op != "ReluGrad" && op != "SoftplusGrad";
    // y of Sqrt/Rsqrt/Reciprocal away from 0; features with exact zeros.
    const Tensor a = y_first ? RandomTensor(TensorShape({3, 333}), 1, 0.2f, 2)
                             : RandomTensor(TensorShape({3, 333}), 1, -2, 2);
    const Tensor b = y_first ? RandomTensor(TensorShape({3, 333}), 2, -2, 2)
                             : RandomTensor(TensorShape({3, 333}), 2, -2, 2, 0.25f);
    CompareGpuCpu(g, {{"a", a}, {"b", b}}, {"z"}, kRtol, kAtol, op);
    absl::Status s = GpuRunStatus(g, {{"a", a}, {"b", RandomTensor(TensorShape({999}), 3)}}, {"z"});
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << op << ": " << s;
  }
}

// sel = `op`(c > zero, t, e), all four fed.
tensorflow::GraphDef SelectGraph(const std::string& op) {
  tensorflow::GraphDef g;
  for (const char* in : {"c", "t", "e", "zero"}) AddPlaceholder(&g, in);
  AddNode(&g, "cond", "Greater", {"c", "zero"});
  AddNode(&g, "sel", op, {"cond", "t", "e"});
  return g;
}

TEST(GpuCwiseTest, SelectV2AndAddNMatchTheCpu) {
  DFLOW_SKIP_WITHOUT_GPU();
  tensorflow::GraphDef g = SelectGraph("SelectV2");
  tensorflow::NodeDef* add_n = AddNode(&g, "sum", "AddN", {"t", "t", "sel"});
  SetAttr(add_n, "N", 3);
  const Tensor c = RandomTensor(TensorShape({4, 1}), 1);
  const Tensor t = RandomTensor(TensorShape({4, 513}), 2);
  CompareGpuCpu(g, {{"c", c}, {"t", t}, {"e", Tensor::Scalar(7.0f)}, {"zero", Tensor::Scalar(0.0f)}},
                {"sel", "sum"}, kRtol, kAtol, "SelectV2/AddN");
}

// Select (v1): a scalar condition, one of the values' shape, and one per
// row (tf.losses' weights), empty rows among them; bad shapes fail with the
// CPU's messages.
TEST(GpuCwiseTest, SelectMatchesTheCpu) {
  DFLOW_SKIP_WITHOUT_GPU();
  const tensorflow::GraphDef g = SelectGraph("Select");
  const struct {
    TensorShape cond, values;
  } cases[] = {{TensorShape({}), TensorShape({3, 4})},      {TensorShape({5}), TensorShape({5})},
               {TensorShape({3, 4}), TensorShape({3, 4})},  {TensorShape({6}), TensorShape({6, 2, 3})},
               {TensorShape({0}), TensorShape({0, 3})},     {TensorShape({4}), TensorShape({4, 0})}};
  int seed = 1;
  for (const auto& c : cases) {
    const Feeds feeds = {{"c", RandomTensor(c.cond, seed++)},
                         {"t", RandomTensor(c.values, seed++)},
                         {"e", RandomTensor(c.values, seed++)},
                         {"zero", Tensor::Scalar(0.0f)}};
    CompareGpuCpu(g, feeds, {"sel"}, 0, 0, "Select " + c.cond.DebugString());
  }
  const struct {
    TensorShape cond, t, e;
    std::string message;
  } bad[] = {{TensorShape({2}), TensorShape({2, 3}), TensorShape({2, 4}),
              "'then' and 'else' must have the same size.  but received: [2,3] vs. [2,4]"},
             {TensorShape({3}), TensorShape({2, 3}), TensorShape({2, 3}),
              "Number of batches of 'then' must match size of 'cond', but saw: 2 vs. 3"},
             {TensorShape({3, 2}), TensorShape({2, 3}), TensorShape({2, 3}),
              "'condition' and 'then' must have the same size.  but received: [3,2] vs. [2,3]"}};
  for (const auto& b : bad) {
    const Feeds feeds = {{"c", RandomTensor(b.cond, 1)},
                         {"t", RandomTensor(b.t, 2)},
                         {"e", RandomTensor(b.e, 3)},
                         {"zero", Tensor::Scalar(0.0f)}};
    for (const std::string device : {"/device:GPU:0", "/device:CPU:0"}) {
      absl::Status s = RunPinned(g, device, feeds, {"sel"}).status();
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << device << ": " << s;
      EXPECT_TRUE(absl::StrContains(s.message(), b.message)) << device << ": " << s;
    }
  }
}

// Every pair of float, double, int32, int64 and bool, from floats that
// include NaN, values out of int32's range and negative fractions.
TEST(GpuCwiseTest, CastMatchesTheCpu) {
  DFLOW_SKIP_WITHOUT_GPU();
  const std::vector<std::pair<std::string, DataType>> types = {
      {"f", DT_FLOAT}, {"d", DT_DOUBLE}, {"i", DT_INT32}, {"l", DT_INT64}, {"b", DT_BOOL}};
  tensorflow::GraphDef g;
  AddPlaceholder(&g, "x");
  std::vector<std::string> fetches;
  for (const auto& [a, ta] : types) {
    tensorflow::NodeDef* first = AddNode(&g, a, "Cast", {"x"}, DT_INVALID);
    SetAttr(first, "SrcT", DT_FLOAT);
    SetAttr(first, "DstT", ta);
    fetches.push_back(a);
    for (const auto& [b, tb] : types) {
      tensorflow::NodeDef* second = AddNode(&g, a + b, "Cast", {a}, DT_INVALID);
      SetAttr(second, "SrcT", ta);
      SetAttr(second, "DstT", tb);
      fetches.push_back(a + b);
    }
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor x = Tensor::FromVector<float>(
      {0.0f, 1.0f, -1.0f, -2.7f, 2.7f, 0.5f, 3e9f, -3e9f, 1e19f, -1e19f, nan, 123456.78f, -0.0f},
      TensorShape({13}));
  CompareGpuCpu(g, {{"x", x}}, fetches, 0, 0, "Cast");
}

TEST(GpuCwiseTest, FillZerosLikeAndOnesLikeMatchTheCpu) {
  DFLOW_SKIP_WITHOUT_GPU();
  for (DataType dtype : {DT_FLOAT, DT_INT64}) {  // int32 fills stay on the CPU.
    tensorflow::GraphDef g;
    AddPlaceholder(&g, "v", dtype);
    AddHostConst(&g, "dims", Tensor::Vec<int32_t>({3, 257}));
    tensorflow::NodeDef* fill = AddNode(&g, "fill", "Fill", {"dims", "v"}, dtype);
    SetAttr(fill, "index_type", DT_INT32);
    AddNode(&g, "zeros", "ZerosLike", {"fill"}, dtype);
    AddNode(&g, "ones", "OnesLike", {"fill"}, dtype);
    const std::vector<std::string> fetches = {"fill", "zeros", "ones"};
    Tensor v(dtype, TensorShape());
    if (dtype == DT_FLOAT) v.scalar<float>() = 2.5f;
    if (dtype == DT_INT64) v.scalar<int64_t>() = int64_t{1} << 40;
    CompareGpuCpu(g, {{"v", v}}, fetches, 0, 0, DataTypeString(dtype));
  }
}

TEST(GpuCwiseTest, BiasAddMatchesTheCpuInBothLayouts) {
  DFLOW_SKIP_WITHOUT_GPU();
  struct Case {
    std::string format;
    TensorShape value;
    int64_t channels;
  };
  const std::vector<Case> cases = {{"NHWC", TensorShape({2, 3, 4, 5}), 5},
                                   {"NCHW", TensorShape({2, 5, 3, 4}), 5},
                                   {"NHWC", TensorShape({7, 300}), 300},
                                   {"NCHW", TensorShape({7, 300}), 300},
                                   {"NHWC", TensorShape({0, 3}), 3}};
  int seed = 1;
  for (const Case& c : cases) {
    tensorflow::GraphDef g;
    AddPlaceholder(&g, "x");
    AddPlaceholder(&g, "b");
    SetAttr(AddNode(&g, "y", "BiasAdd", {"x", "b"}), "data_format", c.format);
    CompareGpuCpu(g,
                  {{"x", RandomTensor(c.value, seed++)},
                   {"b", RandomTensor(TensorShape({c.channels}), seed++)}},
                  {"y"}, kRtol, kAtol, c.format + " " + c.value.DebugString());
  }
  tensorflow::GraphDef g;
  AddPlaceholder(&g, "x");
  AddPlaceholder(&g, "b");
  AddNode(&g, "y", "BiasAdd", {"x", "b"});
  absl::Status s = GpuRunStatus(
      g, {{"x", RandomTensor(TensorShape({2, 3}), 1)}, {"b", RandomTensor(TensorShape({4}), 2)}},
      {"y"});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
}

// Shape ops on device tensors; Reshape, ExpandDims and Squeeze feed a GPU op.
TEST(GpuShapeOpsTest, ShapeOpsMatchTheCpu) {
  DFLOW_SKIP_WITHOUT_GPU();
  tensorflow::GraphDef g;
  AddPlaceholder(&g, "x");
  AddNode(&g, "neg", "Neg", {"x"});
  AddNode(&g, "shape", "Shape", {"neg"});
  SetAttr(AddNode(&g, "shape64", "Shape", {"neg"}), "out_type", DT_INT64);
  AddNode(&g, "size", "Size", {"neg"});
  AddNode(&g, "rank", "Rank", {"neg"});
  AddHostConst(&g, "target", Tensor::Vec<int32_t>({-1, 1, 5}));
  AddNode(&g, "reshaped", "Reshape", {"neg", "target"});
  AddHostConst(&g, "axis", Tensor::Scalar<int32_t>(-1));
  AddNode(&g, "expanded", "ExpandDims", {"reshaped", "axis"});
  AddNode(&g, "squeezed", "Squeeze", {"expanded"});
  AddNode(&g, "out", "Square", {"squeezed"});
  CompareGpuCpu(g, {{"x", RandomTensor(TensorShape({3, 4, 5}), 1)}},
                {"shape", "shape64", "size", "rank", "expanded", "out"}, 0, 0, "shape ops");
  absl::Status s = GpuRunStatus(g, {{"x", RandomTensor(TensorShape({3, 4, 7}), 1)}}, {"out"});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
}

TEST(GpuShapeOpsTest, TileBroadcastToAndBroadcastGradientArgsMatchTheCpu) {
  DFLOW_SKIP_WITHOUT_GPU();
  tensorflow::GraphDef g;
  AddPlaceholder(&g, "x");
  AddHostConst(&g, "multiples", Tensor::Vec<int32_t>({2, 1, 4}));
  AddNode(&g, "tile", "Tile", {"x", "multiples"});
  AddPlaceholder(&g, "v");
  AddHostConst(&g, "to", Tensor::Vec<int64_t>({2, 3, 5}));
  SetAttr(AddNode(&g, "bcast", "BroadcastTo", {"v", "to"}), "Tidx", DT_INT64);
  AddHostConst(&g, "s0", Tensor::Vec<int32_t>({2, 3, 1}));
  AddHostConst(&g, "s1", Tensor::Vec<int32_t>({3, 5}));
  tensorflow::NodeDef* bga = AddNode(&g, "bga", "BroadcastGradientArgs", {"s0", "s1"}, DT_INT32);
  (void)bga;
  CompareGpuCpu(g,
                {{"x", RandomTensor(TensorShape({2, 3, 1}), 1)},
                 {"v", RandomTensor(TensorShape({3, 1}), 2)}},
                {"tile", "bcast", "bga", "bga:1"}, 0, 0, "tile");
}

}  // namespace
}  // namespace gpu
}  // namespace dflow
