// Normalization on a GPU (float), with the CPU kernels' checks and messages
// (ops/normalization_util.h) and arithmetic; the kernels are in
// normalization_kernels.cu.
//  - FusedBatchNorm, FusedBatchNormV2, FusedBatchNormV3 and their gradients
//    (what tf.compat.v1.layers.batch_normalization emits for 4-D and 5-D
//    inputs), with the CPU's reserve spaces (the batch's mean and biased
//    variance), so that a forward op on one device and its gradient on the
//    other agree.
//  - LRN and LRNGrad (TensorFlow's CIFAR-10 model).
#include <memory>
#include <string>

#include "dflow/framework/kernel.h"
#include "dflow/gpu/normalization_launch.h"
#include "dflow/gpu/gpu_device.h"
#include "dflow/ops/array_util.h"
#include "dflow/ops/normalization_util.h"

namespace dflow {
namespace gpu {
namespace {

ChannelDims DimsOf(const ChannelLayout& l) { return ChannelDims{l.outer, l.channels, l.inner}; }

// Device scratch for the statistics of x laid out as `d`.
absl::StatusOr<Tensor> Scratch(GpuDevice* gpu, const ChannelDims& d) {
  return gpu->AllocateTemp(DT_DOUBLE, TensorShape({BatchNormScratchElements(d)}));
}

class FusedBatchNormGpuOp : public OpKernel {
 public:
  explicit FusedBatchNormGpuOp(OpKernelConstruction* c) : OpKernel(c), a_(c) {}

  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(ChannelLayout l, CheckBatchNormInputs(ctx, a_));
    const Tensor& x = ctx->input(0);
    const TensorShape channels({l.channels});
    Tensor* out[5] = {OutputForOverwrite(ctx, 0, x.shape())};
    for (int i = 1; i < 5; ++i) out[i] = OutputForOverwrite(ctx, i, channels);
    for (Tensor* t : out) {
      if (t == nullptr) return absl::OkStatus();
    }
    if (ctx->num_outputs() > 5) ctx->allocate_output(5, TensorShape({}));  // V3's reserve_space_3.
    if (l.channels == 0) return absl::OkStatus();
    GpuDevice* gpu = GpuOf(ctx);
    const ChannelDims d = DimsOf(l);
    Tensor scratch;
    if (a_.is_training) {
      ASSIGN_OR_RETURN(scratch, Scratch(gpu, d));
    }
    // In training without running averages, mean and variance are not read (maybe empty).
    const bool stats_read = !a_.is_training || a_.avg_factor != 1.0f;
    BatchNormForward args{
        ElementsOf<float>(x),
        ElementsOf<float>(ctx->input(1)),
        ElementsOf<float>(ctx->input(2)),
        stats_read ? ElementsOf<float>(ctx->input(3)) : nullptr,
        stats_read ? ElementsOf<float>(ctx->input(4)) : nullptr,
        a_.epsilon,
        a_.avg_factor,
        a_.is_training,
        MutableElementsOf<float>(out[0]),
        MutableElementsOf<float>(out[1]),
        MutableElementsOf<float>(out[2]),
        MutableElementsOf<float>(out[3]),
        MutableElementsOf<float>(out[4]),
    };
    LaunchBatchNormForward(gpu->stream(), d, args, static_cast<double*>(scratch.raw_data()));
    return LaunchStatus(ctx);
  }

 private:
  const BatchNormAttrs a_;
};

class FusedBatchNormGradGpuOp : public OpKernel {
 public:
  explicit FusedBatchNormGradGpuOp(OpKernelConstruction* c) : OpKernel(c), a_(c) {}

  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(ChannelLayout l, CheckBatchNormGradInputs(ctx, a_));
    const Tensor& x = ctx->input(1);
    const TensorShape channels({l.channels});
    Tensor* dx = OutputForOverwrite(ctx, 0, x.shape());
    Tensor* dscale = OutputForOverwrite(ctx, 1, channels);
    Tensor* doffset = OutputForOverwrite(ctx, 2, channels);
    if (dx == nullptr || dscale == nullptr || doffset == nullptr) return absl::OkStatus();
    ctx->allocate_output(3, TensorShape({0}));
    ctx->allocate_output(4, TensorShape({0}));
    if (l.channels == 0) return absl::OkStatus();
    GpuDevice* gpu = GpuOf(ctx);
    const ChannelDims d = DimsOf(l);
    ASSIGN_OR_RETURN(Tensor scratch, Scratch(gpu, d));
    BatchNormBackward args{
        ElementsOf<float>(ctx->input(0)),
        ElementsOf<float>(x),
        ElementsOf<float>(ctx->input(2)),
        ElementsOf<float>(ctx->input(3)),
        ElementsOf<float>(ctx->input(4)),
        a_.epsilon,
        a_.is_training,
        MutableElementsOf<float>(dx),
        MutableElementsOf<float>(dscale),
        MutableElementsOf<float>(doffset),
    };
    LaunchBatchNormBackward(gpu->stream(), d, args, static_cast<double*>(scratch.raw_data()));
    return LaunchStatus(ctx);
  }

 private:
  const BatchNormAttrs a_;
};

LrnArgs ArgsOf(const LrnParams& p) { return LrnArgs{p.radius, p.bias, p.alpha, p.beta}; }

class LrnGpuOp : public OpKernel {
 public:
  explicit LrnGpuOp(OpKernelConstruction* c) : OpKernel(c) { c->SetStatus(p_.Read(c)); }

  absl::Status Compute(OpKernelContext* ctx) override {
    RETURN_IF_ERROR(CheckLrnInputs(ctx));
    const Tensor& x = ctx->input(0);
    Tensor* y = OutputForOverwrite(ctx, 0, x.shape());
    if (y == nullptr) return absl::OkStatus();
    LaunchLrn(GpuOf(ctx)->stream(), ArgsOf(p_), ElementsOf<float>(x), MutableElementsOf<float>(y),
              x.NumElements(), x.dim_size(3));
    return LaunchStatus(ctx);
  }

 private:
  LrnParams p_;
};

class LrnGradGpuOp : public OpKernel {
 public:
  explicit LrnGradGpuOp(OpKernelConstruction* c) : OpKernel(c) { c->SetStatus(p_.Read(c)); }

  absl::Status Compute(OpKernelContext* ctx) override {
    RETURN_IF_ERROR(CheckLrnInputs(ctx));
    const Tensor& x = ctx->input(1);
    Tensor* dx = OutputForOverwrite(ctx, 0, x.shape());
    if (dx == nullptr || x.NumElements() == 0) return absl::OkStatus();
    GpuDevice* gpu = GpuOf(ctx);
    ASSIGN_OR_RETURN(Tensor norms, gpu->AllocateTemp(DT_FLOAT, x.shape()));
    LaunchLrnGrad(gpu->stream(), ArgsOf(p_), ElementsOf<float>(ctx->input(0)),
                  ElementsOf<float>(x), ElementsOf<float>(ctx->input(2)),
                  MutableElementsOf<float>(dx), x.NumElements(), x.dim_size(3),
                  MutableElementsOf<float>(&norms));
    return LaunchStatus(ctx);
  }

 private:
  LrnParams p_;
};

REGISTER_KERNEL(KernelDefBuilder("LRN").Device(kDeviceGPU).TypeConstraint<float>("T"), LrnGpuOp);
REGISTER_KERNEL(KernelDefBuilder("LRNGrad").Device(kDeviceGPU).TypeConstraint<float>("T"),
                LrnGradGpuOp);

// Every argument in device memory.
const bool kRegistered = [] {
  RegisterBatchNormKernels<FusedBatchNormGpuOp, FusedBatchNormGradGpuOp>(kDeviceGPU);
  return true;
}();

}  // namespace
}  // namespace gpu
}  // namespace dflow
