// Ops tf.compat.v1 puts in training graphs (Where, Select, StringJoin,
// ShardedFilename, StaticRegexFullMatch, SaveV2, RestoreV2,
// MergeV2Checkpoints): OpDefs against TensorFlow's, kernels against values
// TensorFlow 2.x computes for the same inputs (tf.compat.v1).
#include <string>
#include <utility>
#include <vector>

#include "dflow/framework/op_def.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/ops/op_test_util.h"
#include "dflow/ops/state_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

using ::testing::HasSubstr;

// Written from TensorFlow 2.x's op_def_registry.
TEST(InteropOpsDefTest, OpDefsMatchTensorFlow) {
  const std::vector<std::pair<std::string, std::string>> tf = {
      {"Where", "(input:T) -> (index:int64) [T:type=?]"},
      {"Select", "(condition:bool, t:T, e:T) -> (output:T) [T:type]"},
      {"StringJoin", "(inputs:string) -> (output:string) [N:int, separator:string='']"},
      {"ShardedFilename",
       "(basename:string, shard:int32, num_shards:int32) -> (filename:string) []"},
      {"StaticRegexFullMatch", "(input:string) -> (output:bool) [pattern:string]"},
      {"MergeV2Checkpoints",
       "(checkpoint_prefixes:string, destination_prefix:string) -> () "
       "[allow_missing_files:bool=false, delete_old_dirs:bool=true] stateful"},
  };
  for (const auto& [name, signature] : tf) {
    absl::StatusOr<const OpDef*> op = OpRegistry::Global()->LookUp(name);
    ASSERT_TRUE(op.ok()) << op.status();
    EXPECT_EQ(OpSignature(**op), signature) << name;
  }
  // Type-list args: checked field by field.
  for (const char* name : {"SaveV2", "RestoreV2"}) {
    absl::StatusOr<const OpDef*> op = OpRegistry::Global()->LookUp(name);
    ASSERT_TRUE(op.ok()) << op.status();
    EXPECT_TRUE((*op)->is_stateful) << name;
    ASSERT_EQ((*op)->inputs.size(), std::string(name) == "SaveV2" ? 4u : 3u) << name;
    EXPECT_EQ((*op)->inputs[0].name, "prefix");
    EXPECT_EQ((*op)->inputs[1].name, "tensor_names");
    EXPECT_EQ((*op)->inputs[2].name, "shape_and_slices");
    const OpArg& tensors =
        std::string(name) == "SaveV2" ? (*op)->inputs[3] : (*op)->outputs.at(0);
    EXPECT_EQ(tensors.name, "tensors");
    EXPECT_EQ(tensors.type_list_attr, "dtypes");
  }
}

Tensor Run1(OpTest& t) {
  absl::StatusOr<std::vector<Tensor>> out = t.Run();
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok() || out->empty()) return Tensor();
  return (*out)[0];
}

std::string ErrorOf(OpTest& t) {
  absl::StatusOr<std::vector<Tensor>> out = t.Run();
  EXPECT_FALSE(out.ok()) << "expected an error";
  return out.ok() ? "" : std::string(out.status().message());
}

// Shape inference for a node of `op_name` with `shapes` as its inputs; `N`
// is set to the input count when the op has that attr.
absl::StatusOr<std::vector<PartialShape>> Infer(const std::string& op_name,
                                                std::vector<PartialShape> shapes) {
  tensorflow::NodeDef node;
  node.set_name("n");
  node.set_op(op_name);
  if (op_name == "StringJoin") SetAttr(&node, "N", static_cast<int64_t>(shapes.size()));
  ASSIGN_OR_RETURN(const OpDef* op, OpRegistry::Global()->LookUp(op_name));
  AddDefaultAttrs(*op, &node);
  for (size_t i = 0; i < shapes.size(); ++i) node.add_input("in" + std::to_string(i));
  DataTypeVector in_types, out_types;
  RETURN_IF_ERROR(InOutTypesForNode(node, *op, &in_types, &out_types));
  std::vector<const Tensor*> tensors(shapes.size(), nullptr);
  return InferShapes(node, *op, shapes, tensors, in_types, static_cast<int>(out_types.size()));
}

// --- Where ---------------------------------------------------------------------------

// tf.where([[True, False, True], [False, True, False]]) = [[0, 0], [0, 2], [1, 1]].
TEST(WhereTest, BoolMatrix) {
  OpTest t("Where");
  t.Attr("T", DT_BOOL);
  t.Input(Tensor::FromVector<bool>({true, false, true, false, true, false}, {2, 3}));
  ExpectTensorEq<int64_t>(Run1(t), {0, 0, 0, 2, 1, 1}, TensorShape({3, 2}));
}

// tf.where(tf.constant([0., 2.5, 0., -1.])) = [[1], [3]].
TEST(WhereTest, FloatVectorNonZero) {
  OpTest t("Where");
  t.Attr("T", DT_FLOAT);
  t.Input(Tensor::FromVector<float>({0, 2.5f, 0, -1}, {4}));
  ExpectTensorEq<int64_t>(Run1(t), {1, 3}, TensorShape({2, 1}));
}

TEST(WhereTest, NoneTrueAndScalar) {
  OpTest none("Where");
  none.Attr("T", DT_INT32);
  none.Input(Tensor::FromVector<int32_t>({0, 0}, {1, 2}));
  ExpectTensorEq<int64_t>(Run1(none), {}, TensorShape({0, 2}));
  // TensorFlow's kernel rejects a scalar: "WhereOp : Unhandled input dimensions: 0".
  OpTest scalar("Where");
  scalar.Input(Tensor::Scalar<bool>(true));  // T defaults to bool.
  EXPECT_THAT(ErrorOf(scalar), HasSubstr("WhereOp : Unhandled input dimensions: 0"));
}

TEST(WhereTest, Shape) {
  absl::StatusOr<std::vector<PartialShape>> s = Infer("Where", {PartialShape({2, -1, 4})});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)[0], PartialShape({-1, 3}));
  s = Infer("Where", {PartialShape::Unknown()});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)[0], PartialShape::UnknownDims(2));
}

// --- Select ----------------------------------------------------------------------------

TEST(SelectTest, SameShape) {
  OpTest t("Select");
  t.Attr("T", DT_FLOAT);
  t.Input(Tensor::FromVector<bool>({true, false, false, true}, {2, 2}));
  t.Input(Tensor::FromVector<float>({1, 2, 3, 4}, {2, 2}));
  t.Input(Tensor::FromVector<float>({-1, -2, -3, -4}, {2, 2}));
  ExpectTensorEq<float>(Run1(t), {1, -2, -3, 4}, TensorShape({2, 2}));
}

// v1 Select: a vector condition picks whole rows.
TEST(SelectTest, VectorConditionPicksRows) {
  OpTest t("Select");
  t.Attr("T", DT_INT32);
  t.Input(Tensor::FromVector<bool>({false, true}, {2}));
  t.Input(Tensor::FromVector<int32_t>({1, 2, 3, 4, 5, 6}, {2, 3}));
  t.Input(Tensor::FromVector<int32_t>({-1, -2, -3, -4, -5, -6}, {2, 3}));
  ExpectTensorEq<int32_t>(Run1(t), {-1, -2, -3, 4, 5, 6}, TensorShape({2, 3}));
}

TEST(SelectTest, ScalarConditionAndStrings) {
  OpTest t("Select");
  t.Attr("T", DT_STRING);
  t.Input(Tensor::Scalar<bool>(false));
  t.Input(Tensor::FromVector<std::string>({"a", "b"}, {2}));
  t.Input(Tensor::FromVector<std::string>({"c", "d"}, {2}));
  ExpectTensorEq<std::string>(Run1(t), {"c", "d"}, TensorShape({2}));
}

TEST(SelectTest, Errors) {
  OpTest t("Select");
  t.Attr("T", DT_FLOAT);
  t.Input(Tensor::FromVector<bool>({true, false, true}, {3}));
  t.Input(Tensor::FromVector<float>({1, 2, 3, 4}, {2, 2}));
  t.Input(Tensor::FromVector<float>({1, 2, 3, 4}, {2, 2}));
  EXPECT_THAT(ErrorOf(t), HasSubstr("Number of batches of 'then' must match size of 'cond'"));
  OpTest u("Select");
  u.Attr("T", DT_FLOAT);
  u.Input(Tensor::FromVector<bool>({true, false}, {2}));
  u.Input(Tensor::FromVector<float>({1, 2}, {2}));
  u.Input(Tensor::FromVector<float>({1, 2, 3}, {3}));
  EXPECT_THAT(ErrorOf(u), HasSubstr("'then' and 'else' must have the same size"));
}

// --- strings ----------------------------------------------------------------------------

// tf.strings.join([["a", "b"], "x"], separator="-") = ["a-x", "b-x"].
TEST(StringJoinTest, BroadcastsScalars) {
  OpTest t("StringJoin");
  t.Attr("N", int64_t{2}).Attr("separator", std::string("-"));
  t.Input(Tensor::FromVector<std::string>({"a", "b"}, {2}));
  t.Input(Tensor::Scalar<std::string>("x"));
  ExpectTensorEq<std::string>(Run1(t), {"a-x", "b-x"}, TensorShape({2}));
}

TEST(StringJoinTest, MismatchedShapes) {
  OpTest t("StringJoin");
  t.Attr("N", int64_t{2});
  t.Input(Tensor::FromVector<std::string>({"a", "b"}, {2}));
  t.Input(Tensor::FromVector<std::string>({"a", "b", "c"}, {3}));
  EXPECT_THAT(ErrorOf(t), HasSubstr("Input shapes do not match"));
}

// The Saver's temp-directory path: tf.strings.join([prefix, "_temp/part"]).
TEST(StringJoinTest, ScalarsAndShape) {
  OpTest t("StringJoin");
  t.Attr("N", int64_t{2});
  t.Input(Tensor::Scalar<std::string>("/tmp/model"));
  t.Input(Tensor::Scalar<std::string>("_temp/part"));
  ExpectTensorEq<std::string>(Run1(t), {"/tmp/model_temp/part"}, TensorShape());
  absl::StatusOr<std::vector<PartialShape>> s =
      Infer("StringJoin", {PartialShape::Scalar(), PartialShape({-1, 2}), PartialShape({3, -1})});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)[0], PartialShape({3, 2}));
  s = Infer("StringJoin", {PartialShape::Scalar(), PartialShape::Scalar()});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)[0], PartialShape::Scalar());
}

// gen_io_ops.sharded_filename("foo", 3, 10) = b"foo-00003-of-00010".
TEST(ShardedFilenameTest, Formats) {
  OpTest t("ShardedFilename");
  t.Input(Tensor::Scalar<std::string>("foo"));
  t.Input(Tensor::Scalar<int32_t>(3));
  t.Input(Tensor::Scalar<int32_t>(10));
  ExpectTensorEq<std::string>(Run1(t), {"foo-00003-of-00010"}, TensorShape());
}

// tf.strings.regex_full_match(["s3://b/x", "/tmp/x"], "^s3://.*") = [True, False].
TEST(StaticRegexFullMatchTest, Matches) {
  OpTest t("StaticRegexFullMatch");
  t.Attr("pattern", std::string("^s3://.*"));
  t.Input(Tensor::FromVector<std::string>({"s3://b/x", "/tmp/x"}, {2}));
  ExpectTensorEq<bool>(Run1(t), {true, false}, TensorShape({2}));
  // Full match: a prefix match alone is not enough.
  OpTest u("StaticRegexFullMatch");
  u.Attr("pattern", std::string("ab"));
  u.Input(Tensor::FromVector<std::string>({"ab", "abc"}, {2}));
  ExpectTensorEq<bool>(Run1(u), {true, false}, TensorShape({2}));
}

TEST(StaticRegexFullMatchTest, InvalidPattern) {
  OpTest t("StaticRegexFullMatch");
  t.Attr("pattern", std::string("(unclosed"));
  t.Input(Tensor::FromVector<std::string>({"x"}, {1}));
  EXPECT_THAT(ErrorOf(t), HasSubstr("Invalid pattern: (unclosed"));
}

TEST(StringLengthTest, CountsBytesOrUtf8Characters) {
  const Tensor in = Tensor::FromVector<std::string>({"", "abc", "h\xc3\xa9llo\xe2\x9c\x93"}, {3});
  OpTest bytes("StringLength");
  bytes.Input(in);
  absl::StatusOr<std::vector<Tensor>> out = bytes.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<int32_t>((*out)[0], {0, 3, 9}, TensorShape({3}));
  OpTest chars("StringLength");
  chars.Attr("unit", std::string("UTF8_CHAR")).Input(in);
  out = chars.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<int32_t>((*out)[0], {0, 3, 6}, TensorShape({3}));
}

}  // namespace
}  // namespace dflow
