// A training session that survives failures, as TensorFlow's
// MonitoredTrainingSession: the chief restores the latest checkpoint or
// initializes the variables, other workers wait until the model is ready;
// hooks save checkpoints, stop at a step and guard against NaN losses; and
// when a step fails with UNAVAILABLE or ABORTED (a parameter server or this
// worker's server died) the session is recreated — the chief restoring the
// latest checkpoint — and the step runs again.
//
//   MonitoredSessionOptions opts{.is_chief = true, .checkpoint_dir = dir};
//   opts.hooks.push_back(std::make_unique<StopAtStepHook>(1000));
//   opts.hooks.push_back(std::make_unique<CheckpointSaverHook>(saver, dir, 100, 0));
//   ASSIGN_OR_RETURN(auto ms, MonitoredSession::Create(root, model, opts));
//   while (!ms->ShouldStop()) {
//     RETURN_IF_ERROR(ms->RunStep([&](const ClientSession& s) -> absl::StatusOr<StepResult> {
//       ... s.Run(feeds, {loss, global_step.value()}, {train_op}, &out) ...
//     }));
//   }
//   RETURN_IF_ERROR(ms->Close());   // Hooks' End: the final checkpoint.
#ifndef DFLOW_TRAIN_MONITORED_SESSION_H_
#define DFLOW_TRAIN_MONITORED_SESSION_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dflow/client/client_session.h"
#include "dflow/train/saver.h"
#include "dflow/train/variables.h"

namespace dflow {

// What one step reports to the hooks.
struct StepResult {
  int64_t global_step = 0;  // After the step.
  double loss = 0;
};

class MonitoredSession;

class SessionRunHook {
 public:
  virtual ~SessionRunHook() = default;
  // After the session is created or recreated and the model is ready.
  virtual absl::Status AfterCreateSession(MonitoredSession& session) { return absl::OkStatus(); }
  // After every successful step; set `*stop` to end training.
  virtual absl::Status AfterRun(MonitoredSession& session, const StepResult& step, bool* stop) {
    return absl::OkStatus();
  }
  // From Close, before the session ends.
  virtual absl::Status End(MonitoredSession& session) { return absl::OkStatus(); }
};

// What the session needs to know of the graph.
struct SessionGraph {
  Variable global_step;
  Operation init;                 // Initializes every variable (the chief runs it).
  std::vector<Output> ready;      // Scalar bools: is each shared variable initialized?
  std::optional<Saver> saver;     // With a checkpoint directory.
};

struct MonitoredSessionOptions {
  bool is_chief = true;
  std::string checkpoint_dir;  // "": no restore at start (hooks may still save).
  SessionOptions session;      // Target and config of every session created.
  absl::Duration ready_timeout = absl::Seconds(120);  // Non-chief: waiting for the chief.
  // Recreating the session after a failure: attempts in a row, and how long
  // each may wait for the cluster to come back.
  int max_recoveries = 5;
  absl::Duration recovery_timeout = absl::Seconds(60);
  // Run after every session creation, before the hooks (e.g. a sync
  // replica's local step).
  std::function<absl::Status(const ClientSession&)> after_create;
  std::vector<std::unique_ptr<SessionRunHook>> hooks;
  std::ostream* log = nullptr;  // Recoveries and restores are reported here.
};

class MonitoredSession {
 public:
  // Creates the session and prepares the model (restore, init or wait).
  static absl::StatusOr<std::unique_ptr<MonitoredSession>> Create(
      const Scope& root, SessionGraph graph, MonitoredSessionOptions options);
  MonitoredSession(const MonitoredSession&) = delete;
  MonitoredSession& operator=(const MonitoredSession&) = delete;
  ~MonitoredSession();

  // Runs `step` and then the hooks. On UNAVAILABLE or ABORTED the session is
  // recreated and `step` runs again (up to max_recoveries in a row); any
  // other error is returned. Thread-safe: steps from several threads run
  // concurrently, their hooks one at a time, and a failure seen by several
  // of them recreates the session once.
  absl::Status RunStep(const std::function<absl::StatusOr<StepResult>(const ClientSession&)>& step);
  // Runs `call` on the current session, recovering as RunStep does, without
  // the hooks: for work beside the training steps (a sync chief's
  // aggregation loop).
  absl::Status RunWithoutHooks(const std::function<absl::Status(const ClientSession&)>& call);
  bool ShouldStop() const { return stop_.load(); }
  // Makes ShouldStop true (hooks call it, e.g. when training is already done).
  void RequestStop() { stop_.store(true); }
  // Runs the hooks' End, then closes the session.
  absl::Status Close();

  // The current session. REQUIRES: no RunStep in flight (a recovery
  // replaces it); hooks, called under the lock, may use it.
  const ClientSession& session() const { return *session_; }
  const SessionGraph& graph() const { return graph_; }
  bool is_chief() const { return options_.is_chief; }
  // The global step after the last step or restore.
  int64_t global_step() const { return global_step_; }
  // The checkpoint the chief restored at the last creation ("" if none).
  const std::string& restored_from() const { return restored_from_; }
  int recoveries() const { return recoveries_; }

 private:
  MonitoredSession(const Scope& root, SessionGraph graph, MonitoredSessionOptions options)
      : root_(root), graph_(std::move(graph)), options_(std::move(options)) {}
  // A new session, the model prepared, the hooks told; bounded by `timeout`.
  absl::Status CreateSession(absl::Duration timeout) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status PrepareModel(absl::Duration timeout) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // RunStep, with or without the hooks.
  absl::Status Run(const std::function<absl::StatusOr<StepResult>(const ClientSession&)>& step,
                   bool hooks);

  const Scope root_;
  const SessionGraph graph_;
  MonitoredSessionOptions options_;
  std::atomic<bool> stop_{false};

  absl::Mutex mu_;  // Held by session creation and by the hooks.
  std::shared_ptr<ClientSession> session_ ABSL_GUARDED_BY(mu_);
  int generation_ ABSL_GUARDED_BY(mu_) = 0;  // Sessions created so far.
  int64_t global_step_ = 0;
  std::string restored_from_;
  int recoveries_ = 0;
};

// Stops once the global step reaches `last_step`.
class StopAtStepHook : public SessionRunHook {
 public:
  explicit StopAtStepHook(int64_t last_step) : last_step_(last_step) {}
  absl::Status AfterCreateSession(MonitoredSession& session) override;
  absl::Status AfterRun(MonitoredSession& session, const StepResult& step, bool* stop) override;

 private:
  int64_t last_step_;
};

// Saves a checkpoint every `every_steps` global steps and/or `every_secs`
// seconds (0: not by that measure), and at End. Chief only.
class CheckpointSaverHook : public SessionRunHook {
 public:
  CheckpointSaverHook(std::string dir, int64_t every_steps, double every_secs);
  absl::Status AfterCreateSession(MonitoredSession& session) override;
  absl::Status AfterRun(MonitoredSession& session, const StepResult& step, bool* stop) override;
  absl::Status End(MonitoredSession& session) override;
  int saves() const { return saves_; }

 private:
  // Saves under the global step the variables hold now.
  absl::Status Save(MonitoredSession& session);

  std::string base_;  // DIR/model.ckpt
  int64_t every_steps_;
  double every_secs_;
  int64_t last_saved_step_ = -1;
  absl::Time last_save_time_;
  int saves_ = 0;
};

// Fails training with INVALID_ARGUMENT when a step's loss is NaN or infinite.
class NanLossHook : public SessionRunHook {
 public:
  absl::Status AfterRun(MonitoredSession& session, const StepResult& step, bool* stop) override;
};

}  // namespace dflow

#endif  // DFLOW_TRAIN_MONITORED_SESSION_H_
