// Layout and pooling kernels for the GPU convolution and pooling ops: one
// thread per output element, grid-stride loops.
#include <algorithm>
#include <cfloat>
#include <cstdint>

#include "dflow/gpu/conv_launch.h"
#include "dflow/gpu/launch_util.h"

namespace dflow {
namespace gpu {
namespace {

#define DFLOW_GRID_STRIDE_LOOP(i, n) for (int64_t i = GridStart(); i < (n); i += GridStride())

// krsc[k][r][s][c] = hwio[r][s][c][k], indexed by the KRSC position i.
__global__ void HwioToKrscKernel(const float* hwio, float* krsc, int64_t rows, int64_t cols,
                                 int64_t in, int64_t out) {
  const int64_t n = rows * cols * in * out;
  DFLOW_GRID_STRIDE_LOOP(i, n) {
    const int64_t c = i % in;
    const int64_t rs = (i / in) % (rows * cols);  // r * cols + s
    const int64_t k = i / (in * rows * cols);
    krsc[i] = hwio[(rs * in + c) * out + k];
  }
}

// hwio[r][s][c][k] = krsc[k][r][s][c], indexed by the HWIO position i.
__global__ void KrscToHwioKernel(const float* krsc, float* hwio, int64_t rows, int64_t cols,
                                 int64_t in, int64_t out) {
  const int64_t n = rows * cols * in * out;
  DFLOW_GRID_STRIDE_LOOP(i, n) {
    const int64_t k = i % out;
    const int64_t c = (i / out) % in;
    const int64_t rs = i / (out * in);
    hwio[i] = krsc[(k * rows * cols + rs) * in + c];
  }
}

__global__ void PadKernel(PadGeometry g, const float* image, float* padded) {
  const int64_t n = g.batch * g.padded_rows * g.padded_cols * g.depth;
  DFLOW_GRID_STRIDE_LOOP(i, n) {
    const int64_t c = i % g.depth;
    const int64_t pw = (i / g.depth) % g.padded_cols;
    const int64_t ph = (i / (g.depth * g.padded_cols)) % g.padded_rows;
    const int64_t b = i / (g.depth * g.padded_cols * g.padded_rows);
    const int64_t h = ph - g.top, w = pw - g.left;
    padded[i] = (h >= 0 && h < g.rows && w >= 0 && w < g.cols)
                    ? image[((b * g.rows + h) * g.cols + w) * g.depth + c]
                    : 0.0f;
  }
}

__global__ void CropKernel(PadGeometry g, const float* padded, float* image) {
  const int64_t n = g.batch * g.rows * g.cols * g.depth;
  DFLOW_GRID_STRIDE_LOOP(i, n) {
    const int64_t c = i % g.depth;
    const int64_t w = (i / g.depth) % g.cols;
    const int64_t h = (i / (g.depth * g.cols)) % g.rows;
    const int64_t b = i / (g.depth * g.cols * g.rows);
    image[i] = padded[((b * g.padded_rows + h + g.top) * g.padded_cols + w + g.left) * g.depth + c];
  }
}

// The valid input rows [*lo, *hi) of the window starting at `start`.
__device__ void WindowRange(int64_t start, int64_t size, int64_t limit, int64_t* lo, int64_t* hi) {
  *lo = start < 0 ? 0 : start;
  *hi = start + size < limit ? start + size : limit;
}

// Output element i of a pooling (NHWC over the pooled shape): its image b,
// its channel c, and its window's input rows [h_lo, h_hi) and columns
// [w_lo, w_hi) inside the image.
struct OutputWindow {
  int64_t b, c, h_lo, h_hi, w_lo, w_hi;
};
__device__ OutputWindow WindowOfOutput(const PoolWindow& p, int64_t i) {
  OutputWindow w;
  w.c = i % p.depth;
  const int64_t ow = (i / p.depth) % p.out_cols;
  const int64_t oh = (i / (p.depth * p.out_cols)) % p.out_rows;
  w.b = i / (p.depth * p.out_cols * p.out_rows);
  WindowRange(oh * p.stride_h - p.pad_top, p.window_rows, p.in_rows, &w.h_lo, &w.h_hi);
  WindowRange(ow * p.stride_w - p.pad_left, p.window_cols, p.in_cols, &w.w_lo, &w.w_hi);
  return w;
}

__global__ void MaxPoolKernel(PoolWindow p, const float* in, float* out) {
  const int64_t n = p.batch * p.out_rows * p.out_cols * p.depth;
  DFLOW_GRID_STRIDE_LOOP(i, n) {
    const auto [b, c, h_lo, h_hi, w_lo, w_hi] = WindowOfOutput(p, i);
    const float* image = in + b * p.in_rows * p.in_cols * p.depth + c;
    float m = -FLT_MAX;  // std::numeric_limits<float>::lowest()
    for (int64_t h = h_lo; h < h_hi; ++h) {
      for (int64_t w = w_lo; w < w_hi; ++w) {
        const float x = image[(h * p.in_cols + w) * p.depth];
        m = x > m ? x : m;
      }
    }
    out[i] = m;
  }
}

// The output windows [*lo, *hi) along one dimension that contain input
// position `pos` (`padded`: pos + the padding before).
__device__ void WindowsOver(int64_t padded, int64_t window, int64_t stride, int64_t out,
                            int64_t* lo, int64_t* hi) {
  *lo = padded < window ? 0 : (padded - window) / stride + 1;
  *hi = padded / stride + 1 < out ? padded / stride + 1 : out;
}

// The position (h * in_cols + w) of the first maximum of a window of
// image `x` (channel stride p.depth): ties to the first in row-major order,
// a NaN only when first, as the CPU kernel. REQUIRES: a non-empty window.
__device__ int64_t WindowArgMax(const PoolWindow& p, const float* x, int64_t h_lo, int64_t h_hi,
                                int64_t w_lo, int64_t w_hi) {
  int64_t arg = h_lo * p.in_cols + w_lo;
  float best = x[arg * p.depth];
  for (int64_t h = h_lo; h < h_hi; ++h) {
    for (int64_t w = w_lo; w < w_hi; ++w) {
      const int64_t pos = h * p.in_cols + w;
      const float v = x[pos * p.depth];
      if (best < v) {
        best = v;
        arg = pos;
      }
    }
  }
  return arg;
}

// For input element i (NHWC) of `p`: fn(dy_w, h_lo, h_hi, w_lo, w_hi) for
// each output window w over it, row by row (the CPU kernels' order), with
// dy_w the window's gradient in the element's channel and [h_lo, h_hi) x
// [w_lo, w_hi) the window's part inside the image.
template <typename Fn>
__device__ void ForEachWindowOver(const PoolWindow& p, int64_t i, const float* dy, Fn fn) {
  const int64_t c = i % p.depth;
  const int64_t w = (i / p.depth) % p.in_cols;
  const int64_t h = (i / (p.depth * p.in_cols)) % p.in_rows;
  const int64_t b = i / (p.depth * p.in_cols * p.in_rows);
  int64_t oh_lo, oh_hi, ow_lo, ow_hi;
  WindowsOver(h + p.pad_top, p.window_rows, p.stride_h, p.out_rows, &oh_lo, &oh_hi);
  WindowsOver(w + p.pad_left, p.window_cols, p.stride_w, p.out_cols, &ow_lo, &ow_hi);
  const float* g = dy + b * p.out_rows * p.out_cols * p.depth + c;
  for (int64_t oh = oh_lo; oh < oh_hi; ++oh) {
    int64_t h_lo, h_hi;
    WindowRange(oh * p.stride_h - p.pad_top, p.window_rows, p.in_rows, &h_lo, &h_hi);
    for (int64_t ow = ow_lo; ow < ow_hi; ++ow) {
      int64_t w_lo, w_hi;
      WindowRange(ow * p.stride_w - p.pad_left, p.window_cols, p.in_cols, &w_lo, &w_hi);
      fn(g[(oh * p.out_cols + ow) * p.depth], h_lo, h_hi, w_lo, w_hi);
    }
  }
}

// One thread per input element: the gradients of the windows whose maximum
// it is, added in the CPU's order (windows row by row, from 0), so dx equals
// the CPU's bit for bit, with no atomics and no zero-fill.
__global__ void MaxPoolGradKernel(PoolWindow p, const float* x, const float* dy, float* dx) {
  const int64_t n = p.batch * p.in_rows * p.in_cols * p.depth;
  DFLOW_GRID_STRIDE_LOOP(i, n) {
    const int64_t c = i % p.depth;
    const int64_t b = i / (p.depth * p.in_cols * p.in_rows);
    const float* image = x + b * p.in_rows * p.in_cols * p.depth + c;
    const int64_t self = (i / p.depth) % (p.in_rows * p.in_cols);  // h * in_cols + w
    float sum = 0;
    ForEachWindowOver(p, i, dy,
                      [&](float g, int64_t h_lo, int64_t h_hi, int64_t w_lo, int64_t w_hi) {
                        if (WindowArgMax(p, image, h_lo, h_hi, w_lo, w_hi) == self) sum += g;
                      });
    dx[i] = sum;
  }
}

__global__ void AvgPoolKernel(PoolWindow p, const float* in, float* out) {
  const int64_t n = p.batch * p.out_rows * p.out_cols * p.depth;
  DFLOW_GRID_STRIDE_LOOP(i, n) {
    const auto [b, c, h_lo, h_hi, w_lo, w_hi] = WindowOfOutput(p, i);
    const float* image = in + b * p.in_rows * p.in_cols * p.depth + c;
    float sum = 0;
    for (int64_t h = h_lo; h < h_hi; ++h) {
      for (int64_t w = w_lo; w < w_hi; ++w) sum += image[(h * p.in_cols + w) * p.depth];
    }
    const int64_t count = (h_hi > h_lo ? h_hi - h_lo : 0) * (w_hi > w_lo ? w_hi - w_lo : 0);
    out[i] = count > 0 ? sum / static_cast<float>(count) : 0.0f;
  }
}

// One thread per input element gathers the shares of the windows over it,
// in the CPU's order (windows row by row), so no atomics and no zero-fill.
__global__ void AvgPoolGradKernel(PoolWindow p, const float* dy, float* dx) {
  const int64_t n = p.batch * p.in_rows * p.in_cols * p.depth;
  DFLOW_GRID_STRIDE_LOOP(i, n) {
    float sum = 0;
    ForEachWindowOver(p, i, dy,
                      [&](float g, int64_t h_lo, int64_t h_hi, int64_t w_lo, int64_t w_hi) {
                        sum += g * (1.0f / static_cast<float>((h_hi - h_lo) * (w_hi - w_lo)));
                      });
    dx[i] = sum;
  }
}

__global__ void DepthMaxPoolKernel(const float* in, float* out, int64_t n, int64_t k) {
  DFLOW_GRID_STRIDE_LOOP(i, n) {
    float m = -FLT_MAX;
    for (int64_t j = 0; j < k; ++j) {
      const float x = in[i * k + j];
      m = x > m ? x : m;
    }
    out[i] = m;
  }
}

}  // namespace

void LaunchHwioToKrsc(cudaStream_t s, const float* hwio, float* krsc, int64_t rows, int64_t cols,
                      int64_t in, int64_t out) {
  const int64_t n = rows * cols * in * out;
  if (n <= 0) return;
  HwioToKrscKernel<<<BlocksFor(n), kThreadsPerBlock, 0, s>>>(hwio, krsc, rows, cols, in, out);
}

void LaunchKrscToHwio(cudaStream_t s, const float* krsc, float* hwio, int64_t rows, int64_t cols,
                      int64_t in, int64_t out) {
  const int64_t n = rows * cols * in * out;
  if (n <= 0) return;
  KrscToHwioKernel<<<BlocksFor(n), kThreadsPerBlock, 0, s>>>(krsc, hwio, rows, cols, in, out);
}

void LaunchPadImage(cudaStream_t s, const PadGeometry& g, const float* image, float* padded) {
  const int64_t n = g.batch * g.padded_rows * g.padded_cols * g.depth;
  if (n <= 0) return;
  PadKernel<<<BlocksFor(n), kThreadsPerBlock, 0, s>>>(g, image, padded);
}

void LaunchCropImage(cudaStream_t s, const PadGeometry& g, const float* padded, float* image) {
  const int64_t n = g.batch * g.rows * g.cols * g.depth;
  if (n <= 0) return;
  CropKernel<<<BlocksFor(n), kThreadsPerBlock, 0, s>>>(g, padded, image);
}

void LaunchMaxPool(cudaStream_t s, const PoolWindow& p, const float* in, float* out) {
  const int64_t n = p.batch * p.out_rows * p.out_cols * p.depth;
  if (n <= 0) return;
  MaxPoolKernel<<<BlocksFor(n), kThreadsPerBlock, 0, s>>>(p, in, out);
}

void LaunchMaxPoolGrad(cudaStream_t s, const PoolWindow& p, const float* x, const float* dy,
                       float* dx) {
  const int64_t n = p.batch * p.in_rows * p.in_cols * p.depth;
  if (n <= 0) return;
  MaxPoolGradKernel<<<BlocksFor(n), kThreadsPerBlock, 0, s>>>(p, x, dy, dx);
}

void LaunchAvgPool(cudaStream_t s, const PoolWindow& p, const float* in, float* out) {
  const int64_t n = p.batch * p.out_rows * p.out_cols * p.depth;
  if (n <= 0) return;
  AvgPoolKernel<<<BlocksFor(n), kThreadsPerBlock, 0, s>>>(p, in, out);
}

void LaunchAvgPoolGrad(cudaStream_t s, const PoolWindow& p, const float* dy, float* dx) {
  const int64_t n = p.batch * p.in_rows * p.in_cols * p.depth;
  if (n <= 0) return;
  AvgPoolGradKernel<<<BlocksFor(n), kThreadsPerBlock, 0, s>>>(p, dy, dx);
}

void LaunchDepthMaxPool(cudaStream_t s, const float* in, float* out, int64_t n, int64_t k) {
  if (n <= 0) return;
  DepthMaxPoolKernel<<<BlocksFor(n), kThreadsPerBlock, 0, s>>>(in, out, n, k);
}

}  // namespace gpu
}  // namespace dflow
