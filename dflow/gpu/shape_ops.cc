// Shape ops on a GPU, so graphs need not cross devices for them every step:
// Shape, ShapeN, Size, Rank (outputs in host memory); Reshape, ExpandDims,
// Squeeze (share the device buffer; sizes in host memory);
// BroadcastGradientArgs (all host memory); and the copying Tile and
// BroadcastTo (the gradients of Sum and Mean tile). Checks and messages are
// the CPU kernels' (shape_ops.cc, math_grad_ops.cc, transpose_ops.cc,
// layout_ops.cc).
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dflow/framework/kernel.h"
#include "dflow/gpu/cwise_launch.h"
#include "dflow/gpu/gpu_device.h"
#include "dflow/ops/array_util.h"

namespace dflow {
namespace gpu {
namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

// The types whose tensors the kernels here take in device memory. int32
// tensors stay in host memory (they are shapes and indices, computed by the
// CPU), as in TensorFlow: the int32 kernels name every tensor arg HostMemory.
const DataTypeVector& CopyTypes() {
  static const DataTypeVector kTypes = {DT_FLOAT, DT_DOUBLE, DT_INT64, DT_BOOL};
  return kTypes;
}

// Registers `builder` for CopyTypes() and, with `int32_args` in host
// memory too, for int32.
#define DFLOW_GPU_SHAPE_KERNEL(builder, int32_args, ...)                                     \
  REGISTER_KERNEL(builder.TypeConstraint("T", CopyTypes()), __VA_ARGS__);                   \
  REGISTER_KERNEL(int32_args(builder.TypeConstraint("T", {DT_INT32})), __VA_ARGS__)

// --- Shape, ShapeN, Size, Rank ----------------------------------------------------

class ShapeGpuOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    for (int i = 0; i < ctx->num_inputs(); ++i) {
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
    }
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }
};
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
                       HostInput, ShapeGpuOp);
DFLOW_GPU_SHAPE_KERNEL(KernelDefBuilder("ShapeN")
                           .Device(kDeviceGPU)
                           .TypeConstraint("out_type", IndexTypes())
                           .HostMemory("output"),
                       HostInput, ShapeGpuOp);

class SizeGpuOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const int64_t n = ctx->input(0).NumElements();
    Tensor* out = ctx->allocate_output(0, TensorShape());
    if (out->dtype() == DT_INT32) {
      if (n > kInt32Max) {
        return ctx->InvalidArgument(
            "Number of elements was larger than representable by 32-bit output type: ", n);
      }
      out->scalar<int32_t>() = static_cast<int32_t>(n);
    } else {
      out->scalar<int64_t>() = n;
    }
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }
};
DFLOW_GPU_SHAPE_KERNEL(KernelDefBuilder("Size")
                           .Device(kDeviceGPU)
                           .TypeConstraint("out_type", IndexTypes())
                           .HostMemory("output"),
                       HostInput, SizeGpuOp);

class RankGpuOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    ctx->allocate_output(0, TensorShape())->scalar<int32_t>() = ctx->input(0).dims();
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }
};
DFLOW_GPU_SHAPE_KERNEL(KernelDefBuilder("Rank").Device(kDeviceGPU).HostMemory("output"), HostInput,
                       RankGpuOp);

// --- Reshape ------------------------------------------------------------------------

// The shape Reshape gives `input_dims` for the requested `sizes` (one may
// be -1): the CPU kernel's rule and messages (ops/shape_ops.cc).
absl::StatusOr<std::vector<int64_t>> ReshapeDims(absl::Span<const int64_t> input_dims,
                                                 std::vector<int64_t> sizes) {
  const int64_t n = DimProduct(input_dims, 0, static_cast<int>(input_dims.size()));
  int unknown = -1;
  int64_t product = 1, nonzero_product = 1;
  for (int i = 0; i < static_cast<int>(sizes.size()); ++i) {
    const int64_t d = sizes[i];
    if (d == -1) {
      if (unknown >= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("Only one input size may be -1, not both ", unknown, " and ", i));
      }
      unknown = i;
      continue;
    }
    if (d < 0) {
      return absl::InvalidArgumentError(absl::StrCat("Size ", i, " must be non-negative, not ", d));
    }
    if (d != 0 && nonzero_product > std::numeric_limits<int64_t>::max() / d) {
      return absl::InvalidArgumentError(
          absl::StrCat("requested shape ", DimsString(sizes), " has too many elements"));
    }
    product *= d;
    if (d != 0) nonzero_product *= d;
  }
  if (unknown < 0) {
    if (product != n) {
      return absl::InvalidArgumentError(absl::StrCat("Input to reshape is a tensor with ", n,
                                                     " values, but the requested shape has ",
                                                     product));
    }
    return sizes;
  }
  if (product > 0) {
    if (n % product != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("Input to reshape is a tensor with ", n,
                       " values, but the requested shape requires a multiple of ", product));
    }
    sizes[unknown] = n / product;
  } else if (n != 0) {
    return absl::InvalidArgumentError(absl::StrCat("Input to reshape is a tensor with ", n,
                                                   " values, but the requested shape has 0"));
  } else {  // Empty to empty: the -1 takes the input's non-zero dims' product.
    int64_t input_nonzero = 1;
    for (int64_t d : input_dims) input_nonzero *= d == 0 ? 1 : d;
    sizes[unknown] = input_nonzero / nonzero_product;
  }
  return sizes;
}

class ReshapeGpuOp : public OpKernel {
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
DFLOW_GPU_SHAPE_KERNEL(KernelDefBuilder("Reshape")
                           .Device(kDeviceGPU)
                           .TypeConstraint("Tshape", IndexTypes())
                           .HostMemory("shape"),
                       HostTensorAndOutput, ReshapeGpuOp);

// --- ExpandDims, Squeeze ------------------------------------------------------------------

class ExpandDimsGpuOp : public OpKernel {
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
    const int rank = x.dims();
    if (axis < -rank - 1 || axis > rank) {
      return ctx->InvalidArgument("Tried to expand dim index ", axis, " for tensor with ", rank,
                                  " dimensions.");
    }
    TensorShape shape = x.shape();
    shape.InsertDim(static_cast<int>(axis < 0 ? axis + rank + 1 : axis), 1);
    ASSIGN_OR_RETURN(Tensor y, x.Reshaped(shape));
    ctx->set_output(0, std::move(y));
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }
};
DFLOW_GPU_SHAPE_KERNEL(KernelDefBuilder("ExpandDims")
                           .Device(kDeviceGPU)
                           .TypeConstraint("Tdim", IndexTypes())
                           .HostMemory("dim"),
                       HostInputAndOutput, ExpandDimsGpuOp);

class SqueezeGpuOp : public OpKernel {
 public:
  explicit SqueezeGpuOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("squeeze_dims", &squeeze_dims_).IgnoreError();  // Recorded on c.
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    std::vector<bool> mask(x.dims(), false);
    for (int64_t d : squeeze_dims_) {
      int64_t axis;
      if (!CanonicalAxis(d, x.dims(), &axis)) {
        return ctx->InvalidArgument("Tried to squeeze dim index ", d, " for tensor with ",
                                    x.dims(), " dimensions.");
      }
      mask[axis] = true;
    }
    TensorShape shape;
    for (int d = 0; d < x.dims(); ++d) {
      const int64_t size = x.dim_size(d);
      if (mask[d] && size != 1) {
        return ctx->InvalidArgument("Can not squeeze dim[", d,
                                    "], expected a dimension of 1, got ", size);
      }
      const bool squeeze = mask[d] || (squeeze_dims_.empty() && size == 1);
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
DFLOW_GPU_SHAPE_KERNEL(KernelDefBuilder("Squeeze").Device(kDeviceGPU), HostInputAndOutput,
                       SqueezeGpuOp);

// --- BroadcastGradientArgs ----------------------------------------------------------------

// The axes over which each of two shapes was broadcast, as TensorFlow's BCast
// computes them (ops/math_grad_ops.cc); all in host memory.
class BroadcastGradientArgsGpuOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  bool IsExpensive() const override { return false; }

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& t0 = ctx->input(0);
    const Tensor& t1 = ctx->input(1);
    if (t0.dims() != 1 || t1.dims() != 1) {
      return ctx->InvalidArgument("s0 and s1 must be vectors, got shapes ",
                                  t0.shape().DebugString(), " and ", t1.shape().DebugString());
    }
    auto s0 = IndexValues(t0, "s0");
    if (!s0.ok()) return ctx->InvalidArgument(s0.status().message());
    auto s1 = IndexValues(t1, "s1");
    if (!s1.ok()) return ctx->InvalidArgument(s1.status().message());
    std::vector<int64_t> r0, r1;
    if (*s0 != *s1) {
      const size_t rank = std::max(s0->size(), s1->size());
      const size_t pad0 = rank - s0->size(), pad1 = rank - s1->size();
      for (size_t i = 0; i < rank; ++i) {
        const int64_t a = i < pad0 ? 1 : (*s0)[i - pad0];
        const int64_t b = i < pad1 ? 1 : (*s1)[i - pad1];
        if (a < 0 || b < 0 || (a != b && a != 1 && b != 1)) {
          return ctx->InvalidArgument("Incompatible shapes: ", DimsString(*s0), " vs. ",
                                      DimsString(*s1));
        }
        if (a == 1) r0.push_back(static_cast<int64_t>(i));
        if (b == 1) r1.push_back(static_cast<int64_t>(i));
      }
    }
    SetOutput(ctx, 0, r0);
    SetOutput(ctx, 1, r1);
    return absl::OkStatus();
  }

 private:
  void SetOutput(OpKernelContext* ctx, int i, const std::vector<int64_t>& v) {
    Tensor* out = ctx->allocate_output(i, TensorShape({static_cast<int64_t>(v.size())}));
    for (size_t k = 0; k < v.size(); ++k) {
      if (output_type(i) == DT_INT32) {
        out->flat<int32_t>()[k] = static_cast<int32_t>(v[k]);
      } else {
        out->flat<int64_t>()[k] = v[k];
      }
    }
  }
};
REGISTER_KERNEL(KernelDefBuilder("BroadcastGradientArgs")
                    .Device(kDeviceGPU)
                    .TypeConstraint("T", {DT_INT32, DT_INT64})
                    .HostMemory("s0")
                    .HostMemory("s1")
                    .HostMemory("r0")
                    .HostMemory("r1"),
                BroadcastGradientArgsGpuOp);

// --- Tile, BroadcastTo --------------------------------------------------------------------

// Copies x into `out` (of out_dims) reading x as `in_dims` (x's dims, 1
// where it repeats), row-major; size-1 output dims are dropped first.
absl::Status RunTile(OpKernelContext* ctx, const Tensor& x, const std::vector<int64_t>& in_dims,
                     const std::vector<int64_t>& out_dims, Tensor* out) {
  TileIndex index;
  int64_t stride = 1;
  std::vector<int64_t> in_strides(in_dims.size());
  for (int d = static_cast<int>(in_dims.size()) - 1; d >= 0; --d) {
    in_strides[d] = stride;
    stride *= in_dims[d];
  }
  for (size_t d = 0; d < out_dims.size(); ++d) {
    if (out_dims[d] == 1) continue;
    if (index.rank == kMaxBroadcastDims) {
      return ctx->InvalidArgument("output ", out->shape().DebugString(), " has more than ",
                                  kMaxBroadcastDims, " dimensions of size > 1");
    }
    index.out_dims[index.rank] = out_dims[d];
    index.in_dims[index.rank] = in_dims[d];
    index.in_strides[index.rank] = in_strides[d];
    ++index.rank;
  }
  LaunchTile(GpuOf(ctx)->stream(), x.raw_data(), out->raw_data(),
             static_cast<int>(DataTypeSize(x.dtype())), out->NumElements(), index);
  return LaunchStatus(ctx);
}

class TileGpuOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    const Tensor& mult_t = ctx->input(1);
    if (mult_t.dims() != 1 || mult_t.dim_size(0) != x.dims()) {
      return ctx->InvalidArgument("Expected multiples argument to be a vector of length ", x.dims(),
                                  " but got length ",
                                  mult_t.dims() == 1 ? mult_t.dim_size(0) : mult_t.NumElements());
    }
    ASSIGN_OR_RETURN(std::vector<int64_t> multiples, IndexValues(mult_t, "multiples"));
    std::vector<int64_t> in_dims, out_dims;
    bool all_one = true;
    for (int d = 0; d < x.dims(); ++d) {
      if (multiples[d] < 0) {
        return ctx->InvalidArgument("Expected multiples[", d, "] >= 0, but got ", multiples[d]);
      }
      if (x.dim_size(d) != 0 &&
          multiples[d] > std::numeric_limits<int64_t>::max() / x.dim_size(d)) {
        return ctx->InvalidArgument("multiples[", d, "] = ", multiples[d], " overflows dimension ",
                                    x.dim_size(d));
      }
      all_one = all_one && multiples[d] == 1;
      in_dims.push_back(x.dim_size(d));
      out_dims.push_back(x.dim_size(d) * multiples[d]);
    }
    if (all_one) {
      ctx->set_output(0, x);
      return absl::OkStatus();
    }
    absl::StatusOr<TensorShape> out_shape = TensorShape::FromDims(out_dims);
    if (!out_shape.ok()) return ctx->InvalidArgument(out_shape.status().message());
    RETURN_IF_ERROR(CheckOutputSize(out_shape->num_elements(), x.dtype(), "Tile"));
    Tensor* out = ctx->allocate_output_for_overwrite(0, *out_shape);
    if (!ctx->allocation_status().ok() || out->NumElements() == 0) return absl::OkStatus();
    return RunTile(ctx, x, in_dims, out_dims, out);
  }
};
REGISTER_KERNEL(KernelDefBuilder("Tile")
                    .Device(kDeviceGPU)
                    .TypeConstraint("T", CopyTypes())
                    .TypeConstraint("Tmultiples", IndexTypes())
                    .HostMemory("multiples"),
                TileGpuOp);

class BroadcastToGpuOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    const Tensor& shape_t = ctx->input(1);
    if (shape_t.dims() != 1) {
      return ctx->InvalidArgument("shape must be a vector of {int32,int64}, got shape ",
                                  shape_t.shape().DebugString());
    }
    ASSIGN_OR_RETURN(std::vector<int64_t> dims, IndexValues(shape_t, "shape"));
    for (int64_t d : dims) {
      if (d < 0) return ctx->InvalidArgument("Dimension ", d, " must be >= 0");
    }
    const int rank = static_cast<int>(dims.size());
    if (x.dims() > rank) {
      return ctx->InvalidArgument("Rank of input (", x.dims(),
                                  ") must be no greater than rank of output shape (", rank, ").");
    }
    absl::StatusOr<TensorShape> out_shape = TensorShape::FromDims(dims);
    if (!out_shape.ok()) return ctx->InvalidArgument(out_shape.status().message());
    RETURN_IF_ERROR(CheckOutputSize(out_shape->num_elements(), x.dtype(), "BroadcastTo"));
    // x at the output's rank: leading 1s, then dims equal to the output's or 1.
    std::vector<int64_t> in_dims(rank - x.dims(), 1);
    for (int64_t d : x.shape().dim_sizes()) in_dims.push_back(d);
    for (int d = 0; d < rank; ++d) {
      if (in_dims[d] != dims[d] && in_dims[d] != 1) {
        return ctx->InvalidArgument("Incompatible shapes: ", x.shape().DebugString(), " vs. ",
                                    out_shape->DebugString());
      }
    }
    if (x.shape() == *out_shape) {
      ctx->set_output(0, x);
      return absl::OkStatus();
    }
    Tensor* out = ctx->allocate_output_for_overwrite(0, *out_shape);
    if (!ctx->allocation_status().ok() || out->NumElements() == 0) return absl::OkStatus();
    return RunTile(ctx, x, in_dims, dims, out);
  }
};
REGISTER_KERNEL(KernelDefBuilder("BroadcastTo")
                    .Device(kDeviceGPU)
                    .TypeConstraint("T", CopyTypes())
                    .TypeConstraint("Tidx", IndexTypes())
                    .HostMemory("shape"),
                BroadcastToGpuOp);

}  // namespace
}  // namespace gpu
}  // namespace dflow
