#include "dflow/runtime/subgraph.h"

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "dflow/framework/attr_util.h"
#include "dflow/runtime/graph_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

using testing_util::GraphBuilder;
using testing_util::LocalCpu;
using testing_util::MakeDevice;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

// a, b consts; c = a + b; d = Identity(c); e = Identity(a); n = NoOp(^d);
// m = NoOp(^e).
class SubgraphTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GraphBuilder b;
    b.Const("a", LocalCpu(1));
    b.Const("b");
    b.Add("c", "a", "b");
    b.Identity("d", "c");
    b.Identity("e", "a");
    b.NoOp("n", {"^d"});
    b.NoOp("m", {"^e"});
    graph_ = b.Build();
    client_ = MakeDevice(LocalCpu(0));
  }

  absl::Status Rewrite(const std::vector<std::string>& feeds,
                       const std::vector<std::string>& fetches,
                       const std::vector<std::string>& targets) {
    return RewriteGraphForExecution(graph_.get(), feeds, fetches, targets, client_.get());
  }

  std::vector<std::string> Names() const {
    std::vector<std::string> out;
    for (Node* n : graph_->nodes()) out.push_back(n->name());
    return out;
  }

  // The single node of op `op`; fails the test otherwise.
  std::vector<Node*> NodesOf(const std::string& op) const {
    std::vector<Node*> out;
    for (Node* n : graph_->nodes()) {
      if (n->type_string() == op) out.push_back(n);
    }
    return out;
  }

  static int64_t Index(const Node* n) {
    int64_t i = -1;
    EXPECT_TRUE(GetNodeAttr(n->def(), "index", &i).ok());
    return i;
  }

  std::unique_ptr<Graph> graph_;
  std::unique_ptr<Device> client_;
};

TEST_F(SubgraphTest, FetchKeepsExactlyItsAncestors) {
  ASSERT_TRUE(Rewrite({}, {"d:0"}, {}).ok());
  std::vector<Node*> rets = NodesOf("_Retval");
  ASSERT_EQ(rets.size(), 1u);
  EXPECT_THAT(Names(), UnorderedElementsAre("a", "b", "c", "d", rets[0]->name()));
  EXPECT_EQ(Index(rets[0]), 0);
  DataType t;
  ASSERT_TRUE(GetNodeAttr(rets[0]->def(), "T", &t).ok());
  EXPECT_EQ(t, DT_FLOAT);
  EXPECT_EQ(rets[0]->assigned_device_name(), LocalCpu(0));
  EXPECT_EQ((*rets[0]->input_edge(0))->src->name(), "d");
  // The original nodes keep their requested devices.
  EXPECT_EQ(graph_->FindNode("a")->requested_device(), LocalCpu(1));
}

TEST_F(SubgraphTest, TargetsKeepControlAncestors) {
  ASSERT_TRUE(Rewrite({}, {}, {"n"}).ok());
  EXPECT_THAT(Names(), UnorderedElementsAre("a", "b", "c", "d", "n"));
}

TEST_F(SubgraphTest, FeedCutsTheProducersSubgraph) {
  ASSERT_TRUE(Rewrite({"c:0"}, {"d"}, {}).ok());
  std::vector<Node*> args = NodesOf("_Arg");
  std::vector<Node*> rets = NodesOf("_Retval");
  ASSERT_EQ(args.size(), 1u);
  ASSERT_EQ(rets.size(), 1u);
  EXPECT_THAT(Names(), UnorderedElementsAre("d", args[0]->name(), rets[0]->name()));
  EXPECT_EQ(Index(args[0]), 0);
  EXPECT_EQ(args[0]->assigned_device_name(), LocalCpu(0));
  EXPECT_EQ((*graph_->FindNode("d")->input_edge(0))->src, args[0]);
  EXPECT_THAT(graph_->FindNode("d")->def().input(), ElementsAre(args[0]->name()));
}

TEST_F(SubgraphTest, FedProducerStaysWhenSomethingElseNeedsIt) {
  // Every use of "a:0" now reads the feed, so "a" itself goes.
  ASSERT_TRUE(Rewrite({"a:0"}, {"c", "e"}, {}).ok());
  std::vector<Node*> args = NodesOf("_Arg");
  ASSERT_EQ(args.size(), 1u);
  std::set<std::string> names;
  for (const std::string& s : Names()) names.insert(s);
  EXPECT_FALSE(names.count("a"));
  EXPECT_TRUE(names.count("b"));
  EXPECT_EQ((*graph_->FindNode("c")->input_edge(0))->src, args[0]);
  EXPECT_EQ((*graph_->FindNode("e")->input_edge(0))->src, args[0]);

  // With a control edge from "a" the producer must stay.
  SetUp();
  Node* a = graph_->FindNode("a");
  graph_->AddControlEdge(a, graph_->FindNode("d"));
  ASSERT_TRUE(Rewrite({"a:0"}, {"d"}, {}).ok());
  ASSERT_NE(graph_->FindNode("a"), nullptr);
  EXPECT_TRUE(graph_->FindNode("a")->out_edges().size() == 1u);
}

TEST_F(SubgraphTest, FetchingAFedTensorReturnsTheFeed) {
  ASSERT_TRUE(Rewrite({"c"}, {"c:0"}, {}).ok());
  std::vector<Node*> args = NodesOf("_Arg");
  std::vector<Node*> rets = NodesOf("_Retval");
  ASSERT_EQ(args.size(), 1u);
  ASSERT_EQ(rets.size(), 1u);
  EXPECT_EQ((*rets[0]->input_edge(0))->src, args[0]);
  EXPECT_EQ(graph_->num_nodes(), 2);
}

TEST_F(SubgraphTest, IndicesFollowPositions) {
  ASSERT_TRUE(Rewrite({"b:0", "a:0"}, {"e", "d", "d:0"}, {"m"}).ok());
  std::vector<Node*> args = NodesOf("_Arg");
  std::vector<Node*> rets = NodesOf("_Retval");
  ASSERT_EQ(args.size(), 2u);
  ASSERT_EQ(rets.size(), 3u);
  std::vector<std::set<std::string>> arg_uses(2);
  std::vector<std::string> ret_srcs(3);
  for (Node* arg : args) {
    for (const Edge* e : arg->out_edges()) arg_uses[Index(arg)].insert(e->dst->name());
  }
  for (Node* ret : rets) ret_srcs[Index(ret)] = (*ret->input_edge(0))->src->name();
  EXPECT_THAT(arg_uses[0], ElementsAre("c"));       // b:0 feeds c's input 1,
  EXPECT_THAT(arg_uses[1], ElementsAre("c", "e"));  // a:0 feeds c's input 0 and e.
  EXPECT_THAT(ret_srcs, ElementsAre("e", "d", "d"));
  // The result is a valid graph.
  tensorflow::GraphDef out;
  graph_->ToGraphDef(&out);
  EXPECT_TRUE(Graph::FromGraphDef(out).ok());
}

// Node `name`'s control inputs, by name.
std::set<std::string> ControlInputs(const Graph& g, const std::string& name) {
  std::set<std::string> out;
  for (const Edge* e : g.FindNode(name)->in_edges()) {
    if (e->IsControlEdge()) out.insert(e->src->name());
  }
  return out;
}

TEST_F(SubgraphTest, WhatOnlyOrdersATargetBecomesANoOp) {
  // n waits for d = Identity(c), c = a + b: neither value is read, so neither is
  // computed; n still runs after both, and they after a and b.
  ASSERT_TRUE(Rewrite({}, {}, {"n"}).ok());
  EXPECT_THAT(Names(), UnorderedElementsAre("a", "b", "c", "d", "n"));
  EXPECT_EQ(graph_->FindNode("d")->type_string(), "NoOp");
  EXPECT_EQ(graph_->FindNode("c")->type_string(), "NoOp");
  EXPECT_EQ(graph_->FindNode("a")->type_string(), "Const");  // No inputs: nothing saved.
  EXPECT_EQ(graph_->FindNode("a")->requested_device(), LocalCpu(1));
  EXPECT_THAT(ControlInputs(*graph_, "n"), ElementsAre("d"));
  EXPECT_THAT(ControlInputs(*graph_, "d"), ElementsAre("c"));
  EXPECT_THAT(ControlInputs(*graph_, "c"), ElementsAre("a", "b"));
  tensorflow::GraphDef out;
  graph_->ToGraphDef(&out);
  EXPECT_TRUE(Graph::FromGraphDef(out).ok());
}

TEST_F(SubgraphTest, ReadValuesAndTargetsAreComputed) {
  // d is waited for by n but also fetched; c is read by d.
  ASSERT_TRUE(Rewrite({}, {"d"}, {"n"}).ok());
  EXPECT_EQ(graph_->FindNode("d")->type_string(), "Identity");
  EXPECT_EQ(graph_->FindNode("c")->type_string(), "RtTestAdd");
  // A target is run as itself even when nothing reads it.
  SetUp();
  ASSERT_TRUE(Rewrite({}, {}, {"d"}).ok());
  EXPECT_EQ(graph_->FindNode("d")->type_string(), "Identity");
}

TEST(SubgraphNoOpTest, StatefulReferenceTakingAndPivotNodesAreComputed) {
  GraphBuilder b;
  SetAttr(b.Node("v", "RtTestRefVar", {}), "dtype", DT_FLOAT);
  SetAttr(b.Node("assign", "RtTestAssign", {"v", "c"}), "T", DT_FLOAT);
  b.Const("c");
  b.Node("h", "RtTestVarHandle", {"^c"});
  // A branch's pivot: live only when the Switch's output 1 is.
  b.Const("pred", "", DT_BOOL);
  SetAttr(b.Node("sw", "Switch", {"c", "pred"}), "T", DT_FLOAT);
  b.Identity("pivot", "sw:1");
  b.NoOp("n", {"^assign", "^h", "^pivot"});
  std::unique_ptr<Graph> g = b.Build();
  ASSERT_NE(g, nullptr);
  ASSERT_TRUE(ReplaceUnreadComputationsWithNoOps(g.get(), {g->FindNode("n")}).ok());
  EXPECT_EQ(g->FindNode("assign")->type_string(), "RtTestAssign");
  EXPECT_EQ(g->FindNode("h")->type_string(), "RtTestVarHandle");
  EXPECT_EQ(g->FindNode("pivot")->type_string(), "Identity");
}

TEST_F(SubgraphTest, UnusedFeedIsPruned) {
  ASSERT_TRUE(Rewrite({"e:0"}, {"d"}, {}).ok());
  EXPECT_TRUE(NodesOf("_Arg").empty());
  EXPECT_EQ(graph_->FindNode("e"), nullptr);
}

TEST_F(SubgraphTest, UnknownNamesAreNotFound) {
  absl::Status s = Rewrite({}, {"y:0"}, {});
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("Fetch 'y:0' refers to no node"));
  s = Rewrite({"zz"}, {"d"}, {});
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("Feed 'zz'"));
  s = Rewrite({}, {"d"}, {"train"});
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("Target 'train'"));
  EXPECT_EQ(graph_->num_nodes(), 7);  // Nothing changed.
}

TEST_F(SubgraphTest, BadIndicesAndDuplicatesAreInvalid) {
  absl::Status s = Rewrite({}, {"d:1"}, {});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'d:1'"));
  EXPECT_EQ(Rewrite({"c:5"}, {"d"}, {}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Rewrite({}, {"d:x"}, {}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Rewrite({}, {"^d"}, {}).code(), absl::StatusCode::kInvalidArgument);
  s = Rewrite({"c", "c:0"}, {"d"}, {});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("more than once"));
}

TEST_F(SubgraphTest, NamesDoNotCollideWithUserNodes) {
  GraphBuilder b;
  b.Const("x");
  b.Identity("_retval_x_0_0", "x");
  graph_ = b.Build();
  ASSERT_TRUE(Rewrite({}, {"x:0", "_retval_x_0_0"}, {}).ok());
  EXPECT_EQ(NodesOf("_Retval").size(), 2u);
  EXPECT_EQ(graph_->FindNode("_retval_x_0_0")->type_string(), "Identity");
}

TEST(SubgraphPruneTest, RemovesUnreachableNodes) {
  GraphBuilder b;
  b.Const("a");
  b.Identity("i", "a");
  b.Identity("j", "a");
  std::unique_ptr<Graph> g = b.Build();
  PruneForReverseReachability(g.get(), {g->FindNode("i")});
  EXPECT_EQ(g->num_nodes(), 2);
  EXPECT_EQ(g->FindNode("j"), nullptr);
  EXPECT_EQ(g->FindNode("a")->out_edges().size(), 1u);
}

}  // namespace
}  // namespace dflow
