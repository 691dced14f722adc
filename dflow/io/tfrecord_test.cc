// TFRecord files, plain and GZIP/ZLIB-compressed: TensorFlow's
// (tests/data/tfrecord, written by tests/data/gen_tfrecord_reference.py) read
// back exactly, dflow's written byte for byte as TensorFlow's, and every kind
// of corruption DATA_LOSS.
#include "dflow/io/tfrecord.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "dflow/framework/tensor.h"
#include "dflow/framework/test_data_dir.h"
#include "dflow/io/test_util.h"
#include "nlohmann/json.hpp"

namespace dflow::io {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

const std::string kDir = TestDataDir() + "/tfrecord";

std::vector<std::string> GoldenRecords() {
  std::ifstream in(kDir + "/records.json");
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  std::vector<std::string> out;
  for (const auto& hex : j) out.push_back(absl::HexStringToBytes(hex.get<std::string>()));
  return out;
}

// Every record of `path`, and the status that ended the reading.
std::pair<std::vector<std::string>, absl::Status> ReadAll(
    const std::string& path, TFRecordCompression compression = TFRecordCompression::kNone) {
  std::vector<std::string> records;
  auto reader = TFRecordReader::Open(path, compression);
  if (!reader.ok()) return {records, reader.status()};
  std::string r;
  absl::Status s;
  while ((s = (*reader)->ReadRecord(&r)).ok()) records.push_back(r);
  return {records, s};
}

TEST(TFRecordTest, ReadsTensorFlowsFile) {
  const std::vector<std::string> want = GoldenRecords();
  ASSERT_EQ(want.size(), 7u);
  auto [got, end] = ReadAll(kDir + "/plain.tfrecord");
  EXPECT_TRUE(absl::IsOutOfRange(end)) << end;
  EXPECT_EQ(got, want);
}

TEST(TFRecordTest, EmptyFileHasNoRecords) {
  auto [got, end] = ReadAll(kDir + "/empty.tfrecord");
  EXPECT_TRUE(absl::IsOutOfRange(end)) << end;
  EXPECT_TRUE(got.empty());
}

TEST(TFRecordTest, WritesTensorFlowsBytes) {
  TempDir dir;
  const std::string path = dir.path() + "/out.tfrecord";
  auto w = TFRecordWriter::Create(path);
  ASSERT_TRUE(w.ok()) << w.status();
  for (const std::string& r : GoldenRecords()) ASSERT_TRUE((*w)->Write(r).ok());
  ASSERT_TRUE((*w)->Close().ok());
  EXPECT_EQ(ReadFileOrDie(path), ReadFileOrDie(kDir + "/plain.tfrecord"));
}

TEST(TFRecordTest, MissingFileIsNotFoundNamingIt) {
  auto r = TFRecordReader::Open(kDir + "/no_such.tfrecord");
  EXPECT_TRUE(absl::IsNotFound(r.status())) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("no_such.tfrecord"));
}

// The golden file with `edit` applied; reading it gives the records before
// the damage, then `end`.
class CorruptTFRecordTest : public ::testing::Test {
 protected:
  absl::Status ReadDamaged(const std::function<void(std::string*)>& edit, size_t* good) {
    std::string bytes = ReadFileOrDie(kDir + "/plain.tfrecord");
    edit(&bytes);
    path_ = dir_.path() + "/bad.tfrecord";
    WriteFileOrDie(path_, bytes);
    auto [got, end] = ReadAll(path_);
    *good = got.size();
    return end;
  }
  TempDir dir_;
  std::string path_;
};

// Records 0 ("") and 1 ("a") span 16 and 17 bytes: record 2 starts at 33.
constexpr size_t kRecord2 = 16 + 17;

TEST_F(CorruptTFRecordTest, BadLengthChecksum) {
  size_t good = 0;
  absl::Status s = ReadDamaged([](std::string* b) { (*b)[kRecord2 + 9] ^= 1; }, &good);
  EXPECT_EQ(good, 2u);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_THAT(s.message(),
              AllOf(HasSubstr(path_), HasSubstr("offset 33"), HasSubstr("length's checksum")));
}

TEST_F(CorruptTFRecordTest, BadDataChecksum) {
  size_t good = 0;
  absl::Status s = ReadDamaged([](std::string* b) { (*b)[kRecord2 + 12] ^= 0x20; }, &good);
  EXPECT_EQ(good, 2u);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_THAT(s.message(),
              AllOf(HasSubstr(path_), HasSubstr("offset 33"), HasSubstr("data's checksum")));
}

TEST_F(CorruptTFRecordTest, TruncatedHeader) {
  size_t good = 0;
  absl::Status s = ReadDamaged([](std::string* b) { b->resize(kRecord2 + 5); }, &good);
  EXPECT_EQ(good, 2u);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_THAT(s.message(),
              AllOf(HasSubstr(path_), HasSubstr("truncated record header at offset 33")));
}

TEST_F(CorruptTFRecordTest, TruncatedData) {
  size_t good = 0;
  absl::Status s = ReadDamaged([](std::string* b) { b->resize(kRecord2 + 12 + 4); }, &good);
  EXPECT_EQ(good, 2u);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_THAT(s.message(), AllOf(HasSubstr(path_), HasSubstr("truncated record at offset 33")));
}

TEST_F(CorruptTFRecordTest, RecordOverTheByteLimitIsRefused) {
  const uint64_t limit = TensorByteLimit();
  SetTensorByteLimit(16);
  auto w = TFRecordWriter::Create(dir_.path() + "/big.tfrecord");
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->Write(std::string(100, 'z')).ok());
  ASSERT_TRUE((*w)->Close().ok());
  auto [got, end] = ReadAll(dir_.path() + "/big.tfrecord");
  SetTensorByteLimit(limit);
  EXPECT_TRUE(got.empty());
  EXPECT_TRUE(absl::IsResourceExhausted(end)) << end;
  EXPECT_THAT(end.message(), HasSubstr("100 bytes"));
}

// --- compressed files (compression_type "GZIP" and "ZLIB") ---------------------------

struct CompressedCase {
  const char* file;
  TFRecordCompression compression;
};

class CompressedTFRecordTest : public ::testing::TestWithParam<CompressedCase> {
 protected:
  std::string Golden() const { return kDir + "/" + GetParam().file; }
  TFRecordCompression compression() const { return GetParam().compression; }
  // The golden file with `edit` applied, read to its end: the records before
  // the damage and the status that ended the reading.
  std::pair<std::vector<std::string>, absl::Status> ReadDamaged(
      const std::function<void(std::string*)>& edit) {
    std::string bytes = ReadFileOrDie(Golden());
    edit(&bytes);
    path_ = dir_.path() + "/bad.tfrecord";
    WriteFileOrDie(path_, bytes);
    return ReadAll(path_, compression());
  }
  TempDir dir_;
  std::string path_;
};

TEST_P(CompressedTFRecordTest, ReadsTensorFlowsFile) {
  auto [got, end] = ReadAll(Golden(), compression());
  EXPECT_TRUE(absl::IsOutOfRange(end)) << end;
  EXPECT_EQ(got, GoldenRecords());
}

TEST_P(CompressedTFRecordTest, WritesTensorFlowsBytes) {
  const std::string path = dir_.path() + "/out.tfrecord";
  auto w = TFRecordWriter::Create(path, compression());
  ASSERT_TRUE(w.ok()) << w.status();
  for (const std::string& r : GoldenRecords()) ASSERT_TRUE((*w)->Write(r).ok());
  ASSERT_TRUE((*w)->Close().ok());
  EXPECT_EQ(ReadFileOrDie(path), ReadFileOrDie(Golden()));
  auto [got, end] = ReadAll(path, compression());
  EXPECT_EQ(got, GoldenRecords());
}

// Records and files larger than the streams' 256 KiB chunks, some barely
// compressible, round trip.
TEST_P(CompressedTFRecordTest, LargeRecordsRoundTrip) {
  std::vector<std::string> records = {std::string(700 << 10, 'a'), "small", ""};
  std::string noise(600 << 10, '\0');
  uint64_t x = 88172645463325252ull;
  for (char& c : noise) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    c = static_cast<char>(x);
  }
  records.push_back(noise);
  const std::string path = dir_.path() + "/big.tfrecord";
  auto w = TFRecordWriter::Create(path, compression());
  ASSERT_TRUE(w.ok()) << w.status();
  for (const std::string& r : records) ASSERT_TRUE((*w)->Write(r).ok());
  ASSERT_TRUE((*w)->Close().ok());
  EXPECT_GT(ReadFileOrDie(path).size(), size_t{600} << 10);  // the noise stays big
  auto [got, end] = ReadAll(path, compression());
  EXPECT_TRUE(absl::IsOutOfRange(end)) << end;
  EXPECT_EQ(got, records);
}

TEST_P(CompressedTFRecordTest, ReadAsUncompressedIsDataLoss) {
  auto [got, end] = ReadAll(Golden());
  EXPECT_TRUE(got.empty());
  EXPECT_TRUE(absl::IsDataLoss(end)) << end;
}

TEST_P(CompressedTFRecordTest, TruncatedStreamIsDataLossNamingTheFile) {
  auto [got, end] = ReadDamaged([](std::string* b) { b->resize(b->size() - 20); });
  EXPECT_LT(got.size(), GoldenRecords().size());
  EXPECT_TRUE(absl::IsDataLoss(end)) << end;
  EXPECT_THAT(end.message(), HasSubstr(path_));
  // The error stays: the reader does not resume inside the broken stream.
  auto reader = TFRecordReader::Open(path_, compression());
  ASSERT_TRUE(reader.ok());
  std::string r;
  absl::Status s;
  while ((s = (*reader)->ReadRecord(&r)).ok()) {
  }
  EXPECT_EQ((*reader)->ReadRecord(&r), s);
}

TEST_P(CompressedTFRecordTest, CorruptStreamIsDataLossNamingTheFile) {
  auto [got, end] = ReadDamaged([](std::string* b) {
    for (size_t i = b->size() / 3; i < b->size() / 3 + 8; ++i) (*b)[i] ^= 0x5a;
  });
  EXPECT_LT(got.size(), GoldenRecords().size());
  EXPECT_TRUE(absl::IsDataLoss(end)) << end;
  EXPECT_THAT(end.message(), HasSubstr(path_));
}

TEST_P(CompressedTFRecordTest, BadTrailerChecksumIsDataLoss) {
  auto [got, end] = ReadDamaged([](std::string* b) { b->back() ^= 1; });
  EXPECT_TRUE(absl::IsDataLoss(end)) << end;
  EXPECT_THAT(end.message(), HasSubstr(path_));
}

TEST_P(CompressedTFRecordTest, EmptyFileHasNoRecords) {
  auto [got, end] = ReadAll(kDir + "/empty.tfrecord", compression());
  EXPECT_TRUE(absl::IsOutOfRange(end)) << end;
  EXPECT_TRUE(got.empty());
}

INSTANTIATE_TEST_SUITE_P(GzipAndZlib, CompressedTFRecordTest,
                         ::testing::Values(CompressedCase{"gzip.tfrecord",
                                                          TFRecordCompression::kGzip},
                                           CompressedCase{"zlib.tfrecord",
                                                          TFRecordCompression::kZlib}),
                         [](const auto& info) {
                           return info.param.compression == TFRecordCompression::kGzip
                                      ? std::string("Gzip")
                                      : std::string("Zlib");
                         });

TEST(TFRecordTest, CompressionTypeParsesTensorFlowsNames) {
  EXPECT_EQ(*ParseTFRecordCompression(""), TFRecordCompression::kNone);
  EXPECT_EQ(*ParseTFRecordCompression("GZIP"), TFRecordCompression::kGzip);
  EXPECT_EQ(*ParseTFRecordCompression("ZLIB"), TFRecordCompression::kZlib);
  auto bad = ParseTFRecordCompression("LZ4");
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status()));
  EXPECT_THAT(bad.status().message(), HasSubstr("LZ4"));
}

}  // namespace
}  // namespace dflow::io
