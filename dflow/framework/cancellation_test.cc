#include "dflow/framework/cancellation.h"

#include <atomic>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/synchronization/notification.h"

namespace dflow {
namespace {

TEST(CancellationTest, StartCancelRunsEveryCallbackOnce) {
  CancellationManager cm;
  int a = 0, b = 0;
  CancellationToken ta = cm.Register([&] { ++a; });
  CancellationToken tb = cm.Register([&] { ++b; });
  EXPECT_NE(ta, kInvalidCancellationToken);
  EXPECT_NE(ta, tb);
  EXPECT_FALSE(cm.IsCancelled());
  cm.StartCancel();
  EXPECT_TRUE(cm.IsCancelled());
  cm.StartCancel();  // Idempotent.
  EXPECT_EQ(a, 1);
  EXPECT_EQ(b, 1);
}

TEST(CancellationTest, DeregisteredCallbackDoesNotRun) {
  CancellationManager cm;
  int ran = 0;
  CancellationToken t = cm.Register([&] { ++ran; });
  EXPECT_TRUE(cm.Deregister(t));
  EXPECT_FALSE(cm.Deregister(t));  // Already gone.
  cm.StartCancel();
  EXPECT_EQ(ran, 0);
}

TEST(CancellationTest, RegisterAfterCancelIsRefused) {
  CancellationManager cm;
  cm.StartCancel();
  bool ran = false;
  EXPECT_EQ(cm.Register([&] { ran = true; }), kInvalidCancellationToken);
  EXPECT_FALSE(ran);
}

TEST(CancellationTest, DeregisterAfterCancelReturnsFalse) {
  CancellationManager cm;
  CancellationToken t = cm.Register([] {});
  cm.StartCancel();
  EXPECT_FALSE(cm.Deregister(t));
  EXPECT_FALSE(cm.Deregister(kInvalidCancellationToken));
}

TEST(CancellationTest, CallbacksMayCallBackIntoTheManager) {
  CancellationManager cm;
  bool saw_cancelled = false;
  CancellationToken other = kInvalidCancellationToken;
  bool deregistered = true;
  cm.Register([&] {
    saw_cancelled = cm.IsCancelled();
    deregistered = cm.Deregister(other);
    EXPECT_EQ(cm.Register([] {}), kInvalidCancellationToken);
  });
  other = cm.Register([] {});
  cm.StartCancel();  // Would deadlock if callbacks ran under the lock.
  EXPECT_TRUE(saw_cancelled);
  EXPECT_FALSE(deregistered);
}

TEST(CancellationTest, DeregisterWhileCallbacksRunReturnsFalseWithoutBlocking) {
  CancellationManager cm;
  absl::Notification in_callback, release;
  CancellationToken slow = cm.Register([&] {
    in_callback.Notify();
    release.WaitForNotification();
  });
  std::thread canceller([&] { cm.StartCancel(); });
  in_callback.WaitForNotification();
  EXPECT_TRUE(cm.IsCancelled());
  EXPECT_FALSE(cm.Deregister(slow));  // Running now: must not wait for it.
  release.Notify();
  canceller.join();
}

TEST(CancellationTest, ConcurrentRegisterAndCancelRunEachAcceptedCallback) {
  for (int round = 0; round < 20; ++round) {
    CancellationManager cm;
    std::atomic<int> accepted{0}, ran{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < 100; ++i) {
          if (cm.Register([&] { ran.fetch_add(1); }) != kInvalidCancellationToken) {
            accepted.fetch_add(1);
          }
        }
      });
    }
    std::thread canceller([&] { cm.StartCancel(); });
    for (auto& th : threads) th.join();
    canceller.join();
    EXPECT_EQ(ran.load(), accepted.load());
  }
}

}  // namespace
}  // namespace dflow
