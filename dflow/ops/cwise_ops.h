// Elementwise kernels built from Eigen scalar functors, shared by the cwise
// op files. A binary op is one line once its functor exists:
//
//   template <typename T> using AddFn = Eigen::internal::scalar_sum_op<T, T>;
//   static CpuKernels<BinaryKernel<AddFn>::For, float, double> add_kernels("AddV2");
//
// Same-shape and scalar operands run as one flat vectorised loop, split over
// the intra-op pool when large; other broadcasts run one vectorised loop per
// row of the collapsed BroadcastPlan.
#ifndef DFLOW_OPS_CWISE_OPS_H_
#define DFLOW_OPS_CWISE_OPS_H_

#include <initializer_list>
#include <memory>
#include <string>
#include <type_traits>

#include "dflow/framework/kernel.h"
#include "dflow/ops/broadcast.h"
#include "dflow/ops/eigen_util.h"

namespace dflow {

// Registers K<T> as `op`'s CPU kernel for each T, with type attr `attr` = T.
template <template <typename> class K, typename... Ts>
class CpuKernels {
 public:
  explicit CpuKernels(const std::string& op, const std::string& attr = "T") {
    (Register<Ts>(op, attr), ...);
  }

 private:
  template <typename T>
  static void Register(const std::string& op, const std::string& attr) {
    KernelRegistry::Global()->Register(
        KernelDefBuilder(op).Device(kDeviceCPU).TypeConstraint<T>(attr).Build(),
        [](OpKernelConstruction* c) -> std::unique_ptr<OpKernel> {
          return std::make_unique<K<T>>(c);
        });
  }
};

// Registers K<int32_t> as `op`'s GPU kernel for T = int32 with each of
// `host_args` (every argument, in practice) in host memory, running the CPU
// kernel there. TensorFlow registers its int32 element-wise GPU kernels so:
// int32 tensors on a GPU are mostly shapes and sizes (the shape arithmetic
// of gradients), which the host computes; the arithmetic then stays on the
// GPU's device instead of crossing to the CPU and back in every step.
template <template <typename> class K>
struct GpuInt32HostKernel {
  GpuInt32HostKernel(const std::string& op, std::initializer_list<const char*> host_args) {
    KernelDefBuilder b(op);
    b.Device(kDeviceGPU).TypeConstraint<int32_t>("T");
    for (const char* arg : host_args) b.HostMemory(arg);
    KernelRegistry::Global()->Register(
        b.Build(), [](OpKernelConstruction* c) -> std::unique_ptr<OpKernel> {
          return std::make_unique<K<int32_t>>(c);
        });
  }
};

namespace cwise {

template <typename F, typename T>
using UnaryResult = std::decay_t<std::invoke_result_t<const F&, const T&>>;
template <typename F, typename T>
using BinaryResult = std::decay_t<std::invoke_result_t<const F&, const T&, const T&>>;

// Cycles per element, as Eigen estimates them.
template <typename F>
constexpr int64_t Cost() {
  return Eigen::internal::functor_traits<F>::Cost;
}

// Integer division functors declare `static constexpr bool kNeedsNonZeroDivisor = true;`.
template <typename F>
constexpr bool NeedsNonZeroDivisor() {
  if constexpr (requires { F::kNeedsNonZeroDivisor; }) {
    return F::kNeedsNonZeroDivisor;
  } else {
    return false;
  }
}

// out[0, n) = F(x, y), with x and/or y a contiguous run or one repeated value.
template <typename T, typename Out, typename F>
void VecVec(const T* x, const T* y, Out* out, int64_t n) {
  EigenView<Out>(out, n) = EigenView<T>(x, n).binaryExpr(EigenView<T>(y, n), F());
}
template <typename T, typename Out, typename F>
void VecScalar(const T* x, const T& y, Out* out, int64_t n) {
  auto xv = EigenView<T>(x, n);
  EigenView<Out>(out, n) = xv.binaryExpr(xv.constant(y), F());
}
template <typename T, typename Out, typename F>
void ScalarVec(const T& x, const T* y, Out* out, int64_t n) {
  auto yv = EigenView<T>(y, n);
  EigenView<Out>(out, n) = yv.constant(x).binaryExpr(yv, F());
}

// Row vectors shorter than kMaxTiledRow are repeated into a tile of about
// kTileElements (see TiledRowVector).
inline constexpr int64_t kMaxTiledRow = 256;
inline constexpr int64_t kTileElements = 1024;

// z = F(x, y) where one input is a short row vector broadcast over the rows
// of the other ([N,C] + [C] with small C): the vector is repeated into a
// tile of whole rows so each vectorised call covers many rows. Returns false
// (doing nothing) when the plan is not of that form.
template <typename T, typename Out, typename F>
bool TiledRowVector(ThreadPool* pool, const BroadcastPlan& plan, const T* x, const T* y, Out* z) {
  const int64_t cols = plan.inner_size();
  if (plan.dims().size() != 2 || cols >= kMaxTiledRow) return false;
  const auto is_row_vector = [&](int i) { return plan.strides(i)[0] == 0 && plan.IsFull(1 - i); };
  const int vec = is_row_vector(1) ? 1 : is_row_vector(0) ? 0 : -1;
  if (vec < 0) return false;
  const T* row = vec == 1 ? y : x;
  const int64_t group = kTileElements / cols;  // Rows per call.
  // Not std::vector: vector<bool> has no data().
  std::unique_ptr<T[]> tile(new T[group * cols]);
  for (int64_t r = 0; r < group; ++r) std::copy(row, row + cols, tile.get() + r * cols);
  const int64_t rows = plan.num_rows(), groups = (rows + group - 1) / group;
  ParallelForUnits(pool, groups, group * cols * Cost<F>(), [&](int64_t g0, int64_t g1) {
    for (int64_t g = g0; g < g1; ++g) {
      const int64_t begin = g * group * cols;
      const int64_t n = std::min(group, rows - g * group) * cols;
      if (vec == 1) {
        VecVec<T, Out, F>(x + begin, tile.get(), z + begin, n);
      } else {
        VecVec<T, Out, F>(tile.get(), y + begin, z + begin, n);
      }
    }
  });
  return true;
}

// z = F(x, y) over a plan of two inputs.
template <typename T, typename Out, typename F>
void RunBinary(ThreadPool* pool, const BroadcastPlan& plan, const T* x, const T* y, Out* z) {
  constexpr int64_t kCost = Cost<F>();
  if (plan.num_elements() == 0) return;
  if (plan.IsFull(0) && plan.IsFull(1)) {
    ParallelForElements(pool, plan.num_elements(), kCost, [&](int64_t b, int64_t e) {
      VecVec<T, Out, F>(x + b, y + b, z + b, e - b);
    });
  } else if (plan.IsFull(0) && plan.IsScalar(1)) {
    ParallelForElements(pool, plan.num_elements(), kCost, [&](int64_t b, int64_t e) {
      VecScalar<T, Out, F>(x + b, *y, z + b, e - b);
    });
  } else if (plan.IsScalar(0) && plan.IsFull(1)) {
    ParallelForElements(pool, plan.num_elements(), kCost, [&](int64_t b, int64_t e) {
      ScalarVec<T, Out, F>(*x, y + b, z + b, e - b);
    });
  } else if (!TiledRowVector<T, Out, F>(pool, plan, x, y, z)) {
    const int64_t inner = plan.inner_size();
    const bool x_runs = plan.inner_stride(0) != 0, y_runs = plan.inner_stride(1) != 0;
    ParallelForUnits(pool, plan.num_rows(), inner * kCost, [&](int64_t r0, int64_t r1) {
      plan.ForEachRow(r0, r1, [&](int64_t row, const int64_t* off) {
        Out* out = z + row * inner;
        if (x_runs && y_runs) {
          VecVec<T, Out, F>(x + off[0], y + off[1], out, inner);
        } else if (x_runs) {
          VecScalar<T, Out, F>(x + off[0], y[off[1]], out, inner);
        } else {
          ScalarVec<T, Out, F>(x[off[0]], y + off[1], out, inner);
        }
      });
    });
  }
}

template <typename T>
bool HasZero(const Tensor& t) {
  for (const T& v : t.flat<T>()) {
    if (v == T(0)) return true;
  }
  return false;
}

}  // namespace cwise

// z = F(x, y) with numpy broadcasting; F is an Eigen-style scalar functor.
template <typename T, typename F>
class BinaryOpKernel : public OpKernel {
 public:
  using Out = cwise::BinaryResult<F, T>;
  explicit BinaryOpKernel(OpKernelConstruction* c) : OpKernel(c) {}

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    const Tensor& y = ctx->input(1);
    if constexpr (cwise::NeedsNonZeroDivisor<F>()) {
      if (cwise::HasZero<T>(y)) return ctx->InvalidArgument("Integer division by zero");
    }
    absl::StatusOr<BroadcastPlan> plan = BroadcastPlan::Make({x.shape(), y.shape()});
    if (!plan.ok()) return ctx->InvalidArgument(plan.status().message());
    Tensor* z = ctx->allocate_output_for_overwrite(0, plan->output_shape());
    cwise::RunBinary<T, Out, F>(ctx->intra_op_pool(), *plan, x.flat<T>().data(), y.flat<T>().data(),
                                z->flat<Out>().data());
    return absl::OkStatus();
  }
};

// BinaryKernel<AddFn>::For<T> is the kernel class of functor template AddFn at T.
template <template <typename> class Fn>
struct BinaryKernel {
  template <typename T>
  using For = BinaryOpKernel<T, Fn<T>>;
};

// y = F(x) elementwise.
template <typename T, typename F>
class UnaryOpKernel : public OpKernel {
 public:
  using Out = cwise::UnaryResult<F, T>;
  explicit UnaryOpKernel(OpKernelConstruction* c) : OpKernel(c) {}

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    Tensor* y = ctx->allocate_output_for_overwrite(0, x.shape());
    const T* in = x.flat<T>().data();
    Out* out = y->flat<Out>().data();
    ParallelForElements(ctx, x.NumElements(), cwise::Cost<F>(), [&](int64_t b, int64_t e) {
      EigenView<Out>(out + b, e - b) = EigenView<T>(in + b, e - b).unaryExpr(F());
    });
    return absl::OkStatus();
  }
};

template <template <typename> class Fn>
struct UnaryKernel {
  template <typename T>
  using For = UnaryOpKernel<T, Fn<T>>;
};

}  // namespace dflow

#endif  // DFLOW_OPS_CWISE_OPS_H_
