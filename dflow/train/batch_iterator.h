// Batches from a Dataset: a deterministic, seeded iterator and a prefetching
// wrapper that builds the next batches on a background thread.
//
//   ASSIGN_OR_RETURN(auto it, BatchIterator::Create(train, {.batch_size = 128, .seed = 7}));
//   PrefetchingIterator input(std::move(it));  // 2 batches ahead
//   for (int step = 0; step < steps; ++step) {
//     ASSIGN_OR_RETURN(Batch b, input.Next());  // b.features [128,784], b.labels [128]
//     ... feed b.features and b.labels to a training step ...
//   }
//
// Order: epoch e visits the examples in EpochOrder(e). With shuffling it is a
// Fisher-Yates shuffle of 0..N-1 (i from N-1 down to 1, swap i with j drawn
// uniformly from [0, i] by rejection sampling on raw 64-bit outputs) driven by
// std::mt19937_64 seeded with SplitMix64(seed ^ SplitMix64(e)); the standard
// fixes that engine's output, so an order is the same on every platform.
#ifndef DFLOW_TRAIN_BATCH_ITERATOR_H_
#define DFLOW_TRAIN_BATCH_ITERATOR_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dflow/framework/tensor.h"
#include "dflow/train/dataset.h"

namespace dflow {

struct Batch {
  Tensor features;               // float [B, dim]
  Tensor labels;                 // int32 [B]
  std::vector<int64_t> indices;  // The dataset rows, in batch order.
  int64_t epoch = 0;
  int64_t step = 0;  // Batches returned before this one, over all epochs.
};

struct BatchOptions {
  int64_t batch_size = 32;
  bool shuffle = true;
  uint64_t seed = 0;
  // Drop each epoch's last batch when it holds fewer than batch_size examples.
  bool drop_remainder = false;
  // Next() returns OutOfRange after this many epochs; 0 repeats forever.
  int64_t num_epochs = 0;
  // Build only positions [slice_begin, slice_begin + slice_size) of each
  // batch (one worker's share of a global batch): its features, labels and
  // indices; the order and the batches' count are those of the whole batches.
  // slice_size 0: to the batch's end.
  int64_t slice_begin = 0;
  int64_t slice_size = 0;
};

// Anything that yields batches; the training loop reads one of these.
class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // The next batch; OutOfRange once the last epoch is done.
  virtual absl::StatusOr<Batch> Next() = 0;
};

// Not thread-safe.
class BatchIterator : public BatchSource {
 public:
  // InvalidArgument when batch_size < 1, num_epochs < 0, or drop_remainder
  // leaves no batch at all (batch_size > data.size()).
  static absl::StatusOr<std::unique_ptr<BatchIterator>> Create(Dataset data, BatchOptions options);

  absl::StatusOr<Batch> Next() override;
  // Moves past the next `batches` batches without building them (resuming
  // training at a restored step); OutOfRange when the input ends first.
  absl::Status Skip(int64_t batches);

  // Commits `order` (dataset rows; any length, repeats allowed) as the order of
  // every epoch from now on, replacing the shuffle, and restarts the epoch of
  // the last batch returned (the first epoch if none) from its first batch. InvalidArgument naming
  // the first row out of [0, size()), or when drop_remainder leaves no batch.
  absl::Status SetOrder(std::vector<int64_t> order);

  // The rows epoch `epoch` visits, in order (before batching).
  std::vector<int64_t> EpochOrder(int64_t epoch) const;
  const Dataset& dataset() const { return data_; }
  const BatchOptions& options() const { return options_; }

 private:
  friend class PrefetchingIterator;
  BatchIterator(Dataset data, BatchOptions options) : data_(std::move(data)), options_(options) {}
  static absl::Status CheckBatchable(int64_t rows, const BatchOptions& options);
  // Moves to the next batch's rows: returns how many, now ending at position_.
  absl::StatusOr<int64_t> Advance();
  // Makes the next batch the first of `epoch` (-1: the first epoch), numbered `step`.
  void Rewind(int64_t epoch, int64_t step);

  Dataset data_;
  BatchOptions options_;
  std::vector<int64_t> committed_;  // Empty: shuffle (or identity) per epoch.
  std::vector<int64_t> order_;      // The current epoch's order.
  int64_t epoch_ = -1;              // -1: no epoch started yet.
  int64_t position_ = 0;            // Next row of order_ to batch.
  int64_t step_ = 0;
};

// Runs a BatchIterator on its own thread, keeping up to `capacity` batches
// ready, so building input overlaps the training step. Next() returns exactly
// the sequence the wrapped iterator would. Thread-safe; with several callers
// of Next() each batch goes to one of them.
class PrefetchingIterator : public BatchSource {
 public:
  // Starts the producer thread. REQUIRES: inner != nullptr. A capacity below
  // 1 counts as 1.
  explicit PrefetchingIterator(std::unique_ptr<BatchIterator> inner, int capacity = 2,
                               absl::Duration next_timeout = absl::Seconds(60));
  // Stops the producer and joins it; waits at most for the batch being built.
  ~PrefetchingIterator() override;
  PrefetchingIterator(const PrefetchingIterator&) = delete;
  PrefetchingIterator& operator=(const PrefetchingIterator&) = delete;

  // The next batch, waiting at most next_timeout (DeadlineExceeded after).
  // The inner iterator's error (OutOfRange at the end) repeats on every call.
  absl::StatusOr<Batch> Next() override;
  // Discards prefetched batches, then BatchIterator::SetOrder as if the
  // wrapped iterator had produced only the batches Next() returned.
  absl::Status SetOrder(std::vector<int64_t> order);

 private:
  void Start() ABSL_EXCLUSIVE_LOCKS_REQUIRED(control_mu_);
  void Stop() ABSL_EXCLUSIVE_LOCKS_REQUIRED(control_mu_);
  void Produce();

  const int capacity_;
  const absl::Duration next_timeout_;
  absl::Mutex control_mu_;                // Serialises Start/Stop; taken before mu_.
  std::unique_ptr<BatchIterator> inner_;  // Used by the producer while it runs.
  std::thread producer_ ABSL_GUARDED_BY(control_mu_);

  absl::Mutex mu_;
  std::deque<absl::StatusOr<Batch>> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // The last batch Next() returned, for SetOrder's restart.
  int64_t last_epoch_ ABSL_GUARDED_BY(mu_) = -1;
  int64_t returned_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace dflow

#endif  // DFLOW_TRAIN_BATCH_ITERATOR_H_
