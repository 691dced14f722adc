// Normalization kernels.
//  - Fused batch norm: per-channel sums in double over [outer, channels,
//    inner] (two passes per sum: blocks of positions, then the blocks in
//    order, so results do not depend on scheduling), and element-wise
//    normalization and gradient kernels.
//  - LRN: one thread per element, over the channels within the radius; the
//    gradient gathers each element's terms in the CPU's order (no atomics).
// The expressions are the CPU kernels', in their order; both compilers fuse
// a multiply and an add (the CPU build targets x86-64-v3), not necessarily
// the same ones, so values agree to rounding rather than bit for bit. Powers
// are taken in double: CUDA's powf is several ulp from glibc's.
#include <algorithm>
#include <cstdint>

#include "dflow/gpu/normalization_launch.h"
#include "dflow/gpu/launch_util.h"

namespace dflow {
namespace gpu {
namespace {

// Blocks a statistics pass aims for, and the fewest values one thread sums.
constexpr int64_t kTargetBlocks = 1024;
constexpr int64_t kMinPerThread = 16;
constexpr int64_t kMaxSplits = 65535;  // gridDim.y's limit.

// How a statistics pass divides the work. A block's threads are
// channel_lanes neighbouring channels by position_lanes positions: channels
// last, 32 by 8 (a warp reads 32 neighbouring floats); channels first, 1 by
// 256 (a channel's positions are neighbours). Blocks are channel_blocks by
// splits, each split per_split positions of its channels.
struct Tiling {
  int channel_lanes = 1, position_lanes = kThreadsPerBlock;
  int64_t channel_blocks = 0, splits = 1, per_split = 0;
};

Tiling TilingOf(const ChannelDims& d) {
  Tiling t;
  if (d.inner == 1) {
    t.channel_lanes = 32;
    t.position_lanes = kThreadsPerBlock / 32;
  }
  t.channel_blocks = (d.channels + t.channel_lanes - 1) / t.channel_lanes;
  const int64_t count = d.outer * d.inner;
  const int64_t per_block_min = t.position_lanes * kMinPerThread;
  int64_t splits = (count + per_block_min - 1) / per_block_min;
  splits = std::min(splits, std::max<int64_t>(1, kTargetBlocks / std::max<int64_t>(1, t.channel_blocks)));
  splits = std::max<int64_t>(1, std::min(splits, kMaxSplits));
  t.per_split = (count + splits - 1) / splits;
  t.splits = t.per_split == 0 ? 1 : (count + t.per_split - 1) / t.per_split;
  return t;
}

// The element of channel c at position p (p = o * inner + k).
__device__ inline int64_t ElementAt(const ChannelDims& d, int64_t c, int64_t p) {
  if (d.inner == 1) return p * d.channels + c;
  return ((p / d.inner) * d.channels + c) * d.inner + p % d.inner;
}

// The channel of element i.
__device__ inline int64_t ChannelOf(const ChannelDims& d, int64_t i) {
  return d.inner == 1 ? i % d.channels : (i / d.inner) % d.channels;
}

// partials[(split * 2 + j) * channels + c] = sum j (0 or 1) of term(c, i,
// &sum0, &sum1) over the positions of the block's split of channel c.
template <typename Term>
__global__ void ChannelSumsKernel(ChannelDims d, Tiling t, Term term, double* partials) {
  const int cl = threadIdx.x % t.channel_lanes, pl = threadIdx.x / t.channel_lanes;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * t.channel_lanes + cl;
  const int64_t begin = static_cast<int64_t>(blockIdx.y) * t.per_split;
  const int64_t end = min(begin + t.per_split, d.outer * d.inner);
  double s0 = 0, s1 = 0;
  if (c < d.channels) {
    for (int64_t p = begin + pl; p < end; p += t.position_lanes) term(c, ElementAt(d, c, p), &s0, &s1);
  }
  __shared__ double sums[2][kThreadsPerBlock];
  sums[0][threadIdx.x] = s0;
  sums[1][threadIdx.x] = s1;
  __syncthreads();
  for (int half = t.position_lanes / 2; half > 0; half /= 2) {
    if (pl < half) {
      sums[0][threadIdx.x] += sums[0][threadIdx.x + half * t.channel_lanes];
      sums[1][threadIdx.x] += sums[1][threadIdx.x + half * t.channel_lanes];
    }
    __syncthreads();
  }
  if (pl == 0 && c < d.channels) {
    partials[(blockIdx.y * 2) * d.channels + c] = sums[0][threadIdx.x];
    partials[(blockIdx.y * 2 + 1) * d.channels + c] = sums[1][threadIdx.x];
  }
}

// Channel c's sum j over every split, in split order.
__device__ inline double TotalOf(const double* partials, int64_t splits, int64_t channels,
                                 int64_t c, int j) {
  double s = 0;
  for (int64_t k = 0; k < splits; ++k) s += partials[(k * 2 + j) * channels + c];
  return s;
}

template <typename Term>
void LaunchChannelSums(cudaStream_t s, const ChannelDims& d, const Tiling& t, Term term,
                       double* partials) {
  const dim3 grid(static_cast<unsigned>(t.channel_blocks), static_cast<unsigned>(t.splits));
  ChannelSumsKernel<<<grid, kThreadsPerBlock, 0, s>>>(d, t, term, partials);
}

// --- forward -----------------------------------------------------------------------------

struct SumTerm {
  const float* x;
  __device__ void operator()(int64_t, int64_t i, double* s0, double*) const { *s0 += x[i]; }
};
struct SquaredDeviationTerm {
  const float* x;
  const float* mean;
  __device__ void operator()(int64_t c, int64_t i, double* s0, double*) const {
    const double dev = x[i] - mean[c];
    *s0 += dev * dev;
  }
};

// out[c] = sum 0 of channel c / count (NaN for no values, as the CPU's 0 / 0).
__global__ void ChannelMeanKernel(const double* partials, int64_t splits, int64_t channels,
                                  int64_t count, float* out) {
  for (int64_t c = GridStart(); c < channels; c += GridStride()) {
    out[c] = static_cast<float>(TotalOf(partials, splits, channels, c, 0) /
                                static_cast<double>(count));
  }
}

__global__ void NormalizeKernel(ChannelDims d, BatchNormForward a, const float* mean,
                                const float* variance, int64_t n) {
  for (int64_t i = GridStart(); i < n; i += GridStride()) {
    const int64_t c = ChannelOf(d, i);
    const float factor = a.scale[c] / sqrtf(variance[c] + a.epsilon);
    a.y[i] = (a.x[i] - mean[c]) * factor + a.offset[c];
  }
}

// batch_mean, batch_variance and the saved statistics from the statistics
// y was normalized with (the CPU kernel's rules).
__global__ void ForwardStatisticsKernel(BatchNormForward a, const float* mean,
                                        const float* variance, int64_t channels, int64_t count) {
  const float unbiased = count > 1 ? float(count) / float(count - 1) : 1.0f;
  for (int64_t c = GridStart(); c < channels; c += GridStride()) {
    const float m = mean[c], v = variance[c];
    a.saved_mean[c] = m;
    a.saved_variance[c] = v;
    if (!a.is_training) {
      a.batch_mean[c] = m;
      a.batch_variance[c] = v;
    } else if (a.avg_factor == 1.0f) {
      a.batch_mean[c] = m;
      a.batch_variance[c] = v * unbiased;
    } else {
      const float keep = 1.0f - a.avg_factor;
      a.batch_mean[c] = keep * a.mean[c] + a.avg_factor * m;
      a.batch_variance[c] = keep * a.variance[c] + a.avg_factor * v * unbiased;
    }
  }
}

// --- backward ----------------------------------------------------------------------------

struct GradTerm {
  const float* dy;
  const float* x;
  const float* mean;
  __device__ void operator()(int64_t c, int64_t i, double* s0, double* s1) const {
    *s0 += dy[i];
    *s1 += static_cast<double>(dy[i]) * (x[i] - mean[c]);
  }
};

// Per channel: the sums of dy and dy (x - mean), 1 / sqrt(var + epsilon)
// (into `stats`, 3 rows of `channels`), dscale and doffset.
__global__ void GradStatisticsKernel(BatchNormBackward a, const double* partials, int64_t splits,
                                     int64_t channels, double* stats) {
  for (int64_t c = GridStart(); c < channels; c += GridStride()) {
    const double sum_dy = TotalOf(partials, splits, channels, c, 0);
    const double sum_dy_xc = TotalOf(partials, splits, channels, c, 1);
    const double inv_std = 1.0 / sqrt(static_cast<double>(a.variance[c]) + a.epsilon);
    stats[c] = sum_dy;
    stats[channels + c] = sum_dy_xc;
    stats[2 * channels + c] = inv_std;
    a.dscale[c] = static_cast<float>(sum_dy_xc * inv_std);
    a.doffset[c] = static_cast<float>(sum_dy);
  }
}

__global__ void InputGradKernel(ChannelDims d, BatchNormBackward a, const double* stats,
                                int64_t n) {
  const int64_t count = d.outer * d.inner;
  const double per = count > 0 ? static_cast<double>(count) : 1.0;
  for (int64_t i = GridStart(); i < n; i += GridStride()) {
    const int64_t c = ChannelOf(d, i);
    const double inv_std = stats[2 * d.channels + c];
    double g = a.dy[i];
    if (a.is_training) {
      g -= stats[c] / per +
           (a.x[i] - a.mean[c]) * (stats[d.channels + c] / per) * inv_std * inv_std;
    }
    a.dx[i] = static_cast<float>(a.scale[c] * inv_std * g);
  }
}

// --- LRN ---------------------------------------------------------------------------------

// base^exponent rounded from double (glibc's powf is within an ulp).
__device__ float Power(float base, float exponent) {
  return static_cast<float>(pow(static_cast<double>(base), static_cast<double>(exponent)));
}

// N_c of channel c of one position's channels `row`, summed as the CPU.
__device__ float LrnNorm(const LrnArgs& p, const float* row, int64_t c, int64_t depth) {
  float sum = 0;
  const int64_t end = min(depth, c + p.radius + 1);
  for (int64_t k = max(int64_t{0}, c - p.radius); k < end; ++k) {
    sum += row[k] * row[k];
  }
  return p.bias + p.alpha * sum;
}

__global__ void LrnKernel(LrnArgs p, const float* x, float* y, int64_t n, int64_t depth) {
  for (int64_t i = GridStart(); i < n; i += GridStride()) {
    const int64_t c = i % depth;
    y[i] = x[i] * Power(LrnNorm(p, x + (i - c), c, depth), -p.beta);
  }
}

__global__ void LrnNormsKernel(LrnArgs p, const float* x, float* norms, int64_t n,
                               int64_t depth) {
  for (int64_t i = GridStart(); i < n; i += GridStride()) {
    const int64_t c = i % depth;
    norms[i] = LrnNorm(p, x + (i - c), c, depth);
  }
}

// dx_k = sum over the channels i within the radius of k, in order, of
//   dy_i * ([i == k] N_i^-beta - 2 alpha beta x_k y_i / N_i).
__global__ void LrnGradKernel(LrnArgs p, const float* dy, const float* x, const float* y,
                              const float* norms, float* dx, int64_t n, int64_t depth) {
  const float scale = -2.0f * p.alpha * p.beta;
  for (int64_t j = GridStart(); j < n; j += GridStride()) {
    const int64_t k = j % depth, row = j - k;
    const int64_t end = min(depth, k + p.radius + 1);
    float acc = 0;
    for (int64_t c = max(int64_t{0}, k - p.radius); c < end; ++c) {
      const float norm = norms[row + c];
      float d = scale * y[row + c] / norm * x[j];
      if (c == k) d += Power(norm, -p.beta);
      acc += d * dy[row + c];
    }
    dx[j] = acc;
  }
}

}  // namespace

int64_t BatchNormScratchElements(const ChannelDims& d) {
  return (2 * TilingOf(d).splits + 3) * d.channels;
}

void LaunchBatchNormForward(cudaStream_t s, const ChannelDims& d, const BatchNormForward& a,
                            double* scratch) {
  if (d.channels == 0) return;
  const float* mean = a.mean;
  const float* variance = a.variance;
  const int64_t count = d.outer * d.inner;
  if (a.is_training) {
    const Tiling t = TilingOf(d);
    LaunchChannelSums(s, d, t, SumTerm{a.x}, scratch);
    ChannelMeanKernel<<<BlocksFor(d.channels), kThreadsPerBlock, 0, s>>>(
        scratch, t.splits, d.channels, count, a.saved_mean);
    LaunchChannelSums(s, d, t, SquaredDeviationTerm{a.x, a.saved_mean}, scratch);
    ChannelMeanKernel<<<BlocksFor(d.channels), kThreadsPerBlock, 0, s>>>(
        scratch, t.splits, d.channels, count, a.saved_variance);
    mean = a.saved_mean;
    variance = a.saved_variance;
  }
  const int64_t n = count * d.channels;
  if (n > 0) {
    NormalizeKernel<<<BlocksFor(n), kThreadsPerBlock, 0, s>>>(d, a, mean, variance, n);
  }
  ForwardStatisticsKernel<<<BlocksFor(d.channels), kThreadsPerBlock, 0, s>>>(a, mean, variance,
                                                                            d.channels, count);
}

void LaunchBatchNormBackward(cudaStream_t s, const ChannelDims& d, const BatchNormBackward& a,
                             double* scratch) {
  if (d.channels == 0) return;
  const Tiling t = TilingOf(d);
  LaunchChannelSums(s, d, t, GradTerm{a.dy, a.x, a.mean}, scratch);
  double* stats = scratch + 2 * t.splits * d.channels;
  GradStatisticsKernel<<<BlocksFor(d.channels), kThreadsPerBlock, 0, s>>>(a, scratch, t.splits,
                                                                         d.channels, stats);
  const int64_t n = d.outer * d.inner * d.channels;
  if (n > 0) InputGradKernel<<<BlocksFor(n), kThreadsPerBlock, 0, s>>>(d, a, stats, n);
}

void LaunchLrn(cudaStream_t s, const LrnArgs& p, const float* x, float* y, int64_t n,
               int64_t depth) {
  if (n == 0) return;
  LrnKernel<<<BlocksFor(n), kThreadsPerBlock, 0, s>>>(p, x, y, n, depth);
}

void LaunchLrnGrad(cudaStream_t s, const LrnArgs& p, const float* dy, const float* x,
                   const float* y, float* dx, int64_t n, int64_t depth, float* norms) {
  if (n == 0) return;
  LrnNormsKernel<<<BlocksFor(n), kThreadsPerBlock, 0, s>>>(p, x, norms, n, depth);
  LrnGradKernel<<<BlocksFor(n), kThreadsPerBlock, 0, s>>>(p, dy, x, y, norms, dx, n, depth);
}

}  // namespace gpu
}  // namespace dflow
