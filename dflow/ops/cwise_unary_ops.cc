// Unary elementwise ops: Neg, Abs, Square, Sqrt, Rsqrt, Exp, Log, Tanh,
// Sigmoid, LogicalNot.
#include <cstdint>

#include "dflow/framework/op_def.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/ops/cwise_ops.h"

namespace dflow {
namespace {

template <typename T>
using NegFn = Eigen::internal::scalar_opposite_op<T>;
template <typename T>
using AbsFn = Eigen::internal::scalar_abs_op<T>;
template <typename T>
using SquareFn = Eigen::internal::scalar_square_op<T>;
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

REGISTER_OP("Sigmoid")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {float, double}")
    .SetShapeFn(UnchangedShape);
CpuKernels<UnaryKernel<SigmoidFn>::For, float, double> sigmoid_kernels("Sigmoid");

REGISTER_OP("LogicalNot").Input("x: bool").Output("y: bool").SetShapeFn(UnchangedShape);
REGISTER_KERNEL(KernelDefBuilder("LogicalNot").Device(kDeviceCPU),
                UnaryOpKernel<bool, Eigen::internal::scalar_boolean_not_op<bool>>);

}  // namespace
}  // namespace dflow
