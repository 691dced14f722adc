// Small graph-building helpers shared by the gradient functions
// (math_grad.cc, array_grad.cc, nn_grad.cc). Each adds ops through the
// context's GradBuilder; shapes are computed in the graph (Shape,
// BroadcastGradientArgs, ...) so gradients work for unknown shapes too.
#ifndef DFLOW_OPS_GRAD_UTIL_H_
#define DFLOW_OPS_GRAD_UTIL_H_

#include <cstdint>
#include <vector>

#include "dflow/framework/gradient.h"

namespace dflow::grad {

// An int32 vector constant.
SymTensor IntVec(GradBuilder* b, const std::vector<int32_t>& values);
// An int32 scalar constant.
SymTensor Int(GradBuilder* b, int32_t value);
// `t` as int32 (a Cast when it is int64).
SymTensor ToInt32(GradBuilder* b, const SymTensor& t);
// Shape(x) as an int32 vector.
SymTensor ShapeOf(GradBuilder* b, const SymTensor& x);

// Sums `grad` (of a broadcast result) over the axes where an operand of
// shape `shape` was broadcast against one of shape `other`, then reshapes it
// to `shape`.
SymTensor SumToShape(GradBuilder* b, const SymTensor& grad, const SymTensor& shape,
                     const SymTensor& other);

// Sets the gradients of a binary broadcasting op: `gx` and `gy` are
// gradients of the (broadcast) output, each summed back to its input's shape.
void SetBroadcastGrads(GradContext* g, const SymTensor& gx, const SymTensor& gy);

// The shape of a reduction's output with keep_dims: `input_shape` with 1 at
// every axis in `axes` (int32 or int64, negative allowed).
SymTensor ReducedShape(GradBuilder* b, const SymTensor& input_shape, const SymTensor& axes);

// Repeats `grad` (already reshaped to ReducedShape) to `input_shape`.
SymTensor TileToShape(GradBuilder* b, const SymTensor& grad, const SymTensor& kept_shape,
                      const SymTensor& input_shape);

}  // namespace dflow::grad

#endif  // DFLOW_OPS_GRAD_UTIL_H_
