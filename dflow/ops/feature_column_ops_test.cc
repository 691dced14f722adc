// StringToHashBucketFast, Bucketize and SparseCross against TensorFlow 2.21's
// values (SparseCross's: tests/data/sparse_cross_golden.json, written by
// tests/data/gen_sparse_cross_reference.py).
#include <cmath>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "dflow/framework/test_data_dir.h"
#include "dflow/ops/op_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace dflow {
namespace {

using ::testing::HasSubstr;

// Strings of every length class FarmHash treats apart (0, 1-3, 4-7, 8-16,
// 17-32, 33-64, over 64, a multiple of 64 and one more).
std::vector<std::string> Strings() {
  std::string alpha200, mixed128;
  for (int i = 0; i < 200; ++i) alpha200 += static_cast<char>('a' + i % 26);
  for (int i = 0; i < 128; ++i) mixed128 += static_cast<char>('A' + i % 50);
  return {"",
          "a",
          "ab",
          "abc",
          "abcd",
          "hello",
          "abcdefgh",
          "abcdefghijklmno",
          "abcdefghijklmnop",
          "abcdefghijklmnopq",
          std::string(32, 'x'),
          std::string(33, 'y'),
          "The quick brown fox jumps over the lazy dog",
          std::string(64, 'z'),
          std::string(65, 'w'),
          alpha200,
          mixed128};
}

absl::StatusOr<std::vector<Tensor>> HashBuckets(int64_t num_buckets) {
  OpTest t("StringToHashBucketFast");
  t.Attr("num_buckets", num_buckets).Input(Tensor::Vec<std::string>(Strings()));
  return t.Run();
}

TEST(FeatureColumnOpsTest, StringToHashBucketFastEqualsTensorFlow) {
  // TensorFlow's values: with 2^62 buckets they show most of Fingerprint64.
  auto out = HashBuckets(int64_t{1} << 62);
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<int64_t>(
      (*out)[0],
      {1936946117179621455, 3694432073954588131, 3066228220894225694, 2640714258260161385,
       1897425971756105985, 3786372426573024488, 4533385575889643785, 2917765375149681693,
       1469030743107030717, 2171023947900359592, 3678204687145032709, 3999049019338133246,
       3152101869897863476, 294799756062990872, 3272011567211491968, 2725806534515858166,
       1885757196261434800},
      {17});
  out = HashBuckets(1000);
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<int64_t>(
      (*out)[0],
      {263, 939, 502, 385, 985, 296, 497, 597, 621, 400, 517, 150, 284, 872, 776, 166, 800}, {17});
  OpTest one("StringToHashBucketFast");  // One bucket: all zero; shape kept.
  one.Attr("num_buckets", int64_t{1})
      .Input(Tensor::FromVector<std::string>({"a", "b", "c", "d"}, {2, 2}));
  out = one.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<int64_t>((*out)[0], {0, 0, 0, 0}, {2, 2});
  OpTest zero("StringToHashBucketFast");
  zero.Attr("num_buckets", int64_t{0}).Input(Tensor::Vec<std::string>({"a"}));
  EXPECT_FALSE(zero.Run().ok());  // num_buckets >= 1.
}

absl::StatusOr<std::vector<Tensor>> Bucketize(const Tensor& input,
                                              const std::vector<float>& boundaries) {
  OpTest t("Bucketize");
  t.Attr("T", input.dtype()).Input(input);
  auto* list = (*t.node_def().mutable_attr())["boundaries"].mutable_list();
  for (float b : boundaries) list->add_f(b);
  return t.Run();
}

TEST(FeatureColumnOpsTest, BucketizeEqualsTensorFlow) {
  // TensorFlow's values: a value equal to a boundary goes above it.
  auto out =
      Bucketize(Tensor::FromVector<float>({-5, 0, 4.5f, 10, 18, 30.5f}, {2, 3}), {0, 10, 18, 30});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<int32_t>((*out)[0], {0, 1, 1, 2, 3, 4}, {2, 3});
  out = Bucketize(Tensor::Vec<int32_t>({-1, 3, 7}), {3, 5});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<int32_t>((*out)[0], {0, 1, 2}, {3});
  out = Bucketize(Tensor::Vec<double>({NAN, INFINITY, -INFINITY}), {3, 5});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<int32_t>((*out)[0], {2, 2, 0}, {3});
  out = Bucketize(Tensor::Vec<int64_t>({4}), {});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<int32_t>((*out)[0], {0}, {1});
  EXPECT_THAT(Bucketize(Tensor::Vec<float>({1}), {5, 3}).status().message(),
              HasSubstr("Expected sorted boundaries"));
}

// --- SparseCross ----------------------------------------------------------------------

using json = nlohmann::json;

Tensor TensorFromJson(const json& j) {
  const TensorShape shape(j["shape"].get<std::vector<int64_t>>());
  if (j["dtype"] == "string") {
    return Tensor::FromVector<std::string>(j["values"].get<std::vector<std::string>>(), shape);
  }
  EXPECT_EQ(j["dtype"], "int64");
  return Tensor::FromVector<int64_t>(j["values"].get<std::vector<int64_t>>(), shape);
}

DataType TypeFromJson(const json& j) { return j == "string" ? DT_STRING : DT_INT64; }

// The SparseCross node of a golden case, fed its inputs.
OpTest CrossOf(const json& c) {
  OpTest t("SparseCross", "cross");
  const json& attrs = c["attrs"];
  t.Attr("N", static_cast<int64_t>(c["indices"].size()))
      .Attr("hashed_output", attrs["hashed_output"].get<bool>())
      .Attr("num_buckets", attrs["num_buckets"].get<int64_t>())
      .Attr("hash_key", attrs["hash_key"].get<int64_t>())
      .Attr("out_type", TypeFromJson(attrs["out_type"]))
      .Attr("internal_type", TypeFromJson(attrs["internal_type"]));
  auto* sparse_types = (*t.node_def().mutable_attr())["sparse_types"].mutable_list();
  auto* dense_types = (*t.node_def().mutable_attr())["dense_types"].mutable_list();
  for (const json& v : c["values"]) sparse_types->add_type(TypeFromJson(v["dtype"]));
  for (const json& d : c["dense"]) dense_types->add_type(TypeFromJson(d["dtype"]));
  for (const char* list : {"indices", "values", "shapes", "dense"}) {
    for (const json& tensor : c[list]) t.Input(TensorFromJson(tensor));
  }
  return t;
}

json LoadCrossCases() {
  std::ifstream in(TestDataDir() + "/sparse_cross_golden.json");
  EXPECT_TRUE(in.good()) << "missing tests/data/sparse_cross_golden.json";
  return in.good() ? json::parse(in)["cases"] : json::array();
}

void ExpectEqualToJson(const Tensor& got, const json& want) {
  const Tensor w = TensorFromJson(want);
  ASSERT_EQ(got.dtype(), w.dtype()) << got.DebugString();
  ASSERT_EQ(got.shape(), w.shape()) << got.DebugString();
  for (int64_t i = 0; i < w.NumElements(); ++i) {
    EXPECT_EQ(got.ValueString(i), w.ValueString(i)) << "element " << i;
  }
}

// Hashed and joined crosses of string and int64, dense and sparse inputs,
// rows with different numbers of features and empty rows; TensorFlow's bad
// inputs give its errors, naming the node. TensorFlow writes two dtypes as
// enum numbers ("internal type 7 but received 9"): dflow names them.
TEST(FeatureColumnOpsTest, SparseCrossEqualsTensorFlow) {
  const json cases = LoadCrossCases();
  EXPECT_GE(cases.size(), 24u);
  for (const json& c : cases) {
    SCOPED_TRACE(c["name"].get<std::string>());
    OpTest t = CrossOf(c);
    if (c.contains("error")) {
      const std::string message = InvalidArgumentOf(t);
      std::string want = c["error"];
      want = want.substr(0, want.find(" 7 but received 9"));
      EXPECT_THAT(message, HasSubstr("[SparseCross 'cross'] " + want));
      continue;
    }
    const std::vector<Tensor> out = OutputsOf(t);
    ASSERT_EQ(out.size(), 3u);
    for (int i = 0; i < 3; ++i) ExpectEqualToJson(out[i], c["output"][i]);
  }
}

TEST(FeatureColumnOpsTest, SparseCrossNamesTypesInItsErrors) {
  const json cases = LoadCrossCases();
  for (const json& c : cases) {
    if (c["name"] != "string_internal_int64_values") continue;
    OpTest t = CrossOf(c);
    EXPECT_THAT(InvalidArgumentOf(t),
                HasSubstr("Input values should be of internal type string but received int64"));
    return;
  }
  ADD_FAILURE() << "no string_internal_int64_values case";
}

// TensorFlow's shapes: [?, 2] indices, [?] values, a [2] dense shape.
TEST(FeatureColumnOpsTest, SparseCrossShapes) {
  const json cases = LoadCrossCases();
  ASSERT_FALSE(cases.empty());
  OpTest t = CrossOf(cases[0]);  // Two dense columns.
  absl::StatusOr<std::vector<PartialShape>> out =
      Infer(t.node_def(), {PartialShape({kUnknownDim, 2}), PartialShape({kUnknownDim, 1})});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0], PartialShape({kUnknownDim, 2}));
  EXPECT_EQ((*out)[1], PartialShape({kUnknownDim}));
  EXPECT_EQ((*out)[2], PartialShape({2}));
}

// Inputs TensorFlow does not survive: a negative batch size (TensorFlow
// sizes a vector with it) and crosses too many to allocate.
TEST(FeatureColumnOpsTest, SparseCrossRefusesBadSizes) {
  OpTest negative("SparseCross", "cross");
  negative.Attr("N", int64_t{1})
      .Attr("hashed_output", true)
      .Attr("num_buckets", int64_t{10})
      .Attr("hash_key", int64_t{1})
      .Attr("out_type", DT_INT64)
      .Attr("internal_type", DT_INT64);
  (*negative.node_def().mutable_attr())["sparse_types"].mutable_list()->add_type(DT_INT64);
  (*negative.node_def().mutable_attr())["dense_types"].mutable_list();
  negative.Input(Tensor::FromVector<int64_t>({0, 0}, {1, 2}))
      .Input(Tensor::Vec<int64_t>({3}))
      .Input(Tensor::Vec<int64_t>({-1, 4}));
  EXPECT_THAT(
      InvalidArgumentOf(negative),
      HasSubstr("[SparseCross 'cross'] Expected a batch size >= 0, got shapes[0] = [-1,4]"));

  // Eight dense columns of 2^8 features in one row: 2^64 crosses.
  OpTest huge("SparseCross", "cross");
  huge.Attr("N", int64_t{0})
      .Attr("hashed_output", true)
      .Attr("num_buckets", int64_t{10})
      .Attr("hash_key", int64_t{1})
      .Attr("out_type", DT_INT64)
      .Attr("internal_type", DT_INT64);
  (*huge.node_def().mutable_attr())["sparse_types"].mutable_list();
  auto* dense_types = (*huge.node_def().mutable_attr())["dense_types"].mutable_list();
  for (int i = 0; i < 8; ++i) {
    dense_types->add_type(DT_INT64);
    huge.Input(Tensor(DT_INT64, TensorShape({1, 256})));
  }
  absl::StatusOr<std::vector<Tensor>> out = huge.Run();
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted) << out.status();
}

}  // namespace
}  // namespace dflow
