#include "dflow/io/file.h"

#include <string>
#include <vector>

#include "dflow/io/test_util.h"
#include "gtest/gtest.h"

namespace dflow::io {
namespace {

TEST(MatchFilesTest, SortedMatchesAndEmptyWhenNone) {
  TempDir dir;
  for (const char* name : {"train-2", "train-0", "train-1", "test-0"}) {
    WriteFileOrDie(dir.path() + "/" + name, "x");
  }
  absl::StatusOr<std::vector<std::string>> got = MatchFiles(dir.path() + "/train-*");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, (std::vector<std::string>{dir.path() + "/train-0", dir.path() + "/train-1",
                                            dir.path() + "/train-2"}));
  got = MatchFiles(dir.path() + "/nothing-*");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(got->empty());
  got = MatchFiles("/nonexistent-dflow-dir/*");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(got->empty());
}

}  // namespace
}  // namespace dflow::io
