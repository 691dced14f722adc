// Reductions and row-wise ops on a GPU (float): Sum, Mean, Max, Min, Prod
// (reduction_indices in host memory), ArgMax and ArgMin (float and double),
// BiasAddGrad, Softmax, LogSoftmax, SparseSoftmaxCrossEntropyWithLogits and
// SoftmaxCrossEntropyWithLogits.
// Shapes are checked as the CPU kernels check them (reduction_ops.cc,
// nn_ops.cc, nn_grad_ops.cc), with their messages.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "dflow/framework/kernel.h"
#include "dflow/gpu/cwise_launch.h"
#include "dflow/gpu/gpu_device.h"
#include "dflow/gpu/reduction_launch.h"
#include "dflow/ops/array_util.h"
#include "dflow/ops/conv_util.h"
#include "dflow/ops/reduction_util.h"
#include "dflow/ops/xent_util.h"

namespace dflow {
namespace gpu {
namespace {

// --- planning -------------------------------------------------------------------

// Appends a dimension of `size` and input stride `stride` to the kept or
// reduced list of `x`; Unimplemented past kMaxReduceDims.
absl::Status AddDim(ReduceIndex* x, bool reduced, int64_t size, int64_t stride) {
  int& rank = reduced ? x->reduced_rank : x->kept_rank;
  if (rank == kMaxReduceDims) {
    return absl::UnimplementedError(
        absl::StrCat("reductions over more than ", kMaxReduceDims, " separate groups of axes"));
  }
  (reduced ? x->reduced_dims : x->kept_dims)[rank] = size;
  (reduced ? x->reduced_strides : x->kept_strides)[rank] = stride;
  ++rank;
  return absl::OkStatus();
}

// `shape` with size-1 dimensions dropped and neighbours of one kind
// (kept / reduced) merged, as a ReduceIndex over a row-major input.
absl::StatusOr<ReduceIndex> IndexOf(const TensorShape& shape, const std::vector<bool>& reduce) {
  std::vector<int64_t> sizes;
  std::vector<bool> reduced;
  for (int d = 0; d < shape.dims(); ++d) {
    if (shape.dim_size(d) == 1) continue;
    if (!sizes.empty() && reduced.back() == reduce[d]) {
      sizes.back() *= shape.dim_size(d);
    } else {
      sizes.push_back(shape.dim_size(d));
      reduced.push_back(reduce[d]);
    }
  }
  ReduceIndex x;
  std::vector<int64_t> strides(sizes.size());
  int64_t stride = 1;
  for (int g = static_cast<int>(sizes.size()) - 1; g >= 0; --g) {
    strides[g] = stride;
    stride *= sizes[g];
  }
  for (size_t g = 0; g < sizes.size(); ++g) RETURN_IF_ERROR(AddDim(&x, reduced[g], sizes[g], strides[g]));
  return x;
}

// The value of a reduction of no elements, as the CPU kernel's.
float EmptyValue(Reduce op) {
  switch (op) {
    case Reduce::kMean: return std::numeric_limits<float>::quiet_NaN();  // 0 / 0
    case Reduce::kMax: return -std::numeric_limits<float>::infinity();
    case Reduce::kMin: return std::numeric_limits<float>::infinity();
    case Reduce::kProd: return 1.0f;
    default: return 0.0f;
  }
}

// out = the reduction of `in` over `x`, count elements per output.
absl::Status RunReduce(OpKernelContext* ctx, Reduce op, const Tensor& in, Tensor* out,
                       int64_t count, const ReduceIndex& x) {
  GpuDevice* gpu = GpuOf(ctx);
  const int64_t num_out = out->NumElements();
  if (count == 0) {
    LaunchFillFloat(gpu->stream(), EmptyValue(op), MutableElementsOf<float>(out), num_out);
    return LaunchStatus(ctx);
  }
  Tensor scratch;
  const int64_t scratch_elements = ReduceScratchElements(num_out, count, x);
  if (scratch_elements > 0) {
    ASSIGN_OR_RETURN(scratch, gpu->AllocateTemp(DT_FLOAT, TensorShape({scratch_elements})));
  }
  LaunchReduce(gpu->stream(), op, ElementsOf<float>(in), MutableElementsOf<float>(out), num_out, count, x,
               static_cast<float*>(scratch.raw_data()));
  return LaunchStatus(ctx);
}

// --- Sum, Mean, Max, Min, Prod --------------------------------------------------------

template <Reduce kOp>
class ReductionGpuOp : public OpKernel {
 public:
  explicit ReductionGpuOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("keep_dims", &keep_dims_).IgnoreError();  // Recorded on c.
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    absl::StatusOr<std::vector<bool>> mask = ReductionMask(ctx->input(1), PartialShape(x.shape()));
    if (!mask.ok()) return ctx->InvalidArgument(mask.status().message());
    const TensorShape out_shape = ReducedShape(x.shape(), *mask, keep_dims_);
    absl::StatusOr<ReduceIndex> index = IndexOf(x.shape(), *mask);
    if (!index.ok()) return ctx->InvalidArgument(index.status().message());
    if (index->reduced_rank == 0 && x.NumElements() > 0) {
      ASSIGN_OR_RETURN(Tensor same, x.Reshaped(out_shape));  // Nothing to reduce.
      ctx->set_output(0, same);
      return absl::OkStatus();
    }
    Tensor* out = OutputForOverwrite(ctx, 0, out_shape);
    if (out == nullptr || out->NumElements() == 0) return absl::OkStatus();
    return RunReduce(ctx, kOp, x, out, x.NumElements() / out->NumElements(), *index);
  }

 private:
  bool keep_dims_ = false;
};

#define DFLOW_GPU_REDUCTION(NAME, OP)            \
  REGISTER_KERNEL(KernelDefBuilder(NAME)         \
                      .Device(kDeviceGPU)        \
                      .TypeConstraint<float>("T") \
                      .HostMemory("reduction_indices"), \
                  ReductionGpuOp<Reduce::OP>)
DFLOW_GPU_REDUCTION("Sum", kSum);
DFLOW_GPU_REDUCTION("Mean", kMean);
DFLOW_GPU_REDUCTION("Max", kMax);
DFLOW_GPU_REDUCTION("Min", kMin);
DFLOW_GPU_REDUCTION("Prod", kProd);
#undef DFLOW_GPU_REDUCTION

// --- ArgMax, ArgMin ----------------------------------------------------------------------

// The accuracy of a classifier (tf.argmax of the logits against the labels)
// without sending the logits to the host.
template <typename T, bool kMin>
class ArgExtremeGpuOp : public OpKernel {
 public:
  explicit ArgExtremeGpuOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("output_type", &output_type_).IgnoreError();  // Recorded on c.
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    absl::StatusOr<ArgExtremeLayout> l = ArgExtremeLayoutOf(x.shape(), ctx->input(1));
    if (!l.ok()) return ctx->InvalidArgument(l.status().message());
    Tensor* out = OutputForOverwrite(ctx, 0, l->output);
    if (out == nullptr) return absl::OkStatus();
    cudaStream_t s = GpuOf(ctx)->stream();
    if (output_type_ == DT_INT32) {
      LaunchArgExtreme(s, kMin, ElementsOf<T>(x), l->outer, l->n, l->inner,
                       MutableElementsOf<int32_t>(out));
    } else {
      LaunchArgExtreme(s, kMin, ElementsOf<T>(x), l->outer, l->n, l->inner,
                       MutableElementsOf<int64_t>(out));
    }
    return LaunchStatus(ctx);
  }

 private:
  DataType output_type_ = DT_INT64;
};

#define DFLOW_GPU_ARG_EXTREME(NAME, T, MIN)                                                \
  REGISTER_KERNEL(                                                                         \
      KernelDefBuilder(NAME).Device(kDeviceGPU).TypeConstraint<T>("T").HostMemory("dimension"), \
      ArgExtremeGpuOp<T, MIN>)
DFLOW_GPU_ARG_EXTREME("ArgMax", float, false);
DFLOW_GPU_ARG_EXTREME("ArgMax", double, false);
DFLOW_GPU_ARG_EXTREME("ArgMin", float, true);
DFLOW_GPU_ARG_EXTREME("ArgMin", double, true);
#undef DFLOW_GPU_ARG_EXTREME

// --- L2Loss ----------------------------------------------------------------------------

// sum(t^2) / 2 (tf.nn.l2_loss; the norms of clip_by_global_norm), from the
// kernels above: the squares, their sum, then half of it.
class L2LossGpuOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& t = ctx->input(0);
    Tensor* out = OutputForOverwrite(ctx, 0, TensorShape({}));
    if (out == nullptr) return absl::OkStatus();
    GpuDevice* gpu = GpuOf(ctx);
    const int64_t n = t.NumElements();
    float* loss = MutableElementsOf<float>(out);
    if (n == 0) {
      LaunchFillFloat(gpu->stream(), 0.0f, loss, 1);
      return LaunchStatus(ctx);
    }
    ASSIGN_OR_RETURN(Tensor squares, gpu->AllocateTemp(DT_FLOAT, t.shape()));
    LaunchUnary(gpu->stream(), Unary::kSquare, ElementsOf<float>(t),
                MutableElementsOf<float>(&squares), n);
    RETURN_IF_ERROR(LaunchStatus(ctx));
    ASSIGN_OR_RETURN(ReduceIndex all, IndexOf(TensorShape({n}), {true}));
    RETURN_IF_ERROR(RunReduce(ctx, Reduce::kSum, squares, out, n, all));
    ASSIGN_OR_RETURN(Tensor half, gpu->AllocateTemp(DT_FLOAT, TensorShape({})));
    LaunchFillFloat(gpu->stream(), 0.5f, MutableElementsOf<float>(&half), 1);
    LaunchBinary(gpu->stream(), Binary::kMul, loss, ElementsOf<float>(half), loss, 1,
                 BroadcastIndex());
    return LaunchStatus(ctx);
  }
};
REGISTER_KERNEL(KernelDefBuilder("L2Loss").Device(kDeviceGPU).TypeConstraint<float>("T"),
                L2LossGpuOp);

// --- BiasAddGrad -------------------------------------------------------------------------

class BiasAddGradGpuOp : public OpKernel {
 public:
  explicit BiasAddGradGpuOp(OpKernelConstruction* c) : OpKernel(c) {
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
    if (dy.NumElements() == 0) {
      ctx->allocate_output(0, TensorShape({channels}));  // Zeros.
      return LaunchStatus(ctx);
    }
    Tensor* out = OutputForOverwrite(ctx, 0, TensorShape({channels}));
    if (out == nullptr) return absl::OkStatus();
    // out_backprop as [outer, channels, inner]; sum over outer and inner.
    int64_t inner = 1;
    for (int d = cd + 1; d < dy.dims(); ++d) inner *= dy.dim_size(d);
    const int64_t outer = dy.NumElements() / (inner * channels);
    std::vector<bool> mask = {true, false, true};
    absl::StatusOr<ReduceIndex> index = IndexOf(TensorShape({outer, channels, inner}), mask);
    if (!index.ok()) return ctx->InvalidArgument(index.status().message());
    if (index->reduced_rank == 0) {  // outer == inner == 1: a copy.
      return CudaCheck(cudaMemcpyAsync(out->raw_data(), dy.raw_data(), channels * sizeof(float),
                                       cudaMemcpyDeviceToDevice, GpuOf(ctx)->stream()),
                       "BiasAddGrad copy");
    }
    return RunReduce(ctx, Reduce::kSum, dy, out, outer * inner, *index);
  }

 private:
  bool nchw_ = false;
};
REGISTER_KERNEL(KernelDefBuilder("BiasAddGrad").Device(kDeviceGPU).TypeConstraint<float>("T"),
                BiasAddGradGpuOp);

// --- Softmax, LogSoftmax --------------------------------------------------------------------

template <bool kLog>
class SoftmaxGpuOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& logits = ctx->input(0);
    if (logits.dims() < 1) {
      return ctx->InvalidArgument("logits must have >= 1 dimension, got ",
                                  logits.shape().DebugString());
    }
    Tensor* out = OutputForOverwrite(ctx, 0, logits.shape());
    if (out == nullptr || logits.NumElements() == 0) return absl::OkStatus();
    const int64_t cols = logits.dim_size(logits.dims() - 1);
    LaunchSoftmax(GpuOf(ctx)->stream(), ElementsOf<float>(logits), MutableElementsOf<float>(out),
                  logits.NumElements() / cols, cols, kLog);
    return LaunchStatus(ctx);
  }
};
REGISTER_KERNEL(KernelDefBuilder("Softmax").Device(kDeviceGPU).TypeConstraint<float>("T"),
                SoftmaxGpuOp<false>);
REGISTER_KERNEL(KernelDefBuilder("LogSoftmax").Device(kDeviceGPU).TypeConstraint<float>("T"),
                SoftmaxGpuOp<true>);

// --- SparseSoftmaxCrossEntropyWithLogits --------------------------------------------------------

// Labels stay on the device and are not checked: as TensorFlow's GPU
// kernel, a label outside [0, classes) gives NaN loss and backprop for its
// row, where the CPU kernel fails with InvalidArgument.
class SparseXentGpuOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& logits = ctx->input(0);
    const Tensor& labels = ctx->input(1);
    RETURN_IF_ERROR(CheckSparseXentShapes(*ctx, logits.shape(), labels.shape()));
    const int64_t batch = logits.dim_size(0), classes = logits.dim_size(1);
    Tensor* loss = OutputForOverwrite(ctx, 0, TensorShape({batch}));
    Tensor* backprop = OutputForOverwrite(ctx, 1, logits.shape());
    if (loss == nullptr || backprop == nullptr) return absl::OkStatus();
    LaunchSparseXent(GpuOf(ctx)->stream(), ElementsOf<float>(logits), labels.raw_data(),
                     labels.dtype() == DT_INT64, MutableElementsOf<float>(loss), MutableElementsOf<float>(backprop), batch,
                     classes);
    return LaunchStatus(ctx);
  }
};
REGISTER_KERNEL(KernelDefBuilder("SparseSoftmaxCrossEntropyWithLogits")
                    .Device(kDeviceGPU)
                    .TypeConstraint<float>("T")
                    .TypeConstraint("Tlabels", {DT_INT32, DT_INT64}),
                SparseXentGpuOp);

// --- SoftmaxCrossEntropyWithLogits ----------------------------------------------------------

class XentGpuOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& logits = ctx->input(0);
    const Tensor& labels = ctx->input(1);
    int64_t rows = 0, cols = 0;
    Broadcast2D bl, bb;
    RETURN_IF_ERROR(BroadcastTo2D(*ctx, logits.shape(), labels.shape(), &rows, &cols, &bl, &bb));
    const Strides2D sl{bl.row_stride, bl.col_stride}, sb{bb.row_stride, bb.col_stride};
    if (rows * cols == 0) {  // Zeros, as the CPU kernel's.
      ctx->allocate_output(0, TensorShape({rows}));
      ctx->allocate_output(1, TensorShape({rows, cols}));
      return LaunchStatus(ctx);
    }
    Tensor* loss = OutputForOverwrite(ctx, 0, TensorShape({rows}));
    Tensor* backprop = OutputForOverwrite(ctx, 1, TensorShape({rows, cols}));
    if (loss == nullptr || backprop == nullptr) return absl::OkStatus();
    LaunchXent(GpuOf(ctx)->stream(), ElementsOf<float>(logits), sl, ElementsOf<float>(labels), sb,
               MutableElementsOf<float>(loss), MutableElementsOf<float>(backprop), rows, cols);
    return LaunchStatus(ctx);
  }
};
REGISTER_KERNEL(
    KernelDefBuilder("SoftmaxCrossEntropyWithLogits").Device(kDeviceGPU).TypeConstraint<float>("T"),
    XentGpuOp);

}  // namespace
}  // namespace gpu
}  // namespace dflow
