// Gradient functions of the nn ops (nn_ops.cc, conv_ops.cc, pooling_ops.cc),
// with TensorFlow's nn_grad formulas. Rows of the softmax family are the
// last dimension; the cross entropies reuse the backprop their forward op
// already computed.
#include <string>
#include <vector>

#include "dflow/framework/gradient.h"
#include "dflow/ops/grad_util.h"

namespace dflow {
namespace {

using grad::Int;
using grad::ShapeOf;

// The attrs among `names` that the forward node sets, to pass on unchanged.
AttrList CopyAttrs(const GradContext& g, const std::vector<std::string>& names) {
  AttrList attrs;
  for (const std::string& name : names) {
    auto it = g.node().attr().find(name);
    if (it != g.node().attr().end()) attrs.emplace_back(name, it->second);
  }
  return attrs;
}

// Sum(x, -1, keep_dims=true).
SymTensor SumLastAxis(GradBuilder* b, const SymTensor& x) {
  return b->Op("Sum", {x, Int(b, -1)}, {{"keep_dims", AttrBool(true)}});
}

// --- Relu, BiasAdd ---------------------------------------------------------------

// TensorFlow takes the mask from the output: Relu(x) > 0 exactly when x > 0.
absl::Status ReluGradFn(GradContext* g) {
  g->SetInputGrad(0, g->b()->Op("ReluGrad", {g->grad_output(0), g->output(0)}));
  return absl::OkStatus();
}

// d softplus(x) / dx = sigmoid(x): SoftplusGrad(dy, x).
absl::Status SoftplusGradFn(GradContext* g) {
  g->SetInputGrad(0, g->b()->Op("SoftplusGrad", {g->grad_output(0), g->input(0)}));
  return absl::OkStatus();
}

absl::Status BiasAddGradFn(GradContext* g) {
  const SymTensor dy = g->grad_output(0);
  g->SetInputGrad(0, dy);
  g->SetInputGrad(1, g->b()->Op("BiasAddGrad", {dy}, CopyAttrs(*g, {"data_format"})));
  return absl::OkStatus();
}

// --- softmax family -----------------------------------------------------------------

// dx = (dy - Σ dy·s) · s, with s = Softmax(x) the output.
absl::Status SoftmaxGradFn(GradContext* g) {
  GradBuilder* b = g->b();
  const SymTensor s = g->output(0), dy = g->grad_output(0);
  const SymTensor dot = SumLastAxis(b, b->Op("Mul", {dy, s}));
  g->SetInputGrad(0, b->Op("Mul", {b->Op("Sub", {dy, dot}), s}));
  return absl::OkStatus();
}

// dx = dy - Σ dy · exp(y), with y = LogSoftmax(x) the output.
absl::Status LogSoftmaxGradFn(GradContext* g) {
  GradBuilder* b = g->b();
  const SymTensor dy = g->grad_output(0);
  const SymTensor softmax = b->Op("Exp", {g->output(0)});
  g->SetInputGrad(0, b->Op("Sub", {dy, b->Op("Mul", {SumLastAxis(b, dy), softmax})}));
  return absl::OkStatus();
}

// The gradient of the cross entropies' logits: d(loss) broadcast along each
// row times the backprop output (softmax - labels). When the backprop output
// itself is used downstream, its gradient g2 adds (g2 - Σ g2·s) · s, the
// softmax Jacobian applied to g2 (TensorFlow's second-order term).
SymTensor XentLogitsGrad(GradContext* g) {
  GradBuilder* b = g->b();
  const SymTensor d_loss = b->Op("ExpandDims", {g->grad_output(0), Int(b, -1)});
  SymTensor grad = b->Op("Mul", {d_loss, g->output(1)});
  if (g->has_grad_output(1)) {
    const SymTensor g2 = g->grad_output(1);
    const SymTensor s = b->Op("Softmax", {g->input(0)});
    const SymTensor jvp =
        b->Op("Mul", {b->Op("Sub", {g2, SumLastAxis(b, b->Op("Mul", {g2, s}))}), s});
    grad = b->Op("AddV2", {grad, jvp});
  }
  return grad;
}

// Labels are indices: they get no gradient.
absl::Status SparseXentGradFn(GradContext* g) {
  g->SetInputGrad(0, XentLogitsGrad(g));
  return absl::OkStatus();
}

// d(labels) = d(loss) · -LogSoftmax(logits) (minus g2 when the backprop
// output, softmax - labels, is used).
absl::Status XentGradFn(GradContext* g) {
  GradBuilder* b = g->b();
  g->SetInputGrad(0, XentLogitsGrad(g));
  const SymTensor d_loss = b->Op("ExpandDims", {g->grad_output(0), Int(b, -1)});
  const SymTensor neg_log_softmax = b->Op("Neg", {b->Op("LogSoftmax", {g->input(0)})});
  SymTensor d_labels = b->Op("Mul", {d_loss, neg_log_softmax});
  if (g->has_grad_output(1)) d_labels = b->Op("Sub", {d_labels, g->grad_output(1)});
  g->SetInputGrad(1, d_labels);
  return absl::OkStatus();
}

// --- Conv2D, MaxPool, AvgPool -----------------------------------------------------------

absl::Status Conv2DGradFn(GradContext* g) {
  GradBuilder* b = g->b();
  const AttrList attrs = CopyAttrs(*g, {"strides", "padding", "explicit_paddings", "data_format",
                                        "dilations", "use_cudnn_on_gpu"});
  const SymTensor x = g->input(0), w = g->input(1), dy = g->grad_output(0);
  g->SetInputGrad(0, b->Op("Conv2DBackpropInput", {ShapeOf(b, x), w, dy}, attrs));
  g->SetInputGrad(1, b->Op("Conv2DBackpropFilter", {x, ShapeOf(b, w), dy}, attrs));
  return absl::OkStatus();
}

absl::Status MaxPoolGradFn(GradContext* g) {
  const AttrList attrs =
      CopyAttrs(*g, {"ksize", "strides", "padding", "explicit_paddings", "data_format"});
  g->SetInputGrad(0,
                  g->b()->Op("MaxPoolGrad", {g->input(0), g->output(0), g->grad_output(0)}, attrs));
  return absl::OkStatus();
}

// AvgPool spreads each output's gradient evenly over its window; the
// gradient of that (linear) spreading with respect to its grad input is the
// pooling itself. orig_input_shape gets none.
absl::Status AvgPoolGradFn(GradContext* g) {
  const AttrList attrs = CopyAttrs(*g, {"ksize", "strides", "padding", "data_format"});
  g->SetInputGrad(0, g->b()->Op("AvgPoolGrad", {ShapeOf(g->b(), g->input(0)), g->grad_output(0)},
                                attrs));
  return absl::OkStatus();
}

absl::Status AvgPoolGradGradFn(GradContext* g) {
  const AttrList attrs = CopyAttrs(*g, {"ksize", "strides", "padding", "data_format"});
  g->SetInputGrad(1, g->b()->Op("AvgPool", {g->grad_output(0)}, attrs));
  return absl::OkStatus();
}

// d (sum(x^2) / 2) = x dy.
absl::Status L2LossGradFn(GradContext* g) {
  g->SetInputGrad(0, g->b()->Op("Mul", {g->input(0), g->grad_output(0)}));
  return absl::OkStatus();
}

// The gradients of y with respect to x, scale and offset, from the saved
// batch statistics (outputs 3-4, and 5 in V3), by the gradient op of the same
// version (FusedBatchNorm -> FusedBatchNormGrad, ...V2 -> ...GradV2); the
// statistics' outputs carry none, as in TensorFlow.
absl::Status FusedBatchNormGradFn(GradContext* g) {
  const std::string version = g->node().op().substr(std::string("FusedBatchNorm").size());
  std::vector<std::vector<SymTensor>> inputs = {
      {g->grad_output(0)}, {g->input(0)}, {g->input(1)}, {g->output(3)}, {g->output(4)}};
  if (version == "V3") inputs.push_back({g->output(5)});
  const std::vector<SymTensor> grads =
      g->b()->OpN("FusedBatchNormGrad" + version, inputs,
                  CopyAttrs(*g, {"T", "U", "epsilon", "data_format", "is_training"}));
  if (grads.size() < 3) return g->b()->status();
  for (int i = 0; i < 3; ++i) g->SetInputGrad(i, grads[i]);
  return absl::OkStatus();
}

absl::Status LrnGradFn(GradContext* g) {
  g->SetInputGrad(0, g->b()->Op("LRNGrad", {g->grad_output(0), g->input(0), g->output(0)},
                                CopyAttrs(*g, {"depth_radius", "bias", "alpha", "beta"})));
  return absl::OkStatus();
}

// The values' gradient scattered back to the entries TopK chose: row r's
// index i is flat position r * cols + i of the input.
absl::Status TopKGradFn(GradContext* g) {
  GradBuilder* b = g->b();
  const SymTensor x = g->input(0);
  const SymTensor in_shape = ShapeOf(b, x);
  const SymTensor size = b->Op("Size", {x}, {{"out_type", AttrType(DT_INT32)}});
  const SymTensor last =
      b->Op("Reshape", {b->Op("Sub", {b->Op("Rank", {x}), Int(b, 1)}), grad::IntVec(b, {1})});
  const SymTensor cols = b->Op(
      "Reshape", {b->Op("Slice", {in_shape, last, grad::IntVec(b, {1})}), grad::IntVec(b, {})});
  std::vector<SymTensor> rows_by_k =
      b->OpN("Pack", {{Int(b, -1), grad::ToInt32(b, g->input(1))}}, {});
  if (rows_by_k.empty()) return b->status();
  const SymTensor indices = b->Op("Reshape", {grad::ToInt32(b, g->output(1)), rows_by_k[0]});
  const SymTensor row_starts =
      b->Op("Reshape", {b->Op("Range", {Int(b, 0), size, cols}), grad::IntVec(b, {-1, 1})});
  const SymTensor flat =
      b->Op("Reshape", {b->Op("AddV2", {indices, row_starts}), grad::IntVec(b, {-1})});
  const SymTensor values = b->Op("Reshape", {g->grad_output(0), grad::IntVec(b, {-1})});
  const SymTensor summed = b->Op("UnsortedSegmentSum", {values, flat, size});
  g->SetInputGrad(0, b->Op("Reshape", {summed, in_shape}));
  return absl::OkStatus();
}

REGISTER_GRADIENT("Relu", ReluGradFn);
REGISTER_GRADIENT("Softplus", SoftplusGradFn);
REGISTER_GRADIENT("LRN", LrnGradFn);
REGISTER_GRADIENT("FusedBatchNorm", FusedBatchNormGradFn);
REGISTER_GRADIENT("FusedBatchNormV2", FusedBatchNormGradFn);
REGISTER_GRADIENT("FusedBatchNormV3", FusedBatchNormGradFn);
REGISTER_GRADIENT("L2Loss", L2LossGradFn);
REGISTER_GRADIENT("BiasAdd", BiasAddGradFn);
REGISTER_GRADIENT("Softmax", SoftmaxGradFn);
REGISTER_GRADIENT("LogSoftmax", LogSoftmaxGradFn);
REGISTER_GRADIENT("SparseSoftmaxCrossEntropyWithLogits", SparseXentGradFn);
REGISTER_GRADIENT("SoftmaxCrossEntropyWithLogits", XentGradFn);
REGISTER_GRADIENT("Conv2D", Conv2DGradFn);
REGISTER_GRADIENT("MaxPool", MaxPoolGradFn);
REGISTER_GRADIENT("AvgPool", AvgPoolGradFn);
REGISTER_GRADIENT("AvgPoolGrad", AvgPoolGradGradFn);
REGISTER_GRADIENT("TopKV2", TopKGradFn);

}  // namespace
}  // namespace dflow
