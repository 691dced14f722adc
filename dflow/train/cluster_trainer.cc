#include "dflow/train/cluster_trainer.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "dflow/client/ops.h"
#include "dflow/client/training_ops_wrappers.h"
#include "dflow/distributed/cluster_spec.h"
#include "dflow/framework/status.h"
#include "dflow/train/batch_iterator.h"
#include "dflow/train/replica_device_setter.h"
#include "dflow/train/sync_replicas_optimizer.h"
#include "dflow/train/trainer_internal.h"
#include "dflow/train/variables.h"

namespace dflow {

using namespace train_internal;  // NOLINT: the trainer's shared pieces.

namespace {

absl::Status CheckClusterOptions(const TrainOptions& o, const ClusterSpec& cluster) {
  const auto& modes = TrainModes();
  if (std::find(modes.begin(), modes.end(), o.mode) == modes.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("[train] --mode '", o.mode, "' is not one of: ", absl::StrJoin(modes, ", ")));
  }
  if (o.mode.rfind("in-graph", 0) == 0) {
    return absl::UnimplementedError(absl::StrCat("[train] --mode ", o.mode, " is not built yet"));
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

// Worker `task`'s slice of each global batch of `workers` x `batch_size` rows.
class ShardedBatches {
 public:
  static absl::StatusOr<std::unique_ptr<ShardedBatches>> Create(const Dataset& train,
                                                                const TrainOptions& o,
                                                                int workers) {
    ASSIGN_OR_RETURN(auto inner,
                     BatchIterator::Create(train, {.batch_size = o.batch_size * workers,
                                                   .seed = static_cast<uint64_t>(o.seed),
                                                   .drop_remainder = true,
                                                   .num_epochs = 0}));
    return std::unique_ptr<ShardedBatches>(
        new ShardedBatches(std::move(inner), o.batch_size, o.task));
  }

  absl::StatusOr<Batch> Next() {
    ASSIGN_OR_RETURN(Batch global, input_.Next());
    Batch mine;
    mine.features = Rows(global.features);
    mine.labels = Rows(global.labels);
    mine.epoch = global.epoch;
    mine.step = global.step;
    return mine;
  }

 private:
  ShardedBatches(std::unique_ptr<BatchIterator> inner, int64_t batch_size, int task)
      : input_(std::move(inner)), batch_size_(batch_size), task_(task) {}

  // Rows [task * batch_size, (task + 1) * batch_size) of `t`.
  Tensor Rows(const Tensor& t) const {
    TensorShape shape = t.shape();
    shape.set_dim(0, batch_size_);
    Tensor out = Tensor::ForOverwrite(t.dtype(), shape);
    const size_t bytes = out.TotalBytes();
    std::memcpy(out.raw_data(), static_cast<const char*>(t.raw_data()) + task_ * bytes, bytes);
    return out;
  }

  PrefetchingIterator input_;
  const int64_t batch_size_;
  const int task_;
};

// One bool per variable on a ps task: is it initialized? (What the chief's
// initializer sets; a worker's own local variables are its business.)
std::vector<Output> VariablesInitialized(const Scope& root) {
  std::vector<std::pair<std::string, bool>> variables;
  for (const auto& node : root.graph_def().node()) {
    if (node.device().rfind("/job:ps", 0) != 0) continue;
    if (node.op() == "VarHandleOp") variables.emplace_back(node.name(), true);
    if (node.op() == "VariableV2") variables.emplace_back(node.name(), false);
  }
  std::vector<Output> out;
  Scope s = root.NewSubScope("report_uninitialized_variables");
  for (const auto& [name, resource] : variables) {
    Operation var(name, 1);
    Scope c = s.ColocateWith(var);
    out.push_back(resource ? ops::VarIsInitializedOp(c, var) : ops::IsVariableInitialized(c, var));
  }
  return out;
}

// Runs `attempt` until it succeeds, fails with something other than
// UNAVAILABLE (the ps or this task's server not up yet), or `timeout` passes.
template <typename Attempt>
absl::Status RetryWhileUnavailable(absl::Duration timeout, Attempt attempt) {
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    absl::Status s = attempt();
    if (!absl::IsUnavailable(s) || absl::Now() > deadline) return s;
    absl::SleepFor(absl::Milliseconds(250));
  }
}

absl::Status WaitForChiefInit(const ClientSession& session, const std::vector<Output>& ready,
                              absl::Duration timeout, std::ostream& progress) {
  const absl::Time deadline = absl::Now() + timeout;
  for (int round = 0;; ++round) {
    std::vector<Tensor> out;
    absl::Status s = session.Run(ready, &out);
    if (s.ok() &&
        std::all_of(out.begin(), out.end(), [](const Tensor& t) { return t.scalar<bool>(); })) {
      return absl::OkStatus();
    }
    if (!s.ok() && !absl::IsUnavailable(s)) return s;
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "[train] the chief (worker 0) did not initialize the variables within ",
          absl::FormatDuration(timeout), s.ok() ? "" : absl::StrCat(": ", s.message())));
    }
    if (round % 20 == 0) progress << "waiting for the chief to initialize the variables\n";
    absl::SleepFor(absl::Milliseconds(250));
  }
}

}  // namespace

const std::vector<std::string>& TrainModes() {
  static const auto* v = new std::vector<std::string>{"between-async", "between-sync",
                                                      "in-graph-async", "in-graph-sync"};
  return *v;
}

absl::StatusOr<TrainMetrics> TrainOnCluster(const TrainOptions& o, std::ostream& progress) {
  const Clock::time_point wall_start = Clock::now();
  RETURN_IF_ERROR(CheckOptions(o));
  ASSIGN_OR_RETURN(ClusterSpec cluster, ClusterSpec::FromJsonOrFile(o.cluster));
  RETURN_IF_ERROR(CheckClusterOptions(o, cluster));
  const int workers = cluster.NumTasks("worker");
  const bool chief = o.task == 0;
  const bool sync = o.mode == "between-sync";
  const int replicas = sync && o.replicas_to_aggregate > 0 ? o.replicas_to_aggregate : workers;
  ASSIGN_OR_RETURN(Data data, LoadData(o));

  TrainMetrics m{.model = o.model,
                 .optimizer = o.optimizer,
                 .data = o.data,
                 .batch_size = o.batch_size,
                 .epochs = o.epochs};
  m.learning_rate = o.learning_rate > 0 ? o.learning_rate : DefaultLearningRate(o.optimizer);
  m.mode = o.mode;
  m.workers = workers;

  // The graph, as every worker builds it.
  const std::string worker_device = absl::StrCat("/job:worker/task:", o.task);
  ASSIGN_OR_RETURN(ReplicaDeviceSetterOptions setter_options,
                   ReplicaDeviceSetterOptions::FromCluster(cluster, worker_device));
  ASSIGN_OR_RETURN(setter_options.strategy, ParsePsStrategy(o.ps_strategy));
  auto setter = std::make_shared<ReplicaDeviceSetter>(setter_options);
  Scope root = Scope::NewRootScope();
  Scope s = root.WithDeviceFunction(
      [setter](const tensorflow::NodeDef& node) { return setter->DeviceFor(node); });
  ASSIGN_OR_RETURN(Model model, BuildModel(s, o));
  ASSIGN_OR_RETURN(Variable global_step, CreateGlobalStep(s));
  std::unique_ptr<Optimizer> opt = MakeOptimizer(o.optimizer, static_cast<float>(m.learning_rate));
  std::unique_ptr<SyncReplicasOptimizer> sync_opt;
  Operation train_op;
  if (sync) {
    sync_opt = std::make_unique<SyncReplicasOptimizer>(
        opt.get(), SyncReplicasOptions{.replicas_to_aggregate = replicas,
                                       .total_num_replicas = workers,
                                       .local_device = worker_device});
    ASSIGN_OR_RETURN(train_op, sync_opt->Minimize(s, model.loss, model.variables, &global_step));
  } else {
    ASSIGN_OR_RETURN(train_op, opt->Minimize(s, model.loss, model.variables, &global_step));
  }
  Operation init = GlobalVariablesInitializer(root);
  std::vector<Output> ready = VariablesInitialized(root);
  RETURN_IF_ERROR(root.status());

  SessionOptions session_options;
  session_options.target = o.session_target;
  session_options.config.add_device_filters("/job:ps");
  session_options.config.add_device_filters(worker_device);
  session_options.config.set_operation_timeout_in_ms(o.startup_timeout_seconds * 1000);
  ClientSession session(root, session_options);
  const absl::Duration startup = absl::Seconds(o.startup_timeout_seconds);
  if (chief) {
    RETURN_IF_ERROR(
        RetryWhileUnavailable(startup, [&] { return session.Run({}, {}, {init}, nullptr); }));
  } else {
    RETURN_IF_ERROR(WaitForChiefInit(session, ready, startup, progress));
  }
  const int64_t examples_per_step = o.batch_size * (sync ? replicas : 1);
  const int64_t steps_per_epoch = data.train.size() / examples_per_step;
  int64_t total_steps = steps_per_epoch * o.epochs;
  if (o.max_steps > 0) total_steps = std::min(total_steps, o.max_steps);
  std::unique_ptr<SyncReplicasOptimizer::ChiefLoop> chief_loop;
  if (sync) {
    RETURN_IF_ERROR(sync_opt->InitLocalStep(session));
    if (chief) {
      ASSIGN_OR_RETURN(chief_loop, sync_opt->StartChiefLoop(&session, total_steps));
    }
  }

  ASSIGN_OR_RETURN(auto batches, ShardedBatches::Create(data.train, o, workers));
  TrainOptions progress_options = o;
  progress_options.epochs = (total_steps + steps_per_epoch - 1) / steps_per_epoch;
  Progress live(progress, progress_options, steps_per_epoch);
  const Clock::time_point train_start = Clock::now();
  int64_t first_step = -1, last_step = 0;
  double loss_sum = 0;
  int64_t loss_steps = 0;
  while (last_step < total_steps) {
    ASSIGN_OR_RETURN(Batch batch, batches->Next());
    std::vector<Tensor> out;
    const ClientSession::FeedType feeds = {{model.features, batch.features},
                                           {model.labels, batch.labels}};
    absl::Status st =
        sync ? sync_opt->RunTrainStep(session, feeds, {model.loss, global_step.value()}, &out)
             : session.Run(feeds, {model.loss, global_step.value()}, {train_op}, &out);
    if (sync && SyncReplicasOptimizer::IsEndOfTraining(st)) break;  // The chief closed the queue.
    RETURN_IF_ERROR(st);
    const double loss = out[0].scalar<float>();
    last_step = out[1].scalar<int64_t>() + 1;  // Read before this step's update.
    if (first_step < 0) first_step = last_step - 1;
    ++m.local_steps;
    if (last_step > total_steps - steps_per_epoch) loss_sum += loss, ++loss_steps;
    live.Step(std::min(last_step, total_steps) - 1, o.batch_size, loss);
  }
  m.train_seconds = SecondsSince(train_start);
  if (chief_loop != nullptr) RETURN_IF_ERROR(chief_loop->Stop());
  if (sync) m.stale_gradients = sync_opt->stale_gradients();
  m.steps = last_step;
  m.local_examples_per_sec =
      m.train_seconds > 0 ? m.local_steps * o.batch_size / m.train_seconds : 0;
  m.examples_per_sec = m.train_seconds > 0 && first_step >= 0
                           ? (last_step - first_step) * examples_per_step / m.train_seconds
                           : 0;
  m.final_loss = loss_steps > 0 ? loss_sum / loss_steps : 0;
  if (chief) {
    ASSIGN_OR_RETURN(m.test_accuracy, Evaluate(session, model, data.test));
  }
  m.wall_seconds = SecondsSince(wall_start);
  if (chief && !o.metrics_out.empty()) RETURN_IF_ERROR(WriteMetrics(o.metrics_out, m));
  return m;
}

}  // namespace dflow
