// Ops that exist for the gradients of the math ops (math_grad.cc):
// BroadcastGradientArgs (which axes a broadcast input must be summed over),
// the elementwise backprops SqrtGrad, RsqrtGrad, TanhGrad, SigmoidGrad and
// ReciprocalGrad (inputs y = the forward output and dy). UnsortedSegmentSum
// (the dense gradient of a gather) is in segment_ops.cc.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/ops/array_util.h"
#include "dflow/ops/cwise_ops.h"
#include "dflow/ops/eigen_util.h"

namespace dflow {
namespace {

// --- BroadcastGradientArgs ---------------------------------------------------

// The output axes over which each of two inputs (of shapes s0, s1) was
// broadcast, as TensorFlow's BCast computes them: identical shapes need no
// reduction; otherwise every axis where an input is 1 (or absent) is listed.
absl::Status ReductionAxes(const std::vector<int64_t>& s0, const std::vector<int64_t>& s1,
                           std::vector<int64_t>* r0, std::vector<int64_t>* r1) {
  if (s0 == s1) return absl::OkStatus();
  const size_t rank = std::max(s0.size(), s1.size());
  for (size_t i = 0; i < rank; ++i) {
    const size_t pad0 = rank - s0.size(), pad1 = rank - s1.size();
    const int64_t a = i < pad0 ? 1 : s0[i - pad0];
    const int64_t b = i < pad1 ? 1 : s1[i - pad1];
    if (a < 0 || b < 0 || (a != b && a != 1 && b != 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("Incompatible shapes: ", DimsString(s0), " vs. ", DimsString(s1)));
    }
    if (a == 1) r0->push_back(static_cast<int64_t>(i));
    if (b == 1) r1->push_back(static_cast<int64_t>(i));
  }
  return absl::OkStatus();
}

class BroadcastGradientArgsOp : public OpKernel {
 public:
  explicit BroadcastGradientArgsOp(OpKernelConstruction* c) : OpKernel(c) {}
  bool IsExpensive() const override { return false; }

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& t0 = ctx->input(0);
    const Tensor& t1 = ctx->input(1);
    if (t0.dims() != 1 || t1.dims() != 1) {
      return ctx->InvalidArgument("s0 and s1 must be vectors, got shapes ",
                                  t0.shape().DebugString(), " and ", t1.shape().DebugString());
    }
    auto s0 = IndexValues(t0, "s0");
    if (!s0.ok()) return ctx->InvalidArgument(s0.status().message());
    auto s1 = IndexValues(t1, "s1");
    if (!s1.ok()) return ctx->InvalidArgument(s1.status().message());
    std::vector<int64_t> r0, r1;
    absl::Status s = ReductionAxes(*s0, *s1, &r0, &r1);
    if (!s.ok()) return ctx->InvalidArgument(s.message());
    SetIndexOutput(ctx, 0, r0);
    SetIndexOutput(ctx, 1, r1);
    return absl::OkStatus();
  }

 private:
  void SetIndexOutput(OpKernelContext* ctx, int i, const std::vector<int64_t>& v) {
    Tensor* out = ctx->allocate_output(i, TensorShape({static_cast<int64_t>(v.size())}));
    for (size_t k = 0; k < v.size(); ++k) {
      if (output_type(i) == DT_INT32) {
        out->flat<int32_t>()[k] = static_cast<int32_t>(v[k]);
      } else {
        out->flat<int64_t>()[k] = v[k];
      }
    }
  }
};

absl::Status BroadcastGradientArgsShape(InferenceContext* c) {
  PartialShape s;
  RETURN_IF_ERROR(c->WithRank(c->input(0), 1, &s));
  RETURN_IF_ERROR(c->WithRank(c->input(1), 1, &s));
  c->set_output(0, PartialShape({kUnknownDim}));
  c->set_output(1, PartialShape({kUnknownDim}));
  return absl::OkStatus();
}

REGISTER_OP("BroadcastGradientArgs")
    .Input("s0: T")
    .Input("s1: T")
    .Output("r0: T")
    .Output("r1: T")
    .Attr("T: {int32, int64} = DT_INT32")
    .SetShapeFn(BroadcastGradientArgsShape);
// All of it is host memory: a GPU runs the same kernel.
KernelDefBuilder BroadcastGradientArgsKernel(const char* device) {
  return KernelDefBuilder("BroadcastGradientArgs")
      .Device(device)
      .TypeConstraint("T", {DT_INT32, DT_INT64})
      .HostMemory("s0")
      .HostMemory("s1")
      .HostMemory("r0")
      .HostMemory("r1");
}
REGISTER_KERNEL(BroadcastGradientArgsKernel(kDeviceCPU), BroadcastGradientArgsOp);
REGISTER_KERNEL(BroadcastGradientArgsKernel(kDeviceGPU), BroadcastGradientArgsOp);

// --- elementwise backprops: z = F(y, dy) -------------------------------------

template <typename T>
struct SqrtGradFn {  // d sqrt(x) = dy / (2 y)
  T operator()(T y, T dy) const { return dy * T(0.5) / y; }
};
template <typename T>
struct RsqrtGradFn {  // d x^-1/2 = -dy y^3 / 2
  T operator()(T y, T dy) const { return dy * T(-0.5) * y * y * y; }
};
template <typename T>
struct TanhGradFn {  // d tanh(x) = dy (1 - y^2)
  T operator()(T y, T dy) const { return dy * (T(1) - y * y); }
};
template <typename T>
struct SigmoidGradFn {  // d sigmoid(x) = dy y (1 - y)
  T operator()(T y, T dy) const { return dy * y * (T(1) - y); }
};

template <typename T>
struct ReciprocalGradFn {  // d 1/x = -dy y^2
  T operator()(T y, T dy) const { return -dy * y * y; }
};

template <typename T, template <typename> class F>
class UnaryGradOp : public OpKernel {
 public:
  explicit UnaryGradOp(OpKernelConstruction* c) : OpKernel(c) {}

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& y = ctx->input(0);
    const Tensor& dy = ctx->input(1);
    if (y.shape() != dy.shape()) {
      return ctx->InvalidArgument("y and dy have different shapes: y=", y.shape().DebugString(),
                                  " dy=", dy.shape().DebugString());
    }
    Tensor* z = ctx->allocate_output(0, y.shape());
    const T* yv = y.flat<T>().data();
    const T* dyv = dy.flat<T>().data();
    T* zv = z->flat<T>().data();
    ParallelForElements(ctx, y.NumElements(), 4, [&](int64_t b, int64_t e) {
      const F<T> f;
      for (int64_t i = b; i < e; ++i) zv[i] = f(yv[i], dyv[i]);
    });
    return absl::OkStatus();
  }
};

template <template <typename> class F>
struct UnaryGrad {
  template <typename T>
  using For = UnaryGradOp<T, F>;
};

absl::Status SameShapePair(InferenceContext* c) {
  ASSIGN_OR_RETURN(PartialShape merged, PartialShape::Merge(c->input(0), c->input(1)));
  c->set_output(0, merged);
  return absl::OkStatus();
}

OpDefBuilder UnaryGradOpDef(const std::string& name) {
  return OpDefBuilder(name)
      .Input("y: T")
      .Input("dy: T")
      .Output("z: T")
      .Attr("T: {float, double}")
      .SetShapeFn(SameShapePair);
}

const OpDefBuilderReceiver sqrt_grad_op = UnaryGradOpDef("SqrtGrad");
const CpuKernels<UnaryGrad<SqrtGradFn>::For, float, double> sqrt_grad_kernels("SqrtGrad");
const OpDefBuilderReceiver rsqrt_grad_op = UnaryGradOpDef("RsqrtGrad");
const CpuKernels<UnaryGrad<RsqrtGradFn>::For, float, double> rsqrt_grad_kernels("RsqrtGrad");
const OpDefBuilderReceiver tanh_grad_op = UnaryGradOpDef("TanhGrad");
const CpuKernels<UnaryGrad<TanhGradFn>::For, float, double> tanh_grad_kernels("TanhGrad");
const OpDefBuilderReceiver sigmoid_grad_op = UnaryGradOpDef("SigmoidGrad");
const CpuKernels<UnaryGrad<SigmoidGradFn>::For, float, double> sigmoid_grad_kernels("SigmoidGrad");
const OpDefBuilderReceiver reciprocal_grad_op = UnaryGradOpDef("ReciprocalGrad");
const CpuKernels<UnaryGrad<ReciprocalGradFn>::For, float, double> reciprocal_grad_kernels(
    "ReciprocalGrad");

}  // namespace
}  // namespace dflow
