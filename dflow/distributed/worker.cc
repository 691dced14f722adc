#include "dflow/distributed/worker.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dflow/distributed/deadline_timer.h"
#include "dflow/distributed/error_body.h"
#include "dflow/distributed/step_rendezvous.h"
#include "dflow/framework/cancellation.h"
#include "dflow/framework/host_memory.h"
#include "dflow/framework/status.h"
#include "dflow/framework/variant.h"
#include "dflow/runtime/executor.h"
#include "dflow/runtime/function.h"
#include "dflow/runtime/graph.h"
#include "dflow/runtime/partition.h"
#include "dflow/runtime/session_util.h"

namespace dflow {

struct Worker::GraphItem {
  std::string handle;
  int64_t num_nodes = 0;  // Of the registered GraphDef.
  std::vector<std::unique_ptr<Executor>> executors;
};

struct Worker::Session {
  std::string handle;
  absl::Mutex mu;
  absl::flat_hash_map<std::string, std::shared_ptr<GraphItem>> graphs ABSL_GUARDED_BY(mu);
};

// One RunGraph call in flight.
struct Worker::RunState {
  const tensorflow::RunGraphRequest* req = nullptr;
  tensorflow::RunGraphResponse* resp = nullptr;
  StatusCallback done;
  std::shared_ptr<const GraphItem> graph;
  std::shared_ptr<StepRendezvous> rendez;
  std::shared_ptr<Running> running;  // The worker's, until this RunGraph has ended.
  DeadlineTimer::Id timer = DeadlineTimer::kNone;
  // One per executor when the request asks for step stats; else empty.
  std::vector<std::unique_ptr<StepStatsCollector>> stats;

  absl::Mutex mu;
  absl::Status status ABSL_GUARDED_BY(mu);
  int pending ABSL_GUARDED_BY(mu) = 0;

  // Keeps the root cause: a derived error never replaces a real one.
  void Record(const absl::Status& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (!s.ok() && (status.ok() || (IsDerivedError(status) && !IsDerivedError(s)))) status = s;
  }
};

namespace {

// The device every node of `g` is assigned to; nullptr when they are on
// several, or there are no nodes.
Device* OnlyDevice(const Graph& g, const DeviceMgr& devices) {
  const std::vector<Node*> nodes = g.nodes();
  if (nodes.empty()) return nullptr;
  const std::string& first = nodes.front()->assigned_device_name();
  for (const Node* n : nodes) {
    if (n->assigned_device_name() != first) return nullptr;
  }
  absl::StatusOr<Device*> device = devices.LookupDevice(first);
  return device.ok() ? *device : nullptr;
}

// "[Worker <method>] " before a failure's message; payloads kept, so the
// master still sees which errors are derived.
absl::Status Prefixed(absl::string_view method, const absl::Status& s) {
  if (s.ok()) return s;
  return WithPrefix(s, absl::StrCat("[Worker ", method, "] "));
}

}  // namespace

Worker::Worker(DeviceMgr* devices, WorkerOptions options)
    : devices_(devices), options_(std::move(options)), timer_(std::make_unique<DeadlineTimer>()) {
  std::vector<Device*> list = devices_->ListDevices();
  task_name_ = list.empty() ? "" : list.front()->parsed_name().TaskName();
  pool_ = options_.inter_op_pool;
  if (pool_ == nullptr) {
    own_pool_ = std::make_unique<ThreadPool>(
        "worker", std::max(2, static_cast<int>(std::thread::hardware_concurrency())));
    pool_ = own_pool_.get();
  }
  default_session_ = std::make_shared<Session>();
}

Worker::~Worker() {
  absl::flat_hash_map<int64_t, Step> steps;
  {
    absl::MutexLock l(&mu_);
    steps.swap(steps_);
  }
  // Outside mu_: the receives this answers call RecvEnded.
  for (auto& [id, step] : steps) {
    step.rendez->StartAbort(absl::CancelledError("[Worker] the worker is shutting down"));
  }
  // An aborted step ends once the kernels already running return, on
  // threads (a shared pool's) that then call this worker: wait for them, as
  // long as a kernel may reasonably take.
  constexpr absl::Duration kShutdownGrace = absl::Seconds(30);
  auto none_left = std::make_shared<absl::Notification>();
  running_->none_left = none_left;
  running_.reset();
  if (!none_left->WaitForNotificationWithTimeout(kShutdownGrace)) {
    std::fprintf(stderr, "[Worker] %s: a step still runs %s after shutdown began; leaving it\n",
                 task_name_.c_str(), absl::FormatDuration(kShutdownGrace).c_str());
  }
  timer_.reset();  // Before the state its callbacks use (RecvEnded) goes.
}

int Worker::NumLiveSteps() const {
  absl::MutexLock l(&mu_);
  return static_cast<int>(steps_.size());
}

// --- status and sessions ---------------------------------------------------------------

void Worker::GetStatusAsync(const CallOptions&, const tensorflow::GetStatusRequest*,
                            tensorflow::GetStatusResponse* resp, StatusCallback done) {
  resp->clear_device_attributes();
  for (Device* d : devices_->ListDevices()) d->ToAttributes(resp->add_device_attributes());
  done(absl::OkStatus());
}

void Worker::CreateWorkerSessionAsync(const CallOptions&,
                                      const tensorflow::CreateWorkerSessionRequest* req,
                                      tensorflow::CreateWorkerSessionResponse*,
                                      StatusCallback done) {
  if (req->session_handle().empty()) {
    done(absl::InvalidArgumentError("[Worker CreateWorkerSession] the session handle is empty"));
    return;
  }
  auto session = std::make_shared<Session>();
  session->handle = req->session_handle();
  absl::MutexLock l(&mu_);
  if (!sessions_.try_emplace(req->session_handle(), std::move(session)).second) {
    done(absl::AlreadyExistsError(absl::StrCat("[Worker CreateWorkerSession] session '",
                                               req->session_handle(), "' already exists on ",
                                               task_name_)));
    return;
  }
  done(absl::OkStatus());
}

void Worker::DeleteWorkerSessionAsync(const CallOptions&,
                                      const tensorflow::DeleteWorkerSessionRequest* req,
                                      tensorflow::DeleteWorkerSessionResponse*,
                                      StatusCallback done) {
  std::shared_ptr<Session> gone;
  {
    absl::MutexLock l(&mu_);
    auto it = sessions_.find(req->session_handle());
    if (it != sessions_.end()) {
      gone = std::move(it->second);
      sessions_.erase(it);
    }
  }
  done(absl::OkStatus());
  // `gone` and its graphs are freed after the reply (unless a step still
  // holds one).
  int64_t nodes = 0;
  if (gone != nullptr) {
    absl::MutexLock l(&gone->mu);
    for (const auto& [handle, graph] : gone->graphs) nodes += graph->num_nodes;
  }
  gone.reset();
  ReleaseFreedHostMemory(nodes);
}

absl::StatusOr<std::shared_ptr<Worker::Session>> Worker::FindSession(const std::string& handle,
                                                                     bool create_called) const {
  if (!create_called) return default_session_;
  absl::MutexLock l(&mu_);
  auto it = sessions_.find(handle);
  if (it == sessions_.end()) {
    return absl::AbortedError(absl::StrCat("session handle '", handle, "' is not found on ",
                                           task_name_, "; possibly this worker restarted"));
  }
  return it->second;
}

absl::StatusOr<std::shared_ptr<const Worker::GraphItem>> Worker::FindGraph(
    const std::string& session, bool create_called, const std::string& graph) const {
  ASSIGN_OR_RETURN(std::shared_ptr<Session> s, FindSession(session, create_called));
  absl::MutexLock l(&s->mu);
  auto it = s->graphs.find(graph);
  if (it == s->graphs.end()) {
    return absl::AbortedError(absl::StrCat("graph handle '", graph, "' is not found on ",
                                           task_name_, "; possibly this worker restarted"));
  }
  return std::shared_ptr<const GraphItem>(it->second);
}

// --- graphs ------------------------------------------------------------------------------

absl::StatusOr<std::shared_ptr<Worker::GraphItem>> Worker::BuildGraph(
    const tensorflow::GraphDef& def) {
  ASSIGN_OR_RETURN(std::unique_ptr<Graph> g, GraphFromGraphDef(def));
  for (Node* n : g->nodes()) {
    Device* device = devices_->HostCPU();
    if (!n->requested_device().empty()) {
      absl::StatusOr<Device*> found = devices_->LookupDevice(n->requested_device());
      if (!found.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "node '", n->name(), "' is placed on '", n->requested_device(),
            "', which is not a device of ", task_name_, " ", devices_->DeviceNamesString()));
      }
      device = *found;
    }
    if (device == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat("node '", n->name(), "' has no device and ",
                                                        task_name_,
                                                        " has no CPU device to run it on"));
    }
    n->set_assigned_device_name(device->name());
  }
  auto item = std::make_shared<GraphItem>();
  // A graph on one device is its own partition (nothing to send or
  // receive): it goes to its executor as it is, not through a GraphDef and
  // a second Graph, which for a large graph cost as much as the executor.
  if (Device* only = OnlyDevice(*g, *devices_); only != nullptr) {
    ASSIGN_OR_RETURN(std::unique_ptr<Executor> exec, Executor::Create(std::move(g), only));
    item->executors.push_back(std::move(exec));
    return item;
  }
  PartitionOptions popts;
  popts.get_incarnation = [this](const std::string& d) -> uint64_t {
    absl::StatusOr<Device*> dev = devices_->LookupDevice(d);
    return dev.ok() ? (*dev)->incarnation() : 0;
  };
  ASSIGN_OR_RETURN(auto parts, Partition(*g, popts));
  g.reset();
  // Each part's GraphDef goes once its executor holds what it needs.
  while (!parts.empty()) {
    auto node = parts.extract(parts.begin());
    ASSIGN_OR_RETURN(Device * device, devices_->LookupDevice(node.key()));
    ASSIGN_OR_RETURN(std::unique_ptr<Graph> part, Graph::FromGraphDef(node.mapped()));
    node.mapped().Clear();
    ASSIGN_OR_RETURN(std::unique_ptr<Executor> exec, Executor::Create(std::move(part), device));
    item->executors.push_back(std::move(exec));
  }
  return item;
}

void Worker::RegisterGraphAsync(const CallOptions&, const tensorflow::RegisterGraphRequest* req,
                                tensorflow::RegisterGraphResponse* resp, StatusCallback done) {
  absl::StatusOr<std::shared_ptr<Session>> session =
      FindSession(req->session_handle(), req->create_worker_session_called());
  if (!session.ok()) {
    done(Prefixed("RegisterGraph", session.status()));
    return;
  }
  if (absl::Status s =
          CheckGraphNodeLimit(GraphNodeCount(req->graph_def()), options_.max_graph_nodes, "",
                              "the worker's max_graph_nodes");
      !s.ok()) {
    done(Prefixed("RegisterGraph", s));
    return;
  }
  absl::StatusOr<std::shared_ptr<GraphItem>> item = BuildGraph(req->graph_def());
  if (!item.ok()) {
    done(Prefixed("RegisterGraph", item.status()));
    return;
  }
  (*item)->handle = absl::StrCat("graph_", next_graph_id_.fetch_add(1));
  (*item)->num_nodes = GraphNodeCount(req->graph_def());
  resp->set_graph_handle((*item)->handle);
  resp->set_dflow_cleanup_with_run_graph(true);
  {
    absl::MutexLock l(&(*session)->mu);
    (*session)->graphs[(*item)->handle] = *std::move(item);
  }
  done(absl::OkStatus());
}

void Worker::DeregisterGraphAsync(const CallOptions&, const tensorflow::DeregisterGraphRequest* req,
                                  tensorflow::DeregisterGraphResponse*, StatusCallback done) {
  absl::StatusOr<std::shared_ptr<Session>> session =
      FindSession(req->session_handle(), req->create_worker_session_called());
  if (!session.ok()) {
    done(Prefixed("DeregisterGraph", session.status()));
    return;
  }
  std::shared_ptr<GraphItem> gone;
  {
    absl::MutexLock l(&(*session)->mu);
    auto it = (*session)->graphs.find(req->graph_handle());
    if (it != (*session)->graphs.end()) {
      gone = std::move(it->second);
      (*session)->graphs.erase(it);
    }
  }
  if (gone == nullptr) {
    done(absl::AbortedError(absl::StrCat("[Worker DeregisterGraph] graph handle '",
                                         req->graph_handle(), "' is not found on ", task_name_)));
    return;
  }
  done(absl::OkStatus());
  const int64_t nodes = gone->num_nodes;
  gone.reset();
  ReleaseFreedHostMemory(nodes);
}

// --- steps -------------------------------------------------------------------------------

std::shared_ptr<StepRendezvous> Worker::FindOrCreateStep(int64_t step_id, StepUse use) {
  {
    absl::MutexLock l(&mu_);
    if (!cleaned_steps_.contains(step_id)) {
      Step& step = steps_[step_id];
      if (step.rendez == nullptr) {
        step.rendez =
            std::make_shared<StepRendezvous>(step_id, task_name_, options_.worker_for_task);
      }
      if (use == StepUse::kRun) {
        step.ran = true;
      } else {
        ++step.waiting_recvs;
      }
      return step.rendez;
    }
  }
  auto over = std::make_shared<StepRendezvous>(step_id, task_name_, options_.worker_for_task);
  over->StartAbort(MarkDerived(absl::AbortedError(
      absl::StrCat("[Worker] step ", step_id, " was already cleaned up on ", task_name_))));
  return over;
}

void Worker::RecvEnded(int64_t step_id, const StepRendezvous* rendez) {
  std::shared_ptr<StepRendezvous> gone;
  {
    absl::MutexLock l(&mu_);
    auto it = steps_.find(step_id);
    if (it == steps_.end() || it->second.rendez.get() != rendez) return;
    if (--it->second.waiting_recvs > 0 || it->second.ran) return;
    gone = std::move(it->second.rendez);
    steps_.erase(it);
  }
  gone->StartAbort(absl::DeadlineExceededError(
      absl::StrCat("[Worker] step ", step_id, " never ran on ", task_name_)));
}

absl::Status Worker::FeedSends(const tensorflow::RunGraphRequest& req, const TensorSends& sends,
                               StepRendezvous* rendez) {
  for (const tensorflow::NamedTensorProto& send : req.send()) {
    ASSIGN_OR_RETURN(Rendezvous::ParsedKey key, Rendezvous::ParseKey(send.name()));
    absl::StatusOr<Tensor> value = Tensor::FromProto(send.tensor());
    if (!value.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the tensor sent for '", send.name(), "' cannot be decoded: ", value.status().message()));
    }
    RETURN_IF_ERROR(rendez->Send(key, *value, /*is_dead=*/false));
  }
  for (const auto& [name, value] : sends) {
    ASSIGN_OR_RETURN(Rendezvous::ParsedKey key, Rendezvous::ParseKey(name));
    RETURN_IF_ERROR(rendez->Send(key, value, /*is_dead=*/false));
  }
  return absl::OkStatus();
}

absl::Status Worker::CollectRecvs(const tensorflow::RunGraphRequest& req, StepRendezvous* rendez,
                                  tensorflow::RunGraphResponse* resp) {
  for (const std::string& name : req.recv_key()) {
    ASSIGN_OR_RETURN(Rendezvous::ParsedKey key, Rendezvous::ParseKey(name));
    // The step has finished, so the value is either here now or never.
    struct Got {
      bool ready = false;
      absl::Status status;
      Tensor value;
      bool dead = false;
    };
    auto got = std::make_shared<Got>();
    rendez->RecvLocalAsync(key, [got](const absl::Status& s, const Tensor& v, bool dead) {
      got->ready = true;
      got->status = s;
      got->value = v;
      got->dead = dead;
    });
    if (!got->ready) {
      return absl::InvalidArgumentError(
          absl::StrCat("recv_key '", name, "' was not produced by the graph"));
    }
    RETURN_IF_ERROR(got->status);
    if (got->dead) {
      return absl::InvalidArgumentError(
          absl::StrCat("recv_key '", name, "' was not computed (its input was dead)"));
    }
    RETURN_IF_ERROR(CheckEncodable(got->value, absl::StrCat("recv_key '", name, "'")));
    tensorflow::NamedTensorProto* out = resp->add_recv();
    out->set_name(name);
    got->value.AsProtoTensorContent(out->mutable_tensor());
  }
  return absl::OkStatus();
}

void Worker::RunGraphAsync(const CallOptions& opts, const tensorflow::RunGraphRequest* req,
                           tensorflow::RunGraphResponse* resp, StatusCallback done) {
  RunGraphWithTensorsAsync(opts, req, {}, resp, std::move(done));
}

void Worker::RunGraphWithTensorsAsync(const CallOptions& opts,
                                      const tensorflow::RunGraphRequest* req, TensorSends sends,
                                      tensorflow::RunGraphResponse* resp, StatusCallback done) {
  for (int64_t over : req->dflow_cleanup_step_id()) CleanupStep(over);
  auto fail = [&](const absl::Status& s) {
    done(StoreErrorInBody(req->store_errors_in_response_body(), s, resp));
  };
  if (req->is_partial()) {
    fail(absl::UnimplementedError("[Worker RunGraph] partial runs are not supported"));
    return;
  }
  absl::StatusOr<std::shared_ptr<const GraphItem>> graph =
      FindGraph(req->session_handle(), req->create_worker_session_called(), req->graph_handle());
  if (!graph.ok()) {
    fail(Prefixed("RunGraph", graph.status()));
    return;
  }
  std::shared_ptr<StepRendezvous> rendez = FindOrCreateStep(req->step_id(), StepUse::kRun);
  if (absl::Status over = rendez->aborted(); !over.ok()) {
    fail(Prefixed("RunGraph", over));
    return;
  }
  const absl::Time deadline = opts.deadline != absl::InfiniteFuture()
                                  ? opts.deadline
                                  : absl::Now() + options_.default_timeout;
  rendez->SetDeadline(deadline);
  if (absl::Status s = FeedSends(*req, sends, rendez.get()); !s.ok()) {
    rendez->StartAbort(MarkDerived(s));
    fail(Prefixed("RunGraph", s));
    return;
  }
  auto run = std::make_shared<RunState>();
  run->req = req;
  run->resp = resp;
  run->done = std::move(done);
  run->graph = *std::move(graph);
  run->rendez = std::move(rendez);
  run->running = running_;
  const int n = static_cast<int>(run->graph->executors.size());
  if (n == 0) {
    FinishRun(run);
    return;
  }
  {
    absl::MutexLock l(&run->mu);
    run->pending = n;
  }
  ScheduleStepTimeout(run, deadline);
  StartExecutors(run, deadline);
}

void Worker::ScheduleStepTimeout(const std::shared_ptr<RunState>& run, absl::Time deadline) {
  std::weak_ptr<RunState> weak = run;
  run->timer = timer_->Schedule(deadline, [weak, step = run->req->step_id()] {
    std::shared_ptr<RunState> r = weak.lock();
    if (r == nullptr) return;
    const std::vector<std::string> waiting = r->rendez->PendingRecvKeys();
    absl::Status timeout = absl::DeadlineExceededError(absl::StrCat(
        "step ", step, " timed out; ",
        waiting.empty() ? "kernels were still running"
                        : absl::StrCat("still waiting for: ", absl::StrJoin(waiting, ", "))));
    {
      absl::MutexLock l(&r->mu);
      r->status = timeout;  // The deadline is the root cause of what follows.
    }
    r->rendez->StartAbort(MarkDerived(timeout));
  });
}

void Worker::StartExecutors(const std::shared_ptr<RunState>& run, absl::Time deadline) {
  const tensorflow::RunGraphRequest& req = *run->req;
  Executor::Args args;
  args.step_id = req.step_id();
  args.rendezvous = run->rendez.get();
  args.cancellation_manager = run->rendez->cancellation();
  args.deadline = deadline;
  ThreadPool* pool = pool_;
  args.runner = [pool](std::function<void()> fn) { pool->Schedule(std::move(fn)); };
  const bool traced = req.exec_opts().record_timeline() || req.exec_opts().record_costs();
  for (const auto& exec : run->graph->executors) {
    if (traced) {
      run->stats.push_back(std::make_unique<StepStatsCollector>(exec->device()->name()));
      args.stats = run->stats.back().get();
    }
    exec->RunAsync(args, [this, run](absl::Status s) {
      bool last;
      {
        absl::MutexLock l(&run->mu);
        run->Record(s);
        last = --run->pending == 0;
      }
      if (last) FinishRun(run);
    });
  }
}

void Worker::FinishRun(const std::shared_ptr<RunState>& run) {
  timer_->Cancel(run->timer);
  absl::Status status;
  {
    absl::MutexLock l(&run->mu);
    status = run->status;
  }
  if (status.ok()) status = CollectRecvs(*run->req, run->rendez.get(), run->resp);
  for (auto& c : run->stats) c->Finalize(run->resp->mutable_step_stats()->add_dev_stats());
  StatusCallback done = std::move(run->done);
  done(StoreErrorInBody(run->req->store_errors_in_response_body(),
                        Prefixed("RunGraph", status), run->resp));
}

void Worker::CleanupGraphAsync(const CallOptions&, const tensorflow::CleanupGraphRequest* req,
                               tensorflow::CleanupGraphResponse*, StatusCallback done) {
  CleanupStep(req->step_id());
  done(absl::OkStatus());
}

void Worker::CleanupStep(int64_t step_id) {
  std::shared_ptr<StepRendezvous> gone;
  {
    absl::MutexLock l(&mu_);
    auto it = steps_.find(step_id);
    if (it != steps_.end()) {
      gone = std::move(it->second.rendez);
      steps_.erase(it);
    }
    if (cleaned_steps_.insert(step_id).second) {
      cleaned_order_.push_back(step_id);
      if (cleaned_order_.size() > kRememberedSteps) {
        cleaned_steps_.erase(cleaned_order_.front());
        cleaned_order_.pop_front();
      }
    }
  }
  if (gone != nullptr) {
    gone->StartAbort(absl::CancelledError(
        absl::StrCat("[Worker] step ", step_id, " was cleaned up on ", task_name_)));
  }
}

void Worker::CleanupAllAsync(const CallOptions&, const tensorflow::CleanupAllRequest* req,
                             tensorflow::CleanupAllResponse*, StatusCallback done) {
  for (Device* d : devices_->ListDevices()) {
    if (req->container().empty()) {
      d->resource_manager()->Cleanup(d->resource_manager()->default_container());
    } else {
      for (const std::string& c : req->container()) d->resource_manager()->Cleanup(c);
    }
  }
  done(absl::OkStatus());
}

// --- RecvTensor --------------------------------------------------------------------------

void Worker::RecvTensorAsync(const CallOptions& opts, const tensorflow::RecvTensorRequest* req,
                             RecvTensorResult* resp, StatusCallback done) {
  absl::StatusOr<Rendezvous::ParsedKey> key = Rendezvous::ParseKey(req->rendezvous_key());
  if (!key.ok()) {
    done(Prefixed("RecvTensor", key.status()));
    return;
  }
  absl::StatusOr<Device*> src = devices_->LookupDevice(key->src_device);
  if (!src.ok()) {
    done(absl::InvalidArgumentError(absl::StrCat("[Worker RecvTensor] source device '",
                                                 key->src_device, "' of key '", key->full_key,
                                                 "' is not a device of ", task_name_)));
    return;
  }
  if ((*src)->incarnation() != key->src_incarnation) {
    done(absl::AbortedError(absl::StrCat("[Worker RecvTensor] key '", key->full_key,
                                         "' expects incarnation ", key->src_incarnation, " of ",
                                         (*src)->name(), " but it is ", (*src)->incarnation(),
                                         "; the task ", task_name_, " was probably restarted")));
    return;
  }
  if (waiting_recvs_.fetch_add(1) >= options_.max_waiting_recvs) {
    waiting_recvs_.fetch_sub(1);
    done(absl::ResourceExhaustedError(absl::StrCat(
        "[Worker RecvTensor] ", options_.max_waiting_recvs, " RecvTensor calls already wait on ",
        task_name_, "; key '", key->full_key, "' of step ", req->step_id(),
        " is refused (WorkerOptions::max_waiting_recvs)")));
    return;
  }
  std::shared_ptr<StepRendezvous> rendez = FindOrCreateStep(req->step_id(), StepUse::kRecv);
  absl::Time deadline = opts.deadline;
  if (deadline == absl::InfiniteFuture()) deadline = rendez->deadline();
  if (deadline == absl::InfiniteFuture()) deadline = absl::Now() + options_.default_timeout;
  // Whoever comes first, the value or the deadline, answers.
  struct Call {
    std::atomic<bool> claimed{false};
    StatusCallback done;
    DeadlineTimer::Id timer = DeadlineTimer::kNone;
    bool Claim() { return !claimed.exchange(true, std::memory_order_acq_rel); }
  };
  auto call = std::make_shared<Call>();
  call->done = std::move(done);
  const std::string full_key = key->full_key;
  const int64_t step = req->step_id();
  const StepRendezvous* step_rendez = rendez.get();
  call->timer = timer_->Schedule(deadline, [this, call, full_key, step, step_rendez] {
    if (!call->Claim()) return;
    // The step's state goes before the answer: the caller may then count
    // the steps, or destroy this worker.
    RecvEnded(step, step_rendez);
    waiting_recvs_.fetch_sub(1);
    call->done(absl::DeadlineExceededError(
        absl::StrCat("[Worker RecvTensor] timed out waiting for '", full_key, "' of step ", step)));
  });
  DeadlineTimer* timer = timer_.get();
  rendez->RecvLocalAsync(*key, [this, call, resp, timer, step, step_rendez, full_key](
                                   const absl::Status& recv_status, const Tensor& value,
                                   bool dead) {
    if (!call->Claim()) return;
    timer->Cancel(call->timer);
    // A failed Recv means this task's step was aborted: its own RunGraph
    // reports the root cause, so the receiver's copy is derived.
    absl::Status s = MarkDerived(recv_status);
    if (s.ok() && !dead) s = CheckEncodable(value, absl::StrCat("key '", full_key, "'"));
    if (s.ok()) {
      resp->is_dead = dead;
      resp->tensor = dead ? Tensor() : value;
      resp->send_start_micros = absl::ToUnixMicros(absl::Now());
    }
    RecvEnded(step, step_rendez);
    waiting_recvs_.fetch_sub(1);
    call->done(Prefixed("RecvTensor", s));
  });
}

}  // namespace dflow
