// Resource variables: the Var resource that VarHandleOp names, that
// ReadVariableOp / AssignVariableOp / AssignAddVariableOp work on, and that
// optimizer kernels (ResourceApplyGradientDescent, ...) update in place.
//
// A Var lives in a device's ResourceMgr under (container, name); every handle
// naming the same pair sees the same variable. Values are copy-on-write:
// a tensor returned by a read is a snapshot that later updates never change.
//
//   ASSIGN_OR_RETURN(std::shared_ptr<Var> var, LookupInitializedVar(*ctx, 0));
//   absl::MutexLock l(var->mu());
//   Tensor* t = var->MutableTensor();   // exclusive buffer, safe to modify
//   t->flat<float>()[0] -= lr * grad;
#ifndef DFLOW_OPS_VARIABLE_OPS_H_
#define DFLOW_OPS_VARIABLE_OPS_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/resource_mgr.h"
#include "dflow/framework/tensor.h"

namespace dflow {

// One variable: a dtype fixed at creation, and a value once initialized.
// Thread-safe through mu(); the accessors below say which lock they need.
class Var : public ResourceBase {
 public:
  static constexpr char kTypeName[] = "Var";

  explicit Var(DataType dtype) : dtype_(dtype) {}
  Var(const Var&) = delete;
  Var& operator=(const Var&) = delete;

  DataType dtype() const { return dtype_; }
  absl::Mutex* mu() const ABSL_LOCK_RETURNED(mu_) { return &mu_; }
  std::string DebugString() const override;

  bool is_initialized() const ABSL_SHARED_LOCKS_REQUIRED(mu_) { return initialized_; }
  // The current value. Copying it gives a snapshot that later updates of
  // the variable do not change. REQUIRES: is_initialized().
  const Tensor& tensor() const ABSL_SHARED_LOCKS_REQUIRED(mu_) { return tensor_; }
  // Makes `value` the variable's value (sharing its buffer) and marks the
  // variable initialized. REQUIRES: value.dtype() == dtype().
  void SetValue(Tensor value) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The value, safe to modify in place: its buffer is first copied when any
  // snapshot (or other tensor) still shares it. REQUIRES: is_initialized().
  Tensor* MutableTensor() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Thread-safe: a snapshot of the value, or nullopt when uninitialized.
  std::optional<Tensor> Snapshot() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const DataType dtype_;
  mutable absl::Mutex mu_;
  Tensor tensor_ ABSL_GUARDED_BY(mu_);
  bool initialized_ ABSL_GUARDED_BY(mu_) = false;
};

// The dtypes a variable can have on a GPU (TensorFlow's GPU set, less the
// half types dflow does not compute with): int32 variables stay on the CPU,
// as in TensorFlow.
const DataTypeVector& GpuVariableTypes();

// The handle held by input `i`, a scalar DT_RESOURCE tensor; InvalidArgument
// otherwise, or when it names another device or a resource other than a Var.
absl::StatusOr<ResourceHandle> VarHandleFromInput(const OpKernelContext& ctx, int i);
// The handle's container, or the ResourceMgr's default one when empty.
std::string VarContainer(const OpKernelContext& ctx, const ResourceHandle& handle);
// The initialized Var named by input `i`. FailedPrecondition "[Op 'node']
// Variable v (container localhost) is uninitialized" when it does not exist
// or was never assigned (as TensorFlow 1.x reports it). A variable, once
// initialized, stays so.
absl::StatusOr<std::shared_ptr<Var>> LookupInitializedVar(const OpKernelContext& ctx, int i);
// InvalidArgument "trying to <action> variable with wrong dtype: expected X,
// got Y", naming both dtypes in TensorFlow's order for each op.
absl::Status DtypeMismatch(const OpKernelContext& ctx, const char* action, DataType expected,
                           DataType got);

// AssignVariableOp on any device: `value` (input 1) and the variable input
// 0 names (created when missing) have dtype `dtype`; with `validate_shape`,
// an initialized variable keeps its shape. Then, under the variable's lock,
// it takes the value `stored(value)` makes (what the device keeps).
absl::Status AssignVariable(OpKernelContext* ctx, DataType dtype, bool validate_shape,
                            absl::FunctionRef<absl::StatusOr<Tensor>(const Tensor&)> stored);
// AssignAdd/AssignSubVariableOp on any device: the initialized variable of
// input 0 and the delta (input 1) have dtype `dtype` and one shape; then
// `update(variable)` runs under the variable's lock.
absl::Status UpdateVariable(OpKernelContext* ctx, DataType dtype,
                            absl::FunctionRef<absl::Status(Var* var)> update);

// Holds the exclusive locks of several variables, each distinct one once and
// in address order, so kernels updating several variables cannot deadlock.
class VarsLock {
 public:
  explicit VarsLock(const std::vector<Var*>& vars);
  ~VarsLock();
  VarsLock(const VarsLock&) = delete;
  VarsLock& operator=(const VarsLock&) = delete;

 private:
  std::vector<absl::Mutex*> locked_;
};

}  // namespace dflow

#endif  // DFLOW_OPS_VARIABLE_OPS_H_
