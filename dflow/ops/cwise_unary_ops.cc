// Unary elementwise ops: Neg, Abs, Square, Sqrt, Rsqrt, Exp, Log, Tanh,
// Sigmoid, Reciprocal, Floor, Ceil, Round, Log1p, Expm1, Sin, Cos, LogicalNot.
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "dflow/framework/op_def.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/ops/cwise_ops.h"

namespace dflow {
namespace {

template <typename T>
using NegFn = Eigen::internal::scalar_opposite_op<T>;
template <typename T>
using AbsFn = Eigen::internal::scalar_abs_op<T>;
// Integers square with two's-complement wrap-around, as TensorFlow's do
// (tf.square(46341) is -2147479015), computed unsigned: signed overflow is UB.
template <typename T>
struct WrappingSquare {
  T operator()(const T& x) const {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(x) * static_cast<U>(x)));
  }
};
template <typename T>
using SquareFn = std::conditional_t<std::is_integral_v<T>, WrappingSquare<T>,
                                    Eigen::internal::scalar_square_op<T>>;
template <typename T>
using SqrtFn = Eigen::internal::scalar_sqrt_op<T>;
template <typename T>
using RsqrtFn = Eigen::internal::scalar_rsqrt_op<T>;
template <typename T>
using ExpFn = Eigen::internal::scalar_exp_op<T>;
template <typename T>
using LogFn = Eigen::internal::scalar_log_op<T>;
template <typename T>
using TanhFn = Eigen::internal::scalar_tanh_op<T>;
template <typename T>
using SigmoidFn = Eigen::internal::scalar_logistic_op<T>;
template <typename T>
using ReciprocalFn = Eigen::internal::scalar_inverse_op<T>;
template <typename T>
using FloorFn = Eigen::internal::scalar_floor_op<T>;
template <typename T>
using CeilFn = Eigen::internal::scalar_ceil_op<T>;
template <typename T>
using Log1pFn = Eigen::internal::scalar_log1p_op<T>;
template <typename T>
using Expm1Fn = Eigen::internal::scalar_expm1_op<T>;
template <typename T>
using SinFn = Eigen::internal::scalar_sin_op<T>;
template <typename T>
using CosFn = Eigen::internal::scalar_cos_op<T>;

// TensorFlow's Round: halves go to the even neighbour (banker's rounding);
// integers are already round.
template <typename T>
struct RoundHalfToEvenFn {
  T operator()(const T& x) const {
    if constexpr (std::is_floating_point_v<T>) {
      return std::nearbyint(x);  // The default rounding mode: to nearest, ties to even.
    } else {
      return x;
    }
  }
};

REGISTER_OP("Neg")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {float, double, int32, int64}")
    .SetShapeFn(UnchangedShape);
CpuKernels<UnaryKernel<NegFn>::For, float, double, int32_t, int64_t> neg_kernels("Neg");

REGISTER_OP("Abs")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {float, double, int32, int64}")
    .SetShapeFn(UnchangedShape);
CpuKernels<UnaryKernel<AbsFn>::For, float, double, int32_t, int64_t> abs_kernels("Abs");

REGISTER_OP("Square")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {float, double, int32, int64, uint8}")
    .SetShapeFn(UnchangedShape);
CpuKernels<UnaryKernel<SquareFn>::For, float, double, int32_t, int64_t, uint8_t> square_kernels(
    "Square");

REGISTER_OP("Sqrt")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {float, double}")
    .SetShapeFn(UnchangedShape);
CpuKernels<UnaryKernel<SqrtFn>::For, float, double> sqrt_kernels("Sqrt");

REGISTER_OP("Rsqrt")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {float, double}")
    .SetShapeFn(UnchangedShape);
CpuKernels<UnaryKernel<RsqrtFn>::For, float, double> rsqrt_kernels("Rsqrt");

REGISTER_OP("Exp")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {float, double}")
    .SetShapeFn(UnchangedShape);
CpuKernels<UnaryKernel<ExpFn>::For, float, double> exp_kernels("Exp");

REGISTER_OP("Log")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {float, double}")
    .SetShapeFn(UnchangedShape);
CpuKernels<UnaryKernel<LogFn>::For, float, double> log_kernels("Log");

REGISTER_OP("Tanh")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {float, double}")
    .SetShapeFn(UnchangedShape);
CpuKernels<UnaryKernel<TanhFn>::For, float, double> tanh_kernels("Tanh");

REGISTER_OP("Sin")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {float, double}")
    .SetShapeFn(UnchangedShape);
CpuKernels<UnaryKernel<SinFn>::For, float, double> sin_kernels("Sin");

REGISTER_OP("Cos")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {float, double}")
    .SetShapeFn(UnchangedShape);
CpuKernels<UnaryKernel<CosFn>::For, float, double> cos_kernels("Cos");

REGISTER_OP("Sigmoid")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {float, double}")
    .SetShapeFn(UnchangedShape);
CpuKernels<UnaryKernel<SigmoidFn>::For, float, double> sigmoid_kernels("Sigmoid");

// As in TensorFlow, integer Reciprocal is declared but has no CPU kernel
// (1 / 0 would trap).
REGISTER_OP("Reciprocal")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {float, double, int32, int64}")
    .SetShapeFn(UnchangedShape);
CpuKernels<UnaryKernel<ReciprocalFn>::For, float, double> reciprocal_kernels("Reciprocal");

REGISTER_OP("Floor")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {float, double}")
    .SetShapeFn(UnchangedShape);
CpuKernels<UnaryKernel<FloorFn>::For, float, double> floor_kernels("Floor");

REGISTER_OP("Ceil")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {float, double}")
    .SetShapeFn(UnchangedShape);
CpuKernels<UnaryKernel<CeilFn>::For, float, double> ceil_kernels("Ceil");

REGISTER_OP("Round")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {float, double, int32, int64}")
    .SetShapeFn(UnchangedShape);
CpuKernels<UnaryKernel<RoundHalfToEvenFn>::For, float, double, int32_t, int64_t> round_kernels(
    "Round");

REGISTER_OP("Log1p")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {float, double}")
    .SetShapeFn(UnchangedShape);
CpuKernels<UnaryKernel<Log1pFn>::For, float, double> log1p_kernels("Log1p");

REGISTER_OP("Expm1")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {float, double}")
    .SetShapeFn(UnchangedShape);
CpuKernels<UnaryKernel<Expm1Fn>::For, float, double> expm1_kernels("Expm1");

REGISTER_OP("LogicalNot").Input("x: bool").Output("y: bool").SetShapeFn(UnchangedShape);
REGISTER_KERNEL(KernelDefBuilder("LogicalNot").Device(kDeviceCPU),
                UnaryOpKernel<bool, Eigen::internal::scalar_boolean_not_op<bool>>);

}  // namespace
}  // namespace dflow
