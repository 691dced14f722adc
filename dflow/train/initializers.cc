#include "dflow/train/initializers.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

namespace dflow {
namespace {

// TensorFlow's DEFAULT_GRAPH_SEED: the seed attr of a seeded op when the
// graph itself has no seed.
constexpr int64_t kDefaultGraphSeed = 87654321;
// array_ops.zeros/ones write a Const below this many elements, a Fill above.
constexpr int64_t kMaxConstElements = 1000;

// A scalar of `dtype` holding `value` (InvalidArgument for non-numeric dtypes).
absl::StatusOr<Tensor> ScalarOf(DataType dtype, double value) {
  Tensor t(dtype);
  RETURN_IF_ERROR(SwitchNumeric(dtype, "initializer", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    t.flat<T>()[0] = static_cast<T>(value);
    return absl::OkStatus();
  }));
  return t;
}

Tensor ShapeTensor(const TensorShape& shape) {
  std::vector<int32_t> dims(shape.dim_sizes().begin(), shape.dim_sizes().end());
  return Tensor::Vec<int32_t>(dims);
}

// A tensor of `shape` whose every element is `value`: a Const named `name`
// for small shapes, a Fill for large ones (as array_ops.zeros does).
Output Filled(const Scope& s, const std::string& name, const TensorShape& shape, DataType dtype,
              double value) {
  absl::StatusOr<Tensor> scalar = ScalarOf(dtype, value);
  if (!scalar.ok()) {
    s.UpdateStatus(scalar.status());
    return Output();
  }
  if (shape.num_elements() >= kMaxConstElements) {
    Scope fill = s.NewSubScope(name);
    return ops::Fill(fill, ops::Const(fill.WithOpName("shape_as_tensor"), ShapeTensor(shape)),
                     ops::Const(fill.WithOpName("Const"), *scalar));
  }
  Tensor t(dtype, shape);
  SwitchNumeric(dtype, "initializer", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    std::fill(t.flat<T>().begin(), t.flat<T>().end(), scalar->scalar<T>());
    return absl::OkStatus();
  }).IgnoreError();  // The dtype was checked by ScalarOf.
  return ops::Const(s.WithOpName(name), t);
}

// scale * random + offset, all in `dtype`, under the subscope `name`.
Output ScaleAndShift(const Scope& s, Output random, DataType dtype, double scale, double offset) {
  absl::StatusOr<Tensor> scale_t = ScalarOf(dtype, scale);
  absl::StatusOr<Tensor> offset_t = ScalarOf(dtype, offset);
  if (!scale_t.ok() || !offset_t.ok()) {
    s.UpdateStatus(scale_t.ok() ? offset_t.status() : scale_t.status());
    return Output();
  }
  return ops::Add(s, ops::Mul(s, random, *scale_t), *offset_t);
}

using RandomOp = Output (*)(const Scope&, Input, DataType, const ops::RandomAttrs&);

Initializer Random(const char* name, RandomOp op, double scale, double offset,
                   std::optional<int64_t> seed) {
  return [=](const Scope& scope, const TensorShape& shape, DataType dtype) {
    Scope s = scope.NewSubScope(name);
    Output random = op(s, ShapeTensor(shape), dtype, OpSeeds(seed));
    return ScaleAndShift(s, random, dtype, scale, offset);
  };
}

// The float the op computes with for `v` (TensorFlow converts Python floats
// to the variable's dtype before subtracting).
double InDtype(DataType dtype, double v) {
  return dtype == DT_FLOAT ? static_cast<double>(static_cast<float>(v)) : v;
}

}  // namespace

ops::RandomAttrs OpSeeds(std::optional<int64_t> seed) {
  if (!seed.has_value()) return ops::RandomAttrs{};
  return ops::RandomAttrs{.seed = kDefaultGraphSeed, .seed2 = *seed};
}

Fans ComputeFans(const TensorShape& shape) {
  const int rank = shape.dims();
  if (rank == 0) return {1, 1};
  if (rank == 1)
    return {static_cast<double>(shape.dim_size(0)), static_cast<double>(shape.dim_size(0))};
  double receptive = 1;
  for (int i = 0; i < rank - 2; ++i) receptive *= static_cast<double>(shape.dim_size(i));
  return {static_cast<double>(shape.dim_size(rank - 2)) * receptive,
          static_cast<double>(shape.dim_size(rank - 1)) * receptive};
}

Initializer ZerosInitializer() {
  return [](const Scope& s, const TensorShape& shape, DataType dtype) {
    return Filled(s, "zeros", shape, dtype, 0.0);
  };
}

Initializer OnesInitializer() {
  return [](const Scope& s, const TensorShape& shape, DataType dtype) {
    return Filled(s, "ones", shape, dtype, 1.0);
  };
}

Initializer ConstantInitializer(double value) {
  return [value](const Scope& s, const TensorShape& shape, DataType dtype) {
    return Filled(s, "Const", shape, dtype, value);
  };
}

Initializer RandomNormalInitializer(double mean, double stddev, std::optional<int64_t> seed) {
  return Random("random_normal", &ops::RandomNormal, stddev, mean, seed);
}

Initializer TruncatedNormalInitializer(double mean, double stddev, std::optional<int64_t> seed) {
  return Random("truncated_normal", &ops::TruncatedNormal, stddev, mean, seed);
}

Initializer RandomUniformInitializer(double minval, double maxval, std::optional<int64_t> seed) {
  return [=](const Scope& scope, const TensorShape& shape, DataType dtype) {
    const double lo = InDtype(dtype, minval), hi = InDtype(dtype, maxval);
    return Random("random_uniform", &ops::RandomUniform, InDtype(dtype, hi - lo), lo, seed)(
        scope, shape, dtype);
  };
}

Initializer GlorotUniformInitializer(std::optional<int64_t> seed) {
  return [seed](const Scope& scope, const TensorShape& shape, DataType dtype) {
    // VarianceScaling(scale=1, mode="fan_avg", distribution="uniform").
    const Fans fans = ComputeFans(shape);
    const double scale = 1.0 / std::max(1.0, (fans.fan_in + fans.fan_out) / 2.0);
    const double limit = std::sqrt(3.0 * scale);
    return RandomUniformInitializer(-limit, limit, seed)(scope, shape, dtype);
  };
}

}  // namespace dflow
