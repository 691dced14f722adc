// ShuffleDataset(V2, V3) and ShuffleAndRepeatDataset(V2) (a seeded random
// pick from a bounded buffer), the seed generators of the V2 ops, and
// PrefetchDataset (a bounded buffer filled ahead by a producer thread), with
// TensorFlow's OpDefs.
//
// For nonzero seeds the shuffle order is TensorFlow's, element for element.
#include <deque>
#include <limits>
#include <thread>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "dflow/data/anonymous_resource.h"
#include "dflow/data/dataset_kernel.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/resource_mgr.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/framework/status.h"
#include "dflow/ops/philox.h"

namespace dflow::data {
namespace {

// --- ShuffleDataset, ShuffleAndRepeatDataset ------------------------------------------
//
// TensorFlow's shuffle, element for element (found by experiment against
// TensorFlow 2.21, see tests/data/gen_tf_data_reference.py):
//  - The op's (seed, seed2), or two random 64-bit values when both are 0,
//    make the dataset's seed source. With reshuffle_each_iteration it is a
//    Philox4x32 stream of 32-bit words keyed by them, and every iterator
//    (every epoch of ShuffleAndRepeat) takes the next two words as its
//    (seed, seed2); without, every iterator takes (seed, seed2) themselves.
//    A dataset built again (an initializer re-run) starts a fresh source.
//  - An iterator draws 32-bit words from Philox4x32(seed, seed2), four per
//    block. Before each element it fills the buffer from its input up to
//    buffer_size, then picks word % n of the n buffered elements of the
//    oldest epoch (in arrival order); the oldest element takes the picked
//    one's place and leaves the front.
//  - ShuffleAndRepeat keeps reading the next epoch into the buffer (up to
//    three epochs at once) but only picks from the oldest; when an epoch is
//    used up its iterator state is reseeded from the source, so the order is
//    that of shuffle().repeat().

// Hands out the (seed, seed2) of each iterator or epoch. Thread-safe.
class ShuffleSeeds {
 public:
  ShuffleSeeds(uint64_t seed, uint64_t seed2, bool reshuffle)
      : seed_(seed), seed2_(seed2), reshuffle_(reshuffle), stream_(seed, seed2) {}
  ShuffleSeeds(const ShuffleSeeds&) = delete;
  ShuffleSeeds& operator=(const ShuffleSeeds&) = delete;

  std::pair<uint64_t, uint64_t> Next() {
    if (!reshuffle_) return {seed_, seed2_};
    absl::MutexLock lock(&mu_);
    const uint64_t a = words_();
    return {a, words_()};
  }

 private:
  const uint64_t seed_, seed2_;
  const bool reshuffle_;
  absl::Mutex mu_;
  Philox4x32 stream_ ABSL_GUARDED_BY(mu_);
  PhiloxWords words_ ABSL_GUARDED_BY(mu_){&stream_};
};

// buffer: -1 = the whole input. count: epochs of the input (1 for
// ShuffleDataset; -1 = forever).
class ShuffleDataset : public DatasetBase {
 public:
  ShuffleDataset(std::shared_ptr<const DatasetBase> input, int64_t buffer, int64_t count,
                 std::shared_ptr<ShuffleSeeds> seeds, std::string op)
      : DatasetBase(input->output_dtypes()),
        input_(std::move(input)),
        buffer_(buffer < 0 ? std::numeric_limits<size_t>::max() : static_cast<size_t>(buffer)),
        count_(count),
        seeds_(std::move(seeds)),
        op_(std::move(op)) {}
  std::unique_ptr<IteratorBase> MakeIterator() const override {
    return std::make_unique<Iterator>(this);
  }
  std::string DebugString() const override {
    return absl::StrCat(op_, "(", input_->DebugString(), ", ", buffer_, ")");
  }

 private:
  // The most elements a buffer_size of UNKNOWN_CARDINALITY (the whole input)
  // holds; TensorFlow reads an infinite input forever instead.
  static constexpr size_t kMaxWholeInput = size_t{1} << 24;
  // TensorFlow keeps at most this many epochs in a ShuffleAndRepeat buffer.
  static constexpr size_t kMaxEpochsInBuffer = 3;

  class Iterator : public IteratorBase {
   public:
    explicit Iterator(const ShuffleDataset* d)
        : d_(d->shared_from_this()), s_(d), generator_(0, 0), words_(&generator_) {
      Reseed();
    }
    absl::Status GetNext(IteratorContext* ctx, std::vector<Tensor>* out, bool* end) override {
      *end = false;
      RETURN_IF_ERROR(Fill(ctx, end));
      if (*end || buffer_.empty()) {
        *end = true;
        return absl::OkStatus();
      }
      while (epoch_sizes_.front() == 0) {  // an epoch used up: the next one's seeds
        epoch_sizes_.pop_front();
        Reseed();
      }
      const size_t pick = words_() % epoch_sizes_.front();
      *out = std::move(buffer_[pick]);
      if (pick != 0) buffer_[pick] = std::move(buffer_.front());
      buffer_.pop_front();
      --epoch_sizes_.front();
      return absl::OkStatus();
    }

   private:
    void Reseed() {
      auto [seed, seed2] = s_->seeds_->Next();
      generator_ = Philox4x32(seed, seed2);
      words_ = PhiloxWords(&generator_);
    }

    // Reads the input until the buffer holds buffer_size elements, the input
    // ends, or it spans kMaxEpochsInBuffer epochs. *end: an input repeated
    // forever had no element at all.
    absl::Status Fill(IteratorContext* ctx, bool* end) {
      bool first_call = false;
      if (!started_) {
        started_ = true;
        first_call = true;
        input_ = s_->input_->MakeIterator();
      }
      while (input_ != nullptr && buffer_.size() < s_->buffer_) {
        std::vector<Tensor> element;
        bool input_end = true;
        while (s_->count_ == -1 || epoch_ < s_->count_) {
          RETURN_IF_ERROR(input_->GetNext(ctx, &element, &input_end));
          if (!input_end) {
            first_call = false;
            break;
          }
          if (first_call && s_->count_ == -1) {
            *end = true;
            return absl::OkStatus();
          }
          ++epoch_;
          epoch_sizes_.push_back(0);
          // After the last epoch TensorFlow makes no further input iterator
          // (whose seeds a shuffle inside would take).
          if (s_->count_ != -1 && epoch_ >= s_->count_) break;
          input_ = s_->input_->MakeIterator();
        }
        if (input_end) {
          input_.reset();
        } else {
          if (s_->whole_input_ && buffer_.size() >= kMaxWholeInput) {
            return absl::ResourceExhaustedError(
                absl::StrCat(s_->DebugString(),
                             ": buffer_size UNKNOWN_CARDINALITY buffers the whole input, "
                             "which has more than ",
                             kMaxWholeInput, " elements (is it infinite?)"));
          }
          buffer_.push_back(std::move(element));
          ++epoch_sizes_.back();
        }
        if (epoch_sizes_.size() > kMaxEpochsInBuffer) break;
      }
      return absl::OkStatus();
    }

    std::shared_ptr<const DatasetBase> d_;
    const ShuffleDataset* s_;
    std::unique_ptr<IteratorBase> input_;  // null once the input is over
    bool started_ = false;
    int64_t epoch_ = 0;
    // The buffered elements, oldest epoch first, each epoch's in the order
    // the picks left them; epoch_sizes_ counts them per epoch.
    std::deque<std::vector<Tensor>> buffer_;
    std::deque<size_t> epoch_sizes_{0};
    Philox4x32 generator_;
    PhiloxWords words_;  // borrows generator_
  };

  const std::shared_ptr<const DatasetBase> input_;
  const size_t buffer_;
  const bool whole_input_ = buffer_ == std::numeric_limits<size_t>::max();
  const int64_t count_;
  const std::shared_ptr<ShuffleSeeds> seeds_;
  const std::string op_;
};

// TensorFlow's UNKNOWN_CARDINALITY as a buffer size: buffer the whole input.
constexpr int64_t kWholeInput = -2;

// The seeds of the ops that take them: (0, 0) means two random ones.
std::shared_ptr<ShuffleSeeds> NewSeeds(int64_t seed, int64_t seed2, bool reshuffle) {
  if (seed == 0 && seed2 == 0) {  // TensorFlow's convention: nondeterministic
    absl::BitGen bits;
    seed = static_cast<int64_t>(absl::Uniform<uint64_t>(bits));
    seed2 = static_cast<int64_t>(absl::Uniform<uint64_t>(bits));
  }
  return std::make_shared<ShuffleSeeds>(seed, seed2, reshuffle);
}

// --- Seed generators: AnonymousSeedGenerator, DummySeedGenerator, DeleteSeedGenerator --
//
// TensorFlow 2 graphs (tf.function, dataset functions) give the V2/V3 shuffle
// ops a seed generator resource: AnonymousSeedGenerator's outlives the
// datasets built from it, so each rebuilt dataset goes on with its seed
// stream (a new order per epoch); DummySeedGenerator's is a placeholder,
// and the dataset makes its own from its seed inputs, as ShuffleDataset.

class SeedGeneratorResource : public ResourceBase {
 public:
  static constexpr char kTypeName[] = "SeedGenerator";
  explicit SeedGeneratorResource(std::shared_ptr<ShuffleSeeds> seeds) : seeds_(std::move(seeds)) {}
  std::string DebugString() const override { return "SeedGenerator"; }
  const std::shared_ptr<ShuffleSeeds>& seeds() const { return seeds_; }

 private:
  const std::shared_ptr<ShuffleSeeds> seeds_;
};

struct DummySeedGeneratorTag {
  static constexpr char kTypeName[] = "DummySeedGenerator";
};

// The seed source input `i` names: null for DummySeedGenerator's handle.
absl::StatusOr<std::shared_ptr<ShuffleSeeds>> SeedsFromHandle(const OpKernelContext& ctx, int i) {
  ASSIGN_OR_RETURN(auto resource,
                   (AnonymousResourceInput<SeedGeneratorResource, DummySeedGeneratorTag>(
                       ctx, i, "seed_generator", "a seed generator")));
  if (resource == nullptr) return nullptr;
  return resource->seeds();
}

class AnonymousSeedGeneratorOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(int64_t seed, ScalarInput(*ctx, 0, "seed"));
    ASSIGN_OR_RETURN(int64_t seed2, ScalarInput(*ctx, 1, "seed2"));
    const Tensor& reshuffle = ctx->input(2);
    if (reshuffle.dtype() != DT_BOOL || reshuffle.dims() != 0) {
      return ctx->InvalidArgument("reshuffle must be a bool scalar, got ", reshuffle.DebugString());
    }
    return OutputAnonymousResource(ctx, std::make_shared<SeedGeneratorResource>(
                                            NewSeeds(seed, seed2, reshuffle.scalar<bool>())));
  }
  bool IsExpensive() const override { return false; }
};

// --- The shuffle dataset ops -----------------------------------------------------------
//
// Inputs by op (after input_dataset, buffer_size):
//   ShuffleDataset            seed, seed2                   (count 1)
//   ShuffleDatasetV2          seed_generator                (count 1)
//   ShuffleDatasetV3          seed, seed2, seed_generator   (count 1)
//   ShuffleAndRepeatDataset   seed, seed2, count
//   ShuffleAndRepeatDatasetV2 seed, seed2, count, seed_generator
class ShuffleDatasetOp : public DatasetOpKernel {
 public:
  explicit ShuffleDatasetOp(OpKernelConstruction* c) : DatasetOpKernel(c), op_(c->def().op()) {
    // ShuffleDatasetV2's generator alone decides whether to reshuffle.
    if (op_ != "ShuffleDatasetV2") {
      c->GetAttr("reshuffle_each_iteration", &reshuffle_).IgnoreError();
    }
  }
  absl::StatusOr<std::shared_ptr<const DatasetBase>> MakeDataset(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(auto input, GetDataset(ctx->input(0)));
    ASSIGN_OR_RETURN(int64_t buffer, ScalarInput(*ctx, 1, "buffer_size"));
    if (buffer == kWholeInput) {
      buffer = -1;  // ShuffleDataset's "the whole input"
    } else if (buffer <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          What(), ": buffer_size must be greater than zero or UNKNOWN_CARDINALITY, got ", buffer));
    }
    const bool repeats = absl::StartsWith(op_, "ShuffleAndRepeat");
    int64_t count = 1;
    if (repeats) {
      ASSIGN_OR_RETURN(count, ScalarInput(*ctx, 4, "count"));
    }
    std::shared_ptr<ShuffleSeeds> seeds;
    if (op_ == "ShuffleDatasetV2") {
      ASSIGN_OR_RETURN(seeds, SeedsFromHandle(*ctx, 2));
      if (seeds == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            What(), ": needs a seed generator from AnonymousSeedGenerator, got a dummy one"));
      }
    } else if (op_ == "ShuffleDatasetV3" || op_ == "ShuffleAndRepeatDatasetV2") {
      ASSIGN_OR_RETURN(seeds, SeedsFromHandle(*ctx, repeats ? 5 : 4));
    }
    if (seeds == nullptr) {
      ASSIGN_OR_RETURN(int64_t seed, ScalarInput(*ctx, 2, "seed"));
      ASSIGN_OR_RETURN(int64_t seed2, ScalarInput(*ctx, 3, "seed2"));
      seeds = NewSeeds(seed, seed2, reshuffle_);
    }
    return std::make_shared<ShuffleDataset>(std::move(input), buffer, count, std::move(seeds), op_);
  }

 private:
  const std::string op_;
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

REGISTER_OP("ShuffleAndRepeatDataset")
    .Input("input_dataset: variant")
    .Input("buffer_size: int64")
    .Input("seed: int64")
    .Input("seed2: int64")
    .Input("count: int64")
    .Output("handle: variant")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("reshuffle_each_iteration: bool = true")
    .Attr("metadata: string = ''")
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("ShuffleAndRepeatDataset").Device(kDeviceCPU), ShuffleDatasetOp);

REGISTER_OP("ShuffleDatasetV2")
    .Input("input_dataset: variant")
    .Input("buffer_size: int64")
    .Input("seed_generator: resource")
    .Output("handle: variant")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("metadata: string = ''")
    .SetIsStateful()
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("ShuffleDatasetV2").Device(kDeviceCPU), ShuffleDatasetOp);

REGISTER_OP("ShuffleDatasetV3")
    .Input("input_dataset: variant")
    .Input("buffer_size: int64")
    .Input("seed: int64")
    .Input("seed2: int64")
    .Input("seed_generator: resource")
    .Output("handle: variant")
    .Attr("reshuffle_each_iteration: bool = true")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("metadata: string = ''")
    .SetIsStateful()
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("ShuffleDatasetV3").Device(kDeviceCPU), ShuffleDatasetOp);

REGISTER_OP("ShuffleAndRepeatDatasetV2")
    .Input("input_dataset: variant")
    .Input("buffer_size: int64")
    .Input("seed: int64")
    .Input("seed2: int64")
    .Input("count: int64")
    .Input("seed_generator: resource")
    .Output("handle: variant")
    .Attr("reshuffle_each_iteration: bool = true")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("metadata: string = ''")
    .SetIsStateful()
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("ShuffleAndRepeatDatasetV2").Device(kDeviceCPU), ShuffleDatasetOp);

REGISTER_OP("AnonymousSeedGenerator")
    .Input("seed: int64")
    .Input("seed2: int64")
    .Input("reshuffle: bool")
    .Output("handle: resource")
    .Output("deleter: variant")
    .SetIsStateful()
    .SetShapeFn(UnknownShape);
REGISTER_KERNEL(KernelDefBuilder("AnonymousSeedGenerator").Device(kDeviceCPU),
                AnonymousSeedGeneratorOp);

REGISTER_OP("DummySeedGenerator")
    .Output("handle: resource")
    .SetIsStateful()
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("DummySeedGenerator").Device(kDeviceCPU),
                DummyResourceOp<DummySeedGeneratorTag>);

REGISTER_OP("DeleteSeedGenerator")
    .Input("handle: resource")
    .Input("deleter: variant")
    .SetIsStateful()
    .SetShapeFn(NoOutputs);
REGISTER_KERNEL(KernelDefBuilder("DeleteSeedGenerator").Device(kDeviceCPU),
                DeleteAnonymousResourceOp<DummySeedGeneratorTag>);

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
