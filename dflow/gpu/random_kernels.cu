// Philox4x32-10 on a GPU, one thread per group of outputs: the block at
// the generator's counter + g, then TensorFlow's conversions of its words
// (ops/philox.h, whose arithmetic this repeats).
#include <cstdint>

#include "dflow/gpu/launch_util.h"
#include "dflow/gpu/random_launch.h"

namespace dflow {
namespace gpu {
namespace {

constexpr uint32_t kKeyStepA = 0x9E3779B9;
constexpr uint32_t kKeyStepB = 0xBB67AE85;
constexpr uint32_t kMulA = 0xD2511F53;
constexpr uint32_t kMulB = 0xCD9E8D57;

// The 128 random bits of block `skip` after the generator's counter.
__device__ void PhiloxBlock(const PhiloxState& gen, uint64_t skip, uint32_t out[4]) {
  uint32_t c[4] = {gen.counter[0], gen.counter[1], gen.counter[2], gen.counter[3]};
  const uint32_t lo = static_cast<uint32_t>(skip);
  uint32_t hi = static_cast<uint32_t>(skip >> 32);
  c[0] += lo;
  if (c[0] < lo) ++hi;
  c[1] += hi;
  if (c[1] < hi && ++c[2] == 0) ++c[3];
  uint32_t k0 = gen.key[0], k1 = gen.key[1];
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += kKeyStepA;
      k1 += kKeyStepB;
    }
    const uint32_t lo0 = kMulA * c[0], hi0 = __umulhi(kMulA, c[0]);
    const uint32_t lo1 = kMulB * c[2], hi1 = __umulhi(kMulB, c[2]);
    const uint32_t next[4] = {hi1 ^ c[1] ^ k0, lo1, hi0 ^ c[3] ^ k1, lo0};
    for (int i = 0; i < 4; ++i) c[i] = next[i];
  }
  for (int i = 0; i < 4; ++i) out[i] = c[i];
}

// The low 23 bits as a float's mantissa in [1, 2), minus 1.
__device__ float ToFloat(uint32_t x) { return __uint_as_float(0x3f800000u | (x & 0x7fffffu)) - 1.0f; }

// 52 mantissa bits (20 from `hi`, 32 from `lo`) as a double in [0, 1).
__device__ double ToDouble(uint32_t hi, uint32_t lo) {
  const uint64_t mantissa = (static_cast<uint64_t>(hi & 0xfffffu) << 32) | lo;
  return __longlong_as_double(static_cast<long long>((uint64_t{1023} << 52) | mantissa)) - 1.0;
}

__global__ void UniformFloatKernel(PhiloxState gen, float* out, int64_t n) {
  const int64_t groups = (n + 3) / 4;
  for (int64_t g = GridStart(); g < groups; g += GridStride()) {
    uint32_t bits[4];
    PhiloxBlock(gen, static_cast<uint64_t>(g), bits);
    for (int j = 0; j < 4 && g * 4 + j < n; ++j) out[g * 4 + j] = ToFloat(bits[j]);
  }
}

__global__ void UniformDoubleKernel(PhiloxState gen, double* out, int64_t n) {
  const int64_t groups = (n + 1) / 2;
  for (int64_t g = GridStart(); g < groups; g += GridStride()) {
    uint32_t bits[4];
    PhiloxBlock(gen, static_cast<uint64_t>(g), bits);
    for (int j = 0; j < 2 && g * 2 + j < n; ++j) out[g * 2 + j] = ToDouble(bits[2 * j], bits[2 * j + 1]);
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
