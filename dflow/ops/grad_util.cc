#include "dflow/ops/grad_util.h"

namespace dflow::grad {

SymTensor IntVec(GradBuilder* b, const std::vector<int32_t>& values) {
  return b->Const(Tensor::Vec<int32_t>(values));
}

SymTensor Int(GradBuilder* b, int32_t value) { return b->Const(Tensor::Scalar<int32_t>(value)); }

SymTensor ToInt32(GradBuilder* b, const SymTensor& t) {
  if (t.dtype == DT_INT32) return t;
  return b->Op("Cast", {t}, {{"DstT", AttrType(DT_INT32)}});
}

SymTensor ShapeOf(GradBuilder* b, const SymTensor& x) {
  return b->Op("Shape", {x}, {{"out_type", AttrType(DT_INT32)}});
}

SymTensor SumToShape(GradBuilder* b, const SymTensor& grad, const SymTensor& shape,
                     const SymTensor& other) {
  std::vector<SymTensor> r = b->OpN("BroadcastGradientArgs", {{shape}, {other}}, {});
  if (r.size() != 2) return SymTensor();
  return b->Op("Reshape", {b->Op("Sum", {grad, r[0]}), shape});
}

void SetBroadcastGrads(GradContext* g, const SymTensor& gx, const SymTensor& gy) {
  GradBuilder* b = g->b();
  const SymTensor sx = ShapeOf(b, g->input(0));
  const SymTensor sy = ShapeOf(b, g->input(1));
  std::vector<SymTensor> r = b->OpN("BroadcastGradientArgs", {{sx}, {sy}}, {});
  if (r.size() != 2) return;  // The builder holds the error.
  g->SetInputGrad(0, b->Op("Reshape", {b->Op("Sum", {gx, r[0]}), sx}));
  g->SetInputGrad(1, b->Op("Reshape", {b->Op("Sum", {gy, r[1]}), sy}));
}

SymTensor ReducedShape(GradBuilder* b, const SymTensor& input_shape, const SymTensor& axes) {
  // Count how often each axis is reduced (UnsortedSegmentSum over the
  // canonical axes), then put 1 wherever the count is positive.
  const SymTensor rank = b->Op("Size", {input_shape}, {{"out_type", AttrType(DT_INT32)}});
  const SymTensor flat = b->Op("Reshape", {ToInt32(b, axes), IntVec(b, {-1})});
  const SymTensor canonical = b->Op("FloorMod", {flat, rank});
  const SymTensor counts =
      b->Op("UnsortedSegmentSum", {b->Op("OnesLike", {canonical}), canonical, rank});
  const SymTensor reduced = b->Op("Greater", {counts, Int(b, 0)});
  return b->Op("SelectV2", {reduced, b->Op("OnesLike", {input_shape}), input_shape});
}

SymTensor TileToShape(GradBuilder* b, const SymTensor& grad, const SymTensor& kept_shape,
                      const SymTensor& input_shape) {
  // Maximum(.., 1) keeps 0/0 out of empty dimensions.
  const SymTensor multiples =
      b->Op("FloorDiv", {input_shape, b->Op("Maximum", {kept_shape, Int(b, 1)})});
  return b->Op("Tile", {grad, multiples});
}

}  // namespace dflow::grad
