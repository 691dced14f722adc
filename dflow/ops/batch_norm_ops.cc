// FusedBatchNorm, FusedBatchNormV2, FusedBatchNormV3 and their gradients
// FusedBatchNormGrad, FusedBatchNormGradV2, FusedBatchNormGradV3
// (tf.compat.v1.nn.fused_batch_norm, and what
// tf.compat.v1.layers.batch_normalization(fused=True) emits): one kernel
// each, the versions differing only in their OpDefs (V3 adds
// reserve_space_3 and 5-D formats; V2 and V3 name the statistics' type U).
// Every statistic is per channel, over all the other dimensions, for
// channels-last (NHWC, NDHWC) and channels-first (NCHW, NCDHW) data.
//
// Training: y = (x - mean) / sqrt(var + epsilon) * scale + offset with the
// batch's mean and biased variance; batch_variance is the unbiased one
// (times n / (n - 1)), and with exponential_avg_factor f < 1 both outputs
// are running averages: (1 - f) * input + f * batch. reserve_space_1 and _2
// keep the batch mean and biased variance for the gradient. Inference:
// normalizes with the given mean and variance. The gradient functions are
// in nn_grad.cc.
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dflow/framework/gradient.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/ops/normalization_util.h"

namespace dflow {
namespace {

// Calls fn(c, i) for element i (flat index, in order) of every channel c of
// rows [begin, end) of the outer dimension.
template <typename Fn>
void ForEachElement(const ChannelLayout& l, int64_t begin, int64_t end, Fn&& fn) {
  int64_t i = begin * l.channels * l.inner;
  for (int64_t o = begin; o < end; ++o) {
    for (int64_t c = 0; c < l.channels; ++c) {
      for (int64_t k = 0; k < l.inner; ++k) fn(c, i++);
    }
  }
}
template <typename Fn>
void ForEachElement(const ChannelLayout& l, Fn&& fn) {
  ForEachElement(l, 0, l.outer, std::forward<Fn>(fn));
}

class FusedBatchNormOp : public OpKernel {
 public:
  explicit FusedBatchNormOp(OpKernelConstruction* c) : OpKernel(c), a_(c) {}

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    ASSIGN_OR_RETURN(ChannelLayout l, CheckBatchNormInputs(ctx, a_));
    const float* xv = x.flat<float>().data();
    const float* scale = ctx->input(1).flat<float>().data();
    const float* offset = ctx->input(2).flat<float>().data();
    std::vector<float> mean(l.channels), var(l.channels);  // What y is normalized with.
    if (a_.is_training) {
      BatchMoments(xv, l, &mean, &var);
    } else {
      for (int64_t c = 0; c < l.channels; ++c) {
        mean[c] = ctx->input(3).flat<float>()[c];
        var[c] = ctx->input(4).flat<float>()[c];
      }
    }
    float* y = ctx->allocate_output_for_overwrite(0, x.shape())->flat<float>().data();
    std::vector<float> factor(l.channels);
    for (int64_t c = 0; c < l.channels; ++c) factor[c] = scale[c] / std::sqrt(var[c] + a_.epsilon);
    ctx->intra_op_pool()->ParallelFor(l.outer, l.channels * l.inner,
                                      [&](int64_t begin, int64_t end) {
                                        ForEachElement(l, begin, end, [&](int64_t c, int64_t i) {
                                          y[i] = (xv[i] - mean[c]) * factor[c] + offset[c];
                                        });
                                      });
    const TensorShape channels({l.channels});
    auto batch_mean = ctx->allocate_output(1, channels)->flat<float>();
    auto batch_var = ctx->allocate_output(2, channels)->flat<float>();
    auto saved_mean = ctx->allocate_output(3, channels)->flat<float>();
    auto saved_var = ctx->allocate_output(4, channels)->flat<float>();
    if (ctx->num_outputs() > 5) ctx->allocate_output(5, TensorShape({}));  // V3's reserve_space_3.
    const int64_t n = l.count();
    const float unbiased = n > 1 ? float(n) / float(n - 1) : 1.0f;
    for (int64_t c = 0; c < l.channels; ++c) {
      saved_mean[c] = mean[c];
      saved_var[c] = var[c];
      if (!a_.is_training) {
        batch_mean[c] = mean[c];
        batch_var[c] = var[c];
      } else if (a_.avg_factor == 1.0f) {
        batch_mean[c] = mean[c];
        batch_var[c] = var[c] * unbiased;
      } else {
        const float keep = 1.0f - a_.avg_factor;
        batch_mean[c] = keep * ctx->input(3).flat<float>()[c] + a_.avg_factor * mean[c];
        batch_var[c] = keep * ctx->input(4).flat<float>()[c] + a_.avg_factor * var[c] * unbiased;
      }
    }
    return absl::OkStatus();
  }

 private:
  // Per-channel mean and biased variance, summed in double (NaN for an
  // empty batch, as TensorFlow).
  static void BatchMoments(const float* x, const ChannelLayout& l, std::vector<float>* mean,
                           std::vector<float>* var) {
    std::vector<double> sum(l.channels, 0.0), squares(l.channels, 0.0);
    ForEachElement(l, [&](int64_t c, int64_t i) { sum[c] += x[i]; });
    const double n = static_cast<double>(l.count());
    for (int64_t c = 0; c < l.channels; ++c) (*mean)[c] = static_cast<float>(sum[c] / n);
    ForEachElement(l, [&](int64_t c, int64_t i) {
      const double d = x[i] - (*mean)[c];
      squares[c] += d * d;
    });
    for (int64_t c = 0; c < l.channels; ++c) (*var)[c] = static_cast<float>(squares[c] / n);
  }

  const BatchNormAttrs a_;
};

// Training (the batch's statistics, reserve_space_1/2):
//   dx = scale / sqrt(var + eps) * (dy - mean(dy) - (x - mean) * mean(dy (x - mean)) / (var + eps))
// Inference (the given mean and variance): dx = dy * scale / sqrt(var + eps).
// Both: dscale = sum(dy (x - mean)) / sqrt(var + eps), doffset = sum(dy).
class FusedBatchNormGradOp : public OpKernel {
 public:
  explicit FusedBatchNormGradOp(OpKernelConstruction* c) : OpKernel(c), a_(c) {}

  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(ChannelLayout l, CheckBatchNormGradInputs(ctx, a_));
    const Tensor& dy_t = ctx->input(0);
    const Tensor& x_t = ctx->input(1);
    const float* dy = dy_t.flat<float>().data();
    const float* x = x_t.flat<float>().data();
    const float* scale = ctx->input(2).flat<float>().data();
    const float* mean = ctx->input(3).flat<float>().data();
    const float* var = ctx->input(4).flat<float>().data();
    std::vector<double> sum_dy(l.channels, 0.0), sum_dy_xc(l.channels, 0.0);
    ForEachElement(l, [&](int64_t c, int64_t i) {
      sum_dy[c] += dy[i];
      sum_dy_xc[c] += double(dy[i]) * (x[i] - mean[c]);
    });
    const double n = l.count() > 0 ? double(l.count()) : 1.0;
    std::vector<double> inv_std(l.channels);
    for (int64_t c = 0; c < l.channels; ++c)
      inv_std[c] = 1.0 / std::sqrt(double(var[c]) + a_.epsilon);
    float* dx = ctx->allocate_output_for_overwrite(0, x_t.shape())->flat<float>().data();
    ForEachElement(l, [&](int64_t c, int64_t i) {
      double g = dy[i];
      if (a_.is_training) {
        g -= sum_dy[c] / n + (x[i] - mean[c]) * (sum_dy_xc[c] / n) * inv_std[c] * inv_std[c];
      }
      dx[i] = static_cast<float>(scale[c] * inv_std[c] * g);
    });
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
  const BatchNormAttrs a_;
};

absl::Status FusedBatchNormShape(InferenceContext* c) {
  c->set_output(0, c->input(0));
  const PartialShape channels({kUnknownDim});
  for (int i = 1; i < 5; ++i) c->set_output(i, channels);
  if (c->num_outputs() > 5) c->set_output(5, PartialShape({}));
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

// Attrs shared by the forward and gradient OpDefs of version v.
void AddBatchNormAttrs(OpDefBuilder& b, int v, bool grad) {
  b.Attr("T: {float}");
  if (v > 1) b.Attr("U: {float}");
  b.Attr("epsilon: float = 0.0001");
  if (!grad) b.Attr("exponential_avg_factor: float = 1.0");
  b.Attr(v == 3 ? "data_format: {'NHWC', 'NCHW', 'NDHWC', 'NCDHW'} = 'NHWC'"
                : "data_format: {'NHWC', 'NCHW'} = 'NHWC'");
  b.Attr("is_training: bool = true");
}

// V1 types the statistics T, V2 and V3 U; V3 adds reserve_space_3.
OpDefBuilder BatchNormOpDef(int v) {
  const std::string u = v == 1 ? ": T" : ": U";
  OpDefBuilder b(BatchNormOpName("FusedBatchNorm", v));
  b.Input("x: T");
  for (const char* in : {"scale", "offset", "mean", "variance"}) b.Input(in + u);
  b.Output("y: T");
  for (const char* out : {"batch_mean", "batch_variance", "reserve_space_1", "reserve_space_2"}) {
    b.Output(out + u);
  }
  if (v == 3) b.Output("reserve_space_3: U");
  AddBatchNormAttrs(b, v, /*grad=*/false);
  b.SetShapeFn(FusedBatchNormShape);
  return b;
}

OpDefBuilder BatchNormGradOpDef(int v) {
  const std::string u = v == 1 ? ": T" : ": U";
  OpDefBuilder b(BatchNormOpName("FusedBatchNormGrad", v));
  b.Input("y_backprop: T").Input("x: T").Input(v == 1 ? "scale: T" : "scale: float");
  b.Input("reserve_space_1" + u).Input("reserve_space_2" + u);
  if (v == 3) b.Input("reserve_space_3: U");
  b.Output("x_backprop: T").Output("scale_backprop" + u).Output("offset_backprop" + u);
  const int spare = v == 3 ? 4 : 3;  // The two unused outputs' first number.
  b.Output(absl::StrCat("reserve_space_", spare, u));
  b.Output(absl::StrCat("reserve_space_", spare + 1, u));
  AddBatchNormAttrs(b, v, /*grad=*/true);
  b.SetShapeFn(FusedBatchNormGradShape);
  return b;
}

const bool kBatchNormRegistered = [] {
  for (int v = 1; v <= 3; ++v) {
    OpDefBuilderReceiver forward(BatchNormOpDef(v));
    OpDefBuilderReceiver backward(BatchNormGradOpDef(v));
  }
  RegisterBatchNormKernels<FusedBatchNormOp, FusedBatchNormGradOp>(kDeviceCPU);
  return true;
}();

REGISTER_NO_GRADIENT("FusedBatchNormGrad");
REGISTER_NO_GRADIENT("FusedBatchNormGradV2");
REGISTER_NO_GRADIENT("FusedBatchNormGradV3");

}  // namespace
}  // namespace dflow
