#include "dflow/runtime/executor.h"

#include <atomic>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "dflow/framework/status.h"

namespace dflow {

// --- immutable per-executor data ---------------------------------------------

struct Executor::OutEdge {
  int dst;         // Item index of the consumer.
  int src_output;  // kControlSlot for a control edge.
  int dst_entry;   // Index into the step's input entries; -1 for control.
  bool last_use;   // Last data edge reading src_output: may move the value.
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
  int num_control_inputs = 0;
  int input_start = 0;   // First input entry.
  int num_inputs = 0;
  int out_start = 0;  // First OutEdge.
  int num_out = 0;
  int initial_pending = 0;
  absl::InlinedVector<bool, 4> input_is_ref;
  absl::InlinedVector<bool, 4> output_consumed;
  std::string prefix;  // "[Op 'node'] "
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

// "[Op 'node'] " + message, unless the kernel already said so; keeps code
// and payloads.
absl::Status Annotate(const absl::Status& s, const std::string& prefix) {
  if (absl::StartsWith(s.message(), prefix)) return s;
  absl::Status out(s.code(), absl::StrCat(prefix, s.message()));
  s.ForEachPayload(
      [&](absl::string_view url, const absl::Cord& payload) { out.SetPayload(url, payload); });
  return out;
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
class ExecutorState {
 public:
  ExecutorState(const Executor* exec, const Executor::Args& args, Executor::DoneCallback done);
  ExecutorState(const ExecutorState&) = delete;
  ExecutorState& operator=(const ExecutorState&) = delete;

  void Start();

 private:
  using Item = Executor::NodeItem;
  using Params = OpKernelContext::Params;
  using ReadyQueue = absl::InlinedVector<int, 16>;
  using ReadyList = absl::InlinedVector<int, 8>;

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
  // An async kernel in flight. `phase` bit 1: ComputeAsync returned; bit 2:
  // done was called. Whoever sets the second bit completes the node.
  struct AsyncState {
    AsyncState(const Params& p, int id) : params(p), ctx(&params), id(id) {}
    Params params;
    OpKernelContext ctx;
    int id;
    std::atomic<int> phase{0};
    absl::Status status;
  };

  // Runs `id` and what it makes ready inline (pool entry point).
  void Process(int id);
  void RunLoop(ReadyQueue* queue);
  // Each returns true when the step finished and `this` is deleted.
  bool RunNode(int id, Params* params, ReadyQueue* inline_ready);
  bool StartAsync(int id, const Params& params, ReadyQueue* inline_ready);
  bool AsyncDone(AsyncState* state, ReadyQueue* inline_ready);
  bool Complete(int id, absl::Status s, OpKernelContext* ctx, ReadyQueue* inline_ready);
  bool ScheduleReady(const ReadyList& ready, ReadyQueue* inline_ready);
  void Finish();

  void InitParams(Params* params);
  absl::Status PrepareInputs(int id, bool dead, Params* params);
  absl::Status PropagateOutputs(const Item& item, OpKernelContext* ctx, ReadyList* ready);
  void PropagateDead(const Item& item, ReadyList* ready);
  // Delivers one edge to a Merge; `value` is null for a control edge.
  void ActivateMerge(const Executor::OutEdge& e, bool dead, TensorValue* value, ReadyList* ready);
  void SetEntry(const Executor::OutEdge& e, TensorValue* value);
  void Decrement(int dst, ReadyList* ready) {
    if (nodes_[dst].pending.fetch_sub(1, std::memory_order_acq_rel) == 1) ready->push_back(dst);
  }
  void ClearInputs(const Item& item);
  void RecordError(const Item& item, const absl::Status& s);

  const Executor* exec_;
  const Executor::Args args_;
  Executor::DoneCallback done_;
  std::unique_ptr<CancellationManager> own_cm_;  // When args_ has none.
  CancellationManager* cm_;
  std::function<void(std::function<void()>)> kernel_runner_;
  std::unique_ptr<Entry[]> entries_;
  std::unique_ptr<NodeState[]> nodes_;
  std::atomic<int64_t> outstanding_{0};  // Nodes ready or running.
  std::atomic<bool> aborted_{false};

  absl::Mutex merge_mu_;  // Guards the merge_* fields of nodes_.

  absl::Mutex mu_;
  absl::Status status_ ABSL_GUARDED_BY(mu_);  // The first error.
};

ExecutorState::ExecutorState(const Executor* exec, const Executor::Args& args,
                             Executor::DoneCallback done)
    : exec_(exec),
      args_(args),
      done_(std::move(done)),
      entries_(new Entry[exec->total_inputs_]),
      nodes_(new NodeState[exec->items_.size()]) {
  if (args_.cancellation_manager == nullptr) own_cm_ = std::make_unique<CancellationManager>();
  cm_ = own_cm_ ? own_cm_.get() : args_.cancellation_manager;
  if (args_.runner) {
    kernel_runner_ = [this](std::function<void()> fn) { args_.runner(std::move(fn)); };
  } else {
    kernel_runner_ = [](std::function<void()> fn) { fn(); };
  }
  for (size_t i = 0; i < exec->items_.size(); ++i) {
    nodes_[i].pending.store(exec->items_[i].initial_pending, std::memory_order_relaxed);
    nodes_[i].merge_controls = exec->items_[i].num_control_inputs;
  }
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
  // One extra count held by this function, so the step cannot finish (and
  // delete *this) while roots are still being handed out.
  outstanding_.store(static_cast<int64_t>(roots.size()) + 1, std::memory_order_relaxed);
  ReadyQueue queue;
  for (auto it = roots.rbegin(); it != roots.rend(); ++it) {
    if (exec_->items_[*it].expensive && args_.runner) {
      args_.runner([this, id = *it] { Process(id); });
    } else {
      queue.push_back(*it);
    }
  }
  if (!queue.empty()) RunLoop(&queue);
  if (outstanding_.fetch_sub(1, std::memory_order_acq_rel) == 1) Finish();
}

void ExecutorState::Process(int id) {
  ReadyQueue queue;
  queue.push_back(id);
  RunLoop(&queue);
}

void ExecutorState::RunLoop(ReadyQueue* queue) {
  Params params;
  InitParams(&params);
  while (!queue->empty()) {
    const int id = queue->back();
    queue->pop_back();
    if (RunNode(id, &params, queue)) return;
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
}

bool ExecutorState::RunNode(int id, Params* params, ReadyQueue* inline_ready) {
  const Item& item = exec_->items_[id];
  ReadyList ready;
  if (aborted_.load(std::memory_order_acquire)) {
    ClearInputs(item);
    return ScheduleReady(ready, inline_ready);
  }
  const bool dead = nodes_[id].dead.load(std::memory_order_relaxed);
  if (dead && !item.is_send) {
    ClearInputs(item);
    PropagateDead(item, &ready);
    return ScheduleReady(ready, inline_ready);
  }
  absl::Status s = PrepareInputs(id, dead, params);
  if (!s.ok()) return Complete(id, s, nullptr, inline_ready);
  if (item.async != nullptr) return StartAsync(id, *params, inline_ready);
  OpKernelContext ctx(params);
  s = item.kernel->Compute(&ctx);
  return Complete(id, std::move(s), &ctx, inline_ready);
}

bool ExecutorState::StartAsync(int id, const Params& params, ReadyQueue* inline_ready) {
  auto* state = new AsyncState(params, id);
  exec_->items_[id].async->ComputeAsync(&state->ctx, [this, state](absl::Status s) {
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
  return Complete(state->id, std::move(state->status), &state->ctx, inline_ready);
}

bool ExecutorState::Complete(int id, absl::Status s, OpKernelContext* ctx,
                             ReadyQueue* inline_ready) {
  const Item& item = exec_->items_[id];
  ReadyList ready;
  if (s.ok()) s = PropagateOutputs(item, ctx, &ready);
  ClearInputs(item);
  if (!s.ok()) RecordError(item, s);
  return ScheduleReady(ready, inline_ready);
}

absl::Status ExecutorState::PrepareInputs(int id, bool dead, Params* params) {
  const Item& item = exec_->items_[id];
  params->op_kernel = item.kernel;
  params->is_input_dead = dead;
  params->inputs.clear();
  const int live = item.is_merge ? nodes_[id].merge_live : -1;
  for (int i = 0; i < item.num_inputs; ++i) {
    Entry& e = entries_[item.input_start + i];
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
    params->inputs.push_back(TensorValue{&e.val});
  }
  return absl::OkStatus();
}

absl::Status ExecutorState::PropagateOutputs(const Item& item, OpKernelContext* ctx,
                                             ReadyList* ready) {
  const bool node_dead = ctx->is_output_dead();
  absl::InlinedVector<TensorValue, 4> outs(item.kernel->num_outputs());
  if (!node_dead) {
    for (size_t i = 0; i < outs.size(); ++i) {
      outs[i] = ctx->release_output(static_cast<int>(i));
      if (outs[i].tensor == nullptr && item.output_consumed[i] && !item.is_switch) {
        return absl::InternalError(absl::StrCat("kernel did not set output ", i));
      }
    }
  }
  const Executor::OutEdge* edges = exec_->out_edges_.data() + item.out_start;
  for (int k = 0; k < item.num_out; ++k) {
    const Executor::OutEdge& e = edges[k];
    // A control edge is dead with its node; a data edge also when its
    // output was left unset (the branch a Switch did not take).
    TensorValue* value = node_dead || e.dst_entry < 0 ? nullptr : &outs[e.src_output];
    const bool dead = node_dead || (value != nullptr && value->tensor == nullptr);
    if (exec_->items_[e.dst].is_merge) {
      ActivateMerge(e, dead, value, ready);
      continue;
    }
    if (dead) {
      nodes_[e.dst].dead.store(true, std::memory_order_relaxed);
    } else if (e.dst_entry >= 0) {
      SetEntry(e, value);
    }
    Decrement(e.dst, ready);
  }
  return absl::OkStatus();
}

void ExecutorState::SetEntry(const Executor::OutEdge& e, TensorValue* value) {
  Entry& entry = entries_[e.dst_entry];
  if (value->is_ref()) {
    entry.ref = value->tensor;
    entry.ref_mu = value->mutex;
  } else if (e.last_use) {
    entry.val = std::move(*value->tensor);
  } else {
    entry.val = *value->tensor;
  }
}

void ExecutorState::ActivateMerge(const Executor::OutEdge& e, bool dead, TensorValue* value,
                                  ReadyList* ready) {
  const Item& dst = exec_->items_[e.dst];
  NodeState& node = nodes_[e.dst];
  absl::MutexLock l(&merge_mu_);
  if (node.merge_fired) return;  // A later live input (only in loops) is dropped.
  if (e.dst_entry < 0) {
    --node.merge_controls;  // Live or dead, a control input only counts down.
  } else if (dead) {
    ++node.merge_dead;
  } else if (node.merge_live < 0) {
    node.merge_live = e.dst_entry - dst.input_start;
    SetEntry(e, value);
  }
  if (node.merge_controls > 0) return;
  if (node.merge_live < 0 && node.merge_dead < dst.num_inputs) return;
  node.merge_fired = true;
  if (node.merge_live < 0) node.dead.store(true, std::memory_order_relaxed);
  ready->push_back(e.dst);
}

void ExecutorState::PropagateDead(const Item& item, ReadyList* ready) {
  const Executor::OutEdge* edges = exec_->out_edges_.data() + item.out_start;
  for (int k = 0; k < item.num_out; ++k) {
    const Executor::OutEdge& e = edges[k];
    if (exec_->items_[e.dst].is_merge) {
      ActivateMerge(e, /*dead=*/true, nullptr, ready);
      continue;
    }
    nodes_[e.dst].dead.store(true, std::memory_order_relaxed);
    Decrement(e.dst, ready);
  }
}

void ExecutorState::ClearInputs(const Item& item) {
  for (int i = 0; i < item.num_inputs; ++i) {
    Entry& e = entries_[item.input_start + i];
    e.val = Tensor();
    e.ref = nullptr;
    e.ref_mu = nullptr;
  }
}

// The node is still outstanding here, so the step (and *this) stays alive.
void ExecutorState::RecordError(const Item& item, const absl::Status& s) {
  absl::Status annotated = Annotate(s, item.prefix);
  if (cm_->IsCancelled()) annotated = MarkDerived(std::move(annotated));
  {
    absl::MutexLock l(&mu_);
    if (!status_.ok()) return;
    status_ = annotated;
  }
  aborted_.store(true, std::memory_order_release);
  // Cancel first: a waiting Recv then fails as Cancelled (derived) rather
  // than with a copy of this error.
  cm_->StartCancel();
  if (args_.rendezvous != nullptr) args_.rendezvous->StartAbort(annotated);
}

bool ExecutorState::ScheduleReady(const ReadyList& ready, ReadyQueue* inline_ready) {
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
    // The completed node keeps its count until every ready node is handed
    // to the pool, so the step cannot finish under our feet.
    outstanding_.fetch_add(n, std::memory_order_relaxed);
    for (int id : ready) args_.runner([this, id] { Process(id); });
    if (outstanding_.fetch_sub(1, std::memory_order_acq_rel) != 1) return false;
    Finish();
    return true;
  }
  if (n > 1) outstanding_.fetch_add(n - 1, std::memory_order_relaxed);
  // Cheap nodes run inline; expensive ones go to the pool, except one kept
  // for this thread when it has nothing else to do.
  int expensive = -1;
  for (int id : ready) {
    if (!exec_->items_[id].expensive || !args_.runner) {
      inline_ready->push_back(id);
      continue;
    }
    if (expensive >= 0) args_.runner([this, prev = expensive] { Process(prev); });
    expensive = id;
  }
  if (expensive >= 0) {
    if (inline_ready->empty()) {
      inline_ready->push_back(expensive);
    } else {
      args_.runner([this, expensive] { Process(expensive); });
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
  Executor::DoneCallback done = std::move(done_);
  delete this;
  done(std::move(status));
}

// --- Executor -------------------------------------------------------------------

Executor::Executor(std::unique_ptr<Graph> graph, Device* device)
    : graph_(std::move(graph)), device_(device) {}

Executor::~Executor() = default;

absl::StatusOr<std::unique_ptr<Executor>> Executor::Create(std::unique_ptr<Graph> graph,
                                                           Device* device) {
  if (graph == nullptr || device == nullptr) {
    return absl::InvalidArgumentError("[Executor] needs a graph and a device");
  }
  std::unique_ptr<Executor> exec(new Executor(std::move(graph), device));
  RETURN_IF_ERROR(exec->Initialize());
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
  item->expensive = item->kernel->IsExpensive();
  item->is_send = node->IsSend();
  item->is_switch = node->type_string() == "Switch" || node->type_string() == "RefSwitch";
  item->is_merge = node->type_string() == "Merge" || node->type_string() == "RefMerge";
  for (const Edge* e : node->in_edges()) item->num_control_inputs += e->IsControlEdge();
  item->num_inputs = item->kernel->num_inputs();
  item->prefix = absl::StrCat("[", node->type_string(), " '", node->name(), "'] ");
  for (int i = 0; i < item->num_inputs; ++i) {
    item->input_is_ref.push_back(IsRefType(item->kernel->input_type(i)));
  }
  item->output_consumed.assign(item->kernel->num_outputs(), false);
  item->initial_pending = static_cast<int>(node->in_edges().size());
  kernels_.push_back(*std::move(kernel));
  return absl::OkStatus();
}

absl::Status Executor::Initialize() {
  const std::vector<Node*> nodes = graph_->nodes();
  std::vector<int> index_of(graph_->num_node_ids(), -1);
  items_.resize(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    index_of[nodes[i]->id()] = static_cast<int>(i);
    RETURN_IF_ERROR(InitializeNode(nodes[i], &items_[i]));
    items_[i].input_start = total_inputs_;
    total_inputs_ += items_[i].num_inputs;
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    NodeItem& item = items_[i];
    item.out_start = static_cast<int>(out_edges_.size());
    for (const Edge* e : nodes[i]->out_edges()) {
      const NodeItem& dst = items_[index_of[e->dst->id()]];
      OutEdge out{index_of[e->dst->id()], e->src_output, -1, false};
      if (!e->IsControlEdge()) {
        if (dst.input_is_ref[e->dst_input] && !IsRefType(item.kernel->output_type(e->src_output))) {
          return absl::InvalidArgumentError(
              absl::StrCat(dst.prefix, "input ", e->dst_input, " expects a reference but '",
                           nodes[i]->name(), ":", e->src_output, "' is a ",
                           DataTypeString(item.kernel->output_type(e->src_output))));
        }
        out.dst_entry = dst.input_start + e->dst_input;
        item.output_consumed[e->src_output] = true;
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
