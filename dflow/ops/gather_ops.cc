// Gather ops: rows of a tensor picked by index.
//
//   GatherV2(params, indices, axis)   along `axis`, with batch_dims leading
//       dimensions shared by params and indices
//   Gather(params, indices)           GatherV2 along axis 0 (TensorFlow 1.x's op)
//   ResourceGather(resource, indices) GatherV2 of a resource variable's value
//       along axis batch_dims, read as a snapshot
//   GatherNd(params, indices)         index vectors (indices' last dimension)
//       over params' leading dimensions, each picking a slice
//
// An index out of range is INVALID_ARGUMENT naming it (validate_indices is
// accepted and ignored: indices are always checked). OpDefs and error texts
// follow TensorFlow's. GatherNd's gradient is here, GatherV2's and Gather's
// in array_grad.cc; ResourceGather has none (TensorFlow's is IndexedSlices).
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dflow/framework/gradient.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/framework/status.h"
#include "dflow/ops/array_util.h"
#include "dflow/ops/variable_ops.h"

namespace dflow {
namespace {

// --- GatherV2 and its shape --------------------------------------------------------
//
// With B = batch_dims and A = axis, output shape is
// params[:A] + indices[B:] + params[A+1:], and
// out[b..., o..., k..., i...] = params[b..., o..., indices[b..., k...], i...].

// Canonical axis and batch_dims for params/indices of the given ranks, or
// TensorFlow's error.
absl::Status CheckGatherAxes(int params_rank, int indices_rank, int64_t axis_in, int64_t batch_in,
                             int64_t* axis, int64_t* batch_dims) {
  if (params_rank < 1) return absl::InvalidArgumentError("params must be at least 1 dimensional");
  if (!CanonicalAxis(axis_in, params_rank, axis)) {
    return absl::InvalidArgumentError(absl::StrCat("Expected axis in the range [", -params_rank,
                                                   ", ", params_rank, "), but got ", axis_in));
  }
  if (batch_in < -indices_rank || batch_in > indices_rank) {
    return absl::InvalidArgumentError(absl::StrCat("Expected batch_dims in the range [",
                                                   -indices_rank, ", ", indices_rank, "], but got ",
                                                   batch_in));
  }
  *batch_dims = batch_in < 0 ? batch_in + indices_rank : batch_in;
  if (*batch_dims >= params_rank) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batch_dims (", *batch_dims, ") must be less than rank(params) (", params_rank, ")."));
  }
  if (*batch_dims > *axis) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batch_dims (", *batch_dims, ") must be less than or equal to axis (", *axis, ")."));
  }
  return absl::OkStatus();
}

std::string BatchDimError(int i, int64_t p, int64_t q) {
  return absl::StrCat("params.shape[", i, "]: ", p, " should be equal to indices.shape[", i,
                      "]: ", q);
}

absl::Status GatherV2Shape(InferenceContext* c) {
  const PartialShape& params = c->input(0);
  const PartialShape& indices = c->input(1);
  PartialShape unused;
  RETURN_IF_ERROR(c->WithRank(c->input(2), 0, &unused));
  if (params.rank_known() && params.rank() == 0) {
    return c->Error("params must be at least 1 dimensional");
  }
  int64_t batch_in;
  RETURN_IF_ERROR(c->GetAttr("batch_dims", &batch_in));
  if (!params.rank_known() || !indices.rank_known()) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  const Tensor* axis_t = c->input_tensor(2);
  const int64_t batch_norm = batch_in < 0 ? batch_in + indices.rank() : batch_in;
  if (axis_t == nullptr) {
    const int64_t rank = params.rank() + indices.rank() - 1 - batch_norm;
    c->set_output(0, rank < 0 ? PartialShape::Unknown() : PartialShape::UnknownDims(rank));
    return absl::OkStatus();
  }
  int64_t axis = 0, batch_dims = 0;
  absl::StatusOr<int64_t> axis_in = IndexScalar(*axis_t, "axis");
  absl::Status s = axis_in.ok() ? CheckGatherAxes(params.rank(), indices.rank(), *axis_in, batch_in,
                                                  &axis, &batch_dims)
                                : axis_in.status();
  if (!s.ok()) return c->Error(std::string(s.message()));
  std::vector<int64_t> dims(params.dims().begin(), params.dims().begin() + axis);
  for (int i = 0; i < batch_dims; ++i) {
    const int64_t p = params.dim(i), q = indices.dim(i);
    if (p != kUnknownDim && q != kUnknownDim && p != q) return c->Error(BatchDimError(i, p, q));
    if (p == kUnknownDim) dims[i] = q;
  }
  dims.insert(dims.end(), indices.dims().begin() + batch_dims, indices.dims().end());
  dims.insert(dims.end(), params.dims().begin() + axis + 1, params.dims().end());
  c->set_output(0, PartialShape(std::move(dims)));
  return absl::OkStatus();
}

// "[i,j]": the position of flat element k in a row-major array of `dims`.
std::string Position(int64_t k, absl::Span<const int64_t> dims) {
  std::vector<int64_t> pos(dims.size());
  for (int d = static_cast<int>(dims.size()) - 1; d >= 0; --d) {
    pos[d] = k % dims[d], k /= dims[d];
  }
  return DimsString(pos);
}

// InvalidArgument naming the first index outside [0, limit) and where it is.
absl::Status CheckIndices(OpKernelContext* ctx, const std::vector<int64_t>& indices,
                          const TensorShape& shape, int64_t limit) {
  for (size_t k = 0; k < indices.size(); ++k) {
    if (indices[k] >= 0 && indices[k] < limit) continue;
    return ctx->InvalidArgument("indices", Position(k, shape.dim_sizes()), " = ", indices[k],
                                " is not in [0, ", limit, ")");
  }
  return absl::OkStatus();
}

// params as [batch, outer, limit, inner], indices as [batch, per_batch].
struct GatherLayout {
  int64_t batch, outer, limit, inner, per_batch;
};

absl::Status CopyGatheredRows(OpKernelContext* ctx, const Tensor& params,
                              const std::vector<int64_t>& indices, const GatherLayout& l,
                              Tensor* out) {
  return SwitchByElementSize(params.dtype(), "Gather", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    const T* src = ElementsOf<T>(params);
    T* dst = MutableElementsOf<T>(out);
    // Output row r = ((b * outer + o) * per_batch + k) copies `inner` elements.
    auto rows = [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const int64_t k = r % l.per_batch, bo = r / l.per_batch, b = bo / l.outer;
        const int64_t idx = indices[b * l.per_batch + k];
        std::copy_n(src + (bo * l.limit + idx) * l.inner, l.inner, dst + r * l.inner);
      }
    };
    ctx->intra_op_pool()->ParallelFor(l.batch * l.outer * l.per_batch,
                                      l.inner * static_cast<int64_t>(sizeof(T)) + 10, rows);
    return absl::OkStatus();
  });
}

// GatherV2(params, indices, axis) with batch_dims, into output 0: the one
// gather every Gather op runs.
absl::Status GatherInto(OpKernelContext* ctx, const Tensor& params, const Tensor& indices_t,
                        int64_t axis_in, int64_t batch_in) {
  int64_t axis, batch_dims;
  absl::Status s =
      CheckGatherAxes(params.dims(), indices_t.dims(), axis_in, batch_in, &axis, &batch_dims);
  if (!s.ok()) return ctx->InvalidArgument(s.message());
  for (int i = 0; i < batch_dims; ++i) {
    if (params.dim_size(i) != indices_t.dim_size(i)) {
      return ctx->InvalidArgument(BatchDimError(i, params.dim_size(i), indices_t.dim_size(i)));
    }
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> indices, IndexValues(indices_t, "indices"));
  const int64_t limit = params.dim_size(static_cast<int>(axis));
  RETURN_IF_ERROR(CheckIndices(ctx, indices, indices_t.shape(), limit));
  auto p = params.shape().dim_sizes();
  std::vector<int64_t> dims(p.begin(), p.begin() + axis);
  for (int i = batch_dims; i < indices_t.dims(); ++i) dims.push_back(indices_t.dim_size(i));
  for (int i = axis + 1; i < params.dims(); ++i) dims.push_back(params.dim_size(i));
  ASSIGN_OR_RETURN(TensorShape out_shape,
                   OutputShape(dims, params.dtype(), ctx->op_kernel().type_string()));
  Tensor* out = ctx->allocate_output_for_overwrite(0, out_shape);
  if (!ctx->allocation_status().ok()) return absl::OkStatus();  // The executor reports it.
  if (out->NumElements() == 0) return absl::OkStatus();
  GatherLayout l;
  l.batch = DimProduct(p, 0, batch_dims);
  l.outer = DimProduct(p, batch_dims, axis);
  l.limit = limit;
  l.inner = DimProduct(p, axis + 1, params.dims());
  l.per_batch = indices_t.NumElements() / l.batch;
  if (out->memory_type() == MemoryType::kDevice) {
    // Output row r = ((b * outer + o) * per_batch + k), as CopyGatheredRows.
    std::vector<int64_t> from(l.batch * l.outer * l.per_batch);
    for (int64_t r = 0; r < static_cast<int64_t>(from.size()); ++r) {
      const int64_t k = r % l.per_batch, bo = r / l.per_batch, b = bo / l.outer;
      from[r] = (bo * l.limit + indices[b * l.per_batch + k]) * l.inner;
    }
    return GatherRowsOnDevice(ctx, params, from, l.inner, out);
  }
  return CopyGatheredRows(ctx, params, indices, l, out);
}

class GatherV2Op : public OpKernel {
 public:
  explicit GatherV2Op(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("batch_dims", &batch_dims_).IgnoreError();  // Recorded on c.
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& axis_t = ctx->input(2);
    if (axis_t.dims() != 0) {
      return ctx->InvalidArgument("axis must be scalar, got shape ", axis_t.shape().DebugString());
    }
    ASSIGN_OR_RETURN(int64_t axis, IndexScalar(axis_t, "axis"));
    return GatherInto(ctx, ctx->input(0), ctx->input(1), axis, batch_dims_);
  }

 private:
  int64_t batch_dims_ = 0;
};

REGISTER_OP("GatherV2")
    .Input("params: Tparams")
    .Input("indices: Tindices")
    .Input("axis: Taxis")
    .Output("output: Tparams")
    .Attr("batch_dims: int = 0")
    .Attr("Tparams: type")
    .Attr("Tindices: {int16, int32, int64}")
    .Attr("Taxis: {int32, int64}")
    .SetShapeFn(GatherV2Shape);
REGISTER_KERNEL(KernelDefBuilder("GatherV2")
                    .Device(kDeviceCPU)
                    .TypeConstraint("Tparams", MovableTypes())
                    .TypeConstraint("Tindices", IndexTypes())
                    .TypeConstraint("Taxis", IndexTypes()),
                GatherV2Op);
// On a GPU the indices are in host memory, checked there with the CPU's
// messages (TensorFlow's GPU kernel reads a bad index as zeros), and the
// rows are gathered in device memory by one kernel (Device::GatherRows). An
// int32 gather picks dims of a shape (Mean's gradient): in host memory, with
// the CPU kernel.
REGISTER_KERNEL(KernelDefBuilder("GatherV2")
                    .Device(kDeviceGPU)
                    .TypeConstraint("Tparams", GpuTensorTypes())
                    .TypeConstraint("Tindices", IndexTypes())
                    .TypeConstraint("Taxis", IndexTypes())
                    .HostMemory("indices")
                    .HostMemory("axis"),
                GatherV2Op);
REGISTER_KERNEL(KernelDefBuilder("GatherV2")
                    .Device(kDeviceGPU)
                    .TypeConstraint<int32_t>("Tparams")
                    .TypeConstraint("Tindices", IndexTypes())
                    .TypeConstraint("Taxis", IndexTypes())
                    .HostMemory("params")
                    .HostMemory("indices")
                    .HostMemory("axis")
                    .HostMemory("output"),
                GatherV2Op);

// --- Gather (v1) -------------------------------------------------------------------

class GatherOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    return GatherInto(ctx, ctx->input(0), ctx->input(1), /*axis_in=*/0, /*batch_in=*/0);
  }
};

// indices.shape + params.shape[1:].
absl::Status GatherShape(InferenceContext* c) {
  const PartialShape& params = c->input(0);
  const PartialShape& indices = c->input(1);
  if (params.rank_known() && params.rank() == 0) {
    return c->Error("params must be at least 1 dimensional");
  }
  if (!params.rank_known() || !indices.rank_known()) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  std::vector<int64_t> dims = indices.dims();
  dims.insert(dims.end(), params.dims().begin() + 1, params.dims().end());
  c->set_output(0, PartialShape(std::move(dims)));
  return absl::OkStatus();
}

REGISTER_OP("Gather")
    .Input("params: Tparams")
    .Input("indices: Tindices")
    .Output("output: Tparams")
    .Attr("validate_indices: bool = true")
    .Attr("Tparams: type")
    .Attr("Tindices: {int32, int64}")
    .SetShapeFn(GatherShape);
REGISTER_KERNEL(KernelDefBuilder("Gather")
                    .Device(kDeviceCPU)
                    .TypeConstraint("Tparams", MovableTypes())
                    .TypeConstraint("Tindices", IndexTypes()),
                GatherOp);
REGISTER_KERNEL(KernelDefBuilder("Gather")
                    .Device(kDeviceGPU)
                    .TypeConstraint("Tparams", GpuTensorTypes())
                    .TypeConstraint("Tindices", IndexTypes())
                    .HostMemory("indices"),
                GatherOp);

// --- ResourceGather ----------------------------------------------------------------

class ResourceGatherOp : public OpKernel {
 public:
  explicit ResourceGatherOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("dtype", &dtype_).IgnoreError();
    c->GetAttr("batch_dims", &batch_dims_).IgnoreError();
  }
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(std::shared_ptr<Var> var, LookupInitializedVar(*ctx, 0));
    if (var->dtype() != dtype_) {
      return ctx->InvalidArgument("trying to read variable with wrong dtype: expected ",
                                  DataTypeString(dtype_), ", got ", DataTypeString(var->dtype()));
    }
    // A snapshot: later updates of the variable do not change it.
    std::optional<Tensor> value = var->Snapshot();
    if (!value) return absl::InternalError("variable lost its value");
    return GatherInto(ctx, *value, ctx->input(1), /*axis_in=*/batch_dims_, batch_dims_);
  }

 private:
  DataType dtype_ = DT_INVALID;
  int64_t batch_dims_ = 0;
};

REGISTER_OP("ResourceGather")
    .Input("resource: resource")
    .Input("indices: Tindices")
    .Output("output: dtype")
    .Attr("batch_dims: int = 0")
    .Attr("validate_indices: bool = true")
    .Attr("dtype: type")
    .Attr("Tindices: {int32, int64}")
    .SetIsStateful()
    .SetShapeFn(UnknownShape);
REGISTER_KERNEL(KernelDefBuilder("ResourceGather")
                    .Device(kDeviceCPU)
                    .TypeConstraint("dtype", MovableTypes())
                    .TypeConstraint("Tindices", IndexTypes()),
                ResourceGatherOp);

// --- GatherNd ----------------------------------------------------------------------
//
// indices [..., depth] picks, for each index vector, the slice
// params[i_0, ..., i_{depth-1}, :, ...]; output shape is
// indices.shape[:-1] + params.shape[depth:].

class GatherNdOp : public OpKernel {
 public:
  explicit GatherNdOp(OpKernelConstruction* c) : OpKernel(c) {
    std::string policy;
    if (c->HasAttr("bad_indices_policy")) c->GetAttr("bad_indices_policy", &policy).IgnoreError();
    absl::StatusOr<bool> ignore = IgnoresBadIndices("GatherNd", policy);
    c->SetStatus(ignore.status());
    ignore_bad_indices_ = ignore.value_or(false);
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& params = ctx->input(0);
    const Tensor& indices_t = ctx->input(1);
    if (params.dims() < 1) return ctx->InvalidArgument("params must be at least a vector");
    if (indices_t.dims() < 1) return ctx->InvalidArgument("indices must be at least a vector");
    const int rank = indices_t.dims();
    const int64_t depth = indices_t.dim_size(rank - 1);
    if (depth > params.dims()) {
      return ctx->InvalidArgument("index innermost dimension length must be <= params rank; saw: ",
                                  depth, " vs. ", params.dims());
    }
    ASSIGN_OR_RETURN(std::vector<int64_t> indices, IndexValues(indices_t, "indices"));
    auto p = params.shape().dim_sizes();
    std::vector<int64_t> dims(indices_t.shape().dim_sizes().begin(),
                              indices_t.shape().dim_sizes().end() - 1);
    dims.insert(dims.end(), p.begin() + depth, p.end());
    ASSIGN_OR_RETURN(TensorShape out_shape, OutputShape(dims, params.dtype(), "GatherNd"));
    const int64_t n = DimProduct(indices_t.shape().dim_sizes(), 0, rank - 1);
    const int64_t slice = DimProduct(p, static_cast<int>(depth), params.dims());
    // Each index vector's first element in params, or -1 to leave zeros.
    std::vector<int64_t> offsets(n);
    for (int64_t i = 0; i < n; ++i) {
      int64_t offset = 0;
      bool bad = false;
      for (int64_t d = 0; d < depth && !bad; ++d) {
        const int64_t k = indices[i * depth + d];
        bad = k < 0 || k >= p[d];
        offset = offset * p[d] + k;
      }
      if (bad && !ignore_bad_indices_) {
        std::vector<int64_t> index(indices.begin() + i * depth, indices.begin() + (i + 1) * depth);
        return ctx->InvalidArgument(
            "indices", Position(i, absl::MakeConstSpan(dims).first(rank - 1)), " = [",
            absl::StrJoin(index, ", "), "] does not index into param shape ",
            params.shape().DebugString());
      }
      offsets[i] = bad ? -1 : offset * slice;
    }
    Tensor* out = ctx->allocate_output(0, out_shape);  // Zeros where an index is ignored.
    if (out->NumElements() == 0) return absl::OkStatus();
    return SwitchByElementSize(params.dtype(), "GatherNd", [&](auto tag) -> absl::Status {
      using T = typename decltype(tag)::type;
      const T* src = ElementsOf<T>(params);
      T* dst = MutableElementsOf<T>(out);
      ctx->intra_op_pool()->ParallelFor(n, slice * static_cast<int64_t>(sizeof(T)) + 10,
                                        [&](int64_t begin, int64_t end) {
                                          for (int64_t i = begin; i < end; ++i) {
                                            if (offsets[i] >= 0)
                                              std::copy_n(src + offsets[i], slice, dst + i * slice);
                                          }
                                        });
      return absl::OkStatus();
    });
  }

 private:
  bool ignore_bad_indices_ = false;
};

absl::Status GatherNdShape(InferenceContext* c) {
  const PartialShape& params = c->input(0);
  const PartialShape& indices = c->input(1);
  if (params.rank_known() && params.rank() == 0)
    return c->Error("params must be at least a vector");
  if (indices.rank_known() && indices.rank() == 0) {
    return c->Error("indices must be at least a vector");
  }
  if (!params.rank_known() || !indices.rank_known() ||
      indices.dim(indices.rank() - 1) == kUnknownDim) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  const int64_t depth = indices.dim(indices.rank() - 1);
  if (depth > params.rank()) {
    return c->Error(absl::StrCat("index innermost dimension length must be <= params rank; saw: ",
                                 depth, " vs. ", params.rank()));
  }
  std::vector<int64_t> dims(indices.dims().begin(), indices.dims().end() - 1);
  dims.insert(dims.end(), params.dims().begin() + depth, params.dims().end());
  c->set_output(0, PartialShape(std::move(dims)));
  return absl::OkStatus();
}

REGISTER_OP("GatherNd")
    .Input("params: Tparams")
    .Input("indices: Tindices")
    .Output("output: Tparams")
    .Attr("Tparams: type")
    .Attr("Tindices: {int16, int32, int64}")
    .Attr("bad_indices_policy: string = ''")
    .SetShapeFn(GatherNdShape);
REGISTER_KERNEL(KernelDefBuilder("GatherNd")
                    .Device(kDeviceCPU)
                    .TypeConstraint("Tparams", MovableTypes())
                    .TypeConstraint("Tindices", IndexTypes()),
                GatherNdOp);

// d(params) = ScatterNd(indices, dy, shape(params)): each gathered slice's
// gradient summed back where it came from.
absl::Status GatherNdGrad(GradContext* g) {
  GradBuilder* b = g->b();
  const SymTensor indices = g->input(1);
  const SymTensor shape = b->Op("Shape", {g->input(0)}, {{"out_type", AttrType(indices.dtype)}});
  g->SetInputGrad(0, b->Op("ScatterNd", {indices, g->grad_output(0), shape}));
  return absl::OkStatus();
}
REGISTER_GRADIENT("GatherNd", GatherNdGrad);

}  // namespace
}  // namespace dflow
