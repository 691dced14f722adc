// Ops that select parts of a tensor: Slice, StridedSlice and its gradient
// StridedSliceGrad (GatherV2 and the other gathers are in gather_ops.cc). On
// a GPU the region is copied in device memory (Device::CopyStrided).
#include "absl/strings/str_cat.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/framework/status.h"
#include "dflow/ops/array_util.h"

namespace dflow {
namespace {

// Runs a slice kernel's copy: shares the input's buffer when the selection
// is the whole input in order, else copies the strided region.
absl::Status EmitSlice(OpKernelContext* ctx, const Tensor& x, bool identity,
                       const TensorShape& processing, const TensorShape& final_shape,
                       absl::Span<const int64_t> begin, absl::Span<const int64_t> strides) {
  if (identity) {
    ASSIGN_OR_RETURN(Tensor y, x.Reshaped(final_shape));
    ctx->set_output(0, std::move(y));
    return absl::OkStatus();
  }
  Tensor* out = ctx->allocate_output_for_overwrite(0, final_shape);
  if (!ctx->allocation_status().ok()) return absl::OkStatus();  // The executor reports it.
  ASSIGN_OR_RETURN(Tensor view, out->Reshaped(processing));  // Same buffer.
  return StridedCopyOn(ctx, x, begin, strides, &view);
}

// ---------------------------------------------------------------------------
// Slice

// Checks begin[i]/size[i] against `dim` and resolves size -1; TensorFlow's errors.
absl::StatusOr<int64_t> SliceSize(int i, int64_t dim, int64_t begin, int64_t size) {
  if (begin < 0 || begin > dim) {
    return absl::InvalidArgumentError(
        absl::StrCat("Expected begin[", i, "] in [0, ", dim, "], but got ", begin));
  }
  if (size == -1) return dim - begin;
  if (size < 0 || size > dim - begin) {
    return absl::InvalidArgumentError(
        absl::StrCat("Expected size[", i, "] in [0, ", dim - begin, "], but got ", size));
  }
  return size;
}

absl::Status SliceShape(InferenceContext* c) {
  const PartialShape& in = c->input(0);
  PartialShape begin_s, size_s;
  RETURN_IF_ERROR(c->WithRank(c->input(1), 1, &begin_s));
  RETURN_IF_ERROR(c->WithRank(c->input(2), 1, &size_s));
  int64_t rank = in.rank_known() ? in.rank() : kUnknownDim;
  for (int64_t len : {begin_s.dim(0), size_s.dim(0)}) {
    if (len == kUnknownDim) continue;
    if (rank != kUnknownDim && len != rank) {
      return c->Error(absl::StrCat("Expected begin and size arguments to be 1-D tensors of size ",
                                   rank, ", but got shapes ", begin_s.DebugString(), " and ",
                                   size_s.DebugString(), " instead."));
    }
    rank = len;
  }
  if (rank == kUnknownDim) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(auto begin, ConstIndexInput(c, 1, "begin"));
  ASSIGN_OR_RETURN(auto size, ConstIndexInput(c, 2, "size"));
  std::vector<int64_t> dims(rank, kUnknownDim);
  for (int i = 0; size.has_value() && i < rank; ++i) {
    const int64_t dim = in.rank_known() ? in.dim(i) : kUnknownDim;
    const int64_t s = (*size)[i];
    if (begin.has_value() && dim != kUnknownDim) {
      absl::StatusOr<int64_t> n = SliceSize(i, dim, (*begin)[i], s);
      if (!n.ok()) return c->Error(std::string(n.status().message()));
      dims[i] = *n;
    } else if (s >= 0) {
      dims[i] = s;
    }
  }
  c->set_output(0, PartialShape(std::move(dims)));
  return absl::OkStatus();
}

class SliceOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    const Tensor& begin_t = ctx->input(1);
    const Tensor& size_t_ = ctx->input(2);
    const int rank = x.dims();
    if (begin_t.dims() != 1 || size_t_.dims() != 1 || begin_t.NumElements() != rank ||
        size_t_.NumElements() != rank) {
      return ctx->InvalidArgument("Expected begin and size arguments to be 1-D tensors of size ",
                                  rank, ", but got shapes ", begin_t.shape().DebugString(), " and ",
                                  size_t_.shape().DebugString(), " instead.");
    }
    ASSIGN_OR_RETURN(std::vector<int64_t> begin, IndexValues(begin_t, "begin"));
    ASSIGN_OR_RETURN(std::vector<int64_t> size, IndexValues(size_t_, "size"));
    TensorShape out_shape;
    bool identity = true;
    for (int i = 0; i < rank; ++i) {
      absl::StatusOr<int64_t> n = SliceSize(i, x.dim_size(i), begin[i], size[i]);
      if (!n.ok()) return ctx->InvalidArgument(n.status().message());
      out_shape.AddDim(*n);
      identity = identity && *n == x.dim_size(i);
    }
    return EmitSlice(ctx, x, identity, out_shape, out_shape, begin, std::vector<int64_t>(rank, 1));
  }
};

REGISTER_OP("Slice")
    .Input("input: T")
    .Input("begin: Index")
    .Input("size: Index")
    .Output("output: T")
    .Attr("T: type")
    .Attr("Index: {int32, int64}")
    .SetShapeFn(SliceShape);
REGISTER_KERNEL(KernelDefBuilder("Slice")
                    .Device(kDeviceCPU)
                    .TypeConstraint("T", MovableTypes())
                    .TypeConstraint("Index", IndexTypes()),
                SliceOp);
// On a GPU the region is copied in device memory (Device::CopyStrided); an
// int32 slice is of a shape, taken in host memory.
REGISTER_KERNEL(KernelDefBuilder("Slice")
                    .Device(kDeviceGPU)
                    .TypeConstraint("T", GpuTensorTypes())
                    .TypeConstraint("Index", IndexTypes())
                    .HostMemory("begin")
                    .HostMemory("size"),
                SliceOp);
REGISTER_KERNEL(KernelDefBuilder("Slice")
                    .Device(kDeviceGPU)
                    .TypeConstraint<int32_t>("T")
                    .TypeConstraint("Index", IndexTypes())
                    .HostMemory("input")
                    .HostMemory("begin")
                    .HostMemory("size")
                    .HostMemory("output"),
                SliceOp);

// ---------------------------------------------------------------------------
// StridedSlice
//
// The sparse spec (begin/end/strides with masks, as a Python subscript like
// x[1:, ..., tf.newaxis, 2] gives it) is first expanded to a dense spec with
// one entry per input dim; each dim then yields an interval and a size.

struct StridedSliceMasks {
  int64_t begin = 0, end = 0, ellipsis = 0, new_axis = 0, shrink = 0;
};

// Where each output dim comes from: an input dim, or a new axis of size 1.
constexpr int64_t kNewAxis = -1;
constexpr int64_t kShrunk = -2;

struct DenseDim {
  int64_t begin = 0, end = 0, stride = 1;
  bool begin_masked = true, end_masked = true, shrink = false;
};

struct StridedSliceSpec {
  std::vector<int64_t> begin, strides;   // per input dim, to feed StridedCopy
  std::vector<int64_t> processing_dims;  // per input dim; kUnknownDim if unknown
  std::vector<int64_t> final_dims;       // the output shape
  bool identity = true;                  // the whole input in order
};

bool Bit(int64_t mask, int i) { return i < 63 && ((mask >> i) & 1); }

// Expands the sparse spec into one DenseDim per input dim; `gather` gets one
// entry per sparse item that yields an output dim (input index or kNewAxis)
// and kShrunk for shrunk dims.
absl::Status BuildDenseSpec(int rank, const std::vector<int64_t>* begin,
                            const std::vector<int64_t>* end, const std::vector<int64_t>& strides,
                            const StridedSliceMasks& m, std::vector<DenseDim>* dense,
                            std::vector<int64_t>* gather) {
  const int n = static_cast<int>(strides.size());
  bool has_ellipsis = false;
  for (int i = 0; i < n; ++i) has_ellipsis |= Bit(m.ellipsis, i);
  dense->assign(rank, DenseDim());
  int full = 0;
  for (int i = 0; i < n + (has_ellipsis ? 0 : 1); ++i) {
    if (i == n || Bit(m.ellipsis, i)) {  // The explicit or implicit (trailing) ellipsis.
      int consumed_after = 0;
      for (int j = i + 1; j < n; ++j) consumed_after += Bit(m.new_axis, j) ? 0 : 1;
      for (; full < rank - consumed_after; ++full) gather->push_back(full);
    } else if (Bit(m.new_axis, i)) {
      gather->push_back(kNewAxis);
    } else {
      if (full >= rank) {
        return absl::InvalidArgumentError(absl::StrCat("Index out of range using input dim ", full,
                                                       "; input has only ", rank, " dims"));
      }
      DenseDim& d = (*dense)[full];
      d.begin = begin ? (*begin)[i] : 0;
      d.end = end ? (*end)[i] : 0;
      d.stride = strides[i];
      d.begin_masked = Bit(m.begin, i);
      d.end_masked = Bit(m.end, i);
      d.shrink = Bit(m.shrink, i);
      gather->push_back(d.shrink ? kShrunk : full);
      ++full;
    }
  }
  return absl::OkStatus();
}

// Number of elements from `begin` toward `end` (exclusive) by `stride`.
int64_t IntervalSize(int64_t begin, int64_t end, int64_t stride) {
  const int64_t len = end - begin;
  if (len == 0 || ((len < 0) != (stride < 0))) return 0;
  return len / stride + (len % stride != 0 ? 1 : 0);
}

// Resolves dense dim `i` of size `dim` (kUnknownDim allowed) into `spec`.
// `bounds_known` says whether begin/end values are known.
absl::Status ResolveDim(int i, int64_t dim, const DenseDim& d, bool bounds_known,
                        StridedSliceSpec* spec) {
  const int64_t s = d.stride;
  if (s == 0) return absl::InvalidArgumentError(absl::StrCat("strides[", i, "] must be non-zero"));
  if (d.shrink && s < 0) {
    return absl::InvalidArgumentError("only stride 1 allowed on non-range indexing.");
  }
  int64_t begin = 0, size = kUnknownDim;
  if (dim == kUnknownDim) {
    size = d.shrink ? 1 : kUnknownDim;
  } else if (bounds_known && d.shrink) {
    begin = d.begin < 0 ? dim + d.begin : d.begin;
    if (begin < 0 || begin >= dim) {
      return absl::InvalidArgumentError(
          absl::StrCat("slice index ", begin, " of dimension ", i, " out of bounds."));
    }
    size = 1;
  } else if (bounds_known) {
    // Valid positions: [0, dim] going forward, [-1, dim - 1] going backward.
    const int64_t lo = s > 0 ? 0 : -1, hi = s > 0 ? dim : dim - 1;
    auto canonical = [&](int64_t x, bool masked, bool is_begin) {
      if (masked) return (s > 0) == is_begin ? lo : hi;
      const int64_t fwd = x < 0 ? dim + x : x;
      return std::clamp(fwd, lo, hi);
    };
    begin = canonical(d.begin, d.begin_masked, true);
    size = IntervalSize(begin, canonical(d.end, d.end_masked, false), s);
  } else if (d.shrink) {
    size = 1;
  } else if (d.begin_masked && d.end_masked) {
    begin = s > 0 ? 0 : dim - 1;
    size = IntervalSize(begin, s > 0 ? dim : -1, s);
  }
  spec->begin.push_back(begin);
  spec->strides.push_back(s);
  spec->processing_dims.push_back(size);
  spec->identity = spec->identity && dim != kUnknownDim && begin == 0 && s == 1 && size == dim;
  return absl::OkStatus();
}

// Resolves a strided slice of a tensor with dims `in_dims` (kUnknownDim
// allowed). `begin`/`end` may be null when their values are unknown.
absl::StatusOr<StridedSliceSpec> ResolveStridedSlice(const std::vector<int64_t>& in_dims,
                                                     const std::vector<int64_t>* begin,
                                                     const std::vector<int64_t>* end,
                                                     const std::vector<int64_t>& strides,
                                                     const StridedSliceMasks& m) {
  if (m.ellipsis & (m.ellipsis - 1)) {
    return absl::InvalidArgumentError("Multiple ellipses in slice spec not allowed");
  }
  const int rank = static_cast<int>(in_dims.size());
  std::vector<DenseDim> dense;
  std::vector<int64_t> gather;
  RETURN_IF_ERROR(BuildDenseSpec(rank, begin, end, strides, m, &dense, &gather));
  StridedSliceSpec spec;
  const bool bounds_known = begin != nullptr && end != nullptr;
  for (int i = 0; i < rank; ++i) {
    RETURN_IF_ERROR(ResolveDim(i, in_dims[i], dense[i], bounds_known, &spec));
  }
  for (int64_t g : gather) {
    if (g == kNewAxis) spec.final_dims.push_back(1);
    if (g >= 0) spec.final_dims.push_back(spec.processing_dims[g]);
  }
  return spec;
}

StridedSliceMasks ReadMasks(const tensorflow::NodeDef& node) {
  StridedSliceMasks m;
  // Defaults (0) are added before validation; a missing attr keeps 0.
  GetNodeAttr(node, "begin_mask", &m.begin).IgnoreError();
  GetNodeAttr(node, "end_mask", &m.end).IgnoreError();
  GetNodeAttr(node, "ellipsis_mask", &m.ellipsis).IgnoreError();
  GetNodeAttr(node, "new_axis_mask", &m.new_axis).IgnoreError();
  GetNodeAttr(node, "shrink_axis_mask", &m.shrink).IgnoreError();
  return m;
}

std::string SpecShapesError(const std::string& b, const std::string& e, const std::string& s) {
  return absl::StrCat(
      "Expected begin, end, and strides to be 1D equal size tensors, but got "
      "shapes ",
      b, ", ", e, ", and ", s, " instead.");
}

absl::Status StridedSliceShape(InferenceContext* c) {
  int64_t len = kUnknownDim;
  for (int i = 1; i <= 3; ++i) {
    PartialShape v;
    absl::Status s = c->WithRank(c->input(i), 1, &v);
    if (!s.ok() || (len != kUnknownDim && v.dim(0) != kUnknownDim && v.dim(0) != len)) {
      return c->Error(SpecShapesError(c->input(1).DebugString(), c->input(2).DebugString(),
                                      c->input(3).DebugString()));
    }
    if (v.dim(0) != kUnknownDim) len = v.dim(0);
  }
  const PartialShape& in = c->input(0);
  ASSIGN_OR_RETURN(auto begin, ConstIndexInput(c, 1, "begin"));
  ASSIGN_OR_RETURN(auto end, ConstIndexInput(c, 2, "end"));
  ASSIGN_OR_RETURN(auto strides, ConstIndexInput(c, 3, "strides"));
  if (!in.rank_known() || !strides.has_value()) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  absl::StatusOr<StridedSliceSpec> spec =
      ResolveStridedSlice(in.dims(), begin ? &*begin : nullptr, end ? &*end : nullptr, *strides,
                          ReadMasks(c->node_def()));
  if (!spec.ok()) return c->Error(std::string(spec.status().message()));
  c->set_output(0, PartialShape(spec->final_dims));
  return absl::OkStatus();
}

class StridedSliceOp : public OpKernel {
 public:
  explicit StridedSliceOp(OpKernelConstruction* c) : OpKernel(c), masks_(ReadMasks(c->def())) {}
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    const Tensor& b = ctx->input(1);
    const Tensor& e = ctx->input(2);
    const Tensor& s = ctx->input(3);
    if (b.dims() != 1 || e.dims() != 1 || s.dims() != 1 || b.NumElements() != s.NumElements() ||
        e.NumElements() != s.NumElements()) {
      return ctx->InvalidArgument(SpecShapesError(b.shape().DebugString(), e.shape().DebugString(),
                                                  s.shape().DebugString()));
    }
    ASSIGN_OR_RETURN(std::vector<int64_t> begin, IndexValues(b, "begin"));
    ASSIGN_OR_RETURN(std::vector<int64_t> end, IndexValues(e, "end"));
    ASSIGN_OR_RETURN(std::vector<int64_t> strides, IndexValues(s, "strides"));
    std::vector<int64_t> in_dims(x.shape().dim_sizes().begin(), x.shape().dim_sizes().end());
    absl::StatusOr<StridedSliceSpec> spec =
        ResolveStridedSlice(in_dims, &begin, &end, strides, masks_);
    if (!spec.ok()) return ctx->InvalidArgument(spec.status().message());
    return EmitSlice(ctx, x, spec->identity, TensorShape(spec->processing_dims),
                     TensorShape(spec->final_dims), spec->begin, spec->strides);
  }

 private:
  const StridedSliceMasks masks_;
};

REGISTER_OP("StridedSlice")
    .Input("input: T")
    .Input("begin: Index")
    .Input("end: Index")
    .Input("strides: Index")
    .Output("output: T")
    .Attr("T: type")
    .Attr("Index: {int16, int32, int64}")
    .Attr("begin_mask: int = 0")
    .Attr("end_mask: int = 0")
    .Attr("ellipsis_mask: int = 0")
    .Attr("new_axis_mask: int = 0")
    .Attr("shrink_axis_mask: int = 0")
    .SetShapeFn(StridedSliceShape);
REGISTER_KERNEL(KernelDefBuilder("StridedSlice")
                    .Device(kDeviceCPU)
                    .TypeConstraint("T", MovableTypes())
                    .TypeConstraint("Index", IndexTypes()),
                StridedSliceOp);
REGISTER_KERNEL(KernelDefBuilder("StridedSlice")
                    .Device(kDeviceGPU)
                    .TypeConstraint("T", GpuTensorTypes())
                    .TypeConstraint("Index", IndexTypes())
                    .HostMemory("begin")
                    .HostMemory("end")
                    .HostMemory("strides"),
                StridedSliceOp);
REGISTER_KERNEL(KernelDefBuilder("StridedSlice")
                    .Device(kDeviceGPU)
                    .TypeConstraint<int32_t>("T")
                    .TypeConstraint("Index", IndexTypes())
                    .HostMemory("input")
                    .HostMemory("begin")
                    .HostMemory("end")
                    .HostMemory("strides")
                    .HostMemory("output"),
                StridedSliceOp);

// StridedSliceGrad: dy (the gradient of a StridedSlice's output) placed where
// the slice took its elements from an input of `shape`, zeros elsewhere.
class StridedSliceGradOp : public OpKernel {
 public:
  explicit StridedSliceGradOp(OpKernelConstruction* c)
      : OpKernel(c), masks_(ReadMasks(c->def())) {}
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& shape = ctx->input(0);
    const Tensor& b = ctx->input(1);
    const Tensor& e = ctx->input(2);
    const Tensor& s = ctx->input(3);
    const Tensor& dy = ctx->input(4);
    if (shape.dims() != 1) {
      return ctx->InvalidArgument(
          absl::StrCat("shape must be 1-D, got shape ", shape.shape().DebugString()));
    }
    if (b.dims() != 1 || e.dims() != 1 || s.dims() != 1 || b.NumElements() != s.NumElements() ||
        e.NumElements() != s.NumElements()) {
      return ctx->InvalidArgument(SpecShapesError(b.shape().DebugString(), e.shape().DebugString(),
                                                  s.shape().DebugString()));
    }
    ASSIGN_OR_RETURN(std::vector<int64_t> dims, IndexValues(shape, "shape"));
    ASSIGN_OR_RETURN(std::vector<int64_t> begin, IndexValues(b, "begin"));
    ASSIGN_OR_RETURN(std::vector<int64_t> end, IndexValues(e, "end"));
    ASSIGN_OR_RETURN(std::vector<int64_t> strides, IndexValues(s, "strides"));
    absl::StatusOr<TensorShape> dx_shape = TensorShape::FromDims(dims);
    if (!dx_shape.ok()) return ctx->InvalidArgument(dx_shape.status().message());
    absl::StatusOr<StridedSliceSpec> spec = ResolveStridedSlice(dims, &begin, &end, strides, masks_);
    if (!spec.ok()) return ctx->InvalidArgument(spec.status().message());
    if (dy.shape() != TensorShape(spec->final_dims)) {
      return ctx->InvalidArgument(absl::StrCat("shape of dy was ", dy.shape().DebugString(),
                                               " instead of ",
                                               TensorShape(spec->final_dims).DebugString()));
    }
    RETURN_IF_ERROR(CheckTensorBytes(dy.dtype(), *dx_shape));
    if (ctx->op_kernel().output_memory_type(0) == MemoryType::kDevice) {
      Tensor* dx = ctx->allocate_output(0, *dx_shape);  // Zeros.
      if (!ctx->allocation_status().ok()) return absl::OkStatus();  // The executor reports it.
      if (dy.NumElements() == 0) return absl::OkStatus();
      ASSIGN_OR_RETURN(Tensor dy_view, dy.Reshaped(TensorShape(spec->processing_dims)));
      return StridedScatterOnDevice(ctx, dy_view, spec->begin, spec->strides, dx);
    }
    Tensor dx(dy.dtype(), *dx_shape);  // Zeros.
    const int rank = static_cast<int>(dims.size());
    std::vector<int64_t> dx_strides(rank, 1);
    for (int d = rank - 2; d >= 0; --d) dx_strides[d] = dx_strides[d + 1] * dims[d + 1];
    const int64_t n = dy.NumElements();
    RETURN_IF_ERROR(SwitchByElementSize(dy.dtype(), "StridedSliceGrad", [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* in = ElementsOf<T>(dy);
      T* out = static_cast<T*>(dx.raw_data());
      std::vector<int64_t> idx(rank, 0);
      for (int64_t k = 0; k < n; ++k) {
        int64_t offset = 0;
        for (int d = 0; d < rank; ++d) {
          offset += (spec->begin[d] + idx[d] * spec->strides[d]) * dx_strides[d];
        }
        out[offset] = in[k];
        for (int d = rank - 1; d >= 0 && ++idx[d] == spec->processing_dims[d]; --d) idx[d] = 0;
      }
      return absl::OkStatus();
    }));
    ctx->set_output(0, std::move(dx));
    return absl::OkStatus();
  }

 private:
  const StridedSliceMasks masks_;
};

REGISTER_OP("StridedSliceGrad")
    .Input("shape: Index")
    .Input("begin: Index")
    .Input("end: Index")
    .Input("strides: Index")
    .Input("dy: T")
    .Output("output: T")
    .Attr("T: type")
    .Attr("Index: {int32, int64}")
    .Attr("begin_mask: int = 0")
    .Attr("end_mask: int = 0")
    .Attr("ellipsis_mask: int = 0")
    .Attr("new_axis_mask: int = 0")
    .Attr("shrink_axis_mask: int = 0")
    .SetShapeFn([](InferenceContext* c) {
      PartialShape out;
      RETURN_IF_ERROR(c->MakeShapeFromShapeTensor(0, &out));
      c->set_output(0, out);
      return absl::OkStatus();
    });
REGISTER_KERNEL(KernelDefBuilder("StridedSliceGrad")
                    .Device(kDeviceCPU)
                    .TypeConstraint("T", MovableTypes())
                    .TypeConstraint("Index", IndexTypes()),
                StridedSliceGradOp);
// On a GPU (StridedSlice's gradient): dy is copied into dx's zeros in
// device memory; the spec (shape, begin, end, strides) is read on the host.
REGISTER_KERNEL(KernelDefBuilder("StridedSliceGrad")
                    .Device(kDeviceGPU)
                    .TypeConstraint("T", GpuTensorTypes())
                    .TypeConstraint("Index", IndexTypes())
                    .HostMemory("shape")
                    .HostMemory("begin")
                    .HostMemory("end")
                    .HostMemory("strides"),
                StridedSliceGradOp);
REGISTER_KERNEL(KernelDefBuilder("StridedSliceGrad")
                    .Device(kDeviceGPU)
                    .TypeConstraint<int32_t>("T")
                    .TypeConstraint("Index", IndexTypes())
                    .HostMemory("shape")
                    .HostMemory("begin")
                    .HostMemory("end")
                    .HostMemory("strides")
                    .HostMemory("dy")
                    .HostMemory("output"),
                StridedSliceGradOp);

}  // namespace
}  // namespace dflow
