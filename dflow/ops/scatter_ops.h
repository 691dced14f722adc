// The body of the ResourceScatter* kernels, shared by a CPU's and a GPU's:
// they differ only in how a variable's value is made safe to update in
// place (Var::MutableTensor on the host; a copy in device memory on a GPU).
#ifndef DFLOW_OPS_SCATTER_OPS_H_
#define DFLOW_OPS_SCATTER_OPS_H_

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "dflow/framework/device.h"
#include "dflow/framework/kernel.h"
#include "dflow/ops/variable_ops.h"

namespace dflow {

// ResourceScatter<op>: the variable input 0 names (initialized, of updates'
// dtype, else InvalidArgument in TensorFlow's words) gets
// value[indices[i], ...] (op)= updates[i, ...] (inputs 1 and 2) in its own
// memory, under its lock; `mutable_value` gives the value to update.
absl::Status ScatterIntoVariable(OpKernelContext* ctx, ScatterOp op,
                                 absl::FunctionRef<absl::StatusOr<Tensor*>(Var*)> mutable_value);

}  // namespace dflow

#endif  // DFLOW_OPS_SCATTER_OPS_H_
