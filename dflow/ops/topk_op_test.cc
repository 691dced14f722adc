// TopKV2 against TensorFlow 2.21's values (ties keep the lower index
// first), and its bad input.
#include <cmath>
#include <limits>
#include <vector>

#include "dflow/ops/op_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

using ::testing::HasSubstr;

OpTest TopK(Tensor x, Tensor k, DataType index_type = DT_INT32, bool sorted = true) {
  OpTest t("TopKV2");
  t.Attr("T", x.dtype()).Attr("Tk", k.dtype()).Attr("index_type", index_type);
  t.Attr("sorted", sorted).Input(std::move(x)).Input(std::move(k));
  return t;
}

TEST(TopKTest, TiesKeepTheLowerIndexFirst) {
  OpTest t =
      TopK(Tensor::FromVector<float>({1, 3, 3, 2, 5, 5, 5, 5, 0, -1, 7, 7}, TensorShape({3, 4})),
           Tensor::Scalar<int32_t>(3));
  std::vector<Tensor> out = OutputsOf(t);
  ASSERT_EQ(out.size(), 2u);
  // TensorFlow 2.21: tf.math.top_k on the same rows, k = 3.
  ExpectTensorEq<float>(out[0], {3, 3, 2, 5, 5, 5, 7, 7, 0}, TensorShape({3, 3}));
  ExpectTensorEq<int32_t>(out[1], {1, 2, 3, 0, 1, 2, 2, 3, 0}, TensorShape({3, 3}));
}

TEST(TopKTest, IndexTypesRanksAndEmptyK) {
  OpTest wide = TopK(Tensor::FromVector<int32_t>({4, 1, 4, 9, 0}, TensorShape({1, 5})),
                     Tensor::Scalar<int64_t>(2), DT_INT64, /*sorted=*/false);
  std::vector<Tensor> out = OutputsOf(wide);
  ASSERT_EQ(out.size(), 2u);
  ExpectTensorEq<int32_t>(out[0], {9, 4}, TensorShape({1, 2}));
  ExpectTensorEq<int64_t>(out[1], {3, 0}, TensorShape({1, 2}));
  OpTest deep = TopK(Tensor::FromVector<float>({2, 1, 0, 3}, TensorShape({1, 2, 2})),
                     Tensor::Scalar<int32_t>(1));
  out = OutputsOf(deep);
  ASSERT_EQ(out.size(), 2u);
  ExpectTensorEq<float>(out[0], {2, 3}, TensorShape({1, 2, 1}));
  ExpectTensorEq<int32_t>(out[1], {0, 1}, TensorShape({1, 2, 1}));
  OpTest none =
      TopK(Tensor::FromVector<float>({1, 4}, TensorShape({1, 2})), Tensor::Scalar<int32_t>(0));
  EXPECT_EQ(OutputsOf(none).at(0).shape(), TensorShape({1, 0}));
}

// NaN orders first (TensorFlow's order for NaN is unspecified); what
// matters is that the sort stays in bounds and returns every entry.
TEST(TopKTest, NanKeepsATotalOrder) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> row;
  for (int i = 0; i < 64; ++i) row.push_back(i % 3 == 0 ? nan : static_cast<float>(i % 7));
  OpTest t = TopK(Tensor::Vec<float>(row), Tensor::Scalar<int32_t>(64));
  std::vector<Tensor> out = OutputsOf(t);
  ASSERT_EQ(out.size(), 2u);
  for (int j = 0; j < 22; ++j) EXPECT_TRUE(std::isnan(out[0].flat<float>()[j])) << j;
  EXPECT_EQ(out[1].flat<int32_t>()[0], 0);
  EXPECT_EQ(out[0].flat<float>()[22], 6.0f);
}

TEST(TopKTest, BadInput) {
  const Tensor x = Tensor::Vec<float>({1, 3});
  OpTest big = TopK(x, Tensor::Scalar<int32_t>(3));
  EXPECT_THAT(InvalidArgumentOf(big),
              HasSubstr("input must have at least k columns. Had 2, needed 3"));
  OpTest negative = TopK(x, Tensor::Scalar<int32_t>(-1));
  EXPECT_THAT(InvalidArgumentOf(negative), HasSubstr("Need k >= 0, got -1"));
  OpTest vec = TopK(x, Tensor::Vec<int32_t>({1}));
  EXPECT_THAT(InvalidArgumentOf(vec), HasSubstr("k must be scalar, got shape [1]"));
  OpTest scalar = TopK(Tensor::Scalar<float>(1), Tensor::Scalar<int32_t>(1));
  EXPECT_THAT(InvalidArgumentOf(scalar), HasSubstr("input must be >= 1-D, got shape []"));
}

}  // namespace
}  // namespace dflow
