#include "dflow/runtime/placer.h"

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "dflow/framework/test_data_dir.h"
#include "dflow/runtime/device_mgr.h"
#include "dflow/runtime/graph_test_util.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

using testing_util::GraphBuilder;
using testing_util::LocalCpu;
using testing_util::MakeDevice;
using testing_util::Raw;
using ::testing::HasSubstr;

// Four local CPUs, as config device_count {"CPU": 4} creates them.
class PlacerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tensorflow::ConfigProto config;
    (*config.mutable_device_count())["CPU"] = 4;
    mgr_ = std::make_unique<DeviceMgr>(*CreateLocalDevices(config, "localhost", 0, 0));
  }

  absl::Status Place(Graph* g, bool soft = false, bool log = false) {
    PlacerOptions opts;
    opts.allow_soft_placement = soft;
    opts.log_device_placement = log;
    return dflow::Place(g, mgr_->ListDevices(), mgr_->HostCPU(), opts);
  }

  static std::string DeviceOf(const Graph& g, const std::string& node) {
    return g.FindNode(node)->assigned_device_name();
  }

  std::unique_ptr<DeviceMgr> mgr_;
};

TEST_F(PlacerTest, UnconstrainedNodesGoToDefaultDevice) {
  GraphBuilder b;
  b.Const("a");
  b.Const("c");
  b.Add("sum", "a", "c");
  b.NoOp("n", {"^sum"});
  std::unique_ptr<Graph> g = b.Build();
  ASSERT_TRUE(Place(g.get()).ok());
  for (Node* n : g->nodes()) EXPECT_EQ(n->assigned_device_name(), LocalCpu(0)) << n->name();
}

TEST_F(PlacerTest, ExplicitPartialSpecs) {
  GraphBuilder b;
  b.Const("a");
  b.Const("c");
  b.Add("full", "a", "c", LocalCpu(3));
  b.Add("dev", "a", "c", "/device:CPU:2");
  b.Add("legacy", "a", "c", "/cpu:1");
  b.Add("job", "a", "c", "/job:localhost");
  b.Add("any_cpu", "a", "c", "/device:CPU:*");
  std::unique_ptr<Graph> g = b.Build();
  ASSERT_TRUE(Place(g.get()).ok());
  EXPECT_EQ(DeviceOf(*g, "full"), LocalCpu(3));
  EXPECT_EQ(DeviceOf(*g, "dev"), LocalCpu(2));
  EXPECT_EQ(DeviceOf(*g, "legacy"), LocalCpu(1));
  EXPECT_EQ(DeviceOf(*g, "job"), LocalCpu(0));
  EXPECT_EQ(DeviceOf(*g, "any_cpu"), LocalCpu(0));
}

TEST_F(PlacerTest, ColocatesThroughClassAttr) {
  GraphBuilder b;
  b.Const("a");
  b.Identity("pinned", "a", "/device:CPU:3");
  tensorflow::NodeDef* follower = b.Identity("follower", "a");
  SetAttr(follower, "_class", std::vector<std::string>{"loc:@pinned", "not-a-location"});
  std::unique_ptr<Graph> g = b.Build();
  ASSERT_TRUE(Place(g.get()).ok());
  EXPECT_EQ(DeviceOf(*g, "follower"), LocalCpu(3));
  EXPECT_EQ(DeviceOf(*g, "a"), LocalCpu(0));
}

// Pruning may remove the node named by "_class"; the constraint then lapses.
TEST_F(PlacerTest, ClassNamingMissingNodeIsIgnored) {
  GraphBuilder b;
  b.Const("a");
  SetAttr(b.Identity("i", "a", "/device:CPU:1"), "_class",
          std::vector<std::string>{"loc:@pruned_away"});
  std::unique_ptr<Graph> g = b.Build();
  ASSERT_TRUE(Place(g.get()).ok());
  EXPECT_EQ(DeviceOf(*g, "i"), LocalCpu(1));
}

// A resource variable on CPU:2: its readers follow it.
TEST_F(PlacerTest, ColocatesThroughResourceEdges) {
  GraphBuilder b;
  b.Node("var", "RtTestVarHandle", {}, "/device:CPU:2");
  SetAttr(b.Node("read", "RtTestReadVar", {"var"}), "dtype", DT_FLOAT);
  b.Identity("use", "read");
  std::unique_ptr<Graph> g = b.Build();
  ASSERT_TRUE(Place(g.get()).ok());
  EXPECT_EQ(DeviceOf(*g, "var"), LocalCpu(2));
  EXPECT_EQ(DeviceOf(*g, "read"), LocalCpu(2));
  EXPECT_EQ(DeviceOf(*g, "use"), LocalCpu(0));  // A plain edge does not colocate.
}

// An IdentityN (what a lowered While or If leaves under the call's name)
// forwards a resource without being pinned to it, as in TensorFlow: the
// loop's other results stay on the worker; a reader of the forwarded
// resource still runs beside the variable.
TEST_F(PlacerTest, IdentityNForwardsResourcesWithoutFollowingThem) {
  GraphBuilder b;
  b.Node("var", "RtTestVarHandle", {}, "/device:CPU:2");
  b.Const("state");
  tensorflow::NodeDef* out = b.Node("loop", "IdentityN", {"var", "state"}, "/device:CPU:1");
  SetAttr(out, "T", DataTypeVector{DT_RESOURCE, DT_FLOAT});
  SetAttr(b.Node("read", "RtTestReadVar", {"loop:0"}), "dtype", DT_FLOAT);
  std::unique_ptr<Graph> g = b.Build();
  absl::Status s = Place(g.get());
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(DeviceOf(*g, "loop"), LocalCpu(1));
  EXPECT_EQ(DeviceOf(*g, "read"), LocalCpu(2));
}

// The request of a reader also moves the variable.
TEST_F(PlacerTest, ColocationMergesRequestsFieldByField) {
  GraphBuilder b;
  b.Node("var", "RtTestVarHandle", {}, "/job:localhost");
  SetAttr(b.Node("read", "RtTestReadVar", {"var"}, "/device:CPU:1"), "dtype", DT_FLOAT);
  std::unique_ptr<Graph> g = b.Build();
  ASSERT_TRUE(Place(g.get()).ok());
  EXPECT_EQ(DeviceOf(*g, "var"), LocalCpu(1));
  EXPECT_EQ(DeviceOf(*g, "read"), LocalCpu(1));
}

TEST_F(PlacerTest, ColocatesRefVariableWithItsUpdatersOnly) {
  GraphBuilder b;
  SetAttr(b.Node("v", "RtTestRefVar", {}, "/device:CPU:1"), "dtype", DT_FLOAT);
  b.Const("one");
  b.Const("two");
  SetAttr(b.Node("assign", "RtTestAssign", {"v", "one"}), "T", DT_FLOAT);
  b.Add("read", "v", "two");  // Takes the value, not the reference.
  std::unique_ptr<Graph> g = b.Build();
  ASSERT_TRUE(Place(g.get()).ok());
  EXPECT_EQ(DeviceOf(*g, "assign"), LocalCpu(1));
  EXPECT_EQ(DeviceOf(*g, "read"), LocalCpu(0));
}

// As TensorFlow's placer: a resource (or ref) consumer whose request
// conflicts with its variable's device runs beside the variable instead
// ("Ignoring device specification ... because the input edge ... is a
// reference connection"); replica_device_setter graphs rely on it.
TEST_F(PlacerTest, ResourceConsumerFollowsItsVariableOverItsRequest) {
  GraphBuilder b;
  b.Node("var", "RtTestVarHandle", {}, "/device:CPU:2");
  SetAttr(b.Node("read", "RtTestReadVar", {"var"}, "/device:CPU:1"), "dtype", DT_FLOAT);
  std::unique_ptr<Graph> g = b.Build();
  absl::Status s = Place(g.get());
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(DeviceOf(*g, "var"), LocalCpu(2));
  EXPECT_EQ(DeviceOf(*g, "read"), LocalCpu(2));
}

TEST_F(PlacerTest, ConflictingJobsFailEvenWithSoftPlacement) {
  GraphBuilder b;
  b.Const("a", "/job:ps");
  SetAttr(b.Identity("i", "a", "/job:worker"), "_class", std::vector<std::string>{"loc:@a"});
  std::unique_ptr<Graph> g = b.Build();
  absl::Status s = Place(g.get(), /*soft=*/true);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'a'"));
  EXPECT_THAT(s.message(), HasSubstr("'i'"));
}

TEST_F(PlacerTest, GpuRequestFailsWithoutSoftPlacementAndFallsBackWithIt) {
  GraphBuilder b;
  b.Const("a");
  b.Identity("on_gpu", "a", "/device:GPU:0");
  std::unique_ptr<Graph> g = b.Build();
  absl::Status s = Place(g.get());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'on_gpu'"));
  EXPECT_THAT(s.message(), HasSubstr("/device:GPU:0"));
  EXPECT_THAT(s.message(), HasSubstr(LocalCpu(3)));  // Lists the available devices.

  ASSERT_TRUE(Place(g.get(), /*soft=*/true).ok());
  EXPECT_EQ(DeviceOf(*g, "on_gpu"), LocalCpu(0));
}

TEST_F(PlacerTest, MissingDeviceIdFailsUnlessSoft) {
  GraphBuilder b;
  b.Const("a");
  b.Identity("i", "a", "/device:CPU:7");
  std::unique_ptr<Graph> g = b.Build();
  EXPECT_EQ(Place(g.get()).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(Place(g.get(), /*soft=*/true).ok());
  EXPECT_EQ(DeviceOf(*g, "i"), LocalCpu(0));
}

TEST_F(PlacerTest, UnknownJobFailsEvenWithSoftPlacement) {
  GraphBuilder b;
  b.Const("a", "/job:ps");
  std::unique_ptr<Graph> g = b.Build();
  absl::Status s = Place(g.get(), /*soft=*/true);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'a'"));
  EXPECT_THAT(s.message(), HasSubstr("/job:ps"));
}

TEST_F(PlacerTest, MalformedDeviceFails) {
  GraphBuilder b;
  b.Const("a", "/gadget:0");
  std::unique_ptr<Graph> g = b.Build();
  absl::Status s = Place(g.get());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'a'"));
}

TEST_F(PlacerTest, OpWithoutKernelFails) {
  GraphBuilder b;
  b.Const("a");
  b.Node("nk", "RtTestNoKernel", {"a"});
  std::unique_ptr<Graph> g = b.Build();
  absl::Status s = Place(g.get(), /*soft=*/true);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'nk'"));
  EXPECT_THAT(s.message(), HasSubstr("kernel"));
}

// A Const feeding one consumer lives with it (TensorFlow's generator rule).
TEST_F(PlacerTest, GeneratorJoinsItsOnlyConsumer) {
  GraphBuilder b;
  b.Const("lone");
  b.Identity("i", "lone", "/device:CPU:3");
  b.Const("shared");
  b.Identity("j", "shared", "/device:CPU:3");
  b.Identity("k", "shared", "/device:CPU:2");
  std::unique_ptr<Graph> g = b.Build();
  ASSERT_TRUE(Place(g.get()).ok());
  EXPECT_EQ(DeviceOf(*g, "lone"), LocalCpu(3));
  EXPECT_EQ(DeviceOf(*g, "shared"), LocalCpu(0));
}

TEST_F(PlacerTest, KeepsAlreadyAssignedDevice) {
  GraphBuilder b;
  b.Const("a");
  b.Const("c");
  b.Add("sum", "a", "c");
  std::unique_ptr<Graph> g = b.Build();
  g->FindNode("sum")->set_assigned_device_name(LocalCpu(2));
  ASSERT_TRUE(Place(g.get()).ok());
  EXPECT_EQ(DeviceOf(*g, "sum"), LocalCpu(2));
}

TEST_F(PlacerTest, LogsPlacementToStderr) {
  GraphBuilder b;
  b.Const("a");
  b.Identity("i", "a", "/device:CPU:1");
  b.Identity("k", "a");
  std::unique_ptr<Graph> g = b.Build();
  ::testing::internal::CaptureStderr();
  ASSERT_TRUE(Place(g.get(), false, /*log=*/true).ok());
  std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(log, HasSubstr("i: (Identity): " + LocalCpu(1) + "\n"));
  EXPECT_THAT(log, HasSubstr("a: (Const): " + LocalCpu(0) + "\n"));
}

// A graph built by TensorFlow's Python (tests/data/gen_placement_reference.py)
// lands where TensorFlow's own placer put it.
TEST_F(PlacerTest, MatchesTensorFlowPlacement) {
  const std::string dir = TestDataDir() + "/placement/";
  std::ifstream graph_file(dir + "tf_graph.pbtxt");
  std::stringstream text;
  text << graph_file.rdbuf();
  tensorflow::GraphDef def;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(text.str(), &def));
  absl::StatusOr<std::unique_ptr<Graph>> g = Graph::FromGraphDef(def);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_TRUE(Place(g->get(), /*soft=*/true).ok());
  std::ifstream expected(dir + "tf_placement.txt");
  std::string node, device;
  int checked = 0;
  while (expected >> node >> device) {
    EXPECT_EQ(DeviceOf(**g, node), device) << node;
    ++checked;
  }
  EXPECT_EQ(checked, 8);
  // Without soft placement the GPU request of "w" fails.
  g = Graph::FromGraphDef(def);
  ASSERT_TRUE(g.ok());
  absl::Status s = Place(g->get(), /*soft=*/false);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'w'"));
}

// Devices across a small cluster, and a fake GPU.
class PlacerClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"/job:worker/replica:0/task:0/device:CPU:0",
                             "/job:worker/replica:0/task:0/device:GPU:0",
                             "/job:ps/replica:0/task:1/device:CPU:0",
                             "/job:ps/replica:0/task:0/device:CPU:0",
                             "/job:worker/replica:0/task:1/device:CPU:0"}) {
      devices_.push_back(MakeDevice(name));
    }
  }
  absl::Status Place(Graph* g, bool soft = false) {
    PlacerOptions opts;
    opts.allow_soft_placement = soft;
    return dflow::Place(g, Raw(devices_), devices_[0].get(), opts);
  }
  std::vector<std::unique_ptr<Device>> devices_;
};

TEST_F(PlacerClusterTest, PartialJobAndTaskSpecs) {
  GraphBuilder b;
  b.Node("v0", "RtTestVarHandle", {}, "/job:ps");
  b.Node("v1", "RtTestVarHandle", {}, "/job:ps/task:1");
  b.Node("w1", "RtTestVarHandle", {}, "/job:worker/task:1");
  b.Node("free", "RtTestVarHandle");
  std::unique_ptr<Graph> g = b.Build();
  ASSERT_TRUE(Place(g.get()).ok());
  EXPECT_EQ(g->FindNode("v0")->assigned_device_name(), "/job:ps/replica:0/task:0/device:CPU:0");
  EXPECT_EQ(g->FindNode("v1")->assigned_device_name(), "/job:ps/replica:0/task:1/device:CPU:0");
  EXPECT_EQ(g->FindNode("w1")->assigned_device_name(),
            "/job:worker/replica:0/task:1/device:CPU:0");
  EXPECT_EQ(g->FindNode("free")->assigned_device_name(),
            "/job:worker/replica:0/task:0/device:CPU:0");
}

TEST_F(PlacerClusterTest, PrefersGpuWhenTheOpHasAGpuKernel) {
  GraphBuilder b;
  b.Const("a");
  b.Const("c");
  b.Node("gpu_able", "RtTestGpuAble", {"a"});
  b.Node("cpu_only", "RtTestCpuOnly", {"c"});
  b.Node("forced", "RtTestGpuAble", {"a"}, "/device:CPU:0");
  std::unique_ptr<Graph> g = b.Build();
  ASSERT_TRUE(Place(g.get()).ok());
  EXPECT_EQ(g->FindNode("gpu_able")->assigned_device_name(),
            "/job:worker/replica:0/task:0/device:GPU:0");
  EXPECT_EQ(g->FindNode("cpu_only")->assigned_device_name(),
            "/job:worker/replica:0/task:0/device:CPU:0");
  EXPECT_EQ(g->FindNode("forced")->assigned_device_name(),
            "/job:worker/replica:0/task:0/device:CPU:0");
}

TEST_F(PlacerClusterTest, GpuRequestForCpuOnlyOpNeedsSoftPlacement) {
  GraphBuilder b;
  b.Const("a");
  b.Node("i", "RtTestCpuOnly", {"a"}, "/job:worker/device:GPU:0");
  std::unique_ptr<Graph> g = b.Build();
  absl::Status s = Place(g.get());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'i'"));
  EXPECT_THAT(s.message(), HasSubstr("GPU:0"));
  ASSERT_TRUE(Place(g.get(), /*soft=*/true).ok());
  EXPECT_EQ(g->FindNode("i")->assigned_device_name(),
            "/job:worker/replica:0/task:0/device:CPU:0");
}

TEST(PlacerNoDevicesTest, FailsWithoutDevices) {
  GraphBuilder b;
  b.Const("a");
  std::unique_ptr<Graph> g = b.Build();
  EXPECT_EQ(Place(g.get(), {}, nullptr, PlacerOptions()).code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace dflow
