// Conv2DBackpropInput and Conv2DBackpropFilter: the gradients of Conv2D
// (conv_ops.cc) with respect to its input and its filter, NHWC on the CPU,
// with TensorFlow's padding rules (SAME / VALID / EXPLICIT) and strides.
// Dilations and grouped filters, which TensorFlow's CPU kernels reject, work
// too, so every Conv2D that runs here has a gradient.
//
// Algorithm: the forward convolution is the matrix product patches · W, with
// `patches` the [pixels, filter_rows * filter_cols * filter_depth] im2col
// matrix of the input and W the filter seen as a [patch, out_depth] matrix.
// Hence
//   d(patches) = dy · Wᵀ, added back onto the image window by window (col2im);
//   dW = patchesᵀ · dy, summed over every output pixel.
// BackpropInput shards by image, so each image's scatter belongs to one
// thread. BackpropFilter gives each shard a stretch of output pixels and its
// own dW accumulator; the accumulators are added at the end. Pixels go in
// blocks whose patches fit in cache; OpenBLAS runs single-threaded inside
// the intra-op pool's shards.
#include <cblas.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/framework/status.h"
#include "dflow/ops/blas_util.h"
#include "dflow/ops/conv_util.h"

namespace dflow {
namespace {

// --- GEMM: C = op(A) · op(B) + beta C, row-major -------------------------------

void Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0f, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}

void Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}

// Integer types have no BLAS: the definition, one output row at a time.
template <typename T>
void Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b,
          int64_t ldb, T beta, T* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) {
    T* ci = c + i * ldc;
    for (int64_t j = 0; j < n; ++j) ci[j] *= beta;
    for (int64_t p = 0; p < k; ++p) {
      const T aip = ta ? a[p * lda + i] : a[i * lda + p];
      for (int64_t j = 0; j < n; ++j) ci[j] += aip * (tb ? b[j * ldb + p] : b[p * ldb + j]);
    }
  }
}

// --- geometry ------------------------------------------------------------------

// Output pixels per block: enough rows that one GEMM is efficient, few
// enough that the block's patches stay in (L2) cache.
int64_t BlockRows(const ConvGeometry& g, int64_t elem_size, int64_t budget_bytes) {
  const int64_t rows = std::max<int64_t>(16, budget_bytes / (g.patch_size() * elem_size));
  return std::min(rows, std::max<int64_t>(1, g.out_pixels()));
}

// --- im2col / col2im -------------------------------------------------------------

// Walks patch row `r` (group `group`) in stretches: fn(dst_offset,
// src_offset, n) for each stretch of `n` entries that lie inside the image
// (the patch holds image elements [src_offset, src_offset + n) at
// [dst_offset, dst_offset + n)), pad(dst_offset, n) for each stretch of
// padding.
template <typename Fn, typename PadFn>
inline void ForEachPatchRun(const ConvGeometry& g, int64_t group, int64_t r, Fn&& fn, PadFn&& pad) {
  const int64_t depth = g.filter_depth, run = g.filter_cols * depth;
  const int64_t n = r / g.image_pixels();
  const int64_t oh = r / g.out_cols % g.out_rows, ow = r % g.out_cols;
  const int64_t ih0 = oh * g.stride_h - g.pad_top, iw0 = ow * g.stride_w - g.pad_left;
  const int64_t image = n * g.in_rows * g.in_cols * g.in_depth + group * depth;
  // With unit column dilation and one group, the valid columns of a filter
  // row are one stretch of the image row.
  const bool one_run = g.dilation_w == 1 && g.groups == 1;
  const int64_t kw_lo = std::clamp<int64_t>(-iw0, 0, g.filter_cols);
  const int64_t kw_hi = std::clamp<int64_t>(g.in_cols - iw0, kw_lo, g.filter_cols);
  for (int64_t kh = 0; kh < g.filter_rows; ++kh) {
    const int64_t ih = ih0 + kh * g.dilation_h;
    const int64_t dst = kh * run;
    if (ih < 0 || ih >= g.in_rows) {
      pad(dst, run);
      continue;
    }
    const int64_t row = image + ih * g.in_cols * g.in_depth;
    if (one_run) {
      pad(dst, kw_lo * depth);
      fn(dst + kw_lo * depth, row + (iw0 + kw_lo) * depth, (kw_hi - kw_lo) * depth);
      pad(dst + kw_hi * depth, run - kw_hi * depth);
      continue;
    }
    for (int64_t kw = 0; kw < g.filter_cols; ++kw) {
      const int64_t iw = iw0 + kw * g.dilation_w;
      if (iw >= 0 && iw < g.in_cols) {
        fn(dst + kw * depth, row + iw * g.in_depth, depth);
      } else {
        pad(dst + kw * depth, depth);
      }
    }
  }
}

// Fills `patches` ([end - begin, patch_size]) with the input windows of
// output pixels [begin, end) over the channels of `group`; padding is zero.
template <typename T>
void Im2Col(const ConvGeometry& g, const T* input, int64_t group, int64_t begin, int64_t end,
            T* patches) {
  const int64_t k = g.patch_size();
  for (int64_t r = begin; r < end; ++r) {
    T* dst = patches + (r - begin) * k;
    ForEachPatchRun(
        g, group, r,
        [&](int64_t d, int64_t s, int64_t n) {
          for (int64_t i = 0; i < n; ++i) dst[d + i] = input[s + i];
        },
        [&](int64_t d, int64_t n) {
          for (int64_t i = 0; i < n; ++i) dst[d + i] = T(0);
        });
  }
}

// The adjoint of Im2Col: adds every patch entry of `patches` back onto the
// input element it was copied from.
template <typename T>
void Col2Im(const ConvGeometry& g, const T* patches, int64_t group, int64_t begin, int64_t end,
            T* input) {
  const int64_t k = g.patch_size();
  for (int64_t r = begin; r < end; ++r) {
    const T* src = patches + (r - begin) * k;
    ForEachPatchRun(
        g, group, r,
        [&](int64_t d, int64_t s, int64_t n) {
          for (int64_t i = 0; i < n; ++i) input[s + i] += src[d + i];
        },
        [](int64_t, int64_t) {});
  }
}

// --- the two products ---------------------------------------------------------------

// Patch bytes per block (measured on the CNN's layers; about 160 rows of an
// 800-wide patch).
constexpr int64_t kInputBlockBytes = 512 << 10;
constexpr int64_t kFilterBlockBytes = 512 << 10;

// dx = col2im(dy · Wᵀ). REQUIRES: dx zero-filled.
template <typename T>
void BackpropInput(ThreadPool* pool, const ConvGeometry& g, const T* filter, const T* dy, T* dx) {
  const int64_t k = g.patch_size(), f = g.out_depth, fg = g.group_out_depth();
  if (g.is_pointwise()) {
    pool->ParallelFor(g.out_pixels(), k * f, [&](int64_t begin, int64_t end) {
      Gemm(false, true, end - begin, k, f, dy + begin * f, f, filter, f, T(0), dx + begin * k, k);
    });
    return;
  }
  // Shards own whole images, so no two threads scatter into one image.
  const int64_t pixels = g.image_pixels();
  const int64_t block = BlockRows(g, sizeof(T), kInputBlockBytes);
  pool->ParallelFor(g.batch, pixels * k * f, [&](int64_t first, int64_t last) {
    std::vector<T> cols(block * k);
    for (int64_t begin = first * pixels, end; begin < last * pixels; begin = end) {
      end = std::min(begin + block, last * pixels);
      for (int64_t grp = 0; grp < g.groups; ++grp) {
        Gemm(false, true, end - begin, k, fg, dy + begin * f + grp * fg, f, filter + grp * fg, f,
             T(0), cols.data(), k);
        Col2Im(g, cols.data(), grp, begin, end, dx);
      }
    }
  });
}

// acc += patches(pixels [begin, end))ᵀ · dy(same pixels).
template <typename T>
void AccumulateFilterGrad(const ConvGeometry& g, const T* input, const T* dy, int64_t begin,
                          int64_t end, int64_t block, std::vector<T>* cols, T* acc) {
  const int64_t k = g.patch_size(), f = g.out_depth, fg = g.group_out_depth();
  for (int64_t b = begin; b < end; b += block) {
    const int64_t e = std::min(end, b + block);
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      const T* patches = input + b * k;  // pointwise: the input rows themselves
      if (!g.is_pointwise()) {
        Im2Col(g, input, grp, b, e, cols->data());
        patches = cols->data();
      }
      Gemm(true, false, k, fg, e - b, patches, k, dy + b * f + grp * fg, f, T(1), acc + grp * fg,
           f);
    }
  }
}

// dw = Σ patchesᵀ · dy. REQUIRES: dw zero-filled.
template <typename T>
void BackpropFilter(ThreadPool* pool, const ConvGeometry& g, const T* input, const T* dy, T* dw) {
  const int64_t k = g.patch_size(), f = g.out_depth, pixels = g.out_pixels();
  const int64_t block = BlockRows(g, sizeof(T), kFilterBlockBytes);
  // A shard costs a private k x f accumulator: give each at least a few
  // blocks, and no more shards than workers (the pool's threads + caller).
  const int64_t max_shards = pool->NumThreads() + 1;
  const int64_t shards = std::clamp<int64_t>(pixels / (4 * block), 1, max_shards);
  const int64_t per_shard = (pixels + shards - 1) / shards;
  std::vector<std::vector<T>> partial(shards);
  pool->ParallelFor(shards, per_shard * k * f, [&](int64_t first, int64_t last) {
    std::vector<T> cols(g.is_pointwise() ? 0 : block * k);
    for (int64_t s = first; s < last; ++s) {
      T* acc = dw;  // shard 0 writes the output directly
      if (s > 0) {
        partial[s].assign(k * f, T(0));
        acc = partial[s].data();
      }
      const int64_t begin = s * per_shard, end = std::min(pixels, begin + per_shard);
      AccumulateFilterGrad(g, input, dy, begin, end, block, &cols, acc);
    }
  });
  for (int64_t s = 1; s < shards; ++s) {
    const T* p = partial[s].data();
    for (int64_t i = 0; i < k * f; ++i) dw[i] += p[i];
  }
}

// --- kernels ---------------------------------------------------------------------------

// Reads the Conv2D attrs shared by both kernels; errors carry the op prefix.
Conv2DAttrs ReadAttrsOrFail(OpKernelConstruction* c) {
  EnsureBlasSingleThreaded();
  return AttrsOrRecordError(c, ReadConv2DAttrs(c->def()));
}

absl::Status RequireNhwc(const OpKernelContext& ctx, const Conv2DAttrs& attrs) {
  if (!attrs.nchw) return absl::OkStatus();
  return ctx.InvalidArgument("only the NHWC data format is supported on the CPU, got NCHW");
}

template <typename T>
class Conv2DBackpropInputOp : public OpKernel {
 public:
  explicit Conv2DBackpropInputOp(OpKernelConstruction* c)
      : OpKernel(c), attrs_(ReadAttrsOrFail(c)) {}

  absl::Status Compute(OpKernelContext* ctx) override {
    RETURN_IF_ERROR(RequireNhwc(*ctx, attrs_));
    const Tensor& filter = ctx->input(1);
    const Tensor& dy = ctx->input(2);
    TensorShape input_shape;
    ASSIGN_OR_RETURN(ConvGeometry g, BackpropInputGeometry(*ctx, attrs_, &input_shape));
    Tensor* dx = ctx->allocate_output(0, input_shape);
    if (dx->NumElements() == 0 || dy.NumElements() == 0) return absl::OkStatus();
    BackpropInput<T>(ctx->intra_op_pool(), g, filter.flat<T>().data(), dy.flat<T>().data(),
                     dx->flat<T>().data());
    return absl::OkStatus();
  }

 private:
  const Conv2DAttrs attrs_;
};

template <typename T>
class Conv2DBackpropFilterOp : public OpKernel {
 public:
  explicit Conv2DBackpropFilterOp(OpKernelConstruction* c)
      : OpKernel(c), attrs_(ReadAttrsOrFail(c)) {}

  absl::Status Compute(OpKernelContext* ctx) override {
    RETURN_IF_ERROR(RequireNhwc(*ctx, attrs_));
    const Tensor& input = ctx->input(0);
    const Tensor& dy = ctx->input(2);
    TensorShape filter_shape;
    ASSIGN_OR_RETURN(ConvGeometry g, BackpropFilterGeometry(*ctx, attrs_, &filter_shape));
    Tensor* dw = ctx->allocate_output(0, filter_shape);
    if (dy.NumElements() == 0) return absl::OkStatus();
    BackpropFilter<T>(ctx->intra_op_pool(), g, input.flat<T>().data(), dy.flat<T>().data(),
                      dw->flat<T>().data());
    return absl::OkStatus();
  }

 private:
  const Conv2DAttrs attrs_;
};

// --- shape functions ---------------------------------------------------------------------

absl::Status Conv2DBackpropInputShape(InferenceContext* c) {
  PartialShape sizes, filter, dy, shape;
  RETURN_IF_ERROR(c->WithRank(c->input(0), 1, &sizes));
  RETURN_IF_ERROR(c->WithRank(c->input(1), 4, &filter));
  RETURN_IF_ERROR(c->WithRank(c->input(2), 4, &dy));
  RETURN_IF_ERROR(c->MakeShapeFromShapeTensor(0, &shape));
  if (!shape.rank_known()) {
    c->set_output(0, PartialShape::UnknownDims(4));
    return absl::OkStatus();
  }
  if (shape.rank() == 4) {
    c->set_output(0, shape);
    return absl::OkStatus();
  }
  if (shape.rank() != 2) {
    return c->Error(
        absl::StrCat("input_sizes must have 4 or 2 elements, got ", shape.DebugString()));
  }
  std::string format = "NHWC";
  if (HasNodeAttr(c->node_def(), "data_format")) {
    RETURN_IF_ERROR(c->GetAttr("data_format", &format));
  }
  const int64_t batch = dy.dim(0), depth = filter.dim(2);
  c->set_output(0, format == "NCHW" ? PartialShape({batch, depth, shape.dim(0), shape.dim(1)})
                                    : PartialShape({batch, shape.dim(0), shape.dim(1), depth}));
  return absl::OkStatus();
}

absl::Status Conv2DBackpropFilterShape(InferenceContext* c) {
  PartialShape input, sizes, dy, shape;
  RETURN_IF_ERROR(c->WithRank(c->input(0), 4, &input));
  RETURN_IF_ERROR(c->WithRank(c->input(1), 1, &sizes));
  RETURN_IF_ERROR(c->WithRank(c->input(2), 4, &dy));
  RETURN_IF_ERROR(c->MakeShapeFromShapeTensor(1, &shape));
  RETURN_IF_ERROR(c->WithRank(shape, 4, &shape));
  c->set_output(0, shape);
  return absl::OkStatus();
}

REGISTER_OP("Conv2DBackpropInput")
    .Input("input_sizes: int32")
    .Input("filter: T")
    .Input("out_backprop: T")
    .Output("output: T")
    .Attr("T: {half, bfloat16, float, double, int32}")
    .Attr("strides: list(int)")
    .Attr("use_cudnn_on_gpu: bool = true")
    .Attr("padding: {'SAME', 'VALID', 'EXPLICIT'}")
    .Attr("explicit_paddings: list(int) = []")
    .Attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
    .Attr("dilations: list(int) = [1, 1, 1, 1]")
    .SetShapeFn(Conv2DBackpropInputShape);

REGISTER_OP("Conv2DBackpropFilter")
    .Input("input: T")
    .Input("filter_sizes: int32")
    .Input("out_backprop: T")
    .Output("output: T")
    .Attr("T: {half, bfloat16, float, double}")
    .Attr("strides: list(int)")
    .Attr("use_cudnn_on_gpu: bool = true")
    .Attr("padding: {'SAME', 'VALID', 'EXPLICIT'}")
    .Attr("explicit_paddings: list(int) = []")
    .Attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
    .Attr("dilations: list(int) = [1, 1, 1, 1]")
    .SetShapeFn(Conv2DBackpropFilterShape);

template <typename T>
KernelDefBuilder BackpropInputKernel() {
  return KernelDefBuilder("Conv2DBackpropInput")
      .Device(kDeviceCPU)
      .TypeConstraint<T>("T")
      .HostMemory("input_sizes");
}
template <typename T>
KernelDefBuilder BackpropFilterKernel() {
  return KernelDefBuilder("Conv2DBackpropFilter")
      .Device(kDeviceCPU)
      .TypeConstraint<T>("T")
      .HostMemory("filter_sizes");
}

REGISTER_KERNEL(BackpropInputKernel<float>(), Conv2DBackpropInputOp<float>);
REGISTER_KERNEL(BackpropInputKernel<double>(), Conv2DBackpropInputOp<double>);
REGISTER_KERNEL(BackpropInputKernel<int32_t>(), Conv2DBackpropInputOp<int32_t>);
REGISTER_KERNEL(BackpropFilterKernel<float>(), Conv2DBackpropFilterOp<float>);
REGISTER_KERNEL(BackpropFilterKernel<double>(), Conv2DBackpropFilterOp<double>);

}  // namespace
}  // namespace dflow
