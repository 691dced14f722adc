#include "dflow/framework/cancellation.h"

#include <utility>

namespace dflow {

void CancellationManager::StartCancel() {
  std::map<CancellationToken, Callback> to_run;
  {
    absl::MutexLock l(&mu_);
    if (cancelled_) return;
    cancelled_ = true;
    to_run.swap(callbacks_);
  }
  // Outside the lock: a callback may call Register/Deregister/IsCancelled.
  for (auto& [token, cb] : to_run) cb();
}

bool CancellationManager::IsCancelled() const {
  absl::MutexLock l(&mu_);
  return cancelled_;
}

CancellationToken CancellationManager::Register(Callback cb) {
  absl::MutexLock l(&mu_);
  if (cancelled_) return kInvalidCancellationToken;
  CancellationToken token = next_++;
  callbacks_.emplace(token, std::move(cb));
  return token;
}

bool CancellationManager::Deregister(CancellationToken token) {
  absl::MutexLock l(&mu_);
  if (cancelled_) return false;  // Its callback already ran or is running.
  return callbacks_.erase(token) > 0;
}

}  // namespace dflow
