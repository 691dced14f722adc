#include "dflow/client/training_ops_wrappers.h"

#include "dflow/client/op_builder.h"

namespace dflow::ops {
namespace {

tensorflow::TensorShapeProto ShapeProto(const PartialShape& shape) {
  tensorflow::TensorShapeProto p;
  shape.AsProto(&p);
  return p;
}

OpBuilder AdamBuilder(const Scope& s, const char* op, Input var, Input m, Input v,
                      const AdamInputs& in, const AdamAttrs& a) {
  OpBuilder b(s, op);
  b.Input(var).Input(m).Input(v).Input(in.beta1_power).Input(in.beta2_power).Input(in.lr);
  b.Input(in.beta1).Input(in.beta2).Input(in.epsilon).Input(in.grad);
  b.Attr("use_locking", a.use_locking).Attr("use_nesterov", a.use_nesterov);
  return b;
}

OpBuilder RMSPropBuilder(const Scope& s, const char* op, Input var, Input ms, Input mom,
                         const RMSPropInputs& in, const RMSPropAttrs& a) {
  OpBuilder b(s, op);
  b.Input(var).Input(ms).Input(mom).Input(in.lr).Input(in.rho).Input(in.momentum);
  b.Input(in.epsilon).Input(in.grad).Attr("use_locking", a.use_locking);
  return b;
}

}  // namespace

Output VariableV2(const Scope& s, const PartialShape& shape, DataType dtype,
                  const VariableV2Attrs& a) {
  return OpBuilder(s, "VariableV2")
      .Attr("shape", ShapeProto(shape))
      .Attr("dtype", dtype)
      .Attr("container", a.container)
      .Attr("shared_name", a.shared_name)
      .Finish();
}

Output Assign(const Scope& s, Input ref, Input value, const AssignAttrs& a) {
  return OpBuilder(s, "Assign")
      .Input(ref)
      .Input(value)
      .Attr("validate_shape", a.validate_shape)
      .Attr("use_locking", a.use_locking)
      .Finish();
}

Output AssignAdd(const Scope& s, Input ref, Input value, const AssignUpdateAttrs& a) {
  return OpBuilder(s, "AssignAdd")
      .Input(ref)
      .Input(value)
      .Attr("use_locking", a.use_locking)
      .Finish();
}

Output AssignSub(const Scope& s, Input ref, Input value, const AssignUpdateAttrs& a) {
  return OpBuilder(s, "AssignSub")
      .Input(ref)
      .Input(value)
      .Attr("use_locking", a.use_locking)
      .Finish();
}

Output IsVariableInitialized(const Scope& s, Input ref) {
  return OpBuilder(s, "IsVariableInitialized").Input(ref).Finish();
}

Output ApplyGradientDescent(const Scope& s, Input var, Input alpha, Input delta,
                            const GradientDescentAttrs& a) {
  OpBuilder b(s, "ApplyGradientDescent");
  b.Input(var).Input(alpha).Input(delta).Attr("use_locking", a.use_locking);
  return b.Finish();
}
Operation ResourceApplyGradientDescent(const Scope& s, Input var, Input alpha, Input delta,
                                       const GradientDescentAttrs& a) {
  OpBuilder b(s, "ResourceApplyGradientDescent");
  b.Input(var).Input(alpha).Input(delta).Attr("use_locking", a.use_locking);
  return b.FinishOp();
}

Output ApplyMomentum(const Scope& s, Input var, Input accum, Input lr, Input grad, Input momentum,
                     const MomentumAttrs& a) {
  OpBuilder b(s, "ApplyMomentum");
  b.Input(var).Input(accum).Input(lr).Input(grad).Input(momentum);
  b.Attr("use_locking", a.use_locking).Attr("use_nesterov", a.use_nesterov);
  return b.Finish();
}
Operation ResourceApplyMomentum(const Scope& s, Input var, Input accum, Input lr, Input grad,
                                Input momentum, const MomentumAttrs& a) {
  OpBuilder b(s, "ResourceApplyMomentum");
  b.Input(var).Input(accum).Input(lr).Input(grad).Input(momentum);
  b.Attr("use_locking", a.use_locking).Attr("use_nesterov", a.use_nesterov);
  return b.FinishOp();
}

Output ApplyAdam(const Scope& s, Input var, Input m, Input v, const AdamInputs& in,
                 const AdamAttrs& a) {
  OpBuilder b = AdamBuilder(s, "ApplyAdam", var, m, v, in, a);
  return b.Finish();
}
Operation ResourceApplyAdam(const Scope& s, Input var, Input m, Input v, const AdamInputs& in,
                            const AdamAttrs& a) {
  OpBuilder b = AdamBuilder(s, "ResourceApplyAdam", var, m, v, in, a);
  return b.FinishOp();
}

Output ApplyAdagrad(const Scope& s, Input var, Input accum, Input lr, Input grad,
                    const AdagradAttrs& a) {
  OpBuilder b(s, "ApplyAdagrad");
  b.Input(var).Input(accum).Input(lr).Input(grad);
  b.Attr("use_locking", a.use_locking).Attr("update_slots", a.update_slots);
  return b.Finish();
}
Operation ResourceApplyAdagrad(const Scope& s, Input var, Input accum, Input lr, Input grad,
                               const AdagradAttrs& a) {
  OpBuilder b(s, "ResourceApplyAdagrad");
  b.Input(var).Input(accum).Input(lr).Input(grad);
  b.Attr("use_locking", a.use_locking).Attr("update_slots", a.update_slots);
  return b.FinishOp();
}

Output ApplyRMSProp(const Scope& s, Input var, Input ms, Input mom, const RMSPropInputs& in,
                    const RMSPropAttrs& a) {
  OpBuilder b = RMSPropBuilder(s, "ApplyRMSProp", var, ms, mom, in, a);
  return b.Finish();
}
Operation ResourceApplyRMSProp(const Scope& s, Input var, Input ms, Input mom,
                               const RMSPropInputs& in, const RMSPropAttrs& a) {
  OpBuilder b = RMSPropBuilder(s, "ResourceApplyRMSProp", var, ms, mom, in, a);
  return b.FinishOp();
}

}  // namespace dflow::ops
