// The shape most tf.data dataset classes share: one input dataset, a name
// for messages ("BatchDataset 'b'"), and an iterator that keeps the dataset
// alive while it reads an iterator of the input.
//
//   class BatchDataset : public UnaryDataset<BatchDataset> {
//    public:
//     BatchDataset(std::shared_ptr<const DatasetBase> input, int64_t size, std::string what)
//         : UnaryDataset(std::move(input), std::move(what)), size_(size) {}
//     class Iterator : public InputIterator {  // what MakeIterator makes
//      public:
//       using InputIterator::InputIterator;
//       absl::Status GetNext(...) override { ... input_->GetNext(...) ... d_->size_ ... }
//     };
//    private:
//     const int64_t size_;
//   };
#ifndef DFLOW_DATA_UNARY_DATASET_H_
#define DFLOW_DATA_UNARY_DATASET_H_

#include <memory>
#include <string>
#include <utility>

#include "dflow/data/dataset.h"

namespace dflow::data {

// `Derived` declares a public `Iterator`, constructible from `const Derived*`
// (usually an InputIterator).
template <typename Derived>
class UnaryDataset : public DatasetBase {
 public:
  std::unique_ptr<IteratorBase> MakeIterator() const override {
    return std::make_unique<typename Derived::Iterator>(static_cast<const Derived*>(this));
  }
  std::string DebugString() const override { return what_; }

 protected:
  // Elements of the input's dtypes.
  UnaryDataset(std::shared_ptr<const DatasetBase> input, std::string what)
      : DatasetBase(input->output_dtypes()), input_(std::move(input)), what_(std::move(what)) {}
  UnaryDataset(std::shared_ptr<const DatasetBase> input, DataTypeVector dtypes, std::string what)
      : DatasetBase(std::move(dtypes)), input_(std::move(input)), what_(std::move(what)) {}

  // An iterator of the dataset `d_` over an iterator of its input, `input_`.
  class InputIterator : public IteratorBase {
   public:
    explicit InputIterator(const Derived* d)
        : keep_(d->shared_from_this()), d_(d), input_(d->input_->MakeIterator()) {}

   private:
    const std::shared_ptr<const DatasetBase> keep_;  // d_, alive while this runs

   protected:
    const Derived* const d_;
    const std::unique_ptr<IteratorBase> input_;
  };

  const std::shared_ptr<const DatasetBase> input_;
  const std::string what_;  // For messages, and DebugString.
};

}  // namespace dflow::data

#endif  // DFLOW_DATA_UNARY_DATASET_H_
