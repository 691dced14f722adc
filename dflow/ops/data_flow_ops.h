// Queues and gradient accumulators (TensorFlow's data_flow_ops): the
// resources behind FIFOQueueV2, RandomShuffleQueueV2, PaddingFIFOQueueV2 /
// Queue*V2 and (Resource)ConditionalAccumulator
// / (Resource)Accumulator*, as SyncReplicasOptimizer uses them (a token queue
// as the replicas' barrier, one accumulator per variable on the ps).
//
// Both live in a device's ResourceMgr under (container, shared_name), or the
// node name when shared_name is empty, so every session on that device (every
// replica talking to one ps task) sees the same queue or accumulator.
//
// Operations that must wait never block a thread: they are queued inside the
// resource and finish through their callback when another operation (an
// enqueue, a dequeue, a close, an applied gradient) lets them, or when the
// step's CancellationManager cancels them (DeadlineExceeded once the step's
// deadline has passed, Cancelled otherwise). Sessions and workers cancel a
// step at its deadline, so every wait is bounded by it.
//
//   queue->Dequeue(Waiter{ctx->cancellation_manager(), ctx->deadline()},
//                  [](absl::Status s, Queue::Tuple t) { ... });
//
// Thread-safe. Callbacks run on the thread that made them ready, never
// under the resource's lock (they may call back into it).
#ifndef DFLOW_OPS_DATA_FLOW_OPS_H_
#define DFLOW_OPS_DATA_FLOW_OPS_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dflow/framework/cancellation.h"
#include "dflow/framework/resource_mgr.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/framework/tensor.h"
#include "dflow/ops/philox.h"
#include "dflow/ops/wait_list.h"

namespace dflow {

// How a queue orders and batches its elements: TensorFlow's three queue kinds.
struct QueueOptions {
  enum class Kind {
    kFIFO,           // FIFOQueueV2: first in, first out
    kRandomShuffle,  // RandomShuffleQueueV2: a uniformly random element
    kPaddingFIFO,    // PaddingFIFOQueueV2: FIFO; batches padded to their longest
  };
  Kind kind = Kind::kFIFO;
  // kRandomShuffle: a dequeue waits while the queue holds no more than this
  // many elements, unless the queue is closed.
  int64_t min_after_dequeue = 0;
  // kRandomShuffle: seeds the queue's Philox4x32 stream; both 0 = seeded
  // nondeterministically. Given the same elements at each dequeue, the
  // order is TensorFlow's for the same seeds.
  int64_t seed = 0;
  int64_t seed2 = 0;
  // kPaddingFIFO: one shape per component, unknown dimensions (-1) allowed;
  // a batch pads each unknown dimension to its largest row, with zeros (""
  // for strings).
  std::vector<PartialShape> padded_shapes;
};

// A bounded queue of tuples, one tensor per component.
class Queue : public ResourceBase, public std::enable_shared_from_this<Queue> {
 public:
  static constexpr char kTypeName[] = "Queue";
  using Tuple = std::vector<Tensor>;
  // Called exactly once: the dequeued components (batched for DequeueMany),
  // empty for the other operations.
  using DoneCallback = std::function<void(absl::Status, Tuple)>;

  // `shapes`: empty (any shape) or one shape per component. `capacity` < 0:
  // unbounded. Create through std::make_shared (callbacks hold the queue).
  Queue(std::string name, std::vector<DataType> types, std::vector<TensorShape> shapes,
        int64_t capacity, QueueOptions options = {});
  // Fails operations still waiting (only those without a CancellationManager
  // can be: a registered wait keeps the queue alive) with Cancelled.
  ~Queue() override;
  Queue(const Queue&) = delete;
  Queue& operator=(const Queue&) = delete;

  // InvalidArgument when a node sharing this queue asks for another kind,
  // types, shapes or capacity.
  absl::Status MatchesAttrs(const std::vector<DataType>& types,
                            const std::vector<TensorShape>& shapes, int64_t capacity,
                            const QueueOptions& options = {}) const;

  // Waits while full. Cancelled "FIFOQueue 'q' is closed." once closed;
  // InvalidArgument for a tuple of the wrong arity, types or shapes.
  void Enqueue(Tuple tuple, const Waiter& waiter, DoneCallback done);
  // Enqueues the rows of `batch` (every component's dimension 0) in order,
  // as room allows.
  void EnqueueMany(Tuple batch, const Waiter& waiter, DoneCallback done);
  // Waits while empty (a shuffling queue: while it holds min_after_dequeue
  // or fewer). OutOfRange once closed with too few elements.
  void Dequeue(const Waiter& waiter, DoneCallback done);
  // Waits for `n` elements and returns them stacked (padded). Needs
  // component shapes. `up_to` (DequeueUpTo): once closed, returns the 1..n-1
  // elements left instead of failing; OutOfRange only when none are left.
  void DequeueMany(int64_t n, bool up_to, const Waiter& waiter, DoneCallback done);
  void DequeueMany(int64_t n, const Waiter& waiter, DoneCallback done) {
    DequeueMany(n, /*up_to=*/false, waiter, std::move(done));
  }
  // With `cancel_pending_enqueues`, closes now and fails waiting enqueues;
  // otherwise closes after them (waiting, as TensorFlow does). Cancelled
  // "Queue 'q' is already closed." for a second plain close. Waiting
  // dequeues that can no longer be served fail with OutOfRange.
  void Close(bool cancel_pending_enqueues, const Waiter& waiter, DoneCallback done);

  int64_t Size() const;
  bool IsClosed() const;
  const std::string& name() const { return name_; }
  const std::vector<DataType>& component_types() const { return types_; }
  // "FIFOQueue", "RandomShuffleQueue" or "PaddingFIFOQueue", for messages.
  const char* kind_name() const;
  std::string DebugString() const override;

 private:
  struct Attempt;
  enum class Progress { kNone, kSome, kComplete };

  // Queues `attempt` on `list` (enqueues_ or dequeues_) and serves what can be.
  void Submit(std::unique_ptr<Attempt> attempt, WaitList<Attempt>* list, const Waiter& waiter);
  // Ends attempt `id` of `list` early, at its step's cancellation.
  void Abort(WaitList<Attempt>* list, int64_t id);
  // Serves waiting operations; returns those finished, to Finish() outside
  // the lock.
  std::vector<std::unique_ptr<Attempt>> RunLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Finish(std::unique_ptr<Attempt> a) const;
  absl::StatusOr<Tuple> Batch(const std::vector<Tuple>& rows) const;
  Progress RunEnqueueLocked(Attempt* a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Progress RunDequeueLocked(Attempt* a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether a dequeue may take an element now, and takes it.
  bool CanTakeLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Tuple TakeLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Puts back the elements an unfinished dequeue took.
  void ReturnLocked(Attempt* a) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckTuple(const Tuple& tuple, bool batched) const;

  const std::string name_;
  const std::vector<DataType> types_;
  const std::vector<TensorShape> shapes_;
  const int64_t capacity_;
  const QueueOptions options_;

  mutable absl::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<Tuple> elements_ ABSL_GUARDED_BY(mu_);
  Philox4x32 generator_ ABSL_GUARDED_BY(mu_);            // kRandomShuffle
  PhiloxWords words_ ABSL_GUARDED_BY(mu_){&generator_};  // borrows generator_
  // Waiting operations, served in order; only the first of each list can
  // hold part of its work (rows enqueued, elements taken).
  WaitList<Attempt> enqueues_;  // and closes
  WaitList<Attempt> dequeues_;
};

// The name the code that predates the other kinds uses.
using FIFOQueue = Queue;

// Sums gradients for one variable across replicas. Gradients computed at a
// step older than the accumulator's global step are dropped (and counted);
// TakeGradient waits for enough of them, returns their mean (or sum), resets,
// and advances the global step.
class ConditionalAccumulator : public ResourceBase,
                               public std::enable_shared_from_this<ConditionalAccumulator> {
 public:
  static constexpr char kTypeName[] = "ConditionalAccumulator";
  using TakeCallback = std::function<void(absl::Status, Tensor)>;

  // `mean`: reduction_type MEAN (else SUM). Create through std::make_shared.
  ConditionalAccumulator(std::string name, DataType dtype, PartialShape shape, bool mean);
  // As ~FIFOQueue: fails takes still waiting with Cancelled.
  ~ConditionalAccumulator() override;
  ConditionalAccumulator(const ConditionalAccumulator&) = delete;
  ConditionalAccumulator& operator=(const ConditionalAccumulator&) = delete;

  // InvalidArgument when a node sharing this accumulator asks for another
  // dtype, shape or reduction.
  absl::Status MatchesAttrs(DataType dtype, const PartialShape& shape, bool mean) const;

  // Adds `grad` when local_step >= global_step(); drops it otherwise (OK,
  // counted by num_dropped_stale()). InvalidArgument naming the accumulator
  // for a gradient of the wrong dtype or shape.
  absl::Status ApplyGradient(int64_t local_step, const Tensor& grad);
  // Waits until `num_required` (>= 1) gradients are accumulated.
  void TakeGradient(int64_t num_required, const Waiter& waiter, TakeCallback done);
  void SetGlobalStep(int64_t step);

  int64_t num_accumulated() const;
  int64_t global_step() const;
  // Stale gradients dropped so far.
  int64_t num_dropped_stale() const;
  DataType dtype() const { return dtype_; }
  const std::string& name() const { return name_; }
  std::string DebugString() const override;

 private:
  struct Take;
  // Ends take `id` early, at its step's cancellation.
  void Abort(int64_t id);
  // Serves waiting takes; returns those finished, to call outside the lock.
  std::vector<std::pair<std::unique_ptr<Take>, Tensor>> RunLocked()
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void Finish(std::vector<std::pair<std::unique_ptr<Take>, Tensor>> done);

  const std::string name_;
  const DataType dtype_;
  const PartialShape shape_;
  const bool mean_;

  mutable absl::Mutex mu_;
  Tensor sum_ ABSL_GUARDED_BY(mu_);  // meaningful (and exclusive) while counter_ > 0
  int64_t counter_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t global_step_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t dropped_stale_ ABSL_GUARDED_BY(mu_) = 0;
  WaitList<Take> takes_;
};

}  // namespace dflow

#endif  // DFLOW_OPS_DATA_FLOW_OPS_H_
