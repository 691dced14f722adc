// Executor: runs one placed, single-device graph once per step.
//
// Kernels are created once, when the executor is; every step then walks the
// graph by pending-input counts. Cheap kernels run inline on the thread that
// made them ready, expensive ones go to Args::runner (the inter-op pool): a
// kernel that calls itself expensive is timed, and once its average run is
// below about 3 us (a scalar AddV2 in a loop) it runs inline too, as
// TensorFlow's executor learns it; and
// asynchronous kernels (Recv) finish through a callback, so no thread blocks
// waiting for a tensor. Control flow follows TensorFlow's deadness: the output
// a Switch did not take is dead, a node with a dead input is skipped and its
// outputs are dead (a Send still runs, to pass deadness to its peer), and a
// Merge runs on its first live input, or is dead when all its inputs are.
// Loops (Enter, Exit, NextIteration; see control_flow.h) run as TensorFlow's:
// each iteration has its own inputs and deadness, up to parallel_iterations
// of a loop run at once, and cancelling the step stops a running loop.
// The first error aborts the step: nodes not yet started are skipped, the
// step's cancellation manager is cancelled and its rendezvous aborted, and
// `done` receives that error prefixed with "[node 'x' (Op)] ".
//
//   ASSIGN_OR_RETURN(std::unique_ptr<Executor> exec,
//                    Executor::Create(std::move(graph), device));
//   Executor::Args args;
//   args.rendezvous = &rendezvous;
//   args.call_frame = &frame;
//   args.runner = [pool](std::function<void()> fn) { pool->Schedule(std::move(fn)); };
//   RETURN_IF_ERROR(exec->Run(args));
//
// Thread-safe: several steps may run at once on one executor.
#ifndef DFLOW_RUNTIME_EXECUTOR_H_
#define DFLOW_RUNTIME_EXECUTOR_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "dflow/framework/cancellation.h"
#include "dflow/framework/device.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/rendezvous.h"
#include "dflow/runtime/graph.h"
#include "dflow/runtime/step_stats_collector.h"

namespace dflow {

class ExecutorState;

class Executor {
 public:
  // Everything one step needs; pointers are borrowed for the whole step.
  struct Args {
    int64_t step_id = 0;
    Rendezvous* rendezvous = nullptr;
    CallFrameInterface* call_frame = nullptr;
    // Cancelled on the first error. When null, the step uses its own.
    CancellationManager* cancellation_manager = nullptr;
    // Runs a closure on the inter-op pool. When unset, everything runs
    // inline on the calling thread (and on the threads completing async
    // kernels).
    std::function<void(std::function<void()>)> runner;
    // Passed to kernels; enforced by Run(), not by RunAsync().
    absl::Time deadline = absl::InfiniteFuture();
    // When set, every node the step runs is recorded here (a traced step);
    // when null nothing is recorded. Not owned.
    StepStatsCollector* stats = nullptr;
  };
  using DoneCallback = std::function<void(absl::Status)>;

  // Creates a kernel for every node of `graph` on `device`. Fails, naming the
  // node, when a node has no kernel, bad attrs, or is assigned elsewhere.
  // The executor keeps only what its steps need (kernels, dense per-node
  // items and edges); `graph` is freed before Create returns.
  static absl::StatusOr<std::unique_ptr<Executor>> Create(std::unique_ptr<Graph> graph,
                                                          Device* device);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Starts a step; `done` is called exactly once, after every kernel that
  // started has finished. The executor must outlive the step.
  void RunAsync(const Args& args, DoneCallback done);
  // Runs a step and waits for it. At args.deadline the step is cancelled and
  // DeadlineExceeded returned (once in-flight kernels finished).
  absl::Status Run(const Args& args);

  Device* device() const { return device_; }

 private:
  friend class ExecutorState;
  struct FrameInfo;
  struct NodeItem;
  struct OutEdge;

  explicit Executor(Device* device);
  absl::Status Initialize(const Graph& graph);
  absl::Status InitializeNode(const Node* node, NodeItem* item);

  // Whether item `id` goes to the pool; kernels that declare themselves
  // expensive are timed (UpdateCost) and stop being so once cheap.
  bool IsExpensive(int id) const;
  void UpdateCost(int id, int64_t elapsed) const;

  Device* device_;  // not owned
  std::vector<std::unique_ptr<OpKernel>> kernels_;
  std::vector<NodeItem> items_;  // One per live node, dense.
  // Moving average of each item's run time (TSC cycles, or ns); written
  // without a lock by every step (a lost update only slows the average down).
  std::unique_ptr<std::atomic<int64_t>[]> cost_;
  std::vector<OutEdge> out_edges_;
  std::vector<int> roots_;  // Items with no inputs at all.
  std::vector<FrameInfo> frames_;  // frames_[0] is the root frame.
};

// A thread with nothing else to do (the data plane's call thread once it has
// read a batch's last answer) lends itself to the step it completes: inside
// the scope, the first asynchronous kernel to complete on this thread runs
// the nodes it makes ready here, as the pool would, rather than handing them
// to the pool and waking one of its threads. Nests; not inherited by other
// threads.
class RunReadyHereScope {
 public:
  RunReadyHereScope() : outer_(std::exchange(lent_, true)) {}
  ~RunReadyHereScope() { lent_ = outer_; }
  RunReadyHereScope(const RunReadyHereScope&) = delete;
  RunReadyHereScope& operator=(const RunReadyHereScope&) = delete;

  // True once per scope, on its thread: the caller takes the lent thread.
  static bool Take() { return std::exchange(lent_, false); }

 private:
  static inline thread_local bool lent_ = false;
  const bool outer_;
};

// True when `s` only reports that the step was already aborted by another
// error (e.g. a Recv cancelled because a peer failed). Sessions report the
// first error that is not derived.
bool IsDerivedError(const absl::Status& s);
absl::Status MarkDerived(absl::Status s);

}  // namespace dflow

#endif  // DFLOW_RUNTIME_EXECUTOR_H_
