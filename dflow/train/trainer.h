// Training a model on one machine: what `dflow train` runs.
//
//   TrainOptions opts;                 // MLP on Fashion-MNIST with Adam
//   opts.metrics_out = "metrics.json";
//   ASSIGN_OR_RETURN(TrainMetrics m, Train(opts, std::cerr));
//   m.test_accuracy;                   // ~0.87 after the default 3 epochs
//
// The loop fetches the loss together with the train op each step, reading
// batches from a PrefetchingIterator, and reports progress on `progress`:
// one carriage-return-updated line when `tty`, else a line every
// `log_every` steps. Test accuracy is computed at the end, in batches.
#ifndef DFLOW_TRAIN_TRAINER_H_
#define DFLOW_TRAIN_TRAINER_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dflow/train/stall_watch.h"

namespace dflow {

struct TrainOptions {
  std::string model = "mlp";  // mlp | cnn
  int64_t epochs = 3;
  int64_t batch_size = 128;
  std::string optimizer = "adam";  // sgd | momentum | adam | adagrad | rmsprop
  // <= 0: the optimizer's default (sgd 0.1, momentum 0.05 with momentum 0.9,
  // adam 0.001, adagrad 0.05, rmsprop 0.001).
  double learning_rate = 0;
  // none | cosine: TensorFlow's cosine_decay over the run's steps, from the
  // learning rate at global step 0 to 0 at the last step.
  std::string learning_rate_decay = "none";
  int64_t seed = 1;
  std::string data = "fashion-mnist";  // fashion-mnist | synthetic
  std::string metrics_out;             // "": no metrics file.
  std::string data_dir;                // "": kFashionMnistDir.
  // Synthetic data: examples for training; a fifth as many for testing.
  int64_t synthetic_examples = 8192;
  // Checkpoints in TensorFlow's format: the chief restores the latest one in
  // this directory (and goes on from its global step), saves every
  // `save_checkpoint_steps` global steps and/or `save_checkpoint_secs`
  // seconds (both 0: every 600 s, TensorFlow's default) and at the end, and
  // keeps the newest `keep_checkpoints`. "": no checkpoints.
  std::string checkpoint_dir;
  int64_t save_checkpoint_steps = 0;
  double save_checkpoint_secs = 0;
  int keep_checkpoints = 5;
  bool tty = false;         // Update one line in place.
  int64_t log_every = 100;  // Steps between lines when !tty.

  // Training as one worker of a cluster (see cluster_trainer.h) when
  // `cluster` (JSON or @file) is set.
  std::string cluster;
  std::string job = "worker";
  int task = 0;
  // between-async | between-sync | in-graph-async | in-graph-sync
  std::string mode = "between-async";
  int replicas_to_aggregate = 0;          // between-sync: 0 means every worker.
  int64_t towers = 1;                     // Model copies per worker, one per device:
  std::string tower_device_type = "CPU";  // GPU when every worker has `towers` GPUs.
  std::string ps_strategy = "bytes";      // bytes | round-robin
  std::string session_target;             // This task's own server: "grpc://host:port".
  int64_t max_steps = 0;                  // > 0: stop after this many (global) steps.
  int64_t startup_timeout_seconds = 120;  // Waiting for the ps and the chief's init.
  // A cluster worker that completes no step for this long names the tasks
  // that do not answer (StallWatch); <= 0: never.
  double stall_report_secs = 10;
  // Set by the process that hosts this task's server: whether another task
  // answers. Unset: stalls are reported without naming tasks.
  PingTaskFn ping_task;
  // Global steps to trace (`--trace-steps`): each is run with
  // RunOptions.trace_level FULL_TRACE and written as a Chrome trace (see
  // step_trace.h) to `trace_dir`, or else checkpoint_dir, or else the
  // working directory. On a cluster every worker traces its own steps.
  std::vector<int64_t> trace_steps;
  std::string trace_dir;
};

// The allowed values of TrainOptions' enumerated fields.
const std::vector<std::string>& TrainModels();
const std::vector<std::string>& TrainOptimizers();
const std::vector<std::string>& TrainLearningRateDecays();
const std::vector<std::string>& TrainDataSources();

struct TrainMetrics {
  std::string model;
  std::string optimizer;
  std::string data;
  int64_t batch_size = 0;
  int64_t epochs = 0;
  double learning_rate = 0;
  int64_t steps = 0;
  double final_loss = 0;  // Mean training loss over the last epoch.
  double test_accuracy = 0;
  double examples_per_sec = 0;  // Training examples over training time.
  double train_seconds = 0;     // The training loop only.
  double wall_seconds = 0;      // Everything: loading, building, training, evaluation.
  // On a cluster: this task, the workers, and what its own steps did.
  std::string mode;
  int workers = 1;
  int64_t local_steps = 0;
  double local_examples_per_sec = 0;
  int64_t stale_gradients = 0;  // between-sync: gradients of this worker dropped as stale.
  // Checkpoints: the one restored at the start ("" if none), the global step
  // training started from, and sessions recreated after a failure.
  std::string restored_from;
  int64_t start_step = 0;
  int recoveries = 0;
  std::vector<std::string> trace_files;  // Written for TrainOptions::trace_steps.
};

// InvalidArgument listing the allowed values for a bad option; the data
// layer's error (NotFound with the package to install) when Fashion-MNIST is
// missing; the metrics file's error when it cannot be written.
absl::StatusOr<TrainMetrics> Train(const TrainOptions& options, std::ostream& progress);

// The metrics as one JSON object.
std::string MetricsJson(const TrainMetrics& metrics);

}  // namespace dflow

#endif  // DFLOW_TRAIN_TRAINER_H_
