// Training as one worker task of a cluster: between-graph replication, as a
// TensorFlow 1.x script with replica_device_setter runs on every worker.
//
// Each worker builds the whole model with a ReplicaDeviceSetter (variables
// on the ps tasks, compute on "/job:worker/task:<i>") and drives it through
// its own server (`session_target`), seeing only the ps tasks and itself
// (device_filters), so workers do not depend on each other. Worker 0 is the
// chief: it initializes the variables and evaluates at the end; the others
// wait until every variable is initialized. Every wait is bounded.
//
// Data: the training set is batched in one seeded order of global batches of
// W x batch_size rows (W = workers); worker i trains on rows
// [i*batch_size, (i+1)*batch_size) of its k-th global batch at its k-th
// step, so a synchronous run sees exactly what one process sees at batch
// W x batch_size.
//
// Modes:
//   between-async  every worker applies its own gradients to the ps
//                  variables; the run ends when the global step reaches
//                  epochs x (train rows / batch_size).
//   between-sync   SyncReplicasOptimizer: gradients are averaged over
//                  replicas_to_aggregate workers per step (the others'
//                  stale gradients are dropped and counted); ends at
//                  epochs x (train rows / (replicas_to_aggregate x batch_size)).
#ifndef DFLOW_TRAIN_CLUSTER_TRAINER_H_
#define DFLOW_TRAIN_CLUSTER_TRAINER_H_

#include <ostream>

#include "absl/status/statusor.h"
#include "dflow/train/trainer.h"

namespace dflow {

// The allowed values of TrainOptions::mode.
const std::vector<std::string>& TrainModes();

// Trains as worker `options.task` of `options.cluster` through
// `options.session_target`. InvalidArgument naming a bad flag (job not
// "worker", task out of range, unknown mode, no ps job).
absl::StatusOr<TrainMetrics> TrainOnCluster(const TrainOptions& options, std::ostream& progress);

}  // namespace dflow

#endif  // DFLOW_TRAIN_CLUSTER_TRAINER_H_
