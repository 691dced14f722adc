// Philox4x32-10, the counter-based generator TensorFlow's random ops use,
// and TensorFlow's conversions from its 32-bit words to floating point.
// Same (seed, seed2) and counter give the same bits as TensorFlow.
//
//   Philox4x32 gen(/*seed=*/1, /*seed2=*/2);
//   Philox4x32::Block bits = gen.Next();   // four uint32 words
//   float u = Uint32ToFloat(bits[0]);      // in [0, 1)
#ifndef DFLOW_OPS_PHILOX_H_
#define DFLOW_OPS_PHILOX_H_

#include <array>
#include <cstdint>
#include <cstring>

// Compiled for the host and, under nvcc, for GPUs too: the GPU's random
// kernels (gpu/random_kernels.cu) draw with these same functions.
#if defined(__CUDACC__)
#define DFLOW_PHILOX_FN __host__ __device__ inline
#else
#define DFLOW_PHILOX_FN inline
#endif

namespace dflow {
namespace philox {

inline constexpr uint32_t kKeyStepA = 0x9E3779B9;
inline constexpr uint32_t kKeyStepB = 0xBB67AE85;
inline constexpr uint32_t kMulA = 0xD2511F53;
inline constexpr uint32_t kMulB = 0xCD9E8D57;

// Advances a 128-bit counter (least significant word first) by `n`.
DFLOW_PHILOX_FN void Skip(uint32_t counter[4], uint64_t n) {
  const uint32_t lo = static_cast<uint32_t>(n);
  uint32_t hi = static_cast<uint32_t>(n >> 32);
  counter[0] += lo;
  if (counter[0] < lo) ++hi;
  counter[1] += hi;
  if (counter[1] < hi && ++counter[2] == 0) ++counter[3];
}

// The ten rounds: turns `block` (a counter) into its 128 random bits.
DFLOW_PHILOX_FN void Rounds(uint32_t block[4], const uint32_t key[2]) {
  uint32_t k0 = key[0], k1 = key[1];
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += kKeyStepA;
      k1 += kKeyStepB;
    }
    const uint64_t p0 = static_cast<uint64_t>(kMulA) * block[0];
    const uint64_t p1 = static_cast<uint64_t>(kMulB) * block[2];
    const uint32_t next0 = static_cast<uint32_t>(p1 >> 32) ^ block[1] ^ k0;
    const uint32_t next2 = static_cast<uint32_t>(p0 >> 32) ^ block[3] ^ k1;
    block[1] = static_cast<uint32_t>(p1);
    block[3] = static_cast<uint32_t>(p0);
    block[0] = next0;
    block[2] = next2;
  }
}

}  // namespace philox

// The key comes from `seed`, the upper half of the 128-bit counter from
// `seed2`; the lower half starts at zero. Copyable value type.
class Philox4x32 {
 public:
  using Block = std::array<uint32_t, 4>;

  Philox4x32(uint64_t seed, uint64_t seed2)
      : counter_{0, 0, static_cast<uint32_t>(seed2), static_cast<uint32_t>(seed2 >> 32)},
        key_{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)} {}

  // The 128 random bits at the current counter; then advances it by one.
  Block Next() {
    Block c = counter_;
    philox::Rounds(c.data(), key_.data());
    Skip(1);
    return c;
  }

  // The state, for generators elsewhere (a GPU's) to continue from.
  const Block& counter() const { return counter_; }
  const std::array<uint32_t, 2>& key() const { return key_; }

  // Advances the 128-bit counter by `n` blocks.
  void Skip(uint64_t n) { philox::Skip(counter_.data(), n); }

 private:
  Block counter_;
  std::array<uint32_t, 2> key_;
};

// Hands out a generator's words one at a time, drawing a new block every
// four words (TensorFlow's SingleSampleAdapter). Borrows `gen`.
class PhiloxWords {
 public:
  explicit PhiloxWords(Philox4x32* gen) : gen_(gen) {}
  uint32_t operator()() {
    if (used_ == 4) {
      block_ = gen_->Next();
      used_ = 0;
    }
    return block_[used_++];
  }

 private:
  Philox4x32* gen_;  // not owned
  Philox4x32::Block block_{};
  int used_ = 4;
};

// The low 23 bits as the mantissa of a float in [1, 2), minus 1: [0, 1).
DFLOW_PHILOX_FN float Uint32ToFloat(uint32_t x) {
  const uint32_t bits = 0x3f800000u | (x & 0x7fffffu);
#if defined(__CUDA_ARCH__)
  const float f = __uint_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, sizeof(f));
#endif
  return f - 1.0f;
}

// 52 mantissa bits (20 from `hi`, 32 from `lo`) as a double in [0, 1).
DFLOW_PHILOX_FN double Uint64ToDouble(uint32_t hi, uint32_t lo) {
  const uint64_t mantissa = (static_cast<uint64_t>(hi & 0xfffffu) << 32) | lo;
  const uint64_t bits = (static_cast<uint64_t>(1023) << 52) | mantissa;
#if defined(__CUDA_ARCH__)
  const double d = __longlong_as_double(static_cast<long long>(bits));
#else
  double d;
  std::memcpy(&d, &bits, sizeof(d));
#endif
  return d - 1.0;
}

}  // namespace dflow

#undef DFLOW_PHILOX_FN

#endif  // DFLOW_OPS_PHILOX_H_
