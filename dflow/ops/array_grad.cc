// Gradient functions of the array ops (array_ops.cc, shape_ops.cc,
// slice_ops.cc, gather_ops.cc, transpose_ops.cc, variable_ops.cc, split_ops.cc,
// layout_ops.cc), following TensorFlow's array_grad. Shape and index inputs get no gradient.
#include <string>
#include <vector>

#include "dflow/framework/gradient.h"
#include "dflow/ops/grad_util.h"

namespace dflow {
namespace {

using grad::Int;
using grad::IntVec;
using grad::ShapeOf;
using grad::ToInt32;

// Ops whose input 0 gets the output gradient unchanged.
absl::Status PassThroughGrad(GradContext* g) {
  g->SetInputGrad(0, g->grad_output(0));
  return absl::OkStatus();
}

absl::Status IdentityNGrad(GradContext* g) {
  for (int i = 0; i < g->num_outputs(); ++i) {
    if (g->has_grad_output(i)) g->SetInputGrad(i, g->grad_output(i));
  }
  return absl::OkStatus();
}

// Reshape, ExpandDims, Squeeze: the gradient takes the input's shape back.
absl::Status ReshapeLikeInputGrad(GradContext* g) {
  GradBuilder* b = g->b();
  g->SetInputGrad(0, b->Op("Reshape", {g->grad_output(0), ShapeOf(b, g->input(0))}));
  return absl::OkStatus();
}

absl::Status TransposeGrad(GradContext* g) {
  GradBuilder* b = g->b();
  const SymTensor inverse = b->Op("InvertPermutation", {g->input(1)});
  g->SetInputGrad(0, b->Op("Transpose", {g->grad_output(0), inverse}));
  return absl::OkStatus();
}

// Input i of Pack is slice i of the output along `axis`.
absl::Status PackGrad(GradContext* g) {
  int64_t axis = 0;
  RETURN_IF_ERROR(g->GetAttr("axis", &axis));
  GradBuilder* b = g->b();
  const SymTensor dy = g->grad_output(0);
  const SymTensor axis_t = Int(b, static_cast<int32_t>(axis));
  for (int i = 0; i < g->num_inputs(); ++i) {
    g->SetInputGrad(i, b->Op("GatherV2", {dy, Int(b, i), axis_t}));
  }
  return absl::OkStatus();
}

// Input i is the slice of the output at ConcatOffset i, of input i's shape.
absl::Status ConcatV2Grad(GradContext* g) {
  GradBuilder* b = g->b();
  const int n = g->num_inputs() - 1;
  std::vector<SymTensor> shapes;
  for (int i = 0; i < n; ++i) shapes.push_back(ShapeOf(b, g->input(i)));
  const SymTensor axis = ToInt32(b, g->input(n));
  std::vector<SymTensor> offsets = b->OpN("ConcatOffset", {{axis}, shapes}, {});
  if (static_cast<int>(offsets.size()) != n) return b->status();
  for (int i = 0; i < n; ++i) {
    g->SetInputGrad(i, b->Op("Slice", {g->grad_output(0), offsets[i], shapes[i]}));
  }
  return absl::OkStatus();
}

// The gradient padded with zeros back to the input's shape.
absl::Status SliceGrad(GradContext* g) {
  GradBuilder* b = g->b();
  const SymTensor begin = g->input(1);
  const AttrList index_type = {{"out_type", AttrType(begin.dtype)}};
  const SymTensor in_shape = b->Op("Shape", {g->input(0)}, index_type);
  const SymTensor out_shape = b->Op("Shape", {g->output(0)}, index_type);
  const SymTensor after = b->Op("Sub", {b->Op("Sub", {in_shape, out_shape}), begin});
  const SymTensor column = IntVec(b, {-1, 1});
  std::vector<SymTensor> pads = b->OpN(
      "ConcatV2",
      {{b->Op("Reshape", {begin, column}), b->Op("Reshape", {after, column})}, {Int(b, 1)}}, {});
  if (pads.empty()) return b->status();
  g->SetInputGrad(0, b->Op("Pad", {g->grad_output(0), pads[0]}));
  return absl::OkStatus();
}

// Dense gradient of a gather along `axis_in` (an int32/int64 scalar): the
// output gradient, moved so the gathered axis comes first, summed into the
// rows it was gathered from (UnsortedSegmentSum), then moved back.
absl::Status GatherGradAlong(GradContext* g, const SymTensor& axis_in) {
  GradBuilder* b = g->b();
  const SymTensor params_shape = ShapeOf(b, g->input(0));
  const SymTensor indices = g->input(1);
  const SymTensor rank = b->Op("Rank", {g->input(0)});
  const SymTensor axis = b->Op("FloorMod", {ToInt32(b, axis_in), rank});
  const SymTensor axis_vec = b->Op("Reshape", {axis, IntVec(b, {1})});
  const SymTensor after_axis = b->Op("AddV2", {axis, Int(b, 1)});
  const SymTensor outer = b->Op("Slice", {params_shape, IntVec(b, {0}), axis_vec});
  const SymTensor inner = b->Op(
      "Slice", {params_shape, b->Op("Reshape", {after_axis, IntVec(b, {1})}), IntVec(b, {-1})});
  const SymTensor num_indices = b->Op(
      "Reshape", {b->Op("Size", {indices}, {{"out_type", AttrType(DT_INT32)}}), IntVec(b, {1})});
  std::vector<SymTensor> values_shape =
      b->OpN("ConcatV2", {{outer, num_indices, inner}, {Int(b, 0)}}, {});
  if (values_shape.empty()) return b->status();
  const SymTensor values = b->Op("Reshape", {g->grad_output(0), values_shape[0]});
  const SymTensor values_rank = b->Op("Size", {values_shape[0]});
  const SymTensor one = Int(b, 1);
  std::vector<SymTensor> perm = b->OpN("ConcatV2",
                                       {{axis_vec, b->Op("Range", {Int(b, 0), axis, one}),
                                         b->Op("Range", {after_axis, values_rank, one})},
                                        {Int(b, 0)}},
                                       {});
  if (perm.empty()) return b->status();
  const SymTensor moved = b->Op("Transpose", {values, perm[0]});
  const SymTensor flat_indices = b->Op("Reshape", {indices, IntVec(b, {-1})});
  const SymTensor num_rows = b->Op("GatherV2", {params_shape, axis, Int(b, 0)});
  const SymTensor summed = b->Op("UnsortedSegmentSum", {moved, flat_indices, num_rows});
  g->SetInputGrad(0, b->Op("Transpose", {summed, b->Op("InvertPermutation", {perm[0]})}));
  return absl::OkStatus();
}

absl::Status GatherV2Grad(GradContext* g) {
  int64_t batch_dims = 0;
  RETURN_IF_ERROR(g->GetAttr("batch_dims", &batch_dims));
  if (batch_dims != 0) {
    return absl::UnimplementedError("[GatherV2] gradient with batch_dims != 0");
  }
  return GatherGradAlong(g, g->input(2));
}

// Gather (v1) is GatherV2 along axis 0.
absl::Status GatherGrad(GradContext* g) { return GatherGradAlong(g, Int(g->b(), 0)); }

// Tile: view the gradient as [m0, s0, m1, s1, ...] and sum the copies (the
// even axes).
absl::Status TileGrad(GradContext* g) {
  GradBuilder* b = g->b();
  const SymTensor shape = ShapeOf(b, g->input(0));
  const SymTensor multiples = ToInt32(b, g->input(1));
  std::vector<SymTensor> pairs = b->OpN("Pack", {{multiples, shape}}, {});
  if (pairs.empty()) return b->status();
  const SymTensor split =
      b->Op("Reshape", {b->Op("Transpose", {pairs[0], IntVec(b, {1, 0})}), IntVec(b, {-1})});
  const SymTensor axes = b->Op("Range", {Int(b, 0), b->Op("Size", {split}), Int(b, 2)});
  g->SetInputGrad(0, b->Op("Sum", {b->Op("Reshape", {g->grad_output(0), split}), axes}));
  return absl::OkStatus();
}

// Fill(dims, value): every element is `value`.
absl::Status FillGrad(GradContext* g) {
  GradBuilder* b = g->b();
  const SymTensor dy = g->grad_output(0);
  const SymTensor all_axes = b->Op("Range", {Int(b, 0), b->Op("Rank", {dy}), Int(b, 1)});
  g->SetInputGrad(1, b->Op("Sum", {dy, all_axes}));
  return absl::OkStatus();
}

// The output gradients joined along `axis` (Split and SplitV's inverse).
absl::Status ConcatGrads(GradContext* g, int input, const SymTensor& axis) {
  if (g->num_outputs() == 1) {
    g->SetInputGrad(input, g->grad_output(0));
    return absl::OkStatus();
  }
  std::vector<SymTensor> grads;
  for (int i = 0; i < g->num_outputs(); ++i) grads.push_back(g->grad_output(i));
  std::vector<SymTensor> joined = g->b()->OpN("ConcatV2", {grads, {axis}}, {});
  if (joined.empty()) return g->b()->status();
  g->SetInputGrad(input, joined[0]);
  return absl::OkStatus();
}
absl::Status SplitGrad(GradContext* g) { return ConcatGrads(g, 1, g->input(0)); }
absl::Status SplitVGrad(GradContext* g) { return ConcatGrads(g, 0, g->input(2)); }

// Unpack's outputs stacked back along its axis.
absl::Status UnpackGrad(GradContext* g) {
  if (g->num_outputs() == 0) return absl::OkStatus();
  int64_t axis = 0;
  RETURN_IF_ERROR(g->GetAttr("axis", &axis));
  std::vector<SymTensor> grads;
  for (int i = 0; i < g->num_outputs(); ++i) grads.push_back(g->grad_output(i));
  std::vector<SymTensor> packed = g->b()->OpN("Pack", {grads}, {{"axis", AttrInt(axis)}});
  if (packed.empty()) return g->b()->status();
  g->SetInputGrad(0, packed[0]);
  return absl::OkStatus();
}

absl::Status ReverseV2Grad(GradContext* g) {
  g->SetInputGrad(0, g->b()->Op("ReverseV2", {g->grad_output(0), g->input(1)}));
  return absl::OkStatus();
}

// Summed over the broadcast axes, back to the input's shape.
absl::Status BroadcastToGrad(GradContext* g) {
  GradBuilder* b = g->b();
  const SymTensor in_shape = ShapeOf(b, g->input(0));
  g->SetInputGrad(0, grad::SumToShape(b, g->grad_output(0), in_shape, ShapeOf(b, g->output(0))));
  return absl::OkStatus();
}

absl::Status DiagGrad(GradContext* g) {
  g->SetInputGrad(0, g->b()->Op("DiagPart", {g->grad_output(0)}));
  return absl::OkStatus();
}
absl::Status DiagPartGrad(GradContext* g) {
  g->SetInputGrad(0, g->b()->Op("Diag", {g->grad_output(0)}));
  return absl::OkStatus();
}

// TensorFlow's message: the graph asked for a gradient its author forbade.
absl::Status PreventGradientGrad(GradContext* g) {
  std::string message;
  RETURN_IF_ERROR(g->GetAttr("message", &message));
  return absl::InvalidArgumentError("Gradient explicitly disabled. Reason: " + message);
}

REGISTER_GRADIENT("Identity", PassThroughGrad);
REGISTER_GRADIENT("PlaceholderWithDefault", PassThroughGrad);
// A read's gradient is the variable's: it flows to the resource handle, so
// the gradient with respect to a VarHandleOp output sums over its reads.
REGISTER_GRADIENT("ReadVariableOp", PassThroughGrad);
REGISTER_GRADIENT("IdentityN", IdentityNGrad);
REGISTER_GRADIENT("Reshape", ReshapeLikeInputGrad);
REGISTER_GRADIENT("ExpandDims", ReshapeLikeInputGrad);
REGISTER_GRADIENT("Squeeze", ReshapeLikeInputGrad);
REGISTER_GRADIENT("Transpose", TransposeGrad);
REGISTER_GRADIENT("Pack", PackGrad);
REGISTER_GRADIENT("ConcatV2", ConcatV2Grad);
REGISTER_GRADIENT("Slice", SliceGrad);
REGISTER_GRADIENT("GatherV2", GatherV2Grad);
REGISTER_GRADIENT("Gather", GatherGrad);
REGISTER_GRADIENT("Tile", TileGrad);
REGISTER_GRADIENT("Fill", FillGrad);
REGISTER_GRADIENT("Split", SplitGrad);
REGISTER_GRADIENT("SplitV", SplitVGrad);
REGISTER_GRADIENT("Unpack", UnpackGrad);
REGISTER_GRADIENT("ReverseV2", ReverseV2Grad);
REGISTER_GRADIENT("BroadcastTo", BroadcastToGrad);
REGISTER_GRADIENT("Diag", DiagGrad);
REGISTER_GRADIENT("DiagPart", DiagPartGrad);
REGISTER_GRADIENT("PreventGradient", PreventGradientGrad);

REGISTER_NO_GRADIENT("StopGradient");
REGISTER_NO_GRADIENT("Shape");
REGISTER_NO_GRADIENT("ShapeN");
REGISTER_NO_GRADIENT("Size");
REGISTER_NO_GRADIENT("Rank");
REGISTER_NO_GRADIENT("ZerosLike");
REGISTER_NO_GRADIENT("OnesLike");
REGISTER_NO_GRADIENT("Const");
REGISTER_NO_GRADIENT("Placeholder");
REGISTER_NO_GRADIENT("VarHandleOp");
REGISTER_NO_GRADIENT("VarIsInitializedOp");
REGISTER_NO_GRADIENT("ConcatOffset");
REGISTER_NO_GRADIENT("InvertPermutation");
REGISTER_NO_GRADIENT("OneHot");

}  // namespace
}  // namespace dflow
