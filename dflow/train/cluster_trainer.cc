#include "dflow/train/cluster_trainer.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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
                                                   .num_epochs = 0}));
    RETURN_IF_ERROR(inner->Skip(skip));
    return std::unique_ptr<ShardedBatches>(
        new ShardedBatches(std::move(inner), o.batch_size, first, count));
  }

  // One (features, labels) per slice.
  absl::StatusOr<std::vector<std::pair<Tensor, Tensor>>> Next() {
    ASSIGN_OR_RETURN(Batch global, input_.Next());
    std::vector<std::pair<Tensor, Tensor>> slices;
    for (int i = first_; i < first_ + count_; ++i) {
      slices.emplace_back(Rows(global.features, i), Rows(global.labels, i));
    }
    return slices;
  }

 private:
  ShardedBatches(std::unique_ptr<BatchIterator> inner, int64_t batch_size, int first, int count)
      : input_(std::move(inner)), batch_size_(batch_size), first_(first), count_(count) {}

  // Rows [slice * batch_size, (slice + 1) * batch_size) of `t`.
  Tensor Rows(const Tensor& t, int slice) const {
    TensorShape shape = t.shape();
    shape.set_dim(0, batch_size_);
    Tensor out = Tensor::ForOverwrite(t.dtype(), shape);
    const size_t bytes = out.TotalBytes();
    std::memcpy(out.raw_data(), static_cast<const char*>(t.raw_data()) + slice * bytes, bytes);
    return out;
  }

  PrefetchingIterator input_;
  const int64_t batch_size_;
  const int first_;
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
    tasks.push_back({ClusterSpec::TaskName(t.job, t.index),
                     cluster.TaskAddress(t.job, t.index).value_or("?")});
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

}  // namespace

absl::StatusOr<TrainMetrics> TrainOnCluster(const TrainOptions& o, std::ostream& progress) {
  const Clock::time_point wall_start = Clock::now();
  RETURN_IF_ERROR(CheckOptions(o));
  ASSIGN_OR_RETURN(const TrainMode mode, ParseTrainMode(o.mode));
  ASSIGN_OR_RETURN(ClusterSpec cluster, ClusterSpec::FromJsonOrFile(o.cluster));
  RETURN_IF_ERROR(CheckClusterOptions(o, mode, cluster));
  const int workers = cluster.NumTasks("worker");
  const bool chief = o.task == 0;
  const bool sync = IsSync(mode);
  const bool in_graph = IsInGraph(mode);
  const int replicas = sync && o.replicas_to_aggregate > 0 ? o.replicas_to_aggregate : workers;
  ASSIGN_OR_RETURN(Data data, LoadData(o));

  TrainMetrics m = InitialMetrics(o);
  // Every worker traces its own steps: between-graph, a step of one worker
  // involves only it and the ps tasks, so the chief's trace alone would
  // never show the others.
  StepTracer tracer(o.trace_steps, o.trace_dir.empty() ? o.checkpoint_dir : o.trace_dir,
                    absl::StrCat(o.job, o.task));
  m.mode = o.mode;
  m.workers = workers;

  // Towers: the devices that compute a copy of the model, sharing tower 0's
  // variables. Between-graph, this worker's CPUs; in-graph, every worker's.
  const int towers_per_task = static_cast<int>(o.towers);
  const int first_task = in_graph ? 0 : o.task;
  const int last_task = in_graph ? workers - 1 : o.task;
  std::vector<std::string> tower_devices;
  for (int w = first_task; w <= last_task; ++w) {
    for (int t = 0; t < towers_per_task; ++t) {
      tower_devices.push_back(towers_per_task == 1
                                  ? absl::StrCat("/job:worker/task:", w)
                                  : absl::StrCat("/job:worker/task:", w, "/device:CPU:", t));
    }
  }
  const std::string worker_device = absl::StrCat("/job:worker/task:", o.task);
  ASSIGN_OR_RETURN(ReplicaDeviceSetterOptions setter_options,
                   ReplicaDeviceSetterOptions::FromCluster(cluster, worker_device));
  ASSIGN_OR_RETURN(setter_options.strategy, ParsePsStrategy(o.ps_strategy));
  auto setter = std::make_shared<ReplicaDeviceSetter>(setter_options);
  Scope root = Scope::NewRootScope();
  // What the replica device setter does for `device`: variables to the ps
  // tasks, the rest to `device`.
  auto placed_on = [&](const Scope& scope, const std::string& device) {
    return scope.WithDeviceFunction([setter, device](const tensorflow::NodeDef& node) {
      return setter->DeviceFor(node, device);
    });
  };
  Scope s = placed_on(root, worker_device);
  const int64_t examples_per_step = o.batch_size * towers_per_task *
                                    (mode == TrainMode::kBetweenSync   ? replicas
                                     : mode == TrainMode::kInGraphSync ? workers
                                                                       : 1);
  const int64_t steps_per_epoch = data.train_examples / examples_per_step;
  int64_t total_steps = steps_per_epoch * o.epochs;
  if (o.max_steps > 0) total_steps = std::min(total_steps, o.max_steps);
  ASSIGN_OR_RETURN(Variable global_step, CreateGlobalStep(s));
  ASSIGN_OR_RETURN(
      std::unique_ptr<Optimizer> opt,
      MakeOptimizer(o.optimizer, LearningRate(s, o, m.learning_rate, global_step, total_steps)));
  std::vector<Model> models;
  std::vector<std::vector<GradAndVar>> grads;
  // With TFRecord files each tower reads its own shard of them, on its device.
  const bool graph_input = UsesTFRecords(o);
  std::vector<GraphBatches> inputs(tower_devices.size());
  for (size_t t = 0; t < tower_devices.size(); ++t) {
    Scope tower =
        placed_on(t == 0 ? root : root.NewSubScope(absl::StrCat("tower_", t)), tower_devices[t]);
    if (graph_input) {
      ASSIGN_OR_RETURN(inputs[t],
                       TFRecordBatches(tower, {.files = data.train_files,
                                               .batch_size = o.batch_size,
                                               .seed = o.seed,
                                               .num_shards = workers * towers_per_task,
                                               .shard_index = first_task * towers_per_task +
                                                              static_cast<int64_t>(t)}));
    }
    const GraphBatches* input = graph_input ? &inputs[t] : nullptr;
    ASSIGN_OR_RETURN(Model model, t == 0 ? BuildModel(tower, o, nullptr, input)
                                         : BuildModel(tower, o, &models[0].variables, input));
    ASSIGN_OR_RETURN(auto g, opt->ComputeGradients(tower, model.loss, model.variables));
    models.push_back(std::move(model));
    grads.push_back(std::move(g));
  }

  // What each driving thread runs: its train op, fed by its towers.
  struct Group {
    Operation train_op;
    int first_tower = 0;
    int towers = 0;
  };
  std::vector<Group> groups;
  std::unique_ptr<SyncReplicasOptimizer> sync_opt;
  if (mode == TrainMode::kInGraphAsync) {
    for (int w = 0; w < workers; ++w) {  // One update per worker task, from its towers.
      const auto first = grads.begin() + w * towers_per_task;
      std::vector<GradAndVar> mean =
          AverageGradients(s.NewSubScope(absl::StrCat("worker_", w)),
                           {first, first + towers_per_task}, absl::StrCat("/job:worker/task:", w));
      ASSIGN_OR_RETURN(Operation train, opt->ApplyGradients(s, mean, &global_step));
      groups.push_back({train, w * towers_per_task, towers_per_task});
    }
  } else {
    // One update from every tower: averaged on this worker between-graph,
    // beside each variable in-graph.
    std::vector<GradAndVar> mean = AverageGradients(s, grads, in_graph ? "" : worker_device);
    Operation train;
    if (sync && !in_graph) {
      sync_opt = std::make_unique<SyncReplicasOptimizer>(
          opt.get(), SyncReplicasOptions{.replicas_to_aggregate = replicas,
                                         .total_num_replicas = workers,
                                         .local_device = worker_device});
      ASSIGN_OR_RETURN(train, sync_opt->ApplyGradients(s, mean, &global_step));
    } else {
      ASSIGN_OR_RETURN(train, opt->ApplyGradients(s, mean, &global_step));
    }
    groups.push_back({train, 0, static_cast<int>(tower_devices.size())});
  }
  RETURN_IF_ERROR(root.status());

  SessionOptions session_options;
  session_options.target = o.session_target;
  if (!in_graph) {  // A between-graph replica sees the ps tasks and itself only.
    session_options.config.add_device_filters("/job:ps");
    session_options.config.add_device_filters(worker_device);
  }
  session_options.config.set_operation_timeout_in_ms(o.startup_timeout_seconds * 1000);
  // The session: the chief restores the latest checkpoint or initializes the
  // variables on the ps tasks, the others wait for it. A step that fails
  // because a task died recreates the session (the chief restoring the
  // latest checkpoint if the ps lost its variables) and runs again. In sync
  // mode every new session starts as the first did: each worker's local
  // step from the global step, the chief's accumulators and initial tokens.
  MonitoredSessionOptions ms_options{.session = session_options,
                                     .ready_timeout = absl::Seconds(o.startup_timeout_seconds)};
  if (sync_opt != nullptr) {
    ms_options.after_create = [&](const ClientSession& s) {
      RETURN_IF_ERROR(sync_opt->InitLocalStep(s));
      return chief ? sync_opt->InitChief(s) : absl::OkStatus();
    };
  }
  ASSIGN_OR_RETURN(std::unique_ptr<MonitoredSession> ms,
                   StartMonitoredSession(root, o, global_step, VariablesInitialized(root, "/job:ps"),
                                         chief, total_steps, std::move(ms_options), progress));
  m.restored_from = ms->restored_from();
  m.start_step = ms->global_step();
  std::unique_ptr<SyncReplicasOptimizer::ChiefLoop> chief_loop;
  // No loop when training is already done (a restart at the last step):
  // its first aggregation would wait for gradients no worker sends.
  if (sync_opt != nullptr && chief && !ms->ShouldStop()) {
    chief_loop = sync_opt->StartChiefLoop(
        [&](const std::function<absl::Status(const ClientSession&)>& call) {
          return ms->RunWithoutHooks(call);
        },
        total_steps);
  } else if (sync_opt != nullptr && chief) {
    // Ends the other workers' waits for a token, as the loop would have.
    RETURN_IF_ERROR(sync_opt->EndTraining(ms->session()));
  }

  // Every global batch holds workers x towers x batch_size rows; a group
  // takes the slices of its towers (tower k of the cluster: slice k).
  const int64_t global_batch = o.batch_size * towers_per_task * workers;
  const int slice_offset = in_graph ? 0 : o.task * towers_per_task;
  TrainOptions progress_options = o;
  progress_options.epochs = (total_steps + steps_per_epoch - 1) / steps_per_epoch;
  Progress live(progress, progress_options, steps_per_epoch);
  absl::Mutex mu;  // Guards live and the sums below.
  std::atomic<int64_t> last_step{0};
  int64_t first_step = -1;
  double loss_sum = 0;
  int64_t loss_steps = 0;
  // A session that starts at a later global step (a restored checkpoint, a
  // restarted worker) goes on with the global batch that step reached, not
  // the first: each global batch is one step in sync mode, and one step of
  // every group's driver otherwise (each advances the global step).
  const int64_t updates_per_batch = sync ? 1 : static_cast<int64_t>(groups.size()) *
                                                   (in_graph ? 1 : workers);
  const int64_t first_batch = m.start_step / updates_per_batch;
  if (first_batch > 0) {
    progress << "[train] starting at global step " << m.start_step
             << ": the input goes on from global batch " << first_batch << std::endl;
  }
  if (graph_input) RETURN_IF_ERROR(StartGraphInputs(ms->session(), inputs, first_batch));
  // Names the tasks a step that stopped waits for.
  StallWatch stall_watch({.after = absl::Seconds(o.stall_report_secs),
                          .tasks = OtherTasks(cluster, o.task),
                          .ping = o.ping_task,
                          .log = &progress});
  auto drive = [&](const Group& g) -> absl::Status {
    std::unique_ptr<ShardedBatches> batches;
    if (!graph_input) {
      ASSIGN_OR_RETURN(batches, ShardedBatches::Create(*data.train, o, global_batch,
                                                       slice_offset + g.first_tower, g.towers,
                                                       first_batch));
    }
    // In sync mode the chief ends training by closing the token queue; a
    // worker goes on until then, whatever global step it saw: its last
    // gradient may have been dropped as stale, and the chief's last
    // aggregation may still need one from it.
    while (!ms->ShouldStop() && (sync_opt != nullptr || last_step.load() < total_steps)) {
      ClientSession::FeedType feeds;  // None when the graph reads its input.
      if (batches != nullptr) {
        ASSIGN_OR_RETURN(auto slices, batches->Next());
        for (int t = 0; t < g.towers; ++t) {
          feeds.push_back({models[g.first_tower + t].features, slices[t].first});
          feeds.push_back({models[g.first_tower + t].labels, slices[t].second});
        }
      }
      const std::vector<Output> fetches = {models[g.first_tower].loss, global_step.value()};
      bool end_of_training = false;
      double loss = 0;
      int64_t step = 0;
      RETURN_IF_ERROR(ms->RunStep([&](const ClientSession& session) -> absl::StatusOr<StepResult> {
        std::vector<Tensor> out;
        absl::Status st = RunMaybeTraced(
            &tracer, last_step.load(),
            [&](const tensorflow::RunOptions& options, tensorflow::RunMetadata* metadata) {
              return sync_opt != nullptr
                         ? sync_opt->RunTrainStep(session, feeds, fetches, &out, options, metadata)
                         : session.Run(options, feeds, fetches, {g.train_op}, &out, metadata);
            });
        if (sync_opt != nullptr && SyncReplicasOptimizer::IsEndOfTraining(st)) {
          end_of_training = true;
          return StepResult{.global_step = total_steps};
        }
        RETURN_IF_ERROR(st);
        loss = out[0].scalar<float>();
        step = out[1].scalar<int64_t>() + 1;  // Read before this step's update.
        // Sync: the stop hook waits for the end of training (the closed queue).
        return StepResult{.global_step = sync_opt != nullptr ? std::min(step, total_steps - 1) : step,
                          .loss = loss};
      }));
      if (end_of_training) break;
      stall_watch.Stepped(step);
      absl::MutexLock l(&mu);
      if (step > last_step.load()) last_step.store(step);
      if (first_step < 0) first_step = step - 1;
      ++m.local_steps;
      if (step > total_steps - steps_per_epoch) loss_sum += loss, ++loss_steps;
      live.Step(std::min(step, total_steps) - 1, o.batch_size * g.towers, loss);
    }
    return absl::OkStatus();
  };
  const Clock::time_point train_start = Clock::now();
  std::vector<absl::Status> group_status(groups.size());
  {
    std::vector<std::thread> threads;
    for (size_t i = 1; i < groups.size(); ++i) {
      threads.emplace_back([&, i] { group_status[i] = drive(groups[i]); });
    }
    group_status[0] = drive(groups[0]);
    for (std::thread& t : threads) t.join();
  }
  m.train_seconds = SecondsSince(train_start);
  for (const absl::Status& st : group_status) RETURN_IF_ERROR(st);
  if (chief_loop != nullptr) RETURN_IF_ERROR(chief_loop->Stop());
  if (sync_opt != nullptr) m.stale_gradients = sync_opt->stale_gradients();
  m.steps = last_step.load();
  m.local_examples_per_sec =
      m.train_seconds > 0 ? m.local_steps * o.batch_size * towers_per_task / m.train_seconds : 0;
  m.examples_per_sec = m.train_seconds > 0 && first_step >= 0
                           ? (m.steps - first_step) * examples_per_step / m.train_seconds
                           : 0;
  m.final_loss = loss_steps > 0 ? loss_sum / loss_steps : 0;
  m.recoveries = ms->recoveries();
  m.trace_files = tracer.files();
  if (chief) {
    ASSIGN_OR_RETURN(m.test_accuracy, Evaluate(ms->session(), models[0], data.test));
  }
  RETURN_IF_ERROR(ms->Close());  // The chief's final checkpoint.
  m.wall_seconds = SecondsSince(wall_start);
  if (chief && !o.metrics_out.empty()) RETURN_IF_ERROR(WriteMetrics(o.metrics_out, m));
  return m;
}

}  // namespace dflow
