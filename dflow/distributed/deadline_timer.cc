#include "dflow/distributed/deadline_timer.h"

#include "absl/time/clock.h"

namespace dflow {

DeadlineTimer::DeadlineTimer() : thread_([this] { Loop(); }) {}

DeadlineTimer::~DeadlineTimer() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
  }
  thread_.join();
}

DeadlineTimer::Id DeadlineTimer::Schedule(absl::Time when, std::function<void()> fn) {
  if (when == absl::InfiniteFuture()) return kNone;
  absl::MutexLock l(&mu_);
  const Id id = next_id_++;
  queue_.emplace(std::make_pair(when, id), std::move(fn));
  when_[id] = when;
  return id;
}

bool DeadlineTimer::Cancel(Id id) {
  if (id == kNone) return false;
  absl::MutexLock l(&mu_);
  auto it = when_.find(id);
  if (it == when_.end()) return false;
  queue_.erase(std::make_pair(it->second, id));
  when_.erase(it);
  return true;
}

void DeadlineTimer::Loop() {
  absl::MutexLock l(&mu_);
  while (!stop_) {
    const absl::Time next = queue_.empty() ? absl::InfiniteFuture() : queue_.begin()->first.first;
    if (absl::Now() < next) {
      // Wake early only when stopping or when an earlier deadline is
      // scheduled. Not for a later one, nor a cancel (a cancelled head costs
      // one wake at its time): every RunGraph schedules and cancels its
      // step's timeout, and waking this thread for each cost ~10 us of the
      // caller's time (a futex wake from the unlock) twice a step.
      auto changed = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
        return stop_ || (!queue_.empty() && queue_.begin()->first.first < next);
      };
      mu_.AwaitWithDeadline(absl::Condition(&changed), next);
      continue;
    }
    auto it = queue_.begin();
    std::function<void()> fn = std::move(it->second);
    when_.erase(it->first.second);
    queue_.erase(it);
    mu_.Unlock();
    fn();
    mu_.Lock();
  }
}

}  // namespace dflow
