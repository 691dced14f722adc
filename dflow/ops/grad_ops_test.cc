// Kernels of the ops that exist for gradients (math_grad_ops.cc,
// array_grad_ops.cc); expected values computed with TensorFlow 2.x.
#include <string>
#include <vector>

#include "dflow/ops/op_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

using ::testing::HasSubstr;

struct BcastCase {
  std::vector<int32_t> s0, s1, r0, r1;
};

TEST(GradOpsKernelTest, BroadcastGradientArgsMatchesTensorFlow) {
  const std::vector<BcastCase> cases = {
      {{2, 3}, {3}, {}, {0}},           {{2, 1}, {1, 3}, {1}, {0}}, {{1}, {1}, {}, {}},
      {{}, {2, 3}, {0, 1}, {}},         {{2, 3}, {2, 3}, {}, {}},   {{1, 1}, {1}, {0, 1}, {0, 1}},
      {{2, 1, 3}, {4, 1}, {1}, {0, 2}}, {{0, 3}, {1, 3}, {}, {0}},  {{5, 1}, {}, {1}, {0, 1}},
  };
  for (const BcastCase& c : cases) {
    OpTest t("BroadcastGradientArgs");
    t.Attr("T", DT_INT32).Input(Tensor::Vec<int32_t>(c.s0)).Input(Tensor::Vec<int32_t>(c.s1));
    absl::StatusOr<std::vector<Tensor>> out = t.Run();
    ASSERT_TRUE(out.ok()) << out.status();
    const TensorShape n0({static_cast<int64_t>(c.r0.size())});
    const TensorShape n1({static_cast<int64_t>(c.r1.size())});
    ExpectTensorEq<int32_t>((*out)[0], c.r0, n0);
    ExpectTensorEq<int32_t>((*out)[1], c.r1, n1);
  }
}

TEST(GradOpsKernelTest, BroadcastGradientArgsRejectsIncompatibleShapes) {
  OpTest t("BroadcastGradientArgs");
  t.Attr("T", DT_INT64).Input(Tensor::Vec<int64_t>({2, 3})).Input(Tensor::Vec<int64_t>({4}));
  absl::StatusOr<std::vector<Tensor>> out = t.Run();
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("Incompatible shapes: [2,3] vs. [4]"));
}

TEST(GradOpsKernelTest, ElementwiseGradKernels) {
  const std::vector<std::pair<std::string, double>> cases = {{"TanhGrad", 1.5},
                                                             {"SigmoidGrad", 0.5}};
  for (const auto& [op, expected] : cases) {
    OpTest t(op);
    t.Attr("T", DT_DOUBLE).Input(Tensor::Vec<double>({0.5})).Input(Tensor::Vec<double>({2}));
    absl::StatusOr<std::vector<Tensor>> out = t.Run();
    ASSERT_TRUE(out.ok()) << out.status();
    ExpectTensorEq<double>((*out)[0], {expected}, TensorShape({1}));
  }
  OpTest sqrt("SqrtGrad");
  sqrt.Attr("T", DT_FLOAT).Input(Tensor::Vec<float>({2})).Input(Tensor::Vec<float>({1}));
  ExpectTensorEq<float>((*sqrt.Run())[0], {0.25f}, TensorShape({1}));
  OpTest rsqrt("RsqrtGrad");
  rsqrt.Attr("T", DT_FLOAT).Input(Tensor::Vec<float>({2})).Input(Tensor::Vec<float>({1}));
  ExpectTensorEq<float>((*rsqrt.Run())[0], {-4.f}, TensorShape({1}));
}

TEST(GradOpsKernelTest, ElementwiseGradRejectsShapeMismatch) {
  OpTest t("TanhGrad");
  t.Attr("T", DT_FLOAT).Input(Tensor::Vec<float>({1, 2})).Input(Tensor::Vec<float>({1}));
  absl::StatusOr<std::vector<Tensor>> out = t.Run();
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("TanhGrad"));
}

TEST(GradOpsKernelTest, UnsortedSegmentSumAddsRowsAndDropsNegativeIds) {
  OpTest t("UnsortedSegmentSum");
  t.Attr("T", DT_FLOAT).Attr("Tindices", DT_INT32).Attr("Tnumsegments", DT_INT32);
  t.Input(Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, TensorShape({3, 2})));
  t.Input(Tensor::Vec<int32_t>({0, 2, 0})).Input(Tensor::Scalar<int32_t>(3));
  absl::StatusOr<std::vector<Tensor>> out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<float>((*out)[0], {6, 8, 0, 0, 3, 4}, TensorShape({3, 2}));

  OpTest neg("UnsortedSegmentSum");
  neg.Attr("T", DT_FLOAT).Attr("Tindices", DT_INT64).Attr("Tnumsegments", DT_INT32);
  neg.Input(Tensor::Vec<float>({1, 2, 3})).Input(Tensor::Vec<int64_t>({0, -1, 1}));
  neg.Input(Tensor::Scalar<int32_t>(2));
  ExpectTensorEq<float>((*neg.Run())[0], {1, 3}, TensorShape({2}));
}

TEST(GradOpsKernelTest, UnsortedSegmentSumRejectsOutOfRangeIds) {
  OpTest t("UnsortedSegmentSum");
  t.Attr("T", DT_FLOAT).Attr("Tindices", DT_INT32).Attr("Tnumsegments", DT_INT32);
  t.Input(Tensor::Vec<float>({1, 2})).Input(Tensor::Vec<int32_t>({0, 5}));
  t.Input(Tensor::Scalar<int32_t>(2));
  absl::StatusOr<std::vector<Tensor>> out = t.Run();
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("segment_ids[1] = 5 is out of range [0, 2)"));
}

TEST(GradOpsKernelTest, ConcatOffsetGivesEachInputsStart) {
  OpTest t("ConcatOffset");
  t.Attr("N", 3).Attr("shape_type", DT_INT32).Input(Tensor::Scalar<int32_t>(1));
  for (int32_t w : {3, 5, 1}) t.Input(Tensor::Vec<int32_t>({2, w}));
  absl::StatusOr<std::vector<Tensor>> out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<int32_t>((*out)[0], {0, 0}, TensorShape({2}));
  ExpectTensorEq<int32_t>((*out)[1], {0, 3}, TensorShape({2}));
  ExpectTensorEq<int32_t>((*out)[2], {0, 8}, TensorShape({2}));
}

TEST(GradOpsKernelTest, InvertPermutation) {
  OpTest t("InvertPermutation");
  t.Attr("T", DT_INT32).Input(Tensor::Vec<int32_t>({2, 0, 1}));
  ExpectTensorEq<int32_t>((*t.Run())[0], {1, 2, 0}, TensorShape({3}));
  OpTest bad("InvertPermutation");
  bad.Attr("T", DT_INT32).Input(Tensor::Vec<int32_t>({0, 0, 1}));
  absl::StatusOr<std::vector<Tensor>> out = bad.Run();
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("not a permutation: [0,0,1]"));
}

TEST(GradOpsKernelTest, PadSurroundsWithZeros) {
  OpTest t("Pad");
  t.Attr("T", DT_FLOAT).Attr("Tpaddings", DT_INT32);
  t.Input(Tensor::FromVector<float>({1, 2, 3, 4}, TensorShape({2, 2})));
  t.Input(Tensor::FromVector<int32_t>({1, 0, 0, 2}, TensorShape({2, 2})));
  absl::StatusOr<std::vector<Tensor>> out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<float>((*out)[0], {0, 0, 0, 0, 1, 2, 0, 0, 3, 4, 0, 0}, TensorShape({3, 4}));

  OpTest bad("Pad");
  bad.Attr("T", DT_FLOAT).Attr("Tpaddings", DT_INT32);
  bad.Input(Tensor::Vec<float>({1}))
      .Input(Tensor::FromVector<int32_t>({-1, 0}, TensorShape({1, 2})));
  ASSERT_FALSE(bad.Run().ok());
}

}  // namespace
}  // namespace dflow
