#include "dflow/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>
#include <numeric>
#include <optional>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "dflow/client/client_session.h"
#include "dflow/client/ops.h"
#include "dflow/client/scope.h"
#include "dflow/framework/status.h"
#include "dflow/train/batch_iterator.h"
#include "dflow/train/cluster_trainer.h"
#include "dflow/train/dataset.h"
#include "dflow/train/models.h"
#include "dflow/train/optimizer.h"
#include "dflow/train/trainer_internal.h"
#include "dflow/train/saver.h"
#include "dflow/train/step_trace.h"
#include "dflow/train/variables.h"

namespace dflow {
namespace train_internal {

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

namespace {

absl::Status CheckMember(const std::string& flag, const std::string& value,
                         const std::vector<std::string>& allowed) {
  if (std::find(allowed.begin(), allowed.end(), value) != allowed.end()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "[train] --", flag, " '", value, "' is not one of: ", absl::StrJoin(allowed, ", ")));
}

std::string FormatDuration(double seconds) {
  const int64_t s = static_cast<int64_t>(std::max(0.0, seconds) + 0.5);
  return s >= 60 ? absl::StrFormat("%dm%02ds", s / 60, s % 60) : absl::StrFormat("%ds", s);
}

}  // namespace

absl::Status CheckOptions(const TrainOptions& o) {
  RETURN_IF_ERROR(CheckMember("model", o.model, TrainModels()));
  RETURN_IF_ERROR(CheckMember("optimizer", o.optimizer, TrainOptimizers()));
  RETURN_IF_ERROR(
      CheckMember("learning-rate-decay", o.learning_rate_decay, TrainLearningRateDecays()));
  if (!UsesTFRecords(o)) RETURN_IF_ERROR(CheckMember("data", o.data, TrainDataSources()));
  if (o.epochs < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("[train] --epochs must be >= 1, got ", o.epochs));
  }
  if (o.batch_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("[train] --batch-size must be >= 1, got ", o.batch_size));
  }
  if (!std::isfinite(o.learning_rate)) {
    return absl::InvalidArgumentError("[train] --learning-rate must be a finite number");
  }
  if (o.data == "synthetic" && o.synthetic_examples < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("[train] synthetic_examples must be >= 1, got ", o.synthetic_examples));
  }
  return absl::OkStatus();
}

namespace {

// Every optimizer `--optimizer` names: its default learning rate and how to
// make it. TrainOptimizers(), DefaultLearningRate() and MakeOptimizer() read
// this one table.
struct OptimizerKind {
  const char* name;
  double default_learning_rate;
  std::unique_ptr<Optimizer> (*make)(Input lr);
};

const std::vector<OptimizerKind>& OptimizerKinds() {
  static const auto* kinds = new std::vector<OptimizerKind>{
      {"sgd", 0.1, [](Input lr) -> std::unique_ptr<Optimizer> {
         return std::make_unique<GradientDescentOptimizer>(lr);
       }},
      {"momentum", 0.05, [](Input lr) -> std::unique_ptr<Optimizer> {
         return std::make_unique<MomentumOptimizer>(lr, 0.9f);
       }},
      {"adam", 0.001, [](Input lr) -> std::unique_ptr<Optimizer> {
         return std::make_unique<AdamOptimizer>(AdamOptions{.learning_rate = lr});
       }},
      {"adagrad", 0.05, [](Input lr) -> std::unique_ptr<Optimizer> {
         return std::make_unique<AdagradOptimizer>(lr);
       }},
      {"rmsprop", 0.001, [](Input lr) -> std::unique_ptr<Optimizer> {
         return std::make_unique<RMSPropOptimizer>(lr);
       }},
  };
  return *kinds;
}

const OptimizerKind* FindOptimizer(const std::string& name) {
  for (const OptimizerKind& k : OptimizerKinds()) {
    if (name == k.name) return &k;
  }
  return nullptr;
}

}  // namespace

double DefaultLearningRate(const std::string& optimizer) {
  const OptimizerKind* kind = FindOptimizer(optimizer);
  return kind != nullptr ? kind->default_learning_rate : 0;
}

TrainMetrics InitialMetrics(const TrainOptions& o) {
  TrainMetrics m{.model = o.model,
                 .optimizer = o.optimizer,
                 .data = o.data,
                 .batch_size = o.batch_size,
                 .epochs = o.epochs};
  m.learning_rate = o.learning_rate > 0 ? o.learning_rate : DefaultLearningRate(o.optimizer);
  return m;
}

Input LearningRate(const Scope& scope, const TrainOptions& o, double rate,
                   const Variable& global_step, int64_t total_steps) {
  if (o.learning_rate_decay != "cosine") return Tensor::Scalar(static_cast<float>(rate));
  Scope s = scope.NewSubScope("cosine_decay").ColocateWith(global_step.op());
  const float steps = static_cast<float>(std::max<int64_t>(1, total_steps));
  Output step = ops::Minimum(s, ops::Cast(s, global_step.value(), DT_FLOAT), Tensor::Scalar(steps));
  Output cosine = ops::Cos(s, ops::Mul(s, step, Tensor::Scalar(static_cast<float>(M_PI) / steps)));
  Output decayed = ops::Mul(s, ops::Add(s, cosine, Tensor::Scalar(1.0f)), Tensor::Scalar(0.5f));
  return ops::Mul(s.WithOpName("learning_rate"), decayed, Tensor::Scalar(static_cast<float>(rate)));
}

absl::StatusOr<std::unique_ptr<Optimizer>> MakeOptimizer(const std::string& name, Input lr) {
  const OptimizerKind* kind = FindOptimizer(name);
  if (kind == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("[train] --optimizer '", name,
                                                   "' is not one of: ",
                                                   absl::StrJoin(TrainOptimizers(), ", ")));
  }
  return kind->make(lr);
}

Dataset Rows(const Dataset& data, int64_t begin, int64_t end) {
  std::vector<int64_t> idx(end - begin);
  std::iota(idx.begin(), idx.end(), begin);
  Tensor features, labels;
  data.Gather(idx, &features, &labels);
  return *Dataset::Create(std::move(features), std::move(labels), data.num_classes());
}

bool UsesTFRecords(const TrainOptions& o) { return absl::StartsWith(o.data, kTFRecordData); }

absl::StatusOr<Data> LoadData(const TrainOptions& o) {
  const std::string dir = o.data_dir.empty() ? kFashionMnistDir : o.data_dir;
  if (UsesTFRecords(o)) {
    ASSIGN_OR_RETURN(Dataset test, LoadFashionMnist(dir, "test"));
    Data data{std::nullopt, std::move(test)};
    ASSIGN_OR_RETURN(data.train_files, MatchFiles(o.data.substr(strlen(kTFRecordData))));
    ASSIGN_OR_RETURN(data.train_examples, CountRecords(data.train_files));
    if (data.train_examples < o.batch_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "[train] ", o.data, " holds ", data.train_examples, " examples, fewer than a batch (",
          o.batch_size, ")"));
    }
    return data;
  }
  if (o.data == "synthetic") {
    const int64_t test = std::max<int64_t>(1, o.synthetic_examples / 5);
    ASSIGN_OR_RETURN(Dataset all, MakeSyntheticDataset(o.synthetic_examples + test, 10, 784,
                                                       static_cast<uint64_t>(o.seed)));
    Data data{Rows(all, 0, o.synthetic_examples),
              Rows(all, o.synthetic_examples, o.synthetic_examples + test)};
    data.train_examples = data.train->size();
    return data;
  }
  ASSIGN_OR_RETURN(Dataset train, LoadFashionMnist(dir, "train"));
  ASSIGN_OR_RETURN(Dataset test, LoadFashionMnist(dir, "test"));
  Data data{std::move(train), std::move(test)};
  data.train_examples = data.train->size();
  return data;
}

absl::StatusOr<Model> BuildModel(const Scope& scope, const TrainOptions& o,
                                 const std::vector<Variable>* reuse, const GraphBatches* input) {
  ModelOptions model_options{.seed = o.seed, .reuse = reuse};
  if (input != nullptr) {
    model_options.input_features = input->features;
    model_options.input_labels = input->labels;
  }
  return o.model == "cnn" ? BuildCnn(scope, model_options) : BuildMlp(scope, model_options);
}

Progress::Progress(std::ostream& out, const TrainOptions& o, int64_t steps_per_epoch)
    : out_(out),
      o_(o),
      steps_per_epoch_(steps_per_epoch),
      total_(steps_per_epoch * o.epochs),
      start_(Clock::now()),
      last_print_(start_) {}

void Progress::Step(int64_t step, int64_t examples, double loss) {
  window_loss_ += loss;
  ++window_steps_;
  examples_ += examples;
  const int64_t done = step + 1;
  const bool last = done == total_;
  const bool due = o_.tty
                       ? std::chrono::duration<double>(Clock::now() - last_print_).count() >= 0.25
                       : done % std::max<int64_t>(1, o_.log_every) == 0;
  if (due || last) Print(done, last);
}

void Progress::Print(int64_t done, bool last) {
  const double elapsed = SecondsSince(start_);
  const double rate = elapsed > 0 ? examples_ / elapsed : 0;
  const double eta = done > 0 ? elapsed / done * (total_ - done) : 0;
  const std::string line = absl::StrFormat(
      "step %d/%d  epoch %d/%d  loss %.4f  %.0f examples/s  ETA %s", done, total_,
      (done - 1) / steps_per_epoch_ + 1, o_.epochs,
      window_loss_ / std::max<int64_t>(1, window_steps_), rate, FormatDuration(eta));
  if (o_.tty) {
    out_ << "\r" << line << "\033[K";
    if (last) out_ << "\n";
  } else {
    out_ << line << "\n";
  }
  out_.flush();
  window_loss_ = 0;
  window_steps_ = 0;
  last_print_ = Clock::now();
}

absl::StatusOr<std::unique_ptr<MonitoredSession>> StartMonitoredSession(
    const Scope& root, const TrainOptions& o, const Variable& global_step,
    std::vector<Output> ready, bool chief, int64_t last_step,
    MonitoredSessionOptions options, std::ostream& log) {
  SessionGraph graph{.global_step = global_step,
                     .init = GlobalVariablesInitializer(root),
                     .ready = std::move(ready)};
  if (!o.checkpoint_dir.empty()) {
    ASSIGN_OR_RETURN(std::vector<Variable> variables, GlobalVariables(root));
    ASSIGN_OR_RETURN(graph.saver,
                     Saver::Create(root, variables, {.max_to_keep = o.keep_checkpoints}));
  }
  RETURN_IF_ERROR(root.status());
  options.is_chief = chief;
  options.checkpoint_dir = o.checkpoint_dir;
  options.log = &log;
  options.hooks.push_back(std::make_unique<StopAtStepHook>(last_step));
  options.hooks.push_back(std::make_unique<NanLossHook>());
  if (chief && !o.checkpoint_dir.empty()) {
    const bool by_default = o.save_checkpoint_steps <= 0 && o.save_checkpoint_secs <= 0;
    options.hooks.push_back(std::make_unique<CheckpointSaverHook>(
        o.checkpoint_dir, o.save_checkpoint_steps, by_default ? 600.0 : o.save_checkpoint_secs));
  }
  return MonitoredSession::Create(root, std::move(graph), std::move(options));
}

absl::StatusOr<double> Evaluate(const ClientSession& session, const Model& model,
                                const Dataset& test) {
  ASSIGN_OR_RETURN(auto it, BatchIterator::Create(
                                test, {.batch_size = 1000, .shuffle = false, .num_epochs = 1}));
  double correct = 0;
  while (true) {
    absl::StatusOr<Batch> batch = it->Next();
    if (absl::IsOutOfRange(batch.status())) break;
    RETURN_IF_ERROR(batch.status());
    std::vector<Tensor> out;
    RETURN_IF_ERROR(session.Run({{model.features, batch->features}, {model.labels, batch->labels}},
                                {model.correct}, &out));
    correct += out[0].scalar<float>();
  }
  return correct / static_cast<double>(test.size());
}

absl::Status WriteMetrics(const std::string& path, const TrainMetrics& m) {
  std::ofstream file(path);
  file << MetricsJson(m) << "\n";
  file.close();
  if (!file) return absl::UnavailableError(absl::StrCat("[train] cannot write metrics to ", path));
  return absl::OkStatus();
}

}  // namespace train_internal

using namespace train_internal;  // NOLINT: this file defines them.

const std::vector<std::string>& TrainModels() {
  static const auto* v = new std::vector<std::string>{"mlp", "cnn"};
  return *v;
}
const std::vector<std::string>& TrainOptimizers() {
  static const auto* v = [] {
    auto* names = new std::vector<std::string>;
    for (const auto& k : train_internal::OptimizerKinds()) names->push_back(k.name);
    return names;
  }();
  return *v;
}
const std::vector<std::string>& TrainLearningRateDecays() {
  static const auto* v = new std::vector<std::string>{"none", "cosine"};
  return *v;
}
const std::vector<std::string>& TrainDataSources() {
  static const auto* v = new std::vector<std::string>{"fashion-mnist", "synthetic"};
  return *v;
}

std::string MetricsJson(const TrainMetrics& m) {
  std::string json = absl::StrFormat(
      "{\"model\": \"%s\", \"optimizer\": \"%s\", \"data\": \"%s\", \"batch_size\": %d, "
      "\"epochs\": %d, \"learning_rate\": %.6g, \"steps\": %d, \"final_loss\": %.6f, "
      "\"test_accuracy\": %.4f, \"examples_per_sec\": %.1f, \"train_seconds\": %.3f, "
      "\"wall_seconds\": %.3f",
      m.model, m.optimizer, m.data, m.batch_size, m.epochs, m.learning_rate, m.steps, m.final_loss,
      m.test_accuracy, m.examples_per_sec, m.train_seconds, m.wall_seconds);
  absl::StrAppendFormat(&json, ", \"start_step\": %d, \"recoveries\": %d", m.start_step,
                        m.recoveries);
  if (!m.restored_from.empty()) {
    absl::StrAppendFormat(&json, ", \"restored_from\": \"%s\"", absl::CEscape(m.restored_from));
  }
  if (!m.mode.empty()) {
    absl::StrAppendFormat(&json,
                          ", \"mode\": \"%s\", \"workers\": %d, \"local_steps\": %d, "
                          "\"local_examples_per_sec\": %.1f, \"stale_gradients\": %d",
                          m.mode, m.workers, m.local_steps, m.local_examples_per_sec,
                          m.stale_gradients);
  }
  return json + "}";
}

namespace {

// One process's training graph.
struct LocalGraph {
  Model model;
  std::optional<GraphBatches> input;  // When the graph reads its own batches (TFRecords).
  Variable global_step;
  Operation train_op;
  int64_t steps_per_epoch = 0;
  int64_t total_steps = 0;  // Of the whole run, restored steps included.
};

absl::StatusOr<LocalGraph> BuildLocalGraph(const Scope& root, const TrainOptions& o,
                                           const Data& data, double learning_rate) {
  LocalGraph g;
  if (UsesTFRecords(o)) {
    ASSIGN_OR_RETURN(g.input, TFRecordBatches(root, {.files = data.train_files,
                                                     .batch_size = o.batch_size,
                                                     .seed = o.seed}));
  }
  ASSIGN_OR_RETURN(g.model, BuildModel(root, o, nullptr, g.input ? &*g.input : nullptr));
  ASSIGN_OR_RETURN(g.global_step, CreateGlobalStep(root));
  // The graph's batches are whole ones (a short last batch is dropped).
  g.steps_per_epoch = g.input ? data.train_examples / o.batch_size
                              : (data.train_examples + o.batch_size - 1) / o.batch_size;
  g.total_steps = g.steps_per_epoch * o.epochs;
  if (o.max_steps > 0) g.total_steps = std::min(g.total_steps, o.max_steps);
  ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> opt,
                   MakeOptimizer(o.optimizer, LearningRate(root, o, learning_rate, g.global_step,
                                                           g.total_steps)));
  ASSIGN_OR_RETURN(g.train_op, opt->Minimize(root, g.model.loss, g.model.variables, &g.global_step));
  return g;
}

// The batches a run that goes on from `start_step` feeds: those it had not
// trained on yet. None when the graph reads its own (told here how many to
// skip).
absl::StatusOr<std::unique_ptr<PrefetchingIterator>> StartLocalInput(
    const TrainOptions& o, const Data& data, const LocalGraph& g, const ClientSession& session,
    int64_t start_step) {
  if (g.input) {
    RETURN_IF_ERROR(session.Run({{g.input->skip_batches, Tensor::Scalar(start_step)}}, {},
                                {g.input->init}, nullptr));
    return nullptr;
  }
  ASSIGN_OR_RETURN(auto it, BatchIterator::Create(*data.train,
                                                  {.batch_size = o.batch_size,
                                                   .seed = static_cast<uint64_t>(o.seed),
                                                   .num_epochs = o.epochs}));
  const absl::Status skipped = it->Skip(start_step);
  if (!skipped.ok() && !absl::IsOutOfRange(skipped)) return skipped;
  return std::make_unique<PrefetchingIterator>(std::move(it));
}

// Trains from m.start_step to the end of the run (or until `ms` stops),
// showing progress; fills m's steps, speed and final loss.
absl::Status RunLocalSteps(const TrainOptions& o, const LocalGraph& g, MonitoredSession& ms,
                           PrefetchingIterator* batches, StepTracer& tracer,
                           std::ostream& progress, TrainMetrics& m) {
  Progress live(progress, o, g.steps_per_epoch);
  const Clock::time_point train_start = Clock::now();
  int64_t examples = 0;
  double epoch_loss = 0;
  int64_t epoch_steps = 0;
  m.steps = m.start_step;
  for (int64_t step = m.start_step; !ms.ShouldStop() && step < g.total_steps; ++step) {
    ClientSession::FeedType feeds;  // None when the graph reads its input.
    int64_t n = o.batch_size;
    if (batches != nullptr) {
      absl::StatusOr<Batch> batch = batches->Next();
      if (absl::IsOutOfRange(batch.status())) break;
      RETURN_IF_ERROR(batch.status());
      n = batch->labels.dim_size(0);
      feeds = {{g.model.features, std::move(batch->features)},
               {g.model.labels, std::move(batch->labels)}};
    }
    double loss = 0;
    RETURN_IF_ERROR(ms.RunStep([&](const ClientSession& session) -> absl::StatusOr<StepResult> {
      std::vector<Tensor> out;
      RETURN_IF_ERROR(RunMaybeTraced(
          &tracer, step,
          [&](const tensorflow::RunOptions& options, tensorflow::RunMetadata* metadata) {
            return session.Run(options, feeds, {g.model.loss}, {g.train_op}, &out, metadata);
          }));
      loss = out[0].scalar<float>();
      return StepResult{.global_step = step + 1, .loss = loss};  // One update a step.
    }));
    if (step % g.steps_per_epoch == 0) epoch_loss = 0, epoch_steps = 0;
    epoch_loss += loss;
    ++epoch_steps;
    examples += n;
    m.steps = step + 1;
    live.Step(step, n, loss);
  }
  m.train_seconds = SecondsSince(train_start);
  m.examples_per_sec = m.train_seconds > 0 ? examples / m.train_seconds : 0;
  m.final_loss = epoch_steps > 0 ? epoch_loss / epoch_steps : 0;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TrainMetrics> Train(const TrainOptions& o, std::ostream& progress) {
  if (!o.cluster.empty()) return TrainOnCluster(o, progress);
  const Clock::time_point wall_start = Clock::now();
  RETURN_IF_ERROR(CheckOptions(o));
  if (o.towers != 1) {  // Not ignored: the user expects T model copies.
    return absl::InvalidArgumentError(absl::StrCat(
        "[train] --towers ", o.towers, " needs --cluster: towers are the model copies of a "
        "cluster worker, one per device; on one machine run `dflow cluster --ps 1 --workers 1 "
        "-- --towers ", o.towers, "`"));
  }
  ASSIGN_OR_RETURN(Data data, LoadData(o));
  TrainMetrics m = InitialMetrics(o);
  StepTracer tracer(o.trace_steps, o.trace_dir.empty() ? o.checkpoint_dir : o.trace_dir, "");
  Scope root = Scope::NewRootScope();
  ASSIGN_OR_RETURN(const LocalGraph g, BuildLocalGraph(root, o, data, m.learning_rate));
  ASSIGN_OR_RETURN(std::unique_ptr<MonitoredSession> ms,
                   StartMonitoredSession(root, o, g.global_step, VariablesInitialized(root),
                                         /*chief=*/true, g.total_steps, {}, progress));
  m.restored_from = ms->restored_from();
  m.start_step = ms->global_step();
  ASSIGN_OR_RETURN(std::unique_ptr<PrefetchingIterator> batches,
                   StartLocalInput(o, data, g, ms->session(), m.start_step));
  RETURN_IF_ERROR(RunLocalSteps(o, g, *ms, batches.get(), tracer, progress, m));
  m.recoveries = ms->recoveries();
  m.trace_files = tracer.files();
  ASSIGN_OR_RETURN(m.test_accuracy, Evaluate(ms->session(), g.model, data.test));
  RETURN_IF_ERROR(ms->Close());  // The final checkpoint.
  m.wall_seconds = SecondsSince(wall_start);
  if (!o.metrics_out.empty()) RETURN_IF_ERROR(WriteMetrics(o.metrics_out, m));
  return m;
}

}  // namespace dflow
