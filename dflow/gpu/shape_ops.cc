// Tile and BroadcastTo on a GPU (the gradients of Sum and Mean tile), with
// the CPU kernels' checks and messages (transpose_ops.cc, layout_ops.cc). The
// shape-only kernels (Shape, ShapeN, Size, Rank, Reshape, ExpandDims, Squeeze,
// BroadcastGradientArgs) are the CPU's, registered for GPU in dflow/ops.
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
                    .TypeConstraint("T", GpuTensorTypes())
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
                    .TypeConstraint("T", GpuTensorTypes())
                    .TypeConstraint("Tidx", IndexTypes())
                    .HostMemory("shape"),
                BroadcastToGpuOp);

}  // namespace
}  // namespace gpu
}  // namespace dflow
