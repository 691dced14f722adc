// SparseSegment{Sum,Mean,SqrtN}[WithNumSegments], their Grad ops and
// UnsortedSegment{Max,Min,Prod} against TensorFlow 2.21's values
// (UnsortedSegmentSum: grad_ops_test.cc).
#include <limits>
#include <string>
#include <vector>

#include "dflow/ops/op_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

using ::testing::HasSubstr;

Tensor Iota(const TensorShape& shape) {
  Tensor t(DT_FLOAT, shape);
  for (int64_t i = 0; i < t.NumElements(); ++i) t.flat<float>()[i] = static_cast<float>(i);
  return t;
}

absl::StatusOr<std::vector<Tensor>> RunSegment(const std::string& op, const Tensor& data,
                                               const Tensor& indices, const Tensor& ids,
                                               const Tensor* num_segments = nullptr) {
  OpTest t(op);
  t.Attr("T", data.dtype()).Attr("Tidx", indices.dtype()).Attr("Tsegmentids", ids.dtype());
  t.Input(data).Input(indices).Input(ids);
  if (num_segments != nullptr) t.Attr("Tnumsegments", num_segments->dtype()).Input(*num_segments);
  return t.Run();
}

TEST(SegmentOpsTest, SparseSegmentReductions) {
  // TensorFlow's values for data = iota(4, 3), rows 0, 2 in segment 0 and
  // rows 2, 3 in segment 2.
  const std::vector<std::pair<std::string, std::vector<float>>> cases = {
      {"Sum", {6, 8, 10, 0, 0, 0, 15, 17, 19}},
      {"Mean", {3, 4, 5, 0, 0, 0, 7.5f, 8.5f, 9.5f}},
      {"SqrtN",
       {4.242640495f, 5.656854153f, 7.071067810f, 0, 0, 0, 10.60660172f, 12.02081490f,
        13.43502903f}},
  };
  const Tensor indices = Tensor::Vec<int32_t>({0, 2, 2, 3});
  const Tensor ids = Tensor::Vec<int64_t>({0, 0, 2, 2});
  const Tensor four = Tensor::Scalar<int32_t>(4);
  for (const auto& [op, want] : cases) {
    SCOPED_TRACE(op);
    auto out = RunSegment("SparseSegment" + op, Iota({4, 3}), indices, ids);
    ASSERT_TRUE(out.ok()) << out.status();
    ExpectTensorEq<float>((*out)[0], want, {3, 3});
    out = RunSegment("SparseSegment" + op + "WithNumSegments", Iota({4, 3}), indices, ids, &four);
    ASSERT_TRUE(out.ok()) << out.status();
    std::vector<float> padded = want;
    padded.insert(padded.end(), {0, 0, 0});
    ExpectTensorEq<float>((*out)[0], padded, {4, 3});
  }
  auto out = RunSegment("SparseSegmentSum", Tensor::Vec<int32_t>({0, 1, 2, 3}),
                        Tensor::Vec<int64_t>({0, 1, 3}), Tensor::Vec<int32_t>({0, 1, 1}));
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<int32_t>((*out)[0], {0, 4}, {2});
  out = RunSegment("SparseSegmentMean", Iota({4, 3}), Tensor(DT_INT32, TensorShape({0})),
                   Tensor(DT_INT32, TensorShape({0})));
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<float>((*out)[0], {}, {0, 3});
}

TEST(SegmentOpsTest, SparseSegmentErrors) {
  auto error = [](const std::vector<int32_t>& indices, const std::vector<int32_t>& ids) {
    return std::string(RunSegment("SparseSegmentSum", Iota({4, 3}), Tensor::Vec<int32_t>(indices),
                                  Tensor::Vec<int32_t>(ids))
                           .status()
                           .message());
  };
  EXPECT_THAT(error({0, 4}, {0, 0}), HasSubstr("Bad: indices[1] == 4 out of range [0, 4)"));
  EXPECT_THAT(error({0, -1}, {0, 0}), HasSubstr("Bad: indices[1] == -1 out of range [0, 4)"));
  EXPECT_THAT(error({0, 1}, {1, 0}), HasSubstr("segment ids are not increasing"));
  EXPECT_THAT(error({0, 1}, {-1, 0}), HasSubstr("segment ids must be >= 0"));
  EXPECT_THAT(error({0, 1, 2}, {0, 0}), HasSubstr("segment_ids and indices should have same size"));
  auto out = RunSegment("SparseSegmentSum", Iota({4, 3}),
                        Tensor::FromVector<int32_t>({0, 1}, {1, 2}), Tensor::Vec<int32_t>({0, 0}));
  EXPECT_THAT(out.status().message(), HasSubstr("indices should be a vector"));
  out = RunSegment("SparseSegmentSum", Tensor::Scalar(3.0f), Tensor::Vec<int32_t>({0}),
                   Tensor::Vec<int32_t>({0}));
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  const Tensor three = Tensor::Scalar<int64_t>(3);
  out = RunSegment("SparseSegmentSumWithNumSegments", Iota({4, 3}), Tensor::Vec<int32_t>({0, 1}),
                   Tensor::Vec<int32_t>({0, 4}), &three);
  EXPECT_THAT(out.status().message(), HasSubstr("segment ids must be < num_segments"));
  const Tensor minus = Tensor::Scalar<int32_t>(-1);
  out = RunSegment("SparseSegmentMeanWithNumSegments", Iota({4, 3}), Tensor::Vec<int32_t>({0}),
                   Tensor::Vec<int32_t>({0}), &minus);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  // num_segments of 2^40 rows: refused before allocating.
  const Tensor huge = Tensor::Scalar<int64_t>(int64_t{1} << 40);
  out = RunSegment("SparseSegmentSumWithNumSegments", Iota({4, 3}), Tensor::Vec<int32_t>({0}),
                   Tensor::Vec<int32_t>({0}), &huge);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted);
}

absl::StatusOr<std::vector<Tensor>> RunSegmentGrad(const std::string& op,
                                                   const std::vector<int32_t>& indices,
                                                   const std::vector<int32_t>& ids, int32_t dim0) {
  OpTest t(op);
  t.Attr("T", DT_FLOAT).Attr("Tidx", DT_INT32).Attr("Tsegmentids", DT_INT32);
  t.Input(Tensor::FromVector<float>({1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 3}))
      .Input(Tensor::Vec<int32_t>(indices))
      .Input(Tensor::Vec<int32_t>(ids))
      .Input(Tensor::Scalar<int32_t>(dim0));
  return t.Run();
}

TEST(SegmentOpsTest, SparseSegmentGradOps) {
  // TensorFlow's values.
  const std::vector<std::pair<std::string, std::vector<float>>> cases = {
      {"Sum", {1, 2, 3, 0, 0, 0, 8, 10, 12, 7, 8, 9, 0, 0, 0}},
      {"Mean", {0.5f, 1, 1.5f, 0, 0, 0, 4, 5, 6, 3.5f, 4, 4.5f, 0, 0, 0}},
      {"SqrtN",
       {0.7071067691f, 1.414213538f, 2.121320248f, 0, 0, 0, 5.656854153f, 7.071067810f,
        8.485280991f, 4.949747562f, 5.656854153f, 6.363960743f, 0, 0, 0}},
  };
  for (const auto& [op, want] : cases) {
    SCOPED_TRACE(op);
    auto out = RunSegmentGrad("SparseSegment" + op + "Grad", {0, 2, 2, 3}, {0, 0, 2, 2}, 5);
    ASSERT_TRUE(out.ok()) << out.status();
    ExpectTensorEq<float>((*out)[0], want, {5, 3});
  }
  // Segment ids need not be sorted here.
  auto out = RunSegmentGrad("SparseSegmentMeanGrad", {0, 1}, {1, 0}, 5);
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<float>((*out)[0], {4, 5, 6, 1, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0}, {5, 3});

  EXPECT_THAT(RunSegmentGrad("SparseSegmentMeanGrad", {0, 5}, {0, 0}, 5).status().message(),
              HasSubstr("Index 5 out of range [0, 5)."));
  EXPECT_THAT(RunSegmentGrad("SparseSegmentMeanGrad", {0, 1}, {0, 3}, 5).status().message(),
              HasSubstr("Invalid number of segments"));
  EXPECT_THAT(RunSegmentGrad("SparseSegmentSumGrad", {0, 1, 1}, {1, 0}, 5).status().message(),
              HasSubstr("segment_ids and indices should have same size"));
  EXPECT_THAT(RunSegmentGrad("SparseSegmentSqrtNGrad", {0}, {0}, -1).status().message(),
              HasSubstr("Expected a non-negative size, got -1"));
}

TEST(SegmentOpsTest, UnsortedSegmentMaxMinProd) {
  const Tensor data = Tensor::FromVector<float>({1, -2, 3, 4, -5, 6, 7, -8}, {4, 2});
  const Tensor ids = Tensor::Vec<int32_t>({2, 0, 2, -1});  // -1: dropped.
  constexpr float kLowest = std::numeric_limits<float>::lowest();
  constexpr float kMax = std::numeric_limits<float>::max();
  // TensorFlow's values: empty segment 1 holds each reduction's identity.
  const std::vector<std::pair<std::string, std::vector<float>>> cases = {
      {"Max", {3, 4, kLowest, kLowest, 1, 6}},
      {"Min", {3, 4, kMax, kMax, -5, -2}},
      {"Prod", {3, 4, 1, 1, -5, -12}},
      {"Sum", {3, 4, 0, 0, -4, 4}},
  };
  for (const auto& [op, want] : cases) {
    SCOPED_TRACE(op);
    OpTest t("UnsortedSegment" + op);
    t.Attr("T", DT_FLOAT).Attr("Tindices", DT_INT32);
    t.Input(data).Input(ids).Input(Tensor::Scalar<int32_t>(3));
    auto out = t.Run();
    ASSERT_TRUE(out.ok()) << out.status();
    ExpectTensorEq<float>((*out)[0], want, {3, 2});
  }
  OpTest ints("UnsortedSegmentMax");
  ints.Attr("T", DT_INT32).Attr("Tindices", DT_INT64);
  ints.Input(Tensor::Vec<int32_t>({1, 5, 3}))
      .Input(Tensor::Vec<int64_t>({1, 1, 1}))
      .Input(Tensor::Scalar<int64_t>(2));
  auto out = ints.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<int32_t>((*out)[0], {std::numeric_limits<int32_t>::min(), 5}, {2});

  OpTest bad("UnsortedSegmentMin");
  bad.Attr("T", DT_FLOAT).Attr("Tindices", DT_INT32);
  bad.Input(data).Input(Tensor::Vec<int32_t>({2, 0, 2, 3})).Input(Tensor::Scalar<int32_t>(3));
  EXPECT_THAT(bad.Run().status().message(), HasSubstr("segment_ids[3] = 3 is out of range [0, 3)"));
}

TEST(SegmentOpsTest, ShapeFunctions) {
  tensorflow::NodeDef n;
  n.set_name("n");
  n.set_op("SparseSegmentSum");
  SetAttr(&n, "T", DT_FLOAT);
  auto shapes = Infer(n, {PartialShape({4, 3}), PartialShape({-1}), PartialShape({-1})});
  ASSERT_TRUE(shapes.ok()) << shapes.status();
  EXPECT_EQ((*shapes)[0], PartialShape({-1, 3}));
  EXPECT_FALSE(Infer(n, {PartialShape({4, 3}), PartialShape({2, 2}), PartialShape({4})}).ok());
  n.set_op("SparseSegmentMeanWithNumSegments");
  const Tensor seven = Tensor::Scalar<int32_t>(7);
  shapes = Infer(n, {PartialShape({4, 3}), PartialShape({2}), PartialShape({2}), {}},
                 {nullptr, nullptr, nullptr, &seven});
  ASSERT_TRUE(shapes.ok()) << shapes.status();
  EXPECT_EQ((*shapes)[0], PartialShape({7, 3}));
  n.set_op("SparseSegmentSqrtNGrad");
  shapes = Infer(n, {PartialShape({2, 3}), PartialShape({2}), PartialShape({2}), {}},
                 {nullptr, nullptr, nullptr, &seven});
  ASSERT_TRUE(shapes.ok()) << shapes.status();
  EXPECT_EQ((*shapes)[0], PartialShape({7, 3}));
  tensorflow::NodeDef u;
  u.set_name("u");
  u.set_op("UnsortedSegmentProd");
  SetAttr(&u, "T", DT_FLOAT);
  SetAttr(&u, "Tindices", DT_INT32);
  shapes =
      Infer(u, {PartialShape({4, 2, 5}), PartialShape({4, 2}), {}}, {nullptr, nullptr, &seven});
  ASSERT_TRUE(shapes.ok()) << shapes.status();
  EXPECT_EQ((*shapes)[0], PartialShape({7, 5}));
}

}  // namespace
}  // namespace dflow
