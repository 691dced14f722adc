#include "dflow/train/dataset.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dflow/framework/status.h"
#include "dflow/train/idx_reader.h"

namespace dflow {

absl::StatusOr<Dataset> Dataset::Create(Tensor features, Tensor labels, int num_classes) {
  if (features.dtype() != DT_FLOAT || features.dims() != 2 || features.dim_size(0) < 1 ||
      features.dim_size(1) < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("[Dataset] features must be float [N, dim] with N, dim > 0, got ",
                     DataTypeString(features.dtype()), " ", features.shape().DebugString()));
  }
  if (labels.dtype() != DT_INT32 || labels.dims() != 1 ||
      labels.dim_size(0) != features.dim_size(0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("[Dataset] labels must be int32 [", features.dim_size(0), "], got ",
                     DataTypeString(labels.dtype()), " ", labels.shape().DebugString()));
  }
  auto l = labels.flat<int32_t>();
  for (int64_t i = 0; i < l.size(); ++i) {
    if (l[i] < 0 || l[i] >= num_classes) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "[Dataset] label %d of example %d outside [0, %d)", l[i], i, num_classes));
    }
  }
  return Dataset(std::move(features), std::move(labels), num_classes);
}

void Dataset::Gather(absl::Span<const int64_t> indices, Tensor* features, Tensor* labels) const {
  const int64_t b = indices.size(), d = dim();
  *features = Tensor::ForOverwrite(DT_FLOAT, TensorShape({b, d}));
  *labels = Tensor::ForOverwrite(DT_INT32, TensorShape({b}));
  const float* src = features_.flat<float>().data();
  float* dst = features->flat<float>().data();
  auto src_labels = labels_.flat<int32_t>();
  auto dst_labels = labels->flat<int32_t>();
  for (int64_t i = 0; i < b; ++i) {
    std::memcpy(dst + i * d, src + indices[i] * d, d * sizeof(float));
    dst_labels[i] = src_labels[indices[i]];
  }
}

namespace {

constexpr int kFashionMnistClasses = 10;
constexpr int64_t kFashionMnistSide = 28;

// dir/name.gz, else an uncompressed dir/name; NotFound with the install hint.
absl::StatusOr<std::string> FindIdxFile(const std::string& dir, const std::string& name) {
  std::string gz = (std::filesystem::path(dir) / (name + ".gz")).string();
  std::string plain = (std::filesystem::path(dir) / name).string();
  std::error_code ec;
  if (std::filesystem::exists(gz, ec)) return gz;
  if (std::filesystem::exists(plain, ec)) return plain;
  return absl::NotFoundError(absl::StrCat("Fashion-MNIST not found at ", gz,
                                          ": install the Debian package dataset-fashion-mnist "
                                          "(apt-get install dataset-fashion-mnist)"));
}

absl::Status CheckFashionMnist(const IdxExamples& ex, const std::string& images_path,
                               const std::string& labels_path) {
  if (ex.images.rows != kFashionMnistSide || ex.images.cols != kFashionMnistSide) {
    return absl::DataLossError(absl::StrFormat(
        "[LoadFashionMnist] %s: images are %dx%d (header at offset 8), expected 28x28", images_path,
        ex.images.rows, ex.images.cols));
  }
  for (size_t i = 0; i < ex.labels.size(); ++i) {
    if (ex.labels[i] >= kFashionMnistClasses) {
      return absl::DataLossError(
          absl::StrFormat("[LoadFashionMnist] %s: label %d at offset %d is outside 0..9",
                          labels_path, ex.labels[i], 8 + i));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Dataset> ToDataset(const IdxExamples& ex, int num_classes) {
  const int64_t n = ex.images.count, d = ex.images.rows * ex.images.cols;
  Tensor features(DT_FLOAT, TensorShape({n, d}));
  std::transform(ex.images.pixels.begin(), ex.images.pixels.end(), features.flat<float>().begin(),
                 [](uint8_t p) { return p / 255.0f; });
  Tensor labels(DT_INT32, TensorShape({n}));
  std::copy(ex.labels.begin(), ex.labels.end(), labels.flat<int32_t>().begin());
  return Dataset::Create(std::move(features), std::move(labels), num_classes);
}

// A standard normal from two 53-bit uniforms (Box-Muller), so the stream is
// the same with every standard library (std::normal_distribution is not).
double NextNormal(std::mt19937_64& rng) {
  constexpr double kTwoPi = 6.283185307179586;
  double u1 = ((rng() >> 11) + 1) * 0x1.0p-53;  // (0, 1]
  double u2 = (rng() >> 11) * 0x1.0p-53;        // [0, 1)
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2);
}

}  // namespace

absl::StatusOr<Dataset> LoadFashionMnist(const std::string& dir, absl::string_view split) {
  std::string prefix;
  if (split == "train") {
    prefix = "train";
  } else if (split == "test") {
    prefix = "t10k";
  } else {
    return absl::InvalidArgumentError(absl::StrCat("[LoadFashionMnist] unknown split '",
                                                   std::string(split), "': use train or test"));
  }
  ASSIGN_OR_RETURN(std::string images_path, FindIdxFile(dir, prefix + "-images-idx3-ubyte"));
  ASSIGN_OR_RETURN(std::string labels_path, FindIdxFile(dir, prefix + "-labels-idx1-ubyte"));
  ASSIGN_OR_RETURN(IdxExamples ex, ReadIdxExamples(images_path, labels_path));
  RETURN_IF_ERROR(CheckFashionMnist(ex, images_path, labels_path));
  return ToDataset(ex, kFashionMnistClasses);
}

absl::StatusOr<Dataset> MakeSyntheticDataset(int64_t n, int num_classes, int64_t dim,
                                             uint64_t seed) {
  if (n < 1 || num_classes < 1 || dim < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "[MakeSyntheticDataset] need n, num_classes, dim >= 1, got n=%d num_classes=%d dim=%d", n,
        num_classes, dim));
  }
  std::mt19937_64 rng(seed);
  std::vector<float> means(num_classes * dim);
  for (float& m : means) m = (rng() >> 40) * 0x1.0p-24f;  // [0, 1)
  Tensor features(DT_FLOAT, TensorShape({n, dim}));
  Tensor labels(DT_INT32, TensorShape({n}));
  auto f = features.flat<float>();
  auto l = labels.flat<int32_t>();
  for (int64_t i = 0; i < n; ++i) {
    l[i] = static_cast<int32_t>(i % num_classes);
    for (int64_t j = 0; j < dim; ++j) {
      double v = means[l[i] * dim + j] + 0.15 * NextNormal(rng);
      f[i * dim + j] = static_cast<float>(std::clamp(v, 0.0, 1.0));
    }
  }
  return Dataset::Create(std::move(features), std::move(labels), num_classes);
}

}  // namespace dflow
