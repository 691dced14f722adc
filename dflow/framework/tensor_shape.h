// TensorShape: the fully known shape of a tensor value.
#ifndef DFLOW_FRAMEWORK_TENSOR_SHAPE_H_
#define DFLOW_FRAMEWORK_TENSOR_SHAPE_H_

#include <cstdint>
#include <initializer_list>
#include <string>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dflow/proto/tensor_shape.pb.h"

namespace dflow {

class TensorShape {
 public:
  TensorShape() = default;  // A scalar.
  TensorShape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit TensorShape(absl::Span<const int64_t> dims)
      : dims_(dims.begin(), dims.end()) {}

  // Fails when a dimension is negative or the element count overflows int64.
  static absl::StatusOr<TensorShape> FromDims(absl::Span<const int64_t> dims);
  // Fails on unknown rank or unknown (-1) dimensions.
  static absl::StatusOr<TensorShape> FromProto(const tensorflow::TensorShapeProto& p);

  int dims() const { return static_cast<int>(dims_.size()); }
  int64_t dim_size(int d) const { return dims_[d]; }
  absl::Span<const int64_t> dim_sizes() const { return dims_; }
  int64_t num_elements() const;

  void AddDim(int64_t size) { dims_.push_back(size); }
  void InsertDim(int d, int64_t size) { dims_.insert(dims_.begin() + d, size); }
  void RemoveDim(int d) { dims_.erase(dims_.begin() + d); }
  void set_dim(int d, int64_t size) { dims_[d] = size; }

  bool IsScalar() const { return dims_.empty(); }
  bool IsVector() const { return dims_.size() == 1; }
  bool IsMatrix() const { return dims_.size() == 2; }

  void AsProto(tensorflow::TensorShapeProto* p) const;
  // "[2,3]"; "[]" for a scalar.
  std::string DebugString() const;

  friend bool operator==(const TensorShape& a, const TensorShape& b) {
    return a.dims_ == b.dims_;
  }
  friend bool operator!=(const TensorShape& a, const TensorShape& b) { return !(a == b); }

 private:
  absl::InlinedVector<int64_t, 4> dims_;
};

}  // namespace dflow

#endif  // DFLOW_FRAMEWORK_TENSOR_SHAPE_H_
