// CancellationManager: lets a step's pending async work (Recv, queue waits)
// learn that the step was cancelled. Thread-safe.
#ifndef DFLOW_FRAMEWORK_CANCELLATION_H_
#define DFLOW_FRAMEWORK_CANCELLATION_H_

#include <cstdint>
#include <functional>
#include <map>

#include "absl/synchronization/mutex.h"

namespace dflow {

using CancellationToken = int64_t;
inline constexpr CancellationToken kInvalidCancellationToken = -1;

class CancellationManager {
 public:
  using Callback = std::function<void()>;

  // Runs every registered callback once; later registrations are refused.
  void StartCancel();
  bool IsCancelled() const;
  // Registers `cb` to run on cancellation. Returns kInvalidCancellationToken
  // (and does not register) when already cancelled.
  CancellationToken Register(Callback cb);
  // Removes a callback; returns false when it already ran or is running.
  bool Deregister(CancellationToken token);

 private:
  mutable absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  CancellationToken next_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<CancellationToken, Callback> callbacks_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dflow

#endif  // DFLOW_FRAMEWORK_CANCELLATION_H_
