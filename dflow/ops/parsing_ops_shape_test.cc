// Shape functions of the parsing and decoding ops (their values are checked
// against TensorFlow in parsing_golden_test.cc), and the dtypes their OpDefs
// allow that dflow's tensors cannot hold yet, refused with a clear message.
#include <string>
#include <vector>

#include "dflow/ops/op_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

using ::testing::HasSubstr;

tensorflow::NodeDef Node(const std::string& op) {
  tensorflow::NodeDef node;
  node.set_name("n");
  node.set_op(op);
  return node;
}

TEST(ParsingShapeTest, DecodeCSVOutputsTakeTheRecordsShape) {
  tensorflow::NodeDef node = Node("DecodeCSV");
  SetAttr(&node, "OUT_TYPE", std::vector<DataType>{DT_FLOAT, DT_STRING});
  auto out = Infer(node, {PartialShape({kUnknownDim, 3}), PartialShape({1}), PartialShape({0})});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 2u);
  EXPECT_EQ((*out)[0], PartialShape({kUnknownDim, 3}));
  EXPECT_EQ((*out)[1], PartialShape({kUnknownDim, 3}));
  EXPECT_FALSE(Infer(node, {PartialShape({2}), PartialShape({1, 1}), PartialShape({0})}).ok());
}

TEST(ParsingShapeTest, StringSplitGivesASparseMatrix) {
  for (const char* op : {"StringSplit", "StringSplitV2"}) {
    SCOPED_TRACE(op);
    auto out = Infer(Node(op), {PartialShape({kUnknownDim}), PartialShape::Scalar()});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0], PartialShape({kUnknownDim, 2}));
    EXPECT_EQ((*out)[1], PartialShape({kUnknownDim}));
    EXPECT_EQ((*out)[2], PartialShape({2}));
    EXPECT_FALSE(Infer(Node(op), {PartialShape({2, 2}), PartialShape::Scalar()}).ok());
  }
}

TEST(ParsingShapeTest, ImagesAreHeightWidthChannels) {
  tensorflow::NodeDef png = Node("DecodePng");
  SetAttr(&png, "channels", 3);
  auto out = Infer(png, {PartialShape::Scalar()});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0], PartialShape({kUnknownDim, kUnknownDim, 3}));
  out = Infer(Node("DecodeJpeg"), {PartialShape::Scalar()});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0], PartialShape::UnknownDims(3));
  EXPECT_FALSE(Infer(Node("DecodeJpeg"), {PartialShape({1})}).ok());
}

TEST(ParsingShapeTest, ScalarsAndUnchangedShapes) {
  auto read = Infer(Node("ReadFile"), {PartialShape::Scalar()});
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ((*read)[0], PartialShape::Scalar());
  tensorflow::NodeDef serialize = Node("SerializeTensor");
  SetAttr(&serialize, "T", DT_FLOAT);
  auto ser = Infer(serialize, {PartialShape({2, 3})});
  ASSERT_TRUE(ser.ok()) << ser.status();
  EXPECT_EQ((*ser)[0], PartialShape::Scalar());
  auto num = Infer(Node("StringToNumber"), {PartialShape({4, kUnknownDim})});
  ASSERT_TRUE(num.ok()) << num.status();
  EXPECT_EQ((*num)[0], PartialShape({4, kUnknownDim}));
}

TEST(ParsingShapeTest, ParseSingleExampleDenseShapes) {
  tensorflow::NodeDef node = Node("ParseSingleExample");
  SetAttr(&node, "num_sparse", 1);
  SetAttr(&node, "sparse_keys", std::vector<std::string>{"s"});
  SetAttr(&node, "dense_keys", std::vector<std::string>{"d"});
  SetAttr(&node, "sparse_types", std::vector<DataType>{DT_STRING});
  SetAttr(&node, "Tdense", std::vector<DataType>{DT_INT64});
  (*node.mutable_attr())["dense_shapes"].mutable_list()->add_shape()->add_dim()->set_size(4);
  auto out = Infer(node, {PartialShape::Scalar(), PartialShape({4})});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 4u);
  EXPECT_EQ((*out)[0], PartialShape({kUnknownDim, 1}));
  EXPECT_EQ((*out)[2], PartialShape({1}));
  EXPECT_EQ((*out)[3], PartialShape({4}));
}

// uint16 images and uint32/uint64 numbers: allowed by TensorFlow's OpDefs, not
// yet held by dflow tensors; the kernel says so instead of failing later.
TEST(ParsingShapeTest, UnsupportedDtypesAreRefusedByName) {
  OpTest png("DecodePng");
  png.Attr("dtype", tensorflow::DT_UINT16).Input(Tensor::Scalar<std::string>("x"));
  absl::Status s = png.Run().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_THAT(s.message(), HasSubstr("dtype uint16 is not supported"));
  OpTest num("StringToNumber");
  num.Attr("out_type", tensorflow::DT_UINT64).Input(Tensor::Vec<std::string>({"1"}));
  s = num.Run().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_THAT(s.message(), HasSubstr("out_type uint64 is not supported"));
}

}  // namespace
}  // namespace dflow
