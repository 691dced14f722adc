// Array ops that create or combine tensors: Const, Placeholder,
// PlaceholderWithDefault, Identity, StopGradient, PreventGradient, IdentityN,
// NoOp, Fill, ZerosLike, OnesLike, Range, Pack, ConcatV2. Shape ops live in
// shape_ops.cc, slicing and gathering in slice_ops.cc, Transpose and Tile in
// transpose_ops.cc, Split/SplitV/Unpack in split_ops.cc.
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/framework/status.h"
#include "dflow/ops/array_util.h"

#if defined(__GNUC__) && !defined(__clang__)
#define DFLOW_NO_FP_CONTRACT __attribute__((optimize("fp-contract=off")))
#else
#define DFLOW_NO_FP_CONTRACT  // clang contracts only within one expression.
#endif

namespace dflow {
namespace {

// ---------------------------------------------------------------------------
// Const

absl::Status ConstShape(InferenceContext* c) {
  const auto& attrs = c->node_def().attr();
  auto it = attrs.find("value");
  if (it == attrs.end() || !it->second.has_tensor()) {
    return c->Error("attr 'value' is missing or not a tensor");
  }
  c->set_output(0, PartialShape::FromProto(it->second.tensor().tensor_shape()));
  return absl::OkStatus();
}

class ConstOp : public OpKernel {
 public:
  explicit ConstOp(OpKernelConstruction* c) : OpKernel(c) {
    DataType dtype;
    if (!c->GetAttr("value", &value_).ok() || !c->GetAttr("dtype", &dtype).ok()) return;
    if (value_.dtype() != dtype) {
      c->SetStatus(absl::InvalidArgumentError(absl::StrCat(
          "[Const '", name(), "'] Type mismatch between value (", DataTypeString(value_.dtype()),
          ") and dtype (", DataTypeString(dtype), ")")));
    }
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    ctx->set_output(0, value_);  // Shared: writers copy a buffer in use elsewhere.
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }

 private:
  Tensor value_;
};

REGISTER_OP("Const")
    .Output("output: dtype")
    .Attr("value: tensor")
    .Attr("dtype: type")
    .SetShapeFn(ConstShape);
REGISTER_KERNEL(
    KernelDefBuilder("Const").Device(kDeviceCPU).TypeConstraint("dtype", MovableTypes()), ConstOp);
// An int32 Const on a GPU stays in host memory, as TensorFlow's
// HostConstantOp: int32 values there are shapes and axes that host-memory
// arguments read, and it keeps such a Const's colocation group (TensorFlow's
// gradients colocate their shape constants with the op) on the GPU. Other
// dtypes have a device-memory kernel in dflow/gpu.
REGISTER_KERNEL(KernelDefBuilder("Const")
                    .Device(kDeviceGPU)
                    .TypeConstraint<int32_t>("dtype")
                    .HostMemory("output"),
                ConstOp);

// ---------------------------------------------------------------------------
// Placeholder, PlaceholderWithDefault

absl::Status ShapeAttr(InferenceContext* c, PartialShape* out) {
  tensorflow::TensorShapeProto proto;
  RETURN_IF_ERROR(c->GetAttr("shape", &proto));
  *out = PartialShape::FromProto(proto);
  return absl::OkStatus();
}

absl::Status PlaceholderShape(InferenceContext* c) {
  PartialShape shape;
  RETURN_IF_ERROR(ShapeAttr(c, &shape));
  c->set_output(0, shape);
  return absl::OkStatus();
}

class PlaceholderOp : public OpKernel {
 public:
  explicit PlaceholderOp(OpKernelConstruction* c) : OpKernel(c) {
    tensorflow::TensorShapeProto proto;
    if (c->GetAttr("shape", &proto).ok()) shape_ = PartialShape::FromProto(proto);
    c->GetAttr("dtype", &dtype_).IgnoreError();  // Recorded on c.
  }
  // Runs only when the placeholder was not fed; the message is TensorFlow's.
  absl::Status Compute(OpKernelContext* ctx) override {
    std::string msg = absl::StrCat("You must feed a value for placeholder tensor '", name(),
                                   "' with dtype ", DataTypeString(dtype_));
    if (shape_.rank_known() && shape_.rank() > 0) {
      absl::StrAppend(&msg, " and shape ", shape_.DebugString());
    }
    return absl::InvalidArgumentError(msg);
  }
  bool IsExpensive() const override { return false; }

 private:
  PartialShape shape_;
  DataType dtype_ = DT_FLOAT;
};

REGISTER_OP("Placeholder")
    .Output("output: dtype")
    .Attr("dtype: type")
    .Attr("shape: shape = { unknown_rank: true }")
    .SetShapeFn(PlaceholderShape);
REGISTER_KERNEL(KernelDefBuilder("Placeholder").Device(kDeviceCPU), PlaceholderOp);

absl::Status PlaceholderWithDefaultShape(InferenceContext* c) {
  PartialShape shape;
  RETURN_IF_ERROR(ShapeAttr(c, &shape));
  if (!PartialShape::Merge(c->input(0), shape).ok()) {
    return c->Error(absl::StrCat("input shape ", c->input(0).DebugString(),
                                 " is not compatible with shape attr ", shape.DebugString()));
  }
  c->set_output(0, shape);
  return absl::OkStatus();
}

// Identity, IdentityN and PlaceholderWithDefault: every output is the input
// of the same index, sharing its buffer.
class ForwardOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    for (int i = 0; i < ctx->num_inputs(); ++i) ctx->set_output(i, ctx->input(i));
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }
};

REGISTER_OP("PlaceholderWithDefault")
    .Input("input: dtype")
    .Output("output: dtype")
    .Attr("dtype: type")
    .Attr("shape: shape")
    .SetShapeFn(PlaceholderWithDefaultShape);
REGISTER_KERNEL(KernelDefBuilder("PlaceholderWithDefault").Device(kDeviceCPU), ForwardOp);

// ---------------------------------------------------------------------------
// Identity, IdentityN, NoOp

absl::Status IdentityNShape(InferenceContext* c) {
  for (int i = 0; i < c->num_outputs() && i < c->num_inputs(); ++i) {
    c->set_output(i, c->input(i));
  }
  return absl::OkStatus();
}

REGISTER_OP("Identity")
    .Input("input: T")
    .Output("output: T")
    .Attr("T: type")
    .SetShapeFn(UnchangedShape);
REGISTER_KERNEL(KernelDefBuilder("Identity").Device(kDeviceCPU), ForwardOp);
// On a GPU an int32 Identity (a loop's counter, read by host-memory indices)
// stays in host memory, and so does a bool one: it carries predicates (a
// tf.cond's pred_id, a while_v2 condition's result) from host-memory
// comparisons to the host-memory preds of Switch and LoopCond.
const GpuForwardKernel<ForwardOp> gpu_identity("Identity", {}, {"input", "output"},
                                               {DT_INT32, DT_BOOL});

// Identity to the forward pass; gradients stop here (tf.stop_gradient).
REGISTER_OP("StopGradient")
    .Input("input: T")
    .Output("output: T")
    .Attr("T: type")
    .SetShapeFn(UnchangedShape);
REGISTER_KERNEL(KernelDefBuilder("StopGradient").Device(kDeviceCPU), ForwardOp);
const GpuForwardKernel<ForwardOp> gpu_stop_gradient("StopGradient", {}, {"input", "output"});

// Identity to the forward pass; asking for its gradient is an error carrying
// `message` (array_grad.cc).
REGISTER_OP("PreventGradient")
    .Input("input: T")
    .Output("output: T")
    .Attr("T: type")
    .Attr("message: string = ''")
    .SetShapeFn(UnchangedShape);
REGISTER_KERNEL(KernelDefBuilder("PreventGradient").Device(kDeviceCPU), ForwardOp);

REGISTER_OP("IdentityN")
    .Input("input: T")
    .Output("output: T")
    .Attr("T: list(type) >= 1")
    .SetShapeFn(IdentityNShape);
REGISTER_KERNEL(KernelDefBuilder("IdentityN").Device(kDeviceCPU), ForwardOp);

// IdentityN on a GPU (what a lowered While or If call leaves in its place):
// its int32 values (loop counters, maximum_iterations) stay in host memory
// as every int32 on a GPU does; a list of types cannot say so per argument
// in its registration, so the kernel sets it.
class GpuIdentityNOp : public ForwardOp {
 public:
  explicit GpuIdentityNOp(OpKernelConstruction* c) : ForwardOp(Int32OnHost(c)) {}

 private:
  static OpKernelConstruction* Int32OnHost(OpKernelConstruction* c) {
    std::vector<MemoryType> in = c->input_memory_types(), out = c->output_memory_types();
    for (size_t i = 0; i < in.size(); ++i) {
      if (c->input_type(i) == DT_INT32) in[i] = MemoryType::kHost;
    }
    for (size_t i = 0; i < out.size(); ++i) {
      if (c->output_type(i) == DT_INT32) out[i] = MemoryType::kHost;
    }
    c->set_memory_types(std::move(in), std::move(out));
    return c;
  }
};
REGISTER_KERNEL(KernelDefBuilder("IdentityN").Device(kDeviceGPU), GpuIdentityNOp);

class NoOpOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override { return absl::OkStatus(); }
  bool IsExpensive() const override { return false; }
};

REGISTER_OP("NoOp").SetShapeFn(NoOutputs);
REGISTER_KERNEL(KernelDefBuilder("NoOp").Device(kDeviceCPU), NoOpOp);
REGISTER_KERNEL(KernelDefBuilder("NoOp").Device(kDeviceGPU), NoOpOp);

// ---------------------------------------------------------------------------
// Fill, ZerosLike, OnesLike

absl::Status FillShape(InferenceContext* c) {
  const PartialShape& value = c->input(1);
  if (value.rank_known() && value.NumElements() != kUnknownDim && value.NumElements() != 1) {
    return c->Error(absl::StrCat("value must be a scalar, got shape ", value.DebugString()));
  }
  PartialShape dims;
  RETURN_IF_ERROR(c->WithRank(c->input(0), 1, &dims));
  PartialShape out;
  RETURN_IF_ERROR(c->MakeShapeFromShapeTensor(0, &out));
  c->set_output(0, out);
  return absl::OkStatus();
}

class FillOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& value = ctx->input(1);
    ASSIGN_OR_RETURN(const TensorShape shape, FillShape(*ctx));
    Tensor* out = ctx->allocate_output(0, shape);
    return SwitchByElementSize(value.dtype(), "Fill", [&](auto tag) -> absl::Status {
      using T = typename decltype(tag)::type;
      std::fill_n(MutableElementsOf<T>(out), out->NumElements(), ElementsOf<T>(value)[0]);
      return absl::OkStatus();
    });
  }
};

REGISTER_OP("Fill")
    .Input("dims: index_type")
    .Input("value: T")
    .Output("output: T")
    .Attr("T: type")
    .Attr("index_type: {int32, int64} = DT_INT32")
    .SetShapeFn(FillShape);
REGISTER_KERNEL(KernelDefBuilder("Fill")
                    .Device(kDeviceCPU)
                    .TypeConstraint("T", MovableTypes())
                    .TypeConstraint("index_type", IndexTypes()),
                FillOp);
// An int32 Fill on a GPU makes a shape (the ones of a reduction's
// gradient): in host memory, with the CPU kernel.
REGISTER_KERNEL(KernelDefBuilder("Fill")
                    .Device(kDeviceGPU)
                    .TypeConstraint<int32_t>("T")
                    .TypeConstraint("index_type", IndexTypes())
                    .HostMemory("dims")
                    .HostMemory("value")
                    .HostMemory("output"),
                FillOp);

class ZerosLikeOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    ctx->allocate_output(0, ctx->input(0).shape());  // Zero-filled (empty strings).
    return absl::OkStatus();
  }
};

class OnesLikeOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    Tensor* out = ctx->allocate_output(0, x.shape());
    return SwitchNumeric(x.dtype(), "OnesLike", [&](auto tag) -> absl::Status {
      using T = typename decltype(tag)::type;
      std::fill_n(out->flat<T>().begin(), out->NumElements(), static_cast<T>(1));
      return absl::OkStatus();
    });
  }
};

REGISTER_OP("ZerosLike").Input("x: T").Output("y: T").Attr("T: type").SetShapeFn(UnchangedShape);
REGISTER_KERNEL(
    KernelDefBuilder("ZerosLike").Device(kDeviceCPU).TypeConstraint("T", MovableTypes()),
    ZerosLikeOp);

REGISTER_OP("OnesLike")
    .Input("x: T")
    .Output("y: T")
    .Attr(
        "T: {bfloat16, half, float, double, int8, uint8, int16, uint16, int32, uint32, "
        "int64, uint64, complex64, complex128, bool}")
    .SetShapeFn(UnchangedShape);
REGISTER_KERNEL(KernelDefBuilder("OnesLike")
                    .Device(kDeviceCPU)
                    .TypeConstraint("T",
                                    {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64, DT_UINT8, DT_BOOL}),
                OnesLikeOp);
// int32 ones and zeros of a shape, on a GPU in host memory, as the int32
// arithmetic they feed (GpuInt32HostKernel in cwise_ops.h).
REGISTER_KERNEL(KernelDefBuilder("OnesLike")
                    .Device(kDeviceGPU)
                    .TypeConstraint<int32_t>("T")
                    .HostMemory("x")
                    .HostMemory("y"),
                OnesLikeOp);
REGISTER_KERNEL(KernelDefBuilder("ZerosLike")
                    .Device(kDeviceGPU)
                    .TypeConstraint<int32_t>("T")
                    .HostMemory("x")
                    .HostMemory("y"),
                ZerosLikeOp);

// ---------------------------------------------------------------------------
// Range

// The number of elements of Range(start, limit, delta); errors as TensorFlow's.
template <typename T>
absl::StatusOr<int64_t> RangeSize(T start, T limit, T delta) {
  if (delta == 0) return absl::InvalidArgumentError(absl::StrCat("Requires delta != 0: ", delta));
  if (delta > 0 && start > limit) {
    return absl::InvalidArgumentError(
        absl::StrCat("Requires start <= limit when delta > 0: ", start, "/", limit));
  }
  if (delta < 0 && start < limit) {
    return absl::InvalidArgumentError(
        absl::StrCat("Requires start >= limit when delta < 0: ", start, "/", limit));
  }
  if constexpr (std::is_integral_v<T>) {
    const uint64_t span = start <= limit
                              ? static_cast<uint64_t>(limit) - static_cast<uint64_t>(start)
                              : static_cast<uint64_t>(start) - static_cast<uint64_t>(limit);
    const uint64_t step =
        delta > 0 ? static_cast<uint64_t>(delta) : uint64_t{0} - static_cast<uint64_t>(delta);
    const uint64_t size = span / step + (span % step != 0 ? 1 : 0);
    if (size > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return absl::InvalidArgumentError(absl::StrCat("Range of ", size, " elements is too big"));
    }
    return static_cast<int64_t>(size);
  } else {
    const double size = std::ceil(std::abs((static_cast<double>(limit) - start) / delta));
    if (!(size < 9.0e18)) {  // Also catches NaN and infinity.
      return absl::InvalidArgumentError(absl::StrCat("Requires a finite range: start ", start,
                                                     " limit ", limit, " delta ", delta));
    }
    return static_cast<int64_t>(size);
  }
}

// Range accepts scalars and, as TensorFlow does, one-element vectors.
absl::Status CheckRangeArg(InferenceContext* c, int i, const char* name) {
  const PartialShape& s = c->input(i);
  if (s.rank_known() &&
      (s.rank() > 1 || (s.rank() == 1 && s.dim(0) != kUnknownDim && s.dim(0) != 1))) {
    return c->Error(absl::StrCat(name, " must be a scalar, not shape ", s.DebugString()));
  }
  return absl::OkStatus();
}

absl::Status RangeShape(InferenceContext* c) {
  RETURN_IF_ERROR(CheckRangeArg(c, 0, "start"));
  RETURN_IF_ERROR(CheckRangeArg(c, 1, "limit"));
  RETURN_IF_ERROR(CheckRangeArg(c, 2, "delta"));
  const Tensor* ts[3] = {c->input_tensor(0), c->input_tensor(1), c->input_tensor(2)};
  if (ts[0] == nullptr || ts[1] == nullptr || ts[2] == nullptr) {
    c->set_output(0, PartialShape::UnknownDims(1));
    return absl::OkStatus();
  }
  for (const Tensor* t : ts) {
    if (t->NumElements() != 1) return c->Error("start, limit and delta must be scalars");
  }
  int64_t size = 0;
  auto compute = [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    absl::StatusOr<int64_t> n =
        RangeSize<T>(ts[0]->flat<T>()[0], ts[1]->flat<T>()[0], ts[2]->flat<T>()[0]);
    if (!n.ok()) return c->Error(std::string(n.status().message()));
    size = *n;
    return absl::OkStatus();
  };
  switch (ts[0]->dtype()) {
    case DT_FLOAT:
      RETURN_IF_ERROR(compute(TypeTag<float>{}));
      break;
    case DT_DOUBLE:
      RETURN_IF_ERROR(compute(TypeTag<double>{}));
      break;
    case DT_INT32:
      RETURN_IF_ERROR(compute(TypeTag<int32_t>{}));
      break;
    case DT_INT64:
      RETURN_IF_ERROR(compute(TypeTag<int64_t>{}));
      break;
    default:
      size = kUnknownDim;
      break;
  }
  c->set_output(0, PartialShape({size}));
  return absl::OkStatus();
}

template <typename T>
class RangeOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const char* names[3] = {"start", "limit", "delta"};
    T v[3];
    for (int i = 0; i < 3; ++i) {
      const Tensor& t = ctx->input(i);
      if (t.dims() > 1 || t.NumElements() != 1) {
        return ctx->InvalidArgument(names[i], " must be a scalar, not shape ",
                                    t.shape().DebugString());
      }
      v[i] = t.flat<T>()[0];
    }
    absl::StatusOr<int64_t> size = RangeSize<T>(v[0], v[1], v[2]);
    if (!size.ok()) return ctx->InvalidArgument(size.status().message());
    RETURN_IF_ERROR(CheckOutputSize(*size, DataTypeToEnum<T>::value, "Range"));
    Tensor* out = ctx->allocate_output(0, TensorShape({*size}));
    absl::Span<T> o = out->flat<T>();
    for (int64_t i = 0; i < *size; ++i) o[i] = Value(v[0], v[2], i);
    return absl::OkStatus();
  }

 private:
  // start + i * delta; integers wrap through uint64 so no step overflows.
  // Floats round the product before the sum, as TensorFlow does: a fused
  // multiply-add would give other last bits.
  DFLOW_NO_FP_CONTRACT static T Value(T start, T delta, int64_t i) {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<uint64_t>(start) +
                            static_cast<uint64_t>(i) * static_cast<uint64_t>(delta));
    } else {
      const T step = static_cast<T>(i) * delta;
      return start + step;
    }
  }
};

REGISTER_OP("Range")
    .Input("start: Tidx")
    .Input("limit: Tidx")
    .Input("delta: Tidx")
    .Output("output: Tidx")
    .Attr(
        "Tidx: {bfloat16, half, float, double, int8, int16, int32, int64, uint16, uint32, "
        "uint64} = DT_INT32")
    .SetShapeFn(RangeShape);
REGISTER_KERNEL(KernelDefBuilder("Range").Device(kDeviceCPU).TypeConstraint<float>("Tidx"),
                RangeOp<float>);
REGISTER_KERNEL(KernelDefBuilder("Range").Device(kDeviceCPU).TypeConstraint<double>("Tidx"),
                RangeOp<double>);
REGISTER_KERNEL(KernelDefBuilder("Range").Device(kDeviceCPU).TypeConstraint<int32_t>("Tidx"),
                RangeOp<int32_t>);
REGISTER_KERNEL(KernelDefBuilder("Range").Device(kDeviceCPU).TypeConstraint<int64_t>("Tidx"),
                RangeOp<int64_t>);
// An int32 range on a GPU is an index list for host-memory args (a
// TensorArray's gather indices): computed in host memory, as TensorFlow does.
REGISTER_KERNEL(KernelDefBuilder("Range")
                    .Device(kDeviceGPU)
                    .TypeConstraint<int32_t>("Tidx")
                    .HostMemory("start")
                    .HostMemory("limit")
                    .HostMemory("delta")
                    .HostMemory("output"),
                RangeOp<int32_t>);

// ---------------------------------------------------------------------------
// Pack

absl::Status PackShape(InferenceContext* c) {
  PartialShape merged = c->input(0);
  for (int i = 1; i < c->num_inputs(); ++i) {
    absl::StatusOr<PartialShape> m = PartialShape::Merge(merged, c->input(i));
    if (!m.ok()) {
      return c->Error(absl::StrCat(
          "Shapes of all inputs must match: values[0].shape = ", c->input(0).DebugString(),
          " != values[", i, "].shape = ", c->input(i).DebugString()));
    }
    merged = *std::move(m);
  }
  if (!merged.rank_known()) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  int64_t axis;
  RETURN_IF_ERROR(c->GetAttr("axis", &axis));
  const int out_rank = merged.rank() + 1;
  if (!CanonicalAxis(axis, out_rank, &axis)) {
    return c->Error(absl::StrCat("axis = ", axis, " not in [", -out_rank, ", ", out_rank, ")"));
  }
  std::vector<int64_t> dims = merged.dims();
  dims.insert(dims.begin() + axis, c->num_inputs());
  c->set_output(0, PartialShape(std::move(dims)));
  return absl::OkStatus();
}

class PackOp : public OpKernel {
 public:
  explicit PackOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("axis", &axis_).IgnoreError();  // Recorded on c.
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    const TensorShape& shape = ctx->input(0).shape();
    std::vector<const Tensor*> inputs;
    for (int i = 0; i < ctx->num_inputs(); ++i) {
      if (ctx->input(i).shape() != shape) {
        return ctx->InvalidArgument(
            "Shapes of all inputs must match: values[0].shape = ", shape.DebugString(),
            " != values[", i, "].shape = ", ctx->input(i).shape().DebugString());
      }
      inputs.push_back(&ctx->input(i));
    }
    const int out_rank = shape.dims() + 1;
    int64_t axis;
    if (!CanonicalAxis(axis_, out_rank, &axis)) {
      return ctx->InvalidArgument("axis = ", axis_, " not in [", -out_rank, ", ", out_rank, ")");
    }
    TensorShape out_shape = shape;
    out_shape.InsertDim(static_cast<int>(axis), ctx->num_inputs());
    Tensor* out = ctx->allocate_output_for_overwrite(0, out_shape);
    if (!ctx->allocation_status().ok()) return absl::OkStatus();  // The executor reports it.
    const int64_t outer = DimProduct(shape.dim_sizes(), 0, static_cast<int>(axis));
    const int64_t inner = DimProduct(shape.dim_sizes(), static_cast<int>(axis), shape.dims());
    return ConcatRowsOn(ctx, inputs, std::vector<int64_t>(inputs.size(), inner), outer, out);
  }

 private:
  int64_t axis_ = 0;
};

REGISTER_OP("Pack")
    .Input("values: N * T")
    .Output("output: T")
    .Attr("N: int >= 1")
    .Attr("T: type")
    .Attr("axis: int = 0")
    .SetShapeFn(PackShape);
REGISTER_KERNEL(KernelDefBuilder("Pack").Device(kDeviceCPU).TypeConstraint("T", MovableTypes()),
                PackOp);
REGISTER_KERNEL(KernelDefBuilder("Pack").Device(kDeviceGPU).TypeConstraint("T", GpuTensorTypes()),
                PackOp);
REGISTER_KERNEL(KernelDefBuilder("Pack")
                    .Device(kDeviceGPU)
                    .TypeConstraint<int32_t>("T")
                    .HostMemory("values")
                    .HostMemory("output"),
                PackOp);

// ---------------------------------------------------------------------------
// ConcatV2

std::string ConcatAxisRangeError(int rank, int64_t axis) {
  return absl::StrCat("ConcatOp : Expected concatenating dimensions in the range [", -rank, ", ",
                      rank, "), but got ", axis);
}
constexpr char kConcatScalars[] = "ConcatOp : Can't concatenate scalars (use tf.stack instead)";

// Rank shared by the first `n` inputs, or -1 when none is known.
absl::StatusOr<int> ConcatRank(InferenceContext* c, int n) {
  int rank = -1, first = -1;
  for (int i = 0; i < n; ++i) {
    const PartialShape& s = c->input(i);
    if (!s.rank_known()) continue;
    if (rank < 0) {
      rank = s.rank(), first = i;
    } else if (s.rank() != rank) {
      return c->Error(absl::StrCat("ConcatOp : Ranks of all input tensors should match: shape[",
                                   first, "] = ", c->input(first).DebugString(), " vs. shape[", i,
                                   "] = ", s.DebugString()));
    }
  }
  if (rank == 0) return c->Error(kConcatScalars);
  return rank;
}

absl::Status ConcatV2Shape(InferenceContext* c) {
  const int n = c->num_inputs() - 1;
  ASSIGN_OR_RETURN(int rank, ConcatRank(c, n));
  const Tensor* axis_t = c->input_tensor(n);
  if (rank < 0 || axis_t == nullptr) {
    c->set_output(0, rank < 0 ? PartialShape::Unknown() : PartialShape::UnknownDims(rank));
    return absl::OkStatus();
  }
  absl::StatusOr<int64_t> axis_value = IndexScalar(*axis_t, "axis");
  if (!axis_value.ok()) return c->Error(std::string(axis_value.status().message()));
  int64_t axis;
  if (!CanonicalAxis(*axis_value, rank, &axis)) {
    return c->Error(ConcatAxisRangeError(rank, *axis_value));
  }
  std::vector<int64_t> dims(rank, kUnknownDim);
  dims[axis] = 0;
  for (int i = 0; i < n; ++i) {
    const PartialShape& s = c->input(i);
    if (!s.rank_known()) {
      dims[axis] = kUnknownDim;
      continue;
    }
    for (int d = 0; d < rank; ++d) {
      if (d == axis) {
        dims[d] =
            (dims[d] == kUnknownDim || s.dim(d) == kUnknownDim) ? kUnknownDim : dims[d] + s.dim(d);
      } else if (dims[d] == kUnknownDim) {
        dims[d] = s.dim(d);
      } else if (s.dim(d) != kUnknownDim && s.dim(d) != dims[d]) {
        return c->Error(
            absl::StrCat("ConcatOp : Dimension ", d, " in both shapes must be equal: shape[0] = ",
                         c->input(0).DebugString(), " vs. shape[", i, "] = ", s.DebugString()));
      }
    }
  }
  c->set_output(0, PartialShape(std::move(dims)));
  return absl::OkStatus();
}

class ConcatV2Op : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const int n = ctx->num_inputs() - 1;
    const Tensor& axis_t = ctx->input(n);
    if (axis_t.NumElements() != 1 || axis_t.dims() > 1) {
      return ctx->InvalidArgument("axis tensor should be a scalar integer, but got shape ",
                                  axis_t.shape().DebugString());
    }
    ASSIGN_OR_RETURN(int64_t axis_value, IndexScalar(axis_t, "axis"));
    const TensorShape& first = ctx->input(0).shape();
    const int rank = first.dims();
    if (rank == 0) return ctx->InvalidArgument(kConcatScalars);
    int64_t axis;
    if (!CanonicalAxis(axis_value, rank, &axis)) {
      return ctx->InvalidArgument(ConcatAxisRangeError(rank, axis_value));
    }
    TensorShape out_shape = first;
    out_shape.set_dim(static_cast<int>(axis), 0);
    std::vector<const Tensor*> inputs;
    std::vector<int64_t> row_sizes;
    for (int i = 0; i < n; ++i) {
      const Tensor& t = ctx->input(i);
      RETURN_IF_ERROR(CheckCompatible(ctx, first, t.shape(), i, static_cast<int>(axis)));
      out_shape.set_dim(static_cast<int>(axis), out_shape.dim_size(axis) + t.dim_size(axis));
      inputs.push_back(&t);
      row_sizes.push_back(DimProduct(t.shape().dim_sizes(), static_cast<int>(axis), rank));
    }
    Tensor* out = ctx->allocate_output_for_overwrite(0, out_shape);
    if (!ctx->allocation_status().ok()) return absl::OkStatus();  // The executor reports it.
    const int64_t outer = DimProduct(first.dim_sizes(), 0, static_cast<int>(axis));
    return ConcatRowsOn(ctx, inputs, row_sizes, outer, out);
  }

 private:
  static absl::Status CheckCompatible(OpKernelContext* ctx, const TensorShape& first,
                                      const TensorShape& s, int i, int axis) {
    if (s.dims() != first.dims()) {
      return ctx->InvalidArgument("ConcatOp : Ranks of all input tensors should match: shape[0] = ",
                                  first.DebugString(), " vs. shape[", i, "] = ", s.DebugString());
    }
    for (int d = 0; d < s.dims(); ++d) {
      if (d != axis && s.dim_size(d) != first.dim_size(d)) {
        return ctx->InvalidArgument("ConcatOp : Dimension ", d,
                                    " in both shapes must be equal: shape[0] = ",
                                    first.DebugString(), " vs. shape[", i, "] = ", s.DebugString());
      }
    }
    return absl::OkStatus();
  }
};

REGISTER_OP("ConcatV2")
    .Input("values: N * T")
    .Input("axis: Tidx")
    .Output("output: T")
    .Attr("N: int >= 2")
    .Attr("T: type")
    .Attr("Tidx: {int32, int64} = DT_INT32")
    .SetShapeFn(ConcatV2Shape);
REGISTER_KERNEL(KernelDefBuilder("ConcatV2")
                    .Device(kDeviceCPU)
                    .TypeConstraint("T", MovableTypes())
                    .TypeConstraint("Tidx", IndexTypes()),
                ConcatV2Op);
// On a GPU the pieces are copied in device memory (Device::CopyStrided);
// int32 ones are shapes, concatenated in host memory.
REGISTER_KERNEL(KernelDefBuilder("ConcatV2")
                    .Device(kDeviceGPU)
                    .TypeConstraint("T", GpuTensorTypes())
                    .TypeConstraint("Tidx", IndexTypes())
                    .HostMemory("axis"),
                ConcatV2Op);
REGISTER_KERNEL(KernelDefBuilder("ConcatV2")
                    .Device(kDeviceGPU)
                    .TypeConstraint<int32_t>("T")
                    .TypeConstraint("Tidx", IndexTypes())
                    .HostMemory("values")
                    .HostMemory("axis")
                    .HostMemory("output"),
                ConcatV2Op);

}  // namespace
}  // namespace dflow
