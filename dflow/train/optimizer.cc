#include "dflow/train/optimizer.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dflow/client/gradients.h"
#include "dflow/client/ops.h"
#include "dflow/client/training_ops_wrappers.h"
#include "dflow/framework/attr_util.h"

namespace dflow {

// --- Optimizer ---------------------------------------------------------------------

absl::StatusOr<std::vector<GradAndVar>> Optimizer::ComputeGradients(
    const Scope& scope, const Output& loss, const std::vector<Variable>& var_list) {
  std::vector<Output> xs;
  for (const Variable& v : var_list) xs.push_back(v.handle());
  std::vector<Output> grads;
  RETURN_IF_ERROR(AddSymbolicGradients(scope, loss, xs, &grads));
  std::vector<GradAndVar> pairs;
  for (size_t i = 0; i < var_list.size(); ++i) pairs.push_back({grads[i], var_list[i]});
  return pairs;
}

absl::StatusOr<Operation> Optimizer::Minimize(const Scope& scope, const Output& loss,
                                              const std::vector<Variable>& var_list,
                                              const Variable* global_step) {
  ASSIGN_OR_RETURN(std::vector<GradAndVar> pairs, ComputeGradients(scope, loss, var_list));
  return ApplyGradients(scope, pairs, global_step);
}

absl::StatusOr<Operation> Optimizer::ApplyGradients(const Scope& scope,
                                                    const std::vector<GradAndVar>& grads_and_vars,
                                                    const Variable* global_step) {
  RETURN_IF_ERROR(scope.status());
  // 1. Keep the pairs with a gradient; check dtypes.
  std::vector<GradAndVar> pairs;
  std::vector<std::string> names;
  for (const GradAndVar& gv : grads_and_vars) {
    if (!gv.var.valid())
      return absl::InvalidArgumentError(absl::StrCat("[", name_, "] invalid variable"));
    names.push_back(gv.var.name());
    if (!gv.grad.valid()) continue;
    if (BaseType(gv.grad.type()) != gv.var.dtype()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "[", name_, "] the gradient of ", gv.var.name(), " is ", DataTypeString(gv.grad.type()),
          " but the variable is ", DataTypeString(gv.var.dtype())));
    }
    pairs.push_back(gv);
  }
  if (pairs.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("[", name_,
                                                   "] no gradients provided for any variable: [",
                                                   absl::StrJoin(names, ", "), "]"));
  }
  // 2. Slots, outside any control dependencies of the caller.
  std::vector<Variable> vars;
  for (const GradAndVar& gv : pairs) vars.push_back(gv.var);
  RETURN_IF_ERROR(CreateSlots(scope.WithNoControlDependencies(), vars));
  // 3. Hyperparameters and one update per variable, in "<name>/".
  const Scope opt = scope.NewSubScope(name_);
  const std::string opt_name = ScopeName(opt);
  RETURN_IF_ERROR(Prepare(opt));
  std::vector<Operation> updates;
  for (const GradAndVar& gv : pairs) {
    const Scope update = opt.NewSubScope("update_" + gv.var.name()).ColocateWith(gv.var.op());
    updates.push_back(ApplyDense(update, gv.grad, gv.var));
  }
  RETURN_IF_ERROR(scope.status());
  // 4. The train op, named after the optimizer's scope.
  std::vector<Operation> all = updates;
  for (const Operation& op : Finish(opt, updates)) all.push_back(op);
  Operation train;
  if (global_step == nullptr) {
    train = GroupNamed(scope, opt_name, all);
  } else {
    Operation update = ops::NoOp(opt.WithOpName("update").WithControlDependencies(all));
    train = IncrementGlobalStep(scope, opt, opt_name, update, *global_step);
  }
  RETURN_IF_ERROR(scope.status());
  return train;
}

absl::StatusOr<Variable> Optimizer::GetSlot(const Variable& var, const std::string& slot) const {
  auto it = slots_.find({var.name(), slot});
  if (it == slots_.end()) {
    return absl::NotFoundError(
        absl::StrCat("[", name_, "] no slot '", slot, "' for variable ", var.name()));
  }
  return it->second;
}

std::vector<Variable> Optimizer::variables() const {
  std::vector<Variable> out;
  for (const auto& [name, v] : non_slots_) out.push_back(v);
  for (const auto& [key, v] : slots_) out.push_back(v);
  return out;
}

void Optimizer::AddHyper(const std::string& name, const Input& value) {
  hypers_.emplace_back(name, value);
}

Output Optimizer::Hyper(const Scope& scope, const std::string& name, DataType dtype) const {
  auto it = hyper_tensors_.find(name);
  if (it == hyper_tensors_.end()) {
    scope.UpdateStatus(absl::InternalError(absl::StrCat("[", name_, "] no hyperparameter ", name)));
    return Output();
  }
  if (BaseType(it->second.type()) == dtype) return it->second;
  return ops::Cast(scope, it->second, dtype);
}

absl::Status Optimizer::Prepare(const Scope& scope) {
  for (const auto& [name, value] : hypers_) {
    if (!value.is_const()) {
      hyper_tensors_[name] = value.output();
      continue;
    }
    Tensor t = value.tensor();
    if (t.dtype() == DT_DOUBLE && t.NumElements() == 1) {
      t = Tensor::Scalar<float>(static_cast<float>(t.flat<double>()[0]));
    }
    hyper_tensors_[name] = ops::Const(scope.WithOpName(name), t);
  }
  return scope.status();
}

absl::Status Optimizer::CreateSlot(const Scope& scope, const Variable& var, const std::string& slot,
                                   const Initializer& init) {
  const auto key = std::make_pair(var.name(), slot);
  if (slots_.count(key) > 0) return absl::OkStatus();
  VariableOptions options;
  options.use_resource = var.is_resource();
  options.colocate_with = var.op();
  ASSIGN_OR_RETURN(Variable v, MakeVariable(scope, var.name() + "/" + name_, var.shape(),
                                            var.dtype(), init, options));
  slots_[key] = v;
  return absl::OkStatus();
}

const Variable& Optimizer::Slot(const Variable& var, const std::string& slot) const {
  return slots_.at({var.name(), slot});
}

absl::StatusOr<Variable> Optimizer::NonSlotVariable(const Scope& scope, const std::string& name,
                                                    const Tensor& initial_value,
                                                    const Variable& colocate_with) {
  if (const Variable* v = FindNonSlot(name)) return *v;
  VariableOptions options;
  options.use_resource = colocate_with.is_resource();
  options.colocate_with = colocate_with.op();
  ASSIGN_OR_RETURN(Variable v, MakeVariable(scope, name, initial_value, options));
  non_slots_[name] = v;
  return v;
}

const Variable* Optimizer::FindNonSlot(const std::string& name) const {
  auto it = non_slots_.find(name);
  return it == non_slots_.end() ? nullptr : &it->second;
}

Operation Optimizer::GroupNamed(const Scope& scope, const std::string& name,
                                const std::vector<Operation>& deps) {
  tensorflow::NodeDef node;
  node.set_op("NoOp");
  std::vector<Output> unused;
  return AddNodeNamed(scope.WithControlDependencies(deps), name, node, {}, &unused);
}

Operation Optimizer::IncrementGlobalStep(const Scope& scope, const Scope& opt,
                                         const std::string& opt_name, const Operation& after,
                                         const Variable& global_step) {
  Tensor one;
  if (global_step.dtype() == DT_INT64) {
    one = Tensor::Scalar<int64_t>(1);
  } else if (global_step.dtype() == DT_INT32) {
    one = Tensor::Scalar<int32_t>(1);
  } else {
    scope.UpdateStatus(absl::InvalidArgumentError(
        absl::StrCat("[", name_, "] global step ", global_step.name(),
                     " must be int64 or int32, not ", DataTypeString(global_step.dtype()))));
    return Operation();
  }
  // "<opt>/Const" runs after the updates; "<opt>" adds it to the step.
  Output increment = ops::Const(
      opt.WithOpName("Const").WithControlDependencies({after}).ColocateWith(global_step.op()), one);
  tensorflow::NodeDef node;
  if (global_step.is_resource()) {
    node.set_op("AssignAddVariableOp");
    SetAttr(&node, "dtype", global_step.dtype());
  } else {
    node.set_op("AssignAdd");
    SetAttr(&node, "T", global_step.dtype());
  }
  std::vector<Output> unused;
  return AddNodeNamed(scope.ColocateWith(global_step.op()), opt_name, node,
                      {global_step.handle(), increment}, &unused);
}

// --- GradientDescent --------------------------------------------------------------------

GradientDescentOptimizer::GradientDescentOptimizer(Input learning_rate, bool use_locking,
                                                   std::string name)
    : Optimizer(std::move(name), use_locking) {
  AddHyper("learning_rate", learning_rate);
}

Operation GradientDescentOptimizer::ApplyDense(const Scope& s, const Output& grad,
                                               const Variable& var) {
  Output lr = Hyper(s, "learning_rate", var.dtype());
  const ops::GradientDescentAttrs attrs{.use_locking = use_locking()};
  if (var.is_resource()) return ops::ResourceApplyGradientDescent(s, var.handle(), lr, grad, attrs);
  return ops::ApplyGradientDescent(s, var.handle(), lr, grad, attrs).op();
}

// --- Momentum ------------------------------------------------------------------------------

MomentumOptimizer::MomentumOptimizer(Input learning_rate, Input momentum, MomentumOptions options)
    : Optimizer(std::move(options.name), options.use_locking), use_nesterov_(options.use_nesterov) {
  AddHyper("learning_rate", learning_rate);
  AddHyper("momentum", momentum);
}

absl::Status MomentumOptimizer::CreateSlots(const Scope& s, const std::vector<Variable>& vars) {
  for (const Variable& v : vars) RETURN_IF_ERROR(CreateSlot(s, v, "momentum", ZerosInitializer()));
  return absl::OkStatus();
}

Operation MomentumOptimizer::ApplyDense(const Scope& s, const Output& grad, const Variable& var) {
  const Variable& accum = Slot(var, "momentum");
  Output lr = Hyper(s, "learning_rate", var.dtype());
  Output momentum = Hyper(s, "momentum", var.dtype());
  const ops::MomentumAttrs attrs{.use_locking = use_locking(), .use_nesterov = use_nesterov_};
  if (var.is_resource()) {
    return ops::ResourceApplyMomentum(s, var.handle(), accum.handle(), lr, grad, momentum, attrs);
  }
  return ops::ApplyMomentum(s, var.handle(), accum.handle(), lr, grad, momentum, attrs).op();
}

// --- Adam ------------------------------------------------------------------------------------

AdamOptimizer::AdamOptimizer(AdamOptions options)
    : Optimizer(std::move(options.name), options.use_locking),
      beta1_(options.beta1),
      beta2_(options.beta2) {
  AddHyper("learning_rate", options.learning_rate);
  AddHyper("beta1", options.beta1);
  AddHyper("beta2", options.beta2);
  AddHyper("epsilon", options.epsilon);
}

absl::Status AdamOptimizer::CreateSlots(const Scope& s, const std::vector<Variable>& vars) {
  // The step counters live beside the first variable by name, as in TF.
  const Variable& first =
      *std::min_element(vars.begin(), vars.end(),
                        [](const Variable& a, const Variable& b) { return a.name() < b.name(); });
  RETURN_IF_ERROR(NonSlotVariable(s, "beta1_power", Tensor::Scalar(beta1_), first).status());
  RETURN_IF_ERROR(NonSlotVariable(s, "beta2_power", Tensor::Scalar(beta2_), first).status());
  for (const Variable& v : vars) {
    RETURN_IF_ERROR(CreateSlot(s, v, "m", ZerosInitializer()));
    RETURN_IF_ERROR(CreateSlot(s, v, "v", ZerosInitializer()));
  }
  return absl::OkStatus();
}

namespace {

// The current value of `v` as `dtype`: a fresh read for resource variables
// (TF reads them where used), the shared "v/read" for ref variables.
Output ValueAs(const Scope& s, const Variable& v, DataType dtype) {
  Output value = v.is_resource() ? v.Read(s) : v.value();
  return v.dtype() == dtype ? value : ops::Cast(s, value, dtype);
}

}  // namespace

Operation AdamOptimizer::ApplyDense(const Scope& s, const Output& grad, const Variable& var) {
  const DataType t = var.dtype();
  const ops::AdamInputs in{.beta1_power = ValueAs(s, *FindNonSlot("beta1_power"), t),
                           .beta2_power = ValueAs(s, *FindNonSlot("beta2_power"), t),
                           .lr = Hyper(s, "learning_rate", t),
                           .beta1 = Hyper(s, "beta1", t),
                           .beta2 = Hyper(s, "beta2", t),
                           .epsilon = Hyper(s, "epsilon", t),
                           .grad = grad};
  const Output m = Slot(var, "m").handle(), v = Slot(var, "v").handle();
  const ops::AdamAttrs attrs{.use_locking = use_locking()};
  if (var.is_resource()) return ops::ResourceApplyAdam(s, var.handle(), m, v, in, attrs);
  return ops::ApplyAdam(s, var.handle(), m, v, in, attrs).op();
}

std::vector<Operation> AdamOptimizer::Finish(const Scope& s,
                                             const std::vector<Operation>& updates) {
  std::vector<Operation> assigns;
  for (const auto& [power, beta] : {std::pair{"beta1_power", "beta1"}, {"beta2_power", "beta2"}}) {
    const Variable& p = *FindNonSlot(power);
    const Scope after = s.WithControlDependencies(updates).ColocateWith(p.op());
    Output next = ops::Mul(after, ValueAs(after, p, p.dtype()), Hyper(after, beta, p.dtype()));
    assigns.push_back(p.Assign(after.WithNoControlDependencies(), next));
  }
  return assigns;
}

// --- Adagrad ------------------------------------------------------------------------------------

AdagradOptimizer::AdagradOptimizer(Input learning_rate, AdagradOptions options)
    : Optimizer(std::move(options.name), options.use_locking),
      initial_accumulator_value_(options.initial_accumulator_value) {
  AddHyper("learning_rate", learning_rate);
}

absl::Status AdagradOptimizer::CreateSlots(const Scope& s, const std::vector<Variable>& vars) {
  for (const Variable& v : vars) {
    RETURN_IF_ERROR(
        CreateSlot(s, v, "accumulator", ConstantInitializer(initial_accumulator_value_)));
  }
  return absl::OkStatus();
}

Operation AdagradOptimizer::ApplyDense(const Scope& s, const Output& grad, const Variable& var) {
  const Output accum = Slot(var, "accumulator").handle();
  Output lr = Hyper(s, "learning_rate", var.dtype());
  const ops::AdagradAttrs attrs{.use_locking = use_locking()};
  if (var.is_resource()) return ops::ResourceApplyAdagrad(s, var.handle(), accum, lr, grad, attrs);
  return ops::ApplyAdagrad(s, var.handle(), accum, lr, grad, attrs).op();
}

// --- RMSProp ------------------------------------------------------------------------------------

RMSPropOptimizer::RMSPropOptimizer(Input learning_rate, RMSPropOptions options)
    : Optimizer(std::move(options.name), options.use_locking) {
  AddHyper("learning_rate", learning_rate);
  AddHyper("decay", options.decay);
  AddHyper("momentum", options.momentum);
  AddHyper("epsilon", options.epsilon);
}

absl::Status RMSPropOptimizer::CreateSlots(const Scope& s, const std::vector<Variable>& vars) {
  for (const Variable& v : vars) {
    RETURN_IF_ERROR(CreateSlot(s, v, "rms", OnesInitializer()));
    RETURN_IF_ERROR(CreateSlot(s, v, "momentum", ZerosInitializer()));
  }
  return absl::OkStatus();
}

Operation RMSPropOptimizer::ApplyDense(const Scope& s, const Output& grad, const Variable& var) {
  const DataType t = var.dtype();
  const ops::RMSPropInputs in{.lr = Hyper(s, "learning_rate", t),
                              .rho = Hyper(s, "decay", t),
                              .momentum = Hyper(s, "momentum", t),
                              .epsilon = Hyper(s, "epsilon", t),
                              .grad = grad};
  const Output ms = Slot(var, "rms").handle(), mom = Slot(var, "momentum").handle();
  const ops::RMSPropAttrs attrs{.use_locking = use_locking()};
  if (var.is_resource()) return ops::ResourceApplyRMSProp(s, var.handle(), ms, mom, in, attrs);
  return ops::ApplyRMSProp(s, var.handle(), ms, mom, in, attrs).op();
}

}  // namespace dflow
