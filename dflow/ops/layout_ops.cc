// Ops that put each output element at an index computed from the input's:
// ReverseV2 (axes flipped), BroadcastTo (numpy broadcast to a given shape),
// Diag and DiagPart (a tensor's diagonal, built or read), and OneHot.
// They only move elements, so one instantiation per element size serves
// every dtype (SwitchByElementSize).
#include <vector>

#include "absl/strings/str_cat.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/framework/status.h"
#include "dflow/ops/array_util.h"

namespace dflow {
namespace {

// `dims` as a TensorShape small enough to allocate as `dtype`; the overflow
// and size checks every kernel here makes before allocating.
absl::StatusOr<TensorShape> CheckedShape(OpKernelContext* ctx, absl::Span<const int64_t> dims,
                                         DataType dtype) {
  absl::StatusOr<TensorShape> shape = TensorShape::FromDims(dims);
  if (!shape.ok()) return ctx->InvalidArgument(shape.status().message());
  RETURN_IF_ERROR(CheckOutputSize(shape->num_elements(), dtype, ctx->op_kernel().def().op()));
  return shape;
}

// The types Diag and DiagPart take that dflow tensors hold.
const DataTypeVector& DiagTypes() {
  static const DataTypeVector kTypes = {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64};
  return kTypes;
}

// ---------------------------------------------------------------------------
// ReverseV2

class ReverseV2Op : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    const Tensor& axis_t = ctx->input(1);
    if (axis_t.dims() != 1) {
      return ctx->InvalidArgument("'dims' must be 1-dimension, not ", axis_t.dims());
    }
    ASSIGN_OR_RETURN(std::vector<int64_t> axes, IndexValues(axis_t, "axis"));
    const int rank = x.dims();
    std::vector<int64_t> begin(rank, 0), strides(rank, 1);
    for (size_t i = 0; i < axes.size(); ++i) {
      int64_t a;
      if (!CanonicalAxis(axes[i], rank, &a)) {
        return ctx->InvalidArgument("'axis'[", i, "] = ", axes[i], " is out of valid range [0, ",
                                    rank - 1, "]");
      }
      if (strides[a] == -1) return ctx->InvalidArgument("axis ", a, " specified more than once.");
      strides[a] = -1;
      begin[a] = x.dim_size(a) - 1;
    }
    Tensor* out = ctx->allocate_output_for_overwrite(0, x.shape());
    return StridedCopy(x, begin, strides, out);
  }
};

REGISTER_OP("ReverseV2")
    .Input("tensor: T")
    .Input("axis: Tidx")
    .Output("output: T")
    .Attr("Tidx: {int32, int64} = DT_INT32")
    .Attr(
        "T: {uint8, int8, uint16, int16, int32, uint32, int64, uint64, bool, bfloat16, half, "
        "float, double, complex64, complex128, string}")
    .SetShapeFn(UnchangedShape);
REGISTER_KERNEL(KernelDefBuilder("ReverseV2")
                    .Device(kDeviceCPU)
                    .TypeConstraint("T", MovableTypes())
                    .TypeConstraint("Tidx", IndexTypes()),
                ReverseV2Op);

// ---------------------------------------------------------------------------
// BroadcastTo

absl::Status BroadcastToShape(InferenceContext* c) {
  PartialShape out;
  RETURN_IF_ERROR(c->MakeShapeFromShapeTensor(1, &out));
  c->set_output(0, out);
  return absl::OkStatus();
}

class BroadcastToOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    // x viewed at the output's rank: every dim equal to the output's, or 1
    // (read with stride 0).
    std::vector<int64_t> in_dims;
    ASSIGN_OR_RETURN(const TensorShape out_shape, BroadcastToShape(*ctx, &in_dims));
    const int rank = out_shape.dims();
    std::vector<int64_t> strides(rank, 1);
    for (int d = 0; d < rank; ++d) {
      if (in_dims[d] != out_shape.dim_size(d)) strides[d] = 0;
    }
    if (x.shape() == out_shape) {
      ctx->set_output(0, x);
      return absl::OkStatus();
    }
    Tensor* out = ctx->allocate_output_for_overwrite(0, out_shape);
    if (out->NumElements() == 0) return absl::OkStatus();
    ASSIGN_OR_RETURN(Tensor view, x.Reshaped(TensorShape(in_dims)));
    return StridedCopy(view, std::vector<int64_t>(rank, 0), strides, out);
  }
};

REGISTER_OP("BroadcastTo")
    .Input("input: T")
    .Input("shape: Tidx")
    .Output("output: T")
    .Attr("T: type")
    .Attr("Tidx: {int32, int64} = DT_INT32")
    .SetShapeFn(BroadcastToShape);
REGISTER_KERNEL(KernelDefBuilder("BroadcastTo")
                    .Device(kDeviceCPU)
                    .TypeConstraint("T", MovableTypes())
                    .TypeConstraint("Tidx", IndexTypes()),
                BroadcastToOp);

// ---------------------------------------------------------------------------
// Diag, DiagPart: a tensor of shape D and the one of shape D + D holding it
// on its diagonal (element i of the flat input at flat index i * (n + 1)).

absl::Status DiagShape(InferenceContext* c) {
  const PartialShape& in = c->input(0);
  if (!in.rank_known()) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  if (in.rank() == 0) return c->Error("Input must be at least rank 1, got 0");
  std::vector<int64_t> dims = in.dims();
  dims.insert(dims.end(), in.dims().begin(), in.dims().end());
  c->set_output(0, PartialShape(std::move(dims)));
  return absl::OkStatus();
}

class DiagOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    if (x.dims() == 0) return ctx->InvalidArgument("Input must be at least rank 1, got 0");
    std::vector<int64_t> dims(x.shape().dim_sizes().begin(), x.shape().dim_sizes().end());
    dims.insert(dims.end(), dims.begin(), dims.end());
    ASSIGN_OR_RETURN(TensorShape shape, CheckedShape(ctx, dims, x.dtype()));
    Tensor* out = ctx->allocate_output(0, shape);  // Zeros off the diagonal.
    const int64_t n = x.NumElements();
    return SwitchByElementSize(x.dtype(), "Diag", [&](auto tag) {
      using T = typename decltype(tag)::type;
      for (int64_t i = 0; i < n; ++i) MutableElementsOf<T>(out)[i * (n + 1)] = ElementsOf<T>(x)[i];
      return absl::OkStatus();
    });
  }
};

// The first half of the dims of DiagPart's input (kUnknownDim where neither
// half knows it), or its error.
absl::StatusOr<std::vector<int64_t>> DiagPartDims(const std::vector<int64_t>& dims) {
  const size_t k = dims.size() / 2;
  if (dims.size() % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "The rank of the tensor should be even and positive, got shape ", DimsString(dims)));
  }
  std::vector<int64_t> out(dims.begin(), dims.begin() + k);
  for (size_t i = 0; i < k; ++i) {
    if (out[i] == kUnknownDim) {
      out[i] = dims[i + k];  // Partial shapes: the other half may know it.
    } else if (dims[i + k] != out[i] && dims[i + k] != kUnknownDim) {
      return absl::InvalidArgumentError(absl::StrCat("Invalid shape ", DimsString(dims),
                                                     ": dimensions ", i, " and ", i + k,
                                                     " do not match."));
    }
  }
  return out;
}

absl::Status DiagPartShape(InferenceContext* c) {
  const PartialShape& in = c->input(0);
  if (!in.rank_known()) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<int64_t>> dims = DiagPartDims(in.dims());
  if (!dims.ok()) return c->Error(std::string(dims.status().message()));
  c->set_output(0, PartialShape(*std::move(dims)));
  return absl::OkStatus();
}

class DiagPartOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    absl::StatusOr<std::vector<int64_t>> dims = DiagPartDims(
        std::vector<int64_t>(x.shape().dim_sizes().begin(), x.shape().dim_sizes().end()));
    if (!dims.ok()) return ctx->InvalidArgument(dims.status().message());
    Tensor* out = ctx->allocate_output_for_overwrite(0, TensorShape(*dims));
    const int64_t n = out->NumElements();
    return SwitchByElementSize(x.dtype(), "DiagPart", [&](auto tag) {
      using T = typename decltype(tag)::type;
      for (int64_t i = 0; i < n; ++i) MutableElementsOf<T>(out)[i] = ElementsOf<T>(x)[i * (n + 1)];
      return absl::OkStatus();
    });
  }
};

#define DFLOW_DIAG_TYPES "T: {bfloat16, half, float, double, int32, int64, complex64, complex128}"
REGISTER_OP("Diag")
    .Input("diagonal: T")
    .Output("output: T")
    .Attr(DFLOW_DIAG_TYPES)
    .SetShapeFn(DiagShape);
REGISTER_KERNEL(KernelDefBuilder("Diag").Device(kDeviceCPU).TypeConstraint("T", DiagTypes()),
                DiagOp);
REGISTER_OP("DiagPart")
    .Input("input: T")
    .Output("diagonal: T")
    .Attr(DFLOW_DIAG_TYPES)
    .SetShapeFn(DiagPartShape);
REGISTER_KERNEL(KernelDefBuilder("DiagPart").Device(kDeviceCPU).TypeConstraint("T", DiagTypes()),
                DiagPartOp);
#undef DFLOW_DIAG_TYPES

// ---------------------------------------------------------------------------
// OneHot

// OneHot's axis in [0, out_rank), from its attr (-1 = last).
absl::StatusOr<int> OneHotAxis(int64_t axis, int out_rank) {
  if (axis == -1) return out_rank - 1;
  if (axis < 0 || axis >= out_rank) {
    return absl::InvalidArgumentError(absl::StrCat("Expected axis to be -1 or between [0, ",
                                                   out_rank, ").  But received: ", axis));
  }
  return static_cast<int>(axis);
}

absl::Status OneHotShape(InferenceContext* c) {
  const PartialShape& indices = c->input(0);
  if (!indices.rank_known()) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  int64_t axis_attr;
  RETURN_IF_ERROR(c->GetAttr("axis", &axis_attr));
  absl::StatusOr<int> axis = OneHotAxis(axis_attr, indices.rank() + 1);
  if (!axis.ok()) return c->Error(std::string(axis.status().message()));
  int64_t depth = kUnknownDim;
  if (const Tensor* d = c->input_tensor(1); d != nullptr && d->NumElements() == 1 &&
                                            d->dtype() == DT_INT32 && d->flat<int32_t>()[0] >= 0) {
    depth = d->flat<int32_t>()[0];
  }
  std::vector<int64_t> dims = indices.dims();
  dims.insert(dims.begin() + *axis, depth);
  c->set_output(0, PartialShape(std::move(dims)));
  return absl::OkStatus();
}

class OneHotOp : public OpKernel {
 public:
  explicit OneHotOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("axis", &axis_).IgnoreError();  // Recorded on c.
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& indices = ctx->input(0);
    const char* names[] = {"indices", "depth", "on_value", "off_value"};
    for (int i = 1; i < 4; ++i) {
      if (ctx->input(i).dims() != 0) {
        return ctx->InvalidArgument(
            names[i], " must be a scalar, but got: ", ctx->input(i).shape().DebugString());
      }
    }
    const int64_t depth = ctx->input(1).flat<int32_t>()[0];
    if (depth < 0) return ctx->InvalidArgument("depth must be non-negative, got: ", depth);
    absl::StatusOr<int> axis = OneHotAxis(axis_, indices.dims() + 1);
    if (!axis.ok()) return ctx->InvalidArgument(axis.status().message());
    std::vector<int64_t> dims(indices.shape().dim_sizes().begin(),
                              indices.shape().dim_sizes().end());
    dims.insert(dims.begin() + *axis, depth);
    const DataType dtype = ctx->input(2).dtype();
    ASSIGN_OR_RETURN(TensorShape shape, CheckedShape(ctx, dims, dtype));
    Tensor* out = ctx->allocate_output_for_overwrite(0, shape);
    ASSIGN_OR_RETURN(std::vector<int64_t> ids, Indices(indices));
    // out[p, d, s] for p over the index dims before the axis, s after it.
    const int64_t suffix = DimProduct(dims, *axis + 1, static_cast<int>(dims.size()));
    const int64_t prefix = suffix == 0 ? 0 : static_cast<int64_t>(ids.size()) / suffix;
    return SwitchByElementSize(dtype, "OneHot", [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T on = ElementsOf<T>(ctx->input(2))[0], off = ElementsOf<T>(ctx->input(3))[0];
      T* o = MutableElementsOf<T>(out);
      for (int64_t p = 0; p < prefix; ++p) {
        for (int64_t d = 0; d < depth; ++d) {
          for (int64_t s = 0; s < suffix; ++s) {
            *o++ = ids[p * suffix + s] == d ? on : off;
          }
        }
      }
      return absl::OkStatus();
    });
  }

 private:
  // The indices as int64 (uint8 ones too).
  static absl::StatusOr<std::vector<int64_t>> Indices(const Tensor& t) {
    if (t.dtype() != DT_UINT8) return IndexValues(t, "indices");
    auto v = t.flat<uint8_t>();
    return std::vector<int64_t>(v.begin(), v.end());
  }

  int64_t axis_ = -1;
};

REGISTER_OP("OneHot")
    .Input("indices: TI")
    .Input("depth: int32")
    .Input("on_value: T")
    .Input("off_value: T")
    .Output("output: T")
    .Attr("axis: int = -1")
    .Attr("T: type")
    .Attr("TI: {uint8, int8, int32, int64} = DT_INT64")
    .SetShapeFn(OneHotShape);
REGISTER_KERNEL(KernelDefBuilder("OneHot")
                    .Device(kDeviceCPU)
                    .TypeConstraint("T", MovableTypes())
                    .TypeConstraint("TI", {DT_UINT8, DT_INT32, DT_INT64}),
                OneHotOp);

}  // namespace
}  // namespace dflow
