#include "dflow/ops/reduction_util.h"

#include "absl/strings/str_cat.h"
#include "dflow/framework/status.h"

namespace dflow {

absl::StatusOr<std::vector<bool>> ReductionMask(const Tensor& axes, const PartialShape& shape) {
  if (axes.dtype() != DT_INT32 && axes.dtype() != DT_INT64) {
    return absl::InvalidArgumentError(absl::StrCat("reduction indices must be int32 or int64, got ",
                                                   DataTypeString(axes.dtype())));
  }
  const int rank = shape.rank();
  std::vector<bool> mask(rank, false);
  for (int64_t i = 0; i < axes.NumElements(); ++i) {
    const int64_t a = axes.dtype() == DT_INT32 ? axes.flat<int32_t>()[i] : axes.flat<int64_t>()[i];
    if (a < -rank || a >= rank) {
      return absl::InvalidArgumentError(absl::StrCat("Invalid reduction dimension ", a,
                                                     " for input of shape ", shape.DebugString()));
    }
    const int d = static_cast<int>(a < 0 ? a + rank : a);
    if (mask[d]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Axes contains duplicate dimension: ", d, " (input of shape ", shape.DebugString(), ")"));
    }
    mask[d] = true;
  }
  return mask;
}

TensorShape ReducedShape(const TensorShape& x, const std::vector<bool>& mask, bool keep_dims) {
  TensorShape out;
  for (int d = 0; d < x.dims(); ++d) {
    if (!mask[d]) {
      out.AddDim(x.dim_size(d));
    } else if (keep_dims) {
      out.AddDim(1);
    }
  }
  return out;
}

absl::StatusOr<int> ArgExtremeAxis(const Tensor& dimension, int rank) {
  if (dimension.NumElements() != 1) {
    return absl::InvalidArgumentError(absl::StrCat("dimension must be a scalar, got shape ",
                                                   dimension.shape().DebugString()));
  }
  int64_t axis;
  if (dimension.dtype() == DT_INT32) {
    axis = dimension.flat<int32_t>()[0];
  } else if (dimension.dtype() == DT_INT64) {
    axis = dimension.flat<int64_t>()[0];
  } else {
    return absl::InvalidArgumentError(absl::StrCat("dimension must be int32 or int64, got ",
                                                   DataTypeString(dimension.dtype())));
  }
  if (axis < -rank || axis >= rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("Expected dimension in the range [", -rank, ", ", rank, "), but got ", axis));
  }
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

absl::StatusOr<ArgExtremeLayout> ArgExtremeLayoutOf(const TensorShape& x, const Tensor& dimension) {
  ASSIGN_OR_RETURN(const int d, ArgExtremeAxis(dimension, x.dims()));
  if (x.dim_size(d) == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Reduction axis ", d, " is empty in shape ", x.DebugString()));
  }
  ArgExtremeLayout layout;
  layout.output = x;
  layout.output.RemoveDim(d);
  layout.n = x.dim_size(d);
  for (int i = 0; i < d; ++i) layout.outer *= x.dim_size(i);
  for (int i = d + 1; i < x.dims(); ++i) layout.inner *= x.dim_size(i);
  return layout;
}

}  // namespace dflow
