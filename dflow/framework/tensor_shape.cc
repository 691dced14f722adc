#include "dflow/framework/tensor_shape.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dflow {

absl::StatusOr<TensorShape> TensorShape::FromDims(absl::Span<const int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape [", absl::StrJoin(dims, ","), "] has a negative dimension"));
    }
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape [", absl::StrJoin(dims, ","), "] has too many elements"));
    }
    n *= d;
  }
  return TensorShape(dims);
}

absl::StatusOr<TensorShape> TensorShape::FromProto(const tensorflow::TensorShapeProto& p) {
  if (p.unknown_rank()) {
    return absl::InvalidArgumentError("shape has unknown rank where a full shape is needed");
  }
  absl::InlinedVector<int64_t, 4> dims;
  for (const auto& d : p.dim()) dims.push_back(d.size());
  return FromDims(dims);
}

int64_t TensorShape::num_elements() const {
  // A shape from outside may multiply past int64 (signed overflow is UB):
  // saturate, unless a zero dimension makes it empty.
  int64_t n = 1;
  bool overflow = false;
  for (int64_t d : dims_) {
    if (d == 0) return 0;
    overflow = overflow || __builtin_mul_overflow(n, d, &n);
  }
  return overflow ? std::numeric_limits<int64_t>::max() : n;
}

void TensorShape::AsProto(tensorflow::TensorShapeProto* p) const {
  p->Clear();
  for (int64_t d : dims_) p->add_dim()->set_size(d);
}

std::string TensorShape::DebugString() const {
  return absl::StrCat("[", absl::StrJoin(dims_, ","), "]");
}

}  // namespace dflow
