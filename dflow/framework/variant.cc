#include "dflow/framework/variant.h"

#include "absl/strings/str_cat.h"

namespace dflow {

absl::Status CheckEncodable(const Tensor& t, absl::string_view what) {
  if (t.dtype() != tensorflow::DT_VARIANT) return absl::OkStatus();
  const std::string value = t.NumElements() == 1 && t.IsInitialized()
                                ? VariantScalar(t).DebugString()
                                : absl::StrCat("variant", t.shape().DebugString());
  return absl::UnimplementedError(
      absl::StrCat(what, " is a variant tensor (", value,
                   "); dflow keeps variant tensors inside one task and cannot encode them into a "
                   "TensorProto (TensorFlow's VariantTensorDataProto): fetch, feed or send across "
                   "tasks a tensor computed from it (e.g. TensorListStack) instead"));
}

}  // namespace dflow
