// Reductions and row-wise kernels. Rows reduce with one block of
// kThreadsPerBlock threads each (a tree in shared memory); other layouts
// with one thread per output looping over its reduced elements, which reads
// coalesced when the kept dimension is the innermost (Sum over axis 0).
#include <cstdint>
#include <limits>

#include "dflow/gpu/launch_util.h"
#include "dflow/gpu/nan_math.h"
#include "dflow/gpu/reduction_launch.h"

namespace dflow {
namespace gpu {
namespace {

// Outputs past which a single row is reduced in two passes, and the
// number of partial sums of the first pass.
constexpr int64_t kTwoPassMinCount = 1 << 16;
constexpr int64_t kPartials = 1024;

template <Reduce kOp>
struct Reducer {
  __device__ static float Identity() {
    switch (kOp) {
      case Reduce::kMax: return -INFINITY;
      case Reduce::kMin: return INFINITY;
      case Reduce::kProd: return 1.0f;
      default: return 0.0f;
    }
  }
  __device__ static float Combine(float a, float b) {
    switch (kOp) {
      case Reduce::kMax: return MaxNaN(a, b);
      case Reduce::kMin: return MinNaN(a, b);
      case Reduce::kProd: return a * b;
      default: return a + b;
    }
  }
  __device__ static float Finalize(float acc, int64_t count) {
    return kOp == Reduce::kMean ? acc / static_cast<float>(count) : acc;
  }
};

// The combination of every thread's `v` in the block, returned to all
// threads. REQUIRES: blockDim.x == kThreadsPerBlock; every thread calls it.
template <typename Combine>
__device__ float BlockReduce(float v, Combine combine) {
  __shared__ float buf[kThreadsPerBlock];
  __syncthreads();  // buf may still be read from a previous call.
  buf[threadIdx.x] = v;
  __syncthreads();
  for (int half = kThreadsPerBlock / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) buf[threadIdx.x] = combine(buf[threadIdx.x], buf[threadIdx.x + half]);
    __syncthreads();
  }
  return buf[0];
}

struct SumOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct MaxOp {
  __device__ float operator()(float a, float b) const { return MaxNaN(a, b); }
};

// out[r] = Finalize(reduce(in[r, 0:cols]), count), one block per row.
template <Reduce kOp>
__global__ void RowReduceKernel(const float* in, float* out, int64_t rows, int64_t cols,
                                int64_t count) {
  using R = Reducer<kOp>;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* row = in + r * cols;
    float acc = R::Identity();
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) acc = R::Combine(acc, row[j]);
    acc = BlockReduce(acc, [](float a, float b) { return R::Combine(a, b); });
    if (threadIdx.x == 0) out[r] = R::Finalize(acc, count);
  }
}

// partial[b] = reduce of in[j] for the j this block visits (j = b * 256 +
// t, stepping by the grid): the first pass over one long row.
template <Reduce kOp>
__global__ void PartialReduceKernel(const float* in, float* partial, int64_t n) {
  using R = Reducer<kOp>;
  float acc = R::Identity();
  for (int64_t j = GridStart(); j < n; j += GridStride()) acc = R::Combine(acc, in[j]);
  acc = BlockReduce(acc, [](float a, float b) { return R::Combine(a, b); });
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

// One thread per output; the reduced coordinates are walked as an odometer.
// Sums and means accumulate in double: one thread adds all `count` values in
// turn, and a float running sum stops growing once it is 2^24 times its
// terms (a Sum over N, H and W of an NCHW activation).
template <Reduce kOp>
__global__ void GeneralReduceKernel(const float* in, float* out, int64_t num_out, int64_t count,
                                    ReduceIndex x) {
  using R = Reducer<kOp>;
  constexpr bool kSums = kOp == Reduce::kSum || kOp == Reduce::kMean;
  for (int64_t o = GridStart(); o < num_out; o += GridStride()) {
    int64_t rest = o, offset = 0;
    for (int d = x.kept_rank - 1; d >= 0; --d) {
      offset += (rest % x.kept_dims[d]) * x.kept_strides[d];
      rest /= x.kept_dims[d];
    }
    int64_t idx[kMaxReduceDims] = {};
    float acc = R::Identity();
    double sum = 0.0;
    for (int64_t j = 0; j < count; ++j) {
      if constexpr (kSums) {
        sum += in[offset];
      } else {
        acc = R::Combine(acc, in[offset]);
      }
      for (int d = x.reduced_rank - 1; d >= 0; --d) {
        offset += x.reduced_strides[d];
        if (++idx[d] < x.reduced_dims[d]) break;
        offset -= x.reduced_dims[d] * x.reduced_strides[d];
        idx[d] = 0;
      }
    }
    if constexpr (kOp == Reduce::kMean) {
      out[o] = static_cast<float>(sum / static_cast<double>(count));
    } else if constexpr (kSums) {
      out[o] = static_cast<float>(sum);
    } else {
      out[o] = R::Finalize(acc, count);
    }
  }
}

// Columns: out[c] reduces in[r * cols + c] over the rows r of each block's
// chunk [blockIdx.x * rows_per_chunk, ...). With finalize_count > 0 the
// result is finalized (the whole reduction's count), else left partial.
template <Reduce kOp>
__global__ void ColumnReduceKernel(const float* in, float* out, int64_t rows, int64_t cols,
                                   int64_t rows_per_chunk, int64_t finalize_count) {
  using R = Reducer<kOp>;
  const int64_t r0 = blockIdx.x * rows_per_chunk;
  const int64_t r1 = r0 + rows_per_chunk < rows ? r0 + rows_per_chunk : rows;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    float acc = R::Identity();
    for (int64_t r = r0; r < r1; ++r) acc = R::Combine(acc, in[r * cols + c]);
    out[blockIdx.x * cols + c] = finalize_count > 0 ? R::Finalize(acc, finalize_count) : acc;
  }
}

// Rows of a column reduction past which it runs in two passes (chunks of
// rows in parallel, then the chunks): one thread per output walking every
// row (BiasAddGrad of an NHWC activation: 100k rows of 16 channels) leaves
// the GPU idle.
constexpr int64_t kColumnTwoPassMinRows = 1024;
constexpr int64_t kColumnChunks = 256;

// True when output o reduces the column in[o + r * num_out] for r in
// [0, count) (reduced dimensions of size 1 aside): Sum over axis 0, and
// BiasAddGrad of NHWC.
bool IsColumns(const ReduceIndex& x, int64_t num_out, int64_t count) {
  if (x.kept_rank != 1 || x.kept_strides[0] != 1 || x.kept_dims[0] != num_out) return false;
  int big = 0;
  for (int d = 0; d < x.reduced_rank; ++d) {
    if (x.reduced_dims[d] == 1) continue;
    if (++big > 1 || x.reduced_strides[d] != num_out || x.reduced_dims[d] != count) return false;
  }
  return big == 1;
}

// True when the input is [outer, num_out, inner] reduced over outer and
// inner (BiasAddGrad of NCHW, a Sum over N, H and W): inner contiguous.
bool IsMiddle(const ReduceIndex& x, int64_t num_out) {
  return x.kept_rank == 1 && x.reduced_rank == 2 && x.reduced_strides[1] == 1 &&
         x.kept_dims[0] == num_out && x.kept_strides[0] == x.reduced_dims[1] &&
         x.reduced_strides[0] == num_out * x.reduced_dims[1];
}

// True when output o reduces the contiguous row in[o * count, (o + 1) * count).
bool IsRows(const ReduceIndex& x, int64_t count) {
  return x.reduced_rank == 1 && x.reduced_strides[0] == 1 &&
         (x.kept_rank == 0 || (x.kept_rank == 1 && x.kept_strides[0] == count));
}

int RowBlocks(int64_t rows) { return static_cast<int>(rows < kMaxBlocks ? rows : kMaxBlocks); }

template <Reduce kOp>
void RunReduce(cudaStream_t s, const float* in, float* out, int64_t num_out, int64_t count,
               const ReduceIndex& x, float* scratch) {
  if (IsColumns(x, num_out, count) && count >= kColumnTwoPassMinRows) {
    const int64_t per_chunk = (count + kColumnChunks - 1) / kColumnChunks;
    const int64_t chunks = (count + per_chunk - 1) / per_chunk;
    ColumnReduceKernel<kOp><<<chunks, kThreadsPerBlock, 0, s>>>(in, scratch, count, num_out,
                                                                per_chunk, 0);
    ColumnReduceKernel<kOp><<<1, kThreadsPerBlock, 0, s>>>(scratch, out, chunks, num_out, chunks,
                                                           count);
  } else if (IsMiddle(x, num_out)) {
    // Rows of `inner` (one block each) into scratch [outer, num_out], then its
    // columns; only the second pass finalizes (a Mean divides once, by count).
    const int64_t outer = x.reduced_dims[0], inner = x.reduced_dims[1];
    RowReduceKernel<kOp><<<RowBlocks(outer * num_out), kThreadsPerBlock, 0, s>>>(
        in, scratch, outer * num_out, inner, /*count=*/1);
    ColumnReduceKernel<kOp><<<1, kThreadsPerBlock, 0, s>>>(scratch, out, outer, num_out, outer,
                                                           count);
  } else if (!IsRows(x, count)) {
    GeneralReduceKernel<kOp><<<BlocksFor(num_out), kThreadsPerBlock, 0, s>>>(in, out, num_out,
                                                                           count, x);
  } else if (ReduceScratchElements(num_out, count, x) > 0) {
    PartialReduceKernel<kOp><<<kPartials, kThreadsPerBlock, 0, s>>>(in, scratch, count);
    RowReduceKernel<kOp><<<1, kThreadsPerBlock, 0, s>>>(scratch, out, 1, kPartials, count);
  } else {
    RowReduceKernel<kOp><<<RowBlocks(num_out), kThreadsPerBlock, 0, s>>>(in, out, num_out, count,
                                                                       count);
  }
}

// --- softmax and cross entropies -----------------------------------------------------

// The maximum of x(r, c) = x[c * col_stride] over c, and the sum of
// exp(x(r, c) - max), for the block's row.
struct RowStats {
  float max, sum;
};
__device__ RowStats SoftmaxStats(const float* x, int64_t col_stride, int64_t cols) {
  float m = -INFINITY;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) m = MaxNaN(m, x[c * col_stride]);
  m = BlockReduce(m, MaxOp());
  float sum = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += expf(x[c * col_stride] - m);
  sum = BlockReduce(sum, SumOp());
  return {m, sum};
}

__global__ void SoftmaxKernel(const float* x, float* y, int64_t rows, int64_t cols, bool log) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    const RowStats st = SoftmaxStats(xr, 1, cols);
    const float log_sum = logf(st.sum), inv_sum = 1.0f / st.sum;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      yr[c] = log ? (xr[c] - st.max) - log_sum : expf(xr[c] - st.max) * inv_sum;
    }
  }
}

// TensorFlow's GPU kernel does not check labels; an invalid one gives NaN
// for its row (the CPU kernel fails instead).
template <typename Index>
__global__ void SparseXentKernel(const float* x, const Index* labels, float* loss, float* back,
                                 int64_t rows, int64_t classes) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * classes;
    float* br = back + r * classes;
    const int64_t label = static_cast<int64_t>(labels[r]);
    const bool valid = label >= 0 && label < classes;
    const RowStats st = SoftmaxStats(xr, 1, classes);
    const float inv_sum = 1.0f / st.sum;
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) {
      br[c] = valid ? expf(xr[c] - st.max) * inv_sum - (c == label ? 1.0f : 0.0f) : NAN;
    }
    if (threadIdx.x == 0) loss[r] = valid ? logf(st.sum) - (xr[label] - st.max) : NAN;
  }
}

__global__ void XentKernel(const float* x, Strides2D xs, const float* labels, Strides2D ls,
                           float* loss, float* back, int64_t rows, int64_t cols) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * xs.row_stride;
    const float* lr = labels + r * ls.row_stride;
    float* br = back + r * cols;
    const RowStats st = SoftmaxStats(xr, xs.col_stride, cols);
    const float log_sum = logf(st.sum), inv_sum = 1.0f / st.sum;
    float part = 0.0f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const float xv = xr[c * xs.col_stride], lv = lr[c * ls.col_stride];
      part += lv * (log_sum - (xv - st.max));
      br[c] = expf(xv - st.max) * inv_sum - lv;
    }
    part = BlockReduce(part, SumOp());
    if (threadIdx.x == 0) loss[r] = part;
  }
}

// One thread an output (o, j): the scan of ArgExtremeRows (ops/reduction_ops.cc)
// from `start` (the type's lowest for ArgMax, its max for ArgMin).
template <bool kMin, typename T, typename Index>
__global__ void ArgExtremeKernel(const T* in, int64_t n, int64_t inner, int64_t num_out, T start,
                                 Index* out) {
  for (int64_t k = GridStart(); k < num_out; k += GridStride()) {
    const T* x = in + (k / inner) * n * inner + k % inner;
    T best = start;
    Index index = 0;
    for (int64_t i = 0; i < n; ++i) {
      const T v = x[i * inner];
      if (kMin ? v < best : v > best) {
        best = v;
        index = static_cast<Index>(i);
      }
    }
    out[k] = index;
  }
}

}  // namespace

int64_t ReduceScratchElements(int64_t num_out, int64_t count, const ReduceIndex& index) {
  if (IsColumns(index, num_out, count) && count >= kColumnTwoPassMinRows) {
    return kColumnChunks * num_out;
  }
  if (IsMiddle(index, num_out)) return index.reduced_dims[0] * num_out;
  return num_out == 1 && count >= kTwoPassMinCount ? kPartials : 0;
}

void LaunchReduce(cudaStream_t s, Reduce op, const float* in, float* out, int64_t num_out,
                  int64_t count, const ReduceIndex& index, float* scratch) {
  if (num_out == 0 || count == 0) return;
  switch (op) {
    case Reduce::kSum: return RunReduce<Reduce::kSum>(s, in, out, num_out, count, index, scratch);
    case Reduce::kMean: return RunReduce<Reduce::kMean>(s, in, out, num_out, count, index, scratch);
    case Reduce::kMax: return RunReduce<Reduce::kMax>(s, in, out, num_out, count, index, scratch);
    case Reduce::kMin: return RunReduce<Reduce::kMin>(s, in, out, num_out, count, index, scratch);
    case Reduce::kProd: return RunReduce<Reduce::kProd>(s, in, out, num_out, count, index, scratch);
  }
}

template <typename T, typename Index>
void LaunchArgExtreme(cudaStream_t s, bool min, const T* in, int64_t outer, int64_t n,
                      int64_t inner, Index* out) {
  const int64_t num_out = outer * inner;
  if (num_out == 0) return;
  if (min) {
    ArgExtremeKernel<true><<<BlocksFor(num_out), kThreadsPerBlock, 0, s>>>(
        in, n, inner, num_out, std::numeric_limits<T>::max(), out);
  } else {
    ArgExtremeKernel<false><<<BlocksFor(num_out), kThreadsPerBlock, 0, s>>>(
        in, n, inner, num_out, std::numeric_limits<T>::lowest(), out);
  }
}
#define DFLOW_INSTANTIATE_ARG_EXTREME(T, Index)                                           \
  template void LaunchArgExtreme(cudaStream_t, bool, const T*, int64_t, int64_t, int64_t, \
                                 Index*);
DFLOW_INSTANTIATE_ARG_EXTREME(float, int32_t)
DFLOW_INSTANTIATE_ARG_EXTREME(float, int64_t)
DFLOW_INSTANTIATE_ARG_EXTREME(double, int32_t)
DFLOW_INSTANTIATE_ARG_EXTREME(double, int64_t)
#undef DFLOW_INSTANTIATE_ARG_EXTREME

void LaunchSoftmax(cudaStream_t s, const float* x, float* y, int64_t rows, int64_t cols,
                   bool log) {
  if (rows == 0 || cols == 0) return;
  SoftmaxKernel<<<RowBlocks(rows), kThreadsPerBlock, 0, s>>>(x, y, rows, cols, log);
}

void LaunchSparseXent(cudaStream_t s, const float* x, const void* labels, bool labels_int64,
                      float* loss, float* backprop, int64_t rows, int64_t classes) {
  if (rows == 0 || classes == 0) return;
  if (labels_int64) {
    SparseXentKernel<int64_t><<<RowBlocks(rows), kThreadsPerBlock, 0, s>>>(
        x, static_cast<const int64_t*>(labels), loss, backprop, rows, classes);
  } else {
    SparseXentKernel<int32_t><<<RowBlocks(rows), kThreadsPerBlock, 0, s>>>(
        x, static_cast<const int32_t*>(labels), loss, backprop, rows, classes);
  }
}

void LaunchXent(cudaStream_t s, const float* x, Strides2D xs, const float* labels, Strides2D ls,
                float* loss, float* backprop, int64_t rows, int64_t cols) {
  if (rows == 0 || cols == 0) return;
  XentKernel<<<RowBlocks(rows), kThreadsPerBlock, 0, s>>>(x, xs, labels, ls, loss, backprop, rows,
                                                          cols);
}

}  // namespace gpu
}  // namespace dflow
