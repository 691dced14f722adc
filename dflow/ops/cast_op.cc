// Cast: converts every element from SrcT to DstT with TensorFlow's results
// on x86, including the cases C++ leaves undefined:
//   float -> int32/int64: truncates toward zero; NaN and out-of-range values
//                         give the type's minimum;
//   float -> uint8:       through int32, keeping the low byte (300.0 -> 44);
//   integer -> narrower integer: keeps the low bits (two's complement);
//   x -> bool:            x != 0 (NaN -> true).
#include <cstdint>
#include <limits>
#include <type_traits>

#include "dflow/framework/op_def.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/ops/cwise_ops.h"

namespace dflow {
namespace {

template <typename I>
I FloatToInt(double v) {
  // [-2^(bits-1), 2^(bits-1)) holds every value that truncates into range.
  constexpr double kLimit = static_cast<double>(std::numeric_limits<I>::max()) + 1.0;
  if (v > -kLimit - 1.0 && v < kLimit) return static_cast<I>(v);
  return std::numeric_limits<I>::min();
}

template <typename Dst, typename Src>
Dst CastValue(Src v) {
  if constexpr (std::is_same_v<Dst, bool>) {
    return v != Src(0);
  } else if constexpr (std::is_floating_point_v<Src> && std::is_integral_v<Dst>) {
    if constexpr (sizeof(Dst) == 8) {
      return static_cast<Dst>(FloatToInt<int64_t>(v));
    } else {
      return static_cast<Dst>(FloatToInt<int32_t>(v));
    }
  } else {
    return static_cast<Dst>(v);
  }
}

template <typename Src, typename Dst>
void CastRange(const Src* in, Dst* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = CastValue<Dst>(in[i]);
}

class CastOp : public OpKernel {
 public:
  explicit CastOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("SrcT", &src_).IgnoreError();  // Failures are recorded on c.
    c->GetAttr("DstT", &dst_).IgnoreError();
  }

  bool IsExpensive() const override { return false; }

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    if (src_ == dst_) {
      ctx->set_output(0, x);
      return absl::OkStatus();
    }
    Tensor* y = ctx->allocate_output(0, x.shape());
    return SwitchNumeric(src_, "Cast", [&](auto src_tag) -> absl::Status {
      using Src = typename decltype(src_tag)::type;
      return SwitchNumeric(dst_, "Cast", [&](auto dst_tag) -> absl::Status {
        using Dst = typename decltype(dst_tag)::type;
        const Src* in = x.flat<Src>().data();
        Dst* out = y->flat<Dst>().data();
        ParallelForElements(ctx, x.NumElements(), 2,
                            [&](int64_t b, int64_t e) { CastRange(in + b, out + b, e - b); });
        return absl::OkStatus();
      });
    });
  }

 private:
  DataType src_ = DT_INVALID;
  DataType dst_ = DT_INVALID;
};

REGISTER_OP("Cast")
    .Input("x: SrcT")
    .Output("y: DstT")
    .Attr("SrcT: type")
    .Attr("DstT: type")
    .Attr("Truncate: bool = false")
    .SetShapeFn(UnchangedShape);
REGISTER_KERNEL(KernelDefBuilder("Cast")
                    .Device(kDeviceCPU)
                    .TypeConstraint("SrcT",
                                    {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64, DT_UINT8, DT_BOOL})
                    .TypeConstraint("DstT",
                                    {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64, DT_UINT8, DT_BOOL}),
                CastOp);

}  // namespace
}  // namespace dflow
