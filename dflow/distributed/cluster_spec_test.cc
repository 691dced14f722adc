#include "dflow/distributed/cluster_spec.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

using ::testing::HasSubstr;

constexpr char kSpec[] = R"({"ps":["127.0.0.1:2222"],"worker":["h1:2222","h2:2223"]})";

TEST(ClusterSpecTest, ParsesJobsAndAddresses) {
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::FromJson(kSpec);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->jobs(), (std::vector<std::string>{"ps", "worker"}));
  EXPECT_EQ(spec->NumTasks("worker"), 2);
  EXPECT_EQ(spec->NumTasks("chief"), 0);
  EXPECT_EQ(*spec->TaskAddress("worker", 1), "h2:2223");
  EXPECT_EQ(*spec->TaskAddress("ps", 0), "127.0.0.1:2222");
  ASSERT_EQ(spec->AllTasks().size(), 3u);
  EXPECT_EQ(spec->AllTasks()[2], (TaskId{"worker", 1}));
  EXPECT_EQ(ClusterSpec::TaskName("worker", 1), "/job:worker/replica:0/task:1");
}

TEST(ClusterSpecTest, SparseTasksAndIpv6) {
  absl::StatusOr<ClusterSpec> spec =
      ClusterSpec::FromJson(R"({"worker":{"3":"[::1]:5000","0":"localhost:0"}})");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->TaskIndices("worker"), (std::vector<int>{0, 3}));
  EXPECT_EQ(*spec->TaskAddress("worker", 3), "[::1]:5000");
  EXPECT_EQ(spec->ToJson(), R"({"worker":{"0":"localhost:0","3":"[::1]:5000"}})");
}

TEST(ClusterSpecTest, ClusterDefAndJsonRoundTrip) {
  ClusterSpec spec = *ClusterSpec::FromJson(kSpec);
  tensorflow::ClusterDef def = spec.ToClusterDef();
  ASSERT_EQ(def.job_size(), 2);
  EXPECT_EQ(def.job(1).name(), "worker");
  EXPECT_EQ(def.job(1).tasks().at(1), "h2:2223");
  absl::StatusOr<ClusterSpec> back = ClusterSpec::FromClusterDef(def);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->ToJson(), spec.ToJson());
  EXPECT_EQ(ClusterSpec::FromJson(spec.ToJson())->ToJson(), spec.ToJson());
}

void ExpectInvalid(const std::string& json, const std::string& fragment) {
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::FromJson(json);
  ASSERT_FALSE(spec.ok()) << json;
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(spec.status().message()), HasSubstr(fragment)) << json;
}

TEST(ClusterSpecTest, ClearErrors) {
  ExpectInvalid(R"({"ps":["a:1")", "not valid JSON");
  ExpectInvalid(R"(["a:1"])", "must be a JSON object");
  ExpectInvalid("{}", "no jobs");
  ExpectInvalid(R"({"ps":[]})", "job 'ps' has no tasks");
  ExpectInvalid(R"({"ps":{}})", "job 'ps' has no tasks");
  ExpectInvalid(R"({"ps":["hostonly"]})", "'hostonly' is not \"host:port\": no ':port'");
  ExpectInvalid(R"({"ps":["h:70000"]})", "port is not a number");
  ExpectInvalid(R"({"ps":[":80"]})", "empty host");
  ExpectInvalid(R"({"ps":["a b:80"]})", "bad character");
  ExpectInvalid(R"({"ps":[2222]})", "task address 2222 is not a string");
  ExpectInvalid(R"({"p-s":["h:1"]})", "job name 'p-s' is not valid");
  ExpectInvalid(R"({"ps":{"x":"h:1"}})", "task index 'x'");
  ExpectInvalid(R"({"ps":"h:1"})", "must be a list");
}

TEST(ClusterSpecTest, TaskAddressOutOfRangeNamesTheTasks) {
  ClusterSpec spec = *ClusterSpec::FromJson(kSpec);
  absl::StatusOr<std::string> a = spec.TaskAddress("worker", 5);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(a.status().message()), HasSubstr("job 'worker' has no task 5"));
  EXPECT_THAT(std::string(a.status().message()), HasSubstr("[0, 1]"));
  EXPECT_THAT(std::string(spec.TaskAddress("chief", 0).status().message()),
              HasSubstr("jobs are [ps, worker]"));
}

TEST(ClusterSpecTest, FromFile) {
  const std::string path = ::testing::TempDir() + "/cluster_spec_test.json";
  {
    std::ofstream out(path);
    out << kSpec;
  }
  absl::StatusOr<ClusterSpec> spec = ClusterSpec::FromJsonOrFile("@" + path);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->NumTasks("worker"), 2);
  std::remove(path.c_str());
  absl::StatusOr<ClusterSpec> missing = ClusterSpec::FromJsonOrFile("@" + path);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr(path));
  {
    std::ofstream out(path);
    out << "{broken";
  }
  absl::StatusOr<ClusterSpec> broken = ClusterSpec::FromJsonOrFile("@" + path);
  EXPECT_EQ(broken.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(broken.status().message()), HasSubstr("in file '" + path));
  std::remove(path.c_str());
}

TEST(ClusterSpecTest, TfConfig) {
  absl::StatusOr<TfConfig> c = ParseTfConfig(
      R"({"cluster":{"ps":["p:1"],"worker":["w0:1","w1:1"]},"task":{"type":"worker","index":1}})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->task, (TaskId{"worker", 1}));
  EXPECT_EQ(*c->cluster.TaskAddress("worker", 1), "w1:1");

  auto error = [](const std::string& json) {
    return std::string(ParseTfConfig(json).status().message());
  };
  EXPECT_THAT(error("{"), HasSubstr("[TF_CONFIG] not valid JSON"));
  EXPECT_THAT(error(R"({"task":{"type":"ps"}})"), HasSubstr("no \"cluster\""));
  EXPECT_THAT(error(R"({"cluster":{"ps":["p:1"]}})"), HasSubstr("no \"task\""));
  EXPECT_THAT(error(R"({"cluster":{"ps":["p:1"]},"task":{"type":"chief","index":0}})"),
              HasSubstr("task type 'chief' is not a job of the cluster [ps]"));
  EXPECT_THAT(error(R"({"cluster":{"ps":["p:1"]},"task":{"type":"ps","index":3}})"),
              HasSubstr("task index 3 is out of range"));
  EXPECT_THAT(error(R"({"cluster":{"ps":["p"]},"task":{"type":"ps","index":0}})"),
              HasSubstr("'p' is not \"host:port\""));
}

TEST(ClusterSpecTest, TfConfigSecurityKeys) {
  absl::StatusOr<TfConfig> c = ParseTfConfig(
      R"({"cluster":{"ps":["p:1"]},"task":{"type":"ps","index":0},"auth_token_file":"/t",)"
      R"("tls_cert":"/c","tls_key":"/k","tls_ca":"/a"})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->auth_token_file, "/t");
  EXPECT_EQ(c->tls_cert, "/c");
  EXPECT_EQ(c->tls_key, "/k");
  EXPECT_EQ(c->tls_ca, "/a");
  absl::StatusOr<TfConfig> plain =
      ParseTfConfig(R"({"cluster":{"ps":["p:1"]},"task":{"type":"ps","index":0}})");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->auth_token_file, "");  // Off unless given.
  absl::StatusOr<TfConfig> bad = ParseTfConfig(
      R"({"cluster":{"ps":["p:1"]},"task":{"type":"ps","index":0},"auth_token_file":7})");
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("\"auth_token_file\" is not a string"));
}

TEST(ClusterSpecTest, TfConfigFromEnvironment) {
  ::unsetenv("TF_CONFIG");
  EXPECT_EQ(TfConfigFromEnv().status().code(), absl::StatusCode::kNotFound);
  ::setenv("TF_CONFIG", R"({"cluster":{"ps":["p:1"]},"task":{"type":"ps","index":0}})", 1);
  absl::StatusOr<TfConfig> c = TfConfigFromEnv();
  ::unsetenv("TF_CONFIG");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->task, (TaskId{"ps", 0}));
}

}  // namespace
}  // namespace dflow
