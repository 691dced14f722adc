// What every service call (master or worker, in-process or remote) carries
// and how a synchronous wrapper waits for an asynchronous call.
#ifndef DFLOW_DISTRIBUTED_CALL_OPTIONS_H_
#define DFLOW_DISTRIBUTED_CALL_OPTIONS_H_

#include <functional>
#include <utility>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace dflow {

// Per-call options. A call still running at `deadline` fails with
// DeadlineExceeded (transports may report it as soon as the deadline passes).
struct CallOptions {
  absl::Time deadline = absl::InfiniteFuture();

  static CallOptions WithTimeout(absl::Duration timeout) {
    CallOptions o;
    o.deadline = absl::Now() + timeout;
    return o;
  }
};

using StatusCallback = std::function<void(const absl::Status&)>;

namespace call_internal {
// The slot of the innermost WaitForCall running on this thread, if any.
inline thread_local absl::AnyInvocable<void()>* lent_slot = nullptr;
}  // namespace call_internal

// Starts an asynchronous call with `start(done)` and waits for `done`. While
// `start` runs, this thread is lent to the call's work for one wait (see
// LendWaitingThread), which it runs before waiting for `done`.
template <typename Start>
absl::Status WaitForCall(Start start) {
  absl::Notification n;
  absl::Status status;
  absl::AnyInvocable<void()> lent;
  absl::AnyInvocable<void()>* const outer = std::exchange(call_internal::lent_slot, &lent);
  start([&](const absl::Status& s) {
    status = s;
    n.Notify();
  });
  call_internal::lent_slot = outer;
  if (lent) lent();
  n.WaitForNotification();
  return status;
}

// A thread about to wait for a call it started (WaitForCall) may do one of
// the call's own waits instead of a helper thread: the answer that wait
// awaits then wakes the waiting thread itself, not a helper that would wake
// it in turn (a RunGraph over the data plane: one thread hand-off less on
// every step's path). Takes `wait` and returns true when called from inside
// such a call's start on its thread, once; WaitForCall runs `wait` when the
// start returns. `wait` must end by the call's answer (or its deadline) and
// depend on nothing else this thread would do.
inline bool LendWaitingThread(absl::AnyInvocable<void()>& wait) {
  absl::AnyInvocable<void()>* slot = call_internal::lent_slot;
  if (slot == nullptr || *slot) return false;
  *slot = std::move(wait);
  return true;
}

}  // namespace dflow

#endif  // DFLOW_DISTRIBUTED_CALL_OPTIONS_H_
