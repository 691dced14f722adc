// Neural-network ops: Relu, Softplus, BiasAdd, Softmax, LogSoftmax,
// SparseSoftmaxCrossEntropyWithLogits, SoftmaxCrossEntropyWithLogits, L2Loss,
// LRN (with LRNGrad) and InTopKV2.
// Conv2D lives in conv_ops.cc, MaxPool in pooling_ops.cc.
//
// Row-wise kernels (softmax and the cross entropies) split the rows over the
// intra-op pool and work on each row with Eigen's vectorised arrays; every
// softmax subtracts the row maximum first, so large logits do not overflow.
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/ops/conv_util.h"
#include "dflow/ops/cwise_ops.h"
#include "dflow/ops/normalization_util.h"
#include "dflow/ops/xent_util.h"

namespace dflow {
namespace {

template <typename T>
using ArrayMap = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <typename T>
using ConstArrayMap = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

// --- Relu ----------------------------------------------------------------------

template <typename T>
class ReluOp : public OpKernel {
 public:
  using OpKernel::OpKernel;

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& in = ctx->input(0);
    Tensor* out = ctx->allocate_output_for_overwrite(0, in.shape());
    const T* x = in.flat<T>().data();
    T* y = out->flat<T>().data();
    ctx->intra_op_pool()->ParallelFor(in.NumElements(), 1, [&](int64_t begin, int64_t end) {
      // max(x, 0) with x first keeps NaN (Eigen follows std::max), as
      // TensorFlow's cwiseMax does; vectorised.
      ArrayMap<T>(y + begin, end - begin) = ConstArrayMap<T>(x + begin, end - begin).cwiseMax(T(0));
    });
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }
};

REGISTER_OP("Relu")
    .Input("features: T")
    .Output("activations: T")
    .Attr(
        "T: {float, double, int32, uint8, int16, int8, int64, bfloat16, uint16, half, "
        "uint32, uint64, qint8}")
    .SetShapeFn(UnchangedShape);

REGISTER_KERNEL(KernelDefBuilder("Relu").Device(kDeviceCPU).TypeConstraint<float>("T"),
                ReluOp<float>);
REGISTER_KERNEL(KernelDefBuilder("Relu").Device(kDeviceCPU).TypeConstraint<double>("T"),
                ReluOp<double>);
REGISTER_KERNEL(KernelDefBuilder("Relu").Device(kDeviceCPU).TypeConstraint<int32_t>("T"),
                ReluOp<int32_t>);
REGISTER_KERNEL(KernelDefBuilder("Relu").Device(kDeviceCPU).TypeConstraint<int64_t>("T"),
                ReluOp<int64_t>);
REGISTER_KERNEL(KernelDefBuilder("Relu").Device(kDeviceCPU).TypeConstraint<uint8_t>("T"),
                ReluOp<uint8_t>);

// --- Softplus: log(exp(x) + 1) ---------------------------------------------------

// As TensorFlow computes it: x itself above -log(eps) - 2, exp(x) below
// log(eps) + 2 (where log(exp(x) + 1) is x, or exp(x), to the type's
// precision), log(exp(x) + 1) between.
template <typename T>
struct SoftplusFn {
  T operator()(T x) const {
    static const T threshold = std::log(std::numeric_limits<T>::epsilon()) + T(2);
    if (x > -threshold) return x;
    if (x < threshold) return std::exp(x);
    return std::log(std::exp(x) + T(1));
  }
};

REGISTER_OP("Softplus")
    .Input("features: T")
    .Output("activations: T")
    .Attr("T: {half, bfloat16, float, double}")
    .SetShapeFn(UnchangedShape);

CpuKernels<UnaryKernel<SoftplusFn>::For, float, double> softplus_kernels("Softplus");

// --- L2Loss --------------------------------------------------------------------

// sum(t^2) / 2, a scalar: tf.nn.l2_loss, weight decay's penalty.
template <typename T>
class L2LossOp : public OpKernel {
 public:
  using OpKernel::OpKernel;

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& t = ctx->input(0);
    ctx->allocate_output_for_overwrite(0, TensorShape({}))->flat<T>()[0] =
        ConstArrayMap<T>(t.flat<T>().data(), t.NumElements()).square().sum() * T(0.5);
    return absl::OkStatus();
  }
};

REGISTER_OP("L2Loss").Input("t: T").Output("output: T").Attr("T: {float, double}").SetShapeFn(
    ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("L2Loss").Device(kDeviceCPU).TypeConstraint<float>("T"),
                L2LossOp<float>);
REGISTER_KERNEL(KernelDefBuilder("L2Loss").Device(kDeviceCPU).TypeConstraint<double>("T"),
                L2LossOp<double>);

// --- LRN -----------------------------------------------------------------------

// N_i of one position's channels `x` (ops/normalization_util.h).
float LrnNorm(const LrnParams& p, const float* x, int64_t i, int64_t depth) {
  float sum = 0;
  for (int64_t k = p.Begin(i); k < p.End(i, depth); ++k) sum += x[k] * x[k];
  return p.bias + p.alpha * sum;
}

class LrnOp : public OpKernel {
 public:
  explicit LrnOp(OpKernelConstruction* c) : OpKernel(c) { c->SetStatus(p_.Read(c)); }

  absl::Status Compute(OpKernelContext* ctx) override {
    RETURN_IF_ERROR(CheckLrnInputs(ctx));
    const Tensor& in = ctx->input(0);
    const int64_t depth = in.dim_size(3), positions = depth == 0 ? 0 : in.NumElements() / depth;
    const float* x = in.flat<float>().data();
    float* y = ctx->allocate_output_for_overwrite(0, in.shape())->flat<float>().data();
    ctx->intra_op_pool()->ParallelFor(positions, depth * (2 * p_.radius + 4), [&](int64_t b, int64_t e) {
      for (int64_t pos = b; pos < e; ++pos) {
        const float* xp = x + pos * depth;
        for (int64_t i = 0; i < depth; ++i) {
          y[pos * depth + i] = xp[i] * std::pow(LrnNorm(p_, xp, i, depth), -p_.beta);
        }
      }
    });
    return absl::OkStatus();
  }

 private:
  LrnParams p_;
};

// dx_k = sum over the channels i within the radius of k of
//   dy_i * ([i == k] N_i^-beta - 2 alpha beta x_k y_i / N_i).
class LrnGradOp : public OpKernel {
 public:
  explicit LrnGradOp(OpKernelConstruction* c) : OpKernel(c) { c->SetStatus(p_.Read(c)); }

  absl::Status Compute(OpKernelContext* ctx) override {
    RETURN_IF_ERROR(CheckLrnInputs(ctx));
    const Tensor& dy_t = ctx->input(0);
    const Tensor& x_t = ctx->input(1);
    const Tensor& y_t = ctx->input(2);
    const int64_t depth = x_t.dim_size(3), positions = depth == 0 ? 0 : x_t.NumElements() / depth;
    const float* dy = dy_t.flat<float>().data();
    const float* x = x_t.flat<float>().data();
    const float* y = y_t.flat<float>().data();
    float* dx = ctx->allocate_output(0, x_t.shape())->flat<float>().data();
    ctx->intra_op_pool()->ParallelFor(positions, depth * (4 * p_.radius + 6), [&](int64_t b, int64_t e) {
      for (int64_t pos = b; pos < e; ++pos) {
        const int64_t o = pos * depth;
        for (int64_t i = 0; i < depth; ++i) {
          const float norm = LrnNorm(p_, x + o, i, depth);
          const float common = -2 * p_.alpha * p_.beta * y[o + i] / norm;
          for (int64_t k = p_.Begin(i); k < p_.End(i, depth); ++k) {
            float d = common * x[o + k];
            if (k == i) d += std::pow(norm, -p_.beta);
            dx[o + k] += d * dy[o + i];
          }
        }
      }
    });
    return absl::OkStatus();
  }

 private:
  LrnParams p_;
};

// LRN and LRNGrad: the same attrs, every input and the output of type T.
OpDefBuilder LrnOpDef(const std::string& name, const std::vector<std::string>& inputs) {
  OpDefBuilder b(name);
  for (const std::string& in : inputs) b.Input(in + ": T");
  b.Output("output: T")
      .Attr("depth_radius: int = 5")
      .Attr("bias: float = 1.0")
      .Attr("alpha: float = 1.0")
      .Attr("beta: float = 0.5")
      .Attr("T: {float} = DT_FLOAT")
      .SetShapeFn(UnchangedShape);
  return b;
}

const OpDefBuilderReceiver lrn_op = LrnOpDef("LRN", {"input"});
REGISTER_KERNEL(KernelDefBuilder("LRN").Device(kDeviceCPU).TypeConstraint<float>("T"), LrnOp);
const OpDefBuilderReceiver lrn_grad_op =
    LrnOpDef("LRNGrad", {"input_grads", "input_image", "output_image"});
REGISTER_KERNEL(KernelDefBuilder("LRNGrad").Device(kDeviceCPU).TypeConstraint<float>("T"),
                LrnGradOp);

// --- InTopKV2 ------------------------------------------------------------------

// precision[b]: is targets[b] among the k largest predictions of row b? Ties
// count for it (fewer than k predictions strictly greater).
template <typename Index>
class InTopKOp : public OpKernel {
 public:
  using OpKernel::OpKernel;

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& predictions = ctx->input(0);
    const Tensor& targets = ctx->input(1);
    const Tensor& k_t = ctx->input(2);
    if (predictions.dims() != 2) {
      return ctx->InvalidArgument("predictions must be 2-dimensional, got ",
                                  predictions.shape().DebugString());
    }
    if (targets.dims() != 1 || targets.dim_size(0) != predictions.dim_size(0)) {
      return ctx->InvalidArgument("First dimension of predictions ", predictions.dim_size(0),
                                  " must match length of targets ", targets.NumElements());
    }
    if (k_t.dims() != 0) return ctx->InvalidArgument("k must be 0-D, got ", k_t.shape().DebugString());
    const int64_t k = k_t.flat<Index>()[0];
    const int64_t rows = predictions.dim_size(0), classes = predictions.dim_size(1);
    auto out = ctx->allocate_output(0, TensorShape({rows}))->flat<bool>();
    for (int64_t b = 0; b < rows; ++b) {
      const float* row = predictions.flat<float>().data() + b * classes;
      const int64_t target = targets.flat<Index>()[b];
      // As TensorFlow: a non-finite prediction anywhere in the row, or a
      // target out of range, is false.
      const bool finite = std::all_of(row, row + classes, [](float p) { return std::isfinite(p); });
      if (target < 0 || target >= classes || !finite) {
        out[b] = false;
        continue;
      }
      int64_t greater = 0;
      for (int64_t c = 0; c < classes; ++c) greater += row[c] > row[target];
      out[b] = greater < k;
    }
    return absl::OkStatus();
  }
};

REGISTER_OP("InTopKV2")
    .Input("predictions: float")
    .Input("targets: T")
    .Input("k: T")
    .Output("precision: bool")
    .Attr("T: {int32, int64} = DT_INT32")
    .SetShapeFn([](InferenceContext* c) {
      c->set_output(0, PartialShape({c->input(1).rank_known() && c->input(1).rank() == 1
                                         ? c->input(1).dim(0)
                                         : kUnknownDim}));
      return absl::OkStatus();
    });
REGISTER_KERNEL(KernelDefBuilder("InTopKV2").Device(kDeviceCPU).TypeConstraint<int32_t>("T"),
                InTopKOp<int32_t>);
REGISTER_KERNEL(KernelDefBuilder("InTopKV2").Device(kDeviceCPU).TypeConstraint<int64_t>("T"),
                InTopKOp<int64_t>);

// --- BiasAdd -------------------------------------------------------------------

absl::Status BiasAddShape(InferenceContext* c) {
  PartialShape value, bias;
  RETURN_IF_ERROR(c->WithRankAtLeast(c->input(0), 2, &value));
  RETURN_IF_ERROR(c->WithRank(c->input(1), 1, &bias));
  absl::StatusOr<bool> nchw = ReadBiasNchw(c->node_def());
  if (!nchw.ok()) return c->Error(std::string(nchw.status().message()));
  if (!value.rank_known()) {
    c->set_output(0, value);
    return absl::OkStatus();
  }
  std::vector<int64_t> dims = value.dims();
  const int cd = BiasChannelDim(*nchw, value.rank());
  absl::Status s = c->MergeDim(dims[cd], bias.dim(0), &dims[cd]);
  if (!s.ok()) {
    return c->Error(absl::StrCat("bias size must match the channel dimension ", cd,
                                 " of value: value ", value.DebugString(), " bias ",
                                 bias.DebugString()));
  }
  c->set_output(0, PartialShape(std::move(dims)));
  return absl::OkStatus();
}

template <typename T>
class BiasAddOp : public OpKernel {
 public:
  explicit BiasAddOp(OpKernelConstruction* c) : OpKernel(c) {
    absl::StatusOr<bool> nchw = ReadBiasNchw(c->def());
    if (nchw.ok()) nchw_ = *nchw;
    c->SetStatus(nchw.status());
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& value = ctx->input(0);
    const Tensor& bias = ctx->input(1);
    ASSIGN_OR_RETURN(const int cd, CheckBiasAddShapes(*ctx, nchw_, value.shape(), bias.shape()));
    const int64_t channels = value.dim_size(cd);
    Tensor* out = ctx->allocate_output_for_overwrite(0, value.shape());
    if (value.NumElements() == 0) return absl::OkStatus();
    // View the value as [outer, channels, inner] with the bias along the middle.
    int64_t inner = 1;
    for (int d = cd + 1; d < value.dims(); ++d) inner *= value.dim_size(d);
    const int64_t planes = value.NumElements() / inner;  // outer * channels
    const T* x = value.flat<T>().data();
    const T* b = bias.flat<T>().data();
    T* y = out->flat<T>().data();
    if (inner == 1) {
      AddRows(ctx, x, b, y, planes / channels, channels);
    } else {
      AddPlanes(ctx, x, b, y, planes, channels, inner);
    }
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }

 private:
  // y[r, c] = x[r, c] + b[c].
  static void AddRows(OpKernelContext* ctx, const T* x, const T* b, T* y, int64_t rows,
                      int64_t channels) {
    ctx->intra_op_pool()->ParallelFor(rows, channels, [&](int64_t begin, int64_t end) {
      const ConstArrayMap<T> bias(b, channels);
      for (int64_t r = begin; r < end; ++r) {
        ArrayMap<T>(y + r * channels, channels) =
            ConstArrayMap<T>(x + r * channels, channels) + bias;
      }
    });
  }
  // y[p, i] = x[p, i] + b[p % channels].
  static void AddPlanes(OpKernelContext* ctx, const T* x, const T* b, T* y, int64_t planes,
                        int64_t channels, int64_t inner) {
    ctx->intra_op_pool()->ParallelFor(planes, inner, [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) {
        ArrayMap<T>(y + p * inner, inner) =
            ConstArrayMap<T>(x + p * inner, inner) + b[p % channels];
      }
    });
  }

  bool nchw_ = false;
};

REGISTER_OP("BiasAdd")
    .Input("value: T")
    .Input("bias: T")
    .Output("output: T")
    .Attr(
        "T: {float, double, int32, uint8, int16, int8, complex64, int64, qint8, quint8, "
        "qint32, bfloat16, qint16, quint16, uint16, complex128, half, uint32, uint64}")
    .Attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
    .SetShapeFn(BiasAddShape);

REGISTER_KERNEL(KernelDefBuilder("BiasAdd").Device(kDeviceCPU).TypeConstraint<float>("T"),
                BiasAddOp<float>);
REGISTER_KERNEL(KernelDefBuilder("BiasAdd").Device(kDeviceCPU).TypeConstraint<double>("T"),
                BiasAddOp<double>);
REGISTER_KERNEL(KernelDefBuilder("BiasAdd").Device(kDeviceCPU).TypeConstraint<int32_t>("T"),
                BiasAddOp<int32_t>);
REGISTER_KERNEL(KernelDefBuilder("BiasAdd").Device(kDeviceCPU).TypeConstraint<int64_t>("T"),
                BiasAddOp<int64_t>);

// --- Softmax / LogSoftmax ----------------------------------------------------------

// Writes softmax(x) (or log_softmax(x) when `log`) of one row into y.
template <typename T, bool kLog>
void SoftmaxRow(const T* x, T* y, int64_t n) {
  ConstArrayMap<T> in(x, n);
  ArrayMap<T> out(y, n);
  const T max = in.maxCoeff();
  if constexpr (kLog) {
    out = in - max;
    const T log_sum = std::log(out.exp().sum());
    out -= log_sum;
  } else {
    out = (in - max).exp();
    out *= T(1) / out.sum();
  }
}

template <typename T, bool kLog>
class SoftmaxOp : public OpKernel {
 public:
  using OpKernel::OpKernel;

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& logits = ctx->input(0);
    if (logits.dims() < 1) {
      return ctx->InvalidArgument("logits must have >= 1 dimension, got ",
                                  logits.shape().DebugString());
    }
    Tensor* out = ctx->allocate_output(0, logits.shape());
    const int64_t cols = logits.dim_size(logits.dims() - 1);
    if (logits.NumElements() == 0) return absl::OkStatus();
    const int64_t rows = logits.NumElements() / cols;
    const T* x = logits.flat<T>().data();
    T* y = out->flat<T>().data();
    ctx->intra_op_pool()->ParallelFor(rows, cols * 20, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) SoftmaxRow<T, kLog>(x + r * cols, y + r * cols, cols);
    });
    return absl::OkStatus();
  }
};

absl::Status SoftmaxShape(InferenceContext* c) {
  PartialShape logits;
  RETURN_IF_ERROR(c->WithRankAtLeast(c->input(0), 1, &logits));
  c->set_output(0, logits);
  return absl::OkStatus();
}

REGISTER_OP("Softmax")
    .Input("logits: T")
    .Output("softmax: T")
    .Attr("T: {half, bfloat16, float, double}")
    .SetShapeFn(SoftmaxShape);
REGISTER_OP("LogSoftmax")
    .Input("logits: T")
    .Output("logsoftmax: T")
    .Attr("T: {half, bfloat16, float, double}")
    .SetShapeFn(SoftmaxShape);

REGISTER_KERNEL(KernelDefBuilder("Softmax").Device(kDeviceCPU).TypeConstraint<float>("T"),
                SoftmaxOp<float, false>);
REGISTER_KERNEL(KernelDefBuilder("Softmax").Device(kDeviceCPU).TypeConstraint<double>("T"),
                SoftmaxOp<double, false>);
REGISTER_KERNEL(KernelDefBuilder("LogSoftmax").Device(kDeviceCPU).TypeConstraint<float>("T"),
                SoftmaxOp<float, true>);
REGISTER_KERNEL(KernelDefBuilder("LogSoftmax").Device(kDeviceCPU).TypeConstraint<double>("T"),
                SoftmaxOp<double, true>);

// --- cross entropies -----------------------------------------------------------------

// One row of softmax cross entropy: backprop = softmax(x) - labels and
// returns the loss sum_j labels_j * (log(sum_k exp(x_k)) - x_j), both
// computed from x - max(x).
template <typename T>
T XentRow(const T* x, const T* labels, T* backprop, int64_t n) {
  ConstArrayMap<T> in(x, n);
  ConstArrayMap<T> lab(labels, n);
  ArrayMap<T> back(backprop, n);
  const T max = in.maxCoeff();
  back = (in - max).exp();
  const T sum = back.sum();
  const T log_sum = std::log(sum);
  const T loss = (lab * (log_sum - (in - max))).sum();
  back = back * (T(1) / sum) - lab;
  return loss;
}

// The same with a one-hot label; REQUIRES: 0 <= label < n.
template <typename T>
T SparseXentRow(const T* x, int64_t label, T* backprop, int64_t n) {
  ConstArrayMap<T> in(x, n);
  ArrayMap<T> back(backprop, n);
  const T max = in.maxCoeff();
  back = (in - max).exp();
  const T sum = back.sum();
  back *= T(1) / sum;
  back[label] -= T(1);
  return std::log(sum) - (x[label] - max);
}

template <typename T, typename Index>
class SparseXentOp : public OpKernel {
 public:
  using OpKernel::OpKernel;

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& logits = ctx->input(0);
    const Tensor& labels = ctx->input(1);
    RETURN_IF_ERROR(CheckSparseXentShapes(*ctx, logits.shape(), labels.shape()));
    const int64_t batch = logits.dim_size(0), classes = logits.dim_size(1);
    const Index* lab = labels.flat<Index>().data();
    RETURN_IF_ERROR(CheckLabels(ctx, lab, batch, classes));
    Tensor* loss = ctx->allocate_output(0, TensorShape({batch}));
    Tensor* backprop = ctx->allocate_output(1, logits.shape());
    const T* x = logits.flat<T>().data();
    T* l = loss->flat<T>().data();
    T* b = backprop->flat<T>().data();
    ctx->intra_op_pool()->ParallelFor(batch, classes * 25, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        l[r] = SparseXentRow<T>(x + r * classes, lab[r], b + r * classes, classes);
      }
    });
    return absl::OkStatus();
  }

 private:
  // InvalidArgument naming the first label outside [0, classes), as
  // TensorFlow's CPU kernel does.
  static absl::Status CheckLabels(OpKernelContext* ctx, const Index* lab, int64_t batch,
                                  int64_t classes) {
    for (int64_t i = 0; i < batch; ++i) {
      if (lab[i] >= 0 && lab[i] < classes) continue;
      constexpr int64_t kMaxShown = 100;
      const int64_t shown = std::min(batch, kMaxShown);
      return ctx->InvalidArgument("Received a label value of ", lab[i],
                                  " which is outside the valid range of [0, ", classes,
                                  ").  Label values: ", absl::StrJoin(lab, lab + shown, " "),
                                  batch > shown ? " ..." : "");
    }
    return absl::OkStatus();
  }
};

absl::Status SparseXentShape(InferenceContext* c) {
  PartialShape features, labels;
  RETURN_IF_ERROR(c->WithRank(c->input(0), 2, &features));
  RETURN_IF_ERROR(c->WithRank(c->input(1), 1, &labels));
  int64_t batch;
  absl::Status s = c->MergeDim(features.dim(0), labels.dim(0), &batch);
  if (!s.ok()) {
    return c->Error(absl::StrCat("logits and labels must have the same first dimension: logits ",
                                 features.DebugString(), " labels ", labels.DebugString()));
  }
  c->set_output(0, PartialShape({batch}));
  c->set_output(1, PartialShape({batch, features.dim(1)}));
  return absl::OkStatus();
}

REGISTER_OP("SparseSoftmaxCrossEntropyWithLogits")
    .Input("features: T")
    .Input("labels: Tlabels")
    .Output("loss: T")
    .Output("backprop: T")
    .Attr("T: {half, bfloat16, float, double}")
    .Attr("Tlabels: {int32, int64} = DT_INT64")
    .SetShapeFn(SparseXentShape);

#define DFLOW_REGISTER_SPARSE_XENT(T, INDEX)                              \
  REGISTER_KERNEL(KernelDefBuilder("SparseSoftmaxCrossEntropyWithLogits") \
                      .Device(kDeviceCPU)                                 \
                      .TypeConstraint<T>("T")                             \
                      .TypeConstraint<INDEX>("Tlabels"),                  \
                  SparseXentOp<T, INDEX>)
DFLOW_REGISTER_SPARSE_XENT(float, int32_t);
DFLOW_REGISTER_SPARSE_XENT(float, int64_t);
DFLOW_REGISTER_SPARSE_XENT(double, int32_t);
DFLOW_REGISTER_SPARSE_XENT(double, int64_t);
#undef DFLOW_REGISTER_SPARSE_XENT

// Row r of a broadcast input: a pointer into `data` when the row is
// contiguous, else a copy in `scratch`.
template <typename T>
const T* BroadcastRow(const T* data, const Broadcast2D& b, int64_t r, int64_t cols,
                      std::vector<T>* scratch) {
  const T* row = data + r * b.row_stride;
  if (b.col_stride == 1) return row;
  scratch->assign(cols, row[0]);
  return scratch->data();
}

template <typename T>
class XentOp : public OpKernel {
 public:
  using OpKernel::OpKernel;

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& logits = ctx->input(0);
    const Tensor& labels = ctx->input(1);
    int64_t rows, cols;
    Broadcast2D bl, bb;
    RETURN_IF_ERROR(BroadcastTo2D(*ctx, logits.shape(), labels.shape(), &rows, &cols, &bl, &bb));
    Tensor* loss = ctx->allocate_output(0, TensorShape({rows}));
    Tensor* backprop = ctx->allocate_output(1, TensorShape({rows, cols}));
    if (rows * cols == 0) return absl::OkStatus();
    const T* x = logits.flat<T>().data();
    const T* y = labels.flat<T>().data();
    T* l = loss->flat<T>().data();
    T* b = backprop->flat<T>().data();
    ctx->intra_op_pool()->ParallelFor(rows, cols * 30, [&](int64_t begin, int64_t end) {
      std::vector<T> x_scratch, y_scratch;
      for (int64_t r = begin; r < end; ++r) {
        const T* xr = BroadcastRow(x, bl, r, cols, &x_scratch);
        const T* yr = BroadcastRow(y, bb, r, cols, &y_scratch);
        l[r] = XentRow<T>(xr, yr, b + r * cols, cols);
      }
    });
    return absl::OkStatus();
  }
};

// TensorFlow's rule: equal rank-2 shapes, or shapes that broadcast to rank 2.
absl::Status XentShape(InferenceContext* c) {
  absl::StatusOr<PartialShape> merged = PartialShape::Merge(c->input(0), c->input(1));
  PartialShape shape;
  if (merged.ok() && (!merged->rank_known() || merged->rank() == 2)) {
    RETURN_IF_ERROR(c->WithRank(*merged, 2, &shape));
  } else {
    absl::StatusOr<PartialShape> b = BroadcastShapes(c->input(0), c->input(1));
    if (!b.ok()) {
      return c->Error(absl::StrCat("logits and labels must be broadcastable: logits ",
                                   c->input(0).DebugString(), " labels ",
                                   c->input(1).DebugString()));
    }
    if (b->rank_known() && b->rank() != 2) {
      return c->Error(
          absl::StrCat("logits and labels must broadcast to rank 2, got ", b->DebugString()));
    }
    RETURN_IF_ERROR(c->WithRank(*b, 2, &shape));
  }
  c->set_output(0, PartialShape({shape.dim(0)}));
  c->set_output(1, shape);
  return absl::OkStatus();
}

REGISTER_OP("SoftmaxCrossEntropyWithLogits")
    .Input("features: T")
    .Input("labels: T")
    .Output("loss: T")
    .Output("backprop: T")
    .Attr("T: {half, bfloat16, float, double}")
    .SetShapeFn(XentShape);

REGISTER_KERNEL(
    KernelDefBuilder("SoftmaxCrossEntropyWithLogits").Device(kDeviceCPU).TypeConstraint<float>("T"),
    XentOp<float>);
REGISTER_KERNEL(KernelDefBuilder("SoftmaxCrossEntropyWithLogits")
                    .Device(kDeviceCPU)
                    .TypeConstraint<double>("T"),
                XentOp<double>);

}  // namespace
}  // namespace dflow
