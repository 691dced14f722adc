// Resource variable ops: VarHandleOp, ReadVariableOp, AssignVariableOp,
// AssignAddVariableOp, AssignSubVariableOp, VarIsInitializedOp,
// DestroyResourceOp.
//
// As in TensorFlow, VarHandleOp only names a variable; AssignVariableOp
// creates it (with its dtype) on first use; reads and updates of a variable
// that does not exist or was never assigned fail with FailedPrecondition.
#include "dflow/ops/variable_ops.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <type_traits>

#include "dflow/framework/shape_inference.h"
#include "dflow/framework/status.h"

namespace dflow {

// --- Var ---------------------------------------------------------------------

std::string Var::DebugString() const {
  absl::ReaderMutexLock l(&mu_);
  if (!initialized_) return absl::StrCat("Var<", DataTypeString(dtype_), ", uninitialized>");
  return absl::StrCat("Var<", tensor_.DebugString(), ">");
}

void Var::SetValue(Tensor value) {
  // A variable keeps its value for long: not in a peer's shared region.
  tensor_ = value.IsBorrowed() ? value.DeepCopy() : std::move(value);
  initialized_ = true;
}

Tensor* Var::MutableTensor() {
  // Our own reference is one use; any other means a snapshot shares the buffer.
  if (tensor_.BufferUseCount() > 1) tensor_ = tensor_.DeepCopy();
  return &tensor_;
}

std::optional<Tensor> Var::Snapshot() const {
  absl::ReaderMutexLock l(&mu_);
  if (!initialized_) return std::nullopt;
  return tensor_;
}

VarsLock::VarsLock(const std::vector<Var*>& vars) {
  for (Var* v : vars) locked_.push_back(v->mu());
  std::sort(locked_.begin(), locked_.end());
  locked_.erase(std::unique(locked_.begin(), locked_.end()), locked_.end());
  for (absl::Mutex* mu : locked_) mu->Lock();
}

VarsLock::~VarsLock() {
  for (auto it = locked_.rbegin(); it != locked_.rend(); ++it) (*it)->Unlock();
}

// --- handle and lookup helpers ------------------------------------------------

absl::StatusOr<ResourceHandle> VarHandleFromInput(const OpKernelContext& ctx, int i) {
  const Tensor& t = ctx.input(i);
  if (t.dtype() != DT_RESOURCE || t.NumElements() != 1) {
    return ctx.InvalidArgument("input ", i, " must be a scalar resource handle, got ",
                               t.DebugString());
  }
  const ResourceHandle& h = t.flat<ResourceHandle>()[0];
  if (!h.device.empty() && h.device != ctx.device()->name()) {
    return ctx.InvalidArgument("variable ", h.name, " lives on ", h.device,
                               ", not on this kernel's device ", ctx.device()->name());
  }
  if (!h.maybe_type_name.empty() && h.maybe_type_name != Var::kTypeName) {
    return ctx.InvalidArgument("handle ", h.name, " names a ", h.maybe_type_name,
                               " resource, not a variable");
  }
  return h;
}

std::string VarContainer(const OpKernelContext& ctx, const ResourceHandle& handle) {
  return handle.container.empty() ? ctx.resource_manager()->default_container()
                                  : handle.container;
}

namespace {

absl::Status UninitializedError(const OpKernelContext& ctx, const ResourceHandle& h) {
  return absl::FailedPreconditionError(absl::StrCat(ctx.Prefix(), "Variable ", h.name,
                                                    " (container ", VarContainer(ctx, h),
                                                    ") is uninitialized"));
}

// The variable, or nullptr when it does not exist.
std::shared_ptr<Var> FindVar(const OpKernelContext& ctx, const ResourceHandle& h) {
  absl::StatusOr<std::shared_ptr<Var>> var =
      ctx.resource_manager()->Lookup<Var>(VarContainer(ctx, h), h.name);
  return var.ok() ? *std::move(var) : nullptr;
}

}  // namespace

absl::StatusOr<std::shared_ptr<Var>> LookupInitializedVar(const OpKernelContext& ctx, int i) {
  ASSIGN_OR_RETURN(ResourceHandle h, VarHandleFromInput(ctx, i));
  std::shared_ptr<Var> var = FindVar(ctx, h);
  if (var == nullptr) return UninitializedError(ctx, h);
  absl::ReaderMutexLock l(var->mu());
  if (!var->is_initialized()) return UninitializedError(ctx, h);
  return var;
}

absl::Status DtypeMismatch(const OpKernelContext& ctx, const char* action, DataType expected,
                           DataType got) {
  return ctx.InvalidArgument("trying to ", action, " variable with wrong dtype: expected ",
                             DataTypeString(expected), ", got ", DataTypeString(got));
}

absl::Status AssignVariable(OpKernelContext* ctx, DataType dtype, bool validate_shape,
                            absl::FunctionRef<absl::StatusOr<Tensor>(const Tensor&)> stored) {
  ASSIGN_OR_RETURN(ResourceHandle h, VarHandleFromInput(*ctx, 0));
  const Tensor& value = ctx->input(1);
  if (value.dtype() != dtype) return DtypeMismatch(*ctx, "assign", dtype, value.dtype());
  ASSIGN_OR_RETURN(std::shared_ptr<Var> var,
                   ctx->resource_manager()->LookupOrCreate<Var>(
                       VarContainer(*ctx, h), h.name,
                       [dtype]() -> absl::StatusOr<std::shared_ptr<Var>> {
                         return std::make_shared<Var>(dtype);
                       }));
  if (var->dtype() != dtype) return DtypeMismatch(*ctx, "assign", var->dtype(), dtype);
  absl::MutexLock l(var->mu());
  if (validate_shape && var->is_initialized() && var->tensor().shape() != value.shape()) {
    return ctx->InvalidArgument("trying to assign a tensor of shape ", value.shape().DebugString(),
                                " to variable ", h.name, " of shape ",
                                var->tensor().shape().DebugString());
  }
  ASSIGN_OR_RETURN(Tensor kept, stored(value));
  var->SetValue(std::move(kept));
  return absl::OkStatus();
}

absl::Status UpdateVariable(OpKernelContext* ctx, DataType dtype,
                            absl::FunctionRef<absl::Status(Var* var)> update) {
  ASSIGN_OR_RETURN(std::shared_ptr<Var> var, LookupInitializedVar(*ctx, 0));
  const Tensor& delta = ctx->input(1);
  if (var->dtype() != dtype || delta.dtype() != dtype) {
    return DtypeMismatch(*ctx, "update", var->dtype(), delta.dtype());
  }
  absl::MutexLock l(var->mu());
  if (var->tensor().shape() != delta.shape()) {
    return ctx->InvalidArgument("cannot update variable of shape ",
                                var->tensor().shape().DebugString(), " with a tensor of shape ",
                                delta.shape().DebugString(), "; shapes must be equal");
  }
  return update(var.get());
}

const DataTypeVector& GpuVariableTypes() {
  static const DataTypeVector* types = new DataTypeVector{DT_FLOAT, DT_DOUBLE, DT_INT64};
  return *types;
}

namespace {

// --- VarHandleOp ---------------------------------------------------------------

class VarHandleOp : public OpKernel {
 public:
  explicit VarHandleOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("container", &container_).IgnoreError();
    c->GetAttr("shared_name", &name_).IgnoreError();
    if (name_.empty()) name_ = c->def().name();
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const std::string& container =
        container_.empty() ? ctx->resource_manager()->default_container() : container_;
    ctx->set_output(0, ResourceHandleTensor<Var>(ctx->device()->name(), container, name_));
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }

 private:
  std::string container_;
  std::string name_;
};

// --- ReadVariableOp ------------------------------------------------------------

class ReadVariableOp : public OpKernel {
 public:
  explicit ReadVariableOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("dtype", &dtype_).IgnoreError();
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(std::shared_ptr<Var> var, LookupInitializedVar(*ctx, 0));
    if (var->dtype() != dtype_) return DtypeMismatch(*ctx, "read", dtype_, var->dtype());
    std::optional<Tensor> value = var->Snapshot();
    if (!value) return absl::InternalError("variable lost its value");
    ctx->set_output(0, *std::move(value));
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }

 private:
  DataType dtype_ = DT_INVALID;
};

// --- VariableShape ---------------------------------------------------------------

// The shape of the variable's value (TensorFlow's gradients of a resource
// captured by a control flow v2 loop size their zeros with it).
class VariableShapeOp : public OpKernel {
 public:
  using OpKernel::OpKernel;

  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(std::shared_ptr<Var> var, LookupInitializedVar(*ctx, 0));
    std::optional<Tensor> value = var->Snapshot();
    if (!value) return absl::InternalError("variable lost its value");
    const TensorShape& shape = value->shape();
    Tensor* out = ctx->allocate_output(0, TensorShape({shape.dims()}));
    for (int d = 0; d < shape.dims(); ++d) {
      if (out->dtype() == DT_INT64) {
        out->flat<int64_t>()[d] = shape.dim_size(d);
      } else if (shape.dim_size(d) > std::numeric_limits<int32_t>::max()) {
        return ctx->InvalidArgument("dimension ", d, " of the variable's shape ",
                                    shape.DebugString(), " does not fit out_type int32");
      } else {
        out->flat<int32_t>()[d] = static_cast<int32_t>(shape.dim_size(d));
      }
    }
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }
};

// --- AssignVariableOp ----------------------------------------------------------

class AssignVariableOp : public OpKernel {
 public:
  explicit AssignVariableOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("dtype", &dtype_).IgnoreError();
    if (c->HasAttr("validate_shape")) c->GetAttr("validate_shape", &validate_shape_).IgnoreError();
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    // A ref input's storage may be changed in place later: keep a copy.
    const bool copy = ctx->input_is_ref(1);
    return AssignVariable(ctx, dtype_, validate_shape_, [copy](const Tensor& value) {
      return absl::StatusOr<Tensor>(copy ? value.DeepCopy() : value);
    });
  }
  bool IsExpensive() const override { return false; }

 private:
  DataType dtype_ = DT_INVALID;
  bool validate_shape_ = false;
};

// --- AssignAddVariableOp / AssignSubVariableOp -------------------------------

template <bool kSubtract>
class AssignUpdateVariableOp : public OpKernel {
 public:
  explicit AssignUpdateVariableOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("dtype", &dtype_).IgnoreError();
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    // UpdateVariable holds the variable's lock; the analysis cannot see it.
    return UpdateVariable(ctx, dtype_, [&](Var* var) ABSL_NO_THREAD_SAFETY_ANALYSIS {
      const Tensor& delta = ctx->input(1);
      Tensor* value = var->MutableTensor();
      return SwitchNumeric(dtype_, type_string(), [&](auto tag) -> absl::Status {
        using T = typename decltype(tag)::type;
        if constexpr (std::is_same_v<T, bool>) {
          return ctx->InvalidArgument("bool variables cannot be added to");
        } else {
          Update<T>(delta.flat<T>(), value->flat<T>(), ctx->intra_op_pool());
          return absl::OkStatus();
        }
      });
    });
  }

 private:
  template <typename T>
  static void Update(absl::Span<const T> delta, absl::Span<T> value, ThreadPool* pool) {
    pool->ParallelFor(static_cast<int64_t>(value.size()), 2, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        value[i] = kSubtract ? value[i] - delta[i] : value[i] + delta[i];
      }
    });
  }

  DataType dtype_ = DT_INVALID;
};

// --- VarIsInitializedOp / DestroyResourceOp ---------------------------------

class VarIsInitializedOp : public OpKernel {
 public:
  using OpKernel::OpKernel;

  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(ResourceHandle h, VarHandleFromInput(*ctx, 0));
    std::shared_ptr<Var> var = FindVar(*ctx, h);
    bool initialized = false;
    if (var != nullptr) {
      absl::ReaderMutexLock l(var->mu());
      initialized = var->is_initialized();
    }
    ctx->set_output(0, Tensor::Scalar<bool>(initialized));
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }
};

class DestroyResourceOp : public OpKernel {
 public:
  explicit DestroyResourceOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("ignore_lookup_error", &ignore_lookup_error_).IgnoreError();
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& t = ctx->input(0);
    if (t.dtype() != DT_RESOURCE || t.NumElements() != 1) {
      return ctx->InvalidArgument("input must be a scalar resource handle, got ",
                                  t.DebugString());
    }
    const ResourceHandle& h = t.flat<ResourceHandle>()[0];
    absl::Status s = ctx->resource_manager()->Delete(h);
    if (s.ok() || (ignore_lookup_error_ && absl::IsNotFound(s))) return absl::OkStatus();
    return WithPrefix(s, ctx->Prefix());
  }
  bool IsExpensive() const override { return false; }

 private:
  bool ignore_lookup_error_ = true;
};

// --- registration ---------------------------------------------------------------

const DataTypeVector kAssignTypes = {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64,
                                     DT_UINT8, DT_BOOL,   DT_STRING};
const DataTypeVector kUpdateTypes = {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64, DT_UINT8};
// The kernels below that only handle handles, snapshots and shapes serve a GPU
// as they are (its variables' values live in device memory; dflow/gpu has
// the kernels that write them).

REGISTER_OP("VarHandleOp")
    .Output("resource: resource")
    .Attr("container: string = ''")
    .Attr("shared_name: string = ''")
    .Attr("debug_name: string = ''")
    .Attr("dtype: type")
    .Attr("shape: shape")
    .Attr("allowed_devices: list(string) = []")
    .SetIsStateful()
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("VarHandleOp").Device(kDeviceCPU), VarHandleOp);
REGISTER_KERNEL(KernelDefBuilder("VarHandleOp")
                    .Device(kDeviceGPU)
                    .TypeConstraint("dtype", GpuVariableTypes()),
                VarHandleOp);

REGISTER_OP("ReadVariableOp")
    .Input("resource: resource")
    .Output("value: dtype")
    .Attr("dtype: type")
    .SetIsStateful()
    .SetShapeFn(UnknownShape);
REGISTER_KERNEL(KernelDefBuilder("ReadVariableOp")
                    .Device(kDeviceCPU)
                    .TypeConstraint("dtype", kAssignTypes),
                ReadVariableOp);
REGISTER_KERNEL(KernelDefBuilder("ReadVariableOp")  // A snapshot sharing the device buffer.
                    .Device(kDeviceGPU)
                    .TypeConstraint("dtype", GpuVariableTypes()),
                ReadVariableOp);

REGISTER_OP("VariableShape")
    .Input("input: resource")
    .Output("output: out_type")
    .Attr("out_type: {int32, int64} = DT_INT32")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) {
      c->set_output(0, PartialShape({kUnknownDim}));
      return absl::OkStatus();
    });
REGISTER_KERNEL(KernelDefBuilder("VariableShape").Device(kDeviceCPU), VariableShapeOp);
REGISTER_KERNEL(KernelDefBuilder("VariableShape").Device(kDeviceGPU).HostMemory("output"),
                VariableShapeOp);

REGISTER_OP("AssignVariableOp")
    .Input("resource: resource")
    .Input("value: dtype")
    .Attr("dtype: type")
    .Attr("validate_shape: bool = false")
    .SetIsStateful()
    .SetShapeFn(NoOutputs);
REGISTER_KERNEL(KernelDefBuilder("AssignVariableOp")
                    .Device(kDeviceCPU)
                    .TypeConstraint("dtype", kAssignTypes),
                AssignVariableOp);

REGISTER_OP("AssignAddVariableOp")
    .Input("resource: resource")
    .Input("value: dtype")
    .Attr("dtype: type")
    .SetIsStateful()
    .SetShapeFn(NoOutputs);
REGISTER_KERNEL(KernelDefBuilder("AssignAddVariableOp")
                    .Device(kDeviceCPU)
                    .TypeConstraint("dtype", kUpdateTypes),
                AssignUpdateVariableOp<false>);

REGISTER_OP("AssignSubVariableOp")
    .Input("resource: resource")
    .Input("value: dtype")
    .Attr("dtype: type")
    .SetIsStateful()
    .SetShapeFn(NoOutputs);
REGISTER_KERNEL(KernelDefBuilder("AssignSubVariableOp")
                    .Device(kDeviceCPU)
                    .TypeConstraint("dtype", kUpdateTypes),
                AssignUpdateVariableOp<true>);

REGISTER_OP("VarIsInitializedOp")
    .Input("resource: resource")
    .Output("is_initialized: bool")
    .SetIsStateful()
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("VarIsInitializedOp").Device(kDeviceCPU), VarIsInitializedOp);
REGISTER_KERNEL(KernelDefBuilder("VarIsInitializedOp")
                    .Device(kDeviceGPU)
                    .HostMemory("is_initialized"),
                VarIsInitializedOp);

REGISTER_OP("DestroyResourceOp")
    .Input("resource: resource")
    .Attr("ignore_lookup_error: bool = true")
    .SetIsStateful()
    .SetShapeFn(NoOutputs);
REGISTER_KERNEL(KernelDefBuilder("DestroyResourceOp").Device(kDeviceCPU), DestroyResourceOp);
REGISTER_KERNEL(KernelDefBuilder("DestroyResourceOp").Device(kDeviceGPU), DestroyResourceOp);

}  // namespace
}  // namespace dflow
