#include "dflow/train/batch_iterator.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dflow/framework/status.h"

namespace dflow {
namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Uniform in [0, bound) by rejection, identical on every standard library
// (std::uniform_int_distribution is not).
uint64_t UniformBelow(std::mt19937_64& rng, uint64_t bound) {
  const uint64_t max = std::numeric_limits<uint64_t>::max();
  const uint64_t limit = max - max % bound;
  uint64_t r;
  do {
    r = rng();
  } while (r >= limit);
  return r % bound;
}

void Shuffle(std::vector<int64_t>& v, uint64_t seed, int64_t epoch) {
  std::mt19937_64 rng(SplitMix64(seed ^ SplitMix64(static_cast<uint64_t>(epoch))));
  for (int64_t i = static_cast<int64_t>(v.size()) - 1; i > 0; --i) {
    std::swap(v[i], v[UniformBelow(rng, i + 1)]);
  }
}

}  // namespace

absl::Status BatchIterator::CheckBatchable(int64_t rows, const BatchOptions& options) {
  if (options.drop_remainder && options.batch_size > rows) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "[BatchIterator] batch_size %d > %d rows per epoch with drop_remainder: no batch at all",
        options.batch_size, rows));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<BatchIterator>> BatchIterator::Create(Dataset data,
                                                                     BatchOptions options) {
  if (options.batch_size < 1 || options.num_epochs < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("[BatchIterator] need batch_size >= 1 and num_epochs >= 0, got %d and %d",
                        options.batch_size, options.num_epochs));
  }
  if (options.slice_begin < 0 || options.slice_size < 0 ||
      options.slice_begin + options.slice_size > options.batch_size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "[BatchIterator] slice [%d, %d + %d) is not within a batch of %d", options.slice_begin,
        options.slice_begin, options.slice_size, options.batch_size));
  }
  RETURN_IF_ERROR(CheckBatchable(data.size(), options));
  return std::unique_ptr<BatchIterator>(new BatchIterator(std::move(data), options));
}

std::vector<int64_t> BatchIterator::EpochOrder(int64_t epoch) const {
  if (!committed_.empty()) return committed_;
  std::vector<int64_t> order(data_.size());
  std::iota(order.begin(), order.end(), 0);
  if (options_.shuffle) Shuffle(order, options_.seed, epoch);
  return order;
}

absl::Status BatchIterator::SetOrder(std::vector<int64_t> order) {
  if (order.empty()) {
    return absl::InvalidArgumentError("[BatchIterator] SetOrder: empty order");
  }
  for (size_t i = 0; i < order.size(); ++i) {
    if (order[i] < 0 || order[i] >= data_.size()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "[BatchIterator] SetOrder: order[%d] = %d outside [0, %d)", i, order[i], data_.size()));
    }
  }
  RETURN_IF_ERROR(CheckBatchable(order.size(), options_));
  committed_ = std::move(order);
  Rewind(epoch_, step_);
  return absl::OkStatus();
}

void BatchIterator::Rewind(int64_t epoch, int64_t step) {
  epoch_ = epoch;
  step_ = step;
  order_ = epoch_ >= 0 ? EpochOrder(epoch_) : std::vector<int64_t>();
  position_ = 0;
}

absl::StatusOr<int64_t> BatchIterator::Advance() {
  const int64_t bs = options_.batch_size;
  auto epoch_end = [&] {
    int64_t n = order_.size();
    return options_.drop_remainder ? n - n % bs : n;
  };
  if (epoch_ < 0 || position_ >= epoch_end()) {
    if (options_.num_epochs > 0 && epoch_ + 1 >= options_.num_epochs) {
      return absl::OutOfRangeError(absl::StrFormat(
          "[BatchIterator] end of input after %d epochs (%d batches)", options_.num_epochs, step_));
    }
    ++epoch_;
    order_ = EpochOrder(epoch_);
    position_ = 0;
  }
  const int64_t b = std::min<int64_t>(bs, order_.size() - position_);
  position_ += b;
  ++step_;
  return b;
}

absl::StatusOr<Batch> BatchIterator::Next() {
  ASSIGN_OR_RETURN(const int64_t b, Advance());
  Batch batch;
  const int64_t begin = std::min(options_.slice_begin, b);
  const int64_t size = options_.slice_size > 0 ? options_.slice_size : b;
  const auto first = order_.begin() + position_ - b;
  batch.indices.assign(first + begin, first + std::min(begin + size, b));
  data_.Gather(batch.indices, &batch.features, &batch.labels);
  batch.epoch = epoch_;
  batch.step = step_ - 1;
  return batch;
}

absl::Status BatchIterator::Skip(int64_t batches) {
  for (int64_t i = 0; i < batches; ++i) RETURN_IF_ERROR(Advance().status());
  return absl::OkStatus();
}

PrefetchingIterator::PrefetchingIterator(std::unique_ptr<BatchIterator> inner, int capacity,
                                         absl::Duration next_timeout)
    : capacity_(std::max(capacity, 1)), next_timeout_(next_timeout), inner_(std::move(inner)) {
  absl::MutexLock control(&control_mu_);
  Start();
}

PrefetchingIterator::~PrefetchingIterator() {
  absl::MutexLock control(&control_mu_);
  Stop();
}

void PrefetchingIterator::Start() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = false;
  }
  producer_ = std::thread([this] { Produce(); });
}

void PrefetchingIterator::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (producer_.joinable()) producer_.join();
}

void PrefetchingIterator::Produce() {
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      auto room_or_stop = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
        return stop_ || static_cast<int>(queue_.size()) < capacity_;
      };
      mu_.Await(absl::Condition(&room_or_stop));
      if (stop_) return;
    }
    absl::StatusOr<Batch> batch = inner_->Next();  // Built outside the lock.
    const bool last = !batch.ok();
    absl::MutexLock lock(&mu_);
    // Queued even when stopping: the inner iterator has moved past it, and a
    // SetOrder that fails restarts from here (one that succeeds clears it).
    queue_.push_back(std::move(batch));
    if (last || stop_) return;  // An error stays queued for every later Next().
  }
}

absl::StatusOr<Batch> PrefetchingIterator::Next() {
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !queue_.empty(); };
  if (!mu_.AwaitWithTimeout(absl::Condition(&ready), next_timeout_)) {
    return absl::DeadlineExceededError(absl::StrCat("[PrefetchingIterator] no batch within ",
                                                    absl::FormatDuration(next_timeout_)));
  }
  if (!queue_.front().ok()) return queue_.front().status();
  absl::StatusOr<Batch> batch = std::move(queue_.front());
  queue_.pop_front();
  last_epoch_ = batch->epoch;
  returned_ = batch->step + 1;
  return batch;
}

absl::Status PrefetchingIterator::SetOrder(std::vector<int64_t> order) {
  absl::MutexLock control(&control_mu_);
  Stop();
  absl::Status s = inner_->SetOrder(std::move(order));
  if (s.ok()) {
    absl::MutexLock lock(&mu_);
    queue_.clear();
    inner_->Rewind(last_epoch_, returned_);
  }
  Start();
  return s;
}

}  // namespace dflow
