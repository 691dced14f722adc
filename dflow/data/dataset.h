// Datasets and their iterators: the values behind tf.data's graph ops.
//
// A dataset is an immutable description of a sequence of elements (each a
// vector of tensors of fixed dtypes), kept in a scalar DT_VARIANT tensor
// (DatasetVariant) as TensorFlow keeps its DatasetBase; dataset ops
// (dataset_ops.cc) build one from their inputs and input datasets. An
// iterator walks one pass over a dataset; the iterator ops (iterator_ops.cc)
// keep it in a device resource and step it on a data thread, never on the
// executor's pool.
//
//   ASSIGN_OR_RETURN(std::shared_ptr<const DatasetBase> ds, GetDataset(ctx->input(0)));
//   std::unique_ptr<IteratorBase> it = ds->MakeIterator();
//   std::vector<Tensor> element;
//   bool end = false;
//   RETURN_IF_ERROR(it->GetNext(&ictx, &element, &end));
#ifndef DFLOW_DATA_DATASET_H_
#define DFLOW_DATA_DATASET_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dflow/framework/cancellation.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/tensor.h"
#include "dflow/framework/types.h"
#include "dflow/framework/variant.h"

namespace dflow::data {

// What an iterator may use while producing an element. Borrowed pointers.
struct IteratorContext {
  CancellationManager* cancellation = nullptr;  // may be null
};

// One pass over a dataset. Not thread-safe: its owner serializes GetNext.
class IteratorBase {
 public:
  virtual ~IteratorBase() = default;
  // The next element into *out, or *end = true (and *out untouched) once
  // the sequence is over; later calls keep reporting the end. Errors name
  // the dataset op and what failed (DATA_LOSS for a corrupt file, ...).
  virtual absl::Status GetNext(IteratorContext* ctx, std::vector<Tensor>* out, bool* end) = 0;
};

// Immutable once built; shared by the variant tensors and iterators that use it.
class DatasetBase : public std::enable_shared_from_this<DatasetBase> {
 public:
  explicit DatasetBase(DataTypeVector dtypes) : dtypes_(std::move(dtypes)) {}
  virtual ~DatasetBase() = default;
  DatasetBase(const DatasetBase&) = delete;
  DatasetBase& operator=(const DatasetBase&) = delete;

  // A new iterator at the start of the sequence.
  virtual std::unique_ptr<IteratorBase> MakeIterator() const = 0;
  // "RangeDataset(0, 10, 1)", for messages.
  virtual std::string DebugString() const = 0;
  const DataTypeVector& output_dtypes() const { return dtypes_; }

 private:
  const DataTypeVector dtypes_;
};

// The value of a dataset's DT_VARIANT tensor; copies share the dataset.
class DatasetVariant : public VariantValue {
 public:
  explicit DatasetVariant(std::shared_ptr<const DatasetBase> dataset)
      : dataset_(std::move(dataset)) {}
  std::string TypeName() const override { return "tensorflow::data::DatasetVariantWrapper"; }
  std::string DebugString() const override;
  std::unique_ptr<VariantValue> Clone() const override {
    return std::make_unique<DatasetVariant>(dataset_);
  }
  const std::shared_ptr<const DatasetBase>& dataset() const { return dataset_; }

 private:
  std::shared_ptr<const DatasetBase> dataset_;
};

// A scalar DT_VARIANT tensor holding `dataset`.
Tensor DatasetTensor(std::shared_ptr<const DatasetBase> dataset);

// The dataset `t` holds: INVALID_ARGUMENT naming what it holds instead.
absl::StatusOr<std::shared_ptr<const DatasetBase>> GetDataset(const Tensor& t);

// INVALID_ARGUMENT unless `element` has `dtypes`, naming `what` (the op).
absl::Status CheckElementTypes(const std::vector<Tensor>& element, const DataTypeVector& dtypes,
                               const std::string& what);

// An iterator that reads `input` ahead on its own producer thread, keeping
// up to `buffer` (> 0) elements ready, in order; an error of `input` comes
// after the elements before it. `keep_alive` holds what `input` reads.
// Destroying it stops and joins the producer (cancelling its work).
std::unique_ptr<IteratorBase> MakePrefetchIterator(std::shared_ptr<const DatasetBase> keep_alive,
                                                   std::unique_ptr<IteratorBase> input,
                                                   size_t buffer);

}  // namespace dflow::data

#endif  // DFLOW_DATA_DATASET_H_
