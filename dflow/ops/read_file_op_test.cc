// ReadFile: a file's bytes, and TensorFlow's error codes for a missing file
// and a directory.
#include <cstdio>
#include <filesystem>
#include <string>

#include "dflow/ops/op_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

using ::testing::HasSubstr;

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir ? dir : std::filesystem::temp_directory_path().string();
}

TEST(ReadFileTest, ReturnsTheBytes) {
  const std::string path = TempDir() + "/dflow_read_file_test_" + std::to_string(::getpid());
  const std::string bytes("PNG\0\xff data", 10);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
  OpTest op("ReadFile");
  op.Input(Tensor::Scalar<std::string>(path));
  std::vector<Tensor> out = OutputsOf(op);
  std::remove(path.c_str());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].shape(), TensorShape());
  EXPECT_EQ(out[0].scalar<std::string>(), bytes);
}

TEST(ReadFileTest, MissingFileIsNotFoundAndDirectoryFailedPrecondition) {
  OpTest missing("ReadFile");
  missing.Input(Tensor::Scalar<std::string>("/nonexistent/dflow/x"));
  absl::Status s = missing.Run().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_THAT(s.message(), HasSubstr("/nonexistent/dflow/x; No such file or directory"));
  OpTest dir("ReadFile");
  dir.Input(Tensor::Scalar<std::string>(TempDir()));
  s = dir.Run().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("Is a directory"));
  OpTest vec("ReadFile");
  vec.Input(Tensor::Vec<std::string>({"a"}));
  EXPECT_THAT(InvalidArgumentOf(vec), HasSubstr("filename tensor must be scalar"));
}

}  // namespace
}  // namespace dflow
