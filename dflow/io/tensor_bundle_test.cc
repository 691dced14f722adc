#include "dflow/io/tensor_bundle.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dflow/io/table.h"
#include "dflow/io/test_util.h"

namespace dflow::io {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

template <typename T>
std::vector<T> Values(const Tensor& t) {
  auto f = t.flat<T>();
  return std::vector<T>(f.begin(), f.end());
}

Tensor Range(int64_t rows, int64_t cols, float base = 0) {
  Tensor t(DT_FLOAT, TensorShape({rows, cols}));
  for (int64_t i = 0; i < t.NumElements(); ++i) t.flat<float>()[i] = base + i;
  return t;
}

void WriteOrDie(const std::string& prefix,
                const std::vector<std::pair<std::string, Tensor>>& tensors) {
  auto w = BundleWriter::Create(prefix);
  ASSERT_TRUE(w.ok()) << w.status();
  for (const auto& [key, t] : tensors) ASSERT_TRUE((*w)->Add(key, t).ok()) << key;
  ASSERT_TRUE((*w)->Finish().ok());
}

TEST(TensorBundleTest, EveryDtypeRoundTrips) {
  TempDir dir;
  const std::string prefix = dir.path() + "/sub/model";
  const std::string big(300, 'z');
  WriteOrDie(prefix, {
      {"f", Tensor::FromVector<float>({1.5f, -2.f, 0.1f}, TensorShape({3}))},
      {"d", Tensor::Scalar<double>(1.0 / 3)},
      {"i", Tensor::FromVector<int32_t>({1, -2, 3, 4, 5, 6}, TensorShape({2, 3}))},
      {"l", Tensor::Vec<int64_t>({int64_t{1} << 40, -1})},
      {"u", Tensor::Vec<uint8_t>({0, 255})},
      {"b", Tensor::Vec<bool>({true, false, true})},
      {"s", Tensor::Vec<std::string>({"", "h\xc3\xa9llo", std::string("\0\xff", 2), big})},
      {"empty", Tensor(DT_FLOAT, TensorShape({0, 3}))},
  });
  EXPECT_TRUE(FileExists(prefix + ".index"));
  EXPECT_TRUE(FileExists(prefix + ".data-00000-of-00001"));
  auto r = BundleReader::Open(prefix);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->Tensors().size(), 8u);
  EXPECT_THAT(Values<float>(*(*r)->Read("f")), ElementsAre(1.5f, -2.f, 0.1f));
  EXPECT_EQ((*r)->Read("d")->scalar<double>(), 1.0 / 3);
  EXPECT_EQ((*r)->Read("i")->shape(), TensorShape({2, 3}));
  EXPECT_THAT(Values<int64_t>(*(*r)->Read("l")), ElementsAre(int64_t{1} << 40, -1));
  EXPECT_THAT(Values<uint8_t>(*(*r)->Read("u")), ElementsAre(0, 255));
  EXPECT_THAT(Values<bool>(*(*r)->Read("b")), ElementsAre(true, false, true));
  EXPECT_THAT(Values<std::string>(*(*r)->Read("s")),
              ElementsAre("", "h\xc3\xa9llo", std::string("\0\xff", 2), big));
  EXPECT_EQ((*r)->Read("empty")->shape(), TensorShape({0, 3}));
  absl::Status missing = (*r)->Read("nope").status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.message(), HasSubstr("Key nope not found in checkpoint " + prefix));
}

TEST(TensorBundleTest, DuplicateKeysAndResourcesAreRefusedAndPoisonTheWriter) {
  TempDir dir;
  auto w = BundleWriter::Create(dir.path() + "/m");
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->Add("x", Tensor::Scalar<float>(1)).ok());
  absl::Status s = (*w)->Add("x", Tensor::Scalar<float>(2));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'x' is added twice"));
  EXPECT_FALSE((*w)->Finish().ok());
  EXPECT_FALSE(FileExists(dir.path() + "/m.index"));

  auto w2 = BundleWriter::Create(dir.path() + "/m2");
  s = (*w2)->Add("h", Tensor(DT_RESOURCE, TensorShape()));
  EXPECT_THAT(s.message(), HasSubstr("dtype resource"));
}

// A [10, 4] variable saved as three row slices, as a partitioned variable is.
void WritePartitioned(const std::string& prefix, const Tensor& full,
                      const std::vector<std::pair<int64_t, int64_t>>& rows) {
  auto w = BundleWriter::Create(prefix);
  ASSERT_TRUE(w.ok());
  for (auto [start, length] : rows) {
    Tensor part = Range(length, 4, full.flat<float>()[start * 4]);
    auto slice = TensorSlice::Parse(absl::StrCat(start, ",", length, ":-"));
    ASSERT_TRUE((*w)->AddSlice("emb", full.shape(), *slice, part).ok());
  }
  ASSERT_TRUE((*w)->Finish().ok());
}

TEST(TensorBundleTest, SlicesAssembleIntoTheFullTensorAndAnySliceOfIt) {
  TempDir dir;
  const std::string prefix = dir.path() + "/p";
  const Tensor full = Range(10, 4);
  WritePartitioned(prefix, full, {{0, 4}, {4, 3}, {7, 3}});
  auto r = BundleReader::Open(prefix);
  ASSERT_TRUE(r.ok()) << r.status();
  auto tensors = (*r)->Tensors();
  ASSERT_EQ(tensors.size(), 1u);  // The slice keys are not tensors of their own.
  EXPECT_EQ(tensors["emb"].slices_size(), 3);
  absl::StatusOr<Tensor> back = (*r)->Read("emb");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(Values<float>(*back), Values<float>(full));
  // Rows 2-5, columns 1-2: spans the first two stored slices.
  absl::StatusOr<Tensor> part = (*r)->ReadSlice("emb", *TensorSlice::Parse("2,4:1,2"));
  ASSERT_TRUE(part.ok()) << part.status();
  EXPECT_EQ(part->shape(), TensorShape({4, 2}));
  EXPECT_THAT(Values<float>(*part), ElementsAre(9, 10, 13, 14, 17, 18, 21, 22));
  EXPECT_FALSE((*r)->ReadSlice("emb", *TensorSlice::Parse("8,4:-")).ok());  // Leaves it.
}

TEST(TensorBundleTest, MissingSlicesAreReported) {
  TempDir dir;
  const std::string prefix = dir.path() + "/p";
  WritePartitioned(prefix, Range(10, 4), {{0, 4}, {7, 3}});  // Rows 4-6 never saved.
  auto r = BundleReader::Open(prefix);
  absl::Status s = (*r)->Read("emb").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("do not cover"));
}

TEST(TensorBundleTest, SliceKeysAreTensorFlowsOrderedCode) {
  // EncodeTensorNameSlice("emb", "0,4:-"): 0, the escaped name, the rank 2,
  // then start 0 and length 4, start 0 and length -1 (a full extent).
  EXPECT_EQ(EncodeTensorNameSlice("emb", *TensorSlice::Parse("0,4:-")),
            std::string("\x00" "emb\x00\x01" "\x01\x02" "\x80\x84" "\x80\x7f", 12));
  // Numbers past 63 take more bytes; NUL and 0xff in names are escaped.
  EXPECT_EQ(EncodeTensorNameSlice(std::string("a\0\xff", 3), *TensorSlice::Parse("1000,70")),
            std::string("\x00" "a\x00\xff\xff\x00\x00\x01" "\x01\x01" "\xc3\xe8" "\xc0\x46",
                        14));
}

TEST(TensorBundleTest, ShardedSavesMerge) {
  TempDir dir;
  const std::string tmp0 = dir.path() + "/model_temp/part-00000-of-00002";
  const std::string tmp1 = dir.path() + "/model_temp/part-00001-of-00002";
  WriteOrDie(tmp0, {{"a", Tensor::Scalar<float>(1)}, {"c", Tensor::Scalar<float>(3)}});
  WriteOrDie(tmp1, {{"b", Tensor::Vec<std::string>({"x", "yz"})}});
  const std::string merged = dir.path() + "/model";
  ASSERT_TRUE(MergeBundles({tmp0, tmp1}, merged, /*delete_old_dirs=*/true,
                           /*allow_missing_files=*/false)
                  .ok());
  EXPECT_FALSE(FileExists(dir.path() + "/model_temp"));  // Emptied and removed.
  EXPECT_TRUE(FileExists(merged + ".data-00001-of-00002"));
  auto r = BundleReader::Open(merged);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->num_shards(), 2);
  EXPECT_EQ((*r)->Read("c")->scalar<float>(), 3);
  EXPECT_THAT(Values<std::string>(*(*r)->Read("b")), ElementsAre("x", "yz"));

  // The same tensor in two bundles is an error; a missing one may be skipped.
  WriteOrDie(tmp0, {{"a", Tensor::Scalar<float>(1)}});
  WriteOrDie(tmp1, {{"a", Tensor::Scalar<float>(2)}});
  absl::Status s = MergeBundles({tmp0, tmp1}, merged, true, false);
  EXPECT_THAT(s.message(), HasSubstr("'a' is in more than one"));
  ASSERT_TRUE(MergeBundles({tmp0, dir.path() + "/none"}, merged, true, true).ok());
  EXPECT_FALSE(MergeBundles({dir.path() + "/none"}, merged, true, false).ok());
}

TEST(TensorBundleTest, CorruptDataIsDataLossNamingFileAndTensor) {
  TempDir dir;
  const std::string prefix = dir.path() + "/m";
  WriteOrDie(prefix, {{"w", Range(4, 4)}, {"s", Tensor::Vec<std::string>({"ab", "cd"})}});
  const std::string data_path = prefix + ".data-00000-of-00001";
  const std::string good = ReadFileOrDie(data_path);
  auto r = BundleReader::Open(prefix);
  ASSERT_TRUE(r.ok());
  const tensorflow::BundleEntryProto s_entry = *(*r)->Entry("s");
  const tensorflow::BundleEntryProto w_entry = *(*r)->Entry("w");
  ASSERT_EQ(w_entry.offset(), 0);  // Data is written in the order of Add.

  std::string flipped = good;
  flipped[s_entry.offset() + 2] ^= 1;  // The checksum of the string lengths.
  WriteFileOrDie(data_path, flipped);
  r = BundleReader::Open(prefix);
  absl::Status s = (*r)->Read("s").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(s.message(), HasSubstr("tensor 's'"));
  EXPECT_THAT(s.message(), HasSubstr(data_path));
  EXPECT_TRUE((*r)->Read("w").ok());

  flipped = good;
  flipped[s_entry.offset() + s_entry.size() - 1] ^= 1;  // The last byte of "cd".
  WriteFileOrDie(data_path, flipped);
  r = BundleReader::Open(prefix);
  EXPECT_THAT((*r)->Read("s").status().message(), HasSubstr("checksum mismatch"));

  flipped = good;
  flipped[w_entry.size() - 1] ^= 1;  // The last float of "w".
  WriteFileOrDie(data_path, flipped);
  r = BundleReader::Open(prefix);
  s = (*r)->Read("w").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("checksum mismatch"));

  WriteFileOrDie(data_path, good.substr(0, good.size() - 2));
  r = BundleReader::Open(prefix);
  s = (*r)->Read("s").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("truncated"));

  ASSERT_EQ(::unlink(data_path.c_str()), 0);
  r = BundleReader::Open(prefix);
  s = (*r)->Read("w").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("data shard 0 of 1"));
}

// Tensors from 8 MiB on are read and checksummed in two halves on two
// threads: their values and their corruption, in either half and at the
// seam, are found the same way.
TEST(TensorBundleTest, LargeTensorsReadWhileCheckedAndCorruptionIsFound) {
  TempDir dir;
  const std::string prefix = dir.path() + "/m";
  const Tensor big = Range(1024, 2561, 0.5f);  // 10.004 MiB: 10 whole chunks and a partial one.
  WriteOrDie(prefix, {{"big", big}});
  auto r = BundleReader::Open(prefix);
  ASSERT_TRUE(r.ok());
  absl::StatusOr<Tensor> back = (*r)->Read("big");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(Values<float>(*back), Values<float>(big));

  const std::string data_path = prefix + ".data-00000-of-00001";
  const std::string good = ReadFileOrDie(data_path);
  const size_t seam = good.size() / 2;  // The file holds only this tensor.
  for (const size_t at : {size_t{0}, seam - 1, seam, good.size() - 1}) {
    std::string flipped = good;
    flipped[at] ^= 1;
    WriteFileOrDie(data_path, flipped);
    r = BundleReader::Open(prefix);
    const absl::Status s = (*r)->Read("big").status();
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << "byte " << at << ": " << s;
    EXPECT_THAT(s.message(), HasSubstr("checksum mismatch"));
  }
}

TEST(TensorBundleTest, NewerFormatVersionIsRefusedWithItsVersion) {
  TempDir dir;
  const std::string prefix = dir.path() + "/m";
  tensorflow::BundleHeaderProto header;
  header.set_num_shards(1);
  header.mutable_version()->set_producer(7);
  header.mutable_version()->set_min_consumer(5);
  auto t = TableWriter::Create(prefix + ".index");
  ASSERT_TRUE((*t)->Add("", header.SerializeAsString()).ok());
  ASSERT_TRUE((*t)->Finish().ok());
  absl::Status s = BundleReader::Open(prefix).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("producer 7, min_consumer 5"));
}

TEST(TensorBundleTest, UnwritableDirectoryFailsWithThePathAndKeepsTheOldCheckpoint) {
  TempDir dir;  // A path under a regular file fails even for root.
  const std::string prefix = dir.path() + "/m";
  WriteOrDie(prefix, {{"w", Tensor::Scalar<float>(1)}});
  WriteFileOrDie(dir.path() + "/file", "x");
  absl::Status s = BundleWriter::Create(dir.path() + "/file/sub/m").status();
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr(dir.path() + "/file"));
  auto r = BundleReader::Open(prefix);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)->Read("w")->scalar<float>(), 1);
}

// A disk that refuses more bytes mid-save (here the process's file-size
// limit, which fails write() as a full disk does, with the signal ignored):
// the save fails naming the file, leaves nothing under its prefix, and the
// previous checkpoint still loads.
TEST(TensorBundleTest, DiskFullMidSaveFailsWithThePathAndKeepsTheOldCheckpoint) {
  TempDir dir;
  WriteOrDie(dir.path() + "/m", {{"w", Tensor::Scalar<float>(1)}});
  struct rlimit old_limit;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  struct rlimit limit = old_limit;
  limit.rlim_cur = 256 << 10;
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &limit), 0);
  absl::Status s;
  {
    auto w = BundleWriter::Create(dir.path() + "/m2");
    s = w.status();
    if (s.ok()) s = (*w)->Add("big", Tensor(DT_FLOAT, TensorShape({1 << 20})));  // 4 MiB
    if (s.ok()) s = (*w)->Finish();
  }
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &old_limit), 0);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(s.message(), HasSubstr(dir.path() + "/m2"));
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
    EXPECT_FALSE(absl::StartsWith(entry.path().filename().string(), "m2")) << entry.path();
  }
  auto r = BundleReader::Open(dir.path() + "/m");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)->Read("w")->scalar<float>(), 1);
}

}  // namespace
}  // namespace dflow::io
