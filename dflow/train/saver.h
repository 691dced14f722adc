// Saves and restores variables in TensorFlow's checkpoint format, as
// tf.compat.v1.train.Saver(sharded=True) does, so TensorFlow reads dflow's
// checkpoints and dflow restores TensorFlow's:
//
//   - every device that holds variables (every parameter server) saves its
//     own with SaveV2 to PREFIX_temp/part-0000i-of-0000N: no variable
//     crosses the network to be saved;
//   - MergeV2Checkpoints on the last such device merges them into PREFIX;
//   - the client then updates DIR/checkpoint (the state file) and deletes the
//     checkpoints past `max_to_keep`, oldest first.
//
//   ASSIGN_OR_RETURN(Saver saver, Saver::Create(root, model.variables));
//   ASSIGN_OR_RETURN(std::string path, saver.Save(session, dir + "/model.ckpt", step));
//   ASSIGN_OR_RETURN(std::optional<std::string> latest, io::LatestCheckpoint(dir));
//   if (latest) RETURN_IF_ERROR(saver.Restore(session, *latest));
#ifndef DFLOW_TRAIN_SAVER_H_
#define DFLOW_TRAIN_SAVER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dflow/client/client_session.h"
#include "dflow/client/scope.h"
#include "dflow/train/variables.h"

namespace dflow {

struct SaverOptions {
  int max_to_keep = 5;  // Checkpoints kept in the directory; <= 0 keeps all.
};

// Cheap to copy; Save and Restore are thread-compatible.
class Saver {
 public:
  // Adds the save and restore ops for `variables` under "save/" to the
  // scope's graph. INVALID_ARGUMENT when two variables share a name.
  static absl::StatusOr<Saver> Create(const Scope& scope, const std::vector<Variable>& variables,
                                      SaverOptions options = {});

  // Saves every variable to `base`-`global_step` (e.g. DIR/model.ckpt-30),
  // records it in DIR's state file and deletes checkpoints past
  // max_to_keep. Returns the checkpoint's prefix. A failure (full disk,
  // unwritable directory) leaves the previous checkpoints and the state
  // file as they were.
  absl::StatusOr<std::string> Save(const ClientSession& session, const std::string& base,
                                   int64_t global_step) const;
  // Assigns every variable its value in the checkpoint at `prefix`.
  absl::Status Restore(const ClientSession& session, const std::string& prefix) const;

 private:
  Saver() = default;

  SaverOptions options_;
  Output filename_;        // The string placeholder both subgraphs read.
  Output save_;            // The merged prefix, once every shard is saved.
  Operation restore_;      // Runs every assignment.
};

}  // namespace dflow

#endif  // DFLOW_TRAIN_SAVER_H_
