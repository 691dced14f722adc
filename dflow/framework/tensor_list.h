// TensorList: the value TensorFlow's list ops (EmptyTensorList,
// TensorListPushBack, ...; dflow/ops/list_ops.cc) keep in a scalar DT_VARIANT
// tensor. Control flow v2 builds TensorArrays and while-loop gradient
// accumulators from them.
//
// A list holds tensors of one dtype whose shapes agree with a partially known
// element shape. An element of a list made by TensorListReserve is unset
// (Tensor(), !IsInitialized()) until written; reading it gives zeros when the
// element shape is fully known. Copying a list copies its vector of tensors,
// which share their buffers with the original's.
#ifndef DFLOW_FRAMEWORK_TENSOR_LIST_H_
#define DFLOW_FRAMEWORK_TENSOR_LIST_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/framework/tensor.h"
#include "dflow/framework/variant.h"

namespace dflow {

class TensorList : public VariantValue {
 public:
  TensorList() = default;
  TensorList(DataType dtype, PartialShape shape) : element_dtype(dtype), element_shape(shape) {}

  std::string TypeName() const override { return "tensorflow::TensorList"; }
  std::string DebugString() const override;
  std::unique_ptr<VariantValue> Clone() const override {
    return std::make_unique<TensorList>(*this);
  }

  DataType element_dtype = DT_INVALID;
  PartialShape element_shape;     // Unknown rank by default.
  std::vector<Tensor> tensors;    // Unset elements are Tensor().
  int64_t max_num_elements = -1;  // -1: unbounded.
};

// A scalar DT_VARIANT tensor holding `list`.
Tensor TensorListTensor(TensorList list);

// The list `t` holds: InvalidArgument in TensorFlow's words ("Input handle is
// not a list. Saw: '...'") when `t` is not a scalar variant holding one.
absl::StatusOr<TensorList*> GetTensorList(const Tensor& t);

}  // namespace dflow

#endif  // DFLOW_FRAMEWORK_TENSOR_LIST_H_
