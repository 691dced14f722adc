// ThreadSanitizer annotations for Debian's uninstrumented Abseil synchronization
// (linked into the test binaries of a -DDFLOW_TSAN=ON tree only; see CMakeLists.txt).
//
// Abseil's Mutex, CondVar, Notification, BlockingCounter and Barrier (and absl::Status's
// reference count on its shared message) do their
// synchronization with atomics and futexes inside libabsl_synchronization.so. Debian builds
// that library without -fsanitize=thread, so TSan never sees a lock or an unlock: every
// field that dflow guards with an absl::Mutex reads as a data race (checked with a
// two-thread counter under absl::MutexLock: reported). Abseil's own TSan annotations sit in
// mutex.cc and are compiled out of Debian's build.
//
// This file defines those entry points again. The executable's definitions interpose the
// shared library's for every caller (dflow, and gRPC, whose grpc_core::Mutex and gpr_mu are
// absl::Mutex too); each one tells TSan what the call does (the __tsan_mutex_* annotation
// API, the same calls Abseil makes when it is built with TSan) and calls the library's own
// definition, found with dlsym(RTLD_NEXT). Nothing here changes what the calls do.
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/barrier.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

#if !defined(__SANITIZE_THREAD__) && !(defined(__has_feature) && __has_feature(thread_sanitizer))
#error "absl_sync_tsan.cc belongs in -fsanitize=thread builds only"
#endif

namespace {

// The library's definition of a symbol (mangled name, in Debian's absl::debian3 namespace).
template <typename Fn>
Fn Real(const char* mangled) {
  void* f = dlsym(RTLD_NEXT, mangled);
  if (f == nullptr) {
    std::fprintf(stderr, "absl_sync_tsan: %s not found in Abseil (%s)\n", mangled, dlerror());
    std::abort();
  }
  return reinterpret_cast<Fn>(f);
}
#define DFLOW_ABSL_SYM(name) "_ZN4absl7debian3" name
#define DFLOW_ABSL_CONST_SYM(name) "_ZNK4absl7debian3" name  // const members

// Set while one of the definitions below runs the library's own: only the outermost call
// is annotated. Inside, the library calls its public entry points again through the PLT
// (AwaitWithTimeout calls AwaitWithDeadline; Notification, BlockingCounter and Barrier lock
// their private mutex, some of those calls bound here and some not), and annotating those
// would release or take a mutex twice. Notification, BlockingCounter and Barrier's private
// mutexes stay unannotated; their own annotations below give the ordering they promise.
thread_local int t_inside_absl = 0;
struct InsideAbsl {
  InsideAbsl() { ++t_inside_absl; }
  ~InsideAbsl() { --t_inside_absl; }
};

// Mutexes this thread holds in reader mode: Await and CondVar::Wait release and take back
// the mutex in whichever mode the caller holds it.
thread_local std::vector<const void*> t_reader_held;

bool HeldAsReader(const void* mu) {
  return std::find(t_reader_held.begin(), t_reader_held.end(), mu) != t_reader_held.end();
}
void ForgetReader(const void* mu) {
  auto it = std::find(t_reader_held.begin(), t_reader_held.end(), mu);
  if (it != t_reader_held.end()) t_reader_held.erase(it);
}

// Annotations around a call that releases the mutex and holds it again on return.
unsigned Mode(const void* mu) { return HeldAsReader(mu) ? __tsan_mutex_read_lock : 0u; }
void ReleaseForWait(void* mu, unsigned mode) {
  __tsan_mutex_pre_unlock(mu, mode);
  __tsan_mutex_post_unlock(mu, mode);
  __tsan_mutex_pre_lock(mu, mode);
}
void TakeBackAfterWait(void* mu, unsigned mode) { __tsan_mutex_post_lock(mu, mode, 0); }

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

// ---- Mutex ----
Mutex::~Mutex() {
  static auto real = Real<void (*)(Mutex*)>(DFLOW_ABSL_SYM("5MutexD2Ev"));
  __tsan_mutex_destroy(this, 0);
  real(this);
}

void Mutex::Lock() {
  static auto real = Real<void (*)(Mutex*)>(DFLOW_ABSL_SYM("5Mutex4LockEv"));
  if (t_inside_absl) return real(this);
  InsideAbsl inside;
  __tsan_mutex_pre_lock(this, 0);
  real(this);
  __tsan_mutex_post_lock(this, 0, 0);
}

void Mutex::Unlock() {
  static auto real = Real<void (*)(Mutex*)>(DFLOW_ABSL_SYM("5Mutex6UnlockEv"));
  if (t_inside_absl) return real(this);
  InsideAbsl inside;
  __tsan_mutex_pre_unlock(this, 0);
  real(this);
  __tsan_mutex_post_unlock(this, 0);
}

bool Mutex::TryLock() {
  static auto real = Real<bool (*)(Mutex*)>(DFLOW_ABSL_SYM("5Mutex7TryLockEv"));
  if (t_inside_absl) return real(this);
  InsideAbsl inside;
  __tsan_mutex_pre_lock(this, __tsan_mutex_try_lock);
  bool locked = real(this);
  __tsan_mutex_post_lock(
      this, __tsan_mutex_try_lock | (locked ? 0u : __tsan_mutex_try_lock_failed), 0);
  return locked;
}

void Mutex::ReaderLock() {
  static auto real = Real<void (*)(Mutex*)>(DFLOW_ABSL_SYM("5Mutex10ReaderLockEv"));
  if (t_inside_absl) return real(this);
  InsideAbsl inside;
  __tsan_mutex_pre_lock(this, __tsan_mutex_read_lock);
  real(this);
  __tsan_mutex_post_lock(this, __tsan_mutex_read_lock, 0);
  t_reader_held.push_back(this);
}

void Mutex::ReaderUnlock() {
  static auto real = Real<void (*)(Mutex*)>(DFLOW_ABSL_SYM("5Mutex12ReaderUnlockEv"));
  if (t_inside_absl) return real(this);
  InsideAbsl inside;
  ForgetReader(this);
  __tsan_mutex_pre_unlock(this, __tsan_mutex_read_lock);
  real(this);
  __tsan_mutex_post_unlock(this, __tsan_mutex_read_lock);
}

bool Mutex::ReaderTryLock() {
  static auto real = Real<bool (*)(Mutex*)>(DFLOW_ABSL_SYM("5Mutex13ReaderTryLockEv"));
  if (t_inside_absl) return real(this);
  InsideAbsl inside;
  const unsigned flags = __tsan_mutex_read_lock | __tsan_mutex_try_lock;
  __tsan_mutex_pre_lock(this, flags);
  bool locked = real(this);
  __tsan_mutex_post_lock(this, flags | (locked ? 0u : __tsan_mutex_try_lock_failed), 0);
  if (locked) t_reader_held.push_back(this);
  return locked;
}

// LockWhen* and ReaderLockWhen* hold the mutex on return whatever the condition says.
void Mutex::LockWhen(const Condition& cond) {
  static auto real = Real<void (*)(Mutex*, const Condition&)>(
      DFLOW_ABSL_SYM("5Mutex8LockWhenERKNS0_9ConditionE"));
  if (t_inside_absl) return real(this, cond);
  InsideAbsl inside;
  __tsan_mutex_pre_lock(this, 0);
  real(this, cond);
  __tsan_mutex_post_lock(this, 0, 0);
}

bool Mutex::LockWhenWithTimeout(const Condition& cond, absl::Duration timeout) {
  static auto real = Real<bool (*)(Mutex*, const Condition&, absl::Duration)>(
      DFLOW_ABSL_SYM("5Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE"));
  if (t_inside_absl) return real(this, cond, timeout);
  InsideAbsl inside;
  __tsan_mutex_pre_lock(this, 0);
  bool r = real(this, cond, timeout);
  __tsan_mutex_post_lock(this, 0, 0);
  return r;
}

bool Mutex::LockWhenWithDeadline(const Condition& cond, absl::Time deadline) {
  static auto real = Real<bool (*)(Mutex*, const Condition&, absl::Time)>(
      DFLOW_ABSL_SYM("5Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE"));
  if (t_inside_absl) return real(this, cond, deadline);
  InsideAbsl inside;
  __tsan_mutex_pre_lock(this, 0);
  bool r = real(this, cond, deadline);
  __tsan_mutex_post_lock(this, 0, 0);
  return r;
}

void Mutex::ReaderLockWhen(const Condition& cond) {
  static auto real = Real<void (*)(Mutex*, const Condition&)>(
      DFLOW_ABSL_SYM("5Mutex14ReaderLockWhenERKNS0_9ConditionE"));
  if (t_inside_absl) return real(this, cond);
  InsideAbsl inside;
  __tsan_mutex_pre_lock(this, __tsan_mutex_read_lock);
  real(this, cond);
  __tsan_mutex_post_lock(this, __tsan_mutex_read_lock, 0);
  t_reader_held.push_back(this);
}

bool Mutex::ReaderLockWhenWithTimeout(const Condition& cond, absl::Duration timeout) {
  static auto real = Real<bool (*)(Mutex*, const Condition&, absl::Duration)>(
      DFLOW_ABSL_SYM("5Mutex25ReaderLockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE"));
  if (t_inside_absl) return real(this, cond, timeout);
  InsideAbsl inside;
  __tsan_mutex_pre_lock(this, __tsan_mutex_read_lock);
  bool r = real(this, cond, timeout);
  __tsan_mutex_post_lock(this, __tsan_mutex_read_lock, 0);
  t_reader_held.push_back(this);
  return r;
}

bool Mutex::ReaderLockWhenWithDeadline(const Condition& cond, absl::Time deadline) {
  static auto real = Real<bool (*)(Mutex*, const Condition&, absl::Time)>(
      DFLOW_ABSL_SYM("5Mutex26ReaderLockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE"));
  if (t_inside_absl) return real(this, cond, deadline);
  InsideAbsl inside;
  __tsan_mutex_pre_lock(this, __tsan_mutex_read_lock);
  bool r = real(this, cond, deadline);
  __tsan_mutex_post_lock(this, __tsan_mutex_read_lock, 0);
  t_reader_held.push_back(this);
  return r;
}

// Await* release the mutex while they wait and hold it again on return.
void Mutex::Await(const Condition& cond) {
  static auto real = Real<void (*)(Mutex*, const Condition&)>(
      DFLOW_ABSL_SYM("5Mutex5AwaitERKNS0_9ConditionE"));
  if (t_inside_absl) return real(this, cond);
  InsideAbsl inside;
  const unsigned mode = Mode(this);
  ReleaseForWait(this, mode);
  real(this, cond);
  TakeBackAfterWait(this, mode);
}

bool Mutex::AwaitWithTimeout(const Condition& cond, absl::Duration timeout) {
  static auto real = Real<bool (*)(Mutex*, const Condition&, absl::Duration)>(
      DFLOW_ABSL_SYM("5Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE"));
  if (t_inside_absl) return real(this, cond, timeout);
  InsideAbsl inside;
  const unsigned mode = Mode(this);
  ReleaseForWait(this, mode);
  bool r = real(this, cond, timeout);
  TakeBackAfterWait(this, mode);
  return r;
}

bool Mutex::AwaitWithDeadline(const Condition& cond, absl::Time deadline) {
  static auto real = Real<bool (*)(Mutex*, const Condition&, absl::Time)>(
      DFLOW_ABSL_SYM("5Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE"));
  if (t_inside_absl) return real(this, cond, deadline);
  InsideAbsl inside;
  const unsigned mode = Mode(this);
  ReleaseForWait(this, mode);
  bool r = real(this, cond, deadline);
  TakeBackAfterWait(this, mode);
  return r;
}

// ---- CondVar: Wait* release and take back the mutex; Signal orders what came before it
// before what the woken waiter does (also when the signaller does not hold the mutex). ----
void CondVar::Wait(Mutex* mu) {
  static auto real = Real<void (*)(CondVar*, Mutex*)>(
      DFLOW_ABSL_SYM("7CondVar4WaitEPNS0_5MutexE"));
  if (t_inside_absl) return real(this, mu);
  InsideAbsl inside;
  const unsigned mode = Mode(mu);
  ReleaseForWait(mu, mode);
  real(this, mu);
  TakeBackAfterWait(mu, mode);
  __tsan_acquire(this);
}

bool CondVar::WaitWithTimeout(Mutex* mu, absl::Duration timeout) {
  static auto real = Real<bool (*)(CondVar*, Mutex*, absl::Duration)>(
      DFLOW_ABSL_SYM("7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE"));
  if (t_inside_absl) return real(this, mu, timeout);
  InsideAbsl inside;
  const unsigned mode = Mode(mu);
  ReleaseForWait(mu, mode);
  bool r = real(this, mu, timeout);
  TakeBackAfterWait(mu, mode);
  __tsan_acquire(this);
  return r;
}

bool CondVar::WaitWithDeadline(Mutex* mu, absl::Time deadline) {
  static auto real = Real<bool (*)(CondVar*, Mutex*, absl::Time)>(
      DFLOW_ABSL_SYM("7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE"));
  if (t_inside_absl) return real(this, mu, deadline);
  InsideAbsl inside;
  const unsigned mode = Mode(mu);
  ReleaseForWait(mu, mode);
  bool r = real(this, mu, deadline);
  TakeBackAfterWait(mu, mode);
  __tsan_acquire(this);
  return r;
}

void CondVar::Signal() {
  static auto real = Real<void (*)(CondVar*)>(DFLOW_ABSL_SYM("7CondVar6SignalEv"));
  __tsan_release(this);
  real(this);
}

void CondVar::SignalAll() {
  static auto real = Real<void (*)(CondVar*)>(DFLOW_ABSL_SYM("7CondVar9SignalAllEv"));
  __tsan_release(this);
  real(this);
}

// ---- Notification: Notify releases on the flag that the inline (instrumented)
// HasBeenNotified loads with acquire; the waits acquire on it. ----
void Notification::Notify() {
  static auto real = Real<void (*)(Notification*)>(DFLOW_ABSL_SYM("12Notification6NotifyEv"));
  InsideAbsl inside;
  __tsan_release(&notified_yet_);
  real(this);
}

void Notification::WaitForNotification() const {
  static auto real = Real<void (*)(const Notification*)>(
      DFLOW_ABSL_CONST_SYM("12Notification19WaitForNotificationEv"));
  InsideAbsl inside;
  real(this);
  __tsan_acquire(const_cast<std::atomic<bool>*>(&notified_yet_));
}

bool Notification::WaitForNotificationWithTimeout(absl::Duration timeout) const {
  static auto real = Real<bool (*)(const Notification*, absl::Duration)>(
      DFLOW_ABSL_CONST_SYM("12Notification30WaitForNotificationWithTimeoutENS0_8DurationE"));
  InsideAbsl inside;
  bool r = real(this, timeout);
  if (r) __tsan_acquire(const_cast<std::atomic<bool>*>(&notified_yet_));
  return r;
}

bool Notification::WaitForNotificationWithDeadline(absl::Time deadline) const {
  static auto real = Real<bool (*)(const Notification*, absl::Time)>(
      DFLOW_ABSL_CONST_SYM("12Notification31WaitForNotificationWithDeadlineENS0_4TimeE"));
  InsideAbsl inside;
  bool r = real(this, deadline);
  if (r) __tsan_acquire(const_cast<std::atomic<bool>*>(&notified_yet_));
  return r;
}

// ---- BlockingCounter and Barrier: every decrement before the wait's return. ----
bool BlockingCounter::DecrementCount() {
  static auto real = Real<bool (*)(BlockingCounter*)>(
      DFLOW_ABSL_SYM("15BlockingCounter14DecrementCountEv"));
  InsideAbsl inside;
  __tsan_release(this);
  return real(this);
}

void BlockingCounter::Wait() {
  static auto real = Real<void (*)(BlockingCounter*)>(DFLOW_ABSL_SYM("15BlockingCounter4WaitEv"));
  InsideAbsl inside;
  real(this);
  __tsan_acquire(this);
}

bool Barrier::Block() {
  static auto real = Real<bool (*)(Barrier*)>(DFLOW_ABSL_SYM("7Barrier5BlockEv"));
  InsideAbsl inside;
  __tsan_release(this);
  bool last = real(this);
  __tsan_acquire(this);
  return last;
}

// ---- Status: copies share one heap payload (code, message, payloads) under an atomic
// reference count that the header increments (instrumented) and UnrefNonInlined decrements
// in the library (not seen). Its fetch_sub is acq_rel, so each drop is a release and an
// acquire on the payload: whoever deletes it comes after every other owner's reads. ----
void Status::UnrefNonInlined(uintptr_t rep) {
  static auto real = Real<void (*)(uintptr_t)>(DFLOW_ABSL_SYM("6Status15UnrefNonInlinedEm"));
  void* payload = RepToPointer(rep);
  __tsan_release(payload);
  __tsan_acquire(payload);
  real(rep);
}

ABSL_NAMESPACE_END
}  // namespace absl
