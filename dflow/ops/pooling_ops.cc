// MaxPool: the maximum over sliding windows of an NHWC image, either over
// rows and columns or over groups of channels (TensorFlow's depthwise case).
// Padded positions are ignored, never compared as zeros; NaNs are skipped,
// as TensorFlow's CPU kernel does.
// AvgPool: the mean over sliding windows of rows and columns, of the
// elements inside the image only: a SAME window at an edge averages fewer
// elements, as TensorFlow's does.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/framework/status.h"
#include "dflow/ops/conv_util.h"

namespace dflow {
namespace {

// Pools output rows [begin, end) of the flattened (batch, out_row) space:
// for each output pixel `o` (its depth values), pool.Start(o), then
// pool.Add(o, x) for each pixel x of its window inside the image, row by
// row, then pool.Finish(o, number of those pixels).
template <typename T, typename Pool>
void PoolWindows(const PoolGeometry& g, const T* in, T* out, int64_t begin, int64_t end,
                 const Pool& pool) {
  const int64_t c = g.depth;
  for (int64_t idx = begin; idx < end; ++idx) {
    const int64_t n = idx / g.out_rows, oh = idx % g.out_rows;
    const int64_t h0 = oh * g.stride_h - g.pad_top;
    const int64_t h_lo = std::max<int64_t>(h0, 0);
    const int64_t h_hi = std::max(h_lo, std::min(h0 + g.window_rows, g.in_rows));
    const T* image = in + n * g.in_rows * g.in_cols * c;
    T* o = out + idx * g.out_cols * c;
    for (int64_t ow = 0; ow < g.out_cols; ++ow, o += c) {
      const int64_t w0 = ow * g.stride_w - g.pad_left;
      const int64_t w_lo = std::max<int64_t>(w0, 0);
      const int64_t w_hi = std::max(w_lo, std::min(w0 + g.window_cols, g.in_cols));
      pool.Start(o);
      for (int64_t h = h_lo; h < h_hi; ++h) {
        for (int64_t w = w_lo; w < w_hi; ++w) pool.Add(o, image + (h * g.in_cols + w) * c);
      }
      pool.Finish(o, (h_hi - h_lo) * (w_hi - w_lo));
    }
  }
}

// The maximum of each window; `x > o` is false for NaN, so NaNs are skipped.
template <typename T>
struct MaxOfWindow {
  int64_t depth;
  void Start(T* o) const { std::fill(o, o + depth, std::numeric_limits<T>::lowest()); }
  void Add(T* o, const T* x) const {
    for (int64_t d = 0; d < depth; ++d) o[d] = x[d] > o[d] ? x[d] : o[d];
  }
  void Finish(T*, int64_t) const {}
};

// The mean of each window: summed row by row, then divided by its count, as
// TensorFlow's CPU kernel does; 0 for a window of padding only.
template <typename T>
struct MeanOfWindow {
  int64_t depth;
  void Start(T* o) const { std::fill(o, o + depth, T(0)); }
  void Add(T* o, const T* x) const {
    for (int64_t d = 0; d < depth; ++d) o[d] += x[d];
  }
  void Finish(T* o, int64_t count) const {
    if (count == 0) return;
    const T divisor = static_cast<T>(count);
    for (int64_t d = 0; d < depth; ++d) o[d] /= divisor;
  }
};

// Output 0 of `ctx`: `input` pooled with geometry `g` by `pool`, in
// parallel over output rows.
template <typename T, typename Pool>
absl::Status SpatialPool(OpKernelContext* ctx, const Tensor& input, const PoolGeometry& g,
                         const Pool& pool) {
  Tensor* out = ctx->allocate_output(0, TensorShape({g.batch, g.out_rows, g.out_cols, g.depth}));
  if (out->NumElements() == 0) return absl::OkStatus();
  const T* in = input.flat<T>().data();
  T* o = out->flat<T>().data();
  const int64_t cost = g.out_cols * g.window_rows * g.window_cols * g.depth;
  ctx->intra_op_pool()->ParallelFor(g.batch * g.out_rows, cost, [&](int64_t b, int64_t e) {
    PoolWindows(g, in, o, b, e, pool);
  });
  return absl::OkStatus();
}

template <typename T>
class MaxPoolOp : public OpKernel {
 public:
  explicit MaxPoolOp(OpKernelConstruction* c)
      : OpKernel(c), attrs_(AttrsOrRecordError(c, ReadPool2DAttrs(c->def()))) {}

  absl::Status Compute(OpKernelContext* ctx) override {
    if (attrs_.nchw) {
      return ctx->InvalidArgument("Default MaxPoolingOp only supports NHWC on device type CPU");
    }
    const Tensor& input = ctx->input(0);
    if (attrs_.depth_pooling() && input.dims() == 4) return DepthMaxPool(ctx, input);
    ASSIGN_OR_RETURN(PoolGeometry g, MaxPoolGeometry(*ctx, attrs_, input));
    return SpatialPool<T>(ctx, input, g, MaxOfWindow<T>{g.depth});
  }

 private:
  // out[..., d] = max(in[..., d * k : (d + 1) * k]).
  absl::Status DepthMaxPool(OpKernelContext* ctx, const Tensor& input) const {
    ASSIGN_OR_RETURN(const TensorShape shape, DepthMaxPoolShape(*ctx, attrs_, input));
    const int64_t k = attrs_.ksize[3];
    Tensor* out = ctx->allocate_output(0, shape);
    const T* in = input.flat<T>().data();
    T* o = out->flat<T>().data();
    ctx->intra_op_pool()->ParallelFor(out->NumElements(), k, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const T* x = in + i * k;
        T m = std::numeric_limits<T>::lowest();
        for (int64_t j = 0; j < k; ++j) m = x[j] > m ? x[j] : m;
        o[i] = m;
      }
    });
    return absl::OkStatus();
  }

  Pool2DAttrs attrs_;
};

template <typename T>
class AvgPoolOp : public OpKernel {
 public:
  explicit AvgPoolOp(OpKernelConstruction* c)
      : OpKernel(c), attrs_(AttrsOrRecordError(c, ReadPool2DAttrs(c->def()))) {}

  absl::Status Compute(OpKernelContext* ctx) override {
    if (attrs_.nchw) {
      return ctx->InvalidArgument("Default AvgPoolingOp only supports NHWC on device type CPU");
    }
    const Tensor& input = ctx->input(0);
    ASSIGN_OR_RETURN(PoolGeometry g, AvgPoolGeometry(*ctx, attrs_, input));
    return SpatialPool<T>(ctx, input, g, MeanOfWindow<T>{g.depth});
  }

 private:
  Pool2DAttrs attrs_;
};

// The output shape of a 2-D pooling op. With `depth_window`, a window over
// depth divides the depth (MaxPool); without, the depth is kept whatever
// the window (AvgPool, whose kernel refuses such a window, as TensorFlow's
// shape function does).
absl::Status PoolShape(InferenceContext* c, bool depth_window) {
  absl::StatusOr<Pool2DAttrs> attrs = ReadPool2DAttrs(c->node_def());
  if (!attrs.ok()) return c->Error(std::string(attrs.status().message()));
  const Pool2DAttrs& a = *attrs;
  PartialShape input;
  RETURN_IF_ERROR(c->WithRank(c->input(0), 4, &input));
  const int h = a.nchw ? 2 : 1, w = a.nchw ? 3 : 2, d = a.nchw ? 1 : 3;
  int64_t rows = input.dim(h), cols = input.dim(w), depth = input.dim(d);
  if (depth_window && a.depth_pooling()) {
    if (depth != kUnknownDim && depth % a.ksize[3] != 0) {
      return c->Error(absl::StrCat("depth window ", a.ksize[3],
                                   " does not evenly divide the input depth: input ",
                                   input.DebugString()));
    }
    if (depth != kUnknownDim) depth /= a.ksize[3];
  } else {
    for (auto [dim, i] : {std::pair<int64_t*, int>{&rows, 1}, {&cols, 2}}) {
      if (*dim == kUnknownDim) continue;
      const int64_t before = i == 1 ? a.pad_top : a.pad_left;
      const int64_t after = i == 1 ? a.pad_bottom : a.pad_right;
      absl::StatusOr<WindowDim> win =
          ComputeWindow(*dim, a.ksize[i], 1, a.stride[i], a.padding, before, after);
      if (!win.ok()) return c->Error(std::string(win.status().message()));
      *dim = win->out;
    }
  }
  const int64_t batch = input.dim(0);
  c->set_output(0, a.nchw ? PartialShape({batch, depth, rows, cols})
                          : PartialShape({batch, rows, cols, depth}));
  return absl::OkStatus();
}

absl::Status MaxPoolShape(InferenceContext* c) { return PoolShape(c, /*depth_window=*/true); }
absl::Status AvgPoolShape(InferenceContext* c) { return PoolShape(c, /*depth_window=*/false); }

REGISTER_OP("MaxPool")
    .Input("input: T")
    .Output("output: T")
    .Attr(
        "T: {half, bfloat16, float, double, int32, int64, uint8, int16, int8, uint16, "
        "qint8} = DT_FLOAT")
    .Attr("ksize: list(int) >= 4")
    .Attr("strides: list(int) >= 4")
    .Attr("padding: {'SAME', 'VALID', 'EXPLICIT'}")
    .Attr("explicit_paddings: list(int) = []")
    .Attr("data_format: {'NHWC', 'NCHW', 'NCHW_VECT_C'} = 'NHWC'")
    .SetShapeFn(MaxPoolShape);

REGISTER_KERNEL(KernelDefBuilder("MaxPool").Device(kDeviceCPU).TypeConstraint<float>("T"),
                MaxPoolOp<float>);
REGISTER_KERNEL(KernelDefBuilder("MaxPool").Device(kDeviceCPU).TypeConstraint<double>("T"),
                MaxPoolOp<double>);
REGISTER_KERNEL(KernelDefBuilder("MaxPool").Device(kDeviceCPU).TypeConstraint<int32_t>("T"),
                MaxPoolOp<int32_t>);
REGISTER_KERNEL(KernelDefBuilder("MaxPool").Device(kDeviceCPU).TypeConstraint<int64_t>("T"),
                MaxPoolOp<int64_t>);
REGISTER_KERNEL(KernelDefBuilder("MaxPool").Device(kDeviceCPU).TypeConstraint<uint8_t>("T"),
                MaxPoolOp<uint8_t>);

REGISTER_OP("AvgPool")
    .Input("value: T")
    .Output("output: T")
    .Attr("ksize: list(int) >= 4")
    .Attr("strides: list(int) >= 4")
    .Attr("padding: {'SAME', 'VALID'}")
    .Attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
    .Attr("T: {half, bfloat16, float, double}")
    .SetShapeFn(AvgPoolShape);

REGISTER_KERNEL(KernelDefBuilder("AvgPool").Device(kDeviceCPU).TypeConstraint<float>("T"),
                AvgPoolOp<float>);
REGISTER_KERNEL(KernelDefBuilder("AvgPool").Device(kDeviceCPU).TypeConstraint<double>("T"),
                AvgPoolOp<double>);

}  // namespace
}  // namespace dflow
