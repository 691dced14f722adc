// Shape inference: each op's shape function maps its inputs' (partially
// known) shapes, and the values of constant inputs, to its outputs' shapes.
//
//   absl::Status MatMulShape(InferenceContext* c) {
//     PartialShape a, b;
//     RETURN_IF_ERROR(c->WithRank(c->input(0), 2, &a));
//     ...
//     c->set_output(0, PartialShape({a.dim(0), b.dim(1)}));
//   }
#ifndef DFLOW_FRAMEWORK_SHAPE_INFERENCE_H_
#define DFLOW_FRAMEWORK_SHAPE_INFERENCE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dflow/framework/attr_util.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/tensor.h"
#include "dflow/framework/tensor_shape.h"

namespace dflow {

inline constexpr int64_t kUnknownDim = -1;

// A shape whose rank and dimensions may be unknown (kUnknownDim).
class PartialShape {
 public:
  PartialShape() = default;  // Unknown rank.
  explicit PartialShape(std::vector<int64_t> dims) : known_rank_(true), dims_(std::move(dims)) {}
  PartialShape(std::initializer_list<int64_t> dims) : known_rank_(true), dims_(dims) {}
  explicit PartialShape(const TensorShape& s)
      : known_rank_(true), dims_(s.dim_sizes().begin(), s.dim_sizes().end()) {}
  static PartialShape Unknown() { return PartialShape(); }
  static PartialShape Scalar() { return PartialShape(std::vector<int64_t>{}); }
  // A known rank with all dimensions unknown.
  static PartialShape UnknownDims(int rank) {
    return PartialShape(std::vector<int64_t>(rank, kUnknownDim));
  }
  static PartialShape FromProto(const tensorflow::TensorShapeProto& p);

  bool rank_known() const { return known_rank_; }
  // REQUIRES: rank_known().
  int rank() const { return static_cast<int>(dims_.size()); }
  int64_t dim(int i) const { return dims_[i]; }
  const std::vector<int64_t>& dims() const { return dims_; }
  bool IsFullyDefined() const;
  // Element count, or kUnknownDim when not fully defined.
  int64_t NumElements() const;
  // True when `s` could be a value of this shape.
  bool IsCompatibleWith(const PartialShape& s) const;
  bool IsCompatibleWith(const TensorShape& s) const { return IsCompatibleWith(PartialShape(s)); }
  // The most specific shape compatible with both; fails when they conflict.
  static absl::StatusOr<PartialShape> Merge(const PartialShape& a, const PartialShape& b);
  absl::StatusOr<TensorShape> ToTensorShape() const;
  void AsProto(tensorflow::TensorShapeProto* p) const;
  // "[2,?]" or "<unknown>".
  std::string DebugString() const;
  friend bool operator==(const PartialShape& a, const PartialShape& b) {
    return a.known_rank_ == b.known_rank_ && a.dims_ == b.dims_;
  }

 private:
  bool known_rank_ = false;
  std::vector<int64_t> dims_;
};

class InferenceContext {
 public:
  // `input_tensors[i]` is the value of input i when known (a constant), else
  // nullptr. Pointers are borrowed for the context's lifetime.
  InferenceContext(const tensorflow::NodeDef& node, const OpDef& op,
                   std::vector<PartialShape> input_shapes,
                   std::vector<const Tensor*> input_tensors,
                   DataTypeVector input_types, int num_outputs);

  const tensorflow::NodeDef& node_def() const { return node_; }
  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  const PartialShape& input(int i) const { return inputs_[i]; }
  const Tensor* input_tensor(int i) const { return input_tensors_[i]; }
  DataType input_type(int i) const { return input_types_[i]; }
  int num_outputs() const { return static_cast<int>(outputs_.size()); }
  void set_output(int i, PartialShape s) { outputs_[i] = std::move(s); }
  const PartialShape& output(int i) const { return outputs_[i]; }
  const std::vector<PartialShape>& outputs() const { return outputs_; }

  template <typename T>
  absl::Status GetAttr(const std::string& name, T* value) const {
    return GetNodeAttr(node_, name, value);
  }

  // InvalidArgument starting "[<op>] " + message, naming the node.
  absl::Status Error(const std::string& message) const;

  // Checks `s` has rank `rank` (unknown rank becomes that many unknown dims).
  absl::Status WithRank(const PartialShape& s, int rank, PartialShape* out) const;
  absl::Status WithRankAtLeast(const PartialShape& s, int rank, PartialShape* out) const;
  // Merges two dimensions: equal, or one unknown.
  absl::Status MergeDim(int64_t a, int64_t b, int64_t* out) const;
  // The shape given by input `i`, a 1-D int32/int64 shape tensor: its values
  // when constant (-1 = unknown), else as many unknown dims as it has elements.
  absl::Status MakeShapeFromShapeTensor(int i, PartialShape* out) const;

 private:
  const tensorflow::NodeDef& node_;
  const OpDef& op_;
  std::vector<PartialShape> inputs_;
  std::vector<const Tensor*> input_tensors_;
  DataTypeVector input_types_;
  std::vector<PartialShape> outputs_;
};

// Common shape functions.
absl::Status UnknownShape(InferenceContext* c);        // every output unknown
absl::Status UnchangedShape(InferenceContext* c);      // output 0 = input 0
absl::Status ScalarShape(InferenceContext* c);         // output 0 = []
absl::Status NoOutputs(InferenceContext* c);
// Output 0 = numpy broadcast of inputs 0 and 1; errors show both shapes.
absl::Status BroadcastBinaryOpShape(InferenceContext* c);
// numpy broadcasting of two partial shapes.
absl::StatusOr<PartialShape> BroadcastShapes(const PartialShape& a, const PartialShape& b);

// Runs `op`'s shape function for `node`; the result has one shape per output.
absl::StatusOr<std::vector<PartialShape>> InferShapes(
    const tensorflow::NodeDef& node, const OpDef& op,
    const std::vector<PartialShape>& input_shapes,
    const std::vector<const Tensor*>& input_tensors, const DataTypeVector& input_types,
    int num_outputs);

}  // namespace dflow

#endif  // DFLOW_FRAMEWORK_SHAPE_INFERENCE_H_
