// Training as one worker task of a cluster, as TensorFlow 1.x scripts with
// replica_device_setter do it.
//
// The model is built with a ReplicaDeviceSetter (variables on the ps tasks)
// once per tower: a tower is a worker device computing a copy of the model
// that shares tower 0's variables. Between-graph, a worker's towers are its
// own --towers CPUs and it drives them through its own server
// (`session_target`), seeing only the ps tasks and itself (device_filters);
// in-graph, worker 0 alone is the client and has towers on every worker task.
// Worker 0 is the chief: it initializes the variables and evaluates at the
// end; the other between-graph workers wait until the ps variables are
// initialized. Every wait is bounded (startup_timeout_seconds).
//
// Data: the training set is batched in one seeded order of global batches of
// workers x towers x batch_size rows; tower k of the cluster trains on
// slice k, so a synchronous run sees exactly what one process sees at the
// global batch.
//
// Modes (every tower's gradients are averaged first: between-graph on the
// worker, in-graph beside each variable):
//   between-async   every worker applies its own gradients; ends when the
//                   global step reaches epochs x rows / (towers x batch_size).
//   between-sync    SyncReplicasOptimizer over replicas_to_aggregate workers
//                   per step (the rest are backups; their stale gradients are
//                   dropped and counted).
//   in-graph-sync   one update per step from every tower.
//   in-graph-async  one train op per worker task, each driven by its own
//                   client thread.
#ifndef DFLOW_TRAIN_CLUSTER_TRAINER_H_
#define DFLOW_TRAIN_CLUSTER_TRAINER_H_

#include <ostream>

#include "absl/status/statusor.h"
#include "dflow/train/train_mode.h"
#include "dflow/train/trainer.h"

namespace dflow {

// Trains as worker `options.task` of `options.cluster` through
// `options.session_target`. InvalidArgument naming a bad flag (job not
// "worker", task out of range, unknown mode (ParseTrainMode's error), no ps
// job).
absl::StatusOr<TrainMetrics> TrainOnCluster(const TrainOptions& options, std::ostream& progress);

}  // namespace dflow

#endif  // DFLOW_TRAIN_CLUSTER_TRAINER_H_
