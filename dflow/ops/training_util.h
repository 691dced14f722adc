// What the training Apply kernels of every device check before an update,
// one text for CPU and GPU: where each input is, the shapes of the
// variable, its slots, the gradient and the hyperparameters, and the dtype
// of resource variables.
#ifndef DFLOW_OPS_TRAINING_UTIL_H_
#define DFLOW_OPS_TRAINING_UTIL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/op_def.h"
#include "dflow/ops/variable_ops.h"

namespace dflow {

// An Apply op's inputs: the first `num_vars` are the variable and its
// slots, "grad" (or "delta") the gradient, "indices" a sparse op's rows,
// the rest hyperparameter scalars.
struct ApplyInputLayout {
  std::vector<std::string> names;  // Every input's, in order.
  int grad = -1;
  int indices = -1;  // -1 for a dense op.
  std::vector<int> scalars;
};
ApplyInputLayout ApplyLayoutOf(const OpDef& op, int num_vars);

// The slots (vars[1...]) have the variable's (vars[0]) shape, and so does
// the gradient when `check_grad` (a sparse gradient has the rows' shape);
// the hyperparameters are scalars. InvalidArgument in TensorFlow's words.
absl::Status CheckApplyShapes(const OpKernelContext& ctx, const ApplyInputLayout& layout,
                              absl::Span<const Tensor* const> vars, bool check_grad);

// A sparse Apply op's rows: its indices input, one-dimensional int32 or
// int64 (read on the host). InvalidArgument in TensorFlow's words.
absl::StatusOr<std::vector<int64_t>> SparseApplyRows(const OpKernelContext& ctx,
                                                     const ApplyInputLayout& layout);

// A sparse Apply op's gradient is [rows.size()] + var.shape[1:] and every
// row is one of `var`'s. InvalidArgument in TensorFlow's words.
absl::Status CheckSparseApplyRows(const OpKernelContext& ctx, const ApplyInputLayout& layout,
                                  const TensorShape& var, absl::Span<const int64_t> rows);

// CheckApplyShapes (the gradient too unless `sparse`), and for a sparse op
// CheckSparseApplyRows of the variable's (vars[0]) shape.
absl::Status CheckApplyInputs(const OpKernelContext& ctx, const ApplyInputLayout& layout,
                              absl::Span<const Tensor* const> vars, bool sparse,
                              absl::Span<const int64_t> rows);

// The op's first `num_vars` inputs as initialized resource variables of
// dtype `dtype` (held in `owned`; `raw` their pointers, for VarsLock).
absl::Status LookupApplyVars(const OpKernelContext& ctx, const ApplyInputLayout& layout,
                             int num_vars, DataType dtype, std::vector<std::shared_ptr<Var>>* owned,
                             std::vector<Var*>* raw);

}  // namespace dflow

#endif  // DFLOW_OPS_TRAINING_UTIL_H_
