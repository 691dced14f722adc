#include "dflow/framework/status.h"

#include "gtest/gtest.h"

namespace dflow {
namespace {

constexpr char kMark[] = "type.dflow/test-mark";

absl::Status Marked(absl::Status s) {
  s.SetPayload(kMark, absl::Cord("1"));
  return s;
}

TEST(StatusTest, WithPrefixKeepsCodeAndPayloads) {
  absl::Status s = WithPrefix(Marked(absl::AbortedError("step gone")), "[Worker RunGraph] ");
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(s.message(), "[Worker RunGraph] step gone");
  ASSERT_TRUE(s.GetPayload(kMark).has_value());
  EXPECT_EQ(std::string(*s.GetPayload(kMark)), "1");
}

TEST(StatusTest, WithContextAddsAColon) {
  absl::Status s = WithContext(Marked(absl::NotFoundError("no file")), "tensor 'w'");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "tensor 'w': no file");
  EXPECT_TRUE(s.GetPayload(kMark).has_value());
}

TEST(StatusTest, WithMessageReplacesTheMessage) {
  absl::Status s = WithMessage(Marked(absl::InternalError("a")), "b (from peer)");
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(s.message(), "b (from peer)");
  EXPECT_TRUE(s.GetPayload(kMark).has_value());
}

TEST(StatusTest, OkStaysOk) {
  EXPECT_TRUE(WithPrefix(absl::OkStatus(), "[x] ").ok());
  EXPECT_TRUE(WithContext(absl::OkStatus(), "x").ok());
  EXPECT_TRUE(WithMessage(absl::OkStatus(), "x").ok());
}

}  // namespace
}  // namespace dflow
