#include "dflow/ops/wait_list.h"

#include <memory>
#include <vector>

#include "gtest/gtest.h"

namespace dflow {
namespace {

struct Entry : WaitEntry {
  int value = 0;
};

// An owner as a queue is one: a mutex guarding its list.
class Owner {
 public:
  int64_t Add(int value, const Waiter& waiter) {
    auto e = std::make_unique<Entry>();
    e->value = value;
    absl::MutexLock l(&mu_);
    return list_.Add(std::move(e), waiter);
  }
  void Arm(int64_t id, CancellationManager* cm) {
    list_.Arm(id, cm, [this, id] {
      absl::MutexLock l(&mu_);
      if (std::unique_ptr<Entry> e = list_.Remove(id)) aborted_.push_back(e->value);
    });
  }
  // Serves the first entry, as a queue's RunLocked would.
  std::unique_ptr<Entry> Serve() {
    absl::MutexLock l(&mu_);
    return list_.PopFront();
  }
  std::vector<int> aborted() {
    absl::MutexLock l(&mu_);
    return aborted_;
  }
  bool Waiting(int64_t id) {
    absl::MutexLock l(&mu_);
    return list_.Find(id) != nullptr;
  }

 private:
  absl::Mutex mu_;
  WaitList<Entry> list_{&mu_};
  std::vector<int> aborted_ ABSL_GUARDED_BY(mu_);
};

TEST(WaitListTest, CancellingTheStepAbortsAnArmedEntry) {
  Owner owner;
  CancellationManager cm;
  const int64_t first = owner.Add(1, Waiter{&cm});
  const int64_t second = owner.Add(2, Waiter{&cm});
  EXPECT_NE(first, second);
  owner.Arm(second, &cm);
  cm.StartCancel();
  EXPECT_EQ(owner.aborted(), std::vector<int>{2});
  EXPECT_TRUE(owner.Waiting(first));  // never armed
  EXPECT_FALSE(owner.Waiting(second));
}

TEST(WaitListTest, AnAlreadyCancelledStepAbortsAtOnce) {
  Owner owner;
  CancellationManager cm;
  cm.StartCancel();
  const int64_t id = owner.Add(7, Waiter{&cm});
  owner.Arm(id, &cm);
  EXPECT_EQ(owner.aborted(), std::vector<int>{7});
}

TEST(WaitListTest, ServedEntriesAreNotAbortedLater) {
  Owner owner;
  CancellationManager cm;
  const int64_t armed = owner.Add(1, Waiter{&cm});
  owner.Arm(armed, &cm);
  std::unique_ptr<Entry> served = owner.Serve();
  ASSERT_NE(served, nullptr);
  EXPECT_NE(served->token, kInvalidCancellationToken);
  served->Disarm();
  EXPECT_FALSE(cm.Deregister(served->token));  // Disarm removed the callback.
  // Arming an entry that was already served registers nothing.
  const int64_t early = owner.Add(2, Waiter{&cm});
  owner.Serve();
  owner.Arm(early, &cm);
  cm.StartCancel();
  EXPECT_TRUE(owner.aborted().empty());
}

TEST(WaitListTest, WaitEndedSaysDeadlineExceededOnlyPastTheDeadline) {
  const absl::Status passed =
      WaitEnded(Waiter{nullptr, absl::InfinitePast()}, "Dequeue on FIFOQueue 'q'", "cancelled");
  EXPECT_EQ(passed.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(passed.message(),
            "Dequeue on FIFOQueue 'q' timed out: the step's deadline passed while it waited");
  const absl::Status cancelled = WaitEnded(Waiter{}, "Dequeue", "Dequeue operation was cancelled");
  EXPECT_EQ(cancelled.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(cancelled.message(), "Dequeue operation was cancelled");
}

}  // namespace
}  // namespace dflow
