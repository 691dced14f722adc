#include "dflow/distributed/master_session.h"

#include <algorithm>
#include <limits>
#include <map>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/time/clock.h"
#include "dflow/distributed/master_interface.h"
#include "dflow/framework/status.h"
#include "dflow/framework/tensor.h"
#include "dflow/runtime/executor.h"
#include "dflow/runtime/function.h"
#include "dflow/runtime/control_flow.h"
#include "dflow/runtime/partition.h"
#include "dflow/runtime/session_util.h"
#include "dflow/runtime/step_stats_collector.h"
#include "dflow/runtime/subgraph.h"

namespace dflow {

// The registered partitions of one signature, and where its feeds and
// fetches travel.
struct MasterSession::Plan {
  struct Part {
    std::string task;
    WorkerInterface* worker;  // Not owned.
    std::string graph_handle;
    // A dflow worker: a finished step's cleanup may wait for its next RunGraph.
    bool cleanup_with_run_graph = false;
  };
  std::vector<Part> parts;
  int client_part = -1;                                // The part on the master's task.
  std::vector<std::string> feeds;                      // Canonical, sorted.
  std::vector<FeedSpec> feed_specs;                    // Parallel to feeds.
  absl::flat_hash_map<std::string, std::string> keys;  // Feed or fetch name -> key.
};

// One step in flight: a RunGraph per part.
struct MasterSession::Step {
  std::shared_ptr<const Plan> plan;
  int64_t step_id = 0;
  absl::Time deadline;
  std::vector<std::string> fetch_keys;  // Fetches the graph computes.
  // Per fetch in the caller's order: an index into fetch_keys, or, for a
  // fetch of a fed tensor, -1 - an index into fed_values.
  std::vector<int> outputs;
  std::vector<tensorflow::TensorProto> fed_values;
  std::vector<tensorflow::RunGraphRequest> reqs;
  // The fed values, handed as they are to the client part's RunGraph.
  WorkerInterface::TensorSends client_sends;
  std::vector<tensorflow::RunGraphResponse> resps;
  StepDone done;
  // Traced steps only: where the merged stats go (not owned), and each
  // part's RunGraph call as the master saw it.
  tensorflow::StepStats* step_stats = nullptr;
  std::vector<tensorflow::NodeExecStats> rpcs;

  absl::Mutex mu;
  absl::Status status ABSL_GUARDED_BY(mu);
  bool aborting ABSL_GUARDED_BY(mu) = false;
  bool all_started ABSL_GUARDED_BY(mu) = false;
  int pending ABSL_GUARDED_BY(mu) = 0;
};

namespace {

absl::Status Closed() { return absl::CancelledError("[Master] the session is closed"); }

// A fed value sent encoded, decoded (its bytes checked against the memory
// limit); any failure is the request's fault, as a worker reports its sends.
absl::StatusOr<Tensor> DecodeFeed(const std::string& name, const tensorflow::TensorProto& proto,
                                  absl::string_view method) {
  absl::StatusOr<Tensor> value = Tensor::FromProto(proto);
  if (!value.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("[Master ", method, "] feed '", name,
                                                   "' cannot be decoded: ",
                                                   value.status().message()));
  }
  return value;
}

int64_t NewStepId() {
  thread_local absl::BitGen gen;
  return absl::Uniform<int64_t>(gen, 1, std::numeric_limits<int64_t>::max());
}

std::string TaskOf(const std::string& device) {
  absl::StatusOr<DeviceName> name = DeviceName::Parse(device);
  return name.ok() ? name->TaskName() : device;
}

// A placed node's partition: its task.
std::string TaskOfNode(const Node* n) { return TaskOf(n->assigned_device_name()); }

// Where a step's stats go: the response's metadata when the client asked
// for a trace (SOFTWARE_TRACE or above), else nowhere.
template <typename Response>
tensorflow::StepStats* TraceTarget(const tensorflow::RunOptions& options, Response* resp) {
  if (options.trace_level() < tensorflow::RunOptions::SOFTWARE_TRACE) return nullptr;
  return resp->mutable_metadata()->mutable_step_stats();
}

}  // namespace

MasterSession::MasterSession(std::string handle, const MasterEnv* env,
                             tensorflow::ConfigProto config,
                             std::vector<std::unique_ptr<Device>> devices)
    : handle_(std::move(handle)),
      env_(env),
      config_(std::move(config)),
      devices_(std::move(devices)) {
  for (const auto& d : devices_) {
    if (d->parsed_name().TaskName() == env_->task_name && d->device_type() == kDeviceCPU) {
      client_device_ = d.get();
      break;
    }
  }
}

MasterSession::~MasterSession() { Close(absl::Now() + absl::Seconds(5)).IgnoreError(); }

std::vector<std::string> MasterSession::Tasks() const {
  std::vector<std::string> tasks;
  for (const auto& d : devices_) tasks.push_back(d->parsed_name().TaskName());
  return SortedUnique(std::move(tasks));
}

WorkerInterface* MasterSession::WorkerFor(const std::string& task) const {
  return env_->worker_for_task ? env_->worker_for_task(task) : nullptr;
}

// --- lifetime ----------------------------------------------------------------------------

absl::Status MasterSession::Create(const tensorflow::GraphDef& graph, absl::Time deadline) {
  if (client_device_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("[Master CreateSession] ", env_->task_name, " has no CPU device"));
  }
  for (const std::string& task : Tasks()) {
    WorkerInterface* worker = WorkerFor(task);
    if (worker == nullptr) {
      return absl::UnavailableError(absl::StrCat("[Master CreateSession] no worker for ", task));
    }
    tensorflow::CreateWorkerSessionRequest req;
    req.set_session_handle(handle_);
    tensorflow::CreateWorkerSessionResponse resp;
    CallOptions opts;
    opts.deadline = deadline;
    RETURN_IF_ERROR(WithContext(worker->CreateWorkerSession(req, &resp, opts),
                                absl::StrCat("[Master CreateSession] on ", task)));
  }
  absl::MutexLock l(&mu_);
  return MergeGraph(graph);
}

absl::Status MasterSession::MergeGraph(const tensorflow::GraphDef& graph) {
  auto merged = std::make_shared<tensorflow::GraphDef>(*graph_def_);
  RETURN_IF_ERROR(ExtendGraphDef(merged.get(), graph));
  RETURN_IF_ERROR(GraphFromGraphDef(*merged).status());  // It must import.
  graph_def_ = std::move(merged);
  return absl::OkStatus();
}

absl::Status MasterSession::Extend(const tensorflow::ExtendSessionRequest& req,
                                   tensorflow::ExtendSessionResponse* resp) {
  absl::MutexLock l(&mu_);
  if (closed_) return Closed();
  if (req.current_graph_version() != graph_version_) {
    return absl::FailedPreconditionError(
        absl::StrCat("[Master ExtendSession] current_graph_version ", req.current_graph_version(),
                     " is not the session's graph version ", graph_version_,
                     "; another client extended the graph"));
  }
  RETURN_IF_ERROR(CheckGraphNodeLimit(GraphNodeCount(*graph_def_) + GraphNodeCount(req.graph_def()),
                                      env_->max_graph_nodes, "[Master ExtendSession] ",
                                      "max_graph_nodes"));
  RETURN_IF_ERROR(MergeGraph(req.graph_def()));
  resp->set_new_graph_version(++graph_version_);
  return absl::OkStatus();
}

absl::Status MasterSession::Close(absl::Time deadline) {
  std::vector<std::shared_ptr<Step>> running;
  absl::flat_hash_map<std::string, std::vector<int64_t>> deferred;
  {
    absl::MutexLock l(&mu_);
    if (closed_) return absl::OkStatus();
    closed_ = true;
    plans_.Close(Closed());
    graph_def_.reset();
    deferred.swap(deferred_cleanups_);
    for (const auto& [id, weak] : in_flight_) {
      if (std::shared_ptr<Step> step = weak.lock()) running.push_back(std::move(step));
    }
  }
  for (const std::shared_ptr<Step>& step : running) {
    bool abort = false;
    {
      absl::MutexLock l(&step->mu);
      if (!step->aborting) {
        step->status = absl::CancelledError(
            absl::StrCat("[Master] the session was closed while step ", step->step_id, " ran"));
        step->aborting = abort = true;
      }
    }
    if (abort) CleanupStep(*step->plan, step->step_id);
  }
  // Every task's worker session, deleted at once and at best effort, as
  // TensorFlow's master does: a task that died has nothing left to delete
  // (and a restarted one never had it), so its error is no error of Close's,
  // and a host that no longer answers holds Close for kCleanupTimeout at most.
  // With them go the cleanups of finished steps that waited for a next
  // RunGraph that will not come.
  constexpr absl::Duration kCleanupTimeout = absl::Seconds(2);
  CallOptions opts;
  opts.deadline = std::min(deadline, absl::Now() + kCleanupTimeout);
  std::vector<std::pair<WorkerInterface*, tensorflow::CleanupGraphRequest>> cleanups;
  for (const auto& [task, steps] : deferred) {
    WorkerInterface* worker = WorkerFor(task);
    if (worker == nullptr) continue;
    for (int64_t over : steps) {
      cleanups.emplace_back(worker, tensorflow::CleanupGraphRequest());
      cleanups.back().second.set_step_id(over);
    }
  }
  const std::vector<std::string> tasks = Tasks();
  tensorflow::DeleteWorkerSessionRequest req;
  req.set_session_handle(handle_);
  std::vector<tensorflow::DeleteWorkerSessionResponse> resps(tasks.size());
  std::vector<tensorflow::CleanupGraphResponse> cleaned(cleanups.size());
  absl::BlockingCounter pending(static_cast<int>(cleanups.size() + tasks.size()));
  auto one_done = [&pending](const absl::Status&) { pending.DecrementCount(); };
  for (size_t i = 0; i < cleanups.size(); ++i) {
    cleanups[i].first->CleanupGraphAsync(opts, &cleanups[i].second, &cleaned[i], one_done);
  }
  for (size_t i = 0; i < tasks.size(); ++i) {
    WorkerInterface* worker = WorkerFor(tasks[i]);
    if (worker == nullptr) {
      pending.DecrementCount();
      continue;
    }
    worker->DeleteWorkerSessionAsync(opts, &req, &resps[i], one_done);
  }
  pending.Wait();
  return absl::OkStatus();
}

void AddDevices(const std::vector<std::unique_ptr<Device>>& devices, const std::string& local_task,
                tensorflow::ListDevicesResponse* resp) {
  for (const auto& d : devices) {
    const bool local = d->parsed_name().TaskName() == local_task;
    d->ToAttributes(local ? resp->add_local_device() : resp->add_remote_device());
  }
}

void MasterSession::ListDevices(tensorflow::ListDevicesResponse* resp) const {
  AddDevices(devices_, env_->task_name, resp);
}

int MasterSession::num_plans() const { return plans_.size(); }

absl::Time MasterSession::StepDeadline(absl::Time call_deadline,
                                       const tensorflow::RunOptions& options) const {
  return std::min(call_deadline, dflow::StepDeadline(options, config_));
}

// --- plans -------------------------------------------------------------------------------

absl::StatusOr<std::shared_ptr<const MasterSession::Plan>> MasterSession::GetOrCreatePlan(
    const PlanNames& names, absl::Time deadline) {
  return plans_.GetOrBuild(names.key, [&] {
    return BuildPlan(names.feeds, names.fetches, names.targets, deadline);
  });
}

absl::StatusOr<std::unique_ptr<Graph>> MasterSession::PlaceForPlan(
    std::unique_ptr<Graph> g, const std::vector<std::string>& feeds,
    const std::vector<std::string>& fetches, const std::vector<std::string>& targets) {
  RETURN_IF_ERROR(RewriteGraphForRendezvous(g.get(), feeds, fetches, targets, *client_device_));
  std::vector<Device*> devices;
  for (const auto& d : devices_) devices.push_back(d.get());
  PlacerOptions opts;
  opts.allow_soft_placement = config_.allow_soft_placement();
  opts.log_device_placement = config_.log_device_placement();
  absl::flat_hash_map<std::string, std::string> pinned;
  {
    absl::ReaderMutexLock l(&mu_);
    pinned = stateful_placements_;
  }
  RETURN_IF_ERROR(PlacePinningState(g.get(), devices, client_device_, opts, &pinned));
  absl::MutexLock l(&mu_);
  stateful_placements_ = std::move(pinned);
  return g;
}

absl::StatusOr<std::shared_ptr<const MasterSession::Plan>> MasterSession::BuildPlan(
    const std::vector<std::string>& feeds, const std::vector<std::string>& fetches,
    const std::vector<std::string>& targets, absl::Time deadline) {
  auto plan = std::make_shared<Plan>();
  plan->feeds = feeds;
  std::shared_ptr<const tensorflow::GraphDef> def;
  {
    absl::ReaderMutexLock l(&mu_);
    def = graph_def_;
  }
  if (def == nullptr) return Closed();
  ASSIGN_OR_RETURN(std::unique_ptr<Graph> g, GraphFromGraphDef(*def));
  def.reset();
  for (const std::string& feed : feeds) {
    ASSIGN_OR_RETURN(FeedSpec spec, DescribeFeed(*g, feed));
    plan->feed_specs.push_back(std::move(spec));
  }
  for (const auto& names : {feeds, fetches}) {
    for (const std::string& name : names) {
      plan->keys[name] = ClientTerminatedKey(*client_device_, name);
    }
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Graph> placed,
                   PlaceForPlan(std::move(g), feeds, fetches, targets));
  ColocateRelaysAndConstants(placed.get(), TaskOfNode);
  RETURN_IF_ERROR(AddControlLoops(placed.get()));
  RETURN_IF_ERROR(RegisterPartitions(std::move(placed), deadline, plan.get()));
  return plan;
}

absl::Status MasterSession::RegisterPartitions(std::unique_ptr<Graph> placed, absl::Time deadline,
                                               Plan* plan) {
  PartitionOptions popts;
  popts.node_to_loc = TaskOfNode;
  popts.get_incarnation = [this](const std::string& name) -> uint64_t {
    for (const auto& d : devices_) {
      if (d->name() == name) return d->incarnation();
    }
    return 0;
  };
  ASSIGN_OR_RETURN(auto parts, Partition(*placed, popts));
  placed.reset();
  for (auto& [task, def] : parts) {
    WorkerInterface* worker = WorkerFor(task);
    if (worker == nullptr) {
      return absl::UnavailableError(absl::StrCat("[Master RunStep] no worker for ", task));
    }
    tensorflow::RegisterGraphRequest req;
    req.set_session_handle(handle_);
    req.set_create_worker_session_called(true);
    *req.mutable_graph_def() = std::move(def);
    tensorflow::RegisterGraphResponse resp;
    CallOptions opts;
    opts.deadline = deadline;
    absl::Status s = worker->RegisterGraph(req, &resp, opts);
    if (!s.ok()) {
      // Partitions already registered are freed with the worker session.
      return WithContext(s, absl::StrCat("[Master] registering the partition for ", task));
    }
    if (task == env_->task_name) plan->client_part = static_cast<int>(plan->parts.size());
    plan->parts.push_back({task, worker, resp.graph_handle(), resp.dflow_cleanup_with_run_graph()});
  }
  if (plan->client_part < 0 && plan->keys.size() > plan->feeds.size()) {
    return absl::InternalError("[Master] the feeds and fetches have no partition on the master");
  }
  return absl::OkStatus();
}

// --- steps -------------------------------------------------------------------------------

void MasterSession::CleanupStep(const Plan& plan, int64_t step_id) {
  for (const auto& part : plan.parts) CleanupGraphOn(*part.worker, step_id);
}

void MasterSession::CleanupGraphOn(WorkerInterface& worker, int64_t step_id) {
  auto req = std::make_shared<tensorflow::CleanupGraphRequest>();
  auto resp = std::make_shared<tensorflow::CleanupGraphResponse>();
  req->set_step_id(step_id);
  worker.CleanupGraphAsync(CallOptions::WithTimeout(absl::Seconds(10)), req.get(), resp.get(),
                           [req, resp](const absl::Status&) {});
}

// A step's names in canonical form ("x" -> "x:0") and what the graph must
// compute: the fetches of tensors that are not fed.
struct MasterSession::Signature {
  std::vector<std::string> feed_names;   // In the caller's order.
  std::vector<std::string> fetch_names;  // In the caller's order.
  std::vector<std::string> graph_fetches;
  absl::flat_hash_map<std::string, int> fed;  // Feed name -> its index in the feeds.
};

absl::StatusOr<MasterSession::Signature> MasterSession::Canonicalize(
    const Feeds& feeds, const std::vector<std::string>& fetches) {
  Signature sig;
  for (const auto& [name, value] : feeds) {
    ASSIGN_OR_RETURN(std::string canonical, CanonicalTensorName(name, "feed"));
    sig.feed_names.push_back(std::move(canonical));
  }
  for (const std::string& name : fetches) {
    ASSIGN_OR_RETURN(std::string canonical, CanonicalTensorName(name, "fetch"));
    sig.fetch_names.push_back(std::move(canonical));
  }
  for (size_t i = 0; i < sig.feed_names.size(); ++i) {
    if (!sig.fed.emplace(sig.feed_names[i], static_cast<int>(i)).second) {
      return absl::InvalidArgumentError("[Master RunStep] a tensor is fed more than once");
    }
  }
  // A fetch of a fed tensor is answered with the fed value.
  for (const std::string& name : sig.fetch_names) {
    if (!sig.fed.contains(name)) sig.graph_fetches.push_back(name);
  }
  return sig;
}

bool MasterSession::HasPlanFor(const tensorflow::RunStepRequest& req) const {
  Feeds named;  // Canonicalize reads the names only.
  for (const tensorflow::NamedTensorProto& f : req.feed()) named.emplace_back().first = f.name();
  absl::StatusOr<Signature> sig =
      Canonicalize(named, std::vector<std::string>(req.fetch().begin(), req.fetch().end()));
  if (!sig.ok()) return false;
  absl::StatusOr<std::shared_ptr<const Plan>> plan = plans_.Find(
      NamesOfPlan(*sig, std::vector<std::string>(req.target().begin(), req.target().end())).key);
  return plan.ok() && *plan != nullptr;
}

MasterSession::PlanNames MasterSession::NamesOfPlan(const Signature& sig,
                                                    const std::vector<std::string>& targets) {
  PlanNames names{SortedUnique(sig.feed_names), SortedUnique(sig.graph_fetches),
                  SortedUnique(targets), ""};
  names.key = SignatureKey(names.feeds, names.fetches, names.targets);
  return names;
}

void MasterSession::RunAsync(absl::Time deadline, const Feeds& feeds,
                             const std::vector<std::string>& fetches,
                             const std::vector<std::string>& targets,
                             tensorflow::StepStats* step_stats, StepDone done) {
  std::vector<tensorflow::TensorProto*> no_fetches;
  auto fail = [&](const absl::Status& s) { done(s, no_fetches); };
  if (fetches.empty() && targets.empty()) {
    fail(absl::InvalidArgumentError("[Master RunStep] give at least one fetch or target"));
    return;
  }
  absl::StatusOr<Signature> sig = Canonicalize(feeds, fetches);
  if (!sig.ok()) return fail(sig.status());
  absl::StatusOr<std::shared_ptr<const Plan>> plan =
      GetOrCreatePlan(NamesOfPlan(*sig, targets), deadline);
  if (!plan.ok()) return fail(plan.status());
  auto step = std::make_shared<Step>();
  step->plan = *std::move(plan);
  step->step_id = NewStepId();
  step->deadline = deadline;
  step->step_stats = step_stats;
  absl::Status built = BuildRequests(feeds, *sig, step.get());
  if (!built.ok()) return fail(built);
  step->done = std::move(done);
  if (!Admit(step)) {
    std::vector<tensorflow::TensorProto*> none;
    step->done(Closed(), none);  // Not under mu_: `done` may call this session again.
    return;
  }
  FanOut(step);
}

bool MasterSession::Admit(const std::shared_ptr<Step>& step) {
  absl::MutexLock l(&mu_);
  if (closed_) return false;
  in_flight_[step->step_id] = step;
  // Finished steps' cleanups ride on this step's RunGraph calls.
  const Plan& p = *step->plan;
  for (size_t i = 0; i < p.parts.size(); ++i) {
    auto it = deferred_cleanups_.find(p.parts[i].task);
    if (it == deferred_cleanups_.end()) continue;
    for (int64_t over : it->second) step->reqs[i].add_dflow_cleanup_step_id(over);
    deferred_cleanups_.erase(it);
  }
  return true;
}

absl::Status MasterSession::BuildRequests(const Feeds& feeds, const Signature& sig, Step* step) {
  const Plan& p = *step->plan;
  step->reqs.resize(p.parts.size());
  step->resps.resize(p.parts.size());
  for (size_t i = 0; i < p.parts.size(); ++i) {
    tensorflow::RunGraphRequest& req = step->reqs[i];
    req.set_session_handle(handle_);
    req.set_create_worker_session_called(true);
    req.set_graph_handle(p.parts[i].graph_handle);
    req.set_step_id(step->step_id);
    if (step->step_stats != nullptr) req.mutable_exec_opts()->set_record_timeline(true);
  }
  if (step->step_stats != nullptr) step->rpcs.resize(p.parts.size());
  // Feeds and fetches go to the master's own task.
  if (p.client_part >= 0) {
    tensorflow::RunGraphRequest& req = step->reqs[p.client_part];
    for (size_t i = 0; i < feeds.size(); ++i) {
      const auto& [name, value] = feeds[i];
      const size_t k =
          std::lower_bound(p.feeds.begin(), p.feeds.end(), sig.feed_names[i]) - p.feeds.begin();
      RETURN_IF_ERROR(CheckFeed(name, value.dtype(), value.shape(), p.feed_specs[k]));
      step->client_sends.emplace_back(p.keys.at(sig.feed_names[i]), value);
    }
    for (const std::string& name : sig.graph_fetches) req.add_recv_key(p.keys.at(name));
  }
  for (const std::string& name : sig.fetch_names) {
    auto it = sig.fed.find(name);
    if (it != sig.fed.end()) {
      step->outputs.push_back(-1 - static_cast<int>(step->fed_values.size()));
      feeds[it->second].second.AsProtoTensorContent(&step->fed_values.emplace_back());
    } else {
      step->outputs.push_back(static_cast<int>(step->fetch_keys.size()));
      step->fetch_keys.push_back(p.keys.at(name));
    }
  }
  return absl::OkStatus();
}

void MasterSession::FanOut(const std::shared_ptr<Step>& step) {
  const Plan& p = *step->plan;
  {
    absl::MutexLock l(&step->mu);
    step->pending = static_cast<int>(p.parts.size()) + 1;  // +1 until all are started.
  }
  CallOptions opts;
  opts.deadline = step->deadline;
  // The first error aborts the other parts' steps. Whoever sends the abort
  // holds its count on the step until the CleanupGraph calls are out: one of
  // them may end the last part on this thread, and the finished step's caller
  // may then close the session and free the workers the loop still calls.
  auto part_done = [this, step](const absl::Status& s) {
    bool abort = false;
    if (!s.ok()) {
      absl::MutexLock l(&step->mu);
      if (!step->aborting) {
        // Errors after the first one are usually its consequences.
        step->status = s;
        step->aborting = true;
        abort = step->all_started;
      } else if (IsDerivedError(step->status) && !IsDerivedError(s)) {
        step->status = s;
      }
    }
    if (abort) CleanupStep(*step->plan, step->step_id);
    Release(step);
  };
  for (size_t i = 0; i < p.parts.size(); ++i) {
    WorkerInterface::TensorSends sends;
    if (static_cast<int>(i) == p.client_part) sends = std::move(step->client_sends);
    StatusCallback on_done = part_done;
    if (step->step_stats != nullptr) {
      step->rpcs[i].set_all_start_micros(StepStatsCollector::NowMicros());
      on_done = [step, i, part_done](const absl::Status& s) {
        step->rpcs[i].set_all_end_rel_micros(StepStatsCollector::NowMicros() -
                                             step->rpcs[i].all_start_micros());
        part_done(s);
      };
    }
    p.parts[i].worker->RunGraphWithTensorsAsync(opts, &step->reqs[i], std::move(sends),
                                                &step->resps[i], std::move(on_done));
  }
  bool abort;
  {
    absl::MutexLock l(&step->mu);
    step->all_started = true;
    // When every part is done already, FinishStep cleans the failed step up.
    abort = step->aborting && step->pending > 1;
  }
  if (abort) CleanupStep(*step->plan, step->step_id);
  Release(step);
}

void MasterSession::Release(const std::shared_ptr<Step>& step) {
  bool last;
  {
    absl::MutexLock l(&step->mu);
    last = --step->pending == 0;
  }
  if (last) FinishStep(step);
}

void MasterSession::FinishStep(const std::shared_ptr<Step>& step) {
  absl::Status status;
  {
    absl::MutexLock l(&step->mu);
    status = step->status;
  }
  // A step that succeeded is cleaned up by the next RunGraph to each task
  // whose worker takes that (one call less per task and step), any other
  // with a CleanupGraph call now.
  std::vector<const Plan::Part*> now;
  {
    absl::MutexLock l(&mu_);
    in_flight_.erase(step->step_id);
    for (const Plan::Part& part : step->plan->parts) {
      if (status.ok() && !closed_ && part.cleanup_with_run_graph) {
        std::vector<int64_t>& later = deferred_cleanups_[part.task];
        if (later.size() < kMaxDeferredCleanups) {
          later.push_back(step->step_id);
          continue;
        }
      }
      now.push_back(&part);
    }
  }
  for (const Plan::Part* part : now) CleanupGraphOn(*part->worker, step->step_id);
  std::vector<tensorflow::TensorProto*> computed, fetched;
  if (status.ok() && !step->fetch_keys.empty()) {
    tensorflow::RunGraphResponse& resp = step->resps[step->plan->client_part];
    absl::flat_hash_map<std::string, tensorflow::TensorProto*> by_key;
    for (tensorflow::NamedTensorProto& t : *resp.mutable_recv()) {
      by_key[t.name()] = t.mutable_tensor();
    }
    for (const std::string& key : step->fetch_keys) {
      auto it = by_key.find(key);
      if (it == by_key.end()) {
        status = absl::InternalError(
            absl::StrCat("[Master RunStep] the worker returned no '", key, "'"));
        break;
      }
      computed.push_back(it->second);
    }
  }
  if (status.ok()) {
    for (int k : step->outputs) {
      fetched.push_back(k >= 0 ? computed[k] : &step->fed_values[-1 - k]);
    }
  }
  if (step->step_stats != nullptr) MergeStepStats(step.get());
  step->done(status, fetched);
}

void MasterSession::MergeStepStats(Step* step) const {
  for (tensorflow::RunGraphResponse& resp : step->resps) {
    for (tensorflow::DeviceStepStats& dev : *resp.mutable_step_stats()->mutable_dev_stats()) {
      step->step_stats->add_dev_stats()->Swap(&dev);
    }
  }
  // The master's own row: one RunGraph call per part, each on its own lane
  // (thread id) since they overlap.
  tensorflow::DeviceStepStats* rpcs = step->step_stats->add_dev_stats();
  rpcs->set_device(absl::StrCat(env_->task_name, "/master"));
  for (size_t i = 0; i < step->rpcs.size(); ++i) {
    const std::string& task = step->plan->parts[i].task;
    tensorflow::NodeExecStats& ns = step->rpcs[i];
    ns.set_node_name("RunGraph");
    ns.set_op_end_rel_micros(ns.all_end_rel_micros());
    ns.set_timeline_label(absl::StrCat("RunGraph = RunGraph(", task, ")"));
    ns.set_thread_id(static_cast<uint32_t>(i + 1));
    (*rpcs->mutable_thread_names())[ns.thread_id()] = absl::StrCat("RunGraph ", task);
    *rpcs->add_node_stats() = std::move(ns);
  }
}

void MasterSession::RunStepAsync(absl::Time deadline, const tensorflow::RunStepRequest* req,
                                 std::vector<Tensor> feed_values,
                                 tensorflow::RunStepResponse* resp, StatusCallback done) {
  if (!req->partial_run_handle().empty()) {
    done(absl::UnimplementedError("[Master RunStep] partial runs are not supported"));
    return;
  }
  if (!feed_values.empty()) {
    if (absl::Status s = CheckFeedValues(*req, feed_values.size()); !s.ok()) return done(s);
  }
  Feeds feeds;
  for (int i = 0; i < req->feed_size(); ++i) {
    const tensorflow::NamedTensorProto& f = req->feed(i);
    if (!feed_values.empty()) {
      feeds.emplace_back(f.name(), std::move(feed_values[i]));
      continue;
    }
    absl::StatusOr<Tensor> value = DecodeFeed(f.name(), f.tensor(), "RunStep");
    if (!value.ok()) return done(value.status());
    feeds.emplace_back(f.name(), *std::move(value));
  }
  std::vector<std::string> fetches(req->fetch().begin(), req->fetch().end());
  std::vector<std::string> targets(req->target().begin(), req->target().end());
  RunAsync(StepDeadline(deadline, req->options()), feeds, fetches, targets,
           TraceTarget(req->options(), resp),
           [req, resp, done = std::move(done)](const absl::Status& s,
                                               std::vector<tensorflow::TensorProto*>& fetched) {
             for (size_t i = 0; i < fetched.size(); ++i) {
               tensorflow::NamedTensorProto* out = resp->add_tensor();
               out->set_name(req->fetch(static_cast<int>(i)));
               out->mutable_tensor()->Swap(fetched[i]);
             }
             done(s);
           });
}

absl::Status MasterSession::MakeCallable(const tensorflow::MakeCallableRequest& req,
                                         tensorflow::MakeCallableResponse* resp) {
  absl::MutexLock l(&mu_);
  if (closed_) return Closed();
  const int64_t handle = next_callable_++;
  callables_[handle] = req.options();
  resp->set_handle(handle);
  return absl::OkStatus();
}

void MasterSession::RunCallableAsync(absl::Time deadline, const tensorflow::RunCallableRequest* req,
                                     tensorflow::RunCallableResponse* resp, StatusCallback done) {
  tensorflow::CallableOptions callable;
  {
    absl::ReaderMutexLock l(&mu_);
    auto it = callables_.find(req->handle());
    if (it == callables_.end()) {
      done(absl::InvalidArgumentError(
          absl::StrCat("[Master RunCallable] no callable with handle ", req->handle())));
      return;
    }
    callable = it->second;
  }
  if (req->feed_size() != callable.feed_size()) {
    done(absl::InvalidArgumentError(absl::StrCat("[Master RunCallable] the callable takes ",
                                                 callable.feed_size(), " feeds, got ",
                                                 req->feed_size())));
    return;
  }
  Feeds feeds;
  for (int i = 0; i < req->feed_size(); ++i) {
    absl::StatusOr<Tensor> value = DecodeFeed(callable.feed(i), req->feed(i), "RunCallable");
    if (!value.ok()) return done(value.status());
    feeds.emplace_back(callable.feed(i), *std::move(value));
  }
  std::vector<std::string> fetches(callable.fetch().begin(), callable.fetch().end());
  std::vector<std::string> targets(callable.target().begin(), callable.target().end());
  RunAsync(StepDeadline(deadline, callable.run_options()), feeds, fetches, targets,
           TraceTarget(callable.run_options(), resp),
           [resp, done = std::move(done)](const absl::Status& s,
                                          std::vector<tensorflow::TensorProto*>& fetched) {
             for (tensorflow::TensorProto* t : fetched) resp->add_fetch()->Swap(t);
             done(s);
           });
}

absl::Status MasterSession::ReleaseCallable(const tensorflow::ReleaseCallableRequest& req) {
  absl::MutexLock l(&mu_);
  if (callables_.erase(req.handle()) == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("[Master ReleaseCallable] no callable with handle ", req.handle()));
  }
  return absl::OkStatus();
}

}  // namespace dflow
