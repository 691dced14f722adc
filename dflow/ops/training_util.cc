#include "dflow/ops/training_util.h"

#include "dflow/ops/array_util.h"

namespace dflow {

ApplyInputLayout ApplyLayoutOf(const OpDef& op, int num_vars) {
  ApplyInputLayout layout;
  for (int i = 0; i < static_cast<int>(op.inputs.size()); ++i) {
    const std::string& name = op.inputs[i].name;
    layout.names.push_back(name);
    if (name == "grad" || name == "delta") {
      layout.grad = i;
    } else if (name == "indices") {
      layout.indices = i;
    } else if (i >= num_vars) {
      layout.scalars.push_back(i);
    }
  }
  return layout;
}

absl::Status CheckApplyShapes(const OpKernelContext& ctx, const ApplyInputLayout& layout,
                              absl::Span<const Tensor* const> vars, bool check_grad) {
  const int num_vars = static_cast<int>(vars.size());
  const TensorShape& shape = vars[0]->shape();
  for (int i = 1; i <= (check_grad ? num_vars : num_vars - 1); ++i) {
    const int index = i < num_vars ? i : layout.grad;
    const TensorShape& other = i < num_vars ? vars[i]->shape() : ctx.input(index).shape();
    if (other != shape) {
      return ctx.InvalidArgument(layout.names[0], " and ", layout.names[index],
                                 " do not have the same shape: ", layout.names[0], "=",
                                 shape.DebugString(), " ", layout.names[index], "=",
                                 other.DebugString());
    }
  }
  for (int index : layout.scalars) {
    const Tensor& t = ctx.input(index);
    if (t.dims() != 0) {
      return ctx.InvalidArgument(layout.names[index], " is not a scalar: ", t.shape().DebugString());
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int64_t>> SparseApplyRows(const OpKernelContext& ctx,
                                                     const ApplyInputLayout& layout) {
  const Tensor& indices = ctx.input(layout.indices);
  if (indices.dims() != 1) return ctx.InvalidArgument("indices must be one-dimensional");
  absl::StatusOr<std::vector<int64_t>> rows = IndexValues(indices, "indices");
  if (!rows.ok()) return ctx.InvalidArgument(rows.status().message());
  return rows;
}

absl::Status CheckSparseApplyRows(const OpKernelContext& ctx, const ApplyInputLayout& layout,
                                  const TensorShape& var, absl::Span<const int64_t> rows) {
  const TensorShape& grad = ctx.input(layout.grad).shape();
  if (var.dims() < 1) return ctx.InvalidArgument("var must be at least 1 dimensional");
  if (grad.dims() != var.dims()) {
    return ctx.InvalidArgument("var and grad do not have the same rank: var=", var.DebugString(),
                               " grad=", grad.DebugString());
  }
  for (int d = 1; d < var.dims(); ++d) {
    if (grad.dim_size(d) != var.dim_size(d)) {
      return ctx.InvalidArgument("var and grad must match in dimension ", d, ": var=",
                                 var.DebugString(), " grad=", grad.DebugString());
    }
  }
  if (grad.dim_size(0) != static_cast<int64_t>(rows.size())) {
    return ctx.InvalidArgument(
        "grad must be the same size as indices in the first dimension: grad=", grad.DebugString(),
        ", ", rows.size(), " indices");
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] < 0 || rows[i] >= var.dim_size(0)) {
      return ctx.InvalidArgument("Index ", rows[i], " at offset ", i,
                                 " in indices is out of range [0, ", var.dim_size(0), ")");
    }
  }
  return absl::OkStatus();
}

absl::Status CheckApplyInputs(const OpKernelContext& ctx, const ApplyInputLayout& layout,
                              absl::Span<const Tensor* const> vars, bool sparse,
                              absl::Span<const int64_t> rows) {
  RETURN_IF_ERROR(CheckApplyShapes(ctx, layout, vars, /*check_grad=*/!sparse));
  if (sparse) return CheckSparseApplyRows(ctx, layout, vars[0]->shape(), rows);
  return absl::OkStatus();
}

absl::Status LookupApplyVars(const OpKernelContext& ctx, const ApplyInputLayout& layout,
                             int num_vars, DataType dtype, std::vector<std::shared_ptr<Var>>* owned,
                             std::vector<Var*>* raw) {
  owned->resize(num_vars);
  raw->resize(num_vars);
  for (int i = 0; i < num_vars; ++i) {
    ASSIGN_OR_RETURN((*owned)[i], LookupInitializedVar(ctx, i));
    (*raw)[i] = (*owned)[i].get();
    if ((*raw)[i]->dtype() != dtype) {
      return ctx.InvalidArgument(layout.names[i], " is a variable of dtype ",
                                 DataTypeString((*raw)[i]->dtype()), " but T is ",
                                 DataTypeString(dtype));
    }
  }
  return absl::OkStatus();
}

}  // namespace dflow
