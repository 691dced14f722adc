// DeadlineTimer: runs closures at given times on one background thread.
//
//   DeadlineTimer timer;
//   DeadlineTimer::Id id = timer.Schedule(absl::Now() + absl::Seconds(1), [] {...});
//   timer.Cancel(id);  // false when it already ran (or is running)
#ifndef DFLOW_DISTRIBUTED_DEADLINE_TIMER_H_
#define DFLOW_DISTRIBUTED_DEADLINE_TIMER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <thread>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace dflow {

class DeadlineTimer {
 public:
  using Id = int64_t;
  static constexpr Id kNone = 0;

  DeadlineTimer();
  // Pending closures are dropped, not run.
  ~DeadlineTimer();
  DeadlineTimer(const DeadlineTimer&) = delete;
  DeadlineTimer& operator=(const DeadlineTimer&) = delete;

  // Runs `fn` at `when` (soon, if it is past). kNone for an infinite `when`
  // (nothing is scheduled).
  Id Schedule(absl::Time when, std::function<void()> fn);
  // True when `fn` was removed before it started.
  bool Cancel(Id id);

 private:
  void Loop();

  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  Id next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<std::pair<absl::Time, Id>, std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  std::map<Id, absl::Time> when_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace dflow

#endif  // DFLOW_DISTRIBUTED_DEADLINE_TIMER_H_
