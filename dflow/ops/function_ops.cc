// _Arg / _Retval: how a rewritten graph takes its feeds and returns its
// fetches through the executor's call frame.
#include <string>

#include "dflow/framework/kernel.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/framework/status.h"

namespace dflow {
namespace {

REGISTER_OP("_Arg")
    .Output("output: T")
    .Attr("T: type")
    .Attr("index: int >= 0")
    .SetIsStateful()
    .SetShapeFn(UnknownShape);

REGISTER_OP("_Retval")
    .Input("input: T")
    .Attr("T: type")
    .Attr("index: int >= 0")
    .SetIsStateful()
    .SetShapeFn(NoOutputs);

class ArgOp : public OpKernel {
 public:
  explicit ArgOp(OpKernelConstruction* c) : OpKernel(c) {
    (void)c->GetAttr("T", &dtype_);
    (void)c->GetAttr("index", &index_);
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    if (ctx->call_frame() == nullptr) {
      return ctx->InvalidArgument("no call frame to read argument ", index_, " from");
    }
    absl::StatusOr<Tensor> value = ctx->call_frame()->GetArg(static_cast<int>(index_));
    if (!value.ok()) return WithPrefix(value.status(), ctx->Prefix());
    if (value->dtype() != dtype_) {
      return ctx->InvalidArgument("argument ", index_, " has dtype ",
                                  DataTypeString(value->dtype()), ", expected ",
                                  DataTypeString(dtype_));
    }
    ctx->set_output(0, *std::move(value));
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }

 private:
  DataType dtype_ = DT_INVALID;
  int64_t index_ = 0;
};

class RetvalOp : public OpKernel {
 public:
  explicit RetvalOp(OpKernelConstruction* c) : OpKernel(c) { (void)c->GetAttr("index", &index_); }

  absl::Status Compute(OpKernelContext* ctx) override {
    if (ctx->call_frame() == nullptr) {
      return ctx->InvalidArgument("no call frame to return value ", index_, " to");
    }
    absl::Status s = ctx->call_frame()->SetRetval(static_cast<int>(index_), ctx->input(0));
    return WithPrefix(s, ctx->Prefix());
  }
  bool IsExpensive() const override { return false; }

 private:
  int64_t index_ = 0;
};

REGISTER_KERNEL(KernelDefBuilder("_Arg").Device(kDeviceCPU), ArgOp);
REGISTER_KERNEL(KernelDefBuilder("_Retval").Device(kDeviceCPU), RetvalOp);

}  // namespace
}  // namespace dflow
