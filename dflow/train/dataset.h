// Dataset: labelled examples held in memory, and the ways to get one
// (Fashion-MNIST from Debian's dataset-fashion-mnist package, or a synthetic
// set for tests). Batching lives in batch_iterator.h.
//
//   ASSIGN_OR_RETURN(Dataset train, LoadFashionMnist(kFashionMnistDir, "train"));
//   train.size();  // 60000; features [60000, 784] in [0,1], labels in 0..9
#ifndef DFLOW_TRAIN_DATASET_H_
#define DFLOW_TRAIN_DATASET_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "dflow/framework/tensor.h"

namespace dflow {

// Features float [N, dim], labels int32 [N] with values in [0, num_classes).
// Immutable; copies share the buffers. Thread-safe.
class Dataset {
 public:
  // InvalidArgument unless features is float [N, dim] with N, dim > 0, labels
  // is int32 [N] and every label lies in [0, num_classes).
  static absl::StatusOr<Dataset> Create(Tensor features, Tensor labels, int num_classes);

  int64_t size() const { return features_.dim_size(0); }
  int64_t dim() const { return features_.dim_size(1); }
  int num_classes() const { return num_classes_; }
  const Tensor& features() const { return features_; }
  const Tensor& labels() const { return labels_; }

  // Copies the rows `indices`, in that order, into fresh tensors: features
  // float [B, dim] and labels int32 [B]. REQUIRES: every index in [0, size()).
  void Gather(absl::Span<const int64_t> indices, Tensor* features, Tensor* labels) const;

 private:
  Dataset(Tensor features, Tensor labels, int num_classes)
      : features_(std::move(features)), labels_(std::move(labels)), num_classes_(num_classes) {}

  Tensor features_;
  Tensor labels_;
  int num_classes_;
};

// Where Debian's dataset-fashion-mnist package installs the idx files.
inline constexpr char kFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";

// Loads split "train" (60000 examples) or "test" (10000) from `dir`, which
// holds {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]. Pixels are scaled
// to [0,1]; 10 classes. NotFound with an install hint when a file is missing;
// DataLoss naming file and offset when one is corrupt, has images other than
// 28x28, a label above 9, or an image count unlike its label count;
// InvalidArgument for another split.
absl::StatusOr<Dataset> LoadFashionMnist(const std::string& dir, absl::string_view split);

// `n` examples of `dim` features in [0,1]: example i has label i % num_classes
// and features = clamp(mean[label] + 0.15 * N(0,1)), each class mean drawn
// uniformly from [0,1]^dim. A linear model separates the classes well.
// Deterministic for a seed (std::mt19937_64, Box-Muller). InvalidArgument
// unless n >= 1, num_classes >= 1 and dim >= 1.
absl::StatusOr<Dataset> MakeSyntheticDataset(int64_t n, int num_classes, int64_t dim,
                                             uint64_t seed);

}  // namespace dflow

#endif  // DFLOW_TRAIN_DATASET_H_
