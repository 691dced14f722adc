#include "dflow/ops/array_util.h"

#include <limits>
#include <algorithm>

#include "dflow/framework/device.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/status.h"

namespace dflow {
namespace {

// Largest tensor one array kernel will allocate (64 GiB); above it the
// kernel fails with ResourceExhausted instead of aborting in the allocator.
constexpr int64_t kMaxOutputBytes = int64_t{1} << 36;

// The copy plan of StridedCopy after merging contiguous trailing dims.
struct StridedPlan {
  std::vector<int64_t> out_dims;
  std::vector<int64_t> out_strides;  // elements, row-major in `out`
  std::vector<int64_t> in_steps;     // elements moved in `in` per output index
  int64_t in_start = 0;
};

StridedPlan MakeStridedPlan(absl::Span<const int64_t> in_dims, absl::Span<const int64_t> begin,
                            absl::Span<const int64_t> strides, absl::Span<const int64_t> out_dims) {
  std::vector<int64_t> in_d(in_dims.begin(), in_dims.end());
  std::vector<int64_t> beg(begin.begin(), begin.end());
  std::vector<int64_t> str(strides.begin(), strides.end());
  std::vector<int64_t> out_d(out_dims.begin(), out_dims.end());
  // A trailing dim read whole (begin 0, stride 1) after a stride-1 dim is one
  // contiguous run together with it.
  while (out_d.size() > 1) {
    const size_t last = out_d.size() - 1;
    const bool whole = beg[last] == 0 && str[last] == 1 && out_d[last] == in_d[last];
    if (!whole || str[last - 1] != 1) break;
    out_d[last - 1] *= out_d[last];
    beg[last - 1] *= in_d[last];
    in_d[last - 1] *= in_d[last];
    out_d.pop_back(), in_d.pop_back(), beg.pop_back(), str.pop_back();
  }
  StridedPlan plan;
  const int rank = static_cast<int>(out_d.size());
  plan.out_dims = out_d;
  plan.out_strides.assign(rank, 1);
  plan.in_steps.assign(rank, 1);
  int64_t in_stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    if (d < rank - 1) plan.out_strides[d] = plan.out_strides[d + 1] * out_d[d + 1];
    plan.in_steps[d] = in_stride * str[d];
    plan.in_start += in_stride * beg[d];
    in_stride *= in_d[d];
  }
  return plan;
}

template <typename T>
void StridedCopyDim(const StridedPlan& p, int d, const T* in, T* out) {
  const int64_t n = p.out_dims[d];
  const int64_t step = p.in_steps[d];
  if (d + 1 == static_cast<int>(p.out_dims.size())) {
    if (step == 1) {
      std::copy_n(in, n, out);
    } else {
      for (int64_t i = 0; i < n; ++i) out[i] = in[i * step];
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    StridedCopyDim(p, d + 1, in + i * step, out + i * p.out_strides[d]);
  }
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> IndexValues(const Tensor& t, absl::string_view what) {
  if (t.dtype() == DT_INT32) {
    auto v = t.flat<int32_t>();
    return std::vector<int64_t>(v.begin(), v.end());
  }
  if (t.dtype() == DT_INT64) {
    auto v = t.flat<int64_t>();
    return std::vector<int64_t>(v.begin(), v.end());
  }
  return absl::InvalidArgumentError(
      absl::StrCat(what, " must be int32 or int64, got ", DataTypeString(t.dtype())));
}

absl::StatusOr<int64_t> IndexScalar(const Tensor& t, absl::string_view what) {
  if (t.NumElements() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " must hold a single value, got shape ", t.shape().DebugString()));
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> v, IndexValues(t, what));
  return v[0];
}

absl::StatusOr<std::optional<std::vector<int64_t>>> ConstIndexInput(InferenceContext* c, int i,
                                                                    absl::string_view what) {
  const Tensor* t = c->input_tensor(i);
  if (t == nullptr) return std::optional<std::vector<int64_t>>();
  absl::StatusOr<std::vector<int64_t>> v = IndexValues(*t, what);
  if (!v.ok()) return c->Error(std::string(v.status().message()));
  return std::optional<std::vector<int64_t>>(*std::move(v));
}

int64_t DimProduct(absl::Span<const int64_t> dims, int begin, int end) {
  int64_t n = 1;
  for (int i = begin; i < end; ++i) n *= dims[i];
  return n;
}

absl::Status CheckOutputSize(int64_t num_elements, DataType dtype, absl::string_view op) {
  const int64_t elem = dtype == DT_STRING ? sizeof(std::string) : DataTypeSize(dtype);
  if (num_elements < 0 || (elem > 0 && num_elements > kMaxOutputBytes / elem)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("[", op, "] output of ", num_elements, " elements of ", DataTypeString(dtype),
                     " exceeds the ", kMaxOutputBytes, "-byte limit for one tensor"));
  }
  return absl::OkStatus();
}

absl::StatusOr<TensorShape> OutputShape(absl::Span<const int64_t> dims, DataType dtype,
                                        absl::string_view op) {
  absl::StatusOr<TensorShape> shape = TensorShape::FromDims(dims);
  if (!shape.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("[", op, "] output ", shape.status().message()));
  }
  RETURN_IF_ERROR(CheckOutputSize(shape->num_elements(), dtype, op));
  if (dtype != DT_STRING) RETURN_IF_ERROR(CheckTensorBytes(dtype, *shape));
  return shape;
}

absl::StatusOr<bool> IgnoresBadIndices(absl::string_view op, absl::string_view policy) {
  if (policy.empty() || policy == "DEFAULT" || policy == "ERROR") return false;
  if (policy == "IGNORE") return true;
  return absl::InvalidArgumentError(absl::StrCat(
      op, ": bad_indices_policy '", policy, "' is not one of DEFAULT, ERROR, IGNORE"));
}

absl::Status ConcatRows(const std::vector<const Tensor*>& inputs,
                        const std::vector<int64_t>& row_sizes, int64_t outer, Tensor* out,
                        ThreadPool* pool) {
  int64_t out_row = 0;
  for (int64_t r : row_sizes) out_row += r;
  if (out_row == 0 || outer == 0) return absl::OkStatus();
  return SwitchByElementSize(out->dtype(), "Concat", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    T* dst = MutableElementsOf<T>(out);
    auto copy_rows = [&](int64_t begin, int64_t end) {
      for (int64_t o = begin; o < end; ++o) {
        T* row = dst + o * out_row;
        for (size_t i = 0; i < inputs.size(); ++i) {
          const int64_t n = row_sizes[i];
          if (n == 0) continue;
          std::copy_n(ElementsOf<T>(*inputs[i]) + o * n, n, row);
          row += n;
        }
      }
    };
    if (pool == nullptr || outer == 1) {
      copy_rows(0, outer);
    } else {
      pool->ParallelFor(outer, out_row * static_cast<int64_t>(sizeof(T)), copy_rows);
    }
    return absl::OkStatus();
  });
}

absl::Status StridedCopy(const Tensor& in, absl::Span<const int64_t> begin,
                         absl::Span<const int64_t> strides, Tensor* out) {
  if (out->NumElements() == 0) return absl::OkStatus();
  return SwitchByElementSize(in.dtype(), "StridedCopy", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    const T* src = ElementsOf<T>(in);
    T* dst = MutableElementsOf<T>(out);
    if (out->dims() == 0) {
      dst[0] = src[0];
      return absl::OkStatus();
    }
    StridedPlan plan =
        MakeStridedPlan(in.shape().dim_sizes(), begin, strides, out->shape().dim_sizes());
    StridedCopyDim(plan, 0, src + plan.in_start, dst);
    return absl::OkStatus();
  });
}

absl::StatusOr<int> DeviceCopyElementSize(OpKernelContext* ctx, const Tensor& in,
                                          const Tensor& out) {
  if (in.memory_type() != MemoryType::kDevice || out.memory_type() != MemoryType::kDevice) {
    return absl::InternalError(absl::StrCat(ctx->Prefix(), "a copy on ", ctx->device()->name(),
                                            " from ", MemoryTypeName(in.memory_type()), " to ",
                                            MemoryTypeName(out.memory_type()), " memory"));
  }
  const int size = static_cast<int>(DataTypeSize(in.dtype()));
  // The device kernels move elements of 1, 2, 4 or 8 bytes.
  const bool movable = size == 1 || size == 2 || size == 4 || size == 8;
  if (in.dtype() != out.dtype() || !movable || in.dtype() == DT_STRING) {
    return absl::InternalError(absl::StrCat(ctx->Prefix(), "cannot copy ",
                                            DataTypeString(in.dtype()), " elements on ",
                                            ctx->device()->name()));
  }
  return size;
}

absl::Status CopyOnDevice(OpKernelContext* ctx, const Tensor& in, int64_t in_offset, Tensor* out,
                          int64_t out_offset, absl::Span<const int64_t> dims,
                          absl::Span<const int64_t> in_strides,
                          absl::Span<const int64_t> out_strides) {
  StridedCopySpec spec;
  ASSIGN_OR_RETURN(spec.element_size, DeviceCopyElementSize(ctx, in, *out));
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] == 0) return absl::OkStatus();
    if (dims[d] == 1) continue;
    if (spec.rank == StridedCopySpec::kMaxDims) {
      return absl::UnimplementedError(absl::StrCat(
          ctx->Prefix(), "a copy of ", DimsString(dims), " keeps more than ",
          StridedCopySpec::kMaxDims, " dimensions on ", ctx->device()->name()));
    }
    spec.dims[spec.rank] = dims[d];
    spec.in_strides[spec.rank] = in_strides[d];
    spec.out_strides[spec.rank] = out_strides[d];
    ++spec.rank;
  }
  const int64_t size = spec.element_size;
  return ctx->device()->CopyStrided(static_cast<const char*>(in.raw_data()) + in_offset * size,
                                    static_cast<char*>(out->raw_data()) + out_offset * size, spec);
}

absl::Status GatherRowsOnDevice(OpKernelContext* ctx, const Tensor& in,
                                absl::Span<const int64_t> from, int64_t row_elems, Tensor* out) {
  ASSIGN_OR_RETURN(const int size, DeviceCopyElementSize(ctx, in, *out));
  if (row_elems == 0 || from.empty()) return absl::OkStatus();
  return ctx->device()->GatherRows(in.raw_data(), out->raw_data(), from, row_elems, size);
}

absl::Status ConcatRowsOn(OpKernelContext* ctx, const std::vector<const Tensor*>& inputs,
                          const std::vector<int64_t>& row_sizes, int64_t outer, Tensor* out) {
  if (out->memory_type() == MemoryType::kHost) {
    return ConcatRows(inputs, row_sizes, outer, out, ctx->intra_op_pool());
  }
  int64_t out_row = 0;
  for (int64_t r : row_sizes) out_row += r;
  int64_t at = 0;  // Where input i's rows start in each output row.
  for (size_t i = 0; i < inputs.size(); ++i) {
    RETURN_IF_ERROR(CopyOnDevice(ctx, *inputs[i], 0, out, at, {outer, row_sizes[i]},
                                 {row_sizes[i], 1}, {out_row, 1}));
    at += row_sizes[i];
  }
  return absl::OkStatus();
}

absl::Status StridedScatterOnDevice(OpKernelContext* ctx, const Tensor& in,
                                    absl::Span<const int64_t> begin,
                                    absl::Span<const int64_t> strides, Tensor* out) {
  const int rank = in.dims();
  std::vector<int64_t> dims(rank), in_strides(rank), out_strides(rank);
  int64_t in_stride = 1, out_stride = 1, offset = 0;
  for (int d = rank - 1; d >= 0; --d) {
    dims[d] = in.dim_size(d);
    in_strides[d] = in_stride;
    out_strides[d] = strides[d] * out_stride;
    offset += begin[d] * out_stride;
    in_stride *= in.dim_size(d);
    out_stride *= out->dim_size(d);
  }
  return CopyOnDevice(ctx, in, 0, out, offset, dims, in_strides, out_strides);
}

absl::Status StridedCopyOn(OpKernelContext* ctx, const Tensor& in, absl::Span<const int64_t> begin,
                           absl::Span<const int64_t> strides, Tensor* out) {
  if (out->memory_type() == MemoryType::kHost) return StridedCopy(in, begin, strides, out);
  if (out->NumElements() == 0) return absl::OkStatus();
  if (out->dims() == 0) return CopyOnDevice(ctx, in, 0, out, 0, {}, {}, {});
  const StridedPlan plan =
      MakeStridedPlan(in.shape().dim_sizes(), begin, strides, out->shape().dim_sizes());
  return CopyOnDevice(ctx, in, plan.in_start, out, 0, plan.out_dims, plan.in_steps,
                      plan.out_strides);
}

absl::StatusOr<std::vector<int64_t>> ReshapeDims(absl::Span<const int64_t> input_dims,
                                                 std::vector<int64_t> sizes) {
  const int64_t n = DimProduct(input_dims, 0, static_cast<int>(input_dims.size()));
  int unknown = -1;
  int64_t product = 1, nonzero_product = 1;
  for (int i = 0; i < static_cast<int>(sizes.size()); ++i) {
    const int64_t d = sizes[i];
    if (d == -1) {
      if (unknown >= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("Only one input size may be -1, not both ", unknown, " and ", i));
      }
      unknown = i;
      continue;
    }
    if (d < 0) {
      return absl::InvalidArgumentError(absl::StrCat("Size ", i, " must be non-negative, not ", d));
    }
    if (d != 0 && nonzero_product > std::numeric_limits<int64_t>::max() / d) {
      return absl::InvalidArgumentError(
          absl::StrCat("requested shape ", DimsString(sizes), " has too many elements"));
    }
    product *= d;
    if (d != 0) nonzero_product *= d;
  }
  if (unknown < 0) {
    if (product != n) {
      return absl::InvalidArgumentError(absl::StrCat("Input to reshape is a tensor with ", n,
                                                     " values, but the requested shape has ",
                                                     product));
    }
    return sizes;
  }
  if (product > 0) {
    if (n % product != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("Input to reshape is a tensor with ", n,
                       " values, but the requested shape requires a multiple of ", product));
    }
    sizes[unknown] = n / product;
  } else if (n != 0) {
    return absl::InvalidArgumentError(absl::StrCat("Input to reshape is a tensor with ", n,
                                                   " values, but the requested shape has 0"));
  } else {  // Empty to empty: the -1 takes the input's non-zero dims' product.
    int64_t input_nonzero = 1;
    for (int64_t d : input_dims) input_nonzero *= d == 0 ? 1 : d;
    sizes[unknown] = input_nonzero / nonzero_product;
  }
  return sizes;
}

absl::StatusOr<TensorShape> FillShape(const OpKernelContext& ctx) {
  const Tensor& dims = ctx.input(0);
  const Tensor& value = ctx.input(1);
  if (dims.dims() != 1) {
    return ctx.InvalidArgument("dims must represent a vector, got shape ",
                               dims.shape().DebugString());
  }
  if (value.dims() > 1 || value.NumElements() != 1) {
    return ctx.InvalidArgument("value must be a scalar, got shape ", value.shape().DebugString());
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> sizes, IndexValues(dims, "dims"));
  for (int64_t d : sizes) {
    if (d < 0) return ctx.InvalidArgument("Dimension ", d, " must be >= 0");
  }
  absl::StatusOr<TensorShape> shape = TensorShape::FromDims(sizes);
  if (!shape.ok()) return ctx.InvalidArgument(shape.status().message());
  RETURN_IF_ERROR(CheckOutputSize(shape->num_elements(), value.dtype(), "Fill"));
  return shape;
}

absl::StatusOr<TensorShape> TileShape(const OpKernelContext& ctx, std::vector<int64_t>* multiples) {
  const Tensor& x = ctx.input(0);
  const Tensor& mult_t = ctx.input(1);
  if (mult_t.dims() != 1 || mult_t.dim_size(0) != x.dims()) {
    return ctx.InvalidArgument("Expected multiples argument to be a vector of length ", x.dims(),
                               " but got length ",
                               mult_t.dims() == 1 ? mult_t.dim_size(0) : mult_t.NumElements());
  }
  ASSIGN_OR_RETURN(*multiples, IndexValues(mult_t, "multiples"));
  std::vector<int64_t> out_dims;
  for (int d = 0; d < x.dims(); ++d) {
    const int64_t m = (*multiples)[d];
    if (m < 0) return ctx.InvalidArgument("Expected multiples[", d, "] >= 0, but got ", m);
    if (x.dim_size(d) != 0 && m > std::numeric_limits<int64_t>::max() / x.dim_size(d)) {
      return ctx.InvalidArgument("multiples[", d, "] = ", m, " overflows dimension ",
                                 x.dim_size(d));
    }
    out_dims.push_back(x.dim_size(d) * m);
  }
  absl::StatusOr<TensorShape> shape = TensorShape::FromDims(out_dims);
  if (!shape.ok()) return ctx.InvalidArgument(shape.status().message());
  RETURN_IF_ERROR(CheckOutputSize(shape->num_elements(), x.dtype(), "Tile"));
  return shape;
}

absl::StatusOr<int64_t> SelectElementsPerCondition(const OpKernelContext& ctx) {
  const TensorShape& cond = ctx.input(0).shape();
  const TensorShape& t = ctx.input(1).shape();
  const TensorShape& e = ctx.input(2).shape();
  if (t != e) {
    return ctx.InvalidArgument("'then' and 'else' must have the same size.  but received: ",
                               t.DebugString(), " vs. ", e.DebugString());
  }
  if (cond.dims() == 0) return 0;
  if (cond.dims() == 1 && t.dims() > 1) {
    if (cond.dim_size(0) != t.dim_size(0)) {
      return ctx.InvalidArgument("Number of batches of 'then' must match size of 'cond', but saw: ",
                                 t.dim_size(0), " vs. ", cond.dim_size(0));
    }
    return t.dim_size(0) == 0 ? 0 : t.num_elements() / t.dim_size(0);
  }
  if (cond != t) {
    return ctx.InvalidArgument("'condition' and 'then' must have the same size.  but received: ",
                               cond.DebugString(), " vs. ", t.DebugString());
  }
  return 1;
}

absl::StatusOr<TensorShape> BroadcastToShape(const OpKernelContext& ctx,
                                             std::vector<int64_t>* in_dims) {
  const Tensor& x = ctx.input(0);
  const Tensor& shape_t = ctx.input(1);
  if (shape_t.dims() != 1) {
    return ctx.InvalidArgument("shape must be a vector of {int32,int64}, got shape ",
                               shape_t.shape().DebugString());
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> dims, IndexValues(shape_t, "shape"));
  for (int64_t d : dims) {
    if (d < 0) return ctx.InvalidArgument("Dimension ", d, " must be >= 0");
  }
  const int rank = static_cast<int>(dims.size());
  if (x.dims() > rank) {
    return ctx.InvalidArgument("Rank of input (", x.dims(),
                               ") must be no greater than rank of output shape (", rank, ").");
  }
  absl::StatusOr<TensorShape> shape = TensorShape::FromDims(dims);
  if (!shape.ok()) return ctx.InvalidArgument(shape.status().message());
  RETURN_IF_ERROR(CheckOutputSize(shape->num_elements(), x.dtype(), "BroadcastTo"));
  in_dims->assign(rank - x.dims(), 1);
  for (int64_t d : x.shape().dim_sizes()) in_dims->push_back(d);
  for (int d = 0; d < rank; ++d) {
    if ((*in_dims)[d] != dims[d] && (*in_dims)[d] != 1) {
      return ctx.InvalidArgument("Incompatible shapes: ", x.shape().DebugString(), " vs. ",
                                 shape->DebugString());
    }
  }
  return shape;
}

}  // namespace dflow
