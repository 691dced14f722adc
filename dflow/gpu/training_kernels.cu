// GPU kernels that update variables in place: AssignAdd/AssignSub and the
// dense optimizer steps, with the CPU kernels' formulas (ops/training_ops.cc)
// in the same order of operations. Hyperparameters are read from device
// memory by every thread (one cached load each).
#include <algorithm>
#include <cstdint>

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

template <typename T>
__global__ void MomentumKernel(T* var, T* accum, const T* lr_p, const T* grad,
                               const T* momentum_p, bool use_nesterov, int64_t n) {
  const T lr = *lr_p, momentum = *momentum_p;
  DFLOW_GRID_STRIDE_LOOP(i, n) {
    const T a = accum[i] * momentum + grad[i];
    accum[i] = a;
    if (use_nesterov) {
      var[i] -= grad[i] * lr + a * (momentum * lr);
    } else {
      var[i] -= a * lr;
    }
  }
}

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

template <typename T>
__global__ void AdagradKernel(T* var, T* accum, const T* lr_p, const T* grad, bool update_slots,
                              int64_t n) {
  const T lr = *lr_p;
  DFLOW_GRID_STRIDE_LOOP(i, n) {
    const T g = grad[i];
    T a = accum[i];
    if (update_slots) {
      a += g * g;
      accum[i] = a;
    }
    var[i] -= g * lr * (T(1) / sqrt(a));
  }
}

template <typename T>
__global__ void RMSPropKernel(T* var, T* ms, T* mom, const T* lr_p, const T* rho_p,
                              const T* momentum_p, const T* epsilon_p, const T* grad, int64_t n) {
  const T lr = *lr_p, rho = *rho_p, momentum = *momentum_p, epsilon = *epsilon_p;
  DFLOW_GRID_STRIDE_LOOP(i, n) {
    const T g = grad[i];
    const T msi = ms[i] + (g * g - ms[i]) * (T(1) - rho);
    const T momi = mom[i] * momentum + (g * lr) / sqrt(msi + epsilon);
    ms[i] = msi;
    mom[i] = momi;
    var[i] -= momi;
  }
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
  if (n <= 0) return;
  MomentumKernel<T><<<BlocksFor(n), kThreadsPerBlock, 0, s>>>(var, accum, lr, grad, momentum, use_nesterov,
                                                   n);
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
  if (n <= 0) return;
  AdagradKernel<T><<<BlocksFor(n), kThreadsPerBlock, 0, s>>>(var, accum, lr, grad, update_slots, n);
}

template <typename T>
void LaunchApplyRMSProp(cudaStream_t s, T* var, T* ms, T* mom, const T* lr, const T* rho,
                        const T* momentum, const T* epsilon, const T* grad, int64_t n) {
  if (n <= 0) return;
  RMSPropKernel<T><<<BlocksFor(n), kThreadsPerBlock, 0, s>>>(var, ms, mom, lr, rho, momentum, epsilon, grad,
                                                  n);
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
                                      const T*, const T*, int64_t);
DFLOW_INSTANTIATE_APPLY(float)
DFLOW_INSTANTIATE_APPLY(double)
#undef DFLOW_INSTANTIATE_APPLY

}  // namespace gpu
}  // namespace dflow
