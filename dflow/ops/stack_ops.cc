// Stacks: StackV2, StackPushV2, StackPopV2, StackCloseV2. TensorFlow 1.x
// while-loop gradients keep each forward iteration's values on a stack and
// pop them, newest first, in the gradient loop. A stack lives for one step,
// on one device (OpKernelContext::step_resources); its handle names it.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "dflow/framework/attr_util.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/resource_mgr.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/ops/array_util.h"
#include "dflow/ops/step_resource.h"

namespace dflow {
namespace {

class Stack : public ResourceBase {
 public:
  static constexpr char kTypeName[] = "Stack";
  Stack(std::string name, DataType dtype, int64_t max_size)
      : name_(std::move(name)), dtype_(dtype), max_size_(max_size) {}
  std::string DebugString() const override { return absl::StrCat("Stack[", name_, "]"); }

  absl::Status Push(const Tensor& t) {
    if (t.dtype() != dtype_) {
      return absl::InvalidArgumentError(absl::StrCat(DebugString(), " holds ",
                                                     DataTypeString(dtype_), ", not ",
                                                     DataTypeString(t.dtype())));
    }
    absl::MutexLock l(&mu_);
    if (closed_) return Closed();
    if (max_size_ >= 0 && static_cast<int64_t>(elems_.size()) >= max_size_) {
      return absl::InvalidArgumentError(
          absl::StrCat(DebugString(), " overflowed its max_size (", max_size_, ")"));
    }
    elems_.push_back(t);
    return absl::OkStatus();
  }
  absl::StatusOr<Tensor> Pop(DataType want) {
    if (want != dtype_) {
      return absl::InvalidArgumentError(absl::StrCat(
          DebugString(), " holds ", DataTypeString(dtype_), ", not ", DataTypeString(want)));
    }
    absl::MutexLock l(&mu_);
    if (closed_) return Closed();
    if (elems_.empty()) return absl::InvalidArgumentError(absl::StrCat(DebugString(), " is empty."));
    Tensor t = std::move(elems_.back());
    elems_.pop_back();
    return t;
  }
  void Close() {
    absl::MutexLock l(&mu_);
    closed_ = true;
    elems_.clear();
  }

 private:
  absl::Status Closed() const {
    return absl::InvalidArgumentError(absl::StrCat(DebugString(), " has already been closed."));
  }

  const std::string name_;
  const DataType dtype_;
  const int64_t max_size_;  // Negative: unbounded.
  absl::Mutex mu_;
  std::vector<Tensor> elems_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

REGISTER_OP("StackV2")
    .Input("max_size: int32")
    .Output("handle: resource")
    .Attr("elem_type: type")
    .Attr("stack_name: string = ''")
    .SetIsStateful()
    .SetShapeFn(ScalarShape);

REGISTER_OP("StackPushV2")
    .Input("handle: resource")
    .Input("elem: T")
    .Output("output: T")
    .Attr("T: type")
    .Attr("swap_memory: bool = false")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) {
      c->set_output(0, c->input(1));
      return absl::OkStatus();
    });

REGISTER_OP("StackPopV2")
    .Input("handle: resource")
    .Output("elem: elem_type")
    .Attr("elem_type: type")
    .SetIsStateful()
    .SetShapeFn(UnknownShape);

REGISTER_OP("StackCloseV2").Input("handle: resource").SetIsStateful()
    .SetShapeFn(NoOutputs);

class StackOp : public OpKernel {
 public:
  explicit StackOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("elem_type", &dtype_).IgnoreError();
    c->GetAttr("stack_name", &name_).IgnoreError();
    if (name_.empty()) name_ = c->def().name();
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& max = ctx->input(0);
    if (max.dims() != 0) {
      return ctx->InvalidArgument("max_size must be a scalar, got shape ",
                                  max.shape().DebugString());
    }
    const int32_t max_size = max.scalar<int32_t>();
    ASSIGN_OR_RETURN(Tensor handle,
                     CreateStepResource<Stack>(ctx, name_, [&](const std::string& unique) {
                       return std::make_shared<Stack>(unique, dtype_, max_size);
                     }));
    ctx->set_output(0, std::move(handle));
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }

 private:
  DataType dtype_ = DT_INVALID;
  std::string name_;
};

class StackPushOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(std::shared_ptr<Stack> stack, LookupStepResource<Stack>(ctx, 0));
    RETURN_IF_ERROR(stack->Push(ctx->input(1)));
    ctx->set_output(0, ctx->input(1));
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }
};

class StackPopOp : public OpKernel {
 public:
  explicit StackPopOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("elem_type", &dtype_).IgnoreError();
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(std::shared_ptr<Stack> stack, LookupStepResource<Stack>(ctx, 0));
    absl::StatusOr<Tensor> t = stack->Pop(dtype_);
    RETURN_IF_ERROR(t.status());
    ctx->set_output(0, *std::move(t));
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }

 private:
  DataType dtype_ = DT_INVALID;
};

class StackCloseOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(std::shared_ptr<Stack> stack, LookupStepResource<Stack>(ctx, 0));
    stack->Close();
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }
};

REGISTER_KERNEL(KernelDefBuilder("StackV2").Device(kDeviceCPU), StackOp);
REGISTER_KERNEL(KernelDefBuilder("StackPushV2").Device(kDeviceCPU), StackPushOp);
REGISTER_KERNEL(KernelDefBuilder("StackPopV2").Device(kDeviceCPU), StackPopOp);
REGISTER_KERNEL(KernelDefBuilder("StackCloseV2").Device(kDeviceCPU), StackCloseOp);

// On a GPU, as TensorFlow registers them (without swap_memory: the values stay
// on the GPU): handle and max_size in host memory, values in device memory
// (int32 ones in host memory), so a while loop's gradient on a GPU keeps the
// forward values it saves there instead of copying each out and back.
REGISTER_KERNEL(KernelDefBuilder("StackV2").Device(kDeviceGPU).HostMemory("max_size"), StackOp);
REGISTER_KERNEL(
    KernelDefBuilder("StackPushV2").Device(kDeviceGPU).TypeConstraint("T", GpuTensorTypes()),
    StackPushOp);
REGISTER_KERNEL(KernelDefBuilder("StackPushV2")
                    .Device(kDeviceGPU)
                    .TypeConstraint<int32_t>("T")
                    .HostMemory("elem")
                    .HostMemory("output"),
                StackPushOp);
REGISTER_KERNEL(KernelDefBuilder("StackPopV2")
                    .Device(kDeviceGPU)
                    .TypeConstraint("elem_type", GpuTensorTypes()),
                StackPopOp);
REGISTER_KERNEL(KernelDefBuilder("StackPopV2")
                    .Device(kDeviceGPU)
                    .TypeConstraint<int32_t>("elem_type")
                    .HostMemory("elem"),
                StackPopOp);
REGISTER_KERNEL(KernelDefBuilder("StackCloseV2").Device(kDeviceGPU), StackCloseOp);

}  // namespace
}  // namespace dflow
