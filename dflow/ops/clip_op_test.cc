// ClipByValue against TensorFlow 2.21's values, and its bad input.
#include <cmath>
#include <limits>
#include <vector>

#include "dflow/ops/op_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

using ::testing::HasSubstr;

OpTest Clip(Tensor t, Tensor lo, Tensor hi) {
  OpTest op("ClipByValue");
  op.Attr("T", t.dtype()).Input(std::move(t)).Input(std::move(lo)).Input(std::move(hi));
  return op;
}

const Tensor kT = Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, TensorShape({2, 3}));

TEST(ClipByValueTest, MatchesTensorFlow) {
  OpTest scalars = Clip(kT, Tensor::Scalar<float>(2), Tensor::Scalar<float>(5));
  ExpectTensorEq<float>(OutputsOf(scalars).at(0), {2, 2, 3, 4, 5, 5}, TensorShape({2, 3}));
  // A per-element min (above the max at some places: the min wins, as in TensorFlow).
  OpTest mixed = Clip(kT, Tensor::FromVector<float>({0, 3, 3, 5, 0, 7}, TensorShape({2, 3})),
                      Tensor::Scalar<float>(4.5));
  ExpectTensorEq<float>(OutputsOf(mixed).at(0), {1, 3, 3, 5, 4.5, 7}, TensorShape({2, 3}));
  OpTest ints = Clip(Tensor::Vec<int32_t>({-5, 0, 9}), Tensor::Scalar<int32_t>(-1),
                     Tensor::Scalar<int32_t>(3));
  ExpectTensorEq<int32_t>(OutputsOf(ints).at(0), {-1, 0, 3}, TensorShape({3}));
  OpTest nan = Clip(Tensor::Vec<float>({std::numeric_limits<float>::quiet_NaN(), 1}),
                    Tensor::Scalar<float>(0), Tensor::Scalar<float>(0.5));
  std::vector<Tensor> out = OutputsOf(nan);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(std::isnan(out[0].flat<float>()[0]));
  EXPECT_EQ(out[0].flat<float>()[1], 0.5f);
}

TEST(ClipByValueTest, BoundsMustBeScalarOrOfTheInputsShape) {
  OpTest row = Clip(kT, Tensor::Vec<float>({1, 2}), Tensor::Scalar<float>(4));
  EXPECT_THAT(InvalidArgumentOf(row),
              HasSubstr("clip_value_min and clip_value_max must be either of the same shape as "
                        "input, or a scalar. input shape: [2,3]clip_value_min shape: [2]"));
  OpTest one = Clip(kT, Tensor::Scalar<float>(1), Tensor::FromVector<float>({4}, TensorShape({1})));
  EXPECT_THAT(InvalidArgumentOf(one), HasSubstr("clip_value_max shape: [1]"));
}

}  // namespace
}  // namespace dflow
