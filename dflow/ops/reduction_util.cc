#include "dflow/ops/reduction_util.h"

#include "absl/strings/str_cat.h"

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

}  // namespace dflow
