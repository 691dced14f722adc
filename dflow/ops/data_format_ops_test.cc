// DataFormatVecPermute against TensorFlow 2.21's values, and its bad input.
#include <cstdint>
#include <string>
#include <vector>

#include "dflow/ops/op_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

using ::testing::HasSubstr;

OpTest Permute(Tensor x, const std::string& src, const std::string& dst) {
  OpTest t("DataFormatVecPermute");
  t.Attr("T", x.dtype()).Attr("src_format", src).Attr("dst_format", dst).Input(std::move(x));
  return t;
}

Tensor RunOk(OpTest t) {
  std::vector<Tensor> out = OutputsOf(t);
  return out.empty() ? Tensor() : out[0];
}

std::string ErrorOf(OpTest t) { return InvalidArgumentOf(t); }

TEST(DataFormatVecPermuteTest, MatchesTensorFlow) {
  // tf.raw_ops.DataFormatVecPermute(x=[1, 2, 3, 4], src_format=..., dst_format=...)
  ExpectTensorEq<int32_t>(RunOk(Permute(Tensor::Vec<int32_t>({1, 2, 3, 4}), "NCHW", "NHWC")),
                          {1, 3, 4, 2}, {4});
  ExpectTensorEq<int64_t>(RunOk(Permute(Tensor::Vec<int64_t>({1, 2, 3, 4}), "NHWC", "NCHW")),
                          {1, 4, 2, 3}, {4});
  // Two values are the spatial dimensions, in one order in both formats.
  ExpectTensorEq<int32_t>(RunOk(Permute(Tensor::Vec<int32_t>({5, 6}), "NCHW", "NHWC")), {5, 6},
                          {2});
  // Rows of a [4, 2] paddings matrix move together.
  absl::StatusOr<Tensor> pads = Tensor::Vec<int32_t>({0, 1, 2, 3, 4, 5, 6, 7}).Reshaped({4, 2});
  ASSERT_TRUE(pads.ok());
  ExpectTensorEq<int32_t>(RunOk(Permute(*pads, "NCHW", "NHWC")), {0, 1, 4, 5, 6, 7, 2, 3},
                          {4, 2});
}

TEST(DataFormatVecPermuteTest, BadInputIsAnError) {
  EXPECT_THAT(ErrorOf(Permute(Tensor::Vec<int32_t>({1, 2, 3}), "NCHW", "NHWC")),
              HasSubstr("1D input must be of size 2 or 4, but got shape [3]"));
  EXPECT_THAT(ErrorOf(Permute(Tensor::Scalar<int32_t>(1), "NCHW", "NHWC")),
              HasSubstr("input must be a vector or 2D tensor, but got shape []"));
  absl::StatusOr<Tensor> wide = Tensor::Vec<int32_t>({0, 1, 2, 3, 4, 5, 6, 7}).Reshaped({2, 4});
  ASSERT_TRUE(wide.ok());
  EXPECT_THAT(ErrorOf(Permute(*wide, "NCHW", "NHWC")),
              HasSubstr("Second dimension of 2D input must be of size 2, but got shape [2,4]"));
  EXPECT_THAT(ErrorOf(Permute(Tensor::Vec<int32_t>({1, 2, 3, 4}), "NCHW", "NHWQ")),
              HasSubstr("must determine a permutation"));
}

}  // namespace
}  // namespace dflow
