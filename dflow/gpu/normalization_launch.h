// Launchers of the normalization kernels (normalization_kernels.cu): fused
// batch norm and LRN, float tensors in device memory. Each launcher queues
// its work on `s` and returns. Callers (normalization_ops.cc) check shapes;
// the arithmetic is the CPU kernels' (ops/batch_norm_ops.cc, ops/nn_ops.cc)
// in the same order of operations, batch statistics summed in double.
#ifndef DFLOW_GPU_NORMALIZATION_LAUNCH_H_
#define DFLOW_GPU_NORMALIZATION_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace dflow {
namespace gpu {

// --- fused batch norm: x viewed as [outer, channels, inner]
// (ops/normalization_util.h's ChannelLayout, in plain types).

struct ChannelDims {
  int64_t outer = 0, channels = 0, inner = 0;
};

// Doubles of device scratch memory the launchers below need for `d`.
int64_t BatchNormScratchElements(const ChannelDims& d);

// FusedBatchNorm's arguments. In training, the batch's statistics are
// computed; `mean` and `variance` are then the running averages (null when
// exponential_avg_factor is 1: they are not read). In inference they are
// what y is normalized with.
struct BatchNormForward {
  const float* x;
  const float* scale;
  const float* offset;
  const float* mean;
  const float* variance;
  float epsilon, avg_factor;
  bool is_training;
  // Outputs, every element written.
  float* y;
  float* batch_mean;
  float* batch_variance;
  float* saved_mean;      // reserve_space_1
  float* saved_variance;  // reserve_space_2 (biased)
};
void LaunchBatchNormForward(cudaStream_t s, const ChannelDims& d, const BatchNormForward& a,
                            double* scratch);

// FusedBatchNormGrad's arguments: `mean` and `variance` are the forward's
// reserve spaces (training) or its given statistics (inference).
struct BatchNormBackward {
  const float* dy;
  const float* x;
  const float* scale;
  const float* mean;
  const float* variance;
  float epsilon;
  bool is_training;
  float* dx;
  float* dscale;
  float* doffset;
};
void LaunchBatchNormBackward(cudaStream_t s, const ChannelDims& d, const BatchNormBackward& a,
                             double* scratch);

// --- LRN over the innermost dimension, `depth` channels (NHWC) --------------

// ops/normalization_util.h's LrnParams, in plain types.
struct LrnArgs {
  int64_t radius;
  float bias, alpha, beta;
};
// y = x * N^-beta for the n elements of x.
void LaunchLrn(cudaStream_t s, const LrnArgs& p, const float* x, float* y, int64_t n,
               int64_t depth);
// LRNGrad's dx for dy, x and y (LRN's output), every element written;
// `norms`: n floats of device scratch.
void LaunchLrnGrad(cudaStream_t s, const LrnArgs& p, const float* dy, const float* x,
                   const float* y, float* dx, int64_t n, int64_t depth, float* norms);

}  // namespace gpu
}  // namespace dflow

#endif  // DFLOW_GPU_NORMALIZATION_LAUNCH_H_
