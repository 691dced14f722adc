// Pieces shared by the single-process trainer (trainer.cc) and the cluster
// trainer (cluster_trainer.cc). Not part of the public API.
#ifndef DFLOW_TRAIN_TRAINER_INTERNAL_H_
#define DFLOW_TRAIN_TRAINER_INTERNAL_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "dflow/client/client_session.h"
#include "dflow/train/dataset.h"
#include "dflow/train/models.h"
#include "dflow/train/monitored_session.h"
#include "dflow/train/optimizer.h"
#include "dflow/train/tfrecord_input.h"
#include "dflow/train/trainer.h"

namespace dflow::train_internal {

using Clock = std::chrono::steady_clock;
double SecondsSince(Clock::time_point start);

// Checks the single-process options (model, optimizer, data, sizes).
absl::Status CheckOptions(const TrainOptions& o);
double DefaultLearningRate(const std::string& optimizer);  // 0 for an unknown one.
// The metrics of a run of `o` before it starts: its settings, the learning
// rate it will use.
TrainMetrics InitialMetrics(const TrainOptions& o);
// The optimizer `name` (TrainOptimizers()); InvalidArgument listing them for another.
absl::StatusOr<std::unique_ptr<Optimizer>> MakeOptimizer(const std::string& name, Input lr);
// The learning rate of each step: `rate`, or with o.learning_rate_decay
// "cosine" TensorFlow's cosine_decay(rate, global_step, total_steps):
// rate * 0.5 * (1 + cos(pi * min(global_step, total_steps) / total_steps)),
// computed beside the global step.
Input LearningRate(const Scope& scope, const TrainOptions& o, double rate,
                   const Variable& global_step, int64_t total_steps);

// --data tfrecord:GLOB: training examples read by the graph (tfrecord_input.h).
inline constexpr char kTFRecordData[] = "tfrecord:";
bool UsesTFRecords(const TrainOptions& o);

struct Data {
  std::optional<Dataset> train;  // Unset with TFRecord files: the graph reads them.
  Dataset test;
  std::vector<std::string> train_files;  // TFRecord files, sorted.
  int64_t train_examples = 0;
};
// With TFRecord files, their examples are counted (their framing checked)
// and the test set is Fashion-MNIST's (o.data_dir).
absl::StatusOr<Data> LoadData(const TrainOptions& o);
// Rows [begin, end) of `data`.
Dataset Rows(const Dataset& data, int64_t begin, int64_t end);
// The model of `o`; with `reuse`, another tower sharing those variables.
// With `input`, the model's features and labels default to it.
absl::StatusOr<Model> BuildModel(const Scope& scope, const TrainOptions& o,
                                 const std::vector<Variable>* reuse = nullptr,
                                 const GraphBatches* input = nullptr);

// The live progress line: step, epoch, loss, examples/s, ETA.
class Progress {
 public:
  Progress(std::ostream& out, const TrainOptions& o, int64_t steps_per_epoch);
  // Step `step` (0-based, of steps_per_epoch * epochs) trained `examples` at `loss`.
  void Step(int64_t step, int64_t examples, double loss);

 private:
  void Print(int64_t done, bool last);

  std::ostream& out_;
  const TrainOptions& o_;
  const int64_t steps_per_epoch_;
  const int64_t total_;
  const Clock::time_point start_;
  Clock::time_point last_print_;
  double window_loss_ = 0;
  int64_t window_steps_ = 0;
  int64_t examples_ = 0;
};

// The monitored session of a run: the model restored from o.checkpoint_dir
// or initialized (chief) or waited for (others); hooks stopping at
// `last_step`, guarding against NaN losses, and on the chief saving
// checkpoints when o.checkpoint_dir is set. `ready` lists the variables the
// chief must have initialized.
absl::StatusOr<std::unique_ptr<MonitoredSession>> StartMonitoredSession(
    const Scope& root, const TrainOptions& o, const Variable& global_step,
    std::vector<Output> ready, bool chief, int64_t last_step,
    MonitoredSessionOptions options, std::ostream& log);

// Test accuracy of `model` over `test`, in batches of 1000.
absl::StatusOr<double> Evaluate(const ClientSession& session, const Model& model,
                                const Dataset& test);
absl::Status WriteMetrics(const std::string& path, const TrainMetrics& m);

}  // namespace dflow::train_internal

#endif  // DFLOW_TRAIN_TRAINER_INTERNAL_H_
