// GPU kernels that update variables in place: AssignAdd/AssignSub, the
// dense optimizer steps and the sparse Momentum, Adagrad and RMSProp steps,
// with the CPU kernels' formulas (ops/training_ops.cc) in the same order of
// operations. Hyperparameters are read from device
// memory by every thread (one cached load each).
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "dflow/gpu/launch_util.h"
#include "dflow/gpu/training_launch.h"

namespace dflow {
namespace gpu {
namespace {

#define DFLOW_GRID_STRIDE_LOOP(i, n) for (int64_t i = GridStart(); i < (n); i += GridStride())

template <typename T>
__global__ void AssignUpdateKernel(T* var, const T* delta, bool subtract, int64_t n) {
  DFLOW_GRID_STRIDE_LOOP(i, n) { var[i] = subtract ? var[i] - delta[i] : var[i] + delta[i]; }
}

template <typename T>
__global__ void GradientDescentKernel(T* var, const T* alpha, const T* delta, int64_t n) {
  const T a = *alpha;
  DFLOW_GRID_STRIDE_LOOP(i, n) { var[i] -= delta[i] * a; }
}

// --- one element's update, shared by the dense and sparse kernels ----------------

template <typename T>
struct MomentumStep {
  T lr, momentum;
  bool use_nesterov;
  __device__ void operator()(T& var, T& accum, T g) const {
    const T a = accum * momentum + g;
    accum = a;
    if (use_nesterov) {
      var -= g * lr + a * (momentum * lr);
    } else {
      var -= a * lr;
    }
  }
};

template <typename T>
struct AdagradStep {
  T lr;
  bool update_slots;
  __device__ void operator()(T& var, T& accum, T g) const {
    if (update_slots) accum += g * g;
    var -= g * lr * (T(1) / sqrt(accum));
  }
};

template <typename T>
struct RMSPropStep {
  T lr, rho, momentum, epsilon;
  __device__ void operator()(T& var, T& ms, T& mom, T g) const {
    ms = ms + (g * g - ms) * (T(1) - rho);
    mom = mom * momentum + (g * lr) / sqrt(ms + epsilon);
    var -= mom;
  }
};

template <typename T>
__global__ void AdamKernel(T* var, T* m, T* v, AdamScalars<T> s, const T* grad,
                           bool use_nesterov, int64_t n) {
  const T one(1);
  const T beta1 = *s.beta1, beta2 = *s.beta2, epsilon = *s.epsilon;
  const T alpha = *s.lr * sqrt(one - *s.beta2_power) / (one - *s.beta1_power);
  DFLOW_GRID_STRIDE_LOOP(i, n) {
    const T g = grad[i];
    const T mi = m[i] + (g - m[i]) * (one - beta1);
    const T vi = v[i] + (g * g - v[i]) * (one - beta2);
    m[i] = mi;
    v[i] = vi;
    if (use_nesterov) {
      var[i] -= ((g * (one - beta1) + mi * beta1) * alpha) / (sqrt(vi) + epsilon);
    } else {
      var[i] -= (mi * alpha) / (sqrt(vi) + epsilon);
    }
  }
}

// One element's step with its one slot (kSlots 1) or two.
template <int kSlots, typename Step, typename T>
__device__ inline void Apply(const Step& step, T& var, T& slot0, T& slot1, T g) {
  if constexpr (kSlots == 2) {
    step(var, slot0, slot1, g);
  } else {
    step(var, slot0, g);
  }
}

// A dense step over n elements; `load` makes the step from its
// hyperparameters in device memory. kSlots: 1 (slot1 unused) or 2.
template <typename T, int kSlots, typename Load>
__global__ void DenseApplyKernel(Load load, T* var, T* slot0, T* slot1, const T* grad, int64_t n) {
  const auto step = load();
  T unused = T(0);
  DFLOW_GRID_STRIDE_LOOP(i, n) {
    Apply<kSlots>(step, var[i], slot0[i], kSlots == 2 ? slot1[i] : unused, grad[i]);
  }
}

// The sparse form: element j of each destination row, updated in registers
// with each of its gradient rows in turn (a repeated index once per
// occurrence, in order, as on the CPU).
template <typename T, int kSlots, typename Load>
__global__ void SparseApplyKernel(Load load, T* var, T* slot0, T* slot1, const T* grad,
                                  SparseRows rows) {
  const auto step = load();
  const int64_t* dest = rows.table;
  const int64_t* starts = dest + rows.num_dest;
  const int64_t* sources = starts + rows.num_dest + 1;
  const int64_t row = rows.row_elems;
  DFLOW_GRID_STRIDE_LOOP(i, rows.num_dest * row) {
    const int64_t u = i / row, j = i % row, e = dest[u] * row + j;
    T v = var[e], s0 = slot0[e], s1 = kSlots == 2 ? slot1[e] : T(0);
    for (int64_t k = starts[u]; k < starts[u + 1]; ++k) {
      Apply<kSlots>(step, v, s0, s1, grad[sources[k] * row + j]);
    }
    var[e] = v;
    slot0[e] = s0;
    if constexpr (kSlots == 2) slot1[e] = s1;
  }
}

template <typename T>
struct LoadMomentum {
  const T* lr;
  const T* momentum;
  bool use_nesterov;
  __device__ MomentumStep<T> operator()() const { return {*lr, *momentum, use_nesterov}; }
};

template <typename T>
struct LoadAdagrad {
  const T* lr;
  bool update_slots;
  __device__ AdagradStep<T> operator()() const { return {*lr, update_slots}; }
};

template <typename T>
struct LoadRMSProp {
  const T* lr;
  const T* rho;
  const T* momentum;
  const T* epsilon;
  __device__ RMSPropStep<T> operator()() const { return {*lr, *rho, *momentum, *epsilon}; }
};

template <typename T, int kSlots, typename Load>
void LaunchDense(cudaStream_t s, Load load, T* var, T* slot0, T* slot1, const T* grad,
                 int64_t n) {
  if (n <= 0) return;
  DenseApplyKernel<T, kSlots, Load><<<BlocksFor(n), kThreadsPerBlock, 0, s>>>(
      load, var, slot0, slot1, grad, n);
}

template <typename T, int kSlots, typename Load>
void LaunchSparse(cudaStream_t s, Load load, T* var, T* slot0, T* slot1, const T* grad,
                  const SparseRows& rows) {
  const int64_t n = rows.num_dest * rows.row_elems;
  if (n <= 0) return;
  SparseApplyKernel<T, kSlots, Load><<<BlocksFor(n), kThreadsPerBlock, 0, s>>>(
      load, var, slot0, slot1, grad, rows);
}

}  // namespace

template <typename T>
void LaunchAssignUpdate(cudaStream_t s, T* var, const T* delta, bool subtract, int64_t n) {
  if (n <= 0) return;
  AssignUpdateKernel<T><<<BlocksFor(n), kThreadsPerBlock, 0, s>>>(var, delta, subtract, n);
}

template <typename T>
void LaunchApplyGradientDescent(cudaStream_t s, T* var, const T* alpha, const T* delta,
                                int64_t n) {
  if (n <= 0) return;
  GradientDescentKernel<T><<<BlocksFor(n), kThreadsPerBlock, 0, s>>>(var, alpha, delta, n);
}

template <typename T>
void LaunchApplyMomentum(cudaStream_t s, T* var, T* accum, const T* lr, const T* grad,
                         const T* momentum, bool use_nesterov, int64_t n) {
  LaunchDense<T, 1>(s, LoadMomentum<T>{lr, momentum, use_nesterov}, var, accum, nullptr, grad, n);
}

template <typename T>
void LaunchApplyAdam(cudaStream_t s, T* var, T* m, T* v, const AdamScalars<T>& scalars,
                     const T* grad, bool use_nesterov, int64_t n) {
  if (n <= 0) return;
  AdamKernel<T><<<BlocksFor(n), kThreadsPerBlock, 0, s>>>(var, m, v, scalars, grad, use_nesterov, n);
}

template <typename T>
void LaunchApplyAdagrad(cudaStream_t s, T* var, T* accum, const T* lr, const T* grad,
                        bool update_slots, int64_t n) {
  LaunchDense<T, 1>(s, LoadAdagrad<T>{lr, update_slots}, var, accum, nullptr, grad, n);
}

template <typename T>
void LaunchApplyRMSProp(cudaStream_t s, T* var, T* ms, T* mom, const T* lr, const T* rho,
                        const T* momentum, const T* epsilon, const T* grad, int64_t n) {
  LaunchDense<T, 2>(s, LoadRMSProp<T>{lr, rho, momentum, epsilon}, var, ms, mom, grad, n);
}

template <typename T>
void LaunchSparseApplyMomentum(cudaStream_t s, T* var, T* accum, const T* lr, const T* grad,
                               const T* momentum, bool use_nesterov, const SparseRows& rows) {
  LaunchSparse<T, 1>(s, LoadMomentum<T>{lr, momentum, use_nesterov}, var, accum, nullptr, grad,
                     rows);
}

template <typename T>
void LaunchSparseApplyAdagrad(cudaStream_t s, T* var, T* accum, const T* lr, const T* grad,
                              bool update_slots, const SparseRows& rows) {
  LaunchSparse<T, 1>(s, LoadAdagrad<T>{lr, update_slots}, var, accum, nullptr, grad, rows);
}

template <typename T>
void LaunchSparseApplyRMSProp(cudaStream_t s, T* var, T* ms, T* mom, const T* lr, const T* rho,
                              const T* momentum, const T* epsilon, const T* grad,
                              const SparseRows& rows) {
  LaunchSparse<T, 2>(s, LoadRMSProp<T>{lr, rho, momentum, epsilon}, var, ms, mom, grad, rows);
}

template void LaunchAssignUpdate<float>(cudaStream_t, float*, const float*, bool, int64_t);
template void LaunchAssignUpdate<double>(cudaStream_t, double*, const double*, bool, int64_t);
template void LaunchAssignUpdate<int64_t>(cudaStream_t, int64_t*, const int64_t*, bool, int64_t);

#define DFLOW_INSTANTIATE_APPLY(T)                                                             \
  template void LaunchApplyGradientDescent<T>(cudaStream_t, T*, const T*, const T*, int64_t);  \
  template void LaunchApplyMomentum<T>(cudaStream_t, T*, T*, const T*, const T*, const T*, bool, \
                                       int64_t);                                               \
  template void LaunchApplyAdam<T>(cudaStream_t, T*, T*, T*, const AdamScalars<T>&, const T*,  \
                                   bool, int64_t);                                             \
  template void LaunchApplyAdagrad<T>(cudaStream_t, T*, T*, const T*, const T*, bool, int64_t); \
  template void LaunchApplyRMSProp<T>(cudaStream_t, T*, T*, T*, const T*, const T*, const T*,  \
                                      const T*, const T*, int64_t);                            \
  template void LaunchSparseApplyMomentum<T>(cudaStream_t, T*, T*, const T*, const T*,         \
                                             const T*, bool, const SparseRows&);               \
  template void LaunchSparseApplyAdagrad<T>(cudaStream_t, T*, T*, const T*, const T*, bool,    \
                                            const SparseRows&);                                \
  template void LaunchSparseApplyRMSProp<T>(cudaStream_t, T*, T*, T*, const T*, const T*,      \
                                            const T*, const T*, const T*, const SparseRows&);
DFLOW_INSTANTIATE_APPLY(float)
DFLOW_INSTANTIATE_APPLY(double)
#undef DFLOW_INSTANTIATE_APPLY

}  // namespace gpu
}  // namespace dflow
