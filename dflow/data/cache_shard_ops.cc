// CacheDataset and CacheDatasetV2 (an in-memory cache: the first complete
// pass over the input is kept and later passes read it; V2 keeps it in a
// resource from AnonymousMemoryCache, which DeleteMemoryCache frees, or its
// own with DummyMemoryCache; with a file name, file_cache.h) and
// ShardDataset (every num_shards-th element from `index`), with TensorFlow's
// OpDefs.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "dflow/data/anonymous_resource.h"
#include "dflow/data/dataset_kernel.h"
#include "dflow/data/file_cache.h"
#include "dflow/data/unary_dataset.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/resource_mgr.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/framework/status.h"

namespace dflow::data {
namespace {

using Elements = std::vector<std::vector<Tensor>>;

// --- CacheDataset --------------------------------------------------------------------

// The elements of the first pass that reached the end; thread-safe.
class MemoryCache {
 public:
  // The cached elements, or null while no pass has completed.
  std::shared_ptr<const Elements> Get() const {
    absl::MutexLock lock(&mu_);
    return elements_;
  }
  // Keeps `elements` unless an earlier pass completed first.
  void Complete(Elements elements) {
    absl::MutexLock lock(&mu_);
    if (elements_ == nullptr) elements_ = std::make_shared<const Elements>(std::move(elements));
  }

 private:
  mutable absl::Mutex mu_;
  std::shared_ptr<const Elements> elements_ ABSL_GUARDED_BY(mu_);
};

// While no pass has completed, an iterator reads the input and keeps what it
// reads; the first to reach the end fills the cache and later iterators read
// it. A pass stopped early (take after cache) caches nothing, as in
// TensorFlow. Memory is bounded: an input over TensorByteLimit() bytes is
// not cached, every pass reads it again.
class CacheDataset : public DatasetBase {
 public:
  // `cache` may be shared with other datasets (CacheDatasetV2's resource).
  CacheDataset(std::shared_ptr<const DatasetBase> input, std::shared_ptr<MemoryCache> cache,
               std::string what)
      : DatasetBase(input->output_dtypes()),
        input_(std::move(input)),
        cache_(std::move(cache)),
        what_(std::move(what)) {}
  std::unique_ptr<IteratorBase> MakeIterator() const override {
    if (std::shared_ptr<const Elements> cached = cache_->Get()) {
      return std::make_unique<ReadIterator>(shared_from_this(), std::move(cached));
    }
    return std::make_unique<WriteIterator>(this);
  }
  std::string DebugString() const override { return what_; }

 private:
  class ReadIterator : public IteratorBase {
   public:
    ReadIterator(std::shared_ptr<const DatasetBase> d, std::shared_ptr<const Elements> elements)
        : d_(std::move(d)), elements_(std::move(elements)) {}
    absl::Status GetNext(IteratorContext*, std::vector<Tensor>* out, bool* end) override {
      *end = next_ >= elements_->size();
      if (!*end) *out = (*elements_)[next_++];
      return absl::OkStatus();
    }

   private:
    std::shared_ptr<const DatasetBase> d_;
    std::shared_ptr<const Elements> elements_;
    size_t next_ = 0;
  };

  class WriteIterator : public IteratorBase {
   public:
    explicit WriteIterator(const CacheDataset* d)
        : d_(d->shared_from_this()), c_(d), input_(d->input_->MakeIterator()) {}
    absl::Status GetNext(IteratorContext* ctx, std::vector<Tensor>* out, bool* end) override {
      RETURN_IF_ERROR(input_->GetNext(ctx, out, end));
      if (*end) {
        if (caching_) c_->cache_->Complete(std::move(kept_));
        caching_ = false;
        return absl::OkStatus();
      }
      if (!caching_) return absl::OkStatus();
      for (const Tensor& t : *out) bytes_ += t.TotalBytes();
      if (bytes_ > TensorByteLimit()) {  // too big to keep: read the input every pass
        caching_ = false;
        kept_.clear();
        return absl::OkStatus();
      }
      kept_.push_back(*out);  // tensors share their buffers: no copy
      return absl::OkStatus();
    }

   private:
    std::shared_ptr<const DatasetBase> d_;
    const CacheDataset* c_;
    std::unique_ptr<IteratorBase> input_;
    Elements kept_;
    uint64_t bytes_ = 0;
    bool caching_ = true;
  };

  const std::shared_ptr<const DatasetBase> input_;
  const std::shared_ptr<MemoryCache> cache_;
  const std::string what_;
};

// A memory cache as a device resource (AnonymousMemoryCache's).
class MemoryCacheResource : public ResourceBase {
 public:
  static constexpr char kTypeName[] = "MemoryCache";
  std::string DebugString() const override { return "MemoryCache"; }
  const std::shared_ptr<MemoryCache>& cache() const { return cache_; }

 private:
  const std::shared_ptr<MemoryCache> cache_ = std::make_shared<MemoryCache>();
};

// DummyMemoryCache's handle: no resource behind it; a dataset given it keeps
// its own cache.
struct DummyMemoryCacheTag {
  static constexpr char kTypeName[] = "DummyMemoryCache";
};

// kV2: CacheDatasetV2, whose third input is the cache resource.
template <bool kV2>
class CacheDatasetOp : public DatasetOpKernel {
 public:
  using DatasetOpKernel::DatasetOpKernel;
  absl::StatusOr<std::shared_ptr<const DatasetBase>> MakeDataset(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(auto input, GetDataset(ctx->input(0)));
    ASSIGN_OR_RETURN(std::shared_ptr<MemoryCache> cache, Cache(*ctx));
    const Tensor& filename = ctx->input(1);
    if (filename.dtype() != DT_STRING || filename.dims() != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("filename must be a string scalar, got ", filename.DebugString()));
    }
    if (!filename.scalar<std::string>().empty()) {
      return MakeFileCacheDataset(std::move(input), filename.scalar<std::string>(), What());
    }
    return std::make_shared<CacheDataset>(std::move(input), std::move(cache), What());
  }

 private:
  // CacheDataset's own cache, or the one CacheDatasetV2's handle names.
  static absl::StatusOr<std::shared_ptr<MemoryCache>> Cache(const OpKernelContext& ctx) {
    if (!kV2) return std::make_shared<MemoryCache>();
    ASSIGN_OR_RETURN(auto resource,
                     (AnonymousResourceInput<MemoryCacheResource, DummyMemoryCacheTag>(
                         ctx, 2, "cache", "a memory cache")));
    if (resource == nullptr) return std::make_shared<MemoryCache>();
    return resource->cache();
  }
};

// --- AnonymousMemoryCache, DummyMemoryCache, DeleteMemoryCache -----------------------

// AnonymousMemoryCache: a new cache resource; it lives until
// DeleteMemoryCache or until its device's resources are cleaned up.
class AnonymousMemoryCacheOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    return OutputAnonymousResource(ctx, std::make_shared<MemoryCacheResource>());
  }
  bool IsExpensive() const override { return false; }
};

// --- ShardDataset --------------------------------------------------------------------

class ShardDataset : public UnaryDataset<ShardDataset> {
 public:
  ShardDataset(std::shared_ptr<const DatasetBase> input, int64_t num_shards, int64_t index,
               bool require_non_empty, std::string what)
      : UnaryDataset(std::move(input), std::move(what)),
        num_shards_(num_shards),
        index_(index),
        require_non_empty_(require_non_empty) {}

  class Iterator : public InputIterator {
   public:
    using InputIterator::InputIterator;
    absl::Status GetNext(IteratorContext* ctx, std::vector<Tensor>* out, bool* end) override {
      while (true) {
        RETURN_IF_ERROR(input_->GetNext(ctx, out, end));
        if (*end) return EndOfInput();
        if (next_++ % d_->num_shards_ == d_->index_) {
          ++produced_;
          return absl::OkStatus();
        }
      }
    }

   private:
    absl::Status EndOfInput() const {
      if (!d_->require_non_empty_ || produced_ > 0) return absl::OkStatus();
      return absl::InvalidArgumentError(
          absl::StrCat(d_->what_, ": require_non_empty is set, but shard ", d_->index_, " of ",
                       d_->num_shards_, " is empty: the input has only ", next_, " element(s)"));
    }

    int64_t next_ = 0;      // input elements read
    int64_t produced_ = 0;  // of them returned
  };

 private:
  const int64_t num_shards_, index_;
  const bool require_non_empty_;
};

class ShardDatasetOp : public DatasetOpKernel {
 public:
  explicit ShardDatasetOp(OpKernelConstruction* c) : DatasetOpKernel(c) {
    c->GetAttr("require_non_empty", &require_non_empty_).IgnoreError();
  }
  absl::StatusOr<std::shared_ptr<const DatasetBase>> MakeDataset(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(auto input, GetDataset(ctx->input(0)));
    ASSIGN_OR_RETURN(int64_t num_shards, ScalarInput(*ctx, 1, "num_shards"));
    ASSIGN_OR_RETURN(int64_t index, ScalarInput(*ctx, 2, "index"));
    if (num_shards <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Number of shards must be greater than zero (currently num_shards = ", num_shards, ")."));
    }
    if (index < 0 || index >= num_shards) {
      return absl::InvalidArgumentError(absl::StrCat("Index must be between 0 and ", num_shards - 1,
                                                     " (currently index = ", index, ")."));
    }
    return std::make_shared<ShardDataset>(std::move(input), num_shards, index, require_non_empty_,
                                          What());
  }

 private:
  bool require_non_empty_ = false;
};

// --- registration ------------------------------------------------------------------

REGISTER_OP("CacheDataset")
    .Input("input_dataset: variant")
    .Input("filename: string")
    .Output("handle: variant")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("metadata: string = ''")
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("CacheDataset").Device(kDeviceCPU), CacheDatasetOp<false>);

REGISTER_OP("CacheDatasetV2")
    .Input("input_dataset: variant")
    .Input("filename: string")
    .Input("cache: resource")
    .Output("handle: variant")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("metadata: string = ''")
    .SetIsStateful()
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("CacheDatasetV2").Device(kDeviceCPU), CacheDatasetOp<true>);

REGISTER_OP("AnonymousMemoryCache")
    .Output("handle: resource")
    .Output("deleter: variant")
    .SetIsStateful()
    .SetShapeFn(UnknownShape);
REGISTER_KERNEL(KernelDefBuilder("AnonymousMemoryCache").Device(kDeviceCPU),
                AnonymousMemoryCacheOp);

REGISTER_OP("DummyMemoryCache").Output("handle: resource").SetIsStateful().SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("DummyMemoryCache").Device(kDeviceCPU),
                DummyResourceOp<DummyMemoryCacheTag>);

REGISTER_OP("DeleteMemoryCache")
    .Input("handle: resource")
    .Input("deleter: variant")
    .SetIsStateful()
    .SetShapeFn(NoOutputs);
REGISTER_KERNEL(KernelDefBuilder("DeleteMemoryCache").Device(kDeviceCPU),
                DeleteAnonymousResourceOp<DummyMemoryCacheTag>);

REGISTER_OP("ShardDataset")
    .Input("input_dataset: variant")
    .Input("num_shards: int64")
    .Input("index: int64")
    .Output("handle: variant")
    .Attr("require_non_empty: bool = false")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("metadata: string = ''")
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("ShardDataset").Device(kDeviceCPU), ShardDatasetOp);

}  // namespace
}  // namespace dflow::data
