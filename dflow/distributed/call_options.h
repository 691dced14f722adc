// What every service call (master or worker, in-process or remote) carries
// and how a synchronous wrapper waits for an asynchronous call.
#ifndef DFLOW_DISTRIBUTED_CALL_OPTIONS_H_
#define DFLOW_DISTRIBUTED_CALL_OPTIONS_H_

#include <functional>

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

// Starts an asynchronous call with `start(done)` and waits for `done`.
template <typename Start>
absl::Status WaitForCall(Start start) {
  absl::Notification n;
  absl::Status status;
  start([&](const absl::Status& s) {
    status = s;
    n.Notify();
  });
  n.WaitForNotification();
  return status;
}

}  // namespace dflow

#endif  // DFLOW_DISTRIBUTED_CALL_OPTIONS_H_
