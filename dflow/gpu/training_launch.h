// Launchers of the GPU kernels that update variables in place
// (training_kernels.cu): AssignAdd/AssignSub, the dense optimizer updates
// and the sparse Momentum, Adagrad and RMSProp updates. Every pointer is
// device memory, including the hyperparameters (0-d tensors the kernels
// read themselves: they may be computed on the device, as Adam's beta
// powers are). Each launcher queues its work on `s` and returns; nothing is
// launched when n is 0. T is float or double (LaunchAssignUpdate also
// int64_t).
#ifndef DFLOW_GPU_TRAINING_LAUNCH_H_
#define DFLOW_GPU_TRAINING_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace dflow {
namespace gpu {

// var[i] += delta[i], or -= with `subtract`.
template <typename T>
void LaunchAssignUpdate(cudaStream_t s, T* var, const T* delta, bool subtract, int64_t n);

// var -= alpha * delta.
template <typename T>
void LaunchApplyGradientDescent(cudaStream_t s, T* var, const T* alpha, const T* delta, int64_t n);

// accum = accum * momentum + grad; var -= lr * accum, or with nesterov
// var -= grad * lr + accum * (momentum * lr).
template <typename T>
void LaunchApplyMomentum(cudaStream_t s, T* var, T* accum, const T* lr, const T* grad,
                         const T* momentum, bool use_nesterov, int64_t n);

// The scalars of one Adam step, each a device pointer to one value.
template <typename T>
struct AdamScalars {
  const T* beta1_power;
  const T* beta2_power;
  const T* lr;
  const T* beta1;
  const T* beta2;
  const T* epsilon;
};

// alpha = lr * sqrt(1 - beta2_power) / (1 - beta1_power);
// m += (grad - m) * (1 - beta1); v += (grad^2 - v) * (1 - beta2);
// var -= alpha * m / (sqrt(v) + epsilon), or with nesterov
// var -= alpha * (grad * (1 - beta1) + beta1 * m) / (sqrt(v) + epsilon).
template <typename T>
void LaunchApplyAdam(cudaStream_t s, T* var, T* m, T* v, const AdamScalars<T>& scalars,
                     const T* grad, bool use_nesterov, int64_t n);

// accum += grad^2 (when update_slots); var -= lr * grad / sqrt(accum).
template <typename T>
void LaunchApplyAdagrad(cudaStream_t s, T* var, T* accum, const T* lr, const T* grad,
                        bool update_slots, int64_t n);

// ms += (grad^2 - ms) * (1 - rho);
// mom = mom * momentum + lr * grad / sqrt(ms + epsilon); var -= mom.
template <typename T>
void LaunchApplyRMSProp(cudaStream_t s, T* var, T* ms, T* mom, const T* lr, const T* rho,
                        const T* momentum, const T* epsilon, const T* grad, int64_t n);

// The sparse forms (SparseApply*): the rows of a ScatterRowsTable
// (gpu/scatter_rows.h) staged in device memory, `row_elems` elements each;
// grad holds one row per update position. Each destination row takes the
// dense step once per gradient row, in order (a repeated index once per
// occurrence, as on the CPU).
struct SparseRows {
  const int64_t* table = nullptr;
  int64_t num_dest = 0;
  int64_t row_elems = 0;
};

template <typename T>
void LaunchSparseApplyMomentum(cudaStream_t s, T* var, T* accum, const T* lr, const T* grad,
                               const T* momentum, bool use_nesterov, const SparseRows& rows);
template <typename T>
void LaunchSparseApplyAdagrad(cudaStream_t s, T* var, T* accum, const T* lr, const T* grad,
                              bool update_slots, const SparseRows& rows);
template <typename T>
void LaunchSparseApplyRMSProp(cudaStream_t s, T* var, T* ms, T* mom, const T* lr, const T* rho,
                              const T* momentum, const T* epsilon, const T* grad,
                              const SparseRows& rows);

}  // namespace gpu
}  // namespace dflow

#endif  // DFLOW_GPU_TRAINING_LAUNCH_H_
