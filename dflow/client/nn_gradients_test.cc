// The gradients of the nn ops (ops/nn_grad.cc) against central finite
// differences: Relu, BiasAdd, Softmax, LogSoftmax, both cross entropies
// (including the second-order term when their backprop output is used),
// Conv2D over paddings, strides, dilations and groups, MaxPool, AvgPool and
// AvgPoolGrad, FusedBatchNorm V1/V2/V3 (NHWC and NCHW) in training and
// inference, LRN,
// and a small CNN composed of all of them: rows of the gradient harness
// (gradient_test_util.h, run as GradOps/*), in double unless named _float.
#include <set>
#include <string>
#include <vector>

#include "dflow/client/gradient_test_util.h"
#include "dflow/client/op_builder.h"
#include "dflow/client/ops.h"
#include "dflow/framework/gradient.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

using BuildFn = GradBuildFn;

GradInputSpec S(std::initializer_list<int64_t> dims, double lo = -1, double hi = 1) {
  return GradInput(dims, lo, hi);
}

// Values of either sign, at least 0.1 away from zero (kinks of Relu).
GradInputSpec AwayFromZero(std::initializer_list<int64_t> dims) {
  return GradInput(dims, 0.1, 1, /*random_sign=*/true);
}

// --- builders ------------------------------------------------------------------

BuildFn Unary(const std::string& op) { return UnaryGradCase(op); }

BuildFn BiasAdd(const std::string& format) {
  return [format](const Scope& s, const std::vector<Output>& x) {
    return OpBuilder(s, "BiasAdd").Input(x[0]).Input(x[1]).Attr("data_format", format).Finish();
  };
}

struct ConvSpec {
  std::vector<int64_t> strides = {1, 1, 1, 1};
  std::string padding = "SAME";
  std::vector<int64_t> dilations = {1, 1, 1, 1};
  std::vector<int64_t> explicit_paddings = {};
};

BuildFn Conv(const ConvSpec& c) {
  return [c](const Scope& s, const std::vector<Output>& x) {
    OpBuilder b(s, "Conv2D");
    b.Input(x[0]).Input(x[1]).Attr("strides", c.strides).Attr("padding", c.padding);
    b.Attr("dilations", c.dilations);
    if (!c.explicit_paddings.empty()) b.Attr("explicit_paddings", c.explicit_paddings);
    return b.Finish();
  };
}

BuildFn Pool(std::vector<int64_t> ksize, std::vector<int64_t> strides, std::string padding) {
  return [=](const Scope& s, const std::vector<Output>& x) {
    return ops::MaxPool(s, x[0], ksize, strides, padding);
  };
}

BuildFn AvgPool(std::vector<int64_t> ksize, std::vector<int64_t> strides, std::string padding) {
  return [=](const Scope& s, const std::vector<Output>& x) {
    return ops::AvgPool(s, x[0], ksize, strides, padding);
  };
}

// AvgPoolGrad of an [1, 5, 5, 2] input, x[0] the pooled gradient.
BuildFn AvgPoolGradOf(std::vector<int64_t> ksize, std::vector<int64_t> strides,
                      std::string padding) {
  return [=](const Scope& s, const std::vector<Output>& x) {
    return OpBuilder(s, "AvgPoolGrad")
        .Input(ops::Const(s, Tensor::Vec<int32_t>({1, 5, 5, 2})))
        .Input(x[0])
        .Attr("ksize", ksize)
        .Attr("strides", strides)
        .Attr("padding", padding)
        .Finish();
  };
}

const Tensor kLabels = Tensor::Vec<int32_t>({0, 3, 1});

// y = loss, or loss + Σ backprop² per row when the backprop output is used too.
// y of FusedBatchNorm<version>(x, scale, offset): the batch's statistics in
// training, fixed ones in inference.
BuildFn BatchNorm(bool training, const std::string& op = "FusedBatchNormV3",
                  const std::string& format = "NHWC") {
  return [training, op, format](const Scope& s, const std::vector<Output>& x) {
    const Tensor mean = training ? Tensor::Vec<float>({}) : Tensor::Vec<float>({0.2f, -0.1f});
    const Tensor var = training ? Tensor::Vec<float>({}) : Tensor::Vec<float>({1.5f, 0.7f});
    return OpBuilder(s, op)
        .Input(x[0])
        .Input(x[1])
        .Input(x[2])
        .Input(mean)
        .Input(var)
        .Attr("epsilon", 0.001f)
        .Attr("is_training", training)
        .Attr("data_format", format)
        .Finish();
  };
}

BuildFn SparseXent(bool use_backprop) {
  return [use_backprop](const Scope& s, const std::vector<Output>& x) {
    ops::XentOutputs r = ops::SparseSoftmaxCrossEntropyWithLogits(s, x[0], kLabels);
    if (!use_backprop) return r.loss;
    return ops::Add(s, r.loss, ops::Sum(s, ops::Square(s, r.backprop), 1));
  };
}

// The labels are Softmax(x[1]): rows that sum to 1, as the backprop output
// (softmax - labels) assumes, whatever the finite differences perturb.
BuildFn Xent(bool use_backprop) {
  return [use_backprop](const Scope& s, const std::vector<Output>& x) {
    ops::XentOutputs r = ops::SoftmaxCrossEntropyWithLogits(s, x[0], ops::Softmax(s, x[1]));
    if (!use_backprop) return r.loss;
    return ops::Add(s, r.loss, ops::Sum(s, ops::Square(s, r.backprop), 1));
  };
}

// conv(5x5x2 -> 3 filters) + bias -> relu -> maxpool 2x2 -> dense -> mean
// sparse cross entropy: every nn gradient composed, as in the Fashion-MNIST CNN.
Output SmallCnn(const Scope& s, const std::vector<Output>& x) {
  Output conv = ops::Conv2D(s, x[0], x[1], {1, 1, 1, 1}, "SAME");
  Output hidden = ops::Relu(s, ops::BiasAdd(s, conv, x[2]));
  Output pooled = ops::MaxPool(s, hidden, {1, 2, 2, 1}, {1, 2, 2, 1}, "VALID");
  Output flat = ops::Reshape(s, pooled, {2, 18});
  Output logits = ops::MatMul(s, flat, x[3]);
  ops::XentOutputs xent =
      ops::SparseSoftmaxCrossEntropyWithLogits(s, logits, Tensor::Vec<int32_t>({1, 0}));
  return ops::Mean(s, xent.loss, 0);
}

std::vector<GradCase> Cases() {
  ConvSpec same, valid_s2, dilated, explicit_pad, grouped, uneven;
  valid_s2.padding = "VALID";
  valid_s2.strides = {1, 2, 2, 1};
  dilated.dilations = {1, 2, 2, 1};
  explicit_pad.padding = "EXPLICIT";
  explicit_pad.explicit_paddings = {0, 0, 1, 0, 0, 2, 0, 0};
  grouped.strides = {1, 2, 2, 1};
  uneven.strides = {1, 2, 1, 1};
  uneven.padding = "VALID";
  return {
      {"Relu", "Relu", {AwayFromZero({2, 3})}, Unary("Relu")},
      {"Relu_float", "Relu", {AwayFromZero({2, 3})}, Unary("Relu"), DT_FLOAT},
      {"BiasAdd_NHWC", "BiasAdd", {S({2, 3, 4}), S({4})}, BiasAdd("NHWC")},
      {"BiasAdd_NCHW", "BiasAdd", {S({2, 3, 2, 2}), S({3})}, BiasAdd("NCHW")},
      {"BiasAdd_float", "BiasAdd", {S({3, 4}), S({4})}, BiasAdd("NHWC"), DT_FLOAT},
      {"Softmax", "Softmax", {S({3, 4}, -2, 2)}, Unary("Softmax")},
      {"Softmax_rank3", "Softmax", {S({2, 2, 3}, -2, 2)}, Unary("Softmax")},
      {"LogSoftmax", "LogSoftmax", {S({3, 4}, -2, 2)}, Unary("LogSoftmax")},
      {"LogSoftmax_float", "LogSoftmax", {S({3, 4}, -2, 2)}, Unary("LogSoftmax"), DT_FLOAT},
      {"SparseSoftmaxCrossEntropyWithLogits",
       "SparseSoftmaxCrossEntropyWithLogits",
       {S({3, 4}, -2, 2)},
       SparseXent(false)},
      {"SparseSoftmaxCrossEntropyWithLogits_backprop_used",
       "SparseSoftmaxCrossEntropyWithLogits",
       {S({3, 4}, -2, 2)},
       SparseXent(true)},
      {"SparseSoftmaxCrossEntropyWithLogits_float",
       "SparseSoftmaxCrossEntropyWithLogits",
       {S({3, 4}, -2, 2)},
       SparseXent(false),
       DT_FLOAT},
      {"SoftmaxCrossEntropyWithLogits",
       "SoftmaxCrossEntropyWithLogits",
       {S({3, 4}, -2, 2), S({3, 4}, 0, 1)},
       Xent(false)},
      {"SoftmaxCrossEntropyWithLogits_backprop_used",
       "SoftmaxCrossEntropyWithLogits",
       {S({3, 4}, -2, 2), S({3, 4}, 0, 1)},
       Xent(true)},
      {"Conv2D_same", "Conv2D", {S({2, 5, 4, 2}), S({3, 3, 2, 3})}, Conv(same)},
      {"Conv2D_valid_stride2", "Conv2D", {S({1, 6, 5, 2}), S({3, 2, 2, 2})}, Conv(valid_s2)},
      {"Conv2D_uneven_strides", "Conv2D", {S({1, 6, 4, 1}), S({2, 2, 1, 2})}, Conv(uneven)},
      {"Conv2D_dilated", "Conv2D", {S({1, 5, 5, 2}), S({2, 2, 2, 2})}, Conv(dilated)},
      {"Conv2D_explicit", "Conv2D", {S({1, 4, 4, 1}), S({3, 3, 1, 2})}, Conv(explicit_pad)},
      {"Conv2D_grouped", "Conv2D", {S({1, 5, 5, 4}), S({3, 3, 2, 4})}, Conv(grouped)},
      {"Conv2D_float", "Conv2D", {S({1, 5, 4, 2}), S({3, 3, 2, 2})}, Conv(same), DT_FLOAT},
      {"MaxPool_same_k2_s2",
       "MaxPool",
       {S({1, 5, 5, 2})},
       Pool({1, 2, 2, 1}, {1, 2, 2, 1}, "SAME")},
      {"MaxPool_valid_k3_s2",
       "MaxPool",
       {S({2, 5, 5, 2})},
       Pool({1, 3, 3, 1}, {1, 2, 2, 1}, "VALID")},
      {"MaxPool_overlapping",
       "MaxPool",
       {S({1, 4, 4, 1})},
       Pool({1, 3, 3, 1}, {1, 1, 1, 1}, "SAME")},
      {"MaxPool_float",
       "MaxPool",
       {S({1, 4, 4, 2})},
       Pool({1, 2, 2, 1}, {1, 2, 2, 1}, "VALID"),
       DT_FLOAT},
      {"AvgPool_same_k2_s2", "AvgPool", {S({1, 5, 5, 2})}, AvgPool({1, 2, 2, 1}, {1, 2, 2, 1}, "SAME")},
      {"AvgPool_valid_k3_s2",
       "AvgPool",
       {S({2, 5, 5, 2})},
       AvgPool({1, 3, 3, 1}, {1, 2, 2, 1}, "VALID")},
      {"AvgPool_overlapping",
       "AvgPool",
       {S({1, 4, 4, 1})},
       AvgPool({1, 3, 3, 1}, {1, 1, 1, 1}, "SAME")},
      {"AvgPool_float",
       "AvgPool",
       {S({1, 4, 4, 2})},
       AvgPool({1, 2, 2, 1}, {1, 2, 2, 1}, "VALID"),
       DT_FLOAT},
      {"AvgPoolGrad_same_k3_s2",
       "AvgPoolGrad",
       {S({1, 3, 3, 2})},
       AvgPoolGradOf({1, 3, 3, 1}, {1, 2, 2, 1}, "SAME")},
      {"FusedBatchNormV3_training",
       "FusedBatchNormV3",
       {S({2, 3, 2, 2}), S({2}, 0.5, 1.5), S({2})},
       BatchNorm(true),
       DT_FLOAT},
      {"FusedBatchNormV3_inference",
       "FusedBatchNormV3",
       {S({2, 2, 1, 2}), S({2}, 0.5, 1.5), S({2})},
       BatchNorm(false),
       DT_FLOAT},
      {"FusedBatchNormV3_training_nchw",
       "FusedBatchNormV3",
       {S({2, 2, 3, 2}), S({2}, 0.5, 1.5), S({2})},
       BatchNorm(true, "FusedBatchNormV3", "NCHW"),
       DT_FLOAT},
      {"FusedBatchNorm_training_nchw",
       "FusedBatchNorm",
       {S({2, 2, 3, 2}), S({2}, 0.5, 1.5), S({2})},
       BatchNorm(true, "FusedBatchNorm", "NCHW"),
       DT_FLOAT},
      {"FusedBatchNorm_inference",
       "FusedBatchNorm",
       {S({2, 2, 1, 2}), S({2}, 0.5, 1.5), S({2})},
       BatchNorm(false, "FusedBatchNorm"),
       DT_FLOAT},
      {"FusedBatchNormV2_training",
       "FusedBatchNormV2",
       {S({2, 3, 2, 2}), S({2}, 0.5, 1.5), S({2})},
       BatchNorm(true, "FusedBatchNormV2"),
       DT_FLOAT},
      {"FusedBatchNormV2_inference_nchw",
       "FusedBatchNormV2",
       {S({2, 2, 2, 1}), S({2}, 0.5, 1.5), S({2})},
       BatchNorm(false, "FusedBatchNormV2", "NCHW"),
       DT_FLOAT},
      {"LRN_float",
       "LRN",
       {S({1, 2, 2, 6})},
       [](const Scope& s, const std::vector<Output>& x) {
         return OpBuilder(s, "LRN")
             .Input(x[0])
             .Attr("depth_radius", int64_t{2})
             .Attr("bias", 1.5f)
             .Attr("alpha", 0.3f)
             .Attr("beta", 0.75f)
             .Finish();
       },
       DT_FLOAT},
      {"Composite_small_cnn", "", {S({2, 4, 6, 2}), S({5, 5, 2, 3}), S({3}), S({18, 2})}, SmallCnn},
  };
}

// The nn rows hold to tighter bounds than the harness's defaults.
std::vector<GradCase> NnRows() {
  std::vector<GradCase> rows = Cases();
  for (GradCase& row : rows) row.max_error = row.dtype == DT_DOUBLE ? 1e-6 : 2e-2;
  return rows;
}

// Run by gradients_test.cc's GradOps/GradOpTest.MatchesFiniteDifferences.
const GradCaseRegistrar kNnRows(NnRows());

// Every nn op has a gradient, and a row above.
TEST(NnGradCheckRegistryTest, EveryNnGradientIsChecked) {
  std::set<std::string> checked;
  for (const GradCase& c : GradCases()) checked.insert(c.op);
  for (const char* op :
       {"Relu", "BiasAdd", "Softmax", "LogSoftmax", "SparseSoftmaxCrossEntropyWithLogits",
        "SoftmaxCrossEntropyWithLogits", "Conv2D", "MaxPool", "AvgPool", "AvgPoolGrad",
        "FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3", "LRN"}) {
    EXPECT_NE(GradientRegistry::Global()->Find(op), nullptr) << op << " has no gradient";
    EXPECT_TRUE(checked.count(op)) << op << " has no gradient row";
  }
}

}  // namespace
}  // namespace dflow
