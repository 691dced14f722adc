// Optimizer updates on a GPU, ref (Apply*) and resource (ResourceApply*)
// forms: GradientDescent, Momentum, Adam, Adagrad, RMSProp, and the sparse
// (SparseApply*) Momentum, Adagrad and RMSProp, for float and double.
// Semantics and error messages are the CPU kernels'
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
#include "dflow/gpu/scatter_rows.h"
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
  template <typename T>
  void operator()(cudaStream_t st, const std::array<T*, 2>& v, const std::vector<const T*>& s,
                  const T* g, const SparseRows& rows) const {
    LaunchSparseApplyMomentum(st, v[0], v[1], s[0], g, s[1], use_nesterov, rows);
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
  template <typename T>
  void operator()(cudaStream_t st, const std::array<T*, 2>& v, const std::vector<const T*>& s,
                  const T* g, const SparseRows& rows) const {
    LaunchSparseApplyAdagrad(st, v[0], v[1], s[0], g, update_slots, rows);
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
  template <typename T>
  void operator()(cudaStream_t st, const std::array<T*, 3>& v, const std::vector<const T*>& s,
                  const T* g, const SparseRows& rows) const {
    LaunchSparseApplyRMSProp(st, v[0], v[1], v[2], s[0], s[1], s[2], s[3], g, rows);
  }
};

// --- the kernel ---------------------------------------------------------------------

// kSparse: SparseApply* / ResourceSparseApply*, the rows `indices` names (read
// on the host, checked there) updated in place, a repeated row once per
// occurrence in order.
template <class Functor, bool kResource, bool kSparse>
class ApplyGpuOp : public OpKernel {
 public:
  static constexpr int kNumVars = Functor::kNumVars;

  explicit ApplyGpuOp(OpKernelConstruction* c)
      : OpKernel(c), functor_(c), layout_(ApplyLayoutOf(c->op_def(), kNumVars)) {
    c->GetAttr("T", &dtype_).IgnoreError();
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    std::vector<int64_t> rows;  // Sparse: the rows to update, read before any lock.
    if constexpr (kSparse) {
      ASSIGN_OR_RETURN(rows, SparseApplyRows(*ctx, layout_));
    }
    if constexpr (kResource) {
      return ComputeResource(ctx, rows);
    } else {
      return ComputeRef(ctx, rows);
    }
  }

 private:
  absl::Status ComputeRef(OpKernelContext* ctx, const std::vector<int64_t>& rows) {
    {
      std::vector<int> indices(kNumVars);
      for (int i = 0; i < kNumVars; ++i) indices[i] = i;
      RefInputsLock lock(*ctx, indices);
      std::array<Tensor*, kNumVars> vars;
      for (int i = 0; i < kNumVars; ++i) {
        RETURN_IF_ERROR(CheckRefInitialized(*ctx, i));
        vars[i] = MutableRefInput(ctx, i);  // In place, as on the CPU.
      }
      RETURN_IF_ERROR(CheckApplyInputs(*ctx, layout_, vars, kSparse, rows));
      RETURN_IF_ERROR(Update(ctx, vars, rows));
    }
    ForwardRefInput(ctx, 0, 0);
    return LaunchStatus(ctx);
  }

  absl::Status ComputeResource(OpKernelContext* ctx, const std::vector<int64_t>& rows) {
    std::vector<std::shared_ptr<Var>> owned;
    std::vector<Var*> raw;
    RETURN_IF_ERROR(LookupApplyVars(*ctx, layout_, kNumVars, dtype_, &owned, &raw));
    VarsLock lock(raw);
    std::array<Tensor*, kNumVars> current;
    for (int i = 0; i < kNumVars; ++i) current[i] = ReadLocked(raw[i]);
    RETURN_IF_ERROR(CheckApplyInputs(*ctx, layout_, current, kSparse, rows));
    std::array<Tensor*, kNumVars> vars;
    GpuDevice* gpu = GpuOf(ctx);
    for (int i = 0; i < kNumVars; ++i) {
      absl::StatusOr<Tensor*> t = MutableDeviceTensor(gpu, raw[i]);
      if (!t.ok()) return WithPrefix(t.status(), ctx->Prefix());
      vars[i] = *t;
    }
    RETURN_IF_ERROR(Update(ctx, vars, rows));
    return LaunchStatus(ctx);
  }

  // VarsLock holds every variable's lock; the analysis cannot see it.
  static Tensor* ReadLocked(Var* v) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return const_cast<Tensor*>(&v->tensor());
  }

  absl::Status Update(OpKernelContext* ctx, const std::array<Tensor*, kNumVars>& vars,
                      const std::vector<int64_t>& rows) const {
    if (dtype_ == DT_FLOAT) return UpdateTyped<float>(ctx, vars, rows);
    if (dtype_ == DT_DOUBLE) return UpdateTyped<double>(ctx, vars, rows);
    return ctx->InvalidArgument("unsupported dtype on the GPU: ", DataTypeString(dtype_));
  }

  template <typename T>
  absl::Status UpdateTyped(OpKernelContext* ctx, const std::array<Tensor*, kNumVars>& vars,
                           const std::vector<int64_t>& rows) const {
    const int64_t n = vars[0]->NumElements();
    if (n == 0) return absl::OkStatus();  // Nothing to update; scalars unread.
    std::vector<const T*> scalars;
    for (int index : layout_.scalars) {
      scalars.push_back(static_cast<const T*>(ctx->input(index).raw_data()));
    }
    std::array<T*, kNumVars> data;
    for (int i = 0; i < kNumVars; ++i) data[i] = static_cast<T*>(vars[i]->raw_data());
    const T* grad = static_cast<const T*>(ctx->input(layout_.grad).raw_data());
    GpuDevice* gpu = GpuOf(ctx);
    if constexpr (kSparse) {
      const ScatterRowsTable plan = MakeScatterRowsTable(rows);
      if (plan.num_dest == 0) return absl::OkStatus();
      absl::StatusOr<Tensor> table = gpu->CopyInt64sToDevice(plan.table);
      if (!table.ok()) return WithPrefix(table.status(), ctx->Prefix());
      const SparseRows sparse{static_cast<const int64_t*>(table->raw_data()), plan.num_dest,
                              n / vars[0]->dim_size(0)};
      functor_(gpu->stream(), data, scalars, grad, sparse);
    } else {
      functor_(gpu->stream(), data, scalars, grad, n);
    }
    return absl::OkStatus();
  }

  const Functor functor_;
  const ApplyInputLayout layout_;
  DataType dtype_ = DT_INVALID;
};

// --- registration -------------------------------------------------------------------

const DataTypeVector kApplyTypes = {DT_FLOAT, DT_DOUBLE};

// Registers the GPU kernels of <kind><name> and Resource<kind><name>, kind
// "Apply" or (kSparse) "SparseApply", whose indices are read on the host.
template <class Functor, bool kSparse = false>
struct GpuApplyFamily {
  explicit GpuApplyFamily(const std::string& name)
      : ref_kernel(Builder(Kind() + name),
                   [](OpKernelConstruction* c) -> std::unique_ptr<OpKernel> {
                     return std::make_unique<ApplyGpuOp<Functor, false, kSparse>>(c);
                   }),
        resource_kernel(Builder("Resource" + Kind() + name),
                        [](OpKernelConstruction* c) -> std::unique_ptr<OpKernel> {
                          return std::make_unique<ApplyGpuOp<Functor, true, kSparse>>(c);
                        }) {}
  static std::string Kind() { return kSparse ? "SparseApply" : "Apply"; }
  static KernelDefBuilder Builder(const std::string& op) {
    KernelDefBuilder b(op);
    b.Device(kDeviceGPU).TypeConstraint("T", kApplyTypes);
    if (kSparse) b.HostMemory("indices");
    return b;
  }
  KernelRegistrar ref_kernel, resource_kernel;
};

const GpuApplyFamily<GradientDescent> gradient_descent("GradientDescent");
const GpuApplyFamily<Momentum> momentum("Momentum");
const GpuApplyFamily<Adam> adam("Adam");
const GpuApplyFamily<Adagrad> adagrad("Adagrad");
const GpuApplyFamily<RMSProp> rms_prop("RMSProp");
// The sparse updates of embeddings trained by Momentum, Adagrad and RMSProp
// (SGD's and Adam's sparse updates are Scatter ops: scatter_ops.cc).
const GpuApplyFamily<Momentum, true> sparse_momentum("Momentum");
const GpuApplyFamily<Adagrad, true> sparse_adagrad("Adagrad");
const GpuApplyFamily<RMSProp, true> sparse_rms_prop("RMSProp");

}  // namespace
}  // namespace gpu
}  // namespace dflow
