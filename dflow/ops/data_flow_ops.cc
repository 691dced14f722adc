// Queues and accumulators: FIFOQueueV2 and Queue{Enqueue,EnqueueMany,Dequeue,
// DequeueMany,Size,Close}V2; ConditionalAccumulator and Accumulator{Apply,Take}
// Gradient, AccumulatorNumAccumulated, AccumulatorSetGlobalStep, with their
// resource-handle twins (Resource*), which TensorFlow 2's tf.compat.v1 emits.
//
// Op definitions are TensorFlow's (checked against its op_def_registry in
// data_flow_ops_test.cc). Where TensorFlow creates a queue or accumulator
// private to its kernel when shared_name is empty, dflow names it after the
// node (as VariableV2 does), so that every executor of a session sees it.
// timeout_ms is accepted and, as in TensorFlow ("not supported yet"), ignored:
// waits end at the step's deadline.
#include "dflow/ops/data_flow_ops.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/resource_handle.h"

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

absl::Status Prefixed(const std::string& prefix, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat(prefix, s.message()));
}

// The error of a wait ended by its step: DeadlineExceeded once past the
// deadline, Cancelled otherwise.
absl::Status WaitEnded(const Waiter& w, const std::string& what, const std::string& cancelled) {
  if (absl::Now() >= w.deadline) {
    return absl::DeadlineExceededError(
        absl::StrCat(what, " timed out: the step's deadline passed while it waited"));
  }
  return absl::CancelledError(cancelled);
}

}  // namespace

// --- FIFOQueue ------------------------------------------------------------------------

struct FIFOQueue::Attempt {
  enum Kind { kEnqueue, kClose, kDequeue };
  Kind kind = kEnqueue;
  int64_t id = 0;
  std::deque<Tuple> rows;  // kEnqueue: rows still to add
  int64_t requested = 0;   // kDequeue: elements wanted
  bool batched = false;    // kDequeue: DequeueMany, whose output is stacked
  std::vector<Tuple> taken;
  absl::Status status;  // the result, once complete
  Waiter waiter;
  CancellationToken token = kInvalidCancellationToken;
  DoneCallback done;
};

FIFOQueue::FIFOQueue(std::string name, std::vector<DataType> types, std::vector<TensorShape> shapes,
                     int64_t capacity)
    : name_(std::move(name)),
      types_(std::move(types)),
      shapes_(std::move(shapes)),
      capacity_(capacity) {}

FIFOQueue::~FIFOQueue() {
  absl::MutexLock l(&mu_);  // For the annotations; no one else can hold it now.
  for (auto* list : {&enqueues_, &dequeues_}) {
    for (std::unique_ptr<Attempt>& a : *list) {
      a->done(absl::CancelledError(absl::StrCat("FIFOQueue '", name_, "' was destroyed")), {});
    }
  }
}

absl::Status FIFOQueue::MatchesAttrs(const std::vector<DataType>& types,
                                     const std::vector<TensorShape>& shapes,
                                     int64_t capacity) const {
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

absl::Status FIFOQueue::CheckTuple(const Tuple& tuple, bool batched) const {
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
    if (!shapes_.empty()) {
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

void FIFOQueue::Enqueue(Tuple tuple, const Waiter& waiter, DoneCallback done) {
  if (absl::Status s = CheckTuple(tuple, /*batched=*/false); !s.ok()) {
    done(s, {});
    return;
  }
  auto a = std::make_unique<Attempt>();
  a->kind = Attempt::kEnqueue;
  a->rows.push_back(std::move(tuple));
  a->done = std::move(done);
  Submit(std::move(a), /*is_enqueue=*/true, waiter);
}

void FIFOQueue::EnqueueMany(Tuple batch, const Waiter& waiter, DoneCallback done) {
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
  Submit(std::move(a), /*is_enqueue=*/true, waiter);
}

void FIFOQueue::Dequeue(const Waiter& waiter, DoneCallback done) {
  auto a = std::make_unique<Attempt>();
  a->kind = Attempt::kDequeue;
  a->requested = 1;
  a->done = std::move(done);
  Submit(std::move(a), /*is_enqueue=*/false, waiter);
}

void FIFOQueue::DequeueMany(int64_t n, const Waiter& waiter, DoneCallback done) {
  if (n < 0) {
    done(absl::InvalidArgumentError(absl::StrCat("DequeueMany requested ", n, " < 0 elements")),
         {});
    return;
  }
  if (shapes_.empty()) {
    done(absl::InvalidArgumentError(
             absl::StrCat("FIFOQueue '", name_,
                          "': DequeueMany requires the components to have specified shapes")),
         {});
    return;
  }
  auto a = std::make_unique<Attempt>();
  a->kind = Attempt::kDequeue;
  a->requested = n;
  a->batched = true;
  a->done = std::move(done);
  Submit(std::move(a), /*is_enqueue=*/false, waiter);
}

void FIFOQueue::Close(bool cancel_pending_enqueues, const Waiter& waiter, DoneCallback done) {
  if (!cancel_pending_enqueues) {
    // Queued behind the waiting enqueues, which still complete first.
    auto a = std::make_unique<Attempt>();
    a->kind = Attempt::kClose;
    a->done = std::move(done);
    Submit(std::move(a), /*is_enqueue=*/true, waiter);
    return;
  }
  std::vector<std::unique_ptr<Attempt>> finished;
  {
    absl::MutexLock l(&mu_);
    closed_ = true;
    for (std::unique_ptr<Attempt>& a : enqueues_) {
      a->status = absl::CancelledError("Enqueue operation was cancelled");
      finished.push_back(std::move(a));
    }
    enqueues_.clear();
    for (std::unique_ptr<Attempt>& a : RunLocked()) finished.push_back(std::move(a));
  }
  for (std::unique_ptr<Attempt>& a : finished) Finish(std::move(a));
  done(absl::OkStatus(), {});
}

int64_t FIFOQueue::Size() const {
  absl::MutexLock l(&mu_);
  return static_cast<int64_t>(elements_.size());
}

bool FIFOQueue::IsClosed() const {
  absl::MutexLock l(&mu_);
  return closed_;
}

std::string FIFOQueue::DebugString() const {
  absl::MutexLock l(&mu_);
  return absl::StrCat("FIFOQueue<'", name_, "', ", DataTypeListString(types_), ", size ",
                      elements_.size(), capacity_ >= 0 ? absl::StrCat("/", capacity_) : "",
                      closed_ ? ", closed" : "", ">");
}

void FIFOQueue::Submit(std::unique_ptr<Attempt> attempt, bool is_enqueue, const Waiter& waiter) {
  attempt->waiter = waiter;
  std::vector<std::unique_ptr<Attempt>> finished;
  int64_t id;
  bool pending;
  {
    absl::MutexLock l(&mu_);
    id = attempt->id = next_id_++;
    (is_enqueue ? enqueues_ : dequeues_).push_back(std::move(attempt));
    finished = RunLocked();
    pending = FindLocked(id) != nullptr;
  }
  for (std::unique_ptr<Attempt>& a : finished) Finish(std::move(a));
  if (pending && waiter.cm != nullptr) Arm(id, waiter.cm);
}

void FIFOQueue::Arm(int64_t id, CancellationManager* cm) {
  std::shared_ptr<FIFOQueue> self = shared_from_this();
  const CancellationToken token = cm->Register([self, id] { self->Abort(id); });
  if (token == kInvalidCancellationToken) {  // The step is already cancelled.
    Abort(id);
    return;
  }
  bool pending;
  {
    absl::MutexLock l(&mu_);
    Attempt* a = FindLocked(id);
    pending = a != nullptr;
    if (pending) a->token = token;
  }
  if (!pending) cm->Deregister(token);  // It finished meanwhile.
}

void FIFOQueue::Abort(int64_t id) {
  std::unique_ptr<Attempt> aborted;
  std::vector<std::unique_ptr<Attempt>> finished;
  {
    absl::MutexLock l(&mu_);
    aborted = RemoveLocked(id);
    if (aborted == nullptr) return;  // Already finished.
    finished = RunLocked();          // Its leaving may unblock the next ones.
  }
  static constexpr const char* kNames[] = {"Enqueue", "Close", "Dequeue"};
  const char* what = kNames[aborted->kind];
  aborted->status = WaitEnded(aborted->waiter, absl::StrCat(what, " on FIFOQueue '", name_, "'"),
                              absl::StrCat(what, " operation was cancelled"));
  Finish(std::move(aborted));
  for (std::unique_ptr<Attempt>& a : finished) Finish(std::move(a));
}

FIFOQueue::Attempt* FIFOQueue::FindLocked(int64_t id) {
  for (auto* list : {&enqueues_, &dequeues_}) {
    for (std::unique_ptr<Attempt>& a : *list) {
      if (a->id == id) return a.get();
    }
  }
  return nullptr;
}

std::unique_ptr<FIFOQueue::Attempt> FIFOQueue::RemoveLocked(int64_t id) {
  for (auto* list : {&enqueues_, &dequeues_}) {
    for (auto it = list->begin(); it != list->end(); ++it) {
      if ((*it)->id != id) continue;
      std::unique_ptr<Attempt> a = std::move(*it);
      list->erase(it);
      // Elements a dequeue took go back to the front, in order.
      for (auto t = a->taken.rbegin(); t != a->taken.rend(); ++t) {
        elements_.push_front(std::move(*t));
      }
      a->taken.clear();
      return a;
    }
  }
  return nullptr;
}

std::vector<std::unique_ptr<FIFOQueue::Attempt>> FIFOQueue::RunLocked() {
  std::vector<std::unique_ptr<Attempt>> finished;
  bool progress = true;
  while (progress) {
    progress = false;
    for (auto* list : {&enqueues_, &dequeues_}) {
      while (!list->empty()) {
        Attempt* a = list->front().get();
        const Progress p = a->kind == Attempt::kDequeue ? RunDequeueLocked(a) : RunEnqueueLocked(a);
        if (p == Progress::kNone) break;
        progress = true;
        if (p == Progress::kSome) break;
        finished.push_back(std::move(list->front()));
        list->pop_front();
      }
    }
  }
  return finished;
}

FIFOQueue::Progress FIFOQueue::RunEnqueueLocked(Attempt* a) {
  if (a->kind == Attempt::kClose) {
    if (closed_) {
      a->status = absl::CancelledError(absl::StrCat("Queue '", name_, "' is already closed."));
    }
    closed_ = true;
    return Progress::kComplete;
  }
  if (closed_) {
    a->status = absl::CancelledError(absl::StrCat("FIFOQueue '", name_, "' is closed."));
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

FIFOQueue::Progress FIFOQueue::RunDequeueLocked(Attempt* a) {
  const int64_t missing = a->requested - static_cast<int64_t>(a->taken.size());
  if (closed_ && static_cast<int64_t>(elements_.size()) < missing) {
    for (auto t = a->taken.rbegin(); t != a->taken.rend(); ++t) {
      elements_.push_front(std::move(*t));
    }
    a->taken.clear();
    a->status = absl::OutOfRangeError(
        absl::StrCat("FIFOQueue '", name_, "' is closed and has insufficient elements (requested ",
                     a->requested, ", current size ", elements_.size(), ")"));
    return Progress::kComplete;
  }
  Progress p = Progress::kNone;
  while (static_cast<int64_t>(a->taken.size()) < a->requested && !elements_.empty()) {
    a->taken.push_back(std::move(elements_.front()));
    elements_.pop_front();
    p = Progress::kSome;
  }
  return static_cast<int64_t>(a->taken.size()) == a->requested ? Progress::kComplete : p;
}

void FIFOQueue::Finish(std::unique_ptr<Attempt> a) const {
  if (a->token != kInvalidCancellationToken) a->waiter.cm->Deregister(a->token);
  Tuple out;
  absl::Status status = a->status;
  if (status.ok() && a->kind == Attempt::kDequeue && !a->batched) {
    out = std::move(a->taken[0]);
  } else if (status.ok() && a->kind == Attempt::kDequeue) {
    const int64_t n = static_cast<int64_t>(a->taken.size());
    for (size_t c = 0; c < types_.size() && status.ok(); ++c) {
      TensorShape shape = shapes_[c];
      shape.InsertDim(0, n);
      Tensor batch(types_[c], shape);
      const int64_t row = shapes_[c].num_elements();
      for (int64_t i = 0; i < n && status.ok(); ++i) {
        status = CopyElements(a->taken[i][c], 0, row, &batch, i * row);
      }
      out.push_back(std::move(batch));
    }
    if (!status.ok()) out.clear();
  }
  a->done(status, std::move(out));
}

// --- ConditionalAccumulator ----------------------------------------------------------

struct ConditionalAccumulator::Take {
  int64_t id = 0;
  int64_t required = 0;
  Waiter waiter;
  CancellationToken token = kInvalidCancellationToken;
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
    : name_(std::move(name)), dtype_(dtype), shape_(std::move(shape)), mean_(mean) {}

ConditionalAccumulator::~ConditionalAccumulator() {
  absl::MutexLock l(&mu_);
  for (std::unique_ptr<Take>& take : takes_) {
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
        auto sum = sum_.flat<T>();
        auto g = grad.flat<T>();
        for (size_t i = 0; i < sum.size(); ++i) sum[i] += g[i];
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
  take->waiter = waiter;
  take->done = std::move(done);
  std::vector<std::pair<std::unique_ptr<Take>, Tensor>> finished;
  int64_t id;
  bool pending;
  {
    absl::MutexLock l(&mu_);
    id = take->id = next_id_++;
    takes_.push_back(std::move(take));
    finished = RunLocked();
    pending =
        std::any_of(takes_.begin(), takes_.end(), [id](const auto& t) { return t->id == id; });
  }
  Finish(std::move(finished));
  if (pending && waiter.cm != nullptr) Arm(id, waiter.cm);
}

void ConditionalAccumulator::Arm(int64_t id, CancellationManager* cm) {
  std::shared_ptr<ConditionalAccumulator> self = shared_from_this();
  const CancellationToken token = cm->Register([self, id] { self->Abort(id); });
  if (token == kInvalidCancellationToken) {
    Abort(id);
    return;
  }
  bool pending = false;
  {
    absl::MutexLock l(&mu_);
    for (std::unique_ptr<Take>& t : takes_) {
      if (t->id == id) {
        t->token = token;
        pending = true;
      }
    }
  }
  if (!pending) cm->Deregister(token);
}

void ConditionalAccumulator::Abort(int64_t id) {
  std::unique_ptr<Take> take;
  int64_t have = 0;
  std::vector<std::pair<std::unique_ptr<Take>, Tensor>> finished;
  {
    absl::MutexLock l(&mu_);
    auto it =
        std::find_if(takes_.begin(), takes_.end(), [id](const auto& t) { return t->id == id; });
    if (it == takes_.end()) return;
    take = std::move(*it);
    takes_.erase(it);
    have = counter_;
    finished = RunLocked();  // A later take may need fewer gradients.
  }
  const absl::Status s = WaitEnded(take->waiter,
                                   absl::StrCat("TakeGradient on ConditionalAccumulator '", name_,
                                                "' (", have, " of ", take->required, " gradients)"),
                                   "TakeGrad operation was cancelled");
  if (take->token != kInvalidCancellationToken) take->waiter.cm->Deregister(take->token);
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
        for (T& v : result.flat<T>()) v = static_cast<T>(v / static_cast<T>(n));
        return absl::OkStatus();
      }).IgnoreError();  // dtype_ was checked on every apply.
    }
    counter_ = 0;
    ++global_step_;
    finished.emplace_back(std::move(takes_.front()), std::move(result));
    takes_.pop_front();
  }
  return finished;
}

void ConditionalAccumulator::Finish(std::vector<std::pair<std::unique_ptr<Take>, Tensor>> done) {
  for (auto& [take, value] : done) {
    if (take->token != kInvalidCancellationToken) take->waiter.cm->Deregister(take->token);
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

std::string ContainerOr(const OpKernelContext& ctx, const std::string& container) {
  return container.empty() ? ctx.resource_manager()->default_container() : container;
}

// The resource `name` shared across sessions: created by `make` when absent,
// else it must agree with this op's attrs (`matches` says how not).
template <typename T, typename Make, typename Matches>
absl::StatusOr<std::shared_ptr<T>> LookupOrCreateShared(const OpKernelContext& ctx,
                                                        const std::string& container,
                                                        const std::string& name, Make make,
                                                        Matches matches) {
  ASSIGN_OR_RETURN(
      std::shared_ptr<T> r,
      ctx.resource_manager()->LookupOrCreate<T>(
          container, name, [&]() -> absl::StatusOr<std::shared_ptr<T>> { return make(); }));
  if (absl::Status s = matches(*r); !s.ok()) return Prefixed(ctx.Prefix(), s);
  return r;
}

// The resource of type T named by the DT_RESOURCE scalar of input `i`.
template <typename T>
absl::StatusOr<std::shared_ptr<T>> LookupFromHandle(const OpKernelContext& ctx, int i) {
  const Tensor& t = ctx.input(i);
  if (t.dtype() != DT_RESOURCE || t.NumElements() != 1) {
    return ctx.InvalidArgument("input ", i, " must be a scalar resource handle, got ",
                               t.DebugString());
  }
  const ResourceHandle& h = t.flat<ResourceHandle>()[0];
  if (!h.device.empty() && h.device != ctx.device()->name()) {
    return ctx.InvalidArgument(T::kTypeName, " '", h.name, "' lives on ", h.device,
                               ", not on this kernel's device ", ctx.device()->name());
  }
  if (!h.maybe_type_name.empty() && h.maybe_type_name != T::kTypeName) {
    return ctx.InvalidArgument("handle ", h.name, " names a ", h.maybe_type_name, ", not a ",
                               T::kTypeName);
  }
  absl::StatusOr<std::shared_ptr<T>> r =
      ctx.resource_manager()->Lookup<T>(ContainerOr(ctx, h.container), h.name);
  if (!r.ok()) return Prefixed(ctx.Prefix(), r.status());
  return r;
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
  if (!r.ok()) return Prefixed(ctx.Prefix(), r.status());
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

class FIFOQueueOp : public OpKernel {
 public:
  explicit FIFOQueueOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("component_types", &types_).IgnoreError();
    c->GetAttr("capacity", &capacity_).IgnoreError();
    c->GetAttr("container", &container_).IgnoreError();
    c->GetAttr("shared_name", &name_).IgnoreError();
    if (name_.empty()) name_ = c->def().name();
    auto it = c->def().attr().find("shapes");
    if (it == c->def().attr().end()) return;
    for (const tensorflow::TensorShapeProto& p : it->second.list().shape()) {
      absl::StatusOr<TensorShape> s = TensorShape::FromProto(p);
      if (!s.ok()) {
        c->SetStatus(absl::InvalidArgumentError(
            absl::StrCat("[FIFOQueueV2 '", c->def().name(),
                         "'] shapes must be fully defined: ", s.status().message())));
        return;
      }
      shapes_.push_back(*s);
    }
    if (!shapes_.empty() && shapes_.size() != types_.size()) {
      c->SetStatus(absl::InvalidArgumentError(absl::StrCat("[FIFOQueueV2 '", c->def().name(), "'] ",
                                                           shapes_.size(), " shapes given for ",
                                                           types_.size(), " component types")));
    }
  }

  absl::Status Compute(OpKernelContext* ctx) override {
    const std::string container = ContainerOr(*ctx, container_);
    RETURN_IF_ERROR(
        LookupOrCreateShared<FIFOQueue>(
            *ctx, container, name_,
            [&] { return std::make_shared<FIFOQueue>(name_, types_, shapes_, capacity_); },
            [&](const FIFOQueue& q) { return q.MatchesAttrs(types_, shapes_, capacity_); })
            .status());
    ctx->set_output(0, ResourceHandleTensor<FIFOQueue>(ctx->device()->name(), container, name_));
    return absl::OkStatus();
  }
  bool IsExpensive() const override { return false; }

 private:
  std::vector<DataType> types_;
  std::vector<TensorShape> shapes_;
  int64_t capacity_ = -1;
  std::string container_;
  std::string name_;
};

// A queue operation finishing through `done`: sets the outputs it returns.
FIFOQueue::DoneCallback QueueDone(OpKernelContext* ctx, AsyncOpKernel::DoneCallback done) {
  return
      [ctx, done = std::move(done), prefix = ctx->Prefix()](absl::Status s, FIFOQueue::Tuple out) {
        if (!s.ok()) {
          done(Prefixed(prefix, s));
          return;
        }
        for (size_t i = 0; i < out.size(); ++i)
          ctx->set_output(static_cast<int>(i), std::move(out[i]));
        done(absl::OkStatus());
      };
}

// Enqueue (many = false) and EnqueueMany.
template <bool kMany>
class QueueEnqueueOp : public AsyncOpKernel {
 public:
  using AsyncOpKernel::AsyncOpKernel;
  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    absl::StatusOr<std::shared_ptr<FIFOQueue>> q = LookupFromHandle<FIFOQueue>(*ctx, 0);
    if (!q.ok()) {
      done(q.status());
      return;
    }
    FIFOQueue::Tuple tuple;
    for (int i = 1; i < ctx->num_inputs(); ++i) tuple.push_back(ctx->input(i));
    if (kMany) {
      (*q)->EnqueueMany(std::move(tuple), WaiterOf(*ctx), QueueDone(ctx, std::move(done)));
    } else {
      (*q)->Enqueue(std::move(tuple), WaiterOf(*ctx), QueueDone(ctx, std::move(done)));
    }
  }
  bool IsExpensive() const override { return false; }
};

// Dequeue (many = false) and DequeueMany.
template <bool kMany>
class QueueDequeueOp : public AsyncOpKernel {
 public:
  using AsyncOpKernel::AsyncOpKernel;
  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    absl::StatusOr<std::shared_ptr<FIFOQueue>> q = LookupFromHandle<FIFOQueue>(*ctx, 0);
    if (!q.ok()) {
      done(q.status());
      return;
    }
    if ((*q)->component_types() != output_types()) {
      done(ctx->InvalidArgument(
          "FIFOQueue '", (*q)->name(), "' holds ", DataTypeListString((*q)->component_types()),
          ", but component_types asks for ", DataTypeListString(output_types())));
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
    (*q)->DequeueMany(*n, WaiterOf(*ctx), QueueDone(ctx, std::move(done)));
  }
  bool IsExpensive() const override { return false; }
};

class QueueCloseOp : public AsyncOpKernel {
 public:
  explicit QueueCloseOp(OpKernelConstruction* c) : AsyncOpKernel(c) {
    c->GetAttr("cancel_pending_enqueues", &cancel_pending_enqueues_).IgnoreError();
  }
  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    absl::StatusOr<std::shared_ptr<FIFOQueue>> q = LookupFromHandle<FIFOQueue>(*ctx, 0);
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
    ASSIGN_OR_RETURN(std::shared_ptr<FIFOQueue> q, LookupFromHandle<FIFOQueue>(*ctx, 0));
    ctx->set_output(0, Tensor::Scalar<int32_t>(static_cast<int32_t>(q->Size())));
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
    return s.ok() ? s : Prefixed(ctx->Prefix(), s);
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
            done(Prefixed(prefix, s));
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
REGISTER_KERNEL(KernelDefBuilder("FIFOQueueV2").Device(kDeviceCPU), FIFOQueueOp);

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
