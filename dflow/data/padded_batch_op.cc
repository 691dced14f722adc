// PaddedBatchDatasetV2: batches elements of different shapes, each component
// padded (with its padding value) to its padded shape, where a -1 dim pads
// to the largest of that dim in the batch. With TensorFlow's OpDef.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dflow/data/dataset_kernel.h"
#include "dflow/data/unary_dataset.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/framework/status.h"
#include "dflow/ops/array_util.h"

namespace dflow::data {
namespace {

// The dims of `shape`, for messages.
std::string ShapeString(const TensorShape& shape) {
  std::vector<int64_t> dims;
  for (int d = 0; d < shape.dims(); ++d) dims.push_back(shape.dim_size(d));
  return DimsString(dims);
}

// Copies `in` (rank r) into batch row `row` of `out` ([n] + padded dims of
// rank r), in its top-left corner.
absl::Status CopyIntoRow(const Tensor& in, int64_t row, Tensor* out) {
  const int r = in.dims();
  std::vector<int64_t> out_dims, in_dims;
  for (int d = 0; d < r; ++d) {
    out_dims.push_back(out->dim_size(d + 1));
    in_dims.push_back(in.dim_size(d));
  }
  const int64_t row_size = DimProduct(out_dims, 0, r);
  const int64_t inner = r == 0 ? 1 : in_dims[r - 1];
  const int64_t outer = inner == 0 ? 0 : in.NumElements() / inner;
  return SwitchByElementSize(in.dtype(), "PaddedBatchDatasetV2", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* src = ElementsOf<T>(in);
    T* dst = MutableElementsOf<T>(out) + row * row_size;
    std::vector<int64_t> index(r > 0 ? r - 1 : 0, 0);  // over in_dims[0, r-1)
    for (int64_t o = 0; o < outer; ++o) {
      int64_t offset = 0;
      for (int d = 0; d + 1 < r; ++d) offset = (offset + index[d]) * out_dims[d + 1];
      std::copy(src + o * inner, src + (o + 1) * inner, dst + offset);
      for (int d = r - 2; d >= 0 && ++index[d] == in_dims[d]; --d) index[d] = 0;
    }
    return absl::OkStatus();
  });
}

// Fills every element of `t` with the scalar `value` (same dtype).
absl::Status Fill(const Tensor& value, Tensor* t) {
  return SwitchByElementSize(t->dtype(), "PaddedBatchDatasetV2", [&](auto tag) {
    using T = typename decltype(tag)::type;
    std::fill_n(MutableElementsOf<T>(t), t->NumElements(), ElementsOf<T>(value)[0]);
    return absl::OkStatus();
  });
}

class PaddedBatchDataset : public UnaryDataset<PaddedBatchDataset> {
 public:
  PaddedBatchDataset(std::shared_ptr<const DatasetBase> input, int64_t size,
                     std::vector<std::vector<int64_t>> padded_shapes, std::vector<Tensor> padding,
                     bool drop, std::string what)
      : UnaryDataset(std::move(input), std::move(what)),
        size_(size),
        padded_shapes_(std::move(padded_shapes)),
        padding_(std::move(padding)),
        drop_(drop) {}

 private:
  // Component `c` of every element, padded into one tensor.
  absl::StatusOr<Tensor> Pad(const std::vector<std::vector<Tensor>>& elements, size_t c) const {
    const std::vector<int64_t>& padded = padded_shapes_[c];
    std::vector<int64_t> dims = {static_cast<int64_t>(elements.size())};
    for (size_t d = 0; d < padded.size(); ++d) dims.push_back(padded[d] < 0 ? 0 : padded[d]);
    for (const std::vector<Tensor>& e : elements) {
      const Tensor& t = e[c];
      if (t.dims() != static_cast<int>(padded.size())) {
        return absl::InvalidArgumentError(absl::StrCat(
            what_, ": component ", c, " has shape ", ShapeString(t.shape()), " of rank ", t.dims(),
            ", but its padded shape ", DimsString(padded), " has rank ", padded.size()));
      }
      for (int d = 0; d < t.dims(); ++d) {
        if (padded[d] >= 0 && t.dim_size(d) > padded[d]) {
          return absl::DataLossError(absl::StrCat(
              what_, ": Attempted to pad to a smaller size than the input element. Component ", c,
              " has shape ", ShapeString(t.shape()), ", its padded shape is ", DimsString(padded)));
        }
        if (padded[d] < 0) dims[d + 1] = std::max(dims[d + 1], t.dim_size(d));
      }
    }
    ASSIGN_OR_RETURN(TensorShape shape, OutputShape(dims, padding_[c].dtype(), what_));
    Tensor out(padding_[c].dtype(), shape);
    RETURN_IF_ERROR(Fill(padding_[c], &out));
    for (size_t i = 0; i < elements.size(); ++i) {
      RETURN_IF_ERROR(CopyIntoRow(elements[i][c], static_cast<int64_t>(i), &out));
    }
    return out;
  }

 public:
  class Iterator : public InputIterator {
   public:
    using InputIterator::InputIterator;
    absl::Status GetNext(IteratorContext* ctx, std::vector<Tensor>* out, bool* end) override {
      std::vector<std::vector<Tensor>> elements;
      bool input_end = false;
      while (static_cast<int64_t>(elements.size()) < d_->size_ && !input_end) {
        std::vector<Tensor> e;
        RETURN_IF_ERROR(input_->GetNext(ctx, &e, &input_end));
        if (input_end) break;
        RETURN_IF_ERROR(CheckElementTypes(e, d_->output_dtypes(), d_->what_));
        elements.push_back(std::move(e));
      }
      *end = elements.empty() || (d_->drop_ && static_cast<int64_t>(elements.size()) < d_->size_);
      if (*end) return absl::OkStatus();
      std::vector<Tensor> batch;
      for (size_t c = 0; c < elements[0].size(); ++c) {
        ASSIGN_OR_RETURN(Tensor t, d_->Pad(elements, c));
        batch.push_back(std::move(t));
      }
      *out = std::move(batch);
      return absl::OkStatus();
    }
  };

 private:
  const int64_t size_;
  const std::vector<std::vector<int64_t>> padded_shapes_;  // -1: the batch's largest
  const std::vector<Tensor> padding_;                      // scalars
  const bool drop_;
};

// Inputs: input_dataset, batch_size, padded_shapes[N], padding_values[N],
// drop_remainder.
class PaddedBatchDatasetOp : public DatasetOpKernel {
 public:
  using DatasetOpKernel::DatasetOpKernel;
  absl::StatusOr<std::shared_ptr<const DatasetBase>> MakeDataset(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(auto input, GetDataset(ctx->input(0)));
    ASSIGN_OR_RETURN(int64_t size, ScalarInput(*ctx, 1, "batch_size"));
    if (size <= 0) return absl::InvalidArgumentError("Batch size must be greater than zero.");
    const int n = (ctx->num_inputs() - 3) / 2;
    if (n != static_cast<int>(input->output_dtypes().size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("Number of padded shapes (", n,
                       ") must match the number of components of the input dataset's elements (",
                       input->output_dtypes().size(), ")"));
    }
    std::vector<std::vector<int64_t>> shapes;
    std::vector<Tensor> padding;
    for (int i = 0; i < n; ++i) {
      const Tensor& shape = ctx->input(2 + i);
      if (shape.dims() != 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "padded_shapes[", i, "] must be a vector, got shape ", ShapeString(shape.shape())));
      }
      ASSIGN_OR_RETURN(std::vector<int64_t> dims,
                       IndexValues(shape, absl::StrCat("padded_shapes[", i, "]")));
      for (int64_t d : dims) {
        if (d < -1) {
          return absl::InvalidArgumentError(
              absl::StrCat("padded_shapes[", i, "] ", DimsString(dims), " has a dim below -1"));
        }
      }
      shapes.push_back(std::move(dims));
      const Tensor& value = ctx->input(2 + n + i);
      if (value.dims() != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("All padding values must be scalars: padding_values[", i, "] has shape ",
                         ShapeString(value.shape())));
      }
      if (value.dtype() != input->output_dtypes()[i]) {
        return absl::InvalidArgumentError(
            absl::StrCat("padding_values[", i, "] is ", DataTypeString(value.dtype()),
                         ", component ", i, " is ", DataTypeString(input->output_dtypes()[i])));
      }
      padding.push_back(value);
    }
    const Tensor& drop = ctx->input(2 + 2 * n);
    if (drop.dtype() != DT_BOOL || drop.dims() != 0) {
      return absl::InvalidArgumentError("drop_remainder must be a bool scalar");
    }
    return std::make_shared<PaddedBatchDataset>(std::move(input), size, std::move(shapes),
                                                std::move(padding), drop.scalar<bool>(), What());
  }
};

REGISTER_OP("PaddedBatchDatasetV2")
    .Input("input_dataset: variant")
    .Input("batch_size: int64")
    .Input("padded_shapes: N * int64")
    .Input("padding_values: Toutput_types")
    .Input("drop_remainder: bool")
    .Output("handle: variant")
    .Attr("parallel_copy: bool = false")
    .Attr("Toutput_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("N: int >= 1")
    .Attr("metadata: string = ''")
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("PaddedBatchDatasetV2").Device(kDeviceCPU), PaddedBatchDatasetOp);

}  // namespace
}  // namespace dflow::data
