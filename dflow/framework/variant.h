// Variant: the value of one element of a DT_VARIANT tensor, an object of any
// class derived from VariantValue (TensorList, tensor_list.h), or nothing.
//
// As in TensorFlow, copying a Variant copies its value (VariantValue::Clone);
// copying a DT_VARIANT Tensor shares the buffer of Variants, so a kernel that
// changes a value it received must copy it first unless it holds the only
// reference to the buffer (Tensor::BufferUseCount() == 1).
//
//   Tensor t(tensorflow::DT_VARIANT, TensorShape());
//   VariantScalar(t).Set(std::make_unique<TensorList>(...));
//   const TensorList* list = VariantScalar(t).get<TensorList>();
//
// dflow keeps variant tensors inside one process: they cannot be encoded
// into a TensorProto (fetched by a client, fed, or sent to another task);
// CheckEncodable says so with a clear error where that would happen.
#ifndef DFLOW_FRAMEWORK_VARIANT_H_
#define DFLOW_FRAMEWORK_VARIANT_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "dflow/framework/tensor.h"

namespace dflow {

class VariantValue {
 public:
  virtual ~VariantValue() = default;
  // The name TensorFlow gives the C++ type ("tensorflow::TensorList").
  virtual std::string TypeName() const = 0;
  virtual std::string DebugString() const = 0;
  virtual std::unique_ptr<VariantValue> Clone() const = 0;
};

class Variant {
 public:
  Variant() = default;
  Variant(const Variant& other) : value_(other.value_ ? other.value_->Clone() : nullptr) {}
  Variant& operator=(const Variant& other) {
    if (this != &other) value_ = other.value_ ? other.value_->Clone() : nullptr;
    return *this;
  }
  Variant(Variant&&) = default;
  Variant& operator=(Variant&&) = default;

  void Set(std::unique_ptr<VariantValue> value) { value_ = std::move(value); }
  bool empty() const { return value_ == nullptr; }
  // The value as a T, or null when it is empty or of another type.
  template <typename T>
  const T* get() const {
    return dynamic_cast<const T*>(value_.get());
  }
  template <typename T>
  T* get() {
    return dynamic_cast<T*>(value_.get());
  }
  std::string TypeName() const { return value_ ? value_->TypeName() : "empty"; }
  std::string DebugString() const { return value_ ? value_->DebugString() : "Variant<empty>"; }

 private:
  std::unique_ptr<VariantValue> value_;
};

// The Variants of a DT_VARIANT tensor. REQUIRES: t.dtype() == DT_VARIANT.
inline Variant* VariantData(const Tensor& t) { return static_cast<Variant*>(t.raw_data()); }
// REQUIRES: t is a DT_VARIANT tensor with at least one element.
inline Variant& VariantScalar(const Tensor& t) { return VariantData(t)[0]; }

// OK unless `t` is a DT_VARIANT tensor: then UNIMPLEMENTED naming `what` (the
// fetch, feed or rendezvous key) and the value, for the places that encode
// tensors into TensorProtos.
absl::Status CheckEncodable(const Tensor& t, absl::string_view what);

}  // namespace dflow

#endif  // DFLOW_FRAMEWORK_VARIANT_H_
