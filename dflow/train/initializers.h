// Variable initializers, as tf.compat.v1's: each builds, in a scope, the ops
// computing an initial value of a given shape and dtype.
//
//   Initializer init = GlorotUniformInitializer(/*seed=*/42);
//   Output value = init(root.NewSubScope("w/Initializer"), TensorShape({784, 10}), DT_FLOAT);
//
// Seeds follow TensorFlow 1.x without a graph-level seed: an op seed s
// becomes the attrs seed=87654321 (TF's default graph seed), seed2=s, so
// seeded values equal TensorFlow's bit for bit; no seed gives seed=seed2=0
// (a fresh random stream per kernel).
#ifndef DFLOW_TRAIN_INITIALIZERS_H_
#define DFLOW_TRAIN_INITIALIZERS_H_

#include <cstdint>
#include <functional>
#include <optional>

#include "dflow/client/ops.h"
#include "dflow/client/scope.h"

namespace dflow {

// Adds the ops for an initial value; errors are recorded on the scope.
using Initializer =
    std::function<Output(const Scope& scope, const TensorShape& shape, DataType dtype)>;

Initializer ZerosInitializer();
Initializer OnesInitializer();
// Every element `value` (cast to the dtype).
Initializer ConstantInitializer(double value);
// mean + stddev * N(0, 1).
Initializer RandomNormalInitializer(double mean = 0.0, double stddev = 1.0,
                                    std::optional<int64_t> seed = std::nullopt);
// mean + stddev * N(0, 1) redrawn until within two standard deviations.
Initializer TruncatedNormalInitializer(double mean = 0.0, double stddev = 1.0,
                                       std::optional<int64_t> seed = std::nullopt);
// Uniform in [minval, maxval).
Initializer RandomUniformInitializer(double minval = 0.0, double maxval = 1.0,
                                     std::optional<int64_t> seed = std::nullopt);
// Uniform in [-limit, limit) with limit = sqrt(6 / (fan_in + fan_out)):
// tf.compat.v1.glorot_uniform_initializer, get_variable's default.
Initializer GlorotUniformInitializer(std::optional<int64_t> seed = std::nullopt);

// TensorFlow's fans of a weight shape: rank 0 → (1, 1); rank 1 → (n, n);
// rank 2 → (rows, cols); higher ranks multiply both by the receptive field
// (every dimension but the last two).
struct Fans {
  double fan_in;
  double fan_out;
};
Fans ComputeFans(const TensorShape& shape);

// The (seed, seed2) attrs of a random op for TF 1.x op seed `seed`.
ops::RandomAttrs OpSeeds(std::optional<int64_t> seed);

}  // namespace dflow

#endif  // DFLOW_TRAIN_INITIALIZERS_H_
