// Finite-difference rows (gradients_test.cc's harness) for the gradients of
// split_ops.cc, layout_ops.cc, scan_ops.cc, clip_op.cc and topk_op.cc,
// PreventGradient's refusal, and those ops' shape functions as graph
// construction sees them.
#include <string>
#include <vector>

#include "dflow/client/gradient_test_util.h"
#include "dflow/client/gradients.h"
#include "dflow/client/ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

using ::testing::HasSubstr;

GradInputSpec S(std::initializer_list<int64_t> dims, double lo = -1, double hi = 1) {
  return GradInput(dims, lo, hi);
}

Tensor I32(std::vector<int32_t> v) { return Tensor::Vec<int32_t>(v); }

// `op` with x[0] and a constant second input, plus attrs.
template <typename... Attrs>
GradBuildFn WithConst(const std::string& op, Tensor c, Attrs... attrs) {
  return [op, c, attrs...](const Scope& s, const std::vector<Output>& x) {
    OpBuilder b(s, op);
    b.Input(x[0]).Input(c);
    (b.Attr(attrs.first, attrs.second), ...);
    return b.Finish();
  };
}

std::pair<std::string, bool> Flag(const std::string& name, bool v) { return {name, v}; }

std::vector<GradCase> SplitCases() {
  return {
      {"Split_both_used",
       "Split",
       {S({2, 4})},
       [](const Scope& s, const std::vector<Output>& x) {
         std::vector<Output> parts = OpBuilder(s, "Split")
                                         .Input(Tensor::Scalar<int32_t>(1))
                                         .Input(x[0])
                                         .Attr("num_split", int64_t{2})
                                         .FinishAll();
         return ops::Mul(s, parts[0], parts[1]);
       }},
      {"Split_one_used",
       "Split",
       {S({3, 2})},
       [](const Scope& s, const std::vector<Output>& x) {
         return OpBuilder(s, "Split")
             .Input(Tensor::Scalar<int32_t>(0))
             .Input(x[0])
             .Attr("num_split", int64_t{3})
             .FinishAll()[1];
       }},
      {"SplitV_inferred",
       "SplitV",
       {S({2, 5})},
       [](const Scope& s, const std::vector<Output>& x) {
         std::vector<Output> parts = OpBuilder(s, "SplitV")
                                         .Input(x[0])
                                         .Input(I32({2, -1}))
                                         .Input(Tensor::Scalar<int32_t>(-1))
                                         .Attr("num_split", int64_t{2})
                                         .FinishAll();
         return ops::Concat(s, {parts[1], ops::Tanh(s, parts[0])}, 1);
       }},
      {"Unpack_axis0",
       "Unpack",
       {S({3, 2})},
       [](const Scope& s, const std::vector<Output>& x) {
         std::vector<Output> rows =
             OpBuilder(s, "Unpack").Input(x[0]).Attr("num", int64_t{3}).FinishAll();
         return ops::Mul(s, rows[0], rows[2]);
       }},
      {"Unpack_axis_minus1",
       "Unpack",
       {S({2, 2})},
       [](const Scope& s, const std::vector<Output>& x) {
         std::vector<Output> cols = OpBuilder(s, "Unpack")
                                        .Input(x[0])
                                        .Attr("num", int64_t{2})
                                        .Attr("axis", int64_t{-1})
                                        .FinishAll();
         return ops::Mul(s, cols[0], cols[1]);
       }},
  };
}

std::vector<GradCase> LayoutCases() {
  return {
      {"ReverseV2", "ReverseV2", {S({2, 3})}, WithConst("ReverseV2", I32({1}))},
      {"ReverseV2_two_axes", "ReverseV2", {S({2, 3, 2})}, WithConst("ReverseV2", I32({0, -1}))},
      {"BroadcastTo_row", "BroadcastTo", {S({3})}, WithConst("BroadcastTo", I32({2, 3}))},
      {"BroadcastTo_column", "BroadcastTo", {S({2, 1})}, WithConst("BroadcastTo", I32({2, 2, 3}))},
      {"Diag", "Diag", {S({3})}, UnaryGradCase("Diag")},
      {"DiagPart", "DiagPart", {S({2, 3, 2, 3})}, UnaryGradCase("DiagPart")},
  };
}

std::vector<GradCase> ScanCases() {
  const Tensor axis1 = Tensor::Scalar<int32_t>(1);
  const Tensor axis0 = Tensor::Scalar<int32_t>(0);
  return {
      {"Cumsum", "Cumsum", {S({2, 3})}, WithConst("Cumsum", axis1)},
      {"Cumsum_exclusive_reverse",
       "Cumsum",
       {S({3, 2})},
       WithConst("Cumsum", axis0, Flag("exclusive", true), Flag("reverse", true))},
      {"Cumprod", "Cumprod", {S({2, 3}, 0.5, 2)}, WithConst("Cumprod", axis1)},
      {"Cumprod_exclusive",
       "Cumprod",
       {S({3, 2}, 0.5, 2)},
       WithConst("Cumprod", axis0, Flag("exclusive", true))},
      {"Cumprod_reverse",
       "Cumprod",
       {S({2, 3}, 0.5, 2)},
       WithConst("Cumprod", axis1, Flag("reverse", true))},
      {"ClipByValue_scalar_bounds",
       "ClipByValue",
       {S({3, 4})},
       [](const Scope& s, const std::vector<Output>& x) {
         return OpBuilder(s, "ClipByValue").Input(x[0]).Input(-0.4).Input(0.45).Finish();
       }},
      {"ClipByValue_fed_bounds",
       "ClipByValue",
       {S({2, 3}), S({2, 3}, -0.8, -0.2), S({}, 0.2, 0.8)},
       [](const Scope& s, const std::vector<Output>& x) {
         return OpBuilder(s, "ClipByValue").Input(x[0]).Input(x[1]).Input(x[2]).Finish();
       }},
      {"TopKV2",
       "TopKV2",
       {S({2, 4})},
       [](const Scope& s, const std::vector<Output>& x) {
         return OpBuilder(s, "TopKV2").Input(x[0]).Input(Tensor::Scalar<int32_t>(2)).Finish();
       }},
      {"TopKV2_3d",
       "TopKV2",
       {S({2, 2, 3})},
       [](const Scope& s, const std::vector<Output>& x) {
         return OpBuilder(s, "TopKV2").Input(x[0]).Input(Tensor::Scalar<int64_t>(3)).Finish();
       }},
  };
}

std::vector<GradCase> AllRows() {
  std::vector<GradCase> all;
  for (auto cases : {SplitCases(), LayoutCases(), ScanCases()}) {
    all.insert(all.end(), cases.begin(), cases.end());
  }
  return all;
}

const GradCaseRegistrar kArrayRows(AllRows());

// The static shapes graph construction infers (constant axes, sizes, k).
TEST(ArrayShapeFnTest, ShapesFromConstantInputs) {
  Scope root = Scope::NewRootScope();
  const auto fed = [&](PartialShape shape) {
    return ops::Placeholder(root, DT_FLOAT, {.shape = std::move(shape)});
  };
  const Output x = fed(PartialShape({2, 6}));
  const auto shapes = [](const std::vector<Output>& outs) {
    std::string s;
    for (const Output& o : outs) s += o.shape().DebugString();
    return s;
  };
  EXPECT_EQ(shapes(OpBuilder(root, "Split")
                       .Input(Tensor::Scalar<int32_t>(1))
                       .Input(x)
                       .Attr("num_split", int64_t{3})
                       .FinishAll()),
            "[2,2][2,2][2,2]");
  EXPECT_EQ(shapes(OpBuilder(root, "SplitV")
                       .Input(x)
                       .Input(I32({1, -1}))
                       .Input(Tensor::Scalar<int32_t>(-1))
                       .Attr("num_split", int64_t{2})
                       .FinishAll()),
            "[2,1][2,5]");
  EXPECT_EQ(shapes(OpBuilder(root, "Unpack")
                       .Input(x)
                       .Attr("num", int64_t{6})
                       .Attr("axis", int64_t{-1})
                       .FinishAll()),
            "[2][2][2][2][2][2]");
  EXPECT_EQ(
      shapes(OpBuilder(root, "TopKV2").Input(x).Input(Tensor::Scalar<int32_t>(4)).FinishAll()),
      "[2,4][2,4]");
  const Output ids = ops::Placeholder(root, DT_INT32, {.shape = PartialShape({2, 5})});
  EXPECT_EQ(OpBuilder(root, "OneHot")
                .Input(ids)
                .Input(Tensor::Scalar<int32_t>(3))
                .Input(1.0f)
                .Input(0.0f)
                .Attr("axis", int64_t{1})
                .Finish()
                .shape()
                .DebugString(),
            "[2,3,5]");
  EXPECT_EQ(OpBuilder(root, "BroadcastTo").Input(x).Input(I32({4, 2, 6})).Finish().shape(),
            PartialShape({4, 2, 6}));
  EXPECT_EQ(OpBuilder(root, "Diag").Input(x).Finish().shape(), PartialShape({2, 6, 2, 6}));
  EXPECT_EQ(OpBuilder(root, "DiagPart").Input(fed(PartialShape({3, -1, 3, 4}))).Finish().shape(),
            PartialShape({3, 4}));
  ASSERT_TRUE(root.ok()) << root.status();
  // Unknown axes leave the rank; a bad constant fails at construction.
  EXPECT_EQ(shapes(OpBuilder(root, "Split")
                       .Input(ops::Placeholder(root, DT_INT32, {.shape = PartialShape::Scalar()}))
                       .Input(x)
                       .Attr("num_split", int64_t{2})
                       .FinishAll()),
            "[?,?][?,?]");
  OpBuilder(root, "Split")
      .Input(Tensor::Scalar<int32_t>(1))
      .Input(x)
      .Attr("num_split", int64_t{4})
      .Finish();
  EXPECT_THAT(root.status().message(), HasSubstr("must be evenly divisible by 4"));
}

TEST(PreventGradientTest, GradientFailsWithItsMessage) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_DOUBLE);
  Output y = OpBuilder(root, "PreventGradient")
                 .Input(x)
                 .Attr("message", std::string("no peeking"))
                 .Finish();
  std::vector<Output> grads;
  absl::Status s = AddSymbolicGradients(root, ops::Square(root, y), {x}, &grads);
  EXPECT_THAT(s.message(), HasSubstr("Gradient explicitly disabled. Reason: no peeking"));
}

}  // namespace
}  // namespace dflow
