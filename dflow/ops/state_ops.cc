// Reference-variable ops: VariableV2, Assign, AssignAdd, AssignSub,
// IsVariableInitialized.
//
// VariableV2's storage is a LegacyVar resource in the device's ResourceMgr,
// under (container, shared_name), or the node name when shared_name is
// empty, so every VariableV2 node naming the same pair, in any session on
// the device, sees the same variable. Its output is a ref edge pointing at
// that storage; the executor reads the value for non-ref consumers.
#include "dflow/ops/state_ops.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>

#include "dflow/framework/gradient.h"
#include "dflow/framework/resource_mgr.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/ops/eigen_util.h"
#include "dflow/ops/variable_ops.h"

namespace dflow {

// --- ref input helpers -----------------------------------------------------------

absl::Status CheckRefInitialized(const OpKernelContext& ctx, int i) {
  if (ctx.mutable_input(i)->IsInitialized()) return absl::OkStatus();
  const tensorflow::NodeDef& def = ctx.op_kernel().def();
  const std::string input = i < def.input_size() ? def.input(i) : absl::StrCat("input ", i);
  return absl::FailedPreconditionError(
      absl::StrCat(ctx.Prefix(), "Attempting to use uninitialized value ", input));
}

Tensor* MutableRefInput(OpKernelContext* ctx, int i) {
  Tensor* t = ctx->mutable_input(i);
  // As TensorFlow: a reference variable is updated in place, so its reads
  // ("v/read") and anything aliasing them see the new value (resource
  // variables copy on write instead; see Var::MutableTensor).
  return t;
}

void ForwardRefInput(OpKernelContext* ctx, int in, int out) {
  ctx->set_output_ref(out, ctx->input_ref_mutex(in), ctx->mutable_input(in));
}

RefInputsLock::RefInputsLock(const OpKernelContext& ctx, const std::vector<int>& indices) {
  for (int i : indices) {
    if (ctx.input_is_ref(i)) locked_.push_back(ctx.input_ref_mutex(i));
  }
  std::sort(locked_.begin(), locked_.end());
  locked_.erase(std::unique(locked_.begin(), locked_.end()), locked_.end());
  for (absl::Mutex* mu : locked_) mu->Lock();
}

RefInputsLock::~RefInputsLock() {
  for (auto it = locked_.rbegin(); it != locked_.rend(); ++it) (*it)->Unlock();
}

namespace {

// The storage of one VariableV2: a tensor (uninitialized until assigned)
// and the mutex that ref consumers lock.
class LegacyVar : public ResourceBase {
 public:
  static constexpr char kTypeName[] = "LegacyVar";

  explicit LegacyVar(DataType dtype) : dtype_(dtype) {}
  LegacyVar(const LegacyVar&) = delete;
  LegacyVar& operator=(const LegacyVar&) = delete;

  DataType dtype() const { return dtype_; }
  absl::Mutex* mu() { return &mu_; }
  // Guarded by mu(); the pointer is stable for the variable's lifetime.
  Tensor* tensor() { return &tensor_; }
  std::string DebugString() const override {
    absl::ReaderMutexLock l(&mu_);
    if (!tensor_.IsInitialized()) {
      return absl::StrCat("LegacyVar<", DataTypeString(dtype_), ", uninitialized>");
    }
    return absl::StrCat("LegacyVar<", tensor_.DebugString(), ">");
  }

 private:
  const DataType dtype_;
  mutable absl::Mutex mu_;
  Tensor tensor_;  // Guarded by mu_ (accessed through ref edges).
};

// The shape attr `name` as a partial shape (unknown rank allowed).
absl::Status ShapeFromAttr(InferenceContext* c, const char* name, PartialShape* out) {
  tensorflow::TensorShapeProto proto;
  RETURN_IF_ERROR(c->GetAttr(name, &proto));
  *out = PartialShape::FromProto(proto);
  return absl::OkStatus();
}

// Output 0 = inputs 0 and 1 merged; an error shows both when they conflict.
absl::Status MergeRefAndValueShape(InferenceContext* c) {
  absl::StatusOr<PartialShape> merged = PartialShape::Merge(c->input(0), c->input(1));
  if (!merged.ok()) {
    return c->Error(absl::StrCat("shapes of ref ", c->input(0).DebugString(), " and value ",
                                 c->input(1).DebugString(), " must be equal"));
  }
  c->set_output(0, *std::move(merged));
  return absl::OkStatus();
}

// --- VariableV2 ------------------------------------------------------------------

class VariableV2Op : public OpKernel {
 public:
  explicit VariableV2Op(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("dtype", &dtype_).IgnoreError();
    c->GetAttr("container", &container_).IgnoreError();
    c->GetAttr("shared_name", &name_).IgnoreError();
    if (name_.empty()) name_ = c->def().name();
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    ResourceMgr* rm = ctx->resource_manager();
    const std::string& container = container_.empty() ? rm->default_container() : container_;
    const DataType dtype = dtype_;
    ASSIGN_OR_RETURN(std::shared_ptr<LegacyVar> var,
                     rm->LookupOrCreate<LegacyVar>(
                         container, name_, [dtype]() -> absl::StatusOr<std::shared_ptr<LegacyVar>> {
                           return std::make_shared<LegacyVar>(dtype);
                         }));
    if (var->dtype() != dtype_) {
      return ctx->InvalidArgument("trying to share variable ", name_, " (container ", container,
                                  ") of dtype ", DataTypeString(var->dtype()), " as ",
                                  DataTypeString(dtype_));
    }
    {
      // Keeps the storage alive while this step's consumers use the ref,
      // even if the container is reset meanwhile.
      absl::MutexLock l(&mu_);
      var_ = var;
    }
    ctx->set_output_ref(0, var->mu(), var->tensor());
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }

 private:
  DataType dtype_ = DT_INVALID;
  std::string container_;
  std::string name_;
  absl::Mutex mu_;
  std::shared_ptr<LegacyVar> var_ ABSL_GUARDED_BY(mu_);
};

absl::Status VariableShape(InferenceContext* c) {
  PartialShape shape;
  RETURN_IF_ERROR(ShapeFromAttr(c, "shape", &shape));
  c->set_output(0, shape);
  return absl::OkStatus();
}

// --- Assign ------------------------------------------------------------------------

class AssignOp : public OpKernel {
 public:
  explicit AssignOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("validate_shape", &validate_shape_).IgnoreError();
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& value = ctx->input(1);
    {
      // Locked whatever use_locking says: the copy-on-write of updates
      // needs a consistent buffer count.
      absl::MutexLock l(ctx->input_ref_mutex(0));
      Tensor* ref = ctx->mutable_input(0);
      if (validate_shape_ && ref->IsInitialized() && ref->shape() != value.shape()) {
        return ctx->InvalidArgument("Assign requires shapes of both tensors to match. lhs shape= ",
                                    ref->shape().DebugString(),
                                    " rhs shape= ", value.shape().DebugString());
      }
      if (CanCopyInPlace(*ref, value)) {
        std::memcpy(ref->raw_data(), value.raw_data(), value.TotalBytes());
      } else {
        // A copy, never a shared buffer: the value's producer may reuse it.
        *ref = value.DeepCopy();
      }
    }
    ForwardRefInput(ctx, 0, 0);
    return absl::OkStatus();
  }

 private:
  // True when `ref` already has an exclusive buffer of the value's layout.
  static bool CanCopyInPlace(const Tensor& ref, const Tensor& value) {
    return ref.IsInitialized() && ref.raw_data() != nullptr && ref.dtype() == value.dtype() &&
           ref.shape() == value.shape() && DataTypeSize(value.dtype()) > 0 &&
           ref.BufferUseCount() == 1 && !ref.SharesBufferWith(value);
  }

  bool validate_shape_ = true;
};

absl::Status AssignShape(InferenceContext* c) {
  bool validate_shape = true;
  RETURN_IF_ERROR(c->GetAttr("validate_shape", &validate_shape));
  if (!validate_shape) {
    c->set_output(0, c->input(1));
    return absl::OkStatus();
  }
  return MergeRefAndValueShape(c);
}

// --- AssignAdd / AssignSub ----------------------------------------------------------

template <bool kSubtract>
class AssignUpdateOp : public OpKernel {
 public:
  using OpKernel::OpKernel;

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& delta = ctx->input(1);
    {
      RefInputsLock lock(*ctx, {0});
      RETURN_IF_ERROR(CheckRefInitialized(*ctx, 0));
      const Tensor& ref = *ctx->mutable_input(0);
      if (ref.shape() != delta.shape()) {
        return ctx->InvalidArgument("Parameters and update must be the same size: ref ",
                                    ref.shape().DebugString(), " vs update ",
                                    delta.shape().DebugString());
      }
      Tensor* value = MutableRefInput(ctx, 0);
      RETURN_IF_ERROR(SwitchNumeric(delta.dtype(), type_string(), [&](auto tag) -> absl::Status {
        using T = typename decltype(tag)::type;
        if constexpr (std::is_same_v<T, bool>) {
          return ctx->InvalidArgument("bool variables cannot be added to");
        } else {
          Update<T>(ctx, delta.flat<T>().data(), value->flat<T>().data(), delta.NumElements());
          return absl::OkStatus();
        }
      }));
    }
    ForwardRefInput(ctx, 0, 0);
    return absl::OkStatus();
  }

 private:
  template <typename T>
  static void Update(OpKernelContext* ctx, const T* delta, T* value, int64_t n) {
    ParallelForElements(ctx, n, 1, [&](int64_t begin, int64_t end) {
      auto v = EigenView(value + begin, end - begin);
      auto d = EigenView(delta + begin, end - begin);
      if constexpr (kSubtract) {
        v -= d;
      } else {
        v += d;
      }
    });
  }
};

// --- IsVariableInitialized ------------------------------------------------------------

class IsVariableInitializedOp : public OpKernel {
 public:
  using OpKernel::OpKernel;

  absl::Status Compute(OpKernelContext* ctx) override {
    bool initialized = false;
    if (ctx->input_is_ref(0)) {
      absl::ReaderMutexLock l(ctx->input_ref_mutex(0));
      initialized = ctx->mutable_input(0)->IsInitialized();
    } else {
      initialized = ctx->input(0).IsInitialized();
    }
    ctx->set_output(0, Tensor::Scalar<bool>(initialized));
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }
};

// --- registration ---------------------------------------------------------------------

const DataTypeVector kVariableTypes = {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64,
                                       DT_UINT8, DT_BOOL,   DT_STRING};
const DataTypeVector kUpdateTypes = {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64, DT_UINT8};

REGISTER_OP("VariableV2")
    .Output("ref: Ref(dtype)")
    .Attr("shape: shape")
    .Attr("dtype: type")
    .Attr("container: string = ''")
    .Attr("shared_name: string = ''")
    .SetIsStateful()
    .SetShapeFn(VariableShape);
REGISTER_KERNEL(
    KernelDefBuilder("VariableV2").Device(kDeviceCPU).TypeConstraint("dtype", kVariableTypes),
    VariableV2Op);
REGISTER_KERNEL(
    KernelDefBuilder("VariableV2").Device(kDeviceGPU).TypeConstraint("dtype", GpuVariableTypes()),
    VariableV2Op);

REGISTER_OP("Assign")
    .Input("ref: Ref(T)")
    .Input("value: T")
    .Output("output_ref: Ref(T)")
    .Attr("T: type")
    .Attr("validate_shape: bool = true")
    .Attr("use_locking: bool = true")
    .SetShapeFn(AssignShape);
REGISTER_KERNEL(KernelDefBuilder("Assign").Device(kDeviceCPU).TypeConstraint("T", kVariableTypes),
                AssignOp);

REGISTER_OP("AssignAdd")
    .Input("ref: Ref(T)")
    .Input("value: T")
    .Output("output_ref: Ref(T)")
    .Attr("T: numbertype")
    .Attr("use_locking: bool = false")
    .SetShapeFn(MergeRefAndValueShape);
REGISTER_KERNEL(KernelDefBuilder("AssignAdd").Device(kDeviceCPU).TypeConstraint("T", kUpdateTypes),
                AssignUpdateOp<false>);

REGISTER_OP("AssignSub")
    .Input("ref: Ref(T)")
    .Input("value: T")
    .Output("output_ref: Ref(T)")
    .Attr("T: numbertype")
    .Attr("use_locking: bool = false")
    .SetShapeFn(MergeRefAndValueShape);
REGISTER_KERNEL(KernelDefBuilder("AssignSub").Device(kDeviceCPU).TypeConstraint("T", kUpdateTypes),
                AssignUpdateOp<true>);

REGISTER_OP("IsVariableInitialized")
    .Input("ref: Ref(dtype)")
    .Output("is_initialized: bool")
    .Attr("dtype: type")
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("IsVariableInitialized").Device(kDeviceCPU),
                IsVariableInitializedOp);
// A GPU's reference variables: the storage, the ref and the flag are the
// CPU's (only the tensor's bytes are in device memory; dflow/gpu has the
// kernels that write them).
REGISTER_KERNEL(KernelDefBuilder("IsVariableInitialized")
                    .Device(kDeviceGPU)
                    .TypeConstraint("dtype", GpuVariableTypes())
                    .HostMemory("is_initialized"),
                IsVariableInitializedOp);

// As in TensorFlow: no gradient flows through variable state.
REGISTER_NO_GRADIENT("VariableV2");
REGISTER_NO_GRADIENT("Assign");
REGISTER_NO_GRADIENT("AssignAdd");
REGISTER_NO_GRADIENT("AssignSub");
REGISTER_NO_GRADIENT("IsVariableInitialized");

}  // namespace
}  // namespace dflow
