// Split, SplitV and Unpack against TensorFlow 2.21's values on arange(24)
// of shape [2,3,4], and their bad input.
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

OpTest Split(int32_t axis, int num_split, Tensor value = Arange(TensorShape({2, 3, 4}))) {
  OpTest t("Split");
  t.Attr("T", value.dtype()).Attr("num_split", int64_t{num_split});
  t.Input(Tensor::Scalar<int32_t>(axis)).Input(std::move(value));
  return t;
}

OpTest SplitV(std::vector<int64_t> sizes, int32_t axis) {
  OpTest t("SplitV");
  t.Attr("T", DT_FLOAT).Attr("Tlen", DT_INT64).Attr("num_split", int64_t(sizes.size()));
  t.Input(Arange(TensorShape({2, 3, 4}))).Input(Tensor::Vec<int64_t>(sizes));
  t.Input(Tensor::Scalar<int32_t>(axis));
  return t;
}

OpTest Unpack(int64_t num, int64_t axis, Tensor value = Arange(TensorShape({2, 3, 4}))) {
  OpTest t("Unpack");
  t.Attr("T", value.dtype()).Attr("num", num).Attr("axis", axis).Input(std::move(value));
  return t;
}

TEST(SplitTest, EqualPiecesMatchTensorFlow) {
  OpTest middle = Split(1, 3);
  std::vector<Tensor> out = OutputsOf(middle);
  ASSERT_FALSE(out.empty());
  ASSERT_EQ(out.size(), 3u);
  ExpectTensorEq<float>(out[0], {0, 1, 2, 3, 12, 13, 14, 15}, TensorShape({2, 1, 4}));
  ExpectTensorEq<float>(out[2], {8, 9, 10, 11, 20, 21, 22, 23}, TensorShape({2, 1, 4}));
  OpTest last = Split(-1, 2);
  out = OutputsOf(last);
  ASSERT_FALSE(out.empty());
  ExpectTensorEq<float>(out[1], {2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23},
                        TensorShape({2, 3, 2}));
}

TEST(SplitTest, StringsAndEmptyPieces) {
  OpTest strings = Split(0, 2, Tensor::Vec<std::string>({"a", "b"}));
  std::vector<Tensor> out = OutputsOf(strings);
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out[1].flat<std::string>()[0], "b");
  OpTest empty = Split(1, 2, Tensor(DT_FLOAT, TensorShape({0, 4})));
  out = OutputsOf(empty);
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out[1].shape(), TensorShape({0, 2}));
}

TEST(SplitTest, BadInput) {
  OpTest rank = Split(3, 2);
  EXPECT_THAT(InvalidArgumentOf(rank),
              HasSubstr("-input rank(-3) <= split_dim < input rank (3), but got 3"));
  OpTest uneven = Split(2, 3);
  EXPECT_THAT(InvalidArgumentOf(uneven),
              HasSubstr("evenly divide the split dimension, but got split_dim 2 (size = 4) and "
                        "num_split 3"));
}

TEST(SplitTest, AbsurdNumSplitIsRefusedBeforeAllocating) {
  OpTest t = Split(0, 1);
  t.Attr("num_split", int64_t{1} << 40);
  EXPECT_THAT(InvalidArgumentOf(t), HasSubstr("attr 'num_split' = 1099511627776 exceeds"));
}

TEST(SplitVTest, OneInferredSizeMatchesTensorFlow) {
  OpTest t = SplitV({1, -1, 0}, 2);
  std::vector<Tensor> out = OutputsOf(t);
  ASSERT_FALSE(out.empty());
  ExpectTensorEq<float>(out[0], {0, 4, 8, 12, 16, 20}, TensorShape({2, 3, 1}));
  ExpectTensorEq<float>(out[1], {1, 2, 3, 5, 6, 7, 9, 10, 11, 13, 14, 15, 17, 18, 19, 21, 22, 23},
                        TensorShape({2, 3, 3}));
  EXPECT_EQ(out[2].shape(), TensorShape({2, 3, 0}));
}

TEST(SplitVTest, BadSizes) {
  OpTest two_unknown = SplitV({1, -1, -1}, 2);
  EXPECT_THAT(InvalidArgumentOf(two_unknown), HasSubstr("There can only be one -1 in the input."));
  OpTest negative = SplitV({1, -2, 5}, 2);
  EXPECT_THAT(InvalidArgumentOf(negative),
              HasSubstr("Split size at index 1 must be >= 0. Got: -2"));
  OpTest wrong_sum = SplitV({1, 2, 7}, 2);
  EXPECT_THAT(InvalidArgumentOf(wrong_sum), HasSubstr("if not fully specified.  Got: 10"));
  OpTest too_big = SplitV({1, 8, -1}, 2);
  EXPECT_THAT(InvalidArgumentOf(too_big), HasSubstr("Got: 9"));
  // Sizes whose sum overflows int64 are rejected, not wrapped to a valid sum.
  OpTest overflow = SplitV({int64_t{1} << 62, int64_t{1} << 62, int64_t{1} << 62, -4}, 2);
  EXPECT_THAT(InvalidArgumentOf(overflow), HasSubstr("overflow"));
  OpTest count("SplitV");
  count.Attr("T", DT_FLOAT).Attr("Tlen", DT_INT32).Attr("num_split", int64_t{3});
  count.Input(Arange(TensorShape({6}))).Input(Tensor::Vec<int32_t>({1, 5}));
  count.Input(Tensor::Scalar<int32_t>(0));
  EXPECT_THAT(InvalidArgumentOf(count), HasSubstr("got 1 -D and 2 elements"));
}

TEST(UnpackTest, AxesMatchTensorFlow) {
  OpTest middle = Unpack(3, 1);
  std::vector<Tensor> out = OutputsOf(middle);
  ASSERT_FALSE(out.empty());
  ExpectTensorEq<float>(out[1], {4, 5, 6, 7, 16, 17, 18, 19}, TensorShape({2, 4}));
  OpTest last = Unpack(4, -1);
  out = OutputsOf(last);
  ASSERT_FALSE(out.empty());
  ExpectTensorEq<float>(out[1], {1, 5, 9, 13, 17, 21}, TensorShape({2, 3}));
}

TEST(UnpackTest, BadInput) {
  OpTest count = Unpack(3, 0);
  EXPECT_THAT(InvalidArgumentOf(count),
              HasSubstr("Input shape axis 0 must equal 3, got shape [2,3,4]"));
  OpTest axis = Unpack(2, 3);
  EXPECT_THAT(InvalidArgumentOf(axis), HasSubstr("axis = 3 not in [-3, 3)"));
  OpTest scalar = Unpack(1, 0, Tensor::Scalar<float>(1));
  EXPECT_THAT(InvalidArgumentOf(scalar), HasSubstr("axis = 0 not in [0, 0)"));
}

}  // namespace
}  // namespace dflow
