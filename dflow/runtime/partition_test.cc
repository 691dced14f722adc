#include "dflow/runtime/partition.h"

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "dflow/framework/attr_util.h"
#include "dflow/framework/device_name.h"
#include "dflow/runtime/control_flow.h"
#include "dflow/runtime/graph_test_util.h"
#include "dflow/runtime/placer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;
using testing_util::GraphBuilder;
using testing_util::LocalCpu;
using testing_util::MakeDevice;
using testing_util::Raw;

using Parts = std::map<std::string, tensorflow::GraphDef>;

std::string StrAttr(const tensorflow::NodeDef& n, const std::string& name) {
  std::string v;
  EXPECT_TRUE(GetNodeAttr(n, name, &v).ok()) << n.name() << " " << name;
  return v;
}

int64_t IntAttr(const tensorflow::NodeDef& n, const std::string& name) {
  int64_t v = -1;
  EXPECT_TRUE(GetNodeAttr(n, name, &v).ok()) << n.name() << " " << name;
  return v;
}

const tensorflow::NodeDef* Find(const tensorflow::GraphDef& g, const std::string& name) {
  for (const tensorflow::NodeDef& n : g.node()) {
    if (n.name() == name) return &n;
  }
  return nullptr;
}

std::vector<const tensorflow::NodeDef*> OfOp(const tensorflow::GraphDef& g,
                                             const std::string& op) {
  std::vector<const tensorflow::NodeDef*> out;
  for (const tensorflow::NodeDef& n : g.node()) {
    if (n.op() == op) out.push_back(&n);
  }
  return out;
}

struct Transfer {
  std::string from, to;  // Partition keys.
  const tensorflow::NodeDef* send;
  const tensorflow::NodeDef* recv;
};

// Pairs every _Recv with the one _Send of the same tensor_name; fails the
// test on an unmatched or duplicated one.
std::map<std::string, Transfer> Transfers(const Parts& parts) {
  std::map<std::string, Transfer> out;
  for (const auto& [loc, g] : parts) {
    for (const tensorflow::NodeDef* s : OfOp(g, "_Send")) {
      Transfer& t = out[StrAttr(*s, "tensor_name")];
      EXPECT_EQ(t.send, nullptr) << "two sends of " << StrAttr(*s, "tensor_name");
      t.send = s;
      t.from = loc;
    }
  }
  for (const auto& [loc, g] : parts) {
    for (const tensorflow::NodeDef* r : OfOp(g, "_Recv")) {
      auto it = out.find(StrAttr(*r, "tensor_name"));
      EXPECT_NE(it, out.end()) << "no send for " << r->name();
      if (it == out.end()) continue;
      EXPECT_EQ(it->second.recv, nullptr) << "two recvs of " << it->first;
      it->second.recv = r;
      it->second.to = loc;
    }
  }
  for (const auto& [name, t] : out) EXPECT_NE(t.recv, nullptr) << "no recv for " << name;
  return out;
}

uint64_t FakeIncarnation(const std::string& device) {
  return 1000 + DeviceName::Parse(device)->id;
}

// a on CPU:0, b on CPU:1; c = a + b and d = Identity(a) on CPU:2;
// e = Identity(c) and l = NoOp(^a) on CPU:0; f = a + a and n = NoOp(^c) on CPU:1.
class PartitionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GraphBuilder b;
    b.Const("a", "/device:CPU:0");
    b.Const("b", "/device:CPU:1");
    b.Add("c", "a", "b", "/device:CPU:2");
    b.Identity("d", "a", "/device:CPU:2");
    b.Identity("e", "c", "/device:CPU:0");
    b.NoOp("l", {"^a"}, "/device:CPU:0");
    b.Add("f", "a", "a", "/device:CPU:1");
    b.NoOp("n", {"^c"}, "/device:CPU:1");
    b.def().mutable_versions()->set_producer(1234);
    graph_ = b.Build();
    for (int i = 0; i < 3; ++i) devices_.push_back(MakeDevice(LocalCpu(i)));
    ASSERT_TRUE(Place(graph_.get(), Raw(devices_), devices_[0].get(), PlacerOptions()).ok());
    opts_.node_to_loc = [](const Node* n) { return n->assigned_device_name(); };
    opts_.get_incarnation = FakeIncarnation;
  }

  std::unique_ptr<Graph> graph_;
  std::vector<std::unique_ptr<Device>> devices_;
  PartitionOptions opts_;
};

TEST_F(PartitionTest, SplitsIntoOneValidGraphPerDevice) {
  absl::StatusOr<Parts> parts = Partition(*graph_, opts_);
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_EQ(parts->size(), 3u);
  for (int i = 0; i < 3; ++i) {
    const tensorflow::GraphDef& g = parts->at(LocalCpu(i));
    EXPECT_EQ(g.versions().producer(), 1234);
    for (const tensorflow::NodeDef& n : g.node()) EXPECT_EQ(n.device(), LocalCpu(i)) << n.name();
    absl::StatusOr<std::unique_ptr<Graph>> parsed = Graph::FromGraphDef(g);
    EXPECT_TRUE(parsed.ok()) << parsed.status();
  }
  EXPECT_NE(Find(parts->at(LocalCpu(0)), "a"), nullptr);
  EXPECT_NE(Find(parts->at(LocalCpu(2)), "c"), nullptr);
  EXPECT_EQ(Find(parts->at(LocalCpu(0)), "c"), nullptr);
  // A local control edge stays as it was.
  EXPECT_THAT(Find(parts->at(LocalCpu(0)), "l")->input(), ElementsAre("^a"));
}

TEST_F(PartitionTest, SendRecvPairsMatchWithDevicesAndIncarnations) {
  absl::StatusOr<Parts> parts = Partition(*graph_, opts_);
  ASSERT_TRUE(parts.ok());
  std::map<std::string, Transfer> transfers = Transfers(*parts);
  // a -> CPU:1, a -> CPU:2, b -> CPU:2, c -> CPU:0, and control c -> CPU:1.
  EXPECT_EQ(transfers.size(), 5u);
  std::set<std::pair<std::string, std::string>> routes;
  for (const auto& [name, t] : transfers) {
    ASSERT_NE(t.send, nullptr);
    ASSERT_NE(t.recv, nullptr);
    EXPECT_NE(t.from, t.to);
    EXPECT_TRUE(absl::StartsWith(name, "edge_")) << name;
    for (const tensorflow::NodeDef* n : {t.send, t.recv}) {
      EXPECT_EQ(StrAttr(*n, "send_device"), t.from);
      EXPECT_EQ(StrAttr(*n, "recv_device"), t.to);
      EXPECT_EQ(IntAttr(*n, "send_device_incarnation"),
                static_cast<int64_t>(FakeIncarnation(t.from)));
    }
    EXPECT_EQ(t.send->device(), t.from);
    EXPECT_EQ(t.recv->device(), t.to);
    DataType sent, received;
    ASSERT_TRUE(GetNodeAttr(*t.send, "T", &sent).ok());
    ASSERT_TRUE(GetNodeAttr(*t.recv, "tensor_type", &received).ok());
    EXPECT_EQ(sent, received);
    routes.emplace(t.from, t.to);
  }
  EXPECT_THAT(routes, UnorderedElementsAre(std::make_pair(LocalCpu(0), LocalCpu(1)),
                                           std::make_pair(LocalCpu(0), LocalCpu(2)),
                                           std::make_pair(LocalCpu(1), LocalCpu(2)),
                                           std::make_pair(LocalCpu(2), LocalCpu(0)),
                                           std::make_pair(LocalCpu(2), LocalCpu(1))));
}

TEST_F(PartitionTest, ConsumersAtOneDestinationShareOneRecv) {
  absl::StatusOr<Parts> parts = Partition(*graph_, opts_);
  ASSERT_TRUE(parts.ok());
  const tensorflow::GraphDef& cpu2 = parts->at(LocalCpu(2));
  const tensorflow::NodeDef* c = Find(cpu2, "c");
  const tensorflow::NodeDef* d = Find(cpu2, "d");
  ASSERT_EQ(c->input_size(), 2);
  EXPECT_EQ(c->input(0), d->input(0));  // Both read a through one _Recv.
  EXPECT_EQ(Find(cpu2, c->input(0))->op(), "_Recv");
  EXPECT_EQ(Find(cpu2, c->input(1))->op(), "_Recv");
  EXPECT_NE(c->input(0), c->input(1));
  const tensorflow::NodeDef* f = Find(parts->at(LocalCpu(1)), "f");
  EXPECT_EQ(f->input(0), f->input(1));
  EXPECT_EQ(OfOp(parts->at(LocalCpu(0)), "_Send").size(), 2u);  // a to CPU:1 and CPU:2.
}

TEST_F(PartitionTest, ControlEdgeTravelsAsADummyTensor) {
  absl::StatusOr<Parts> parts = Partition(*graph_, opts_);
  ASSERT_TRUE(parts.ok());
  const tensorflow::NodeDef* n = Find(parts->at(LocalCpu(1)), "n");
  ASSERT_EQ(n->input_size(), 1);
  ASSERT_TRUE(absl::StartsWith(n->input(0), "^"));
  const tensorflow::NodeDef* recv = Find(parts->at(LocalCpu(1)), n->input(0).substr(1));
  ASSERT_NE(recv, nullptr);
  EXPECT_EQ(recv->op(), "_Recv");
  // On CPU:2 a Const waits for c and is sent under the same name.
  const tensorflow::GraphDef& cpu2 = parts->at(LocalCpu(2));
  const tensorflow::NodeDef* send = nullptr;
  for (const tensorflow::NodeDef* s : OfOp(cpu2, "_Send")) {
    if (StrAttr(*s, "tensor_name") == StrAttr(*recv, "tensor_name")) send = s;
  }
  ASSERT_NE(send, nullptr);
  const tensorflow::NodeDef* dummy = Find(cpu2, send->input(0));
  ASSERT_NE(dummy, nullptr);
  EXPECT_EQ(dummy->op(), "Const");
  EXPECT_THAT(dummy->input(), ElementsAre("^c"));
  EXPECT_EQ(dummy->device(), LocalCpu(2));
}

// p waits for a and e, both on CPU:0: one dummy tensor carries both edges.
TEST_F(PartitionTest, ControlEdgesFromOneLocationToANodeTravelTogether) {
  GraphBuilder b;
  b.Const("a", "/device:CPU:0");
  b.Identity("e", "a", "/device:CPU:0");
  b.Const("x", "/device:CPU:2");
  b.NoOp("p", {"^a", "^e", "^x"}, "/device:CPU:1");
  std::unique_ptr<Graph> g = b.Build();
  ASSERT_TRUE(Place(g.get(), Raw(devices_), devices_[0].get(), PlacerOptions()).ok());
  absl::StatusOr<Parts> parts = Partition(*g, opts_);
  ASSERT_TRUE(parts.ok()) << parts.status();
  const tensorflow::NodeDef* p = Find(parts->at(LocalCpu(1)), "p");
  ASSERT_EQ(p->input_size(), 2);  // One from CPU:0, one from CPU:2.
  EXPECT_EQ(OfOp(parts->at(LocalCpu(1)), "_Recv").size(), 2u);
  const tensorflow::GraphDef& cpu0 = parts->at(LocalCpu(0));
  ASSERT_EQ(OfOp(cpu0, "_Send").size(), 1u);
  const tensorflow::NodeDef* dummy = Find(cpu0, OfOp(cpu0, "_Send")[0]->input(0));
  ASSERT_NE(dummy, nullptr);
  EXPECT_EQ(dummy->op(), "Const");
  EXPECT_THAT(dummy->input(), UnorderedElementsAre("^a", "^e"));
  EXPECT_EQ(Transfers(*parts).size(), 2u);
}

// SyncReplicasOptimizer's accumulators each wait for the worker's local step:
// one tensor carries that wait to all of them.
TEST_F(PartitionTest, NodesWaitingForTheSameControlInputsShareOneTransfer) {
  GraphBuilder b;
  b.Const("step", "/device:CPU:0");
  b.Const("other", "/device:CPU:0");
  b.NoOp("apply_a", {"^step"}, "/device:CPU:1");
  b.NoOp("apply_b", {"^step"}, "/device:CPU:1");
  b.NoOp("apply_c", {"^step"}, "/device:CPU:1");
  b.NoOp("both", {"^step", "^other"}, "/device:CPU:1");
  b.NoOp("both_again", {"^other", "^step"}, "/device:CPU:1");
  std::unique_ptr<Graph> g = b.Build();
  ASSERT_TRUE(Place(g.get(), Raw(devices_), devices_[0].get(), PlacerOptions()).ok());
  absl::StatusOr<Parts> parts = Partition(*g, opts_);
  ASSERT_TRUE(parts.ok()) << parts.status();
  // Two sets ({step} and {step, other}): two transfers, not five.
  EXPECT_EQ(Transfers(*parts).size(), 2u);
  const tensorflow::GraphDef& cpu1 = parts->at(LocalCpu(1));
  ASSERT_EQ(OfOp(cpu1, "_Recv").size(), 2u);
  EXPECT_EQ(Find(cpu1, "apply_a")->input(0), Find(cpu1, "apply_c")->input(0));
  EXPECT_EQ(Find(cpu1, "both")->input(0), Find(cpu1, "both_again")->input(0));
  EXPECT_NE(Find(cpu1, "apply_a")->input(0), Find(cpu1, "both")->input(0));
  for (const char* name : {"apply_a", "apply_b", "apply_c", "both", "both_again"}) {
    EXPECT_EQ(Find(cpu1, name)->input_size(), 1) << name;
  }
}

TEST_F(PartitionTest, UsesTheGivenNameGenerator) {
  int counter = 0;
  opts_.new_name = [&counter](const std::string& prefix) {
    return prefix + "/custom_" + std::to_string(counter++);
  };
  absl::StatusOr<Parts> parts = Partition(*graph_, opts_);
  ASSERT_TRUE(parts.ok());
  EXPECT_EQ(counter, 11);  // 5 sends, 5 recvs, 1 dummy const.
  for (const auto& [loc, g] : *parts) {
    for (const tensorflow::NodeDef* r : OfOp(g, "_Recv")) {
      EXPECT_THAT(r->name(), HasSubstr("/custom_"));
    }
  }
}

TEST_F(PartitionTest, PartitionsByTask) {
  std::vector<std::unique_ptr<Device>> devices;
  devices.push_back(MakeDevice("/job:worker/replica:0/task:0/device:CPU:0"));
  devices.push_back(MakeDevice("/job:worker/replica:0/task:0/device:CPU:1"));
  devices.push_back(MakeDevice("/job:ps/replica:0/task:0/device:CPU:0"));
  GraphBuilder b;
  b.Const("w", "/job:ps");
  b.Const("x", "/job:worker/device:CPU:1");
  b.Add("y", "w", "x", "/job:worker/device:CPU:0");
  std::unique_ptr<Graph> g = b.Build();
  ASSERT_TRUE(Place(g.get(), Raw(devices), devices[0].get(), PlacerOptions()).ok());
  opts_.node_to_loc = [](const Node* n) {
    return DeviceName::Parse(n->assigned_device_name())->TaskName();
  };
  absl::StatusOr<Parts> parts = Partition(*g, opts_);
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_EQ(parts->size(), 2u);
  const tensorflow::GraphDef& worker = parts->at("/job:worker/replica:0/task:0");
  // x -> y stays inside the task; only w crosses.
  EXPECT_EQ(Find(worker, "y")->input(1), "x");
  std::map<std::string, Transfer> transfers = Transfers(*parts);
  ASSERT_EQ(transfers.size(), 1u);
  const Transfer& t = transfers.begin()->second;
  EXPECT_EQ(StrAttr(*t.recv, "send_device"), "/job:ps/replica:0/task:0/device:CPU:0");
  EXPECT_EQ(StrAttr(*t.recv, "recv_device"), "/job:worker/replica:0/task:0/device:CPU:0");
  EXPECT_EQ(t.recv->device(), "/job:worker/replica:0/task:0/device:CPU:0");
  EXPECT_EQ(Find(worker, "x")->device(), "/job:worker/replica:0/task:0/device:CPU:1");
}

// An optimizer's update group on the worker, between ps-side updates and the
// ps-side global step increment, relays on the ps instead, and worker-side
// hyperparameter constants only the ps reads are made there: no cut edge left.
TEST_F(PartitionTest, RelaysAndConstantsServingOneOtherTaskMoveThere) {
  std::vector<std::unique_ptr<Device>> devices;
  devices.push_back(MakeDevice("/job:worker/replica:0/task:0/device:CPU:0"));
  devices.push_back(MakeDevice("/job:ps/replica:0/task:0/device:CPU:0"));
  devices.push_back(MakeDevice("/job:ps/replica:0/task:1/device:CPU:0"));
  GraphBuilder b;
  b.Const("lr", "/job:worker");                                   // Read by ps:0 only: moves.
  b.Identity("apply_w", "lr", "/job:ps/task:0");
  b.Identity("apply_b", "lr", "/job:ps/task:0");
  b.NoOp("update", {"^apply_w", "^apply_b"}, "/job:worker");      // Relays ps:0 -> ps:0.
  b.NoOp("step", {"^update"}, "/job:ps/task:0");
  b.NoOp("train", {"^apply_w"}, "/job:worker");                   // A target: relays too.
  b.Const("other", "/job:ps/task:1");                             // Control only: stays.
  b.NoOp("mixed", {"^apply_w", "^other"}, "/job:worker");         // Two tasks: stays.
  b.NoOp("fans_out", {"^apply_w"}, "/job:worker");
  b.Const("worker_side", "/job:worker");
  b.NoOp("after", {"^fans_out", "^worker_side"}, "/job:worker");  // fans_out feeds the worker.
  b.Identity("not_a_noop", "apply_w", "/job:worker");
  b.NoOp("local", {"^worker_side"}, "/job:worker");               // Already home.
  b.Const("shared", "/job:worker");                               // Read on both tasks: stays.
  b.Identity("ps_reads", "shared", "/job:ps/task:0");
  b.Identity("worker_reads", "shared", "/job:worker");
  b.Const("ordered", "/job:worker")->add_input("^worker_side");   // Ordered there: stays.
  b.Identity("ps_reads_ordered", "ordered", "/job:ps/task:0");
  std::unique_ptr<Graph> g = b.Build();
  ASSERT_TRUE(Place(g.get(), Raw(devices), devices[0].get(), PlacerOptions()).ok());
  auto task = [](const Node* n) { return DeviceName::Parse(n->assigned_device_name())->TaskName(); };
  EXPECT_EQ(ColocateRelaysAndConstants(g.get(), task), 3);
  const std::string ps0 = "/job:ps/replica:0/task:0/device:CPU:0";
  const std::string worker = "/job:worker/replica:0/task:0/device:CPU:0";
  for (const char* moved : {"lr", "update", "train"}) {
    EXPECT_EQ(g->FindNode(moved)->assigned_device_name(), ps0) << moved;
  }
  for (const char* stays :
       {"mixed", "fans_out", "after", "not_a_noop", "local", "shared", "ordered"}) {
    EXPECT_EQ(g->FindNode(stays)->assigned_device_name(), worker) << stays;
  }
  opts_.node_to_loc = task;
  absl::StatusOr<Parts> parts = Partition(*g, opts_);
  ASSERT_TRUE(parts.ok()) << parts.status();
  // lr -> apply_w and update -> step stay inside ps:0.
  const tensorflow::GraphDef& ps = parts->at("/job:ps/replica:0/task:0");
  EXPECT_THAT(Find(ps, "apply_w")->input(), ElementsAre("lr"));
  EXPECT_THAT(Find(ps, "step")->input(), UnorderedElementsAre("^update"));
}

TEST_F(PartitionTest, DefaultsNeedOnlyAssignedDevices) {
  absl::StatusOr<Parts> parts = Partition(*graph_, PartitionOptions());
  ASSERT_TRUE(parts.ok()) << parts.status();
  EXPECT_EQ(parts->size(), 3u);
  std::set<std::string> names;
  for (const auto& [loc, g] : *parts) {
    for (const tensorflow::NodeDef& n : g.node()) {
      EXPECT_TRUE(names.insert(n.name()).second) << "duplicate " << n.name();
      bool made = n.op() == "_Send" || n.op() == "_Recv" || absl::StrContains(n.name(), "/_");
      EXPECT_EQ(graph_->FindNode(n.name()) == nullptr, made) << n.name();
    }
  }
}

TEST_F(PartitionTest, UnplacedNodeFails) {
  GraphBuilder b;
  b.Const("a");
  std::unique_ptr<Graph> g = b.Build();
  absl::Status s = Partition(*g, PartitionOptions()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'a'"));
}

TEST_F(PartitionTest, RefEdgeAcrossLocationsFails) {
  GraphBuilder b;
  SetAttr(b.Node("v", "RtTestRefVar"), "dtype", DT_FLOAT);
  b.Const("one");
  SetAttr(b.Node("assign", "RtTestAssign", {"v", "one"}), "T", DT_FLOAT);
  std::unique_ptr<Graph> g = b.Build();
  g->FindNode("v")->set_assigned_device_name(LocalCpu(0));
  g->FindNode("one")->set_assigned_device_name(LocalCpu(1));
  g->FindNode("assign")->set_assigned_device_name(LocalCpu(1));
  absl::Status s = Partition(*g, PartitionOptions()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'assign'"));
  EXPECT_THAT(s.message(), HasSubstr("'v'"));
}

TEST_F(PartitionTest, LoopAcrossLocationsNeedsItsControlLoops) {
  GraphBuilder b;
  b.Const("a");
  tensorflow::NodeDef* enter = b.Node("enter", "Enter", {"a"});
  SetAttr(enter, "T", DT_FLOAT);
  SetAttr(enter, "frame_name", std::string("while/ctx"));
  b.Identity("body", "enter");
  SetAttr(b.Node("exit", "Exit", {"body"}), "T", DT_FLOAT);
  b.Identity("after", "exit");
  std::unique_ptr<Graph> g = b.Build();
  for (const char* n : {"a", "enter", "exit", "after"}) {
    g->FindNode(n)->set_assigned_device_name(LocalCpu(0));
  }
  g->FindNode("body")->set_assigned_device_name(LocalCpu(1));
  // Cut inside the frame, without a control loop on CPU:1: refused.
  absl::Status s = Partition(*g, PartitionOptions()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("'while/ctx'"));
  EXPECT_THAT(s.message(), HasSubstr("'body'"));
  EXPECT_THAT(s.message(), HasSubstr("AddControlLoops"));
  // A control loop needs the frame's LoopCond, which this frame lacks.
  s = AddControlLoops(g.get());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("'while/ctx'"));
  EXPECT_THAT(s.message(), HasSubstr("LoopCond"));
  // Edges into the loop's Enter and out of its Exit may cross devices.
  g->FindNode("body")->set_assigned_device_name(LocalCpu(0));
  g->FindNode("a")->set_assigned_device_name(LocalCpu(1));
  g->FindNode("after")->set_assigned_device_name(LocalCpu(1));
  EXPECT_TRUE(Partition(*g, PartitionOptions()).ok());
}

}  // namespace
}  // namespace dflow
