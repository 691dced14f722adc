// The CNN training step of `dflow train --model cnn` (dflow/train/models.cc
// BuildCnn, Adam) written directly against CUDA, cuDNN and cuBLAS, without
// dflow: the baseline of issue 17 ("the CNN training step at >= 0.8 of the same
// step written directly with cuDNN/cuBLAS calls").
//
//   x [B,28,28,1] -> conv1 3x3x1x16 SAME + b1 -> ReLU = a1 [B,28,28,16]
//     -> maxpool 2x2/2 VALID = p1 [B,14,14,16]
//     -> conv2 3x3x16x32 SAME + b2 -> ReLU = a2 [B,14,14,32]
//     -> maxpool = p2 [B,7,7,32], read as flat [B,1568]
//     -> @ w3 [1568,128] + b3 -> ReLU = h [B,128] -> @ w4 [128,10] + b4 = logits
//     -> sparse softmax cross-entropy (int32 labels) -> mean = loss;
//   full backward, then Adam (lr 0.001, beta1 0.9, beta2 0.999, epsilon 1e-8:
//   dflow's AdamOptions defaults, which `dflow train` uses) on all 8 variables.
//
// How: one stream; cuDNN's legacy API with NHWC descriptors (convolution
// algorithms found once by cudnnFind*, FMA math as dflow's conv kernels use;
// filters kept in cuDNN's KRSC layout); cuDNN max pooling; cuBLAS SGEMM for the
// dense layers; one small kernel per remaining graph op (BiasAdd, Relu,
// ReluGrad, BiasAddGrad, the cross-entropy with its mean, ApplyAdam per
// variable), so the figure is the graph's own work without a framework.
//
// Each step does what dflow's trainer does per Session::Run: copy the batch
// (features float [B,784], labels int32 [B]) from pageable host memory, run
// forward, backward and update, and copy the scalar loss back (a
// synchronisation). Ten random batches are cycled; their labels can be read
// off the pixels (a bright band of rows per class), so the loss falls. Before
// timing, the gradient is compared with central differences of the loss: along
// the gradient over all variables at once ("directional_err", relative; the
// check that decides), and entry by entry ("grad_check_max_err", noisy where a
// step crosses a ReLU or max-pool kink).
//
//   build/bench/cnn_direct_bench [--steps 200] [--batch 128] [--warmup 20]
// Prints `cnn_direct_bench {"batch": ..., "steps": ..., "ms_per_step": ...,
// "examples_per_sec": ..., "loss_first": ..., "loss_last": ..., ...}` and exits 0;
// exits 77 without a GPU, 1 naming the CUDA, cuBLAS or cuDNN call that failed.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

// --- errors ---------------------------------------------------------------------------------

// Prints the failing call (its name, without the arguments) and exits 1.
[[noreturn]] void Fail(const char* call, const char* why, int line) {
  std::string name(call);
  name = name.substr(0, name.find('('));
  std::fprintf(stderr, "cnn_direct_bench: %s failed: %s (cnn_direct_bench.cu:%d)\n", name.c_str(),
               why, line);
  std::exit(1);
}

#define CUDA_CHECK(call)                                                  \
  do {                                                                    \
    const cudaError_t e_ = (call);                                        \
    if (e_ != cudaSuccess) Fail(#call, cudaGetErrorString(e_), __LINE__); \
  } while (0)
#define CUBLAS_CHECK(call)                                                             \
  do {                                                                                 \
    const cublasStatus_t s_ = (call);                                                  \
    if (s_ != CUBLAS_STATUS_SUCCESS) Fail(#call, cublasGetStatusString(s_), __LINE__); \
  } while (0)
#define CUDNN_CHECK(call)                                                           \
  do {                                                                              \
    const cudnnStatus_t s_ = (call);                                                \
    if (s_ != CUDNN_STATUS_SUCCESS) Fail(#call, cudnnGetErrorString(s_), __LINE__); \
  } while (0)
// After a <<<>>> launch of kernel `name`: a bad launch shows here, a fault at the next sync.
#define LAUNCH_CHECK(name)                                               \
  do {                                                                   \
    const cudaError_t e_ = cudaGetLastError();                           \
    if (e_ != cudaSuccess) Fail(name, cudaGetErrorString(e_), __LINE__); \
  } while (0)

// --- kernels --------------------------------------------------------------------------------

constexpr int kThreads = 256;  // every kernel's block size (ColumnSum and Xent rely on it)

int Blocks(int64_t n) {
  return static_cast<int>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, 65535));
}

__device__ int64_t FirstIndex() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ int64_t GridStride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// BiasAdd of a channels-last tensor with c channels: x[i] += b[i % c].
__global__ void BiasAddKernel(float* x, const float* b, int64_t n, int64_t c) {
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) x[i] += b[i % c];
}

// Relu in place.
__global__ void ReluKernel(float* x, int64_t n) {
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) x[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

// ReluGrad in place: g[i] = 0 where the ReLU's output a[i] is not positive
// (a > 0 exactly where the ReLU's input was).
__global__ void ReluGradKernel(float* g, const float* a, int64_t n) {
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) {
    if (!(a[i] > 0.0f)) g[i] = 0.0f;
  }
}

// BiasAddGrad of a channels-last tensor: out[c] += sum over r of in[r * cols + c]
// (out zeroed first; cols <= kThreads). Thread t reads column t % cols of row
// t / cols of each pass of kThreads / cols rows, so a warp reads contiguous memory.
__global__ void ColumnSumKernel(const float* in, int64_t rows, int cols, float* out) {
  __shared__ float partial[kThreads];
  const int t = threadIdx.x;
  const int rows_per_pass = kThreads / cols;
  const int col = t % cols, row0 = t / cols;
  float acc = 0.0f;
  if (row0 < rows_per_pass) {
    for (int64_t r = static_cast<int64_t>(blockIdx.x) * rows_per_pass + row0; r < rows;
         r += static_cast<int64_t>(gridDim.x) * rows_per_pass) {
      acc += in[r * cols + col];
    }
  }
  partial[t] = acc;
  __syncthreads();
  if (t < cols) {
    float sum = 0.0f;
    for (int k = 0; k < rows_per_pass; ++k) sum += partial[k * cols + t];
    atomicAdd(&out[t], sum);
  }
}

// SparseSoftmaxCrossEntropyWithLogits and the mean over the batch, in one block
// of kThreads threads: *loss = mean_r(log sum_j exp z[r,j] - z[r,label_r]) and
// dlogits[r,j] = (softmax(z[r])_j - [j == label_r]) / batch, the gradient of
// that mean. A label outside [0, classes) makes its row and the loss NaN.
__global__ void XentKernel(const float* logits, const int* labels, int64_t batch, int classes,
                           float* dlogits, float* loss) {
  __shared__ float partial[kThreads];
  const float inv_batch = 1.0f / static_cast<float>(batch);
  float acc = 0.0f;
  for (int64_t r = threadIdx.x; r < batch; r += blockDim.x) {
    const float* z = logits + r * classes;
    float* g = dlogits + r * classes;
    const int label = labels[r];
    if (label < 0 || label >= classes) {
      acc = NAN;
      for (int j = 0; j < classes; ++j) g[j] = NAN;
      continue;
    }
    float max_z = z[0];
    for (int j = 1; j < classes; ++j) max_z = fmaxf(max_z, z[j]);
    float sum = 0.0f;
    for (int j = 0; j < classes; ++j) sum += expf(z[j] - max_z);
    acc += logf(sum) - (z[label] - max_z);
    for (int j = 0; j < classes; ++j) {
      g[j] = (expf(z[j] - max_z) / sum - (j == label ? 1.0f : 0.0f)) * inv_batch;
    }
  }
  partial[threadIdx.x] = acc;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) *loss = partial[0] * inv_batch;
}

// ApplyAdam as dflow's (TensorFlow's) kernel, alpha = lr * sqrt(1 - beta2^t) / (1 - beta1^t):
//   m += (g - m) * (1 - beta1); v += (g^2 - v) * (1 - beta2); var -= alpha * m / (sqrt(v) + eps)
__global__ void AdamKernel(float* var, float* m, float* v, const float* grad, int64_t n,
                           float alpha, float beta1, float beta2, float epsilon) {
  for (int64_t i = FirstIndex(); i < n; i += GridStride()) {
    const float g = grad[i];
    const float mi = m[i] + (g - m[i]) * (1.0f - beta1);
    const float vi = v[i] + (g * g - v[i]) * (1.0f - beta2);
    m[i] = mi;
    v[i] = vi;
    var[i] -= alpha * mi / (sqrtf(vi) + epsilon);
  }
}

// Fallbacks for cuDNN's pooling, used only where cuDNN does not take NHWC:
// max pool 2x2 stride 2 VALID of x [n,h,w,c] into y [n,h/2,w/2,c] ...
__device__ const float* PoolWindow(const float* x, int64_t i, int h, int w, int c) {
  const int ho = h / 2, wo = w / 2;
  const int ch = static_cast<int>(i % c);
  int64_t rest = i / c;
  const int ow = static_cast<int>(rest % wo);
  rest /= wo;
  const int oh = static_cast<int>(rest % ho);
  const int64_t b = rest / ho;
  return x + ((b * h + 2 * oh) * w + 2 * ow) * c + ch;
}

__global__ void MaxPoolKernel(const float* x, int64_t n, int h, int w, int c, float* y) {
  const int64_t total = n * (h / 2) * (w / 2) * c;
  const int64_t row = static_cast<int64_t>(w) * c;
  for (int64_t i = FirstIndex(); i < total; i += GridStride()) {
    const float* p = PoolWindow(x, i, h, w, c);
    y[i] = fmaxf(fmaxf(p[0], p[c]), fmaxf(p[row], p[row + c]));
  }
}

// ... and its gradient: the first maximum of each window gets the window's dy,
// the window's other inputs 0 (windows do not overlap; dx zeroed first when h or
// w is odd, for the inputs outside every window).
__global__ void MaxPoolGradKernel(const float* x, const float* dy, int64_t n, int h, int w, int c,
                                  float* dx) {
  const int64_t total = n * (h / 2) * (w / 2) * c;
  const int64_t row = static_cast<int64_t>(w) * c;
  for (int64_t i = FirstIndex(); i < total; i += GridStride()) {
    const float* p = PoolWindow(x, i, h, w, c);
    const int64_t offsets[4] = {0, c, row, row + c};
    int best = 0;
    for (int k = 1; k < 4; ++k) {
      if (p[offsets[k]] > p[offsets[best]]) best = k;
    }
    float* q = dx + (p - x);
    for (int k = 0; k < 4; ++k) q[offsets[k]] = k == best ? dy[i] : 0.0f;
  }
}

// --- cuDNN descriptors and algorithms --------------------------------------------------------

constexpr size_t kMaxWorkspace = size_t{1} << 30;

cudnnTensorDescriptor_t Nhwc(int n, int h, int w, int c) {
  cudnnTensorDescriptor_t d;
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&d));
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, n, c, h, w));
  return d;
}

bool IsTensorOpMath(cudnnMathType_t m) {
  return m == CUDNN_TENSOR_OP_MATH || m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
}

// The fastest of cudnnFind*'s results (sorted by time) that ran, uses FMA math
// and needs at most kMaxWorkspace bytes.
template <typename Perf>
Perf Fastest(const char* what, const Perf* perf, int count) {
  for (int k = 0; k < count; ++k) {
    if (perf[k].status == CUDNN_STATUS_SUCCESS && !IsTensorOpMath(perf[k].mathType) &&
        perf[k].memory <= kMaxWorkspace) {
      return perf[k];
    }
  }
  Fail(what, "no usable algorithm", __LINE__);
}

// A SAME 3x3 stride-1 convolution of x [n,h,w,in] with a KRSC filter
// [out,3,3,in] into y [n,h,w,out], and its algorithms.
struct Conv {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnConvolutionFwdAlgo_t fwd{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter{};
  cudnnConvolutionBwdDataAlgo_t bwd_data{};
  size_t workspace = 0;  // the most any of the chosen algorithms needs
};

Conv MakeConv(cudnnHandle_t cudnn, int n, int h, int w, int in, int out, bool data_grad) {
  Conv c;
  c.x = Nhwc(n, h, w, in);
  c.y = Nhwc(n, h, w, out);
  CUDNN_CHECK(cudnnCreateFilterDescriptor(&c.w));
  CUDNN_CHECK(cudnnSetFilter4dDescriptor(c.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, out, in, 3, 3));
  CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&c.conv));
  CUDNN_CHECK(cudnnSetConvolution2dDescriptor(c.conv, /*pad*/ 1, 1, /*stride*/ 1, 1,
                                              /*dilation*/ 1, 1, CUDNN_CROSS_CORRELATION,
                                              CUDNN_DATA_FLOAT));
  CUDNN_CHECK(cudnnSetConvolutionMathType(c.conv, CUDNN_FMA_MATH));
  int on = 0, oc = 0, oh = 0, ow = 0;
  CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(c.conv, c.x, c.w, &on, &oc, &oh, &ow));
  if (on != n || oc != out || oh != h || ow != w) {
    Fail("cudnnGetConvolution2dForwardOutputDim", "output shape is not SAME's", __LINE__);
  }

  cudnnConvolutionFwdAlgoPerf_t fwd[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  int got = 0;
  CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithm(cudnn, c.x, c.w, c.conv, c.y,
                                                   CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, fwd));
  const auto f = Fastest("cudnnFindConvolutionForwardAlgorithm", fwd, got);
  c.fwd = f.algo;
  c.workspace = std::max(c.workspace, f.memory);

  cudnnConvolutionBwdFilterAlgoPerf_t bf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
  CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithm(
      cudnn, c.x, c.y, c.conv, c.w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &got, bf));
  const auto g = Fastest("cudnnFindConvolutionBackwardFilterAlgorithm", bf, got);
  c.bwd_filter = g.algo;
  c.workspace = std::max(c.workspace, g.memory);

  if (data_grad) {
    cudnnConvolutionBwdDataAlgoPerf_t bd[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithm(
        cudnn, c.w, c.y, c.conv, c.x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &got, bd));
    const auto d = Fastest("cudnnFindConvolutionBackwardDataAlgorithm", bd, got);
    c.bwd_data = d.algo;
    c.workspace = std::max(c.workspace, d.memory);
  }
  std::fprintf(stderr,
               "cnn_direct_bench: conv %dx%dx%d->%d: fwd algo %d, bwd filter algo %d, bwd data "
               "algo %d, workspace %zu bytes\n",
               h, w, in, out, static_cast<int>(c.fwd), static_cast<int>(c.bwd_filter),
               data_grad ? static_cast<int>(c.bwd_data) : -1, c.workspace);
  return c;
}

// --- the model ------------------------------------------------------------------------------

constexpr int kImage = 28, kPixels = kImage * kImage, kClasses = 10;
constexpr int kC1 = 16, kC2 = 32, kHidden = 128;
constexpr int kFlat = 7 * 7 * kC2;  // 1568

constexpr float kLearningRate = 0.001f, kBeta1 = 0.9f, kBeta2 = 0.999f, kEpsilon = 1e-8f;

float* DeviceZeros(int64_t n) {
  float* p = nullptr;
  CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p), sizeof(float) * std::max<int64_t>(n, 1)));
  CUDA_CHECK(cudaMemset(p, 0, sizeof(float) * std::max<int64_t>(n, 1)));
  return p;
}

// A variable with its gradient and Adam's two slots.
struct Param {
  const char* name;
  int64_t size;
  float *w, *g, *m, *v;
};

// Glorot uniform (limit sqrt(6 / (fan_in + fan_out))) or, for limit 0, zeros.
Param MakeParam(const char* name, int64_t size, double limit, std::mt19937* rng) {
  Param p{name, size, DeviceZeros(size), DeviceZeros(size), DeviceZeros(size), DeviceZeros(size)};
  std::vector<float> host(size, 0.0f);
  std::uniform_real_distribution<float> u(-limit, limit);
  if (limit > 0) {
    for (float& x : host) x = u(*rng);
  }
  CUDA_CHECK(cudaMemcpy(p.w, host.data(), sizeof(float) * size, cudaMemcpyHostToDevice));
  return p;
}

struct HostBatch {
  std::vector<float> features;  // [B,784], pageable
  std::vector<int32_t> labels;  // [B]
};

// Pixels uniform in [0,1); the label's band of two rows (rows 4+2c, 5+2c) one brighter.
HostBatch RandomBatch(int batch, std::mt19937* rng) {
  HostBatch b{std::vector<float>(static_cast<size_t>(batch) * kPixels),
              std::vector<int32_t>(batch)};
  std::uniform_real_distribution<float> pixel(0.0f, 1.0f);
  std::uniform_int_distribution<int> label(0, kClasses - 1);
  for (int r = 0; r < batch; ++r) {
    b.labels[r] = label(*rng);
    float* image = b.features.data() + static_cast<size_t>(r) * kPixels;
    for (int i = 0; i < kPixels; ++i) image[i] = pixel(*rng);
    for (int i = (4 + 2 * b.labels[r]) * kImage; i < (6 + 2 * b.labels[r]) * kImage; ++i) {
      image[i] += 1.0f;
    }
  }
  return b;
}

class Net {
 public:
  explicit Net(int batch);
  Net(const Net&) = delete;
  Net& operator=(const Net&) = delete;

  // One training step on `batch`: copy in, forward, backward, Adam; returns the loss.
  float Step(const HostBatch& batch) {
    Forward(batch);
    Backward();
    Update();
    return ReadLoss();
  }

  // Largest relative difference between the backward pass's gradient and a
  // central difference of the loss (step `delta`), over 3 entries of each
  // variable (no update). A single entry's difference can cross ReLU and
  // max-pool kinks, so this is noisy; see DirectionalCheck.
  double GradCheck(const HostBatch& batch, float delta);
  // Relative difference between |g| and the central difference of the loss
  // along g/|g| over all variables at once (step `h`): the kinks one entry
  // crosses average out, so a wrong gradient shows and a right one does not.
  double DirectionalCheck(const HostBatch& batch, float h);

  const char* pool_impl() const { return own_pool_ ? "own" : "cudnn"; }

 private:
  void Forward(const HostBatch& batch);
  void Backward();
  void Update();
  float ReadLoss();
  float ReadFloat(const float* device);
  void WriteFloat(float* device, float value);

  // Row-major c[m,n] = op(a)[m,k] @ op(b)[k,n] (cuBLAS is column-major: c^T = op(b)^T op(a)^T).
  void Gemm(bool ta, bool tb, int m, int n, int k, const float* a, const float* b, float* c);
  void BiasAdd(float* x, const float* b, int64_t n, int c);
  void Relu(float* x, int64_t n);
  void ReluGrad(float* g, const float* a, int64_t n);
  void BiasGrad(const float* dy, int64_t rows, int cols, float* db);
  void ConvForward(const Conv& c, const float* x, const float* w, float* y);
  void ConvBackwardFilter(const Conv& c, const float* x, const float* dy, float* dw);
  void ConvBackwardData(const Conv& c, const float* w, const float* dy, float* dx);
  // y [n,h/2,w/2,c] = maxpool(x [n,h,w,c]) and its gradient dx from dy.
  void Pool(cudnnTensorDescriptor_t xd, const float* x, cudnnTensorDescriptor_t yd, float* y, int h,
            int w, int c);
  void PoolGrad(cudnnTensorDescriptor_t xd, const float* x, cudnnTensorDescriptor_t yd,
                const float* y, const float* dy, float* dx, int h, int w, int c);
  bool ProbeCudnnPooling();

  const int batch_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  cudnnPoolingDescriptor_t pool_ = nullptr;
  bool own_pool_ = false;
  Conv conv1_, conv2_;
  cudnnTensorDescriptor_t p2_desc_ = nullptr;  // [B,7,7,32]
  float* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::vector<Param> params_;  // w1 b1 w2 b2 w3 b3 w4 b4
  float beta1_power_ = kBeta1, beta2_power_ = kBeta2;
  // Device buffers (see the header comment for the names).
  float *x_, *a1_, *p1_, *a2_, *p2_, *h_, *logits_, *dlogits_, *dh_, *dflat_, *da2_, *dp1_, *da1_;
  int* labels_ = nullptr;
  float* loss_ = nullptr;
};

enum { kW1, kB1, kW2, kB2, kW3, kB3, kW4, kB4 };

Net::Net(int batch) : batch_(batch) {
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  CUBLAS_CHECK(cublasCreate(&cublas_));
  CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
  CUDNN_CHECK(cudnnCreate(&cudnn_));
  CUDNN_CHECK(cudnnSetStream(cudnn_, stream_));

  const int64_t b = batch;
  x_ = DeviceZeros(b * kPixels);
  a1_ = DeviceZeros(b * kPixels * kC1);
  p1_ = DeviceZeros(b * 14 * 14 * kC1);
  a2_ = DeviceZeros(b * 14 * 14 * kC2);
  p2_ = DeviceZeros(b * kFlat);
  h_ = DeviceZeros(b * kHidden);
  logits_ = DeviceZeros(b * kClasses);
  dlogits_ = DeviceZeros(b * kClasses);
  dh_ = DeviceZeros(b * kHidden);
  dflat_ = DeviceZeros(b * kFlat);
  da2_ = DeviceZeros(b * 14 * 14 * kC2);
  dp1_ = DeviceZeros(b * 14 * 14 * kC1);
  da1_ = DeviceZeros(b * kPixels * kC1);
  loss_ = DeviceZeros(1);
  CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&labels_), sizeof(int) * b));
  CUDA_CHECK(cudaMemset(labels_, 0, sizeof(int) * b));

  std::mt19937 rng(1);
  auto glorot = [](double fan_in, double fan_out) { return std::sqrt(6.0 / (fan_in + fan_out)); };
  params_.push_back(MakeParam("conv1/w", kC1 * 9 * 1, glorot(9 * 1, 9 * kC1), &rng));
  params_.push_back(MakeParam("conv1/b", kC1, 0, &rng));
  params_.push_back(MakeParam("conv2/w", kC2 * 9 * kC1, glorot(9 * kC1, 9 * kC2), &rng));
  params_.push_back(MakeParam("conv2/b", kC2, 0, &rng));
  params_.push_back(MakeParam("dense/w", int64_t{kFlat} * kHidden, glorot(kFlat, kHidden), &rng));
  params_.push_back(MakeParam("dense/b", kHidden, 0, &rng));
  params_.push_back(MakeParam("logits/w", kHidden * kClasses, glorot(kHidden, kClasses), &rng));
  params_.push_back(MakeParam("logits/b", kClasses, 0, &rng));

  // The buffers above were filled on the legacy stream; the rest runs on stream_.
  CUDA_CHECK(cudaDeviceSynchronize());
  conv1_ = MakeConv(cudnn_, batch, kImage, kImage, 1, kC1, /*data_grad=*/false);
  conv2_ = MakeConv(cudnn_, batch, 14, 14, kC1, kC2, /*data_grad=*/true);
  workspace_bytes_ = std::max(conv1_.workspace, conv2_.workspace);
  CUDA_CHECK(
      cudaMalloc(reinterpret_cast<void**>(&workspace_), std::max<size_t>(workspace_bytes_, 16)));
  p2_desc_ = Nhwc(batch, 7, 7, kC2);

  CUDNN_CHECK(cudnnCreatePoolingDescriptor(&pool_));
  CUDNN_CHECK(cudnnSetPooling2dDescriptor(pool_, CUDNN_POOLING_MAX, CUDNN_NOT_PROPAGATE_NAN,
                                          /*window*/ 2, 2, /*pad*/ 0, 0, /*stride*/ 2, 2));
  int n = 0, c = 0, h = 0, w = 0;
  CUDNN_CHECK(cudnnGetPooling2dForwardOutputDim(pool_, conv1_.y, &n, &c, &h, &w));
  if (n != batch || c != kC1 || h != 14 || w != 14) {
    Fail("cudnnGetPooling2dForwardOutputDim", "pool1's output is not [B,14,14,16]", __LINE__);
  }
  own_pool_ = !ProbeCudnnPooling();
  CUDA_CHECK(cudaDeviceSynchronize());
}

// Runs cuDNN's pooling once each way on NHWC; false where cuDNN says it does not support it.
bool Net::ProbeCudnnPooling() {
  const float one = 1.0f, zero = 0.0f;
  cudnnStatus_t s = cudnnPoolingForward(cudnn_, pool_, &one, conv1_.y, a1_, &zero, conv2_.x, p1_);
  if (s == CUDNN_STATUS_SUCCESS) {
    s = cudnnPoolingBackward(cudnn_, pool_, &one, conv2_.x, p1_, conv2_.x, dp1_, conv1_.y, a1_,
                             &zero, conv1_.y, da1_);
  }
  if (s == CUDNN_STATUS_SUCCESS) return true;
  if (s == CUDNN_STATUS_NOT_SUPPORTED || s == CUDNN_STATUS_BAD_PARAM) {
    std::fprintf(stderr, "cnn_direct_bench: cuDNN NHWC max pooling: %s; using own kernels\n",
                 cudnnGetErrorString(s));
    return false;
  }
  Fail("cudnnPoolingForward/Backward", cudnnGetErrorString(s), __LINE__);
}

void Net::Gemm(bool ta, bool tb, int m, int n, int k, const float* a, const float* b, float* c) {
  const float one = 1.0f, zero = 0.0f;
  const int lda = ta ? m : k, ldb = tb ? k : n;
  CUBLAS_CHECK(cublasSgemm(cublas_, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                           n, m, k, &one, b, ldb, a, lda, &zero, c, n));
}

void Net::BiasAdd(float* x, const float* b, int64_t n, int c) {
  BiasAddKernel<<<Blocks(n), kThreads, 0, stream_>>>(x, b, n, c);
  LAUNCH_CHECK("BiasAddKernel");
}

void Net::Relu(float* x, int64_t n) {
  ReluKernel<<<Blocks(n), kThreads, 0, stream_>>>(x, n);
  LAUNCH_CHECK("ReluKernel");
}

void Net::ReluGrad(float* g, const float* a, int64_t n) {
  ReluGradKernel<<<Blocks(n), kThreads, 0, stream_>>>(g, a, n);
  LAUNCH_CHECK("ReluGradKernel");
}

void Net::BiasGrad(const float* dy, int64_t rows, int cols, float* db) {
  if (cols < 1 || cols > kThreads) Fail("BiasGrad", "needs 1 <= channels <= 256", __LINE__);
  CUDA_CHECK(cudaMemsetAsync(db, 0, sizeof(float) * cols, stream_));
  const int64_t rows_per_pass = kThreads / cols;
  const int blocks =
      static_cast<int>(std::clamp<int64_t>((rows + rows_per_pass - 1) / rows_per_pass, 1, 1024));
  ColumnSumKernel<<<blocks, kThreads, 0, stream_>>>(dy, rows, cols, db);
  LAUNCH_CHECK("ColumnSumKernel");
}

void Net::ConvForward(const Conv& c, const float* x, const float* w, float* y) {
  const float one = 1.0f, zero = 0.0f;
  CUDNN_CHECK(cudnnConvolutionForward(cudnn_, &one, c.x, x, c.w, w, c.conv, c.fwd, workspace_,
                                      workspace_bytes_, &zero, c.y, y));
}

void Net::ConvBackwardFilter(const Conv& c, const float* x, const float* dy, float* dw) {
  const float one = 1.0f, zero = 0.0f;
  CUDNN_CHECK(cudnnConvolutionBackwardFilter(cudnn_, &one, c.x, x, c.y, dy, c.conv, c.bwd_filter,
                                             workspace_, workspace_bytes_, &zero, c.w, dw));
}

void Net::ConvBackwardData(const Conv& c, const float* w, const float* dy, float* dx) {
  const float one = 1.0f, zero = 0.0f;
  CUDNN_CHECK(cudnnConvolutionBackwardData(cudnn_, &one, c.w, w, c.y, dy, c.conv, c.bwd_data,
                                           workspace_, workspace_bytes_, &zero, c.x, dx));
}

void Net::Pool(cudnnTensorDescriptor_t xd, const float* x, cudnnTensorDescriptor_t yd, float* y,
               int h, int w, int c) {
  if (own_pool_) {
    MaxPoolKernel<<<Blocks(int64_t{batch_} * (h / 2) * (w / 2) * c), kThreads, 0, stream_>>>(
        x, batch_, h, w, c, y);
    LAUNCH_CHECK("MaxPoolKernel");
    return;
  }
  const float one = 1.0f, zero = 0.0f;
  CUDNN_CHECK(cudnnPoolingForward(cudnn_, pool_, &one, xd, x, &zero, yd, y));
}

void Net::PoolGrad(cudnnTensorDescriptor_t xd, const float* x, cudnnTensorDescriptor_t yd,
                   const float* y, const float* dy, float* dx, int h, int w, int c) {
  if (own_pool_) {
    if (h % 2 != 0 || w % 2 != 0) {
      CUDA_CHECK(cudaMemsetAsync(dx, 0, sizeof(float) * batch_ * h * w * c, stream_));
    }
    MaxPoolGradKernel<<<Blocks(int64_t{batch_} * (h / 2) * (w / 2) * c), kThreads, 0, stream_>>>(
        x, dy, batch_, h, w, c, dx);
    LAUNCH_CHECK("MaxPoolGradKernel");
    return;
  }
  const float one = 1.0f, zero = 0.0f;
  CUDNN_CHECK(cudnnPoolingBackward(cudnn_, pool_, &one, yd, y, yd, dy, xd, x, &zero, xd, dx));
}

void Net::Forward(const HostBatch& batch) {
  const int64_t b = batch_;
  CUDA_CHECK(cudaMemcpyAsync(x_, batch.features.data(), sizeof(float) * b * kPixels,
                             cudaMemcpyHostToDevice, stream_));
  CUDA_CHECK(cudaMemcpyAsync(labels_, batch.labels.data(), sizeof(int32_t) * b,
                             cudaMemcpyHostToDevice, stream_));
  ConvForward(conv1_, x_, params_[kW1].w, a1_);
  BiasAdd(a1_, params_[kB1].w, b * kPixels * kC1, kC1);
  Relu(a1_, b * kPixels * kC1);
  Pool(conv1_.y, a1_, conv2_.x, p1_, kImage, kImage, kC1);
  ConvForward(conv2_, p1_, params_[kW2].w, a2_);
  BiasAdd(a2_, params_[kB2].w, b * 14 * 14 * kC2, kC2);
  Relu(a2_, b * 14 * 14 * kC2);
  Pool(conv2_.y, a2_, p2_desc_, p2_, 14, 14, kC2);
  Gemm(false, false, batch_, kHidden, kFlat, p2_, params_[kW3].w, h_);
  BiasAdd(h_, params_[kB3].w, b * kHidden, kHidden);
  Relu(h_, b * kHidden);
  Gemm(false, false, batch_, kClasses, kHidden, h_, params_[kW4].w, logits_);
  BiasAdd(logits_, params_[kB4].w, b * kClasses, kClasses);
  XentKernel<<<1, kThreads, 0, stream_>>>(logits_, labels_, b, kClasses, dlogits_, loss_);
  LAUNCH_CHECK("XentKernel");
}

void Net::Backward() {
  const int64_t b = batch_;
  // logits = h @ w4 + b4
  Gemm(true, false, kHidden, kClasses, batch_, h_, dlogits_, params_[kW4].g);
  BiasGrad(dlogits_, b, kClasses, params_[kB4].g);
  Gemm(false, true, batch_, kHidden, kClasses, dlogits_, params_[kW4].w, dh_);
  // h = relu(flat @ w3 + b3)
  ReluGrad(dh_, h_, b * kHidden);
  Gemm(true, false, kFlat, kHidden, batch_, p2_, dh_, params_[kW3].g);
  BiasGrad(dh_, b, kHidden, params_[kB3].g);
  Gemm(false, true, batch_, kFlat, kHidden, dh_, params_[kW3].w, dflat_);
  // p2 = pool(a2), a2 = relu(conv2(p1) + b2)
  PoolGrad(conv2_.y, a2_, p2_desc_, p2_, dflat_, da2_, 14, 14, kC2);
  ReluGrad(da2_, a2_, b * 14 * 14 * kC2);
  BiasGrad(da2_, b * 14 * 14, kC2, params_[kB2].g);
  ConvBackwardFilter(conv2_, p1_, da2_, params_[kW2].g);
  ConvBackwardData(conv2_, params_[kW2].w, da2_, dp1_);
  // p1 = pool(a1), a1 = relu(conv1(x) + b1)
  PoolGrad(conv1_.y, a1_, conv2_.x, p1_, dp1_, da1_, kImage, kImage, kC1);
  ReluGrad(da1_, a1_, b * kPixels * kC1);
  BiasGrad(da1_, b * kPixels, kC1, params_[kB1].g);
  ConvBackwardFilter(conv1_, x_, da1_, params_[kW1].g);
}

void Net::Update() {
  const float alpha = kLearningRate * std::sqrt(1.0f - beta2_power_) / (1.0f - beta1_power_);
  for (const Param& p : params_) {
    AdamKernel<<<Blocks(p.size), kThreads, 0, stream_>>>(p.w, p.m, p.v, p.g, p.size, alpha, kBeta1,
                                                         kBeta2, kEpsilon);
    LAUNCH_CHECK("AdamKernel");
  }
  beta1_power_ *= kBeta1;
  beta2_power_ *= kBeta2;
}

float Net::ReadLoss() { return ReadFloat(loss_); }

// Copies on stream_ (a non-blocking stream does not wait for cudaMemcpy's legacy stream).
float Net::ReadFloat(const float* device) {
  float value = 0.0f;
  CUDA_CHECK(cudaMemcpyAsync(&value, device, sizeof(float), cudaMemcpyDeviceToHost, stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  return value;
}

void Net::WriteFloat(float* device, float value) {
  CUDA_CHECK(cudaMemcpyAsync(device, &value, sizeof(float), cudaMemcpyHostToDevice, stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
}

double Net::GradCheck(const HostBatch& batch, float delta) {
  Forward(batch);
  Backward();
  ReadLoss();
  double worst = 0.0;
  for (const Param& p : params_) {
    for (int64_t i : {int64_t{0}, p.size / 2, p.size - 1}) {
      const float original = ReadFloat(p.w + i), grad = ReadFloat(p.g + i);
      float loss[2];
      for (int side = 0; side < 2; ++side) {
        WriteFloat(p.w + i, original + (side == 0 ? delta : -delta));
        Forward(batch);
        loss[side] = ReadLoss();
      }
      WriteFloat(p.w + i, original);
      const double numeric = (static_cast<double>(loss[0]) - loss[1]) / (2.0 * delta);
      const double err = std::fabs(numeric - grad) /
                         std::max({std::fabs(numeric), std::fabs(static_cast<double>(grad)), 1e-3});
      if (!(err <= worst)) {  // also takes a NaN
        worst = err;
        std::fprintf(stderr,
                     "cnn_direct_bench: grad check (delta %g) %s[%lld]: backward %.6g, central "
                     "difference %.6g (relative error %.3g)\n",
                     delta, p.name, static_cast<long long>(i), grad, numeric, err);
      }
    }
  }
  return worst;
}

double Net::DirectionalCheck(const HostBatch& batch, float h) {
  Forward(batch);
  Backward();
  double squares = 0.0;
  for (const Param& p : params_) {
    float norm = 0.0f;  // Host pointer mode: the call returns with the value.
    CUBLAS_CHECK(cublasSnrm2(cublas_, static_cast<int>(p.size), p.g, 1, &norm));
    squares += static_cast<double>(norm) * norm;
  }
  const double norm = std::sqrt(squares);
  auto move = [&](double step) {  // w += step * g / |g|
    const float alpha = static_cast<float>(step / norm);
    for (const Param& p : params_) {
      CUBLAS_CHECK(cublasSaxpy(cublas_, static_cast<int>(p.size), &alpha, p.g, 1, p.w, 1));
    }
  };
  move(h);
  Forward(batch);
  const double plus = ReadLoss();
  move(-2.0 * h);
  Forward(batch);
  const double minus = ReadLoss();
  move(h);
  const double numeric = (plus - minus) / (2.0 * h);
  const double err = std::fabs(numeric - norm) / std::max(norm, 1e-12);
  std::fprintf(stderr,
               "cnn_direct_bench: directional check (h %g): |g| %.6g, central difference along "
               "g/|g| %.6g (relative error %.3g)\n",
               h, norm, numeric, err);
  return err;
}

// --- main -----------------------------------------------------------------------------------

struct Options {
  int steps = 200;
  int batch = 128;
  int warmup = 20;
};

bool ParseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    int* target = flag == "--steps"    ? &o->steps
                  : flag == "--batch"  ? &o->batch
                  : flag == "--warmup" ? &o->warmup
                                       : nullptr;
    if (target == nullptr || i + 1 >= argc) return false;
    char* end = nullptr;
    const long v = std::strtol(argv[++i], &end, 10);
    if (*end != '\0' || v < 0 || v > 1000000) return false;
    *target = static_cast<int>(v);
  }
  return o->steps >= 1 && o->batch >= 1;
}

int Main(int argc, char** argv) {
  Options o;
  if (!ParseArgs(argc, argv, &o)) {
    std::fprintf(stderr,
                 "usage: cnn_direct_bench [--steps N >= 1] [--batch B >= 1] [--warmup W >= 0]\n");
    return 2;
  }
  int gpus = 0;
  const cudaError_t e = cudaGetDeviceCount(&gpus);
  if (e != cudaSuccess || gpus == 0) {
    std::fprintf(stderr, "cnn_direct_bench: no GPU visible (%s)\n",
                 e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return 77;
  }
  CUDA_CHECK(cudaSetDevice(0));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::fprintf(stderr, "cnn_direct_bench: %s, cuDNN %zu, batch %d, %d warm-up + %d timed steps\n",
               prop.name, cudnnGetVersion(), o.batch, o.warmup, o.steps);

  std::mt19937 rng(2);
  std::vector<HostBatch> batches;
  for (int i = 0; i < 10; ++i) batches.push_back(RandomBatch(o.batch, &rng));
  Net net(o.batch);
  const double coarse_err = net.GradCheck(batches[0], 1e-2f);
  const double grad_err = net.GradCheck(batches[0], 1e-3f);
  const double directional_err = net.DirectionalCheck(batches[0], 1e-2f);
  std::fprintf(stderr,
               "cnn_direct_bench: gradient %s (along g: relative error %.3g; largest of one "
               "entry: %.3g at delta 1e-2, %.3g at delta 1e-3)\n",
               directional_err <= 0.01 ? "ok" : "SUSPECT", directional_err, coarse_err, grad_err);

  float loss_first = NAN, loss_last = NAN;
  int step = 0;
  for (; step < o.warmup; ++step) {
    const float loss = net.Step(batches[step % batches.size()]);
    if (step == 0) loss_first = loss;
  }
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < o.steps; ++i, ++step) {
    loss_last = net.Step(batches[step % batches.size()]);
    if (step == 0) loss_first = loss_last;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!std::isfinite(loss_first) || !std::isfinite(loss_last)) {
    std::fprintf(stderr, "cnn_direct_bench: the loss is not finite (first %g, last %g)\n",
                 loss_first, loss_last);
    return 1;
  }
  std::printf(
      "cnn_direct_bench {\"batch\": %d, \"steps\": %d, \"ms_per_step\": %.4f, "
      "\"examples_per_sec\": %.1f, \"loss_first\": %.6f, \"loss_last\": %.6f, "
      "\"grad_check_max_err\": %.3g, \"directional_err\": %.3g, \"pool\": \"%s\"}\n",
      o.batch, o.steps, seconds * 1e3 / o.steps, o.batch * o.steps / seconds, loss_first, loss_last,
      std::isfinite(grad_err) ? grad_err : -1.0,
      std::isfinite(directional_err) ? directional_err : -1.0, net.pool_impl());
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Main(argc, argv); }
