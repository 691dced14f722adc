#include "dflow/framework/device_name.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace dflow {
namespace {

using ::testing::HasSubstr;

DeviceName MustParse(absl::string_view s) {
  absl::StatusOr<DeviceName> d = DeviceName::Parse(s);
  EXPECT_TRUE(d.ok()) << s << ": " << d.status();
  return d.ok() ? *d : DeviceName();
}

TEST(DeviceNameTest, ParsesFullName) {
  DeviceName d = MustParse("/job:worker/replica:0/task:1/device:CPU:0");
  EXPECT_TRUE(d.IsFullySpecified());
  EXPECT_EQ(d.job, "worker");
  EXPECT_EQ(d.replica, 0);
  EXPECT_EQ(d.task, 1);
  EXPECT_EQ(d.type, "CPU");
  EXPECT_EQ(d.id, 0);
  EXPECT_EQ(d.ToString(), "/job:worker/replica:0/task:1/device:CPU:0");
}

TEST(DeviceNameTest, LegacyFormsUpperCaseTheType) {
  for (const char* s : {"/cpu:0", "/device:cpu:0", "/CPU:0", "CPU:0", "cpu:0"}) {
    DeviceName d = MustParse(s);
    EXPECT_TRUE(d.has_type && d.has_id) << s;
    EXPECT_FALSE(d.has_job || d.has_replica || d.has_task) << s;
    EXPECT_EQ(d.ToString(), "/device:CPU:0") << s;
  }
  EXPECT_EQ(MustParse("/gpu:1").ToString(), "/device:GPU:1");
  EXPECT_EQ(MustParse("/job:ps/gpu:1").ToString(), "/job:ps/device:GPU:1");
}

TEST(DeviceNameTest, PartialSpecs) {
  DeviceName ps = MustParse("/job:ps");
  EXPECT_TRUE(ps.has_job);
  EXPECT_FALSE(ps.has_task || ps.has_type || ps.has_id || ps.has_replica);
  EXPECT_EQ(ps.ToString(), "/job:ps");
  EXPECT_EQ(MustParse("/job:ps/task:0").ToString(), "/job:ps/task:0");
  EXPECT_EQ(MustParse("/task:3/job:worker").ToString(), "/job:worker/task:3");
  EXPECT_EQ(MustParse("/replica:2").ToString(), "/replica:2");
}

TEST(DeviceNameTest, IdWildcard) {
  DeviceName d = MustParse("/device:GPU:*");
  EXPECT_TRUE(d.has_type);
  EXPECT_FALSE(d.has_id);
  EXPECT_EQ(d.ToString(), "/device:GPU:*");
  EXPECT_FALSE(MustParse("/gpu:*").has_id);
  DeviceName t = MustParse("/device:CPU");
  EXPECT_TRUE(t.has_type);
  EXPECT_FALSE(t.has_id);
  EXPECT_EQ(t.ToString(), "/device:CPU:*");
  EXPECT_FALSE(MustParse("/job:*/task:*").has_job);
}

TEST(DeviceNameTest, EmptyIsNothing) {
  for (const char* s : {"", "/"}) {
    DeviceName d = MustParse(s);
    EXPECT_FALSE(d.has_job || d.has_replica || d.has_task || d.has_type || d.has_id);
    EXPECT_EQ(d.ToString(), "");
  }
}

TEST(DeviceNameTest, ErrorsQuoteTheName) {
  for (const char* s :
       {"/job:", "/job:1abc", "/task:x", "/task:-1", "/replica:", "/device:CPU:a",
        "/device:CPU:0:1", "/foo:0", "/job:a//task:0", "/job:a/job:b", "/cpu:0/gpu:0",
        "garbage", "/job:a/", "/device:C-PU:0", "/task:99999999999999"}) {
    absl::StatusOr<DeviceName> d = DeviceName::Parse(s);
    ASSERT_FALSE(d.ok()) << s;
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(d.status().message(), HasSubstr(absl::StrCat("'", s, "'")));
  }
}

TEST(DeviceNameTest, RoundTripsThroughToString) {
  for (const char* s : {"/job:localhost/replica:0/task:0/device:CPU:0", "/job:ps/task:2",
                        "/job:w/replica:1", "/device:GPU:*", "/task:7/device:CPU:3"}) {
    DeviceName d = MustParse(s);
    EXPECT_EQ(d.ToString(), s);
    EXPECT_EQ(MustParse(d.ToString()), d);
  }
}

TEST(DeviceNameTest, Matches) {
  DeviceName full = MustParse("/job:worker/replica:0/task:1/device:CPU:0");
  EXPECT_TRUE(MustParse("").Matches(full));
  EXPECT_TRUE(MustParse("/job:worker").Matches(full));
  EXPECT_TRUE(MustParse("/job:worker/task:1").Matches(full));
  EXPECT_TRUE(MustParse("/cpu:0").Matches(full));
  EXPECT_TRUE(MustParse("/device:CPU:*").Matches(full));
  EXPECT_FALSE(MustParse("/job:ps").Matches(full));
  EXPECT_FALSE(MustParse("/task:0").Matches(full));
  EXPECT_FALSE(MustParse("/gpu:0").Matches(full));
  EXPECT_FALSE(MustParse("/cpu:1").Matches(full));
  // A more specific spec does not match a less specific name.
  EXPECT_FALSE(full.Matches(MustParse("/job:worker")));
  EXPECT_TRUE(full.Matches(full));
}

TEST(DeviceNameTest, MergeFillsMissingFields) {
  DeviceName d = MustParse("/job:ps");
  ASSERT_TRUE(d.MergeFrom(MustParse("/task:2/device:CPU:0")).ok());
  EXPECT_EQ(d.ToString(), "/job:ps/task:2/device:CPU:0");
  ASSERT_TRUE(d.MergeFrom(MustParse("/job:ps/replica:0")).ok());  // Same job: fine.
  EXPECT_EQ(d.ToString(), "/job:ps/replica:0/task:2/device:CPU:0");
  ASSERT_TRUE(d.MergeFrom(MustParse("")).ok());
  EXPECT_EQ(d.ToString(), "/job:ps/replica:0/task:2/device:CPU:0");
}

TEST(DeviceNameTest, MergeConflictNamesBothSpecsAndLeavesTargetUnchanged) {
  DeviceName d = MustParse("/job:ps/task:0");
  absl::Status s = d.MergeFrom(MustParse("/job:worker/task:0/gpu:0"));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("/job:ps/task:0"));
  EXPECT_THAT(s.message(), HasSubstr("/job:worker/task:0/device:GPU:0"));
  EXPECT_EQ(d.ToString(), "/job:ps/task:0");

  EXPECT_FALSE(MustParse("/cpu:0").MergeFrom(MustParse("/gpu:0")).ok());
  EXPECT_FALSE(MustParse("/cpu:0").MergeFrom(MustParse("/cpu:1")).ok());
  EXPECT_FALSE(MustParse("/task:0").MergeFrom(MustParse("/task:1")).ok());
  EXPECT_FALSE(MustParse("/replica:0").MergeFrom(MustParse("/replica:1")).ok());
}

TEST(DeviceNameTest, MergeWithOverrideLetsOtherWin) {
  DeviceName d = MustParse("/job:ps/task:0/device:CPU:0");
  ASSERT_TRUE(d.MergeFrom(MustParse("/job:worker/gpu:1"), /*override=*/true).ok());
  EXPECT_EQ(d.ToString(), "/job:worker/task:0/device:GPU:1");
}

TEST(DeviceNameTest, TaskNameAndFullDeviceName) {
  EXPECT_EQ(MustParse("/job:localhost/replica:0/task:0/device:CPU:0").TaskName(),
            "/job:localhost/replica:0/task:0");
  EXPECT_EQ(FullDeviceName("worker", 1, 2, "GPU", 3),
            "/job:worker/replica:1/task:2/device:GPU:3");
  DeviceName d = MustParse(FullDeviceName("localhost", 0, 0, "CPU", 0));
  EXPECT_TRUE(d.IsFullySpecified());
}

}  // namespace
}  // namespace dflow
