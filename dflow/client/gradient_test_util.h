// Rows of the gradient harness (gradients_test.cc): each row builds a small
// graph over fed inputs and is checked against finite differences. Any test
// file of the client layer can add rows for the gradients it owns:
//
//   const GradCaseRegistrar kNnRows({
//       {"Relu", "Relu", {GradInput({2, 3}, 0.1, 1, /*random_sign=*/true)},
//        UnaryGradCase("Relu")},
//   });
//
// GradRegistryTest.EveryGradientIsChecked fails for a registered gradient
// without a row.
#ifndef DFLOW_CLIENT_GRADIENT_TEST_UTIL_H_
#define DFLOW_CLIENT_GRADIENT_TEST_UTIL_H_

#include <functional>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "dflow/client/op_builder.h"
#include "dflow/client/scope.h"
#include "dflow/framework/tensor.h"
#include "dflow/framework/tensor_shape.h"

namespace dflow {

// One fed input: uniform values in [lo, hi] (or, with random_sign, their
// magnitudes, with a random sign: keeps kinks such as |x| at 0 away).
struct GradInputSpec {
  TensorShape shape;
  double lo = -1, hi = 1;
  bool random_sign = false;
};

inline GradInputSpec GradInput(std::initializer_list<int64_t> dims, double lo = -1, double hi = 1,
                               bool random_sign = false) {
  return GradInputSpec{TensorShape(std::vector<int64_t>(dims)), lo, hi, random_sign};
}

// Builds y from the fed inputs.
using GradBuildFn = std::function<Output(const Scope&, const std::vector<Output>&)>;

struct GradCase {
  std::string name;  // Test name (letters, digits, '_').
  std::string op;    // The op whose gradient the row checks ("" for composites).
  std::vector<GradInputSpec> inputs;
  GradBuildFn build;
  DataType dtype = DT_DOUBLE;  // Of the fed inputs; float rows get a looser bound.
  // The largest gradient error allowed; 0: 1e-3 for double rows, 1e-2 for float ones.
  double max_error = 0;
};

// gtest prints the row's name instead of its bytes.
inline void PrintTo(const GradCase& c, std::ostream* os) { *os << c.name; }

// Every registered row, from all test files of the binary.
inline std::vector<GradCase>& GradCases() {
  static auto* rows = new std::vector<GradCase>;
  return *rows;
}

struct GradCaseRegistrar {
  explicit GradCaseRegistrar(std::vector<GradCase> rows) {
    GradCases().insert(GradCases().end(), rows.begin(), rows.end());
  }
};

// Values for a fed input of `spec` (float or double), drawn from `rng`.
inline Tensor RandomGradInput(DataType dtype, const GradInputSpec& spec, std::mt19937* rng) {
  std::uniform_real_distribution<double> u(spec.lo, spec.hi);
  std::bernoulli_distribution coin(0.5);
  Tensor t(dtype, spec.shape);
  for (int64_t k = 0; k < t.NumElements(); ++k) {
    double v = u(*rng);
    if (spec.random_sign && coin(*rng)) v = -v;
    if (dtype == DT_FLOAT) {
      t.flat<float>()[k] = static_cast<float>(v);
    } else {
      t.flat<double>()[k] = v;
    }
  }
  return t;
}

// `op` applied to the first one or two inputs.
inline GradBuildFn UnaryGradCase(const std::string& op) {
  return [op](const Scope& s, const std::vector<Output>& x) {
    return OpBuilder(s, op).Input(x[0]).Finish();
  };
}
inline GradBuildFn BinaryGradCase(const std::string& op) {
  return [op](const Scope& s, const std::vector<Output>& x) {
    return OpBuilder(s, op).Input(x[0]).Input(x[1]).Finish();
  };
}

}  // namespace dflow

#endif  // DFLOW_CLIENT_GRADIENT_TEST_UTIL_H_
