// Scans along one axis: Cumsum and Cumprod, each with TensorFlow's
// `exclusive` (element i leaves itself out) and `reverse` (scan from the end).
#include <functional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/framework/status.h"
#include "dflow/ops/array_util.h"

namespace dflow {
namespace {

// out[o, i, s] = op-fold of x[o, j, s] over j <= i (j < i when exclusive;
// j >= i / j > i when reverse), for `Op` std::plus or std::multiplies.
template <typename T, typename Op>
void Scan(const T* x, T* out, int64_t outer, int64_t len, int64_t inner, bool exclusive,
          bool reverse) {
  const T identity = std::is_same_v<Op, std::plus<T>> ? T(0) : T(1);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t s = 0; s < inner; ++s) {
      T acc = identity;
      for (int64_t k = 0; k < len; ++k) {
        const int64_t i = reverse ? len - 1 - k : k;
        const int64_t at = (o * len + i) * inner + s;
        if (exclusive) {
          out[at] = acc;
          acc = Op()(acc, x[at]);
        } else {
          acc = Op()(acc, x[at]);
          out[at] = acc;
        }
      }
    }
  }
}

template <template <typename> class Op>
class ScanOp : public OpKernel {
 public:
  explicit ScanOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("exclusive", &exclusive_).IgnoreError();  // Recorded on c.
    c->GetAttr("reverse", &reverse_).IgnoreError();
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    const Tensor& axis_t = ctx->input(1);
    if (axis_t.dims() != 0) {
      return ctx->InvalidArgument("ScanOp: axis must be a scalar, not ",
                                  axis_t.shape().DebugString());
    }
    ASSIGN_OR_RETURN(int64_t axis_value, IndexScalar(axis_t, "axis"));
    int64_t axis;
    if (!CanonicalAxis(axis_value, x.dims(), &axis)) {
      return ctx->InvalidArgument("ScanOp: Expected scan axis in the range [", -x.dims(), ", ",
                                  x.dims(), "), but got ", axis_value);
    }
    const auto& dims = x.shape().dim_sizes();
    const int a = static_cast<int>(axis);
    Tensor* out = ctx->allocate_output_for_overwrite(0, x.shape());
    return SwitchNumeric(x.dtype(), ctx->op_kernel().def().op(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_same_v<T, bool>) {
        return ctx->InvalidArgument("bool is not supported");
      } else {
        Scan<T, Op<T>>(x.flat<T>().data(), out->flat<T>().data(), DimProduct(dims, 0, a), dims[a],
                       DimProduct(dims, a + 1, x.dims()), exclusive_, reverse_);
        return absl::OkStatus();
      }
    });
  }

 private:
  bool exclusive_ = false;
  bool reverse_ = false;
};

const DataTypeVector& ScanTypes() {
  static const DataTypeVector kTypes = {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64, DT_UINT8};
  return kTypes;
}

#define DFLOW_REGISTER_SCAN(NAME, OP)                                                       \
  REGISTER_OP(NAME)                                                                         \
      .Input("x: T")                                                                        \
      .Input("axis: Tidx")                                                                  \
      .Output("out: T")                                                                     \
      .Attr("exclusive: bool = false")                                                      \
      .Attr("reverse: bool = false")                                                        \
      .Attr(                                                                                \
          "T: {float, double, int32, uint8, int16, int8, complex64, int64, qint8, quint8, " \
          "qint32, bfloat16, qint16, quint16, uint16, complex128, half, uint32, uint64}")   \
      .Attr("Tidx: {int32, int64} = DT_INT32")                                              \
      .SetShapeFn(UnchangedShape);                                                          \
  REGISTER_KERNEL(KernelDefBuilder(NAME)                                                    \
                      .Device(kDeviceCPU)                                                   \
                      .TypeConstraint("T", ScanTypes())                                     \
                      .TypeConstraint("Tidx", IndexTypes()),                                \
                  ScanOp<OP>)

DFLOW_REGISTER_SCAN("Cumsum", std::plus);
DFLOW_REGISTER_SCAN("Cumprod", std::multiplies);
#undef DFLOW_REGISTER_SCAN

}  // namespace
}  // namespace dflow
