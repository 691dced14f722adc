#include "dflow/client/gradient_check.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "dflow/client/client_session.h"
#include "dflow/client/gradients.h"
#include "dflow/client/ops.h"
#include "dflow/framework/status.h"

namespace dflow {
namespace {

constexpr char kCall[] = "[ComputeGradientError] ";

absl::Status CheckFloat(const Tensor& t, const std::string& what) {
  if (t.dtype() == DT_FLOAT || t.dtype() == DT_DOUBLE) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(kCall, what, " is ", DataTypeString(t.dtype()), ", not float or double"));
}

// REQUIRES: t is float or double.
double Get(const Tensor& t, int64_t k) {
  return t.dtype() == DT_FLOAT ? t.flat<float>()[k] : t.flat<double>()[k];
}

void Set(Tensor* t, int64_t k, double v) {
  if (t->dtype() == DT_FLOAT) {
    t->flat<float>()[k] = static_cast<float>(v);
  } else {
    t->flat<double>()[k] = v;
  }
}

// A copy with its own buffer (Tensor copies share theirs).
Tensor DeepCopy(const Tensor& t) {
  Tensor copy(t.dtype(), t.shape());
  for (int64_t k = 0; k < t.NumElements(); ++k) Set(&copy, k, Get(t, k));
  return copy;
}

// Evaluates the Jacobians both ways for one check.
class GradientChecker {
 public:
  GradientChecker(const Scope& scope, const std::vector<Output>& xs,
                  const std::vector<Tensor>& x_values, const Output& y)
      : scope_(scope), xs_(xs), y_(y) {
    for (const Tensor& v : x_values) values_.push_back(DeepCopy(v));
  }

  absl::StatusOr<double> Run(double delta);

 private:
  ClientSession::FeedType Feeds() const {
    ClientSession::FeedType feeds;
    for (size_t i = 0; i < xs_.size(); ++i) feeds.emplace_back(xs_[i], values_[i]);
    return feeds;
  }
  absl::StatusOr<Tensor> EvalY(const ClientSession& session) const;
  // symbolic[i][k * ny + j] = d y_j / d x_i[k].
  absl::Status SymbolicJacobian(const ClientSession& session, const Output& dy,
                                const std::vector<Output>& dxs, int64_t ny);
  absl::StatusOr<double> CompareNumeric(const ClientSession& session, double delta, int64_t ny);

  Scope scope_;
  std::vector<Output> xs_;
  Output y_;
  std::vector<Tensor> values_;
  TensorShape y_shape_;
  std::vector<std::vector<double>> symbolic_;
};

absl::StatusOr<Tensor> GradientChecker::EvalY(const ClientSession& session) const {
  std::vector<Tensor> out;
  RETURN_IF_ERROR(session.Run(Feeds(), {y_}, &out));
  return out[0];
}

absl::Status GradientChecker::SymbolicJacobian(const ClientSession& session, const Output& dy,
                                               const std::vector<Output>& dxs, int64_t ny) {
  symbolic_.assign(xs_.size(), {});
  for (size_t i = 0; i < xs_.size(); ++i) symbolic_[i].assign(values_[i].NumElements() * ny, 0);
  for (int64_t j = 0; j < ny; ++j) {
    Tensor unit(y_.type(), y_shape_);
    Set(&unit, j, 1.0);
    ClientSession::FeedType feeds = Feeds();
    feeds.emplace_back(dy, unit);
    std::vector<Tensor> out;
    RETURN_IF_ERROR(session.Run(feeds, dxs, &out));
    for (size_t i = 0; i < xs_.size(); ++i) {
      if (out[i].shape() != values_[i].shape()) {
        return absl::InvalidArgumentError(absl::StrCat(
            kCall, "the gradient of ", xs_[i].name(), " has shape ", out[i].shape().DebugString(),
            " but x has shape ", values_[i].shape().DebugString()));
      }
      RETURN_IF_ERROR(CheckFloat(out[i], "the gradient of " + xs_[i].name()));
      for (int64_t k = 0; k < out[i].NumElements(); ++k) {
        symbolic_[i][k * ny + j] = Get(out[i], k);
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<double> GradientChecker::CompareNumeric(const ClientSession& session, double delta,
                                                       int64_t ny) {
  double max_error = 0;
  for (size_t i = 0; i < xs_.size(); ++i) {
    for (int64_t k = 0; k < values_[i].NumElements(); ++k) {
      // Outputs may share the fed buffer (Identity, Reshape): perturb a copy.
      const double v = Get(values_[i], k);
      values_[i] = DeepCopy(values_[i]);
      Set(&values_[i], k, v + delta);
      ASSIGN_OR_RETURN(Tensor plus, EvalY(session));
      values_[i] = DeepCopy(values_[i]);
      Set(&values_[i], k, v - delta);
      ASSIGN_OR_RETURN(Tensor minus, EvalY(session));
      values_[i] = DeepCopy(values_[i]);
      Set(&values_[i], k, v);
      for (int64_t j = 0; j < ny; ++j) {
        const double numeric = (Get(plus, j) - Get(minus, j)) / (2 * delta);
        const double error =
            std::abs(symbolic_[i][k * ny + j] - numeric) / std::max(1.0, std::abs(numeric));
        if (!(error <= max_error)) max_error = error;  // NaN propagates.
      }
    }
  }
  return max_error;
}

absl::StatusOr<double> GradientChecker::Run(double delta) {
  if (xs_.size() != values_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(kCall, xs_.size(), " xs but ", values_.size(), " x_values"));
  }
  for (size_t i = 0; i < xs_.size(); ++i) {
    RETURN_IF_ERROR(CheckFloat(values_[i], "x_values[" + std::to_string(i) + "]"));
  }
  const Output dy = ops::Placeholder(scope_.NewSubScope("gradient_check"), y_.type());
  std::vector<Output> dxs;
  RETURN_IF_ERROR(AddSymbolicGradients(scope_, {y_}, xs_, {dy}, &dxs));
  ClientSession session(scope_);
  ASSIGN_OR_RETURN(Tensor y0, EvalY(session));
  RETURN_IF_ERROR(CheckFloat(y0, "y"));
  y_shape_ = y0.shape();
  const int64_t ny = y0.NumElements();
  RETURN_IF_ERROR(SymbolicJacobian(session, dy, dxs, ny));
  if (delta == 0) {
    const bool any_float = std::any_of(values_.begin(), values_.end(),
                                       [](const Tensor& t) { return t.dtype() == DT_FLOAT; });
    delta = any_float || y0.dtype() == DT_FLOAT ? 1e-3 : 1e-6;
  }
  return CompareNumeric(session, delta, ny);
}

}  // namespace

absl::StatusOr<double> ComputeGradientError(const Scope& scope, const std::vector<Output>& xs,
                                            const std::vector<Tensor>& x_values, const Output& y,
                                            const GradientCheckOptions& options) {
  GradientChecker checker(scope, xs, x_values, y);
  return checker.Run(options.delta);
}

}  // namespace dflow
