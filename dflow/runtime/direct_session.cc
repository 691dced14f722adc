#include "dflow/runtime/direct_session.h"

#include <algorithm>
#include <map>
#include <optional>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "dflow/framework/attr_util.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/framework/status.h"
#include "dflow/runtime/call_frame.h"
#include "dflow/runtime/function.h"
#include "dflow/runtime/control_flow.h"
#include "dflow/runtime/partition.h"
#include "dflow/runtime/placer.h"
#include "dflow/runtime/rendezvous_local.h"
#include "dflow/runtime/session_util.h"
#include "dflow/runtime/subgraph.h"

namespace dflow {

struct DirectSession::Signature {
  std::vector<std::string> feeds;  // Canonical "node:i", sorted, unique.
  std::vector<FeedSpec> feed_specs;
  std::vector<std::string> fetches;  // Canonical, sorted, unique.
  std::vector<std::unique_ptr<Executor>> executors;
  std::vector<tensorflow::GraphDef> partition_graphs;
};

namespace {

absl::Status Closed() { return absl::CancelledError("[Session] the session is closed"); }

int IndexIn(const std::vector<std::string>& sorted, const std::string& name) {
  return static_cast<int>(std::lower_bound(sorted.begin(), sorted.end(), name) - sorted.begin());
}

// Outcome of one step across its executors: the first error that is not
// merely a consequence of another one.
struct StepState {
  explicit StepState(int n) : pending(n) {}
  void Done(const absl::Status& s) {
    bool last;
    {
      absl::MutexLock l(&mu);
      if (!s.ok() && (status.ok() || (IsDerivedError(status) && !IsDerivedError(s)))) {
        status = s;
      }
      last = --pending == 0;
    }
    if (last) done.Notify();
  }
  absl::Mutex mu;
  absl::Status status ABSL_GUARDED_BY(mu);
  int pending ABSL_GUARDED_BY(mu);
  absl::Notification done;
};

}  // namespace

// --- creation ---------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<Session>> NewDirectSession(const SessionOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<DirectSession> s, DirectSession::New(options));
  return std::unique_ptr<Session>(std::move(s));
}

absl::StatusOr<std::unique_ptr<DirectSession>> DirectSession::New(const SessionOptions& options) {
  const tensorflow::ConfigProto& config = options.config;
  if (config.intra_op_parallelism_threads() > 0) {
    SetIntraOpThreads(config.intra_op_parallelism_threads());
  }
  ASSIGN_OR_RETURN(std::vector<std::unique_ptr<Device>> devices,
                   CreateLocalDevices(config, "localhost", 0, 0));
  auto mgr = std::make_unique<DeviceMgr>(std::move(devices));
  return std::unique_ptr<DirectSession>(new DirectSession(options, std::move(mgr)));
}

DirectSession::DirectSession(const SessionOptions& options, std::unique_ptr<DeviceMgr> devices)
    : options_(options), device_mgr_(std::move(devices)) {
  const int threads = options.config.inter_op_parallelism_threads();
  if (threads > 0) {
    own_pool_ = std::make_unique<ThreadPool>("inter_op", threads);
    inter_op_pool_ = own_pool_.get();
  } else {
    inter_op_pool_ = threads == 0 ? InterOpPool() : nullptr;
  }
}

DirectSession::~DirectSession() { Close().IgnoreError(); }

absl::Status DirectSession::Create(const tensorflow::GraphDef& graph) {
  absl::MutexLock l(&mu_);
  if (closed_) return Closed();
  if (graph_ != nullptr) {
    return absl::FailedPreconditionError(
        "[Session] Create: a graph was already created for this session; use Extend");
  }
  return ExtendLocked(graph);
}

absl::Status DirectSession::Extend(const tensorflow::GraphDef& graph) {
  absl::MutexLock l(&mu_);
  if (closed_) return Closed();
  return ExtendLocked(graph);
}

absl::Status DirectSession::ExtendLocked(const tensorflow::GraphDef& graph) {
  tensorflow::GraphDef merged = graph_def_;
  RETURN_IF_ERROR(ExtendGraphDef(&merged, graph));
  ASSIGN_OR_RETURN(std::unique_ptr<Graph> g, GraphFromGraphDef(merged));
  graph_def_ = std::move(merged);
  graph_ = std::move(g);
  return absl::OkStatus();
}

// --- building a signature -----------------------------------------------------------

absl::StatusOr<std::shared_ptr<const DirectSession::Signature>> DirectSession::GetOrCreateSignature(
    const std::vector<std::string>& feeds, const std::vector<std::string>& fetches,
    const std::vector<std::string>& targets) {
  return signatures_.GetOrBuild(SignatureKey(feeds, fetches, targets),
                                [&] { return BuildSignature(feeds, fetches, targets); });
}

absl::StatusOr<std::unique_ptr<Graph>> DirectSession::PlaceForSignature(
    const std::vector<std::string>& feeds, const std::vector<std::string>& fetches,
    const std::vector<std::string>& targets) {
  std::shared_ptr<const Graph> base;
  {
    absl::ReaderMutexLock l(&mu_);
    if (graph_ == nullptr) {
      return absl::FailedPreconditionError("[Session] Run: no graph; call Create first");
    }
    base = graph_;
  }
  std::unique_ptr<Graph> g = base->Clone();
  Device* client = device_mgr_->HostCPU();
  RETURN_IF_ERROR(RewriteGraphForExecution(g.get(), feeds, fetches, targets, client));
  PlacerOptions opts;
  opts.allow_soft_placement = options_.config.allow_soft_placement();
  opts.log_device_placement = options_.config.log_device_placement();
  absl::flat_hash_map<std::string, std::string> pinned;
  {
    absl::ReaderMutexLock l(&mu_);
    pinned = stateful_placements_;
  }
  RETURN_IF_ERROR(PlacePinningState(g.get(), device_mgr_->ListDevices(), client, opts, &pinned));
  absl::MutexLock l(&mu_);
  stateful_placements_ = std::move(pinned);
  return g;
}

absl::StatusOr<std::shared_ptr<const DirectSession::Signature>> DirectSession::BuildSignature(
    const std::vector<std::string>& feeds, const std::vector<std::string>& fetches,
    const std::vector<std::string>& targets) {
  auto sig = std::make_shared<Signature>();
  sig->feeds = feeds;
  sig->fetches = fetches;
  ASSIGN_OR_RETURN(std::unique_ptr<Graph> g, PlaceForSignature(feeds, fetches, targets));
  {
    std::shared_ptr<const Graph> base;
    {
      absl::ReaderMutexLock l(&mu_);
      base = graph_;
    }
    for (const std::string& feed : feeds) {
      ASSIGN_OR_RETURN(FeedSpec spec, DescribeFeed(*base, feed));
      sig->feed_specs.push_back(std::move(spec));
    }
  }
  PartitionOptions popts;
  popts.get_incarnation = [this](const std::string& d) -> uint64_t {
    absl::StatusOr<Device*> dev = device_mgr_->LookupDevice(d);
    return dev.ok() ? (*dev)->incarnation() : 0;
  };
  RETURN_IF_ERROR(AddControlLoops(g.get()));
  ASSIGN_OR_RETURN(auto parts, Partition(*g, popts));
  for (auto& [loc, def] : parts) {
    ASSIGN_OR_RETURN(Device * device, device_mgr_->LookupDevice(loc));
    ASSIGN_OR_RETURN(std::unique_ptr<Graph> part, Graph::FromGraphDef(def));
    ASSIGN_OR_RETURN(std::unique_ptr<Executor> exec, Executor::Create(std::move(part), device));
    sig->executors.push_back(std::move(exec));
    sig->partition_graphs.push_back(std::move(def));
  }
  return sig;
}

// --- running -------------------------------------------------------------------------

absl::Status DirectSession::Run(const tensorflow::RunOptions& options,
                                const std::vector<std::pair<std::string, Tensor>>& feeds,
                                const std::vector<std::string>& fetches,
                                const std::vector<std::string>& targets,
                                std::vector<Tensor>* outputs, tensorflow::RunMetadata* metadata) {
  const absl::Time deadline = StepDeadline(options, options_.config);
  if (fetches.empty() && targets.empty()) {
    return absl::InvalidArgumentError("[Session] Run: give at least one fetch or target");
  }
  if (outputs == nullptr && !fetches.empty()) {
    return absl::InvalidArgumentError("[Session] Run: fetches given but outputs is null");
  }
  std::vector<std::string> feed_names, fetch_names;
  for (const auto& [name, value] : feeds) {
    ASSIGN_OR_RETURN(std::string canonical, CanonicalTensorName(name, "feed"));
    feed_names.push_back(std::move(canonical));
  }
  for (const std::string& name : fetches) {
    ASSIGN_OR_RETURN(std::string canonical, CanonicalTensorName(name, "fetch"));
    fetch_names.push_back(std::move(canonical));
  }
  std::vector<std::string> sorted_feeds = SortedUnique(feed_names);
  if (sorted_feeds.size() != feed_names.size()) {
    return absl::InvalidArgumentError("[Session] Run: a tensor is fed more than once");
  }
  ASSIGN_OR_RETURN(
      std::shared_ptr<const Signature> sig,
      GetOrCreateSignature(sorted_feeds, SortedUnique(fetch_names), SortedUnique(targets)));
  std::vector<Tensor> args(sig->feeds.size());
  for (size_t i = 0; i < feeds.size(); ++i) {
    const int k = IndexIn(sig->feeds, feed_names[i]);
    const Tensor& value = feeds[i].second;
    RETURN_IF_ERROR(CheckFeed(feeds[i].first, value.dtype(), value.shape(), sig->feed_specs[k]));
    args[k] = value;
  }
  std::vector<Tensor> retvals;
  const bool traced =
      metadata != nullptr && options.trace_level() >= tensorflow::RunOptions::SOFTWARE_TRACE;
  RETURN_IF_ERROR(RunSignature(*sig, std::move(args), deadline, &retvals,
                               traced ? metadata->mutable_step_stats() : nullptr));
  if (outputs != nullptr) {
    outputs->clear();
    for (const std::string& name : fetch_names) {
      outputs->push_back(retvals[IndexIn(sig->fetches, name)]);
    }
  }
  if (metadata != nullptr && options.output_partition_graphs()) {
    for (const auto& def : sig->partition_graphs) *metadata->add_partition_graphs() = def;
  }
  return absl::OkStatus();
}

absl::Status DirectSession::RunSignature(const Signature& sig, std::vector<Tensor> args,
                                         absl::Time deadline, std::vector<Tensor>* retvals,
                                         tensorflow::StepStats* step_stats) {
  FunctionCallFrame frame(std::move(args), static_cast<int>(sig.fetches.size()));
  LocalRendezvous rendezvous;
  CancellationManager cancellation;
  Executor::Args a;
  a.step_id = next_step_id_.fetch_add(1, std::memory_order_relaxed);
  a.rendezvous = &rendezvous;
  a.call_frame = &frame;
  a.cancellation_manager = &cancellation;
  a.deadline = deadline;
  if (ThreadPool* pool = inter_op_pool_) {
    a.runner = [pool](std::function<void()> fn) { pool->Schedule(std::move(fn)); };
  }
  auto step = std::make_shared<StepState>(static_cast<int>(sig.executors.size()));
  if (sig.executors.empty()) step->done.Notify();
  std::vector<std::unique_ptr<StepStatsCollector>> stats;
  for (const auto& exec : sig.executors) {
    if (step_stats != nullptr) {
      stats.push_back(std::make_unique<StepStatsCollector>(exec->device()->name()));
      a.stats = stats.back().get();
    }
    exec->RunAsync(a, [step](absl::Status s) { step->Done(s); });
  }
  if (!step->done.WaitForNotificationWithDeadline(deadline)) {
    const std::vector<std::string> waiting = rendezvous.PendingRecvKeys();
    absl::Status timeout = absl::DeadlineExceededError(absl::StrCat(
        "[Session] step ", a.step_id, " timed out; ",
        waiting.empty() ? "kernels were still running"
                        : absl::StrCat("still waiting for: ", absl::StrJoin(waiting, ", "))));
    cancellation.StartCancel();
    rendezvous.StartAbort(timeout);
    step->done.WaitForNotification();
    return timeout;
  }
  for (auto& c : stats) c->Finalize(step_stats->add_dev_stats());
  {
    absl::MutexLock l(&step->mu);
    RETURN_IF_ERROR(step->status);
  }
  if (int missing = frame.FirstUnsetRetval(); missing >= 0) {
    return absl::InvalidArgumentError(absl::StrCat("[Session] fetch '", sig.fetches[missing],
                                                   "' was not computed (its input was dead)"));
  }
  ASSIGN_OR_RETURN(*retvals, frame.ConsumeRetvals());
  return absl::OkStatus();
}

// --- the rest ----------------------------------------------------------------------

absl::StatusOr<std::vector<DeviceInfo>> DirectSession::ListDevices() {
  {
    absl::ReaderMutexLock l(&mu_);
    if (closed_) return Closed();
  }
  std::vector<DeviceInfo> out;
  for (Device* d : device_mgr_->ListDevices()) {
    out.push_back(DeviceInfo{d->name(), d->device_type(), d->memory_limit(), d->incarnation()});
  }
  return out;
}

absl::Status DirectSession::Close() {
  {
    absl::MutexLock l(&mu_);
    if (closed_) return absl::OkStatus();
    closed_ = true;
    signatures_.Close(Closed());
    graph_.reset();
  }
  for (Device* d : device_mgr_->ListDevices()) d->resource_manager()->CleanupAll();
  return absl::OkStatus();
}

int DirectSession::num_cached_signatures() const { return signatures_.size(); }

}  // namespace dflow
