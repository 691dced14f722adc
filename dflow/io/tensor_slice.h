// A hyper-rectangle of a tensor (TensorFlow's TensorSlice): per dimension a
// start and a length, or the whole dimension. Partitioned variables are
// saved as slices of their full tensor.
//
//   ASSIGN_OR_RETURN(TensorSlice s, TensorSlice::Parse("0,5:-"));  // rows 0-4, all columns
//   ASSIGN_OR_RETURN(ShapeAndSlice ss, ParseShapeAndSlice("10 4 0,5:-"));
#ifndef DFLOW_IO_TENSOR_SLICE_H_
#define DFLOW_IO_TENSOR_SLICE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dflow/framework/tensor.h"
#include "dflow/framework/tensor_shape.h"
#include "dflow/proto/tensor_bundle.pb.h"

namespace dflow::io {

class TensorSlice {
 public:
  static constexpr int64_t kFullExtent = -1;  // A length meaning "the whole dimension".

  TensorSlice() = default;
  // The whole of a tensor of rank `dims`.
  static TensorSlice Full(int dims);
  // TensorFlow's text form: one "start,length" or "-" per dimension,
  // separated by ':' ("0,5:-"). INVALID_ARGUMENT quoting the spec when bad.
  static absl::StatusOr<TensorSlice> Parse(absl::string_view spec);
  static absl::StatusOr<TensorSlice> FromProto(const tensorflow::TensorSliceProto& proto);
  // Full extents are written without start or length, as TensorFlow does.
  void AsProto(tensorflow::TensorSliceProto* proto) const;

  int dims() const { return static_cast<int>(starts_.size()); }
  int64_t start(int d) const { return starts_[d]; }
  int64_t length(int d) const { return lengths_[d]; }  // kFullExtent for a whole dimension.
  bool IsFullAt(int d) const { return lengths_[d] == kFullExtent; }
  // Covers all of a tensor of shape `full` (every extent full, or spanning its dimension).
  bool Covers(const TensorShape& full) const;

  // The shape of this slice of a tensor of shape `full`; INVALID_ARGUMENT
  // when the ranks differ or an extent leaves the tensor.
  absl::StatusOr<TensorShape> SliceShape(const TensorShape& full) const;
  // This slice with every full extent made explicit for `full`.
  // REQUIRES: SliceShape(full) is OK.
  TensorSlice Explicit(const TensorShape& full) const;
  // The overlap of two explicit slices of the same rank, if any.
  std::optional<TensorSlice> Intersect(const TensorSlice& other) const;

  std::string DebugString() const;  // "0,5:-"
  bool operator==(const TensorSlice& other) const {
    return starts_ == other.starts_ && lengths_ == other.lengths_;
  }

 private:
  std::vector<int64_t> starts_;
  std::vector<int64_t> lengths_;
};

// "10 4 0,5:-" (the dims of the full tensor, then its slice): how SaveV2 and
// RestoreV2 name the slice of each tensor. An empty string means the whole
// tensor and parses to nullopt.
struct ShapeAndSlice {
  TensorShape full_shape;
  TensorSlice slice;
};
absl::StatusOr<std::optional<ShapeAndSlice>> ParseShapeAndSlice(absl::string_view text);

// The checkpoint key TensorFlow stores one slice of tensor `name` under: an
// ordered code of 0, the name, the rank and every start and length.
std::string EncodeTensorNameSlice(absl::string_view name, const TensorSlice& slice);

// Copies the elements `dst_slice` and `src_slice` share (explicit slices of
// one full tensor) from `src`, holding `src_slice`, into `dst`, holding
// `dst_slice`. REQUIRES: same dtype; the shapes match the slices.
void CopySliceOverlap(const Tensor& src, const TensorSlice& src_slice, Tensor* dst,
                      const TensorSlice& dst_slice);

}  // namespace dflow::io

#endif  // DFLOW_IO_TENSOR_SLICE_H_
