// Assert: fails the step with INVALID_ARGUMENT "assertion failed: [d0] [d1]
// ..." when its condition is false, each data tensor summarized by its first
// `summarize` values, as TensorFlow's kernel does (tf.debugging.assert_*,
// and the shape checks tf.compat.v1.losses insert). CheckNumerics: forwards
// its input, or fails the step with "<message> : Tensor had NaN values" (or
// Inf) when it has any (tf.debugging.check_numerics).
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "dflow/framework/gradient.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/ops/cwise_ops.h"

namespace dflow {
namespace {

// The first `n` values of `t`, space-separated, "..." if there are more.
std::string Summarize(const Tensor& t, int64_t n) {
  std::string out;
  const int64_t total = t.NumElements();
  if (n < 0) n = total;  // Negative summarize: every value.
  for (int64_t i = 0; i < total && i < n; ++i) {
    if (i > 0) out += " ";
    out += t.dtype() == DT_STRING ? t.flat<std::string>()[i] : t.ValueString(i);
  }
  if (total > n) out += "...";
  return out;
}

class AssertOp : public OpKernel {
 public:
  explicit AssertOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("summarize", &summarize_).IgnoreError();
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& condition = ctx->input(0);
    if (condition.NumElements() != 1 || condition.dims() > 1) {  // A scalar, or TF's legacy [1].
      return ctx->InvalidArgument("In[0] should be a scalar: ", condition.shape().DebugString());
    }
    if (condition.flat<bool>()[0]) return absl::OkStatus();
    std::string message = "assertion failed: ";
    for (int i = 1; i < ctx->num_inputs(); ++i) {
      absl::StrAppend(&message, i > 1 ? " " : "", "[", Summarize(ctx->input(i), summarize_), "]");
    }
    return absl::InvalidArgumentError(message);
  }
  bool IsExpensive() const override { return false; }

 private:
  int64_t summarize_ = 3;
};

REGISTER_OP("Assert")
    .Input("condition: bool")
    .Input("data: T")
    .Attr("T: list(type) >= 1")
    .Attr("summarize: int = 3")
    .SetIsStateful()
    .SetShapeFn(NoOutputs);
REGISTER_KERNEL(KernelDefBuilder("Assert").Device(kDeviceCPU), AssertOp);
REGISTER_NO_GRADIENT("Assert");

template <typename T>
class CheckNumericsOp : public OpKernel {
 public:
  explicit CheckNumericsOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("message", &message_).IgnoreError();
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& t = ctx->input(0);
    bool nan = false, inf = false;
    for (const T v : t.flat<T>()) {
      nan |= std::isnan(v);
      inf |= std::isinf(v);
    }
    if (nan || inf) {
      return absl::InvalidArgumentError(absl::StrCat(
          message_, " : Tensor had ", nan && inf ? "Inf and NaN" : nan ? "NaN" : "Inf",
          " values"));
    }
    ctx->set_output(0, t);
    return absl::OkStatus();
  }

 private:
  std::string message_;
};

REGISTER_OP("CheckNumerics")
    .Input("tensor: T")
    .Output("output: T")
    .Attr("T: {float, double}")
    .Attr("message: string")
    .SetIsStateful()
    .SetShapeFn(UnchangedShape);
CpuKernels<CheckNumericsOp, float, double> check_numerics_kernels("CheckNumerics");

// The gradient is checked too, as TensorFlow does.
absl::Status CheckNumericsGrad(GradContext* g) {
  std::string message;
  RETURN_IF_ERROR(g->GetAttr("message", &message));
  g->SetInputGrad(0, g->b()->Op("CheckNumerics", {g->grad_output(0)},
                                {{"message", AttrString("Not a number (NaN) or infinity (Inf) "
                                                        "values detected in gradient. " +
                                                        message)}}));
  return absl::OkStatus();
}
REGISTER_GRADIENT("CheckNumerics", CheckNumericsGrad);

}  // namespace
}  // namespace dflow
