#include "dflow/data/dataset.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dflow::data {

std::string DatasetVariant::DebugString() const {
  return dataset_ ? dataset_->DebugString() : "Dataset<null>";
}

Tensor DatasetTensor(std::shared_ptr<const DatasetBase> dataset) {
  Tensor t(tensorflow::DT_VARIANT, TensorShape());
  VariantScalar(t).Set(std::make_unique<DatasetVariant>(std::move(dataset)));
  return t;
}

absl::StatusOr<std::shared_ptr<const DatasetBase>> GetDataset(const Tensor& t) {
  if (t.dtype() != tensorflow::DT_VARIANT || t.dims() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("a dataset must be a scalar variant tensor, got ", t.DebugString()));
  }
  const DatasetVariant* v = VariantScalar(t).get<DatasetVariant>();
  if (v == nullptr || v->dataset() == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("the variant tensor does not hold a dataset: ",
                                                   VariantScalar(t).DebugString()));
  }
  return v->dataset();
}

absl::Status CheckElementTypes(const std::vector<Tensor>& element, const DataTypeVector& dtypes,
                               const std::string& what) {
  bool ok = element.size() == dtypes.size();
  for (size_t i = 0; ok && i < element.size(); ++i) ok = element[i].dtype() == dtypes[i];
  if (ok) return absl::OkStatus();
  std::vector<std::string> got, want;
  for (const Tensor& t : element) got.push_back(DataTypeString(t.dtype()));
  for (DataType d : dtypes) want.push_back(DataTypeString(d));
  return absl::InvalidArgumentError(absl::StrCat(what, ": element has types [",
                                                 absl::StrJoin(got, ", "), "], expected [",
                                                 absl::StrJoin(want, ", "), "]"));
}

}  // namespace dflow::data
