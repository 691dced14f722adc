#include "dflow/runtime/graph.h"

#include <algorithm>
#include <string>
#include <vector>

#include "dflow/framework/kernel.h"
#include "dflow/framework/op_def.h"
#include "dflow/runtime/graph_test_util.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"

namespace dflow {

// --- test-only ops shared by the graph, placer, subgraph and partition tests

class RtTestKernel : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override { return absl::OkStatus(); }
};

REGISTER_OP("RtTestAdd").Input("a: T").Input("b: T").Output("z: T").Attr(
    "T: {float, double, int32, int64}");
REGISTER_KERNEL(KernelDefBuilder("RtTestAdd").Device(kDeviceCPU), RtTestKernel);

REGISTER_OP("RtTestGpuAble").Input("x: float").Output("y: float");
REGISTER_KERNEL(KernelDefBuilder("RtTestGpuAble").Device(kDeviceCPU), RtTestKernel);
REGISTER_KERNEL(KernelDefBuilder("RtTestGpuAble").Device(kDeviceGPU), RtTestKernel);

REGISTER_OP("RtTestCpuOnly").Input("x: float").Output("y: float");
REGISTER_KERNEL(KernelDefBuilder("RtTestCpuOnly").Device(kDeviceCPU), RtTestKernel);

REGISTER_OP("RtTestVarHandle").Output("resource: resource").SetIsStateful();
REGISTER_KERNEL(KernelDefBuilder("RtTestVarHandle").Device(kDeviceCPU), RtTestKernel);

REGISTER_OP("RtTestReadVar").Input("resource: resource").Output("value: dtype").Attr(
    "dtype: type");
REGISTER_KERNEL(KernelDefBuilder("RtTestReadVar").Device(kDeviceCPU), RtTestKernel);

REGISTER_OP("RtTestRefVar").Output("ref: Ref(dtype)").Attr("dtype: type").SetIsStateful();
REGISTER_KERNEL(KernelDefBuilder("RtTestRefVar").Device(kDeviceCPU), RtTestKernel);

REGISTER_OP("RtTestAssign").Input("ref: Ref(T)").Input("value: T").Output("out: Ref(T)").Attr(
    "T: type");
REGISTER_KERNEL(KernelDefBuilder("RtTestAssign").Device(kDeviceCPU), RtTestKernel);

REGISTER_OP("RtTestNoKernel").Input("x: float").Output("y: float");

namespace {

using testing_util::GraphBuilder;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> Inputs(const Node* n) {
  return {n->def().input().begin(), n->def().input().end()};
}

// a, b consts; c = a + b; d = Identity(c); n = NoOp(^d).
GraphBuilder Diamond() {
  GraphBuilder b;
  b.Const("a");
  b.Const("b");
  b.Add("c", "a:0", "b");
  b.Identity("d", "c");
  b.NoOp("n", {"^d"});
  return b;
}

absl::Status BuildError(GraphBuilder& b) { return Graph::FromGraphDef(b.def()).status(); }

TEST(GraphTest, BuildsNodesEdgesAndTypes) {
  GraphBuilder b = Diamond();
  b.def().mutable_versions()->set_producer(27);
  std::unique_ptr<Graph> g = b.Build();
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->num_nodes(), 5);
  Node* c = g->FindNode("c");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->type_string(), "RtTestAdd");
  EXPECT_THAT(c->input_types(), ElementsAre(DT_FLOAT, DT_FLOAT));
  EXPECT_THAT(c->output_types(), ElementsAre(DT_FLOAT));
  absl::StatusOr<const Edge*> e1 = c->input_edge(1);
  ASSERT_TRUE(e1.ok());
  EXPECT_EQ((*e1)->src->name(), "b");
  EXPECT_FALSE(c->input_edge(2).ok());
  Node* n = g->FindNode("n");
  ASSERT_EQ(n->in_edges().size(), 1u);
  EXPECT_TRUE(n->in_edges()[0]->IsControlEdge());
  EXPECT_EQ(g->FindNode("missing"), nullptr);
  EXPECT_EQ(g->versions().producer(), 27);
  // The NodeDef's inputs are rebuilt canonically ("a:0" -> "a").
  EXPECT_THAT(Inputs(c), ElementsAre("a", "b"));
}

TEST(GraphTest, ToGraphDefRoundTripsAndPrefersAssignedDevice) {
  GraphBuilder b = Diamond();
  b.def().mutable_node(0)->set_device("/cpu:0");
  std::unique_ptr<Graph> g = b.Build();
  g->FindNode("b")->set_assigned_device_name("/job:localhost/replica:0/task:0/device:CPU:1");
  tensorflow::GraphDef out;
  g->ToGraphDef(&out);
  ASSERT_EQ(out.node_size(), 5);
  EXPECT_EQ(out.node(0).device(), "/cpu:0");
  EXPECT_EQ(out.node(1).device(), "/job:localhost/replica:0/task:0/device:CPU:1");
  EXPECT_THAT(out.node(4).input(), ElementsAre("^d"));
  // Defaults were added and the result parses again.
  absl::StatusOr<std::unique_ptr<Graph>> again = Graph::FromGraphDef(out);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ((*again)->num_nodes(), 5);
}

TEST(GraphTest, AddsDefaultAttrs) {
  GraphBuilder b;
  SetAttr(b.Node("p", "Placeholder"), "dtype", DT_FLOAT);
  std::unique_ptr<Graph> g = b.Build();
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(HasNodeAttr(g->FindNode("p")->def(), "shape"));
}

TEST(GraphTest, RejectsDuplicateNames) {
  GraphBuilder b = Diamond();
  b.Const("c");
  absl::Status s = BuildError(b);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("duplicate node name 'c'"));
}

TEST(GraphTest, RejectsUnknownOpNamingNodeAndOp) {
  GraphBuilder b = Diamond();
  b.Node("weird", "NoSuchOp", {"a"});
  absl::Status s = BuildError(b);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("NoSuchOp (1 node: weird)"));
}

// Every unsupported op at once, with its count and nodes, not only the first.
TEST(GraphTest, ListsEveryUnknownOpWithItsNodes) {
  GraphBuilder b = Diamond();
  b.Node("summary_a", "NoSuchSummary", {"a"});
  b.Node("recip", "NoSuchReciprocal", {"a"});
  b.Node("summary_b", "NoSuchSummary", {"b"});
  absl::Status s = BuildError(b);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(),
              HasSubstr("2 ops dflow does not support: NoSuchSummary (2 nodes: summary_a, "
                        "summary_b), NoSuchReciprocal (1 node: recip)"));

  tensorflow::GraphDef def = b.def();
  tensorflow::FunctionDef* f = def.mutable_library()->add_function();
  f->mutable_signature()->set_name("body");
  f->add_node_def()->set_op("NoSuchInFunction");
  f->mutable_node_def(0)->set_name("n");
  // A node calling a library function by its name: dflow has no such call.
  def.add_node()->set_op("body");
  def.mutable_node(def.node_size() - 1)->set_name("call");
  const std::vector<UnsupportedOp> all = UnsupportedOps(def, /*functions=*/true);
  ASSERT_EQ(all.size(), 4);
  EXPECT_EQ(all[2].op, "body");
  EXPECT_EQ(all[3].op, "NoSuchInFunction");
  EXPECT_EQ(all[3].nodes, std::vector<std::string>{"body/n"});
  EXPECT_EQ(UnsupportedOps(def, /*functions=*/false).size(), 3);
}

TEST(GraphTest, RejectsMissingAttrNamingNodeAndAttr) {
  GraphBuilder b;
  b.Node("k", "Identity", {})->set_op("Const");  // Const without dtype or value.
  absl::Status s = BuildError(b);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'k'"));
  EXPECT_THAT(s.message(), HasSubstr("value"));
}

TEST(GraphTest, RejectsMistypedAttr) {
  GraphBuilder b;
  b.Const("a");
  tensorflow::NodeDef* id = b.Identity("i", "a");
  (*id->mutable_attr())["T"].set_i(3);  // An int where a type belongs.
  absl::Status s = BuildError(b);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'i'"));
  EXPECT_THAT(s.message(), HasSubstr("'T'"));
}

TEST(GraphTest, RejectsDisallowedAttrType) {
  GraphBuilder b;
  b.Const("a", "", DT_STRING);
  tensorflow::NodeDef* add = b.Add("s", "a", "a");
  SetAttr(add, "T", DT_STRING);  // RtTestAdd allows numbers only.
  absl::Status s = BuildError(b);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'s'"));
}

TEST(GraphTest, RejectsInputNamingMissingNode) {
  GraphBuilder b = Diamond();
  b.Identity("e", "ghost:0");
  absl::Status s = BuildError(b);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'e'"));
  EXPECT_THAT(s.message(), HasSubstr("'ghost'"));
}

TEST(GraphTest, RejectsMissingControlInputNode) {
  GraphBuilder b = Diamond();
  b.NoOp("m", {"^ghost"});
  absl::Status s = BuildError(b);
  EXPECT_THAT(s.message(), HasSubstr("'m'"));
  EXPECT_THAT(s.message(), HasSubstr("'ghost'"));
}

TEST(GraphTest, RejectsOutputIndexOutOfRange) {
  GraphBuilder b = Diamond();
  b.Identity("e", "c:1");
  absl::Status s = BuildError(b);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'e'"));
  EXPECT_THAT(s.message(), HasSubstr("output 1 of node 'c'"));
}

TEST(GraphTest, RejectsMalformedInputName) {
  GraphBuilder b = Diamond();
  b.Identity("e", "c:x");
  absl::Status s = BuildError(b);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'e'"));
  EXPECT_THAT(s.message(), HasSubstr("c:x"));
}

TEST(GraphTest, RejectsWrongInputCount) {
  GraphBuilder b = Diamond();
  b.Node("e", "RtTestAdd", {"a"});
  SetAttr(b.def().mutable_node(5), "T", DT_FLOAT);
  absl::Status s = BuildError(b);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'e'"));
}

TEST(GraphTest, RejectsDtypeMismatch) {
  GraphBuilder b;
  b.Const("i", "", DT_INT32);
  b.Const("f");
  b.Add("sum", "f", "i");
  absl::Status s = BuildError(b);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'sum'"));
  EXPECT_THAT(s.message(), HasSubstr("expects float"));
  EXPECT_THAT(s.message(), HasSubstr("int32"));
}

TEST(GraphTest, RefOutputFeedsPlainInputButNotTheReverse) {
  GraphBuilder ok;
  SetAttr(ok.Node("v", "RtTestRefVar"), "dtype", DT_FLOAT);
  ok.Const("one");
  ok.Identity("read", "v");  // float_ref -> float: allowed.
  SetAttr(ok.Node("assign", "RtTestAssign", {"v", "one"}), "T", DT_FLOAT);
  std::unique_ptr<Graph> g = ok.Build();
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->FindNode("v")->output_type(0), MakeRefType(DT_FLOAT));

  GraphBuilder bad;
  bad.Const("one");
  SetAttr(bad.Node("assign", "RtTestAssign", {"one", "one"}), "T", DT_FLOAT);
  absl::Status s = BuildError(bad);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'assign'"));
  EXPECT_THAT(s.message(), HasSubstr("float_ref"));
}

TEST(GraphTest, RejectsDataInputAfterControlInput) {
  GraphBuilder b;
  b.Const("a");
  b.Node("i", "Identity", {"^a", "a"});
  SetAttr(b.def().mutable_node(1), "T", DT_FLOAT);
  absl::Status s = BuildError(b);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'i'"));
  EXPECT_THAT(s.message(), HasSubstr("control input"));
}

TEST(GraphTest, RejectsCycleNamingANodeOnIt) {
  GraphBuilder b;
  b.Const("a");
  b.Identity("after", "x");  // Downstream of the cycle, not on it.
  b.Add("x", "a", "y");
  b.Identity("y", "x");
  absl::Status s = BuildError(b);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("cycle"));
  EXPECT_THAT(s.message(), ::testing::AnyOf(HasSubstr("'x'"), HasSubstr("'y'")));
  EXPECT_THAT(s.message(), ::testing::Not(HasSubstr("'after'")));
}

TEST(GraphTest, RejectsControlCycle) {
  GraphBuilder b;
  b.NoOp("p", {"^q"});
  b.NoOp("q", {"^p"});
  EXPECT_EQ(BuildError(b).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(GraphTest, TopologicalOrderPutsInputsFirst) {
  GraphBuilder b;
  b.NoOp("n", {"^d"});
  b.Identity("d", "c");
  b.Add("c", "a", "b");
  b.Const("b");
  b.Const("a");
  std::unique_ptr<Graph> g = b.Build();
  ASSERT_NE(g, nullptr);
  absl::StatusOr<std::vector<Node*>> order = g->TopologicalOrder();
  ASSERT_TRUE(order.ok());
  ASSERT_EQ(order->size(), 5u);
  std::vector<int> pos(g->num_node_ids());
  for (size_t i = 0; i < order->size(); ++i) pos[(*order)[i]->id()] = static_cast<int>(i);
  for (Node* n : g->nodes()) {
    for (const Edge* e : n->in_edges()) EXPECT_LT(pos[e->src->id()], pos[n->id()]);
  }
}

TEST(GraphTest, EditsKeepNodeDefInputsInSync) {
  std::unique_ptr<Graph> g = Diamond().Build();
  Node* c = g->FindNode("c");
  Node* a = g->FindNode("a");
  Node* b = g->FindNode("b");
  ASSERT_TRUE(c->input_edge(0).ok());
  g->RemoveEdge(*c->input_edge(0));
  g->AddControlEdge(b, c);
  g->AddEdge(b, 0, c, 0);  // Added after a control edge: inputs are re-sorted.
  EXPECT_THAT(Inputs(c), ElementsAre("b", "b", "^b"));
  g->RemoveNode(b);
  EXPECT_EQ(g->FindNode("b"), nullptr);
  EXPECT_EQ(g->num_nodes(), 4);
  EXPECT_TRUE(c->in_edges().empty());
  EXPECT_TRUE(Inputs(c).empty());
  EXPECT_EQ(a->out_edges().size(), 0u);
  std::vector<std::string> names;
  for (Node* n : g->nodes()) names.push_back(n->name());
  EXPECT_THAT(names, ElementsAre("a", "c", "d", "n"));
}

TEST(GraphTest, AddNodeValidatesAndIgnoresInputs) {
  Graph g;
  tensorflow::NodeDef def;
  def.set_name("r");
  def.set_op("_Retval");
  def.add_input("whatever:3");
  SetAttr(&def, "T", DT_FLOAT);
  SetAttr(&def, "index", int64_t{0});
  absl::StatusOr<Node*> r = g.AddNode(def);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->num_inputs(), 1);
  EXPECT_TRUE(Inputs(*r).empty());
  EXPECT_FALSE(g.AddNode(def).ok());  // Duplicate name.
  def.set_name("r2");
  SetAttr(&def, "index", int64_t{-1});  // index: int >= 0.
  absl::Status s = g.AddNode(def).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'r2'"));
}

TEST(GraphTest, CloneCopiesNodesEdgesAndDevices) {
  std::unique_ptr<Graph> g = Diamond().Build();
  g->RemoveNode(g->FindNode("a"));  // Leaves a hole in the ids.
  g->FindNode("d")->set_assigned_device_name("/job:w/replica:0/task:0/device:CPU:0");
  std::unique_ptr<Graph> c = g->Clone();
  tensorflow::GraphDef x, y;
  g->ToGraphDef(&x);
  c->ToGraphDef(&y);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(x, y))
      << x.DebugString() << "\nvs\n" << y.DebugString();
  EXPECT_EQ(c->FindNode("d")->assigned_device_name(), "/job:w/replica:0/task:0/device:CPU:0");
}

TEST(GraphTest, ParseTensorName) {
  std::string node;
  int index = 7;
  ASSERT_TRUE(ParseTensorName("x", &node, &index).ok());
  EXPECT_EQ(node, "x");
  EXPECT_EQ(index, 0);
  ASSERT_TRUE(ParseTensorName("scope/x:12", &node, &index).ok());
  EXPECT_EQ(node, "scope/x");
  EXPECT_EQ(index, 12);
  ASSERT_TRUE(ParseTensorName("^ctl", &node, &index).ok());
  EXPECT_EQ(node, "ctl");
  EXPECT_EQ(index, kControlSlot);
  for (const char* bad : {"", ":1", "x:", "x:-1", "x:a", "^", "^x:1", "a:b:1"}) {
    EXPECT_EQ(ParseTensorName(bad, &node, &index).code(), absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

}  // namespace
}  // namespace dflow
