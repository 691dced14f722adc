// The `checkpoint` state file a Saver keeps in its directory (TensorFlow's
// CheckpointState in protobuf text format): the latest checkpoint and the
// ones still kept, oldest first. TensorFlow's tf.train.latest_checkpoint and
// get_checkpoint_state read dflow's, and the other way round.
//
//   model_checkpoint_path: "model.ckpt-30"
//   all_model_checkpoint_paths: "model.ckpt-20"
//   all_model_checkpoint_paths: "model.ckpt-30"
#ifndef DFLOW_IO_CHECKPOINT_STATE_H_
#define DFLOW_IO_CHECKPOINT_STATE_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "dflow/proto/checkpoint_state.pb.h"

namespace dflow::io {

inline constexpr char kCheckpointStateFile[] = "checkpoint";

// `path` as the state file in `dir` means it: relative paths are inside `dir`.
std::string ResolveCheckpointPath(const std::string& dir, const std::string& path);

// The state in `dir` (paths as written), or nullopt when it has no state file. DATA_LOSS naming
// the file when it does not parse.
absl::StatusOr<std::optional<tensorflow::CheckpointState>> ReadCheckpointState(
    const std::string& dir);

// Writes `state` to DIR/checkpoint atomically (temporary file + rename).
// Paths inside `dir` are written relative to it, as TensorFlow does.
absl::Status WriteCheckpointState(const std::string& dir, tensorflow::CheckpointState state);

// The prefix of the latest checkpoint in `dir` (resolved against `dir`),
// nullopt when there is none or its index file is gone.
absl::StatusOr<std::optional<std::string>> LatestCheckpoint(const std::string& dir);

}  // namespace dflow::io

#endif  // DFLOW_IO_CHECKPOINT_STATE_H_
