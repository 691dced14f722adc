#include "dflow/ops/training_util.h"

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
