// RandomUniform on a GPU (float, double): the CPU kernel's generator and
// shape rule (ops/random_util.h), its Philox blocks drawn on the device
// (random_kernels.cu). The values are the CPU's and TensorFlow's for the
// same seeds and runs, and dropout's mask no longer crosses from the host
// every step. The normal distributions stay host-drawn (ops/random_ops.cc).
#include <algorithm>

#include "dflow/framework/kernel.h"
#include "dflow/gpu/gpu_device.h"
#include "dflow/gpu/random_launch.h"
#include "dflow/ops/array_util.h"
#include "dflow/ops/random_util.h"

namespace dflow {
namespace gpu {
namespace {

class RandomUniformGpuOp : public OpKernel {
 public:
  explicit RandomUniformGpuOp(OpKernelConstruction* c) : OpKernel(c), stream_(c) {
    c->GetAttr("dtype", &dtype_).IgnoreError();
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(TensorShape shape, RandomOutputShape(*ctx));
    Tensor* out = OutputForOverwrite(ctx, 0, shape);
    if (out == nullptr) return absl::OkStatus();
    const Philox4x32 base = stream_.Reserve(shape.num_elements());
    PhiloxState gen;
    std::copy(base.counter().begin(), base.counter().end(), gen.counter);
    std::copy(base.key().begin(), base.key().end(), gen.key);
    cudaStream_t s = GpuOf(ctx)->stream();
    if (dtype_ == DT_FLOAT) {
      LaunchRandomUniform(s, gen, MutableElementsOf<float>(out), shape.num_elements());
    } else {
      LaunchRandomUniform(s, gen, MutableElementsOf<double>(out), shape.num_elements());
    }
    return LaunchStatus(ctx);
  }

 private:
  DataType dtype_ = DT_FLOAT;
  PhiloxStream stream_;
};

REGISTER_KERNEL(KernelDefBuilder("RandomUniform")
                    .Device(kDeviceGPU)
                    .TypeConstraint("dtype", {DT_FLOAT, DT_DOUBLE})
                    .TypeConstraint("T", {DT_INT32, DT_INT64})
                    .HostMemory("shape"),
                RandomUniformGpuOp);

}  // namespace
}  // namespace gpu
}  // namespace dflow
