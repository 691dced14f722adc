// Variables on a GPU, so that a model's weights and optimizer slots stay in
// device memory: Assign, AssignAdd, AssignSub and Const (reference
// variables), AssignVariableOp, AssignAddVariableOp, AssignSubVariableOp and
// ResourceScatter* (resource variables). The kernels that only hold storage or pass handles,
// refs, snapshots, flags and shapes (VariableV2, IsVariableInitialized,
// VarHandleOp, ReadVariableOp, VariableShape, VarIsInitializedOp,
// DestroyResourceOp, and an int32 Const in host memory) are the CPU's,
// registered for GPU in dflow/ops. The semantics are the CPU kernels'
// (ops/state_ops.cc, ops/variable_ops.cc); values live in device memory and
// every copy and update is queued on the device's compute stream. Handles,
// resources and the is_initialized flags are host memory.
//
// A reference ref edge reaching a non-ref input (the variable's "read") is
// resolved by the executor, so Identity needs no ref kernel here.
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/resource_mgr.h"
#include "dflow/framework/status.h"
#include "dflow/gpu/gpu_device.h"
#include "dflow/gpu/training_launch.h"
#include "dflow/gpu/variable_util.h"
#include "dflow/ops/scatter_ops.h"
#include "dflow/ops/state_ops.h"
#include "dflow/ops/variable_ops.h"

namespace dflow {
namespace gpu {

absl::StatusOr<Tensor> DeviceCopy(GpuDevice* gpu, const Tensor& t) {
  if (t.memory_type() == MemoryType::kHost) return gpu->CopyTensor(t, MemoryType::kDevice);
  ASSIGN_OR_RETURN(Tensor out, Tensor::Allocate(gpu->device_allocator(), t.dtype(), t.shape()));
  if (t.TotalBytes() == 0) return out;
  RETURN_IF_ERROR(CudaCheck(cudaMemcpyAsync(out.raw_data(), t.raw_data(), t.TotalBytes(),
                                            cudaMemcpyDeviceToDevice, gpu->stream()),
                            absl::StrCat("copying ", t.TotalBytes(), " bytes on ", gpu->name())));
  return out;
}

absl::StatusOr<Tensor*> MutableDeviceTensor(GpuDevice* gpu, Var* var)
    ABSL_NO_THREAD_SAFETY_ANALYSIS {  // REQUIRES the caller's exclusive lock.
  // Our own reference is one use; any other means a snapshot shares the buffer.
  if (var->tensor().BufferUseCount() > 1 || var->tensor().memory_type() != MemoryType::kDevice) {
    ASSIGN_OR_RETURN(Tensor copy, DeviceCopy(gpu, var->tensor()));
    var->SetValue(std::move(copy));
  }
  return const_cast<Tensor*>(&var->tensor());
}

namespace {


// `s` with the node's prefix when it failed.
absl::Status Prefixed(const OpKernelContext& ctx, const absl::Status& s) {
  return s.ok() ? s : WithPrefix(s, ctx.Prefix());
}

// --- Assign ---------------------------------------------------------------------

class AssignGpuOp : public OpKernel {
 public:
  explicit AssignGpuOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("validate_shape", &validate_shape_).IgnoreError();
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    GpuDevice* gpu = GpuOf(ctx);
    const Tensor& value = ctx->input(1);
    {
      // Locked whatever use_locking says, as on the CPU.
      absl::MutexLock l(ctx->input_ref_mutex(0));
      Tensor* ref = ctx->mutable_input(0);
      if (validate_shape_ && ref->IsInitialized() && ref->shape() != value.shape()) {
        return ctx->InvalidArgument("Assign requires shapes of both tensors to match. lhs shape= ",
                                    ref->shape().DebugString(),
                                    " rhs shape= ", value.shape().DebugString());
      }
      if (CanCopyInPlace(*ref, value)) {
        if (value.TotalBytes() > 0) {
          RETURN_IF_ERROR(Prefixed(
              *ctx, CudaCheck(cudaMemcpyAsync(ref->raw_data(), value.raw_data(), value.TotalBytes(),
                                              cudaMemcpyDeviceToDevice, gpu->stream()),
                              "Assign's device copy")));
        }
      } else {
        // A copy, never a shared buffer: the value's producer may reuse it.
        absl::StatusOr<Tensor> copy = DeviceCopy(gpu, value);
        RETURN_IF_ERROR(Prefixed(*ctx, copy.status()));
        *ref = *std::move(copy);
      }
    }
    ForwardRefInput(ctx, 0, 0);
    return absl::OkStatus();
  }

 private:
  // True when `ref` already has an exclusive device buffer of the value's layout.
  static bool CanCopyInPlace(const Tensor& ref, const Tensor& value) {
    return ref.IsInitialized() && ref.raw_data() != nullptr &&
           ref.memory_type() == MemoryType::kDevice &&
           value.memory_type() == MemoryType::kDevice && ref.dtype() == value.dtype() &&
           ref.shape() == value.shape() && ref.BufferUseCount() == 1 && !ref.SharesBufferWith(value);
  }

  bool validate_shape_ = true;
};

// --- AssignAdd / AssignSub ----------------------------------------------------------

template <bool kSubtract>
class AssignUpdateGpuOp : public OpKernel {
 public:
  using OpKernel::OpKernel;

  absl::Status Compute(OpKernelContext* ctx) override {
    GpuDevice* gpu = GpuOf(ctx);
    const Tensor& delta = ctx->input(1);
    {
      RefInputsLock lock(*ctx, {0});
      RETURN_IF_ERROR(CheckRefInitialized(*ctx, 0));
      Tensor* value = MutableRefInput(ctx, 0);  // In place, as on the CPU.
      if (value->shape() != delta.shape()) {
        return ctx->InvalidArgument("Parameters and update must be the same size: ref ",
                                    value->shape().DebugString(), " vs update ",
                                    delta.shape().DebugString());
      }
      RETURN_IF_ERROR(Launch(gpu, delta, value));
    }
    ForwardRefInput(ctx, 0, 0);
    return LaunchStatus(ctx);
  }

  // value (+|-)= delta on the device. REQUIRES: equal shapes and dtypes.
  static absl::Status Launch(GpuDevice* gpu, const Tensor& delta, Tensor* value) {
    const int64_t n = delta.NumElements();
    switch (delta.dtype()) {
      case DT_FLOAT:
        LaunchAssignUpdate(gpu->stream(), static_cast<float*>(value->raw_data()),
                           static_cast<const float*>(delta.raw_data()), kSubtract, n);
        return absl::OkStatus();
      case DT_DOUBLE:
        LaunchAssignUpdate(gpu->stream(), static_cast<double*>(value->raw_data()),
                           static_cast<const double*>(delta.raw_data()), kSubtract, n);
        return absl::OkStatus();
      case DT_INT64:
        LaunchAssignUpdate(gpu->stream(), static_cast<int64_t*>(value->raw_data()),
                           static_cast<const int64_t*>(delta.raw_data()), kSubtract, n);
        return absl::OkStatus();
      default:
        return absl::InvalidArgumentError(
            absl::StrCat("unsupported dtype on the GPU: ", DataTypeString(delta.dtype())));
    }
  }
};

// --- Const --------------------------------------------------------------------------

// The value is parsed on the host at construction and copied to the device
// on the first Compute; later steps share that device copy (its consumers
// never write their inputs in place).
class ConstGpuOp : public OpKernel {
 public:
  explicit ConstGpuOp(OpKernelConstruction* c) : OpKernel(c) {
    DataType dtype;
    if (!c->GetAttr("value", &host_value_).ok() || !c->GetAttr("dtype", &dtype).ok()) return;
    if (host_value_.dtype() != dtype) {
      c->SetStatus(absl::InvalidArgumentError(
          absl::StrCat("[Const '", name(), "'] Type mismatch between value (",
                       DataTypeString(host_value_.dtype()), ") and dtype (", DataTypeString(dtype),
                       ")")));
    }
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    absl::MutexLock l(&mu_);
    if (!device_value_.has_value()) {
      absl::StatusOr<Tensor> copy = GpuOf(ctx)->CopyTensor(host_value_, MemoryType::kDevice);
      RETURN_IF_ERROR(Prefixed(*ctx, copy.status()));
      device_value_ = *std::move(copy);
    }
    ctx->set_output(0, *device_value_);
    return absl::OkStatus();
  }

 private:
  Tensor host_value_;
  absl::Mutex mu_;
  std::optional<Tensor> device_value_ ABSL_GUARDED_BY(mu_);
};

// --- resource variables ----------------------------------------------------------------

class AssignVariableGpuOp : public OpKernel {
 public:
  explicit AssignVariableGpuOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("dtype", &dtype_).IgnoreError();
    if (c->HasAttr("validate_shape")) c->GetAttr("validate_shape", &validate_shape_).IgnoreError();
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    GpuDevice* gpu = GpuOf(ctx);
    // Shares the value's buffer (updates copy on write) unless it is a ref
    // input's storage, which may change in place later, or not device memory
    // (an empty value the executor did not move).
    const bool copy = ctx->input_is_ref(1) || ctx->input(1).memory_type() != MemoryType::kDevice;
    auto stored = [&](const Tensor& value) -> absl::StatusOr<Tensor> {
      if (!copy) return value;
      absl::StatusOr<Tensor> device_copy = DeviceCopy(gpu, value);
      RETURN_IF_ERROR(Prefixed(*ctx, device_copy.status()));
      return device_copy;
    };
    return AssignVariable(ctx, dtype_, validate_shape_, stored);
  }

 private:
  DataType dtype_ = DT_INVALID;
  bool validate_shape_ = false;
};

template <bool kSubtract>
class AssignUpdateVariableGpuOp : public OpKernel {
 public:
  explicit AssignUpdateVariableGpuOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("dtype", &dtype_).IgnoreError();
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    GpuDevice* gpu = GpuOf(ctx);
    RETURN_IF_ERROR(UpdateVariable(ctx, dtype_, [&](Var* var) {
      absl::StatusOr<Tensor*> value = MutableDeviceTensor(gpu, var);
      RETURN_IF_ERROR(Prefixed(*ctx, value.status()));
      return Prefixed(*ctx, AssignUpdateGpuOp<kSubtract>::Launch(gpu, ctx->input(1), *value));
    }));
    return LaunchStatus(ctx);
  }

 private:
  DataType dtype_ = DT_INVALID;
};

// --- ResourceScatter* ----------------------------------------------------------------------

// Sparse updates of a resource variable in device memory (an embedding, or
// Adam's slots of one): its value is first copied when a read still shares
// it, then its rows are combined there (Device::ScatterRows).
template <ScatterOp kOp>
class ResourceScatterGpuOp : public OpKernel {
 public:
  using OpKernel::OpKernel;

  absl::Status Compute(OpKernelContext* ctx) override {
    GpuDevice* gpu = GpuOf(ctx);
    RETURN_IF_ERROR(ScatterIntoVariable(ctx, kOp, [&](Var* var) -> absl::StatusOr<Tensor*> {
      absl::StatusOr<Tensor*> value = MutableDeviceTensor(gpu, var);
      RETURN_IF_ERROR(Prefixed(*ctx, value.status()));
      return value;
    }));
    return LaunchStatus(ctx);
  }
};

// --- registration ----------------------------------------------------------------------

KernelDefBuilder Gpu(const char* op) { return std::move(KernelDefBuilder(op).Device(kDeviceGPU)); }

REGISTER_KERNEL(Gpu("Assign").TypeConstraint("T", GpuVariableTypes()), AssignGpuOp);
REGISTER_KERNEL(Gpu("AssignAdd").TypeConstraint("T", GpuVariableTypes()), AssignUpdateGpuOp<false>);
REGISTER_KERNEL(Gpu("AssignSub").TypeConstraint("T", GpuVariableTypes()), AssignUpdateGpuOp<true>);
REGISTER_KERNEL(Gpu("Const").TypeConstraint("dtype", GpuVariableTypes()), ConstGpuOp);
REGISTER_KERNEL(Gpu("AssignVariableOp").TypeConstraint("dtype", GpuVariableTypes()),
                AssignVariableGpuOp);
REGISTER_KERNEL(Gpu("AssignAddVariableOp").TypeConstraint("dtype", GpuVariableTypes()),
                AssignUpdateVariableGpuOp<false>);
REGISTER_KERNEL(Gpu("AssignSubVariableOp").TypeConstraint("dtype", GpuVariableTypes()),
                AssignUpdateVariableGpuOp<true>);
#define DFLOW_GPU_RESOURCE_SCATTER(NAME, OP, TYPES)                                 \
  REGISTER_KERNEL(Gpu(NAME).TypeConstraint("dtype", TYPES).HostMemory("indices"), \
                  ResourceScatterGpuOp<ScatterOp::OP>)
DFLOW_GPU_RESOURCE_SCATTER("ResourceScatterAdd", kAdd, GpuVariableTypes());
DFLOW_GPU_RESOURCE_SCATTER("ResourceScatterSub", kSub, GpuVariableTypes());
DFLOW_GPU_RESOURCE_SCATTER("ResourceScatterMul", kMul, GpuVariableTypes());
DFLOW_GPU_RESOURCE_SCATTER("ResourceScatterDiv", kDiv, (DataTypeVector{DT_FLOAT, DT_DOUBLE}));
DFLOW_GPU_RESOURCE_SCATTER("ResourceScatterMin", kMin, GpuVariableTypes());
DFLOW_GPU_RESOURCE_SCATTER("ResourceScatterMax", kMax, GpuVariableTypes());
DFLOW_GPU_RESOURCE_SCATTER("ResourceScatterUpdate", kUpdate, GpuVariableTypes());
#undef DFLOW_GPU_RESOURCE_SCATTER

}  // namespace
}  // namespace gpu
}  // namespace dflow
