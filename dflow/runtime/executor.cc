#include "dflow/runtime/executor.h"

#include <atomic>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif
#include <deque>
#include <utility>

#include "absl/base/optimization.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "dflow/framework/attr_util.h"
#include "dflow/framework/status.h"
#include "dflow/runtime/control_flow.h"

namespace dflow {

// --- immutable per-executor data ---------------------------------------------

struct Executor::OutEdge {
  int dst;         // Item index of the consumer.
  int src_output;  // kControlSlot for a control edge.
  int dst_entry;   // Index into the input entries of dst's frame; -1 for control.
  bool last_use;   // Last data edge reading src_output: may move the value.
};

struct Executor::FrameInfo {
  std::string name;
  int parallel_iterations = 1;
  int num_enters = 0;
  std::vector<int> items;  // Its nodes; NodeItem::local indexes this.
  int total_inputs = 0;
};

struct Executor::NodeItem {
  OpKernel* kernel = nullptr;      // owned by Executor::kernels_
  AsyncOpKernel* async = nullptr;  // kernel->AsAsync()
  bool expensive = false;
  bool is_send = false;  // Runs even with dead inputs, to pass deadness on.
  // Switch: leaves the output its predicate did not pick unset, which makes
  // that output's edges dead.
  bool is_switch = false;
  // Merge: runs on its first live data input once its control inputs have
  // arrived, or dead once every data input arrived dead.
  bool is_merge = false;
  bool is_control_trigger = false;  // Runs even when its inputs are dead.
  // Loops: Enter feeds child_frame (a loop invariant when constant), Exit
  // the parent frame, NextIteration the next iteration.
  bool is_enter = false;
  bool is_constant_enter = false;
  bool is_exit = false;
  bool is_next_iteration = false;
  int child_frame = -1;
  int frame = 0;  // The frame it runs in (Executor::frames_).
  int local = 0;  // Its index among the nodes of its frame.
  int num_control_inputs = 0;
  int input_start = 0;   // First input entry, among those of its frame.
  int num_inputs = 0;
  int out_start = 0;  // First OutEdge.
  int num_out = 0;
  int initial_pending = 0;
  absl::InlinedVector<bool, 4> input_is_ref;
  absl::InlinedVector<bool, 4> output_consumed;
  // On a device with its own memory: inputs may need moving between host
  // and device memory before the kernel runs (OpKernel::input_memory_type).
  bool moves_inputs = false;
  // One of them is copied out of device memory first, which waits for the
  // device's queued work: always run on the pool, so that the thread that
  // made the node ready goes on launching.
  bool waits_for_device = false;
};

namespace {

constexpr char kDerivedPayload[] = "type.dflow/derived";

// The node's NodeDef with inputs rebuilt from its edges (transformations
// edit edges, not NodeDef inputs) and its device set to the assignment.
absl::StatusOr<tensorflow::NodeDef> NodeDefFromEdges(const Node& node) {
  tensorflow::NodeDef def = node.def();
  def.clear_input();
  std::vector<std::string> data(node.num_inputs());
  std::vector<std::string> control;
  for (const Edge* e : node.in_edges()) {
    if (e->IsControlEdge()) {
      control.push_back(absl::StrCat("^", e->src->name()));
    } else if (e->dst_input >= 0 && e->dst_input < node.num_inputs()) {
      data[e->dst_input] = absl::StrCat(e->src->name(), ":", e->src_output);
    }
  }
  for (size_t i = 0; i < data.size(); ++i) {
    if (data[i].empty()) {
      return absl::InvalidArgumentError(absl::StrCat("[", node.type_string(), " '", node.name(),
                                                     "'] input ", i, " is not connected"));
    }
    def.add_input(std::move(data[i]));
  }
  for (std::string& s : control) def.add_input(std::move(s));
  if (!node.assigned_device_name().empty()) def.set_device(node.assigned_device_name());
  return def;
}

absl::Status CheckAssignedDevice(const Node& node, const Device& device) {
  const std::string& assigned = node.assigned_device_name();
  if (assigned.empty()) return absl::OkStatus();
  absl::StatusOr<DeviceName> parsed = DeviceName::Parse(assigned);
  if (parsed.ok() && *parsed == device.parsed_name()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("[Executor] node '", node.name(),
                                                 "' is assigned to ", assigned,
                                                 " but this executor runs on ", device.name()));
}

// "[Op 'node'] ", made when an error needs it rather than kept per node.
std::string ErrorPrefix(const OpKernel& kernel) {
  return absl::StrCat("[", kernel.type_string(), " '", kernel.name(), "'] ");
}

// "[Op 'node'] " + message, unless the kernel already said so.
absl::Status Annotate(const absl::Status& s, const std::string& prefix) {
  return absl::StartsWith(s.message(), prefix) ? s : WithPrefix(s, prefix);
}

// Now, for timing kernels: TSC cycles on x86-64, else nanoseconds.
int64_t CostClock() {
#if defined(__x86_64__)
  return static_cast<int64_t>(__rdtsc());
#else
  return absl::ToUnixNanos(absl::Now());
#endif
}

// FNV-1a over the parent instance, its iteration and the frame name: the
// same in every partition (and process) running the loop, never 0.
uint64_t LoopInstanceId(uint64_t parent, int64_t parent_iter, absl::string_view frame_name) {
  uint64_t h = 0xcbf29ce484222325ULL;
  auto mix = [&h](const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ULL;
  };
  mix(&parent, sizeof(parent));
  mix(&parent_iter, sizeof(parent_iter));
  mix(frame_name.data(), frame_name.size());
  return h == 0 ? 1 : h;
}

}  // namespace

bool IsDerivedError(const absl::Status& s) {
  return !s.ok() && s.GetPayload(kDerivedPayload).has_value();
}

absl::Status MarkDerived(absl::Status s) {
  if (!s.ok()) s.SetPayload(kDerivedPayload, absl::Cord("1"));
  return s;
}

// --- one step ------------------------------------------------------------------

// The state of one step. Deletes itself after calling `done`.
//
// Loops follow TensorFlow's executor: every node runs in one iteration of
// one frame instance. The root frame has a single iteration; an Enter
// creates (once per parent iteration) an instance of the frame it feeds, a
// NextIteration starts the next iteration of its frame (or holds its value
// while parallel_iterations are already running), an Exit delivers to the
// parent iteration. An iteration ends when no node in it is ready or
// running, no child frame of it is alive and every earlier iteration ended;
// a frame ends when all its Enter nodes arrived and all its iterations
// ended, and then Exits that were dead in its last iteration pass their
// deadness to the parent.
class ExecutorState {
 public:
  ExecutorState(const Executor* exec, const Executor::Args& args, Executor::DoneCallback done);
  ExecutorState(const ExecutorState&) = delete;
  ExecutorState& operator=(const ExecutorState&) = delete;

  void Start();

 private:
  using Item = Executor::NodeItem;
  using Params = OpKernelContext::Params;
  struct FrameState;
  struct IterationState;
  // A node made ready in one iteration.
  struct TaggedNode {
    int id;
    IterationState* iter;
  };
  using ReadyQueue = absl::InlinedVector<TaggedNode, 16>;
  using ReadyList = absl::InlinedVector<TaggedNode, 8>;

  // One input slot of one node.
  struct Entry {
    Tensor val;
    Tensor* ref = nullptr;          // Set for ref edges.
    absl::Mutex* ref_mu = nullptr;  // Guards *ref.
  };
  struct NodeState {
    std::atomic<int32_t> pending{0};
    std::atomic<bool> dead{false};
    // Merge nodes only, guarded by merge_mu_.
    int merge_controls = 0;    // Control inputs still to arrive.
    int merge_dead = 0;        // Data inputs that arrived dead.
    int merge_live = -1;       // The data input it forwards.
    bool merge_fired = false;  // Scheduled: later inputs are ignored.
  };
  struct IterationState {
    IterationState(const Executor& exec, FrameState* frame, int64_t index);
    ~IterationState();
    FrameState* const frame;
    const int64_t index;
    std::unique_ptr<Entry[]> entries;
    std::unique_ptr<NodeState[]> nodes;
    // Nodes of this iteration ready or running (loop frames only). Goes
    // from 1 to 0 only under frame->mu.
    std::atomic<int> outstanding_ops{0};
    int outstanding_frames = 0;  // Guarded by frame->mu.
    // Child frame instances by static frame; guarded by frame->mu.
    absl::flat_hash_map<int, std::unique_ptr<FrameState>> children;
  };
  // A value a frame keeps for iterations to come: a NextIteration's output
  // held back by parallel_iterations, or a loop invariant (constant Enter).
  struct Held {
    int id;  // The node that produced it.
    Entry value;
    bool dead;
  };
  struct FrameState {
    FrameState(const Executor& exec, int static_id, IterationState* parent_iter);
    bool is_loop() const { return parent_iter != nullptr; }
    const int static_id;
    const Executor::FrameInfo& info;
    IterationState* const parent_iter;  // Null for the root frame.
    const uint64_t id;                  // FrameAndIter::frame_id: equal in every partition.
    absl::Mutex mu;
    int pending_enters ABSL_GUARDED_BY(mu);
    int64_t iteration_count ABSL_GUARDED_BY(mu) = 0;  // The newest iteration.
    int outstanding_iterations ABSL_GUARDED_BY(mu) = 1;
    // Live iterations, oldest first.
    std::deque<std::unique_ptr<IterationState>> iterations ABSL_GUARDED_BY(mu);
    std::vector<Held> next_iter_roots ABSL_GUARDED_BY(mu);
    std::vector<Held> loop_invariants ABSL_GUARDED_BY(mu);
    std::vector<int> dead_exits ABSL_GUARDED_BY(mu);  // Dead in the newest iteration.
  };
  // When a traced node started (all_start) and its kernel returned (op_end),
  // in wall-clock microseconds; op_end 0 until known.
  struct NodeTiming {
    int64_t start = 0;
    int64_t op_end = 0;
  };
  // An async kernel in flight. `phase` bit 1: ComputeAsync returned; bit 2:
  // done was called. Whoever sets the second bit completes the node.
  struct AsyncState {
    AsyncState(const Params& p, TaggedNode node) : params(p), ctx(&params), node(node) {}
    Params params;
    OpKernelContext ctx;
    TaggedNode node;
    std::atomic<int> phase{0};
    absl::Status status;
    NodeTiming timing;  // Traced steps only.
  };

  // Runs `node` and what it makes ready inline (pool entry point).
  void Process(TaggedNode node);
  void RunLoop(ReadyQueue* queue);
  // Each returns true when the step finished and `this` is deleted.
  bool RunNode(TaggedNode node, Params* params, ReadyQueue* inline_ready);
  // RunNode's path for a traced step (args_.stats set).
  bool RunNodeTraced(TaggedNode node, Params* params, ReadyQueue* inline_ready);
  bool StartAsync(TaggedNode node, const Params& params, ReadyQueue* inline_ready,
                  const NodeTiming* timing = nullptr);
  bool AsyncDone(AsyncState* state, ReadyQueue* inline_ready);
  bool Complete(TaggedNode node, absl::Status s, OpKernelContext* ctx, ReadyQueue* inline_ready);
  // Complete for a traced step: also records the node.
  bool CompleteTraced(TaggedNode node, absl::Status s, OpKernelContext* ctx,
                      ReadyQueue* inline_ready, const NodeTiming& timing);
  // The node's stats up to op_end (bytes of a _Send's input or a _Recv's
  // output in its label); CompleteTraced adds all_end and records them.
  tensorflow::NodeExecStats TraceNode(const Item& item, const NodeTiming& timing,
                                      OpKernelContext* ctx);
  // `lent`: `inline_ready` is a lent thread's (RunReadyHereScope), which
  // keeps an expensive node even behind cheap ones.
  bool ScheduleReady(const ReadyList& ready, ReadyQueue* inline_ready, bool lent = false);
  void Finish();

  void InitParams(Params* params);
  absl::Status PrepareInputs(TaggedNode node, bool dead, Params* params);
  // Copies input i between host and device memory when its kernel reads it
  // from the other one.
  absl::Status MoveToKernelMemory(const Item& item, int i, Tensor* value);
  // Hands the node's outputs (null: the node is dead) on, across frames for
  // Enter, Exit and NextIteration, then retires the node from its iteration.
  absl::Status PropagateOutputs(TaggedNode node, OpKernelContext* ctx, ReadyList* ready);
  void Propagate(TaggedNode node, TensorValue* outs, ReadyList* ready);
  void PropagateEnter(TaggedNode node, TensorValue* outs, ReadyList* ready);
  void PropagateNextIteration(TaggedNode node, TensorValue* outs, ReadyList* ready);
  // Delivers `outs` along the item's out edges into `iter`; an edge whose
  // output is unset (or all of them when `outs` is null) arrives dead. With
  // `may_move` the last edge of each output takes the value.
  void ActivateEdges(const Item& item, TensorValue* outs, IterationState* iter, bool may_move,
                     ReadyList* ready);
  // Delivers one edge to a Merge; `value` is null for a control edge.
  void ActivateMerge(const Item& src, const Executor::OutEdge& e, bool dead, TensorValue* value,
                     IterationState* iter, ReadyList* ready);
  void SetEntry(const Executor::OutEdge& e, TensorValue* value, bool may_move,
                IterationState* iter);
  void MakeReady(int id, IterationState* iter, ReadyList* ready) {
    if (iter->frame->is_loop()) iter->outstanding_ops.fetch_add(1, std::memory_order_relaxed);
    ready->push_back(TaggedNode{id, iter});
  }
  void Decrement(int dst, IterationState* iter, ReadyList* ready) {
    NodeState& n = iter->nodes[exec_->items_[dst].local];
    if (n.pending.fetch_sub(1, std::memory_order_acq_rel) == 1) MakeReady(dst, iter, ready);
  }
  void ClearInputs(TaggedNode node);

  // Frame bookkeeping.
  FrameState* FindOrCreateChild(IterationState* parent_iter, int static_id);
  // Retires a finished node from its iteration; may end iterations and frames.
  void NodeDone(TaggedNode node, ReadyList* ready);
  // Starts the next iteration of `frame`, with its held values.
  IterationState* StartIteration(FrameState* frame, ReadyList* ready)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(frame->mu);
  // Deletes the ended iterations at the front; true when the frame ended.
  bool CleanupIterations(FrameState* frame, ReadyList* ready)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(frame->mu);
  void DeleteFrame(FrameState* frame, ReadyList* ready);

  static Held Hold(int id, const TensorValue* outs);
  void ActivateHeld(Held& held, IterationState* iter, ReadyList* ready);

  void RecordError(const Item& item, const absl::Status& s);
  void Abort(absl::Status s);

  const Executor* exec_;
  const Executor::Args args_;
  Executor::DoneCallback done_;
  std::unique_ptr<CancellationManager> own_cm_;  // When args_ has none.
  CancellationManager* cm_;
  std::function<void(std::function<void()>)> kernel_runner_;
  std::unique_ptr<FrameState> root_;
  ResourceMgr step_resources_{"step"};  // Stacks and TensorArrays of this step.
  std::atomic<int64_t> outstanding_{0};  // Nodes ready or running.
  std::atomic<bool> aborted_{false};

  absl::Mutex merge_mu_;  // Guards the merge_* fields of every NodeState.

  absl::Mutex mu_;
  absl::Status status_ ABSL_GUARDED_BY(mu_);  // The first error.
};

ExecutorState::IterationState::IterationState(const Executor& exec, FrameState* frame,
                                              int64_t index)
    : frame(frame),
      index(index),
      entries(new Entry[frame->info.total_inputs]),
      nodes(new NodeState[frame->info.items.size()]) {
  for (int id : frame->info.items) {
    const Item& item = exec.items_[id];
    nodes[item.local].pending.store(item.initial_pending, std::memory_order_relaxed);
    nodes[item.local].merge_controls = item.num_control_inputs;
  }
}

ExecutorState::IterationState::~IterationState() = default;

ExecutorState::FrameState::FrameState(const Executor& exec, int static_id,
                                      IterationState* parent_iter)
    : static_id(static_id),
      info(exec.frames_[static_id]),
      parent_iter(parent_iter),
      id(parent_iter == nullptr
             ? 0
             : LoopInstanceId(parent_iter->frame->id, parent_iter->index, info.name)),
      pending_enters(info.num_enters) {
  iterations.push_back(std::make_unique<IterationState>(exec, this, 0));
}

ExecutorState::ExecutorState(const Executor* exec, const Executor::Args& args,
                             Executor::DoneCallback done)
    : exec_(exec), args_(args), done_(std::move(done)) {
  if (args_.cancellation_manager == nullptr) own_cm_ = std::make_unique<CancellationManager>();
  cm_ = own_cm_ ? own_cm_.get() : args_.cancellation_manager;
  if (args_.runner) {
    kernel_runner_ = [this](std::function<void()> fn) { args_.runner(std::move(fn)); };
  } else {
    kernel_runner_ = [](std::function<void()> fn) { fn(); };
  }
  root_ = std::make_unique<FrameState>(*exec, 0, nullptr);
}

void ExecutorState::Start() {
  const std::vector<int>& roots = exec_->roots_;
  if (roots.empty()) {
    if (!exec_->items_.empty()) {
      absl::MutexLock l(&mu_);
      status_ = absl::InternalError("[Executor] graph has nodes but none without inputs");
    }
    Finish();
    return;
  }
  IterationState* iter;
  {
    absl::MutexLock l(&root_->mu);
    iter = root_->iterations.front().get();
  }
  // One extra count held by this function, so the step cannot finish (and
  // delete *this) while roots are still being handed out.
  outstanding_.store(static_cast<int64_t>(roots.size()) + 1, std::memory_order_relaxed);
  ReadyQueue queue;
  for (auto it = roots.rbegin(); it != roots.rend(); ++it) {
    const TaggedNode node{*it, iter};
    if (exec_->IsExpensive(*it) && args_.runner) {
      args_.runner([this, node] { Process(node); });
    } else {
      queue.push_back(node);
    }
  }
  if (!queue.empty()) RunLoop(&queue);
  if (outstanding_.fetch_sub(1, std::memory_order_acq_rel) == 1) Finish();
}

void ExecutorState::Process(TaggedNode node) {
  ReadyQueue queue;
  queue.push_back(node);
  RunLoop(&queue);
}

void ExecutorState::RunLoop(ReadyQueue* queue) {
  Params params;
  InitParams(&params);
  while (!queue->empty()) {
    const TaggedNode node = queue->back();
    queue->pop_back();
    if (RunNode(node, &params, queue)) return;
  }
}

void ExecutorState::InitParams(Params* params) {
  params->step_id = args_.step_id;
  params->device = exec_->device_;
  params->rendezvous = args_.rendezvous;
  params->cancellation_manager = cm_;
  // Captures only `this`, so copying it into Params never allocates.
  params->runner = [this](std::function<void()> fn) { kernel_runner_(std::move(fn)); };
  params->deadline = args_.deadline;
  params->call_frame = args_.call_frame;
  params->step_resources = &step_resources_;
}

bool ExecutorState::RunNode(TaggedNode node, Params* params, ReadyQueue* inline_ready) {
  const Item& item = exec_->items_[node.id];
  ReadyList ready;
  if (aborted_.load(std::memory_order_acquire)) {
    ClearInputs(node);
    return ScheduleReady(ready, inline_ready);
  }
  // A ControlTrigger runs even when its inputs are dead.
  const bool dead = node.iter->nodes[item.local].dead.load(std::memory_order_relaxed) &&
                    !item.is_control_trigger;
  if (dead && !item.is_send) {
    ClearInputs(node);
    Propagate(node, nullptr, &ready);
    return ScheduleReady(ready, inline_ready);
  }
  absl::Status s = PrepareInputs(node, dead, params);
  if (!s.ok()) return Complete(node, s, nullptr, inline_ready);
  params->frame_iter = FrameAndIter{node.iter->frame->id, node.iter->index};
  if (ABSL_PREDICT_FALSE(args_.stats != nullptr)) return RunNodeTraced(node, params, inline_ready);
  if (item.async != nullptr) return StartAsync(node, *params, inline_ready);
  OpKernelContext ctx(params);
  if (item.expensive) {  // Timed until the executor knows whether it is.
    const int64_t start = CostClock();
    s = item.kernel->Compute(&ctx);
    exec_->UpdateCost(node.id, CostClock() - start);
  } else {
    s = item.kernel->Compute(&ctx);
  }
  return Complete(node, std::move(s), &ctx, inline_ready);
}

bool ExecutorState::RunNodeTraced(TaggedNode node, Params* params, ReadyQueue* inline_ready) {
  const Item& item = exec_->items_[node.id];
  NodeTiming timing;
  timing.start = StepStatsCollector::NowMicros();
  if (item.async != nullptr) return StartAsync(node, *params, inline_ready, &timing);
  OpKernelContext ctx(params);
  absl::Status s = item.kernel->Compute(&ctx);
  timing.op_end = StepStatsCollector::NowMicros();
  return CompleteTraced(node, std::move(s), &ctx, inline_ready, timing);
}

tensorflow::NodeExecStats ExecutorState::TraceNode(const Item& item, const NodeTiming& timing,
                                                   OpKernelContext* ctx) {
  const tensorflow::NodeDef& def = item.kernel->def();
  int64_t bytes = -1;
  if (ctx != nullptr && IsSendOrRecv(def.op())) {
    if (IsRecvOp(def.op())) {
      if (ctx->num_outputs() > 0 && ctx->output_set(0)) {
        bytes = ctx->release_output(0).tensor->TotalBytes();  // Leaves it in place.
      }
    } else if (ctx->num_inputs() > 0 && ctx->has_input(0)) {
      bytes = ctx->input(0).TotalBytes();
    }
  }
  tensorflow::NodeExecStats ns;
  ns.set_node_name(def.name());
  ns.set_all_start_micros(timing.start);
  ns.set_op_start_rel_micros(0);
  ns.set_op_end_rel_micros(timing.op_end - timing.start);
  ns.set_timeline_label(TimelineLabel(def, bytes));
  ns.set_scheduled_micros(timing.start);
  return ns;
}

bool ExecutorState::StartAsync(TaggedNode node, const Params& params, ReadyQueue* inline_ready,
                               const NodeTiming* timing) {
  auto* state = new AsyncState(params, node);
  if (timing != nullptr) state->timing = *timing;
  exec_->items_[node.id].async->ComputeAsync(&state->ctx, [this, state](absl::Status s) {
    state->status = std::move(s);
    if (state->phase.fetch_or(2, std::memory_order_acq_rel) & 1) AsyncDone(state, nullptr);
  });
  if (state->phase.fetch_or(1, std::memory_order_acq_rel) & 2) {
    return AsyncDone(state, inline_ready);  // Finished synchronously.
  }
  return false;
}

bool ExecutorState::AsyncDone(AsyncState* state, ReadyQueue* inline_ready) {
  std::unique_ptr<AsyncState> owned(state);
  if (ABSL_PREDICT_FALSE(args_.stats != nullptr)) {
    state->timing.op_end = StepStatsCollector::NowMicros();
    return CompleteTraced(state->node, std::move(state->status), &state->ctx, inline_ready,
                          state->timing);
  }
  return Complete(state->node, std::move(state->status), &state->ctx, inline_ready);
}

bool ExecutorState::Complete(TaggedNode node, absl::Status s, OpKernelContext* ctx,
                             ReadyQueue* inline_ready) {
  ReadyList ready;
  // Inputs first: propagating may end the node's iteration and free them.
  ClearInputs(node);
  if (ctx != nullptr && !ctx->allocation_status().ok()) s = ctx->allocation_status();
  if (s.ok()) s = PropagateOutputs(node, ctx, &ready);
  if (!s.ok()) RecordError(exec_->items_[node.id], s);
  return ScheduleReady(ready, inline_ready);
}

bool ExecutorState::CompleteTraced(TaggedNode node, absl::Status s, OpKernelContext* ctx,
                                   ReadyQueue* inline_ready, const NodeTiming& timing) {
  const Item& item = exec_->items_[node.id];
  tensorflow::NodeExecStats traced = TraceNode(item, timing, ctx);  // Reads inputs: first.
  ReadyList ready;
  ClearInputs(node);
  if (ctx != nullptr && !ctx->allocation_status().ok()) s = ctx->allocation_status();
  if (s.ok()) s = PropagateOutputs(node, ctx, &ready);
  if (!s.ok()) RecordError(item, s);
  // Recorded before ScheduleReady, which may end the step.
  traced.set_all_end_rel_micros(StepStatsCollector::NowMicros() - timing.start);
  args_.stats->Record(std::move(traced));
  return ScheduleReady(ready, inline_ready);
}

absl::Status ExecutorState::PrepareInputs(TaggedNode node, bool dead, Params* params) {
  const Item& item = exec_->items_[node.id];
  params->op_kernel = item.kernel;
  params->is_input_dead = dead;
  params->inputs.clear();
  const int live = item.is_merge ? node.iter->nodes[item.local].merge_live : -1;
  for (int i = 0; i < item.num_inputs; ++i) {
    Entry& e = node.iter->entries[item.input_start + i];
    if (item.is_merge && i != live) {
      params->inputs.push_back(TensorValue{});
      continue;
    }
    if (item.input_is_ref[i]) {
      if (e.ref == nullptr && !dead) {
        return absl::InternalError(absl::StrCat("input ", i, " expects a reference"));
      }
      params->inputs.push_back(e.ref ? TensorValue{e.ref, e.ref_mu} : TensorValue{&e.val});
      continue;
    }
    if (e.ref != nullptr) {  // A ref edge into a value input: read it now.
      absl::ReaderMutexLock l(e.ref_mu);
      if (!e.ref->IsInitialized()) {
        // TensorFlow's wording; the input names the variable.
        return absl::FailedPreconditionError(absl::StrCat(
            "Attempting to use uninitialized value ", item.kernel->def().input(i)));
      }
      e.val = *e.ref;
      e.ref = nullptr;
      e.ref_mu = nullptr;
    }
    if (item.moves_inputs) RETURN_IF_ERROR(MoveToKernelMemory(item, i, &e.val));
    params->inputs.push_back(TensorValue{&e.val});
  }
  return absl::OkStatus();
}

absl::Status ExecutorState::MoveToKernelMemory(const Item& item, int i, Tensor* value) {
  const MemoryType wanted = item.kernel->input_memory_type(i);
  // Empty tensors move too: a buffer must never outlive the device whose
  // allocator made it (a fetched empty output of a GPU kernel would).
  if (value->memory_type() == wanted) return absl::OkStatus();
  absl::StatusOr<Tensor> moved = exec_->device_->CopyTensor(*value, wanted);
  if (!moved.ok()) {
    return Annotate(moved.status(), absl::StrCat(ErrorPrefix(*item.kernel), "input ", i,
                                                 " to ", MemoryTypeName(wanted), " memory: "));
  }
  *value = *std::move(moved);
  return absl::OkStatus();
}

absl::Status ExecutorState::PropagateOutputs(TaggedNode node, OpKernelContext* ctx,
                                             ReadyList* ready) {
  const Item& item = exec_->items_[node.id];
  if (ctx->is_output_dead()) {
    Propagate(node, nullptr, ready);
    return absl::OkStatus();
  }
  absl::InlinedVector<TensorValue, 4> outs(item.kernel->num_outputs());
  for (size_t i = 0; i < outs.size(); ++i) {
    outs[i] = ctx->release_output(static_cast<int>(i));
    if (outs[i].tensor == nullptr && item.output_consumed[i] && !item.is_switch) {
      return absl::InternalError(absl::StrCat("kernel did not set output ", i));
    }
  }
  Propagate(node, outs.data(), ready);
  return absl::OkStatus();
}

void ExecutorState::Propagate(TaggedNode node, TensorValue* outs, ReadyList* ready) {
  const Item& item = exec_->items_[node.id];
  if (item.is_enter) {
    PropagateEnter(node, outs, ready);
  } else if (item.is_next_iteration) {
    PropagateNextIteration(node, outs, ready);
  } else if (item.is_exit) {
    FrameState* frame = node.iter->frame;
    if (outs != nullptr) {
      ActivateEdges(item, outs, frame->parent_iter, /*may_move=*/true, ready);
    } else {
      // Passed on only if the loop ends with this exit still dead.
      absl::MutexLock l(&frame->mu);
      if (node.iter->index == frame->iteration_count) frame->dead_exits.push_back(node.id);
    }
  } else {
    ActivateEdges(item, outs, node.iter, /*may_move=*/true, ready);
  }
  NodeDone(node, ready);
}

void ExecutorState::PropagateEnter(TaggedNode node, TensorValue* outs, ReadyList* ready) {
  const Item& item = exec_->items_[node.id];
  FrameState* child = FindOrCreateChild(node.iter, item.child_frame);
  bool child_done;
  {
    absl::MutexLock l(&child->mu);
    if (item.is_constant_enter) {
      // A loop invariant: every iteration, present and to come, reads it.
      child->loop_invariants.push_back(Hold(node.id, outs));
      for (const auto& iter : child->iterations) {
        ActivateEdges(item, outs, iter.get(), /*may_move=*/false, ready);
      }
    } else {
      // No iteration ends before every Enter arrived: the first is alive.
      ActivateEdges(item, outs, child->iterations.front().get(), /*may_move=*/true, ready);
    }
    --child->pending_enters;
    child_done = CleanupIterations(child, ready);
  }
  if (child_done) DeleteFrame(child, ready);
}

void ExecutorState::PropagateNextIteration(TaggedNode node, TensorValue* outs,
                                           ReadyList* ready) {
  if (outs == nullptr) return;  // Deadness stops at the back edge.
  FrameState* frame = node.iter->frame;
  if (cm_->IsCancelled()) {  // Cancelling the step ends a running loop.
    Abort(MarkDerived(absl::CancelledError(
        absl::StrCat("[Executor] step ", args_.step_id, " cancelled in iteration ",
                     node.iter->index, " of loop '", frame->info.name, "'"))));
    return;
  }
  IterationState* next = nullptr;
  {
    absl::MutexLock l(&frame->mu);
    if (node.iter->index < frame->iteration_count) {
      next = frame->iterations[node.iter->index + 1 - frame->iterations.front()->index].get();
    } else if (frame->outstanding_iterations < frame->info.parallel_iterations) {
      next = StartIteration(frame, ready);
    } else {
      frame->next_iter_roots.push_back(Hold(node.id, outs));
    }
  }
  // The next iteration cannot end while this one, older, is alive.
  if (next != nullptr) ActivateEdges(exec_->items_[node.id], outs, next, true, ready);
}

ExecutorState::Held ExecutorState::Hold(int id, const TensorValue* outs) {
  Held h{id, Entry{}, outs == nullptr || outs[0].tensor == nullptr};
  if (h.dead) return h;
  if (outs[0].is_ref()) {
    h.value.ref = outs[0].tensor;
    h.value.ref_mu = outs[0].mutex;
  } else {
    h.value.val = *outs[0].tensor;
  }
  return h;
}

void ExecutorState::ActivateHeld(Held& held, IterationState* iter, ReadyList* ready) {
  TensorValue value = held.value.ref ? TensorValue{held.value.ref, held.value.ref_mu}
                                     : TensorValue{&held.value.val};
  ActivateEdges(exec_->items_[held.id], held.dead ? nullptr : &value, iter,
                /*may_move=*/false, ready);
}

void ExecutorState::ActivateEdges(const Item& item, TensorValue* outs, IterationState* iter,
                                  bool may_move, ReadyList* ready) {
  const Executor::OutEdge* edges = exec_->out_edges_.data() + item.out_start;
  for (int k = 0; k < item.num_out; ++k) {
    const Executor::OutEdge& e = edges[k];
    // A control edge is dead with its node; a data edge also when its
    // output was left unset (the branch a Switch did not take).
    TensorValue* value = outs == nullptr || e.dst_entry < 0 ? nullptr : &outs[e.src_output];
    const bool dead = outs == nullptr || (value != nullptr && value->tensor == nullptr);
    const Item& dst = exec_->items_[e.dst];
    if (dst.is_merge) {
      ActivateMerge(item, e, dead, value, iter, ready);
      continue;
    }
    if (dead) {
      iter->nodes[dst.local].dead.store(true, std::memory_order_relaxed);
    } else if (e.dst_entry >= 0) {
      SetEntry(e, value, may_move, iter);
    }
    Decrement(e.dst, iter, ready);
  }
}

void ExecutorState::SetEntry(const Executor::OutEdge& e, TensorValue* value, bool may_move,
                             IterationState* iter) {
  Entry& entry = iter->entries[e.dst_entry];
  if (value->is_ref()) {
    entry.ref = value->tensor;
    entry.ref_mu = value->mutex;
  } else if (may_move && e.last_use) {
    entry.val = std::move(*value->tensor);
  } else {
    entry.val = *value->tensor;
  }
}

void ExecutorState::ActivateMerge(const Item& src, const Executor::OutEdge& e, bool dead,
                                  TensorValue* value, IterationState* iter, ReadyList* ready) {
  const Item& dst = exec_->items_[e.dst];
  NodeState& node = iter->nodes[dst.local];
  absl::MutexLock l(&merge_mu_);
  if (node.merge_fired) return;  // A later live input (only in loops) is dropped.
  if (e.dst_entry < 0) {
    --node.merge_controls;  // Live or dead, a control input only counts down.
  } else if (dead) {
    // A dead Enter makes a loop's Merge dead at once: its NextIteration
    // input will never come (a loop on the branch a Switch did not take).
    node.merge_dead += src.is_enter ? dst.num_inputs : 1;
  } else if (node.merge_live < 0) {
    node.merge_live = e.dst_entry - dst.input_start;
    SetEntry(e, value, /*may_move=*/false, iter);
  }
  if (node.merge_controls > 0) return;
  if (node.merge_live < 0 && node.merge_dead < dst.num_inputs) return;
  node.merge_fired = true;
  if (node.merge_live < 0) node.dead.store(true, std::memory_order_relaxed);
  MakeReady(e.dst, iter, ready);
}

void ExecutorState::ClearInputs(TaggedNode node) {
  const Item& item = exec_->items_[node.id];
  for (int i = 0; i < item.num_inputs; ++i) {
    Entry& e = node.iter->entries[item.input_start + i];
    e.val = Tensor();
    e.ref = nullptr;
    e.ref_mu = nullptr;
  }
}

// --- frames ----------------------------------------------------------------------

ExecutorState::FrameState* ExecutorState::FindOrCreateChild(IterationState* parent_iter,
                                                            int static_id) {
  FrameState* parent = parent_iter->frame;
  absl::MutexLock l(&parent->mu);
  std::unique_ptr<FrameState>& child = parent_iter->children[static_id];
  if (child == nullptr) {
    child = std::make_unique<FrameState>(*exec_, static_id, parent_iter);
    ++parent_iter->outstanding_frames;
  }
  return child.get();
}

void ExecutorState::NodeDone(TaggedNode node, ReadyList* ready) {
  IterationState* iter = node.iter;
  FrameState* frame = iter->frame;
  if (!frame->is_loop()) return;
  // Without the frame's lock only while other nodes keep the iteration alive:
  // once the count reaches 0 another thread may end the frame.
  int n = iter->outstanding_ops.load(std::memory_order_acquire);
  while (n > 1) {
    if (iter->outstanding_ops.compare_exchange_weak(n, n - 1, std::memory_order_acq_rel)) return;
  }
  bool frame_done;
  {
    absl::MutexLock l(&frame->mu);
    if (iter->outstanding_ops.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    frame_done = CleanupIterations(frame, ready);
  }
  if (frame_done) DeleteFrame(frame, ready);
}

ExecutorState::IterationState* ExecutorState::StartIteration(FrameState* frame,
                                                             ReadyList* ready) {
  ++frame->iteration_count;
  ++frame->outstanding_iterations;
  frame->iterations.push_back(
      std::make_unique<IterationState>(*exec_, frame, frame->iteration_count));
  IterationState* iter = frame->iterations.back().get();
  frame->dead_exits.clear();
  std::vector<Held> roots = std::move(frame->next_iter_roots);
  frame->next_iter_roots.clear();
  for (Held& h : roots) ActivateHeld(h, iter, ready);
  for (Held& h : frame->loop_invariants) ActivateHeld(h, iter, ready);
  return iter;
}

bool ExecutorState::CleanupIterations(FrameState* frame, ReadyList* ready) {
  while (!frame->iterations.empty()) {
    const IterationState& oldest = *frame->iterations.front();
    if (oldest.outstanding_ops.load(std::memory_order_acquire) != 0 ||
        oldest.outstanding_frames != 0 || frame->pending_enters != 0) {
      break;
    }
    frame->iterations.pop_front();
    --frame->outstanding_iterations;
    if (!frame->next_iter_roots.empty()) StartIteration(frame, ready);
  }
  return frame->pending_enters == 0 && frame->outstanding_iterations == 0;
}

void ExecutorState::DeleteFrame(FrameState* frame, ReadyList* ready) {
  IterationState* parent_iter = frame->parent_iter;
  FrameState* parent = parent_iter->frame;
  std::vector<int> dead_exits;
  {
    absl::MutexLock l(&frame->mu);
    dead_exits.swap(frame->dead_exits);
  }
  for (int id : dead_exits) ActivateEdges(exec_->items_[id], nullptr, parent_iter, false, ready);
  bool parent_done = false;
  {
    absl::MutexLock l(&parent->mu);
    --parent_iter->outstanding_frames;
    parent_iter->children.erase(frame->static_id);  // Deletes `frame`.
    if (parent->is_loop()) parent_done = CleanupIterations(parent, ready);
  }
  if (parent_done) DeleteFrame(parent, ready);
}

// --- errors and completion ----------------------------------------------------------

// The node is still outstanding here, so the step (and *this) stays alive.
void ExecutorState::RecordError(const Item& item, const absl::Status& s) {
  absl::Status annotated = Annotate(s, ErrorPrefix(*item.kernel));
  if (cm_->IsCancelled()) annotated = MarkDerived(std::move(annotated));
  Abort(std::move(annotated));
}

void ExecutorState::Abort(absl::Status s) {
  {
    absl::MutexLock l(&mu_);
    if (!status_.ok()) return;
    status_ = s;
  }
  aborted_.store(true, std::memory_order_release);
  // Cancel first: a waiting Recv then fails as Cancelled (derived) rather
  // than with a copy of this error.
  cm_->StartCancel();
  if (args_.rendezvous != nullptr) args_.rendezvous->StartAbort(s);
}

bool ExecutorState::ScheduleReady(const ReadyList& ready, ReadyQueue* inline_ready,
                                  bool lent) {
  const int64_t n = static_cast<int64_t>(ready.size());
  if (n == 0) {
    if (outstanding_.fetch_sub(1, std::memory_order_acq_rel) != 1) return false;
    Finish();
    return true;
  }
  if (inline_ready == nullptr) {  // On an async kernel's callback thread.
    if (!args_.runner) {
      if (n > 1) outstanding_.fetch_add(n - 1, std::memory_order_relaxed);
      ReadyQueue queue(ready.begin(), ready.end());
      RunLoop(&queue);
      return false;
    }
    if (RunReadyHereScope::Take()) {  // A lent thread: as a pool thread would.
      ReadyQueue queue;
      ScheduleReady(ready, &queue, /*lent=*/true);
      RunLoop(&queue);
      return false;
    }
    // The completed node keeps its count until every ready node is handed
    // to the pool, so the step cannot finish under our feet.
    outstanding_.fetch_add(n, std::memory_order_relaxed);
    for (const TaggedNode& node : ready) args_.runner([this, node] { Process(node); });
    if (outstanding_.fetch_sub(1, std::memory_order_acq_rel) != 1) return false;
    Finish();
    return true;
  }
  if (n > 1) outstanding_.fetch_add(n - 1, std::memory_order_relaxed);
  // Cheap nodes run inline; expensive ones go to the pool, except one kept
  // for this thread when it has nothing else to do (a lent thread has
  // nothing else once the cheap ones have run).
  const TaggedNode* expensive = nullptr;
  for (const TaggedNode& node : ready) {
    if (!exec_->IsExpensive(node.id) || !args_.runner) {
      inline_ready->push_back(node);
      continue;
    }
    if (expensive != nullptr) args_.runner([this, prev = *expensive] { Process(prev); });
    expensive = &node;
  }
  if (expensive != nullptr) {
    if (inline_ready->empty()) {
      inline_ready->push_back(*expensive);
    } else if (lent) {  // After the cheap ones: RunLoop takes from the back.
      inline_ready->insert(inline_ready->begin(), *expensive);
    } else {
      args_.runner([this, node = *expensive] { Process(node); });
    }
  }
  return false;
}

void ExecutorState::Finish() {
  absl::Status status;
  {
    absl::MutexLock l(&mu_);
    status = status_;
  }
  // A device with its own memory may still run what the step queued: the
  // step ends when that work did, and reports the first error it met.
  if (exec_->device_->device_allocator() != nullptr) {
    absl::Status synced = exec_->device_->Sync();
    if (status.ok() && !synced.ok()) status = synced;
  }
  Executor::DoneCallback done = std::move(done_);
  delete this;
  done(std::move(status));
}

// --- Executor -------------------------------------------------------------------

Executor::Executor(Device* device) : device_(device) {}

Executor::~Executor() = default;

absl::StatusOr<std::unique_ptr<Executor>> Executor::Create(std::unique_ptr<Graph> graph,
                                                           Device* device) {
  if (graph == nullptr || device == nullptr) {
    return absl::InvalidArgumentError("[Executor] needs a graph and a device");
  }
  std::unique_ptr<Executor> exec(new Executor(device));
  RETURN_IF_ERROR(exec->Initialize(*graph));
  return exec;
}

absl::Status Executor::InitializeNode(const Node* node, NodeItem* item) {
  RETURN_IF_ERROR(CheckAssignedDevice(*node, *device_));
  ASSIGN_OR_RETURN(tensorflow::NodeDef def, NodeDefFromEdges(*node));
  absl::StatusOr<std::unique_ptr<OpKernel>> kernel =
      KernelRegistry::Global()->CreateKernel(device_, def);
  if (!kernel.ok()) {
    return Annotate(kernel.status(), absl::StrCat("[", node->type_string(), " '", node->name(),
                                                  "'] cannot create kernel: "));
  }
  item->kernel = kernel->get();
  item->async = item->kernel->AsAsync();
  item->moves_inputs = device_->device_allocator() != nullptr;
  // On a device with its own memory (a GPU) a kernel only queues its work
  // on the device's stream, which runs it in order anyway: handing it to
  // another thread buys no parallelism and costs a wake-up. As TensorFlow's
  // executor, such kernels are never expensive and run inline.
  item->expensive = item->kernel->IsExpensive() && !item->moves_inputs;
  item->is_send = node->IsSend();
  item->is_switch = node->IsSwitch();
  item->is_merge = node->IsMerge();
  item->is_control_trigger = node->type_string() == "ControlTrigger";
  item->is_enter = node->IsEnter();
  item->is_exit = node->IsExit();
  item->is_next_iteration = node->IsNextIteration();
  if (item->is_enter) {
    RETURN_IF_ERROR(GetNodeAttr(node->def(), "is_constant", &item->is_constant_enter));
  }
  for (const Edge* e : node->in_edges()) item->num_control_inputs += e->IsControlEdge();
  item->num_inputs = item->kernel->num_inputs();
  for (int i = 0; i < item->num_inputs; ++i) {
    item->input_is_ref.push_back(IsRefType(item->kernel->input_type(i)));
  }
  item->output_consumed.assign(item->kernel->num_outputs(), false);
  item->initial_pending = static_cast<int>(node->in_edges().size());
  kernels_.push_back(*std::move(kernel));
  return absl::OkStatus();
}

// As TensorFlow's executor: a kernel that says it is expensive starts as
// such (a huge estimate) and is timed on every run; the estimate moves a
// tenth of the way to each measurement, so after some tens of runs under the
// threshold (about 3 us) the kernel runs inline. Timed in TSC cycles where
// there is one (a few ns to read, where a clock call costs tens).
constexpr int64_t kInitialCost = 100'000'000;
#if defined(__x86_64__)
constexpr int64_t kExpensiveCost = 8'000;  // cycles
#else
constexpr int64_t kExpensiveCost = 3'000;  // ns
#endif
constexpr int64_t kCostDecay = 10;

bool Executor::IsExpensive(int id) const {
  return items_[id].waits_for_device ||
         (items_[id].expensive && cost_[id].load(std::memory_order_relaxed) > kExpensiveCost);
}

void Executor::UpdateCost(int id, int64_t elapsed) const {
  std::atomic<int64_t>& cost = cost_[id];
  const int64_t prev = cost.load(std::memory_order_relaxed);
  cost.store(((kCostDecay - 1) * prev + elapsed) / kCostDecay, std::memory_order_relaxed);
}

absl::Status Executor::Initialize(const Graph& graph) {
  ASSIGN_OR_RETURN(ControlFlowInfo cf, BuildControlFlowInfo(graph));
  for (const LoopFrame& f : cf.frames) {
    frames_.push_back(FrameInfo{f.name, f.parallel_iterations, f.num_enters, {}, 0});
  }
  const std::vector<Node*> nodes = graph.nodes();
  std::vector<int> index_of(graph.num_node_ids(), -1);
  items_.resize(nodes.size());
  cost_.reset(new std::atomic<int64_t>[nodes.size()]);
  for (size_t i = 0; i < nodes.size(); ++i) cost_[i].store(kInitialCost);
  for (size_t i = 0; i < nodes.size(); ++i) {
    index_of[nodes[i]->id()] = static_cast<int>(i);
    NodeItem& item = items_[i];
    RETURN_IF_ERROR(InitializeNode(nodes[i], &item));
    item.frame = cf.frame_of[nodes[i]->id()];
    item.child_frame = cf.entered[nodes[i]->id()];
    FrameInfo& frame = frames_[item.frame];
    item.local = static_cast<int>(frame.items.size());
    frame.items.push_back(static_cast<int>(i));
    item.input_start = frame.total_inputs;
    frame.total_inputs += item.num_inputs;
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    NodeItem& item = items_[i];
    item.out_start = static_cast<int>(out_edges_.size());
    for (const Edge* e : nodes[i]->out_edges()) {
      NodeItem& dst = items_[index_of[e->dst->id()]];
      OutEdge out{index_of[e->dst->id()], e->src_output, -1, false};
      if (!e->IsControlEdge()) {
        if (dst.input_is_ref[e->dst_input] && !IsRefType(item.kernel->output_type(e->src_output))) {
          return absl::InvalidArgumentError(
              absl::StrCat(ErrorPrefix(*dst.kernel), "input ", e->dst_input,
                           " expects a reference but '", nodes[i]->name(), ":", e->src_output,
                           "' is a ", DataTypeString(item.kernel->output_type(e->src_output))));
        }
        out.dst_entry = dst.input_start + e->dst_input;
        item.output_consumed[e->src_output] = true;
        if (dst.moves_inputs &&
            item.kernel->output_memory_type(e->src_output) == MemoryType::kDevice &&
            dst.kernel->input_memory_type(e->dst_input) == MemoryType::kHost) {
          dst.waits_for_device = true;
        }
      }
      out_edges_.push_back(out);
    }
    item.num_out = static_cast<int>(out_edges_.size()) - item.out_start;
    // The last data edge of each output may move the value instead of copying.
    std::vector<bool> seen(item.output_consumed.size(), false);
    for (int k = item.num_out - 1; k >= 0; --k) {
      OutEdge& e = out_edges_[item.out_start + k];
      if (e.dst_entry < 0 || seen[e.src_output]) continue;
      seen[e.src_output] = true;
      e.last_use = true;
    }
    if (item.initial_pending == 0) roots_.push_back(static_cast<int>(i));
  }
  return absl::OkStatus();
}

void Executor::RunAsync(const Args& args, DoneCallback done) {
  (new ExecutorState(this, args, std::move(done)))->Start();
}

absl::Status Executor::Run(const Args& args) {
  CancellationManager local_cm;
  Args a = args;
  if (a.cancellation_manager == nullptr) a.cancellation_manager = &local_cm;
  absl::Notification finished;
  absl::Status status;
  RunAsync(a, [&](absl::Status s) {
    status = std::move(s);
    finished.Notify();
  });
  if (finished.WaitForNotificationWithDeadline(args.deadline)) return status;
  absl::Status timeout =
      absl::DeadlineExceededError(absl::StrCat("[Executor] step ", args.step_id, " on ",
                                               device_->name(), " passed its deadline; cancelled"));
  a.cancellation_manager->StartCancel();
  if (a.rendezvous != nullptr) a.rendezvous->StartAbort(timeout);
  finished.WaitForNotification();
  return timeout;
}

}  // namespace dflow
