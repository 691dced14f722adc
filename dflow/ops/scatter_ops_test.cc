// Scatter ops: rows of a reference or resource variable updated in place
// (Scatter*, ResourceScatter*) and ScatterNd, against TensorFlow 2.21's values.
#include <cstdint>
#include <string>
#include <vector>

#include "dflow/framework/attr_util.h"
#include "dflow/ops/op_test_util.h"
#include "dflow/ops/state_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<KernelOutputs> RunScatter(const std::string& op, TestRef* var, Tensor indices,
                                         Tensor updates) {
  tensorflow::NodeDef n;
  n.set_name("scatter");
  n.set_op(op);
  for (const char* in : {"ref", "indices", "updates"}) n.add_input(in);
  SetAttr(&n, "T", updates.dtype());
  SetAttr(&n, "Tindices", indices.dtype());
  ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> k, MakeKernel(n, TestCpuDevice()));
  return RunWithRefs(k.get(), TestCpuDevice(),
                     {var->value(), TensorValue{&indices}, TensorValue{&updates}});
}

std::vector<float> Floats(const Tensor& t) {
  auto f = t.flat<float>();
  return {f.begin(), f.end()};
}

TEST(ScatterOpsTest, RowsAreAddedSubtractedOrReplacedInPlace) {
  TestRef var(Tensor::FromVector<float>({1, 1, 2, 2, 3, 3}, TensorShape({3, 2})));
  // Row 2 twice: both updates count.
  auto out = RunScatter("ScatterAdd", &var, Tensor::Vec<int32_t>({2, 0, 2}),
                        Tensor::FromVector<float>({10, 20, 30, 40, 50, 60}, TensorShape({3, 2})));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Floats(var.tensor), (std::vector<float>{31, 41, 2, 2, 63, 83}));
  EXPECT_EQ(out->refs[0], &var.tensor);  // The output is the variable.

  ASSERT_TRUE(RunScatter("ScatterSub", &var, Tensor::Vec<int64_t>({1}),
                         Tensor::FromVector<float>({1, 2}, TensorShape({1, 2})))
                  .ok());
  EXPECT_EQ(Floats(var.tensor), (std::vector<float>{31, 41, 1, 0, 63, 83}));
  ASSERT_TRUE(RunScatter("ScatterUpdate", &var, Tensor::Scalar<int32_t>(0),
                         Tensor::Vec<float>({7, 8}))
                  .ok());
  EXPECT_EQ(Floats(var.tensor), (std::vector<float>{7, 8, 1, 0, 63, 83}));
  // A scalar update goes to every element of the indexed rows.
  ASSERT_TRUE(RunScatter("ScatterUpdate", &var, Tensor::Vec<int32_t>({1, 2}), Tensor::Scalar(5.0f))
                  .ok());
  EXPECT_EQ(Floats(var.tensor), (std::vector<float>{7, 8, 5, 5, 5, 5}));
}

TEST(ScatterOpsTest, BadIndicesAndShapesChangeNothing) {
  TestRef var(Tensor::FromVector<float>({1, 1, 2, 2}, TensorShape({2, 2})));
  auto out = RunScatter("ScatterAdd", &var, Tensor::Vec<int32_t>({0, 2}),
                        Tensor::FromVector<float>({1, 1, 1, 1}, TensorShape({2, 2})));
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("indices[1] = 2 is not in [0, 2)"));
  EXPECT_EQ(Floats(var.tensor), (std::vector<float>{1, 1, 2, 2}));  // Row 0 untouched too.
  out = RunScatter("ScatterAdd", &var, Tensor::Vec<int32_t>({0}), Tensor::Vec<float>({1, 1}));
  EXPECT_THAT(out.status().message(), HasSubstr("updates.shape = indices.shape + params.shape[1:]"));
  TestRef uninitialized;
  out = RunScatter("ScatterAdd", &uninitialized, Tensor::Vec<int32_t>({0}), Tensor::Vec<float>({1}));
  EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition);
}

// The same updates through every op: rows 2, 0, 2 (row 2 twice, in order).
const std::vector<float> kScatterInit = {1, 2, 3, 4, 5, 6};
const std::vector<float> kScatterUpdates = {2, 0.5f, 4, -1, 3, 10};

// TensorFlow 2.21's results of each op on kScatterInit / kScatterUpdates.
const std::vector<std::pair<std::string, std::vector<double>>> kScatterResults = {
    {"Add", {5, 1, 3, 4, 10, 16.5}},
    {"Sub", {-3, 3, 3, 4, 0, -4.5}},
    {"Mul", {4, -2, 3, 4, 30, 30}},
    {"Div", {0.25, -2, 3, 4, 0.8333333333333334, 1.2}},
    {"Min", {1, -1, 3, 4, 2, 0.5}},
    {"Max", {4, 2, 3, 4, 5, 10}},
    {"Update", {4, -1, 3, 4, 3, 10}},
};

TEST(ScatterOpsTest, EveryRefScatterAppliesRepeatedIndicesInOrder) {
  for (const auto& [op, want] : kScatterResults) {
    SCOPED_TRACE(op);
    TestRef var(Tensor::FromVector<float>(kScatterInit, TensorShape({3, 2})));
    auto out = RunScatter("Scatter" + op, &var, Tensor::Vec<int32_t>({2, 0, 2}),
                          Tensor::FromVector<float>(kScatterUpdates, TensorShape({3, 2})));
    ASSERT_TRUE(out.ok()) << out.status();
    ExpectTensorEq<float>(var.tensor, std::vector<float>(want.begin(), want.end()), {3, 2});
  }
}

absl::Status RunResourceScatter(const std::string& op, const Tensor& handle, Tensor indices,
                                Tensor updates) {
  OpTest t(op);
  t.Attr("dtype", updates.dtype()).Attr("Tindices", indices.dtype());
  t.Input(handle).Input(indices).Input(updates);
  return t.Run().status();
}

TEST(ScatterOpsTest, EveryResourceScatterUpdatesTheVariable) {
  for (const auto& [op, want] : kScatterResults) {
    SCOPED_TRACE(op);
    const std::string name = "scatter/" + op;
    const Tensor h = NewResourceVar(
        TestCpuDevice(), name,
        Tensor::FromVector<double>({kScatterInit.begin(), kScatterInit.end()}, {3, 2}));
    const Tensor before = ResourceVarValue(TestCpuDevice(), name);  // A snapshot.
    ASSERT_TRUE(RunResourceScatter(
                    "ResourceScatter" + op, h, Tensor::Vec<int64_t>({2, 0, 2}),
                    Tensor::FromVector<double>({kScatterUpdates.begin(), kScatterUpdates.end()},
                                               {3, 2}))
                    .ok());
    ExpectTensorEq<double>(ResourceVarValue(TestCpuDevice(), name), want, {3, 2});
    ExpectTensorEq<double>(before, {kScatterInit.begin(), kScatterInit.end()}, {3, 2});
  }
  // A scalar update goes to every element of the rows; integer division truncates.
  const Tensor h = NewResourceVar(TestCpuDevice(), "scatter/int", Tensor::Vec<int32_t>({7, -7, 9}));
  ASSERT_TRUE(RunResourceScatter("ResourceScatterDiv", h, Tensor::Vec<int32_t>({0, 1, 2}),
                                 Tensor::Vec<int32_t>({2, 2, 3}))
                  .ok());
  ExpectTensorEq<int32_t>(ResourceVarValue(TestCpuDevice(), "scatter/int"), {3, -3, 3}, {3});
  ASSERT_TRUE(RunResourceScatter("ResourceScatterMax", h, Tensor::Vec<int32_t>({1, 2}),
                                 Tensor::Scalar<int32_t>(0))
                  .ok());
  ExpectTensorEq<int32_t>(ResourceVarValue(TestCpuDevice(), "scatter/int"), {3, 0, 3}, {3});
}

TEST(ScatterOpsTest, ResourceScatterErrorsChangeNothing) {
  const Tensor h = NewResourceVar(TestCpuDevice(), "scatter/bad",
                                  Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, {3, 2}));
  auto expect_unchanged = [] {
    ExpectTensorEq<float>(ResourceVarValue(TestCpuDevice(), "scatter/bad"), {1, 2, 3, 4, 5, 6},
                          {3, 2});
  };
  absl::Status s = RunResourceScatter("ResourceScatterAdd", h, Tensor::Vec<int32_t>({0, 3}),
                                      Tensor::FromVector<float>({9, 9, 9, 9}, {2, 2}));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("indices[1] = 3 is not in [0, 3)"));
  expect_unchanged();
  s = RunResourceScatter("ResourceScatterAdd", h, Tensor::Vec<int32_t>({1}),
                         Tensor::Vec<float>({9, 9}));
  EXPECT_THAT(s.message(), HasSubstr("Must have updates.shape = indices.shape + params.shape[1:] "
                                     "or updates.shape = [], got updates.shape [2]"));
  s = RunResourceScatter("ResourceScatterAdd", h, Tensor::Vec<int32_t>({1}),
                         Tensor::FromVector<double>({9, 9}, {1, 2}));
  EXPECT_THAT(s.message(), HasSubstr("DType of scatter resource and updates does not match"));
  s = RunResourceScatter("ResourceScatterAdd", ResourceVarHandle(TestCpuDevice(), "scatter/none"),
                         Tensor::Vec<int32_t>({1}), Tensor::FromVector<float>({9, 9}, {1, 2}));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  expect_unchanged();
  // Integer division by zero is refused before any row is written.
  const Tensor ints = NewResourceVar(TestCpuDevice(), "scatter/div0", Tensor::Vec<int32_t>({4, 5}));
  s = RunResourceScatter("ResourceScatterDiv", ints, Tensor::Vec<int32_t>({0, 1}),
                         Tensor::Vec<int32_t>({2, 0}));
  EXPECT_THAT(s.message(), HasSubstr("updates must not contain 0"));
  ExpectTensorEq<int32_t>(ResourceVarValue(TestCpuDevice(), "scatter/div0"), {4, 5}, {2});
  TestRef ref(Tensor::Vec<int64_t>({4, 5}));
  auto out = RunScatter("ScatterDiv", &ref, Tensor::Vec<int32_t>({0}), Tensor::Scalar<int64_t>(0));
  EXPECT_THAT(out.status().message(), HasSubstr("updates must not contain 0"));
  // The lowest int32 divided by -1 wraps (TensorFlow's kernel traps on it).
  const Tensor lowest = NewResourceVar(TestCpuDevice(), "scatter/lowest",
                                       Tensor::Vec<int32_t>({INT32_MIN, 7}));
  ASSERT_TRUE(RunResourceScatter("ResourceScatterDiv", lowest, Tensor::Vec<int32_t>({0, 1}),
                                 Tensor::Vec<int32_t>({-1, -1}))
                  .ok());
  ExpectTensorEq<int32_t>(ResourceVarValue(TestCpuDevice(), "scatter/lowest"), {INT32_MIN, -7},
                          {2});
}

TEST(ScatterOpsTest, ScatterNdSumsUpdatesIntoZeros) {
  OpTest t("ScatterNd");
  t.Attr("T", DT_FLOAT).Attr("Tindices", DT_INT32);
  t.Input(Tensor::FromVector<int32_t>({1, 3, 1}, TensorShape({3, 1})))
      .Input(Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, TensorShape({3, 2})))
      .Input(Tensor::Vec<int32_t>({4, 2}));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<float>((*out)[0], {0, 0, 6, 8, 0, 0, 3, 4}, {4, 2});  // TensorFlow's.

  OpTest bad("ScatterNd");
  bad.Attr("T", DT_FLOAT).Attr("Tindices", DT_INT32);
  bad.Input(Tensor::FromVector<int32_t>({5}, TensorShape({1, 1})))
      .Input(Tensor::FromVector<float>({1, 2}, TensorShape({1, 2})))
      .Input(Tensor::Vec<int32_t>({4, 2}));
  const absl::Status s = bad.Run().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("indices[0] = [5] does not index into shape [4,2]"));

  // Index vectors of length 0 each add a whole updates slice; none adds nothing.
  OpTest whole("ScatterNd");
  whole.Attr("T", DT_FLOAT).Attr("Tindices", DT_INT32);
  whole.Input(Tensor(DT_INT32, TensorShape({2, 0})))
      .Input(Tensor::FromVector<float>({1, 2, 3, 10, 20, 30}, TensorShape({2, 3})))
      .Input(Tensor::Vec<int32_t>({3}));
  out = whole.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<float>((*out)[0], {11, 22, 33}, {3});
  OpTest none("ScatterNd");
  none.Attr("T", DT_FLOAT).Attr("Tindices", DT_INT32);
  none.Input(Tensor(DT_INT32, TensorShape({0, 0})))
      .Input(Tensor(DT_FLOAT, TensorShape({0, 3})))
      .Input(Tensor::Vec<int32_t>({3}));
  out = none.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<float>((*out)[0], {0, 0, 0}, {3});

  // A shape whose element count overflows is refused, not allocated small.
  OpTest overflow("ScatterNd");
  overflow.Attr("T", DT_FLOAT).Attr("Tindices", DT_INT64);
  overflow.Input(Tensor::FromVector<int64_t>({1}, TensorShape({1, 1})))
      .Input(Tensor::FromVector<float>({1, 1, 1, 1}, TensorShape({1, 4})))
      .Input(Tensor::Vec<int64_t>({int64_t{1} << 62, 4}));
  EXPECT_EQ(overflow.Run().status().code(), absl::StatusCode::kInvalidArgument);

  OpTest huge("ScatterNd");
  huge.Attr("T", DT_FLOAT).Attr("Tindices", DT_INT64);
  huge.Input(Tensor::FromVector<int64_t>({0}, TensorShape({1, 1})))
      .Input(Tensor::FromVector<float>({1}, TensorShape({1, 1})))
      .Input(Tensor::Vec<int64_t>({int64_t{1} << 40, 1}));
  EXPECT_EQ(huge.Run().status().code(), absl::StatusCode::kResourceExhausted);
}

absl::StatusOr<std::vector<Tensor>> SparseToDense(const Tensor& indices, const Tensor& shape,
                                                  const Tensor& values, const Tensor& default_value,
                                                  bool validate = true) {
  OpTest t("SparseToDense");
  t.Attr("T", values.dtype()).Attr("Tindices", indices.dtype()).Attr("validate_indices", validate);
  t.Input(indices).Input(shape).Input(values).Input(default_value);
  return t.Run();
}

TEST(ScatterOpsTest, SparseToDenseFillsTheRest) {
  // TensorFlow's values.
  auto out = SparseToDense(Tensor::FromVector<int32_t>({0, 1, 2, 0}, {2, 2}),
                           Tensor::Vec<int32_t>({3, 3}), Tensor::Vec<float>({5, 6}),
                           Tensor::Scalar(-1.0f));
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<float>((*out)[0], {-1, 5, -1, -1, -1, -1, 6, -1, -1}, {3, 3});
  out = SparseToDense(Tensor::Vec<int64_t>({0, 2}), Tensor::Vec<int64_t>({3}),
                      Tensor::Scalar<int32_t>(7), Tensor::Scalar<int32_t>(1));
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<int32_t>((*out)[0], {7, 1, 7}, {3});
  out = SparseToDense(Tensor::Scalar<int32_t>(1), Tensor::Vec<int32_t>({3}),
                      Tensor::Scalar<int32_t>(7), Tensor::Scalar<int32_t>(1));
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<int32_t>((*out)[0], {1, 7, 1}, {3});
  // Unvalidated: any order, the last repeated index wins.
  out = SparseToDense(Tensor::FromVector<int32_t>({2, 0, 0, 1, 0, 1}, {3, 2}),
                      Tensor::Vec<int32_t>({3, 3}), Tensor::Vec<double>({5, 6, 7}),
                      Tensor::Scalar(-1.0), false);
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<double>((*out)[0], {-1, 7, -1, -1, -1, -1, 5, -1, -1}, {3, 3});
  out = SparseToDense(Tensor::Vec<int32_t>({1}), Tensor::Vec<int32_t>({2}),
                      Tensor::Vec<std::string>({"x"}), Tensor::Scalar<std::string>("-"));
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<std::string>((*out)[0], {"-", "x"}, {2});
}

TEST(ScatterOpsTest, SparseToDenseErrors) {
  auto error = [](const Tensor& indices, const Tensor& shape, const Tensor& values,
                  const Tensor& default_value, bool validate = true) {
    auto out = SparseToDense(indices, shape, values, default_value, validate);
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(out.status().message());
  };
  const Tensor m = Tensor::FromVector<int32_t>({0, 1, 2, 1}, {2, 2});
  const Tensor v = Tensor::Vec<float>({5, 6}), d = Tensor::Scalar(-1.0f);
  const Tensor shape = Tensor::Vec<int32_t>({3, 3});
  EXPECT_THAT(error(Tensor::FromVector<int32_t>({2, 0, 0, 1}, {2, 2}), shape, v, d),
              HasSubstr("indices[1] = [0,1] is out of order. Many sparse ops require sorted"));
  EXPECT_THAT(error(Tensor::FromVector<int32_t>({0, 1, 0, 1}, {2, 2}), shape, v, d),
              HasSubstr("indices[1] = [0,1] is repeated"));
  for (bool validate : {true, false}) {
    EXPECT_THAT(error(Tensor::FromVector<int32_t>({0, 1, 3, 1}, {2, 2}), shape, v, d, validate),
                HasSubstr("indices[1] = [3,1] is out of bounds: need 0 <= index < [3,3]"));
  }
  EXPECT_THAT(error(Tensor::FromVector<int32_t>({0, -1}, {1, 2}), shape, Tensor::Scalar(1.0f), d),
              HasSubstr("is out of bounds"));
  EXPECT_THAT(error(m, shape, Tensor::Vec<float>({5, 6, 7}), d),
              HasSubstr("sparse_values has incorrect shape [3], should be [] or [2]"));
  EXPECT_THAT(error(m, shape, v, Tensor::Vec<float>({-1})),
              HasSubstr("default_value should be a scalar."));
  EXPECT_THAT(error(m, Tensor::Vec<int32_t>({3, 3, 3}), v, d),
              HasSubstr("output_shape has incorrect number of elements: 3 should be: 2"));
  EXPECT_THAT(error(m, Tensor::FromVector<int32_t>({3, 3}, {1, 2}), v, d),
              HasSubstr("output_shape must be rank 1, got shape [1,2]"));
  EXPECT_THAT(error(m, Tensor::Vec<int32_t>({3, -3}), v, d), HasSubstr("Dimension -3 must be >= 0"));
  auto huge = SparseToDense(Tensor::FromVector<int64_t>({0, 0}, {1, 2}),
                            Tensor::Vec<int64_t>({int64_t{1} << 30, int64_t{1} << 20}),
                            Tensor::Vec<float>({1}), Tensor::Scalar(0.0f));
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(LogicalReductionTest, AllAndAny) {
  const Tensor x = Tensor::FromVector<bool>({true, false, true, true, true, true}, TensorShape({2, 3}));
  OpTest all("All");
  all.Input(x).Input(Tensor::Vec<int32_t>({1}));
  auto out = all.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<bool>((*out)[0], {false, true}, {2});
  OpTest any("Any");
  any.Attr("keep_dims", true).Input(x).Input(Tensor::Vec<int32_t>({0, 1}));
  out = any.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<bool>((*out)[0], {true}, {1, 1});
  OpTest empty("All");  // Over nothing: true.
  empty.Input(Tensor(DT_BOOL, TensorShape({0}))).Input(Tensor::Vec<int32_t>({0}));
  out = empty.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<bool>((*out)[0], {true}, {});
}

TEST(InTopKTest, TiesCountAndBadTargetsAreFalse) {
  OpTest t("InTopKV2");
  t.Input(Tensor::FromVector<float>({0.1f, 0.5f, 0.5f, 0.2f, 1, NAN, 0, 0, 0.3f, 0.2f, 0.1f, 0},
                                    TensorShape({3, 4})))
      .Input(Tensor::Vec<int32_t>({2, 1, 5}))
      .Input(Tensor::Scalar<int32_t>(1));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<bool>((*out)[0], {true, false, false}, {3});  // TensorFlow's.

  // A non-finite prediction anywhere in the row makes it false, as TensorFlow.
  OpTest nan_row("InTopKV2");
  nan_row.Input(Tensor::FromVector<float>({NAN, 1}, TensorShape({1, 2})))
      .Input(Tensor::Vec<int32_t>({1}))
      .Input(Tensor::Scalar<int32_t>(1));
  out = nan_row.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<bool>((*out)[0], {false}, {1});
  OpTest k_vector("InTopKV2");
  k_vector.Input(Tensor::FromVector<float>({1, 2}, TensorShape({1, 2})))
      .Input(Tensor::Vec<int32_t>({1}))
      .Input(Tensor::Vec<int32_t>({1}));
  EXPECT_THAT(k_vector.Run().status().message(), HasSubstr("k must be 0-D"));

  OpTest bad("InTopKV2");
  bad.Input(Tensor::FromVector<float>({1, 2}, TensorShape({1, 2})))
      .Input(Tensor::Vec<int32_t>({0, 1}))
      .Input(Tensor::Scalar<int32_t>(1));
  EXPECT_THAT(bad.Run().status().message(), HasSubstr("must match length of targets"));
}

TEST(ScatterOpsTest, SparseToDenseShapeIsOutputShape) {
  tensorflow::NodeDef n;
  n.set_name("n");
  n.set_op("SparseToDense");
  SetAttr(&n, "T", DT_FLOAT);
  SetAttr(&n, "Tindices", DT_INT32);
  const Tensor shape = Tensor::Vec<int32_t>({3, 4});
  auto shapes = Infer(n, {PartialShape({2, 2}), PartialShape({2}), PartialShape({2}), {}},
                      {nullptr, &shape});
  ASSERT_TRUE(shapes.ok()) << shapes.status();
  EXPECT_EQ((*shapes)[0], PartialShape({3, 4}));
}

}  // namespace
}  // namespace dflow
