// FusedBatchNormV3 and FusedBatchNormGradV3 (tf.compat.v1.nn.fused_batch_norm,
// and what tf.compat.v1.layers.batch_normalization(fused=True) emits), for
// channels-last data (NHWC, NDHWC): every statistic is per channel, over all
// the other dimensions.
//
// Training: y = (x - mean) / sqrt(var + epsilon) * scale + offset with the
// batch's mean and biased variance; batch_variance is the unbiased one
// (times n / (n - 1)), and with exponential_avg_factor f < 1 both outputs
// are running averages: (1 - f) * input + f * batch. reserve_space_1 and _2
// keep the batch mean and biased variance for the gradient. Inference:
// normalizes with the given mean and variance. OpDefs are TensorFlow's; the
// gradient function is in nn_grad.cc.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dflow/framework/gradient.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/shape_inference.h"

namespace dflow {
namespace {

// The layout of x: `channels` values per position, `positions` positions.
struct ChannelsLast {
  int64_t positions = 0;
  int64_t channels = 0;
};

// Checks the attrs shared by both ops; channels-last only.
absl::Status ReadCommonAttrs(OpKernelConstruction* c, float* epsilon, bool* is_training) {
  std::string format = "NHWC";
  RETURN_IF_ERROR(c->GetAttr("epsilon", epsilon));
  RETURN_IF_ERROR(c->GetAttr("is_training", is_training));
  RETURN_IF_ERROR(c->GetAttr("data_format", &format));
  if (format != "NHWC" && format != "NDHWC") {
    return absl::UnimplementedError(absl::StrCat(
        "[", c->def().op(), " '", c->def().name(), "'] data_format ", format,
        " is not supported on CPU yet; use NHWC (channels last)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ChannelsLast> Layout(OpKernelContext* ctx, const Tensor& x) {
  if (x.dims() != 4 && x.dims() != 5) {
    return ctx->InvalidArgument("input must be 4-dimensional or 5-dimensional",
                                x.shape().DebugString());
  }
  const int64_t channels = x.dim_size(x.dims() - 1);
  return ChannelsLast{channels == 0 ? 0 : x.NumElements() / channels, channels};
}

// `name` (input i) must be a vector of `channels` values.
absl::Status CheckChannelVector(OpKernelContext* ctx, int i, const char* name, int64_t channels) {
  const Tensor& t = ctx->input(i);
  if (t.dims() != 1 || t.dim_size(0) != channels) {
    return ctx->InvalidArgument(name, " must be a vector of ", channels, " values (the channels of x), got ",
                                t.shape().DebugString());
  }
  return absl::OkStatus();
}

class FusedBatchNormOp : public OpKernel {
 public:
  explicit FusedBatchNormOp(OpKernelConstruction* c) : OpKernel(c) {
    c->SetStatus(ReadCommonAttrs(c, &epsilon_, &is_training_));
    c->GetAttr("exponential_avg_factor", &avg_factor_).IgnoreError();
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    ASSIGN_OR_RETURN(ChannelsLast l, Layout(ctx, x));
    RETURN_IF_ERROR(CheckChannelVector(ctx, 1, "scale", l.channels));
    RETURN_IF_ERROR(CheckChannelVector(ctx, 2, "offset", l.channels));
    // In training with no running averages to update, mean and variance may be empty.
    const bool stats_needed = !is_training_ || avg_factor_ != 1.0f;
    if (stats_needed || ctx->input(3).NumElements() != 0) {
      RETURN_IF_ERROR(CheckChannelVector(ctx, 3, "mean", l.channels));
      RETURN_IF_ERROR(CheckChannelVector(ctx, 4, "variance", l.channels));
    }
    const float* xv = x.flat<float>().data();
    const float* scale = ctx->input(1).flat<float>().data();
    const float* offset = ctx->input(2).flat<float>().data();
    std::vector<float> mean(l.channels), var(l.channels);  // What y is normalized with.
    if (is_training_) {
      BatchMoments(xv, l, &mean, &var);
    } else {
      for (int64_t c = 0; c < l.channels; ++c) {
        mean[c] = ctx->input(3).flat<float>()[c];
        var[c] = ctx->input(4).flat<float>()[c];
      }
    }
    float* y = ctx->allocate_output_for_overwrite(0, x.shape())->flat<float>().data();
    std::vector<float> factor(l.channels);
    for (int64_t c = 0; c < l.channels; ++c) factor[c] = scale[c] / std::sqrt(var[c] + epsilon_);
    ctx->intra_op_pool()->ParallelFor(l.positions, l.channels, [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) {
        for (int64_t c = 0; c < l.channels; ++c) {
          const int64_t i = p * l.channels + c;
          y[i] = (xv[i] - mean[c]) * factor[c] + offset[c];
        }
      }
    });
    const TensorShape channels({l.channels});
    auto batch_mean = ctx->allocate_output(1, channels)->flat<float>();
    auto batch_var = ctx->allocate_output(2, channels)->flat<float>();
    auto saved_mean = ctx->allocate_output(3, channels)->flat<float>();
    auto saved_var = ctx->allocate_output(4, channels)->flat<float>();
    ctx->allocate_output(5, TensorShape({}));
    const float unbiased = l.positions > 1 ? float(l.positions) / float(l.positions - 1) : 1.0f;
    for (int64_t c = 0; c < l.channels; ++c) {
      saved_mean[c] = mean[c];
      saved_var[c] = var[c];
      if (!is_training_) {
        batch_mean[c] = mean[c];
        batch_var[c] = var[c];
      } else if (avg_factor_ == 1.0f) {
        batch_mean[c] = mean[c];
        batch_var[c] = var[c] * unbiased;
      } else {
        const float keep = 1.0f - avg_factor_;
        batch_mean[c] = keep * ctx->input(3).flat<float>()[c] + avg_factor_ * mean[c];
        batch_var[c] = keep * ctx->input(4).flat<float>()[c] + avg_factor_ * var[c] * unbiased;
      }
    }
    return absl::OkStatus();
  }

 private:
  // Per-channel mean and biased variance, summed in double (NaN for an
  // empty batch, as TensorFlow).
  static void BatchMoments(const float* x, const ChannelsLast& l, std::vector<float>* mean,
                           std::vector<float>* var) {
    std::vector<double> sum(l.channels, 0.0), squares(l.channels, 0.0);
    for (int64_t p = 0; p < l.positions; ++p) {
      for (int64_t c = 0; c < l.channels; ++c) sum[c] += x[p * l.channels + c];
    }
    const double n = static_cast<double>(l.positions);
    for (int64_t c = 0; c < l.channels; ++c) (*mean)[c] = static_cast<float>(sum[c] / n);
    for (int64_t p = 0; p < l.positions; ++p) {
      for (int64_t c = 0; c < l.channels; ++c) {
        const double d = x[p * l.channels + c] - (*mean)[c];
        squares[c] += d * d;
      }
    }
    for (int64_t c = 0; c < l.channels; ++c) (*var)[c] = static_cast<float>(squares[c] / n);
  }

  float epsilon_ = 1e-4f;
  float avg_factor_ = 1.0f;
  bool is_training_ = true;
};

// Training (the batch's statistics, reserve_space_1/2):
//   dx = scale / sqrt(var + eps) * (dy - mean(dy) - (x - mean) * mean(dy (x - mean)) / (var + eps))
// Inference (the given mean and variance): dx = dy * scale / sqrt(var + eps).
// Both: dscale = sum(dy (x - mean)) / sqrt(var + eps), doffset = sum(dy).
class FusedBatchNormGradOp : public OpKernel {
 public:
  explicit FusedBatchNormGradOp(OpKernelConstruction* c) : OpKernel(c) {
    c->SetStatus(ReadCommonAttrs(c, &epsilon_, &is_training_));
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& dy_t = ctx->input(0);
    const Tensor& x_t = ctx->input(1);
    if (dy_t.shape() != x_t.shape()) {
      return ctx->InvalidArgument("x and y_backprop must have same shape, but x has shape ",
                                  x_t.shape().DebugString(), " and y_backprop has shape ",
                                  dy_t.shape().DebugString());
    }
    ASSIGN_OR_RETURN(ChannelsLast l, Layout(ctx, x_t));
    RETURN_IF_ERROR(CheckChannelVector(ctx, 2, "scale", l.channels));
    RETURN_IF_ERROR(CheckChannelVector(ctx, 3, "reserve_space_1 (the mean)", l.channels));
    RETURN_IF_ERROR(CheckChannelVector(ctx, 4, "reserve_space_2 (the variance)", l.channels));
    const float* dy = dy_t.flat<float>().data();
    const float* x = x_t.flat<float>().data();
    const float* scale = ctx->input(2).flat<float>().data();
    const float* mean = ctx->input(3).flat<float>().data();
    const float* var = ctx->input(4).flat<float>().data();
    std::vector<double> sum_dy(l.channels, 0.0), sum_dy_xc(l.channels, 0.0);
    for (int64_t p = 0; p < l.positions; ++p) {
      for (int64_t c = 0; c < l.channels; ++c) {
        const int64_t i = p * l.channels + c;
        sum_dy[c] += dy[i];
        sum_dy_xc[c] += double(dy[i]) * (x[i] - mean[c]);
      }
    }
    const double n = l.positions > 0 ? double(l.positions) : 1.0;
    std::vector<double> inv_std(l.channels);
    for (int64_t c = 0; c < l.channels; ++c) inv_std[c] = 1.0 / std::sqrt(double(var[c]) + epsilon_);
    float* dx = ctx->allocate_output_for_overwrite(0, x_t.shape())->flat<float>().data();
    for (int64_t p = 0; p < l.positions; ++p) {
      for (int64_t c = 0; c < l.channels; ++c) {
        const int64_t i = p * l.channels + c;
        double g = dy[i];
        if (is_training_) {
          g -= sum_dy[c] / n + (x[i] - mean[c]) * (sum_dy_xc[c] / n) * inv_std[c] * inv_std[c];
        }
        dx[i] = static_cast<float>(scale[c] * inv_std[c] * g);
      }
    }
    const TensorShape channels({l.channels});
    auto dscale = ctx->allocate_output(1, channels)->flat<float>();
    auto doffset = ctx->allocate_output(2, channels)->flat<float>();
    for (int64_t c = 0; c < l.channels; ++c) {
      dscale[c] = static_cast<float>(sum_dy_xc[c] * inv_std[c]);
      doffset[c] = static_cast<float>(sum_dy[c]);
    }
    ctx->allocate_output(3, TensorShape({0}));
    ctx->allocate_output(4, TensorShape({0}));
    return absl::OkStatus();
  }

 private:
  float epsilon_ = 1e-4f;
  bool is_training_ = true;
};

absl::Status FusedBatchNormShape(InferenceContext* c) {
  c->set_output(0, c->input(0));
  const PartialShape channels({kUnknownDim});
  for (int i = 1; i < 5; ++i) c->set_output(i, channels);
  c->set_output(5, PartialShape({}));
  return absl::OkStatus();
}

absl::Status FusedBatchNormGradShape(InferenceContext* c) {
  c->set_output(0, c->input(1));
  c->set_output(1, PartialShape({kUnknownDim}));
  c->set_output(2, PartialShape({kUnknownDim}));
  c->set_output(3, PartialShape({0}));
  c->set_output(4, PartialShape({0}));
  return absl::OkStatus();
}

REGISTER_OP("FusedBatchNormV3")
    .Input("x: T")
    .Input("scale: U")
    .Input("offset: U")
    .Input("mean: U")
    .Input("variance: U")
    .Output("y: T")
    .Output("batch_mean: U")
    .Output("batch_variance: U")
    .Output("reserve_space_1: U")
    .Output("reserve_space_2: U")
    .Output("reserve_space_3: U")
    .Attr("T: {float}")
    .Attr("U: {float}")
    .Attr("epsilon: float = 0.0001")
    .Attr("exponential_avg_factor: float = 1.0")
    .Attr("data_format: {'NHWC', 'NCHW', 'NDHWC', 'NCDHW'} = 'NHWC'")
    .Attr("is_training: bool = true")
    .SetShapeFn(FusedBatchNormShape);
REGISTER_KERNEL(KernelDefBuilder("FusedBatchNormV3")
                    .Device(kDeviceCPU)
                    .TypeConstraint<float>("T")
                    .TypeConstraint<float>("U"),
                FusedBatchNormOp);

REGISTER_OP("FusedBatchNormGradV3")
    .Input("y_backprop: T")
    .Input("x: T")
    .Input("scale: float")
    .Input("reserve_space_1: U")
    .Input("reserve_space_2: U")
    .Input("reserve_space_3: U")
    .Output("x_backprop: T")
    .Output("scale_backprop: U")
    .Output("offset_backprop: U")
    .Output("reserve_space_4: U")
    .Output("reserve_space_5: U")
    .Attr("T: {float}")
    .Attr("U: {float}")
    .Attr("epsilon: float = 0.0001")
    .Attr("data_format: {'NHWC', 'NCHW', 'NDHWC', 'NCDHW'} = 'NHWC'")
    .Attr("is_training: bool = true")
    .SetShapeFn(FusedBatchNormGradShape);
REGISTER_KERNEL(KernelDefBuilder("FusedBatchNormGradV3")
                    .Device(kDeviceCPU)
                    .TypeConstraint<float>("T")
                    .TypeConstraint<float>("U"),
                FusedBatchNormGradOp);

REGISTER_NO_GRADIENT("FusedBatchNormGradV3");

}  // namespace
}  // namespace dflow
