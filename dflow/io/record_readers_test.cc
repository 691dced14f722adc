#include "dflow/io/record_readers.h"

#include <string>
#include <vector>

#include "dflow/io/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflow::io {
namespace {

using ::testing::HasSubstr;

std::vector<std::string> Lines(const std::string& path) {
  auto r = LineReader::Open(path);
  EXPECT_TRUE(r.ok()) << r.status();
  std::vector<std::string> out;
  std::string line;
  absl::Status s;
  while ((s = (*r)->ReadLine(&line)).ok()) out.push_back(line);
  EXPECT_TRUE(absl::IsOutOfRange(s)) << s;
  return out;
}

TEST(LineReaderTest, SplitsAsTensorFlowsTextLineReader) {
  TempDir dir;
  const std::string p = dir.path() + "/t";
  WriteFileOrDie(p, "a\r\nb\n\nlast");
  EXPECT_EQ(Lines(p), (std::vector<std::string>{"a", "b", "", "last"}));
  WriteFileOrDie(p, "x\n");
  EXPECT_EQ(Lines(p), (std::vector<std::string>{"x"}));
  WriteFileOrDie(p, "");
  EXPECT_TRUE(Lines(p).empty());
  WriteFileOrDie(p, std::string(600000, 'z') + "\nq");  // Lines across buffer refills.
  std::vector<std::string> long_lines = Lines(p);
  ASSERT_EQ(long_lines.size(), 2u);
  EXPECT_EQ(long_lines[0].size(), 600000u);
  EXPECT_EQ(long_lines[1], "q");
}

TEST(LineReaderTest, MissingFileIsNotFoundNamingIt) {
  auto r = LineReader::Open("/nonexistent/dflow/file.txt");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("/nonexistent/dflow/file.txt"));
}

TEST(FixedLengthRecordReaderTest, RecordsBetweenHeaderAndFooter) {
  TempDir dir;
  const std::string p = dir.path() + "/f";
  WriteFileOrDie(p, "HHH0123456789F");
  auto r =
      FixedLengthRecordReader::Open(p, {.header_bytes = 3, .record_bytes = 5, .footer_bytes = 1});
  ASSERT_TRUE(r.ok()) << r.status();
  std::string rec;
  ASSERT_TRUE((*r)->ReadRecord(&rec).ok());
  EXPECT_EQ(rec, "01234");
  ASSERT_TRUE((*r)->ReadRecord(&rec).ok());
  EXPECT_EQ(rec, "56789");
  EXPECT_EQ((*r)->record_number(), 2);
  EXPECT_TRUE(absl::IsOutOfRange((*r)->ReadRecord(&rec)));
}

TEST(FixedLengthRecordReaderTest, TruncatedFilesAreInvalidArgumentNamingThem) {
  TempDir dir;
  const std::string p = dir.path() + "/f";
  WriteFileOrDie(p, "0123456");
  auto r = FixedLengthRecordReader::Open(p, {.record_bytes = 2});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("input file \"" + p +
                                              "\" has body length 7 bytes, which is not an exact "
                                              "multiple of the record length (2 bytes)"));
  r = FixedLengthRecordReader::Open(p, {.header_bytes = 5, .record_bytes = 1, .footer_bytes = 5});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr(p + "\" is truncated"));
  r = FixedLengthRecordReader::Open(p, {.record_bytes = 0});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ReadWholeFileTest, ReadsEveryByte) {
  TempDir dir;
  const std::string p = dir.path() + "/w";
  const std::string bytes("a\0b\nc", 5);
  WriteFileOrDie(p, bytes);
  absl::StatusOr<std::string> got = ReadWholeFile(p);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, bytes);
  EXPECT_EQ(ReadWholeFile(dir.path() + "/nope").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace dflow::io
