// Checks symbolic gradients against finite differences, as TensorFlow's
// ComputeGradientError does:
//
//   Output x = ops::Placeholder(root, DT_DOUBLE);
//   Output y = ops::Tanh(root, x);
//   ASSIGN_OR_RETURN(double err, ComputeGradientError(root, {x}, {x_value}, y));
//   // err < 1e-6 for a correct gradient in double precision.
#ifndef DFLOW_CLIENT_GRADIENT_CHECK_H_
#define DFLOW_CLIENT_GRADIENT_CHECK_H_

#include <vector>

#include "absl/status/statusor.h"
#include "dflow/client/scope.h"
#include "dflow/framework/tensor.h"

namespace dflow {

struct GradientCheckOptions {
  // Step of the central differences; 0 picks 1e-3 for float inputs and
  // 1e-6 for double inputs.
  double delta = 0;
};

// Builds dy/dxs with AddSymbolicGradients, then compares, entry by entry,
// the Jacobian of `y` with respect to every x (each fed with its value from
// `x_values`) obtained from the symbolic gradient with the one obtained by
// central differences (y(x + delta) - y(x - delta)) / (2 delta). Returns the
// largest |symbolic - numeric| / max(1, |numeric|).
// REQUIRES: xs and y are float or double; every x can be fed (a
// Placeholder, typically). Fails when the gradient cannot be built or run,
// or when a gradient's shape differs from its x's.
absl::StatusOr<double> ComputeGradientError(const Scope& scope, const std::vector<Output>& xs,
                                            const std::vector<Tensor>& x_values, const Output& y,
                                            const GradientCheckOptions& options = {});

}  // namespace dflow

#endif  // DFLOW_CLIENT_GRADIENT_CHECK_H_
