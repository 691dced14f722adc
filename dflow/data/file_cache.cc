#include "dflow/data/file_cache.h"

#include <cinttypes>
#include <cstdio>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "dflow/framework/status.h"
#include "dflow/io/file.h"
#include "dflow/io/record_readers.h"
#include "dflow/io/tensor_bundle.h"

namespace dflow::data {
namespace {

// TensorFlow's limit on the elements of one cache (its keys have 7 digits).
constexpr int64_t kMaxItems = 10000000;

// printf("%7zu_%Nzu", element, component), N the width of components - 1.
std::string CacheKey(int64_t element, size_t component, size_t components) {
  const int width = static_cast<int>(std::to_string(components - 1).size());
  char key[64];
  std::snprintf(key, sizeof(key), "%7" PRId64 "_%*zu", element, width, component);
  return key;
}

class FileCacheDataset : public DatasetBase {
 public:
  FileCacheDataset(std::shared_ptr<const DatasetBase> input, std::string filename, std::string what)
      : DatasetBase(input->output_dtypes()),
        input_(std::move(input)),
        filename_(std::move(filename)),
        what_(std::move(what)) {}
  std::unique_ptr<IteratorBase> MakeIterator() const override;
  std::string DebugString() const override {
    return absl::StrCat("CacheDataset(", input_->DebugString(), ", '", filename_, "')");
  }

 private:
  class Writer;
  class Reader;

  const std::shared_ptr<const DatasetBase> input_;
  const std::string filename_;
  const std::string what_;
};

// Passes the input through and writes each element into the cache.
class FileCacheDataset::Writer : public IteratorBase {
 public:
  explicit Writer(const FileCacheDataset* d)
      : d_(d->shared_from_this()),
        c_(d),
        input_(d->input_->MakeIterator()),
        shard_(d->filename_ + "_0"),
        lockfile_(shard_ + ".lockfile") {}
  ~Writer() override {
    if (!started_ || finished_) return;
    // Never leave part of the input behind as a cache.
    bundle_.reset();  // removes its temporary data file
    io::DeleteFile(lockfile_).IgnoreError();
  }
  absl::Status GetNext(IteratorContext* ctx, std::vector<Tensor>* out, bool* end) override {
    if (finished_) {
      *end = true;
      return absl::OkStatus();
    }
    if (!started_) {
      absl::Status s = Start();
      if (absl::IsAlreadyExists(s)) return s;
      if (!s.ok()) {
        return absl::Status(
            s.code(), absl::StrCat(c_->what_, ": caching to '", c_->filename_, "': ", s.message()));
      }
    }
    if (index_ >= kMaxItems) {
      return absl::InvalidArgumentError(
          absl::StrCat(c_->what_, ": Upstream iterator is producing more than ", kMaxItems,
                       " items, which is more than the cache limit."));
    }
    RETURN_IF_ERROR(input_->GetNext(ctx, out, end));
    if (*end) return Finish();
    for (size_t j = 0; j < out->size(); ++j) {
      absl::Status s = bundle_->Add(CacheKey(index_, j, out->size()), (*out)[j]);
      if (!s.ok()) {
        return absl::Status(
            s.code(), absl::StrCat(c_->what_, ": caching to '", c_->filename_, "': ", s.message()));
      }
    }
    ++index_;
    return absl::OkStatus();
  }

 private:
  // TensorFlow's checks against another writer of the same cache, then the
  // lockfile and the bundle.
  absl::Status Start() {
    if (io::FileExists(io::BundleIndexFilename(shard_))) {
      return absl::AlreadyExistsError(absl::StrCat(
          c_->what_, ": Existing cache files found: \n", io::BundleIndexFilename(shard_), "\n",
          io::BundleDataFilename(shard_, 0, 1), "\nTo continue delete the above files."));
    }
    if (io::FileExists(lockfile_)) {
      absl::StatusOr<std::string> contents = io::ReadWholeFile(lockfile_);
      return absl::AlreadyExistsError(absl::StrCat(
          c_->what_,
          ": There appears to be a concurrent caching iterator running - cache lockfile "
          "already exists ('",
          lockfile_,
          "'). If you are sure no other running TF computations are using this cache "
          "prefix, delete the lockfile and re-initialize the iterator. Lockfile contents: ",
          contents.ok() ? *contents : ""));
    }
    ASSIGN_OR_RETURN(bundle_, io::BundleWriter::Create(shard_));
    ASSIGN_OR_RETURN(std::unique_ptr<io::WritableFile> lock, io::WritableFile::Create(lockfile_));
    RETURN_IF_ERROR(lock->Append(absl::StrCat("Created at: ", absl::ToUnixSeconds(absl::Now()))));
    RETURN_IF_ERROR(lock->Close());
    started_ = true;
    return absl::OkStatus();
  }
  // The input ended: the bundle becomes the cache at the prefix.
  absl::Status Finish() {
    RETURN_IF_ERROR(bundle_->Finish());
    RETURN_IF_ERROR(io::MergeBundles({shard_}, c_->filename_, /*delete_old_dirs=*/false,
                                     /*allow_missing_files=*/false));
    finished_ = true;
    return io::DeleteFile(lockfile_);
  }

  std::shared_ptr<const DatasetBase> d_;
  const FileCacheDataset* c_;
  std::unique_ptr<IteratorBase> input_;
  const std::string shard_;
  const std::string lockfile_;
  std::unique_ptr<io::BundleWriter> bundle_;
  bool started_ = false;
  bool finished_ = false;
  int64_t index_ = 0;  // the next element's
};

// Reads the elements of a finished cache in order.
class FileCacheDataset::Reader : public IteratorBase {
 public:
  explicit Reader(const FileCacheDataset* d) : d_(d->shared_from_this()), c_(d) {}
  absl::Status GetNext(IteratorContext*, std::vector<Tensor>* out, bool* end) override {
    if (bundle_ == nullptr) RETURN_IF_ERROR(Open());
    *end = index_ >= elements_;
    if (*end) return absl::OkStatus();
    const size_t n = c_->output_dtypes().size();
    std::vector<Tensor> element;
    for (size_t j = 0; j < n; ++j) {
      absl::StatusOr<Tensor> t = bundle_->Read(CacheKey(index_, j, n));
      if (!t.ok()) {
        return absl::Status(t.status().code(),
                            absl::StrCat(c_->what_, ": reading the cache '", c_->filename_,
                                         "': ", t.status().message()));
      }
      element.push_back(*std::move(t));
    }
    RETURN_IF_ERROR(CheckElementTypes(element, c_->output_dtypes(), c_->what_));
    *out = std::move(element);
    ++index_;
    return absl::OkStatus();
  }

 private:
  absl::Status Open() {
    absl::StatusOr<std::unique_ptr<io::BundleReader>> r = io::BundleReader::Open(c_->filename_);
    if (!r.ok()) {
      return absl::Status(r.status().code(),
                          absl::StrCat(c_->what_, ": opening the cache '", c_->filename_,
                                       "': ", r.status().message()));
    }
    bundle_ = *std::move(r);
    const size_t entries = bundle_->Tensors().size();
    const size_t n = c_->output_dtypes().size();
    if (entries % n != 0) {
      return absl::DataLossError(absl::StrCat(c_->what_, ": the cache '", c_->filename_, "' holds ",
                                              entries, " tensors, not whole elements of ", n));
    }
    elements_ = static_cast<int64_t>(entries / n);
    return absl::OkStatus();
  }

  std::shared_ptr<const DatasetBase> d_;
  const FileCacheDataset* c_;
  std::unique_ptr<io::BundleReader> bundle_;  // opened by the first GetNext
  int64_t elements_ = 0;
  int64_t index_ = 0;
};

std::unique_ptr<IteratorBase> FileCacheDataset::MakeIterator() const {
  if (io::FileExists(io::BundleIndexFilename(filename_))) return std::make_unique<Reader>(this);
  return std::make_unique<Writer>(this);
}

}  // namespace

std::shared_ptr<const DatasetBase> MakeFileCacheDataset(std::shared_ptr<const DatasetBase> input,
                                                        std::string filename, std::string what) {
  return std::make_shared<FileCacheDataset>(std::move(input), std::move(filename), std::move(what));
}

}  // namespace dflow::data
