#include "dflow/ops/normalization_util.h"

#include <cstdint>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"

namespace dflow {
namespace {

absl::StatusOr<ChannelLayout> LayoutOf(OpKernelContext* ctx, const Tensor& x,
                                       bool channels_first) {
  if (x.dims() != 4 && x.dims() != 5) {
    return ctx->InvalidArgument("input must be 4-dimensional or 5-dimensional",
                                x.shape().DebugString());
  }
  const int64_t channels = x.dim_size(channels_first ? 1 : x.dims() - 1);
  const int64_t n = x.dim_size(0);
  if (channels == 0) return ChannelLayout{0, 0, 0};
  if (channels_first)
    return ChannelLayout{n, channels, n == 0 ? 0 : x.NumElements() / n / channels};
  return ChannelLayout{x.NumElements() / channels, channels, 1};
}

// `name` (input i) must be a vector of `channels` values.
absl::Status CheckChannelVector(OpKernelContext* ctx, int i, const char* name, int64_t channels) {
  const Tensor& t = ctx->input(i);
  if (t.dims() != 1 || t.dim_size(0) != channels) {
    return ctx->InvalidArgument(name, " must be a vector of ", channels,
                                " values (the channels of x), got ", t.shape().DebugString());
  }
  return absl::OkStatus();
}

}  // namespace

std::string BatchNormOpName(const std::string& base, int v) {
  return v == 1 ? base : absl::StrCat(base, "V", v);
}

BatchNormAttrs::BatchNormAttrs(OpKernelConstruction* c) {
  std::string format = "NHWC";
  c->GetAttr("epsilon", &epsilon).IgnoreError();  // Failures are recorded on c.
  c->GetAttr("is_training", &is_training).IgnoreError();
  c->GetAttr("data_format", &format).IgnoreError();
  if (c->HasAttr("exponential_avg_factor")) {  // The forward's only.
    c->GetAttr("exponential_avg_factor", &avg_factor).IgnoreError();
  }
  channels_first = format == "NCHW" || format == "NCDHW";
}

absl::StatusOr<ChannelLayout> CheckBatchNormInputs(OpKernelContext* ctx, const BatchNormAttrs& a) {
  ASSIGN_OR_RETURN(ChannelLayout l, LayoutOf(ctx, ctx->input(0), a.channels_first));
  RETURN_IF_ERROR(CheckChannelVector(ctx, 1, "scale", l.channels));
  RETURN_IF_ERROR(CheckChannelVector(ctx, 2, "offset", l.channels));
  // In training with no running averages to update, mean and variance may be empty.
  const bool stats_needed = !a.is_training || a.avg_factor != 1.0f;
  if (stats_needed || ctx->input(3).NumElements() != 0) {
    RETURN_IF_ERROR(CheckChannelVector(ctx, 3, "mean", l.channels));
    RETURN_IF_ERROR(CheckChannelVector(ctx, 4, "variance", l.channels));
  }
  return l;
}

absl::StatusOr<ChannelLayout> CheckBatchNormGradInputs(OpKernelContext* ctx,
                                                       const BatchNormAttrs& a) {
  const Tensor& dy = ctx->input(0);
  const Tensor& x = ctx->input(1);
  if (dy.shape() != x.shape()) {
    return ctx->InvalidArgument("x and y_backprop must have same shape, but x has shape ",
                                x.shape().DebugString(), " and y_backprop has shape ",
                                dy.shape().DebugString());
  }
  ASSIGN_OR_RETURN(ChannelLayout l, LayoutOf(ctx, x, a.channels_first));
  RETURN_IF_ERROR(CheckChannelVector(ctx, 2, "scale", l.channels));
  RETURN_IF_ERROR(CheckChannelVector(ctx, 3, "reserve_space_1 (the mean)", l.channels));
  RETURN_IF_ERROR(CheckChannelVector(ctx, 4, "reserve_space_2 (the variance)", l.channels));
  return l;
}

absl::Status LrnParams::Read(OpKernelConstruction* c) {
  RETURN_IF_ERROR(c->GetAttr("depth_radius", &radius));
  RETURN_IF_ERROR(c->GetAttr("bias", &bias));
  RETURN_IF_ERROR(c->GetAttr("alpha", &alpha));
  RETURN_IF_ERROR(c->GetAttr("beta", &beta));
  if (radius < 0 || radius > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("LRN: depth_radius must be in [0, 2^31), got ", radius));
  }
  return absl::OkStatus();
}

absl::Status CheckLrnInputs(OpKernelContext* ctx) {
  const Tensor& in = ctx->input(0);
  if (ctx->num_inputs() == 1) {
    if (in.dims() != 4) {
      return ctx->InvalidArgument("input must be 4-dimensional, got ", in.shape().DebugString());
    }
    return absl::OkStatus();
  }
  if (in.dims() != 4) {
    return ctx->InvalidArgument("input_grads must be 4-dimensional, got ",
                                in.shape().DebugString());
  }
  const Tensor& x = ctx->input(1);
  const Tensor& y = ctx->input(2);
  if (x.shape() != in.shape() || y.shape() != in.shape()) {
    return ctx->InvalidArgument(
        "input_grads, input_image, and output_image must have the same shape, got ",
        in.shape().DebugString(), ", ", x.shape().DebugString(), " and ", y.shape().DebugString());
  }
  return absl::OkStatus();
}

}  // namespace dflow
