// SyncReplicasOptimizer: synchronous between-graph training, as TensorFlow
// 1.x's tf.compat.v1.train.SyncReplicasOptimizer builds it.
//
// Every worker builds the same graph. Per variable, a ConditionalAccumulator
// on the variable's ps task (shared_name "<var>/grad_accum") collects the
// replicas' gradients tagged with the worker's local step; a gradient older
// than the accumulator's step is dropped (a straggler's, when backup workers
// make replicas_to_aggregate < total_num_replicas). A FIFO token queue on
// the global step's task ("sync_token_q") is the barrier: a worker's train
// op applies its gradients, then dequeues a token carrying the new global
// step into its local step. The chief (worker 0) runs the aggregation loop:
// take replicas_to_aggregate averaged gradients from every accumulator,
// apply them with the wrapped optimizer (bumping the global step), then
// enqueue max(total_num_replicas, replicas_to_aggregate) tokens.
//
//   SyncReplicasOptimizer sync(&adam, {.replicas_to_aggregate = 2, .total_num_replicas = 3});
//   ASSIGN_OR_RETURN(Operation train, sync.Minimize(s, loss, vars, &global_step));
//   ... chief: run the global initializer; others: wait for it ...
//   RETURN_IF_ERROR(sync.InitLocalStep(session));
//   if (chief) RETURN_IF_ERROR(sync.InitChief(session));
//   if (chief) ASSIGN_OR_RETURN(loop, sync.StartChiefLoop(RunOn(&session), total_steps));
//   ... run `train` until the global step reaches total_steps or
//       IsEndOfTraining(status) ...
//   if (chief) RETURN_IF_ERROR(loop->Stop());
#ifndef DFLOW_TRAIN_SYNC_REPLICAS_OPTIMIZER_H_
#define DFLOW_TRAIN_SYNC_REPLICAS_OPTIMIZER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "dflow/client/client_session.h"
#include "dflow/train/optimizer.h"
#include "dflow/train/variables.h"

namespace dflow {

// Runs one call on a session: RunOn(session) calls it on that session; a
// MonitoredSession's RunWithoutHooks recreates its session after a task
// failure and calls again.
using SessionRunner =
    std::function<absl::Status(const std::function<absl::Status(const ClientSession&)>&)>;
SessionRunner RunOn(const ClientSession* session);

struct SyncReplicasOptions {
  int replicas_to_aggregate = 1;
  int total_num_replicas = 1;  // Workers; more than replicas_to_aggregate = backups.
  // Tokens the chief enqueues before the first step; -1: replicas_to_aggregate
  // (TensorFlow's default). 0 makes every worker wait for the first
  // aggregation, so each contributes exactly once per step when all are
  // needed (what the equivalence tests use).
  int initial_tokens = -1;
  // Where this worker's local step lives, e.g. "/job:worker/task:1".
  std::string local_device;
};

class SyncReplicasOptimizer {
 public:
  // `opt` (not owned) applies the aggregated gradients.
  SyncReplicasOptimizer(Optimizer* opt, SyncReplicasOptions options);
  ~SyncReplicasOptimizer();

  // Builds the accumulators, the token queue, this worker's train op (which
  // it returns) and the chief's ops. `global_step` is required.
  absl::StatusOr<Operation> Minimize(const Scope& scope, const Output& loss,
                                     const std::vector<Variable>& var_list,
                                     const Variable* global_step);
  // The same from gradients already computed (e.g. averaged over towers).
  absl::StatusOr<Operation> ApplyGradients(const Scope& scope, const std::vector<GradAndVar>& grads,
                                           const Variable* global_step);

  // Sets this worker's local step to the global step; run after the
  // variables are initialized, before the first train op, on every session
  // (a recreated one too).
  absl::Status InitLocalStep(const ClientSession& session);
  // The chief's part of the same: the accumulators' global step := the
  // global step, then the initial tokens. On every session of the chief: a
  // restarted parameter server or chief starts the next step as training
  // did its first.
  absl::Status InitChief(const ClientSession& session);

  // Runs the train op once with `feeds`, fetching `fetches` too; counts the
  // step's gradient as stale when the global step had passed this worker's
  // local step before it was applied (such gradients are dropped).
  // `options` and `metadata` (may be null) go to the session's Run (traces).
  absl::Status RunTrainStep(const ClientSession& session, const ClientSession::FeedType& feeds,
                            const std::vector<Output>& fetches, std::vector<Tensor>* outputs,
                            const tensorflow::RunOptions& options = tensorflow::RunOptions(),
                            tensorflow::RunMetadata* metadata = nullptr);

  // The chief's aggregation loop on its own thread, after InitChief, until
  // the global step reaches `total_steps`; then it closes the token queue,
  // ending the workers' waits. Every call goes through `run`.
  class ChiefLoop {
   public:
    ~ChiefLoop();
    // Waits for the loop; its first error, if any.
    absl::Status Stop();

   private:
    friend class SyncReplicasOptimizer;
    std::thread thread_;
    absl::Status status_;
    bool joined_ = false;
  };
  std::unique_ptr<ChiefLoop> StartChiefLoop(SessionRunner run, int64_t total_steps);

  // Closes the token queue, ending every worker's wait for a token: what the
  // chief's loop does at the end, for a chief that restarts after the last step.
  absl::Status EndTraining(const ClientSession& session);

  // True for the error a worker's train op ends with once the chief has
  // closed the token queue at the end of training.
  static bool IsEndOfTraining(const absl::Status& status);

  // Gradients of this worker counted as stale so far.
  int64_t stale_gradients() const { return stale_.load(); }

 private:
  Optimizer* const opt_;
  const SyncReplicasOptions options_;
  Variable local_step_;
  Output global_step_before_;  // Read before the gradients are applied.
  Output local_step_before_;
  Operation train_op_;
  Operation local_step_init_;
  Operation chief_init_;   // Accumulators' global step := global step.
  Operation init_tokens_;  // Invalid when there are none.
  Operation sync_op_;
  Output global_step_after_;  // Read after the aggregated update.
  Operation close_queue_;
  std::atomic<int64_t> stale_{0};
};

}  // namespace dflow

#endif  // DFLOW_TRAIN_SYNC_REPLICAS_OPTIMIZER_H_
