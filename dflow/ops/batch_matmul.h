// MatMul's sizes, and BatchMatMul / BatchMatMulV2's: which matrices of x and
// y each output matrix multiplies. Shared by the CPU kernels (matmul_op.cc)
// and the GPU's (dflow/gpu/matmul_ops.cc), so that both give one error text.
//
//   ASSIGN_OR_RETURN(BatchMatMulPlan p, BatchMatMulPlan::Make(x.shape(), y.shape(),
//                                                             adj_x, adj_y, /*broadcast=*/true));
//   for (int64_t b = 0; b < p.batches(); ++b)
//     C[b] = op(X[p.x_batch[b]]) · op(Y[p.y_batch[b]])   // each m×k · k×n
#ifndef DFLOW_OPS_BATCH_MATMUL_H_
#define DFLOW_OPS_BATCH_MATMUL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dflow/framework/tensor_shape.h"

namespace dflow {

// MatMul: op(a) is m×k and op(b) k×n. InvalidArgument naming both shapes
// (and the transposes, when set) unless both are matrices with equal inner
// dimensions and every size fits BLAS's int.
struct MatMulSizes {
  int64_t m = 0, n = 0, k = 0;
};
absl::StatusOr<MatMulSizes> MakeMatMulSizes(const TensorShape& a, const TensorShape& b,
                                            bool transpose_a, bool transpose_b);

// " (transpose_a=true, transpose_b=false)" for error messages.
std::string TransposeNote(bool transpose_a, bool transpose_b);

struct BatchMatMulPlan {
  // x is [..., r, c] (op(x) = x, or its transpose with adj_x); likewise y.
  // InvalidArgument naming both shapes when a rank is below 2, the inner
  // dimensions differ, or the batch dimensions do not broadcast (with
  // `broadcast` false, BatchMatMul's rule: equal ranks and batch dimensions).
  static absl::StatusOr<BatchMatMulPlan> Make(const TensorShape& x, const TensorShape& y,
                                              bool adj_x, bool adj_y, bool broadcast);

  int64_t batches() const { return static_cast<int64_t>(x_batch.size()); }

  int64_t m = 0, n = 0, k = 0;
  TensorShape output_shape;      // batch dims + [m, n]
  std::vector<int64_t> x_batch;  // per output matrix: its x matrix
  std::vector<int64_t> y_batch;  // per output matrix: its y matrix
  int64_t x_row_length = 0;      // x's last dimension (the stored row stride)
  int64_t y_row_length = 0;
};

}  // namespace dflow

#endif  // DFLOW_OPS_BATCH_MATMUL_H_
