#include "dflow/io/table.h"

#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_format.h"
#include "dflow/io/test_util.h"

namespace dflow::io {
namespace {

using ::testing::HasSubstr;

absl::Status WriteTable(const std::string& path, int n, size_t value_bytes) {
  auto w = TableWriter::Create(path);
  if (!w.ok()) return w.status();
  for (int i = 0; i < n; ++i) {
    absl::Status s = (*w)->Add(absl::StrFormat("key%06d", i), std::string(value_bytes, 'a' + i % 26));
    if (!s.ok()) return s;
  }
  return (*w)->Finish();
}

TEST(TableTest, RoundTripsSmallAndMultiBlockTables) {
  TempDir dir;
  for (int n : {0, 1, 17, 5000}) {  // 5000 x 200 bytes spans several 256 KiB blocks.
    const std::string path = dir.path() + absl::StrFormat("/t%d", n);
    ASSERT_TRUE(WriteTable(path, n, 200).ok());
    absl::StatusOr<std::vector<TableEntry>> entries = ReadTable(path);
    ASSERT_TRUE(entries.ok()) << entries.status();
    ASSERT_EQ(entries->size(), size_t(n));
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ((*entries)[i].key, absl::StrFormat("key%06d", i));
      EXPECT_EQ((*entries)[i].value, std::string(200, 'a' + i % 26));
    }
  }
}

TEST(TableTest, KeysOutOfOrderAreRefused) {
  TempDir dir;
  auto w = TableWriter::Create(dir.path() + "/t");
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->Add("", "header").ok());
  ASSERT_TRUE((*w)->Add("b", "1").ok());
  absl::Status s = (*w)->Add("a", "2");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'a' does not sort after 'b'"));
  EXPECT_FALSE((*w)->Add("b", "again").ok());
}

TEST(TableTest, CorruptFilesAreDataLossNamingTheFile) {
  TempDir dir;
  const std::string path = dir.path() + "/t";
  ASSERT_TRUE(WriteTable(path, 40, 10).ok());
  const std::string good = ReadFileOrDie(path);
  struct Case {
    std::string name;
    std::string bytes;
    std::string error;
  };
  std::string flipped = good;
  flipped[20] ^= 0x40;  // A byte inside the data block.
  std::string bad_magic = good;
  bad_magic[bad_magic.size() - 1] ^= 1;
  for (const Case& c : std::vector<Case>{
           {"flipped", flipped, "checksum mismatch in the data block"},
           {"magic", bad_magic, "bad magic number"},
           {"short", good.substr(0, 30), "less than a footer"},
           {"truncated", good.substr(good.size() / 2), "runs past the end"},
           {"empty", "", "less than a footer"},
       }) {
    WriteFileOrDie(path, c.bytes);
    absl::Status s = ReadTable(path).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << c.name << ": " << s;
    EXPECT_THAT(s.message(), HasSubstr(path)) << c.name;
    EXPECT_THAT(s.message(), HasSubstr(c.error)) << c.name;
  }
  EXPECT_EQ(ReadTable(dir.path() + "/missing").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace dflow::io
