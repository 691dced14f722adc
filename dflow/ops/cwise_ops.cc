// Binary elementwise ops with numpy broadcasting: arithmetic (with DivNoNan
// and Pow), comparisons,
// logical ops, SelectV2 (three-way broadcasting) and AddN.
#include "dflow/ops/cwise_ops.h"

#include <cmath>
#include <string>
#include <type_traits>

#include "dflow/framework/op_def.h"
#include "dflow/framework/shape_inference.h"

namespace dflow {
namespace {

using Eigen::internal::scalar_cmp_op;

// --- functors ----------------------------------------------------------------

template <typename T>
using AddFn = Eigen::internal::scalar_sum_op<T, T>;
template <typename T>
using SubFn = Eigen::internal::scalar_difference_op<T, T>;
template <typename T>
using MulFn = Eigen::internal::scalar_product_op<T, T>;
template <typename T>
using DivFn = Eigen::internal::scalar_quotient_op<T, T>;
// TensorFlow's Maximum and Minimum return NaN when either operand is NaN.
template <typename T>
using MaxFn = Eigen::internal::scalar_max_op<T, T, Eigen::PropagateNaN>;
template <typename T>
using MinFn = Eigen::internal::scalar_min_op<T, T, Eigen::PropagateNaN>;
template <typename T>
using EqualFn = scalar_cmp_op<T, T, Eigen::internal::cmp_EQ>;
template <typename T>
using NotEqualFn = scalar_cmp_op<T, T, Eigen::internal::cmp_NEQ>;
template <typename T>
using GreaterFn = scalar_cmp_op<T, T, Eigen::internal::cmp_GT>;
template <typename T>
using LessFn = scalar_cmp_op<T, T, Eigen::internal::cmp_LT>;
template <typename T>
using GreaterEqualFn = scalar_cmp_op<T, T, Eigen::internal::cmp_GE>;
template <typename T>
using LessEqualFn = scalar_cmp_op<T, T, Eigen::internal::cmp_LE>;

// Python's //: rounds toward negative infinity. For integers the kernel has
// checked y != 0; INT_MIN // -1 wraps to INT_MIN as in TensorFlow.
template <typename T>
struct FloorDivFn {
  static constexpr bool kNeedsNonZeroDivisor = std::is_integral_v<T>;
  T operator()(const T& x, const T& y) const {
    if constexpr (std::is_floating_point_v<T>) {
      return std::floor(x / y);
    } else if constexpr (std::is_unsigned_v<T>) {
      return x / y;
    } else {
      using U = std::make_unsigned_t<T>;
      if (y == -1) return static_cast<T>(U(0) - static_cast<U>(x));
      const T q = x / y;
      return (x % y != 0 && ((x < 0) != (y < 0))) ? q - 1 : q;
    }
  }
};

// Python's %: the result has the sign of the divisor.
template <typename T>
struct FloorModFn {
  static constexpr bool kNeedsNonZeroDivisor = std::is_integral_v<T>;
  T operator()(const T& x, const T& y) const {
    if constexpr (std::is_unsigned_v<T>) {
      return x % y;
    } else {
      T r;
      if constexpr (std::is_floating_point_v<T>) {
        r = std::fmod(x, y);
      } else {
        r = y == -1 ? T(0) : x % y;
      }
      return (r != 0 && ((r < 0) != (y < 0))) ? r + y : r;
    }
  }
};

// x / y, and 0 where y is 0 (even for x = 0 or NaN): tf.math.divide_no_nan.
template <typename T>
struct DivNoNanFn {
  T operator()(const T& x, const T& y) const { return y == T(0) ? T(0) : x / y; }
};

template <typename T>
struct PowFn {
  T operator()(const T& x, const T& y) const { return std::pow(x, y); }
};

// x^y for integers y >= 0 by repeated squaring, wrapping on overflow as
// TensorFlow's does (the unsigned type makes the wrap defined behaviour).
template <typename T>
struct IntPowFn {
  T operator()(const T& x, const T& y) const {
    using U = std::make_unsigned_t<T>;
    U base = static_cast<U>(x), result = 1;
    for (T e = y; e > 0; e /= 2) {
      if (e % 2 != 0) result *= base;
      base *= base;
    }
    return static_cast<T>(result);
  }
};

// Integer Pow refuses negative exponents, with TensorFlow's message.
template <typename T>
class IntPowOp : public BinaryOpKernel<T, IntPowFn<T>> {
 public:
  using BinaryOpKernel<T, IntPowFn<T>>::BinaryOpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    for (const T& y : ctx->input(1).flat<T>()) {
      if (y < 0) return ctx->InvalidArgument("Integers to negative integer powers are not allowed");
    }
    return BinaryOpKernel<T, IntPowFn<T>>::Compute(ctx);
  }
};

template <typename T>
struct LogicalAndFn {
  bool operator()(const bool& x, const bool& y) const { return x && y; }
};
template <typename T>
struct LogicalOrFn {
  bool operator()(const bool& x, const bool& y) const { return x || y; }
};

// --- arithmetic --------------------------------------------------------------

REGISTER_OP("AddV2")
    .Input("x: T")
    .Input("y: T")
    .Output("z: T")
    .Attr("T: {float, double, int32, int64, uint8}")
    .SetShapeFn(BroadcastBinaryOpShape);
CpuKernels<BinaryKernel<AddFn>::For, float, double, int32_t, int64_t, uint8_t> add_v2_kernels(
    "AddV2");

// Add is AddV2 that also concatenates strings.
REGISTER_OP("Add")
    .Input("x: T")
    .Input("y: T")
    .Output("z: T")
    .Attr("T: {float, double, int32, int64, uint8, string}")
    .SetShapeFn(BroadcastBinaryOpShape);
CpuKernels<BinaryKernel<AddFn>::For, float, double, int32_t, int64_t, uint8_t, std::string>
    add_kernels("Add");

REGISTER_OP("Sub")
    .Input("x: T")
    .Input("y: T")
    .Output("z: T")
    .Attr("T: {float, double, int32, int64, uint8}")
    .SetShapeFn(BroadcastBinaryOpShape);
CpuKernels<BinaryKernel<SubFn>::For, float, double, int32_t, int64_t, uint8_t> sub_kernels("Sub");

REGISTER_OP("Mul")
    .Input("x: T")
    .Input("y: T")
    .Output("z: T")
    .Attr("T: {float, double, int32, int64, uint8}")
    .SetShapeFn(BroadcastBinaryOpShape);
CpuKernels<BinaryKernel<MulFn>::For, float, double, int32_t, int64_t, uint8_t> mul_kernels("Mul");

// As in TensorFlow, integer RealDiv is declared but has no CPU kernel (Python
// casts integers to floating point before dividing).
REGISTER_OP("RealDiv")
    .Input("x: T")
    .Input("y: T")
    .Output("z: T")
    .Attr("T: {float, double, int32, int64, uint8}")
    .SetShapeFn(BroadcastBinaryOpShape);
CpuKernels<BinaryKernel<DivFn>::For, float, double> real_div_kernels("RealDiv");

REGISTER_OP("DivNoNan")
    .Input("x: T")
    .Input("y: T")
    .Output("z: T")
    .Attr("T: {float, double}")
    .SetShapeFn(BroadcastBinaryOpShape);
CpuKernels<BinaryKernel<DivNoNanFn>::For, float, double> div_no_nan_kernels("DivNoNan");

REGISTER_OP("Pow")
    .Input("x: T")
    .Input("y: T")
    .Output("z: T")
    .Attr("T: {float, double, int32, int64}")
    .SetShapeFn(BroadcastBinaryOpShape);
CpuKernels<BinaryKernel<PowFn>::For, float, double> pow_kernels("Pow");
CpuKernels<IntPowOp, int32_t, int64_t> int_pow_kernels("Pow");

REGISTER_OP("FloorDiv")
    .Input("x: T")
    .Input("y: T")
    .Output("z: T")
    .Attr("T: {float, double, int32, int64, uint8}")
    .SetShapeFn(BroadcastBinaryOpShape);
CpuKernels<BinaryKernel<FloorDivFn>::For, float, double, int32_t, int64_t, uint8_t>
    floor_div_kernels("FloorDiv");

REGISTER_OP("FloorMod")
    .Input("x: T")
    .Input("y: T")
    .Output("z: T")
    .Attr("T: {float, double, int32, int64, uint8}")
    .SetShapeFn(BroadcastBinaryOpShape);
CpuKernels<BinaryKernel<FloorModFn>::For, float, double, int32_t, int64_t, uint8_t>
    floor_mod_kernels("FloorMod");

REGISTER_OP("Maximum")
    .Input("x: T")
    .Input("y: T")
    .Output("z: T")
    .Attr("T: {float, double, int32, int64, uint8}")
    .SetShapeFn(BroadcastBinaryOpShape);
CpuKernels<BinaryKernel<MaxFn>::For, float, double, int32_t, int64_t, uint8_t> maximum_kernels(
    "Maximum");

REGISTER_OP("Minimum")
    .Input("x: T")
    .Input("y: T")
    .Output("z: T")
    .Attr("T: {float, double, int32, int64, uint8}")
    .SetShapeFn(BroadcastBinaryOpShape);
CpuKernels<BinaryKernel<MinFn>::For, float, double, int32_t, int64_t, uint8_t> minimum_kernels(
    "Minimum");

// --- comparisons -------------------------------------------------------------

// Equal and NotEqual: with incompatible_shape_error = false, shapes that do
// not broadcast give a scalar (false for Equal, true for NotEqual).
template <typename T, typename F, bool kIncompatibleResult>
class EqualityOpKernel : public BinaryOpKernel<T, F> {
 public:
  explicit EqualityOpKernel(OpKernelConstruction* c) : BinaryOpKernel<T, F>(c) {
    c->GetAttr("incompatible_shape_error", &incompatible_shape_error_).IgnoreError();
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    if (!incompatible_shape_error_ &&
        !BroadcastTensorShapes(ctx->input(0).shape(), ctx->input(1).shape()).ok()) {
      ctx->allocate_output(0, TensorShape())->scalar<bool>() = kIncompatibleResult;
      return absl::OkStatus();
    }
    return BinaryOpKernel<T, F>::Compute(ctx);
  }

 private:
  bool incompatible_shape_error_ = true;
};

template <typename T>
using EqualKernel = EqualityOpKernel<T, EqualFn<T>, false>;
template <typename T>
using NotEqualKernel = EqualityOpKernel<T, NotEqualFn<T>, true>;

// Broadcast shape, or (without incompatible_shape_error) unknown when the
// inputs do not broadcast.
absl::Status EqualityShape(InferenceContext* c) {
  bool incompatible_shape_error = true;
  RETURN_IF_ERROR(c->GetAttr("incompatible_shape_error", &incompatible_shape_error));
  if (incompatible_shape_error) return BroadcastBinaryOpShape(c);
  absl::StatusOr<PartialShape> out = BroadcastShapes(c->input(0), c->input(1));
  c->set_output(0, out.ok() ? *out : PartialShape::Unknown());
  return absl::OkStatus();
}

REGISTER_OP("Equal")
    .Input("x: T")
    .Input("y: T")
    .Output("z: bool")
    .Attr("T: type")
    .Attr("incompatible_shape_error: bool = true")
    .SetShapeFn(EqualityShape);
CpuKernels<EqualKernel, float, double, int32_t, int64_t, uint8_t, bool, std::string> equal_kernels(
    "Equal");

REGISTER_OP("NotEqual")
    .Input("x: T")
    .Input("y: T")
    .Output("z: bool")
    .Attr("T: type")
    .Attr("incompatible_shape_error: bool = true")
    .SetShapeFn(EqualityShape);
CpuKernels<NotEqualKernel, float, double, int32_t, int64_t, uint8_t, bool, std::string>
    not_equal_kernels("NotEqual");

REGISTER_OP("Greater")
    .Input("x: T")
    .Input("y: T")
    .Output("z: bool")
    .Attr("T: {float, double, int32, int64, uint8}")
    .SetShapeFn(BroadcastBinaryOpShape);
CpuKernels<BinaryKernel<GreaterFn>::For, float, double, int32_t, int64_t, uint8_t> greater_kernels(
    "Greater");

REGISTER_OP("Less")
    .Input("x: T")
    .Input("y: T")
    .Output("z: bool")
    .Attr("T: {float, double, int32, int64, uint8}")
    .SetShapeFn(BroadcastBinaryOpShape);
CpuKernels<BinaryKernel<LessFn>::For, float, double, int32_t, int64_t, uint8_t> less_kernels(
    "Less");

REGISTER_OP("GreaterEqual")
    .Input("x: T")
    .Input("y: T")
    .Output("z: bool")
    .Attr("T: {float, double, int32, int64, uint8}")
    .SetShapeFn(BroadcastBinaryOpShape);
CpuKernels<BinaryKernel<GreaterEqualFn>::For, float, double, int32_t, int64_t, uint8_t>
    greater_equal_kernels("GreaterEqual");

REGISTER_OP("LessEqual")
    .Input("x: T")
    .Input("y: T")
    .Output("z: bool")
    .Attr("T: {float, double, int32, int64, uint8}")
    .SetShapeFn(BroadcastBinaryOpShape);
CpuKernels<BinaryKernel<LessEqualFn>::For, float, double, int32_t, int64_t, uint8_t>
    less_equal_kernels("LessEqual");

// --- logical -----------------------------------------------------------------

REGISTER_OP("LogicalAnd")
    .Input("x: bool")
    .Input("y: bool")
    .Output("z: bool")
    .SetShapeFn(BroadcastBinaryOpShape);
REGISTER_KERNEL(KernelDefBuilder("LogicalAnd").Device(kDeviceCPU),
                BinaryOpKernel<bool, LogicalAndFn<bool>>);

// TensorFlow's ClipByValue gradient uses it.
REGISTER_OP("LogicalOr")
    .Input("x: bool")
    .Input("y: bool")
    .Output("z: bool")
    .SetShapeFn(BroadcastBinaryOpShape);
REGISTER_KERNEL(KernelDefBuilder("LogicalOr").Device(kDeviceCPU),
                BinaryOpKernel<bool, LogicalOrFn<bool>>);

// --- SelectV2 ----------------------------------------------------------------

std::string SelectShapesMessage(const std::string& c, const std::string& t, const std::string& e) {
  return absl::StrCat("condition ", c, ", then ", t, ", and else ", e, " must be broadcastable");
}

// out[i] = cond[i] ? t[i] : e[i], each input stepping by its own stride (0 or 1).
template <typename T>
void SelectRun(const bool* cond, int64_t sc, const T* t, int64_t st, const T* e, int64_t se, T* out,
               int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = cond[i * sc] ? t[i * st] : e[i * se];
}

template <typename T>
class SelectV2Op : public OpKernel {
 public:
  explicit SelectV2Op(OpKernelConstruction* c) : OpKernel(c) {}

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& cond = ctx->input(0);
    const Tensor& t = ctx->input(1);
    const Tensor& e = ctx->input(2);
    absl::StatusOr<BroadcastPlan> plan = BroadcastPlan::Make({cond.shape(), t.shape(), e.shape()});
    if (!plan.ok()) {
      return ctx->InvalidArgument(SelectShapesMessage(
          cond.shape().DebugString(), t.shape().DebugString(), e.shape().DebugString()));
    }
    Tensor* out = ctx->allocate_output(0, plan->output_shape());
    const bool* c = cond.flat<bool>().data();
    const T* tv = t.flat<T>().data();
    const T* ev = e.flat<T>().data();
    T* o = out->flat<T>().data();
    if (plan->IsFull(0) && plan->IsFull(1) && plan->IsFull(2)) {
      ParallelForElements(ctx, plan->num_elements(), 2, [&](int64_t b, int64_t end) {
        SelectRun<T>(c + b, 1, tv + b, 1, ev + b, 1, o + b, end - b);
      });
      return absl::OkStatus();
    }
    const int64_t inner = plan->inner_size();
    ParallelForUnits(
        ctx->intra_op_pool(), plan->num_rows(), 2 * inner, [&](int64_t r0, int64_t r1) {
          plan->ForEachRow(r0, r1, [&](int64_t row, const int64_t* off) {
            SelectRun<T>(c + off[0], plan->inner_stride(0), tv + off[1], plan->inner_stride(1),
                         ev + off[2], plan->inner_stride(2), o + row * inner, inner);
          });
        });
    return absl::OkStatus();
  }
};

absl::Status SelectV2Shape(InferenceContext* c) {
  absl::StatusOr<PartialShape> ct = BroadcastShapes(c->input(0), c->input(1));
  absl::StatusOr<PartialShape> out = ct.ok() ? BroadcastShapes(*ct, c->input(2)) : ct.status();
  if (!out.ok()) {
    return c->Error(SelectShapesMessage(c->input(0).DebugString(), c->input(1).DebugString(),
                                        c->input(2).DebugString()));
  }
  c->set_output(0, *out);
  return absl::OkStatus();
}

REGISTER_OP("SelectV2")
    .Input("condition: bool")
    .Input("t: T")
    .Input("e: T")
    .Output("output: T")
    .Attr("T: type")
    .SetShapeFn(SelectV2Shape);
CpuKernels<SelectV2Op, float, double, int32_t, int64_t, uint8_t, bool, std::string>
    select_v2_kernels("SelectV2");

// --- int32 on a GPU -----------------------------------------------------------
// Every argument in host memory (GpuInt32HostKernel): the CPU kernels above,
// as TensorFlow's int32 arithmetic and comparisons on a GPU; SelectV2 too
// here, so that the shape arithmetic of a gradient (grad_util.cc) stays in
// host memory on the GPU's device.

const GpuInt32HostKernel<BinaryKernel<AddFn>::For> gpu_add_v2("AddV2", {"x", "y", "z"});
const GpuInt32HostKernel<BinaryKernel<AddFn>::For> gpu_add("Add", {"x", "y", "z"});
const GpuInt32HostKernel<BinaryKernel<SubFn>::For> gpu_sub("Sub", {"x", "y", "z"});
const GpuInt32HostKernel<BinaryKernel<MulFn>::For> gpu_mul("Mul", {"x", "y", "z"});
const GpuInt32HostKernel<BinaryKernel<FloorDivFn>::For> gpu_floor_div("FloorDiv",
                                                                      {"x", "y", "z"});
const GpuInt32HostKernel<BinaryKernel<FloorModFn>::For> gpu_floor_mod("FloorMod",
                                                                      {"x", "y", "z"});
const GpuInt32HostKernel<BinaryKernel<MaxFn>::For> gpu_maximum("Maximum", {"x", "y", "z"});
const GpuInt32HostKernel<BinaryKernel<MinFn>::For> gpu_minimum("Minimum", {"x", "y", "z"});
const GpuInt32HostKernel<BinaryKernel<GreaterFn>::For> gpu_greater("Greater", {"x", "y", "z"});
const GpuInt32HostKernel<BinaryKernel<LessFn>::For> gpu_less("Less", {"x", "y", "z"});
const GpuInt32HostKernel<BinaryKernel<GreaterEqualFn>::For> gpu_greater_equal("GreaterEqual",
                                                                              {"x", "y", "z"});
const GpuInt32HostKernel<BinaryKernel<LessEqualFn>::For> gpu_less_equal("LessEqual",
                                                                        {"x", "y", "z"});
const GpuInt32HostKernel<EqualKernel> gpu_equal("Equal", {"x", "y", "z"});
const GpuInt32HostKernel<NotEqualKernel> gpu_not_equal("NotEqual", {"x", "y", "z"});
const GpuInt32HostKernel<SelectV2Op> gpu_select_v2("SelectV2",
                                                   {"condition", "t", "e", "output"});

// --- AddN --------------------------------------------------------------------

// Elements per step of AddN's accumulation: the output block stays in L1
// while every input's block is added to it, so memory is read once.
constexpr int64_t kAddNBlock = 2048;

template <typename T>
class AddNOp : public OpKernel {
 public:
  explicit AddNOp(OpKernelConstruction* c) : OpKernel(c) {}

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& first = ctx->input(0);
    for (int i = 1; i < ctx->num_inputs(); ++i) {
      if (ctx->input(i).shape() != first.shape()) {
        return ctx->InvalidArgument("inputs must have the same shape: input 0 ",
                                    first.shape().DebugString(), " != input ", i, " ",
                                    ctx->input(i).shape().DebugString());
      }
    }
    if (ctx->num_inputs() == 1) {
      ctx->set_output(0, first);
      return absl::OkStatus();
    }
    Tensor* out = ctx->allocate_output(0, first.shape());
    T* o = out->flat<T>().data();
    ParallelForElements(ctx, first.NumElements(), ctx->num_inputs(), [&](int64_t b, int64_t e) {
      for (int64_t s = b; s < e; s += kAddNBlock) {
        AddBlock(ctx, o + s, s, std::min(kAddNBlock, e - s));
      }
    });
    return absl::OkStatus();
  }

 private:
  // out[0, n) = sum over inputs of input[offset, offset + n).
  static void AddBlock(OpKernelContext* ctx, T* out, int64_t offset, int64_t n) {
    auto in = [&](int i) { return EigenView<T>(ctx->input(i).flat<T>().data() + offset, n); };
    auto o = EigenView<T>(out, n);
    o = in(0) + in(1);
    for (int i = 2; i < ctx->num_inputs(); ++i) o += in(i);
  }
};

absl::Status AddNShape(InferenceContext* c) {
  PartialShape merged = c->input(0);
  for (int i = 1; i < c->num_inputs(); ++i) {
    absl::StatusOr<PartialShape> m = PartialShape::Merge(merged, c->input(i));
    if (!m.ok()) {
      return c->Error(absl::StrCat("inputs must have the same shape: input 0 ",
                                   c->input(0).DebugString(), " != input ", i, " ",
                                   c->input(i).DebugString()));
    }
    merged = *m;
  }
  c->set_output(0, merged);
  return absl::OkStatus();
}

REGISTER_OP("AddN")
    .Input("inputs: N * T")
    .Output("sum: T")
    .Attr("N: int >= 1")
    .Attr("T: {float, double, int32, int64, uint8, variant}")  // Variant: list_ops.cc.
    .SetShapeFn(AddNShape);
CpuKernels<AddNOp, float, double, int32_t, int64_t, uint8_t> add_n_kernels("AddN");

}  // namespace
}  // namespace dflow
