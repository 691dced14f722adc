#include "dflow/framework/resource_mgr.h"

#include <atomic>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace dflow {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

struct Counter : ResourceBase {
  static constexpr char kTypeName[] = "Counter";
  explicit Counter(int v = 0) : value(v) {}
  std::string DebugString() const override { return absl::StrCat("Counter ", value); }
  int value;
};

struct Var : ResourceBase {
  static constexpr char kTypeName[] = "Var";
  std::string DebugString() const override { return "Var"; }
};

// Counts live instances, to see when the manager drops a resource.
struct Tracked : ResourceBase {
  static constexpr char kTypeName[] = "Tracked";
  explicit Tracked(std::atomic<int>* live) : live(live) { live->fetch_add(1); }
  ~Tracked() override { live->fetch_sub(1); }
  std::string DebugString() const override { return "Tracked"; }
  std::atomic<int>* live;
};

TEST(ResourceMgrTest, CreateThenLookupReturnsTheSameObject) {
  ResourceMgr rm;
  EXPECT_EQ(rm.default_container(), "localhost");
  auto c = std::make_shared<Counter>(7);
  ASSERT_TRUE(rm.Create<Counter>("localhost", "c", c).ok());
  absl::StatusOr<std::shared_ptr<Counter>> got = rm.Lookup<Counter>("localhost", "c");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->get(), c.get());
  EXPECT_EQ((*got)->value, 7);
}

TEST(ResourceMgrTest, CreateTwiceIsAlreadyExists) {
  ResourceMgr rm;
  ASSERT_TRUE(rm.Create<Counter>("a", "c", std::make_shared<Counter>()).ok());
  absl::Status s = rm.Create<Counter>("a", "c", std::make_shared<Counter>());
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(s.message(), HasSubstr("a/c"));
}

TEST(ResourceMgrTest, LookupMissingNamesContainerNameAndType) {
  ResourceMgr rm;
  absl::Status s = rm.Lookup<Var>("localhost", "v").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "Resource localhost/v (Var) does not exist");
}

TEST(ResourceMgrTest, TypesAndContainersAreSeparate) {
  ResourceMgr rm;
  ASSERT_TRUE(rm.Create<Counter>("a", "x", std::make_shared<Counter>(1)).ok());
  // Same name, other type: a different resource.
  ASSERT_TRUE(rm.Create<Var>("a", "x", std::make_shared<Var>()).ok());
  // Same name and type, other container: a different resource.
  ASSERT_TRUE(rm.Create<Counter>("b", "x", std::make_shared<Counter>(2)).ok());
  EXPECT_EQ((*rm.Lookup<Counter>("a", "x"))->value, 1);
  EXPECT_EQ((*rm.Lookup<Counter>("b", "x"))->value, 2);
  EXPECT_TRUE(rm.Lookup<Var>("a", "x").ok());
  EXPECT_EQ(rm.Lookup<Var>("b", "x").status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(rm.Containers(), ElementsAre("a", "b"));
}

TEST(ResourceMgrTest, LookupOrCreateCreatesOnceAcrossThreads) {
  ResourceMgr rm;
  std::atomic<int> creations{0};
  constexpr int kThreads = 8;
  std::vector<Counter*> seen(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < 50; ++r) {
        auto got = rm.LookupOrCreate<Counter>(
            "localhost", "shared", [&]() -> absl::StatusOr<std::shared_ptr<Counter>> {
              creations.fetch_add(1);
              std::this_thread::yield();
              return std::make_shared<Counter>(42);
            });
        ASSERT_TRUE(got.ok());
        if (r == 0) seen[t] = got->get();
        ASSERT_EQ(got->get(), seen[t]);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(creations.load(), 1);
  for (Counter* c : seen) EXPECT_EQ(c, seen[0]);
  EXPECT_EQ((*rm.Lookup<Counter>("localhost", "shared"))->value, 42);
}

TEST(ResourceMgrTest, LookupOrCreateFailureCreatesNothing) {
  ResourceMgr rm;
  auto got = rm.LookupOrCreate<Counter>(
      "localhost", "c", []() -> absl::StatusOr<std::shared_ptr<Counter>> {
        return absl::InternalError("no memory");
      });
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInternal);
  EXPECT_FALSE(rm.Lookup<Counter>("localhost", "c").ok());
}

TEST(ResourceMgrTest, DeleteByTypeAndName) {
  ResourceMgr rm;
  ASSERT_TRUE(rm.Create<Counter>("localhost", "c", std::make_shared<Counter>()).ok());
  ASSERT_TRUE(rm.Create<Var>("localhost", "c", std::make_shared<Var>()).ok());
  ASSERT_TRUE(rm.Delete<Counter>("localhost", "c").ok());
  EXPECT_FALSE(rm.Lookup<Counter>("localhost", "c").ok());
  EXPECT_TRUE(rm.Lookup<Var>("localhost", "c").ok());  // Other type untouched.
  absl::Status again = rm.Delete<Counter>("localhost", "c");
  EXPECT_EQ(again.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(again.message(), "Resource localhost/c (Counter) does not exist");
  EXPECT_EQ(rm.Delete<Counter>("nowhere", "c").code(), absl::StatusCode::kNotFound);
}

TEST(ResourceMgrTest, DeleteByHandle) {
  ResourceMgr rm;
  ASSERT_TRUE(rm.Create<Var>("box", "v", std::make_shared<Var>()).ok());
  ASSERT_TRUE(rm.Create<Counter>("box", "v", std::make_shared<Counter>()).ok());
  ResourceHandle h = MakeResourceHandle<Var>("/job:localhost/replica:0/task:0/device:CPU:0",
                                             "box", "v");
  EXPECT_EQ(h.maybe_type_name, "Var");
  ASSERT_TRUE(rm.Delete(h).ok());
  EXPECT_FALSE(rm.Lookup<Var>("box", "v").ok());
  EXPECT_TRUE(rm.Lookup<Counter>("box", "v").ok());
  absl::Status again = rm.Delete(h);
  EXPECT_EQ(again.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(again.message(), "Resource box/v (Var) does not exist");
}

TEST(ResourceMgrTest, DeleteByHandleWithEmptyContainerUsesTheDefault) {
  ResourceMgr rm("default_box");
  ASSERT_TRUE(rm.Create<Var>("default_box", "v", std::make_shared<Var>()).ok());
  ASSERT_TRUE(rm.Delete(MakeResourceHandle<Var>("", "", "v")).ok());
  EXPECT_FALSE(rm.Lookup<Var>("default_box", "v").ok());
}

TEST(ResourceMgrTest, CleanupDropsOneContainer) {
  std::atomic<int> live{0};  // Outlives rm: rm's destructor drops what is left.
  ResourceMgr rm;
  ASSERT_TRUE(rm.Create<Tracked>("a", "t", std::make_shared<Tracked>(&live)).ok());
  ASSERT_TRUE(rm.Create<Tracked>("b", "t", std::make_shared<Tracked>(&live)).ok());
  EXPECT_EQ(live.load(), 2);
  rm.Cleanup("a");
  EXPECT_EQ(live.load(), 1);
  EXPECT_FALSE(rm.Lookup<Tracked>("a", "t").ok());
  EXPECT_TRUE(rm.Lookup<Tracked>("b", "t").ok());
  EXPECT_THAT(rm.Containers(), ElementsAre("b"));
  rm.Cleanup("does_not_exist");  // No-op.
  EXPECT_THAT(rm.Containers(), ElementsAre("b"));
}

TEST(ResourceMgrTest, HeldResourceOutlivesCleanup) {
  std::atomic<int> live{0};  // Outlives rm: rm's destructor drops what is left.
  ResourceMgr rm;
  ASSERT_TRUE(rm.Create<Tracked>("a", "t", std::make_shared<Tracked>(&live)).ok());
  std::shared_ptr<Tracked> held = *rm.Lookup<Tracked>("a", "t");
  rm.CleanupAll();
  EXPECT_EQ(live.load(), 1);
  held.reset();
  EXPECT_EQ(live.load(), 0);
}

TEST(ResourceMgrTest, CleanupAllDropsEverything) {
  std::atomic<int> live{0};  // Outlives rm: rm's destructor drops what is left.
  ResourceMgr rm;
  for (const char* c : {"a", "b", "c"}) {
    ASSERT_TRUE(rm.Create<Tracked>(c, "t", std::make_shared<Tracked>(&live)).ok());
  }
  rm.CleanupAll();
  EXPECT_EQ(live.load(), 0);
  EXPECT_THAT(rm.Containers(), IsEmpty());
  // Usable again afterwards.
  ASSERT_TRUE(rm.Create<Tracked>("a", "t", std::make_shared<Tracked>(&live)).ok());
  EXPECT_EQ(live.load(), 1);
}

}  // namespace
}  // namespace dflow
