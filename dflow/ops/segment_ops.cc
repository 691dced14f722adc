// Segment reductions:
//
//   SparseSegment{Sum,Mean,SqrtN}(data, indices, segment_ids)
//       output[s] = the sum of data[indices[i]] over the i with
//       segment_ids[i] == s, divided by (Mean) n or (SqrtN) sqrt(n) for a
//       segment of n rows; segment_ids sorted, output has
//       segment_ids[-1] + 1 rows (empty segments are zero)
//   SparseSegment{Sum,Mean,SqrtN}WithNumSegments   the same with
//       num_segments output rows
//   SparseSegment{Sum,Mean,SqrtN}Grad(grad, indices, segment_ids, output_dim0)
//       their gradients: output[indices[i]] += grad[segment_ids[i]] * weight
//   UnsortedSegment{Sum,Max,Min,Prod}(data, segment_ids, num_segments)
//       output[ids[i...], ...] (+ | max | min | *)= data[i..., ...]; negative
//       ids are dropped; empty segments hold 0, the type's lowest, highest, 1
//
// OpDefs and error texts follow TensorFlow's; the gradients of the
// SparseSegment ops and of UnsortedSegmentSum/Max/Min/Prod are registered here.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dflow/framework/device.h"
#include "dflow/framework/gradient.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/framework/status.h"
#include "dflow/ops/array_util.h"
#include "dflow/ops/cwise_ops.h"
#include "dflow/ops/grad_util.h"

namespace dflow {
namespace {

// Input i of `ctx` as int64 values, else INVALID_ARGUMENT naming `what`.
absl::StatusOr<std::vector<int64_t>> IndexInput(OpKernelContext* ctx, int i, const char* what) {
  absl::StatusOr<std::vector<int64_t>> v = IndexValues(ctx->input(i), what);
  if (!v.ok()) return ctx->InvalidArgument(v.status().message());
  return v;
}

// The shape [rows] + shape[1:] for an output of `dtype`.
absl::StatusOr<TensorShape> RowsShape(OpKernelContext* ctx, int64_t rows,
                                      const TensorShape& shape) {
  std::vector<int64_t> dims = {rows};
  dims.insert(dims.end(), shape.dim_sizes().begin() + 1, shape.dim_sizes().end());
  return OutputShape(dims, ctx->op_kernel().output_type(0), ctx->op_kernel().type_string());
}

// --- SparseSegment{Sum,Mean,SqrtN}[WithNumSegments] and their Grad ops --------------

enum class SegmentScale { kSum, kMean, kSqrtN };

// What each row of a segment of n rows is multiplied by.
template <typename T>
T SegmentWeight(SegmentScale scale, int64_t n) {
  if (scale == SegmentScale::kSum || n == 0) return T(1);
  if (scale == SegmentScale::kMean) return T(1) / static_cast<T>(n);
  return T(1) / std::sqrt(static_cast<T>(n));
}

// The checks the forward and gradient ops share: indices and segment_ids
// are vectors of one length.
absl::Status CheckIndexVectors(OpKernelContext* ctx, const Tensor& indices, const Tensor& ids) {
  if (indices.dims() != 1) return ctx->InvalidArgument("indices should be a vector.");
  if (ids.dims() != 1) return ctx->InvalidArgument("segment_ids should be a vector.");
  if (indices.NumElements() != ids.NumElements()) {
    return ctx->InvalidArgument("segment_ids and indices should have same size.");
  }
  return absl::OkStatus();
}

// out row `dst` += weight * in row `src`, rows of `row` elements.
template <typename T>
void AddRows(const T* in, int64_t src, int64_t row, T weight, T* out, int64_t dst) {
  const T* s = in + src * row;
  T* d = out + dst * row;
  for (int64_t k = 0; k < row; ++k) d[k] += s[k] * weight;
}

template <SegmentScale kScale, bool kNumSegments>
struct SparseSegment {
  template <typename T>
  class Op : public OpKernel {
   public:
    using OpKernel::OpKernel;

    absl::Status Compute(OpKernelContext* ctx) override {
      const Tensor& data = ctx->input(0);
      if (data.dims() < 1) return ctx->InvalidArgument("data must be at least rank 1");
      RETURN_IF_ERROR(CheckIndexVectors(ctx, ctx->input(1), ctx->input(2)));
      ASSIGN_OR_RETURN(const std::vector<int64_t> indices, IndexInput(ctx, 1, "indices"));
      ASSIGN_OR_RETURN(const std::vector<int64_t> ids, IndexInput(ctx, 2, "segment_ids"));
      int64_t rows = ids.empty() ? 0 : ids.back() + 1;
      if constexpr (kNumSegments) {
        ASSIGN_OR_RETURN(rows, IndexScalar(ctx->input(3), "num_segments"));
        if (rows < 0) return ctx->InvalidArgument("num_segments must be >= 0, got ", rows);
      }
      for (size_t i = 0; i < ids.size(); ++i) {
        if (ids[i] < 0) return ctx->InvalidArgument("segment ids must be >= 0");
        if (i > 0 && ids[i] < ids[i - 1]) {
          return ctx->InvalidArgument("segment ids are not increasing");
        }
      }
      if (!ids.empty() && ids.back() >= rows) {  // Sorted: the last is the largest.
        return ctx->InvalidArgument("segment ids must be < num_segments");
      }
      const int64_t limit = data.dim_size(0);
      for (size_t i = 0; i < indices.size(); ++i) {
        if (indices[i] < 0 || indices[i] >= limit) {
          return ctx->InvalidArgument("Bad: indices[", i, "] == ", indices[i], " out of range [0, ",
                                      limit, ")");
        }
      }
      ASSIGN_OR_RETURN(TensorShape shape, RowsShape(ctx, rows, data.shape()));
      Tensor* out = ctx->allocate_output(0, shape);
      const int64_t row = limit == 0 ? 0 : data.NumElements() / limit;
      const T* in = data.flat<T>().data();
      T* o = out->flat<T>().data();
      // Segments are runs of equal ids: sum each run, then scale it.
      for (size_t begin = 0; begin < ids.size();) {
        size_t end = begin;
        while (end < ids.size() && ids[end] == ids[begin]) ++end;
        for (size_t i = begin; i < end; ++i) AddRows(in, indices[i], row, T(1), o, ids[begin]);
        const T w = SegmentWeight<T>(kScale, static_cast<int64_t>(end - begin));
        if (w != T(1)) {
          for (int64_t k = 0; k < row; ++k) o[ids[begin] * row + k] *= w;
        }
        begin = end;
      }
      return absl::OkStatus();
    }
  };
};

template <SegmentScale kScale>
struct SparseSegmentGrad {
  template <typename T>
  class Op : public OpKernel {
   public:
    using OpKernel::OpKernel;

    absl::Status Compute(OpKernelContext* ctx) override {
      const Tensor& grad = ctx->input(0);
      if (grad.dims() < 1) return ctx->InvalidArgument("grad must be at least rank 1");
      RETURN_IF_ERROR(CheckIndexVectors(ctx, ctx->input(1), ctx->input(2)));
      ASSIGN_OR_RETURN(const std::vector<int64_t> indices, IndexInput(ctx, 1, "indices"));
      ASSIGN_OR_RETURN(const std::vector<int64_t> ids, IndexInput(ctx, 2, "segment_ids"));
      ASSIGN_OR_RETURN(const int64_t dim0, IndexScalar(ctx->input(3), "output_dim0"));
      if (dim0 < 0) return ctx->InvalidArgument("Expected a non-negative size, got ", dim0);
      const int64_t segments = grad.dim_size(0);
      std::vector<int64_t> counts(segments);
      for (size_t i = 0; i < ids.size(); ++i) {
        if (ids[i] < 0 || ids[i] >= segments) {
          return ctx->InvalidArgument("segment_ids[", i, "] = ", ids[i], " is not in [0, ",
                                      segments, "): Invalid number of segments");
        }
        ++counts[ids[i]];
      }
      for (size_t i = 0; i < indices.size(); ++i) {
        if (indices[i] < 0 || indices[i] >= dim0) {
          return ctx->InvalidArgument("Index ", indices[i], " out of range [0, ", dim0, ").");
        }
      }
      ASSIGN_OR_RETURN(TensorShape shape, RowsShape(ctx, dim0, grad.shape()));
      Tensor* out = ctx->allocate_output(0, shape);
      const int64_t row = segments == 0 ? 0 : grad.NumElements() / segments;
      const T* in = grad.flat<T>().data();
      T* o = out->flat<T>().data();
      for (size_t i = 0; i < ids.size(); ++i) {
        AddRows(in, ids[i], row, SegmentWeight<T>(kScale, counts[ids[i]]), o, indices[i]);
      }
      return absl::OkStatus();
    }
  };
};

// [rows] + data.shape[1:], rows from num_segments (when `num_segments_input`
// is set and constant) or unknown.
ShapeFn SegmentRowsShape(int num_segments_input) {
  return [num_segments_input](InferenceContext* c) -> absl::Status {
    const PartialShape& data = c->input(0);
    PartialShape unused;
    RETURN_IF_ERROR(c->WithRank(c->input(1), 1, &unused));
    RETURN_IF_ERROR(c->WithRank(c->input(2), 1, &unused));
    RETURN_IF_ERROR(c->WithRankAtLeast(data, 1, &unused));
    int64_t rows = kUnknownDim;
    if (num_segments_input >= 0) {
      ASSIGN_OR_RETURN(auto value, ConstIndexInput(c, num_segments_input, "num_segments"));
      if (value.has_value() && value->size() == 1) rows = (*value)[0];
    }
    if (!data.rank_known()) {
      c->set_output(0, PartialShape::Unknown());
      return absl::OkStatus();
    }
    std::vector<int64_t> dims = {rows};
    dims.insert(dims.end(), data.dims().begin() + 1, data.dims().end());
    c->set_output(0, PartialShape(std::move(dims)));
    return absl::OkStatus();
  };
}

OpDefBuilder SparseSegmentOpDef(const std::string& name, const std::string& types,
                                bool num_segments) {
  OpDefBuilder b(name);
  b.Input("data: T").Input("indices: Tidx").Input("segment_ids: Tsegmentids");
  if (num_segments) b.Input("num_segments: Tnumsegments");
  b.Output("output: T")
      .Attr("T: " + types)
      .Attr("Tidx: {int32, int64} = DT_INT32")
      .Attr("Tsegmentids: {int32, int64} = DT_INT32")
      .Attr("sparse_gradient: bool = false");
  if (num_segments) b.Attr("Tnumsegments: {int32, int64} = DT_INT32");
  return b.SetShapeFn(SegmentRowsShape(num_segments ? 3 : -1));
}

OpDefBuilder SparseSegmentGradOpDef(const std::string& name) {
  return OpDefBuilder(name)
      .Input("grad: T")
      .Input("indices: Tidx")
      .Input("segment_ids: Tsegmentids")
      .Input("output_dim0: int32")
      .Output("output: T")
      .Attr("T: {float, double}")
      .Attr("Tidx: {int32, int64} = DT_INT32")
      .Attr("Tsegmentids: {int32, int64} = DT_INT32")
      .SetShapeFn(SegmentRowsShape(3));
}

// d(data) = SparseSegment<name>Grad(dy, indices, segment_ids, rows of data).
GradFn SparseSegmentGradFn(const std::string& grad_op) {
  return [grad_op](GradContext* g) -> absl::Status {
    GradBuilder* b = g->b();
    const SymTensor rows =
        b->Op("GatherV2", {grad::ShapeOf(b, g->input(0)), grad::Int(b, 0), grad::Int(b, 0)});
    g->SetInputGrad(0, b->Op(grad_op, {g->grad_output(0), g->input(1), g->input(2), rows}));
    return absl::OkStatus();
  };
}

// Registers SparseSegment<name>, its WithNumSegments twin and their Grad op,
// with kernels for Ts (the Grad op: float, double) and both gradients.
template <SegmentScale kScale, typename... Ts>
struct SparseSegmentFamily {
  SparseSegmentFamily(const std::string& name, const std::string& types)
      : op(SparseSegmentOpDef("SparseSegment" + name, types, false)),
        with_num_op(SparseSegmentOpDef("SparseSegment" + name + "WithNumSegments", types, true)),
        grad_op(SparseSegmentGradOpDef("SparseSegment" + name + "Grad")),
        kernels("SparseSegment" + name),
        with_num_kernels("SparseSegment" + name + "WithNumSegments"),
        grad_kernels("SparseSegment" + name + "Grad"),
        gradient("SparseSegment" + name, SparseSegmentGradFn("SparseSegment" + name + "Grad")),
        with_num_gradient("SparseSegment" + name + "WithNumSegments",
                          SparseSegmentGradFn("SparseSegment" + name + "Grad")) {}
  OpDefBuilderReceiver op, with_num_op, grad_op;
  CpuKernels<SparseSegment<kScale, false>::template Op, Ts...> kernels;
  CpuKernels<SparseSegment<kScale, true>::template Op, Ts...> with_num_kernels;
  CpuKernels<SparseSegmentGrad<kScale>::template Op, float, double> grad_kernels;
  GradientRegistrar gradient, with_num_gradient;
};

const SparseSegmentFamily<SegmentScale::kSum, float, double, int32_t, int64_t> sparse_segment_sum(
    "Sum", "{float, double, int32, int64}");
const SparseSegmentFamily<SegmentScale::kMean, float, double> sparse_segment_mean(
    "Mean", "{float, double}");
const SparseSegmentFamily<SegmentScale::kSqrtN, float, double> sparse_segment_sqrt_n(
    "SqrtN", "{float, double}");

// --- UnsortedSegment{Sum,Max,Min,Prod} ---------------------------------------------

enum class Combine { kSum, kMax, kMin, kProd };

template <Combine kCombine>
struct UnsortedSegment {
  template <typename T>
  class Op : public OpKernel {
   public:
    using OpKernel::OpKernel;

    absl::Status Compute(OpKernelContext* ctx) override {
      const Tensor& data = ctx->input(0);
      const TensorShape& ids_shape = ctx->input(1).shape();
      ASSIGN_OR_RETURN(const std::vector<int64_t> ids, IndexInput(ctx, 1, "segment_ids"));
      absl::StatusOr<int64_t> num = IndexScalar(ctx->input(2), "num_segments");
      if (!num.ok()) return ctx->InvalidArgument(num.status().message());
      bool prefix = ids_shape.dims() <= data.dims();
      for (int d = 0; prefix && d < ids_shape.dims(); ++d) {
        prefix = ids_shape.dim_size(d) == data.dim_size(d);
      }
      if (!prefix) {
        return ctx->InvalidArgument("segment_ids shape ", ids_shape.DebugString(),
                                    " is not a prefix of data shape ", data.shape().DebugString());
      }
      if (*num < 0) return ctx->InvalidArgument("num_segments must be >= 0, got ", *num);
      for (size_t i = 0; i < ids.size(); ++i) {
        if (ids[i] >= *num) {
          return ctx->InvalidArgument("segment_ids[", i, "] = ", ids[i], " is out of range [0, ",
                                      *num, ")");
        }
      }
      std::vector<int64_t> dims = {*num};
      for (int d = ids_shape.dims(); d < data.dims(); ++d) dims.push_back(data.dim_size(d));
      ASSIGN_OR_RETURN(TensorShape shape,
                       OutputShape(dims, data.dtype(), ctx->op_kernel().type_string()));
      const int64_t inner = ids.empty() ? 0 : data.NumElements() / ids.size();
      if constexpr (kCombine == Combine::kSum) {
        if (ctx->op_kernel().output_memory_type(0) == MemoryType::kDevice) {
          // A GPU's: the rows added into zeros in device memory, in order.
          Tensor* out = ctx->allocate_output(0, shape);
          if (!ctx->allocation_status().ok()) return absl::OkStatus();  // The executor reports it.
          if (inner == 0 || out->NumElements() == 0) return absl::OkStatus();
          ASSIGN_OR_RETURN(Tensor rows,
                           data.Reshaped(TensorShape({static_cast<int64_t>(ids.size()), inner})));
          return ctx->device()->ScatterRows(ScatterOp::kAdd, rows, ids, out);
        }
      }
      Tensor* out = ctx->allocate_output_for_overwrite(0, shape);
      T* o = out->flat<T>().data();
      std::fill(o, o + out->NumElements(), Identity());
      const T* in = data.flat<T>().data();
      for (size_t i = 0; i < ids.size(); ++i) {
        if (ids[i] < 0) continue;  // Dropped, as in TensorFlow.
        T* dst = o + ids[i] * inner;
        const T* src = in + i * inner;
        for (int64_t k = 0; k < inner; ++k) {
          if constexpr (kCombine == Combine::kSum) dst[k] += src[k];
          if constexpr (kCombine == Combine::kProd) dst[k] *= src[k];
          if constexpr (kCombine == Combine::kMax) dst[k] = std::max(dst[k], src[k]);
          if constexpr (kCombine == Combine::kMin) dst[k] = std::min(dst[k], src[k]);
        }
      }
      return absl::OkStatus();
    }

   private:
    // What an empty segment holds.
    static T Identity() {
      if constexpr (kCombine == Combine::kMax) return std::numeric_limits<T>::lowest();
      if constexpr (kCombine == Combine::kMin) return std::numeric_limits<T>::max();
      if constexpr (kCombine == Combine::kProd) return T(1);
      return T(0);
    }
  };
};

absl::Status UnsortedSegmentShape(InferenceContext* c) {
  const PartialShape& data = c->input(0);
  const PartialShape& ids = c->input(1);
  int64_t num = kUnknownDim;
  ASSIGN_OR_RETURN(auto num_value, ConstIndexInput(c, 2, "num_segments"));
  if (num_value.has_value() && num_value->size() == 1) num = (*num_value)[0];
  if (!data.rank_known() || !ids.rank_known()) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  if (ids.rank() > data.rank()) {
    return c->Error(absl::StrCat("segment_ids shape ", ids.DebugString(),
                                 " is not a prefix of data shape ", data.DebugString()));
  }
  std::vector<int64_t> dims = {num};
  for (int d = ids.rank(); d < data.rank(); ++d) dims.push_back(data.dim(d));
  c->set_output(0, PartialShape(dims));
  return absl::OkStatus();
}

OpDefBuilder UnsortedSegmentOpDef(const std::string& name) {
  return OpDefBuilder(name)
      .Input("data: T")
      .Input("segment_ids: Tindices")
      .Input("num_segments: Tnumsegments")
      .Output("output: T")
      .Attr("T: {float, double, int32, int64}")
      .Attr("Tindices: {int32, int64}")
      .Attr("Tnumsegments: {int32, int64} = DT_INT32")
      .SetShapeFn(UnsortedSegmentShape);
}

template <Combine kCombine>
struct UnsortedSegmentFamily {
  explicit UnsortedSegmentFamily(const std::string& name)
      : op(UnsortedSegmentOpDef(name)), kernels(name) {}
  OpDefBuilderReceiver op;
  CpuKernels<UnsortedSegment<kCombine>::template Op, float, double, int32_t, int64_t> kernels;
};

const UnsortedSegmentFamily<Combine::kSum> unsorted_segment_sum("UnsortedSegmentSum");
// The shape arithmetic of reduction gradients (grad::ReducedShape) counts
// axes with it: on a GPU, int32 in host memory (GpuInt32HostKernel).
const GpuInt32HostKernel<UnsortedSegment<Combine::kSum>::template Op> gpu_unsorted_segment_sum(
    "UnsortedSegmentSum", {"data", "segment_ids", "num_segments", "output"});
// On a GPU (float, double, int64): the sum of a gather's gradient rows when
// they meet a dense one (IndexedSlices made dense), added in device memory
// by Device::ScatterRows; the ids are read on the host.
#define DFLOW_GPU_UNSORTED_SEGMENT_SUM(T)                                    \
  REGISTER_KERNEL(KernelDefBuilder("UnsortedSegmentSum")                     \
                      .Device(kDeviceGPU)                                    \
                      .TypeConstraint<T>("T")                                \
                      .HostMemory("segment_ids")                             \
                      .HostMemory("num_segments"),                           \
                  UnsortedSegment<Combine::kSum>::Op<T>)
DFLOW_GPU_UNSORTED_SEGMENT_SUM(float);
DFLOW_GPU_UNSORTED_SEGMENT_SUM(double);
DFLOW_GPU_UNSORTED_SEGMENT_SUM(int64_t);
#undef DFLOW_GPU_UNSORTED_SEGMENT_SUM
const UnsortedSegmentFamily<Combine::kMax> unsorted_segment_max("UnsortedSegmentMax");
const UnsortedSegmentFamily<Combine::kMin> unsorted_segment_min("UnsortedSegmentMin");
const UnsortedSegmentFamily<Combine::kProd> unsorted_segment_prod("UnsortedSegmentProd");

// The ids of an UnsortedSegment op made safe to gather with: negative ids
// clipped to 0, and `kept` (ids >= 0) shaped ids.shape + [1, ...] to
// broadcast against data.
struct ClippedIds {
  SymTensor clipped, kept;
};

absl::StatusOr<ClippedIds> ClipIds(GradBuilder* b, const SymTensor& data, const SymTensor& ids) {
  const SymTensor zeros = b->Op("ZerosLike", {ids});
  const SymTensor extra = b->Op("Sub", {b->Op("Rank", {data}), b->Op("Rank", {ids})});
  const SymTensor ones =
      b->Op("Fill", {b->Op("Reshape", {extra, grad::IntVec(b, {1})}), grad::Int(b, 1)});
  std::vector<SymTensor> kept_shape =
      b->OpN("ConcatV2", {{grad::ShapeOf(b, ids), ones}, {grad::Int(b, 0)}}, {});
  if (kept_shape.empty()) return b->status();
  return ClippedIds{b->Op("Maximum", {ids, zeros}),
                    b->Op("Reshape", {b->Op("GreaterEqual", {ids, zeros}), kept_shape[0]})};
}

// rows[ids], zero where an id was dropped.
SymTensor GatherKept(GradBuilder* b, const SymTensor& rows, const ClippedIds& ids) {
  const SymTensor gathered = b->Op("GatherV2", {rows, ids.clipped, grad::Int(b, 0)});
  return b->Op("SelectV2", {ids.kept, gathered, b->Op("ZerosLike", {gathered})});
}

// d(data) = dy[ids], zero for dropped ids.
absl::Status UnsortedSegmentSumGrad(GradContext* g) {
  ASSIGN_OR_RETURN(const ClippedIds ids, ClipIds(g->b(), g->input(0), g->input(1)));
  g->SetInputGrad(0, GatherKept(g->b(), g->grad_output(0), ids));
  return absl::OkStatus();
}

// d(data) for UnsortedSegmentMax/Min: each segment's gradient shared equally
// by the elements equal to its result (ties split it), zero elsewhere and
// for dropped ids, as TensorFlow's.
absl::Status UnsortedSegmentMinMaxGrad(GradContext* g) {
  GradBuilder* b = g->b();
  const SymTensor data = g->input(0);
  ASSIGN_OR_RETURN(const ClippedIds ids, ClipIds(b, data, g->input(1)));
  const SymTensor selected =
      b->Op("LogicalAnd", {b->Op("Equal", {data, GatherKept(b, g->output(0), ids)}), ids.kept});
  const SymTensor count = b->Op(
      "UnsortedSegmentSum",
      {b->Op("Cast", {selected}, {{"DstT", AttrType(data.dtype)}}), g->input(1), g->input(2)});
  const SymTensor share = GatherKept(b, b->Op("RealDiv", {g->grad_output(0), count}), ids);
  g->SetInputGrad(0, b->Op("SelectV2", {selected, share, b->Op("ZerosLike", {share})}));
  return absl::OkStatus();
}

// d(data) for UnsortedSegmentProd, as TensorFlow's: an element's partial
// derivative is its segment's product over the element when the segment has
// no zero, the product of the segment's other elements for its only zero, and
// zero for every element of a segment with two zeros or more.
absl::Status UnsortedSegmentProdGrad(GradContext* g) {
  GradBuilder* b = g->b();
  const SymTensor data = g->input(0), seg_ids = g->input(1), num = g->input(2);
  ASSIGN_OR_RETURN(const ClippedIds ids, ClipIds(b, data, seg_ids));
  const SymTensor is_zero = b->Op("Equal", {data, b->Scalar(data.dtype, 0)});
  const SymTensor num_zeros =
      b->Op("UnsortedSegmentSum",
            {b->Op("Cast", {is_zero}, {{"DstT", AttrType(DT_INT32)}}), seg_ids, num});
  const SymTensor dy = g->grad_output(0);
  const SymTensor kept_dy = b->Op(
      "SelectV2", {b->Op("Greater", {num_zeros, grad::Int(b, 1)}), b->Op("ZerosLike", {dy}), dy});
  // The product of each segment's non-zero elements.
  const SymTensor non_zero_prod =
      b->Op("UnsortedSegmentProd",
            {b->Op("SelectV2", {is_zero, b->Op("OnesLike", {data}), data}), seg_ids, num});
  const SymTensor prod_over_element =
      b->Op("RealDiv", {b->Op("GatherV2", {g->output(0), ids.clipped, grad::Int(b, 0)}), data});
  const SymTensor partial =
      b->Op("SelectV2", {is_zero, b->Op("GatherV2", {non_zero_prod, ids.clipped, grad::Int(b, 0)}),
                         prod_over_element});
  g->SetInputGrad(0, b->Op("Mul", {GatherKept(b, kept_dy, ids), partial}));
  return absl::OkStatus();
}

REGISTER_GRADIENT("UnsortedSegmentSum", UnsortedSegmentSumGrad);
REGISTER_GRADIENT("UnsortedSegmentMax", UnsortedSegmentMinMaxGrad);
REGISTER_GRADIENT("UnsortedSegmentMin", UnsortedSegmentMinMaxGrad);
REGISTER_GRADIENT("UnsortedSegmentProd", UnsortedSegmentProdGrad);

}  // namespace
}  // namespace dflow
