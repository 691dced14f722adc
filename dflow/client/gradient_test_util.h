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
#include <string>
#include <vector>

#include "dflow/client/op_builder.h"
#include "dflow/client/scope.h"
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
