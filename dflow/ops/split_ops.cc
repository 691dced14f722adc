// Ops that cut one tensor into several along an axis: Split (equal pieces),
// SplitV (given sizes, one of them may be -1) and Unpack (pieces of size 1
// with the axis dropped). Each output is a copy; ConcatV2 and Pack are their
// inverses (array_ops.cc), and their gradients (array_grad.cc). On a GPU the
// pieces are copied in device memory (Device::CopyStrided).
#include <vector>

#include "absl/strings/str_cat.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/framework/status.h"
#include "dflow/ops/array_util.h"

namespace dflow {
namespace {

// Output i := the i-th piece of `value` along `axis`, sizes[i] long (the axis
// removed when `drop_axis`). REQUIRES: sizes sum to value.dim_size(axis).
absl::Status WritePieces(OpKernelContext* ctx, const Tensor& value, int axis,
                         const std::vector<int64_t>& sizes, bool drop_axis) {
  const auto& dims = value.shape().dim_sizes();
  const int64_t outer = DimProduct(dims, 0, axis);
  const int64_t inner = DimProduct(dims, axis + 1, value.dims());
  const int64_t row = value.dim_size(axis) * inner;  // Input elements per outer index.
  const bool on_device = ctx->op_kernel().output_memory_type(0) == MemoryType::kDevice;
  int64_t offset = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    TensorShape shape = value.shape();
    if (drop_axis) {
      shape.RemoveDim(axis);
    } else {
      shape.set_dim(axis, sizes[i]);
    }
    Tensor* out = ctx->allocate_output_for_overwrite(static_cast<int>(i), shape);
    if (!ctx->allocation_status().ok()) return absl::OkStatus();  // The executor reports it.
    const int64_t n = sizes[i] * inner;
    if (on_device) {
      RETURN_IF_ERROR(CopyOnDevice(ctx, value, offset, out, 0, {outer, n}, {row, 1}, {n, 1}));
    } else {
      RETURN_IF_ERROR(SwitchByElementSize(value.dtype(), ctx->op_kernel().def().op(),
                                          [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* in = ElementsOf<T>(value) + offset;
        T* piece = MutableElementsOf<T>(out);
        for (int64_t o = 0; o < outer && n > 0; ++o) {
          std::copy_n(in + o * row, n, piece + o * n);
        }
        return absl::OkStatus();
      }));
    }
    offset += n;
  }
  return absl::OkStatus();
}

// The split_dim input as an axis of `value`, TensorFlow's message otherwise.
absl::StatusOr<int> SplitAxis(OpKernelContext* ctx, const Tensor& split_dim, const Tensor& value) {
  if (split_dim.dtype() != DT_INT32 || split_dim.NumElements() != 1) {
    return ctx->InvalidArgument("split_dim must be an int32 scalar, got ",
                                DataTypeString(split_dim.dtype()), " of shape ",
                                split_dim.shape().DebugString());
  }
  const int rank = value.dims();
  const int64_t dim = split_dim.flat<int32_t>()[0];
  int64_t axis;
  if (!CanonicalAxis(dim, rank, &axis)) {
    return ctx->InvalidArgument("-input rank(-", rank, ") <= split_dim < input rank (", rank,
                                "), but got ", dim);
  }
  return static_cast<int>(axis);
}

// Shape function helper: every output is `value` with `sizes[i]` at the axis
// held by constant input `dim_input` (all unknown there when it is not
// constant); `sizes` empty means each output's size there is unknown.
absl::Status SetPieceShapes(InferenceContext* c, int value_input, int dim_input,
                            const std::vector<int64_t>& sizes) {
  const PartialShape& value = c->input(value_input);
  const Tensor* dim_t = c->input_tensor(dim_input);
  for (int i = 0; i < c->num_outputs(); ++i) {
    if (!value.rank_known()) {
      c->set_output(i, PartialShape::Unknown());
      continue;
    }
    std::vector<int64_t> dims = value.dims();
    int64_t axis = -1;
    if (dim_t == nullptr || dim_t->NumElements() != 1 || dim_t->dtype() != DT_INT32 ||
        !CanonicalAxis(dim_t->flat<int32_t>()[0], value.rank(), &axis)) {
      dims.assign(value.rank(), kUnknownDim);
    } else {
      dims[axis] = sizes.empty() ? kUnknownDim : sizes[i];
    }
    c->set_output(i, PartialShape(std::move(dims)));
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Split

absl::Status SplitShape(InferenceContext* c) {
  const PartialShape& value = c->input(1);
  const Tensor* dim_t = c->input_tensor(0);
  std::vector<int64_t> sizes;
  int64_t axis;
  if (value.rank_known() && dim_t != nullptr && dim_t->dtype() == DT_INT32 &&
      dim_t->NumElements() == 1 && CanonicalAxis(dim_t->flat<int32_t>()[0], value.rank(), &axis) &&
      value.dim(axis) != kUnknownDim) {
    if (value.dim(axis) % c->num_outputs() != 0) {
      return c->Error(absl::StrCat("Dimension size ", value.dim(axis),
                                   " must be evenly divisible by ", c->num_outputs()));
    }
    sizes.assign(c->num_outputs(), value.dim(axis) / c->num_outputs());
  }
  return SetPieceShapes(c, 1, 0, sizes);
}

class SplitOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& value = ctx->input(1);
    ASSIGN_OR_RETURN(int axis, SplitAxis(ctx, ctx->input(0), value));
    const int64_t num_split = ctx->num_outputs();
    const int64_t size = value.dim_size(axis);
    if (size % num_split != 0) {
      return ctx->InvalidArgument(
          "Number of ways to split should evenly divide the split dimension, but got split_dim ",
          axis, " (size = ", size, ") and num_split ", num_split);
    }
    return WritePieces(ctx, value, axis, std::vector<int64_t>(num_split, size / num_split),
                       /*drop_axis=*/false);
  }
};

REGISTER_OP("Split")
    .Input("split_dim: int32")
    .Input("value: T")
    .Output("output: num_split * T")
    .Attr("num_split: int >= 1")
    .Attr("T: type")
    .SetShapeFn(SplitShape);
REGISTER_KERNEL(KernelDefBuilder("Split").Device(kDeviceCPU).TypeConstraint("T", MovableTypes()),
                SplitOp);
REGISTER_KERNEL(KernelDefBuilder("Split")
                    .Device(kDeviceGPU)
                    .TypeConstraint("T", GpuTensorTypes())
                    .HostMemory("split_dim"),
                SplitOp);

// ---------------------------------------------------------------------------
// SplitV

// size_splits with its one -1 resolved so the sizes sum to `total`;
// TensorFlow's messages for a second -1, a negative size or a wrong sum.
absl::StatusOr<std::vector<int64_t>> ResolveSplitSizes(std::vector<int64_t> sizes, int64_t total) {
  int unknown = -1;
  int64_t known_sum = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == -1) {
      if (unknown >= 0) return absl::InvalidArgumentError("There can only be one -1 in the input.");
      unknown = static_cast<int>(i);
    } else if (sizes[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("Split size at index ", i, " must be >= 0. Got: ", sizes[i]));
    } else if (__builtin_add_overflow(known_sum, sizes[i], &known_sum)) {
      return absl::InvalidArgumentError(absl::StrCat("Split sizes overflow at index ", i));
    }
  }
  if (unknown >= 0 && known_sum <= total) sizes[unknown] = total - known_sum;
  if ((unknown < 0 && known_sum != total) || known_sum > total) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Determined shape must either match input shape along split_dim exactly if fully "
        "specified, or be less than the size of the input along split_dim if not fully "
        "specified.  Got: ",
        known_sum));
  }
  return sizes;
}

absl::Status SplitVShape(InferenceContext* c) {
  ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> sizes, ConstIndexInput(c, 1, "size_splits"));
  if (sizes.has_value() && static_cast<int>(sizes->size()) != c->num_outputs()) {
    return c->Error(absl::StrCat("Length of size_splits should be equal to the value of num_split ",
                                 c->num_outputs(), ", got ", sizes->size()));
  }
  const PartialShape& value = c->input(0);
  const Tensor* dim_t = c->input_tensor(2);
  int64_t axis;
  if (sizes.has_value() && value.rank_known() && dim_t != nullptr && dim_t->dtype() == DT_INT32 &&
      dim_t->NumElements() == 1 && CanonicalAxis(dim_t->flat<int32_t>()[0], value.rank(), &axis) &&
      value.dim(axis) != kUnknownDim) {
    absl::StatusOr<std::vector<int64_t>> resolved = ResolveSplitSizes(*sizes, value.dim(axis));
    if (!resolved.ok()) return c->Error(std::string(resolved.status().message()));
    return SetPieceShapes(c, 0, 2, *resolved);
  }
  return SetPieceShapes(c, 0, 2, {});
}

class SplitVOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& value = ctx->input(0);
    const Tensor& size_splits = ctx->input(1);
    if (size_splits.dims() != 1 || size_splits.NumElements() != ctx->num_outputs()) {
      return ctx->InvalidArgument(
          "size of the split_tensor must be 1-D and have the same elements as outputs got ",
          size_splits.dims(), " -D and ", size_splits.NumElements(), " elements");
    }
    ASSIGN_OR_RETURN(int axis, SplitAxis(ctx, ctx->input(2), value));
    ASSIGN_OR_RETURN(std::vector<int64_t> sizes, IndexValues(size_splits, "size_splits"));
    absl::StatusOr<std::vector<int64_t>> resolved =
        ResolveSplitSizes(std::move(sizes), value.dim_size(axis));
    if (!resolved.ok()) return ctx->InvalidArgument(resolved.status().message());
    return WritePieces(ctx, value, axis, *resolved, /*drop_axis=*/false);
  }
};

REGISTER_OP("SplitV")
    .Input("value: T")
    .Input("size_splits: Tlen")
    .Input("split_dim: int32")
    .Output("output: num_split * T")
    .Attr("num_split: int >= 1")
    .Attr("T: type")
    .Attr("Tlen: {int8, int32, int64} = DT_INT64")
    .SetShapeFn(SplitVShape);
REGISTER_KERNEL(KernelDefBuilder("SplitV")
                    .Device(kDeviceCPU)
                    .TypeConstraint("T", MovableTypes())
                    .TypeConstraint("Tlen", IndexTypes()),
                SplitVOp);
REGISTER_KERNEL(KernelDefBuilder("SplitV")
                    .Device(kDeviceGPU)
                    .TypeConstraint("T", GpuTensorTypes())
                    .TypeConstraint("Tlen", IndexTypes())
                    .HostMemory("size_splits")
                    .HostMemory("split_dim"),
                SplitVOp);

// ---------------------------------------------------------------------------
// Unpack

std::string UnpackAxisError(int64_t axis, int rank) {
  return absl::StrCat("axis = ", axis, " not in [", -rank, ", ", rank, ")");
}

absl::Status UnpackShape(InferenceContext* c) {
  const PartialShape& value = c->input(0);
  PartialShape out = PartialShape::Unknown();
  if (value.rank_known()) {
    int64_t axis_attr, axis;
    RETURN_IF_ERROR(c->GetAttr("axis", &axis_attr));
    if (!CanonicalAxis(axis_attr, value.rank(), &axis)) {
      return c->Error(UnpackAxisError(axis_attr, value.rank()));
    }
    if (value.dim(axis) != kUnknownDim && value.dim(axis) != c->num_outputs()) {
      return c->Error(
          absl::StrCat("Dimension must be ", c->num_outputs(), " but is ", value.dim(axis)));
    }
    std::vector<int64_t> dims = value.dims();
    dims.erase(dims.begin() + axis);
    out = PartialShape(std::move(dims));
  }
  for (int i = 0; i < c->num_outputs(); ++i) c->set_output(i, out);
  return absl::OkStatus();
}

class UnpackOp : public OpKernel {
 public:
  explicit UnpackOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("axis", &axis_).IgnoreError();  // Recorded on c.
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& value = ctx->input(0);
    int64_t axis;
    if (!CanonicalAxis(axis_, value.dims(), &axis)) {
      return ctx->InvalidArgument(UnpackAxisError(axis_, value.dims()));
    }
    const int num = ctx->num_outputs();
    if (value.dim_size(axis) != num) {
      return ctx->InvalidArgument("Input shape axis ", axis, " must equal ", num, ", got shape ",
                                  value.shape().DebugString());
    }
    return WritePieces(ctx, value, static_cast<int>(axis), std::vector<int64_t>(num, 1),
                       /*drop_axis=*/true);
  }

 private:
  int64_t axis_ = 0;
};

REGISTER_OP("Unpack")
    .Input("value: T")
    .Output("output: num * T")
    .Attr("num: int >= 0")
    .Attr("T: type")
    .Attr("axis: int = 0")
    .SetShapeFn(UnpackShape);
REGISTER_KERNEL(KernelDefBuilder("Unpack").Device(kDeviceCPU).TypeConstraint("T", MovableTypes()),
                UnpackOp);
REGISTER_KERNEL(KernelDefBuilder("Unpack").Device(kDeviceGPU).TypeConstraint("T", GpuTensorTypes()),
                UnpackOp);

}  // namespace
}  // namespace dflow
