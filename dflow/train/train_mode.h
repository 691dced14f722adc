// How a cluster trains (cluster_trainer.h explains each mode): the value of
// `--mode` (TrainOptions::mode), parsed once into an enum.
#ifndef DFLOW_TRAIN_TRAIN_MODE_H_
#define DFLOW_TRAIN_TRAIN_MODE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dflow {

enum class TrainMode {
  kBetweenAsync,  // "between-async"
  kBetweenSync,   // "between-sync"
  kInGraphAsync,  // "in-graph-async"
  kInGraphSync,   // "in-graph-sync"
};

// The mode named `name`; InvalidArgument "[train] --mode 'x' is not one of:
// between-async, between-sync, in-graph-async, in-graph-sync" otherwise.
absl::StatusOr<TrainMode> ParseTrainMode(absl::string_view name);
// The flag value of `mode` ("between-sync").
const char* TrainModeName(TrainMode mode);
// Every flag value, in the order above.
const std::vector<std::string>& TrainModes();

// In-graph: one client (worker 0) with towers on every worker task.
inline bool IsInGraph(TrainMode mode) {
  return mode == TrainMode::kInGraphAsync || mode == TrainMode::kInGraphSync;
}
// Sync: one update per step from every tower (between-graph: from
// replicas_to_aggregate workers).
inline bool IsSync(TrainMode mode) {
  return mode == TrainMode::kBetweenSync || mode == TrainMode::kInGraphSync;
}

}  // namespace dflow

#endif  // DFLOW_TRAIN_TRAIN_MODE_H_
