// Launchers of the layout and pooling kernels of the GPU convolution and
// pooling ops (conv_kernels.cu). Tensors are float, device memory, NHWC;
// each launcher queues its work on `s` and returns (nothing for no elements).
#ifndef DFLOW_GPU_CONV_LAUNCH_H_
#define DFLOW_GPU_CONV_LAUNCH_H_

#include <cuda_runtime_api.h>

#include <cstdint>

namespace dflow {
namespace gpu {

// TensorFlow's HWIO filter [rows, cols, in, out] to cuDNN's KRSC (NHWC
// filter format) [out, rows, cols, in], and back.
void LaunchHwioToKrsc(cudaStream_t s, const float* hwio, float* krsc, int64_t rows, int64_t cols,
                      int64_t in, int64_t out);
void LaunchKrscToHwio(cudaStream_t s, const float* krsc, float* hwio, int64_t rows, int64_t cols,
                      int64_t in, int64_t out);

// An NHWC image and where it sits inside a larger (padded) one: image pixel
// (h, w) is padded pixel (h + top, w + left).
struct PadGeometry {
  int64_t batch, rows, cols, depth;
  int64_t padded_rows, padded_cols, top, left;
};
// padded = the image surrounded by zeros.
void LaunchPadImage(cudaStream_t s, const PadGeometry& g, const float* image, float* padded);
// image = the image's part of padded.
void LaunchCropImage(cudaStream_t s, const PadGeometry& g, const float* padded, float* image);

// One spatial pooling (ops/conv_util.h's PoolGeometry, in plain types).
struct PoolWindow {
  int64_t batch, in_rows, in_cols, depth;
  int64_t window_rows, window_cols, stride_h, stride_w;
  int64_t out_rows, out_cols, pad_top, pad_left;
};
// out = the maximum of each window (padding ignored, NaNs skipped, the
// lowest float for a window of padding only), as the CPU kernel.
void LaunchMaxPool(cudaStream_t s, const PoolWindow& p, const float* in, float* out);
// dx = the sum of dy over the windows whose first maximum each input
// element is (ties to the first in row-major order; a NaN wins only when
// first), added in the CPU kernel's order: equal to it bit for bit.
void LaunchMaxPoolGrad(cudaStream_t s, const PoolWindow& p, const float* x, const float* dy,
                       float* dx);
// out = the mean of each window's elements inside the image (0 for a
// window of padding only), summed row by row as the CPU kernel.
void LaunchAvgPool(cudaStream_t s, const PoolWindow& p, const float* in, float* out);
// dx = the sum, over the windows holding each element, of the window's dy
// divided by its count; every element of dx is written.
void LaunchAvgPoolGrad(cudaStream_t s, const PoolWindow& p, const float* dy, float* dx);
// out[i] = max(in[i * k .. i * k + k)) for i < n (pooling over depth).
void LaunchDepthMaxPool(cudaStream_t s, const float* in, float* out, int64_t n, int64_t k);

}  // namespace gpu
}  // namespace dflow

#endif  // DFLOW_GPU_CONV_LAUNCH_H_
