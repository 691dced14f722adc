// Assert: passes, or fails the step with TensorFlow's message.
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "dflow/ops/op_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

using ::testing::HasSubstr;

TEST(LoggingOpsTest, AssertPassesOrFailsWithItsSummarizedData) {
  OpTest pass("Assert");
  pass.Attr("T", DataTypeVector{DT_INT32}).Input(Tensor::Scalar(true)).Input(Tensor::Vec<int32_t>({1}));
  EXPECT_TRUE(pass.Run().ok());

  OpTest fail("Assert");
  fail.Attr("T", DataTypeVector{DT_STRING, DT_INT32})
      .Attr("summarize", 3)
      .Input(Tensor::Scalar(false))
      .Input(Tensor::Scalar<std::string>("x must be positive"))
      .Input(Tensor::Vec<int32_t>({1, 2, 3, 4, 5}));
  const absl::Status s = fail.Run().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "assertion failed: [x must be positive] [1 2 3...]");  // TensorFlow's text.

  OpTest legacy("Assert");  // TensorFlow's legacy scalar: shape [1].
  legacy.Attr("T", DataTypeVector{DT_INT32}).Input(Tensor::Vec<bool>({true})).Input(Tensor::Vec<int32_t>({1}));
  EXPECT_TRUE(legacy.Run().ok());

  OpTest not_scalar("Assert");
  not_scalar.Attr("T", DataTypeVector{DT_INT32})
      .Input(Tensor::Vec<bool>({true, true}))
      .Input(Tensor::Vec<int32_t>({1}));
  EXPECT_THAT(not_scalar.Run().status().message(), HasSubstr("In[0] should be a scalar"));
}

TEST(LoggingOpsTest, CheckNumericsForwardsOrNamesWhatItFound) {
  OpTest ok("CheckNumerics");
  ok.Attr("T", DT_FLOAT).Attr("message", std::string("loss")).Input(Tensor::Vec<float>({1, 2}));
  auto out = ok.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<float>((*out)[0], {1, 2}, {2});
  for (const auto& [value, what] : std::vector<std::pair<float, std::string>>{
           {NAN, "bad loss : Tensor had NaN values"}, {INFINITY, "bad loss : Tensor had Inf values"}}) {
    OpTest bad("CheckNumerics");
    bad.Attr("T", DT_FLOAT).Attr("message", std::string("bad loss")).Input(Tensor::Vec<float>({1, value}));
    const absl::Status s = bad.Run().status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(), what);  // TensorFlow's text.
  }
}

}  // namespace
}  // namespace dflow
