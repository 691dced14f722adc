// SaveV2, RestoreV2 and MergeV2Checkpoints as TensorFlow's Saver drives them.
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "dflow/io/file.h"
#include "dflow/io/test_util.h"
#include "dflow/ops/op_test_util.h"

namespace dflow {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

Tensor Strings(const std::vector<std::string>& v) { return Tensor::Vec<std::string>(v); }

absl::Status Save(const std::string& prefix, const std::vector<std::string>& names,
                  const std::vector<std::string>& slices, const std::vector<Tensor>& tensors) {
  OpTest t("SaveV2");
  std::vector<DataType> dtypes;
  for (const Tensor& x : tensors) dtypes.push_back(x.dtype());
  t.Attr("dtypes", dtypes);
  t.Input(Tensor::Scalar<std::string>(prefix)).Input(Strings(names)).Input(Strings(slices));
  for (const Tensor& x : tensors) t.Input(x);
  return t.Run().status();
}

absl::StatusOr<std::vector<Tensor>> Restore(const std::string& prefix,
                                            const std::vector<std::string>& names,
                                            const std::vector<std::string>& slices,
                                            const std::vector<DataType>& dtypes) {
  OpTest t("RestoreV2");
  t.Attr("dtypes", dtypes);
  t.Input(Tensor::Scalar<std::string>(prefix)).Input(Strings(names)).Input(Strings(slices));
  return t.Run();
}

TEST(CheckpointOpsTest, SaveThenRestoreWholeTensorsAndSlices) {
  io::TempDir dir;
  const std::string prefix = dir.path() + "/model.ckpt-7";
  ASSERT_TRUE(Save(prefix, {"w", "step", "emb", "emb"}, {"", "", "4 2 0,1:-", "4 2 1,3:-"},
                   {Tensor::FromVector<float>({1, 2, 3, 4}, TensorShape({2, 2})),
                    Tensor::Scalar<int64_t>(7),
                    Tensor::FromVector<float>({10, 11}, TensorShape({1, 2})),
                    Tensor::FromVector<float>({12, 13, 14, 15, 16, 17}, TensorShape({3, 2}))})
                  .ok());
  absl::StatusOr<std::vector<Tensor>> out =
      Restore(prefix, {"step", "w", "emb", "emb"}, {"", "", "", "4 2 1,2:1,1"},
              {DT_INT64, DT_FLOAT, DT_FLOAT, DT_FLOAT});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].scalar<int64_t>(), 7);
  ExpectTensorEq<float>((*out)[1], {1, 2, 3, 4}, TensorShape({2, 2}));
  ExpectTensorEq<float>((*out)[2], {10, 11, 12, 13, 14, 15, 16, 17}, TensorShape({4, 2}));
  ExpectTensorEq<float>((*out)[3], {13, 15}, TensorShape({2, 1}));
}

TEST(CheckpointOpsTest, ShardedSaveMergesIntoOneCheckpoint) {
  io::TempDir dir;
  const std::string part0 = dir.path() + "/m_temp/part-00000-of-00002";
  const std::string part1 = dir.path() + "/m_temp/part-00001-of-00002";
  ASSERT_TRUE(Save(part0, {"a"}, {""}, {Tensor::Scalar<float>(1)}).ok());
  ASSERT_TRUE(Save(part1, {"b"}, {""}, {Strings({"x", ""})}).ok());
  OpTest merge("MergeV2Checkpoints");
  merge.Input(Strings({part0, part1})).Input(Tensor::Scalar<std::string>(dir.path() + "/m"));
  ASSERT_TRUE(merge.Run().ok());
  EXPECT_FALSE(io::FileExists(dir.path() + "/m_temp"));
  absl::StatusOr<std::vector<Tensor>> out =
      Restore(dir.path() + "/m", {"a", "b"}, {"", ""}, {DT_FLOAT, DT_STRING});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].scalar<float>(), 1);
  EXPECT_EQ((*out)[1].flat<std::string>()[0], "x");
}

TEST(CheckpointOpsTest, MismatchesNameTheTensor) {
  io::TempDir dir;
  const std::string prefix = dir.path() + "/m";
  ASSERT_TRUE(Save(prefix, {"v"}, {""}, {Tensor::Vec<float>({1, 2, 3})}).ok());
  absl::Status s = Restore(prefix, {"v"}, {""}, {DT_INT32}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("tensor_name = v; expected dtype int32 does not equal "
                                     "original dtype float"));
  s = Restore(prefix, {"v"}, {"4 0,2"}, {DT_FLOAT}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("spec [4] does not match the shape stored in checkpoint: [3]"));
  s = Restore(prefix, {"nope"}, {""}, {DT_FLOAT}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  s = Restore(dir.path() + "/missing", {"v"}, {""}, {DT_FLOAT}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("missing.index"));
  s = Save(prefix, {"v"}, {"2 0,2"}, {Tensor::Vec<float>({1, 2, 3})});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("tensor 'v'"));
  s = Save(prefix, {"v", "w"}, {""}, {Tensor::Vec<float>({1})});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dflow
