// Optimizers as in TensorFlow 1.x (tf.compat.v1.train.*Optimizer): they add
// to a graph the ops that update variables from gradients, with the same
// defaults, node names and slot variables as TensorFlow's Python.
//
//   ASSIGN_OR_RETURN(Variable global_step, CreateGlobalStep(root));
//   AdamOptimizer opt({.learning_rate = 0.01f});
//   ASSIGN_OR_RETURN(Operation train, opt.Minimize(root, loss, {w, b}, &global_step));
//   Operation init = GlobalVariablesInitializer(root);   // after Minimize: slots too
//   session.Run({}, {}, {init}, nullptr);
//   for (...) session.Run(feeds, {loss}, {train}, &out);
//
// For optimizer "Adam" and variable "w" (with `scope` the root scope):
//   w/Adam, w/Adam_1            slot variables (m, v), colocated with w
//   beta1_power, beta2_power    Adam's step counters, colocated with the
//                               first variable by name
//   Adam/learning_rate, ...     hyperparameter constants (float32, cast for
//                               other variable dtypes)
//   Adam/update_w/ApplyAdam     the update (ResourceApplyAdam for resource
//                               variables), colocated with w
//   Adam                        the train op: a NoOp grouping the updates, or,
//                               with a global step, Adam/update (that NoOp)
//                               then "Adam" = AssignAddVariableOp(global_step, 1)
// Slot variables are of the same kind (resource or ref) as their variable.
// Every update locks its variables (see ops/training_ops.cc). An optimizer
// object is not thread-safe; build graphs from one thread.
#ifndef DFLOW_TRAIN_OPTIMIZER_H_
#define DFLOW_TRAIN_OPTIMIZER_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "dflow/client/scope.h"
#include "dflow/train/variables.h"

namespace dflow {

struct GradAndVar {
  Output grad;  // Invalid: no gradient (the variable is skipped).
  Variable var;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  const std::string& name() const { return name_; }

  // d(loss)/d(var) for each variable (AddSymbolicGradients; a variable the
  // loss does not depend on gets zeros).
  absl::StatusOr<std::vector<GradAndVar>> ComputeGradients(const Scope& scope, const Output& loss,
                                                           const std::vector<Variable>& var_list);
  // Adds slots (once per variable), one update per pair, and the train op;
  // with `global_step` (not owned), the train op also adds 1 to it after
  // every update. InvalidArgument when no pair has a gradient or a
  // gradient's dtype differs from its variable's.
  absl::StatusOr<Operation> ApplyGradients(const Scope& scope,
                                           const std::vector<GradAndVar>& grads_and_vars,
                                           const Variable* global_step = nullptr);
  // ComputeGradients then ApplyGradients.
  absl::StatusOr<Operation> Minimize(const Scope& scope, const Output& loss,
                                     const std::vector<Variable>& var_list,
                                     const Variable* global_step = nullptr);

  // The slot `slot` ("momentum", "m", "v", "accumulator", "rms") of `var`;
  // NotFound before ApplyGradients created it.
  absl::StatusOr<Variable> GetSlot(const Variable& var, const std::string& slot) const;
  // Every variable this optimizer created (slots, Adam's beta powers).
  std::vector<Variable> variables() const;

 protected:
  Optimizer(std::string name, bool use_locking)
      : name_(std::move(name)), use_locking_(use_locking) {}

  // Creates the slots of each variable (CreateSlot) and other variables.
  virtual absl::Status CreateSlots(const Scope& scope, const std::vector<Variable>& vars) {
    return absl::OkStatus();
  }
  // Adds the update of one variable. `scope` is "<name>/update_<var>/",
  // colocated with the variable.
  virtual Operation ApplyDense(const Scope& scope, const Output& grad, const Variable& var) = 0;
  // Ops to run after every update (Adam's beta powers); `scope` is the
  // optimizer's name scope.
  virtual std::vector<Operation> Finish(const Scope& scope, const std::vector<Operation>& updates) {
    return {};
  }

  // Declares hyperparameter `name` (a Const "<opt>/<name>" when `value` is
  // a literal, converted to float32 as TensorFlow converts Python floats).
  void AddHyper(const std::string& name, const Input& value);
  // Hyperparameter `name` as a tensor of `dtype` (a Cast in `scope` when needed).
  Output Hyper(const Scope& scope, const std::string& name, DataType dtype) const;

  // Creates slot `slot` of `var`, named "<var>/<optimizer name>" (uniquified),
  // unless it exists.
  absl::Status CreateSlot(const Scope& scope, const Variable& var, const std::string& slot,
                          const Initializer& init);
  // REQUIRES: CreateSlot(var, slot) succeeded.
  const Variable& Slot(const Variable& var, const std::string& slot) const;
  // A variable of the optimizer that is no slot (Adam's beta powers).
  absl::StatusOr<Variable> NonSlotVariable(const Scope& scope, const std::string& name,
                                           const Tensor& initial_value,
                                           const Variable& colocate_with);
  const Variable* FindNonSlot(const std::string& name) const;

  bool use_locking() const { return use_locking_; }

 private:
  absl::Status Prepare(const Scope& scope);
  Operation GroupNamed(const Scope& scope, const std::string& name,
                       const std::vector<Operation>& deps);
  // Adds 1 to `global_step` after `after`; the op is named `opt_name`, the
  // name of the optimizer's scope `opt`.
  Operation IncrementGlobalStep(const Scope& scope, const Scope& opt, const std::string& opt_name,
                                const Operation& after, const Variable& global_step);

  const std::string name_;
  const bool use_locking_;
  std::vector<std::pair<std::string, Input>> hypers_;
  std::map<std::string, Output> hyper_tensors_;                    // By name, after Prepare.
  std::map<std::pair<std::string, std::string>, Variable> slots_;  // (var, slot)
  std::map<std::string, Variable> non_slots_;
};

// var -= learning_rate * grad.
class GradientDescentOptimizer : public Optimizer {
 public:
  explicit GradientDescentOptimizer(Input learning_rate, bool use_locking = false,
                                    std::string name = "GradientDescent");

 protected:
  Operation ApplyDense(const Scope& scope, const Output& grad, const Variable& var) override;
};

struct MomentumOptions {
  bool use_locking = false;
  bool use_nesterov = false;
  std::string name = "Momentum";
};
// accum = momentum * accum + grad; var -= learning_rate * accum (see ApplyMomentum).
class MomentumOptimizer : public Optimizer {
 public:
  MomentumOptimizer(Input learning_rate, Input momentum, MomentumOptions options = {});

 protected:
  absl::Status CreateSlots(const Scope& scope, const std::vector<Variable>& vars) override;
  Operation ApplyDense(const Scope& scope, const Output& grad, const Variable& var) override;

 private:
  const bool use_nesterov_;
};

struct AdamOptions {
  Input learning_rate = 0.001f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float epsilon = 1e-8f;
  bool use_locking = false;
  std::string name = "Adam";
};
class AdamOptimizer : public Optimizer {
 public:
  explicit AdamOptimizer(AdamOptions options = {});

 protected:
  absl::Status CreateSlots(const Scope& scope, const std::vector<Variable>& vars) override;
  Operation ApplyDense(const Scope& scope, const Output& grad, const Variable& var) override;
  std::vector<Operation> Finish(const Scope& scope, const std::vector<Operation>& updates) override;

 private:
  const float beta1_;
  const float beta2_;
};

struct AdagradOptions {
  float initial_accumulator_value = 0.1f;
  bool use_locking = false;
  std::string name = "Adagrad";
};
class AdagradOptimizer : public Optimizer {
 public:
  explicit AdagradOptimizer(Input learning_rate, AdagradOptions options = {});

 protected:
  absl::Status CreateSlots(const Scope& scope, const std::vector<Variable>& vars) override;
  Operation ApplyDense(const Scope& scope, const Output& grad, const Variable& var) override;

 private:
  const float initial_accumulator_value_;
};

struct RMSPropOptions {
  Input decay = 0.9f;
  Input momentum = 0.0f;
  Input epsilon = 1e-10f;
  bool use_locking = false;
  std::string name = "RMSProp";
};
// Non-centered RMSProp (TensorFlow's centered=false default).
class RMSPropOptimizer : public Optimizer {
 public:
  explicit RMSPropOptimizer(Input learning_rate, RMSPropOptions options = {});

 protected:
  absl::Status CreateSlots(const Scope& scope, const std::vector<Variable>& vars) override;
  Operation ApplyDense(const Scope& scope, const Output& grad, const Variable& var) override;
};

}  // namespace dflow

#endif  // DFLOW_TRAIN_OPTIMIZER_H_
