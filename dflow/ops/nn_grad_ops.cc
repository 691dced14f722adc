// Gradient kernels of the nn ops: ReluGrad, SoftplusGrad, BiasAddGrad, MaxPoolGrad and
// AvgPoolGrad (the Conv2D backprops are in conv_grad_ops.cc). Semantics follow
// TensorFlow's CPU kernels, including which input a tied MaxPool window
// sends its gradient to.
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/framework/status.h"
#include "dflow/ops/conv_util.h"

namespace dflow {
namespace nn_grad {

// features > 0 ? gradients : 0 (NaN features pass no gradient, as in
// TensorFlow); vectorised as gradients & (0 < features).
template <typename T>
struct ReluGradFn {
  T operator()(const T& g, const T& f) const { return f > T(0) ? g : T(0); }
  template <typename Packet>
  Packet packetOp(const Packet& g, const Packet& f) const {
    using namespace Eigen::internal;  // NOLINT: Eigen's packet primitives.
    return pand(g, pcmp_lt(pzero(f), f));
  }
};

// gradients / (exp(-features) + 1), that is gradients * sigmoid(features).
template <typename T>
struct SoftplusGradFn {
  T operator()(const T& g, const T& f) const { return g / (std::exp(-f) + T(1)); }
};

}  // namespace nn_grad
}  // namespace dflow

template <typename T>
struct Eigen::internal::functor_traits<dflow::nn_grad::ReluGradFn<T>> {
  enum { Cost = 2, PacketAccess = packet_traits<T>::HasCmp };
};

namespace dflow {
namespace {

// --- ReluGrad and SoftplusGrad: backprops = Fn(gradients, features) ---------------

// `kCost`: the ParallelFor cost of one element.
template <typename T, template <typename> class Fn, int64_t kCost>
class FeatureGradOp : public OpKernel {
 public:
  using OpKernel::OpKernel;

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& dy = ctx->input(0);
    const Tensor& x = ctx->input(1);
    if (dy.shape() != x.shape()) {
      return ctx->InvalidArgument("gradients and features must have the same shape: gradients ",
                                  dy.shape().DebugString(), " features ", x.shape().DebugString());
    }
    Tensor* out = ctx->allocate_output_for_overwrite(0, x.shape());
    const T* g = dy.flat<T>().data();
    const T* f = x.flat<T>().data();
    T* o = out->flat<T>().data();
    using Array = Eigen::Array<T, Eigen::Dynamic, 1>;
    ctx->intra_op_pool()->ParallelFor(x.NumElements(), kCost, [&](int64_t begin, int64_t end) {
      const Eigen::Map<const Array> gm(g + begin, end - begin), fm(f + begin, end - begin);
      Eigen::Map<Array>(o + begin, end - begin) = gm.binaryExpr(fm, Fn<T>());
    });
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }
};
template <typename T>
using ReluGradOp = FeatureGradOp<T, nn_grad::ReluGradFn, 1>;
template <typename T>
using SoftplusGradOp = FeatureGradOp<T, nn_grad::SoftplusGradFn, 20>;

absl::Status ReluGradShape(InferenceContext* c) {
  absl::StatusOr<PartialShape> merged = PartialShape::Merge(c->input(0), c->input(1));
  if (!merged.ok()) {
    return c->Error(absl::StrCat("gradients and features must have the same shape: gradients ",
                                 c->input(0).DebugString(), " features ",
                                 c->input(1).DebugString()));
  }
  c->set_output(0, *merged);
  return absl::OkStatus();
}

REGISTER_OP("ReluGrad")
    .Input("gradients: T")
    .Input("features: T")
    .Output("backprops: T")
    .Attr(
        "T: {float, double, int32, uint8, int16, int8, int64, bfloat16, uint16, half, uint32, "
        "uint64}")
    .SetShapeFn(ReluGradShape);

REGISTER_KERNEL(KernelDefBuilder("ReluGrad").Device(kDeviceCPU).TypeConstraint<float>("T"),
                ReluGradOp<float>);
REGISTER_KERNEL(KernelDefBuilder("ReluGrad").Device(kDeviceCPU).TypeConstraint<double>("T"),
                ReluGradOp<double>);
REGISTER_KERNEL(KernelDefBuilder("ReluGrad").Device(kDeviceCPU).TypeConstraint<int32_t>("T"),
                ReluGradOp<int32_t>);
REGISTER_KERNEL(KernelDefBuilder("ReluGrad").Device(kDeviceCPU).TypeConstraint<int64_t>("T"),
                ReluGradOp<int64_t>);

// --- SoftplusGrad ------------------------------------------------------------------

REGISTER_OP("SoftplusGrad")
    .Input("gradients: T")
    .Input("features: T")
    .Output("backprops: T")
    .Attr("T: {half, bfloat16, float, double}")
    .SetShapeFn(ReluGradShape);  // The same rule: both inputs' shape.

REGISTER_KERNEL(KernelDefBuilder("SoftplusGrad").Device(kDeviceCPU).TypeConstraint<float>("T"),
                SoftplusGradOp<float>);
REGISTER_KERNEL(KernelDefBuilder("SoftplusGrad").Device(kDeviceCPU).TypeConstraint<double>("T"),
                SoftplusGradOp<double>);

// --- BiasAddGrad: the sum of out_backprop over every dimension but the channel's ---

template <typename T>
class BiasAddGradOp : public OpKernel {
 public:
  explicit BiasAddGradOp(OpKernelConstruction* c) : OpKernel(c) {
    absl::StatusOr<bool> nchw = ReadBiasNchw(c->def());
    if (nchw.ok()) nchw_ = *nchw;
    c->SetStatus(nchw.status());
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& dy = ctx->input(0);
    if (dy.dims() < 2) {
      return ctx->InvalidArgument("Input tensor must be at least 2D: ", dy.shape().DebugString());
    }
    const int cd = BiasChannelDim(nchw_, dy.dims());
    const int64_t channels = dy.dim_size(cd);
    Tensor* out = ctx->allocate_output(0, TensorShape({channels}));
    if (dy.NumElements() == 0) return absl::OkStatus();
    // View out_backprop as [outer, channels, inner].
    int64_t inner = 1;
    for (int d = cd + 1; d < dy.dims(); ++d) inner *= dy.dim_size(d);
    const int64_t outer = dy.NumElements() / (inner * channels);
    SumOuterInner(ctx->intra_op_pool(), dy.flat<T>().data(), outer, channels, inner,
                  out->flat<T>().data());
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }

 private:
  // out[c] = Σ_{o, i} x[o, c, i]. Shards split `outer`; each sums into its own
  // row of partial sums, added at the end.
  static void SumOuterInner(ThreadPool* pool, const T* x, int64_t outer, int64_t channels,
                            int64_t inner, T* out) {
    const int64_t max_shards = pool->NumThreads() + 1;
    const int64_t shards =
        std::clamp<int64_t>(outer * channels * inner / (64 << 10), 1, max_shards);
    const int64_t per_shard = (outer + shards - 1) / shards;
    std::vector<T> partial(shards * channels, T(0));
    pool->ParallelFor(shards, per_shard * channels * inner, [&](int64_t first, int64_t last) {
      for (int64_t s = first; s < last; ++s) {
        T* acc = partial.data() + s * channels;
        const int64_t end = std::min(outer, (s + 1) * per_shard);
        for (int64_t o = s * per_shard; o < end; ++o) {
          SumRow(x + o * channels * inner, channels, inner, acc);
        }
      }
    });
    for (int64_t s = 0; s < shards; ++s) {
      for (int64_t c = 0; c < channels; ++c) out[c] += partial[s * channels + c];
    }
  }

  // acc[c] += Σ_i x[c, i].
  static void SumRow(const T* x, int64_t channels, int64_t inner, T* acc) {
    if (inner == 1) {
      Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>(acc, channels) +=
          Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>(x, channels);
      return;
    }
    for (int64_t c = 0; c < channels; ++c) {
      acc[c] += Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>(x + c * inner, inner).sum();
    }
  }

  bool nchw_ = false;
};

absl::Status BiasAddGradShape(InferenceContext* c) {
  PartialShape dy;
  RETURN_IF_ERROR(c->WithRankAtLeast(c->input(0), 2, &dy));
  absl::StatusOr<bool> nchw = ReadBiasNchw(c->node_def());
  if (!nchw.ok()) return c->Error(std::string(nchw.status().message()));
  if (!dy.rank_known()) {
    c->set_output(0, PartialShape::UnknownDims(1));
    return absl::OkStatus();
  }
  c->set_output(0, PartialShape({dy.dim(BiasChannelDim(*nchw, dy.rank()))}));
  return absl::OkStatus();
}

REGISTER_OP("BiasAddGrad")
    .Input("out_backprop: T")
    .Output("output: T")
    .Attr(
        "T: {float, double, int32, uint8, int16, int8, complex64, int64, qint8, quint8, "
        "qint32, bfloat16, qint16, quint16, uint16, complex128, half, uint32, uint64}")
    .Attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
    .SetShapeFn(BiasAddGradShape);

REGISTER_KERNEL(KernelDefBuilder("BiasAddGrad").Device(kDeviceCPU).TypeConstraint<float>("T"),
                BiasAddGradOp<float>);
REGISTER_KERNEL(KernelDefBuilder("BiasAddGrad").Device(kDeviceCPU).TypeConstraint<double>("T"),
                BiasAddGradOp<double>);
REGISTER_KERNEL(KernelDefBuilder("BiasAddGrad").Device(kDeviceCPU).TypeConstraint<int32_t>("T"),
                BiasAddGradOp<int32_t>);
REGISTER_KERNEL(KernelDefBuilder("BiasAddGrad").Device(kDeviceCPU).TypeConstraint<int64_t>("T"),
                BiasAddGradOp<int64_t>);

// --- MaxPoolGrad ------------------------------------------------------------------------
//
// Each output pixel's gradient goes, channel by channel, to the input
// element its window's maximum came from. As TensorFlow's CPU kernel: the
// window is scanned row by row, the first element seeds the maximum and only
// a strictly greater one replaces it, so ties go to the first maximum and a
// NaN wins only when it comes first.

// Routes the gradients of image `n` (`dy`: its [out_rows, out_cols, depth]
// gradients) into `dx` (its input-shaped gradient, zero-filled).
template <typename T>
void MaxPoolGradImage(const PoolGeometry& g, const T* x, const T* dy, T* dx, std::vector<T>* best,
                      std::vector<int64_t>* arg) {
  const int64_t c = g.depth;
  for (int64_t oh = 0; oh < g.out_rows; ++oh) {
    const int64_t h0 = oh * g.stride_h - g.pad_top;
    const int64_t h_lo = std::max<int64_t>(h0, 0), h_hi = std::min(h0 + g.window_rows, g.in_rows);
    for (int64_t ow = 0; ow < g.out_cols; ++ow, dy += c) {
      const int64_t w0 = ow * g.stride_w - g.pad_left;
      const int64_t w_lo = std::max<int64_t>(w0, 0), w_hi = std::min(w0 + g.window_cols, g.in_cols);
      if (h_lo >= h_hi || w_lo >= w_hi) continue;  // a window of padding only
      const int64_t first = h_lo * g.in_cols + w_lo;
      std::copy(x + first * c, x + (first + 1) * c, best->begin());
      std::fill(arg->begin(), arg->end(), first);
      for (int64_t h = h_lo; h < h_hi; ++h) {
        for (int64_t w = (h == h_lo ? w_lo + 1 : w_lo); w < w_hi; ++w) {
          const int64_t pos = h * g.in_cols + w;
          const T* xp = x + pos * c;
          for (int64_t d = 0; d < c; ++d) {
            const bool greater = (*best)[d] < xp[d];
            (*best)[d] = greater ? xp[d] : (*best)[d];
            (*arg)[d] = greater ? pos : (*arg)[d];
          }
        }
      }
      for (int64_t d = 0; d < c; ++d) dx[(*arg)[d] * c + d] += dy[d];
    }
  }
}

template <typename T>
class MaxPoolGradOp : public OpKernel {
 public:
  explicit MaxPoolGradOp(OpKernelConstruction* c)
      : OpKernel(c), attrs_(AttrsOrRecordError(c, ReadPool2DAttrs(c->def()))) {}

  absl::Status Compute(OpKernelContext* ctx) override {
    if (attrs_.nchw) {
      return ctx->InvalidArgument("Default MaxPoolingGradOp only supports NHWC on device type CPU");
    }
    const Tensor& x = ctx->input(0);
    ASSIGN_OR_RETURN(PoolGeometry g,
                     MaxPoolGradGeometry(*ctx, attrs_, x, ctx->input(1), ctx->input(2)));
    Tensor* dx = ctx->allocate_output(0, x.shape());
    if (dx->NumElements() == 0 || ctx->input(2).NumElements() == 0) return absl::OkStatus();
    const T* xp = x.flat<T>().data();
    const T* dyp = ctx->input(2).flat<T>().data();
    T* dxp = dx->flat<T>().data();
    const int64_t in_image = g.in_rows * g.in_cols * g.depth;
    const int64_t out_image = g.out_rows * g.out_cols * g.depth;
    const int64_t cost = out_image * g.window_rows * g.window_cols * 2;
    ctx->intra_op_pool()->ParallelFor(g.batch, cost, [&](int64_t first, int64_t last) {
      std::vector<T> best(g.depth);
      std::vector<int64_t> arg(g.depth);
      for (int64_t n = first; n < last; ++n) {
        MaxPoolGradImage(g, xp + n * in_image, dyp + n * out_image, dxp + n * in_image, &best,
                         &arg);
      }
    });
    return absl::OkStatus();
  }

 private:
  Pool2DAttrs attrs_;
};

absl::Status MaxPoolGradShape(InferenceContext* c) {
  PartialShape x, y, dy;
  RETURN_IF_ERROR(c->WithRank(c->input(0), 4, &x));
  RETURN_IF_ERROR(c->WithRank(c->input(1), 4, &y));
  RETURN_IF_ERROR(c->WithRank(c->input(2), 4, &dy));
  c->set_output(0, x);
  return absl::OkStatus();
}

REGISTER_OP("MaxPoolGrad")
    .Input("orig_input: T")
    .Input("orig_output: T")
    .Input("grad: T")
    .Output("output: T")
    .Attr("ksize: list(int) >= 4")
    .Attr("strides: list(int) >= 4")
    .Attr("padding: {'SAME', 'VALID', 'EXPLICIT'}")
    .Attr("explicit_paddings: list(int) = []")
    .Attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
    .Attr(
        "T: {float, double, int32, uint8, int16, int8, int64, bfloat16, uint16, half, uint32, "
        "uint64} = DT_FLOAT")
    .SetShapeFn(MaxPoolGradShape);

REGISTER_KERNEL(KernelDefBuilder("MaxPoolGrad").Device(kDeviceCPU).TypeConstraint<float>("T"),
                MaxPoolGradOp<float>);
REGISTER_KERNEL(KernelDefBuilder("MaxPoolGrad").Device(kDeviceCPU).TypeConstraint<double>("T"),
                MaxPoolGradOp<double>);
REGISTER_KERNEL(KernelDefBuilder("MaxPoolGrad").Device(kDeviceCPU).TypeConstraint<int32_t>("T"),
                MaxPoolGradOp<int32_t>);
REGISTER_KERNEL(KernelDefBuilder("MaxPoolGrad").Device(kDeviceCPU).TypeConstraint<int64_t>("T"),
                MaxPoolGradOp<int64_t>);

// --- AvgPoolGrad ------------------------------------------------------------------------
//
// Each output pixel's gradient, times 1 / (its window's count of elements
// inside the image), goes to every element of its window, as TensorFlow's
// CPU kernel does (in the same order, so sums of overlapping windows agree).

template <typename T>
void AvgPoolGradImage(const PoolGeometry& g, const T* dy, T* dx) {
  const int64_t c = g.depth;
  for (int64_t oh = 0; oh < g.out_rows; ++oh) {
    const int64_t h0 = oh * g.stride_h - g.pad_top;
    const int64_t h_lo = std::max<int64_t>(h0, 0), h_hi = std::min(h0 + g.window_rows, g.in_rows);
    for (int64_t ow = 0; ow < g.out_cols; ++ow, dy += c) {
      const int64_t w0 = ow * g.stride_w - g.pad_left;
      const int64_t w_lo = std::max<int64_t>(w0, 0), w_hi = std::min(w0 + g.window_cols, g.in_cols);
      if (h_lo >= h_hi || w_lo >= w_hi) continue;  // a window of padding only
      const T scale = static_cast<T>(1.0 / static_cast<double>((h_hi - h_lo) * (w_hi - w_lo)));
      for (int64_t h = h_lo; h < h_hi; ++h) {
        for (int64_t w = w_lo; w < w_hi; ++w) {
          T* d = dx + (h * g.in_cols + w) * c;
          for (int64_t k = 0; k < c; ++k) d[k] += dy[k] * scale;
        }
      }
    }
  }
}

template <typename T>
class AvgPoolGradOp : public OpKernel {
 public:
  explicit AvgPoolGradOp(OpKernelConstruction* c)
      : OpKernel(c), attrs_(AttrsOrRecordError(c, ReadPool2DAttrs(c->def()))) {}

  absl::Status Compute(OpKernelContext* ctx) override {
    if (attrs_.nchw) {
      return ctx->InvalidArgument("Default AvgPoolingGradOp only supports NHWC on device type CPU");
    }
    TensorShape input_shape;
    ASSIGN_OR_RETURN(PoolGeometry g, AvgPoolGradGeometry(*ctx, attrs_, &input_shape));
    Tensor* dx = ctx->allocate_output(0, input_shape);  // Zero-filled: gradients add in.
    const Tensor& dy = ctx->input(1);
    if (dx->NumElements() == 0 || dy.NumElements() == 0) return absl::OkStatus();
    const T* dyp = dy.flat<T>().data();
    T* dxp = dx->flat<T>().data();
    const int64_t in_image = g.in_rows * g.in_cols * g.depth;
    const int64_t out_image = g.out_rows * g.out_cols * g.depth;
    const int64_t cost = out_image * g.window_rows * g.window_cols * 2;
    ctx->intra_op_pool()->ParallelFor(g.batch, cost, [&](int64_t first, int64_t last) {
      for (int64_t n = first; n < last; ++n) {
        AvgPoolGradImage(g, dyp + n * out_image, dxp + n * in_image);
      }
    });
    return absl::OkStatus();
  }

 private:
  Pool2DAttrs attrs_;
};

absl::Status AvgPoolGradShape(InferenceContext* c) {
  PartialShape sizes, dy, shape;
  RETURN_IF_ERROR(c->WithRank(c->input(0), 1, &sizes));
  RETURN_IF_ERROR(c->WithRank(c->input(1), 4, &dy));
  RETURN_IF_ERROR(c->MakeShapeFromShapeTensor(0, &shape));
  RETURN_IF_ERROR(c->WithRank(shape, 4, &shape));
  c->set_output(0, shape);
  return absl::OkStatus();
}

REGISTER_OP("AvgPoolGrad")
    .Input("orig_input_shape: int32")
    .Input("grad: T")
    .Output("output: T")
    .Attr("ksize: list(int) >= 4")
    .Attr("strides: list(int) >= 4")
    .Attr("padding: {'SAME', 'VALID'}")
    .Attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
    .Attr("T: {half, bfloat16, float, double}")
    .SetShapeFn(AvgPoolGradShape);

REGISTER_KERNEL(KernelDefBuilder("AvgPoolGrad").Device(kDeviceCPU).TypeConstraint<float>("T"),
                AvgPoolGradOp<float>);
REGISTER_KERNEL(KernelDefBuilder("AvgPoolGrad").Device(kDeviceCPU).TypeConstraint<double>("T"),
                AvgPoolGradOp<double>);

}  // namespace
}  // namespace dflow
