// DenseToDenseSetOperation against TensorFlow 2.21's results for the same inputs.
#include <cstdint>
#include <string>
#include <vector>

#include "dflow/ops/op_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<std::vector<Tensor>> SetOp(const std::string& op, const Tensor& a, const Tensor& b) {
  OpTest t("DenseToDenseSetOperation");
  t.Attr("T", a.dtype()).Attr("set_operation", op).Input(a).Input(b);
  return t.Run();
}

std::vector<int64_t> Flat64(const Tensor& t) {
  auto f = t.flat<int64_t>();
  return {f.begin(), f.end()};
}

TEST(SetOpsTest, EachRowIsASetAndTheResultIsSparseAndSorted) {
  const Tensor a = Tensor::FromVector<int32_t>({1, 2, 2, 5, 3, 3, 4, 0}, TensorShape({2, 4}));
  const Tensor b = Tensor::FromVector<int32_t>({2, 9, 7, 7, 3, 1, 1, 1}, TensorShape({2, 4}));
  struct Case {
    std::string op;
    std::vector<int64_t> indices;
    std::vector<int32_t> values;
    std::vector<int64_t> shape;
  };
  const std::vector<Case> cases = {
      {"a-b", {0, 0, 0, 1, 1, 0, 1, 1}, {1, 5, 0, 4}, {2, 2}},
      {"b-a", {0, 0, 0, 1, 1, 0}, {7, 9, 1}, {2, 2}},
      {"intersection", {0, 0, 1, 0}, {2, 3}, {2, 1}},
      {"union", {0, 0, 0, 1, 0, 2, 0, 3, 0, 4, 1, 0, 1, 1, 1, 2, 1, 3}, {1, 2, 5, 7, 9, 0, 1, 3, 4},
       {2, 5}},
  };
  for (const Case& c : cases) {
    auto out = SetOp(c.op, a, b);
    ASSERT_TRUE(out.ok()) << c.op << ": " << out.status();
    EXPECT_EQ(Flat64((*out)[0]), c.indices) << c.op;
    auto values = (*out)[1].flat<int32_t>();
    EXPECT_EQ(std::vector<int32_t>(values.begin(), values.end()), c.values) << c.op;
    EXPECT_EQ(Flat64((*out)[2]), c.shape) << c.op;
  }
  // The losses' weights check: nothing left is an empty [2, 0] result.
  auto empty = SetOp("a-b", Tensor::FromVector<int32_t>({4, 3}, TensorShape({2, 1})),
                     Tensor::FromVector<int32_t>({4, 1, 3, 1}, TensorShape({2, 2})));
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ((*empty)[1].NumElements(), 0);
  EXPECT_EQ(Flat64((*empty)[2]), (std::vector<int64_t>{2, 0}));
}

// 2^31 groups of empty sets hold no elements: an empty result, nothing allocated per group.
TEST(SetOpsTest, ManyEmptyGroupsCostNothing) {
  const Tensor empty(DT_INT32, TensorShape({int64_t{1} << 31, 0}));
  auto out = SetOp("union", empty, empty);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[1].NumElements(), 0);
  EXPECT_EQ(Flat64((*out)[2]), (std::vector<int64_t>{int64_t{1} << 31, 0}));
}

TEST(SetOpsTest, BadInputsAreInvalidArgument) {
  auto low_rank = SetOp("a-b", Tensor::Vec<int32_t>({1, 2}), Tensor::Vec<int32_t>({1}));
  EXPECT_THAT(low_rank.status().message(), HasSubstr("Shape [2] has rank 1 < 2"));
  auto mismatched = SetOp("a-b", Tensor::FromVector<int32_t>({1, 2, 3, 4}, TensorShape({2, 2})),
                          Tensor::FromVector<int32_t>({1}, TensorShape({1, 1})));
  EXPECT_EQ(mismatched.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(mismatched.status().message(), HasSubstr("Mismatched shapes [2] vs [1]"));
  auto unknown = SetOp("xor", Tensor::FromVector<int32_t>({1}, TensorShape({1, 1})),
                       Tensor::FromVector<int32_t>({1}, TensorShape({1, 1})));
  EXPECT_THAT(unknown.status().message(), HasSubstr("Invalid set_operation xor."));
}

}  // namespace
}  // namespace dflow
