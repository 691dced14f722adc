#include "dflow/train/cluster_trainer.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "dflow/client/ops.h"
#include "dflow/client/training_ops_wrappers.h"
#include "dflow/distributed/cluster_spec.h"
#include "dflow/framework/status.h"
#include "dflow/train/batch_iterator.h"
#include "dflow/train/replica_device_setter.h"
#include "dflow/train/step_trace.h"
#include "dflow/train/sync_replicas_optimizer.h"
#include "dflow/train/trainer_internal.h"
#include "dflow/train/variables.h"

namespace dflow {

using namespace train_internal;  // NOLINT: the trainer's shared pieces.

namespace {

absl::Status CheckClusterOptions(const TrainOptions& o, TrainMode mode,
                                 const ClusterSpec& cluster) {
  if (IsInGraph(mode) && o.task != 0) {
    return absl::InvalidArgumentError(
        "[train] in-graph replication has one client, worker 0; other workers only serve");
  }
  if (o.towers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("[train] --towers must be >= 1, got ", o.towers));
  }
  if (o.job != "worker") {
    return absl::InvalidArgumentError(
        absl::StrCat("[train] --job '", o.job, "': only workers train (a ps only serves)"));
  }
  if (!cluster.HasJob("ps") || !cluster.HasJob("worker")) {
    return absl::InvalidArgumentError(absl::StrCat("[train] the cluster ", cluster.ToJson(),
                                                   " needs a \"ps\" and a \"worker\" job"));
  }
  const int workers = cluster.NumTasks("worker");
  if (o.task < 0 || o.task >= workers) {
    return absl::InvalidArgumentError(
        absl::StrCat("[train] --task ", o.task, " is not a worker of ", cluster.ToJson()));
  }
  if (o.replicas_to_aggregate < 0 || o.replicas_to_aggregate > workers) {
    return absl::InvalidArgumentError(absl::StrCat("[train] --replicas-to-aggregate must be in 1..",
                                                   workers, ", got ", o.replicas_to_aggregate));
  }
  if (o.session_target.empty()) {
    return absl::InvalidArgumentError("[train] a cluster worker needs its server's target");
  }
  return ParsePsStrategy(o.ps_strategy).status();
}

// Slices of a seeded sequence of global batches of `global_batch` rows,
// from global batch `skip` on: Next() returns, for the next global batch,
// `count` consecutive slices of `batch_size` rows starting at slice `first`.
// Only those slices' rows are gathered from the dataset.
class ShardedBatches {
 public:
  static absl::StatusOr<std::unique_ptr<ShardedBatches>> Create(const Dataset& train,
                                                                const TrainOptions& o,
                                                                int64_t global_batch, int first,
                                                                int count, int64_t skip) {
    ASSIGN_OR_RETURN(auto inner,
                     BatchIterator::Create(train, {.batch_size = global_batch,
                                                   .seed = static_cast<uint64_t>(o.seed),
                                                   .drop_remainder = true,
                                                   .num_epochs = 0,
                                                   .slice_begin = first * o.batch_size,
                                                   .slice_size = count * o.batch_size}));
    RETURN_IF_ERROR(inner->Skip(skip));
    return std::unique_ptr<ShardedBatches>(
        new ShardedBatches(std::move(inner), o.batch_size, count));
  }

  // One (features, labels) per slice.
  absl::StatusOr<std::vector<std::pair<Tensor, Tensor>>> Next() {
    ASSIGN_OR_RETURN(Batch rows, input_.Next());
    std::vector<std::pair<Tensor, Tensor>> slices;
    for (int i = 0; i < count_; ++i) {
      slices.emplace_back(Rows(rows.features, i), Rows(rows.labels, i));
    }
    return slices;
  }

 private:
  ShardedBatches(std::unique_ptr<BatchIterator> inner, int64_t batch_size, int count)
      : input_(std::move(inner)), batch_size_(batch_size), count_(count) {}

  // Rows [slice * batch_size, (slice + 1) * batch_size) of `t` (the gathered
  // slices): `t` itself when that is all of it (one slice), a copy otherwise.
  Tensor Rows(const Tensor& t, int slice) const {
    if (t.dim_size(0) == batch_size_) return t;
    TensorShape shape = t.shape();
    shape.set_dim(0, batch_size_);
    Tensor out = Tensor::ForOverwrite(t.dtype(), shape);
    const size_t bytes = out.TotalBytes();
    std::memcpy(out.raw_data(), static_cast<const char*>(t.raw_data()) + slice * bytes, bytes);
    return out;
  }

  PrefetchingIterator input_;
  const int64_t batch_size_;
  const int count_;
};

// The mean of the towers' gradients of each variable, computed on `device`
// ("": beside the variable).
std::vector<GradAndVar> AverageGradients(const Scope& scope,
                                         const std::vector<std::vector<GradAndVar>>& towers,
                                         const std::string& device) {
  if (towers.size() == 1) return towers[0];
  std::vector<GradAndVar> mean;
  Scope s = scope.NewSubScope("average_gradients");
  for (size_t v = 0; v < towers[0].size(); ++v) {
    const Variable& var = towers[0][v].var;
    Scope at = device.empty() ? s.ColocateWith(var.op()) : s.WithDevice(device);
    std::vector<Input> grads;
    for (const auto& tower : towers) grads.push_back(tower[v].grad);
    Output sum = ops::AddN(at, grads);
    mean.push_back({ops::Mul(at, sum, Tensor::Scalar(1.0f / towers.size())), var});
  }
  return mean;
}

// Every task of `cluster` but worker `task`, with its address.
std::vector<StallWatch::Task> OtherTasks(const ClusterSpec& cluster, int task) {
  std::vector<StallWatch::Task> tasks;
  for (const TaskId& t : cluster.AllTasks()) {
    if (t.job == "worker" && t.index == task) continue;
    tasks.push_back(
        {ClusterSpec::TaskName(t.job, t.index), cluster.TaskAddress(t.job, t.index).value_or("?")});
  }
  return tasks;
}

// Makes the towers' input iterators, each going on from global batch `first_batch`.
absl::Status StartGraphInputs(const ClientSession& session, const std::vector<GraphBatches>& inputs,
                              int64_t first_batch) {
  ClientSession::FeedType feeds;
  std::vector<Operation> inits;
  for (const GraphBatches& in : inputs) {
    feeds.push_back({in.skip_batches, Tensor::Scalar(first_batch)});
    inits.push_back(in.init);
  }
  return session.Run(feeds, {}, inits, nullptr);
}

// Where this worker's part of the run lies: its mode, its towers and the
// length of the run.
struct Layout {
  TrainMode mode = TrainMode::kBetweenAsync;
  int workers = 0;
  bool chief = false;
  bool sync = false;
  bool in_graph = false;
  int replicas = 0;  // Gradients aggregated per between-sync step.
  int towers_per_task = 1;
  int first_task = 0;  // The first worker task with a tower of this client.
  // Towers: the devices that compute a copy of the model, sharing tower 0's
  // variables. Between-graph, this worker's CPUs; in-graph, every worker's.
  std::vector<std::string> tower_devices;
  std::string worker_device;  // This task.
  int64_t examples_per_step = 0;
  int64_t steps_per_epoch = 0;
  int64_t total_steps = 0;
};

Layout PlanLayout(const TrainOptions& o, TrainMode mode, const ClusterSpec& cluster,
                  const Data& data) {
  Layout l;
  l.mode = mode;
  l.workers = cluster.NumTasks("worker");
  l.chief = o.task == 0;
  l.sync = IsSync(mode);
  l.in_graph = IsInGraph(mode);
  l.replicas = l.sync && o.replicas_to_aggregate > 0 ? o.replicas_to_aggregate : l.workers;
  l.towers_per_task = static_cast<int>(o.towers);
  l.first_task = l.in_graph ? 0 : o.task;
  const int last_task = l.in_graph ? l.workers - 1 : o.task;
  for (int w = l.first_task; w <= last_task; ++w) {
    for (int t = 0; t < l.towers_per_task; ++t) {
      l.tower_devices.push_back(l.towers_per_task == 1
                                    ? absl::StrCat("/job:worker/task:", w)
                                    : absl::StrCat("/job:worker/task:", w, "/device:",
                                                   o.tower_device_type, ":", t));
    }
  }
  l.worker_device = absl::StrCat("/job:worker/task:", o.task);
  l.examples_per_step = o.batch_size * l.towers_per_task *
                        (mode == TrainMode::kBetweenSync   ? l.replicas
                         : mode == TrainMode::kInGraphSync ? l.workers
                                                           : 1);
  l.steps_per_epoch = data.train_examples / l.examples_per_step;
  l.total_steps = l.steps_per_epoch * o.epochs;
  if (o.max_steps > 0) l.total_steps = std::min(l.total_steps, o.max_steps);
  return l;
}

// What each driving thread runs: its train op, fed by its towers.
struct Group {
  Operation train_op;
  int first_tower = 0;
  int towers = 0;
};

// The graph of the run: the model once per tower, the averaged gradients
// and the train ops of the driving threads.
struct ClusterGraph {
  Scope root = Scope::NewRootScope();
  Scope worker = root;  // Placed by the replica device setter on this worker.
  Variable global_step;
  std::unique_ptr<Optimizer> opt;
  std::unique_ptr<SyncReplicasOptimizer> sync_opt;  // between-sync; borrows opt
  std::vector<Model> models;                        // One per tower.
  std::vector<std::vector<GradAndVar>> grads;       // One list per tower.
  // With TFRecord files each tower reads its own shard of them, on its device.
  bool graph_input = false;
  std::vector<GraphBatches> inputs;
  std::vector<Group> groups;
};

// The towers' models and gradients, each tower placed by a replica device
// setter: variables on the ps tasks, the rest on the tower's device.
absl::Status BuildTowers(const TrainOptions& o, const ClusterSpec& cluster, const Layout& l,
                         const Data& data, double learning_rate, ClusterGraph* g) {
  ASSIGN_OR_RETURN(ReplicaDeviceSetterOptions setter_options,
                   ReplicaDeviceSetterOptions::FromCluster(cluster, l.worker_device));
  ASSIGN_OR_RETURN(setter_options.strategy, ParsePsStrategy(o.ps_strategy));
  auto setter = std::make_shared<ReplicaDeviceSetter>(setter_options);
  // What the replica device setter does for `device`: variables to the ps
  // tasks, the rest to `device`.
  auto placed_on = [&](const Scope& scope, const std::string& device) {
    return scope.WithDeviceFunction([setter, device](const tensorflow::NodeDef& node) {
      return setter->DeviceFor(node, device);
    });
  };
  g->worker = placed_on(g->root, l.worker_device);
  const Scope& s = g->worker;
  ASSIGN_OR_RETURN(g->global_step, CreateGlobalStep(s));
  ASSIGN_OR_RETURN(g->opt, MakeOptimizer(o.optimizer, LearningRate(s, o, learning_rate,
                                                                   g->global_step, l.total_steps)));
  g->graph_input = UsesTFRecords(o);
  g->inputs.resize(l.tower_devices.size());
  for (size_t t = 0; t < l.tower_devices.size(); ++t) {
    Scope tower = placed_on(t == 0 ? g->root : g->root.NewSubScope(absl::StrCat("tower_", t)),
                            l.tower_devices[t]);
    if (g->graph_input) {
      ASSIGN_OR_RETURN(g->inputs[t],
                       TFRecordBatches(tower, {.files = data.train_files,
                                               .batch_size = o.batch_size,
                                               .seed = o.seed,
                                               .num_shards = l.workers * l.towers_per_task,
                                               .shard_index = l.first_task * l.towers_per_task +
                                                              static_cast<int64_t>(t)}));
    }
    const GraphBatches* input = g->graph_input ? &g->inputs[t] : nullptr;
    ASSIGN_OR_RETURN(Model model, t == 0 ? BuildModel(tower, o, nullptr, input)
                                         : BuildModel(tower, o, &g->models[0].variables, input));
    ASSIGN_OR_RETURN(auto grads, g->opt->ComputeGradients(tower, model.loss, model.variables));
    g->models.push_back(std::move(model));
    g->grads.push_back(std::move(grads));
  }
  return absl::OkStatus();
}

// The train ops: one per worker task in-graph-async (from its towers),
// otherwise one from every tower, averaged on this worker between-graph and
// beside each variable in-graph, applied through a SyncReplicasOptimizer
// between-sync.
absl::Status BuildTrainOps(const Layout& l, ClusterGraph* g) {
  const Scope& s = g->worker;
  if (l.mode == TrainMode::kInGraphAsync) {
    for (int w = 0; w < l.workers; ++w) {
      const auto first = g->grads.begin() + w * l.towers_per_task;
      std::vector<GradAndVar> mean = AverageGradients(s.NewSubScope(absl::StrCat("worker_", w)),
                                                      {first, first + l.towers_per_task},
                                                      absl::StrCat("/job:worker/task:", w));
      ASSIGN_OR_RETURN(Operation train, g->opt->ApplyGradients(s, mean, &g->global_step));
      g->groups.push_back({train, w * l.towers_per_task, l.towers_per_task});
    }
    return absl::OkStatus();
  }
  std::vector<GradAndVar> mean = AverageGradients(s, g->grads, l.in_graph ? "" : l.worker_device);
  Operation train;
  if (l.sync && !l.in_graph) {
    g->sync_opt = std::make_unique<SyncReplicasOptimizer>(
        g->opt.get(), SyncReplicasOptions{.replicas_to_aggregate = l.replicas,
                                          .total_num_replicas = l.workers,
                                          .local_device = l.worker_device});
    ASSIGN_OR_RETURN(train, g->sync_opt->ApplyGradients(s, mean, &g->global_step));
  } else {
    ASSIGN_OR_RETURN(train, g->opt->ApplyGradients(s, mean, &g->global_step));
  }
  g->groups.push_back({train, 0, static_cast<int>(l.tower_devices.size())});
  return absl::OkStatus();
}

// The session: the chief restores the latest checkpoint or initializes the
// variables on the ps tasks, the others wait for it. A step that fails
// because a task died recreates the session (the chief restoring the
// latest checkpoint if the ps lost its variables) and runs again. In sync
// mode every new session starts as the first did: each worker's local
// step from the global step, the chief's accumulators and initial tokens.
absl::StatusOr<std::unique_ptr<MonitoredSession>> StartClusterSession(const TrainOptions& o,
                                                                      const Layout& l,
                                                                      const ClusterGraph& g,
                                                                      std::ostream& progress) {
  SessionOptions session_options;
  session_options.target = o.session_target;
  if (!l.in_graph) {  // A between-graph replica sees the ps tasks and itself only.
    session_options.config.add_device_filters("/job:ps");
    session_options.config.add_device_filters(l.worker_device);
  }
  session_options.config.set_operation_timeout_in_ms(o.startup_timeout_seconds * 1000);
  MonitoredSessionOptions ms_options{.session = session_options,
                                     .ready_timeout = absl::Seconds(o.startup_timeout_seconds)};
  if (g.sync_opt != nullptr) {
    ms_options.after_create = [sync_opt = g.sync_opt.get(),
                               chief = l.chief](const ClientSession& s) {
      RETURN_IF_ERROR(sync_opt->InitLocalStep(s));
      return chief ? sync_opt->InitChief(s) : absl::OkStatus();
    };
  }
  return StartMonitoredSession(g.root, o, g.global_step, VariablesInitialized(g.root, "/job:ps"),
                               l.chief, l.total_steps, std::move(ms_options), progress);
}

// Between-sync, the chief's loop that aggregates the gradients and hands
// out tokens; null elsewhere. No loop when training is already done (a
// restart at the last step): its first aggregation would wait for gradients
// no worker sends, so the chief ends the other workers' waits for a token
// instead, as the loop would have.
absl::StatusOr<std::unique_ptr<SyncReplicasOptimizer::ChiefLoop>> StartChiefLoop(
    const Layout& l, const ClusterGraph& g, MonitoredSession* ms) {
  if (g.sync_opt == nullptr || !l.chief) return nullptr;
  if (ms->ShouldStop()) {
    RETURN_IF_ERROR(g.sync_opt->EndTraining(ms->session()));
    return nullptr;
  }
  return g.sync_opt->StartChiefLoop(
      [ms](const std::function<absl::Status(const ClientSession&)>& call) {
        return ms->RunWithoutHooks(call);
      },
      l.total_steps);
}

// The training loop: one thread per group runs its train op until the end
// of training, adding to the tallies the metrics report.
class Drivers {
 public:
  // Every global batch holds workers x towers x batch_size rows; a group
  // takes the slices of its towers (tower k of the cluster: slice k), from
  // global batch `first_batch` on.
  Drivers(const TrainOptions& o, const Layout& l, const ClusterGraph& g, const Data& data,
          MonitoredSession* ms, StepTracer* tracer, StallWatch* stall_watch, Progress* live,
          int64_t first_batch)
      : o_(o),
        l_(l),
        g_(g),
        data_(data),
        ms_(ms),
        tracer_(tracer),
        stall_watch_(stall_watch),
        live_(live),
        global_batch_(o.batch_size * l.towers_per_task * l.workers),
        slice_offset_(l.in_graph ? 0 : o.task * l.towers_per_task),
        first_batch_(first_batch) {}

  // Runs every group (the first on this thread); the first group error, or OK.
  absl::Status Run() {
    std::vector<absl::Status> status(g_.groups.size());
    std::vector<std::thread> threads;
    for (size_t i = 1; i < g_.groups.size(); ++i) {
      threads.emplace_back([&, i] { status[i] = Drive(g_.groups[i]); });
    }
    status[0] = Drive(g_.groups[0]);
    for (std::thread& t : threads) t.join();
    for (const absl::Status& s : status) RETURN_IF_ERROR(s);
    return absl::OkStatus();
  }

  // The highest global step reached; the one before the first step run
  // here (-1: none ran); steps run here; mean loss over the last epoch.
  int64_t last_step() const { return last_step_.load(); }
  int64_t first_step() const {
    absl::MutexLock l(&mu_);
    return first_step_;
  }
  int64_t local_steps() const {
    absl::MutexLock l(&mu_);
    return local_steps_;
  }
  double final_loss() const {
    absl::MutexLock l(&mu_);
    return loss_steps_ > 0 ? loss_sum_ / loss_steps_ : 0;
  }

 private:
  absl::Status Drive(const Group& group) {
    std::unique_ptr<ShardedBatches> batches;
    if (!g_.graph_input) {
      ASSIGN_OR_RETURN(batches, ShardedBatches::Create(*data_.train, o_, global_batch_,
                                                       slice_offset_ + group.first_tower,
                                                       group.towers, first_batch_));
    }
    const SyncReplicasOptimizer* sync_opt = g_.sync_opt.get();
    const int64_t total_steps = l_.total_steps;
    // In sync mode the chief ends training by closing the token queue; a
    // worker goes on until then, whatever global step it saw: its last
    // gradient may have been dropped as stale, and the chief's last
    // aggregation may still need one from it.
    while (!ms_->ShouldStop() && (sync_opt != nullptr || last_step_.load() < total_steps)) {
      ClientSession::FeedType feeds;  // None when the graph reads its input.
      if (batches != nullptr) {
        ASSIGN_OR_RETURN(auto slices, batches->Next());
        for (int t = 0; t < group.towers; ++t) {
          feeds.push_back({g_.models[group.first_tower + t].features, slices[t].first});
          feeds.push_back({g_.models[group.first_tower + t].labels, slices[t].second});
        }
      }
      bool end_of_training = false;
      double loss = 0;
      int64_t step = 0;
      RETURN_IF_ERROR(ms_->RunStep([&](const ClientSession& session) -> absl::StatusOr<StepResult> {
        return Step(session, group, feeds, &end_of_training, &loss, &step);
      }));
      if (end_of_training) {
        // The chief closes the token queue once the global step reached the
        // total: that is where training ended, whichever step this worker saw last.
        absl::MutexLock l(&mu_);
        if (total_steps > last_step_.load()) last_step_.store(total_steps);
        break;
      }
      stall_watch_->Stepped(step);
      absl::MutexLock l(&mu_);
      if (step > last_step_.load()) last_step_.store(step);
      if (first_step_ < 0) first_step_ = step - 1;
      ++local_steps_;
      if (step > total_steps - l_.steps_per_epoch) loss_sum_ += loss, ++loss_steps_;
      live_->Step(std::min(step, total_steps) - 1, o_.batch_size * group.towers, loss);
    }
    return absl::OkStatus();
  }

  // One train step of `group` in `session`: its loss and the global step
  // after it, or `end_of_training` once the chief closed the token queue.
  absl::StatusOr<StepResult> Step(const ClientSession& session, const Group& group,
                                  const ClientSession::FeedType& feeds, bool* end_of_training,
                                  double* loss, int64_t* step) {
    SyncReplicasOptimizer* sync_opt = g_.sync_opt.get();
    const int64_t total_steps = l_.total_steps;
    const std::vector<Output> fetches = {g_.models[group.first_tower].loss, g_.global_step.value()};
    std::vector<Tensor> out;
    absl::Status st = RunMaybeTraced(
        tracer_, last_step_.load(),
        [&](const tensorflow::RunOptions& options, tensorflow::RunMetadata* metadata) {
          return sync_opt != nullptr
                     ? sync_opt->RunTrainStep(session, feeds, fetches, &out, options, metadata)
                     : session.Run(options, feeds, fetches, {group.train_op}, &out, metadata);
        });
    if (sync_opt != nullptr && SyncReplicasOptimizer::IsEndOfTraining(st)) {
      *end_of_training = true;
      return StepResult{.global_step = total_steps};
    }
    RETURN_IF_ERROR(st);
    *loss = out[0].scalar<float>();
    *step = out[1].scalar<int64_t>() + 1;  // Read before this step's update.
    // Sync: the stop hook waits for the end of training (the closed queue).
    return StepResult{.global_step = sync_opt != nullptr ? std::min(*step, total_steps - 1) : *step,
                      .loss = *loss};
  }

  const TrainOptions& o_;
  const Layout& l_;
  const ClusterGraph& g_;
  const Data& data_;
  MonitoredSession* const ms_;     // not owned
  StepTracer* const tracer_;       // not owned
  StallWatch* const stall_watch_;  // not owned
  Progress* const live_;           // not owned; guarded by mu_
  const int64_t global_batch_;
  const int slice_offset_;
  const int64_t first_batch_;

  mutable absl::Mutex mu_;
  std::atomic<int64_t> last_step_{0};
  int64_t first_step_ ABSL_GUARDED_BY(mu_) = -1;
  int64_t local_steps_ ABSL_GUARDED_BY(mu_) = 0;
  double loss_sum_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t loss_steps_ ABSL_GUARDED_BY(mu_) = 0;
};

// The global batch a session that starts at global step `start_step` goes
// on with (a restored checkpoint, a restarted worker), not the first: each
// global batch is one step in sync mode, and one step of every group's
// driver otherwise (each advances the global step).
int64_t FirstBatch(const Layout& l, const ClusterGraph& g, int64_t start_step) {
  const int64_t updates_per_batch =
      l.sync ? 1 : static_cast<int64_t>(g.groups.size()) * (l.in_graph ? 1 : l.workers);
  return start_step / updates_per_batch;
}

}  // namespace

absl::StatusOr<TrainMetrics> TrainOnCluster(const TrainOptions& o, std::ostream& progress) {
  const Clock::time_point wall_start = Clock::now();
  RETURN_IF_ERROR(CheckOptions(o));
  ASSIGN_OR_RETURN(const TrainMode mode, ParseTrainMode(o.mode));
  ASSIGN_OR_RETURN(ClusterSpec cluster, ClusterSpec::FromJsonOrFile(o.cluster));
  RETURN_IF_ERROR(CheckClusterOptions(o, mode, cluster));
  ASSIGN_OR_RETURN(Data data, LoadData(o));
  const Layout l = PlanLayout(o, mode, cluster, data);

  TrainMetrics m = InitialMetrics(o);
  // Every worker traces its own steps: between-graph, a step of one worker
  // involves only it and the ps tasks, so the chief's trace alone would
  // never show the others.
  StepTracer tracer(o.trace_steps, o.trace_dir.empty() ? o.checkpoint_dir : o.trace_dir,
                    absl::StrCat(o.job, o.task));
  m.mode = o.mode;
  m.workers = l.workers;

  ClusterGraph g;
  RETURN_IF_ERROR(BuildTowers(o, cluster, l, data, m.learning_rate, &g));
  RETURN_IF_ERROR(BuildTrainOps(l, &g));
  RETURN_IF_ERROR(g.root.status());

  ASSIGN_OR_RETURN(std::unique_ptr<MonitoredSession> ms, StartClusterSession(o, l, g, progress));
  m.restored_from = ms->restored_from();
  m.start_step = ms->global_step();
  ASSIGN_OR_RETURN(std::unique_ptr<SyncReplicasOptimizer::ChiefLoop> chief_loop,
                   StartChiefLoop(l, g, ms.get()));

  TrainOptions progress_options = o;
  progress_options.epochs = (l.total_steps + l.steps_per_epoch - 1) / l.steps_per_epoch;
  Progress live(progress, progress_options, l.steps_per_epoch);
  const int64_t first_batch = FirstBatch(l, g, m.start_step);
  if (first_batch > 0) {
    progress << "[train] starting at global step " << m.start_step
             << ": the input goes on from global batch " << first_batch << std::endl;
  }
  if (g.graph_input) RETURN_IF_ERROR(StartGraphInputs(ms->session(), g.inputs, first_batch));
  // Names the tasks a step that stopped waits for.
  StallWatch stall_watch({.after = absl::Seconds(o.stall_report_secs),
                          .tasks = OtherTasks(cluster, o.task),
                          .ping = o.ping_task,
                          .log = &progress});
  Drivers drivers(o, l, g, data, ms.get(), &tracer, &stall_watch, &live, first_batch);
  const Clock::time_point train_start = Clock::now();
  const absl::Status trained = drivers.Run();
  m.train_seconds = SecondsSince(train_start);
  RETURN_IF_ERROR(trained);
  if (chief_loop != nullptr) RETURN_IF_ERROR(chief_loop->Stop());
  if (g.sync_opt != nullptr) m.stale_gradients = g.sync_opt->stale_gradients();
  m.steps = drivers.last_step();
  m.local_steps = drivers.local_steps();
  m.local_examples_per_sec =
      m.train_seconds > 0 ? m.local_steps * o.batch_size * l.towers_per_task / m.train_seconds : 0;
  m.examples_per_sec =
      m.train_seconds > 0 && drivers.first_step() >= 0
          ? (m.steps - drivers.first_step()) * l.examples_per_step / m.train_seconds
          : 0;
  m.final_loss = drivers.final_loss();
  m.recoveries = ms->recoveries();
  m.trace_files = tracer.files();
  if (l.chief) {
    ASSIGN_OR_RETURN(m.test_accuracy, Evaluate(ms->session(), g.models[0], data.test));
  }
  RETURN_IF_ERROR(ms->Close());  // The chief's final checkpoint.
  m.wall_seconds = SecondsSince(wall_start);
  if (l.chief && !o.metrics_out.empty()) RETURN_IF_ERROR(WriteMetrics(o.metrics_out, m));
  return m;
}

}  // namespace dflow
