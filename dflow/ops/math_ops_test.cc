// Math ops against TensorFlow's values (computed with TensorFlow 2.x where
// the semantics are subtle), their shape functions, and their errors.
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "dflow/framework/op_def.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/ops/broadcast.h"
#include "dflow/ops/op_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

using ::testing::HasSubstr;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr int32_t kInt32Min = std::numeric_limits<int32_t>::min();

// Runs the op and returns output 0, failing the test on an error.
Tensor RunOk(OpTest& t) {
  absl::StatusOr<std::vector<Tensor>> out = t.Run();
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() && !out->empty() ? (*out)[0] : Tensor();
}

absl::Status RunStatus(OpTest& t) { return t.Run().status(); }

template <typename T>
Tensor T2(const std::vector<T>& v, const TensorShape& s) {
  return Tensor::FromVector<T>(v, s);
}

template <typename T>
Tensor Binary(const std::string& op, const Tensor& x, const Tensor& y) {
  return RunOk(OpTest(op).Attr("T", DataTypeToEnum<T>::value).Input(x).Input(y));
}

template <typename T>
Tensor Unary(const std::string& op, const Tensor& x) {
  return RunOk(OpTest(op).Attr("T", DataTypeToEnum<T>::value).Input(x));
}

// NaN-aware float comparison.
void ExpectFloats(const Tensor& t, const std::vector<float>& want, const TensorShape& shape) {
  ASSERT_EQ(t.dtype(), DT_FLOAT);
  ASSERT_EQ(t.shape(), shape) << t.DebugString();
  for (size_t i = 0; i < want.size(); ++i) {
    const float got = t.flat<float>()[i];
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got)) << "at " << i << ": " << got;
    } else if (std::isinf(want[i])) {
      EXPECT_EQ(got, want[i]) << "at " << i;
    } else {
      EXPECT_NEAR(got, want[i], 1e-5 * (1 + std::abs(want[i]))) << "at " << i;
    }
  }
}

// --- broadcasting plans ------------------------------------------------------

TEST(MathBroadcastTest, PlanCollapsesDimensions) {
  // Row bias: [N,C] + [C] is N rows of C contiguous elements.
  auto bias = BroadcastPlan::Make({TensorShape({5, 7}), TensorShape({7})});
  ASSERT_TRUE(bias.ok());
  EXPECT_EQ(bias->output_shape(), TensorShape({5, 7}));
  EXPECT_EQ(bias->num_rows(), 5);
  EXPECT_EQ(bias->inner_size(), 7);
  EXPECT_EQ(bias->inner_stride(1), 1);
  EXPECT_TRUE(bias->IsFull(0));
  EXPECT_FALSE(bias->IsFull(1));

  // Size-1 dims vanish and alike neighbours merge: [2,1,3,4] x [3,4] -> [2,12].
  auto merged = BroadcastPlan::Make({TensorShape({2, 1, 3, 4}), TensorShape({3, 4})});
  ASSERT_TRUE(merged.ok());
  EXPECT_THAT(std::vector<int64_t>(merged->dims().begin(), merged->dims().end()),
              ::testing::ElementsAre(2, 12));
  EXPECT_THAT(std::vector<int64_t>(merged->strides(1).begin(), merged->strides(1).end()),
              ::testing::ElementsAre(0, 1));

  auto scalar = BroadcastPlan::Make({TensorShape({1, 1}), TensorShape({})});
  ASSERT_TRUE(scalar.ok());
  EXPECT_EQ(scalar->output_shape(), TensorShape({1, 1}));
  EXPECT_TRUE(scalar->IsFull(0) && scalar->IsFull(1));
}

// Equal shapes (two scalars in a loop, a gradient and its variable) take a
// short path: one row of every element, each input advancing along it.
TEST(MathBroadcastTest, EqualShapesAreOneRow) {
  auto same = BroadcastPlan::Make({TensorShape({2, 3}), TensorShape({2, 3}), TensorShape({2, 3})});
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->output_shape(), TensorShape({2, 3}));
  EXPECT_EQ(same->num_rows(), 1);
  EXPECT_EQ(same->inner_size(), 6);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(same->IsFull(i));
    EXPECT_EQ(same->inner_stride(i), 1);
  }
  auto scalars = BroadcastPlan::Make({TensorShape({}), TensorShape({})});
  ASSERT_TRUE(scalars.ok());
  EXPECT_EQ(scalars->output_shape(), TensorShape({}));
  EXPECT_EQ(scalars->num_rows(), 1);
  EXPECT_TRUE(scalars->IsScalar(0) && scalars->IsFull(1));
  auto empty = BroadcastPlan::Make({TensorShape({0, 4}), TensorShape({0, 4})});
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->num_elements(), 0);
  EXPECT_EQ(empty->num_rows(), 0);
}

TEST(MathBroadcastTest, IncompatibleShapesShowEveryShape) {
  auto two = BroadcastPlan::Make({TensorShape({2, 3}), TensorShape({2})});
  EXPECT_EQ(two.status().message(), "Incompatible shapes: [2,3] vs. [2]");
  auto three = BroadcastPlan::Make({TensorShape({2}), TensorShape({3}), TensorShape({})});
  EXPECT_EQ(three.status().message(), "Incompatible shapes: [2] vs. [3] vs. []");
  EXPECT_EQ(BroadcastTensorShapes(TensorShape({0}), TensorShape({1})).value(), TensorShape({0}));
  EXPECT_FALSE(BroadcastTensorShapes(TensorShape({0}), TensorShape({2})).ok());
}

TEST(MathBroadcastTest, ReductionAxesForGradients) {
  EXPECT_THAT(BroadcastReductionAxes(TensorShape({3}), TensorShape({2, 3})),
              ::testing::ElementsAre(0));
  EXPECT_THAT(BroadcastReductionAxes(TensorShape({2, 1, 3}), TensorShape({2, 4, 3})),
              ::testing::ElementsAre(1));
  EXPECT_THAT(BroadcastReductionAxes(TensorShape({}), TensorShape({2, 2})),
              ::testing::ElementsAre(0, 1));
  EXPECT_TRUE(BroadcastReductionAxes(TensorShape({2, 3}), TensorShape({2, 3})).empty());
}

// --- binary arithmetic ---------------------------------------------------------

TEST(MathBinaryTest, AddV2SameShapeAndDtypes) {
  ExpectTensorEq<float>(
      Binary<float>("AddV2", T2<float>({1, 2, 3, 4}, {2, 2}), T2<float>({10, 20, 30, 40}, {2, 2})),
      {11, 22, 33, 44}, {2, 2});
  ExpectTensorEq<int32_t>(
      Binary<int32_t>("AddV2", T2<int32_t>({1, -2}, {2}), T2<int32_t>({5, 5}, {2})), {6, 3}, {2});
  ExpectTensorEq<int64_t>(
      Binary<int64_t>("Add", Tensor::Scalar<int64_t>(1LL << 40), Tensor::Scalar<int64_t>(1)),
      {(1LL << 40) + 1}, {});
  ExpectTensorEq<uint8_t>(Binary<uint8_t>("AddV2", T2<uint8_t>({250}, {1}), T2<uint8_t>({10}, {1})),
                          {4}, {1});
  ExpectTensorEq<double>(Binary<double>("Mul", T2<double>({1.5, 2}, {2}), Tensor::Scalar(2.0)),
                         {3, 4}, {2});
}

TEST(MathBinaryTest, BroadcastsLikeTensorFlow) {
  // tf.reshape(tf.range(6.), [2,1,3]) + tf.reshape(tf.range(4.) * 10, [4,1])
  Tensor a = T2<float>({0, 1, 2, 3, 4, 5}, {2, 1, 3});
  Tensor b = T2<float>({0, 10, 20, 30}, {4, 1});
  ExpectTensorEq<float>(Binary<float>("AddV2", a, b), {0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32,
                                                       3, 4, 5, 13, 14, 15, 23, 24, 25, 33, 34, 35},
                        {2, 4, 3});
  // Row bias, column broadcast, and the scalar on either side of Sub.
  Tensor m = T2<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  ExpectTensorEq<float>(Binary<float>("AddV2", m, T2<float>({10, 20, 30}, {3})),
                        {11, 22, 33, 14, 25, 36}, {2, 3});
  ExpectTensorEq<float>(Binary<float>("Sub", m, T2<float>({1, 2}, {2, 1})), {0, 1, 2, 2, 3, 4},
                        {2, 3});
  ExpectTensorEq<float>(Binary<float>("Sub", Tensor::Scalar(10.0f), m), {9, 8, 7, 6, 5, 4}, {2, 3});
  ExpectTensorEq<float>(Binary<float>("Sub", m, Tensor::Scalar(1.0f)), {0, 1, 2, 3, 4, 5}, {2, 3});
  ExpectTensorEq<float>(Binary<float>("Sub", T2<float>({1, 2}, {2, 1}), T2<float>({1, 2, 3}, {3})),
                        {0, -1, -2, 1, 0, -1}, {2, 3});
  // A [1,1] "scalar" still lifts the rank.
  ExpectTensorEq<float>(Binary<float>("Mul", T2<float>({2}, {1, 1}), T2<float>({1, 2, 3}, {3})),
                        {2, 4, 6}, {1, 3});
}

TEST(MathBinaryTest, EmptyAndScalarTensors) {
  ExpectTensorEq<float>(Binary<float>("AddV2", T2<float>({}, {0, 3}), T2<float>({1, 2, 3}, {3})),
                        {}, {0, 3});
  ExpectTensorEq<int32_t>(Binary<int32_t>("Mul", T2<int32_t>({}, {0}), T2<int32_t>({7}, {1})), {},
                          {0});
  ExpectTensorEq<float>(Binary<float>("Mul", Tensor::Scalar(2.0f), Tensor::Scalar(3.5f)), {7}, {});
}

TEST(MathBinaryTest, IncompatibleShapesShowBothShapes) {
  absl::Status s = RunStatus(OpTest("AddV2")
                                 .Attr("T", DT_FLOAT)
                                 .Input(T2<float>({1, 2, 3, 4, 5, 6}, {2, 3}))
                                 .Input(T2<float>({1, 2}, {2})));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("[AddV2 'op']"));
  EXPECT_THAT(s.message(), HasSubstr("Incompatible shapes: [2,3] vs. [2]"));
}

TEST(MathBinaryTest, FloorDivRoundsTowardNegativeInfinity) {
  // tf.math.floordiv([7,-7,7,-7,0], [2,2,-2,-2,3]) == [3,-4,-4,3,0]
  ExpectTensorEq<int32_t>(Binary<int32_t>("FloorDiv", T2<int32_t>({7, -7, 7, -7, 0}, {5}),
                                          T2<int32_t>({2, 2, -2, -2, 3}, {5})),
                          {3, -4, -4, 3, 0}, {5});
  ExpectTensorEq<int64_t>(
      Binary<int64_t>("FloorDiv", T2<int64_t>({-7, 9}, {2}), Tensor::Scalar<int64_t>(4)), {-2, 2},
      {2});
  ExpectTensorEq<uint8_t>(
      Binary<uint8_t>("FloorDiv", T2<uint8_t>({200, 7}, {2}), Tensor::Scalar<uint8_t>(3)), {66, 2},
      {2});
  ExpectFloats(Binary<float>("FloorDiv", T2<float>({7.5, -7.5, 1}, {3}), T2<float>({2, 2, 0}, {3})),
               {3, -4, kInf}, {3});
  // INT_MIN // -1 overflows; TensorFlow gives INT_MIN, and it must not trap.
  ExpectTensorEq<int32_t>(
      Binary<int32_t>("FloorDiv", T2<int32_t>({kInt32Min}, {1}), T2<int32_t>({-1}, {1})),
      {kInt32Min}, {1});
}

TEST(MathBinaryTest, FloorModTakesTheDivisorsSign) {
  // tf.math.floormod([7,-7,7,-7,0], [3,3,-3,-3,3]) == [1,2,-2,-1,0]
  ExpectTensorEq<int32_t>(Binary<int32_t>("FloorMod", T2<int32_t>({7, -7, 7, -7, 0}, {5}),
                                          T2<int32_t>({3, 3, -3, -3, 3}, {5})),
                          {1, 2, -2, -1, 0}, {5});
  // tf.math.floormod([7.5,-7.5,7.5,-7.5,1,-1,5], [2,2,-2,-2,inf,inf,0])
  ExpectFloats(Binary<float>("FloorMod", T2<float>({7.5, -7.5, 7.5, -7.5, 1, -1, 5}, {7}),
                             T2<float>({2, 2, -2, -2, kInf, kInf, 0}, {7})),
               {1.5, 0.5, -0.5, -1.5, 1, kInf, kNaN}, {7});
  ExpectTensorEq<int32_t>(
      Binary<int32_t>("FloorMod", T2<int32_t>({kInt32Min}, {1}), T2<int32_t>({-1}, {1})), {0}, {1});
}

TEST(MathBinaryTest, IntegerDivisionByZeroIsAnError) {
  for (const char* op : {"FloorDiv", "FloorMod"}) {
    absl::Status s = RunStatus(OpTest(op)
                                   .Attr("T", DT_INT32)
                                   .Input(T2<int32_t>({1, 2}, {2}))
                                   .Input(T2<int32_t>({1, 0}, {2})));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << op;
    EXPECT_THAT(s.message(), HasSubstr(std::string("[") + op));
    EXPECT_THAT(s.message(), HasSubstr("Integer division by zero"));
  }
  absl::Status s64 = RunStatus(OpTest("FloorDiv")
                                   .Attr("T", DT_INT64)
                                   .Input(Tensor::Scalar<int64_t>(5))
                                   .Input(Tensor::Scalar<int64_t>(0)));
  EXPECT_THAT(s64.message(), HasSubstr("Integer division by zero"));
}

TEST(MathBinaryTest, RealDivAndItsMissingIntegerKernel) {
  ExpectFloats(Binary<float>("RealDiv", T2<float>({1, -1, 0}, {3}), T2<float>({4, 0, 0}, {3})),
               {0.25, -kInf, kNaN}, {3});
  // TensorFlow declares integer RealDiv but has no CPU kernel for it.
  absl::Status s = RunStatus(
      OpTest("RealDiv").Attr("T", DT_INT32).Input(Tensor::Scalar(1)).Input(Tensor::Scalar(2)));
  EXPECT_FALSE(s.ok());
}

TEST(MathBinaryTest, MaximumAndMinimumPropagateNaN) {
  Tensor x = T2<float>({kNaN, 1, 5}, {3});
  Tensor y = T2<float>({1, kNaN, 2}, {3});
  ExpectFloats(Binary<float>("Maximum", x, y), {kNaN, kNaN, 5}, {3});
  ExpectFloats(Binary<float>("Minimum", x, y), {kNaN, kNaN, 2}, {3});
  ExpectTensorEq<int64_t>(
      Binary<int64_t>("Maximum", T2<int64_t>({-3, 4}, {2}), Tensor::Scalar<int64_t>(0)), {0, 4},
      {2});
  ExpectTensorEq<uint8_t>(
      Binary<uint8_t>("Minimum", T2<uint8_t>({3, 200}, {2}), Tensor::Scalar<uint8_t>(100)),
      {3, 100}, {2});
}

TEST(MathBinaryTest, AddConcatenatesStrings) {
  Tensor x = Tensor::Vec<std::string>({"a", "b"});
  Tensor z = Binary<std::string>("Add", x, Tensor::Scalar<std::string>("!"));
  ExpectTensorEq<std::string>(z, {"a!", "b!"}, {2});
}

// --- comparisons and logic -------------------------------------------------------

TEST(MathCompareTest, ComparisonsBroadcast) {
  Tensor x = T2<int32_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor y = T2<int32_t>({2, 5, 3}, {3});
  ExpectTensorEq<bool>(Binary<int32_t>("Equal", x, y), {0, 0, 1, 0, 1, 0}, {2, 3});
  ExpectTensorEq<bool>(Binary<int32_t>("NotEqual", x, y), {1, 1, 0, 1, 0, 1}, {2, 3});
  ExpectTensorEq<bool>(Binary<int32_t>("Greater", x, y), {0, 0, 0, 1, 0, 1}, {2, 3});
  ExpectTensorEq<bool>(Binary<int32_t>("Less", x, y), {1, 1, 0, 0, 0, 0}, {2, 3});
  ExpectTensorEq<bool>(Binary<int32_t>("GreaterEqual", x, y), {0, 0, 1, 1, 1, 1}, {2, 3});
  ExpectTensorEq<bool>(Binary<int32_t>("LessEqual", x, y), {1, 1, 1, 0, 1, 0}, {2, 3});
  ExpectTensorEq<bool>(Binary<float>("Equal", T2<float>({kNaN, 1}, {2}), T2<float>({kNaN, 1}, {2})),
                       {0, 1}, {2});
  ExpectTensorEq<bool>(Binary<std::string>("Equal", Tensor::Vec<std::string>({"a", "b"}),
                                           Tensor::Scalar<std::string>("b")),
                       {0, 1}, {2});
  ExpectTensorEq<bool>(
      Binary<bool>("NotEqual", Tensor::Vec<bool>({true, false}), Tensor::Scalar(true)), {0, 1},
      {2});
}

TEST(MathCompareTest, IncompatibleShapeErrorAttr) {
  Tensor x = T2<int32_t>({1, 2, 3}, {3});
  Tensor y = T2<int32_t>({1, 2}, {2});
  ExpectTensorEq<bool>(RunOk(OpTest("Equal")
                                 .Attr("T", DT_INT32)
                                 .Attr("incompatible_shape_error", false)
                                 .Input(x)
                                 .Input(y)),
                       {false}, {});
  ExpectTensorEq<bool>(RunOk(OpTest("NotEqual")
                                 .Attr("T", DT_INT32)
                                 .Attr("incompatible_shape_error", false)
                                 .Input(x)
                                 .Input(y)),
                       {true}, {});
  absl::Status s = RunStatus(OpTest("Equal").Attr("T", DT_INT32).Input(x).Input(y));
  EXPECT_THAT(s.message(), HasSubstr("Incompatible shapes: [3] vs. [2]"));
}

TEST(MathCompareTest, LogicalOps) {
  Tensor x = Tensor::FromVector<bool>({true, true, false, false}, {2, 2});
  ExpectTensorEq<bool>(RunOk(OpTest("LogicalAnd").Input(x).Input(T2<bool>({true, false}, {2}))),
                       {1, 0, 0, 0}, {2, 2});
  ExpectTensorEq<bool>(RunOk(OpTest("LogicalOr").Input(x).Input(T2<bool>({true, false}, {2}))),
                       {1, 1, 1, 0}, {2, 2});
  ExpectTensorEq<bool>(RunOk(OpTest("LogicalNot").Input(x)), {0, 0, 1, 1}, {2, 2});
}

TEST(MathSelectTest, SelectV2BroadcastsThreeWays) {
  // tf.raw_ops.SelectV2(condition=[[True],[False]], t=[1,2,3], e=9)
  Tensor out = RunOk(OpTest("SelectV2")
                         .Attr("T", DT_INT32)
                         .Input(T2<bool>({true, false}, {2, 1}))
                         .Input(T2<int32_t>({1, 2, 3}, {3}))
                         .Input(Tensor::Scalar(9)));
  ExpectTensorEq<int32_t>(out, {1, 2, 3, 9, 9, 9}, {2, 3});
  Tensor same = RunOk(OpTest("SelectV2")
                          .Attr("T", DT_FLOAT)
                          .Input(T2<bool>({true, false, true}, {3}))
                          .Input(T2<float>({1, 2, 3}, {3}))
                          .Input(T2<float>({-1, -2, -3}, {3})));
  ExpectTensorEq<float>(same, {1, -2, 3}, {3});
  absl::Status s = RunStatus(OpTest("SelectV2")
                                 .Attr("T", DT_INT32)
                                 .Input(T2<bool>({true, false}, {2}))
                                 .Input(T2<int32_t>({1, 2, 3}, {3}))
                                 .Input(Tensor::Scalar(9)));
  EXPECT_THAT(s.message(), HasSubstr("condition [2], then [3], and else [] must be broadcastable"));
}

TEST(MathAddNTest, SumsEqualShapes) {
  OpTest t("AddN");
  t.Attr("T", DT_FLOAT).Attr("N", 3);
  t.Input(T2<float>({1, 2}, {2})).Input(T2<float>({10, 20}, {2})).Input(T2<float>({100, 200}, {2}));
  ExpectTensorEq<float>(RunOk(t), {111, 222}, {2});

  Tensor one = T2<int32_t>({4, 5}, {2});
  Tensor same = RunOk(OpTest("AddN").Attr("T", DT_INT32).Attr("N", 1).Input(one));
  EXPECT_TRUE(same.SharesBufferWith(one));

  absl::Status s = RunStatus(OpTest("AddN")
                                 .Attr("T", DT_INT32)
                                 .Attr("N", 2)
                                 .Input(T2<int32_t>({1, 2, 3}, {3}))
                                 .Input(T2<int32_t>({1, 2}, {2})));
  EXPECT_THAT(s.message(), HasSubstr("input 0 [3] != input 1 [2]"));
}

// --- unary -----------------------------------------------------------------------

TEST(MathUnaryTest, FloatFunctions) {
  Tensor x = T2<float>({-2, 0.5, 4}, {3});
  ExpectTensorEq<float>(Unary<float>("Neg", x), {2, -0.5, -4}, {3});
  ExpectTensorEq<float>(Unary<float>("Abs", x), {2, 0.5, 4}, {3});
  ExpectTensorEq<float>(Unary<float>("Square", x), {4, 0.25, 16}, {3});
  ExpectFloats(Unary<float>("Sqrt", T2<float>({-1, 4}, {2})), {kNaN, 2}, {2});
  ExpectFloats(Unary<float>("Rsqrt", T2<float>({0, 4}, {2})), {kInf, 0.5}, {2});
  ExpectTensorEq<float>(Unary<float>("Exp", x), {std::exp(-2.0f), std::exp(0.5f), std::exp(4.0f)},
                        {3});
  ExpectFloats(Unary<float>("Log", T2<float>({1, 0, -1}, {3})), {0, -kInf, kNaN}, {3});
  ExpectTensorEq<float>(Unary<float>("Tanh", x),
                        {std::tanh(-2.0f), std::tanh(0.5f), std::tanh(4.0f)}, {3});
  // tf.sigmoid([-100., 0., 100., 1.])
  ExpectTensorEq<float>(Unary<float>("Sigmoid", T2<float>({-100, 0, 100, 1}, {4})),
                        {0, 0.5, 1, 0.7310586}, {4});
  ExpectTensorEq<double>(Unary<double>("Exp", Tensor::Scalar(1.0)), {std::exp(1.0)}, {});
  // tf.sin / tf.cos of [-2., 0.5, 4.]
  ExpectTensorEq<float>(Unary<float>("Sin", x), {-0.9092974f, 0.47942555f, -0.7568025f}, {3});
  ExpectTensorEq<float>(Unary<float>("Cos", x), {-0.41614684f, 0.87758255f, -0.6536436f}, {3});
  ExpectTensorEq<double>(Unary<double>("Cos", Tensor::Scalar(M_PI)), {-1.0}, {});
}

TEST(MathUnaryTest, IntegerFunctionsAndEmpty) {
  // tf.square([-3, 46341]) wraps like int32 arithmetic.
  ExpectTensorEq<int32_t>(Unary<int32_t>("Square", T2<int32_t>({-3, 46341}, {2})), {9, -2147479015},
                          {2});
  ExpectTensorEq<int64_t>(Unary<int64_t>("Neg", T2<int64_t>({5, -6}, {2})), {-5, 6}, {2});
  ExpectTensorEq<int32_t>(Unary<int32_t>("Abs", T2<int32_t>({-5, 6}, {2})), {5, 6}, {2});
  ExpectTensorEq<float>(Unary<float>("Exp", T2<float>({}, {0, 2})), {}, {0, 2});
}

// --- Cast ------------------------------------------------------------------------

Tensor Cast(const Tensor& x, DataType dst) {
  return RunOk(OpTest("Cast").Attr("SrcT", x.dtype()).Attr("DstT", dst).Input(x));
}

TEST(MathCastTest, FloatToIntegerMatchesTensorFlow) {
  // tf.cast([1.7,-1.7,2.5,-2.5,nan,1e10,-1e10,inf], tf.int32)
  Tensor f = T2<float>({1.7, -1.7, 2.5, -2.5, kNaN, 1e10, -1e10, kInf}, {8});
  ExpectTensorEq<int32_t>(Cast(f, DT_INT32),
                          {1, -1, 2, -2, kInt32Min, kInt32Min, kInt32Min, kInt32Min}, {8});
  constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
  ExpectTensorEq<int64_t>(Cast(T2<float>({1.7, -1.7, kNaN, 1e30, -1e30}, {5}), DT_INT64),
                          {1, -1, kInt64Min, kInt64Min, kInt64Min}, {5});
  // tf.cast([1.7, 300., -1., 255.9, -300.], tf.uint8) goes through int32.
  ExpectTensorEq<uint8_t>(Cast(T2<float>({1.7, 300, -1, 255.9, -300}, {5}), DT_UINT8),
                          {1, 44, 255, 255, 212}, {5});
  ExpectTensorEq<int32_t>(Cast(T2<double>({3e9, -3e9, 2147483647.9}, {3}), DT_INT32),
                          {kInt32Min, kInt32Min, 2147483647}, {3});
}

TEST(MathCastTest, IntegerAndBoolConversions) {
  ExpectTensorEq<uint8_t>(Cast(T2<int32_t>({300, -1, 256}, {3}), DT_UINT8), {44, 255, 0}, {3});
  ExpectTensorEq<int32_t>(Cast(T2<int64_t>({(1LL << 33) + 5, -(1LL << 31) - 1}, {2}), DT_INT32),
                          {5, 2147483647}, {2});
  ExpectTensorEq<bool>(Cast(T2<float>({0, -0.0f, 0.1f, kNaN}, {4}), DT_BOOL), {0, 0, 1, 1}, {4});
  ExpectTensorEq<bool>(Cast(T2<int32_t>({0, 5, -1}, {3}), DT_BOOL), {0, 1, 1}, {3});
  ExpectTensorEq<float>(Cast(T2<bool>({true, false}, {2}), DT_FLOAT), {1, 0}, {2});
  ExpectTensorEq<int32_t>(Cast(T2<uint8_t>({255}, {1}), DT_INT32), {255}, {1});
  ExpectFloats(Cast(T2<double>({1e300, 0.1}, {2}), DT_FLOAT), {kInf, 0.1f}, {2});
  Tensor same = T2<float>({1, 2}, {2});
  EXPECT_TRUE(Cast(same, DT_FLOAT).SharesBufferWith(same));
}

// --- reductions --------------------------------------------------------------------

Tensor Reduce(const std::string& op, const Tensor& x, const Tensor& axes, bool keep_dims = false) {
  return RunOk(OpTest(op)
                   .Attr("T", x.dtype())
                   .Attr("Tidx", axes.dtype())
                   .Attr("keep_dims", keep_dims)
                   .Input(x)
                   .Input(axes));
}

absl::Status ReduceStatus(const std::string& op, const Tensor& x, const Tensor& axes) {
  return RunStatus(OpTest(op).Attr("T", x.dtype()).Attr("Tidx", axes.dtype()).Input(x).Input(axes));
}

Tensor Iota(int64_t n, float start = 0) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), start);
  return Tensor::Vec<float>(v);
}

TEST(MathReductionTest, SeveralAxesWithKeepDims) {
  // tf.reduce_sum(tf.reshape(tf.range(24), [2,3,4]), axis=[0,2], keepdims=True)
  std::vector<int32_t> v(24);
  std::iota(v.begin(), v.end(), 0);
  Tensor x = T2<int32_t>(v, {2, 3, 4});
  ExpectTensorEq<int32_t>(Reduce("Sum", x, Tensor::Vec<int32_t>({0, 2}), true), {60, 92, 124},
                          {1, 3, 1});
  ExpectTensorEq<int32_t>(Reduce("Sum", x, Tensor::Vec<int64_t>({-1, 0})), {60, 92, 124}, {3});
  ExpectTensorEq<int32_t>(Reduce("Max", x, Tensor::Scalar(1)), {8, 9, 10, 11, 20, 21, 22, 23},
                          {2, 4});
  ExpectTensorEq<int32_t>(Reduce("Min", x, Tensor::Vec<int32_t>({0, 1, 2})), {0}, {});
  // Axes may come as a matrix.
  ExpectTensorEq<int32_t>(Reduce("Sum", x, T2<int32_t>({1, 2}, {1, 2})), {66, 210}, {2});
  ExpectTensorEq<float>(
      Reduce("Prod", T2<float>({2, 3, 4, 5}, {2, 2}), Tensor::Vec<int32_t>({0, 1})), {120}, {});
}

TEST(MathReductionTest, MeanTruncatesIntegersAndWidensTheSum) {
  ExpectTensorEq<int32_t>(Reduce("Mean", T2<int32_t>({1, 2, 4, 4}, {2, 2}), Tensor::Scalar(1)),
                          {1, 4}, {2});
  ExpectTensorEq<int32_t>(Reduce("Mean", T2<int32_t>({-3, -4, -4}, {3}), Tensor::Scalar(0)), {-3},
                          {});
  // The sum of int32 (or uint8) values does not overflow.
  const int32_t big = std::numeric_limits<int32_t>::max();
  ExpectTensorEq<int32_t>(Reduce("Mean", T2<int32_t>({big, big, big, 1}, {4}), Tensor::Scalar(0)),
                          {1610612735}, {});
  ExpectTensorEq<uint8_t>(Reduce("Mean", T2<uint8_t>({250, 250, 251}, {1, 3}), Tensor::Scalar(1)),
                          {250}, {1});
  ExpectTensorEq<float>(Reduce("Mean", T2<float>({1, 2, 3, 5}, {2, 2}), Tensor::Scalar(0)),
                        {2, 3.5}, {2});
}

TEST(MathReductionTest, EmptyReductionsGiveIdentities) {
  Tensor empty = T2<float>({}, {0, 3});
  ExpectFloats(Reduce("Sum", empty, Tensor::Scalar(0)), {0, 0, 0}, {3});
  ExpectFloats(Reduce("Mean", empty, Tensor::Scalar(0)), {kNaN, kNaN, kNaN}, {3});
  ExpectFloats(Reduce("Max", empty, Tensor::Scalar(0)), {-kInf, -kInf, -kInf}, {3});
  ExpectFloats(Reduce("Min", empty, Tensor::Scalar(0)), {kInf, kInf, kInf}, {3});
  ExpectFloats(Reduce("Prod", empty, Tensor::Scalar(0)), {1, 1, 1}, {3});
  ExpectFloats(Reduce("Sum", empty, Tensor::Vec<int32_t>({0, 1})), {0}, {});
  ExpectFloats(Reduce("Sum", empty, Tensor::Scalar(1)), {}, {0});
  Tensor empty_int = T2<int32_t>({}, {0, 2});
  ExpectTensorEq<int32_t>(Reduce("Max", empty_int, Tensor::Scalar(0)), {kInt32Min, kInt32Min}, {2});
  ExpectTensorEq<int32_t>(Reduce("Mean", empty_int, Tensor::Scalar(0)), {0, 0}, {2});
}

TEST(MathReductionTest, EmptyAxesAreTheIdentity) {
  Tensor x = T2<float>({1, 2}, {1, 2});
  Tensor same = Reduce("Sum", x, T2<int32_t>({}, {0}), true);
  ExpectTensorEq<float>(same, {1, 2}, {1, 2});
  EXPECT_TRUE(same.SharesBufferWith(x));
  ExpectTensorEq<float>(Reduce("Mean", Tensor::Scalar(5.0f), T2<int32_t>({}, {0})), {5}, {});
  // Reducing only size-1 dimensions changes the shape, not the values.
  ExpectTensorEq<int32_t>(Reduce("Mean", T2<int32_t>({7, 9}, {1, 2}), Tensor::Scalar(0)), {7, 9},
                          {2});
}

TEST(MathReductionTest, MaxPropagatesNaN) {
  ExpectFloats(Reduce("Max", T2<float>({1, kNaN, 2}, {3}), Tensor::Scalar(0)), {kNaN}, {});
  ExpectFloats(Reduce("Max", T2<float>({kNaN, 1, 2, kNaN}, {2, 2}), Tensor::Scalar(0)),
               {kNaN, kNaN}, {2});
  ExpectFloats(Reduce("Min", T2<float>({3, kNaN, 1}, {3}), Tensor::Scalar(0)), {kNaN}, {});
}

TEST(MathReductionTest, BadAxesAreErrors) {
  Tensor x = T2<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  absl::Status s = ReduceStatus("Sum", x, Tensor::Vec<int32_t>({5}));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("[Sum 'op']"));
  EXPECT_THAT(s.message(), HasSubstr("Invalid reduction dimension 5 for input of shape [2,3]"));
  EXPECT_THAT(ReduceStatus("Max", x, Tensor::Vec<int64_t>({-3})).message(),
              HasSubstr("Invalid reduction dimension -3"));
  EXPECT_THAT(ReduceStatus("Sum", x, Tensor::Vec<int32_t>({1, -1})).message(),
              HasSubstr("duplicate dimension: 1"));
  EXPECT_THAT(ReduceStatus("Sum", Tensor::Scalar(5.0f), Tensor::Scalar(0)).message(),
              HasSubstr("Invalid reduction dimension 0 for input of shape []"));
}

// Naive reference: reduces the dims in `mask` of a row-major tensor.
std::vector<double> NaiveReduce(const std::vector<float>& x, const std::vector<int64_t>& dims,
                                const std::vector<bool>& mask,
                                const std::function<double(double, double)>& f, double init) {
  int64_t out_n = 1;
  for (size_t d = 0; d < dims.size(); ++d) out_n *= mask[d] ? 1 : dims[d];
  std::vector<double> out(out_n, init);
  std::vector<int64_t> idx(dims.size(), 0);
  for (size_t i = 0; i < x.size(); ++i) {
    int64_t o = 0;
    for (size_t d = 0; d < dims.size(); ++d)
      o = o * (mask[d] ? 1 : dims[d]) + (mask[d] ? 0 : idx[d]);
    out[o] = f(out[o], x[i]);
    for (int d = static_cast<int>(dims.size()) - 1; d >= 0 && ++idx[d] == dims[d]; --d) idx[d] = 0;
  }
  return out;
}

void CheckEveryAxisSubset(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::vector<float> values(n);
  for (int64_t i = 0; i < n; ++i) values[i] = static_cast<float>((i * 37) % 101) / 10.0f - 5.0f;
  Tensor x = Tensor::FromVector<float>(values, TensorShape(dims));
  const int rank = static_cast<int>(dims.size());
  for (int bits = 0; bits < (1 << rank); ++bits) {
    std::vector<bool> mask(rank);
    std::vector<int32_t> axes;
    for (int d = 0; d < rank; ++d) {
      mask[d] = (bits >> d) & 1;
      if (mask[d]) axes.push_back(d);
    }
    SCOPED_TRACE(TensorShape(dims).DebugString() + " mask " + std::to_string(bits));
    Tensor a = Tensor::Vec<int32_t>(axes);
    auto sum = NaiveReduce(values, dims, mask, std::plus<double>(), 0.0);
    auto max = NaiveReduce(
        values, dims, mask, [](double p, double q) { return std::max(p, q); }, -1e30);
    Tensor got_sum = Reduce("Sum", x, a, true);
    Tensor got_max = Reduce("Max", x, a);
    Tensor got_mean = Reduce("Mean", x, a);
    ASSERT_EQ(got_sum.NumElements(), static_cast<int64_t>(sum.size()));
    const int64_t count = n / static_cast<int64_t>(sum.size());
    for (size_t i = 0; i < sum.size(); ++i) {
      EXPECT_NEAR(got_sum.flat<float>()[i], sum[i], 1e-3 * (1 + std::abs(sum[i]))) << i;
      EXPECT_EQ(got_max.flat<float>()[i], static_cast<float>(max[i])) << i;
      EXPECT_NEAR(got_mean.flat<float>()[i], sum[i] / count, 1e-3) << i;
    }
  }
}

TEST(MathReductionTest, EveryAxisSubsetMatchesNaiveReference) {
  CheckEveryAxisSubset({2, 3, 4, 5});
  CheckEveryAxisSubset({3, 1, 7, 2});
  CheckEveryAxisSubset({1, 5, 1, 3});
}

TEST(MathReductionTest, LargeReductionsSplitOverThreads) {
  // Long single rows, tall column sums (split along the reduced axis), wide rows.
  CheckEveryAxisSubset({300000});
  CheckEveryAxisSubset({70000, 3});
  CheckEveryAxisSubset({3, 70000});
  CheckEveryAxisSubset({40, 50, 60});
  std::vector<int64_t> big(1 << 20);
  std::iota(big.begin(), big.end(), 0);
  ExpectTensorEq<int64_t>(Reduce("Sum", Tensor::Vec<int64_t>(big), Tensor::Scalar(0)),
                          {(int64_t{1} << 20) * ((int64_t{1} << 20) - 1) / 2}, {});
}

// --- ArgMax --------------------------------------------------------------------

Tensor ArgMax(const Tensor& x, int64_t axis, DataType out_type = DT_INT64) {
  return RunOk(OpTest("ArgMax")
                   .Attr("T", x.dtype())
                   .Attr("output_type", out_type)
                   .Input(x)
                   .Input(Tensor::Scalar<int64_t>(axis))
                   .Attr("Tidx", DT_INT64));
}

TEST(MathArgMaxTest, TiesGiveTheFirstIndex) {
  // tf.argmax([[1,3,3],[5,5,1]], axis=1) == [1, 0]
  Tensor x = T2<int32_t>({1, 3, 3, 5, 5, 1}, {2, 3});
  ExpectTensorEq<int64_t>(ArgMax(x, 1), {1, 0}, {2});
  ExpectTensorEq<int64_t>(ArgMax(x, -1), {1, 0}, {2});
  ExpectTensorEq<int32_t>(ArgMax(x, 0, DT_INT32), {1, 1, 0}, {3});
  // NaN is never the largest: [[1,5],[3,5],[3,nan]] over axis 0 -> [1, 0].
  ExpectTensorEq<int64_t>(ArgMax(T2<float>({1, 5, 3, 5, 3, kNaN}, {3, 2}), 0), {1, 0}, {2});
  ExpectTensorEq<int64_t>(ArgMax(T2<float>({kNaN, 1, 3}, {3}), 0), {2}, {});
  ExpectTensorEq<int64_t>(ArgMax(T2<float>({-kInf, -kInf}, {2}), 0), {0}, {});
  ExpectTensorEq<int64_t>(ArgMax(T2<bool>({false, true, true}, {3}), 0), {1}, {});
  ExpectTensorEq<int64_t>(ArgMax(T2<float>({}, {0, 3}), 1), {}, {0});
}

TEST(MathArgMaxTest, BadAxesAreErrors) {
  auto status = [](const Tensor& x, int32_t axis) {
    return RunStatus(OpTest("ArgMax").Attr("T", x.dtype()).Input(x).Input(Tensor::Scalar(axis)));
  };
  EXPECT_THAT(status(T2<float>({1, 2, 3, 4, 5, 6}, {2, 3}), 5).message(),
              HasSubstr("Expected dimension in the range [-2, 2), but got 5"));
  EXPECT_THAT(status(T2<float>({}, {0, 3}), 0).message(),
              HasSubstr("Reduction axis 0 is empty in shape [0,3]"));
  EXPECT_THAT(status(Tensor::Scalar(1.0f), 0).message(),
              HasSubstr("Expected dimension in the range [0, 0), but got 0"));
}

// --- MatMul ------------------------------------------------------------------

template <typename T>
Tensor MatMul(const Tensor& a, const Tensor& b, bool ta = false, bool tb = false) {
  return RunOk(OpTest("MatMul")
                   .Attr("T", DataTypeToEnum<T>::value)
                   .Attr("transpose_a", ta)
                   .Attr("transpose_b", tb)
                   .Input(a)
                   .Input(b));
}

// Element (i, j) of a stored [r, c] matrix, read transposed when `t`.
template <typename T>
T At(const Tensor& m, bool t, int64_t i, int64_t j) {
  return t ? m.flat<T>()[j * m.dim_size(1) + i] : m.flat<T>()[i * m.dim_size(1) + j];
}

template <typename T>
Tensor Filled(int64_t r, int64_t c, int seed) {
  std::vector<T> v(r * c);
  for (int64_t i = 0; i < r * c; ++i) v[i] = static_cast<T>(((i * 7 + seed) % 19) - 9);
  return Tensor::FromVector<T>(v, TensorShape({r, c}));
}

template <typename T>
void CheckMatMul(int64_t m, int64_t k, int64_t n) {
  for (int mode = 0; mode < 4; ++mode) {
    const bool ta = mode & 1, tb = mode & 2;
    SCOPED_TRACE(std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n) +
                 " ta=" + std::to_string(ta) + " tb=" + std::to_string(tb));
    Tensor a = ta ? Filled<T>(k, m, 1) : Filled<T>(m, k, 1);
    Tensor b = tb ? Filled<T>(n, k, 2) : Filled<T>(k, n, 2);
    Tensor c = MatMul<T>(a, b, ta, tb);
    ASSERT_EQ(c.shape(), TensorShape({m, n}));
    int bad = 0;
    for (int64_t i = 0; i < m && bad < 5; ++i) {
      for (int64_t j = 0; j < n && bad < 5; ++j) {
        T want = 0;
        for (int64_t p = 0; p < k; ++p) want += At<T>(a, ta, i, p) * At<T>(b, tb, p, j);
        const T got = c.flat<T>()[i * n + j];
        if (got != want) {  // Small integers: exact even in float.
          ADD_FAILURE() << "(" << i << "," << j << ") got " << got << " want " << want;
          ++bad;
        }
      }
    }
  }
}

TEST(MathMatMulTest, SmallProduct) {
  ExpectTensorEq<float>(
      MatMul<float>(T2<float>({1, 2, 3, 4, 5, 6}, {2, 3}), T2<float>({1, 0, 0, 1, 1, 1}, {3, 2})),
      {4, 5, 10, 11}, {2, 2});
  // tf.matmul([[1,2]], [[3],[4]]) for int32.
  ExpectTensorEq<int32_t>(MatMul<int32_t>(T2<int32_t>({1, 2}, {1, 2}), T2<int32_t>({3, 4}, {2, 1})),
                          {11}, {1, 1});
}

TEST(MathMatMulTest, TransposesAndDtypes) {
  CheckMatMul<float>(3, 4, 5);
  CheckMatMul<double>(5, 2, 3);
  CheckMatMul<int32_t>(4, 3, 2);
  CheckMatMul<int64_t>(2, 5, 4);
}

TEST(MathMatMulTest, LargeProductsSplitIntoBlocks) {
  CheckMatMul<float>(300, 64, 200);  // Split by rows.
  CheckMatMul<float>(70, 64, 900);   // Wide: split by columns.
  CheckMatMul<double>(256, 40, 256);
  CheckMatMul<int32_t>(260, 32, 270);
}

TEST(MathMatMulTest, EmptyMatrices) {
  ExpectTensorEq<float>(MatMul<float>(T2<float>({}, {0, 3}), Filled<float>(3, 4, 0)), {}, {0, 4});
  ExpectTensorEq<float>(MatMul<float>(T2<float>({}, {2, 0}), T2<float>({}, {0, 3})),
                        {0, 0, 0, 0, 0, 0}, {2, 3});
}

// BatchMatMulV2 against one MatMul per output matrix, the batch dimensions
// broadcast by hand: x [2,1,m,k] (or its adjoint) times y [3,k,n].
TEST(MathBatchMatMulTest, BroadcastBatchesEqualOneMatMulEach) {
  const int64_t m = 3, k = 4, n = 2;
  for (int mode = 0; mode < 4; ++mode) {
    const bool ax = mode & 1, ay = mode & 2;
    SCOPED_TRACE("adj_x=" + std::to_string(ax) + " adj_y=" + std::to_string(ay));
    std::vector<Tensor> xs, ys;
    std::vector<float> xv, yv;
    for (int b = 0; b < 2; ++b) {
      xs.push_back(ax ? Filled<float>(k, m, b) : Filled<float>(m, k, b));
      xv.insert(xv.end(), xs.back().flat<float>().begin(), xs.back().flat<float>().end());
    }
    for (int b = 0; b < 3; ++b) {
      ys.push_back(ay ? Filled<float>(n, k, 5 + b) : Filled<float>(k, n, 5 + b));
      yv.insert(yv.end(), ys.back().flat<float>().begin(), ys.back().flat<float>().end());
    }
    Tensor x = Tensor::FromVector<float>(xv, ax ? TensorShape({2, 1, k, m})
                                                : TensorShape({2, 1, m, k}));
    Tensor y = Tensor::FromVector<float>(yv, ay ? TensorShape({3, n, k}) : TensorShape({3, k, n}));
    Tensor z = RunOk(OpTest("BatchMatMulV2")
                         .Attr("T", DT_FLOAT)
                         .Attr("adj_x", ax)
                         .Attr("adj_y", ay)
                         .Input(x)
                         .Input(y));
    ASSERT_EQ(z.shape(), TensorShape({2, 3, m, n}));
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < 3; ++j) {
        Tensor want = MatMul<float>(xs[i], ys[j], ax, ay);
        for (int64_t e = 0; e < m * n; ++e) {
          EXPECT_EQ(z.flat<float>()[(i * 3 + j) * m * n + e], want.flat<float>()[e]) << i << j;
        }
      }
    }
  }
}

TEST(MathBatchMatMulTest, BatchMatMulNeedsEqualBatchesAndNamesTheShapes) {
  Tensor x = Tensor::FromVector<float>(std::vector<float>(12), TensorShape({2, 2, 3}));
  Tensor y = Tensor::FromVector<float>(std::vector<float>(12), TensorShape({1, 3, 4}));
  absl::Status s = RunStatus(OpTest("BatchMatMul").Attr("T", DT_FLOAT).Input(x).Input(y));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("batch dimensions differ: x=[2,2,3] y=[1,3,4]"));
  // V2 broadcasts the same pair.
  Tensor z = RunOk(OpTest("BatchMatMulV2").Attr("T", DT_FLOAT).Input(x).Input(y));
  EXPECT_EQ(z.shape(), TensorShape({2, 2, 4}));
  Tensor bad = Tensor::FromVector<float>(std::vector<float>(16), TensorShape({2, 4, 2}));
  s = RunStatus(OpTest("BatchMatMulV2").Attr("T", DT_FLOAT).Input(x).Input(bad));
  EXPECT_THAT(s.message(), HasSubstr("inner dimensions differ"));
}

TEST(MathMatMulTest, BadShapesShowBothShapes) {
  absl::Status s = RunStatus(OpTest("MatMul")
                                 .Attr("T", DT_FLOAT)
                                 .Input(T2<float>(std::vector<float>(6), {2, 3}))
                                 .Input(T2<float>(std::vector<float>(20), {4, 5})));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("[MatMul 'op'] inner dimensions differ: a=[2,3] b=[4,5]"));
  absl::Status t = RunStatus(OpTest("MatMul")
                                 .Attr("T", DT_FLOAT)
                                 .Attr("transpose_a", true)
                                 .Input(T2<float>(std::vector<float>(6), {2, 3}))
                                 .Input(T2<float>(std::vector<float>(6), {3, 2})));
  EXPECT_THAT(t.message(), HasSubstr("a=[2,3] b=[3,2] (transpose_a=true, transpose_b=false)"));
  absl::Status v = RunStatus(OpTest("MatMul")
                                 .Attr("T", DT_FLOAT)
                                 .Input(T2<float>({1, 2, 3}, {3}))
                                 .Input(T2<float>({1, 2, 3}, {3, 1})));
  EXPECT_THAT(v.message(), HasSubstr("inputs must be matrices: a=[3] b=[3,1]"));
}

// --- large inputs through the parallel paths ---------------------------------------

TEST(MathParallelTest, LargeElementwiseMatchesScalarLoop) {
  const int64_t n = 200003;  // Not a multiple of any block size.
  Tensor x = Iota(n, -100000);
  Tensor y = Iota(n, 3);
  Tensor sum = Binary<float>("AddV2", x, y);
  Tensor scaled = Binary<float>("Mul", x, Tensor::Scalar(0.5f));
  Tensor rows = Binary<float>("Sub", T2<float>(std::vector<float>(n, 1.0f), {1, n}),
                              T2<float>({1, 2}, {2, 1}));
  Tensor tanh = Unary<float>("Tanh", Binary<float>("Mul", x, Tensor::Scalar(1e-5f)));
  Tensor cast = Cast(x, DT_INT32);
  Tensor addn = RunOk(OpTest("AddN").Attr("T", DT_FLOAT).Attr("N", 3).Input(x).Input(y).Input(x));
  for (int64_t i = 0; i < n; ++i) {
    const float xi = x.flat<float>()[i], yi = y.flat<float>()[i];
    ASSERT_EQ(sum.flat<float>()[i], xi + yi) << i;
    ASSERT_EQ(scaled.flat<float>()[i], xi * 0.5f) << i;
    ASSERT_EQ(rows.flat<float>()[i], 0.0f) << i;
    ASSERT_EQ(rows.flat<float>()[n + i], -1.0f) << i;
    ASSERT_NEAR(tanh.flat<float>()[i], std::tanh(xi * 1e-5f), 1e-6) << i;
    ASSERT_EQ(cast.flat<int32_t>()[i], static_cast<int32_t>(xi)) << i;
    ASSERT_EQ(addn.flat<float>()[i], xi + yi + xi) << i;
  }
}

TEST(MathParallelTest, RowVectorBroadcastsOverManyRows) {
  const int64_t rows = 70001;
  for (int64_t cols : {1, 3, 100, 300}) {
    SCOPED_TRACE("cols " + std::to_string(cols));
    Tensor m = Iota(rows * cols);
    ASSERT_TRUE(m.Reshaped(TensorShape({rows, cols})).ok());
    m = *m.Reshaped(TensorShape({rows, cols}));
    Tensor v = Iota(cols, 0.5f);
    Tensor mv = Binary<float>("Sub", m, v);
    Tensor vm = Binary<float>("Sub", v, m);
    for (int64_t i = 0; i < rows * cols; ++i) {
      const float want = m.flat<float>()[i] - v.flat<float>()[i % cols];
      ASSERT_EQ(mv.flat<float>()[i], want) << i;
      ASSERT_EQ(vm.flat<float>()[i], -want) << i;
    }
  }
}

// --- shape functions ---------------------------------------------------------------

// Output 0's shape for `node` (defaults added) given input shapes and constants.
absl::StatusOr<PartialShape> InferOutput(tensorflow::NodeDef node,
                                         const std::vector<PartialShape>& shapes,
                                         std::vector<const Tensor*> constants = {}) {
  ASSIGN_OR_RETURN(const OpDef* op, OpRegistry::Global()->LookUp(node.op()));
  AddDefaultAttrs(*op, &node);
  for (size_t i = node.input_size(); i < shapes.size(); ++i)
    node.add_input("in" + std::to_string(i));
  DataTypeVector in_types, out_types;
  RETURN_IF_ERROR(InOutTypesForNode(node, *op, &in_types, &out_types));
  constants.resize(shapes.size(), nullptr);
  ASSIGN_OR_RETURN(
      std::vector<PartialShape> out,
      InferShapes(node, *op, shapes, constants, in_types, static_cast<int>(out_types.size())));
  return out[0];
}

tensorflow::NodeDef Node(const std::string& op, DataType t = DT_FLOAT) {
  tensorflow::NodeDef node;
  node.set_name("n");
  node.set_op(op);
  SetAttr(&node, "T", t);
  return node;
}

constexpr int64_t kU = kUnknownDim;

// --- ops TensorFlow's gradients and helpers insert (values: TensorFlow 2.21) ----

TEST(MathOpsTest, RoundingOps) {
  const Tensor x = T2<float>({-2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f, -0.7f, 3.2f}, {8});
  // Round sends halves to the even neighbour.
  ExpectFloats(Unary<float>("Round", x), {-2, -2, -0.0f, 0, 2, 2, -1, 3}, {8});
  ExpectFloats(Unary<float>("Floor", x), {-3, -2, -1, 0, 1, 2, -1, 3}, {8});
  ExpectFloats(Unary<float>("Ceil", x), {-2, -1, -0.0f, 1, 2, 3, -0.0f, 4}, {8});
  ExpectTensorEq<int32_t>(Unary<int32_t>("Round", T2<int32_t>({-3, 4}, {2})), {-3, 4}, {2});
  ExpectFloats(Unary<float>("Reciprocal", x),
               {-0.4f, -0.6666667f, -2, 2, 0.6666667f, 0.4f, -1.4285715f, 0.3125f}, {8});
}

TEST(MathOpsTest, Log1pAndExpm1AreAccurateNearZero) {
  const Tensor x = T2<float>({1e-8f, -0.5f, 0.25f, 3.0f}, {4});
  ExpectFloats(Unary<float>("Log1p", x), {1e-8f, -0.6931472f, 0.22314355f, 1.3862944f}, {4});
  ExpectFloats(Unary<float>("Expm1", x), {1e-8f, -0.39346933f, 0.28402543f, 19.085537f}, {4});
  // Relative, not absolute: log(1 + 1e-8) in float would be 0.
  EXPECT_NEAR(Unary<float>("Log1p", x).flat<float>()[0], 1e-8f, 1e-14);
}

TEST(MathOpsTest, DivNoNanIsZeroWhereTheDivisorIsZero) {
  const Tensor x = T2<float>({1, 0, -2, 5, kNaN, 3}, {6});
  const Tensor y = T2<float>({2, 0, 0, -4, 0, kInf}, {6});
  ExpectFloats(Binary<float>("DivNoNan", x, y), {0.5f, 0, 0, -1.25f, 0, 0}, {6});
}

TEST(MathOpsTest, PowBroadcasts) {
  ExpectFloats(Binary<float>("Pow", T2<float>({2, 0.5f, -2, 0, 4}, {5}),
                             T2<float>({3, -2, 2, 0, 0.5f}, {5})),
               {8, 4, 4, 1, 2}, {5});
  ExpectFloats(Binary<float>("Pow", T2<float>({1, 2, 3, 4}, {2, 2}), Tensor::Scalar(2.0f)),
               {1, 4, 9, 16}, {2, 2});
  OpTest bad("Pow");
  bad.Attr("T", DT_FLOAT).Input(T2<float>({1, 2}, {2})).Input(T2<float>({1, 2, 3}, {3}));
  EXPECT_EQ(RunStatus(bad).code(), absl::StatusCode::kInvalidArgument);
}

// TensorFlow 2.21's integer powers: exact, wrapping on overflow, and no
// negative exponents (not even for base 1).
TEST(MathOpsTest, IntegerPowMatchesTensorFlow) {
  ExpectTensorEq<int32_t>(Binary<int32_t>("Pow", T2<int32_t>({2, -3, 0, 1, -1, 7, 3}, {7}),
                                          T2<int32_t>({10, 3, 0, 5, 7, 2, 25}, {7})),
                          {1024, -27, 1, 1, -1, 49, 1180052131}, {7});
  ExpectTensorEq<int64_t>(
      Binary<int64_t>("Pow", T2<int64_t>({3, 2, 3}, {3, 1}), T2<int64_t>({41, 0}, {2})),
      {-420491770248316829, 1, 2199023255552, 1, -420491770248316829, 1}, {3, 2});
  OpTest negative("Pow");
  negative.Attr("T", DT_INT32).Input(T2<int32_t>({2, 1}, {2})).Input(T2<int32_t>({1, -2}, {2}));
  EXPECT_THAT(InvalidArgumentOf(negative),
              HasSubstr("Integers to negative integer powers are not allowed"));
  // TensorFlow has no integer Reciprocal kernel either.
  OpTest reciprocal("Reciprocal");
  reciprocal.Attr("T", DT_INT32).Input(T2<int32_t>({1, 2}, {2}));
  EXPECT_FALSE(reciprocal.Run().ok());
}

TEST(MathOpsTest, ReciprocalGradAndL2Loss) {
  OpTest grad("ReciprocalGrad");
  grad.Attr("T", DT_FLOAT).Input(T2<float>({2, -0.5f}, {2})).Input(T2<float>({1, 3}, {2}));
  ExpectFloats(RunOk(grad), {-4, -0.75f}, {2});
  ExpectFloats(Unary<float>("L2Loss", T2<float>({1, -2, 3, 0.5f}, {2, 2})), {7.125f}, {});
  ExpectFloats(Unary<float>("L2Loss", T2<float>({}, {0})), {0}, {});
}

TEST(MathOpsTest, ArgMinTakesTheFirstSmallestAndSkipsNaN) {
  OpTest t("ArgMin");
  t.Attr("T", DT_FLOAT)
      .Input(T2<float>({3, 1, 1, kNaN, 2, 0}, {2, 3}))
      .Input(Tensor::Scalar<int32_t>(1));
  ExpectTensorEq<int64_t>(RunOk(t), {1, 2}, {2});  // TensorFlow's.
  OpTest empty("ArgMin");
  empty.Attr("T", DT_FLOAT).Input(T2<float>({}, {2, 0})).Input(Tensor::Scalar<int32_t>(1));
  EXPECT_EQ(RunStatus(empty).code(), absl::StatusCode::kInvalidArgument);
}

TEST(MathOpsTest, StopGradientForwardsItsInput) {
  OpTest t("StopGradient");
  t.Attr("T", DT_FLOAT).Input(T2<float>({1, 2}, {2}));
  ExpectFloats(RunOk(t), {1, 2}, {2});
}

TEST(MathShapeFnTest, BroadcastBinaryOps) {
  struct Case {
    PartialShape x, y, want;
  };
  const Case cases[] = {
      {PartialShape({2, 1, 3}), PartialShape({4, 1}), PartialShape({2, 4, 3})},
      {PartialShape({kU, 3}), PartialShape({3}), PartialShape({kU, 3})},
      {PartialShape({kU}), PartialShape({5}), PartialShape({5})},
      {PartialShape({kU}), PartialShape({1}), PartialShape({kU})},
      {PartialShape({2, 3}), PartialShape::Scalar(), PartialShape({2, 3})},
      {PartialShape::Unknown(), PartialShape({3}), PartialShape::Unknown()},
  };
  for (const Case& c : cases) {
    for (const char* op : {"AddV2", "Mul", "FloorMod", "Maximum", "Greater", "Equal"}) {
      absl::StatusOr<PartialShape> got = InferOutput(Node(op), {c.x, c.y});
      ASSERT_TRUE(got.ok()) << op << ": " << got.status();
      EXPECT_EQ(*got, c.want) << op << " " << c.x.DebugString() << " x " << c.y.DebugString()
                              << " gave " << got->DebugString();
    }
  }
  absl::StatusOr<PartialShape> bad =
      InferOutput(Node("Sub"), {PartialShape({2, 3}), PartialShape({2})});
  EXPECT_THAT(bad.status().message(), HasSubstr("[2,3]"));
  EXPECT_THAT(bad.status().message(), HasSubstr("[2]"));
  tensorflow::NodeDef lenient = Node("NotEqual");
  SetAttr(&lenient, "incompatible_shape_error", false);
  EXPECT_EQ(InferOutput(lenient, {PartialShape({2}), PartialShape({3})}).value(),
            PartialShape::Unknown());
}

TEST(MathShapeFnTest, OtherElementwiseOps) {
  EXPECT_EQ(InferOutput(Node("SelectV2"),
                        {PartialShape({2, 1}), PartialShape({3}), PartialShape::Scalar()})
                .value(),
            PartialShape({2, 3}));
  EXPECT_THAT(
      InferOutput(Node("SelectV2"), {PartialShape({2}), PartialShape({3}), PartialShape::Scalar()})
          .status()
          .message(),
      HasSubstr("condition [2], then [3], and else [] must be broadcastable"));
  tensorflow::NodeDef add_n = Node("AddN");
  SetAttr(&add_n, "N", 3);
  EXPECT_EQ(
      InferOutput(add_n, {PartialShape({kU, 3}), PartialShape({2, kU}), PartialShape::Unknown()})
          .value(),
      PartialShape({2, 3}));
  EXPECT_THAT(InferOutput(add_n, {PartialShape({3}), PartialShape({2}), PartialShape({3})})
                  .status()
                  .message(),
              HasSubstr("input 0 [3] != input 1 [2]"));
  EXPECT_EQ(InferOutput(Node("Tanh"), {PartialShape({kU, 4})}).value(), PartialShape({kU, 4}));
  tensorflow::NodeDef cast;
  cast.set_name("c");
  cast.set_op("Cast");
  SetAttr(&cast, "SrcT", DT_FLOAT);
  SetAttr(&cast, "DstT", DT_INT32);
  EXPECT_EQ(InferOutput(cast, {PartialShape({2, kU})}).value(), PartialShape({2, kU}));
}

TEST(MathShapeFnTest, MatMul) {
  EXPECT_EQ(InferOutput(Node("MatMul"), {PartialShape({2, 3}), PartialShape({3, 5})}).value(),
            PartialShape({2, 5}));
  tensorflow::NodeDef tt = Node("MatMul");
  SetAttr(&tt, "transpose_a", true);
  SetAttr(&tt, "transpose_b", true);
  EXPECT_EQ(InferOutput(tt, {PartialShape({3, 2}), PartialShape({5, 3})}).value(),
            PartialShape({2, 5}));
  EXPECT_EQ(InferOutput(Node("MatMul"), {PartialShape({kU, 3}), PartialShape::Unknown()}).value(),
            PartialShape({kU, kU}));
  absl::StatusOr<PartialShape> bad =
      InferOutput(Node("MatMul"), {PartialShape({2, 3}), PartialShape({4, 5})});
  EXPECT_THAT(bad.status().message(), HasSubstr("inner dimensions differ: a=[2,3] b=[4,5]"));
  EXPECT_FALSE(InferOutput(Node("MatMul"), {PartialShape({3}), PartialShape({3, 5})}).ok());
}

TEST(MathShapeFnTest, Reductions) {
  const PartialShape in({2, kU, 4});
  Tensor axis1 = Tensor::Vec<int32_t>({1});
  Tensor axes = Tensor::Vec<int64_t>({-1, 0});
  Tensor none = T2<int32_t>({}, {0});
  Tensor bad = Tensor::Vec<int32_t>({3});
  auto reduce = [&](bool keep_dims, const PartialShape& x, const Tensor* a) {
    tensorflow::NodeDef node = Node("Sum");
    SetAttr(&node, "keep_dims", keep_dims);
    if (a != nullptr) SetAttr(&node, "Tidx", a->dtype());
    return InferOutput(node, {x, PartialShape({kU})}, {nullptr, a});
  };
  EXPECT_EQ(reduce(false, in, &axis1).value(), PartialShape({2, 4}));
  EXPECT_EQ(reduce(true, in, &axis1).value(), PartialShape({2, 1, 4}));
  EXPECT_EQ(reduce(false, in, &axes).value(), PartialShape({kU}));
  EXPECT_EQ(reduce(true, in, &axes).value(), PartialShape({1, kU, 1}));
  EXPECT_EQ(reduce(false, in, &none).value(), in);
  // Unknown axes: the rank survives only with keep_dims.
  EXPECT_EQ(reduce(true, in, nullptr).value(), PartialShape({kU, kU, kU}));
  EXPECT_EQ(reduce(false, in, nullptr).value(), PartialShape::Unknown());
  EXPECT_EQ(reduce(true, PartialShape::Unknown(), &axis1).value(), PartialShape::Unknown());
  EXPECT_THAT(reduce(false, in, &bad).status().message(),
              HasSubstr("Invalid reduction dimension 3 for input of shape [2,?,4]"));
}

TEST(MathShapeFnTest, ArgMax) {
  Tensor dim = Tensor::Scalar(-1);
  tensorflow::NodeDef node = Node("ArgMax");
  EXPECT_EQ(
      InferOutput(node, {PartialShape({2, 3}), PartialShape::Scalar()}, {nullptr, &dim}).value(),
      PartialShape({2}));
  EXPECT_EQ(InferOutput(node, {PartialShape({2, kU, 3}), PartialShape::Scalar()}).value(),
            PartialShape({kU, kU}));
  Tensor bad = Tensor::Scalar(2);
  EXPECT_THAT(InferOutput(node, {PartialShape({2, 3}), PartialShape::Scalar()}, {nullptr, &bad})
                  .status()
                  .message(),
              HasSubstr("Expected dimension in the range [-2, 2), but got 2"));
}

}  // namespace
}  // namespace dflow
