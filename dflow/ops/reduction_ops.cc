// Reductions over axes given as an input: Sum, Mean, Max, Min, Prod, All, Any; and ArgMax,
// ArgMin.
//
// The input is viewed as alternating groups of kept and reduced dimensions
// (size-1 dimensions dropped, neighbours of one kind merged), so any reduction
// becomes a few passes of two kernels:
//   inner:  [K, R] -> [K]      contiguous rows, vectorised by Eigen;
//   middle: [K, R, C] -> [K, C] rows of C accumulated in place, vectorised.
// Large reductions split over the intra-op pool by output, or by R when the
// output is too small to share; partial results are combined in a fixed
// order, so results do not depend on the number of threads.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "dflow/framework/op_def.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/ops/cwise_ops.h"
#include "dflow/ops/eigen_util.h"
#include "dflow/ops/reduction_util.h"

namespace dflow {
namespace {

// --- reducers ----------------------------------------------------------------

// A reducer names an accumulator type, Eigen's reducer and pairwise combine
// functor over it, the value of an empty reduction, and how the accumulated
// value becomes the output given the number of elements reduced.
template <typename T>
struct SumReduce {
  using Acc = T;
  using EigenReducer = Eigen::internal::SumReducer<Acc>;
  using Combine = Eigen::internal::scalar_sum_op<Acc, Acc>;
  static Acc Identity() { return Acc(0); }
  static constexpr bool kFinalizes = false;
  static T Finalize(Acc v, int64_t) { return v; }
};

template <typename T>
struct ProdReduce {
  using Acc = T;
  using EigenReducer = Eigen::internal::ProdReducer<Acc>;
  using Combine = Eigen::internal::scalar_product_op<Acc, Acc>;
  static Acc Identity() { return Acc(1); }
  static constexpr bool kFinalizes = false;
  static T Finalize(Acc v, int64_t) { return v; }
};

// Max and Min propagate NaN, as TensorFlow's do.
template <typename T>
struct MaxReduce {
  using Acc = T;
  using EigenReducer = Eigen::internal::MaxReducer<Acc, Eigen::PropagateNaN>;
  using Combine = Eigen::internal::scalar_max_op<Acc, Acc, Eigen::PropagateNaN>;
  static Acc Identity() {
    if constexpr (std::numeric_limits<T>::has_infinity) return -std::numeric_limits<T>::infinity();
    return std::numeric_limits<T>::lowest();
  }
  static constexpr bool kFinalizes = false;
  static T Finalize(Acc v, int64_t) { return v; }
};

template <typename T>
struct MinReduce {
  using Acc = T;
  using EigenReducer = Eigen::internal::MinReducer<Acc, Eigen::PropagateNaN>;
  using Combine = Eigen::internal::scalar_min_op<Acc, Acc, Eigen::PropagateNaN>;
  static Acc Identity() {
    if constexpr (std::numeric_limits<T>::has_infinity) return std::numeric_limits<T>::infinity();
    return std::numeric_limits<T>::max();
  }
  static constexpr bool kFinalizes = false;
  static T Finalize(Acc v, int64_t) { return v; }
};

// Integer means accumulate in 64 bits (wrapping like int64) and truncate
// toward zero; an empty integer mean is 0 and an empty float mean NaN.
template <typename T>
struct MeanReduce {
  using Acc = std::conditional_t<std::is_integral_v<T>, uint64_t, T>;
  using EigenReducer = Eigen::internal::SumReducer<Acc>;
  using Combine = Eigen::internal::scalar_sum_op<Acc, Acc>;
  static Acc Identity() { return Acc(0); }
  static constexpr bool kFinalizes = true;
  static T Finalize(Acc v, int64_t count) {
    if constexpr (std::is_integral_v<T>) {
      return count == 0 ? T(0) : static_cast<T>(static_cast<int64_t>(v) / count);
    } else {
      return v / static_cast<T>(count);
    }
  }
};

// All and Any: bools accumulated as 0/1 bytes, where and is min and or is
// max (an empty All is true, an empty Any false).
template <typename T, typename Reducer, typename CombineOp, uint8_t kIdentity>
struct LogicalReduce {
  using Acc = uint8_t;
  using EigenReducer = Reducer;
  using Combine = CombineOp;
  static Acc Identity() { return kIdentity; }
  static constexpr bool kFinalizes = true;  // Bytes back to bools.
  static T Finalize(Acc v, int64_t) { return v != 0; }
};
template <typename T>
using AllReduce = LogicalReduce<T, Eigen::internal::MinReducer<uint8_t>,
                                Eigen::internal::scalar_min_op<uint8_t, uint8_t>, 1>;
template <typename T>
using AnyReduce = LogicalReduce<T, Eigen::internal::MaxReducer<uint8_t>,
                                Eigen::internal::scalar_max_op<uint8_t, uint8_t>, 0>;

template <typename T>
typename MeanReduce<T>::Acc ToAcc(T v) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<uint64_t>(static_cast<int64_t>(v));  // Sign-extends.
  } else {
    return v;
  }
}

// --- the two kernels -----------------------------------------------------------

// Elements a shard of a full reduction covers; partials are combined in order.
constexpr int64_t kFullReduceBlock = 64 * 1024;
// Columns accumulated together by ReduceMiddle: the block of outputs stays in L1.
constexpr int64_t kColumnBlock = 2048;

// out[k] = reduce(in[k, 0:r]) for k in [0, rows).
template <typename R, typename A>
void ReduceRows(const A* in, int64_t rows, int64_t r, A* out) {
  const Eigen::array<Eigen::DenseIndex, 1> inner_dim{1};
  EigenView<A>(out, rows) =
      EigenView<A, 2>(in, rows, r).reduce(inner_dim, typename R::EigenReducer());
}

// out[k] = reduce(in[k, 0:r]) for k in [0, rows), over the pool.
template <typename R, typename A>
void ReduceInner(ThreadPool* pool, const A* in, int64_t rows, int64_t r, A* out) {
  if (rows > 1 || r <= kFullReduceBlock) {
    ParallelForUnits(pool, rows, r, [&](int64_t k0, int64_t k1) {
      ReduceRows<R>(in + k0 * r, k1 - k0, r, out + k0);
    });
    return;
  }
  // One long row: reduce fixed blocks into partials, then the partials.
  const int64_t blocks = (r + kFullReduceBlock - 1) / kFullReduceBlock;
  std::vector<A> partials(blocks);
  ParallelForUnits(pool, blocks, kFullReduceBlock, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t begin = b * kFullReduceBlock;
      ReduceRows<R>(in + begin, 1, std::min(kFullReduceBlock, r - begin), &partials[b]);
    }
  });
  ReduceRows<R>(partials.data(), 1, blocks, out);
}

// out[k, c0:c1] = reduce over i in [r0, r1) of in[k, i, c0:c1], for an input
// of shape [K, r, cols], one column block at a time.
template <typename R, typename A>
void ReduceColumns(const A* in, int64_t r, int64_t cols, int64_t k, int64_t r0, int64_t r1,
                   int64_t c0, int64_t c1, A* out) {
  const A* base = in + k * r * cols;
  for (int64_t c = c0; c < c1; c += kColumnBlock) {
    const int64_t len = std::min(kColumnBlock, c1 - c);
    auto acc = EigenView<A>(out + c, len);
    acc = EigenView<A>(base + r0 * cols + c, len);
    for (int64_t i = r0 + 1; i < r1; ++i) {
      acc = acc.binaryExpr(EigenView<A>(base + i * cols + c, len), typename R::Combine());
    }
  }
}

// out[k, :] = reduce over i of in[k, i, :] for an input of shape [K, r, cols].
// REQUIRES: r >= 1.
template <typename R, typename A>
void ReduceMiddle(ThreadPool* pool, const A* in, int64_t K, int64_t r, int64_t cols, A* out) {
  const int64_t col_blocks = (cols + kColumnBlock - 1) / kColumnBlock;
  const int64_t units = K * col_blocks;
  const int64_t threads = pool == nullptr ? 1 : pool->NumThreads();
  const int64_t chunks = std::min<int64_t>(threads, r / 16);
  if (units >= 2 * threads || chunks <= 1 || K * r * cols < kParallelElementThreshold) {
    const int64_t cost = r * std::min(cols, kColumnBlock);
    ParallelForUnits(pool, units, cost, [&](int64_t u0, int64_t u1) {
      for (int64_t u = u0; u < u1; ++u) {
        const int64_t k = u / col_blocks, c0 = (u % col_blocks) * kColumnBlock;
        ReduceColumns<R>(in, r, cols, k, 0, r, c0, std::min(cols, c0 + kColumnBlock),
                         out + k * cols);
      }
    });
    return;
  }
  // Too few outputs to share: split r into chunks, then combine the chunks.
  std::vector<A> partials(chunks * K * cols);
  const int64_t per_chunk = (r + chunks - 1) / chunks;
  pool->ParallelFor(chunks, per_chunk * K * cols, [&](int64_t s0, int64_t s1) {
    for (int64_t s = s0; s < s1; ++s) {
      const int64_t r0 = s * per_chunk, r1 = std::min(r, r0 + per_chunk);
      for (int64_t k = 0; k < K && r0 < r1; ++k) {
        ReduceColumns<R>(in, r, cols, k, r0, r1, 0, cols, partials.data() + (s * K + k) * cols);
      }
    }
  });
  const int64_t used = (r + per_chunk - 1) / per_chunk;
  ReduceColumns<R>(partials.data(), used, K * cols, 0, 0, used, 0, K * cols, out);
}

// --- planning ----------------------------------------------------------------

// Alternating kept / reduced groups of dimensions.
struct Groups {
  std::vector<int64_t> sizes;
  std::vector<bool> reduced;
};

Groups Collapse(const TensorShape& shape, const std::vector<bool>& reduce) {
  Groups g;
  for (int d = 0; d < shape.dims(); ++d) {
    if (shape.dim_size(d) == 1) continue;
    if (!g.sizes.empty() && g.reduced.back() == reduce[d]) {
      g.sizes.back() *= shape.dim_size(d);
    } else {
      g.sizes.push_back(shape.dim_size(d));
      g.reduced.push_back(reduce[d]);
    }
  }
  return g;
}

int64_t Product(const std::vector<int64_t>& v, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= v[i];
  return p;
}

// Removes group `at`, merging its neighbours (both kept) into one group.
void RemoveGroup(Groups* g, int at) {
  int end = at + 1;
  if (at > 0 && end < static_cast<int>(g->sizes.size())) {
    g->sizes[at - 1] *= g->sizes[end];
    ++end;
  }
  g->sizes.erase(g->sizes.begin() + at, g->sizes.begin() + end);
  g->reduced.erase(g->reduced.begin() + at, g->reduced.begin() + end);
}

// Reduces every reduced group of `in` into `out`, innermost group first,
// through temporaries between passes.
// REQUIRES: at least one reduced group; no group of size 0.
template <typename R, typename A>
void ReduceGroups(ThreadPool* pool, const A* in, Groups g, A* out) {
  std::vector<A> buffers[2];
  const A* src = in;
  int remaining = static_cast<int>(std::count(g.reduced.begin(), g.reduced.end(), true));
  for (int pass = 0; remaining > 0; ++pass, --remaining) {
    // Groups alternate, so the innermost reduced group is last or next to last.
    const int at = static_cast<int>(g.sizes.size()) - (g.reduced.back() ? 1 : 2);
    const int64_t K = Product(g.sizes, 0, at), r = g.sizes[at];
    const int64_t cols = Product(g.sizes, at + 1, g.sizes.size());
    A* dst = out;
    if (remaining > 1) {
      buffers[pass % 2].resize(K * cols);
      dst = buffers[pass % 2].data();
    }
    if (cols == 1) {
      ReduceInner<R>(pool, src, K, r, dst);
    } else {
      ReduceMiddle<R>(pool, src, K, r, cols, dst);
    }
    RemoveGroup(&g, at);
    src = dst;
  }
}

// --- kernels -------------------------------------------------------------------

template <typename T, typename R>
class ReductionOp : public OpKernel {
 public:
  using A = typename R::Acc;
  explicit ReductionOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("keep_dims", &keep_dims_).IgnoreError();  // Recorded on c.
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    absl::StatusOr<std::vector<bool>> mask = ReductionMask(ctx->input(1), PartialShape(x.shape()));
    if (!mask.ok()) return ctx->InvalidArgument(mask.status().message());
    const TensorShape out_shape = ReducedShape(x.shape(), *mask, keep_dims_);
    const Groups g = Collapse(x.shape(), *mask);
    const bool reduces = std::find(g.reduced.begin(), g.reduced.end(), true) != g.reduced.end();
    if (!reduces && x.NumElements() > 0 && std::is_same_v<A, T>) {
      ASSIGN_OR_RETURN(Tensor same, x.Reshaped(out_shape));  // Nothing to reduce.
      ctx->set_output(0, same);
      return absl::OkStatus();
    }
    Tensor* out = ctx->allocate_output(0, out_shape);
    const int64_t count =
        out_shape.num_elements() == 0 ? 0 : x.NumElements() / out_shape.num_elements();
    Reduce(ctx->intra_op_pool(), x, g, reduces, count, out->flat<T>());
    return absl::OkStatus();
  }

 private:
  // Writes the reduction of x into out (count elements reduced per output).
  static void Reduce(ThreadPool* pool, const Tensor& x, const Groups& g, bool reduces,
                     int64_t count, absl::Span<T> out) {
    if (out.empty()) return;
    std::vector<A> acc_in, acc_out;
    const A* in = nullptr;
    if constexpr (std::is_same_v<A, T>) {
      in = x.flat<T>().data();
    } else {
      acc_in.resize(x.NumElements());
      std::transform(x.flat<T>().begin(), x.flat<T>().end(), acc_in.begin(), ToAcc<T>);
      in = acc_in.data();
    }
    A* result = nullptr;
    if constexpr (std::is_same_v<A, T>) {
      result = out.data();
    } else {
      acc_out.resize(out.size());
      result = acc_out.data();
    }
    if (count == 0) {
      std::fill(result, result + out.size(), R::Identity());
    } else if (!reduces) {
      std::copy(in, in + out.size(), result);
    } else {
      ReduceGroups<R>(pool, in, g, result);
    }
    if constexpr (R::kFinalizes) {
      for (size_t i = 0; i < out.size(); ++i) out[i] = R::Finalize(result[i], count);
    }
  }

  bool keep_dims_ = false;
};

absl::Status ReductionShape(InferenceContext* c) {
  bool keep_dims = false;
  RETURN_IF_ERROR(c->GetAttr("keep_dims", &keep_dims));
  const PartialShape& in = c->input(0);
  const Tensor* axes = c->input_tensor(1);
  if (axes != nullptr && axes->NumElements() == 0) {
    c->set_output(0, in);  // Reduces nothing.
    return absl::OkStatus();
  }
  if (axes == nullptr || !in.rank_known()) {
    c->set_output(0, keep_dims && in.rank_known() ? PartialShape::UnknownDims(in.rank())
                                                  : PartialShape::Unknown());
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<bool>> mask = ReductionMask(*axes, in);
  if (!mask.ok()) return c->Error(std::string(mask.status().message()));
  std::vector<int64_t> dims;
  for (int d = 0; d < in.rank(); ++d) {
    if (!(*mask)[d]) {
      dims.push_back(in.dim(d));
    } else if (keep_dims) {
      dims.push_back(1);
    }
  }
  c->set_output(0, PartialShape(dims));
  return absl::OkStatus();
}

template <template <typename> class R>
struct Reduction {
  template <typename T>
  using For = ReductionOp<T, R<T>>;
};

// The kernels of one reduction for every reducible T (and any Tidx).
template <template <typename> class R>
using ReductionKernels =
    CpuKernels<Reduction<R>::template For, float, double, int32_t, int64_t, uint8_t>;

OpDefBuilder ReductionOpDef(const std::string& name) {
  return OpDefBuilder(name)
      .Input("input: T")
      .Input("reduction_indices: Tidx")
      .Output("output: T")
      .Attr("keep_dims: bool = false")
      .Attr("T: {float, double, int32, int64, uint8}")
      .Attr("Tidx: {int32, int64} = DT_INT32")
      .SetShapeFn(ReductionShape);
}

const OpDefBuilderReceiver sum_op = ReductionOpDef("Sum");
const ReductionKernels<SumReduce> sum_kernels("Sum");

const OpDefBuilderReceiver mean_op = ReductionOpDef("Mean");
const ReductionKernels<MeanReduce> mean_kernels("Mean");

const OpDefBuilderReceiver max_op = ReductionOpDef("Max");
const ReductionKernels<MaxReduce> max_kernels("Max");

const OpDefBuilderReceiver min_op = ReductionOpDef("Min");
const ReductionKernels<MinReduce> min_kernels("Min");

const OpDefBuilderReceiver prod_op = ReductionOpDef("Prod");
const ReductionKernels<ProdReduce> prod_kernels("Prod");

// int32 reductions on a GPU reduce shapes (Mean's gradient counts elements):
// in host memory, as TensorFlow registers them (GpuInt32HostKernel).
constexpr std::initializer_list<const char*> kAllArgs = {"input", "reduction_indices", "output"};
const GpuInt32HostKernel<Reduction<SumReduce>::template For> gpu_sum("Sum", kAllArgs);
const GpuInt32HostKernel<Reduction<ProdReduce>::template For> gpu_prod("Prod", kAllArgs);
const GpuInt32HostKernel<Reduction<MaxReduce>::template For> gpu_max("Max", kAllArgs);
const GpuInt32HostKernel<Reduction<MinReduce>::template For> gpu_min("Min", kAllArgs);

// All and Any reduce bools: no T attr.
OpDefBuilder LogicalReductionOpDef(const std::string& name) {
  return OpDefBuilder(name)
      .Input("input: bool")
      .Input("reduction_indices: Tidx")
      .Output("output: bool")
      .Attr("keep_dims: bool = false")
      .Attr("Tidx: {int32, int64} = DT_INT32")
      .SetShapeFn(ReductionShape);
}

const OpDefBuilderReceiver all_op = LogicalReductionOpDef("All");
REGISTER_KERNEL(KernelDefBuilder("All").Device(kDeviceCPU), ReductionOp<bool, AllReduce<bool>>);
const OpDefBuilderReceiver any_op = LogicalReductionOpDef("Any");
REGISTER_KERNEL(KernelDefBuilder("Any").Device(kDeviceCPU), ReductionOp<bool, AnyReduce<bool>>);

// --- ArgMax, ArgMin --------------------------------------------------------------

// The index of the largest (kMin: smallest) value along one axis; ties give
// the first index. NaN is never chosen (all-NaN gives 0), as in TensorFlow.
template <bool kMin, typename T, typename Index>
void ArgExtremeRows(const T* in, int64_t outer_begin, int64_t outer_end, int64_t n,
                    int64_t inner, Index* out) {
  std::vector<T> best(inner);
  for (int64_t o = outer_begin; o < outer_end; ++o) {
    const T* block = in + o * n * inner;
    Index* idx = out + o * inner;
    std::fill(best.begin(), best.end(),
              kMin ? std::numeric_limits<T>::max() : std::numeric_limits<T>::lowest());
    std::fill(idx, idx + inner, Index(0));
    for (int64_t i = 0; i < n; ++i) {
      const T* row = block + i * inner;
      for (int64_t j = 0; j < inner; ++j) {
        if (kMin ? row[j] < best[j] : row[j] > best[j]) {
          best[j] = row[j];
          idx[j] = static_cast<Index>(i);
        }
      }
    }
  }
}

template <typename T, bool kMin>
class ArgExtremeOp : public OpKernel {
 public:
  explicit ArgExtremeOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("output_type", &output_type_).IgnoreError();  // Recorded on c.
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    absl::StatusOr<ArgExtremeLayout> layout = ArgExtremeLayoutOf(x.shape(), ctx->input(1));
    if (!layout.ok()) return ctx->InvalidArgument(layout.status().message());
    Tensor* out = ctx->allocate_output(0, layout->output);
    if (output_type_ == DT_INT32) {
      Run(ctx, x, *layout, out->flat<int32_t>().data());
    } else {
      Run(ctx, x, *layout, out->flat<int64_t>().data());
    }
    return absl::OkStatus();
  }

 private:
  template <typename Index>
  static void Run(OpKernelContext* ctx, const Tensor& x, const ArgExtremeLayout& l, Index* out) {
    if (l.outer * l.inner == 0) return;
    const T* in = x.flat<T>().data();
    ParallelForUnits(ctx->intra_op_pool(), l.outer, l.n * l.inner, [&](int64_t o0, int64_t o1) {
      ArgExtremeRows<kMin, T, Index>(in, o0, o1, l.n, l.inner, out);
    });
  }

  DataType output_type_ = DT_INT64;
};

absl::Status ArgMaxShape(InferenceContext* c) {
  const PartialShape& in = c->input(0);
  const Tensor* dim = c->input_tensor(1);
  if (!in.rank_known()) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  if (dim == nullptr) {
    if (in.rank() == 0) return c->Error("Expected dimension in the range [0, 0), but got ?");
    c->set_output(0, PartialShape::UnknownDims(in.rank() - 1));
    return absl::OkStatus();
  }
  absl::StatusOr<int> axis = ArgExtremeAxis(*dim, in.rank());
  if (!axis.ok()) return c->Error(std::string(axis.status().message()));
  std::vector<int64_t> dims = in.dims();
  dims.erase(dims.begin() + *axis);
  c->set_output(0, PartialShape(dims));
  return absl::OkStatus();
}

template <typename T>
using ArgMaxOp = ArgExtremeOp<T, false>;
template <typename T>
using ArgMinOp = ArgExtremeOp<T, true>;

OpDefBuilder ArgOpDef(const std::string& name) {
  return OpDefBuilder(name)
      .Input("input: T")
      .Input("dimension: Tidx")
      .Output("output: output_type")
      .Attr("T: {float, double, int32, int64, uint8, bool}")
      .Attr("Tidx: {int32, int64} = DT_INT32")
      .Attr("output_type: {int32, int64} = DT_INT64")
      .SetShapeFn(ArgMaxShape);
}

const OpDefBuilderReceiver arg_max_op = ArgOpDef("ArgMax");
CpuKernels<ArgMaxOp, float, double, int32_t, int64_t, uint8_t, bool> arg_max_kernels("ArgMax");
const OpDefBuilderReceiver arg_min_op = ArgOpDef("ArgMin");
CpuKernels<ArgMinOp, float, double, int32_t, int64_t, uint8_t, bool> arg_min_kernels("ArgMin");

}  // namespace
}  // namespace dflow
