// Op wrappers for reference variables (VariableV2, Assign, ...) and the
// optimizer update ops (Apply* on ref variables, ResourceApply* on resource
// handles), in the shape of client/ops.h. Type attrs come from the inputs.
//
//   Output w = ops::VariableV2(root.WithOpName("w"), {2}, DT_FLOAT);
//   Output init = ops::Assign(root, w, {1.f, 2.f});
//   Output step = ops::ApplyGradientDescent(root, w, 0.1f, grad);
#ifndef DFLOW_CLIENT_TRAINING_OPS_WRAPPERS_H_
#define DFLOW_CLIENT_TRAINING_OPS_WRAPPERS_H_

#include <string>

#include "dflow/client/scope.h"

namespace dflow::ops {

// --- reference variables ------------------------------------------------------
struct VariableV2Attrs {
  std::string container;
  std::string shared_name;
};
Output VariableV2(const Scope& s, const PartialShape& shape, DataType dtype,
                  const VariableV2Attrs& attrs = {});
struct AssignAttrs {
  bool validate_shape = true;
  bool use_locking = true;
};
// Each returns the variable's ref (output_ref).
Output Assign(const Scope& s, Input ref, Input value, const AssignAttrs& attrs = {});
struct AssignUpdateAttrs {
  bool use_locking = false;
};
Output AssignAdd(const Scope& s, Input ref, Input value, const AssignUpdateAttrs& attrs = {});
Output AssignSub(const Scope& s, Input ref, Input value, const AssignUpdateAttrs& attrs = {});
Output IsVariableInitialized(const Scope& s, Input ref);

// --- optimizer updates ---------------------------------------------------------
// Apply* take ref variables and return the variable's ref; ResourceApply*
// take resource handles and return the op.
struct GradientDescentAttrs {
  bool use_locking = false;
};
Output ApplyGradientDescent(const Scope& s, Input var, Input alpha, Input delta,
                            const GradientDescentAttrs& attrs = {});
Operation ResourceApplyGradientDescent(const Scope& s, Input var, Input alpha, Input delta,
                                       const GradientDescentAttrs& attrs = {});

struct MomentumAttrs {
  bool use_locking = false;
  bool use_nesterov = false;
};
Output ApplyMomentum(const Scope& s, Input var, Input accum, Input lr, Input grad, Input momentum,
                     const MomentumAttrs& attrs = {});
Operation ResourceApplyMomentum(const Scope& s, Input var, Input accum, Input lr, Input grad,
                                Input momentum, const MomentumAttrs& attrs = {});

struct AdamAttrs {
  bool use_locking = false;
  bool use_nesterov = false;
};
// The inputs of ApplyAdam after the three variables, in the op's order.
struct AdamInputs {
  Input beta1_power;
  Input beta2_power;
  Input lr;
  Input beta1;
  Input beta2;
  Input epsilon;
  Input grad;
};
Output ApplyAdam(const Scope& s, Input var, Input m, Input v, const AdamInputs& in,
                 const AdamAttrs& attrs = {});
Operation ResourceApplyAdam(const Scope& s, Input var, Input m, Input v, const AdamInputs& in,
                            const AdamAttrs& attrs = {});

struct AdagradAttrs {
  bool use_locking = false;
  bool update_slots = true;
};
Output ApplyAdagrad(const Scope& s, Input var, Input accum, Input lr, Input grad,
                    const AdagradAttrs& attrs = {});
Operation ResourceApplyAdagrad(const Scope& s, Input var, Input accum, Input lr, Input grad,
                               const AdagradAttrs& attrs = {});

struct RMSPropAttrs {
  bool use_locking = false;
};
// The inputs of ApplyRMSProp after the three variables, in the op's order.
struct RMSPropInputs {
  Input lr;
  Input rho;
  Input momentum;
  Input epsilon;
  Input grad;
};
Output ApplyRMSProp(const Scope& s, Input var, Input ms, Input mom, const RMSPropInputs& in,
                    const RMSPropAttrs& attrs = {});
Operation ResourceApplyRMSProp(const Scope& s, Input var, Input ms, Input mom,
                               const RMSPropInputs& in, const RMSPropAttrs& attrs = {});

}  // namespace dflow::ops

#endif  // DFLOW_CLIENT_TRAINING_OPS_WRAPPERS_H_
