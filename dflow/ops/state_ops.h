// Reference variables (TensorFlow 1.x's default): VariableV2 owns the
// storage, and ops such as Assign and ApplyGradientDescent receive it as a
// ref input, i.e. a pointer to the variable's Tensor plus the mutex guarding
// it (see TensorValue in framework/kernel.h).
//
// The helpers below are for kernels with ref inputs:
//
//   RefInputsLock lock(ctx, {0, 1});                 // var and accum
//   RETURN_IF_ERROR(CheckRefInitialized(*ctx, 0));
//   Tensor* var = MutableRefInput(ctx, 0);           // updated in place
//   ...update var in place...
//   ForwardRefInput(ctx, 0, 0);                      // output 0 = the var
//
// Updates are copy-on-write: a value read from the variable earlier (by a
// non-ref consumer, or fetched by a client) is a snapshot that later
// updates do not change.
#ifndef DFLOW_OPS_STATE_OPS_H_
#define DFLOW_OPS_STATE_OPS_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/tensor.h"

namespace dflow {

// FailedPrecondition "[Op 'node'] Attempting to use uninitialized value <input>"
// (TensorFlow's message, naming the node input) when ref input `i` holds no
// value yet. REQUIRES: ctx.input_is_ref(i), and its mutex held.
absl::Status CheckRefInitialized(const OpKernelContext& ctx, int i);

// The storage of ref input `i`, to update in place: as in TensorFlow, reads
// of the variable that alias its buffer see the update. REQUIRES:
// ctx->input_is_ref(i), its mutex held exclusively, and the value initialized.
Tensor* MutableRefInput(OpKernelContext* ctx, int i);

// Sets ref output `out` to the variable of ref input `in`.
void ForwardRefInput(OpKernelContext* ctx, int in, int out);

// Holds the exclusive locks of ref inputs `indices` (each distinct mutex
// once, in address order, so kernels locking several cannot deadlock).
// Inputs that are not refs are skipped.
class RefInputsLock {
 public:
  RefInputsLock(const OpKernelContext& ctx, const std::vector<int>& indices);
  ~RefInputsLock();
  RefInputsLock(const RefInputsLock&) = delete;
  RefInputsLock& operator=(const RefInputsLock&) = delete;

 private:
  std::vector<absl::Mutex*> locked_;
};

}  // namespace dflow

#endif  // DFLOW_OPS_STATE_OPS_H_
