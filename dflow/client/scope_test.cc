#include "dflow/client/scope.h"

#include "dflow/client/graph_io.h"
#include "dflow/client/ops.h"
#include "dflow/framework/attr_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

const tensorflow::NodeDef* FindNode(const Scope& s, const std::string& name) {
  for (const auto& n : s.graph_def().node()) {
    if (n.name() == name) return &n;
  }
  return nullptr;
}

TEST(ScopeTest, NamesAreScopedAndUniquified) {
  Scope root = Scope::NewRootScope();
  Scope layer = root.NewSubScope("layer");
  Output a = ops::Const(layer, 1.0f);
  Output b = ops::Const(layer, 2.0f);
  Output c = ops::Add(layer.WithOpName("sum"), a, b);
  Output d = ops::Add(layer.WithOpName("sum"), c, b);
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(a.node_name(), "layer/Const");
  EXPECT_EQ(b.node_name(), "layer/Const_1");
  EXPECT_EQ(c.node_name(), "layer/sum");
  EXPECT_EQ(d.node_name(), "layer/sum_1");
  EXPECT_EQ(root.NewSubScope("layer").NewSubScope("x").GetUniqueNameForOp("Op"), "layer_1/x/Op");
}

TEST(ScopeTest, TypeAttrsComeFromInputs) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_DOUBLE);
  Output y = ops::Mul(root.WithOpName("y"), x, x);
  Output n = ops::AddN(root.WithOpName("n"), {x, y, x});
  ASSERT_TRUE(root.ok()) << root.status();
  DataType t;
  ASSERT_TRUE(GetNodeAttr(*FindNode(root, "y"), "T", &t).ok());
  EXPECT_EQ(t, DT_DOUBLE);
  int64_t count;
  ASSERT_TRUE(GetNodeAttr(*FindNode(root, "n"), "N", &count).ok());
  EXPECT_EQ(count, 3);
  EXPECT_EQ(y.type(), DT_DOUBLE);
}

TEST(ScopeTest, DevicesControlDepsAndColocation) {
  Scope root = Scope::NewRootScope();
  Output a = ops::Const(root.WithOpName("a").WithDevice("/job:ps/task:0"), 1.0f);
  Operation init = ops::NoOp(root.WithOpName("init"));
  Output b = ops::Identity(root.WithOpName("b").WithControlDependencies({init}).ColocateWith(a), a);
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(FindNode(root, "a")->device(), "/job:ps/task:0");
  const tensorflow::NodeDef* nb = FindNode(root, "b");
  ASSERT_EQ(nb->input_size(), 2);
  EXPECT_EQ(nb->input(0), "a");
  EXPECT_EQ(nb->input(1), "^init");
  std::vector<std::string> classes;
  ASSERT_TRUE(GetNodeAttr(*nb, "_class", &classes).ok());
  EXPECT_EQ(classes, std::vector<std::string>{"loc:@a"});
  EXPECT_EQ(nb->device(), "/job:ps/task:0");  // Colocated: a's device.
}

// A device function overrides the scope's device; colocation overrides both.
TEST(ScopeTest, DeviceFunctionThenColocationDecide) {
  Scope root = Scope::NewRootScope();
  Scope placed =
      root.WithDevice("/job:worker").WithDeviceFunction([](const tensorflow::NodeDef& node) {
        return node.device() + "/task:1";
      });
  Output a = ops::Const(placed.WithOpName("a"), 1.0f);
  Output b = ops::Identity(placed.WithOpName("b"), a);
  Output c = ops::Const(root.WithOpName("c").WithDevice("/job:ps"), 2.0f);
  Scope colocated = placed.ColocateWith(c).WithDeviceFunction(
      [](const tensorflow::NodeDef&) { return std::string("/job:worker/task:7"); });
  Output d = ops::Identity(colocated.WithOpName("d"), a);
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(FindNode(root, "a")->device(), "/job:worker/task:1");
  EXPECT_EQ(FindNode(root, "b")->device(), "/job:worker/task:1");
  EXPECT_EQ(FindNode(root, "d")->device(), "/job:ps");
}

TEST(ScopeTest, InputOfAnotherGraphIsAnError) {
  Scope root = Scope::NewRootScope();
  Scope other = Scope::NewRootScope();
  Output a = ops::Const(other.WithOpName("elsewhere"), 1.0f);
  ops::Identity(root.WithOpName("id"), a);
  ASSERT_FALSE(root.ok());
  EXPECT_EQ(std::string(root.status().message()),
            "[Identity 'id'] input elsewhere:0 is not in this graph");
}

TEST(ScopeTest, ShapeFunctionsRunAtConstruction) {
  Scope root = Scope::NewRootScope();
  Output a = ops::Const(root, {{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}});
  Output m = ops::MatMul(root, a, a, {.transpose_b = true});
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(m.shape(), PartialShape({2, 2}));
  ops::MatMul(root.WithOpName("bad"), a, a);
  ASSERT_FALSE(root.ok());
  EXPECT_NE(root.status().message().find("MatMul"), std::string::npos) << root.status();
}

TEST(ScopeTest, UnknownOpAndWrongDtypeAreErrors) {
  Scope root = Scope::NewRootScope();
  Output i = ops::Const(root, 1);
  Output f = ops::Const(root, 1.0f);
  ops::Add(root, i, f);
  EXPECT_FALSE(root.ok());
  EXPECT_NE(root.status().message().find("float"), std::string::npos) << root.status();

  Scope other = Scope::NewRootScope();
  {
    tensorflow::NodeDef node;
    node.set_op("NoSuchOp");
    std::vector<Output> outs;
    other.AddNode(node, {}, &outs);
  }
  EXPECT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("NoSuchOp"), std::string::npos) << other.status();
}

TEST(GraphIoTest, TextAndBinaryRoundTrip) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, {PartialShape({-1, 3})});
  ops::Relu(root.WithOpName("r"), ops::BiasAdd(root, x, {1.f, 2.f, 3.f}));
  tensorflow::GraphDef def;
  ASSERT_TRUE(root.ToGraphDef(&def).ok());
  std::string dir = ::testing::TempDir();
  ASSERT_TRUE(SaveGraphDef(def, dir + "/g.pbtxt", true).ok());
  ASSERT_TRUE(SaveGraphDef(def, dir + "/g.pb", false).ok());
  auto text = LoadGraphDef(dir + "/g.pbtxt");
  auto binary = LoadGraphDef(dir + "/g.pb");
  ASSERT_TRUE(text.ok()) << text.status();
  ASSERT_TRUE(binary.ok()) << binary.status();
  using google::protobuf::util::MessageDifferencer;
  EXPECT_TRUE(MessageDifferencer::Equals(*text, def)) << text->ShortDebugString();
  EXPECT_TRUE(MessageDifferencer::Equals(*binary, def)) << binary->ShortDebugString();
}

TEST(GraphIoTest, GarbageAndTruncatedBytesAreErrors) {
  tensorflow::GraphDef def;
  Scope root = Scope::NewRootScope();
  ops::Const(root, {1.f, 2.f});
  ASSERT_TRUE(root.ToGraphDef(&def).ok());
  std::string bytes = def.SerializeAsString();
  EXPECT_FALSE(ParseGraphDef(bytes.substr(0, bytes.size() / 2)).ok());
  EXPECT_FALSE(ParseGraphDef("\xff\xff\xff\xff garbage").ok());
  auto bad_text = ParseGraphDefText("node { name: \"a\" op: }");
  ASSERT_FALSE(bad_text.ok());
  EXPECT_NE(bad_text.status().message().find("line 1"), std::string::npos) << bad_text.status();
  EXPECT_EQ(LoadGraphDef("/nonexistent/g.pb").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace dflow
