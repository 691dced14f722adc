// The axes rules of the reduction ops (Sum, Mean, Max, ...), one text for
// their shape function and the kernels of every device.
#ifndef DFLOW_OPS_REDUCTION_UTIL_H_
#define DFLOW_OPS_REDUCTION_UTIL_H_

#include <vector>

#include "absl/status/statusor.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/framework/tensor.h"
#include "dflow/framework/tensor_shape.h"

namespace dflow {

// The axes a reduction reduces, as a mask over `shape`'s dimensions: `axes`
// is int32 or int64 of any shape, each value in [-rank, rank) (negative ones
// count from the end), none twice; else InvalidArgument in TensorFlow's
// words (no op prefix). REQUIRES: `shape`'s rank is known.
absl::StatusOr<std::vector<bool>> ReductionMask(const Tensor& axes, const PartialShape& shape);

// A reduction's output shape: `x`'s dimensions, each reduced one dropped
// or, with `keep_dims`, 1.
TensorShape ReducedShape(const TensorShape& x, const std::vector<bool>& mask, bool keep_dims);

// ArgMax's and ArgMin's axis: `dimension` is a scalar int32 or int64 in
// [-rank, rank); the axis counted from the front, else InvalidArgument in
// TensorFlow's words.
absl::StatusOr<int> ArgExtremeAxis(const Tensor& dimension, int rank);

// ArgMax's and ArgMin's input `x` seen as [outer, n, inner] around the axis
// `dimension` names, and the output's shape (x's without it); the axis must
// not be empty.
struct ArgExtremeLayout {
  TensorShape output;
  int64_t outer = 1, n = 1, inner = 1;
};
absl::StatusOr<ArgExtremeLayout> ArgExtremeLayoutOf(const TensorShape& x, const Tensor& dimension);

}  // namespace dflow

#endif  // DFLOW_OPS_REDUCTION_UTIL_H_
