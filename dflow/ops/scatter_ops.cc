// Scatter ops:
//
//   ScatterAdd, ScatterSub, ScatterMul, ScatterDiv, ScatterMin, ScatterMax,
//   ScatterUpdate   rows of a reference variable,
//       ref[indices[i], ...] (+= | -= | *= | /= | min= | max= | =) updates[i, ...],
//       in place under the variable's lock, indices in order (a repeated
//       index applies each update); updates' shape is indices' shape + ref's
//       row shape, or a scalar for every element
//   ResourceScatter{Add,Sub,Mul,Div,Min,Max,Update}   the same on the
//       resource variable input 0 names, under its lock
//   ScatterNd   a new tensor of `shape`, zero but for updates summed at
//       indices (index vectors over its leading dimensions)
//   SparseToDense   a new tensor of output_shape holding default_value but
//       at sparse_indices, which get sparse_values (the last of repeated
//       indices wins when validate_indices is off); its gradient, as
//       TensorFlow's: the output gradient at sparse_indices for sparse_values,
//       the sum of the rest for default_value
//
// An index out of range is INVALID_ARGUMENT naming it. OpDefs and error
// texts follow TensorFlow's.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dflow/framework/gradient.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/ops/array_util.h"
#include "dflow/ops/cwise_ops.h"
#include "dflow/ops/grad_util.h"
#include "dflow/ops/scatter_ops.h"
#include "dflow/ops/state_ops.h"
#include "dflow/ops/variable_ops.h"

namespace dflow {
namespace {

// Input i of `ctx` as int64 values (int32 or int64), else INVALID_ARGUMENT
// naming the node and `what`.
absl::StatusOr<std::vector<int64_t>> IndexInput(OpKernelContext* ctx, int i, const char* what) {
  absl::StatusOr<std::vector<int64_t>> v = IndexValues(ctx->input(i), what);
  if (!v.ok()) return ctx->InvalidArgument(v.status().message());
  return v;
}

// True when the integer tensor `t` (in host memory) holds a 0.
bool HasZero(const Tensor& t) {
  if (t.dtype() == DT_INT32) {
    auto v = t.flat<int32_t>();
    return std::find(v.begin(), v.end(), 0) != v.end();
  }
  auto v = t.flat<int64_t>();
  return std::find(v.begin(), v.end(), int64_t{0}) != v.end();
}

// ref[indices[i], ...] (op)= updates[i, ...] (`indices` read from input 1,
// updates input 2) in place, in ref's memory (a device's:
// Device::ScatterRows), after checking updates' shape and every index (and,
// for integer division, every divisor) so that an error changes nothing.
// REQUIRES: the caller holds ref's lock.
absl::Status ScatterIntoRows(OpKernelContext* ctx, ScatterOp op,
                             const std::vector<int64_t>& indices, Tensor* ref) {
  const Tensor& indices_t = ctx->input(1);
  const Tensor& updates = ctx->input(2);
  if (ref->dims() < 1) return ctx->InvalidArgument("Expected ref to be at least 1-D");
  // updates: indices' shape, then the shape of one row of ref.
  TensorShape want = indices_t.shape();
  for (int d = 1; d < ref->dims(); ++d) want.AddDim(ref->dim_size(d));
  const bool scalar = updates.dims() == 0;  // One value for every element scattered.
  if (!scalar && updates.shape() != want) {
    return ctx->InvalidArgument(
        "Must have updates.shape = indices.shape + params.shape[1:] or updates.shape = "
        "[], got updates.shape ",
        updates.shape().DebugString(), ", indices.shape ", indices_t.shape().DebugString(),
        ", params.shape ", ref->shape().DebugString());
  }
  const int64_t rows = ref->dim_size(0);
  for (size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] < 0 || indices[i] >= rows) {
      return ctx->InvalidArgument("indices[", i, "] = ", indices[i], " is not in [0, ", rows,
                                  ")");
    }
  }
  const bool integer_division =
      op == ScatterOp::kDiv && (updates.dtype() == DT_INT32 || updates.dtype() == DT_INT64);
  if (ref->memory_type() == MemoryType::kDevice) {  // A GPU's variable: queued there.
    if (integer_division) {  // Its divisors would have to come back to be checked.
      return absl::UnimplementedError(
          absl::StrCat(ctx->Prefix(), "integer division of a variable in device memory"));
    }
    return ctx->device()->ScatterRows(op, updates, indices, ref);
  }
  if (integer_division && HasZero(updates)) {
    return ctx->InvalidArgument("updates must not contain 0");
  }
  return ScatterRowsOnHost(op, updates, indices, ref);
}

// Scatter<op> on a reference variable (input 0), which it outputs.
template <ScatterOp kOp>
struct ScatterRef {
  template <typename T>
  class Op : public OpKernel {
   public:
    using OpKernel::OpKernel;

    absl::Status Compute(OpKernelContext* ctx) override {
      ASSIGN_OR_RETURN(const std::vector<int64_t> indices, IndexInput(ctx, 1, "indices"));
      {
        RefInputsLock lock(*ctx, {0});
        RETURN_IF_ERROR(CheckRefInitialized(*ctx, 0));
        RETURN_IF_ERROR(ScatterIntoRows(ctx, kOp, indices, MutableRefInput(ctx, 0)));
      }
      ForwardRefInput(ctx, 0, 0);
      return absl::OkStatus();
    }
  };
};

// ResourceScatter<op> on the resource variable input 0 names.
template <ScatterOp kOp>
struct ScatterResource {
  template <typename T>
  class Op : public OpKernel {
   public:
    using OpKernel::OpKernel;

    absl::Status Compute(OpKernelContext* ctx) override {
      return ScatterIntoVariable(ctx, kOp, [](Var* var) -> absl::StatusOr<Tensor*> {
        return var->MutableTensor();
      });
    }
  };
};

absl::Status ScatterShape(InferenceContext* c) {
  c->set_output(0, c->input(0));
  return absl::OkStatus();
}

OpDefBuilder ScatterOpDef(const std::string& name, const std::string& types, bool locking) {
  return OpDefBuilder(name)
      .Input("ref: Ref(T)")
      .Input("indices: Tindices")
      .Input("updates: T")
      .Output("output_ref: Ref(T)")
      .Attr("T: " + types)
      .Attr("Tindices: {int32, int64}")
      .Attr(locking ? "use_locking: bool = true" : "use_locking: bool = false")
      .SetShapeFn(ScatterShape);
}

OpDefBuilder ResourceScatterOpDef(const std::string& name, const std::string& types) {
  return OpDefBuilder(name)
      .Input("resource: resource")
      .Input("indices: Tindices")
      .Input("updates: dtype")
      .Attr("dtype: " + types)
      .Attr("Tindices: {int32, int64}")
      .SetIsStateful()
      .SetShapeFn(NoOutputs);
}

constexpr char kNumbers[] = "{float, double, int32, int64}";

// Registers Scatter<name> (ref) and ResourceScatter<name> with their kernels
// for float, double, int32 and int64.
template <ScatterOp kOp>
struct ScatterFamily {
  ScatterFamily(const std::string& name, const std::string& types, bool locking)
      : ref_op(ScatterOpDef("Scatter" + name, types, locking)),
        resource_op(ResourceScatterOpDef("ResourceScatter" + name, types)),
        ref_kernels("Scatter" + name),
        resource_kernels("ResourceScatter" + name, "dtype") {}
  OpDefBuilderReceiver ref_op;
  OpDefBuilderReceiver resource_op;
  CpuKernels<ScatterRef<kOp>::template Op, float, double, int32_t, int64_t> ref_kernels;
  CpuKernels<ScatterResource<kOp>::template Op, float, double, int32_t, int64_t>
      resource_kernels;
};

const ScatterFamily<ScatterOp::kAdd> scatter_add("Add", kNumbers, false);
const ScatterFamily<ScatterOp::kSub> scatter_sub("Sub", kNumbers, false);
const ScatterFamily<ScatterOp::kMul> scatter_mul("Mul", kNumbers, false);
const ScatterFamily<ScatterOp::kDiv> scatter_div("Div", kNumbers, false);
const ScatterFamily<ScatterOp::kMin> scatter_min("Min", kNumbers, false);
const ScatterFamily<ScatterOp::kMax> scatter_max("Max", kNumbers, false);
const ScatterFamily<ScatterOp::kUpdate> scatter_update("Update", "type", true);
// ScatterUpdate also moves bools.
CpuKernels<ScatterRef<ScatterOp::kUpdate>::Op, bool> scatter_update_bool_kernels("ScatterUpdate");
CpuKernels<ScatterResource<ScatterOp::kUpdate>::Op, bool> resource_scatter_update_bool_kernels(
    "ResourceScatterUpdate", "dtype");

// On a GPU, Scatter<name> of a variable in device memory (float, double,
// int64; Div of floating point only), its indices read on the host: the rows
// are combined there (Device::ScatterRows), as embedding models' sparse
// updates (ScatterSub of SGD, ScatterAdd of Adam's slots) need. int32
// variables stay on the CPU, as in TensorFlow.
template <ScatterOp kOp, typename... Ts>
struct GpuScatterKernels {
  explicit GpuScatterKernels(const std::string& op) { (Register<Ts>(op), ...); }
  template <typename T>
  static void Register(const std::string& op) {
    KernelRegistry::Global()->Register(
        KernelDefBuilder(op)
            .Device(kDeviceGPU)
            .TypeConstraint<T>("T")
            .HostMemory("indices")
            .Build(),
        [](OpKernelConstruction* c) -> std::unique_ptr<OpKernel> {
          return std::make_unique<typename ScatterRef<kOp>::template Op<T>>(c);
        });
  }
};
const GpuScatterKernels<ScatterOp::kAdd, float, double, int64_t> gpu_scatter_add("ScatterAdd");
const GpuScatterKernels<ScatterOp::kSub, float, double, int64_t> gpu_scatter_sub("ScatterSub");
const GpuScatterKernels<ScatterOp::kMul, float, double, int64_t> gpu_scatter_mul("ScatterMul");
const GpuScatterKernels<ScatterOp::kDiv, float, double> gpu_scatter_div("ScatterDiv");
const GpuScatterKernels<ScatterOp::kMin, float, double, int64_t> gpu_scatter_min("ScatterMin");
const GpuScatterKernels<ScatterOp::kMax, float, double, int64_t> gpu_scatter_max("ScatterMax");
const GpuScatterKernels<ScatterOp::kUpdate, float, double, int64_t> gpu_scatter_update(
    "ScatterUpdate");

// --- ScatterNd -------------------------------------------------------------------------

template <typename T>
class ScatterNdOp : public OpKernel {
 public:
  explicit ScatterNdOp(OpKernelConstruction* c) : OpKernel(c) {
    std::string policy;
    if (c->HasAttr("bad_indices_policy")) c->GetAttr("bad_indices_policy", &policy).IgnoreError();
    absl::StatusOr<bool> ignore = IgnoresBadIndices("ScatterNd", policy);
    c->SetStatus(ignore.status());
    ignore_bad_indices_ = ignore.value_or(false);
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(const std::vector<int64_t> indices, IndexInput(ctx, 0, "indices"));
    ASSIGN_OR_RETURN(const std::vector<int64_t> dims, IndexInput(ctx, 2, "shape"));
    const Tensor& indices_t = ctx->input(0);
    const Tensor& updates = ctx->input(1);
    if (ctx->input(2).dims() != 1) return ctx->InvalidArgument("shape must be a vector");
    absl::StatusOr<TensorShape> shape_or = TensorShape::FromDims(dims);  // Checks overflow.
    if (!shape_or.ok()) return ctx->InvalidArgument("shape: ", shape_or.status().message());
    const TensorShape& shape = *shape_or;
    RETURN_IF_ERROR(CheckTensorBytes(DataTypeToEnum<T>::value, shape));
    if (indices_t.dims() < 1) return ctx->InvalidArgument("indices must be at least 1-D");
    const int64_t depth = indices_t.dim_size(indices_t.dims() - 1);  // Index length.
    if (depth > shape.dims()) {
      return ctx->InvalidArgument("indices' last dimension (", depth,
                                  ") is more than the rank of shape ", shape.DebugString());
    }
    // updates: indices' leading dims, then shape's dims past `depth`.
    TensorShape want;
    for (int d = 0; d + 1 < indices_t.dims(); ++d) want.AddDim(indices_t.dim_size(d));
    int64_t slice = 1;
    for (int d = static_cast<int>(depth); d < shape.dims(); ++d) {
      want.AddDim(shape.dim_size(d));
      slice *= shape.dim_size(d);
    }
    if (updates.shape() != want) {
      return ctx->InvalidArgument("updates must have shape ", want.DebugString(), " for indices ",
                                  indices_t.shape().DebugString(), " and shape ",
                                  shape.DebugString(), ", got ", updates.shape().DebugString());
    }
    Tensor* out = ctx->allocate_output(0, shape);  // Zeros.
    int64_t n = 1;  // Index vectors: the leading dimensions of indices.
    for (int d = 0; d + 1 < indices_t.dims(); ++d) n *= indices_t.dim_size(d);
    for (int64_t i = 0; i < n && slice > 0; ++i) {
      int64_t offset = 0;
      bool bad = false;
      for (int64_t d = 0; d < depth && !bad; ++d) {
        const int64_t k = indices[i * depth + d];
        bad = k < 0 || k >= shape.dim_size(static_cast<int>(d));
        offset = offset * shape.dim_size(static_cast<int>(d)) + k;
      }
      if (bad && ignore_bad_indices_) continue;
      if (bad) {
        std::vector<int64_t> index(indices.begin() + i * depth, indices.begin() + (i + 1) * depth);
        return ctx->InvalidArgument("indices[", i, "] = [", absl::StrJoin(index, ", "),
                                    "] does not index into shape ", shape.DebugString());
      }
      T* dst = out->flat<T>().data() + offset * slice;
      const T* src = updates.flat<T>().data() + i * slice;
      for (int64_t k = 0; k < slice; ++k) dst[k] += src[k];
    }
    return absl::OkStatus();
  }

 private:
  bool ignore_bad_indices_ = false;
};

REGISTER_OP("ScatterNd")
    .Input("indices: Tindices")
    .Input("updates: T")
    .Input("shape: Tindices")
    .Output("output: T")
    .Attr("T: type")
    .Attr("Tindices: {int32, int64}")
    .Attr("bad_indices_policy: string = ''")
    .SetShapeFn(UnknownShape);
CpuKernels<ScatterNdOp, float, double, int32_t, int64_t> scatter_nd_kernels("ScatterNd");

// --- SparseToDense -------------------------------------------------------------------

class SparseToDenseOp : public OpKernel {
 public:
  explicit SparseToDenseOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("validate_indices", &validate_).IgnoreError();
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& indices_t = ctx->input(0);
    const Tensor& shape_t = ctx->input(1);
    const Tensor& values = ctx->input(2);
    const Tensor& default_value = ctx->input(3);
    if (indices_t.dims() > 2) {
      return ctx->InvalidArgument("sparse_indices should be a scalar, vector, or matrix, got shape ",
                                  indices_t.shape().DebugString());
    }
    if (shape_t.dims() != 1) {
      return ctx->InvalidArgument("output_shape must be rank 1, got shape ",
                                  shape_t.shape().DebugString());
    }
    // n index vectors of `rank` elements each.
    const int64_t n = indices_t.dims() > 0 ? indices_t.dim_size(0) : 1;
    const int64_t rank = indices_t.dims() > 1 ? indices_t.dim_size(1) : 1;
    if (shape_t.NumElements() != rank) {
      return ctx->InvalidArgument("output_shape has incorrect number of elements: ",
                                  shape_t.NumElements(), " should be: ", rank);
    }
    if (values.dims() != 0 && values.shape() != TensorShape({n})) {
      return ctx->InvalidArgument("sparse_values has incorrect shape ",
                                  values.shape().DebugString(), ", should be [] or [", n, "]");
    }
    if (default_value.dims() != 0) return ctx->InvalidArgument("default_value should be a scalar.");
    ASSIGN_OR_RETURN(const std::vector<int64_t> dims, IndexInput(ctx, 1, "output_shape"));
    for (int64_t d : dims) {
      if (d < 0) return ctx->InvalidArgument("Dimension ", d, " must be >= 0");
    }
    ASSIGN_OR_RETURN(TensorShape shape, OutputShape(dims, values.dtype(), "SparseToDense"));
    ASSIGN_OR_RETURN(const std::vector<int64_t> indices, IndexInput(ctx, 0, "sparse_indices"));
    ASSIGN_OR_RETURN(const std::vector<int64_t> offsets, Offsets(ctx, indices, n, dims));
    Tensor* out = ctx->allocate_output_for_overwrite(0, shape);
    return SwitchByElementSize(values.dtype(), "SparseToDense", [&](auto tag) -> absl::Status {
      using T = typename decltype(tag)::type;
      T* o = MutableElementsOf<T>(out);
      std::fill(o, o + out->NumElements(), ElementsOf<T>(default_value)[0]);
      const T* v = ElementsOf<T>(values);
      for (int64_t i = 0; i < n; ++i) o[offsets[i]] = v[values.dims() == 0 ? 0 : i];
      return absl::OkStatus();
    });
  }

 private:
  // Each index vector's offset in the output. Out-of-bounds indices always
  // fail; with validate_indices also unsorted or repeated ones.
  absl::StatusOr<std::vector<int64_t>> Offsets(OpKernelContext* ctx,
                                               const std::vector<int64_t>& indices, int64_t n,
                                               const std::vector<int64_t>& dims) const {
    const int64_t rank = static_cast<int64_t>(dims.size());
    std::vector<int64_t> offsets(n);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t* index = indices.data() + i * rank;
      int64_t offset = 0;
      for (int64_t d = 0; d < rank; ++d) {
        if (index[d] < 0 || index[d] >= dims[d]) {
          return ctx->InvalidArgument("indices[", i, "] = ",
                                      DimsString(absl::MakeConstSpan(index, rank)),
                                      " is out of bounds: need 0 <= index < ", DimsString(dims));
        }
        offset = offset * dims[d] + index[d];
      }
      offsets[i] = offset;
      if (!validate_ || i == 0) continue;
      // Row-major offsets order the indices lexicographically.
      if (offset == offsets[i - 1]) {
        return ctx->InvalidArgument("indices[", i, "] = ", DimsString(absl::MakeConstSpan(index, rank)),
                                    " is repeated");
      }
      if (offset < offsets[i - 1]) {
        return ctx->InvalidArgument("indices[", i, "] = ", DimsString(absl::MakeConstSpan(index, rank)),
                                    " is out of order. Many sparse ops require sorted indices.");
      }
    }
    return offsets;
  }

  bool validate_ = true;
};

absl::Status SparseToDenseShape(InferenceContext* c) {
  PartialShape shape;
  RETURN_IF_ERROR(c->MakeShapeFromShapeTensor(1, &shape));
  c->set_output(0, std::move(shape));
  return absl::OkStatus();
}

REGISTER_OP("SparseToDense")
    .Input("sparse_indices: Tindices")
    .Input("output_shape: Tindices")
    .Input("sparse_values: T")
    .Input("default_value: T")
    .Output("dense: T")
    .Attr("validate_indices: bool = true")
    .Attr("T: type")
    .Attr("Tindices: {int32, int64}")
    .SetShapeFn(SparseToDenseShape);
REGISTER_KERNEL(KernelDefBuilder("SparseToDense")
                    .Device(kDeviceCPU)
                    .TypeConstraint("T", MovableTypes())
                    .TypeConstraint("Tindices", IndexTypes()),
                SparseToDenseOp);

// The sum of every element of `t`.
SymTensor SumAll(GradBuilder* b, const SymTensor& t) {
  return b->Op("Sum", {t, b->Op("Range", {grad::Int(b, 0), b->Op("Rank", {t}), grad::Int(b, 1)})});
}

// d(sparse_values) = dy[sparse_indices]; d(default_value) = the sum of dy
// elsewhere. TensorFlow's gathers with the indices as given, which fails to
// build for a vector of indices into a 1-D output and gives a scalar
// sparse_values a gradient per index; here the indices are read as
// [n, rank(output)] and a scalar's gradient is their sum.
absl::Status SparseToDenseGrad(GradContext* g) {
  GradBuilder* b = g->b();
  const SymTensor dy = g->grad_output(0), values = g->input(2);
  std::vector<SymTensor> index_shape =
      b->OpN("ConcatV2",
             {{grad::IntVec(b, {-1}),
               b->Op("Reshape", {b->Op("Size", {g->input(1)}), grad::IntVec(b, {1})})},
              {grad::Int(b, 0)}},
             {});
  if (index_shape.empty()) return b->status();
  const SymTensor at_indices =
      b->Op("GatherNd", {dy, b->Op("Reshape", {g->input(0), index_shape[0]})});
  const SymTensor extra_axes =
      b->Op("Range",
            {grad::Int(b, 0), b->Op("Sub", {b->Op("Rank", {at_indices}), b->Op("Rank", {values})}),
             grad::Int(b, 1)});
  g->SetInputGrad(2, b->Op("Sum", {at_indices, extra_axes}));
  g->SetInputGrad(3, b->Op("Sub", {SumAll(b, dy), SumAll(b, at_indices)}));
  return absl::OkStatus();
}

REGISTER_GRADIENT("SparseToDense", SparseToDenseGrad);
REGISTER_NO_GRADIENT("ScatterAdd");
REGISTER_NO_GRADIENT("ScatterSub");
REGISTER_NO_GRADIENT("ScatterMul");
REGISTER_NO_GRADIENT("ScatterDiv");
REGISTER_NO_GRADIENT("ScatterMin");
REGISTER_NO_GRADIENT("ScatterMax");
REGISTER_NO_GRADIENT("ScatterUpdate");

}  // namespace

absl::Status ScatterIntoVariable(OpKernelContext* ctx, ScatterOp op,
                                 absl::FunctionRef<absl::StatusOr<Tensor*>(Var*)> mutable_value) {
  ASSIGN_OR_RETURN(const std::vector<int64_t> indices, IndexInput(ctx, 1, "indices"));
  ASSIGN_OR_RETURN(std::shared_ptr<Var> var, LookupInitializedVar(*ctx, 0));
  const DataType dtype = ctx->input(2).dtype();
  if (var->dtype() != dtype) {
    return ctx->InvalidArgument("DType of scatter resource and updates does not match: ",
                                DataTypeString(var->dtype()), " vs. ", DataTypeString(dtype));
  }
  absl::MutexLock l(var->mu());
  ASSIGN_OR_RETURN(Tensor* value, mutable_value(var.get()));
  return ScatterIntoRows(ctx, op, indices, value);
}

}  // namespace dflow
