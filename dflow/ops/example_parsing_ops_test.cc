// ParseExampleV2 beyond the TensorFlow golden cases (parsing_golden_test.cc):
// wire forms TensorFlow's Python never writes (unpacked lists, negative
// varints), corrupt lists, a batch large enough to be split over the intra-op
// pool, and the shape functions.
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dflow/ops/op_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

using ::testing::HasSubstr;

// --- a tiny protobuf writer for hand-made Examples ----------------------------

std::string Varint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out.push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
  return out;
}
std::string Field(int number, const std::string& payload) {
  return Varint(number << 3 | 2) + Varint(payload.size()) + payload;
}
std::string Fixed32(float f) {
  std::string b(4, '\0');
  std::memcpy(b.data(), &f, 4);
  return b;
}
// An Example of (key, Feature bytes) entries.
std::string MakeExample(const std::vector<std::pair<std::string, std::string>>& features) {
  std::string entries;
  for (const auto& [key, feature] : features) {
    entries += Field(1, Field(1, key) + Field(2, feature));
  }
  return Field(1, entries);
}
std::string PackedFloats(const std::vector<float>& v) {
  std::string packed;
  for (float f : v) packed += Fixed32(f);
  return Field(2, Field(1, packed));
}
std::string PackedInt64s(const std::vector<int64_t>& v) {
  std::string packed;
  for (int64_t x : v) packed += Varint(static_cast<uint64_t>(x));
  return Field(3, Field(1, packed));
}

// ParseExampleV2 over `serialized` with one sparse feature of `dtype` and no others.
OpTest SparseParse(const std::vector<std::string>& serialized, const std::string& key,
                   DataType dtype, std::vector<std::string> keys = {}) {
  if (keys.empty()) keys = {key};
  OpTest op("ParseExampleV2");
  op.Attr("num_sparse", 1)
      .Attr("sparse_types", std::vector<DataType>{dtype})
      .Attr("Tdense", std::vector<DataType>{})
      .Attr("ragged_value_types", std::vector<DataType>{})
      .Attr("ragged_split_types", std::vector<DataType>{});
  (*op.node_def().mutable_attr())["dense_shapes"].mutable_list();
  op.Input(Tensor::Vec<std::string>(serialized))
      .Input(Tensor::Vec<std::string>({}))
      .Input(Tensor::Vec<std::string>(keys))
      .Input(Tensor::Vec<std::string>({}))
      .Input(Tensor::Vec<std::string>({}));
  return op;
}

TEST(ParseExampleV2Test, UnpackedListsAndNegativeVarintsParse) {
  const std::string unpacked_floats =
      Field(2, Varint(1 << 3 | 5) + Fixed32(1.5f) + Varint(1 << 3 | 5) + Fixed32(-2.0f));
  const std::string unpacked_ints =
      Field(3, Varint(1 << 3) + Varint(static_cast<uint64_t>(int64_t{-3})) + Varint(1 << 3) +
                   Varint(uint64_t{1} << 40));
  OpTest floats = SparseParse({MakeExample({{"f", unpacked_floats}})}, "f", DT_FLOAT);
  std::vector<Tensor> out = OutputsOf(floats);
  ASSERT_EQ(out.size(), 3u);
  ExpectTensorEq<float>(out[1], {1.5f, -2.0f}, TensorShape({2}));
  OpTest ints = SparseParse(
      {MakeExample({{"i", unpacked_ints}}), MakeExample({{"i", PackedInt64s({-1, 0, 7})}})}, "i",
      DT_INT64);
  out = OutputsOf(ints);
  ASSERT_EQ(out.size(), 3u);
  ExpectTensorEq<int64_t>(out[0], {0, 0, 0, 1, 1, 0, 1, 1, 1, 2}, TensorShape({5, 2}));
  ExpectTensorEq<int64_t>(out[1], {-3, int64_t{1} << 40, -1, 0, 7}, TensorShape({5}));
  ExpectTensorEq<int64_t>(out[2], {2, 3}, TensorShape({2}));
}

// TensorFlow silently reads a packed float list whose length is not a
// multiple of 4 as shorter; dflow refuses the corrupt record.
TEST(ParseExampleV2Test, CorruptListsAreInvalidArgumentNamingKeyAndRecord) {
  const std::string good = MakeExample({{"f", PackedFloats({1.0f})}});
  const std::string odd = MakeExample({{"f", Field(2, Field(1, std::string("\0\0\x80", 3)))}});
  OpTest odd_floats = SparseParse({good, odd}, "f", DT_FLOAT);
  EXPECT_THAT(InvalidArgumentOf(odd_floats), HasSubstr("Key: f, Index: 1."));
  const std::string cut_varint = MakeExample({{"i", Field(3, Field(1, "\x81"))}});
  OpTest ints = SparseParse({cut_varint}, "i", DT_INT64);
  EXPECT_THAT(InvalidArgumentOf(ints), HasSubstr("Key: i, Index: 0."));
  // A truncated record, and a group (wire type 3) where a feature map should be.
  std::string truncated = good.substr(0, good.size() - 2);
  OpTest cut = SparseParse({good, truncated}, "f", DT_FLOAT);
  EXPECT_THAT(InvalidArgumentOf(cut), HasSubstr("Index: 1.  Could not parse example input"));
  OpTest group = SparseParse({Varint(1 << 3 | 3)}, "f", DT_FLOAT);
  EXPECT_THAT(InvalidArgumentOf(group), HasSubstr("Could not parse example input"));
}

// 3000 examples: the batch is split over the intra-op pool; every example's
// dense row and sparse values land in order, and the first bad record (not
// the one a faster shard finds) is the one reported.
TEST(ParseExampleV2Test, LargeBatchesParseInOrder) {
  const int n = 3000;
  std::vector<std::string> records;
  for (int i = 0; i < n; ++i) {
    std::vector<int64_t> tags(i % 3, i);
    records.push_back(
        MakeExample({{"x", PackedFloats({static_cast<float>(i), -static_cast<float>(i)})},
                     {"tags", PackedInt64s(tags)},
                     {"name", Field(1, Field(1, absl::StrCat("n", i)))}}));
  }
  auto build = [&](const std::vector<std::string>& serialized) {
    OpTest op("ParseExampleV2");
    op.Attr("num_sparse", 1)
        .Attr("sparse_types", std::vector<DataType>{DT_INT64})
        .Attr("Tdense", std::vector<DataType>{DT_FLOAT, DT_STRING})
        .Attr("ragged_value_types", std::vector<DataType>{})
        .Attr("ragged_split_types", std::vector<DataType>{});
    auto* shapes = (*op.node_def().mutable_attr())["dense_shapes"].mutable_list();
    shapes->add_shape()->add_dim()->set_size(2);
    shapes->add_shape();
    op.Input(Tensor::Vec<std::string>(serialized))
        .Input(Tensor::Vec<std::string>({}))
        .Input(Tensor::Vec<std::string>({"tags"}))
        .Input(Tensor::Vec<std::string>({"x", "name"}))
        .Input(Tensor::Vec<std::string>({}))
        .Input(Tensor::Vec<float>({}))
        .Input(Tensor::Vec<std::string>({}));
    return op;
  };
  OpTest op = build(records);
  std::vector<Tensor> out = OutputsOf(op);
  ASSERT_EQ(out.size(), 5u);
  auto x = out[3].flat<float>();
  auto names = out[4].flat<std::string>();
  ASSERT_EQ(out[3].shape(), TensorShape({n, 2}));
  int64_t k = 0;
  for (int i = 0; i < n; ++i) {
    ASSERT_EQ(x[2 * i], i);
    ASSERT_EQ(x[2 * i + 1], -i);
    ASSERT_EQ(names[i], absl::StrCat("n", i));
    for (int t = 0; t < i % 3; ++t, ++k) {
      ASSERT_EQ(out[0].flat<int64_t>()[2 * k], i);
      ASSERT_EQ(out[0].flat<int64_t>()[2 * k + 1], t);
      ASSERT_EQ(out[1].flat<int64_t>()[k], i);
    }
  }
  EXPECT_EQ(k, out[1].NumElements());
  ExpectTensorEq<int64_t>(out[2], {n, 2}, TensorShape({2}));

  records[2100] = MakeExample({{"x", PackedFloats({1.0f})}});
  records[2900] = "not an example";
  OpTest bad = build(records);
  EXPECT_THAT(InvalidArgumentOf(bad), HasSubstr("Key: x, Index: 2100."));
}

// One kernel, key inputs that change between steps: each step parses its own keys.
TEST(ParseExampleV2Test, AKernelFollowsItsKeyInputs) {
  const std::string record =
      MakeExample({{"a", PackedFloats({1.0f})}, {"b", PackedFloats({2.0f, 3.0f})}});
  OpTest op = SparseParse({record}, "a", DT_FLOAT);
  auto kernel = MakeKernel(op.node_def(), TestCpuDevice());
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  auto run = [&](const std::string& key) {
    std::vector<Tensor> ins = {Tensor::Vec<std::string>({record}), Tensor::Vec<std::string>({}),
                               Tensor::Vec<std::string>({key}), Tensor::Vec<std::string>({}),
                               Tensor::Vec<std::string>({})};
    auto out = RunKernel(kernel->get(), TestCpuDevice(), ins);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? (*out)[1].NumElements() : -1;
  };
  EXPECT_EQ(run("a"), 1);
  EXPECT_EQ(run("b"), 2);
  EXPECT_EQ(run("c"), 0);
  EXPECT_EQ(run("a"), 1);
}

TEST(ParseExampleV2Test, KeyCountsMustMatchTheAttrs) {
  OpTest op = SparseParse({MakeExample({})}, "", DT_FLOAT, {"a", "b"});
  EXPECT_THAT(InvalidArgumentOf(op),
              HasSubstr("Expected len(sparse_keys) to match the number of sparse_keys attrs: 1"));
}

TEST(ParseExampleV2Test, ShapesFollowTheBatch) {
  tensorflow::NodeDef node;
  node.set_op("ParseExampleV2");
  SetAttr(&node, "num_sparse", 1);
  SetAttr(&node, "sparse_types", std::vector<DataType>{DT_INT64});
  SetAttr(&node, "Tdense", std::vector<DataType>{DT_FLOAT});
  SetAttr(&node, "ragged_value_types", std::vector<DataType>{DT_FLOAT});
  SetAttr(&node, "ragged_split_types", std::vector<DataType>{DT_INT64});
  auto* shape = (*node.mutable_attr())["dense_shapes"].mutable_list()->add_shape();
  shape->add_dim()->set_size(2);
  shape->add_dim()->set_size(3);
  const std::vector<PartialShape> ins = {PartialShape({kUnknownDim}), PartialShape({0}),
                                         PartialShape({1}),           PartialShape({1}),
                                         PartialShape({1}),           PartialShape({2, 3})};
  auto batch = Infer(node, ins);
  ASSERT_TRUE(batch.ok()) << batch.status();
  ASSERT_EQ(batch->size(), 6u);
  EXPECT_EQ((*batch)[0], PartialShape({kUnknownDim, 2}));     // sparse indices
  EXPECT_EQ((*batch)[2], PartialShape({2}));                  // sparse dense shape
  EXPECT_EQ((*batch)[3], PartialShape({kUnknownDim, 2, 3}));  // dense
  EXPECT_EQ((*batch)[5], PartialShape({kUnknownDim}));        // row splits
  std::vector<PartialShape> scalar_ins = ins;
  scalar_ins[0] = PartialShape::Scalar();
  auto single = Infer(node, scalar_ins);
  ASSERT_TRUE(single.ok()) << single.status();
  EXPECT_EQ((*single)[0], PartialShape({kUnknownDim, 1}));
  EXPECT_EQ((*single)[3], PartialShape({2, 3}));
  EXPECT_EQ((*single)[5], PartialShape({0}));
  std::vector<PartialShape> fixed_ins = ins;
  fixed_ins[0] = PartialShape({4});
  auto fixed = Infer(node, fixed_ins);
  ASSERT_TRUE(fixed.ok()) << fixed.status();
  EXPECT_EQ((*fixed)[5], PartialShape({5}));
  std::vector<PartialShape> matrix_ins = ins;
  matrix_ins[0] = PartialShape({2, 2});
  EXPECT_FALSE(Infer(node, matrix_ins).ok());
}

}  // namespace
}  // namespace dflow
