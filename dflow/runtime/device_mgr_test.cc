#include "dflow/runtime/device_mgr.h"

#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

using ::testing::HasSubstr;

tensorflow::ConfigProto CpuConfig(int n) {
  tensorflow::ConfigProto config;
  (*config.mutable_device_count())["CPU"] = n;
  return config;
}

TEST(DeviceMgrTest, CreatesRequestedCpusWithDistinctIncarnations) {
  absl::StatusOr<std::vector<std::unique_ptr<Device>>> devices =
      CreateLocalDevices(CpuConfig(4), "worker", 0, 2);
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_EQ(devices->size(), 4u);
  std::set<uint64_t> incarnations;
  for (int i = 0; i < 4; ++i) {
    const Device& d = *(*devices)[i];
    EXPECT_EQ(d.name(), "/job:worker/replica:0/task:2/device:CPU:" + std::to_string(i));
    EXPECT_EQ(d.device_type(), "CPU");
    EXPECT_NE(d.incarnation(), 0u);
    incarnations.insert(d.incarnation());
  }
  EXPECT_EQ(incarnations.size(), 4u);
}

TEST(DeviceMgrTest, DefaultsToOneCpuAndIgnoresGpuCount) {
  tensorflow::ConfigProto config;
  (*config.mutable_device_count())["GPU"] = 2;
  absl::StatusOr<std::vector<std::unique_ptr<Device>>> devices =
      CreateLocalDevices(config, "localhost", 0, 0);
  ASSERT_TRUE(devices.ok());
  ASSERT_EQ(devices->size(), 1u);
  EXPECT_EQ((*devices)[0]->name(), "/job:localhost/replica:0/task:0/device:CPU:0");
}

TEST(DeviceMgrTest, RejectsBadCountOrJob) {
  EXPECT_EQ(CreateLocalDevices(CpuConfig(0), "localhost", 0, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateLocalDevices(CpuConfig(1), "bad/job", 0, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateLocalDevices(CpuConfig(1), "", 0, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(DeviceMgrTest, LooksUpByFullNameAndPartialSpec) {
  DeviceMgr mgr(*CreateLocalDevices(CpuConfig(3), "localhost", 0, 0));
  ASSERT_EQ(mgr.ListDevices().size(), 3u);
  absl::StatusOr<Device*> d = mgr.LookupDevice("/job:localhost/replica:0/task:0/device:CPU:1");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ((*d)->parsed_name().id, 1);
  // Another spelling of the same full name.
  d = mgr.LookupDevice("/job:localhost/replica:0/task:0/cpu:2");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ((*d)->parsed_name().id, 2);
  absl::Status missing = mgr.LookupDevice("/job:localhost/replica:0/task:0/device:CPU:9").status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.message(), HasSubstr("device:CPU:9"));
  EXPECT_THAT(missing.message(), HasSubstr("/job:localhost/replica:0/task:0/device:CPU:0"));
  EXPECT_FALSE(mgr.LookupDevice("/device:CPU:0").ok());  // Partial: not a lookup.

  absl::StatusOr<std::vector<Device*>> cpu1 = mgr.ListMatching("/device:CPU:1");
  ASSERT_TRUE(cpu1.ok());
  ASSERT_EQ(cpu1->size(), 1u);
  EXPECT_EQ((*cpu1)[0]->parsed_name().id, 1);
  EXPECT_EQ(mgr.ListMatching("/job:localhost")->size(), 3u);
  EXPECT_EQ(mgr.ListMatching("")->size(), 3u);
  EXPECT_TRUE(mgr.ListMatching("/job:ps")->empty());
  EXPECT_TRUE(mgr.ListMatching("/device:GPU:0")->empty());
  EXPECT_FALSE(mgr.ListMatching("/bogus:1").ok());
  ASSERT_NE(mgr.HostCPU(), nullptr);
  EXPECT_EQ(mgr.HostCPU()->parsed_name().id, 0);
}

TEST(DeviceMgrTest, HostCpuIsNullWithoutCpus) {
  DeviceMgr mgr({});
  EXPECT_EQ(mgr.HostCPU(), nullptr);
  EXPECT_TRUE(mgr.ListDevices().empty());
}

}  // namespace
}  // namespace dflow
