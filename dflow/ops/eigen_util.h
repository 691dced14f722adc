// Eigen views of dflow::Tensor buffers, and a helper that splits element
// loops over the intra-op pool.
//
//   auto x = EigenFlat<float>(ctx->input(0));         // const, rank 1
//   auto z = EigenFlat<float>(*out);                   // mutable, rank 1
//   z = x * x.constant(2.0f);
//   auto m = EigenTensor<float, 2>(ctx->input(1));     // REQUIRES: rank 2
//
// Views are unaligned maps: tensor buffers are 64-byte aligned, but a view
// may start inside a buffer (a row, a shard), and unaligned AVX loads on
// aligned data cost nothing.
#ifndef DFLOW_OPS_EIGEN_UTIL_H_
#define DFLOW_OPS_EIGEN_UTIL_H_

#ifndef EIGEN_USE_THREADS
#define EIGEN_USE_THREADS
#endif

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <unsupported/Eigen/CXX11/Tensor>

#include "dflow/framework/kernel.h"
#include "dflow/framework/tensor.h"
#include "dflow/framework/thread_pool.h"

namespace dflow {

template <typename T, int N = 1>
using EigenMap = Eigen::TensorMap<Eigen::Tensor<T, N, Eigen::RowMajor, Eigen::DenseIndex>>;
template <typename T, int N = 1>
using ConstEigenMap =
    Eigen::TensorMap<Eigen::Tensor<const T, N, Eigen::RowMajor, Eigen::DenseIndex>>;

// Rank-1 view of every element. REQUIRES: DataTypeToEnum<T>::value == t.dtype().
template <typename T>
EigenMap<T> EigenFlat(Tensor& t) {
  return EigenMap<T>(static_cast<T*>(t.raw_data()), t.NumElements());
}
template <typename T>
ConstEigenMap<T> EigenFlat(const Tensor& t) {
  return ConstEigenMap<T>(static_cast<const T*>(t.raw_data()), t.NumElements());
}

// Rank-N view with the tensor's own dimensions. REQUIRES: t.dims() == N.
template <typename T, int N>
EigenMap<T, N> EigenTensor(Tensor& t) {
  std::array<Eigen::DenseIndex, N> dims;
  for (int i = 0; i < N; ++i) dims[i] = t.dim_size(i);
  return EigenMap<T, N>(static_cast<T*>(t.raw_data()), dims);
}
template <typename T, int N>
ConstEigenMap<T, N> EigenTensor(const Tensor& t) {
  std::array<Eigen::DenseIndex, N> dims;
  for (int i = 0; i < N; ++i) dims[i] = t.dim_size(i);
  return ConstEigenMap<T, N>(static_cast<const T*>(t.raw_data()), dims);
}

// Rank-N views of raw memory, e.g. a row or a shard of a buffer.
template <typename T, int N = 1, typename... Dims>
EigenMap<T, N> EigenView(T* data, Dims... dims) {
  static_assert(sizeof...(Dims) == N, "one size per dimension");
  return EigenMap<T, N>(data, static_cast<Eigen::DenseIndex>(dims)...);
}
template <typename T, int N = 1, typename... Dims>
ConstEigenMap<T, N> EigenView(const T* data, Dims... dims) {
  static_assert(sizeof...(Dims) == N, "one size per dimension");
  return ConstEigenMap<T, N>(data, static_cast<Eigen::DenseIndex>(dims)...);
}

// Loops with less work than this (in cycles: elements x cost per element)
// run inline: waking pool threads would cost more than it saves. For an add,
// that is 32K elements.
inline constexpr int64_t kParallelElementThreshold = 32 * 1024;
// Shards of an element loop are multiples of this many elements, so every
// shard but the last starts on a cache line and fills whole vectors.
inline constexpr int64_t kElementBlock = 1024;

// Calls fn(begin, end) over disjoint ranges covering [0, units): inline when
// the work (units * cost_per_unit cycles) is small, else split over `pool`
// (the caller runs shards too).
inline void ParallelForUnits(ThreadPool* pool, int64_t units, int64_t cost_per_unit,
                             const std::function<void(int64_t, int64_t)>& fn) {
  if (units <= 0) return;
  const int64_t cost = std::max<int64_t>(1, cost_per_unit);
  const bool small = units < kParallelElementThreshold / cost;
  if (small || pool == nullptr || pool->NumThreads() <= 1) {
    fn(0, units);
    return;
  }
  pool->ParallelFor(units, cost, fn);
}

// As ParallelForUnits over `n` elements, with shards made of whole
// kElementBlock blocks. Costs are in cycles per element (1 for an add, ~20 for
// exp or tanh).
inline void ParallelForElements(ThreadPool* pool, int64_t n, int64_t cost_per_element,
                                const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int64_t cost = std::max<int64_t>(1, cost_per_element);
  if (n < kParallelElementThreshold / cost || pool == nullptr || pool->NumThreads() <= 1) {
    fn(0, n);
    return;
  }
  const int64_t blocks = (n + kElementBlock - 1) / kElementBlock;
  pool->ParallelFor(blocks, kElementBlock * cost, [&](int64_t b0, int64_t b1) {
    fn(b0 * kElementBlock, std::min(n, b1 * kElementBlock));
  });
}

inline void ParallelForElements(OpKernelContext* ctx, int64_t n, int64_t cost_per_element,
                                const std::function<void(int64_t, int64_t)>& fn) {
  ParallelForElements(ctx->intra_op_pool(), n, cost_per_element, fn);
}

}  // namespace dflow

#endif  // DFLOW_OPS_EIGEN_UTIL_H_
