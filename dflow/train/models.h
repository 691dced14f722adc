// The models `dflow train` trains: a multilayer perceptron and a small
// convolutional network, both classifying [B, 784] float features (28x28
// images, flattened) into int32 labels.
//
//   Scope root = Scope::NewRootScope();
//   ASSIGN_OR_RETURN(Model m, BuildMlp(root, {.seed = 7}));
//   ASSIGN_OR_RETURN(Operation train, AdamOptimizer().Minimize(root, m.loss, m.variables));
//   session.Run({{m.features, batch.features}, {m.labels, batch.labels}}, {m.loss}, {train}, &out);
//
// Weights are Glorot uniform (seeded: layer i's weights use seed + i),
// biases zeros; every variable is a resource variable.
#ifndef DFLOW_TRAIN_MODELS_H_
#define DFLOW_TRAIN_MODELS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "dflow/client/scope.h"
#include "dflow/train/variables.h"

namespace dflow {

struct ModelOptions {
  int64_t seed = 1;
  int64_t input_dim = 784;  // The CNN requires 784 (28x28x1).
  int64_t num_classes = 10;
  // Another tower of an existing model: its `variables` (not owned) are used
  // instead of new ones (TensorFlow's variable_scope reuse), only the
  // placeholders and the computation are added.
  const std::vector<Variable>* reuse = nullptr;
  // Input built in the graph (e.g. TFRecordBatches): float [B, input_dim]
  // and int32 [B]; the model's features and labels default to them.
  Output input_features;
  Output input_labels;
};

struct Model {
  Output features;                  // Placeholder float [B, input_dim] (with a default: the input).
  Output labels;                    // Placeholder int32 [B].
  Output logits;                    // float [B, num_classes].
  Output loss;                      // Mean sparse softmax cross-entropy, float scalar.
  Output accuracy;                  // Fraction of argmax(logits) == labels, float scalar.
  Output correct;                   // Number of argmax(logits) == labels, float scalar.
  std::vector<Variable> variables;  // Trainable, in layer order.
};

// input_dim -> 256 -> 256 -> num_classes, ReLU between layers.
absl::StatusOr<Model> BuildMlp(const Scope& scope, const ModelOptions& options = {});

// 28x28x1 -> conv 3x3x16 SAME + ReLU -> maxpool 2 -> conv 3x3x32 SAME + ReLU
// -> maxpool 2 -> dense 128 + ReLU -> num_classes. InvalidArgument unless
// input_dim is 784.
absl::StatusOr<Model> BuildCnn(const Scope& scope, const ModelOptions& options = {});

}  // namespace dflow

#endif  // DFLOW_TRAIN_MODELS_H_
