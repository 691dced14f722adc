#include "dflow/ops/batch_matmul.h"

#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "dflow/framework/status.h"
#include "dflow/ops/broadcast.h"

namespace dflow {

std::string TransposeNote(bool transpose_a, bool transpose_b) {
  auto str = [](bool v) { return v ? "true" : "false"; };
  return absl::StrCat(" (transpose_a=", str(transpose_a), ", transpose_b=", str(transpose_b), ")");
}

absl::StatusOr<MatMulSizes> MakeMatMulSizes(const TensorShape& a, const TensorShape& b,
                                            bool transpose_a, bool transpose_b) {
  if (a.dims() != 2 || b.dims() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("inputs must be matrices: a=", a.DebugString(), " b=", b.DebugString()));
  }
  MatMulSizes s;
  s.m = a.dim_size(transpose_a ? 1 : 0);
  s.k = a.dim_size(transpose_a ? 0 : 1);
  s.n = b.dim_size(transpose_b ? 0 : 1);
  if (s.k != b.dim_size(transpose_b ? 1 : 0)) {
    const std::string note =
        transpose_a || transpose_b ? TransposeNote(transpose_a, transpose_b) : "";
    return absl::InvalidArgumentError(absl::StrCat(
        "inner dimensions differ: a=", a.DebugString(), " b=", b.DebugString(), note));
  }
  constexpr int64_t kMaxDim = std::numeric_limits<int>::max();
  if (s.m > kMaxDim || s.n > kMaxDim || s.k > kMaxDim) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dimensions exceed BLAS's int range: a=", a.DebugString(), " b=", b.DebugString()));
  }
  return s;
}

absl::StatusOr<BatchMatMulPlan> BatchMatMulPlan::Make(const TensorShape& x, const TensorShape& y,
                                                      bool adj_x, bool adj_y, bool broadcast) {
  auto error = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": x=", x.DebugString(),
                                                   " y=", y.DebugString(), " (adj_x=", adj_x,
                                                   ", adj_y=", adj_y, ")"));
  };
  if (x.dims() < 2 || y.dims() < 2) return error("inputs must have rank >= 2");
  BatchMatMulPlan p;
  const int xr = x.dims(), yr = y.dims();
  p.m = x.dim_size(adj_x ? xr - 1 : xr - 2);
  p.k = x.dim_size(adj_x ? xr - 2 : xr - 1);
  const int64_t ky = y.dim_size(adj_y ? yr - 1 : yr - 2);
  p.n = y.dim_size(adj_y ? yr - 2 : yr - 1);
  if (p.k != ky) return error("inner dimensions differ");
  p.x_row_length = x.dim_size(xr - 1);
  p.y_row_length = y.dim_size(yr - 1);
  std::vector<int64_t> bx(x.dim_sizes().begin(), x.dim_sizes().end() - 2);
  std::vector<int64_t> by(y.dim_sizes().begin(), y.dim_sizes().end() - 2);
  if (!broadcast && bx != by) return error("batch dimensions differ");
  ASSIGN_OR_RETURN(TensorShape sx, TensorShape::FromDims(bx));
  ASSIGN_OR_RETURN(TensorShape sy, TensorShape::FromDims(by));
  absl::StatusOr<BroadcastPlan> plan = BroadcastPlan::Make({sx, sy});
  if (!plan.ok()) return error("batch dimensions do not broadcast");
  std::vector<int64_t> out(plan->output_shape().dim_sizes().begin(),
                           plan->output_shape().dim_sizes().end());
  out.push_back(p.m);
  out.push_back(p.n);
  ASSIGN_OR_RETURN(p.output_shape, TensorShape::FromDims(out));
  const int64_t batches = plan->num_elements();
  p.x_batch.reserve(batches);
  p.y_batch.reserve(batches);
  if (batches == 0) return p;
  plan->ForEachRow(0, plan->num_rows(), [&](int64_t, const int64_t* offsets) {
    for (int64_t j = 0; j < plan->inner_size(); ++j) {
      p.x_batch.push_back(offsets[0] + j * plan->inner_stride(0));
      p.y_batch.push_back(offsets[1] + j * plan->inner_stride(1));
    }
  });
  return p;
}

}  // namespace dflow
