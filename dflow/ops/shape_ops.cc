// Ops that read or change a tensor's shape without moving its elements:
// Shape, ShapeN, Size, Rank, Reshape, ExpandDims, Squeeze. The last three share the
// input's buffer (Tensor::Reshaped); none copies.
#include <limits>

#include "absl/strings/str_cat.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/framework/status.h"
#include "dflow/ops/array_util.h"

namespace dflow {
namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

// ---------------------------------------------------------------------------
// Shape, Size, Rank

// Output i: a vector of input i's rank (Shape has one input, ShapeN N).
absl::Status ShapeShape(InferenceContext* c) {
  for (int i = 0; i < c->num_inputs(); ++i) {
    const PartialShape& in = c->input(i);
    c->set_output(i, PartialShape({in.rank_known() ? in.rank() : kUnknownDim}));
  }
  return absl::OkStatus();
}

// Output i := the shape of input i, in the output's dtype (int32 or int64).
absl::Status SetShapeOutput(OpKernelContext* ctx, int i) {
  const TensorShape& shape = ctx->input(i).shape();
  Tensor* out = ctx->allocate_output(i, TensorShape({shape.dims()}));
  for (int d = 0; d < shape.dims(); ++d) {
    const int64_t size = shape.dim_size(d);
    if (out->dtype() == DT_INT32) {
      if (size > kInt32Max) {
        return ctx->InvalidArgument("Shape output type is 32-bit but dim ", d, " is ", size);
      }
      out->flat<int32_t>()[d] = static_cast<int32_t>(size);
    } else {
      out->flat<int64_t>()[d] = size;
    }
  }
  return absl::OkStatus();
}

// Shape, and ShapeN: the shapes of N inputs (TensorFlow's conv gradients use it).
class ShapeOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    for (int i = 0; i < ctx->num_inputs(); ++i) RETURN_IF_ERROR(SetShapeOutput(ctx, i));
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }
};

class SizeOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const int64_t n = ctx->input(0).NumElements();
    Tensor* out = ctx->allocate_output(0, TensorShape());
    if (out->dtype() == DT_INT32) {
      if (n > kInt32Max) {
        return ctx->InvalidArgument(
            "Number of elements was larger than representable by "
            "32-bit output type: ",
            n);
      }
      out->scalar<int32_t>() = static_cast<int32_t>(n);
    } else {
      out->scalar<int64_t>() = n;
    }
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }
};

class RankOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    ctx->allocate_output(0, TensorShape())->scalar<int32_t>() = ctx->input(0).dims();
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }
};

REGISTER_OP("Shape")
    .Input("input: T")
    .Output("output: out_type")
    .Attr("T: type")
    .Attr("out_type: {int32, int64} = DT_INT32")
    .SetShapeFn(ShapeShape);
REGISTER_KERNEL(
    KernelDefBuilder("Shape").Device(kDeviceCPU).TypeConstraint("out_type", IndexTypes()), ShapeOp);

REGISTER_OP("ShapeN")
    .Input("input: N * T")
    .Output("output: N * out_type")
    .Attr("N: int >= 1")
    .Attr("T: type")
    .Attr("out_type: {int32, int64} = DT_INT32")
    .SetShapeFn(ShapeShape);
REGISTER_KERNEL(
    KernelDefBuilder("ShapeN").Device(kDeviceCPU).TypeConstraint("out_type", IndexTypes()), ShapeOp);

REGISTER_OP("Size")
    .Input("input: T")
    .Output("output: out_type")
    .Attr("T: type")
    .Attr("out_type: {int32, int64} = DT_INT32")
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(
    KernelDefBuilder("Size").Device(kDeviceCPU).TypeConstraint("out_type", IndexTypes()), SizeOp);

REGISTER_OP("Rank")
    .Input("input: T")
    .Output("output: int32")
    .Attr("T: type")
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("Rank").Device(kDeviceCPU), RankOp);

// ---------------------------------------------------------------------------
// Reshape


// The requested shape from Reshape's `shape` input: a constant's values
// (-1 unknown; a legacy scalar means one dim), else unknown dims.
absl::StatusOr<PartialShape> ReshapeTarget(InferenceContext* c) {
  const Tensor* t = c->input_tensor(1);
  if (t == nullptr) {
    const PartialShape& s = c->input(1);
    if (s.rank_known() && s.rank() == 0) return PartialShape::UnknownDims(1);
    PartialShape target;
    RETURN_IF_ERROR(c->MakeShapeFromShapeTensor(1, &target));
    return target;
  }
  if (t->dims() > 1) {
    return c->Error(absl::StrCat("sizes input must be 1-D, not ", t->shape().DebugString()));
  }
  absl::StatusOr<std::vector<int64_t>> values = IndexValues(*t, "shape");
  if (!values.ok()) return c->Error(std::string(values.status().message()));
  for (int64_t d : *values) {
    if (d < -1) return c->Error(absl::StrCat("Size must be non-negative, not ", d));
  }
  return PartialShape(*std::move(values));
}

absl::Status ReshapeShape(InferenceContext* c) {
  ASSIGN_OR_RETURN(PartialShape target, ReshapeTarget(c));
  const PartialShape& in = c->input(0);
  if (!target.rank_known() || !in.IsFullyDefined()) {
    c->set_output(0, target);
    return absl::OkStatus();
  }
  int unknown = 0;
  for (int64_t d : target.dims()) unknown += d == kUnknownDim ? 1 : 0;
  if (unknown > 1) {
    c->set_output(0, target);
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<int64_t>> dims = ReshapeDims(in.dims(), target.dims());
  if (!dims.ok()) {
    return c->Error(absl::StrCat(dims.status().message(), " (input shape ", in.DebugString(),
                                 ", requested ", target.DebugString(), ")"));
  }
  c->set_output(0, PartialShape(*std::move(dims)));
  return absl::OkStatus();
}

class ReshapeOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    const Tensor& sizes = ctx->input(1);
    if (sizes.dims() > 1) {
      return ctx->InvalidArgument("sizes input must be 1-D, not ", sizes.shape().DebugString());
    }
    ASSIGN_OR_RETURN(std::vector<int64_t> requested, IndexValues(sizes, "shape"));
    absl::StatusOr<std::vector<int64_t>> dims =
        ReshapeDims(x.shape().dim_sizes(), std::move(requested));
    if (!dims.ok()) return ctx->InvalidArgument(dims.status().message());
    ASSIGN_OR_RETURN(Tensor y, x.Reshaped(TensorShape(*dims)));
    ctx->set_output(0, std::move(y));
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }
};

REGISTER_OP("Reshape")
    .Input("tensor: T")
    .Input("shape: Tshape")
    .Output("output: T")
    .Attr("T: type")
    .Attr("Tshape: {int32, int64} = DT_INT32")
    .SetShapeFn(ReshapeShape);
REGISTER_KERNEL(
    KernelDefBuilder("Reshape").Device(kDeviceCPU).TypeConstraint("Tshape", IndexTypes()),
    ReshapeOp);

// ---------------------------------------------------------------------------
// ExpandDims

// Maps `axis` in [-rank-1, rank] to the index of the new dim.
absl::StatusOr<int> ExpandAxis(int64_t axis, int rank) {
  if (axis < -rank - 1 || axis > rank) {
    return absl::InvalidArgumentError(absl::StrCat("Tried to expand dim index ", axis,
                                                   " for tensor with ", rank, " dimensions."));
  }
  return static_cast<int>(axis < 0 ? axis + rank + 1 : axis);
}

absl::Status ExpandDimsShape(InferenceContext* c) {
  const PartialShape& in = c->input(0);
  const Tensor* dim = c->input_tensor(1);
  if (!in.rank_known()) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  if (dim == nullptr) {
    c->set_output(0, PartialShape::UnknownDims(in.rank() + 1));
    return absl::OkStatus();
  }
  absl::StatusOr<int64_t> axis = IndexScalar(*dim, "'dim'");
  if (!axis.ok()) return c->Error(std::string(axis.status().message()));
  absl::StatusOr<int> pos = ExpandAxis(*axis, in.rank());
  if (!pos.ok()) return c->Error(std::string(pos.status().message()));
  std::vector<int64_t> dims = in.dims();
  dims.insert(dims.begin() + *pos, 1);
  c->set_output(0, PartialShape(std::move(dims)));
  return absl::OkStatus();
}

class ExpandDimsOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    const Tensor& dim = ctx->input(1);
    if (dim.NumElements() != 1) {
      return ctx->InvalidArgument("'dim' must be a tensor with a single value, got shape ",
                                  dim.shape().DebugString());
    }
    ASSIGN_OR_RETURN(int64_t axis, IndexScalar(dim, "'dim'"));
    absl::StatusOr<int> pos = ExpandAxis(axis, x.dims());
    if (!pos.ok()) return ctx->InvalidArgument(pos.status().message());
    TensorShape shape = x.shape();
    shape.InsertDim(*pos, 1);
    ASSIGN_OR_RETURN(Tensor y, x.Reshaped(shape));
    ctx->set_output(0, std::move(y));
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }
};

REGISTER_OP("ExpandDims")
    .Input("input: T")
    .Input("dim: Tdim")
    .Output("output: T")
    .Attr("T: type")
    .Attr("Tdim: {int32, int64} = DT_INT32")
    .SetShapeFn(ExpandDimsShape);
REGISTER_KERNEL(
    KernelDefBuilder("ExpandDims").Device(kDeviceCPU).TypeConstraint("Tdim", IndexTypes()),
    ExpandDimsOp);

// ---------------------------------------------------------------------------
// Squeeze

// Marks the dims named by squeeze_dims (negative counts from the end).
absl::StatusOr<std::vector<bool>> SqueezeMask(const std::vector<int64_t>& squeeze_dims, int rank) {
  std::vector<bool> mask(rank, false);
  for (int64_t d : squeeze_dims) {
    int64_t axis;
    if (!CanonicalAxis(d, rank, &axis)) {
      return absl::InvalidArgumentError(absl::StrCat("Tried to squeeze dim index ", d,
                                                     " for tensor with ", rank, " dimensions."));
    }
    mask[axis] = true;
  }
  return mask;
}

std::string SqueezeError(int d, int64_t size) {
  return absl::StrCat("Can not squeeze dim[", d, "], expected a dimension of 1, got ", size);
}

absl::Status SqueezeShape(InferenceContext* c) {
  const PartialShape& in = c->input(0);
  if (!in.rank_known()) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  std::vector<int64_t> squeeze_dims;
  RETURN_IF_ERROR(c->GetAttr("squeeze_dims", &squeeze_dims));
  absl::StatusOr<std::vector<bool>> mask = SqueezeMask(squeeze_dims, in.rank());
  if (!mask.ok()) return c->Error(std::string(mask.status().message()));
  std::vector<int64_t> dims;
  for (int d = 0; d < in.rank(); ++d) {
    const int64_t size = in.dim(d);
    if ((*mask)[d]) {  // An unknown size is taken to be 1.
      if (size != kUnknownDim && size != 1) return c->Error(SqueezeError(d, size));
      continue;
    }
    if (squeeze_dims.empty() && size == kUnknownDim) {
      c->set_output(0, PartialShape::Unknown());  // It may or may not be squeezed.
      return absl::OkStatus();
    }
    if (!(squeeze_dims.empty() && size == 1)) dims.push_back(size);
  }
  c->set_output(0, PartialShape(std::move(dims)));
  return absl::OkStatus();
}

class SqueezeOp : public OpKernel {
 public:
  explicit SqueezeOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("squeeze_dims", &squeeze_dims_).IgnoreError();  // Recorded on c.
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    absl::StatusOr<std::vector<bool>> mask = SqueezeMask(squeeze_dims_, x.dims());
    if (!mask.ok()) return ctx->InvalidArgument(mask.status().message());
    TensorShape shape;
    for (int d = 0; d < x.dims(); ++d) {
      const int64_t size = x.dim_size(d);
      if ((*mask)[d] && size != 1) return ctx->InvalidArgument(SqueezeError(d, size));
      const bool squeeze = (*mask)[d] || (squeeze_dims_.empty() && size == 1);
      if (!squeeze) shape.AddDim(size);
    }
    ASSIGN_OR_RETURN(Tensor y, x.Reshaped(shape));
    ctx->set_output(0, std::move(y));
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }

 private:
  std::vector<int64_t> squeeze_dims_;
};

REGISTER_OP("Squeeze")
    .Input("input: T")
    .Output("output: T")
    .Attr("T: type")
    .Attr("squeeze_dims: list(int) >= 0 = []")
    .SetShapeFn(SqueezeShape);
REGISTER_KERNEL(KernelDefBuilder("Squeeze").Device(kDeviceCPU), SqueezeOp);

// --- on a GPU -----------------------------------------------------------------------
// The kernels above read only shapes and host-memory sizes, and Reshape,
// ExpandDims and Squeeze share their input's buffer: they serve a GPU as they
// are, so graphs need not cross devices for them every step. Outputs of
// Shape/ShapeN/Size/Rank are host memory.

// Registers `builder` for GpuTensorTypes() and, with `int32_args` in host
// memory too, for int32.
#define DFLOW_GPU_SHAPE_KERNEL(builder, int32_args, ...)                     \
  REGISTER_KERNEL(builder.TypeConstraint("T", GpuTensorTypes()), __VA_ARGS__); \
  REGISTER_KERNEL(int32_args(builder.TypeConstraint("T", {DT_INT32})), __VA_ARGS__)

KernelDefBuilder& HostInput(KernelDefBuilder& b) { return b.HostMemory("input"); }
KernelDefBuilder& HostTensorAndOutput(KernelDefBuilder& b) {
  return b.HostMemory("tensor").HostMemory("output");
}
KernelDefBuilder& HostInputAndOutput(KernelDefBuilder& b) {
  return b.HostMemory("input").HostMemory("output");
}

DFLOW_GPU_SHAPE_KERNEL(KernelDefBuilder("Shape")
                           .Device(kDeviceGPU)
                           .TypeConstraint("out_type", IndexTypes())
                           .HostMemory("output"),
                       HostInput, ShapeOp);
DFLOW_GPU_SHAPE_KERNEL(KernelDefBuilder("ShapeN")
                           .Device(kDeviceGPU)
                           .TypeConstraint("out_type", IndexTypes())
                           .HostMemory("output"),
                       HostInput, ShapeOp);
DFLOW_GPU_SHAPE_KERNEL(KernelDefBuilder("Size")
                           .Device(kDeviceGPU)
                           .TypeConstraint("out_type", IndexTypes())
                           .HostMemory("output"),
                       HostInput, SizeOp);
DFLOW_GPU_SHAPE_KERNEL(KernelDefBuilder("Rank").Device(kDeviceGPU).HostMemory("output"), HostInput,
                       RankOp);
DFLOW_GPU_SHAPE_KERNEL(KernelDefBuilder("Reshape")
                           .Device(kDeviceGPU)
                           .TypeConstraint("Tshape", IndexTypes())
                           .HostMemory("shape"),
                       HostTensorAndOutput, ReshapeOp);
DFLOW_GPU_SHAPE_KERNEL(KernelDefBuilder("ExpandDims")
                           .Device(kDeviceGPU)
                           .TypeConstraint("Tdim", IndexTypes())
                           .HostMemory("dim"),
                       HostInputAndOutput, ExpandDimsOp);
DFLOW_GPU_SHAPE_KERNEL(KernelDefBuilder("Squeeze").Device(kDeviceGPU), HostInputAndOutput,
                       SqueezeOp);
#undef DFLOW_GPU_SHAPE_KERNEL

}  // namespace
}  // namespace dflow
