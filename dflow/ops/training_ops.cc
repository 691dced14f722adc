// Optimizer update kernels, in TensorFlow's two flavours: Apply* take the
// variable and its slots as ref inputs (VariableV2) and output the variable's
// ref; ResourceApply* take resource handles (VarHandleOp) and output nothing.
//
//   ApplyGradientDescent  var -= alpha * delta
//   ApplyMomentum         accum = accum * momentum + grad
//                         var -= lr * accum                       (plain)
//                         var -= lr * grad + lr * momentum * accum (nesterov)
//   ApplyAdam             alpha = lr * sqrt(1 - beta2^t) / (1 - beta1^t)
//                         m += (grad - m) * (1 - beta1)
//                         v += (grad^2 - v) * (1 - beta2)
//                         var -= alpha * m / (sqrt(v) + epsilon)   (plain)
//                         var -= alpha * (grad * (1 - beta1) + beta1 * m) / (sqrt(v) + epsilon)
//   ApplyAdagrad          accum += grad^2 (when update_slots); var -= lr * grad / sqrt(accum)
//   ApplyRMSProp          ms += (grad^2 - ms) * (1 - rho)
//                         mom = mom * momentum + lr * grad / sqrt(ms + epsilon); var -= mom
//
// Every update holds the exclusive locks of all the variables it touches,
// whatever use_locking says (TensorFlow lets use_locking=false updates race;
// dflow's copy-on-write of shared buffers needs the lock). A variable's
// earlier reads are snapshots that the update does not change.
#include <array>
#include <memory>
#include <string>
#include <vector>

#include "dflow/framework/shape_inference.h"
#include "dflow/ops/eigen_util.h"
#include "dflow/ops/state_ops.h"
#include "dflow/ops/variable_ops.h"

namespace dflow {
namespace {

// --- update functors ------------------------------------------------------------
//
// Each updates n elements: vars[0] is the variable, vars[1..] its slots (in
// input order), s[] the scalar inputs (in input order), g the gradient.

struct GradientDescentUpdate {
  static constexpr int kNumVars = 1;
  static constexpr int64_t kCost = 2;
  explicit GradientDescentUpdate(OpKernelConstruction*) {}
  template <typename T>
  void operator()(const std::array<T*, 1>& vars, const T* s, const T* g, int64_t n) const {
    EigenView(vars[0], n) -= EigenView(g, n) * s[0];  // alpha
  }
};

struct MomentumUpdate {
  static constexpr int kNumVars = 2;
  static constexpr int64_t kCost = 5;
  explicit MomentumUpdate(OpKernelConstruction* c) {
    c->GetAttr("use_nesterov", &use_nesterov).IgnoreError();
  }
  template <typename T>
  void operator()(const std::array<T*, 2>& vars, const T* s, const T* g, int64_t n) const {
    auto var = EigenView(vars[0], n);
    auto accum = EigenView(vars[1], n);
    auto grad = EigenView(g, n);
    const T lr = s[0], momentum = s[1];
    accum = accum * momentum + grad;
    if (use_nesterov) {
      var -= grad * lr + accum * (momentum * lr);
    } else {
      var -= accum * lr;
    }
  }
  bool use_nesterov = false;
};

struct AdamUpdate {
  static constexpr int kNumVars = 3;
  static constexpr int64_t kCost = 20;
  explicit AdamUpdate(OpKernelConstruction* c) {
    c->GetAttr("use_nesterov", &use_nesterov).IgnoreError();
  }
  template <typename T>
  void operator()(const std::array<T*, 3>& vars, const T* s, const T* g, int64_t n) const {
    auto var = EigenView(vars[0], n);
    auto m = EigenView(vars[1], n);
    auto v = EigenView(vars[2], n);
    auto grad = EigenView(g, n);
    const T beta1_power = s[0], beta2_power = s[1], lr = s[2], beta1 = s[3], beta2 = s[4],
            epsilon = s[5];
    const T one(1);
    const T alpha = lr * std::sqrt(one - beta2_power) / (one - beta1_power);
    m += (grad - m) * (one - beta1);
    v += (grad.square() - v) * (one - beta2);
    if (use_nesterov) {
      var -= ((grad * (one - beta1) + m * beta1) * alpha) / (v.sqrt() + epsilon);
    } else {
      var -= (m * alpha) / (v.sqrt() + epsilon);
    }
  }
  bool use_nesterov = false;
};

struct AdagradUpdate {
  static constexpr int kNumVars = 2;
  static constexpr int64_t kCost = 10;
  explicit AdagradUpdate(OpKernelConstruction* c) {
    c->GetAttr("update_slots", &update_slots).IgnoreError();
  }
  template <typename T>
  void operator()(const std::array<T*, 2>& vars, const T* s, const T* g, int64_t n) const {
    auto var = EigenView(vars[0], n);
    auto accum = EigenView(vars[1], n);
    auto grad = EigenView(g, n);
    if (update_slots) accum += grad.square();
    var -= grad * s[0] * accum.rsqrt();  // lr
  }
  bool update_slots = true;
};

struct RMSPropUpdate {
  static constexpr int kNumVars = 3;
  static constexpr int64_t kCost = 15;
  explicit RMSPropUpdate(OpKernelConstruction*) {}
  template <typename T>
  void operator()(const std::array<T*, 3>& vars, const T* s, const T* g, int64_t n) const {
    auto var = EigenView(vars[0], n);
    auto ms = EigenView(vars[1], n);
    auto mom = EigenView(vars[2], n);
    auto grad = EigenView(g, n);
    const T lr = s[0], rho = s[1], momentum = s[2], epsilon = s[3];
    ms += (grad.square() - ms) * (T(1) - rho);
    mom = mom * momentum + (grad * lr) / (ms + epsilon).sqrt();
    var -= mom;
  }
};

// --- the kernel --------------------------------------------------------------------

// Where the inputs of an apply op are: the first kNumVars are the variable
// and its slots, the one named "grad" (or "delta") the gradient, the rest
// scalars.
struct InputLayout {
  std::vector<std::string> names;
  int grad = -1;
  std::vector<int> scalars;
};

InputLayout LayoutOf(const OpDef& op, int num_vars) {
  InputLayout layout;
  for (int i = 0; i < static_cast<int>(op.inputs.size()); ++i) {
    const std::string& name = op.inputs[i].name;
    layout.names.push_back(name);
    if (name == "grad" || name == "delta") {
      layout.grad = i;
    } else if (i >= num_vars) {
      layout.scalars.push_back(i);
    }
  }
  return layout;
}

// One kernel class for both flavours: kResource selects handles over refs.
template <class Functor, bool kResource>
class ApplyOp : public OpKernel {
 public:
  static constexpr int kNumVars = Functor::kNumVars;

  explicit ApplyOp(OpKernelConstruction* c)
      : OpKernel(c), functor_(c), layout_(LayoutOf(c->op_def(), kNumVars)) {
    c->GetAttr("T", &dtype_).IgnoreError();
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    if constexpr (kResource) {
      return ComputeResource(ctx);
    } else {
      return ComputeRef(ctx);
    }
  }

 private:
  absl::Status ComputeRef(OpKernelContext* ctx) {
    {
      std::vector<int> indices(kNumVars);
      for (int i = 0; i < kNumVars; ++i) indices[i] = i;
      RefInputsLock lock(*ctx, indices);
      std::array<const Tensor*, kNumVars> current;
      for (int i = 0; i < kNumVars; ++i) {
        RETURN_IF_ERROR(CheckRefInitialized(*ctx, i));
        current[i] = ctx->mutable_input(i);
      }
      RETURN_IF_ERROR(Validate(*ctx, current));
      std::array<Tensor*, kNumVars> vars;
      for (int i = 0; i < kNumVars; ++i) vars[i] = MutableRefInput(ctx, i);
      RETURN_IF_ERROR(Update(ctx, vars));
    }
    ForwardRefInput(ctx, 0, 0);
    return absl::OkStatus();
  }

  absl::Status ComputeResource(OpKernelContext* ctx) {
    std::vector<std::shared_ptr<Var>> owned(kNumVars);
    std::vector<Var*> raw(kNumVars);
    for (int i = 0; i < kNumVars; ++i) {
      ASSIGN_OR_RETURN(owned[i], LookupInitializedVar(*ctx, i));
      raw[i] = owned[i].get();
      if (raw[i]->dtype() != dtype_) {
        return ctx->InvalidArgument(layout_.names[i], " is a variable of dtype ",
                                    DataTypeString(raw[i]->dtype()), " but T is ",
                                    DataTypeString(dtype_));
      }
    }
    VarsLock lock(raw);
    std::array<const Tensor*, kNumVars> current;
    for (int i = 0; i < kNumVars; ++i) current[i] = &ReadLocked(raw[i]);
    RETURN_IF_ERROR(Validate(*ctx, current));
    std::array<Tensor*, kNumVars> vars;
    for (int i = 0; i < kNumVars; ++i) vars[i] = MutableLocked(raw[i]);
    return Update(ctx, vars);
  }

  // VarsLock holds every variable's lock; the analysis cannot see it.
  static const Tensor& ReadLocked(Var* v) ABSL_NO_THREAD_SAFETY_ANALYSIS { return v->tensor(); }
  static Tensor* MutableLocked(Var* v) ABSL_NO_THREAD_SAFETY_ANALYSIS { return v->MutableTensor(); }

  // Slots and gradient must have the variable's shape; the rest are scalars.
  absl::Status Validate(const OpKernelContext& ctx,
                        const std::array<const Tensor*, kNumVars>& vars) const {
    const TensorShape& shape = vars[0]->shape();
    for (int i = 1; i <= kNumVars; ++i) {
      const int index = i < kNumVars ? i : layout_.grad;
      const TensorShape& other = i < kNumVars ? vars[i]->shape() : ctx.input(index).shape();
      if (other != shape) {
        return ctx.InvalidArgument(layout_.names[0], " and ", layout_.names[index],
                                   " do not have the same shape: ", layout_.names[0], "=",
                                   shape.DebugString(), " ", layout_.names[index], "=",
                                   other.DebugString());
      }
    }
    for (int index : layout_.scalars) {
      const Tensor& t = ctx.input(index);
      if (t.dims() != 0) {
        return ctx.InvalidArgument(layout_.names[index],
                                   " is not a scalar: ", t.shape().DebugString());
      }
    }
    return absl::OkStatus();
  }

  absl::Status Update(OpKernelContext* ctx, const std::array<Tensor*, kNumVars>& vars) const {
    if (dtype_ == DT_FLOAT) return UpdateTyped<float>(ctx, vars);
    if (dtype_ == DT_DOUBLE) return UpdateTyped<double>(ctx, vars);
    return ctx->InvalidArgument("unsupported dtype ", DataTypeString(dtype_));
  }

  template <typename T>
  absl::Status UpdateTyped(OpKernelContext* ctx, const std::array<Tensor*, kNumVars>& vars) const {
    std::vector<T> scalars;
    for (int index : layout_.scalars) scalars.push_back(ctx->input(index).scalar<T>());
    std::array<T*, kNumVars> data;
    for (int i = 0; i < kNumVars; ++i) {
      Tensor* t = vars[i];
      data[i] = t->flat<T>().data();
    }
    const T* grad = ctx->input(layout_.grad).flat<T>().data();
    const int64_t n = vars[0]->NumElements();
    ParallelForElements(ctx, n, Functor::kCost, [&](int64_t begin, int64_t end) {
      std::array<T*, kNumVars> shard;
      for (int i = 0; i < kNumVars; ++i) shard[i] = data[i] + begin;
      functor_(shard, scalars.data(), grad + begin, end - begin);
    });
    return absl::OkStatus();
  }

  const Functor functor_;
  const InputLayout layout_;
  DataType dtype_ = DT_INVALID;
};

// --- shape functions ------------------------------------------------------------------

// Checks the scalar inputs' ranks; for ref ops also merges the variable,
// slot and gradient shapes into output 0.
ShapeFn ApplyShapeFn(int num_vars, bool resource) {
  return [num_vars, resource](InferenceContext* c) -> absl::Status {
    ASSIGN_OR_RETURN(const OpDef* op, OpRegistry::Global()->LookUp(c->node_def().op()));
    const InputLayout layout = LayoutOf(*op, num_vars);
    for (int index : layout.scalars) {
      PartialShape unused;
      if (!c->WithRank(c->input(index), 0, &unused).ok()) {
        return c->Error(
            absl::StrCat(layout.names[index], " is not a scalar: ", c->input(index).DebugString()));
      }
    }
    if (resource) return absl::OkStatus();
    PartialShape shape = c->input(0);
    for (int i = 1; i <= num_vars; ++i) {
      const int index = i < num_vars ? i : layout.grad;
      absl::StatusOr<PartialShape> merged = PartialShape::Merge(shape, c->input(index));
      if (!merged.ok()) {
        return c->Error(absl::StrCat("var and ", layout.names[index],
                                     " do not have the same shape: var=", shape.DebugString(), " ",
                                     layout.names[index], "=", c->input(index).DebugString()));
      }
      shape = *std::move(merged);
    }
    c->set_output(0, shape);
    return absl::OkStatus();
  };
}

// --- registration -----------------------------------------------------------------------

const DataTypeVector kApplyTypes = {DT_FLOAT, DT_DOUBLE};

#define DFLOW_REGISTER_APPLY_KERNELS(op, Functor)                                               \
  REGISTER_KERNEL(                                                                              \
      KernelDefBuilder("Apply" op).Device(kDeviceCPU).TypeConstraint("T", kApplyTypes),         \
      ApplyOp<Functor, false>);                                                                 \
  REGISTER_KERNEL(                                                                              \
      KernelDefBuilder("ResourceApply" op).Device(kDeviceCPU).TypeConstraint("T", kApplyTypes), \
      ApplyOp<Functor, true>)

REGISTER_OP("ApplyGradientDescent")
    .Input("var: Ref(T)")
    .Input("alpha: T")
    .Input("delta: T")
    .Output("out: Ref(T)")
    .Attr("T: numbertype")
    .Attr("use_locking: bool = false")
    .SetShapeFn(ApplyShapeFn(1, false));
REGISTER_OP("ResourceApplyGradientDescent")
    .Input("var: resource")
    .Input("alpha: T")
    .Input("delta: T")
    .Attr("T: numbertype")
    .Attr("use_locking: bool = false")
    .SetIsStateful()
    .SetShapeFn(ApplyShapeFn(1, true));
DFLOW_REGISTER_APPLY_KERNELS("GradientDescent", GradientDescentUpdate);

REGISTER_OP("ApplyMomentum")
    .Input("var: Ref(T)")
    .Input("accum: Ref(T)")
    .Input("lr: T")
    .Input("grad: T")
    .Input("momentum: T")
    .Output("out: Ref(T)")
    .Attr("T: numbertype")
    .Attr("use_locking: bool = false")
    .Attr("use_nesterov: bool = false")
    .SetShapeFn(ApplyShapeFn(2, false));
REGISTER_OP("ResourceApplyMomentum")
    .Input("var: resource")
    .Input("accum: resource")
    .Input("lr: T")
    .Input("grad: T")
    .Input("momentum: T")
    .Attr("T: numbertype")
    .Attr("use_locking: bool = false")
    .Attr("use_nesterov: bool = false")
    .SetIsStateful()
    .SetShapeFn(ApplyShapeFn(2, true));
DFLOW_REGISTER_APPLY_KERNELS("Momentum", MomentumUpdate);

REGISTER_OP("ApplyAdam")
    .Input("var: Ref(T)")
    .Input("m: Ref(T)")
    .Input("v: Ref(T)")
    .Input("beta1_power: T")
    .Input("beta2_power: T")
    .Input("lr: T")
    .Input("beta1: T")
    .Input("beta2: T")
    .Input("epsilon: T")
    .Input("grad: T")
    .Output("out: Ref(T)")
    .Attr("T: numbertype")
    .Attr("use_locking: bool = false")
    .Attr("use_nesterov: bool = false")
    .SetShapeFn(ApplyShapeFn(3, false));
REGISTER_OP("ResourceApplyAdam")
    .Input("var: resource")
    .Input("m: resource")
    .Input("v: resource")
    .Input("beta1_power: T")
    .Input("beta2_power: T")
    .Input("lr: T")
    .Input("beta1: T")
    .Input("beta2: T")
    .Input("epsilon: T")
    .Input("grad: T")
    .Attr("T: numbertype")
    .Attr("use_locking: bool = false")
    .Attr("use_nesterov: bool = false")
    .SetIsStateful()
    .SetShapeFn(ApplyShapeFn(3, true));
DFLOW_REGISTER_APPLY_KERNELS("Adam", AdamUpdate);

REGISTER_OP("ApplyAdagrad")
    .Input("var: Ref(T)")
    .Input("accum: Ref(T)")
    .Input("lr: T")
    .Input("grad: T")
    .Output("out: Ref(T)")
    .Attr("T: numbertype")
    .Attr("use_locking: bool = false")
    .Attr("update_slots: bool = true")
    .SetShapeFn(ApplyShapeFn(2, false));
REGISTER_OP("ResourceApplyAdagrad")
    .Input("var: resource")
    .Input("accum: resource")
    .Input("lr: T")
    .Input("grad: T")
    .Attr("T: numbertype")
    .Attr("use_locking: bool = false")
    .Attr("update_slots: bool = true")
    .SetIsStateful()
    .SetShapeFn(ApplyShapeFn(2, true));
DFLOW_REGISTER_APPLY_KERNELS("Adagrad", AdagradUpdate);

REGISTER_OP("ApplyRMSProp")
    .Input("var: Ref(T)")
    .Input("ms: Ref(T)")
    .Input("mom: Ref(T)")
    .Input("lr: T")
    .Input("rho: T")
    .Input("momentum: T")
    .Input("epsilon: T")
    .Input("grad: T")
    .Output("out: Ref(T)")
    .Attr("T: numbertype")
    .Attr("use_locking: bool = false")
    .SetShapeFn(ApplyShapeFn(3, false));
REGISTER_OP("ResourceApplyRMSProp")
    .Input("var: resource")
    .Input("ms: resource")
    .Input("mom: resource")
    .Input("lr: T")
    .Input("rho: T")
    .Input("momentum: T")
    .Input("epsilon: T")
    .Input("grad: T")
    .Attr("T: numbertype")
    .Attr("use_locking: bool = false")
    .SetIsStateful()
    .SetShapeFn(ApplyShapeFn(3, true));
DFLOW_REGISTER_APPLY_KERNELS("RMSProp", RMSPropUpdate);

#undef DFLOW_REGISTER_APPLY_KERNELS

}  // namespace
}  // namespace dflow
