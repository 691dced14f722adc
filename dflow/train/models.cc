#include "dflow/train/models.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "dflow/client/ops.h"
#include "dflow/framework/status.h"
#include "dflow/train/initializers.h"

namespace dflow {
namespace {

struct Placeholders {
  Output features;
  Output labels;
};

// Placeholders, or with an input in the graph, placeholders defaulting to
// it (fed only to evaluate other data).
Placeholders MakePlaceholders(const Scope& scope, const ModelOptions& o) {
  Placeholders p;
  const PartialShape features_shape({-1, o.input_dim}), labels_shape({-1});
  if (o.input_features.valid()) {
    p.features =
        ops::PlaceholderWithDefault(scope.WithOpName("features"), o.input_features, features_shape);
    p.labels = ops::PlaceholderWithDefault(scope.WithOpName("labels"), o.input_labels, labels_shape);
    return p;
  }
  p.features = ops::Placeholder(scope.WithOpName("features"), DT_FLOAT, {.shape = features_shape});
  p.labels = ops::Placeholder(scope.WithOpName("labels"), DT_INT32, {.shape = labels_shape});
  return p;
}

// Adds `name`/w (Glorot uniform, seeded) and `name`/b (zeros) to `model`,
// or, for another tower, the next two of `reuse`.
absl::Status AddLayerVariables(const Scope& scope, const std::string& name,
                               const TensorShape& w_shape, int64_t seed, Model* model,
                               const std::vector<Variable>* reuse) {
  if (reuse != nullptr) {
    const size_t next = model->variables.size();
    if (next + 2 > reuse->size() || (*reuse)[next].shape() != w_shape) {
      return absl::InvalidArgumentError(
          absl::StrCat("[models] the variables to reuse do not fit layer '", name, "'"));
    }
    model->variables.push_back((*reuse)[next]);
    model->variables.push_back((*reuse)[next + 1]);
    return absl::OkStatus();
  }
  Scope layer = scope.NewSubScope(name);
  ASSIGN_OR_RETURN(Variable w,
                   MakeVariable(layer, "w", w_shape, DT_FLOAT, GlorotUniformInitializer(seed)));
  const int64_t out = w_shape.dim_size(w_shape.dims() - 1);
  ASSIGN_OR_RETURN(Variable b,
                   MakeVariable(layer, "b", TensorShape({out}), DT_FLOAT, ZerosInitializer()));
  model->variables.push_back(w);
  model->variables.push_back(b);
  return absl::OkStatus();
}

// x @ w + b for the last two variables added, optionally ReLU'd.
absl::StatusOr<Output> Dense(const Scope& scope, const std::string& name, const Output& x,
                             int64_t in, int64_t out, int64_t seed, bool relu, Model* model,
                             const std::vector<Variable>* reuse) {
  RETURN_IF_ERROR(AddLayerVariables(scope, name, TensorShape({in, out}), seed, model, reuse));
  const Variable& w = model->variables[model->variables.size() - 2];
  const Variable& b = model->variables.back();
  Scope layer = scope.NewSubScope(name + "_op");
  Output y = ops::BiasAdd(layer, ops::MatMul(layer, x, w.value()), b.value());
  return relu ? ops::Relu(layer, y) : y;
}

// conv SAME + bias + ReLU, then 2x2 max pool.
absl::StatusOr<Output> ConvPool(const Scope& scope, const std::string& name, const Output& x,
                                int64_t in_channels, int64_t out_channels, int64_t seed,
                                Model* model, const std::vector<Variable>* reuse) {
  RETURN_IF_ERROR(AddLayerVariables(scope, name, TensorShape({3, 3, in_channels, out_channels}),
                                    seed, model, reuse));
  const Variable& w = model->variables[model->variables.size() - 2];
  const Variable& b = model->variables.back();
  Scope layer = scope.NewSubScope(name + "_op");
  Output conv = ops::Conv2D(layer, x, w.value(), {1, 1, 1, 1}, "SAME");
  Output act = ops::Relu(layer, ops::BiasAdd(layer, conv, b.value()));
  return ops::MaxPool(layer, act, {1, 2, 2, 1}, {1, 2, 2, 1}, "VALID");
}

// Loss, accuracy and correct count from logits and labels.
absl::StatusOr<Model> Finish(const Scope& scope, Model model) {
  Scope s = scope.NewSubScope("metrics");
  ops::XentOutputs xent = ops::SparseSoftmaxCrossEntropyWithLogits(s, model.logits, model.labels);
  model.loss = ops::Mean(s.WithOpName("loss"), xent.loss, {0});
  Output predicted = ops::ArgMax(s, model.logits, 1, DT_INT32);
  Output hits = ops::Cast(s, ops::Equal(s, predicted, model.labels), DT_FLOAT);
  model.accuracy = ops::Mean(s.WithOpName("accuracy"), hits, {0});
  model.correct = ops::Sum(s.WithOpName("correct"), hits, {0});
  RETURN_IF_ERROR(scope.status());
  return model;
}

}  // namespace

absl::StatusOr<Model> BuildMlp(const Scope& scope, const ModelOptions& options) {
  if (options.input_dim < 1 || options.num_classes < 1) {
    return absl::InvalidArgumentError(absl::StrCat("[BuildMlp] input_dim and num_classes must be ",
                                                   ">= 1, got ", options.input_dim, " and ",
                                                   options.num_classes));
  }
  Model model;
  Placeholders p = MakePlaceholders(scope, options);
  model.features = p.features;
  model.labels = p.labels;
  Scope mlp = scope.NewSubScope("mlp");
  ASSIGN_OR_RETURN(Output h1, Dense(mlp, "hidden1", p.features, options.input_dim, 256,
                                    options.seed, /*relu=*/true, &model, options.reuse));
  ASSIGN_OR_RETURN(Output h2, Dense(mlp, "hidden2", h1, 256, 256, options.seed + 1,
                                    /*relu=*/true, &model, options.reuse));
  ASSIGN_OR_RETURN(model.logits, Dense(mlp, "logits", h2, 256, options.num_classes,
                                       options.seed + 2, /*relu=*/false, &model, options.reuse));
  return Finish(scope, std::move(model));
}

absl::StatusOr<Model> BuildCnn(const Scope& scope, const ModelOptions& options) {
  if (options.input_dim != 784 || options.num_classes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("[BuildCnn] needs 28x28 images (input_dim 784) and num_classes >= 1, got ",
                     options.input_dim, " and ", options.num_classes));
  }
  Model model;
  Placeholders p = MakePlaceholders(scope, options);
  model.features = p.features;
  model.labels = p.labels;
  Scope cnn = scope.NewSubScope("cnn");
  Output images = ops::Reshape(cnn, p.features, {-1, 28, 28, 1});
  ASSIGN_OR_RETURN(Output c1,
                   ConvPool(cnn, "conv1", images, 1, 16, options.seed, &model, options.reuse));
  ASSIGN_OR_RETURN(Output c2,
                   ConvPool(cnn, "conv2", c1, 16, 32, options.seed + 1, &model, options.reuse));
  constexpr int64_t kFlat = 7 * 7 * 32;
  Output flat = ops::Reshape(cnn, c2, {-1, static_cast<int32_t>(kFlat)});
  ASSIGN_OR_RETURN(Output h, Dense(cnn, "dense", flat, kFlat, 128, options.seed + 2,
                                   /*relu=*/true, &model, options.reuse));
  ASSIGN_OR_RETURN(model.logits, Dense(cnn, "logits", h, 128, options.num_classes, options.seed + 3,
                                       /*relu=*/false, &model, options.reuse));
  return Finish(scope, std::move(model));
}

}  // namespace dflow
