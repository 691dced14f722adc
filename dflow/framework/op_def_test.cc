#include "dflow/framework/op_def.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "dflow/framework/attr_util.h"

namespace dflow {
namespace {

using tensorflow::NodeDef;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

OpDef MustFinalize(const OpDefBuilder& b) {
  absl::StatusOr<OpDef> def = b.Finalize();
  EXPECT_TRUE(def.ok()) << def.status();
  return def.ok() ? *def : OpDef();
}

const OpAttr& AttrOf(const OpDef& def, const std::string& name) {
  const OpAttr* a = def.FindAttr(name);
  EXPECT_NE(a, nullptr) << name;
  static const OpAttr kEmpty;
  return a != nullptr ? *a : kEmpty;
}

// --- attr specs ---------------------------------------------------------------

TEST(OpDefBuilderTest, ParsesScalarAttrTypes) {
  OpDef def = MustFinalize(OpDefBuilder("TestScalars")
                               .Attr("a: int")
                               .Attr("b: float")
                               .Attr("c: bool")
                               .Attr("d: string")
                               .Attr("e: type")
                               .Attr("f: shape")
                               .Attr("g: tensor")
                               .Attr("h: func"));
  std::vector<std::string> types;
  for (const OpAttr& a : def.attrs) types.push_back(a.type);
  EXPECT_THAT(types,
              ElementsAre("int", "float", "bool", "string", "type", "shape", "tensor", "func"));
  for (const OpAttr& a : def.attrs) {
    EXPECT_FALSE(a.default_value.has_value()) << a.name;
    EXPECT_FALSE(a.minimum.has_value()) << a.name;
  }
}

TEST(OpDefBuilderTest, ParsesListAttrTypes) {
  OpDef def = MustFinalize(OpDefBuilder("TestLists")
                               .Attr("a: list(int)")
                               .Attr("b: list(type)")
                               .Attr("c: list(shape)")
                               .Attr("d: list({float, int32})"));
  EXPECT_EQ(AttrOf(def, "a").type, "list(int)");
  EXPECT_EQ(AttrOf(def, "b").type, "list(type)");
  EXPECT_EQ(AttrOf(def, "c").type, "list(shape)");
  EXPECT_EQ(AttrOf(def, "d").type, "list(type)");
  EXPECT_THAT(AttrOf(def, "d").allowed_types, ElementsAre(DT_FLOAT, DT_INT32));
}

TEST(OpDefBuilderTest, ParsesScalarDefaults) {
  OpDef def = MustFinalize(OpDefBuilder("TestDefaults")
                               .Attr("flag: bool = false")
                               .Attr("on: bool = true")
                               .Attr("zero: int = 0")
                               .Attr("neg: int = -1")
                               .Attr("eps: float = 1e-3")
                               .Attr("fmt: string = 'NHWC'")
                               .Attr("empty: string = \"\"")
                               .Attr("dtype: type = DT_FLOAT"));
  EXPECT_FALSE(AttrOf(def, "flag").default_value->b());
  EXPECT_TRUE(AttrOf(def, "on").default_value->b());
  EXPECT_EQ(AttrOf(def, "zero").default_value->i(), 0);
  EXPECT_EQ(AttrOf(def, "zero").default_value->value_case(), tensorflow::AttrValue::kI);
  EXPECT_EQ(AttrOf(def, "neg").default_value->i(), -1);
  EXPECT_FLOAT_EQ(AttrOf(def, "eps").default_value->f(), 1e-3f);
  EXPECT_EQ(AttrOf(def, "fmt").default_value->s(), "NHWC");
  EXPECT_EQ(AttrOf(def, "empty").default_value->s(), "");
  EXPECT_EQ(AttrOf(def, "empty").default_value->value_case(), tensorflow::AttrValue::kS);
  EXPECT_EQ(AttrOf(def, "dtype").default_value->type(), DT_FLOAT);
}

TEST(OpDefBuilderTest, ParsesListAndShapeDefaults) {
  OpDef def = MustFinalize(OpDefBuilder("TestListDefaults")
                               .Attr("none: list(int) = []")
                               .Attr("strides: list(int) = [1, 1, 1, 1]")
                               .Attr("types: list(type) = [DT_INT32, DT_FLOAT]")
                               .Attr("names: list(string) = ['a', 'b,c']")
                               .Attr("shape: shape = { unknown_rank: true }")
                               .Attr("dims: shape = [2, -1]"));
  const auto& none = *AttrOf(def, "none").default_value;
  EXPECT_EQ(none.value_case(), tensorflow::AttrValue::kList);
  EXPECT_EQ(none.list().i_size(), 0);
  EXPECT_THAT(AttrOf(def, "strides").default_value->list().i(), ElementsAre(1, 1, 1, 1));
  EXPECT_THAT(AttrOf(def, "types").default_value->list().type(), ElementsAre(DT_INT32, DT_FLOAT));
  EXPECT_THAT(AttrOf(def, "names").default_value->list().s(), ElementsAre("a", "b,c"));
  EXPECT_TRUE(AttrOf(def, "shape").default_value->shape().unknown_rank());
  const auto& dims = AttrOf(def, "dims").default_value->shape();
  ASSERT_EQ(dims.dim_size(), 2);
  EXPECT_EQ(dims.dim(0).size(), 2);
  EXPECT_EQ(dims.dim(1).size(), -1);
}

TEST(OpDefBuilderTest, ParsesTypeSetsAndKeywords) {
  OpDef def = MustFinalize(OpDefBuilder("TestTypeSets")
                               .Attr("T: {float, double, int32} = DT_FLOAT")
                               .Attr("U: numbertype")
                               .Attr("V: realnumbertype")
                               .Attr("W: {bool, float}")
                               .Attr("X: type"));
  EXPECT_THAT(AttrOf(def, "T").allowed_types, ElementsAre(DT_FLOAT, DT_DOUBLE, DT_INT32));
  EXPECT_EQ(AttrOf(def, "T").type, "type");
  EXPECT_EQ(AttrOf(def, "T").default_value->type(), DT_FLOAT);
  EXPECT_THAT(AttrOf(def, "U").allowed_types,
              ElementsAre(DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64, DT_UINT8));
  EXPECT_EQ(AttrOf(def, "U").type, "type");
  EXPECT_EQ(AttrOf(def, "V").allowed_types, AttrOf(def, "U").allowed_types);
  EXPECT_THAT(AttrOf(def, "W").allowed_types, ElementsAre(DT_BOOL, DT_FLOAT));
  EXPECT_TRUE(AttrOf(def, "X").allowed_types.empty());
}

TEST(OpDefBuilderTest, ParsesStringEnumsAndMinima) {
  OpDef def = MustFinalize(OpDefBuilder("TestEnums")
                               .Attr("padding: {'SAME', 'VALID'}")
                               .Attr("fmt: {'NHWC', 'NCHW'} = 'NHWC'")
                               .Attr("N: int >= 1")
                               .Attr("strides: list(int) >= 4")
                               .Attr("k: int >= 2 = 3"));
  EXPECT_EQ(AttrOf(def, "padding").type, "string");
  EXPECT_THAT(AttrOf(def, "padding").allowed_values, ElementsAre("SAME", "VALID"));
  EXPECT_EQ(AttrOf(def, "fmt").default_value->s(), "NHWC");
  EXPECT_EQ(AttrOf(def, "N").minimum, 1);
  EXPECT_EQ(AttrOf(def, "N").type, "int");
  EXPECT_EQ(AttrOf(def, "strides").minimum, 4);
  EXPECT_EQ(AttrOf(def, "strides").type, "list(int)");
  EXPECT_EQ(AttrOf(def, "k").minimum, 2);
  EXPECT_EQ(AttrOf(def, "k").default_value->i(), 3);
}

// --- arg specs ------------------------------------------------------------------

TEST(OpDefBuilderTest, ParsesArgForms) {
  OpDef def = MustFinalize(OpDefBuilder("TestArgs")
                               .Input("a: T")
                               .Input("b: float")
                               .Input("c: N * T")
                               .Input("d: Tlist")
                               .Input("e: Ref(T)")
                               .Input("f: N * int32")
                               .Output("out: T")
                               .Output("ref_out: Ref(float)")
                               .Attr("T: type")
                               .Attr("N: int >= 1")
                               .Attr("Tlist: list(type)")
                               .SetIsStateful());
  ASSERT_EQ(def.inputs.size(), 6u);
  EXPECT_EQ(def.inputs[0].type_attr, "T");
  EXPECT_EQ(def.inputs[0].type, DT_INVALID);
  EXPECT_EQ(def.inputs[1].type, DT_FLOAT);
  EXPECT_TRUE(def.inputs[1].type_attr.empty());
  EXPECT_EQ(def.inputs[2].number_attr, "N");
  EXPECT_EQ(def.inputs[2].type_attr, "T");
  EXPECT_EQ(def.inputs[3].type_list_attr, "Tlist");
  EXPECT_TRUE(def.inputs[4].is_ref);
  EXPECT_EQ(def.inputs[4].type_attr, "T");
  EXPECT_EQ(def.inputs[5].number_attr, "N");
  EXPECT_EQ(def.inputs[5].type, DT_INT32);
  ASSERT_EQ(def.outputs.size(), 2u);
  EXPECT_TRUE(def.outputs[1].is_ref);
  EXPECT_EQ(def.outputs[1].type, DT_FLOAT);
  EXPECT_TRUE(def.is_stateful);
  EXPECT_FALSE(def.shape_fn);
}

TEST(OpDefBuilderTest, FinalizeRejectsBadSpecs) {
  struct Case {
    OpDefBuilder builder;
    std::string message;
  };
  std::vector<Case> cases = {
      {OpDefBuilder("Bad1").Input("x: T"), "no attr or type named 'T'"},
      {OpDefBuilder("Bad2").Input("x: T").Attr("T: int"), "is int, not a type"},
      {OpDefBuilder("Bad3").Input("x: N * T").Attr("T: type").Attr("N: float"), "is not an int"},
      {OpDefBuilder("Bad4").Attr("T: complexthing"), "unknown attr type"},
      {OpDefBuilder("Bad5").Attr("T"), "expected 'name: ...'"},
      {OpDefBuilder("Bad6").Attr("x: int = abc"), "bad int"},
      {OpDefBuilder("Bad7").Attr("x: bool = 1"), "bad bool"},
      {OpDefBuilder("Bad8").Attr("x: {float, int32} = DT_INT64"), "not in the allowed types"},
      {OpDefBuilder("Bad9").Attr("p: {'SAME', 'VALID'} = 'FULL'"), "not in the allowed values"},
      {OpDefBuilder("Bad10").Attr("x: int").Attr("x: float"), "duplicate attr"},
      {OpDefBuilder("Bad11").Input("x: float").Input("x: float"), "duplicate arg"},
      {OpDefBuilder("Bad12").Attr("x: string >= 2"), "minimum"},
      {OpDefBuilder("Bad13").Attr("x: list(int) >= 2 = [1]"), "fewer than"},
      {OpDefBuilder("Bad14").Attr("x: string = NHWC"), "quoted"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<OpDef> def = c.builder.Finalize();
    ASSERT_FALSE(def.ok()) << c.message;
    EXPECT_EQ(def.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(def.status().message(), HasSubstr(c.message));
  }
}

TEST(OpDefBuilderTest, ErrorNamesOpAndSpec) {
  absl::StatusOr<OpDef> def = OpDefBuilder("Broken").Input("x: Q").Finalize();
  ASSERT_FALSE(def.ok());
  EXPECT_THAT(def.status().message(), HasSubstr("[Broken]"));
  EXPECT_THAT(def.status().message(), HasSubstr("'x: Q'"));
}

// --- registry -------------------------------------------------------------------

REGISTER_OP("TestOnlyOpDefAdd")
    .Input("x: T")
    .Input("y: T")
    .Output("z: T")
    .Attr("T: {float, double, int32}");

TEST(OpRegistryTest, LooksUpRegisteredOps) {
  absl::StatusOr<const OpDef*> def = OpRegistry::Global()->LookUp("TestOnlyOpDefAdd");
  ASSERT_TRUE(def.ok()) << def.status();
  EXPECT_EQ((*def)->inputs.size(), 2u);
  EXPECT_THAT(OpRegistry::Global()->ListOps(), ::testing::Contains("TestOnlyOpDefAdd"));
}

TEST(OpRegistryTest, UnknownOpIsNotFound) {
  absl::StatusOr<const OpDef*> def = OpRegistry::Global()->LookUp("NoSuchOpAnywhere");
  ASSERT_FALSE(def.ok());
  EXPECT_EQ(def.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(def.status().message(), "Op type not registered 'NoSuchOpAnywhere'");
}

TEST(OpRegistryTest, RejectsDuplicates) {
  OpRegistry registry;
  ASSERT_TRUE(registry.Register(MustFinalize(OpDefBuilder("Dup"))).ok());
  absl::Status s = registry.Register(MustFinalize(OpDefBuilder("Dup")));
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(s.message(), HasSubstr("'Dup'"));
}

TEST(OpRegistryDeathTest, ReceiverAbortsOnBadSpec) {
  EXPECT_DEATH(OpDefBuilderReceiver(OpDefBuilder("TestOnlyBroken").Input("x: Q")),
               "no attr or type named 'Q'");
}

// --- NodeDef validation -------------------------------------------------------------

OpDef ConvLikeOp() {
  return MustFinalize(OpDefBuilder("TestConv")
                          .Input("input: T")
                          .Input("filter: T")
                          .Output("output: T")
                          .Attr("T: {float, double}")
                          .Attr("strides: list(int) >= 4")
                          .Attr("padding: {'SAME', 'VALID'}")
                          .Attr("data_format: string = 'NHWC'")
                          .Attr("use_cudnn: bool = true"));
}

NodeDef ConvNode() {
  NodeDef n;
  n.set_name("conv");
  n.set_op("TestConv");
  n.add_input("x");
  n.add_input("w");
  n.add_input("^init");
  SetAttr(&n, "T", DT_FLOAT);
  SetAttr(&n, "strides", std::vector<int64_t>{1, 1, 1, 1});
  SetAttr(&n, "padding", "SAME");
  return n;
}

absl::Status ValidateWithDefaults(NodeDef n, const OpDef& op) {
  AddDefaultAttrs(op, &n);
  return ValidateNodeDef(n, op);
}

TEST(ValidateNodeDefTest, AcceptsValidNodeWithControlInput) {
  OpDef op = ConvLikeOp();
  NodeDef n = ConvNode();
  AddDefaultAttrs(op, &n);
  std::string format;
  ASSERT_TRUE(GetNodeAttr(n, "data_format", &format).ok());
  EXPECT_EQ(format, "NHWC");
  bool cudnn = false;
  ASSERT_TRUE(GetNodeAttr(n, "use_cudnn", &cudnn).ok());
  EXPECT_TRUE(cudnn);
  EXPECT_TRUE(ValidateNodeDef(n, op).ok()) << ValidateNodeDef(n, op);
}

TEST(ValidateNodeDefTest, AddDefaultAttrsKeepsSetValues) {
  OpDef op = ConvLikeOp();
  NodeDef n = ConvNode();
  SetAttr(&n, "data_format", "NCHW");
  AddDefaultAttrs(op, &n);
  std::string format;
  ASSERT_TRUE(GetNodeAttr(n, "data_format", &format).ok());
  EXPECT_EQ(format, "NCHW");
}

TEST(ValidateNodeDefTest, ReportsFailuresNamingNodeAndAttr) {
  OpDef op = ConvLikeOp();
  struct Case {
    std::function<void(NodeDef*)> mutate;
    std::string message;
  };
  std::vector<Case> cases = {
      {[](NodeDef* n) { n->mutable_attr()->erase("padding"); }, "missing attr 'padding'"},
      {[](NodeDef* n) { SetAttr(n, "T", int64_t{1}); }, "attr 'T' holds int, not type"},
      {[](NodeDef* n) { SetAttr(n, "T", DT_INT32); },
       "attr 'T' value int32 is not in the allowed types [float, double]"},
      {[](NodeDef* n) { SetAttr(n, "padding", "FULL"); }, "value 'FULL' is not in the allowed"},
      {[](NodeDef* n) {
         SetAttr(n, "strides", std::vector<int64_t>{1, 1});
       },
       "list has 2 values, fewer than the minimum 4"},
      {[](NodeDef* n) { SetAttr(n, "strides", std::vector<std::string>{"a"}); },
       "holds list(string), not list(int)"},
      {[](NodeDef* n) { SetAttr(n, "bogus", int64_t{1}); }, "unknown attr 'bogus'"},
      {[](NodeDef* n) {
         n->clear_input();
         n->add_input("x");
         n->add_input("^init");
       },
       "expected 2 inputs, got 1"},
      {[](NodeDef* n) { n->add_input("extra"); }, "after a control input"},
  };
  for (const Case& c : cases) {
    NodeDef n = ConvNode();
    c.mutate(&n);
    absl::Status s = ValidateWithDefaults(n, op);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(s.message(), HasSubstr(c.message));
    EXPECT_THAT(s.message(), HasSubstr("NodeDef 'conv' (TestConv)"));
  }
}

TEST(ValidateNodeDefTest, AllowsUnderscoreAttrs) {
  OpDef op = ConvLikeOp();
  NodeDef n = ConvNode();
  SetAttr(&n, "_class", std::vector<std::string>{"loc:@w"});
  EXPECT_TRUE(ValidateWithDefaults(n, op).ok());
}

TEST(ValidateNodeDefTest, CountsRepeatedAndListInputs) {
  OpDef op = MustFinalize(OpDefBuilder("TestConcatLike")
                              .Input("values: N * T")
                              .Input("extras: Tlist")
                              .Output("out: T")
                              .Attr("N: int >= 2")
                              .Attr("T: type")
                              .Attr("Tlist: list(type) = []"));
  NodeDef n;
  n.set_name("cat");
  n.set_op("TestConcatLike");
  SetAttr(&n, "N", 3);
  SetAttr(&n, "T", DT_FLOAT);
  SetAttr(&n, "Tlist", std::vector<DataType>{DT_INT32});
  for (const char* in : {"a", "b", "c"}) n.add_input(in);
  EXPECT_THAT(ValidateWithDefaults(n, op).message(), HasSubstr("expected 4 inputs, got 3"));
  n.add_input("d");
  EXPECT_TRUE(ValidateWithDefaults(n, op).ok());
  SetAttr(&n, "N", 1);
  EXPECT_THAT(ValidateWithDefaults(n, op).message(),
              HasSubstr("value 1 is less than the minimum 2"));
}

TEST(InOutTypesTest, FlattensArgsAndRefs) {
  OpDef op = MustFinalize(OpDefBuilder("TestTypes")
                              .Input("ref: Ref(T)")
                              .Input("values: N * T")
                              .Input("idx: int64")
                              .Input("rest: Tlist")
                              .Output("a: T")
                              .Output("b: N * int32")
                              .Output("c: Tlist")
                              .Attr("T: type")
                              .Attr("N: int")
                              .Attr("Tlist: list(type)"));
  NodeDef n;
  n.set_name("t");
  n.set_op("TestTypes");
  SetAttr(&n, "T", DT_DOUBLE);
  SetAttr(&n, "N", 2);
  SetAttr(&n, "Tlist", std::vector<DataType>{DT_BOOL, DT_STRING});
  DataTypeVector in, out;
  ASSERT_TRUE(InOutTypesForNode(n, op, &in, &out).ok());
  EXPECT_THAT(in, ElementsAre(tensorflow::DT_DOUBLE_REF, DT_DOUBLE, DT_DOUBLE, DT_INT64, DT_BOOL,
                              DT_STRING));
  EXPECT_THAT(out, ElementsAre(DT_DOUBLE, DT_INT32, DT_INT32, DT_BOOL, DT_STRING));

  int start = -1, stop = -1;
  ASSERT_TRUE(OutputRange(n, op, "b", &start, &stop).ok());
  EXPECT_EQ(start, 1);
  EXPECT_EQ(stop, 3);
  ASSERT_TRUE(OutputRange(n, op, "c", &start, &stop).ok());
  EXPECT_EQ(start, 3);
  EXPECT_EQ(stop, 5);
  EXPECT_THAT(OutputRange(n, op, "zz", &start, &stop).message(), HasSubstr("no output named 'zz'"));
}

TEST(InOutTypesTest, MissingTypeAttrFails) {
  OpDef op = MustFinalize(OpDefBuilder("TestTypes2").Input("x: T").Attr("T: type"));
  NodeDef n;
  n.set_name("t2");
  n.set_op("TestTypes2");
  DataTypeVector in, out;
  absl::Status s = InOutTypesForNode(n, op, &in, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("has no attr named 'T'"));
}

}  // namespace
}  // namespace dflow
