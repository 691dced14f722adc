// Array ops (array_ops.cc, shape_ops.cc, slice_ops.cc, transpose_ops.cc):
// kernels against TensorFlow's outputs (tests/data/array_ops_golden.json,
// written by tests/data/gen_array_reference.py), shape functions on partial
// shapes and constant inputs, and bad input giving TensorFlow's errors.
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "dflow/framework/attr_util.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/framework/test_data_dir.h"
#include "dflow/ops/op_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace dflow {
namespace {

using ::testing::HasSubstr;
constexpr int64_t U = kUnknownDim;

// --- helpers -----------------------------------------------------------------

Tensor I32(const std::vector<int32_t>& v) { return Tensor::Vec<int32_t>(v); }
Tensor F32(const std::vector<float>& v, const TensorShape& shape) {
  return Tensor::FromVector<float>(v, shape);
}
// arange(n) + offset, as float.
Tensor Arange(const TensorShape& shape, float offset = 0) {
  Tensor t(DT_FLOAT, shape);
  for (int64_t i = 0; i < t.NumElements(); ++i) t.flat<float>()[i] = offset + i;
  return t;
}

// Runs a kernel expected to fail and returns its message.
std::string ErrorOf(OpTest& t) {
  absl::StatusOr<std::vector<Tensor>> out = t.Run();
  EXPECT_FALSE(out.ok()) << "expected an error";
  return out.ok() ? "" : std::string(out.status().message());
}

// Runs a kernel expected to succeed with one output.
Tensor Run1(OpTest& t) {
  absl::StatusOr<std::vector<Tensor>> out = t.Run();
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok() || out->empty()) return Tensor();
  return (*out)[0];
}

tensorflow::NodeDef Node(const std::string& op) {
  tensorflow::NodeDef n;
  n.set_name("n");
  n.set_op(op);
  return n;
}

// The one output shape, or the error message prefixed "error: ".
std::string InferOne(const tensorflow::NodeDef& node, std::vector<PartialShape> shapes,
                     std::vector<const Tensor*> tensors = {}) {
  absl::StatusOr<std::vector<PartialShape>> out = Infer(node, std::move(shapes), tensors);
  if (!out.ok()) return "error: " + std::string(out.status().message());
  return out->empty() ? "none" : (*out)[0].DebugString();
}

// --- golden values from TensorFlow ---------------------------------------------

// Sets the dtype attrs `op` needs for float data and int32 indices.
void SetTypeAttrs(const std::string& op, DataType data, tensorflow::NodeDef* n) {
  const std::map<std::string, std::vector<std::string>> kIndexAttrs = {
      {"StridedSlice", {"Index"}},        {"Slice", {"Index"}},   {"Transpose", {"Tperm"}},
      {"Tile", {"Tmultiples"}},           {"ConcatV2", {"Tidx"}}, {"Pack", {}},
      {"GatherV2", {"Tindices", "Taxis"}}};
  SetAttr(n, op == "GatherV2" ? "Tparams" : "T", data);
  for (const std::string& a : kIndexAttrs.at(op)) SetAttr(n, a, DT_INT32);
}

// A golden value (arange + offset, as float) as it reads in `dtype`: the
// tests run every case in several dtypes to cover each element size.
std::string Converted(double v, DataType dtype) {
  const int i = static_cast<int>(v);
  switch (dtype) {
    case DT_INT64:
      return std::to_string(i);
    case DT_UINT8:
      return std::to_string(i % 251);
    case DT_STRING:
      return "s" + std::to_string(i);
    default:
      return Tensor::Scalar(static_cast<float>(v)).ValueString(0);
  }
}

// Data input i of a golden case: arange + 100 * i in `dtype`.
Tensor GoldenData(const TensorShape& shape, int i, DataType dtype) {
  Tensor t(dtype, shape);
  for (int64_t k = 0; k < t.NumElements(); ++k) {
    const std::string v = Converted(100.0 * i + k, dtype);
    switch (dtype) {
      case DT_FLOAT:
        t.flat<float>()[k] = std::stof(v);
        break;
      case DT_INT64:
        t.flat<int64_t>()[k] = std::stoll(v);
        break;
      case DT_UINT8:
        t.flat<uint8_t>()[k] = static_cast<uint8_t>(std::stoi(v));
        break;
      case DT_STRING:
        t.flat<std::string>()[k] = v;
        break;
      default:
        ADD_FAILURE() << "unexpected dtype";
    }
  }
  return t;
}

Tensor GoldenIndex(const nlohmann::json& j) {
  const std::vector<int64_t> shape = j["shape"];
  const std::vector<int32_t> values = j["values"];
  return Tensor::FromVector<int32_t>(values, TensorShape(shape));
}

nlohmann::json LoadGolden() {
  std::ifstream in(TestDataDir() + "/array_ops_golden.json");
  EXPECT_TRUE(in.good()) << "missing tests/data/array_ops_golden.json";
  return in.good() ? nlohmann::json::parse(in)["cases"] : nlohmann::json::array();
}

// Runs golden case `c` with data of `dtype`; returns its output.
absl::StatusOr<Tensor> RunGolden(const nlohmann::json& c, DataType dtype) {
  const std::string op = c["op"];
  OpTest t(op);
  SetTypeAttrs(op, dtype, &t.node_def());
  for (const auto& [name, value] : c["attrs"].items()) t.Attr(name, value.get<int64_t>());
  for (size_t i = 0; i < c["data"].size(); ++i) {
    const std::vector<int64_t> shape = c["data"][i];
    t.Input(GoldenData(TensorShape(shape), static_cast<int>(i), dtype));
  }
  for (const auto& idx : c["index"]) t.Input(GoldenIndex(idx));
  ASSIGN_OR_RETURN(std::vector<Tensor> out, t.Run());
  return out.at(0);
}

void CheckGolden(const nlohmann::json& c, DataType dtype) {
  SCOPED_TRACE(c["name"].get<std::string>() + " as " + DataTypeString(dtype));
  absl::StatusOr<Tensor> out = RunGolden(c, dtype);
  if (c.contains("error")) {  // TensorFlow rejected this case.
    ASSERT_FALSE(out.ok()) << out->DebugString();
    EXPECT_THAT(std::string(out.status().message()), HasSubstr(c["error"].get<std::string>()));
    return;
  }
  ASSERT_TRUE(out.ok()) << out.status();
  const std::vector<int64_t> shape = c["out_shape"];
  const std::vector<double> want = c["out"];
  ASSERT_EQ(out->shape(), TensorShape(shape)) << out->DebugString();
  ASSERT_EQ(out->dtype(), dtype);
  for (int64_t k = 0; k < out->NumElements(); ++k) {
    ASSERT_EQ(out->ValueString(k), Converted(want[k], dtype)) << "at " << k;
  }
}

TEST(ArrayGoldenTest, KernelsMatchTensorFlow) {
  nlohmann::json cases = LoadGolden();
  EXPECT_GE(cases.size(), 250u);
  for (const auto& c : cases) {
    for (DataType dtype : {DT_FLOAT, DT_INT64, DT_UINT8, DT_STRING}) CheckGolden(c, dtype);
  }
}

// The shape function, given every input's shape and the index inputs'
// values, predicts exactly the shape the kernel produces.
TEST(ShapeFnGoldenTest, ShapeFunctionsMatchKernels) {
  for (const auto& c : LoadGolden()) {
    SCOPED_TRACE(c["name"].get<std::string>());
    tensorflow::NodeDef node = Node(c["op"]);
    SetTypeAttrs(c["op"], DT_FLOAT, &node);
    for (const auto& [name, value] : c["attrs"].items()) SetAttr(&node, name, value.get<int64_t>());
    std::vector<PartialShape> shapes;
    std::vector<Tensor> index;
    for (const auto& d : c["data"]) shapes.push_back(PartialShape(d.get<std::vector<int64_t>>()));
    for (const auto& idx : c["index"]) index.push_back(GoldenIndex(idx));
    std::vector<const Tensor*> tensors(shapes.size(), nullptr);
    for (const Tensor& t : index) {
      shapes.push_back(PartialShape(t.shape()));
      tensors.push_back(&t);
    }
    absl::StatusOr<std::vector<PartialShape>> out = Infer(node, shapes, tensors);
    if (c.contains("error")) {
      ASSERT_FALSE(out.ok()) << (*out)[0].DebugString();
      EXPECT_THAT(std::string(out.status().message()), HasSubstr(c["error"].get<std::string>()));
      continue;
    }
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0], PartialShape(c["out_shape"].get<std::vector<int64_t>>()))
        << (*out)[0].DebugString();
  }
}

// --- Const, Placeholder, Identity ---------------------------------------------

TEST(ArrayConstTest, OutputsTheValueWithoutCopying) {
  OpTest t("Const");
  Tensor value = F32({1, 2, 3, 4, 5, 6}, {2, 3});
  t.Attr("value", value).Attr("dtype", DT_FLOAT);
  Tensor out = Run1(t);
  ExpectTensorEq<float>(out, {1, 2, 3, 4, 5, 6}, {2, 3});

  OpTest s("Const");
  s.Attr("value", Tensor::Vec<std::string>({"a", "bc"})).Attr("dtype", DT_STRING);
  Tensor str = Run1(s);
  ASSERT_EQ(str.NumElements(), 2);
  EXPECT_EQ(str.flat<std::string>()[1], "bc");
}

TEST(ArrayConstTest, DtypeMismatchIsAnError) {
  OpTest t("Const");
  t.Attr("value", F32({1}, {1})).Attr("dtype", DT_INT32);
  EXPECT_THAT(ErrorOf(t), HasSubstr("Type mismatch between value (float) and dtype (int32)"));
}

TEST(ArrayPlaceholderTest, UnfedPlaceholderGivesTensorFlowsMessage) {
  struct Case {
    tensorflow::TensorShapeProto shape;
    std::string want;
  };
  auto proto = [](PartialShape s) {
    tensorflow::TensorShapeProto p;
    s.AsProto(&p);
    return p;
  };
  const std::string base = "You must feed a value for placeholder tensor 'x' with dtype float";
  for (const Case& c : std::vector<Case>{{proto(PartialShape({2, 3})), base + " and shape [2,3]"},
                                         {proto(PartialShape({U, 3})), base + " and shape [?,3]"},
                                         {proto(PartialShape::Unknown()), base},
                                         {proto(PartialShape::Scalar()), base}}) {
    OpTest t("Placeholder", "x");
    t.Attr("dtype", DT_FLOAT).Attr("shape", c.shape);
    absl::StatusOr<std::vector<Tensor>> out = t.Run();
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(out.status().message(), c.want);
  }
  OpTest no_shape("Placeholder", "x");  // The default shape is unknown rank.
  no_shape.Attr("dtype", DT_FLOAT);
  EXPECT_EQ(ErrorOf(no_shape), base);
}

TEST(ArrayPlaceholderTest, WithDefaultForwardsItsInput) {
  OpTest t("PlaceholderWithDefault");
  Tensor in = F32({1, 2}, {2});
  t.Attr("dtype", DT_FLOAT).Attr("shape", TensorShape({2})).Input(in);
  Tensor out = Run1(t);
  EXPECT_TRUE(out.SharesBufferWith(in));
}

TEST(ArrayIdentityTest, SharesTheInputBuffer) {
  for (DataType dtype : {DT_FLOAT, DT_STRING, DT_BOOL}) {
    OpTest t("Identity");
    Tensor in(dtype, TensorShape({3}));
    t.Attr("T", dtype).Input(in);
    Tensor out = Run1(t);
    EXPECT_TRUE(out.SharesBufferWith(in)) << DataTypeString(dtype);
    EXPECT_EQ(out.shape(), in.shape());
  }
}

TEST(ArrayIdentityTest, IdentityNForwardsEveryInput) {
  OpTest t("IdentityN");
  Tensor a = F32({1}, {1});
  Tensor b = Tensor::Vec<int64_t>({4, 5});
  t.Attr("T", std::vector<DataType>{DT_FLOAT, DT_INT64}).Input(a).Input(b);
  absl::StatusOr<std::vector<Tensor>> out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 2u);
  EXPECT_TRUE((*out)[0].SharesBufferWith(a));
  EXPECT_TRUE((*out)[1].SharesBufferWith(b));
}

TEST(ArrayIdentityTest, NoOpRunsAndCheapOpsAreMarkedCheap) {
  OpTest t("NoOp");
  absl::StatusOr<std::vector<Tensor>> out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(out->empty());

  tensorflow::NodeDef id = Node("Identity");
  id.add_input("x");
  SetAttr(&id, "T", DT_FLOAT);
  absl::StatusOr<std::unique_ptr<OpKernel>> k =
      KernelRegistry::Global()->CreateKernel(TestCpuDevice(), id);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_FALSE((*k)->IsExpensive());
  tensorflow::NodeDef reshape = Node("Reshape");
  reshape.add_input("x");
  reshape.add_input("s");
  SetAttr(&reshape, "T", DT_FLOAT);
  k = KernelRegistry::Global()->CreateKernel(TestCpuDevice(), reshape);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_FALSE((*k)->IsExpensive());
}

// --- Fill, ZerosLike, OnesLike, Range --------------------------------------------

TEST(ArrayFillTest, FillsEveryElement) {
  OpTest t("Fill");
  t.Attr("T", DT_FLOAT).Attr("index_type", DT_INT64);
  t.Input(Tensor::Vec<int64_t>({2, 3})).Input(Tensor::Scalar(2.5f));
  ExpectTensorEq<float>(Run1(t), std::vector<float>(6, 2.5f), {2, 3});

  OpTest s("Fill");
  s.Attr("T", DT_STRING).Input(I32({2})).Input(Tensor::Scalar(std::string("ab")));
  Tensor str = Run1(s);
  ASSERT_EQ(str.NumElements(), 2);
  EXPECT_EQ(str.flat<std::string>()[1], "ab");

  OpTest empty("Fill");
  empty.Attr("T", DT_INT32).Input(I32({0, 4})).Input(Tensor::Scalar<int32_t>(7));
  EXPECT_EQ(Run1(empty).shape(), TensorShape({0, 4}));
}

TEST(ArrayFillTest, BadInputs) {
  OpTest neg("Fill");
  neg.Attr("T", DT_FLOAT).Input(I32({2, -1})).Input(Tensor::Scalar(1.0f));
  EXPECT_THAT(ErrorOf(neg), HasSubstr("Dimension -1 must be >= 0"));
  OpTest matrix("Fill");
  matrix.Attr("T", DT_FLOAT).Input(Tensor::FromVector<int32_t>({2}, {1, 1}));
  matrix.Input(Tensor::Scalar(1.0f));
  EXPECT_THAT(ErrorOf(matrix), HasSubstr("dims must represent a vector, got shape [1,1]"));
  OpTest value("Fill");
  value.Attr("T", DT_FLOAT).Input(I32({2})).Input(F32({1, 2}, {2}));
  EXPECT_THAT(ErrorOf(value), HasSubstr("value must be a scalar, got shape [2]"));
  OpTest huge("Fill");
  huge.Attr("T", DT_FLOAT).Input(Tensor::Vec<int64_t>({int64_t{1} << 40, 1 << 20}));
  huge.Attr("index_type", DT_INT64).Input(Tensor::Scalar(1.0f));
  absl::StatusOr<std::vector<Tensor>> out = huge.Run();
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted) << out.status();
}

TEST(ArrayZerosOnesLikeTest, MatchInputShape) {
  OpTest z("ZerosLike");
  z.Attr("T", DT_FLOAT).Input(F32({1, 2, 3}, {3, 1}));
  ExpectTensorEq<float>(Run1(z), {0, 0, 0}, {3, 1});
  OpTest zs("ZerosLike");
  zs.Attr("T", DT_STRING).Input(Tensor::Vec<std::string>({"a"}));
  EXPECT_EQ(Run1(zs).flat<std::string>()[0], "");
  OpTest o("OnesLike");
  o.Attr("T", DT_INT64).Input(Tensor::Vec<int64_t>({5, 6}));
  ExpectTensorEq<int64_t>(Run1(o), {1, 1}, {2});
  OpTest ob("OnesLike");
  ob.Attr("T", DT_BOOL).Input(Tensor::Vec<bool>({false}));
  ExpectTensorEq<bool>(Run1(ob), {true}, {1});
  OpTest os("OnesLike");  // TensorFlow allows no strings here.
  os.Attr("T", DT_STRING).Input(Tensor::Vec<std::string>({"a"}));
  EXPECT_FALSE(os.Run().ok());
}

template <typename T>
Tensor RunRange(T start, T limit, T delta) {
  OpTest t("Range");
  t.Attr("Tidx", DataTypeToEnum<T>::value);
  t.Input(Tensor::Scalar(start)).Input(Tensor::Scalar(limit)).Input(Tensor::Scalar(delta));
  return Run1(t);
}

TEST(ArrayRangeTest, ValuesMatchTensorFlow) {
  ExpectTensorEq<int32_t>(RunRange<int32_t>(-3, 10, 4), {-3, 1, 5, 9}, {4});
  ExpectTensorEq<int64_t>(RunRange<int64_t>(5, 5, 1), {}, {0});
  ExpectTensorEq<int64_t>(RunRange<int64_t>(5, -2, -3), {5, 2, -1}, {3});
  // TensorFlow computes start + i * delta (not a running sum).
  ExpectTensorEq<double>(
      RunRange<double>(1.0, -2.0, -0.7),
      {1.0, 0.30000000000000004, -0.3999999999999999, -1.0999999999999996, -1.7999999999999998},
      {5}, 0);
  Tensor f = RunRange<float>(0.0f, 1.0f, 0.1f);
  ASSERT_EQ(f.NumElements(), 10);
  EXPECT_EQ(f.flat<float>()[9], 9.0f * 0.1f);  // 0x1.ccccce p-1, as TensorFlow.
  ExpectTensorEq<float>(RunRange<float>(0.1f, 1.0f, 0.3f), {0.1f, 0.4f, 0.7f}, {3});
}

TEST(ArrayRangeTest, BadInputs) {
  auto error = [](int32_t a, int32_t b, int32_t d) {
    OpTest t("Range");
    t.Input(Tensor::Scalar(a)).Input(Tensor::Scalar(b)).Input(Tensor::Scalar(d));
    return ErrorOf(t);
  };
  EXPECT_THAT(error(0, 5, 0), HasSubstr("Requires delta != 0: 0"));
  EXPECT_THAT(error(5, 1, 1), HasSubstr("Requires start <= limit when delta > 0: 5/1"));
  EXPECT_THAT(error(1, 5, -1), HasSubstr("Requires start >= limit when delta < 0: 1/5"));
  OpTest vec("Range");
  vec.Input(I32({1, 2})).Input(Tensor::Scalar(5)).Input(Tensor::Scalar(1));
  EXPECT_THAT(ErrorOf(vec), HasSubstr("start must be a scalar, not shape [2]"));
  OpTest full("Range");  // 2^64 - 1 elements: more than int64 counts.
  full.Attr("Tidx", DT_INT64).Input(Tensor::Scalar(std::numeric_limits<int64_t>::min()));
  full.Input(Tensor::Scalar(std::numeric_limits<int64_t>::max())).Input(Tensor::Scalar<int64_t>(1));
  EXPECT_THAT(ErrorOf(full), HasSubstr("too big"));
  OpTest huge("Range");
  huge.Attr("Tidx", DT_INT64).Input(Tensor::Scalar<int64_t>(0));
  huge.Input(Tensor::Scalar<int64_t>(int64_t{1} << 62)).Input(Tensor::Scalar<int64_t>(1));
  absl::StatusOr<std::vector<Tensor>> out = huge.Run();
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted);
}

// --- Pack, ConcatV2, Transpose, Tile (values: see the golden test) ---------------

TEST(ArrayPackTest, BadInputs) {
  OpTest t("Pack");
  t.Attr("T", DT_FLOAT).Attr("N", 2).Input(F32({1, 2}, {2})).Input(F32({1, 2, 3}, {3}));
  EXPECT_THAT(ErrorOf(t), HasSubstr("Shapes of all inputs must match: values[0].shape = [2] "
                                    "!= values[1].shape = [3]"));
  OpTest axis("Pack");
  axis.Attr("T", DT_FLOAT).Attr("N", 2).Attr("axis", 2);
  axis.Input(F32({1, 2}, {2})).Input(F32({1, 2}, {2}));
  EXPECT_THAT(ErrorOf(axis), HasSubstr("axis = 2 not in [-2, 2)"));
}

TEST(ArrayConcatTest, BadInputs) {
  auto concat = [](Tensor a, Tensor b, int32_t axis) {
    OpTest t("ConcatV2");
    t.Attr("T", DT_FLOAT).Attr("N", 2).Input(a).Input(b).Input(Tensor::Scalar(axis));
    return ErrorOf(t);
  };
  EXPECT_THAT(concat(Arange({2, 3}), Arange({2}), 0),
              HasSubstr("Ranks of all input tensors should match: shape[0] = [2,3] vs. "
                        "shape[1] = [2]"));
  EXPECT_THAT(concat(Arange({2, 3}), Arange({3, 3}), 1),
              HasSubstr("Dimension 0 in both shapes must be equal: shape[0] = [2,3] vs. "
                        "shape[1] = [3,3]"));
  EXPECT_THAT(concat(Arange({2, 3}), Arange({2, 3}), 2),
              HasSubstr("Expected concatenating dimensions in the range [-2, 2), but got 2"));
  EXPECT_THAT(concat(Arange({2, 3}), Arange({2, 3}), -3), HasSubstr("but got -3"));
  EXPECT_THAT(concat(Arange({}), Arange({}), 0), HasSubstr("Can't concatenate scalars"));
}

TEST(ArrayConcatTest, StringsAndInt64Axis) {
  OpTest t("ConcatV2");
  t.Attr("T", DT_STRING).Attr("N", 2).Attr("Tidx", DT_INT64);
  t.Input(Tensor::Vec<std::string>({"a"})).Input(Tensor::Vec<std::string>({"b", "c"}));
  t.Input(Tensor::Scalar<int64_t>(-1));
  Tensor out = Run1(t);
  ASSERT_EQ(out.NumElements(), 3);
  EXPECT_EQ(out.flat<std::string>()[2], "c");
}

TEST(ArrayTransposeTest, IdentityPermutationSharesTheBuffer) {
  Tensor x = Arange({2, 1, 3});
  OpTest t("Transpose");
  t.Attr("T", DT_FLOAT).Input(x).Input(I32({1, 0, 2}));  // Moves only a size-1 dim.
  Tensor out = Run1(t);
  EXPECT_EQ(out.shape(), TensorShape({1, 2, 3}));
  EXPECT_TRUE(out.SharesBufferWith(x));
}

TEST(ArrayTransposeTest, BoolsAndLargeMatrices) {
  OpTest b("Transpose");
  b.Attr("T", DT_BOOL).Input(Tensor::FromVector<bool>({true, false, false, false}, {2, 2}));
  b.Input(I32({1, 0}));
  ExpectTensorEq<bool>(Run1(b), {true, false, false, false}, {2, 2});
  // Big enough to be split across the intra-op pool.
  Tensor x = Arange({300, 517});
  OpTest t("Transpose");
  t.Attr("T", DT_FLOAT).Input(x).Input(I32({1, 0}));
  Tensor y = Run1(t);
  ASSERT_EQ(y.shape(), TensorShape({517, 300}));
  for (int64_t i = 0; i < 517; ++i) {
    for (int64_t j = 0; j < 300; ++j) {
      ASSERT_EQ(y.flat<float>()[i * 300 + j], x.flat<float>()[j * 517 + i]);
    }
  }
}

TEST(ArrayTransposeTest, BadPermutations) {
  auto transpose = [](std::vector<int32_t> perm) {
    OpTest t("Transpose");
    t.Attr("T", DT_FLOAT).Input(Arange({2, 3})).Input(I32(perm));
    return ErrorOf(t);
  };
  EXPECT_THAT(transpose({0, 1, 2}),
              HasSubstr("transpose expects a vector of size 2. But input(1) is a vector of "
                        "size 3"));
  EXPECT_THAT(transpose({0, 0}), HasSubstr("1 is missing from {0,0}."));
  EXPECT_THAT(transpose({0, 2}), HasSubstr("2 is out of range [0 .. 2)"));
  EXPECT_THAT(transpose({-3, 0}), HasSubstr("-3 is out of range [0 .. 2)"));
}

TEST(ArrayTileTest, AllOnesSharesAndBadMultiples) {
  Tensor x = Arange({2, 3});
  OpTest same("Tile");
  same.Attr("T", DT_FLOAT).Input(x).Input(I32({1, 1}));
  EXPECT_TRUE(Run1(same).SharesBufferWith(x));
  OpTest len("Tile");
  len.Attr("T", DT_FLOAT).Input(x).Input(I32({1, 2, 3}));
  EXPECT_THAT(ErrorOf(len), HasSubstr("Expected multiples argument to be a vector of length "
                                      "2 but got length 3"));
  OpTest neg("Tile");
  neg.Attr("T", DT_FLOAT).Input(x).Input(I32({1, -2}));
  EXPECT_THAT(ErrorOf(neg), HasSubstr("Expected multiples[1] >= 0, but got -2"));
  OpTest overflow("Tile");
  overflow.Attr("T", DT_FLOAT).Attr("Tmultiples", DT_INT64).Input(x);
  overflow.Input(Tensor::Vec<int64_t>({1, int64_t{1} << 62}));
  EXPECT_THAT(ErrorOf(overflow), HasSubstr("overflows dimension 3"));
  OpTest scalar("Tile");
  scalar.Attr("T", DT_FLOAT).Input(Tensor::Scalar(4.0f)).Input(I32({}));
  ExpectTensorEq<float>(Run1(scalar), {4.0f}, {});
}

// --- Shape, Size, Rank, Reshape, ExpandDims, Squeeze -------------------------------

TEST(ShapeOpsTest, ShapeSizeRank) {
  Tensor x = Arange({2, 0, 3});
  OpTest shape("Shape");
  shape.Attr("T", DT_FLOAT).Input(x);
  ExpectTensorEq<int32_t>(Run1(shape), {2, 0, 3}, {3});
  OpTest shape64("Shape");
  shape64.Attr("T", DT_FLOAT).Attr("out_type", DT_INT64).Input(Arange({}));
  ExpectTensorEq<int64_t>(Run1(shape64), {}, {0});
  OpTest size("Size");
  size.Attr("T", DT_FLOAT).Attr("out_type", DT_INT64).Input(Arange({4, 5}));
  ExpectTensorEq<int64_t>(Run1(size), {20}, {});
  OpTest rank("Rank");
  rank.Attr("T", DT_STRING).Input(Tensor(DT_STRING, TensorShape({1, 1, 1})));
  ExpectTensorEq<int32_t>(Run1(rank), {3}, {});
}

Tensor Reshape(const Tensor& x, std::vector<int32_t> shape) {
  OpTest t("Reshape");
  t.Attr("T", x.dtype()).Input(x).Input(I32(shape));
  return Run1(t);
}

std::string ReshapeError(const TensorShape& in, std::vector<int32_t> shape) {
  OpTest t("Reshape");
  t.Attr("T", DT_FLOAT).Input(Arange(in)).Input(I32(shape));
  return ErrorOf(t);
}

TEST(ShapeOpsTest, ReshapeInfersMinusOneAndSharesTheBuffer) {
  Tensor x = Arange({2, 3});
  Tensor y = Reshape(x, {3, -1});
  EXPECT_EQ(y.shape(), TensorShape({3, 2}));
  EXPECT_TRUE(y.SharesBufferWith(x));
  EXPECT_EQ(Reshape(x, {-1}).shape(), TensorShape({6}));
  EXPECT_EQ(Reshape(Arange({1}), {}).shape(), TensorShape({}));
  // Empty tensors, as TensorFlow resolves them.
  EXPECT_EQ(Reshape(Arange({0, 6}), {0, -1, 2}).shape(), TensorShape({0, 3, 2}));
  EXPECT_EQ(Reshape(Arange({2, 0, 3}), {-1, 0}).shape(), TensorShape({6, 0}));
  EXPECT_EQ(Reshape(Arange({0, 3}), {-1, 0, 5}).shape(), TensorShape({0, 0, 5}));
  EXPECT_EQ(Reshape(Arange({0, 4}), {3, -1}).shape(), TensorShape({3, 0}));
  // A legacy scalar shape means one dimension.
  OpTest legacy("Reshape");
  legacy.Attr("T", DT_FLOAT).Input(Arange({1, 1})).Input(Tensor::Scalar<int32_t>(1));
  EXPECT_EQ(Run1(legacy).shape(), TensorShape({1}));
}

TEST(ShapeOpsTest, ReshapeErrors) {
  EXPECT_THAT(ReshapeError({2, 3}, {4, 2}),
              HasSubstr("Input to reshape is a tensor with 6 values, but the requested shape "
                        "has 8"));
  EXPECT_THAT(ReshapeError({2, 3}, {-1, 4}), HasSubstr("requires a multiple of 4"));
  EXPECT_THAT(ReshapeError({2, 3}, {-1, -1}),
              HasSubstr("Only one input size may be -1, not both 0 and 1"));
  EXPECT_THAT(ReshapeError({2, 3}, {-2, 3}), HasSubstr("Size 0 must be non-negative, not -2"));
  EXPECT_THAT(ReshapeError({6}, {-1, 0}), HasSubstr("requested shape has 0"));
  OpTest matrix("Reshape");
  matrix.Attr("T", DT_FLOAT).Input(Arange({6})).Input(Tensor::FromVector<int32_t>({6}, {1, 1}));
  EXPECT_THAT(ErrorOf(matrix), HasSubstr("sizes input must be 1-D, not [1,1]"));
}

TEST(ShapeOpsTest, ExpandDims) {
  Tensor x = Arange({2, 3});
  for (auto [axis, want] : std::vector<std::pair<int32_t, TensorShape>>{
           {0, {1, 2, 3}}, {2, {2, 3, 1}}, {-1, {2, 3, 1}}, {-3, {1, 2, 3}}}) {
    OpTest t("ExpandDims");
    t.Attr("T", DT_FLOAT).Input(x).Input(Tensor::Scalar(axis));
    Tensor y = Run1(t);
    EXPECT_EQ(y.shape(), want) << axis;
    EXPECT_TRUE(y.SharesBufferWith(x));
  }
  OpTest scalar("ExpandDims");
  scalar.Attr("T", DT_FLOAT).Attr("Tdim", DT_INT64).Input(Arange({}));
  scalar.Input(Tensor::Vec<int64_t>({-1}));  // A one-element vector is accepted.
  EXPECT_EQ(Run1(scalar).shape(), TensorShape({1}));
  for (int32_t bad : {3, -4}) {
    OpTest t("ExpandDims");
    t.Attr("T", DT_FLOAT).Input(x).Input(Tensor::Scalar(bad));
    EXPECT_THAT(ErrorOf(t), HasSubstr("Tried to expand dim index " + std::to_string(bad) +
                                      " for tensor with 2 dimensions."));
  }
  OpTest two("ExpandDims");
  two.Attr("T", DT_FLOAT).Input(x).Input(I32({1, 2}));
  EXPECT_THAT(ErrorOf(two), HasSubstr("'dim' must be a tensor with a single value"));
}

TEST(ShapeOpsTest, Squeeze) {
  Tensor x = Arange({1, 2, 1});
  auto squeeze = [&](std::vector<int64_t> dims) {
    OpTest t("Squeeze");
    t.Attr("T", DT_FLOAT).Attr("squeeze_dims", dims).Input(x);
    return t;
  };
  OpTest all = squeeze({});
  Tensor y = Run1(all);
  EXPECT_EQ(y.shape(), TensorShape({2}));
  EXPECT_TRUE(y.SharesBufferWith(x));
  OpTest last = squeeze({-1});
  EXPECT_EQ(Run1(last).shape(), TensorShape({1, 2}));
  OpTest dup = squeeze({0, 0, -3});
  EXPECT_EQ(Run1(dup).shape(), TensorShape({2, 1}));
  OpTest not_one = squeeze({1});
  EXPECT_THAT(ErrorOf(not_one),
              HasSubstr("Can not squeeze dim[1], expected a dimension of 1, got 2"));
  OpTest out_of_range = squeeze({3});
  EXPECT_THAT(ErrorOf(out_of_range),
              HasSubstr("Tried to squeeze dim index 3 for tensor with 3 dimensions."));
}

// --- Slice, StridedSlice, GatherV2 errors (values: see the golden test) -----------

TEST(SliceTest, SliceErrors) {
  auto slice = [](std::vector<int32_t> begin, std::vector<int32_t> size) {
    OpTest t("Slice");
    t.Attr("T", DT_FLOAT).Attr("Index", DT_INT32).Input(Arange({2, 3}));
    t.Input(I32(begin)).Input(I32(size));
    return ErrorOf(t);
  };
  EXPECT_THAT(slice({0, 0, 0}, {1, 1, 1}),
              HasSubstr("Expected begin and size arguments to be 1-D tensors of size 2, but "
                        "got shapes [3] and [3] instead."));
  EXPECT_THAT(slice({0, 4}, {1, -1}), HasSubstr("Expected begin[1] in [0, 3], but got 4"));
  EXPECT_THAT(slice({0, -1}, {1, 1}), HasSubstr("Expected begin[1] in [0, 3], but got -1"));
  EXPECT_THAT(slice({0, 1}, {1, 3}), HasSubstr("Expected size[1] in [0, 2], but got 3"));
  EXPECT_THAT(slice({0, 1}, {1, -2}), HasSubstr("Expected size[1] in [0, 2], but got -2"));
}

TEST(SliceTest, WholeSliceSharesTheBuffer) {
  Tensor x = Arange({2, 3});
  OpTest t("Slice");
  t.Attr("T", DT_FLOAT).Attr("Index", DT_INT64).Input(x);
  t.Input(Tensor::Vec<int64_t>({0, 0})).Input(Tensor::Vec<int64_t>({-1, 3}));
  EXPECT_TRUE(Run1(t).SharesBufferWith(x));
  OpTest s("StridedSlice");
  s.Attr("T", DT_FLOAT).Attr("Index", DT_INT32).Attr("ellipsis_mask", 1).Input(x);
  s.Input(I32({0})).Input(I32({0})).Input(I32({1}));
  EXPECT_TRUE(Run1(s).SharesBufferWith(x));
}

std::string StridedSliceError(std::vector<int32_t> b, std::vector<int32_t> e,
                              std::vector<int32_t> s, int ellipsis = 0, int shrink = 0) {
  OpTest t("StridedSlice");
  t.Attr("T", DT_FLOAT).Attr("Index", DT_INT32).Input(Arange({2, 3}));
  t.Attr("ellipsis_mask", ellipsis).Attr("shrink_axis_mask", shrink);
  t.Input(I32(b)).Input(I32(e)).Input(I32(s));
  return ErrorOf(t);
}

TEST(SliceTest, StridedSliceErrors) {
  EXPECT_THAT(StridedSliceError({0}, {1}, {0}), HasSubstr("strides[0] must be non-zero"));
  EXPECT_THAT(StridedSliceError({0}, {1, 2}, {1}),
              HasSubstr("Expected begin, end, and strides to be 1D equal size tensors, but got "
                        "shapes [1], [2], and [1] instead."));
  EXPECT_THAT(StridedSliceError({5}, {6}, {1}, 0, 1),
              HasSubstr("slice index 5 of dimension 0 out of bounds."));
  EXPECT_THAT(StridedSliceError({-3}, {0}, {1}, 0, 1),
              HasSubstr("slice index -1 of dimension 0 out of bounds."));  // -3 + 2
  EXPECT_THAT(StridedSliceError({1}, {0}, {-1}, 0, 1),
              HasSubstr("only stride 1 allowed on non-range indexing."));
  EXPECT_THAT(StridedSliceError({0, 0}, {1, 1}, {1, 1}, 3),
              HasSubstr("Multiple ellipses in slice spec not allowed"));
  EXPECT_THAT(StridedSliceError({0, 0, 0}, {1, 1, 1}, {1, 1, 1}),
              HasSubstr("Index out of range using input dim 2; input has only 2 dims"));
}

// StridedSliceGrad(shape, begin, end, strides, dy): values from TensorFlow 2.21's
// gen_array_ops.strided_slice_grad with the same arguments.
Tensor StridedSliceGrad(std::vector<int32_t> shape, std::vector<int32_t> b, std::vector<int32_t> e,
                        std::vector<int32_t> s, const Tensor& dy, int end_mask = 0, int shrink = 0,
                        std::string* error = nullptr) {
  OpTest t("StridedSliceGrad");
  t.Attr("T", dy.dtype()).Attr("Index", DT_INT32).Attr("end_mask", end_mask);
  t.Attr("shrink_axis_mask", shrink);
  t.Input(I32(shape)).Input(I32(b)).Input(I32(e)).Input(I32(s)).Input(dy);
  if (error != nullptr) {
    *error = ErrorOf(t);
    return Tensor();
  }
  return Run1(t);
}

TEST(SliceTest, StridedSliceGradScattersDyIntoZeros) {
  ExpectTensorEq<float>(
      StridedSliceGrad({3, 4}, {0, 1}, {3, 4}, {2, 2}, F32({1, 2, 3, 4}, {2, 2})),
      {0, 1, 0, 2, 0, 0, 0, 0, 0, 3, 0, 4}, {3, 4});
  // x[1] of a [2] vector: shrink_axis_mask, a scalar dy.
  ExpectTensorEq<float>(StridedSliceGrad({2}, {1}, {2}, {1}, Tensor::Scalar(5.0f), 0, 1), {0, 5},
                        {2});
  // x[-1::-2] of a [4] vector.
  ExpectTensorEq<int32_t>(StridedSliceGrad({4}, {-1}, {0}, {-2}, I32({7, 8}), /*end_mask=*/1),
                          {0, 8, 0, 7}, {4});
  std::string error;
  StridedSliceGrad({3}, {0}, {2}, {1}, F32({1, 2, 3}, {3}), 0, 0, &error);
  EXPECT_THAT(error, HasSubstr("shape of dy was [3] instead of [2]"));
  StridedSliceGrad({-3}, {0}, {2}, {1}, F32({1, 2}, {2}), 0, 0, &error);
  EXPECT_FALSE(error.empty());
}

std::string GatherError(const Tensor& params, const Tensor& indices, int32_t axis,
                        int batch_dims = 0) {
  OpTest t("GatherV2");
  t.Attr("Tparams", DT_FLOAT).Attr("Tindices", indices.dtype()).Attr("Taxis", DT_INT32);
  t.Attr("batch_dims", batch_dims).Input(params).Input(indices).Input(Tensor::Scalar(axis));
  return ErrorOf(t);
}

TEST(SliceTest, GatherErrorsNameTheIndexAndRange) {
  Tensor x = Arange({2, 3});
  EXPECT_THAT(GatherError(x, Tensor::FromVector<int32_t>({0, 1, 7, 0}, {2, 2}), 1),
              HasSubstr("indices[1,0] = 7 is not in [0, 3)"));
  EXPECT_THAT(GatherError(x, Tensor::Vec<int64_t>({-1}), 0),
              HasSubstr("indices[0] = -1 is not in [0, 2)"));
  EXPECT_THAT(GatherError(Arange({0, 3}), I32({0}), 0),
              HasSubstr("indices[0] = 0 is not in [0, 0)"));
  EXPECT_THAT(GatherError(x, I32({0}), 2),
              HasSubstr("Expected axis in the range [-2, 2), but got 2"));
  EXPECT_THAT(GatherError(x, I32({0}), -3), HasSubstr("but got -3"));
  EXPECT_THAT(GatherError(Arange({}), I32({0}), 0),
              HasSubstr("params must be at least 1 dimensional"));
  Tensor idx = Tensor::FromVector<int32_t>({0, 1}, {2, 1});
  EXPECT_THAT(GatherError(x, idx, 0, 1),
              HasSubstr("batch_dims (1) must be less than or equal to axis (0)."));
  EXPECT_THAT(GatherError(x, idx, 1, 2),
              HasSubstr("batch_dims (2) must be less than rank(params) (2)."));
  EXPECT_THAT(GatherError(x, idx, 1, -3),
              HasSubstr("Expected batch_dims in the range [-2, 2], but got -3"));
  EXPECT_THAT(GatherError(x, Tensor::FromVector<int32_t>({0, 1, 0}, {3, 1}), 1, 1),
              HasSubstr("params.shape[0]: 2 should be equal to indices.shape[0]: 3"));
  OpTest vec_axis("GatherV2");
  vec_axis.Attr("Tparams", DT_FLOAT).Attr("Tindices", DT_INT32).Attr("Taxis", DT_INT32);
  vec_axis.Input(x).Input(I32({0})).Input(I32({0}));
  EXPECT_THAT(ErrorOf(vec_axis), HasSubstr("axis must be scalar"));
}

TEST(SliceTest, GatherLargeRowsInParallel) {
  Tensor params = Arange({1000, 64});
  std::vector<int64_t> idx(5000);
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = (i * 7919) % 1000;
  OpTest t("GatherV2");
  t.Attr("Tparams", DT_FLOAT).Attr("Tindices", DT_INT64).Attr("Taxis", DT_INT64);
  t.Input(params).Input(Tensor::Vec<int64_t>(idx)).Input(Tensor::Scalar<int64_t>(0));
  Tensor out = Run1(t);
  ASSERT_EQ(out.shape(), TensorShape({5000, 64}));
  for (size_t i = 0; i < idx.size(); ++i) {
    ASSERT_EQ(out.flat<float>()[i * 64 + 5], idx[i] * 64 + 5) << i;
  }
}

// --- shape functions on partial shapes ----------------------------------------------

tensorflow::NodeDef Typed(const std::string& op, const std::string& attr = "T") {
  tensorflow::NodeDef n = Node(op);
  SetAttr(&n, attr, DT_FLOAT);
  return n;
}

TEST(ShapeFnTest, ConstPlaceholderIdentity) {
  tensorflow::NodeDef c = Node("Const");
  SetAttr(&c, "value", Arange({2, 3}));
  SetAttr(&c, "dtype", DT_FLOAT);
  EXPECT_EQ(InferOne(c, {}), "[2,3]");
  tensorflow::NodeDef p = Node("Placeholder");
  SetAttr(&p, "dtype", DT_FLOAT);
  EXPECT_EQ(InferOne(p, {}), "<unknown>");
  tensorflow::TensorShapeProto partial;
  PartialShape({U, 3}).AsProto(&partial);
  SetAttr(&p, "shape", partial);
  EXPECT_EQ(InferOne(p, {}), "[?,3]");
  tensorflow::NodeDef pd = Node("PlaceholderWithDefault");
  SetAttr(&pd, "dtype", DT_FLOAT);
  SetAttr(&pd, "shape", partial);
  EXPECT_EQ(InferOne(pd, {PartialShape({2, 3})}), "[?,3]");
  EXPECT_THAT(InferOne(pd, {PartialShape({2, 4})}),
              HasSubstr("input shape [2,4] is not compatible with shape attr [?,3]"));
  EXPECT_EQ(InferOne(Typed("Identity"), {PartialShape({U, 2})}), "[?,2]");
  tensorflow::NodeDef n = Node("IdentityN");
  SetAttr(&n, "T", std::vector<DataType>{DT_FLOAT, DT_INT32});
  absl::StatusOr<std::vector<PartialShape>> out =
      Infer(n, {PartialShape({1}), PartialShape::Unknown()});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0], PartialShape({1}));
  EXPECT_EQ((*out)[1], PartialShape::Unknown());
}

TEST(ShapeOpsTest, ShapeNGivesEachInputsShape) {
  OpTest t("ShapeN");
  t.Attr("N", 2).Attr("T", DT_FLOAT).Attr("out_type", DT_INT64);
  t.Input(Arange({2, 0, 3})).Input(Arange({}));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 2);
  ExpectTensorEq<int64_t>((*out)[0], {2, 0, 3}, {3});
  ExpectTensorEq<int64_t>((*out)[1], {}, {0});
}

TEST(ShapeFnTest, ShapeSizeRankReshape) {
  EXPECT_EQ(InferOne(Typed("Shape"), {PartialShape({2, U})}), "[2]");
  EXPECT_EQ(InferOne(Typed("Shape"), {PartialShape::Unknown()}), "[?]");
  EXPECT_EQ(InferOne(Typed("Size"), {PartialShape::Unknown()}), "[]");
  EXPECT_EQ(InferOne(Typed("Rank"), {PartialShape({3})}), "[]");

  tensorflow::NodeDef r = Typed("Reshape");
  Tensor target = I32({3, -1});
  EXPECT_EQ(InferOne(r, {PartialShape({2, 3}), PartialShape({2})}, {nullptr, &target}), "[3,2]");
  EXPECT_EQ(InferOne(r, {PartialShape({U, 3}), PartialShape({2})}, {nullptr, &target}), "[3,?]");
  EXPECT_EQ(InferOne(r, {PartialShape({2, 3}), PartialShape({2})}), "[?,?]");
  EXPECT_EQ(InferOne(r, {PartialShape({2, 3}), PartialShape({1})}), "[6]");
  EXPECT_EQ(InferOne(r, {PartialShape({2, 3}), PartialShape({U})}), "<unknown>");
  Tensor bad = I32({4, 2});
  EXPECT_THAT(InferOne(r, {PartialShape({2, 3}), PartialShape({2})}, {nullptr, &bad}),
              HasSubstr("tensor with 6 values, but the requested shape has 8"));
  Tensor bad_multiple = I32({-1, 4});
  EXPECT_THAT(InferOne(r, {PartialShape({2, 3}), PartialShape({2})}, {nullptr, &bad_multiple}),
              HasSubstr("requires a multiple of 4"));
}

TEST(ShapeFnTest, ExpandDimsSqueeze) {
  tensorflow::NodeDef e = Typed("ExpandDims");
  Tensor minus_one = Tensor::Scalar<int32_t>(-1), four = Tensor::Scalar<int32_t>(4);
  EXPECT_EQ(InferOne(e, {PartialShape({2, U}), PartialShape({})}, {nullptr, &minus_one}),
            "[2,?,1]");
  EXPECT_EQ(InferOne(e, {PartialShape({2, U}), PartialShape({})}), "[?,?,?]");
  EXPECT_EQ(InferOne(e, {PartialShape::Unknown(), PartialShape({})}), "<unknown>");
  EXPECT_THAT(InferOne(e, {PartialShape({2, 3}), PartialShape({})}, {nullptr, &four}),
              HasSubstr("Tried to expand dim index 4 for tensor with 2 dimensions."));

  tensorflow::NodeDef s = Typed("Squeeze");
  EXPECT_EQ(InferOne(s, {PartialShape({1, 3, 1})}), "[3]");
  EXPECT_EQ(InferOne(s, {PartialShape({1, U, 1})}), "<unknown>");
  SetAttr(&s, "squeeze_dims", std::vector<int64_t>{0});
  EXPECT_EQ(InferOne(s, {PartialShape({U, 3})}), "[3]");
  EXPECT_THAT(InferOne(s, {PartialShape({2, 3})}),
              HasSubstr("Can not squeeze dim[0], expected a dimension of 1, got 2"));
  SetAttr(&s, "squeeze_dims", std::vector<int64_t>{5});
  EXPECT_THAT(InferOne(s, {PartialShape({2, 3})}), HasSubstr("Tried to squeeze dim index 5"));
}

TEST(ShapeFnTest, FillRange) {
  tensorflow::NodeDef f = Typed("Fill");
  Tensor dims = I32({2, 3});
  EXPECT_EQ(InferOne(f, {PartialShape({2}), PartialShape({})}, {&dims, nullptr}), "[2,3]");
  EXPECT_EQ(InferOne(f, {PartialShape({3}), PartialShape({})}), "[?,?,?]");
  EXPECT_THAT(InferOne(f, {PartialShape({2}), PartialShape({2})}),
              HasSubstr("value must be a scalar"));
  tensorflow::NodeDef r = Node("Range");
  Tensor a = Tensor::Scalar<int32_t>(0), b = Tensor::Scalar<int32_t>(10),
         d = Tensor::Scalar<int32_t>(3), zero = Tensor::Scalar<int32_t>(0);
  std::vector<PartialShape> scalars(3, PartialShape::Scalar());
  EXPECT_EQ(InferOne(r, scalars, {&a, &b, &d}), "[4]");
  EXPECT_EQ(InferOne(r, scalars, {&a, nullptr, &d}), "[?]");
  EXPECT_THAT(InferOne(r, scalars, {&a, &b, &zero}), HasSubstr("Requires delta != 0"));
  EXPECT_THAT(InferOne(r, {PartialShape({2}), PartialShape({}), PartialShape({})}),
              HasSubstr("start must be a scalar, not shape [2]"));
}

TEST(ShapeFnTest, PackConcat) {
  tensorflow::NodeDef p = Typed("Pack");
  SetAttr(&p, "N", 2);
  EXPECT_EQ(InferOne(p, {PartialShape({2, U}), PartialShape({U, 3})}), "[2,2,3]");
  SetAttr(&p, "axis", -1);
  EXPECT_EQ(InferOne(p, {PartialShape({2, U}), PartialShape({U, 3})}), "[2,3,2]");
  EXPECT_EQ(InferOne(p, {PartialShape::Unknown(), PartialShape::Unknown()}), "<unknown>");
  EXPECT_THAT(InferOne(p, {PartialShape({2}), PartialShape({3})}),
              HasSubstr("Shapes of all inputs must match"));

  tensorflow::NodeDef c = Typed("ConcatV2");
  SetAttr(&c, "N", 2);
  Tensor one = Tensor::Scalar<int32_t>(1), zero = Tensor::Scalar<int32_t>(0);
  const PartialShape axis = PartialShape::Scalar();
  EXPECT_EQ(
      InferOne(c, {PartialShape({2, 3}), PartialShape({U, 4}), axis}, {nullptr, nullptr, &one}),
      "[2,7]");
  EXPECT_EQ(
      InferOne(c, {PartialShape({2, 3}), PartialShape({U, U}), axis}, {nullptr, nullptr, &one}),
      "[2,?]");
  EXPECT_EQ(
      InferOne(c, {PartialShape({2, 3}), PartialShape::Unknown(), axis}, {nullptr, nullptr, &zero}),
      "[?,3]");
  EXPECT_EQ(InferOne(c, {PartialShape({2, 3}), PartialShape({4, 3}), axis}), "[?,?]");
  EXPECT_THAT(
      InferOne(c, {PartialShape({2, 3}), PartialShape({3, 3}), axis}, {nullptr, nullptr, &one}),
      HasSubstr("Dimension 0 in both shapes must be equal"));
  EXPECT_THAT(InferOne(c, {PartialShape({2, 3}), PartialShape({3}), axis}),
              HasSubstr("Ranks of all input tensors should match"));
  Tensor five = Tensor::Scalar<int32_t>(5);
  EXPECT_THAT(
      InferOne(c, {PartialShape({2, 3}), PartialShape({2, 3}), axis}, {nullptr, nullptr, &five}),
      HasSubstr("in the range [-2, 2), but got 5"));
}

TEST(ShapeFnTest, SliceStridedSliceGather) {
  tensorflow::NodeDef s = Typed("Slice");
  SetAttr(&s, "Index", DT_INT32);
  Tensor begin = I32({1, 1}), size = I32({2, -1});
  const PartialShape vec2({2});
  EXPECT_EQ(InferOne(s, {PartialShape({U, 5}), vec2, vec2}, {nullptr, &begin, &size}), "[2,4]");
  EXPECT_EQ(InferOne(s, {PartialShape({U, 5}), vec2, vec2}, {nullptr, nullptr, &size}), "[2,?]");
  EXPECT_EQ(InferOne(s, {PartialShape::Unknown(), vec2, vec2}), "[?,?]");
  Tensor too_big = I32({3, 1});
  EXPECT_THAT(InferOne(s, {PartialShape({2, 5}), vec2, vec2}, {nullptr, &begin, &too_big}),
              HasSubstr("Expected size[0] in [0, 1], but got 3"));

  tensorflow::NodeDef ss = Typed("StridedSlice");
  SetAttr(&ss, "Index", DT_INT32);
  SetAttr(&ss, "begin_mask", 1);
  SetAttr(&ss, "end_mask", 1);
  Tensor b = I32({0, 1}), e = I32({0, 3}), st = I32({1, 1});
  EXPECT_EQ(InferOne(ss, {PartialShape({U, 5}), vec2, vec2, vec2}, {nullptr, &b, &e, &st}),
            "[?,2]");
  EXPECT_EQ(
      InferOne(ss, {PartialShape({4, 5}), vec2, vec2, vec2}, {nullptr, nullptr, nullptr, &st}),
      "[4,?]");
  SetAttr(&ss, "shrink_axis_mask", 2);
  EXPECT_EQ(
      InferOne(ss, {PartialShape({4, 5}), vec2, vec2, vec2}, {nullptr, nullptr, nullptr, &st}),
      "[4]");
  EXPECT_EQ(InferOne(ss, {PartialShape({4, 5}), vec2, vec2, vec2}), "<unknown>");
  EXPECT_THAT(InferOne(ss, {PartialShape({4, 5}), vec2, PartialShape({3}), vec2}),
              HasSubstr("Expected begin, end, and strides to be 1D equal size tensors"));

  tensorflow::NodeDef g = Node("GatherV2");
  SetAttr(&g, "Tparams", DT_FLOAT);
  SetAttr(&g, "Tindices", DT_INT32);
  SetAttr(&g, "Taxis", DT_INT32);
  Tensor one = Tensor::Scalar<int32_t>(1);
  const PartialShape scalar = PartialShape::Scalar();
  EXPECT_EQ(
      InferOne(g, {PartialShape({U, 4}), PartialShape({2, 3}), scalar}, {nullptr, nullptr, &one}),
      "[?,2,3]");
  EXPECT_EQ(InferOne(g, {PartialShape({U, 4}), PartialShape({2, 3}), scalar}), "[?,?,?]");
  SetAttr(&g, "batch_dims", 1);
  EXPECT_EQ(InferOne(g, {PartialShape({U, 4, 5}), PartialShape({2, 3}), scalar},
                     {nullptr, nullptr, &one}),
            "[2,3,5]");
  EXPECT_THAT(InferOne(g, {PartialShape({3, 4, 5}), PartialShape({2, 3}), scalar},
                       {nullptr, nullptr, &one}),
              HasSubstr("params.shape[0]: 3 should be equal to indices.shape[0]: 2"));
}

TEST(ShapeFnTest, TransposeTile) {
  tensorflow::NodeDef t = Typed("Transpose");
  Tensor perm = I32({2, 0, 1});
  EXPECT_EQ(InferOne(t, {PartialShape({2, U, 4}), PartialShape({3})}, {nullptr, &perm}), "[4,2,?]");
  EXPECT_EQ(InferOne(t, {PartialShape({2, U, 4}), PartialShape({3})}), "[?,?,?]");
  EXPECT_EQ(InferOne(t, {PartialShape::Unknown(), PartialShape({3})}), "[?,?,?]");
  EXPECT_EQ(InferOne(t, {PartialShape::Unknown(), PartialShape({U})}), "<unknown>");
  Tensor dup = I32({0, 0, 1});
  EXPECT_THAT(InferOne(t, {PartialShape({2, U, 4}), PartialShape({3})}, {nullptr, &dup}),
              HasSubstr("2 is missing from {0,0,1}."));

  tensorflow::NodeDef tile = Typed("Tile");
  Tensor m = I32({3, 0});
  EXPECT_EQ(InferOne(tile, {PartialShape({2, U}), PartialShape({2})}, {nullptr, &m}), "[6,0]");
  EXPECT_EQ(InferOne(tile, {PartialShape({2, U}), PartialShape({2})}), "[?,?]");
  Tensor m3 = I32({1, 2, 3});
  EXPECT_THAT(InferOne(tile, {PartialShape({2, U}), PartialShape({3})}, {nullptr, &m3}),
              HasSubstr("vector of length 2 but got length 3"));
}

}  // namespace
}  // namespace dflow
