// Element-wise GPU kernels (float unless noted): the binary ops with numpy
// broadcasting, the unary ops, the activations and their gradients,
// SelectV2, AddN, Cast, Fill, ZerosLike, OnesLike and BiasAdd. Shapes are
// checked here as the CPU kernels check them, with the same messages; the
// arithmetic runs in cwise_kernels.cu on the device's stream.
#include <cstdint>
#include <string>
#include <vector>

#include "dflow/framework/kernel.h"
#include "dflow/gpu/cwise_launch.h"
#include "dflow/gpu/gpu_device.h"
#include "dflow/ops/array_util.h"
#include "dflow/ops/broadcast.h"
#include "dflow/ops/conv_util.h"

namespace dflow {
namespace gpu {
namespace {

absl::StatusOr<Elem> ElemOf(DataType dtype) {
  switch (dtype) {
    case DT_FLOAT: return Elem::kFloat;
    case DT_DOUBLE: return Elem::kDouble;
    case DT_INT32: return Elem::kInt32;
    case DT_INT64: return Elem::kInt64;
    case DT_BOOL: return Elem::kBool;
    default:
      return absl::UnimplementedError(
          absl::StrCat("no GPU kernel for dtype ", DataTypeString(dtype)));
  }
}

// How the kernels read each input of `plan` (see BroadcastIndex);
// Unimplemented past kMaxBroadcastDims collapsed dimensions.
absl::StatusOr<BroadcastIndex> IndexOf(const BroadcastPlan& plan) {
  BroadcastIndex index;
  bool flat = true;
  for (int k = 0; k < plan.num_inputs(); ++k) {
    flat = flat && (plan.IsFull(k) || plan.IsScalar(k));
    index.step[k] = plan.IsFull(k) ? 1 : 0;
  }
  if (flat) return index;
  if (plan.dims().size() > static_cast<size_t>(kMaxBroadcastDims)) {
    return absl::UnimplementedError(absl::StrCat("broadcasting over more than ", kMaxBroadcastDims,
                                                 " distinct dimensions: output ",
                                                 plan.output_shape().DebugString()));
  }
  index.rank = static_cast<int>(plan.dims().size());
  for (int d = 0; d < index.rank; ++d) {
    index.dims[d] = plan.dims()[d];
    for (int k = 0; k < plan.num_inputs(); ++k) index.strides[k][d] = plan.strides(k)[d];
  }
  return index;
}

// --- binary ops with broadcasting ------------------------------------------------

template <Binary kOp, typename T>
class BinaryGpuOp : public OpKernel {
 public:
  explicit BinaryGpuOp(OpKernelConstruction* c) : OpKernel(c) {
    if (kOp == Binary::kEqual || kOp == Binary::kNotEqual) {
      c->GetAttr("incompatible_shape_error", &incompatible_shape_error_).IgnoreError();
    }
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    const Tensor& y = ctx->input(1);
    absl::StatusOr<BroadcastPlan> plan = BroadcastPlan::Make({x.shape(), y.shape()});
    if (!plan.ok() && !incompatible_shape_error_) {
      // Equal / NotEqual of shapes that do not broadcast: a scalar false / true.
      Tensor* z = OutputForOverwrite(ctx, 0, TensorShape());
      if (z == nullptr) return absl::OkStatus();
      const int value = kOp == Binary::kNotEqual ? 1 : 0;
      RETURN_IF_ERROR(CudaCheck(cudaMemsetAsync(z->raw_data(), value, 1, GpuOf(ctx)->stream()),
                                "cudaMemsetAsync"));
      return LaunchStatus(ctx);
    }
    if (!plan.ok()) return ctx->InvalidArgument(plan.status().message());
    absl::StatusOr<BroadcastIndex> index = IndexOf(*plan);
    if (!index.ok()) return ctx->InvalidArgument(index.status().message());
    Tensor* z = OutputForOverwrite(ctx, 0, plan->output_shape());
    if (z == nullptr) return absl::OkStatus();
    LaunchBinary(GpuOf(ctx)->stream(), kOp, ElementsOf<T>(x), ElementsOf<T>(y), z->raw_data(),
                 plan->num_elements(), *index);
    return LaunchStatus(ctx);
  }

 private:
  bool incompatible_shape_error_ = true;
};

// Float, and double and int64 where RunsOnDouble / RunsOnInt64 (int32 runs
// in host memory: ops/cwise_ops.cc).
template <Binary kOp>
struct GpuBinaryKernels {
  explicit GpuBinaryKernels(const char* name) {
    Register<float>(name);
    if constexpr (RunsOnDouble(kOp)) Register<double>(name);
    if constexpr (RunsOnInt64(kOp)) Register<int64_t>(name);
  }
  template <typename T>
  static void Register(const char* name) {
    KernelRegistry::Global()->Register(
        KernelDefBuilder(name).Device(kDeviceGPU).TypeConstraint<T>("T").Build(),
        [](OpKernelConstruction* c) -> std::unique_ptr<OpKernel> {
          return std::make_unique<BinaryGpuOp<kOp, T>>(c);
        });
  }
};
#define DFLOW_GPU_BINARY(NAME, OP) \
  const GpuBinaryKernels<Binary::OP> DFLOW_CONCAT(gpu_binary_, __COUNTER__)(NAME)
DFLOW_GPU_BINARY("Add", kAdd);
DFLOW_GPU_BINARY("AddV2", kAdd);
DFLOW_GPU_BINARY("Sub", kSub);
DFLOW_GPU_BINARY("Mul", kMul);
DFLOW_GPU_BINARY("RealDiv", kDiv);
DFLOW_GPU_BINARY("DivNoNan", kDivNoNan);
DFLOW_GPU_BINARY("Pow", kPow);
DFLOW_GPU_BINARY("FloorDiv", kFloorDiv);
DFLOW_GPU_BINARY("FloorMod", kFloorMod);
DFLOW_GPU_BINARY("Maximum", kMaximum);
DFLOW_GPU_BINARY("Minimum", kMinimum);
DFLOW_GPU_BINARY("Equal", kEqual);
DFLOW_GPU_BINARY("NotEqual", kNotEqual);
DFLOW_GPU_BINARY("Greater", kGreater);
DFLOW_GPU_BINARY("Less", kLess);
DFLOW_GPU_BINARY("GreaterEqual", kGreaterEqual);
DFLOW_GPU_BINARY("LessEqual", kLessEqual);
#undef DFLOW_GPU_BINARY

// --- element-wise backprops of two same-shape inputs ---------------------------------

// ReluGrad, SoftplusGrad: (gradients, features).
template <Binary kOp>
class FeatureGradGpuOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& dy = ctx->input(0);
    const Tensor& x = ctx->input(1);
    if (dy.shape() != x.shape()) {
      return ctx->InvalidArgument("gradients and features must have the same shape: gradients ",
                                  dy.shape().DebugString(), " features ", x.shape().DebugString());
    }
    return Run(ctx, dy, x);
  }

  // z = f(a, b) over same-shape a and b.
  static absl::Status Run(OpKernelContext* ctx, const Tensor& a, const Tensor& b) {
    Tensor* z = OutputForOverwrite(ctx, 0, a.shape());
    if (z == nullptr) return absl::OkStatus();
    LaunchBinary(GpuOf(ctx)->stream(), kOp, ElementsOf<float>(a), ElementsOf<float>(b), z->raw_data(),
                 a.NumElements(), BroadcastIndex());
    return LaunchStatus(ctx);
  }
};

// SqrtGrad, RsqrtGrad, TanhGrad, SigmoidGrad, ReciprocalGrad: (y, dy).
template <Binary kOp>
class UnaryGradGpuOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& y = ctx->input(0);
    const Tensor& dy = ctx->input(1);
    if (y.shape() != dy.shape()) {
      return ctx->InvalidArgument("y and dy have different shapes: y=", y.shape().DebugString(),
                                  " dy=", dy.shape().DebugString());
    }
    return FeatureGradGpuOp<kOp>::Run(ctx, y, dy);
  }
};

#define DFLOW_GPU_GRAD(NAME, CLASS, OP)                                                   \
  REGISTER_KERNEL(KernelDefBuilder(NAME).Device(kDeviceGPU).TypeConstraint<float>("T"), \
                  CLASS<Binary::OP>)
DFLOW_GPU_GRAD("ReluGrad", FeatureGradGpuOp, kReluGrad);
DFLOW_GPU_GRAD("SoftplusGrad", FeatureGradGpuOp, kSoftplusGrad);
DFLOW_GPU_GRAD("SqrtGrad", UnaryGradGpuOp, kSqrtGrad);
DFLOW_GPU_GRAD("RsqrtGrad", UnaryGradGpuOp, kRsqrtGrad);
DFLOW_GPU_GRAD("TanhGrad", UnaryGradGpuOp, kTanhGrad);
DFLOW_GPU_GRAD("SigmoidGrad", UnaryGradGpuOp, kSigmoidGrad);
DFLOW_GPU_GRAD("ReciprocalGrad", UnaryGradGpuOp, kReciprocalGrad);
#undef DFLOW_GPU_GRAD

// --- unary ops -------------------------------------------------------------------------

template <Unary kOp>
class UnaryGpuOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    Tensor* y = OutputForOverwrite(ctx, 0, x.shape());
    if (y == nullptr) return absl::OkStatus();
    LaunchUnary(GpuOf(ctx)->stream(), kOp, ElementsOf<float>(x), MutableElementsOf<float>(y), x.NumElements());
    return LaunchStatus(ctx);
  }
};

#define DFLOW_GPU_UNARY(NAME, OP)                                                         \
  REGISTER_KERNEL(KernelDefBuilder(NAME).Device(kDeviceGPU).TypeConstraint<float>("T"), \
                  UnaryGpuOp<Unary::OP>)
DFLOW_GPU_UNARY("Neg", kNeg);
DFLOW_GPU_UNARY("Abs", kAbs);
DFLOW_GPU_UNARY("Square", kSquare);
DFLOW_GPU_UNARY("Sqrt", kSqrt);
DFLOW_GPU_UNARY("Rsqrt", kRsqrt);
DFLOW_GPU_UNARY("Exp", kExp);
DFLOW_GPU_UNARY("Log", kLog);
DFLOW_GPU_UNARY("Log1p", kLog1p);
DFLOW_GPU_UNARY("Expm1", kExpm1);
DFLOW_GPU_UNARY("Tanh", kTanh);
DFLOW_GPU_UNARY("Sigmoid", kSigmoid);
DFLOW_GPU_UNARY("Reciprocal", kReciprocal);
DFLOW_GPU_UNARY("Floor", kFloor);
DFLOW_GPU_UNARY("Ceil", kCeil);
DFLOW_GPU_UNARY("Round", kRound);
DFLOW_GPU_UNARY("Sin", kSin);
DFLOW_GPU_UNARY("Cos", kCos);
DFLOW_GPU_UNARY("Relu", kRelu);
DFLOW_GPU_UNARY("Softplus", kSoftplus);
#undef DFLOW_GPU_UNARY

// --- SelectV2 and Select ----------------------------------------------------------------

// out = cond ? then : else (inputs 1 and 2), the three broadcast together.
absl::Status RunSelect(OpKernelContext* ctx, const Tensor& cond) {
  const Tensor& t = ctx->input(1);
  const Tensor& e = ctx->input(2);
  absl::StatusOr<BroadcastPlan> plan = BroadcastPlan::Make({cond.shape(), t.shape(), e.shape()});
  if (!plan.ok()) {
    return ctx->InvalidArgument("condition ", cond.shape().DebugString(), ", then ",
                                t.shape().DebugString(), ", and else ", e.shape().DebugString(),
                                " must be broadcastable");
  }
  absl::StatusOr<BroadcastIndex> index = IndexOf(*plan);
  if (!index.ok()) return ctx->InvalidArgument(index.status().message());
  Tensor* out = OutputForOverwrite(ctx, 0, plan->output_shape());
  if (out == nullptr) return absl::OkStatus();
  LaunchSelect(GpuOf(ctx)->stream(), ElementsOf<bool>(cond), t.raw_data(), e.raw_data(),
               out->raw_data(), static_cast<int>(DataTypeSize(t.dtype())), plan->num_elements(),
               *index);
  return LaunchStatus(ctx);
}

class SelectV2GpuOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override { return RunSelect(ctx, ctx->input(0)); }
};
REGISTER_KERNEL(KernelDefBuilder("SelectV2").Device(kDeviceGPU).TypeConstraint<float>("T"),
                SelectV2GpuOp);

// Select (v1; tf.where of TF1, tf.losses' weights): the CPU kernel's checks,
// then a vector condition choosing rows reads as [rows, 1, ..., 1], which
// broadcasts as SelectV2 does.
class SelectGpuOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    RETURN_IF_ERROR(SelectElementsPerCondition(*ctx).status());
    const Tensor& cond = ctx->input(0);
    const TensorShape& t = ctx->input(1).shape();
    if (cond.dims() != 1 || t.dims() < 2) return RunSelect(ctx, cond);
    std::vector<int64_t> rows(t.dims(), 1);
    rows[0] = t.dim_size(0);
    ASSIGN_OR_RETURN(Tensor as_rows, cond.Reshaped(TensorShape(rows)));
    return RunSelect(ctx, as_rows);
  }
};
REGISTER_KERNEL(KernelDefBuilder("Select").Device(kDeviceGPU).TypeConstraint<float>("T"),
                SelectGpuOp);

// --- AddN ---------------------------------------------------------------------------------

class AddNGpuOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& first = ctx->input(0);
    for (int i = 1; i < ctx->num_inputs(); ++i) {
      if (ctx->input(i).shape() != first.shape()) {
        return ctx->InvalidArgument("inputs must have the same shape: input 0 ",
                                    first.shape().DebugString(), " != input ", i, " ",
                                    ctx->input(i).shape().DebugString());
      }
    }
    if (ctx->num_inputs() == 1) {
      ctx->set_output(0, first);
      return absl::OkStatus();
    }
    Tensor* out = OutputForOverwrite(ctx, 0, first.shape());
    if (out == nullptr) return absl::OkStatus();
    // out = in0 + in1, then out += in_i: each element is read before it is
    // written by the same thread, so out may be an operand.
    cudaStream_t s = GpuOf(ctx)->stream();
    const int64_t n = first.NumElements();
    LaunchBinary(s, Binary::kAdd, ElementsOf<float>(first), ElementsOf<float>(ctx->input(1)), out->raw_data(), n,
                 BroadcastIndex());
    for (int i = 2; i < ctx->num_inputs(); ++i) {
      LaunchBinary(s, Binary::kAdd, MutableElementsOf<float>(out), ElementsOf<float>(ctx->input(i)), out->raw_data(), n,
                   BroadcastIndex());
    }
    return LaunchStatus(ctx);
  }
};
REGISTER_KERNEL(KernelDefBuilder("AddN").Device(kDeviceGPU).TypeConstraint<float>("T"), AddNGpuOp);

// --- Cast -----------------------------------------------------------------------------------

const DataTypeVector& CastTypes() {
  static const DataTypeVector kTypes = {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64, DT_BOOL};
  return kTypes;
}

class CastGpuOp : public OpKernel {
 public:
  explicit CastGpuOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("SrcT", &src_).IgnoreError();  // Failures are recorded on c.
    c->GetAttr("DstT", &dst_).IgnoreError();
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    if (src_ == dst_) {
      ctx->set_output(0, x);
      return absl::OkStatus();
    }
    absl::StatusOr<Elem> src = ElemOf(src_), dst = ElemOf(dst_);
    if (!src.ok()) return ctx->InvalidArgument(src.status().message());
    if (!dst.ok()) return ctx->InvalidArgument(dst.status().message());
    Tensor* y = OutputForOverwrite(ctx, 0, x.shape());
    if (y == nullptr) return absl::OkStatus();
    LaunchCast(GpuOf(ctx)->stream(), *src, *dst, x.raw_data(), y->raw_data(), x.NumElements());
    return LaunchStatus(ctx);
  }

 private:
  DataType src_ = DT_INVALID;
  DataType dst_ = DT_INVALID;
};
REGISTER_KERNEL(KernelDefBuilder("Cast")
                    .Device(kDeviceGPU)
                    .TypeConstraint("SrcT", CastTypes())
                    .TypeConstraint("DstT", CastTypes()),
                CastGpuOp);

// --- Fill, ZerosLike, OnesLike ----------------------------------------------------------------

const DataTypeVector& FillTypes() {
  static const DataTypeVector kTypes = {DT_FLOAT, DT_INT64};
  return kTypes;
}

// dims (host memory) gives the shape; value stays on the device. Not int32:
// TensorFlow's gradients fill int32 shapes, which stay on the CPU.
class FillGpuOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& value = ctx->input(1);
    ASSIGN_OR_RETURN(const TensorShape shape, FillShape(*ctx));
    ASSIGN_OR_RETURN(Elem type, ElemOf(value.dtype()));
    Tensor* out = OutputForOverwrite(ctx, 0, shape);
    if (out == nullptr) return absl::OkStatus();
    LaunchFillFromDevice(GpuOf(ctx)->stream(), type, value.raw_data(), out->raw_data(),
                         out->NumElements());
    return LaunchStatus(ctx);
  }
};
REGISTER_KERNEL(KernelDefBuilder("Fill")
                    .Device(kDeviceGPU)
                    .TypeConstraint("T", FillTypes())
                    .TypeConstraint("index_type", IndexTypes())
                    .HostMemory("dims"),
                FillGpuOp);

class ZerosLikeGpuOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    ctx->allocate_output(0, ctx->input(0).shape());  // Zero-filled on the stream.
    return LaunchStatus(ctx);
  }
};
// Not int32: int32 ones and zeros are shapes, made in host memory by the
// CPU kernel registered for GPU in dflow/ops (array_ops.cc).
const DataTypeVector& LikeTypes() {
  static const DataTypeVector kTypes = {DT_FLOAT, DT_INT64};
  return kTypes;
}

REGISTER_KERNEL(KernelDefBuilder("ZerosLike").Device(kDeviceGPU).TypeConstraint("T", LikeTypes()),
                ZerosLikeGpuOp);

class OnesLikeGpuOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    ASSIGN_OR_RETURN(Elem type, ElemOf(x.dtype()));
    Tensor* out = OutputForOverwrite(ctx, 0, x.shape());
    if (out == nullptr) return absl::OkStatus();
    LaunchFillOnes(GpuOf(ctx)->stream(), type, out->raw_data(), out->NumElements());
    return LaunchStatus(ctx);
  }
};
REGISTER_KERNEL(KernelDefBuilder("OnesLike").Device(kDeviceGPU).TypeConstraint("T", LikeTypes()),
                OnesLikeGpuOp);

// --- BiasAdd ------------------------------------------------------------------------------------

class BiasAddGpuOp : public OpKernel {
 public:
  explicit BiasAddGpuOp(OpKernelConstruction* c) : OpKernel(c) {
    absl::StatusOr<bool> nchw = ReadBiasNchw(c->def());
    if (nchw.ok()) nchw_ = *nchw;
    c->SetStatus(nchw.status());
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& value = ctx->input(0);
    const Tensor& bias = ctx->input(1);
    ASSIGN_OR_RETURN(const int cd, CheckBiasAddShapes(*ctx, nchw_, value.shape(), bias.shape()));
    const int64_t channels = value.dim_size(cd);
    Tensor* out = OutputForOverwrite(ctx, 0, value.shape());
    if (out == nullptr || value.NumElements() == 0) return absl::OkStatus();
    int64_t inner = 1;  // value viewed as [outer, channels, inner]
    for (int d = cd + 1; d < value.dims(); ++d) inner *= value.dim_size(d);
    LaunchBiasAdd(GpuOf(ctx)->stream(), ElementsOf<float>(value), ElementsOf<float>(bias), MutableElementsOf<float>(out),
                  value.NumElements(), channels, inner);
    return LaunchStatus(ctx);
  }

 private:
  bool nchw_ = false;
};
REGISTER_KERNEL(KernelDefBuilder("BiasAdd").Device(kDeviceGPU).TypeConstraint<float>("T"),
                BiasAddGpuOp);

}  // namespace
}  // namespace gpu
}  // namespace dflow
