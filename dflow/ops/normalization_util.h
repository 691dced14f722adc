// The attrs and shape rules of the normalization ops (the fused batch norms,
// ops/batch_norm_ops.cc; LRN, ops/nn_ops.cc), one text for the kernels of
// every device (gpu/normalization_ops.cc), so that a bad input reads the
// same on CPU and GPU.
#ifndef DFLOW_OPS_NORMALIZATION_UTIL_H_
#define DFLOW_OPS_NORMALIZATION_UTIL_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/status.h"

namespace dflow {

// x viewed as [outer, channels, inner]: channels last has inner = 1 (outer
// the positions), channels first has outer = N (inner the positions of one
// image). Element i of channel c is at (o * channels + c) * inner + k.
struct ChannelLayout {
  int64_t outer = 0;
  int64_t channels = 0;
  int64_t inner = 0;
  int64_t count() const { return outer * inner; }  // Values per channel.
};

// The attrs of every version, forward and gradient (exponential_avg_factor
// is the forward's only; the gradient keeps its default 1).
struct BatchNormAttrs {
  float epsilon = 1e-4f;
  float avg_factor = 1.0f;
  bool is_training = true;
  bool channels_first = false;  // NCHW or NCDHW.

  // Reads them, recording a missing one on `c`.
  explicit BatchNormAttrs(OpKernelConstruction* c);
};

// FusedBatchNorm*'s inputs (x, scale, offset, mean, variance) checked: x 4-
// or 5-D, each vector one value per channel (mean and variance may be empty
// in training without running averages). Returns x's layout.
absl::StatusOr<ChannelLayout> CheckBatchNormInputs(OpKernelContext* ctx, const BatchNormAttrs& a);

// FusedBatchNormGrad*'s inputs (y_backprop, x, scale, reserve_space_1,
// reserve_space_2) checked the same way. Returns x's layout.
absl::StatusOr<ChannelLayout> CheckBatchNormGradInputs(OpKernelContext* ctx,
                                                       const BatchNormAttrs& a);

// FusedBatchNorm<base> in version v: the name alone for 1, then V2, V3.
std::string BatchNormOpName(const std::string& base, int v);

// Registers Forward (FusedBatchNorm*) and Grad (FusedBatchNormGrad*) of
// every version for `device_type`: T float, and U float from V2 on.
template <typename Forward, typename Grad>
void RegisterBatchNormKernels(const char* device_type) {
  auto reg = [device_type](const std::string& op, int v, KernelFactory make) {
    KernelDefBuilder k(op);
    k.Device(device_type).TypeConstraint<float>("T");
    if (v > 1) k.TypeConstraint<float>("U");
    KernelRegistry::Global()->Register(k.Build(), std::move(make));
  };
  for (int v = 1; v <= 3; ++v) {
    reg(BatchNormOpName("FusedBatchNorm", v), v,
        [](OpKernelConstruction* c) -> std::unique_ptr<OpKernel> {
          return std::make_unique<Forward>(c);
        });
    reg(BatchNormOpName("FusedBatchNormGrad", v), v,
        [](OpKernelConstruction* c) -> std::unique_ptr<OpKernel> {
          return std::make_unique<Grad>(c);
        });
  }
}

// LRN and LRNGrad (local response normalization across channels, NHWC, as
// in AlexNet and TensorFlow's CIFAR-10 model): with N_i = bias + alpha * sum
// of x_k^2 over the channels k within depth_radius of i, y_i = x_i * N_i^-beta.
struct LrnParams {
  int64_t radius = 5;
  float bias = 1, alpha = 1, beta = 0.5;

  // Reads the attrs; InvalidArgument for a radius past int32.
  absl::Status Read(OpKernelConstruction* c);
  // The channels [begin, end) within the radius of channel i of `depth`.
  int64_t Begin(int64_t i) const { return std::max<int64_t>(0, i - radius); }
  int64_t End(int64_t i, int64_t depth) const { return std::min(depth, i + radius + 1); }
};

// LRN's input, or LRNGrad's three (input_grads, input_image, output_image):
// 4-D, of one shape.
absl::Status CheckLrnInputs(OpKernelContext* ctx);

}  // namespace dflow

#endif  // DFLOW_OPS_NORMALIZATION_UTIL_H_
