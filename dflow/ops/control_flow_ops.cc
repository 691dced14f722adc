// Control flow: Switch, RefSwitch, Merge, RefMerge (TensorFlow 1.x tf.cond),
// the loop nodes Enter, Exit, NextIteration, LoopCond (tf.while_loop), and
// the functional ops If, StatelessIf, While, StatelessWhile, PartitionedCall and
// StatefulPartitionedCall (tf.cond, tf.while_loop and tf.function in
// TensorFlow 2 graphs), which sessions lower into Switch/Merge, loops and
// inlined bodies before placement (dflow/runtime/function.h); they have no
// kernel.
//
// Deadness: Switch sets only the output its predicate selects; the executor
// marks the other output's edges dead, deadness spreads through every node
// it reaches, and Merge forwards whichever of its inputs is alive.
#include <initializer_list>
#include <memory>

#include "absl/strings/str_cat.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/ops/array_util.h"

namespace dflow {
namespace {

absl::Status SwitchShape(InferenceContext* c) {
  PartialShape pred;
  RETURN_IF_ERROR(c->WithRank(c->input(1), 0, &pred));
  c->set_output(0, c->input(0));
  c->set_output(1, c->input(0));
  return absl::OkStatus();
}

REGISTER_OP("Switch")
    .Input("data: T")
    .Input("pred: bool")
    .Output("output_false: T")
    .Output("output_true: T")
    .Attr("T: type")
    .SetShapeFn(SwitchShape);

REGISTER_OP("RefSwitch")
    .Input("data: Ref(T)")
    .Input("pred: bool")
    .Output("output_false: Ref(T)")
    .Output("output_true: Ref(T)")
    .Attr("T: type")
    .SetShapeFn(SwitchShape);

class SwitchOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& pred = ctx->input(1);
    if (pred.dtype() != DT_BOOL || pred.dims() != 0) {
      return ctx->InvalidArgument("pred must be a bool scalar, got ", DataTypeString(pred.dtype()),
                                  " of shape ", pred.shape().DebugString());
    }
    const int taken = pred.scalar<bool>() ? 1 : 0;
    if (ctx->input_is_ref(0)) {
      ctx->set_output_ref(taken, ctx->input_ref_mutex(0), ctx->mutable_input(0));
    } else {
      ctx->set_output(taken, ctx->input(0));
    }
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }
};
REGISTER_KERNEL(KernelDefBuilder("Switch").Device(kDeviceCPU), SwitchOp);
REGISTER_KERNEL(KernelDefBuilder("RefSwitch").Device(kDeviceCPU), SwitchOp);

absl::Status MergeShape(InferenceContext* c) {
  PartialShape out = c->input(0);
  for (int i = 1; i < c->num_inputs(); ++i) {
    if (!(c->input(i) == out)) out = PartialShape();  // Branches disagree: unknown.
  }
  c->set_output(0, out);
  c->set_output(1, PartialShape::Scalar());
  return absl::OkStatus();
}

REGISTER_OP("Merge")
    .Input("inputs: N * T")
    .Output("output: T")
    .Output("value_index: int32")
    .Attr("T: type")
    .Attr("N: int >= 1")
    .SetShapeFn(MergeShape);

REGISTER_OP("RefMerge")
    .Input("inputs: Ref(N * T)")
    .Output("output: Ref(T)")
    .Output("value_index: int32")
    .Attr("T: type")
    .Attr("N: int >= 1")
    .SetShapeFn(MergeShape);

// Runs once one input is alive (the executor hands it only that one) or,
// when all are dead, not at all: its outputs are then dead.
class MergeOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    for (int i = 0; i < ctx->num_inputs(); ++i) {
      if (!ctx->has_input(i)) continue;
      if (ctx->input_is_ref(i)) {
        ctx->set_output_ref(0, ctx->input_ref_mutex(i), ctx->mutable_input(i));
      } else {
        ctx->set_output(0, ctx->input(i));
      }
      Tensor index(DT_INT32, TensorShape({}));
      index.scalar<int32_t>() = i;
      ctx->set_output(1, std::move(index));
      return absl::OkStatus();
    }
    return ctx->InvalidArgument("no input is alive");
  }
  bool IsExpensive() const override { return false; }
};
REGISTER_KERNEL(KernelDefBuilder("Merge").Device(kDeviceCPU), MergeOp);
REGISTER_KERNEL(KernelDefBuilder("RefMerge").Device(kDeviceCPU), MergeOp);

// --- loops: TensorFlow 1.x while loops ---------------------------------------
// The executor gives these their meaning (frames and iterations, see
// dflow/runtime/control_flow.h); each kernel only forwards its input, a
// reference as a reference.

class ForwardLoopOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    if (ctx->input_is_ref(0)) {
      ctx->set_output_ref(0, ctx->input_ref_mutex(0), ctx->mutable_input(0));
    } else {
      ctx->set_output(0, ctx->input(0));
    }
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }
};

OpDefBuilder EnterSpec(const char* name, const char* in, const char* out) {
  return OpDefBuilder(name)
      .Input(in)
      .Output(out)
      .Attr("T: type")
      .Attr("frame_name: string")
      .Attr("is_constant: bool = false")
      .Attr("parallel_iterations: int = 10")
      .SetShapeFn(UnchangedShape);
}

OpDefBuilder ForwardSpec(const char* name, const char* in, const char* out) {
  return OpDefBuilder(name).Input(in).Output(out).Attr("T: type").SetShapeFn(UnchangedShape);
}

const OpDefBuilderReceiver kEnter = EnterSpec("Enter", "data: T", "output: T");
const OpDefBuilderReceiver kRefEnter = EnterSpec("RefEnter", "data: Ref(T)", "output: Ref(T)");
const OpDefBuilderReceiver kExit = ForwardSpec("Exit", "data: T", "output: T");
const OpDefBuilderReceiver kRefExit = ForwardSpec("RefExit", "data: Ref(T)", "output: Ref(T)");
const OpDefBuilderReceiver kNextIteration = ForwardSpec("NextIteration", "data: T", "output: T");
const OpDefBuilderReceiver kRefNextIteration =
    ForwardSpec("RefNextIteration", "data: Ref(T)", "output: Ref(T)");

absl::Status LoopCondShape(InferenceContext* c) {
  PartialShape pred;
  RETURN_IF_ERROR(c->WithRank(c->input(0), 0, &pred));
  c->set_output(0, PartialShape::Scalar());
  return absl::OkStatus();
}

REGISTER_OP("LoopCond").Input("input: bool").Output("output: bool").SetShapeFn(LoopCondShape);

// Runs even when its inputs are dead (TensorFlow's control_trigger).
REGISTER_OP("ControlTrigger").SetShapeFn(NoOutputs);

class ControlTriggerOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext*) override { return absl::OkStatus(); }
  bool IsExpensive() const override { return false; }
};

REGISTER_KERNEL(KernelDefBuilder("Enter").Device(kDeviceCPU), ForwardLoopOp);
REGISTER_KERNEL(KernelDefBuilder("RefEnter").Device(kDeviceCPU), ForwardLoopOp);
REGISTER_KERNEL(KernelDefBuilder("Exit").Device(kDeviceCPU), ForwardLoopOp);
REGISTER_KERNEL(KernelDefBuilder("RefExit").Device(kDeviceCPU), ForwardLoopOp);
REGISTER_KERNEL(KernelDefBuilder("NextIteration").Device(kDeviceCPU), ForwardLoopOp);
REGISTER_KERNEL(KernelDefBuilder("RefNextIteration").Device(kDeviceCPU), ForwardLoopOp);
REGISTER_KERNEL(KernelDefBuilder("LoopCond").Device(kDeviceCPU), ForwardLoopOp);
REGISTER_KERNEL(KernelDefBuilder("ControlTrigger").Device(kDeviceCPU), ControlTriggerOp);
REGISTER_KERNEL(KernelDefBuilder("ControlTrigger").Device(kDeviceGPU), ControlTriggerOp);

// --- on a GPU -----------------------------------------------------------------
// The kernels above only forward tensors, so they serve a GPU as they are, as
// TensorFlow registers them: a tf.cond or tf.while_loop whose body runs on a
// GPU stays there, instead of every loop variable crossing to the CPU and back
// each iteration. Predicates and Merge's value_index are host memory; int32
// tensors (counters, shapes) are host memory throughout, as TensorFlow's int32
// GPU kernels; strings, resources and variants always are.

const GpuForwardKernel<SwitchOp> gpu_switch("Switch", {"pred"},
                                            {"data", "pred", "output_false", "output_true"});
const GpuForwardKernel<SwitchOp> gpu_ref_switch("RefSwitch", {"pred"},
                                                {"data", "pred", "output_false", "output_true"});
const GpuForwardKernel<MergeOp> gpu_merge("Merge", {"value_index"},
                                          {"inputs", "output", "value_index"});
const GpuForwardKernel<MergeOp> gpu_ref_merge("RefMerge", {"value_index"},
                                              {"inputs", "output", "value_index"});
const GpuForwardKernel<ForwardLoopOp> gpu_enter("Enter", {}, {"data", "output"});
const GpuForwardKernel<ForwardLoopOp> gpu_ref_enter("RefEnter", {}, {"data", "output"});
const GpuForwardKernel<ForwardLoopOp> gpu_exit("Exit", {}, {"data", "output"});
const GpuForwardKernel<ForwardLoopOp> gpu_ref_exit("RefExit", {}, {"data", "output"});
const GpuForwardKernel<ForwardLoopOp> gpu_next_iteration("NextIteration", {}, {"data", "output"});
const GpuForwardKernel<ForwardLoopOp> gpu_ref_next_iteration("RefNextIteration", {},
                                                             {"data", "output"});
REGISTER_KERNEL(
    KernelDefBuilder("LoopCond").Device(kDeviceGPU).HostMemory("input").HostMemory("output"),
    ForwardLoopOp);

// --- functional ops: lowered before placement, never executed ----------------

// The stateful and stateless variants differ only in the flag; TensorFlow
// picks the stateless one when no body node is stateful.
OpDefBuilder IfSpec(const char* name) {
  return OpDefBuilder(name)
      .Input("cond: Tcond")
      .Input("input: Tin")
      .Output("output: Tout")
      .Attr("Tcond: type")
      .Attr("Tin: list(type) >= 0")
      .Attr("Tout: list(type) >= 0")
      .Attr("then_branch: func")
      .Attr("else_branch: func")
      .Attr("output_shapes: list(shape) = []")
      .SetShapeFn(UnknownShape);
}

OpDefBuilder CallSpec(const char* name) {
  return OpDefBuilder(name)
      .Input("args: Tin")
      .Output("output: Tout")
      .Attr("Tin: list(type) >= 0")
      .Attr("Tout: list(type) >= 0")
      .Attr("f: func")
      .Attr("config: string = ''")
      .Attr("config_proto: string = ''")
      .Attr("executor_type: string = ''")
      .SetShapeFn(UnknownShape);
}

OpDefBuilder WhileSpec(const char* name) {
  return OpDefBuilder(name)
      .Input("input: T")
      .Output("output: T")
      .Attr("T: list(type) >= 0")
      .Attr("cond: func")
      .Attr("body: func")
      .Attr("output_shapes: list(shape) = []")
      .Attr("parallel_iterations: int = 10")
      .SetShapeFn(UnknownShape);
}

const OpDefBuilderReceiver kIf = IfSpec("If").SetIsStateful();
const OpDefBuilderReceiver kWhile = WhileSpec("While").SetIsStateful();
const OpDefBuilderReceiver kStatelessWhile = WhileSpec("StatelessWhile");
const OpDefBuilderReceiver kStatelessIf = IfSpec("StatelessIf");
const OpDefBuilderReceiver kStatefulCall = CallSpec("StatefulPartitionedCall").SetIsStateful();
const OpDefBuilderReceiver kCall = CallSpec("PartitionedCall");

}  // namespace
}  // namespace dflow
