#include "dflow/runtime/session_util.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

using Cache = SignatureCache<int>;

TEST(SignatureCacheTest, ConcurrentFirstRunsBuildOnce) {
  Cache cache;
  std::atomic<int> builds{0};
  auto build = [&]() -> absl::StatusOr<std::shared_ptr<const int>> {
    ++builds;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return std::make_shared<const int>(7);
  };
  std::vector<std::thread> threads;
  std::vector<const int*> got(8);
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      absl::StatusOr<std::shared_ptr<const int>> e = cache.GetOrBuild("sig", build);
      got[i] = e.ok() ? e->get() : nullptr;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(builds.load(), 1);
  for (const int* p : got) {
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p, got[0]);  // The same prepared signature for every caller.
  }
  EXPECT_EQ(cache.size(), 1);
}

TEST(SignatureCacheTest, AFailedBuildIsNotKept) {
  Cache cache;
  int builds = 0;
  auto failing = [&]() -> absl::StatusOr<std::shared_ptr<const int>> {
    ++builds;
    return absl::NotFoundError("Fetch 'y:0' refers to no node");
  };
  EXPECT_EQ(cache.GetOrBuild("sig", failing).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(cache.GetOrBuild("sig", failing).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(builds, 2);
  EXPECT_EQ(cache.size(), 0);
  absl::StatusOr<std::shared_ptr<const int>> ok =
      cache.GetOrBuild("sig", [] { return std::make_shared<const int>(1); });
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(**ok, 1);
}

TEST(SignatureCacheTest, CloseDropsEntriesAndRefusesLaterCalls) {
  Cache cache;
  ASSERT_TRUE(cache.GetOrBuild("a", [] { return std::make_shared<const int>(1); }).ok());
  cache.Close(absl::CancelledError("[Session] the session is closed"));
  EXPECT_EQ(cache.size(), 0);
  bool built = false;
  absl::StatusOr<std::shared_ptr<const int>> e = cache.GetOrBuild("a", [&] {
    built = true;
    return std::make_shared<const int>(2);
  });
  EXPECT_EQ(e.status().code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(e.status().message(), ::testing::HasSubstr("closed"));
  EXPECT_FALSE(built);
}

}  // namespace
}  // namespace dflow
