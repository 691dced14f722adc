// Launch geometry shared by the element-wise and reduction kernels (.cu
// files only): 256 threads a block, a grid capped so that large tensors
// are covered by grid-stride loops.
#ifndef DFLOW_GPU_LAUNCH_UTIL_H_
#define DFLOW_GPU_LAUNCH_UTIL_H_

#include <algorithm>
#include <cstdint>

namespace dflow {
namespace gpu {

inline constexpr int kThreadsPerBlock = 256;
// Enough blocks to fill an H200 many times over; more work loops.
inline constexpr int64_t kMaxBlocks = 65535 * 4;

// Blocks for `n` > 0 elements, one thread each, at most kMaxBlocks.
inline int BlocksFor(int64_t n) {
  return static_cast<int>(std::min<int64_t>((n + kThreadsPerBlock - 1) / kThreadsPerBlock,
                                            kMaxBlocks));
}

#ifdef __CUDACC__
// The first index of this thread in a grid-stride loop, and the stride.
__device__ inline int64_t GridStart() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline int64_t GridStride() { return static_cast<int64_t>(blockDim.x) * gridDim.x; }
#endif

}  // namespace gpu
}  // namespace dflow

#endif  // DFLOW_GPU_LAUNCH_UTIL_H_
