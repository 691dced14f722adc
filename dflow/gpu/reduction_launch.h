// Launchers of the reduction and row-wise GPU kernels (reduction_kernels.cu):
// Sum, Mean, Max, Min, Prod over any axes, ArgMax, ArgMin, Softmax, LogSoftmax and the
// softmax cross entropies. Plain pointers to device memory; each launcher
// queues its work on `s` and returns. Callers (reduction_ops.cc) check shapes.
#ifndef DFLOW_GPU_REDUCTION_LAUNCH_H_
#define DFLOW_GPU_REDUCTION_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace dflow {
namespace gpu {

enum class Reduce { kSum, kMean, kMax, kMin, kProd };

inline constexpr int kMaxReduceDims = 8;

// The input as kept dimensions (row-major: the output's order) and reduced
// dimensions, each with the input's stride along it. Output element o
// reduces the `count` elements at offset(kept coordinates of o) + the
// offsets of every reduced coordinate.
struct ReduceIndex {
  int kept_rank = 0;
  int64_t kept_dims[kMaxReduceDims] = {};
  int64_t kept_strides[kMaxReduceDims] = {};
  int reduced_rank = 0;
  int64_t reduced_dims[kMaxReduceDims] = {};
  int64_t reduced_strides[kMaxReduceDims] = {};
};

// Scratch floats LaunchReduce needs for `num_out` outputs of `count`
// elements each laid out as `index` (0: none; one long row, and long
// columns, are reduced in two passes).
int64_t ReduceScratchElements(int64_t num_out, int64_t count, const ReduceIndex& index);

// out[o] for o in [0, num_out): the reduction of `count` >= 1 elements
// (Mean divides the sum by count; Max and Min propagate NaN). `scratch`:
// ReduceScratchElements(num_out, count) floats of device memory.
void LaunchReduce(cudaStream_t s, Reduce op, const float* in, float* out, int64_t num_out,
                  int64_t count, const ReduceIndex& index, float* scratch);

// ArgMax (ArgMin when `min`) of `in` seen as [outer, n, inner], along its
// middle axis: out[o * inner + j] is the first index of the extreme, NaN
// never chosen (all NaN: 0), by the CPU kernel's rule. One thread an output.
// T: float or double; Index: int32_t or int64_t. REQUIRES: n >= 1.
template <typename T, typename Index>
void LaunchArgExtreme(cudaStream_t s, bool min, const T* in, int64_t outer, int64_t n,
                      int64_t inner, Index* out);

// Softmax (or log-softmax when `log`) of each row of a [rows, cols] matrix.
void LaunchSoftmax(cudaStream_t s, const float* x, float* y, int64_t rows, int64_t cols, bool log);

// Per row r: loss[r] = logsumexp(x[r]) - x[r, label[r]] and
// backprop[r] = softmax(x[r]) - onehot(label[r]); a label outside
// [0, classes) makes the row's loss and backprop NaN. Labels are int32, or
// int64 when `labels_int64`.
void LaunchSparseXent(cudaStream_t s, const float* x, const void* labels, bool labels_int64,
                      float* loss, float* backprop, int64_t rows, int64_t classes);

// How a broadcast [rows, cols] operand is read: element (r, c) is at
// r * row_stride + c * col_stride.
struct Strides2D {
  int64_t row_stride = 0, col_stride = 0;
};

// Per row r: loss[r] = sum_c labels(r, c) * (logsumexp(x[r]) - x(r, c)) and
// backprop(r, c) = softmax(x[r])_c - labels(r, c); backprop is [rows, cols].
void LaunchXent(cudaStream_t s, const float* x, Strides2D xs, const float* labels, Strides2D ls,
                float* loss, float* backprop, int64_t rows, int64_t cols);

}  // namespace gpu
}  // namespace dflow

#endif  // DFLOW_GPU_REDUCTION_LAUNCH_H_
