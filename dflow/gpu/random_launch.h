// Launcher of the GPU RandomUniform (random_kernels.cu): Philox4x32-10 on
// the device, continuing a host generator (ops/philox.h) so that the values
// are the CPU kernel's, bit for bit (TensorFlow's).
#ifndef DFLOW_GPU_RANDOM_LAUNCH_H_
#define DFLOW_GPU_RANDOM_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace dflow {
namespace gpu {

// A Philox4x32 generator's state: its 128-bit counter and 64-bit key.
struct PhiloxState {
  uint32_t counter[4];
  uint32_t key[2];
};

// out[0, n): uniform values in [0, 1), group g of 4 floats (2 doubles) from
// the generator's block g, as ops/random_ops.cc's Uniform.
void LaunchRandomUniform(cudaStream_t s, const PhiloxState& gen, float* out, int64_t n);
void LaunchRandomUniform(cudaStream_t s, const PhiloxState& gen, double* out, int64_t n);

}  // namespace gpu
}  // namespace dflow

#endif  // DFLOW_GPU_RANDOM_LAUNCH_H_
