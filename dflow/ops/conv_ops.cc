// Conv2D: 2-D convolution over NHWC images (TensorFlow's CPU semantics),
// with SAME / VALID / EXPLICIT padding, strides, dilations and grouped
// filters (input depth a multiple of the filter's depth).
//
// Algorithm: the output, seen as a [batch * out_rows * out_cols, out_depth]
// matrix, is patches x filter, where row r of `patches` holds the input
// window of output pixel r laid out as (filter_row, filter_col, in_channel),
// exactly the row-major layout of the [filter_rows * filter_cols *
// in_depth, out_depth] filter. The output rows are cut into blocks whose
// patches fit in cache; the blocks are spread over the intra-op pool, and
// each is expanded (im2col) and multiplied with OpenBLAS (single-threaded:
// the pool is the process's only parallelism).
#include <cblas.h>

#include <Eigen/Core>
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

// --- GEMM: C[m, n] = A[m, k] * B[k, n], row-major with leading dimensions ----

void Gemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
          float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), 1.0f, a, static_cast<int>(lda), b, static_cast<int>(ldb), 0.0f,
              c, static_cast<int>(ldc));
}

void Gemm(int64_t m, int64_t n, int64_t k, const double* a, int64_t lda, const double* b,
          int64_t ldb, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), 1.0, a, static_cast<int>(lda), b, static_cast<int>(ldb), 0.0, c,
              static_cast<int>(ldc));
}

// Integer types have no BLAS: a plain loop whose inner loop vectorises.
template <typename T>
void Gemm(int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b, int64_t ldb, T* c,
          int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) {
    T* ci = c + i * ldc;
    std::fill(ci, ci + n, T(0));
    for (int64_t p = 0; p < k; ++p) {
      const T aip = a[i * lda + p];
      const T* bp = b + p * ldb;
      for (int64_t j = 0; j < n; ++j) ci[j] += aip * bp[j];
    }
  }
}

// --- geometry ------------------------------------------------------------------

absl::StatusOr<ConvGeometry> MakeGeometry(const OpKernelContext& ctx, const Conv2DAttrs& attrs,
                                          const Tensor& input, const Tensor& filter) {
  if (input.dims() != 4) {
    return ctx.InvalidArgument("convolution input must be 4-dimensional: ",
                               input.shape().DebugString());
  }
  if (filter.dims() != 4) {
    return ctx.InvalidArgument("convolution filter must be 4-dimensional: ",
                               filter.shape().DebugString());
  }
  absl::StatusOr<ConvGeometry> g = MakeConvGeometry(attrs, input.shape(), filter.shape());
  if (!g.ok()) return WithPrefix(g.status(), ctx.Prefix());
  return g;
}

// --- im2col --------------------------------------------------------------------

// Runs here are short (a filter row: filter_cols * depth elements, often
// 3-5 floats), where a memcpy/memset call costs more than the copy: Eigen's
// inline vector loops do better.
template <typename T>
inline void CopyRun(const T* src, int64_t n, T* dst) {
  if (n > 0)
    Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>(dst, n) =
        Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>(src, n);
}
template <typename T>
inline void ZeroRun(int64_t n, T* dst) {
  if (n > 0) Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>(dst, n).setZero();
}

// Filter rows up to this many elements are gathered element by element.
constexpr int64_t kShortRun = 16;

// Fills `patches` ([end - begin, patch_size]) with the windows of output
// pixels [begin, end) over the channels of `group`; padding reads as zero.
template <typename T>
void Im2Col(const ConvGeometry& g, const T* input, int64_t group, int64_t begin, int64_t end,
            T* patches) {
  const int64_t depth = g.filter_depth;
  const int64_t run = g.filter_cols * depth;  // one filter row of a patch
  // With unit column dilation and one group, a filter row's valid columns
  // are one contiguous stretch of the input.
  const bool contiguous = g.dilation_w == 1 && g.groups == 1;
  T* dst = patches;
  for (int64_t r = begin; r < end; ++r) {
    const int64_t n = r / (g.out_rows * g.out_cols);
    const int64_t oh = r / g.out_cols % g.out_rows;
    const int64_t ow = r % g.out_cols;
    const int64_t ih0 = oh * g.stride_h - g.pad_top;
    const int64_t iw0 = ow * g.stride_w - g.pad_left;
    const T* image = input + n * g.in_rows * g.in_cols * g.in_depth + group * depth;
    // Valid filter columns [kw_lo, kw_hi) (contiguous case only).
    const int64_t kw_lo = std::clamp<int64_t>(-iw0, 0, g.filter_cols);
    const int64_t kw_hi = std::clamp<int64_t>(g.in_cols - iw0, kw_lo, g.filter_cols);
    for (int64_t kh = 0; kh < g.filter_rows; ++kh, dst += run) {
      const int64_t ih = ih0 + kh * g.dilation_h;
      if (ih < 0 || ih >= g.in_rows) {
        ZeroRun(run, dst);
        continue;
      }
      const T* row = image + ih * g.in_cols * g.in_depth;
      if (contiguous && run <= kShortRun) {
        // Select loop: no library calls, no branches per element.
        const int64_t start = iw0 * depth, lo = kw_lo * depth, hi = kw_hi * depth;
        for (int64_t j = 0; j < run; ++j) dst[j] = (j >= lo && j < hi) ? row[start + j] : T(0);
        continue;
      }
      if (contiguous) {
        ZeroRun(kw_lo * depth, dst);
        CopyRun(row + (iw0 + kw_lo) * depth, (kw_hi - kw_lo) * depth, dst + kw_lo * depth);
        ZeroRun(run - kw_hi * depth, dst + kw_hi * depth);
        continue;
      }
      for (int64_t kw = 0; kw < g.filter_cols; ++kw) {
        const int64_t iw = iw0 + kw * g.dilation_w;
        if (iw < 0 || iw >= g.in_cols) {
          ZeroRun(depth, dst + kw * depth);
        } else {
          CopyRun(row + iw * g.in_depth, depth, dst + kw * depth);
        }
      }
    }
  }
}

// Output pixels per block: enough that one GEMM is efficient, few enough
// that the block's patches stay in cache and every thread gets blocks.
int64_t BlockRows(const ConvGeometry& g, int64_t elem_size, int num_threads) {
  constexpr int64_t kPatchBytes = 256 << 10;
  int64_t rows = std::max<int64_t>(16, kPatchBytes / (g.patch_size() * elem_size));
  const int64_t per_thread = (g.out_pixels() + 4 * num_threads - 1) / (4 * num_threads);
  rows = std::min(rows, std::max<int64_t>(16, per_thread));
  return std::min(rows, std::max<int64_t>(1, g.out_pixels()));
}

template <typename T>
void Convolve(ThreadPool* pool, const ConvGeometry& g, const T* input, const T* filter, T* output) {
  const int64_t k = g.patch_size(), f = g.out_depth, fg = g.group_out_depth();
  if (g.is_pointwise()) {
    pool->ParallelFor(g.out_pixels(), k * f, [&](int64_t begin, int64_t end) {
      Gemm(end - begin, f, k, input + begin * k, k, filter, f, output + begin * f, f);
    });
    return;
  }
  const int64_t block = BlockRows(g, sizeof(T), pool->NumThreads());
  const int64_t num_blocks = (g.out_pixels() + block - 1) / block;
  pool->ParallelFor(num_blocks, block * k * f, [&](int64_t first, int64_t last) {
    std::vector<T> patches(block * k);
    for (int64_t b = first; b < last; ++b) {
      const int64_t begin = b * block, end = std::min(g.out_pixels(), begin + block);
      for (int64_t grp = 0; grp < g.groups; ++grp) {
        Im2Col(g, input, grp, begin, end, patches.data());
        Gemm(end - begin, fg, k, patches.data(), k, filter + grp * fg, f,
             output + begin * f + grp * fg, f);
      }
    }
  });
}

// --- kernel --------------------------------------------------------------------

template <typename T>
class Conv2DOp : public OpKernel {
 public:
  explicit Conv2DOp(OpKernelConstruction* c) : OpKernel(c) {
    attrs_ = AttrsOrRecordError(c, ReadConv2DAttrs(c->def()));
    EnsureBlasSingleThreaded();
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    if (attrs_.nchw) {
      return absl::UnimplementedError(
          absl::StrCat(ctx->Prefix(),
                       "The Conv2D op currently only supports the NHWC tensor format on the "
                       "CPU. The op was given the format: NCHW"));
    }
    const Tensor& input = ctx->input(0);
    const Tensor& filter = ctx->input(1);
    ASSIGN_OR_RETURN(ConvGeometry g, MakeGeometry(*ctx, attrs_, input, filter));
    Tensor* out =
        ctx->allocate_output(0, TensorShape({g.batch, g.out_rows, g.out_cols, g.out_depth}));
    if (out->NumElements() == 0) return absl::OkStatus();
    Convolve<T>(ctx->intra_op_pool(), g, input.flat<T>().data(), filter.flat<T>().data(),
                out->flat<T>().data());
    return absl::OkStatus();
  }

 private:
  Conv2DAttrs attrs_;
};

// --- shape function ----------------------------------------------------------------

// Output size of one spatial dimension; unknown when the input size is.
absl::StatusOr<int64_t> OutputDim(int64_t in, int64_t k, int64_t dilation, int64_t stride,
                                  const Conv2DAttrs& a, int64_t pad_before, int64_t pad_after) {
  if (in == kUnknownDim || k == kUnknownDim) return kUnknownDim;
  ASSIGN_OR_RETURN(WindowDim w,
                   ComputeWindow(in, k, dilation, stride, a.padding, pad_before, pad_after));
  return w.out;
}

absl::Status Conv2DShape(InferenceContext* c) {
  absl::StatusOr<Conv2DAttrs> attrs = ReadConv2DAttrs(c->node_def());
  if (!attrs.ok()) return c->Error(std::string(attrs.status().message()));
  const Conv2DAttrs& a = *attrs;
  PartialShape input, filter;
  RETURN_IF_ERROR(c->WithRank(c->input(0), 4, &input));
  RETURN_IF_ERROR(c->WithRank(c->input(1), 4, &filter));
  // NHWC positions of the input's dimensions.
  const int h = a.nchw ? 2 : 1, w = a.nchw ? 3 : 2, d = a.nchw ? 1 : 3;
  const int64_t in_depth = input.dim(d), filter_depth = filter.dim(2);
  if (in_depth != kUnknownDim && filter_depth != kUnknownDim &&
      (filter_depth == 0 || in_depth % filter_depth != 0)) {
    return c->Error(absl::StrCat(
        "Depth of input (", in_depth, ") is not a multiple of input depth of filter (",
        filter_depth, "): input ", input.DebugString(), " filter ", filter.DebugString()));
  }
  absl::StatusOr<int64_t> rows =
      OutputDim(input.dim(h), filter.dim(0), a.dilation_h, a.stride_h, a, a.pad_top, a.pad_bottom);
  if (!rows.ok()) return c->Error(std::string(rows.status().message()));
  absl::StatusOr<int64_t> cols =
      OutputDim(input.dim(w), filter.dim(1), a.dilation_w, a.stride_w, a, a.pad_left, a.pad_right);
  if (!cols.ok()) return c->Error(std::string(cols.status().message()));
  const int64_t batch = input.dim(0), out_depth = filter.dim(3);
  c->set_output(0, a.nchw ? PartialShape({batch, out_depth, *rows, *cols})
                          : PartialShape({batch, *rows, *cols, out_depth}));
  return absl::OkStatus();
}

REGISTER_OP("Conv2D")
    .Input("input: T")
    .Input("filter: T")
    .Output("output: T")
    .Attr("T: {half, bfloat16, float, double, int32}")
    .Attr("strides: list(int)")
    .Attr("use_cudnn_on_gpu: bool = true")
    .Attr("padding: {'SAME', 'VALID', 'EXPLICIT'}")
    .Attr("explicit_paddings: list(int) = []")
    .Attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
    .Attr("dilations: list(int) = [1, 1, 1, 1]")
    .SetShapeFn(Conv2DShape);

REGISTER_KERNEL(KernelDefBuilder("Conv2D").Device(kDeviceCPU).TypeConstraint<float>("T"),
                Conv2DOp<float>);
REGISTER_KERNEL(KernelDefBuilder("Conv2D").Device(kDeviceCPU).TypeConstraint<double>("T"),
                Conv2DOp<double>);
REGISTER_KERNEL(KernelDefBuilder("Conv2D").Device(kDeviceCPU).TypeConstraint<int32_t>("T"),
                Conv2DOp<int32_t>);

}  // namespace
}  // namespace dflow
