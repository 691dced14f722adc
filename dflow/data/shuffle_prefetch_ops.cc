// ShuffleDataset (a seeded random pick from a bounded buffer) and
// PrefetchDataset (a bounded buffer filled ahead by a producer thread), with
// TensorFlow's OpDefs.
//
// The shuffle order is dflow's own deterministic stream for nonzero seeds
// (std::mt19937_64), not TensorFlow's Philox stream: the same elements come
// out, in another order than TensorFlow's.
#include <atomic>
#include <deque>
#include <random>
#include <thread>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "dflow/data/dataset_kernel.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/framework/status.h"

namespace dflow::data {
namespace {

// --- ShuffleDataset --------------------------------------------------------------------

class ShuffleDataset : public DatasetBase {
 public:
  // seed: 0 picks a fresh random seed for every iterator.
  ShuffleDataset(std::shared_ptr<const DatasetBase> input, int64_t buffer, uint64_t seed,
                 bool reshuffle)
      : DatasetBase(input->output_dtypes()),
        input_(std::move(input)),
        buffer_(buffer),
        seed_(seed),
        reshuffle_(reshuffle) {}
  std::unique_ptr<IteratorBase> MakeIterator() const override {
    uint64_t seed = seed_;
    if (seed == 0) {
      seed = absl::Uniform<uint64_t>(absl::BitGen());
    } else if (reshuffle_) {
      seed += 0x9e3779b97f4a7c15ull * iterations_.fetch_add(1);
    }
    return std::make_unique<Iterator>(this, seed);
  }
  std::string DebugString() const override {
    return absl::StrCat("ShuffleDataset(", input_->DebugString(), ", ", buffer_, ")");
  }

 private:
  class Iterator : public IteratorBase {
   public:
    Iterator(const ShuffleDataset* d, uint64_t seed)
        : d_(d->shared_from_this()), s_(d), input_(d->input_->MakeIterator()), rng_(seed) {}
    absl::Status GetNext(IteratorContext* ctx, std::vector<Tensor>* out, bool* end) override {
      while (!input_end_ && buffer_.size() < s_->buffer_) {
        std::vector<Tensor> e;
        RETURN_IF_ERROR(input_->GetNext(ctx, &e, &input_end_));
        if (!input_end_) buffer_.push_back(std::move(e));
      }
      *end = buffer_.empty();
      if (*end) return absl::OkStatus();
      const size_t pick = std::uniform_int_distribution<size_t>(0, buffer_.size() - 1)(rng_);
      std::swap(buffer_[pick], buffer_.back());
      *out = std::move(buffer_.back());
      buffer_.pop_back();
      return absl::OkStatus();
    }

   private:
    std::shared_ptr<const DatasetBase> d_;
    const ShuffleDataset* s_;
    std::unique_ptr<IteratorBase> input_;
    std::mt19937_64 rng_;
    std::vector<std::vector<Tensor>> buffer_;  // at most s_->buffer_ elements
    bool input_end_ = false;
  };

  const std::shared_ptr<const DatasetBase> input_;
  const size_t buffer_;
  const uint64_t seed_;
  const bool reshuffle_;
  mutable std::atomic<uint64_t> iterations_{0};
};

class ShuffleDatasetOp : public DatasetOpKernel {
 public:
  explicit ShuffleDatasetOp(OpKernelConstruction* c) : DatasetOpKernel(c) {
    c->GetAttr("reshuffle_each_iteration", &reshuffle_).IgnoreError();
  }
  absl::StatusOr<std::shared_ptr<const DatasetBase>> MakeDataset(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(auto input, GetDataset(ctx->input(0)));
    ASSIGN_OR_RETURN(int64_t buffer, ScalarInput(*ctx, 1, "buffer_size"));
    ASSIGN_OR_RETURN(int64_t seed, ScalarInput(*ctx, 2, "seed"));
    ASSIGN_OR_RETURN(int64_t seed2, ScalarInput(*ctx, 3, "seed2"));
    if (buffer <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("buffer_size must be greater than zero, got ", buffer));
    }
    // Elements are held by reference; the cap only bounds the vector itself.
    buffer = std::min<int64_t>(buffer, int64_t{1} << 24);
    const uint64_t mixed =
        (seed == 0 && seed2 == 0)
            ? 0
            : (static_cast<uint64_t>(seed) * 0x100000001b3ull) ^ static_cast<uint64_t>(seed2) ^ 1;
    return std::make_shared<ShuffleDataset>(std::move(input), buffer, mixed, reshuffle_);
  }

 private:
  bool reshuffle_ = true;
};

// --- PrefetchDataset -------------------------------------------------------------------

// A producer thread (started by the first GetNext) keeps up to `buffer`
// elements of `input` ready; the destructor stops and joins it.
class PrefetchIterator : public IteratorBase {
 public:
  PrefetchIterator(std::shared_ptr<const DatasetBase> keep_alive,
                   std::unique_ptr<IteratorBase> input, size_t buffer)
      : d_(std::move(keep_alive)), input_(std::move(input)), capacity_(buffer) {}
  ~PrefetchIterator() override {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    cancellation_.StartCancel();  // stops a map function the producer is running
    if (producer_.joinable()) producer_.join();
  }
  absl::Status GetNext(IteratorContext*, std::vector<Tensor>* out, bool* end) override {
    if (!producer_.joinable()) producer_ = std::thread([this] { Produce(); });
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](PrefetchIterator* it)
             ABSL_EXCLUSIVE_LOCKS_REQUIRED(it->mu_) { return !it->buffer_.empty() || it->done_; },
        this));
    if (buffer_.empty()) {
      *end = true;
      return status_;
    }
    *end = false;
    *out = std::move(buffer_.front());
    buffer_.pop_front();
    return absl::OkStatus();
  }

 private:
  void Produce() {
    IteratorContext ctx;  // outlives any one step: cancelled by the destructor
    ctx.cancellation = &cancellation_;
    while (true) {
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(
            +[](PrefetchIterator* it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(it->mu_) {
              return it->stopping_ || it->buffer_.size() < it->capacity_;
            },
            this));
        if (stopping_) return;
      }
      std::vector<Tensor> e;
      bool end = false;
      absl::Status s = input_->GetNext(&ctx, &e, &end);
      absl::MutexLock lock(&mu_);
      if (!s.ok() || end) {
        status_ = s;
        done_ = true;
        return;
      }
      buffer_.push_back(std::move(e));
    }
  }

  std::shared_ptr<const DatasetBase> d_;  // keeps input_'s dataset alive
  std::unique_ptr<IteratorBase> input_;   // used by the producer thread only
  const size_t capacity_;
  std::thread producer_;  // touched by GetNext's caller only
  CancellationManager cancellation_;
  absl::Mutex mu_;
  std::deque<std::vector<Tensor>> buffer_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;    // the input ended or failed
  absl::Status status_ ABSL_GUARDED_BY(mu_);  // its error, reported once drained
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

std::unique_ptr<IteratorBase> MakePrefetchIterator(std::shared_ptr<const DatasetBase> keep_alive,
                                                   std::unique_ptr<IteratorBase> input,
                                                   size_t buffer) {
  return std::make_unique<PrefetchIterator>(std::move(keep_alive), std::move(input), buffer);
}

namespace {

class PrefetchDataset : public DatasetBase {
 public:
  PrefetchDataset(std::shared_ptr<const DatasetBase> input, int64_t buffer)
      : DatasetBase(input->output_dtypes()), input_(std::move(input)), buffer_(buffer) {}
  std::unique_ptr<IteratorBase> MakeIterator() const override {
    if (buffer_ == 0) return input_->MakeIterator();
    return MakePrefetchIterator(shared_from_this(), input_->MakeIterator(), buffer_);
  }
  std::string DebugString() const override {
    return absl::StrCat("PrefetchDataset(", input_->DebugString(), ", ", buffer_, ")");
  }

 private:
  const std::shared_ptr<const DatasetBase> input_;
  const size_t buffer_;
};

// tf.data.AUTOTUNE asks for a tuned buffer; dflow uses a fixed one.
constexpr int64_t kAutotune = -1;
constexpr int64_t kAutotuneBuffer = 8;

class PrefetchDatasetOp : public DatasetOpKernel {
 public:
  using DatasetOpKernel::DatasetOpKernel;
  absl::StatusOr<std::shared_ptr<const DatasetBase>> MakeDataset(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(auto input, GetDataset(ctx->input(0)));
    ASSIGN_OR_RETURN(int64_t buffer, ScalarInput(*ctx, 1, "buffer_size"));
    if (buffer == kAutotune) buffer = kAutotuneBuffer;
    if (buffer < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("buffer_size must be >= 0 or set buffer_size to be AUTOTUNE, got ", buffer));
    }
    buffer = std::min<int64_t>(buffer, int64_t{1} << 20);
    return std::make_shared<PrefetchDataset>(std::move(input), buffer);
  }
};

REGISTER_OP("ShuffleDataset")
    .Input("input_dataset: variant")
    .Input("buffer_size: int64")
    .Input("seed: int64")
    .Input("seed2: int64")
    .Output("handle: variant")
    .Attr("reshuffle_each_iteration: bool = true")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("metadata: string = ''")
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("ShuffleDataset").Device(kDeviceCPU), ShuffleDatasetOp);

REGISTER_OP("PrefetchDataset")
    .Input("input_dataset: variant")
    .Input("buffer_size: int64")
    .Output("handle: variant")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("slack_period: int = 0")
    .Attr("legacy_autotune: bool = true")
    .Attr("buffer_size_min: int = 0")
    .Attr("metadata: string = ''")
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("PrefetchDataset").Device(kDeviceCPU), PrefetchDatasetOp);

}  // namespace
}  // namespace dflow::data
