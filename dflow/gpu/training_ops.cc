// Dense optimizer updates on a GPU, ref (Apply*) and resource
// (ResourceApply*) forms: GradientDescent, Momentum, Adam, Adagrad, RMSProp,
// for float and double. Semantics and error messages are the CPU kernels'
// (ops/training_ops.cc): every variable's lock is held whatever use_locking
// says, shapes are checked before anything is written, ref variables are
// updated in place and resource variables copy on write. The hyperparameters
// stay in device memory and the kernels read them (Adam's bias correction
// is computed on the device from beta1_power and beta2_power).
#include <array>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/status.h"
#include "dflow/gpu/gpu_device.h"
#include "dflow/gpu/training_launch.h"
#include "dflow/gpu/variable_util.h"
#include "dflow/ops/state_ops.h"
#include "dflow/ops/training_util.h"
#include "dflow/ops/variable_ops.h"

namespace dflow {
namespace gpu {
namespace {

// --- launch functors ----------------------------------------------------------------
//
// Each queues one update: v[0] the variable, v[1..] its slots (input order),
// s[] the scalar inputs (input order), g the gradient; all device pointers.

struct GradientDescent {
  static constexpr int kNumVars = 1;
  explicit GradientDescent(OpKernelConstruction*) {}
  template <typename T>
  void operator()(cudaStream_t st, const std::array<T*, 1>& v, const std::vector<const T*>& s,
                  const T* g, int64_t n) const {
    LaunchApplyGradientDescent(st, v[0], s[0], g, n);  // alpha
  }
};

struct Momentum {
  static constexpr int kNumVars = 2;
  explicit Momentum(OpKernelConstruction* c) {
    c->GetAttr("use_nesterov", &use_nesterov).IgnoreError();
  }
  template <typename T>
  void operator()(cudaStream_t st, const std::array<T*, 2>& v, const std::vector<const T*>& s,
                  const T* g, int64_t n) const {
    LaunchApplyMomentum(st, v[0], v[1], s[0], g, s[1], use_nesterov, n);  // lr, momentum
  }
  bool use_nesterov = false;
};

struct Adam {
  static constexpr int kNumVars = 3;
  explicit Adam(OpKernelConstruction* c) {
    c->GetAttr("use_nesterov", &use_nesterov).IgnoreError();
  }
  template <typename T>
  void operator()(cudaStream_t st, const std::array<T*, 3>& v, const std::vector<const T*>& s,
                  const T* g, int64_t n) const {
    // beta1_power, beta2_power, lr, beta1, beta2, epsilon.
    const AdamScalars<T> scalars{s[0], s[1], s[2], s[3], s[4], s[5]};
    LaunchApplyAdam(st, v[0], v[1], v[2], scalars, g, use_nesterov, n);
  }
  bool use_nesterov = false;
};

struct Adagrad {
  static constexpr int kNumVars = 2;
  explicit Adagrad(OpKernelConstruction* c) {
    c->GetAttr("update_slots", &update_slots).IgnoreError();
  }
  template <typename T>
  void operator()(cudaStream_t st, const std::array<T*, 2>& v, const std::vector<const T*>& s,
                  const T* g, int64_t n) const {
    LaunchApplyAdagrad(st, v[0], v[1], s[0], g, update_slots, n);  // lr
  }
  bool update_slots = true;
};

struct RMSProp {
  static constexpr int kNumVars = 3;
  explicit RMSProp(OpKernelConstruction*) {}
  template <typename T>
  void operator()(cudaStream_t st, const std::array<T*, 3>& v, const std::vector<const T*>& s,
                  const T* g, int64_t n) const {
    LaunchApplyRMSProp(st, v[0], v[1], v[2], s[0], s[1], s[2], s[3], g, n);  // lr, rho, momentum, epsilon
  }
};

// --- the kernel ---------------------------------------------------------------------

template <class Functor, bool kResource>
class ApplyGpuOp : public OpKernel {
 public:
  static constexpr int kNumVars = Functor::kNumVars;

  explicit ApplyGpuOp(OpKernelConstruction* c)
      : OpKernel(c), functor_(c), layout_(ApplyLayoutOf(c->op_def(), kNumVars)) {
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
      std::array<Tensor*, kNumVars> vars;
      for (int i = 0; i < kNumVars; ++i) {
        RETURN_IF_ERROR(CheckRefInitialized(*ctx, i));
        vars[i] = MutableRefInput(ctx, i);  // In place, as on the CPU.
      }
      RETURN_IF_ERROR(CheckApplyShapes(*ctx, layout_, vars, /*check_grad=*/true));
      RETURN_IF_ERROR(Update(ctx, vars));
    }
    ForwardRefInput(ctx, 0, 0);
    return LaunchStatus(ctx);
  }

  absl::Status ComputeResource(OpKernelContext* ctx) {
    std::vector<std::shared_ptr<Var>> owned;
    std::vector<Var*> raw;
    RETURN_IF_ERROR(LookupApplyVars(*ctx, layout_, kNumVars, dtype_, &owned, &raw));
    VarsLock lock(raw);
    std::array<Tensor*, kNumVars> current;
    for (int i = 0; i < kNumVars; ++i) current[i] = ReadLocked(raw[i]);
    RETURN_IF_ERROR(CheckApplyShapes(*ctx, layout_, current, /*check_grad=*/true));
    std::array<Tensor*, kNumVars> vars;
    GpuDevice* gpu = GpuOf(ctx);
    for (int i = 0; i < kNumVars; ++i) {
      absl::StatusOr<Tensor*> t = MutableDeviceTensor(gpu, raw[i]);
      if (!t.ok()) return WithPrefix(t.status(), ctx->Prefix());
      vars[i] = *t;
    }
    RETURN_IF_ERROR(Update(ctx, vars));
    return LaunchStatus(ctx);
  }

  // VarsLock holds every variable's lock; the analysis cannot see it.
  static Tensor* ReadLocked(Var* v) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return const_cast<Tensor*>(&v->tensor());
  }

  absl::Status Update(OpKernelContext* ctx, const std::array<Tensor*, kNumVars>& vars) const {
    if (dtype_ == DT_FLOAT) return UpdateTyped<float>(ctx, vars);
    if (dtype_ == DT_DOUBLE) return UpdateTyped<double>(ctx, vars);
    return ctx->InvalidArgument("unsupported dtype on the GPU: ", DataTypeString(dtype_));
  }

  template <typename T>
  absl::Status UpdateTyped(OpKernelContext* ctx, const std::array<Tensor*, kNumVars>& vars) const {
    const int64_t n = vars[0]->NumElements();
    if (n == 0) return absl::OkStatus();  // Nothing to update; scalars unread.
    std::vector<const T*> scalars;
    for (int index : layout_.scalars) {
      scalars.push_back(static_cast<const T*>(ctx->input(index).raw_data()));
    }
    std::array<T*, kNumVars> data;
    for (int i = 0; i < kNumVars; ++i) data[i] = static_cast<T*>(vars[i]->raw_data());
    const T* grad = static_cast<const T*>(ctx->input(layout_.grad).raw_data());
    functor_(GpuOf(ctx)->stream(), data, scalars, grad, n);
    return absl::OkStatus();
  }

  const Functor functor_;
  const ApplyInputLayout layout_;
  DataType dtype_ = DT_INVALID;
};

// --- registration -------------------------------------------------------------------

const DataTypeVector kApplyTypes = {DT_FLOAT, DT_DOUBLE};

// Registers the GPU kernels of Apply<name> and ResourceApply<name>.
template <class Functor>
struct GpuApplyFamily {
  explicit GpuApplyFamily(const std::string& name)
      : ref_kernel(KernelDefBuilder("Apply" + name).Device(kDeviceGPU).TypeConstraint("T", kApplyTypes),
                   [](OpKernelConstruction* c) -> std::unique_ptr<OpKernel> {
                     return std::make_unique<ApplyGpuOp<Functor, false>>(c);
                   }),
        resource_kernel(KernelDefBuilder("ResourceApply" + name)
                            .Device(kDeviceGPU)
                            .TypeConstraint("T", kApplyTypes),
                        [](OpKernelConstruction* c) -> std::unique_ptr<OpKernel> {
                          return std::make_unique<ApplyGpuOp<Functor, true>>(c);
                        }) {}
  KernelRegistrar ref_kernel, resource_kernel;
};

const GpuApplyFamily<GradientDescent> gradient_descent("GradientDescent");
const GpuApplyFamily<Momentum> momentum("Momentum");
const GpuApplyFamily<Adam> adam("Adam");
const GpuApplyFamily<Adagrad> adagrad("Adagrad");
const GpuApplyFamily<RMSProp> rms_prop("RMSProp");

}  // namespace
}  // namespace gpu
}  // namespace dflow
