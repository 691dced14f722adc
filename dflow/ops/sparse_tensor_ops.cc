// Ops on SparseTensors given as (indices [N, rank], values [N], dense_shape
// [rank]), as TensorFlow 1.x's feature columns and embedding_lookup_sparse
// emit them:
//
//   SparseReshape(input_indices, input_shape, new_shape)   the same elements
//       in a dense shape of the same size (one new dim may be -1: inferred)
//   SparseFillEmptyRows(indices, values, dense_shape, default_value)   every
//       row without an entry gets (row, 0, ...) = default_value; entries come
//       out grouped by row (input order within a row), with
//       empty_row_indicator per row and reverse_index_map[i] = where input
//       entry i went
//
// OpDefs and error texts follow TensorFlow's.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/framework/status.h"
#include "dflow/ops/array_util.h"

namespace dflow {
namespace {

// --- SparseReshape -----------------------------------------------------------------

// new_shape with its -1 resolved for `size` elements, or TensorFlow's error.
absl::StatusOr<std::vector<int64_t>> ResolveShape(std::vector<int64_t> dims, int64_t size,
                                                  const std::vector<int64_t>& input) {
  int unknown = -1;
  int64_t product = 1;
  for (int d = 0; d < static_cast<int>(dims.size()); ++d) {
    if (dims[d] == -1) {
      if (unknown >= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("only one output dimension may be -1, not both ", unknown, " and ", d));
      }
      unknown = d;
      continue;
    }
    if (dims[d] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("size ", d, " must be non-negative, not ", dims[d]));
    }
    if (dims[d] != 0 && product > INT64_MAX / dims[d]) {
      return absl::InvalidArgumentError(
          absl::StrCat("new_shape ", DimsString(dims), " has too many elements"));
    }
    product *= dims[d];
  }
  if (unknown >= 0) {
    if (product == 0 || size % product != 0) {
      dims[unknown] = 1;
      return absl::InvalidArgumentError(
          absl::StrCat("Input to reshape is a SparseTensor with ", size,
                       " dense values, but the requested shape requires a multiple of ", product,
                       ". input_shape=", DimsString(input), " output_shape=", DimsString(dims)));
    }
    dims[unknown] = size / product;
  } else if (product != size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Input to reshape is a tensor with ", size, " dense values, but the requested shape has ",
        product, ". input_shape=", DimsString(input), " output_shape=", DimsString(dims)));
  }
  return dims;
}

class SparseReshapeOp : public OpKernel {
 public:
  using OpKernel::OpKernel;

  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& indices_t = ctx->input(0);
    const Tensor& input_shape_t = ctx->input(1);
    const Tensor& new_shape_t = ctx->input(2);
    if (indices_t.dims() != 2) {
      return ctx->InvalidArgument("Input indices should be a matrix but received shape ",
                                  indices_t.shape().DebugString());
    }
    if (input_shape_t.dims() != 1) {
      return ctx->InvalidArgument("Input shape should be a vector but received shape ",
                                  input_shape_t.shape().DebugString());
    }
    if (new_shape_t.dims() != 1) {
      return ctx->InvalidArgument("Target shape should be a vector but received shape ",
                                  new_shape_t.shape().DebugString());
    }
    const int64_t n = indices_t.dim_size(0), in_rank = indices_t.dim_size(1);
    if (in_rank != input_shape_t.NumElements()) {
      return ctx->InvalidArgument("Input tensor rank must match input shape length.");
    }
    auto in_shape = input_shape_t.flat<int64_t>();
    std::vector<int64_t> input(in_shape.data(), in_shape.data() + in_shape.size());
    absl::StatusOr<TensorShape> dense = TensorShape::FromDims(input);
    if (!dense.ok()) return ctx->InvalidArgument("input_shape: ", dense.status().message());
    auto new_shape = new_shape_t.flat<int64_t>();
    absl::StatusOr<std::vector<int64_t>> out = ResolveShape(
        {new_shape.data(), new_shape.data() + new_shape.size()}, dense->num_elements(), input);
    if (!out.ok()) return ctx->InvalidArgument(out.status().message());
    const int64_t out_rank = static_cast<int64_t>(out->size());
    ASSIGN_OR_RETURN(TensorShape indices_shape,
                     OutputShape({n, out_rank}, DT_INT64, "SparseReshape"));
    Tensor* out_indices = ctx->allocate_output(0, indices_shape);
    Tensor* out_shape = ctx->allocate_output(1, TensorShape({out_rank}));
    for (int64_t d = 0; d < out_rank; ++d) out_shape->flat<int64_t>()[d] = (*out)[d];
    const int64_t* in = indices_t.flat<int64_t>().data();
    int64_t* o = out_indices->flat<int64_t>().data();
    for (int64_t i = 0; i < n; ++i) {
      // Linearize in the input shape (wrapping, as TensorFlow, for indices
      // outside it), then split in the output shape.
      uint64_t flat = 0;
      for (int64_t d = 0; d < in_rank; ++d) {
        flat = flat * static_cast<uint64_t>(input[d]) + static_cast<uint64_t>(in[i * in_rank + d]);
      }
      for (int64_t d = out_rank - 1; d >= 0; --d) {
        const uint64_t dim = static_cast<uint64_t>((*out)[d]);
        o[i * out_rank + d] = dim == 0 ? 0 : static_cast<int64_t>(flat % dim);
        if (dim != 0) flat /= dim;
      }
    }
    return absl::OkStatus();
  }
};

absl::Status SparseReshapeShape(InferenceContext* c) {
  PartialShape indices, new_shape;
  RETURN_IF_ERROR(c->WithRank(c->input(0), 2, &indices));
  RETURN_IF_ERROR(c->WithRank(c->input(2), 1, &new_shape));
  c->set_output(0, PartialShape({indices.dim(0), new_shape.dim(0)}));
  c->set_output(1, new_shape);
  return absl::OkStatus();
}

REGISTER_OP("SparseReshape")
    .Input("input_indices: int64")
    .Input("input_shape: int64")
    .Input("new_shape: int64")
    .Output("output_indices: int64")
    .Output("output_shape: int64")
    .SetShapeFn(SparseReshapeShape);
REGISTER_KERNEL(KernelDefBuilder("SparseReshape").Device(kDeviceCPU), SparseReshapeOp);

// --- SparseFillEmptyRows -----------------------------------------------------------

class SparseFillEmptyRowsOp : public OpKernel {
 public:
  using OpKernel::OpKernel;

  // The inputs' ranks and sizes agree, and the dense shape is valid.
  static absl::Status CheckInputs(OpKernelContext* ctx) {
    const Tensor& indices_t = ctx->input(0);
    const Tensor& values = ctx->input(1);
    const Tensor& shape_t = ctx->input(2);
    const Tensor& default_value = ctx->input(3);
    if (indices_t.dims() != 2) {
      return ctx->InvalidArgument("indices must be a matrix, saw: ",
                                  indices_t.shape().DebugString());
    }
    if (values.dims() != 1) {
      return ctx->InvalidArgument("values must be a vector, saw: ", values.shape().DebugString());
    }
    if (shape_t.dims() != 1) {
      return ctx->InvalidArgument("dense_shape must be a vector, saw: ",
                                  shape_t.shape().DebugString());
    }
    if (default_value.dims() != 0) {
      return ctx->InvalidArgument("default_value must be a scalar, saw: ",
                                  default_value.shape().DebugString());
    }
    const int64_t n = indices_t.dim_size(0), rank = indices_t.dim_size(1);
    if (values.dim_size(0) != n) {
      return ctx->InvalidArgument("The length of `values` (", values.dim_size(0),
                                  ") must match the first dimension of `indices` (", n, ").");
    }
    if (shape_t.NumElements() != rank || rank < 1) {
      return ctx->InvalidArgument("dense_shape ", shape_t.shape().DebugString(),
                                  " must have one element per column of indices ",
                                  indices_t.shape().DebugString());
    }
    auto dense_shape = shape_t.flat<int64_t>();
    for (int64_t d = 0; d < rank; ++d) {
      if (dense_shape[d] < 0) {
        return ctx->InvalidArgument("Expected shape dimensions to be non-negative, got ",
                                    dense_shape[d]);
      }
    }
    if (dense_shape[0] == 0 && n > 0) {
      return ctx->InvalidArgument(
          "Received SparseTensor with dense_shape[0] = 0 but indices.shape[0] = ", n);
    }
    return absl::OkStatus();
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    RETURN_IF_ERROR(CheckInputs(ctx));
    const Tensor& indices_t = ctx->input(0);
    const Tensor& values = ctx->input(1);
    const Tensor& default_value = ctx->input(3);
    const int64_t n = indices_t.dim_size(0), rank = indices_t.dim_size(1);
    const int64_t rows = ctx->input(2).flat<int64_t>()[0];
    const int64_t* in = indices_t.flat<int64_t>().data();
    // Per-row bookkeeping takes 8 bytes a row: refuse what could not be allocated.
    RETURN_IF_ERROR(OutputShape({rows}, DT_INT64, "SparseFillEmptyRows").status());
    const TensorShape row_shape({rows});
    std::vector<int64_t> per_row(rows);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t r = in[i * rank];
      if (r < 0 || r >= rows) {
        return ctx->InvalidArgument("indices(", i, ", 0) is invalid: ", r, " >= ", rows);
      }
      ++per_row[r];
    }
    // Where each row's entries start in the output: an empty row takes one.
    std::vector<int64_t> start(rows + 1);
    for (int64_t r = 0; r < rows; ++r) start[r + 1] = start[r] + std::max<int64_t>(per_row[r], 1);
    const int64_t total = start[rows];
    ASSIGN_OR_RETURN(TensorShape out_indices_shape,
                     OutputShape({total, rank}, DT_INT64, "SparseFillEmptyRows"));
    Tensor* out_indices = ctx->allocate_output(0, out_indices_shape);  // Zeros.
    Tensor* out_values = ctx->allocate_output(1, TensorShape({total}));
    Tensor* empty = ctx->allocate_output(2, row_shape);
    Tensor* reverse = ctx->allocate_output(3, TensorShape({n}));
    int64_t* oi = out_indices->flat<int64_t>().data();
    std::vector<int64_t> next(start.begin(), start.end() - 1);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t pos = next[in[i * rank]]++;
      std::copy_n(in + i * rank, rank, oi + pos * rank);
      reverse->flat<int64_t>()[i] = pos;
    }
    for (int64_t r = 0; r < rows; ++r) {
      empty->flat<bool>()[r] = per_row[r] == 0;
      if (per_row[r] == 0) oi[start[r] * rank] = r;  // (r, 0, ...)
    }
    return SwitchByElementSize(values.dtype(), "SparseFillEmptyRows", [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* v = ElementsOf<T>(values);
      T* ov = MutableElementsOf<T>(out_values);
      for (int64_t r = 0; r < rows; ++r) {
        if (per_row[r] == 0) ov[start[r]] = ElementsOf<T>(default_value)[0];
      }
      for (int64_t i = 0; i < n; ++i) ov[reverse->flat<int64_t>()[i]] = v[i];
      return absl::OkStatus();
    });
  }
};

absl::Status SparseFillEmptyRowsShape(InferenceContext* c) {
  PartialShape indices, unused;
  RETURN_IF_ERROR(c->WithRank(c->input(0), 2, &indices));
  RETURN_IF_ERROR(c->WithRank(c->input(1), 1, &unused));
  RETURN_IF_ERROR(c->WithRank(c->input(2), 1, &unused));
  RETURN_IF_ERROR(c->WithRank(c->input(3), 0, &unused));
  c->set_output(0, PartialShape({kUnknownDim, indices.dim(1)}));
  c->set_output(1, PartialShape({kUnknownDim}));
  c->set_output(2, PartialShape({kUnknownDim}));
  c->set_output(3, PartialShape({indices.dim(0)}));
  return absl::OkStatus();
}

REGISTER_OP("SparseFillEmptyRows")
    .Input("indices: int64")
    .Input("values: T")
    .Input("dense_shape: int64")
    .Input("default_value: T")
    .Output("output_indices: int64")
    .Output("output_values: T")
    .Output("empty_row_indicator: bool")
    .Output("reverse_index_map: int64")
    .Attr("T: type")
    .SetShapeFn(SparseFillEmptyRowsShape);
REGISTER_KERNEL(
    KernelDefBuilder("SparseFillEmptyRows").Device(kDeviceCPU).TypeConstraint("T", MovableTypes()),
    SparseFillEmptyRowsOp);

}  // namespace
}  // namespace dflow
