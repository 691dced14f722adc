#include "dflow/framework/tensor_list.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace dflow {

std::string TensorList::DebugString() const {
  return absl::StrCat("TensorList(element_dtype=", DataTypeString(element_dtype),
                      ", element_shape=", element_shape.DebugString(), ", size=", tensors.size(),
                      ")");
}

Tensor TensorListTensor(TensorList list) {
  Tensor t(tensorflow::DT_VARIANT, TensorShape());
  VariantScalar(t).Set(std::make_unique<TensorList>(std::move(list)));
  return t;
}

absl::StatusOr<TensorList*> GetTensorList(const Tensor& t) {
  if (t.dtype() != tensorflow::DT_VARIANT) {
    return absl::InvalidArgumentError(
        absl::StrCat("Input handle is not a list: it is a ", DataTypeString(t.dtype()), " tensor"));
  }
  if (t.dims() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Input handle must be a scalar variant; saw shape ", t.shape().DebugString()));
  }
  TensorList* list = VariantScalar(t).get<TensorList>();
  if (list == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("Input handle is not a list. Saw: '", VariantScalar(t).DebugString(), "'"));
  }
  return list;
}

}  // namespace dflow
