#define EIGEN_USE_THREADS
#include "dflow/framework/thread_pool.h"

#include <atomic>
#include <cstdlib>
#include <set>
#include <thread>
#include <vector>

#include <unsupported/Eigen/CXX11/Tensor>

#include <gtest/gtest.h>

#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"

namespace dflow {
namespace {

// Counts how often each index of [0, total) was visited.
std::vector<int> Visits(ThreadPool* pool, int64_t total, int64_t cost) {
  std::vector<std::atomic<int>> hits(total);
  pool->ParallelFor(total, cost, [&](int64_t begin, int64_t end) {
    ASSERT_LE(0, begin);
    ASSERT_LT(begin, end);
    ASSERT_LE(end, total);
    for (int64_t i = begin; i < end; ++i) hits[i].fetch_add(1);
  });
  std::vector<int> out(total);
  for (int64_t i = 0; i < total; ++i) out[i] = hits[i].load();
  return out;
}

TEST(ThreadPoolTest, ParallelForCoversEveryIndexOnce) {
  ThreadPool pool("test", 4);
  EXPECT_EQ(pool.NumThreads(), 4);
  for (int64_t total : {0, 1, 2, 3, 7, 16, 17, 100, 1000, 4097, 100003}) {
    for (int64_t cost : {1, 100, 10000, 1000000}) {
      std::vector<int> hits = Visits(&pool, total, cost);
      for (int64_t i = 0; i < total; ++i) {
        ASSERT_EQ(hits[i], 1) << "total=" << total << " cost=" << cost << " i=" << i;
      }
    }
  }
}

TEST(ThreadPoolTest, ExpensiveLoopsUseSeveralShards) {
  ThreadPool pool("test", 4);
  absl::Mutex mu;
  int shards = 0;
  pool.ParallelFor(1000, 100000, [&](int64_t, int64_t) {
    absl::MutexLock l(&mu);
    ++shards;
  });
  EXPECT_GT(shards, 1);
}

TEST(ThreadPoolTest, CheapLoopsRunInlineOnTheCaller) {
  ThreadPool pool("test", 4);
  int calls = 0;
  std::thread::id runner;
  pool.ParallelFor(100, 1, [&](int64_t begin, int64_t end) {
    ++calls;
    runner = std::this_thread::get_id();
    EXPECT_EQ(begin, 0);
    EXPECT_EQ(end, 100);
  });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(runner, std::this_thread::get_id());
}

TEST(ThreadPoolTest, SingleThreadPoolRunsInline) {
  ThreadPool pool("one", 1);
  int calls = 0;
  pool.ParallelFor(1 << 20, 1000, [&](int64_t begin, int64_t end) {
    ++calls;
    EXPECT_EQ(end - begin, 1 << 20);
  });
  EXPECT_EQ(calls, 1);
}

TEST(ThreadPoolTest, ScheduleRunsEveryTaskOnAPoolThread) {
  ThreadPool pool("test", 3);
  constexpr int kTasks = 200;
  absl::BlockingCounter done(kTasks);
  std::atomic<int> in_pool{0};
  for (int i = 0; i < kTasks; ++i) {
    pool.Schedule([&] {
      if (pool.InPool()) in_pool.fetch_add(1);
      done.DecrementCount();
    });
  }
  done.Wait();
  EXPECT_EQ(in_pool.load(), kTasks);
  EXPECT_FALSE(pool.InPool());
}

TEST(ThreadPoolTest, DestructorFinishesScheduledWork) {
  std::atomic<int> ran{0};
  {
    ThreadPool pool("test", 2);
    for (int i = 0; i < 100; ++i) pool.Schedule([&] { ran.fetch_add(1); });
  }
  EXPECT_EQ(ran.load(), 100);
}

TEST(ThreadPoolTest, NestedParallelForFromPoolThreadsDoesNotDeadlock) {
  ThreadPool pool("test", 2);
  constexpr int64_t kOuter = 16, kInner = 1000;
  std::vector<std::atomic<int>> hits(kOuter * kInner);
  // Every pool thread runs an outer shard that itself calls ParallelFor.
  pool.ParallelFor(kOuter, 1000000, [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) {
      pool.ParallelFor(kInner, 100000, [&](int64_t ib, int64_t ie) {
        for (int64_t i = ib; i < ie; ++i) hits[o * kInner + i].fetch_add(1);
      });
    }
  });
  for (auto& h : hits) ASSERT_EQ(h.load(), 1);
}

TEST(ThreadPoolTest, NestedParallelForFromScheduledTasks) {
  ThreadPool pool("test", 2);
  constexpr int kTasks = 8;
  absl::BlockingCounter done(kTasks);
  std::atomic<int64_t> sum{0};
  for (int t = 0; t < kTasks; ++t) {
    pool.Schedule([&] {
      pool.ParallelFor(10000, 10000, [&](int64_t b, int64_t e) { sum.fetch_add(e - b); });
      done.DecrementCount();
    });
  }
  done.Wait();
  EXPECT_EQ(sum.load(), kTasks * 10000);
}

TEST(ThreadPoolTest, ConcurrentCallersShareThePool) {
  ThreadPool pool("test", 3);
  std::atomic<int64_t> sum{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&] {
      for (int r = 0; r < 20; ++r) {
        pool.ParallelFor(5000, 5000, [&](int64_t b, int64_t e) { sum.fetch_add(e - b); });
      }
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(sum.load(), 4 * 20 * 5000);
}

TEST(ThreadPoolTest, EigenDeviceEvaluatesExpressions) {
  ThreadPool pool("test", 2);
  Eigen::Tensor<float, 1> a(100000), b(100000), out(100000);
  a.setConstant(1.5f);
  b.setConstant(2.0f);
  out.device(*pool.eigen_device()) = a * b + a;
  for (int i = 0; i < 100000; i += 997) ASSERT_FLOAT_EQ(out(i), 4.5f);
  EXPECT_EQ(pool.eigen_pool()->NumThreads(), 2);
}

TEST(ThreadPoolTest, IntraOpPoolIsASingleton) {
  ThreadPool* p = IntraOpPool();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p, IntraOpPool());
  EXPECT_GE(p->NumThreads(), 1);
}

// The inter-op pool is process-wide, so this runs in a process of its own.
TEST(ThreadPoolDeathTest, SetInterOpThreadsSizesThePoolBeforeFirstUse) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        SetInterOpThreads(3);
        ThreadPool* pool = InterOpPool();
        SetInterOpThreads(5);  // Too late: the pool exists.
        const bool sized = pool->NumThreads() == 3 && InterOpPool() == pool &&
                           pool->NumThreads() == 3 && IntraOpPool() == pool;
        std::exit(sized ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace dflow
