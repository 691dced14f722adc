// Queues and accumulators: FIFOQueueV2, RandomShuffleQueueV2, PaddingFIFOQueueV2
// and Queue{Enqueue,EnqueueMany,Dequeue,DequeueMany,DequeueUpTo,Size,IsClosed,
// Close}V2; ConditionalAccumulator and Accumulator{Apply,Take}
// Gradient, AccumulatorNumAccumulated, AccumulatorSetGlobalStep, with their
// resource-handle twins (Resource*), which TensorFlow 2's tf.compat.v1 emits.
//
// Op definitions are TensorFlow's (checked against its op_def_registry in
// data_flow_ops_test.cc). Where TensorFlow creates a queue or accumulator
// private to its kernel when shared_name is empty, dflow names it after the
// node (as VariableV2 does), so that every executor of a session sees it.
// Unlike TensorFlow's, such a queue also outlives its session: a later session
// on the same server running a node of that name finds it (closed, perhaps).
// timeout_ms is accepted and, as in TensorFlow ("not supported yet"), ignored:
// waits end at the step's deadline.
#include "dflow/ops/data_flow_ops.h"

#include <algorithm>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/resource_handle.h"
#include "dflow/ops/eigen_util.h"
#include "dflow/ops/resource_lookup.h"

namespace dflow {
namespace {

// Calls fn(TypeTag<T>{}) for every dtype a queue can hold.
template <typename Fn>
absl::Status SwitchQueueable(DataType dtype, Fn&& fn) {
  if (dtype == DT_RESOURCE) return fn(TypeTag<ResourceHandle>{});
  return SwitchAll(dtype, "FIFOQueue", std::forward<Fn>(fn));
}

// Copies `count` elements of `src` from `src_at` into `dst` at `dst_at`.
// REQUIRES: same dtype, both ranges inside their tensors.
absl::Status CopyElements(const Tensor& src, int64_t src_at, int64_t count, Tensor* dst,
                          int64_t dst_at) {
  return SwitchQueueable(src.dtype(), [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    auto in = src.flat<T>();
    std::copy(in.begin() + src_at, in.begin() + src_at + count, dst->flat<T>().begin() + dst_at);
    return absl::OkStatus();
  });
}

// Row `i` of `batch` (its dimension 0 removed).
absl::StatusOr<Tensor> Row(const Tensor& batch, int64_t i) {
  TensorShape shape = batch.shape();
  shape.RemoveDim(0);
  Tensor row(batch.dtype(), shape);
  const int64_t n = shape.num_elements();
  RETURN_IF_ERROR(CopyElements(batch, i * n, n, &row, 0));
  return row;
}

std::string ShapesString(const std::vector<TensorShape>& shapes) {
  return absl::StrCat(
      "[",
      absl::StrJoin(shapes, ", ",
                    [](std::string* out, const TensorShape& s) { out->append(s.DebugString()); }),
      "]");
}

}  // namespace

// Copies `src` (shape `from`) into the row-major block of shape `to` (each
// dimension at least as large) that starts at element `dst_at` of `dst`,
// leaving the padding as it is. REQUIRES: same rank and dtype.
absl::Status CopyPadded(const Tensor& src, const TensorShape& to, Tensor* dst, int64_t dst_at) {
  const TensorShape& from = src.shape();
  if (from == to) return CopyElements(src, 0, src.NumElements(), dst, dst_at);
  return SwitchQueueable(src.dtype(), [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    auto in = src.flat<T>();
    auto out = dst->flat<T>();
    const int rank = from.dims();
    std::vector<int64_t> index(rank, 0);
    for (int64_t i = 0; i < src.NumElements(); ++i) {
      int64_t at = 0;
      for (int d = 0; d < rank; ++d) at = at * to.dim_size(d) + index[d];
      out[dst_at + at] = in[i];
      for (int d = rank - 1; d >= 0; --d) {  // Next index, row-major.
        if (++index[d] < from.dim_size(d)) break;
        index[d] = 0;
      }
    }
    return absl::OkStatus();
  });
}

// --- Queue ----------------------------------------------------------------------------

struct Queue::Attempt : WaitEntry {
  enum Kind { kEnqueue, kClose, kDequeue };
  Kind kind = kEnqueue;
  std::deque<Tuple> rows;  // kEnqueue: rows still to add
  int64_t requested = 0;   // kDequeue: elements wanted
  bool batched = false;    // kDequeue: DequeueMany, whose output is stacked
  bool up_to = false;      // kDequeue: DequeueUpTo, content with fewer once closed
  std::vector<Tuple> taken;
  absl::Status status;  // the result, once complete
  DoneCallback done;
};

Queue::Queue(std::string name, std::vector<DataType> types, std::vector<TensorShape> shapes,
             int64_t capacity, QueueOptions options)
    : name_(std::move(name)),
      types_(std::move(types)),
      shapes_(std::move(shapes)),
      capacity_(capacity),
      options_(std::move(options)),
      generator_(0, 0),
      enqueues_(&mu_),
      dequeues_(&mu_) {
  uint64_t seed = static_cast<uint64_t>(options_.seed);
  uint64_t seed2 = static_cast<uint64_t>(options_.seed2);
  if (seed == 0 && seed2 == 0) {
    absl::BitGen bits;
    seed = absl::Uniform<uint64_t>(bits);
    seed2 = absl::Uniform<uint64_t>(bits);
  }
  generator_ = Philox4x32(seed, seed2);
}

const char* Queue::kind_name() const {
  switch (options_.kind) {
    case QueueOptions::Kind::kRandomShuffle:
      return "RandomShuffleQueue";
    case QueueOptions::Kind::kPaddingFIFO:
      return "PaddingFIFOQueue";
    default:
      return "FIFOQueue";
  }
}

Queue::~Queue() {
  absl::MutexLock l(&mu_);  // For the annotations; no one else can hold it now.
  for (auto* list : {&enqueues_, &dequeues_}) {
    for (std::unique_ptr<Attempt>& a : list->TakeAll()) {
      a->done(absl::CancelledError(absl::StrCat(kind_name(), " '", name_, "' was destroyed")), {});
    }
  }
}

absl::Status Queue::MatchesAttrs(const std::vector<DataType>& types,
                                 const std::vector<TensorShape>& shapes, int64_t capacity,
                                 const QueueOptions& options) const {
  if (options.kind != options_.kind) {
    return absl::InvalidArgumentError(
        absl::StrCat("Shared queue '", name_, "' is a ", kind_name(), ", not the queue requested"));
  }
  if (options.min_after_dequeue != options_.min_after_dequeue) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Shared queue '", name_, "' has min_after_dequeue ", options_.min_after_dequeue,
        " but requested min_after_dequeue was ", options.min_after_dequeue));
  }
  if (!(options.padded_shapes == options_.padded_shapes)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Shared queue '", name_, "' has other component shapes than requested"));
  }
  if (types != types_) {
    return absl::InvalidArgumentError(
        absl::StrCat("Shared queue '", name_, "' has component types ", DataTypeListString(types_),
                     " but requested component types were ", DataTypeListString(types)));
  }
  if (shapes != shapes_) {
    return absl::InvalidArgumentError(
        absl::StrCat("Shared queue '", name_, "' has component shapes ", ShapesString(shapes_),
                     " but requested component shapes were ", ShapesString(shapes)));
  }
  if ((capacity < 0 ? -1 : capacity) != (capacity_ < 0 ? -1 : capacity_)) {
    return absl::InvalidArgumentError(absl::StrCat("Shared queue '", name_, "' has capacity ",
                                                   capacity_, " but requested capacity was ",
                                                   capacity));
  }
  return absl::OkStatus();
}

absl::Status Queue::CheckTuple(const Tuple& tuple, bool batched) const {
  if (tuple.size() != types_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("Wrong number of components in tuple. Expected ",
                                                   types_.size(), ", got ", tuple.size()));
  }
  for (size_t i = 0; i < tuple.size(); ++i) {
    if (tuple[i].dtype() != types_[i]) {
      return absl::InvalidArgumentError(absl::StrCat("Type mismatch in tuple component ", i,
                                                     ". Expected ", DataTypeString(types_[i]),
                                                     ", got ", DataTypeString(tuple[i].dtype())));
    }
    if (batched && tuple[i].dims() == 0) {
      return absl::InvalidArgumentError(absl::StrCat("EnqueueMany: tuple component ", i,
                                                     " is a scalar; it needs a batch dimension"));
    }
  }
  for (size_t i = 0; i < tuple.size(); ++i) {
    const int64_t batch = batched ? tuple[0].dim_size(0) : 0;
    if (!options_.padded_shapes.empty()) {
      TensorShape row = tuple[i].shape();
      if (batched) row.RemoveDim(0);
      if (batched && tuple[i].dim_size(0) != batch) {
        return absl::InvalidArgumentError(absl::StrCat(
            "All input tensors must have the same size in the 0th dimension. Component ", i,
            " has ", tuple[i].dim_size(0), ", and should have ", batch));
      }
      if (!options_.padded_shapes[i].IsCompatibleWith(row)) {
        return absl::InvalidArgumentError(
            absl::StrCat("Shape mismatch in tuple component ", i, ". Expected ",
                         options_.padded_shapes[i].DebugString(), ", got ", row.DebugString()));
      }
    } else if (!shapes_.empty()) {
      TensorShape expected = shapes_[i];
      if (batched) expected.InsertDim(0, batch);
      if (tuple[i].shape() != expected) {
        return absl::InvalidArgumentError(absl::StrCat("Shape mismatch in tuple component ", i,
                                                       ". Expected ", expected.DebugString(),
                                                       ", got ", tuple[i].shape().DebugString()));
      }
    } else if (batched && tuple[i].dim_size(0) != batch) {
      return absl::InvalidArgumentError(
          absl::StrCat("All input tensors must have the same size in the 0th dimension. Component ",
                       i, " has ", tuple[i].dim_size(0), ", and should have ", batch));
    }
  }
  return absl::OkStatus();
}

void Queue::Enqueue(Tuple tuple, const Waiter& waiter, DoneCallback done) {
  if (absl::Status s = CheckTuple(tuple, /*batched=*/false); !s.ok()) {
    done(s, {});
    return;
  }
  auto a = std::make_unique<Attempt>();
  a->kind = Attempt::kEnqueue;
  a->rows.push_back(std::move(tuple));
  a->done = std::move(done);
  Submit(std::move(a), &enqueues_, waiter);
}

void Queue::EnqueueMany(Tuple batch, const Waiter& waiter, DoneCallback done) {
  if (absl::Status s = CheckTuple(batch, /*batched=*/true); !s.ok()) {
    done(s, {});
    return;
  }
  auto a = std::make_unique<Attempt>();
  a->kind = Attempt::kEnqueue;
  for (int64_t i = 0; i < batch[0].dim_size(0); ++i) {
    Tuple row;
    for (const Tensor& component : batch) {
      absl::StatusOr<Tensor> r = Row(component, i);
      if (!r.ok()) {
        done(r.status(), {});
        return;
      }
      row.push_back(*std::move(r));
    }
    a->rows.push_back(std::move(row));
  }
  if (a->rows.empty()) {  // As TensorFlow: an empty batch succeeds, closed or not.
    done(absl::OkStatus(), {});
    return;
  }
  a->done = std::move(done);
  Submit(std::move(a), &enqueues_, waiter);
}

void Queue::Dequeue(const Waiter& waiter, DoneCallback done) {
  auto a = std::make_unique<Attempt>();
  a->kind = Attempt::kDequeue;
  a->requested = 1;
  a->done = std::move(done);
  Submit(std::move(a), &dequeues_, waiter);
}

void Queue::DequeueMany(int64_t n, bool up_to, const Waiter& waiter, DoneCallback done) {
  if (n < 0) {
    done(absl::InvalidArgumentError(absl::StrCat("DequeueMany requested ", n, " < 0 elements")),
         {});
    return;
  }
  if (shapes_.empty() && options_.padded_shapes.empty()) {
    done(absl::InvalidArgumentError(
             absl::StrCat(kind_name(), " '", name_, "': ", up_to ? "DequeueUpTo" : "DequeueMany",
                          " requires the components to have specified shapes")),
         {});
    return;
  }
  auto a = std::make_unique<Attempt>();
  a->kind = Attempt::kDequeue;
  a->requested = n;
  a->batched = true;
  a->up_to = up_to;
  a->done = std::move(done);
  Submit(std::move(a), &dequeues_, waiter);
}

void Queue::Close(bool cancel_pending_enqueues, const Waiter& waiter, DoneCallback done) {
  if (!cancel_pending_enqueues) {
    // Queued behind the waiting enqueues, which still complete first.
    auto a = std::make_unique<Attempt>();
    a->kind = Attempt::kClose;
    a->done = std::move(done);
    Submit(std::move(a), &enqueues_, waiter);
    return;
  }
  std::vector<std::unique_ptr<Attempt>> finished;
  {
    absl::MutexLock l(&mu_);
    closed_ = true;
    for (std::unique_ptr<Attempt>& a : enqueues_.TakeAll()) {
      a->status = absl::CancelledError("Enqueue operation was cancelled");
      finished.push_back(std::move(a));
    }
    for (std::unique_ptr<Attempt>& a : RunLocked()) finished.push_back(std::move(a));
  }
  for (std::unique_ptr<Attempt>& a : finished) Finish(std::move(a));
  done(absl::OkStatus(), {});
}

int64_t Queue::Size() const {
  absl::MutexLock l(&mu_);
  return static_cast<int64_t>(elements_.size());
}

bool Queue::IsClosed() const {
  absl::MutexLock l(&mu_);
  return closed_;
}

std::string Queue::DebugString() const {
  absl::MutexLock l(&mu_);
  return absl::StrCat(kind_name(), "<'", name_, "', ", DataTypeListString(types_), ", size ",
                      elements_.size(), capacity_ >= 0 ? absl::StrCat("/", capacity_) : "",
                      closed_ ? ", closed" : "", ">");
}

void Queue::Submit(std::unique_ptr<Attempt> attempt, WaitList<Attempt>* list,
                   const Waiter& waiter) {
  std::vector<std::unique_ptr<Attempt>> finished;
  int64_t id;
  {
    absl::MutexLock l(&mu_);
    id = list->Add(std::move(attempt), waiter);
    finished = RunLocked();
  }
  for (std::unique_ptr<Attempt>& a : finished) Finish(std::move(a));
  if (waiter.cm == nullptr) return;
  list->Arm(id, waiter.cm, [self = shared_from_this(), list, id] { self->Abort(list, id); });
}

void Queue::Abort(WaitList<Attempt>* list, int64_t id) {
  std::unique_ptr<Attempt> aborted;
  std::vector<std::unique_ptr<Attempt>> finished;
  {
    absl::MutexLock l(&mu_);
    aborted = list->Remove(id);
    if (aborted == nullptr) return;  // Already finished.
    ReturnLocked(aborted.get());
    finished = RunLocked();  // Its leaving may unblock the next ones.
  }
  static constexpr const char* kNames[] = {"Enqueue", "Close", "Dequeue"};
  const char* what = kNames[aborted->kind];
  aborted->status =
      WaitEnded(aborted->waiter, absl::StrCat(what, " on ", kind_name(), " '", name_, "'"),
                absl::StrCat(what, " operation was cancelled"));
  Finish(std::move(aborted));
  for (std::unique_ptr<Attempt>& a : finished) Finish(std::move(a));
}

std::vector<std::unique_ptr<Queue::Attempt>> Queue::RunLocked() {
  std::vector<std::unique_ptr<Attempt>> finished;
  bool progress = true;
  while (progress) {
    progress = false;
    for (auto* list : {&enqueues_, &dequeues_}) {
      while (!list->empty()) {
        Attempt* a = list->front();
        const Progress p = a->kind == Attempt::kDequeue ? RunDequeueLocked(a) : RunEnqueueLocked(a);
        if (p == Progress::kNone) break;
        progress = true;
        if (p == Progress::kSome) break;
        finished.push_back(list->PopFront());
      }
    }
  }
  return finished;
}

Queue::Progress Queue::RunEnqueueLocked(Attempt* a) {
  if (a->kind == Attempt::kClose) {
    if (closed_) {
      a->status = absl::CancelledError(absl::StrCat("Queue '", name_, "' is already closed."));
    }
    closed_ = true;
    return Progress::kComplete;
  }
  if (closed_) {
    a->status = absl::CancelledError(absl::StrCat(kind_name(), " '", name_, "' is closed."));
    return Progress::kComplete;
  }
  Progress p = Progress::kNone;
  while (!a->rows.empty()) {
    if (capacity_ >= 0 && static_cast<int64_t>(elements_.size()) >= capacity_) return p;
    elements_.push_back(std::move(a->rows.front()));
    a->rows.pop_front();
    p = Progress::kSome;
  }
  return Progress::kComplete;
}

Queue::Progress Queue::RunDequeueLocked(Attempt* a) {
  if (closed_ && static_cast<int64_t>(a->taken.size() + elements_.size()) < a->requested) {
    // Too few will ever come. As TensorFlow does, what this dequeue took goes
    // back first; DequeueUpTo then takes all that is left.
    ReturnLocked(a);
    if (!a->up_to || elements_.empty()) {
      a->status = absl::OutOfRangeError(absl::StrCat(
          kind_name(), " '", name_, "' is closed and has insufficient elements (requested ",
          a->requested, ", current size ", elements_.size(), ")"));
      return Progress::kComplete;
    }
    a->requested = static_cast<int64_t>(elements_.size());
  }
  Progress p = Progress::kNone;
  while (static_cast<int64_t>(a->taken.size()) < a->requested && CanTakeLocked()) {
    a->taken.push_back(TakeLocked());
    p = Progress::kSome;
  }
  if (static_cast<int64_t>(a->taken.size()) == a->requested) return Progress::kComplete;
  return p;
}

bool Queue::CanTakeLocked() const {
  if (elements_.empty()) return false;
  if (options_.kind != QueueOptions::Kind::kRandomShuffle || closed_) return true;
  return static_cast<int64_t>(elements_.size()) > options_.min_after_dequeue;
}

Queue::Tuple Queue::TakeLocked() {
  if (options_.kind == QueueOptions::Kind::kRandomShuffle) {
    // TensorFlow's choice: the next 32-bit word of the queue's Philox stream
    // modulo the size; the last element takes the chosen one's place.
    const size_t pick = words_() % elements_.size();
    std::swap(elements_[pick], elements_.back());
    Tuple t = std::move(elements_.back());
    elements_.pop_back();
    return t;
  }
  Tuple t = std::move(elements_.front());
  elements_.pop_front();
  return t;
}

void Queue::ReturnLocked(Attempt* a) {
  if (options_.kind == QueueOptions::Kind::kRandomShuffle) {
    // Appended last taken first, as TensorFlow's shuffling queue does.
    for (auto t = a->taken.rbegin(); t != a->taken.rend(); ++t) elements_.push_back(std::move(*t));
  } else {
    // Back to the front, in order, as if never taken.
    for (auto t = a->taken.rbegin(); t != a->taken.rend(); ++t) elements_.push_front(std::move(*t));
  }
  a->taken.clear();
}

absl::StatusOr<Queue::Tuple> Queue::Batch(const std::vector<Tuple>& rows) const {
  const int64_t n = static_cast<int64_t>(rows.size());
  Tuple out;
  for (size_t c = 0; c < types_.size(); ++c) {
    TensorShape shape;
    if (options_.padded_shapes.empty()) {
      shape = shapes_[c];
    } else {  // Each unknown dimension as long as its longest row's.
      const PartialShape& padded = options_.padded_shapes[c];
      std::vector<int64_t> dims(padded.dims());
      for (int d = 0; d < padded.rank(); ++d) {
        if (dims[d] >= 0) continue;
        dims[d] = 0;
        for (const Tuple& row : rows) dims[d] = std::max(dims[d], row[c].dim_size(d));
      }
      shape = TensorShape(dims);
    }
    const int64_t row_elements = shape.num_elements();
    TensorShape batch_shape = shape;
    batch_shape.InsertDim(0, n);
    Tensor batch(types_[c], batch_shape);
    for (int64_t i = 0; i < n; ++i) {
      RETURN_IF_ERROR(CopyPadded(rows[i][c], shape, &batch, i * row_elements));
    }
    out.push_back(std::move(batch));
  }
  return out;
}

void Queue::Finish(std::unique_ptr<Attempt> a) const {
  a->Disarm();
  Tuple out;
  absl::Status status = a->status;
  if (status.ok() && a->kind == Attempt::kDequeue && !a->batched) {
    out = std::move(a->taken[0]);
  } else if (status.ok() && a->kind == Attempt::kDequeue) {
    absl::StatusOr<Tuple> batch = Batch(a->taken);
    if (batch.ok()) {
      out = *std::move(batch);
    } else {
      status = batch.status();
    }
  }
  a->done(status, std::move(out));
}

// --- ConditionalAccumulator ----------------------------------------------------------

struct ConditionalAccumulator::Take : WaitEntry {
  int64_t required = 0;
  TakeCallback done;
};

namespace {

// Calls fn(TypeTag<T>{}) for the dtypes an accumulator sums.
template <typename Fn>
absl::Status SwitchSummable(DataType dtype, Fn&& fn) {
  switch (dtype) {
    case DT_FLOAT:
      return fn(TypeTag<float>{});
    case DT_DOUBLE:
      return fn(TypeTag<double>{});
    case DT_INT32:
      return fn(TypeTag<int32_t>{});
    case DT_INT64:
      return fn(TypeTag<int64_t>{});
    case DT_UINT8:
      return fn(TypeTag<uint8_t>{});
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("ConditionalAccumulator: unsupported dtype ", DataTypeString(dtype)));
  }
}

}  // namespace

ConditionalAccumulator::ConditionalAccumulator(std::string name, DataType dtype, PartialShape shape,
                                               bool mean)
    : name_(std::move(name)),
      dtype_(dtype),
      shape_(std::move(shape)),
      mean_(mean),
      takes_(&mu_) {}

ConditionalAccumulator::~ConditionalAccumulator() {
  absl::MutexLock l(&mu_);
  for (std::unique_ptr<Take>& take : takes_.TakeAll()) {
    take->done(
        absl::CancelledError(absl::StrCat("ConditionalAccumulator '", name_, "' was destroyed")),
        Tensor());
  }
}

absl::Status ConditionalAccumulator::MatchesAttrs(DataType dtype, const PartialShape& shape,
                                                  bool mean) const {
  if (dtype != dtype_ || !(shape == shape_) || mean != mean_) {
    return absl::InvalidArgumentError(
        absl::StrCat("Shared accumulator '", name_, "' has dtype ", DataTypeString(dtype_),
                     ", shape ", shape_.DebugString(), ", reduction ", mean_ ? "MEAN" : "SUM",
                     " but requested dtype ", DataTypeString(dtype), ", shape ",
                     shape.DebugString(), ", reduction ", mean ? "MEAN" : "SUM"));
  }
  return absl::OkStatus();
}

absl::Status ConditionalAccumulator::ApplyGradient(int64_t local_step, const Tensor& grad) {
  if (grad.dtype() != dtype_) {
    return absl::InvalidArgumentError(
        absl::StrCat("ConditionalAccumulator '", name_, "' accumulates ", DataTypeString(dtype_),
                     " gradients, got a gradient of ", DataTypeString(grad.dtype())));
  }
  std::vector<std::pair<std::unique_ptr<Take>, Tensor>> finished;
  {
    absl::MutexLock l(&mu_);
    if (local_step < global_step_) {  // Stale: computed before the last take.
      ++dropped_stale_;
      return absl::OkStatus();
    }
    const bool differs_from_sum = counter_ > 0 && sum_.shape() != grad.shape();
    if (differs_from_sum || !shape_.IsCompatibleWith(grad.shape())) {
      return absl::InvalidArgumentError(
          absl::StrCat("ConditionalAccumulator '", name_, "': Shape mismatch: expected ",
                       differs_from_sum ? sum_.shape().DebugString() : shape_.DebugString(),
                       ", got ", grad.shape().DebugString()));
    }
    if (counter_ == 0) {
      sum_ = grad.DeepCopy();
    } else {
      RETURN_IF_ERROR(SwitchSummable(dtype_, [&](auto tag) -> absl::Status {
        using T = typename decltype(tag)::type;
        EigenFlat<T>(sum_) += EigenFlat<T>(grad);  // Eigen's packets: GCC's -O2 left this scalar.
        return absl::OkStatus();
      }));
    }
    ++counter_;
    finished = RunLocked();
  }
  Finish(std::move(finished));
  return absl::OkStatus();
}

void ConditionalAccumulator::TakeGradient(int64_t num_required, const Waiter& waiter,
                                          TakeCallback done) {
  if (num_required < 1) {
    done(absl::InvalidArgumentError(
             absl::StrCat("Argument num_required must be positive, but was ", num_required)),
         Tensor());
    return;
  }
  auto take = std::make_unique<Take>();
  take->required = num_required;
  take->done = std::move(done);
  std::vector<std::pair<std::unique_ptr<Take>, Tensor>> finished;
  int64_t id;
  {
    absl::MutexLock l(&mu_);
    id = takes_.Add(std::move(take), waiter);
    finished = RunLocked();
  }
  Finish(std::move(finished));
  if (waiter.cm == nullptr) return;
  takes_.Arm(id, waiter.cm, [self = shared_from_this(), id] { self->Abort(id); });
}

void ConditionalAccumulator::Abort(int64_t id) {
  std::unique_ptr<Take> take;
  int64_t have = 0;
  std::vector<std::pair<std::unique_ptr<Take>, Tensor>> finished;
  {
    absl::MutexLock l(&mu_);
    take = takes_.Remove(id);
    if (take == nullptr) return;  // Already finished.
    have = counter_;
    finished = RunLocked();  // A later take may need fewer gradients.
  }
  const absl::Status s = WaitEnded(take->waiter,
                                   absl::StrCat("TakeGradient on ConditionalAccumulator '", name_,
                                                "' (", have, " of ", take->required, " gradients)"),
                                   "TakeGrad operation was cancelled");
  take->Disarm();
  take->done(s, Tensor());
  Finish(std::move(finished));
}

std::vector<std::pair<std::unique_ptr<ConditionalAccumulator::Take>, Tensor>>
ConditionalAccumulator::RunLocked() {
  std::vector<std::pair<std::unique_ptr<Take>, Tensor>> finished;
  while (!takes_.empty() && counter_ >= takes_.front()->required) {
    // Shares sum_'s buffer, which no one writes again: the next apply
    // replaces sum_ with a copy of its gradient (counter_ is 0).
    Tensor result = sum_;
    if (mean_) {
      const int64_t n = counter_;
      SwitchSummable(dtype_, [&](auto tag) -> absl::Status {
        using T = typename decltype(tag)::type;
        auto v = EigenFlat<T>(result);
        v = v / v.constant(static_cast<T>(n));  // A division, as TensorFlow's: not a reciprocal.
        return absl::OkStatus();
      }).IgnoreError();  // dtype_ was checked on every apply.
    }
    counter_ = 0;
    ++global_step_;
    finished.emplace_back(takes_.PopFront(), std::move(result));
  }
  return finished;
}

void ConditionalAccumulator::Finish(std::vector<std::pair<std::unique_ptr<Take>, Tensor>> done) {
  for (auto& [take, value] : done) {
    take->Disarm();
    take->done(absl::OkStatus(), std::move(value));
  }
}

void ConditionalAccumulator::SetGlobalStep(int64_t step) {
  absl::MutexLock l(&mu_);
  global_step_ = step;  // TensorFlow allows going back, with a warning.
}

int64_t ConditionalAccumulator::num_accumulated() const {
  absl::MutexLock l(&mu_);
  return counter_;
}

int64_t ConditionalAccumulator::global_step() const {
  absl::MutexLock l(&mu_);
  return global_step_;
}

int64_t ConditionalAccumulator::num_dropped_stale() const {
  absl::MutexLock l(&mu_);
  return dropped_stale_;
}

std::string ConditionalAccumulator::DebugString() const {
  absl::MutexLock l(&mu_);
  return absl::StrCat("ConditionalAccumulator<'", name_, "', ", DataTypeString(dtype_), ", ",
                      shape_.DebugString(), ", ", counter_, " accumulated, step ", global_step_,
                      ", ", dropped_stale_, " stale dropped>");
}

// --- kernels ------------------------------------------------------------------------

namespace {

Waiter WaiterOf(const OpKernelContext& ctx) {
  return Waiter{ctx.cancellation_manager(), ctx.deadline()};
}

// The accumulator named by input 0: a resource handle, or TensorFlow 1.x's
// Ref(string) handle holding [container, name].
absl::StatusOr<std::shared_ptr<ConditionalAccumulator>> AccumulatorFromInput(
    const OpKernelContext& ctx) {
  if (ctx.input_dtype(0) == DT_RESOURCE) return LookupFromHandle<ConditionalAccumulator>(ctx, 0);
  Tensor handle;
  if (ctx.input_is_ref(0)) {
    absl::ReaderMutexLock l(ctx.input_ref_mutex(0));
    handle = ctx.input(0);
  } else {
    handle = ctx.input(0);
  }
  if (handle.dtype() != DT_STRING || handle.NumElements() != 2) {
    return ctx.InvalidArgument("the accumulator handle must be a string tensor of 2 elements, got ",
                               handle.DebugString());
  }
  auto names = handle.flat<std::string>();
  absl::StatusOr<std::shared_ptr<ConditionalAccumulator>> r =
      ctx.resource_manager()->Lookup<ConditionalAccumulator>(ContainerOr(ctx, names[0]), names[1]);
  if (!r.ok()) return WithPrefix(r.status(), ctx.Prefix());
  return r;
}

absl::StatusOr<int64_t> ScalarInput(const OpKernelContext& ctx, int i, const char* what) {
  const Tensor& t = ctx.input(i);
  if (t.NumElements() != 1 || t.dims() != 0) {
    return ctx.InvalidArgument(what, " must be a scalar, got shape ", t.shape().DebugString());
  }
  return t.dtype() == DT_INT32 ? t.scalar<int32_t>() : t.scalar<int64_t>();
}

// --- queue kernels ---

// FIFOQueueV2, RandomShuffleQueueV2 and PaddingFIFOQueueV2: creates (or
// finds) the queue its attrs describe.
class QueueOp : public OpKernel {
 public:
  explicit QueueOp(OpKernelConstruction* c) : OpKernel(c) {
    const std::string& op = c->def().op();
    if (op == "RandomShuffleQueueV2") options_.kind = QueueOptions::Kind::kRandomShuffle;
    if (op == "PaddingFIFOQueueV2") options_.kind = QueueOptions::Kind::kPaddingFIFO;
    c->GetAttr("component_types", &types_).IgnoreError();
    c->GetAttr("capacity", &capacity_).IgnoreError();
    c->GetAttr("container", &container_).IgnoreError();
    c->GetAttr("shared_name", &name_).IgnoreError();
    if (c->HasAttr("min_after_dequeue")) {
      c->GetAttr("min_after_dequeue", &options_.min_after_dequeue).IgnoreError();
      c->GetAttr("seed", &options_.seed).IgnoreError();
      c->GetAttr("seed2", &options_.seed2).IgnoreError();
    }
    if (name_.empty()) name_ = c->def().name();
    const std::string prefix = absl::StrCat("[", op, " '", c->def().name(), "'] ");
    if (absl::Status s = ReadShapes(c); !s.ok()) c->SetStatus(WithPrefix(s, prefix));
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const std::string container = ContainerOr(*ctx, container_);
    RETURN_IF_ERROR(
        LookupOrCreateShared<Queue>(
            *ctx, container, name_,
            [&] { return std::make_shared<Queue>(name_, types_, shapes_, capacity_, options_); },
            [&](const Queue& q) { return q.MatchesAttrs(types_, shapes_, capacity_, options_); })
            .status());
    ctx->set_output(0, ResourceHandleTensor<Queue>(ctx->device()->name(), container, name_));
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }

 private:
  // Fully defined shapes, or (padding queue) shapes of known rank.
  absl::Status ReadShapes(OpKernelConstruction* c) {
    const bool padding = options_.kind == QueueOptions::Kind::kPaddingFIFO;
    auto it = c->def().attr().find("shapes");
    if (it != c->def().attr().end()) {
      for (const tensorflow::TensorShapeProto& p : it->second.list().shape()) {
        PartialShape shape = PartialShape::FromProto(p);
        if (padding) {
          if (!shape.rank_known()) {
            return absl::InvalidArgumentError("shapes must have a known rank for padding");
          }
          options_.padded_shapes.push_back(shape);
          continue;
        }
        absl::StatusOr<TensorShape> s = TensorShape::FromProto(p);
        if (!s.ok()) {
          return absl::InvalidArgumentError(
              absl::StrCat("shapes must be fully defined: ", s.status().message()));
        }
        shapes_.push_back(*s);
      }
    }
    const size_t given = padding ? options_.padded_shapes.size() : shapes_.size();
    if (padding && given != types_.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "shapes must give one shape per component (unknown dimensions allowed): ", given,
          " shapes for ", types_.size(), " component types"));
    }
    if (given != 0 && given != types_.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(given, " shapes given for ", types_.size(), " component types"));
    }
    return absl::OkStatus();
  }

  std::vector<DataType> types_;
  std::vector<TensorShape> shapes_;
  int64_t capacity_ = -1;
  QueueOptions options_;
  std::string container_;
  std::string name_;
};

// A queue operation finishing through `done`: sets the outputs it returns.
Queue::DoneCallback QueueDone(OpKernelContext* ctx, AsyncOpKernel::DoneCallback done) {
  return [ctx, done = std::move(done), prefix = ctx->Prefix()](absl::Status s, Queue::Tuple out) {
    if (!s.ok()) {
      done(WithPrefix(s, prefix));
      return;
    }
    for (size_t i = 0; i < out.size(); ++i) ctx->set_output(static_cast<int>(i), std::move(out[i]));
    done(absl::OkStatus());
  };
}

// Enqueue (many = false) and EnqueueMany.
template <bool kMany>
class QueueEnqueueOp : public AsyncOpKernel {
 public:
  using AsyncOpKernel::AsyncOpKernel;
  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    absl::StatusOr<std::shared_ptr<Queue>> q = LookupFromHandle<Queue>(*ctx, 0);
    if (!q.ok()) {
      done(q.status());
      return;
    }
    Queue::Tuple tuple;
    for (int i = 1; i < ctx->num_inputs(); ++i) tuple.push_back(ctx->input(i));
    if (kMany) {
      (*q)->EnqueueMany(std::move(tuple), WaiterOf(*ctx), QueueDone(ctx, std::move(done)));
    } else {
      (*q)->Enqueue(std::move(tuple), WaiterOf(*ctx), QueueDone(ctx, std::move(done)));
    }
  }
  bool IsExpensive() const override { return false; }
};

// Dequeue (many = false), DequeueMany and DequeueUpTo.
template <bool kMany>
class QueueDequeueOp : public AsyncOpKernel {
 public:
  explicit QueueDequeueOp(OpKernelConstruction* c)
      : AsyncOpKernel(c), up_to_(c->def().op() == "QueueDequeueUpToV2") {}
  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    absl::StatusOr<std::shared_ptr<Queue>> q = LookupFromHandle<Queue>(*ctx, 0);
    if (!q.ok()) {
      done(q.status());
      return;
    }
    if ((*q)->component_types() != output_types()) {
      done(ctx->InvalidArgument((*q)->kind_name(), " '", (*q)->name(), "' holds ",
                                DataTypeListString((*q)->component_types()),
                                ", but component_types asks for ",
                                DataTypeListString(output_types())));
      return;
    }
    if (!kMany) {
      (*q)->Dequeue(WaiterOf(*ctx), QueueDone(ctx, std::move(done)));
      return;
    }
    absl::StatusOr<int64_t> n = ScalarInput(*ctx, 1, "n");
    if (!n.ok()) {
      done(n.status());
      return;
    }
    (*q)->DequeueMany(*n, up_to_, WaiterOf(*ctx), QueueDone(ctx, std::move(done)));
  }
  bool IsExpensive() const override { return false; }

 private:
  const bool up_to_;
};

class QueueCloseOp : public AsyncOpKernel {
 public:
  explicit QueueCloseOp(OpKernelConstruction* c) : AsyncOpKernel(c) {
    c->GetAttr("cancel_pending_enqueues", &cancel_pending_enqueues_).IgnoreError();
  }
  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    absl::StatusOr<std::shared_ptr<Queue>> q = LookupFromHandle<Queue>(*ctx, 0);
    if (!q.ok()) {
      done(q.status());
      return;
    }
    (*q)->Close(cancel_pending_enqueues_, WaiterOf(*ctx), QueueDone(ctx, std::move(done)));
  }
  bool IsExpensive() const override { return false; }

 private:
  bool cancel_pending_enqueues_ = false;
};

class QueueSizeOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(std::shared_ptr<Queue> q, LookupFromHandle<Queue>(*ctx, 0));
    ctx->set_output(0, Tensor::Scalar<int32_t>(static_cast<int32_t>(q->Size())));
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }
};

class QueueIsClosedOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(std::shared_ptr<Queue> q, LookupFromHandle<Queue>(*ctx, 0));
    ctx->set_output(0, Tensor::Scalar<bool>(q->IsClosed()));
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }
};

// --- accumulator kernels ---

// Creates (or finds) the accumulator its attrs name, in both flavours: a
// Ref(string) handle [container, name] (kResource = false) or a resource one.
template <bool kResource>
class ConditionalAccumulatorOp : public OpKernel {
 public:
  explicit ConditionalAccumulatorOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("dtype", &dtype_).IgnoreError();
    c->GetAttr("container", &container_).IgnoreError();
    c->GetAttr("shared_name", &name_).IgnoreError();
    if (name_.empty()) name_ = c->def().name();
    tensorflow::TensorShapeProto shape;
    if (c->GetAttr("shape", &shape).ok()) shape_ = PartialShape::FromProto(shape);
    std::string reduction = "MEAN";
    if (c->HasAttr("reduction_type")) c->GetAttr("reduction_type", &reduction).IgnoreError();
    mean_ = reduction == "MEAN";
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const std::string container = ContainerOr(*ctx, container_);
    RETURN_IF_ERROR(
        LookupOrCreateShared<ConditionalAccumulator>(
            *ctx, container, name_,
            [&] { return std::make_shared<ConditionalAccumulator>(name_, dtype_, shape_, mean_); },
            [&](const ConditionalAccumulator& a) { return a.MatchesAttrs(dtype_, shape_, mean_); })
            .status());
    if constexpr (kResource) {
      ctx->set_output(
          0, ResourceHandleTensor<ConditionalAccumulator>(ctx->device()->name(), container, name_));
    } else {
      {
        absl::MutexLock l(&mu_);
        if (!handle_.IsInitialized() || handle_.NumElements() != 2) {
          handle_ = Tensor::Vec<std::string>({container, name_});
        }
      }
      ctx->set_output_ref(0, &mu_, &handle_);
    }
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }

 private:
  DataType dtype_ = DT_INVALID;
  PartialShape shape_;
  bool mean_ = true;
  std::string container_;
  std::string name_;
  absl::Mutex mu_;
  Tensor handle_;  // Guarded by mu_ (a ref output, read by consumers).
};

class AccumulatorApplyGradientOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(std::shared_ptr<ConditionalAccumulator> acc, AccumulatorFromInput(*ctx));
    ASSIGN_OR_RETURN(int64_t local_step, ScalarInput(*ctx, 1, "local_step"));
    absl::Status s = acc->ApplyGradient(local_step, ctx->input(2));
    return s.ok() ? s : WithPrefix(s, ctx->Prefix());
  }
  bool IsExpensive() const override { return false; }
};

class AccumulatorTakeGradientOp : public AsyncOpKernel {
 public:
  using AsyncOpKernel::AsyncOpKernel;
  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    absl::StatusOr<std::shared_ptr<ConditionalAccumulator>> acc = AccumulatorFromInput(*ctx);
    if (!acc.ok()) {
      done(acc.status());
      return;
    }
    if ((*acc)->dtype() != output_type(0)) {
      done(ctx->InvalidArgument("ConditionalAccumulator '", (*acc)->name(), "' accumulates ",
                                DataTypeString((*acc)->dtype()), " gradients, not ",
                                DataTypeString(output_type(0))));
      return;
    }
    absl::StatusOr<int64_t> n = ScalarInput(*ctx, 1, "num_required");
    if (!n.ok()) {
      done(n.status());
      return;
    }
    (*acc)->TakeGradient(
        *n, WaiterOf(*ctx),
        [ctx, done = std::move(done), prefix = ctx->Prefix()](absl::Status s, Tensor value) {
          if (!s.ok()) {
            done(WithPrefix(s, prefix));
            return;
          }
          ctx->set_output(0, std::move(value));
          done(absl::OkStatus());
        });
  }
  bool IsExpensive() const override { return false; }
};

class AccumulatorNumAccumulatedOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(std::shared_ptr<ConditionalAccumulator> acc, AccumulatorFromInput(*ctx));
    ctx->set_output(0, Tensor::Scalar<int32_t>(static_cast<int32_t>(acc->num_accumulated())));
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }
};

class AccumulatorSetGlobalStepOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    ASSIGN_OR_RETURN(std::shared_ptr<ConditionalAccumulator> acc, AccumulatorFromInput(*ctx));
    ASSIGN_OR_RETURN(int64_t step, ScalarInput(*ctx, 1, "new_global_step"));
    acc->SetGlobalStep(step);
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }
};

absl::Status HandlePairShape(InferenceContext* c) {
  c->set_output(0, PartialShape({2}));
  return absl::OkStatus();
}

// --- registration ---

REGISTER_OP("FIFOQueueV2")
    .Output("handle: resource")
    .Attr("component_types: list(type) >= 1")
    .Attr("shapes: list(shape) >= 0 = []")
    .Attr("capacity: int = -1")
    .Attr("container: string = ''")
    .Attr("shared_name: string = ''")
    .SetIsStateful()
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("FIFOQueueV2").Device(kDeviceCPU), QueueOp);

REGISTER_OP("RandomShuffleQueueV2")
    .Output("handle: resource")
    .Attr("component_types: list(type) >= 1")
    .Attr("shapes: list(shape) >= 0 = []")
    .Attr("capacity: int = -1")
    .Attr("min_after_dequeue: int = 0")
    .Attr("seed: int = 0")
    .Attr("seed2: int = 0")
    .Attr("container: string = ''")
    .Attr("shared_name: string = ''")
    .SetIsStateful()
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("RandomShuffleQueueV2").Device(kDeviceCPU), QueueOp);

REGISTER_OP("PaddingFIFOQueueV2")
    .Output("handle: resource")
    .Attr("component_types: list(type) >= 1")
    .Attr("shapes: list(shape) >= 0 = []")
    .Attr("capacity: int = -1")
    .Attr("container: string = ''")
    .Attr("shared_name: string = ''")
    .SetIsStateful()
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("PaddingFIFOQueueV2").Device(kDeviceCPU), QueueOp);

REGISTER_OP("QueueEnqueueV2")
    .Input("handle: resource")
    .Input("components: Tcomponents")
    .Attr("Tcomponents: list(type) >= 1")
    .Attr("timeout_ms: int = -1")
    .SetIsStateful()
    .SetShapeFn(NoOutputs);
REGISTER_KERNEL(KernelDefBuilder("QueueEnqueueV2").Device(kDeviceCPU), QueueEnqueueOp<false>);

REGISTER_OP("QueueEnqueueManyV2")
    .Input("handle: resource")
    .Input("components: Tcomponents")
    .Attr("Tcomponents: list(type) >= 1")
    .Attr("timeout_ms: int = -1")
    .SetIsStateful()
    .SetShapeFn(NoOutputs);
REGISTER_KERNEL(KernelDefBuilder("QueueEnqueueManyV2").Device(kDeviceCPU), QueueEnqueueOp<true>);

REGISTER_OP("QueueDequeueV2")
    .Input("handle: resource")
    .Output("components: component_types")
    .Attr("component_types: list(type) >= 1")
    .Attr("timeout_ms: int = -1")
    .SetIsStateful()
    .SetShapeFn(UnknownShape);
REGISTER_KERNEL(KernelDefBuilder("QueueDequeueV2").Device(kDeviceCPU), QueueDequeueOp<false>);

REGISTER_OP("QueueDequeueManyV2")
    .Input("handle: resource")
    .Input("n: int32")
    .Output("components: component_types")
    .Attr("component_types: list(type) >= 1")
    .Attr("timeout_ms: int = -1")
    .SetIsStateful()
    .SetShapeFn(UnknownShape);
REGISTER_KERNEL(KernelDefBuilder("QueueDequeueManyV2").Device(kDeviceCPU), QueueDequeueOp<true>);

REGISTER_OP("QueueDequeueUpToV2")
    .Input("handle: resource")
    .Input("n: int32")
    .Output("components: component_types")
    .Attr("component_types: list(type) >= 1")
    .Attr("timeout_ms: int = -1")
    .SetIsStateful()
    .SetShapeFn(UnknownShape);
REGISTER_KERNEL(KernelDefBuilder("QueueDequeueUpToV2").Device(kDeviceCPU), QueueDequeueOp<true>);

REGISTER_OP("QueueIsClosedV2")
    .Input("handle: resource")
    .Output("is_closed: bool")
    .SetIsStateful()
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("QueueIsClosedV2").Device(kDeviceCPU), QueueIsClosedOp);

REGISTER_OP("QueueSizeV2")
    .Input("handle: resource")
    .Output("size: int32")
    .SetIsStateful()
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("QueueSizeV2").Device(kDeviceCPU), QueueSizeOp);

REGISTER_OP("QueueCloseV2")
    .Input("handle: resource")
    .Attr("cancel_pending_enqueues: bool = false")
    .SetIsStateful()
    .SetShapeFn(NoOutputs);
REGISTER_KERNEL(KernelDefBuilder("QueueCloseV2").Device(kDeviceCPU), QueueCloseOp);

REGISTER_OP("ConditionalAccumulator")
    .Output("handle: Ref(string)")
    .Attr("dtype: numbertype")
    .Attr("shape: shape")
    .Attr("container: string = ''")
    .Attr("shared_name: string = ''")
    .Attr("reduction_type: {'MEAN', 'SUM'} = 'MEAN'")
    .SetIsStateful()
    .SetShapeFn(HandlePairShape);
REGISTER_KERNEL(KernelDefBuilder("ConditionalAccumulator").Device(kDeviceCPU),
                ConditionalAccumulatorOp<false>);

REGISTER_OP("ResourceConditionalAccumulator")
    .Output("handle: resource")
    .Attr("dtype: numbertype")
    .Attr("shape: shape")
    .Attr("container: string = ''")
    .Attr("shared_name: string = ''")
    .Attr("reduction_type: {'MEAN', 'SUM'} = 'MEAN'")
    .SetIsStateful()
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("ResourceConditionalAccumulator").Device(kDeviceCPU),
                ConditionalAccumulatorOp<true>);

// TensorFlow marks the Ref(string) flavour of these stateless, the resource one
// stateful.
REGISTER_OP("AccumulatorApplyGradient")
    .Input("handle: Ref(string)")
    .Input("local_step: int64")
    .Input("gradient: dtype")
    .Attr("dtype: numbertype")
    .SetShapeFn(NoOutputs);
REGISTER_KERNEL(KernelDefBuilder("AccumulatorApplyGradient").Device(kDeviceCPU),
                AccumulatorApplyGradientOp);

REGISTER_OP("AccumulatorTakeGradient")
    .Input("handle: Ref(string)")
    .Input("num_required: int32")
    .Output("average: dtype")
    .Attr("dtype: numbertype")
    .SetShapeFn(UnknownShape);
REGISTER_KERNEL(KernelDefBuilder("AccumulatorTakeGradient").Device(kDeviceCPU),
                AccumulatorTakeGradientOp);

REGISTER_OP("AccumulatorNumAccumulated")
    .Input("handle: Ref(string)")
    .Output("num_accumulated: int32")
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("AccumulatorNumAccumulated").Device(kDeviceCPU),
                AccumulatorNumAccumulatedOp);

REGISTER_OP("AccumulatorSetGlobalStep")
    .Input("handle: Ref(string)")
    .Input("new_global_step: int64")
    .SetShapeFn(NoOutputs);
REGISTER_KERNEL(KernelDefBuilder("AccumulatorSetGlobalStep").Device(kDeviceCPU),
                AccumulatorSetGlobalStepOp);

REGISTER_OP("ResourceAccumulatorApplyGradient")
    .Input("handle: resource")
    .Input("local_step: int64")
    .Input("gradient: dtype")
    .Attr("dtype: numbertype")
    .SetIsStateful()
    .SetShapeFn(NoOutputs);
REGISTER_KERNEL(KernelDefBuilder("ResourceAccumulatorApplyGradient").Device(kDeviceCPU),
                AccumulatorApplyGradientOp);

REGISTER_OP("ResourceAccumulatorTakeGradient")
    .Input("handle: resource")
    .Input("num_required: int32")
    .Output("average: dtype")
    .Attr("dtype: numbertype")
    .SetIsStateful()
    .SetShapeFn(UnknownShape);
REGISTER_KERNEL(KernelDefBuilder("ResourceAccumulatorTakeGradient").Device(kDeviceCPU),
                AccumulatorTakeGradientOp);

REGISTER_OP("ResourceAccumulatorNumAccumulated")
    .Input("handle: resource")
    .Output("num_accumulated: int32")
    .SetIsStateful()
    .SetShapeFn(ScalarShape);
REGISTER_KERNEL(KernelDefBuilder("ResourceAccumulatorNumAccumulated").Device(kDeviceCPU),
                AccumulatorNumAccumulatedOp);

REGISTER_OP("ResourceAccumulatorSetGlobalStep")
    .Input("handle: resource")
    .Input("new_global_step: int64")
    .SetIsStateful()
    .SetShapeFn(NoOutputs);
REGISTER_KERNEL(KernelDefBuilder("ResourceAccumulatorSetGlobalStep").Device(kDeviceCPU),
                AccumulatorSetGlobalStepOp);

}  // namespace
}  // namespace dflow
