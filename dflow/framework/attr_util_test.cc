#include "dflow/framework/attr_util.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace dflow {
namespace {

using tensorflow::NodeDef;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

NodeDef MakeNode() {
  NodeDef n;
  n.set_name("x");
  n.set_op("Op");
  return n;
}

TEST(AttrUtilTest, RoundTripsScalars) {
  NodeDef n = MakeNode();
  SetAttr(&n, "i64", int64_t{1} << 40);
  SetAttr(&n, "i", 7);
  SetAttr(&n, "f", 0.5f);
  SetAttr(&n, "b", true);
  SetAttr(&n, "s", std::string("NHWC"));
  SetAttr(&n, "c", "VALID");
  SetAttr(&n, "T", DT_INT64);
  int64_t i64 = 0;
  int32_t i32 = 0;
  float f = 0;
  bool b = false;
  std::string s, c;
  DataType t = DT_INVALID;
  ASSERT_TRUE(GetNodeAttr(n, "i64", &i64).ok());
  ASSERT_TRUE(GetNodeAttr(n, "i", &i32).ok());
  ASSERT_TRUE(GetNodeAttr(n, "f", &f).ok());
  ASSERT_TRUE(GetNodeAttr(n, "b", &b).ok());
  ASSERT_TRUE(GetNodeAttr(n, "s", &s).ok());
  ASSERT_TRUE(GetNodeAttr(n, "c", &c).ok());
  ASSERT_TRUE(GetNodeAttr(n, "T", &t).ok());
  EXPECT_EQ(i64, int64_t{1} << 40);
  EXPECT_EQ(i32, 7);
  EXPECT_EQ(f, 0.5f);
  EXPECT_TRUE(b);
  EXPECT_EQ(s, "NHWC");
  EXPECT_EQ(c, "VALID");
  EXPECT_EQ(t, DT_INT64);
  EXPECT_TRUE(HasNodeAttr(n, "T"));
  EXPECT_FALSE(HasNodeAttr(n, "U"));
}

TEST(AttrUtilTest, RoundTripsLists) {
  NodeDef n = MakeNode();
  SetAttr(&n, "l64", std::vector<int64_t>{1, -2, 3});
  SetAttr(&n, "l32", std::vector<int>{4, 5});
  SetAttr(&n, "ls", std::vector<std::string>{"a", "b"});
  SetAttr(&n, "lt", std::vector<DataType>{DT_FLOAT, DT_BOOL});
  (*n.mutable_attr())["lf"].mutable_list()->add_f(2.5f);
  std::vector<int64_t> l64;
  std::vector<int32_t> l32;
  std::vector<std::string> ls;
  std::vector<DataType> lt;
  std::vector<float> lf;
  ASSERT_TRUE(GetNodeAttr(n, "l64", &l64).ok());
  ASSERT_TRUE(GetNodeAttr(n, "l32", &l32).ok());
  ASSERT_TRUE(GetNodeAttr(n, "ls", &ls).ok());
  ASSERT_TRUE(GetNodeAttr(n, "lt", &lt).ok());
  ASSERT_TRUE(GetNodeAttr(n, "lf", &lf).ok());
  EXPECT_THAT(l64, ElementsAre(1, -2, 3));
  EXPECT_THAT(l32, ElementsAre(4, 5));
  EXPECT_THAT(ls, ElementsAre("a", "b"));
  EXPECT_THAT(lt, ElementsAre(DT_FLOAT, DT_BOOL));
  EXPECT_THAT(lf, ElementsAre(2.5f));
}

TEST(AttrUtilTest, EmptyListReadsAsAnyListKind) {
  NodeDef n = MakeNode();
  SetAttr(&n, "empty", std::vector<int64_t>{});
  std::vector<DataType> types = {DT_FLOAT};
  ASSERT_TRUE(GetNodeAttr(n, "empty", &types).ok());
  EXPECT_TRUE(types.empty());
}

TEST(AttrUtilTest, SetAttrOverwritesOtherKinds) {
  NodeDef n = MakeNode();
  SetAttr(&n, "a", std::vector<int64_t>{1, 2});
  SetAttr(&n, "a", std::vector<std::string>{"z"});
  std::vector<std::string> s;
  ASSERT_TRUE(GetNodeAttr(n, "a", &s).ok());
  EXPECT_THAT(s, ElementsAre("z"));
  EXPECT_EQ(n.attr().at("a").list().i_size(), 0);
}

TEST(AttrUtilTest, MissingAttrIsNotFound) {
  NodeDef n = MakeNode();
  int64_t v;
  absl::Status s = GetNodeAttr(n, "T", &v);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "NodeDef 'x' (Op) has no attr named 'T'");
}

TEST(AttrUtilTest, WrongKindIsInvalidArgument) {
  NodeDef n = MakeNode();
  SetAttr(&n, "T", DT_FLOAT);
  SetAttr(&n, "l", std::vector<int64_t>{1});
  int64_t v;
  absl::Status s = GetNodeAttr(n, "T", &v);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "attr 'T' of node 'x' is type, not int");
  std::vector<DataType> types;
  EXPECT_EQ(GetNodeAttr(n, "l", &types).message(),
            "attr 'l' of node 'x' is list(int), not list(type)");
  float f;
  EXPECT_EQ(GetNodeAttr(n, "l", &f).message(), "attr 'l' of node 'x' is list(int), not float");
}

TEST(AttrUtilTest, Int32IsRangeChecked) {
  NodeDef n = MakeNode();
  SetAttr(&n, "big", int64_t{3000000000});
  SetAttr(&n, "list", std::vector<int64_t>{1, int64_t{-3000000000}});
  int32_t v = 0;
  absl::Status s = GetNodeAttr(n, "big", &v);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("3000000000"));
  EXPECT_THAT(s.message(), HasSubstr("int32"));
  std::vector<int32_t> l;
  EXPECT_THAT(GetNodeAttr(n, "list", &l).message(), HasSubstr("-3000000000"));
  int64_t v64 = 0;
  ASSERT_TRUE(GetNodeAttr(n, "big", &v64).ok());
  EXPECT_EQ(v64, 3000000000);
}

TEST(AttrUtilTest, ShapeAttrs) {
  NodeDef n = MakeNode();
  SetAttr(&n, "s", TensorShape({2, 3}));
  tensorflow::TensorShapeProto p;
  ASSERT_TRUE(GetNodeAttr(n, "s", &p).ok());
  ASSERT_EQ(p.dim_size(), 2);
  EXPECT_EQ(p.dim(0).size(), 2);
  EXPECT_EQ(p.dim(1).size(), 3);
  EXPECT_FALSE(p.unknown_rank());
  tensorflow::TensorShapeProto unknown;
  unknown.set_unknown_rank(true);
  SetAttr(&n, "u", unknown);
  ASSERT_TRUE(GetNodeAttr(n, "u", &p).ok());
  EXPECT_TRUE(p.unknown_rank());
  EXPECT_EQ(AttrValueSummary(n.attr().at("s")), "shape: [2,3]");
  EXPECT_EQ(AttrValueSummary(n.attr().at("u")), "shape: <unknown>");
}

TEST(AttrUtilTest, TensorAttrs) {
  NodeDef n = MakeNode();
  SetAttr(&n, "value", Tensor::FromVector<float>({1, 2, 3, 4}, TensorShape({2, 2})));
  Tensor t;
  ASSERT_TRUE(GetNodeAttr(n, "value", &t).ok());
  EXPECT_EQ(t.dtype(), DT_FLOAT);
  EXPECT_EQ(t.shape(), TensorShape({2, 2}));
  EXPECT_THAT(t.flat<float>(), ElementsAre(1, 2, 3, 4));

  // A TensorProto whose content does not match its shape is an error, not a crash.
  auto* bad = (*n.mutable_attr())["bad"].mutable_tensor();
  bad->set_dtype(DT_FLOAT);
  bad->mutable_tensor_shape()->add_dim()->set_size(4);
  bad->set_tensor_content(std::string(3, '\0'));
  absl::Status s = GetNodeAttr(n, "bad", &t);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("attr 'bad' of node 'x'"));
}

TEST(AttrUtilTest, Summaries) {
  NodeDef n = MakeNode();
  SetAttr(&n, "i", 3);
  SetAttr(&n, "T", DT_FLOAT);
  SetAttr(&n, "l", std::vector<int64_t>{1, 2});
  SetAttr(&n, "s", "SAME");
  SetAttr(&n, "b", false);
  SetAttr(&n, "lt", std::vector<DataType>{DT_INT32});
  SetAttr(&n, "e", std::vector<int64_t>{});
  EXPECT_EQ(AttrValueSummary(n.attr().at("i")), "i: 3");
  EXPECT_EQ(AttrValueSummary(n.attr().at("T")), "type: DT_FLOAT");
  EXPECT_EQ(AttrValueSummary(n.attr().at("l")), "list(i): [1, 2]");
  EXPECT_EQ(AttrValueSummary(n.attr().at("s")), "s: 'SAME'");
  EXPECT_EQ(AttrValueSummary(n.attr().at("b")), "b: false");
  EXPECT_EQ(AttrValueSummary(n.attr().at("lt")), "list(type): [DT_INT32]");
  EXPECT_EQ(AttrValueSummary(n.attr().at("e")), "list: []");
  EXPECT_EQ(AttrValueSummary(tensorflow::AttrValue()), "<unset>");
}

}  // namespace
}  // namespace dflow
