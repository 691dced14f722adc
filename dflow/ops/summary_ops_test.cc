// Summary ops against the bytes TensorFlow 2.21's kernels return for the same
// inputs (tf.raw_ops.ScalarSummary / HistogramSummary / MergeSummary /
// TensorSummaryV2).
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "dflow/ops/op_test_util.h"
#include "dflow/proto/summary.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

using ::testing::HasSubstr;

// TensorFlow's output for tags ["a", "b"], values [1.5, -2].
constexpr char kScalarHex[] = "0a080a0161150000c03f0a080a016215000000c0";
// TensorFlow's output for tag "h", values [0, 1, 1, -3, 1e-13, 2500].
constexpr char kHistogramHex[] =
    "0ac7010a01682ac1010900000000000008c011000000000088a34019000000000000184021000000000086a340"
    "29000000c086d7574132480d9cc5a0295509c068bc10359a0707c0000000000000000011ea2d819997713d0899"
    "6919155aed3f2b14facdbe24f03f558d0b82e8c2a140de81d95b9989a340ffffffffffffef7f3a480000000000"
    "000000000000000000f03f00000000000000000000000000000040000000000000000000000000000000400000"
    "000000000000000000000000f03f0000000000000000";

absl::StatusOr<std::string> RunSummary(OpTest& t) {
  ASSIGN_OR_RETURN(std::vector<Tensor> out, t.Run());
  EXPECT_EQ(out[0].shape(), TensorShape({}));
  return out[0].scalar<std::string>();
}

std::string ScalarSummary() {
  OpTest t("ScalarSummary");
  t.Attr("T", DT_FLOAT)
      .Input(Tensor::Vec<std::string>({"a", "b"}))
      .Input(Tensor::Vec<float>({1.5f, -2.0f}));
  return RunSummary(t).value();
}

std::string HistogramSummary(const std::vector<float>& values) {
  OpTest t("HistogramSummary");
  t.Attr("T", DT_FLOAT).Input(Tensor::Scalar<std::string>("h")).Input(Tensor::Vec<float>(values));
  return RunSummary(t).value();
}

TEST(SummaryOpsTest, ScalarSummaryIsTensorFlowsBytes) {
  EXPECT_EQ(absl::BytesToHexString(ScalarSummary()), kScalarHex);
}

TEST(SummaryOpsTest, ScalarSummaryNeedsATagPerValue) {
  OpTest t("ScalarSummary");
  t.Attr("T", DT_FLOAT)
      .Input(Tensor::Vec<std::string>({"a", "b"}))
      .Input(Tensor::Vec<float>({1.5f}));
  const absl::Status s = t.Run().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("tags and values are not the same shape: [2] != [1]"));
}

// TensorFlow's buckets: +-1e-12 growing by 10% to 1e20, runs of empty
// buckets merged; the moments in double.
TEST(SummaryOpsTest, HistogramSummaryIsTensorFlowsBytes) {
  EXPECT_EQ(absl::BytesToHexString(HistogramSummary({0, 1, 1, -3, 1e-13f, 2500})), kHistogramHex);
  tensorflow::Summary empty;
  ASSERT_TRUE(empty.ParseFromString(HistogramSummary({})));
  EXPECT_EQ(empty.value(0).histo().num(), 0);
  EXPECT_EQ(empty.value(0).histo().bucket_size(), 1);  // One run: every bucket empty.
}

// DBL_MAX is finite: it lands in the last bucket (TensorFlow's kernel would
// index one past its buckets).
TEST(SummaryOpsTest, HistogramSummaryTakesTheLargestDouble) {
  OpTest t("HistogramSummary");
  t.Attr("T", DT_DOUBLE)
      .Input(Tensor::Scalar<std::string>("h"))
      .Input(Tensor::Vec<double>({std::numeric_limits<double>::max(), 1.0}));
  absl::StatusOr<std::string> out = RunSummary(t);
  ASSERT_TRUE(out.ok()) << out.status();
  tensorflow::Summary s;
  ASSERT_TRUE(s.ParseFromString(*out));
  const tensorflow::HistogramProto& h = s.value(0).histo();
  EXPECT_EQ(h.num(), 2);
  EXPECT_EQ(h.bucket(h.bucket_size() - 1), 1);
  EXPECT_EQ(h.bucket_limit(h.bucket_limit_size() - 1), std::numeric_limits<double>::max());
}

TEST(SummaryOpsTest, HistogramSummaryRefusesNanAndInfinity) {
  for (float bad :
       {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    OpTest t("HistogramSummary", "logits_hist");
    t.Attr("T", DT_FLOAT)
        .Input(Tensor::Scalar<std::string>("h"))
        .Input(Tensor::Vec<float>({1, bad}));
    const absl::Status s = t.Run().status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr(std::isnan(bad) ? "Nan in summary histogram for: logits_hist"
                                                       : "Infinity in summary histogram for"));
  }
}

TEST(SummaryOpsTest, MergeSummaryConcatenatesValuesAndRefusesDuplicateTags) {
  const std::string scalar = ScalarSummary();
  const std::string histogram = HistogramSummary({0, 1, 1, -3, 1e-13f, 2500});
  OpTest merge("MergeSummary");
  merge.Attr("N", 2)
      .Input(Tensor::Scalar<std::string>(scalar))
      .Input(Tensor::Vec<std::string>({histogram}));
  EXPECT_EQ(absl::BytesToHexString(RunSummary(merge).value()),
            std::string(kScalarHex) + kHistogramHex);

  OpTest twice("MergeSummary");
  twice.Attr("N", 2)
      .Input(Tensor::Scalar<std::string>(scalar))
      .Input(Tensor::Scalar<std::string>(scalar));
  absl::Status s = twice.Run().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("Duplicate tag a found in summary inputs"));

  OpTest garbage("MergeSummary");
  garbage.Attr("N", 1).Input(Tensor::Scalar<std::string>("\xff\xff not a summary"));
  s = garbage.Run().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("Could not parse one of the summary inputs"));
}

std::string TensorSummary(const Tensor& tensor, const std::string& tag, const std::string& meta) {
  OpTest t("TensorSummaryV2");
  t.Attr("T", tensor.dtype()).Input(Tensor::Scalar<std::string>(tag)).Input(tensor);
  t.Input(Tensor::Scalar<std::string>(meta));
  absl::StatusOr<std::string> out = RunSummary(t);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? absl::BytesToHexString(*out) : "";
}

TEST(TensorSummaryV2Test, BytesEqualTensorFlows) {
  // SummaryMetadata{plugin_data {plugin_name: "scalars" content: "\x01"} display_name: "d"}.
  const std::string meta = absl::HexStringToBytes("0a0c0a077363616c617273120101120164");
  EXPECT_EQ(
      TensorSummary(Tensor::FromVector<float>({1.5f, -2, 3, 4}, TensorShape({2, 2})), "t", meta),
      "0a360a0174421e08011208120208021202080222100000c03f000000c000004040000080404a110a0c0a07"
      "7363616c617273120101120164");
  // Strings go to string_val.
  EXPECT_EQ(TensorSummary(Tensor::Vec<std::string>({"ab", "c"}), "s", ""),
            "0a160a0173420f0807120412020802420261624201634a00");
  // Metadata that does not parse leaves an empty one, as in TensorFlow.
  EXPECT_EQ(TensorSummary(Tensor::Scalar<int64_t>(7), "i", "\xff\xff"),
            "0a150a0169420e08091200220807000000000000004a00");
}

TEST(TensorSummaryV2Test, TagMustBeAScalar) {
  OpTest t("TensorSummaryV2");
  t.Attr("T", DT_FLOAT).Input(Tensor::Vec<std::string>({"a"})).Input(Tensor::Scalar<float>(1));
  t.Input(Tensor::Scalar<std::string>(""));
  EXPECT_THAT(InvalidArgumentOf(t), HasSubstr("tag must be scalar"));
}

}  // namespace
}  // namespace dflow
