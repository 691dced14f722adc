// The operations waiting inside a resource (a queue's enqueues and dequeues,
// an accumulator's takes), each ended early when its step is cancelled.
//
// The owner keeps a WaitList per kind of operation, guarded by the owner's
// own mutex (the one that guards what the operations wait for). The pattern:
//
//   {  // Submit
//     absl::MutexLock l(&mu_);
//     id = takes_.Add(std::move(take), waiter);
//     finished = RunLocked();  // may serve it at once
//   }
//   Finish(finished);          // each entry's Disarm(), then its callback
//   takes_.Arm(id, waiter.cm, [self, id] { self->Abort(id); });
//
// and Abort(id) removes the entry under the lock, then ends it with
// WaitEnded(...)'s error outside it.
#ifndef DFLOW_OPS_WAIT_LIST_H_
#define DFLOW_OPS_WAIT_LIST_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "dflow/framework/cancellation.h"

namespace dflow {

// How a queued operation may be ended early: by `cm` (may be null) cancelling
// the step; the error is DeadlineExceeded when `deadline` has passed by then.
struct Waiter {
  CancellationManager* cm = nullptr;  // not owned; must outlive the wait
  absl::Time deadline = absl::InfiniteFuture();
};

// The error of a wait ended by its step: DeadlineExceeded ("<what> timed
// out: ...") once past the deadline, Cancelled(`cancelled`) otherwise.
inline absl::Status WaitEnded(const Waiter& w, const std::string& what,
                              const std::string& cancelled) {
  if (absl::Now() >= w.deadline) {
    return absl::DeadlineExceededError(
        absl::StrCat(what, " timed out: the step's deadline passed while it waited"));
  }
  return absl::CancelledError(cancelled);
}

// The bookkeeping of one waiting operation; a WaitList's entries derive from it.
struct WaitEntry {
  int64_t id = 0;
  Waiter waiter;
  CancellationToken token = kInvalidCancellationToken;  // set by WaitList::Arm

  // Undoes Arm's registration; call once the entry has left its list,
  // outside the owner's lock.
  void Disarm() const {
    if (token != kInvalidCancellationToken) waiter.cm->Deregister(token);
  }
};

// Waiting entries of type T (a WaitEntry) in arrival order. Every method but
// Arm requires the owner's mutex, given at construction; Arm must be called
// without it.
template <typename T>
class WaitList {
 public:
  explicit WaitList(absl::Mutex* mu) : mu_(mu) {}  // not owned
  WaitList(const WaitList&) = delete;
  WaitList& operator=(const WaitList&) = delete;

  // Appends `entry` waiting on `waiter`; returns its id, unique in this list.
  int64_t Add(std::unique_ptr<T> entry, const Waiter& waiter) ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu_) {
    entry->id = next_id_++;
    entry->waiter = waiter;
    entries_.push_back(std::move(entry));
    return entries_.back()->id;
  }
  // The entry `id`, or null once it has left the list.
  T* Find(int64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu_) {
    auto it = Position(id);
    return it == entries_.end() ? nullptr : it->get();
  }
  std::unique_ptr<T> Remove(int64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu_) {
    auto it = Position(id);
    if (it == entries_.end()) return nullptr;
    std::unique_ptr<T> entry = std::move(*it);
    entries_.erase(it);
    return entry;
  }
  bool empty() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu_) { return entries_.empty(); }
  T* front() ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu_) { return entries_.front().get(); }
  std::unique_ptr<T> PopFront() ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu_) {
    std::unique_ptr<T> entry = std::move(entries_.front());
    entries_.pop_front();
    return entry;
  }
  // Every entry, in order; the list is left empty.
  std::deque<std::unique_ptr<T>> TakeAll() ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu_) {
    return std::exchange(entries_, {});
  }

  // When entry `id` is still waiting and `cm` is not null, makes a
  // cancellation of `cm` call `abort` (which should Remove the entry and end
  // it); calls it now when the step is already cancelled. The entry's
  // Disarm() undoes the registration.
  void Arm(int64_t id, CancellationManager* cm, std::function<void()> abort)
      ABSL_LOCKS_EXCLUDED(*mu_) {
    if (cm == nullptr) return;
    {
      absl::MutexLock l(mu_);
      if (Find(id) == nullptr) return;  // Served already.
    }
    const CancellationToken token = cm->Register(abort);
    if (token == kInvalidCancellationToken) {  // The step is already cancelled.
      abort();
      return;
    }
    {
      absl::MutexLock l(mu_);
      if (T* entry = Find(id); entry != nullptr) {
        entry->token = token;
        return;
      }
    }
    cm->Deregister(token);  // It finished meanwhile.
  }

 private:
  auto Position(int64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(*mu_) {
    return std::find_if(entries_.begin(), entries_.end(),
                        [id](const std::unique_ptr<T>& e) { return e->id == id; });
  }

  absl::Mutex* const mu_;
  int64_t next_id_ ABSL_GUARDED_BY(*mu_) = 0;
  std::deque<std::unique_ptr<T>> entries_ ABSL_GUARDED_BY(*mu_);
};

}  // namespace dflow

#endif  // DFLOW_OPS_WAIT_LIST_H_
