// The gradient harness: every op with a registered gradient is checked
// against central finite differences (GradOps/*), plus the behaviour of
// AddSymbolicGradients itself (GradTest.*).
#include "dflow/client/gradients.h"

#include <functional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "dflow/client/client_session.h"
#include "dflow/client/gradient_check.h"
#include "dflow/client/gradient_test_util.h"
#include "dflow/client/op_builder.h"
#include "dflow/client/ops.h"
#include "dflow/framework/gradient.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/op_def.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

using ::testing::HasSubstr;

Tensor Vec(std::vector<double> v) { return Tensor::Vec<double>(v); }

// --- the table --------------------------------------------------------------

using InputSpec = GradInputSpec;
using BuildFn = GradBuildFn;

InputSpec S(std::initializer_list<int64_t> dims, double lo = -1, double hi = 1) {
  return GradInput(dims, lo, hi);
}

Tensor BoolTensor(const std::vector<bool>& values, const TensorShape& shape) {
  Tensor t(DT_BOOL, shape);
  for (size_t k = 0; k < values.size(); ++k) t.flat<bool>()[k] = values[k];
  return t;
}

BuildFn Binary(const std::string& op) { return BinaryGradCase(op); }
BuildFn Unary(const std::string& op) { return UnaryGradCase(op); }
BuildFn MatMulT(bool ta, bool tb) {
  return [ta, tb](const Scope& s, const std::vector<Output>& x) {
    return ops::MatMul(s, x[0], x[1], {.transpose_a = ta, .transpose_b = tb});
  };
}
BuildFn BatchMatMulT(const std::string& op, bool adj_x, bool adj_y) {
  return [op, adj_x, adj_y](const Scope& s, const std::vector<Output>& x) {
    return OpBuilder(s, op).Input(x[0]).Input(x[1]).Attr("adj_x", adj_x).Attr("adj_y", adj_y)
        .Finish();
  };
}
BuildFn Reduce(const std::string& op, Input axes, bool keep_dims = false) {
  return [op, axes, keep_dims](const Scope& s, const std::vector<Output>& x) {
    return OpBuilder(s, op).Input(x[0]).Input(axes).Attr("keep_dims", keep_dims).Finish();
  };
}

std::vector<GradCase> BinaryCases() {
  return {
      {"AddV2_same", "AddV2", {S({2, 3}), S({2, 3})}, Binary("AddV2")},
      {"AddV2_row", "AddV2", {S({2, 3}), S({3})}, Binary("AddV2")},
      {"AddV2_outer", "AddV2", {S({2, 1}), S({1, 3})}, Binary("AddV2")},
      {"AddV2_scalar", "AddV2", {S({}), S({2, 3})}, Binary("AddV2")},
      {"Add_row", "Add", {S({2, 3}), S({3})}, Binary("Add")},
      {"Sub_column", "Sub", {S({2, 3}), S({2, 1})}, Binary("Sub")},
      {"Mul_row", "Mul", {S({2, 3}), S({3})}, Binary("Mul")},
      {"Mul_outer", "Mul", {S({3, 1}), S({1, 4})}, Binary("Mul")},
      {"Mul_same_input",
       "Mul",
       {S({2, 2})},
       [](const Scope& s, const std::vector<Output>& x) { return ops::Mul(s, x[0], x[0]); }},
      {"RealDiv_row", "RealDiv", {S({2, 3}), S({3}, 1, 2)}, Binary("RealDiv")},
      {"RealDiv_float", "RealDiv", {S({2, 3}), S({3}, 1, 2)}, Binary("RealDiv"), DT_FLOAT},
      {"DivNoNan_row", "DivNoNan", {S({2, 3}), S({3}, 1, 2)}, Binary("DivNoNan")},
      {"Pow_row", "Pow", {S({2, 3}, 0.5, 2), S({3})}, Binary("Pow")},
      {"Pow_float", "Pow", {S({2, 3}, 0.5, 2), S({2, 3})}, Binary("Pow"), DT_FLOAT},
      {"Maximum_row", "Maximum", {S({2, 3}), S({3})}, Binary("Maximum")},
      {"Minimum_same", "Minimum", {S({2, 3}), S({2, 3})}, Binary("Minimum")},
      {"AddN",
       "AddN",
       {S({2, 3}), S({2, 3}), S({2, 3})},
       [](const Scope& s, const std::vector<Output>& x) {
         return ops::AddN(s, {x[0], x[1], x[2]});
       }},
      {"MatMul", "MatMul", {S({2, 3}), S({3, 4})}, MatMulT(false, false)},
      {"MatMul_transpose_b", "MatMul", {S({2, 3}), S({4, 3})}, MatMulT(false, true)},
      {"MatMul_transpose_a", "MatMul", {S({3, 2}), S({3, 4})}, MatMulT(true, false)},
      {"MatMul_transpose_ab", "MatMul", {S({3, 2}), S({4, 3})}, MatMulT(true, true)},
      {"MatMul_float", "MatMul", {S({2, 3}), S({3, 2})}, MatMulT(false, false), DT_FLOAT},
      {"BatchMatMul", "BatchMatMul", {S({2, 2, 3}), S({2, 3, 4})},
       BatchMatMulT("BatchMatMul", false, false)},
      {"BatchMatMulV2_broadcast", "BatchMatMulV2", {S({2, 1, 2, 3}), S({3, 3, 4})},
       BatchMatMulT("BatchMatMulV2", false, false)},
      {"BatchMatMulV2_adj_x", "BatchMatMulV2", {S({2, 3, 2}), S({1, 3, 4})},
       BatchMatMulT("BatchMatMulV2", true, false)},
      {"BatchMatMulV2_adj_y", "BatchMatMulV2", {S({3, 2, 3}), S({4, 3})},
       BatchMatMulT("BatchMatMulV2", false, true)},
      {"BatchMatMulV2_adj_xy", "BatchMatMulV2", {S({3, 2}), S({2, 4, 3})},
       BatchMatMulT("BatchMatMulV2", true, true)},
  };
}

std::vector<GradCase> UnaryCases() {
  const InputSpec away_from_zero = GradInput({2, 3}, 0.2, 1, /*random_sign=*/true);
  return {
      {"Neg", "Neg", {S({2, 3})}, Unary("Neg")},
      {"Abs", "Abs", {away_from_zero}, Unary("Abs")},
      {"Square", "Square", {S({2, 3})}, Unary("Square")},
      {"Sqrt", "Sqrt", {S({2, 3}, 0.5, 2)}, Unary("Sqrt")},
      {"Rsqrt", "Rsqrt", {S({2, 3}, 0.5, 2)}, Unary("Rsqrt")},
      {"Exp", "Exp", {S({2, 3})}, Unary("Exp")},
      {"Log", "Log", {S({2, 3}, 0.5, 2)}, Unary("Log")},
      {"Tanh", "Tanh", {S({2, 3})}, Unary("Tanh")},
      {"Tanh_float", "Tanh", {S({2, 3})}, Unary("Tanh"), DT_FLOAT},
      {"Sigmoid", "Sigmoid", {S({2, 3}, -3, 3)}, Unary("Sigmoid")},
      {"Softplus", "Softplus", {S({2, 3}, -3, 3)}, Unary("Softplus")},
      {"Softplus_float", "Softplus", {S({2, 3}, -3, 3)}, Unary("Softplus"), DT_FLOAT},
      {"Sin", "Sin", {S({2, 3}, -4, 4)}, Unary("Sin")},
      {"Cos", "Cos", {S({2, 3}, -4, 4)}, Unary("Cos")},
      {"Reciprocal", "Reciprocal", {away_from_zero}, Unary("Reciprocal")},
      {"CheckNumerics",
       "CheckNumerics",
       {S({2, 3})},
       [](const Scope& s, const std::vector<Output>& x) {
         return OpBuilder(s, "CheckNumerics").Input(x[0]).Attr("message", std::string("x")).Finish();
       }},
      {"Log1p", "Log1p", {S({2, 3}, -0.5, 2)}, Unary("Log1p")},
      {"Expm1", "Expm1", {S({2, 3})}, Unary("Expm1")},
      {"L2Loss", "L2Loss", {S({2, 3})}, Unary("L2Loss")},
      {"L2Loss_float", "L2Loss", {S({4})}, Unary("L2Loss"), DT_FLOAT},
      {"Cast_float_to_double",
       "Cast",
       {S({2, 3})},
       [](const Scope& s, const std::vector<Output>& x) { return ops::Cast(s, x[0], DT_DOUBLE); },
       DT_FLOAT},
      {"Cast_double_to_double",
       "Cast",
       {S({3})},
       [](const Scope& s, const std::vector<Output>& x) { return ops::Cast(s, x[0], DT_DOUBLE); }},
  };
}

std::vector<GradCase> ReductionCases() {
  return {
      {"Sum_axis1", "Sum", {S({2, 3})}, Reduce("Sum", 1)},
      {"Sum_negative_axis", "Sum", {S({2, 3})}, Reduce("Sum", -1)},
      {"Sum_keep_dims", "Sum", {S({2, 3, 2})}, Reduce("Sum", {0, 2}, true)},
      {"Sum_all", "Sum", {S({2, 3})}, Reduce("Sum", {0, 1})},
      {"Sum_int64_axes", "Sum", {S({2, 3})}, Reduce("Sum", Tensor::Vec<int64_t>({1}))},
      {"Mean_axis0", "Mean", {S({3, 2})}, Reduce("Mean", 0)},
      {"Mean_keep_dims", "Mean", {S({2, 3})}, Reduce("Mean", 1, true)},
      {"Max_axis1", "Max", {S({2, 3})}, Reduce("Max", 1)},
      {"Max_all", "Max", {S({2, 3})}, Reduce("Max", {0, 1})},
  };
}

std::vector<GradCase> SelectCases() {
  return {
      {"SelectV2",
       "SelectV2",
       {S({2, 3}), S({2, 3})},
       [](const Scope& s, const std::vector<Output>& x) {
         Tensor c = BoolTensor({true, false, true, false, false, true}, TensorShape({2, 3}));
         return ops::Where(s, c, x[0], x[1]);
       }},
      {"Select",
       "Select",
       {S({2, 3}), S({2, 3})},
       [](const Scope& s, const std::vector<Output>& x) {
         Tensor c = BoolTensor({false, true, true, false, true, false}, TensorShape({2, 3}));
         return OpBuilder(s, "Select").Input(c).Input(x[0]).Input(x[1]).Finish();
       }},
      {"Select_row_condition",  // A vector condition picks whole rows.
       "Select",
       {S({3, 2}), S({3, 2})},
       [](const Scope& s, const std::vector<Output>& x) {
         Tensor c = BoolTensor({true, false, true}, TensorShape({3}));
         return OpBuilder(s, "Select").Input(c).Input(x[0]).Input(x[1]).Finish();
       }},
      {"SelectV2_broadcast",
       "SelectV2",
       {S({2, 1}), S({3})},
       [](const Scope& s, const std::vector<Output>& x) {
         Tensor c = BoolTensor({true, false, true}, TensorShape({3}));
         return ops::Where(s, c, x[0], x[1]);
       }},
  };
}

std::vector<GradCase> ShapeCases() {
  return {
      {"Identity", "Identity", {S({2, 3})}, Unary("Identity")},
      {"IdentityN",
       "IdentityN",
       {S({2, 3}), S({2, 3})},
       [](const Scope& s, const std::vector<Output>& x) {
         OutputList out = ops::IdentityN(s, {x[0], x[1]});
         return ops::Mul(s, out[0], out[1]);
       }},
      {"IdentityN_one_output_used",
       "IdentityN",
       {S({2}), S({3})},
       [](const Scope& s, const std::vector<Output>& x) {
         return ops::IdentityN(s, {x[0], x[1]})[1];
       }},
      {"PlaceholderWithDefault",
       "PlaceholderWithDefault",
       {S({2, 3})},
       [](const Scope& s, const std::vector<Output>& x) {
         return ops::PlaceholderWithDefault(s, x[0], PartialShape({2, 3}));
       }},
      {"Reshape",
       "Reshape",
       {S({2, 3})},
       [](const Scope& s, const std::vector<Output>& x) {
         return ops::Reshape(s, x[0], {3, 2});
       }},
      {"Reshape_inferred",
       "Reshape",
       {S({2, 3})},
       [](const Scope& s, const std::vector<Output>& x) { return ops::Reshape(s, x[0], {-1}); }},
      {"ExpandDims",
       "ExpandDims",
       {S({2, 3})},
       [](const Scope& s, const std::vector<Output>& x) { return ops::ExpandDims(s, x[0], 1); }},
      {"Squeeze",
       "Squeeze",
       {S({2, 1, 3})},
       [](const Scope& s, const std::vector<Output>& x) { return ops::Squeeze(s, x[0]); }},
      {"Transpose",
       "Transpose",
       {S({2, 3, 4})},
       [](const Scope& s, const std::vector<Output>& x) {
         return ops::Transpose(s, x[0], {2, 0, 1});
       }},
      {"Tile",
       "Tile",
       {S({2, 3})},
       [](const Scope& s, const std::vector<Output>& x) {
         return ops::Tile(s, x[0], {2, 1});
       }},
      {"Tile_3d",
       "Tile",
       {S({1, 2, 2})},
       [](const Scope& s, const std::vector<Output>& x) {
         return ops::Tile(s, x[0], {3, 1, 2});
       }},
      {"Fill",
       "Fill",
       {S({})},
       [](const Scope& s, const std::vector<Output>& x) {
         return ops::Fill(s, {2, 3}, x[0]);
       }},
  };
}

std::vector<GradCase> SliceCases() {
  return {
      {"Pack_axis0",
       "Pack",
       {S({2, 3}), S({2, 3})},
       [](const Scope& s, const std::vector<Output>& x) {
         return ops::Stack(s, {x[0], x[1]});
       }},
      {"Pack_axis_minus1",
       "Pack",
       {S({2, 3}), S({2, 3}), S({2, 3})},
       [](const Scope& s, const std::vector<Output>& x) {
         return ops::Stack(s, {x[0], x[1], x[2]}, -1);
       }},
      {"ConcatV2_axis1",
       "ConcatV2",
       {S({2, 3}), S({2, 1})},
       [](const Scope& s, const std::vector<Output>& x) {
         return ops::Concat(s, {x[0], x[1]}, 1);
       }},
      {"ConcatV2_axis_minus2",
       "ConcatV2",
       {S({2, 3}), S({1, 3}), S({3, 3})},
       [](const Scope& s, const std::vector<Output>& x) {
         return ops::Concat(s, {x[0], x[1], x[2]}, -2);
       }},
      {"Slice",
       "Slice",
       {S({3, 4})},
       [](const Scope& s, const std::vector<Output>& x) {
         return ops::Slice(s, x[0], {1, 1}, {2, 2});
       }},
      {"Slice_to_end",
       "Slice",
       {S({3, 4})},
       [](const Scope& s, const std::vector<Output>& x) {
         return ops::Slice(s, x[0], Tensor::Vec<int64_t>({0, 1}), Tensor::Vec<int64_t>({-1, 2}));
       }},
      {"GatherV2_axis0_repeated",
       "GatherV2",
       {S({4, 3})},
       [](const Scope& s, const std::vector<Output>& x) {
         return ops::GatherV2(s, x[0], {3, 0, 3}, 0);
       }},
      {"GatherV2_axis1_matrix_indices",
       "GatherV2",
       {S({2, 4, 3})},
       [](const Scope& s, const std::vector<Output>& x) {
         Tensor idx = Tensor::FromVector<int32_t>({1, 2, 1, 0}, TensorShape({2, 2}));
         return ops::GatherV2(s, x[0], idx, 1);
       }},
      {"GatherV2_axis_minus1",
       "GatherV2",
       {S({2, 3})},
       [](const Scope& s, const std::vector<Output>& x) {
         return ops::GatherV2(s, x[0], Tensor::Vec<int64_t>({2, 2, 0}), -1);
       }},
      {"Gather_matrix_indices_repeated",
       "Gather",
       {S({4, 3})},
       [](const Scope& s, const std::vector<Output>& x) {
         Tensor idx = Tensor::FromVector<int64_t>({3, 0, 3, 1}, TensorShape({2, 2}));
         return OpBuilder(s, "Gather").Input(x[0]).Input(idx).Finish();
       }},
  };
}

// SparseSegment reductions: rows 0 and 2 (twice) into segment 0, row 3 into
// segment 2, segment 1 empty.
BuildFn SparseSegment(const std::string& op, bool num_segments) {
  return [op, num_segments](const Scope& s, const std::vector<Output>& x) {
    OpBuilder b(s, op);
    b.Input(x[0])
        .Input(Tensor::Vec<int32_t>({0, 2, 2, 3}))
        .Input(Tensor::Vec<int64_t>({0, 0, 0, 2}));
    if (num_segments) b.Input(Tensor::Scalar<int32_t>(4));
    return b.Finish();
  };
}

std::vector<GradCase> PartitionCases() {
  return {
      {"GatherNd_repeated_elements",
       "GatherNd",
       {S({3, 4})},
       [](const Scope& s, const std::vector<Output>& x) {
         Tensor idx = Tensor::FromVector<int32_t>({2, 1, 0, 3, 2, 1}, TensorShape({3, 2}));
         return OpBuilder(s, "GatherNd").Input(x[0]).Input(idx).Finish();
       }},
      {"GatherNd_rows_int64",
       "GatherNd",
       {S({3, 2})},
       [](const Scope& s, const std::vector<Output>& x) {
         Tensor idx = Tensor::FromVector<int64_t>({1, 1, 0}, TensorShape({3, 1}));
         return OpBuilder(s, "GatherNd").Input(x[0]).Input(idx).Finish();
       }},
      {"DynamicStitch",
       "DynamicStitch",
       {S({2, 3}), S({1, 3})},
       [](const Scope& s, const std::vector<Output>& x) {
         return OpBuilder(s, "DynamicStitch")
             .InputList({Tensor::Vec<int32_t>({0, 2}), Tensor::Vec<int32_t>({1})})
             .InputList({x[0], x[1]})
             .Finish();
       }},
      {"ParallelDynamicStitch_scalar_index",
       "ParallelDynamicStitch",
       {S({3}), S({2, 3})},
       [](const Scope& s, const std::vector<Output>& x) {
         return OpBuilder(s, "ParallelDynamicStitch")
             .InputList({Tensor::Scalar<int32_t>(2), Tensor::Vec<int32_t>({1, 0})})
             .InputList({x[0], x[1]})
             .Finish();
       }},
      {"DynamicPartition_unused_output",
       "DynamicPartition",
       {S({4, 3})},
       [](const Scope& s, const std::vector<Output>& x) {
         std::vector<Output> parts = OpBuilder(s, "DynamicPartition")
                                         .Input(x[0])
                                         .Input(Tensor::Vec<int32_t>({1, 0, 1, 2}))
                                         .Attr("num_partitions", int64_t{3})
                                         .FinishAll();
         if (parts.size() != 3) return Output();
         // Partition 2 reaches no output: its gradient is zeros.
         return ops::Concat(s, {parts[0], ops::Square(s, parts[1])}, 0);
       }},
  };
}

std::vector<GradCase> SegmentCases() {
  std::vector<GradCase> cases;
  for (const char* r : {"Sum", "Mean", "SqrtN"}) {
    const std::string op = std::string("SparseSegment") + r;
    cases.push_back({op, op, {S({4, 3})}, SparseSegment(op, false)});
    cases.push_back({op + "WithNumSegments", op + "WithNumSegments", {S({4, 3})},
                     SparseSegment(op + "WithNumSegments", true)});
  }
  // Every segment non-empty (an empty one holds the type's lowest or highest
  // value, too large to difference); id -1 is dropped.
  for (const char* r : {"Sum", "Max", "Min"}) {
    const std::string op = std::string("UnsortedSegment") + r;
    cases.push_back({op, op, {S({5, 3})}, [op](const Scope& s, const std::vector<Output>& x) {
                       return OpBuilder(s, op)
                           .Input(x[0])
                           .Input(Tensor::Vec<int32_t>({2, 0, 2, -1, 1}))
                           .Input(Tensor::Scalar<int32_t>(3))
                           .Finish();
                     }});
  }
  // x0 holds no zero, x1 only zeros: segment 0 has none, segment 1 one zero
  // (rows 1 and 4), segment 2 two (rows 5 and 6), segment 3 is empty, row 3
  // is dropped. Products are linear in each element, so differences are exact
  // at zero.
  auto prod = [](const Scope& s, const std::vector<Output>& x) {
    return OpBuilder(s, "UnsortedSegmentProd")
        .Input(ops::Concat(s, {x[0], x[1]}, 0))
        .Input(Tensor::Vec<int64_t>({0, 1, 0, -1, 1, 2, 2}))
        .Input(Tensor::Scalar<int32_t>(4))
        .Finish();
  };
  const InputSpec non_zero = GradInput({4, 3}, 0.5, 1.5, /*random_sign=*/true);
  cases.push_back(
      {"UnsortedSegmentProd_zeros", "UnsortedSegmentProd", {non_zero, S({3, 3}, 0, 0)}, prod});
  cases.push_back({"UnsortedSegmentProd_zeros_float",
                   "UnsortedSegmentProd",
                   {GradInput({4}, 0.5, 1.5, true), S({3}, 0, 0)},
                   prod,
                   DT_FLOAT});
  return cases;
}

std::vector<GradCase> SparseToDenseCases() {
  return {
      {"SparseToDense",
       "SparseToDense",
       {S({3}), S({})},
       [](const Scope& s, const std::vector<Output>& x) {
         return OpBuilder(s, "SparseToDense")
             .Input(Tensor::FromVector<int64_t>({0, 1, 1, 0, 2, 2}, {3, 2}))
             .Input(Tensor::Vec<int64_t>({3, 3}))
             .Input(x[0])
             .Input(x[1])
             .Finish();
       }},
      // A scalar value at every index of a 1-D output (TensorFlow's gradient
      // fails to build here).
      {"SparseToDense_vector_indices_scalar_value",
       "SparseToDense",
       {S({}), S({})},
       [](const Scope& s, const std::vector<Output>& x) {
         return OpBuilder(s, "SparseToDense")
             .Input(Tensor::Vec<int32_t>({0, 2}))
             .Input(Tensor::Vec<int32_t>({4}))
             .Input(x[0])
             .Input(x[1])
             .Finish();
       }},
      {"SparseToDense_float",
       "SparseToDense",
       {S({2}), S({})},
       [](const Scope& s, const std::vector<Output>& x) {
         return OpBuilder(s, "SparseToDense")
             .Input(Tensor::FromVector<int32_t>({0, 0, 1, 1, 1, 0}, {2, 3}))
             .Input(Tensor::Vec<int32_t>({2, 2, 2}))
             .Input(x[0])
             .Input(x[1])
             .Finish();
       },
       DT_FLOAT},
  };
}

// A small network: every gradient composed.
std::vector<GradCase> CompositeCases() {
  return {
      {"Composite_mlp",
       "",
       {S({2, 3}), S({3, 4}), S({4})},
       [](const Scope& s, const std::vector<Output>& x) {
         Output h = ops::Tanh(s, ops::Add(s, ops::MatMul(s, x[0], x[1]), x[2]));
         return ops::Mean(s, ops::Square(s, h), {0, 1});
       }},
  };
}

std::vector<GradCase> AllCases() {
  std::vector<GradCase> all;
  for (auto cases :
       {BinaryCases(), UnaryCases(), ReductionCases(), SelectCases(), ShapeCases(), SliceCases(),
        PartitionCases(), SegmentCases(), SparseToDenseCases(), CompositeCases()}) {
    all.insert(all.end(), cases.begin(), cases.end());
  }
  return all;
}

const GradCaseRegistrar kMathAndArrayRows(AllCases());

class GradOpTest : public ::testing::TestWithParam<GradCase> {};

TEST_P(GradOpTest, MatchesFiniteDifferences) {
  const GradCase& c = GetParam();
  Scope root = Scope::NewRootScope();
  std::mt19937 rng(1234);
  std::vector<Output> xs;
  std::vector<Tensor> values;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    xs.push_back(ops::Placeholder(root.WithOpName("x" + std::to_string(i)), c.dtype));
    values.push_back(RandomGradInput(c.dtype, c.inputs[i], &rng));
  }
  Output y = c.build(root, xs);
  ASSERT_TRUE(root.ok()) << root.status();
  absl::StatusOr<double> error = ComputeGradientError(root, xs, values, y);
  ASSERT_TRUE(error.ok()) << error.status();
  const double max_error = c.max_error > 0 ? c.max_error : c.dtype == DT_DOUBLE ? 1e-3 : 1e-2;
  EXPECT_LT(*error, max_error);
}

INSTANTIATE_TEST_SUITE_P(GradOps, GradOpTest, ::testing::ValuesIn(GradCases()),
                         [](const auto& info) { return info.param.name; });

// Every registered gradient has a row (here, or registered by the other
// *gradients_test.cc files of this binary), but for three checked otherwise.
TEST(GradRegistryTest, EveryGradientIsChecked) {
  std::set<std::string> checked;
  for (const GradCase& c : GradCases()) checked.insert(c.op);
  checked.insert("ReadVariableOp");   // GradTest.VariableGradientSumsItsReads.
  checked.insert("GradTestTwice");    // GradRegistryTest.HarnessCatchesAWrongGradient.
  checked.insert("PreventGradient");  // Refuses by design (array_gradients_test.cc).
  for (const std::string& op : GradientRegistry::Global()->ListOps()) {
    EXPECT_TRUE(checked.count(op) > 0) << op << " has a gradient but no GradOps row";
  }
}

TEST(GradRegistryTest, NoGradientOpsAreKnown) {
  for (const char* op : {"Shape", "Equal", "ArgMax", "ZerosLike", "RandomUniform"}) {
    EXPECT_TRUE(GradientRegistry::Global()->IsNoGradient(op)) << op;
    EXPECT_EQ(GradientRegistry::Global()->Find(op), nullptr) << op;
  }
  EXPECT_NE(GradientRegistry::Global()->Find("MatMul"), nullptr);
}

// y = 2x with a deliberately wrong gradient (dy instead of 2 dy): the
// harness must notice.
class GradTestTwiceOp : public OpKernel {
 public:
  explicit GradTestTwiceOp(OpKernelConstruction* c) : OpKernel(c) {}
  absl::Status Compute(OpKernelContext* ctx) override {
    Tensor* y = ctx->allocate_output(0, ctx->input(0).shape());
    for (int64_t k = 0; k < y->NumElements(); ++k) {
      y->flat<double>()[k] = 2 * ctx->input(0).flat<double>()[k];
    }
    return absl::OkStatus();
  }
};
REGISTER_OP("GradTestTwice").Input("x: double").Output("y: double").SetShapeFn(UnchangedShape);
REGISTER_KERNEL(KernelDefBuilder("GradTestTwice").Device(kDeviceCPU), GradTestTwiceOp);
REGISTER_GRADIENT("GradTestTwice", [](GradContext* g) {
  g->SetInputGrad(0, g->grad_output(0));
  return absl::OkStatus();
});

TEST(GradRegistryTest, HarnessCatchesAWrongGradient) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_DOUBLE);
  Output y = OpBuilder(root, "GradTestTwice").Input(x).Finish();
  absl::StatusOr<double> error = ComputeGradientError(root, {x}, {Vec({1, 2, 3})}, y);
  ASSERT_TRUE(error.ok()) << error.status();
  EXPECT_NEAR(*error, 0.5, 1e-6);  // |1 - 2| / 2
}

// --- AddSymbolicGradients ----------------------------------------------------

std::vector<double> Values(const Tensor& t) {
  std::vector<double> v;
  for (int64_t k = 0; k < t.NumElements(); ++k) {
    v.push_back(t.dtype() == DT_FLOAT ? t.flat<float>()[k] : t.flat<double>()[k]);
  }
  return v;
}

TEST(GradTest, SumsGradientsOfTwoPaths) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_DOUBLE);
  Output w = ops::Placeholder(root.WithOpName("w"), DT_DOUBLE);
  // y = x w + x^2: dy/dx = w + 2x.
  Output y = ops::Add(root, ops::Mul(root, x, w), ops::Square(root, x));
  std::vector<Output> grads;
  ASSERT_TRUE(AddSymbolicGradients(root, y, {x}, &grads).ok()) << root.status();
  ClientSession session(root);
  std::vector<Tensor> out;
  ASSERT_TRUE(session.Run({{x, Vec({1, 2})}, {w, Vec({10, 20})}}, grads, &out).ok());
  EXPECT_EQ(Values(out[0]), (std::vector<double>{12, 24}));
  bool has_add_n = false;
  for (const auto& node : root.graph_def().node()) {
    has_add_n = has_add_n || (node.op() == "AddN" && node.name().rfind("gradients/", 0) == 0);
  }
  EXPECT_TRUE(has_add_n) << "the two paths' gradients are summed with AddN";
}

TEST(GradTest, GradientNodesLiveUnderGradientsScope) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT);
  Output y = ops::Tanh(root.WithOpName("y"), x);
  const int before = root.graph_def().node_size();
  std::vector<Output> grads;
  ASSERT_TRUE(AddSymbolicGradients(root, y, {x}, &grads).ok());
  const auto& nodes = root.graph_def().node();
  ASSERT_GT(nodes.size(), before);
  for (int i = before; i < nodes.size(); ++i) {
    EXPECT_EQ(nodes[i].name().rfind("gradients/", 0), 0u) << nodes[i].name();
  }
  EXPECT_EQ(grads[0].node_name(), "gradients/y_grad/TanhGrad");
}

TEST(GradTest, UnreachableXGetsZeros) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_DOUBLE);
  Output unused = ops::Placeholder(root.WithOpName("unused"), DT_DOUBLE);
  Output y = ops::Square(root, x);
  std::vector<Output> grads;
  ASSERT_TRUE(AddSymbolicGradients(root, y, {x, unused}, &grads).ok());
  ASSERT_EQ(grads.size(), 2u);
  ClientSession session(root);
  std::vector<Tensor> out;
  ASSERT_TRUE(session.Run({{x, Vec({3})}, {unused, Vec({5, 6, 7})}}, grads, &out).ok());
  EXPECT_EQ(Values(out[0]), (std::vector<double>{6}));
  EXPECT_EQ(Values(out[1]), (std::vector<double>{0, 0, 0}));
}

REGISTER_OP("GradTestOpWithoutGradient")
    .Input("x: float")
    .Output("y: float")
    .SetShapeFn(UnchangedShape);

TEST(GradTest, OpWithoutGradientFailsNamingIt) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT);
  Output mid = OpBuilder(root.WithOpName("mystery"), "GradTestOpWithoutGradient").Input(x).Finish();
  Output y = ops::Square(root, mid);
  std::vector<Output> grads;
  absl::Status s = AddSymbolicGradients(root, y, {x}, &grads);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("GradTestOpWithoutGradient"));
  EXPECT_THAT(s.message(), HasSubstr("'mystery'"));
}

TEST(GradTest, OpOffThePathNeedsNoGradient) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT);
  Output c = ops::Placeholder(root.WithOpName("c"), DT_FLOAT);
  // The op without a gradient only sees c, which is not an x.
  Output k = OpBuilder(root, "GradTestOpWithoutGradient").Input(c).Finish();
  Output y = ops::Mul(root, x, k);
  std::vector<Output> grads;
  EXPECT_TRUE(AddSymbolicGradients(root, y, {x}, &grads).ok());
}

TEST(GradTest, IntegerInputsGetNoGradient) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_DOUBLE);
  Output i = ops::Placeholder(root.WithOpName("i"), DT_INT32);
  Output axis = ops::Placeholder(root.WithOpName("axis"), DT_INT32);
  // y = sum(x * double(i), axis): nothing flows into the int32 inputs.
  Output y = ops::Sum(root, ops::Mul(root, x, ops::Cast(root, i, DT_DOUBLE)), axis);
  std::vector<Output> grads;
  ASSERT_TRUE(AddSymbolicGradients(root, y, {x, i, axis}, &grads).ok()) << root.status();
  ASSERT_EQ(grads.size(), 3u);
  EXPECT_EQ(grads[1].type(), DT_INT32);
  ClientSession session(root);
  std::vector<Tensor> out;
  absl::Status s = session.Run(
      {{x, Vec({1, 2})}, {i, Tensor::Vec<int32_t>({3, 4})}, {axis, Tensor::Scalar<int32_t>(0)}},
      grads, &out);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(Values(out[0]), (std::vector<double>{3, 4}));
  EXPECT_EQ(out[1].flat<int32_t>()[0], 0);
  EXPECT_EQ(out[1].flat<int32_t>()[1], 0);
  EXPECT_EQ(out[2].flat<int32_t>()[0], 0);
}

TEST(GradTest, NoGradientOpStopsTheFlow) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_DOUBLE);
  // OnesLike(x) depends on x only through its shape.
  Output y = ops::Mul(root, x, ops::OnesLike(root, x));
  std::vector<Output> grads;
  ASSERT_TRUE(AddSymbolicGradients(root, y, {x}, &grads).ok());
  ClientSession session(root);
  std::vector<Tensor> out;
  ASSERT_TRUE(session.Run({{x, Vec({5, 7})}}, grads, &out).ok());
  EXPECT_EQ(Values(out[0]), (std::vector<double>{1, 1}));
}

TEST(GradTest, GradYsScaleTheResult) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_DOUBLE);
  Output y = ops::Square(root, x);
  std::vector<Output> grads;
  ASSERT_TRUE(
      AddSymbolicGradients(root, {y}, {x}, {ops::Const(root, Vec({10, 100}))}, &grads).ok());
  ClientSession session(root);
  std::vector<Tensor> out;
  ASSERT_TRUE(session.Run({{x, Vec({1, 2})}}, grads, &out).ok());
  EXPECT_EQ(Values(out[0]), (std::vector<double>{20, 400}));
}

TEST(GradTest, SeveralYsCountEveryPath) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_DOUBLE);
  Output a = ops::Mul(root, x, 3.0);
  Output b = ops::Mul(root, a, 2.0);
  std::vector<Output> grads;
  // d(a + b)/dx = 3 + 6, including the path from a through b.
  ASSERT_TRUE(AddSymbolicGradients(root, {a, b}, {x}, {}, &grads).ok());
  ClientSession session(root);
  std::vector<Tensor> out;
  ASSERT_TRUE(session.Run({{x, Vec({1})}}, grads, &out).ok());
  EXPECT_EQ(Values(out[0]), (std::vector<double>{9}));
}

TEST(GradTest, XThatIsAlsoYGetsItsSeed) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_DOUBLE);
  std::vector<Output> grads;
  ASSERT_TRUE(AddSymbolicGradients(root, x, {x}, &grads).ok());
  ClientSession session(root);
  std::vector<Tensor> out;
  ASSERT_TRUE(session.Run({{x, Vec({4, 5})}}, grads, &out).ok());
  EXPECT_EQ(Values(out[0]), (std::vector<double>{1, 1}));
}

TEST(GradTest, InvalidArgumentsFail) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_DOUBLE);
  Output y = ops::Square(root, x);
  Scope other = Scope::NewRootScope();
  Output stranger = ops::Placeholder(other.WithOpName("stranger"), DT_DOUBLE);
  std::vector<Output> grads;
  absl::Status s = AddSymbolicGradients(root, y, {stranger}, &grads);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("stranger"));
  s = AddSymbolicGradients(root, {y}, {x}, {y, y}, &grads);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
}

// A resource variable read twice: the gradient with respect to the handle
// sums both reads; with respect to one read, only that read's.
TEST(GradTest, VariableGradientSumsItsReads) {
  Scope root = Scope::NewRootScope();
  Output v = ops::VarHandleOp(root.WithOpName("v"), DT_DOUBLE, PartialShape({2}));
  Operation init = ops::AssignVariableOp(root, v, Vec({1, 2}));
  Output read1 = ops::ReadVariableOp(root.WithOpName("read1"), v, DT_DOUBLE);
  Output read2 = ops::ReadVariableOp(root.WithOpName("read2"), v, DT_DOUBLE);
  Output unused = ops::VarHandleOp(root.WithOpName("unused"), DT_DOUBLE, PartialShape({3}));
  Operation init_unused = ops::AssignVariableOp(root, unused, Vec({1, 1, 1}));
  // loss = sum(read1^2) + sum(read2 * [10, 20]).
  Output loss = ops::Add(root, ops::Sum(root, ops::Square(root, read1), 0),
                         ops::Sum(root, ops::Mul(root, read2, Vec({10, 20})), 0));
  std::vector<Output> grads;
  absl::Status s = AddSymbolicGradients(root, loss, {v, read1, unused}, &grads);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(grads[0].type(), DT_DOUBLE);
  ClientSession session(root);
  std::vector<Tensor> out;
  ASSERT_TRUE(session.Run({}, {}, {init, init_unused}, &out).ok());
  s = session.Run(grads, &out);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(Values(out[0]), (std::vector<double>{12, 24}));
  EXPECT_EQ(Values(out[1]), (std::vector<double>{2, 4}));
  EXPECT_EQ(Values(out[2]), (std::vector<double>{0, 0, 0}));
}

// Training on one machine: gradient descent on y = 2x + 1 recovers w and b.
TEST(GradTest, GradientDescentFitsALine) {
  Scope root = Scope::NewRootScope();
  Output w = ops::VarHandleOp(root.WithOpName("w"), DT_DOUBLE, PartialShape::Scalar());
  Output b = ops::VarHandleOp(root.WithOpName("b"), DT_DOUBLE, PartialShape::Scalar());
  Operation init_w = ops::AssignVariableOp(root, w, 0.0);
  Operation init_b = ops::AssignVariableOp(root, b, 0.0);
  Output x = ops::Const(root, Vec({0, 1, 2, 3}));
  Output y = ops::Const(root, Vec({1, 3, 5, 7}));
  Output rw = ops::ReadVariableOp(root, w, DT_DOUBLE);
  Output rb = ops::ReadVariableOp(root, b, DT_DOUBLE);
  Output pred = ops::Add(root, ops::Mul(root, x, rw), rb);
  Output loss = ops::Mean(root, ops::Square(root, ops::Sub(root, pred, y)), 0);
  std::vector<Output> grads;
  ASSERT_TRUE(AddSymbolicGradients(root, loss, {rw, rb}, &grads).ok()) << root.status();
  Operation step_w = ops::AssignSubVariableOp(root, w, ops::Mul(root, grads[0], 0.1));
  Operation step_b = ops::AssignSubVariableOp(root, b, ops::Mul(root, grads[1], 0.1));
  ClientSession session(root);
  std::vector<Tensor> out;
  ASSERT_TRUE(session.Run({}, {}, {init_w, init_b}, &out).ok());
  for (int i = 0; i < 500; ++i) ASSERT_TRUE(session.Run({}, {}, {step_w, step_b}, &out).ok());
  ASSERT_TRUE(session
                  .Run({ops::ReadVariableOp(root, w, DT_DOUBLE),
                        ops::ReadVariableOp(root, b, DT_DOUBLE), loss},
                       &out)
                  .ok());
  EXPECT_NEAR(out[0].scalar<double>(), 2, 1e-3);
  EXPECT_NEAR(out[1].scalar<double>(), 1, 1e-3);
  EXPECT_LT(out[2].scalar<double>(), 1e-6);
}

}  // namespace
}  // namespace dflow
