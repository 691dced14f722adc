// Gradient functions of the math ops (cwise_ops.cc, cwise_unary_ops.cc,
// matmul_op.cc, reduction_ops.cc, cast_op.cc, Select of interop_ops.cc), following TensorFlow's
// math_grad: broadcasting binary ops sum their gradients back to each
// input's shape (BroadcastGradientArgs + Sum + Reshape), reductions repeat
// the output gradient over the reduced axes.
#include <string>

#include "dflow/framework/gradient.h"
#include "dflow/ops/grad_util.h"

namespace dflow {
namespace {

using grad::Int;
using grad::IntVec;
using grad::ReducedShape;
using grad::SetBroadcastGrads;
using grad::ShapeOf;
using grad::TileToShape;

// --- binary ------------------------------------------------------------------

absl::Status AddGrad(GradContext* g) {
  const SymTensor dz = g->grad_output(0);
  SetBroadcastGrads(g, dz, dz);
  return absl::OkStatus();
}

absl::Status SubGrad(GradContext* g) {
  const SymTensor dz = g->grad_output(0);
  SetBroadcastGrads(g, dz, g->b()->Op("Neg", {dz}));
  return absl::OkStatus();
}

absl::Status MulGrad(GradContext* g) {
  GradBuilder* b = g->b();
  const SymTensor dz = g->grad_output(0);
  SetBroadcastGrads(g, b->Op("Mul", {dz, g->input(1)}), b->Op("Mul", {g->input(0), dz}));
  return absl::OkStatus();
}

// d(x/y) = dz / y,  -dz x / y^2, each division done by `div` (RealDiv, or
// DivNoNan for DivNoNan's gradient, as TensorFlow).
absl::Status QuotientGrad(GradContext* g, const std::string& div) {
  GradBuilder* b = g->b();
  const SymTensor dz = g->grad_output(0);
  const SymTensor x = g->input(0), y = g->input(1);
  const SymTensor neg_x_y2 = b->Op(div, {b->Op(div, {b->Op("Neg", {x}), y}), y});
  SetBroadcastGrads(g, b->Op(div, {dz, y}), b->Op("Mul", {dz, neg_x_y2}));
  return absl::OkStatus();
}

absl::Status RealDivGrad(GradContext* g) { return QuotientGrad(g, "RealDiv"); }
absl::Status DivNoNanGrad(GradContext* g) { return QuotientGrad(g, "DivNoNan"); }

// z = x^y: dz y x^(y-1), and dz z log(x) where x > 0 (else 0), as TensorFlow.
absl::Status PowGrad(GradContext* g) {
  GradBuilder* b = g->b();
  const SymTensor dz = g->grad_output(0);
  const SymTensor x = g->input(0), y = g->input(1), z = g->output(0);
  const SymTensor one = b->Scalar(x.dtype, 1.0);
  const SymTensor dx =
      b->Op("Mul", {dz, b->Op("Mul", {y, b->Op("Pow", {x, b->Op("Sub", {y, one})})})});
  const SymTensor positive = b->Op("Greater", {x, b->Scalar(x.dtype, 0.0)});
  const SymTensor safe_x = b->Op("SelectV2", {positive, x, b->Op("OnesLike", {x})});
  const SymTensor log_x = b->Op("SelectV2", {positive, b->Op("Log", {safe_x}),
                                             b->Op("ZerosLike", {x})});
  SetBroadcastGrads(g, dx, b->Op("Mul", {dz, b->Op("Mul", {z, log_x})}));
  return absl::OkStatus();
}

// The gradient goes to x where `x cmp y` holds (ties go to x), else to y.
absl::Status MaxMinGrad(GradContext* g, const std::string& cmp) {
  GradBuilder* b = g->b();
  const SymTensor dz = g->grad_output(0);
  const SymTensor x_wins = b->Op(cmp, {g->input(0), g->input(1)});
  const SymTensor zeros = b->Op("ZerosLike", {dz});
  SetBroadcastGrads(g, b->Op("SelectV2", {x_wins, dz, zeros}),
                    b->Op("SelectV2", {x_wins, zeros, dz}));
  return absl::OkStatus();
}

absl::Status MaximumGrad(GradContext* g) { return MaxMinGrad(g, "GreaterEqual"); }
absl::Status MinimumGrad(GradContext* g) { return MaxMinGrad(g, "LessEqual"); }

absl::Status AddNGrad(GradContext* g) {
  for (int i = 0; i < g->num_inputs(); ++i) g->SetInputGrad(i, g->grad_output(0));
  return absl::OkStatus();
}

// --- unary -------------------------------------------------------------------

absl::Status NegGrad(GradContext* g) {
  g->SetInputGrad(0, g->b()->Op("Neg", {g->grad_output(0)}));
  return absl::OkStatus();
}

absl::Status SquareGrad(GradContext* g) {
  GradBuilder* b = g->b();
  const SymTensor two_x = b->Op("Mul", {g->input(0), b->Scalar(g->input(0).dtype, 2.0)});
  g->SetInputGrad(0, b->Op("Mul", {g->grad_output(0), two_x}));
  return absl::OkStatus();
}

// Sign(x) * dy, with Sign built from comparisons.
absl::Status AbsGrad(GradContext* g) {
  GradBuilder* b = g->b();
  const SymTensor x = g->input(0);
  const SymTensor zero = b->Scalar(x.dtype, 0.0);
  const AttrList to_t = {{"DstT", AttrType(x.dtype)}};
  const SymTensor sign = b->Op("Sub", {b->Op("Cast", {b->Op("Greater", {x, zero})}, to_t),
                                       b->Op("Cast", {b->Op("Less", {x, zero})}, to_t)});
  g->SetInputGrad(0, b->Op("Mul", {g->grad_output(0), sign}));
  return absl::OkStatus();
}

// Gradients of the form z = OpGrad(y, dy), y being the forward output.
absl::Status OutputGrad(GradContext* g, const std::string& grad_op) {
  g->SetInputGrad(0, g->b()->Op(grad_op, {g->output(0), g->grad_output(0)}));
  return absl::OkStatus();
}

absl::Status SqrtGrad(GradContext* g) { return OutputGrad(g, "SqrtGrad"); }
absl::Status RsqrtGrad(GradContext* g) { return OutputGrad(g, "RsqrtGrad"); }
absl::Status TanhGrad(GradContext* g) { return OutputGrad(g, "TanhGrad"); }
absl::Status SigmoidGrad(GradContext* g) { return OutputGrad(g, "SigmoidGrad"); }

absl::Status ExpGrad(GradContext* g) {
  g->SetInputGrad(0, g->b()->Op("Mul", {g->grad_output(0), g->output(0)}));
  return absl::OkStatus();
}

// d sin(x) = cos(x) dx; d cos(x) = -sin(x) dx.
absl::Status SinGrad(GradContext* g) {
  g->SetInputGrad(0, g->b()->Op("Mul", {g->grad_output(0), g->b()->Op("Cos", {g->input(0)})}));
  return absl::OkStatus();
}

absl::Status CosGrad(GradContext* g) {
  GradBuilder* b = g->b();
  g->SetInputGrad(0, b->Op("Mul", {g->grad_output(0), b->Op("Neg", {b->Op("Sin", {g->input(0)})})}));
  return absl::OkStatus();
}

absl::Status LogGrad(GradContext* g) {
  g->SetInputGrad(0, g->b()->Op("RealDiv", {g->grad_output(0), g->input(0)}));
  return absl::OkStatus();
}

absl::Status ReciprocalGrad(GradContext* g) { return OutputGrad(g, "ReciprocalGrad"); }

absl::Status Log1pGrad(GradContext* g) {
  GradBuilder* b = g->b();
  const SymTensor x = g->input(0);
  g->SetInputGrad(0, b->Op("RealDiv", {g->grad_output(0),
                                       b->Op("AddV2", {b->Scalar(x.dtype, 1.0), x})}));
  return absl::OkStatus();
}

absl::Status Expm1Grad(GradContext* g) {
  GradBuilder* b = g->b();
  g->SetInputGrad(0, b->Op("Mul", {g->grad_output(0), b->Op("Exp", {g->input(0)})}));
  return absl::OkStatus();
}

// --- MatMul ------------------------------------------------------------------

SymTensor MatMul(GradBuilder* b, const SymTensor& x, const SymTensor& y, bool ta, bool tb) {
  return b->Op("MatMul", {x, y}, {{"transpose_a", AttrBool(ta)}, {"transpose_b", AttrBool(tb)}});
}

// For z = op(a) op(b), with op a transpose or not:
//   a b:    da = dz bᵀ,    db = aᵀ dz
//   a bᵀ:   da = dz b,     db = dzᵀ a
//   aᵀ b:   da = b dzᵀ,    db = a dz
//   aᵀ bᵀ:  da = bᵀ dzᵀ,   db = dzᵀ aᵀ
absl::Status MatMulGrad(GradContext* g) {
  bool ta = false, tb = false;
  RETURN_IF_ERROR(g->GetAttr("transpose_a", &ta));
  RETURN_IF_ERROR(g->GetAttr("transpose_b", &tb));
  GradBuilder* b = g->b();
  const SymTensor a = g->input(0), bm = g->input(1), dz = g->grad_output(0);
  if (!ta && !tb) {
    g->SetInputGrad(0, MatMul(b, dz, bm, false, true));
    g->SetInputGrad(1, MatMul(b, a, dz, true, false));
  } else if (!ta && tb) {
    g->SetInputGrad(0, MatMul(b, dz, bm, false, false));
    g->SetInputGrad(1, MatMul(b, dz, a, true, false));
  } else if (ta && !tb) {
    g->SetInputGrad(0, MatMul(b, bm, dz, false, true));
    g->SetInputGrad(1, MatMul(b, a, dz, false, false));
  } else {
    g->SetInputGrad(0, MatMul(b, bm, dz, true, true));
    g->SetInputGrad(1, MatMul(b, dz, a, true, true));
  }
  return absl::OkStatus();
}

// --- BatchMatMul ---------------------------------------------------------------

SymTensor BatchMatMul(GradBuilder* b, const SymTensor& x, const SymTensor& y, bool adj_x,
                      bool adj_y) {
  return b->Op("BatchMatMulV2", {x, y}, {{"adj_x", AttrBool(adj_x)}, {"adj_y", AttrBool(adj_y)}});
}

// The batch dimensions of `shape` (all but its last two), as an int32 vector.
SymTensor BatchDims(GradBuilder* b, const SymTensor& shape) {
  const SymTensor rank = b->Op("Size", {shape}, {{"out_type", AttrType(DT_INT32)}});
  const SymTensor size = b->Op("Reshape", {b->Op("Sub", {rank, Int(b, 2)}), IntVec(b, {1})});
  return b->Op("Slice", {shape, IntVec(b, {0}), size});
}

// TensorFlow's: MatMul's four cases per matrix, then (V2) each gradient summed
// over the batch dimensions its input was broadcast along.
absl::Status BatchMatMulGrad(GradContext* g) {
  bool ax = false, ay = false;
  RETURN_IF_ERROR(g->GetAttr("adj_x", &ax));
  RETURN_IF_ERROR(g->GetAttr("adj_y", &ay));
  GradBuilder* b = g->b();
  const SymTensor x = g->input(0), y = g->input(1), dz = g->grad_output(0);
  SymTensor gx, gy;
  if (!ax && !ay) {
    gx = BatchMatMul(b, dz, y, false, true);
    gy = BatchMatMul(b, x, dz, true, false);
  } else if (!ax && ay) {
    gx = BatchMatMul(b, dz, y, false, false);
    gy = BatchMatMul(b, dz, x, true, false);
  } else if (ax && !ay) {
    gx = BatchMatMul(b, y, dz, false, true);
    gy = BatchMatMul(b, x, dz, false, false);
  } else {
    gx = BatchMatMul(b, y, dz, true, true);
    gy = BatchMatMul(b, dz, x, true, true);
  }
  const SymTensor sx = ShapeOf(b, x), sy = ShapeOf(b, y);
  std::vector<SymTensor> r =
      b->OpN("BroadcastGradientArgs", {{BatchDims(b, sx)}, {BatchDims(b, sy)}}, {});
  if (r.size() != 2) return absl::OkStatus();  // The builder holds the error.
  g->SetInputGrad(0, b->Op("Reshape", {b->Op("Sum", {gx, r[0]}), sx}));
  g->SetInputGrad(1, b->Op("Reshape", {b->Op("Sum", {gy, r[1]}), sy}));
  return absl::OkStatus();
}

// --- reductions --------------------------------------------------------------

// d(sum)/dx: the output gradient repeated over the reduced axes.
SymTensor SumGradOf(GradContext* g) {
  GradBuilder* b = g->b();
  const SymTensor input_shape = ShapeOf(b, g->input(0));
  const SymTensor kept = ReducedShape(b, input_shape, g->input(1));
  const SymTensor dy = b->Op("Reshape", {g->grad_output(0), kept});
  return TileToShape(b, dy, kept, input_shape);
}

absl::Status SumGrad(GradContext* g) {
  g->SetInputGrad(0, SumGradOf(g));
  return absl::OkStatus();
}

// The sum's gradient divided by the number of elements averaged.
absl::Status MeanGrad(GradContext* g) {
  GradBuilder* b = g->b();
  const AttrList int32 = {{"out_type", AttrType(DT_INT32)}};
  const SymTensor in_size = b->Op("Size", {g->input(0)}, int32);
  const SymTensor out_size = b->Op("Size", {g->output(0)}, int32);
  const SymTensor count = b->Op("FloorDiv", {in_size, b->Op("Maximum", {out_size, Int(b, 1)})});
  const SymTensor factor = b->Op("Cast", {count}, {{"DstT", AttrType(g->input(0).dtype)}});
  g->SetInputGrad(0, b->Op("RealDiv", {SumGradOf(g), factor}));
  return absl::OkStatus();
}

// The gradient is split evenly between the elements equal to the maximum.
absl::Status MaxGrad(GradContext* g) {
  GradBuilder* b = g->b();
  const SymTensor x = g->input(0), axes = g->input(1);
  const SymTensor kept = ReducedShape(b, ShapeOf(b, x), axes);
  const SymTensor y = b->Op("Reshape", {g->output(0), kept});
  const SymTensor dy = b->Op("Reshape", {g->grad_output(0), kept});
  const SymTensor hits = b->Op("Cast", {b->Op("Equal", {x, y})}, {{"DstT", AttrType(x.dtype)}});
  const SymTensor num_hits = b->Op("Sum", {hits, axes}, {{"keep_dims", AttrBool(true)}});
  g->SetInputGrad(0, b->Op("Mul", {b->Op("RealDiv", {hits, num_hits}), dy}));
  return absl::OkStatus();
}

// --- Cast, SelectV2 --------------------------------------------------------------

bool IsFloat(DataType t) { return t == DT_FLOAT || t == DT_DOUBLE; }

// Only float <-> double casts pass a gradient; integer and bool sources get none.
absl::Status CastGrad(GradContext* g) {
  DataType src = DT_INVALID, dst = DT_INVALID;
  RETURN_IF_ERROR(g->GetAttr("SrcT", &src));
  RETURN_IF_ERROR(g->GetAttr("DstT", &dst));
  if (!IsFloat(src) || !IsFloat(dst)) return absl::OkStatus();
  g->SetInputGrad(0, g->b()->Op("Cast", {g->grad_output(0)}, {{"DstT", AttrType(src)}}));
  return absl::OkStatus();
}

// Select's condition is as large as t and e, or a vector choosing their rows:
// no broadcasting to undo.
absl::Status SelectGrad(GradContext* g) {
  GradBuilder* b = g->b();
  const SymTensor cond = g->input(0), dz = g->grad_output(0);
  const SymTensor zeros = b->Op("ZerosLike", {g->input(1)});
  g->SetInputGrad(1, b->Op("Select", {cond, dz, zeros}));
  g->SetInputGrad(2, b->Op("Select", {cond, zeros, dz}));
  return absl::OkStatus();
}

absl::Status SelectV2Grad(GradContext* g) {
  GradBuilder* b = g->b();
  const SymTensor cond = g->input(0), dz = g->grad_output(0);
  const SymTensor zeros = b->Op("ZerosLike", {dz});
  const SymTensor out_shape = ShapeOf(b, g->output(0));
  const SymTensor dt = b->Op("SelectV2", {cond, dz, zeros});
  const SymTensor de = b->Op("SelectV2", {cond, zeros, dz});
  g->SetInputGrad(1, grad::SumToShape(b, dt, ShapeOf(b, g->input(1)), out_shape));
  g->SetInputGrad(2, grad::SumToShape(b, de, ShapeOf(b, g->input(2)), out_shape));
  return absl::OkStatus();
}

// --- scans and clipping -------------------------------------------------------

SymTensor Scan(GradBuilder* b, const std::string& op, const SymTensor& x, const SymTensor& axis,
               bool exclusive, bool reverse) {
  return b->Op(op, {x, axis}, {{"exclusive", AttrBool(exclusive)}, {"reverse", AttrBool(reverse)}});
}

// Each input element feeds every later output: the same scan, run the other way.
absl::Status CumsumGrad(GradContext* g) {
  bool exclusive = false, reverse = false;
  RETURN_IF_ERROR(g->GetAttr("exclusive", &exclusive));
  RETURN_IF_ERROR(g->GetAttr("reverse", &reverse));
  g->SetInputGrad(0, Scan(g->b(), "Cumsum", g->grad_output(0), g->input(1), exclusive, !reverse));
  return absl::OkStatus();
}

// d out_j / d x_i = out_j / x_i for the outputs x_i feeds, as TensorFlow's
// (DivNoNan: zeros in x give zero gradients there).
absl::Status CumprodGrad(GradContext* g) {
  bool exclusive = false, reverse = false;
  RETURN_IF_ERROR(g->GetAttr("exclusive", &exclusive));
  RETURN_IF_ERROR(g->GetAttr("reverse", &reverse));
  GradBuilder* b = g->b();
  const SymTensor x = g->input(0), axis = g->input(1);
  const SymTensor prod = Scan(b, "Cumprod", x, axis, exclusive, reverse);
  const SymTensor summed =
      Scan(b, "Cumsum", b->Op("Mul", {prod, g->grad_output(0)}), axis, exclusive, !reverse);
  g->SetInputGrad(0, b->Op("DivNoNan", {summed, x}));
  return absl::OkStatus();
}

// The gradient goes to t where it was inside the bounds, else to the bound
// that clipped it (summed when the bound is a scalar).
absl::Status ClipByValueGrad(GradContext* g) {
  GradBuilder* b = g->b();
  const SymTensor x = g->input(0), dy = g->grad_output(0);
  const SymTensor zeros = b->Op("ZerosLike", {dy});
  const SymTensor below = b->Op("Less", {x, g->input(1)});
  const SymTensor above = b->Op("Greater", {x, g->input(2)});
  const SymTensor x_shape = ShapeOf(b, x);
  g->SetInputGrad(0, b->Op("SelectV2", {below, zeros, b->Op("SelectV2", {above, zeros, dy})}));
  g->SetInputGrad(1, grad::SumToShape(b, b->Op("SelectV2", {below, dy, zeros}),
                                      ShapeOf(b, g->input(1)), x_shape));
  g->SetInputGrad(2, grad::SumToShape(b, b->Op("SelectV2", {above, dy, zeros}),
                                      ShapeOf(b, g->input(2)), x_shape));
  return absl::OkStatus();
}

REGISTER_GRADIENT("AddV2", AddGrad);
REGISTER_GRADIENT("BatchMatMul", BatchMatMulGrad);
REGISTER_GRADIENT("BatchMatMulV2", BatchMatMulGrad);
REGISTER_GRADIENT("Add", AddGrad);
REGISTER_GRADIENT("Sub", SubGrad);
REGISTER_GRADIENT("Mul", MulGrad);
REGISTER_GRADIENT("RealDiv", RealDivGrad);
REGISTER_GRADIENT("DivNoNan", DivNoNanGrad);
REGISTER_GRADIENT("Pow", PowGrad);
REGISTER_GRADIENT("Maximum", MaximumGrad);
REGISTER_GRADIENT("Minimum", MinimumGrad);
REGISTER_GRADIENT("AddN", AddNGrad);
REGISTER_GRADIENT("Neg", NegGrad);
REGISTER_GRADIENT("Abs", AbsGrad);
REGISTER_GRADIENT("Square", SquareGrad);
REGISTER_GRADIENT("Sqrt", SqrtGrad);
REGISTER_GRADIENT("Rsqrt", RsqrtGrad);
REGISTER_GRADIENT("Exp", ExpGrad);
REGISTER_GRADIENT("Log", LogGrad);
REGISTER_GRADIENT("Sin", SinGrad);
REGISTER_GRADIENT("Cos", CosGrad);
REGISTER_GRADIENT("Tanh", TanhGrad);
REGISTER_GRADIENT("Sigmoid", SigmoidGrad);
REGISTER_GRADIENT("Reciprocal", ReciprocalGrad);
REGISTER_GRADIENT("Log1p", Log1pGrad);
REGISTER_GRADIENT("Expm1", Expm1Grad);
REGISTER_GRADIENT("MatMul", MatMulGrad);
REGISTER_GRADIENT("Sum", SumGrad);
REGISTER_GRADIENT("Mean", MeanGrad);
REGISTER_GRADIENT("Max", MaxGrad);
REGISTER_GRADIENT("Cast", CastGrad);
REGISTER_GRADIENT("Select", SelectGrad);
REGISTER_GRADIENT("SelectV2", SelectV2Grad);
REGISTER_GRADIENT("Cumsum", CumsumGrad);
REGISTER_GRADIENT("Cumprod", CumprodGrad);
REGISTER_GRADIENT("ClipByValue", ClipByValueGrad);

// Piecewise-constant or integer-valued ops.
REGISTER_NO_GRADIENT("Equal");
REGISTER_NO_GRADIENT("NotEqual");
REGISTER_NO_GRADIENT("Greater");
REGISTER_NO_GRADIENT("Less");
REGISTER_NO_GRADIENT("GreaterEqual");
REGISTER_NO_GRADIENT("LessEqual");
REGISTER_NO_GRADIENT("LogicalNot");
REGISTER_NO_GRADIENT("LogicalAnd");
REGISTER_NO_GRADIENT("LogicalOr");
REGISTER_NO_GRADIENT("ArgMax");
REGISTER_NO_GRADIENT("ArgMin");
REGISTER_NO_GRADIENT("All");
REGISTER_NO_GRADIENT("Any");
REGISTER_NO_GRADIENT("Range");
REGISTER_NO_GRADIENT("FloorDiv");
REGISTER_NO_GRADIENT("FloorMod");
REGISTER_NO_GRADIENT("Floor");
REGISTER_NO_GRADIENT("Ceil");
REGISTER_NO_GRADIENT("Round");
REGISTER_NO_GRADIENT("RandomUniform");
REGISTER_NO_GRADIENT("RandomStandardNormal");
REGISTER_NO_GRADIENT("TruncatedNormal");
REGISTER_NO_GRADIENT("BroadcastGradientArgs");

}  // namespace
}  // namespace dflow
