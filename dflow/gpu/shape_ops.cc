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
absl::Status RunTile(OpKernelContext* ctx, const Tensor& x, absl::Span<const int64_t> in_dims,
                     absl::Span<const int64_t> out_dims, Tensor* out) {
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
    std::vector<int64_t> multiples;
    ASSIGN_OR_RETURN(const TensorShape out_shape, TileShape(*ctx, &multiples));
    if (out_shape == x.shape()) {
      ctx->set_output(0, x);
      return absl::OkStatus();
    }
    Tensor* out = ctx->allocate_output_for_overwrite(0, out_shape);
    if (!ctx->allocation_status().ok() || out->NumElements() == 0) return absl::OkStatus();
    return RunTile(ctx, x, x.shape().dim_sizes(), out_shape.dim_sizes(), out);
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
    std::vector<int64_t> in_dims;  // x at the output's rank.
    ASSIGN_OR_RETURN(const TensorShape out_shape, BroadcastToShape(*ctx, &in_dims));
    if (x.shape() == out_shape) {
      ctx->set_output(0, x);
      return absl::OkStatus();
    }
    Tensor* out = ctx->allocate_output_for_overwrite(0, out_shape);
    if (!ctx->allocation_status().ok() || out->NumElements() == 0) return absl::OkStatus();
    return RunTile(ctx, x, in_dims, out_shape.dim_sizes(), out);
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
