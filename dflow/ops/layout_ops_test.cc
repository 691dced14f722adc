// ReverseV2, BroadcastTo, Diag, DiagPart, OneHot (layout_ops.cc) and
// PreventGradient's forward pass against TensorFlow 2.21's values, and their
// bad input.
#include <limits>
#include <vector>

#include "dflow/ops/op_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

using ::testing::HasSubstr;

Tensor Arange(const TensorShape& shape) {
  Tensor t(DT_FLOAT, shape);
  for (int64_t i = 0; i < t.NumElements(); ++i) t.flat<float>()[i] = static_cast<float>(i);
  return t;
}

OpTest Binary(const std::string& op, Tensor x, Tensor index, const std::string& index_attr) {
  OpTest t(op);
  t.Attr("T", x.dtype())
      .Attr(index_attr, index.dtype())
      .Input(std::move(x))
      .Input(std::move(index));
  return t;
}

OpTest Unary(const std::string& op, Tensor x) {
  OpTest t(op);
  t.Attr("T", x.dtype()).Input(std::move(x));
  return t;
}

TEST(ReverseV2Test, MatchesTensorFlow) {
  OpTest t =
      Binary("ReverseV2", Arange(TensorShape({2, 3, 4})), Tensor::Vec<int32_t>({0, -1}), "Tidx");
  std::vector<Tensor> out = OutputsOf(t);
  ASSERT_EQ(out.size(), 1u);
  // TensorFlow 2.21: tf.reverse(arange(24).reshape(2,3,4), [0, -1]).
  ExpectTensorEq<float>(out[0], {15, 14, 13, 12, 19, 18, 17, 16, 23, 22, 21, 20,
                                 3,  2,  1,  0,  7,  6,  5,  4,  11, 10, 9,  8},
                        TensorShape({2, 3, 4}));
  OpTest none =
      Binary("ReverseV2", Tensor::Vec<std::string>({"a", "b"}), Tensor::Vec<int64_t>({}), "Tidx");
  out = OutputsOf(none);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].flat<std::string>()[0], "a");
  OpTest empty = Binary("ReverseV2", Tensor(DT_FLOAT, TensorShape({0, 2})),
                        Tensor::Vec<int32_t>({0, 1}), "Tidx");
  EXPECT_EQ(OutputsOf(empty).at(0).shape(), TensorShape({0, 2}));
}

TEST(ReverseV2Test, BadAxes) {
  const Tensor x = Arange(TensorShape({2, 3}));
  OpTest dup = Binary("ReverseV2", x, Tensor::Vec<int32_t>({0, -2}), "Tidx");
  EXPECT_THAT(InvalidArgumentOf(dup), HasSubstr("axis 0 specified more than once."));
  OpTest range = Binary("ReverseV2", x, Tensor::Vec<int32_t>({-3}), "Tidx");
  EXPECT_THAT(InvalidArgumentOf(range), HasSubstr("'axis'[0] = -3 is out of valid range [0, 1]"));
  OpTest matrix =
      Binary("ReverseV2", x, Tensor::FromVector<int32_t>({0}, TensorShape({1, 1})), "Tidx");
  EXPECT_THAT(InvalidArgumentOf(matrix), HasSubstr("'dims' must be 1-dimension, not 2"));
}

TEST(BroadcastToTest, MatchesTensorFlow) {
  OpTest t = Binary("BroadcastTo", Tensor::FromVector<float>({1, 2}, TensorShape({2, 1})),
                    Tensor::Vec<int32_t>({2, 2, 3}), "Tidx");
  // TensorFlow 2.21: tf.broadcast_to([[1.], [2.]], [2, 2, 3]).
  ExpectTensorEq<float>(OutputsOf(t).at(0), {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2},
                        TensorShape({2, 2, 3}));
  OpTest zero =
      Binary("BroadcastTo", Tensor::Vec<float>({1}), Tensor::Vec<int64_t>({0, 3}), "Tidx");
  EXPECT_EQ(OutputsOf(zero).at(0).shape(), TensorShape({0, 3}));
}

TEST(BroadcastToTest, BadShapes) {
  const Tensor x = Tensor::Vec<float>({1, 2, 3});
  OpTest bad = Binary("BroadcastTo", x, Tensor::Vec<int32_t>({2, 2}), "Tidx");
  EXPECT_THAT(InvalidArgumentOf(bad), HasSubstr("Incompatible shapes: [3] vs. [2,2]"));
  OpTest negative = Binary("BroadcastTo", x, Tensor::Vec<int32_t>({-1, 3}), "Tidx");
  EXPECT_THAT(InvalidArgumentOf(negative), HasSubstr("Dimension -1 must be >= 0"));
  OpTest rank =
      Binary("BroadcastTo", Arange(TensorShape({1, 3})), Tensor::Vec<int32_t>({3}), "Tidx");
  EXPECT_THAT(InvalidArgumentOf(rank),
              HasSubstr("Rank of input (2) must be no greater than rank of output shape (1)."));
  // A product past int64 is refused before any allocation.
  const int64_t big = std::numeric_limits<int64_t>::max() / 2;
  OpTest huge = Binary("BroadcastTo", x, Tensor::Vec<int64_t>({big, big, 3}), "Tidx");
  EXPECT_THAT(InvalidArgumentOf(huge), HasSubstr("has too many elements"));
  OpTest too_many = Binary("BroadcastTo", x, Tensor::Vec<int64_t>({int64_t{1} << 40, 3}), "Tidx");
  EXPECT_EQ(too_many.Run().status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(DiagTest, MatchesTensorFlow) {
  OpTest diag = Unary("Diag", Tensor::FromVector<int32_t>({1, 2, 3, 4}, TensorShape({2, 2})));
  // TensorFlow 2.21: tf.linalg.tensor_diag([[1, 2], [3, 4]]).
  ExpectTensorEq<int32_t>(OutputsOf(diag).at(0), {1, 0, 0, 0, 0, 2, 0, 0, 0, 0, 3, 0, 0, 0, 0, 4},
                          TensorShape({2, 2, 2, 2}));
  OpTest part = Unary("DiagPart", Arange(TensorShape({2, 3, 2, 3})));
  ExpectTensorEq<float>(OutputsOf(part).at(0), {0, 7, 14, 21, 28, 35}, TensorShape({2, 3}));
  OpTest scalar = Unary("DiagPart", Tensor::Scalar<float>(1));
  ExpectTensorEq<float>(OutputsOf(scalar).at(0), {1}, TensorShape({}));
}

TEST(DiagTest, BadInput) {
  OpTest scalar = Unary("Diag", Tensor::Scalar<float>(1));
  EXPECT_THAT(InvalidArgumentOf(scalar), HasSubstr("Input must be at least rank 1, got 0"));
  OpTest odd = Unary("DiagPart", Arange(TensorShape({2, 2, 2})));
  EXPECT_THAT(InvalidArgumentOf(odd), HasSubstr("should be even and positive, got shape [2,2,2]"));
  OpTest mismatch = Unary("DiagPart", Arange(TensorShape({2, 3})));
  EXPECT_THAT(InvalidArgumentOf(mismatch),
              HasSubstr("Invalid shape [2,3]: dimensions 0 and 1 do not match."));
  // A 2^20-element diagonal would make 2^40 elements: refused before allocating.
  OpTest huge = Unary("Diag", Tensor(DT_FLOAT, TensorShape({int64_t{1} << 20})));
  EXPECT_EQ(huge.Run().status().code(), absl::StatusCode::kResourceExhausted);
}

OpTest OneHot(Tensor indices, int32_t depth, int64_t axis, float on = 7, float off = -1) {
  OpTest t("OneHot");
  t.Attr("T", DT_FLOAT).Attr("TI", indices.dtype()).Attr("axis", axis);
  t.Input(std::move(indices)).Input(Tensor::Scalar<int32_t>(depth));
  t.Input(Tensor::Scalar<float>(on)).Input(Tensor::Scalar<float>(off));
  return t;
}

TEST(OneHotTest, AxesAndOutOfRangeIndicesMatchTensorFlow) {
  const Tensor ids = Tensor::FromVector<int32_t>({0, 5, -1, 2}, TensorShape({2, 2}));
  // TensorFlow 2.21: tf.one_hot([[0, 5], [-1, 2]], 3, 7., -1., axis) for axis -1, 0, 1;
  // 5 and -1 give an all-off row.
  const std::vector<float> want = {7, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 7};
  OpTest last = OneHot(ids, 3, -1);
  ExpectTensorEq<float>(OutputsOf(last).at(0), want, TensorShape({2, 2, 3}));
  OpTest first = OneHot(ids, 3, 0);
  ExpectTensorEq<float>(OutputsOf(first).at(0), want, TensorShape({3, 2, 2}));
  OpTest middle = OneHot(ids, 3, 1);
  ExpectTensorEq<float>(OutputsOf(middle).at(0), want, TensorShape({2, 3, 2}));
  OpTest bytes = OneHot(Tensor::Vec<uint8_t>({1, 0}), 2, -1, 3, 0);
  ExpectTensorEq<float>(OutputsOf(bytes).at(0), {0, 3, 3, 0}, TensorShape({2, 2}));
  OpTest scalar = OneHot(Tensor::Scalar<int64_t>(2), 3, -1, 5, 0);
  ExpectTensorEq<float>(OutputsOf(scalar).at(0), {0, 0, 5}, TensorShape({3}));
}

TEST(OneHotTest, BadInput) {
  const Tensor ids = Tensor::Vec<int32_t>({0, 1});
  OpTest depth = OneHot(ids, -1, -1);
  EXPECT_THAT(InvalidArgumentOf(depth), HasSubstr("depth must be non-negative, got: -1"));
  OpTest axis = OneHot(ids, 3, 2);
  EXPECT_THAT(InvalidArgumentOf(axis),
              HasSubstr("Expected axis to be -1 or between [0, 2).  But received: 2"));
  OpTest axis2 = OneHot(ids, 3, -2);
  EXPECT_THAT(InvalidArgumentOf(axis2), HasSubstr("But received: -2"));
  OpTest on("OneHot");
  on.Attr("T", DT_FLOAT).Attr("TI", DT_INT32).Input(ids).Input(Tensor::Scalar<int32_t>(3));
  on.Input(Tensor::Vec<float>({1})).Input(Tensor::Scalar<float>(0));
  EXPECT_THAT(InvalidArgumentOf(on), HasSubstr("on_value must be a scalar, but got: [1]"));
  // 2^31 - 1 columns for 2^20 indices: past the tensor limit, refused before allocating.
  Tensor many(DT_INT32, TensorShape({int64_t{1} << 20}));
  OpTest huge = OneHot(many, std::numeric_limits<int32_t>::max(), -1);
  EXPECT_EQ(huge.Run().status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(PreventGradientTest, ForwardIsIdentity) {
  OpTest t = Unary("PreventGradient", Arange(TensorShape({2, 3})));
  t.Attr("message", std::string("no"));
  ExpectTensorEq<float>(OutputsOf(t).at(0), {0, 1, 2, 3, 4, 5}, TensorShape({2, 3}));
}

}  // namespace
}  // namespace dflow
