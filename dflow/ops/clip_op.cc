// ClipByValue: t clamped to [clip_value_min, clip_value_max], each bound a
// scalar or of t's shape. As TensorFlow computes max(min(t, hi), lo), so a
// min above the max gives the min, and NaN stays NaN.
#include <algorithm>

#include "dflow/framework/kernel.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/framework/status.h"

namespace dflow {
namespace {

class ClipByValueOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& t = ctx->input(0);
    const Tensor& lo = ctx->input(1);
    const Tensor& hi = ctx->input(2);
    const auto fits = [&](const Tensor& b) { return b.dims() == 0 || b.shape() == t.shape(); };
    if (!fits(lo) || !fits(hi)) {
      return ctx->InvalidArgument(
          "clip_value_min and clip_value_max must be either of the same shape as input, or a "
          "scalar. input shape: ",
          t.shape().DebugString(), "clip_value_min shape: ", lo.shape().DebugString(),
          "clip_value_max shape: ", hi.shape().DebugString());
    }
    Tensor* out = ctx->allocate_output_for_overwrite(0, t.shape());
    return SwitchNumeric(t.dtype(), "ClipByValue", [&](auto tag) {
      using T = typename decltype(tag)::type;
      auto x = t.flat<T>();
      auto lv = lo.flat<T>(), hv = hi.flat<T>();
      auto o = out->flat<T>();
      const bool lo_scalar = lo.dims() == 0, hi_scalar = hi.dims() == 0;
      for (size_t i = 0; i < x.size(); ++i) {
        o[i] = std::max(std::min(x[i], hv[hi_scalar ? 0 : i]), lv[lo_scalar ? 0 : i]);
      }
      return absl::OkStatus();
    });
  }
};

REGISTER_OP("ClipByValue")
    .Input("t: T")
    .Input("clip_value_min: T")
    .Input("clip_value_max: T")
    .Output("output: T")
    .Attr(
        "T: {float, double, int32, uint8, int16, int8, complex64, int64, qint8, quint8, qint32, "
        "bfloat16, qint16, quint16, uint16, complex128, half, uint32, uint64}")
    .SetShapeFn(UnchangedShape);
REGISTER_KERNEL(KernelDefBuilder("ClipByValue")
                    .Device(kDeviceCPU)
                    .TypeConstraint("T", {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64, DT_UINT8}),
                ClipByValueOp);

}  // namespace
}  // namespace dflow
