// Convolution and pooling on a GPU, NHWC as TensorFlow's defaults, with
// the CPU kernels' geometry (ops/conv_util.h) and error messages:
//  - Conv2D, Conv2DBackpropInput, Conv2DBackpropFilter run cuDNN's legacy
//    convolution API on NHWC tensors. TensorFlow's HWIO filter is
//    transposed to cuDNN's NHWC filter layout KRSC (and the filter gradient
//    back). cuDNN pads symmetrically while TensorFlow's SAME puts the odd
//    row/column after: the input is then padded explicitly by the
//    difference (and the input gradient cropped), as TensorFlow does.
//    Algorithms come from cuDNN's heuristics, restricted to FMA math (no
//    TF32, so results match the CPU's float arithmetic), tuned and cached
//    per shape in the kernel with the shape's descriptors.
//  - MaxPool and MaxPoolGrad are direct kernels (conv_kernels.cu) that keep
//    the CPU's rules exactly: padding ignored, NaNs skipped, gradients to
//    the first maximum of each window.
//  - AvgPool and AvgPoolGrad are direct kernels too: means over the elements
//    inside the image, in the CPU's order of addition; the gradient is
//    gathered per input element (deterministic, no atomics).
#include <algorithm>
#include <array>
#include <climits>
#include <map>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/status.h"
#include "dflow/gpu/conv_launch.h"
#include "dflow/gpu/gpu_device.h"
#include "dflow/ops/conv_util.h"

namespace dflow {
namespace gpu {
namespace {

// --- geometry ------------------------------------------------------------------------

// A convolution as cuDNN runs it: symmetric padding, over the input padded
// explicitly by whatever TensorFlow's padding adds beyond that.
struct ConvPlan {
  ConvGeometry g;
  int64_t pad_h = 0, pad_w = 0;  // What cuDNN pads on every side.
  PadGeometry pad;               // The input inside the explicitly padded input.
  bool padded() const { return pad.padded_rows != g.in_rows || pad.padded_cols != g.in_cols; }
};

// The padding after the input that the convolution reads (never negative).
int64_t PadAfter(int64_t in, int64_t out, int64_t k, int64_t dilation, int64_t stride,
                 int64_t pad_before) {
  const int64_t effective = (k - 1) * dilation + 1;
  return std::max<int64_t>(0, (out - 1) * stride + effective - in - pad_before);
}

absl::StatusOr<ConvPlan> MakePlan(const OpKernelContext& ctx, const ConvGeometry& g) {
  ConvPlan p;
  p.g = g;
  const int64_t bottom = PadAfter(g.in_rows, g.out_rows, g.filter_rows, g.dilation_h, g.stride_h,
                                  g.pad_top);
  const int64_t right = PadAfter(g.in_cols, g.out_cols, g.filter_cols, g.dilation_w, g.stride_w,
                                 g.pad_left);
  p.pad_h = std::min(g.pad_top, bottom);
  p.pad_w = std::min(g.pad_left, right);
  p.pad = PadGeometry{g.batch, g.in_rows, g.in_cols, g.in_depth,
                      g.in_rows + (g.pad_top - p.pad_h) + (bottom - p.pad_h),
                      g.in_cols + (g.pad_left - p.pad_w) + (right - p.pad_w),
                      g.pad_top - p.pad_h, g.pad_left - p.pad_w};
  // cuDNN's legacy API takes int dimensions and at most 2^31 - 1 elements a
  // tensor (TensorFlow splits such a batch; dflow refuses it, naming it).
  const int64_t in_image = p.pad.padded_rows * p.pad.padded_cols * g.in_depth;
  const int64_t out_image = g.out_rows * g.out_cols * g.out_depth;
  for (int64_t d : {g.batch, p.pad.padded_rows, p.pad.padded_cols, g.in_depth, g.out_depth,
                    out_image, in_image, g.batch * in_image, g.batch * out_image}) {
    if (d > INT_MAX) {
      return ctx.InvalidArgument("convolution too large for cuDNN (a tensor of 2^31 elements "
                                 "or more; split the batch): input [",
                                 g.batch, ",", g.in_rows, ",", g.in_cols, ",", g.in_depth, "]");
    }
  }
  return p;
}

// The cache key of a plan: everything the descriptors depend on.
using PlanKey = std::array<int64_t, 16>;
PlanKey KeyOf(const ConvPlan& p) {
  const ConvGeometry& g = p.g;
  return {g.batch,       p.pad.padded_rows, p.pad.padded_cols, g.in_depth,   g.out_depth,
          g.filter_rows, g.filter_cols,     g.filter_depth,    p.pad_h,      p.pad_w,
          g.stride_h,    g.stride_w,        g.dilation_h,      g.dilation_w, g.groups,
          g.out_rows};
}

// --- cuDNN descriptors ------------------------------------------------------------------

// The descriptors of one plan: x the (padded) input, y the output, w the
// KRSC filter. Thread-compatible.
class ConvDescriptors {
 public:
  ConvDescriptors() = default;
  ConvDescriptors(const ConvDescriptors&) = delete;
  ConvDescriptors& operator=(const ConvDescriptors&) = delete;
  ~ConvDescriptors() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
  }

  absl::Status Init(const ConvPlan& p) {
    const ConvGeometry& g = p.g;
    auto i = [](int64_t v) { return static_cast<int>(v); };
    RETURN_IF_ERROR(CudnnCheck(cudnnCreateTensorDescriptor(&x), "cudnnCreateTensorDescriptor"));
    RETURN_IF_ERROR(CudnnCheck(cudnnCreateTensorDescriptor(&y), "cudnnCreateTensorDescriptor"));
    RETURN_IF_ERROR(CudnnCheck(cudnnCreateFilterDescriptor(&w), "cudnnCreateFilterDescriptor"));
    RETURN_IF_ERROR(
        CudnnCheck(cudnnCreateConvolutionDescriptor(&conv), "cudnnCreateConvolutionDescriptor"));
    RETURN_IF_ERROR(CudnnCheck(
        cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, i(g.batch),
                                   i(g.in_depth), i(p.pad.padded_rows), i(p.pad.padded_cols)),
        "cudnnSetTensor4dDescriptor(input)"));
    RETURN_IF_ERROR(CudnnCheck(
        cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, i(g.batch),
                                   i(g.out_depth), i(g.out_rows), i(g.out_cols)),
        "cudnnSetTensor4dDescriptor(output)"));
    RETURN_IF_ERROR(CudnnCheck(
        cudnnSetFilter4dDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, i(g.out_depth),
                                   i(g.filter_depth), i(g.filter_rows), i(g.filter_cols)),
        "cudnnSetFilter4dDescriptor"));
    RETURN_IF_ERROR(CudnnCheck(
        cudnnSetConvolution2dDescriptor(conv, i(p.pad_h), i(p.pad_w), i(g.stride_h),
                                        i(g.stride_w), i(g.dilation_h), i(g.dilation_w),
                                        CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
        "cudnnSetConvolution2dDescriptor"));
    RETURN_IF_ERROR(CudnnCheck(cudnnSetConvolutionGroupCount(conv, i(g.groups)),
                               "cudnnSetConvolutionGroupCount"));
    RETURN_IF_ERROR(CudnnCheck(cudnnSetConvolutionMathType(conv, CUDNN_FMA_MATH),
                               "cudnnSetConvolutionMathType"));
    // cuDNN's output size must be TensorFlow's.
    int n = 0, c = 0, h = 0, wd = 0;
    RETURN_IF_ERROR(CudnnCheck(cudnnGetConvolution2dForwardOutputDim(conv, x, w, &n, &c, &h, &wd),
                               "cudnnGetConvolution2dForwardOutputDim"));
    if (n != g.batch || c != g.out_depth || h != g.out_rows || wd != g.out_cols) {
      return absl::InternalError(absl::StrCat("cuDNN's output [", n, ",", h, ",", wd, ",", c,
                                              "] differs from TensorFlow's [", g.batch, ",",
                                              g.out_rows, ",", g.out_cols, ",", g.out_depth, "]"));
    }
    return absl::OkStatus();
  }

  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
};

// An algorithm and the workspace it needs.
struct Algo {
  int algo = 0;
  size_t workspace = 0;
};

constexpr size_t kMaxWorkspace = size_t{4} << 30;

bool IsTensorOpMath(cudnnMathType_t m) {
  return m == CUDNN_TENSOR_OP_MATH || m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
}

// cuDNN's heuristic candidates (best first) that work with FMA math and
// whose workspace cuDNN can state and we can afford.
// Perf: cudnnConvolution*AlgoPerf_t; query fills perf; workspace(algo, &bytes).
template <typename Perf, int kCount, typename Query, typename Workspace>
absl::StatusOr<std::vector<Algo>> Candidates(const char* what, Query query, Workspace workspace) {
  Perf perf[kCount];
  int returned = 0;
  RETURN_IF_ERROR(CudnnCheck(query(kCount, &returned, perf), what));
  std::vector<Algo> algos;
  for (int k = 0; k < returned; ++k) {
    if (perf[k].status != CUDNN_STATUS_SUCCESS || IsTensorOpMath(perf[k].mathType)) continue;
    size_t bytes = 0;
    if (workspace(perf[k].algo, &bytes) != CUDNN_STATUS_SUCCESS || bytes > kMaxWorkspace) continue;
    algos.push_back(Algo{static_cast<int>(perf[k].algo), bytes});
  }
  if (algos.empty()) return absl::InternalError(absl::StrCat(what, ": no usable cuDNN algorithm"));
  return algos;
}

enum class ConvKind { kForward, kBackwardData, kBackwardFilter };

absl::StatusOr<std::vector<Algo>> ChooseAlgos(ConvKind kind, cudnnHandle_t h, const ConvDescriptors& d) {
  switch (kind) {
    case ConvKind::kForward:
      return Candidates<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT>(
          "cudnnGetConvolutionForwardAlgorithm_v7",
          [&](int n, int* got, cudnnConvolutionFwdAlgoPerf_t* perf) {
            return cudnnGetConvolutionForwardAlgorithm_v7(h, d.x, d.w, d.conv, d.y, n, got, perf);
          },
          [&](cudnnConvolutionFwdAlgo_t a, size_t* bytes) {
            return cudnnGetConvolutionForwardWorkspaceSize(h, d.x, d.w, d.conv, d.y, a, bytes);
          });
    case ConvKind::kBackwardData:
      return Candidates<cudnnConvolutionBwdDataAlgoPerf_t, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT>(
          "cudnnGetConvolutionBackwardDataAlgorithm_v7",
          [&](int n, int* got, cudnnConvolutionBwdDataAlgoPerf_t* perf) {
            return cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d.w, d.y, d.conv, d.x, n, got,
                                                               perf);
          },
          [&](cudnnConvolutionBwdDataAlgo_t a, size_t* bytes) {
            return cudnnGetConvolutionBackwardDataWorkspaceSize(h, d.w, d.y, d.conv, d.x, a,
                                                                bytes);
          });
    case ConvKind::kBackwardFilter:
      return Candidates<cudnnConvolutionBwdFilterAlgoPerf_t, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT>(
          "cudnnGetConvolutionBackwardFilterAlgorithm_v7",
          [&](int n, int* got, cudnnConvolutionBwdFilterAlgoPerf_t* perf) {
            return cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d.x, d.y, d.conv, d.w, n, got,
                                                                 perf);
          },
          [&](cudnnConvolutionBwdFilterAlgo_t a, size_t* bytes) {
            return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, d.x, d.y, d.conv, d.w, a,
                                                                  bytes);
          });
  }
  return absl::InternalError("unknown convolution kind");
}

// --- the kernels ------------------------------------------------------------------------

// The device buffers of one convolution call (pointers into tensors the
// caller keeps alive until the work is queued).
struct ConvBuffers {
  const float* x = nullptr;  // (padded) input
  const float* w = nullptr;  // KRSC filter
  const float* y = nullptr;  // output gradient (backward kinds)
  float* out = nullptr;      // y (forward), padded dx, or KRSC dw
};

// The shared part of the three convolution kernels: attrs, the algorithm
// cache, and running one cuDNN call.
class CudnnConvOp : public OpKernel {
 public:
  CudnnConvOp(OpKernelConstruction* c, ConvKind kind)
      : OpKernel(c), kind_(kind), attrs_(AttrsOrRecordError(c, ReadConv2DAttrs(c->def()))) {}

 protected:
  absl::Status RequireNhwc(const OpKernelContext& ctx) const {
    if (!attrs_.nchw) return absl::OkStatus();
    return ctx.InvalidArgument("only the NHWC data format is supported on the GPU, got NCHW");
  }

  absl::StatusOr<ConvGeometry> Geometry(const OpKernelContext& ctx, const TensorShape& input,
                                        const TensorShape& filter) const {
    absl::StatusOr<ConvGeometry> g = MakeConvGeometry(attrs_, input, filter);
    if (!g.ok()) return WithPrefix(g.status(), ctx.Prefix());
    return g;
  }

  // A device temporary of `shape` floats.
  static absl::StatusOr<Tensor> Temp(OpKernelContext* ctx, const TensorShape& shape) {
    absl::StatusOr<Tensor> t = GpuOf(ctx)->AllocateTemp(DT_FLOAT, shape);
    if (!t.ok()) return WithPrefix(t.status(), ctx->Prefix());
    return t;
  }

  // The filter `hwio` in KRSC layout, in a new device temporary.
  static absl::StatusOr<Tensor> ToKrsc(OpKernelContext* ctx, const ConvGeometry& g,
                                       const float* hwio) {
    ASSIGN_OR_RETURN(Tensor krsc, Temp(ctx, TensorShape({g.out_depth, g.filter_rows,
                                                         g.filter_cols, g.filter_depth})));
    LaunchHwioToKrsc(GpuOf(ctx)->stream(), hwio, static_cast<float*>(krsc.raw_data()),
                     g.filter_rows, g.filter_cols, g.filter_depth, g.out_depth);
    return krsc;
  }

  // The input padded for cuDNN, or `input` itself when no padding is needed.
  static absl::StatusOr<Tensor> PaddedInput(OpKernelContext* ctx, const ConvPlan& p,
                                            const Tensor& input) {
    if (!p.padded()) return input;
    ASSIGN_OR_RETURN(Tensor padded, Temp(ctx, PaddedShape(p)));
    LaunchPadImage(GpuOf(ctx)->stream(), p.pad, static_cast<const float*>(input.raw_data()),
                   static_cast<float*>(padded.raw_data()));
    return padded;
  }

  static TensorShape PaddedShape(const ConvPlan& p) {
    return TensorShape({p.g.batch, p.pad.padded_rows, p.pad.padded_cols, p.g.in_depth});
  }

  // Queues this kernel's cuDNN call for plan `p` on the device's stream.
  absl::Status Run(OpKernelContext* ctx, const ConvPlan& p, const ConvBuffers& b) {
    // The launches queued for this call so far (a filter transposed, an
    // input padded) report their errors here: tuning clears the ones it meets.
    RETURN_IF_ERROR(LaunchStatus(ctx));
    GpuDevice* gpu = GpuOf(ctx);
    absl::StatusOr<cudnnHandle_t> handle = gpu->cudnn();
    if (!handle.ok()) return WithPrefix(handle.status(), ctx->Prefix());
    absl::MutexLock l(gpu->cudnn_mutex());
    ASSIGN_OR_RETURN(CachedPlan* plan, PlanFor(ctx, *handle, p, b));
    std::vector<Algo>& algos = plan->algos;
    // The fastest candidate normally runs; one that turns out not to
    // support this configuration is dropped for the next.
    for (size_t k = 0; k < algos.size(); ++k) {
      Tensor workspace;
      RETURN_IF_ERROR(Workspace(ctx, algos[k], &workspace));
      const cudnnStatus_t st = Call(*handle, plan->d, b, algos[k], workspace);
      if (st == CUDNN_STATUS_NOT_SUPPORTED && k + 1 < algos.size()) continue;
      if (k > 0) algos.erase(algos.begin(), algos.begin() + k);
      absl::Status s = CudnnCheck(st, "cuDNN convolution");
      return s.ok() ? s : WithPrefix(s, ctx->Prefix());
    }
    return absl::InternalError(absl::StrCat(ctx->Prefix(), "no cuDNN algorithm ran"));
  }

  static absl::Status Workspace(OpKernelContext* ctx, const Algo& algo, Tensor* workspace) {
    if (algo.workspace == 0) return absl::OkStatus();
    absl::StatusOr<Tensor> t = GpuOf(ctx)->AllocateTemp(
        DT_UINT8, TensorShape({static_cast<int64_t>(algo.workspace)}));
    if (!t.ok()) return WithPrefix(t.status(), ctx->Prefix());
    *workspace = *std::move(t);
    return absl::OkStatus();
  }

  // TensorFlow's autotuning, once per shape: every candidate runs twice on
  // the stream, the second run timed with events; the list is reordered
  // fastest first, candidates that fail are dropped. cuDNN's heuristics
  // alone picked, for this CNN's NHWC backward filter, an algorithm 30 times
  // slower than the best one.
  std::vector<Algo> Tune(OpKernelContext* ctx, cudnnHandle_t h, const ConvDescriptors& d,
                         const ConvBuffers& b, std::vector<Algo> algos) const {
    cudaStream_t stream = GpuOf(ctx)->stream();
    cudaEvent_t start = nullptr, stop = nullptr;
    if (cudaEventCreate(&start) != cudaSuccess || cudaEventCreate(&stop) != cudaSuccess) {
      (void)cudaGetLastError();
      return algos;
    }
    std::vector<std::pair<float, Algo>> timed;
    for (const Algo& a : algos) {
      Tensor workspace;
      if (!Workspace(ctx, a, &workspace).ok()) continue;
      if (Call(h, d, b, a, workspace) != CUDNN_STATUS_SUCCESS) continue;
      cudaEventRecord(start, stream);
      const cudnnStatus_t st = Call(h, d, b, a, workspace);
      cudaEventRecord(stop, stream);
      float ms = 0;
      if (st != CUDNN_STATUS_SUCCESS || cudaEventSynchronize(stop) != cudaSuccess ||
          cudaEventElapsedTime(&ms, start, stop) != cudaSuccess) {
        (void)cudaGetLastError();
        continue;
      }
      timed.push_back({ms, a});
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    if (timed.empty()) return algos;  // Run reports the first one's failure.
    std::stable_sort(timed.begin(), timed.end(),
                     [](const auto& x, const auto& y) { return x.first < y.first; });
    std::vector<Algo> sorted;
    for (const auto& [ms, a] : timed) sorted.push_back(a);
    return sorted;
  }

  // One cuDNN call of this kernel's kind with `algo`.
  cudnnStatus_t Call(cudnnHandle_t h, const ConvDescriptors& d, const ConvBuffers& b,
                     const Algo& algo, Tensor& workspace) const {
    void* ws = algo.workspace > 0 ? workspace.raw_data() : nullptr;
    const float one = 1.0f, zero = 0.0f;
    switch (kind_) {
      case ConvKind::kForward:
        return cudnnConvolutionForward(h, &one, d.x, b.x, d.w, b.w, d.conv,
                                       static_cast<cudnnConvolutionFwdAlgo_t>(algo.algo), ws,
                                       algo.workspace, &zero, d.y, b.out);
      case ConvKind::kBackwardData:
        return cudnnConvolutionBackwardData(h, &one, d.w, b.w, d.y, b.y, d.conv,
                                            static_cast<cudnnConvolutionBwdDataAlgo_t>(algo.algo),
                                            ws, algo.workspace, &zero, d.x, b.out);
      case ConvKind::kBackwardFilter:
        return cudnnConvolutionBackwardFilter(
            h, &one, d.x, b.x, d.y, b.y, d.conv,
            static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo.algo), ws, algo.workspace, &zero,
            d.w, b.out);
    }
    return CUDNN_STATUS_BAD_PARAM;
  }

  const ConvKind kind_;
  const Conv2DAttrs attrs_;

 private:
  // A plan's descriptors and its candidates, fastest first; made and tuned
  // on the plan's first call, then read and trimmed under the device's
  // cudnn_mutex().
  struct CachedPlan {
    ConvDescriptors d;
    std::vector<Algo> algos;
  };

  // The cached plan of `p`, made on its first call (tuned with `b`'s buffers).
  // REQUIRES: the device's cudnn_mutex() held.
  absl::StatusOr<CachedPlan*> PlanFor(OpKernelContext* ctx, cudnnHandle_t h, const ConvPlan& p,
                                      const ConvBuffers& b) {
    const PlanKey key = KeyOf(p);
    {
      absl::MutexLock l(&mu_);
      auto it = plans_.find(key);
      if (it != plans_.end()) return it->second.get();
    }
    auto plan = std::make_unique<CachedPlan>();
    absl::Status s = plan->d.Init(p);
    if (!s.ok()) return WithPrefix(s, ctx->Prefix());
    absl::StatusOr<std::vector<Algo>> algos = ChooseAlgos(kind_, h, plan->d);
    if (!algos.ok()) return WithPrefix(algos.status(), ctx->Prefix());
    plan->algos = Tune(ctx, h, plan->d, b, *std::move(algos));
    absl::MutexLock l(&mu_);
    return plans_.try_emplace(key, std::move(plan)).first->second.get();
  }

  absl::Mutex mu_;
  std::map<PlanKey, std::unique_ptr<CachedPlan>> plans_ ABSL_GUARDED_BY(mu_);
};

class Conv2DGpuOp : public CudnnConvOp {
 public:
  explicit Conv2DGpuOp(OpKernelConstruction* c) : CudnnConvOp(c, ConvKind::kForward) {}

  absl::Status Compute(OpKernelContext* ctx) override {
    RETURN_IF_ERROR(RequireNhwc(*ctx));
    const Tensor& input = ctx->input(0);
    const Tensor& filter = ctx->input(1);
    if (input.dims() != 4) {
      return ctx->InvalidArgument("convolution input must be 4-dimensional: ",
                                  input.shape().DebugString());
    }
    if (filter.dims() != 4) {
      return ctx->InvalidArgument("convolution filter must be 4-dimensional: ",
                                  filter.shape().DebugString());
    }
    ASSIGN_OR_RETURN(ConvGeometry g, Geometry(*ctx, input.shape(), filter.shape()));
    Tensor* out = ctx->allocate_output_for_overwrite(
        0, TensorShape({g.batch, g.out_rows, g.out_cols, g.out_depth}));
    if (!out->IsInitialized() || out->NumElements() == 0) return absl::OkStatus();
    ASSIGN_OR_RETURN(ConvPlan p, MakePlan(*ctx, g));
    ASSIGN_OR_RETURN(Tensor krsc, ToKrsc(ctx, g, static_cast<const float*>(filter.raw_data())));
    ASSIGN_OR_RETURN(Tensor x, PaddedInput(ctx, p, input));
    ConvBuffers b;
    b.x = static_cast<const float*>(x.raw_data());
    b.w = static_cast<const float*>(krsc.raw_data());
    b.out = static_cast<float*>(out->raw_data());
    RETURN_IF_ERROR(Run(ctx, p, b));
    return LaunchStatus(ctx);
  }
};

class Conv2DBackpropInputGpuOp : public CudnnConvOp {
 public:
  explicit Conv2DBackpropInputGpuOp(OpKernelConstruction* c)
      : CudnnConvOp(c, ConvKind::kBackwardData) {}

  absl::Status Compute(OpKernelContext* ctx) override {
    RETURN_IF_ERROR(RequireNhwc(*ctx));
    const Tensor& filter = ctx->input(1);
    const Tensor& dy = ctx->input(2);
    TensorShape input_shape;
    ASSIGN_OR_RETURN(ConvGeometry g, BackpropInputGeometry(*ctx, attrs_, &input_shape));
    Tensor* dx = ctx->allocate_output(0, input_shape);  // Zeros when dy is empty.
    if (!dx->IsInitialized() || dx->NumElements() == 0 || dy.NumElements() == 0) {
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(ConvPlan p, MakePlan(*ctx, g));
    ASSIGN_OR_RETURN(Tensor krsc, ToKrsc(ctx, g, static_cast<const float*>(filter.raw_data())));
    Tensor padded_dx = *dx;
    if (p.padded()) {
      ASSIGN_OR_RETURN(padded_dx, Temp(ctx, PaddedShape(p)));
    }
    ConvBuffers b;
    b.w = static_cast<const float*>(krsc.raw_data());
    b.y = static_cast<const float*>(dy.raw_data());
    b.out = static_cast<float*>(padded_dx.raw_data());
    RETURN_IF_ERROR(Run(ctx, p, b));
    if (p.padded()) {
      LaunchCropImage(GpuOf(ctx)->stream(), p.pad, static_cast<const float*>(padded_dx.raw_data()),
                      static_cast<float*>(dx->raw_data()));
    }
    return LaunchStatus(ctx);
  }
};

class Conv2DBackpropFilterGpuOp : public CudnnConvOp {
 public:
  explicit Conv2DBackpropFilterGpuOp(OpKernelConstruction* c)
      : CudnnConvOp(c, ConvKind::kBackwardFilter) {}

  absl::Status Compute(OpKernelContext* ctx) override {
    RETURN_IF_ERROR(RequireNhwc(*ctx));
    const Tensor& input = ctx->input(0);
    const Tensor& dy = ctx->input(2);
    TensorShape filter_shape;
    ASSIGN_OR_RETURN(ConvGeometry g, BackpropFilterGeometry(*ctx, attrs_, &filter_shape));
    Tensor* dw = ctx->allocate_output(0, filter_shape);  // Zeros when dy is empty.
    if (!dw->IsInitialized() || dw->NumElements() == 0 || dy.NumElements() == 0) {
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(ConvPlan p, MakePlan(*ctx, g));
    ASSIGN_OR_RETURN(Tensor x, PaddedInput(ctx, p, input));
    ASSIGN_OR_RETURN(Tensor krsc, Temp(ctx, TensorShape({g.out_depth, g.filter_rows,
                                                         g.filter_cols, g.filter_depth})));
    ConvBuffers b;
    b.x = static_cast<const float*>(x.raw_data());
    b.y = static_cast<const float*>(dy.raw_data());
    b.out = static_cast<float*>(krsc.raw_data());
    RETURN_IF_ERROR(Run(ctx, p, b));
    LaunchKrscToHwio(GpuOf(ctx)->stream(), static_cast<const float*>(krsc.raw_data()),
                     static_cast<float*>(dw->raw_data()), g.filter_rows, g.filter_cols,
                     g.filter_depth, g.out_depth);
    return LaunchStatus(ctx);
  }
};

// --- max pooling ------------------------------------------------------------------------

PoolWindow WindowOf(const PoolGeometry& g) {
  return PoolWindow{g.batch,    g.in_rows,     g.in_cols,  g.depth,    g.window_rows,
                    g.window_cols, g.stride_h, g.stride_w, g.out_rows, g.out_cols,
                    g.pad_top,  g.pad_left};
}

class MaxPoolGpuOp : public OpKernel {
 public:
  explicit MaxPoolGpuOp(OpKernelConstruction* c)
      : OpKernel(c), attrs_(AttrsOrRecordError(c, ReadPool2DAttrs(c->def()))) {}

  absl::Status Compute(OpKernelContext* ctx) override {
    if (attrs_.nchw) {
      return ctx->InvalidArgument("only the NHWC data format is supported on the GPU, got NCHW");
    }
    const Tensor& input = ctx->input(0);
    if (attrs_.depth_pooling() && input.dims() == 4) return DepthMaxPool(ctx, input);
    ASSIGN_OR_RETURN(const PoolGeometry g, MaxPoolGeometry(*ctx, attrs_, input));
    Tensor* out = ctx->allocate_output_for_overwrite(
        0, TensorShape({g.batch, g.out_rows, g.out_cols, g.depth}));
    if (!out->IsInitialized() || out->NumElements() == 0) return absl::OkStatus();
    LaunchMaxPool(GpuOf(ctx)->stream(), WindowOf(g), static_cast<const float*>(input.raw_data()),
                  static_cast<float*>(out->raw_data()));
    return LaunchStatus(ctx);
  }

 private:
  absl::Status DepthMaxPool(OpKernelContext* ctx, const Tensor& input) const {
    ASSIGN_OR_RETURN(const TensorShape shape, DepthMaxPoolShape(*ctx, attrs_, input));
    const int64_t k = attrs_.ksize[3];
    Tensor* out = ctx->allocate_output_for_overwrite(0, shape);
    if (!out->IsInitialized() || out->NumElements() == 0) return absl::OkStatus();
    LaunchDepthMaxPool(GpuOf(ctx)->stream(), static_cast<const float*>(input.raw_data()),
                       static_cast<float*>(out->raw_data()), out->NumElements(), k);
    return LaunchStatus(ctx);
  }

  Pool2DAttrs attrs_;
};

class MaxPoolGradGpuOp : public OpKernel {
 public:
  explicit MaxPoolGradGpuOp(OpKernelConstruction* c)
      : OpKernel(c), attrs_(AttrsOrRecordError(c, ReadPool2DAttrs(c->def()))) {}

  absl::Status Compute(OpKernelContext* ctx) override {
    if (attrs_.nchw) {
      return ctx->InvalidArgument("only the NHWC data format is supported on the GPU, got NCHW");
    }
    const Tensor& x = ctx->input(0);
    const Tensor& dy = ctx->input(2);
    ASSIGN_OR_RETURN(const PoolGeometry g, MaxPoolGradGeometry(*ctx, attrs_, x, ctx->input(1), dy));
    Tensor* dx = ctx->allocate_output(0, x.shape());  // Zeros when dy is empty.
    if (!dx->IsInitialized() || dx->NumElements() == 0 || dy.NumElements() == 0) {
      return absl::OkStatus();
    }
    LaunchMaxPoolGrad(GpuOf(ctx)->stream(), WindowOf(g), static_cast<const float*>(x.raw_data()),
                      static_cast<const float*>(dy.raw_data()), static_cast<float*>(dx->raw_data()));
    return LaunchStatus(ctx);
  }

 private:
  Pool2DAttrs attrs_;
};

// --- average pooling --------------------------------------------------------------------

class AvgPoolGpuOp : public OpKernel {
 public:
  explicit AvgPoolGpuOp(OpKernelConstruction* c)
      : OpKernel(c), attrs_(AttrsOrRecordError(c, ReadPool2DAttrs(c->def()))) {}

  absl::Status Compute(OpKernelContext* ctx) override {
    if (attrs_.nchw) {
      return ctx->InvalidArgument("only the NHWC data format is supported on the GPU, got NCHW");
    }
    const Tensor& input = ctx->input(0);
    ASSIGN_OR_RETURN(const PoolGeometry g, AvgPoolGeometry(*ctx, attrs_, input));
    Tensor* out = ctx->allocate_output_for_overwrite(
        0, TensorShape({g.batch, g.out_rows, g.out_cols, g.depth}));
    if (!out->IsInitialized() || out->NumElements() == 0) return absl::OkStatus();
    LaunchAvgPool(GpuOf(ctx)->stream(), WindowOf(g), static_cast<const float*>(input.raw_data()),
                  static_cast<float*>(out->raw_data()));
    return LaunchStatus(ctx);
  }

 private:
  Pool2DAttrs attrs_;
};

class AvgPoolGradGpuOp : public OpKernel {
 public:
  explicit AvgPoolGradGpuOp(OpKernelConstruction* c)
      : OpKernel(c), attrs_(AttrsOrRecordError(c, ReadPool2DAttrs(c->def()))) {}

  absl::Status Compute(OpKernelContext* ctx) override {
    if (attrs_.nchw) {
      return ctx->InvalidArgument("only the NHWC data format is supported on the GPU, got NCHW");
    }
    TensorShape input_shape;
    ASSIGN_OR_RETURN(const PoolGeometry g, AvgPoolGradGeometry(*ctx, attrs_, &input_shape));
    const Tensor& dy = ctx->input(1);
    // Every element is written, zero where no window lies (an empty dy).
    Tensor* dx = ctx->allocate_output_for_overwrite(0, input_shape);
    if (!dx->IsInitialized() || dx->NumElements() == 0) return absl::OkStatus();
    LaunchAvgPoolGrad(GpuOf(ctx)->stream(), WindowOf(g), static_cast<const float*>(dy.raw_data()),
                      static_cast<float*>(dx->raw_data()));
    return LaunchStatus(ctx);
  }

 private:
  Pool2DAttrs attrs_;
};

// --- registration -----------------------------------------------------------------------

REGISTER_KERNEL(KernelDefBuilder("Conv2D").Device(kDeviceGPU).TypeConstraint<float>("T"),
                Conv2DGpuOp);
REGISTER_KERNEL(KernelDefBuilder("Conv2DBackpropInput")
                    .Device(kDeviceGPU)
                    .TypeConstraint<float>("T")
                    .HostMemory("input_sizes"),
                Conv2DBackpropInputGpuOp);
REGISTER_KERNEL(KernelDefBuilder("Conv2DBackpropFilter")
                    .Device(kDeviceGPU)
                    .TypeConstraint<float>("T")
                    .HostMemory("filter_sizes"),
                Conv2DBackpropFilterGpuOp);
REGISTER_KERNEL(KernelDefBuilder("MaxPool").Device(kDeviceGPU).TypeConstraint<float>("T"),
                MaxPoolGpuOp);
REGISTER_KERNEL(KernelDefBuilder("MaxPoolGrad").Device(kDeviceGPU).TypeConstraint<float>("T"),
                MaxPoolGradGpuOp);
REGISTER_KERNEL(KernelDefBuilder("AvgPool").Device(kDeviceGPU).TypeConstraint<float>("T"),
                AvgPoolGpuOp);
REGISTER_KERNEL(KernelDefBuilder("AvgPoolGrad")
                    .Device(kDeviceGPU)
                    .TypeConstraint<float>("T")
                    .HostMemory("orig_input_shape"),
                AvgPoolGradGpuOp);

}  // namespace
}  // namespace gpu
}  // namespace dflow
