#include "dflow/train/monitored_session.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "dflow/framework/status.h"
#include "dflow/io/checkpoint_state.h"

namespace dflow {
namespace {

// Errors after which a new session can go on: a task died or restarted.
bool IsRecoverable(const absl::Status& s) { return absl::IsUnavailable(s) || absl::IsAborted(s); }

constexpr absl::Duration kRetryInterval = absl::Milliseconds(100);
constexpr int kCreateAttempts = 3;  // Per recovery.

}  // namespace

MonitoredSession::~MonitoredSession() = default;

absl::StatusOr<std::unique_ptr<MonitoredSession>> MonitoredSession::Create(
    const Scope& root, SessionGraph graph, MonitoredSessionOptions options) {
  if (!options.checkpoint_dir.empty() && !graph.saver) {
    return absl::InvalidArgumentError("[MonitoredSession] a checkpoint_dir needs a Saver");
  }
  const absl::Duration timeout = options.ready_timeout;
  std::unique_ptr<MonitoredSession> ms(
      new MonitoredSession(root, std::move(graph), std::move(options)));
  absl::MutexLock l(&ms->mu_);
  RETURN_IF_ERROR(ms->CreateSession(timeout));
  return ms;
}

absl::Status MonitoredSession::CreateSession(absl::Duration timeout) {
  session_.reset();  // Closes the old session first (its master may be gone).
  session_ = std::make_shared<ClientSession>(root_, options_.session);
  ++generation_;
  RETURN_IF_ERROR(PrepareModel(timeout));
  if (options_.after_create) RETURN_IF_ERROR(options_.after_create(*session_));
  for (auto& hook : options_.hooks) RETURN_IF_ERROR(hook->AfterCreateSession(*this));
  return absl::OkStatus();
}

// The chief restores the latest checkpoint or initializes, unless the
// variables are already initialized (a parameter server that kept them: its
// state is at least as new as any checkpoint); the others wait until they
// are. UNAVAILABLE (a task not back yet) is retried until `timeout`.
absl::Status MonitoredSession::PrepareModel(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  restored_from_.clear();
  absl::Status last;
  for (int round = 0;; ++round) {
    last = [&]() -> absl::Status {
      std::vector<Tensor> ready;
      RETURN_IF_ERROR(session_->Run(graph_.ready, &ready));
      const bool is_ready = std::all_of(ready.begin(), ready.end(),
                                        [](const Tensor& t) { return t.scalar<bool>(); });
      if (!is_ready && !options_.is_chief) {
        return absl::UnavailableError("the chief has not initialized the variables yet");
      }
      if (!is_ready) {
        std::optional<std::string> latest;
        if (!options_.checkpoint_dir.empty()) {
          ASSIGN_OR_RETURN(latest, io::LatestCheckpoint(options_.checkpoint_dir));
        }
        if (latest) {
          RETURN_IF_ERROR(graph_.saver->Restore(*session_, *latest));
          restored_from_ = *latest;
        } else {
          RETURN_IF_ERROR(session_->Run({}, {}, {graph_.init}, nullptr));
        }
      }
      std::vector<Tensor> step;
      RETURN_IF_ERROR(session_->Run({graph_.global_step.value()}, &step));
      global_step_ = step[0].scalar<int64_t>();
      return absl::OkStatus();
    }();
    if (last.ok()) break;
    if (!IsRecoverable(last)) return last;
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "[MonitoredSession] the model was not ready within ", absl::FormatDuration(timeout),
          ": ", last.message()));
    }
    if (options_.log != nullptr && round % 50 == 49) {
      *options_.log << "waiting for the model to be ready: " << last.message() << "\n";
    }
    absl::SleepFor(kRetryInterval);
  }
  if (options_.log != nullptr && !restored_from_.empty()) {
    *options_.log << "restored " << restored_from_ << " (global step " << global_step_ << ")\n";
  }
  return absl::OkStatus();
}

absl::Status MonitoredSession::RunStep(
    const std::function<absl::StatusOr<StepResult>(const ClientSession&)>& step) {
  return Run(step, /*hooks=*/true);
}

absl::Status MonitoredSession::RunWithoutHooks(
    const std::function<absl::Status(const ClientSession&)>& call) {
  return Run(
      [&](const ClientSession& session) -> absl::StatusOr<StepResult> {
        RETURN_IF_ERROR(call(session));
        return StepResult{};
      },
      /*hooks=*/false);
}

absl::Status MonitoredSession::Run(
    const std::function<absl::StatusOr<StepResult>(const ClientSession&)>& step, bool hooks) {
  absl::Time failed_at;
  for (int in_row = 0;; ++in_row) {
    std::shared_ptr<ClientSession> session;
    int generation;
    {
      absl::MutexLock l(&mu_);
      session = session_;
      generation = generation_;
    }
    absl::StatusOr<StepResult> r = step(*session);
    absl::MutexLock l(&mu_);
    if (r.ok()) {
      if (hooks) {
        global_step_ = std::max(global_step_, r->global_step);
        bool stop = false;
        for (auto& hook : options_.hooks) RETURN_IF_ERROR(hook->AfterRun(*this, *r, &stop));
        if (stop) stop_.store(true);
      }
      if (in_row > 0 && options_.log != nullptr) {
        const double seconds = absl::ToDoubleSeconds(absl::Now() - failed_at);
        *options_.log << (hooks ? absl::StrFormat(
                                      "recovered: the step ran again %.2f s after it failed, "
                                      "at global step %d\n",
                                      seconds, r->global_step)
                                : absl::StrFormat(
                                      "recovered: the call ran again %.2f s after it failed\n",
                                      seconds));
      }
      return absl::OkStatus();
    }
    if (in_row == 0) failed_at = absl::Now();
    if (!IsRecoverable(r.status())) return r.status();
    if (in_row >= options_.max_recoveries) {
      return in_row == 0 ? r.status()
                         : WithContext(r.status(),
                                       absl::StrCat("[MonitoredSession] gave up after ", in_row,
                                                    " session recoveries in a row"));
    }
    if (generation != generation_) continue;  // Another thread recovered already.
    ++recoveries_;
    if (options_.log != nullptr) {
      *options_.log << "recovering the session after: " << r.status().message() << "\n";
    }
    // The new session's own set-up (after_create, hooks) can meet the same
    // failure (a task flapping): a few more tries, each bounded.
    absl::Status created;
    for (int attempt = 0; attempt < kCreateAttempts; ++attempt) {
      created = CreateSession(options_.recovery_timeout);
      if (created.ok() || !IsRecoverable(created)) break;
    }
    RETURN_IF_ERROR(created);
  }
}

absl::Status MonitoredSession::Close() {
  absl::MutexLock l(&mu_);
  absl::Status s;
  for (auto& hook : options_.hooks) {
    absl::Status h = hook->End(*this);
    if (s.ok()) s = h;
  }
  session_.reset();
  return s;
}

// --- hooks ---------------------------------------------------------------------------

absl::Status StopAtStepHook::AfterCreateSession(MonitoredSession& session) {
  if (session.global_step() >= last_step_) session.RequestStop();
  return absl::OkStatus();
}

absl::Status StopAtStepHook::AfterRun(MonitoredSession& session, const StepResult& step,
                                      bool* stop) {
  if (step.global_step >= last_step_) *stop = true;
  return absl::OkStatus();
}

CheckpointSaverHook::CheckpointSaverHook(std::string dir, int64_t every_steps, double every_secs)
    : base_(dir + "/model.ckpt"), every_steps_(every_steps), every_secs_(every_secs) {}

absl::Status CheckpointSaverHook::Save(MonitoredSession& session) {
  if (!session.graph().saver) {
    return absl::FailedPreconditionError("[CheckpointSaverHook] the session has no Saver");
  }
  // Named after the global step it holds: other workers may have moved it on.
  std::vector<Tensor> now;
  RETURN_IF_ERROR(session.session().Run({session.graph().global_step.value()}, &now));
  const int64_t step = now[0].scalar<int64_t>();
  RETURN_IF_ERROR(session.graph().saver->Save(session.session(), base_, step).status());
  last_saved_step_ = step;
  last_save_time_ = absl::Now();
  ++saves_;
  return absl::OkStatus();
}

// Like TensorFlow's hook: a checkpoint of the starting point at the first
// creation, so that a failure before the first interval has one.
absl::Status CheckpointSaverHook::AfterCreateSession(MonitoredSession& session) {
  if (last_saved_step_ >= 0) return absl::OkStatus();
  if (!session.restored_from().empty()) {  // That checkpoint is the starting point.
    last_saved_step_ = session.global_step();
    last_save_time_ = absl::Now();
    return absl::OkStatus();
  }
  return Save(session);
}

absl::Status CheckpointSaverHook::AfterRun(MonitoredSession& session, const StepResult& step,
                                           bool* stop) {
  const bool by_steps = every_steps_ > 0 && step.global_step - last_saved_step_ >= every_steps_;
  const bool by_time =
      every_secs_ > 0 && absl::Now() - last_save_time_ >= absl::Seconds(every_secs_);
  if (!by_steps && !by_time) return absl::OkStatus();
  return Save(session);
}

absl::Status CheckpointSaverHook::End(MonitoredSession& session) {
  if (session.global_step() == last_saved_step_) return absl::OkStatus();
  return Save(session);
}

absl::Status NanLossHook::AfterRun(MonitoredSession& session, const StepResult& step,
                                   bool* stop) {
  if (std::isfinite(step.loss)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("[NanLossHook] the loss is ", step.loss,
                                                 " at global step ", step.global_step));
}

}  // namespace dflow
