// StringToHashBucketFast and Bucketize against TensorFlow 2.21's values.
#include <cmath>
#include <string>
#include <vector>

#include "dflow/ops/op_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

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

}  // namespace
}  // namespace dflow
