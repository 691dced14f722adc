// Philox4x32-10 on a GPU, one thread per group of outputs: the block at
// the generator's counter + g, then TensorFlow's conversions of its words,
// all by ops/philox.h's functions (the CPU kernels' own).
#include <cstdint>

#include "dflow/gpu/launch_util.h"
#include "dflow/gpu/random_launch.h"
#include "dflow/ops/philox.h"

namespace dflow {
namespace gpu {
namespace {

// The 128 random bits of block `skip` after the generator's counter.
__device__ void PhiloxBlock(const PhiloxState& gen, uint64_t skip, uint32_t out[4]) {
  for (int i = 0; i < 4; ++i) out[i] = gen.counter[i];
  philox::Skip(out, skip);
  philox::Rounds(out, gen.key);
}

__global__ void UniformFloatKernel(PhiloxState gen, float* out, int64_t n) {
  const int64_t groups = (n + 3) / 4;
  for (int64_t g = GridStart(); g < groups; g += GridStride()) {
    uint32_t bits[4];
    PhiloxBlock(gen, static_cast<uint64_t>(g), bits);
    for (int j = 0; j < 4 && g * 4 + j < n; ++j) out[g * 4 + j] = Uint32ToFloat(bits[j]);
  }
}

__global__ void UniformDoubleKernel(PhiloxState gen, double* out, int64_t n) {
  const int64_t groups = (n + 1) / 2;
  for (int64_t g = GridStart(); g < groups; g += GridStride()) {
    uint32_t bits[4];
    PhiloxBlock(gen, static_cast<uint64_t>(g), bits);
    for (int j = 0; j < 2 && g * 2 + j < n; ++j) {
      out[g * 2 + j] = Uint64ToDouble(bits[2 * j], bits[2 * j + 1]);
    }
  }
}

}  // namespace

void LaunchRandomUniform(cudaStream_t s, const PhiloxState& gen, float* out, int64_t n) {
  if (n == 0) return;
  UniformFloatKernel<<<BlocksFor((n + 3) / 4), kThreadsPerBlock, 0, s>>>(gen, out, n);
}

void LaunchRandomUniform(cudaStream_t s, const PhiloxState& gen, double* out, int64_t n) {
  if (n == 0) return;
  UniformDoubleKernel<<<BlocksFor((n + 1) / 2), kThreadsPerBlock, 0, s>>>(gen, out, n);
}

}  // namespace gpu
}  // namespace dflow
