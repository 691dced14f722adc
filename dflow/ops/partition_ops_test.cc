// DynamicPartition, DynamicStitch, ParallelDynamicStitch and Unique against
// TensorFlow 2.21's values.
#include <cmath>
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

absl::StatusOr<std::vector<Tensor>> Partition(const Tensor& data, const Tensor& partitions,
                                              int num_partitions) {
  OpTest t("DynamicPartition");
  t.Attr("T", data.dtype()).Attr("num_partitions", int64_t{num_partitions});
  t.Input(data).Input(partitions);
  return t.Run();
}

TEST(PartitionOpsTest, DynamicPartitionSplitsRowsInOrder) {
  auto out = Partition(Iota({4, 3}), Tensor::Vec<int32_t>({1, 0, 1, 2}), 3);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 3u);  // TensorFlow's values.
  ExpectTensorEq<float>((*out)[0], {3, 4, 5}, {1, 3});
  ExpectTensorEq<float>((*out)[1], {0, 1, 2, 6, 7, 8}, {2, 3});
  ExpectTensorEq<float>((*out)[2], {9, 10, 11}, {1, 3});
  // partitions of data's full shape: elements.
  out = Partition(Iota({4, 3}),
                  Tensor::FromVector<int32_t>({1, 0, 1, 0, 0, 1, 1, 1, 1, 2, 2, 2}, {4, 3}), 3);
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<float>((*out)[0], {1, 3, 4}, {3});
  ExpectTensorEq<float>((*out)[1], {0, 2, 5, 6, 7, 8}, {6});
  ExpectTensorEq<float>((*out)[2], {9, 10, 11}, {3});
  out = Partition(Tensor::Vec<std::string>({"a", "b", "c"}), Tensor::Vec<int32_t>({1, 1, 0}), 3);
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<std::string>((*out)[0], {"c"}, {1});
  ExpectTensorEq<std::string>((*out)[1], {"a", "b"}, {2});
  ExpectTensorEq<std::string>((*out)[2], {}, {0});
  out = Partition(Tensor::Scalar(5.0f), Tensor::Scalar<int32_t>(1), 2);
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<float>((*out)[0], {}, {0});
  ExpectTensorEq<float>((*out)[1], {5}, {1});
}

TEST(PartitionOpsTest, DynamicPartitionErrors) {
  auto out = Partition(Iota({4, 3}), Tensor::Vec<int32_t>({1, 0, 1, 3}), 3);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("partitions[3] = 3 is not in [0, 3)"));
  out = Partition(Iota({4, 3}), Tensor::Vec<int32_t>({-1, 0, 1, 0}), 3);
  EXPECT_THAT(out.status().message(), HasSubstr("partitions[0] = -1 is not in [0, 3)"));
  out = Partition(Iota({4, 3}), Tensor::Vec<int32_t>({1, 0, 1}), 3);
  EXPECT_THAT(out.status().message(),
              HasSubstr("data.shape must start with partitions.shape, got data.shape = [4,3], "
                        "partitions.shape = [3]"));
}

absl::StatusOr<std::vector<Tensor>> Stitch(const std::vector<Tensor>& indices,
                                           const std::vector<Tensor>& data,
                                           const std::string& op = "DynamicStitch") {
  OpTest t(op);
  t.Attr("N", static_cast<int64_t>(indices.size())).Attr("T", data[0].dtype());
  for (const Tensor& i : indices) t.Input(i);
  for (const Tensor& d : data) t.Input(d);
  return t.Run();
}

TEST(PartitionOpsTest, DynamicStitchMergesRowsLaterIndicesWin) {
  for (const char* op : {"DynamicStitch", "ParallelDynamicStitch"}) {
    SCOPED_TRACE(op);
    auto out = Stitch({Tensor::Vec<int32_t>({0, 2}), Tensor::Vec<int32_t>({0, 4})},
                      {Tensor::FromVector<float>({1, 2, 3, 4}, {2, 2}),
                       Tensor::FromVector<float>({5, 6, 7, 8}, {2, 2})},
                      op);
    ASSERT_TRUE(out.ok()) << out.status();
    // TensorFlow's values: row 0 from the second input, rows 1 and 3 zero.
    ExpectTensorEq<float>((*out)[0], {5, 6, 0, 0, 3, 4, 0, 0, 7, 8}, {5, 2});
  }
  // A scalar index takes a whole data tensor as its row.
  auto out =
      Stitch({Tensor::Vec<int32_t>({0, 2}), Tensor::Scalar<int32_t>(1)},
             {Tensor::FromVector<double>({1, 2, 3, 4}, {2, 2}), Tensor::Vec<double>({5, 6})});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<double>((*out)[0], {1, 2, 5, 6, 3, 4}, {3, 2});
  out = Stitch({Tensor(DT_INT32, TensorShape({0}))}, {Tensor(DT_FLOAT, TensorShape({0, 3}))});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<float>((*out)[0], {}, {0, 3});
}

TEST(PartitionOpsTest, DynamicStitchErrors) {
  auto out =
      Stitch({Tensor::Vec<int32_t>({0, -1})}, {Tensor::FromVector<float>({1, 2, 3, 4}, {2, 2})});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("indices[0][1] = -1 is out of range"));
  out = Stitch({Tensor::Vec<int32_t>({0, 1})}, {Tensor::FromVector<float>({1, 2, 3}, {1, 3})});
  EXPECT_THAT(out.status().message(),
              HasSubstr("data[0].shape = [1,3] does not start with indices[0].shape = [2]"));
  out = Stitch({Tensor::Vec<int32_t>({0, 1}), Tensor::Vec<int32_t>({2})},
               {Tensor::FromVector<float>({1, 2, 3, 4}, {2, 2}),
                Tensor::FromVector<float>({5, 6, 7}, {1, 3})});
  EXPECT_THAT(out.status().message(), HasSubstr("Need data[0].shape[1:] = data[1].shape[1:]"));
  // One index of 2^30 asks for 2^31 rows of 2 floats: refused, not allocated.
  out = Stitch({Tensor::Vec<int32_t>({1 << 30})}, {Tensor::FromVector<float>({5, 6}, {1, 2})});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted);
}

template <typename T, typename I = int32_t>
void ExpectUnique(const std::vector<T>& x, const std::vector<T>& y, const std::vector<I>& idx) {
  OpTest t("Unique");
  t.Attr("T", DataTypeToEnum<T>::value).Attr("out_idx", DataTypeToEnum<I>::value);
  t.Input(Tensor::Vec<T>(x));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<T>((*out)[0], y, {static_cast<int64_t>(y.size())});
  ExpectTensorEq<I>((*out)[1], idx, {static_cast<int64_t>(idx.size())});
}

TEST(PartitionOpsTest, UniqueKeepsFirstOccurrenceOrder) {
  // TensorFlow's values.
  ExpectUnique<int32_t>({3, 1, 3, 2, 1, 5}, {3, 1, 2, 5}, {0, 1, 0, 2, 1, 3});
  ExpectUnique<int64_t, int64_t>({7, 7, -1}, {7, -1}, {0, 0, 1});
  ExpectUnique<std::string>({"a", "b", "a"}, {"a", "b"}, {0, 1, 0});
  ExpectUnique<bool>({true, false, true}, {true, false}, {0, 1, 0});
  ExpectUnique<float>({}, {}, {});
  // Every NaN is its own value; -0 and 0 are one.
  OpTest t("Unique");
  t.Attr("T", DT_FLOAT).Attr("out_idx", DT_INT64);
  t.Input(Tensor::Vec<float>({3, 1, 3, NAN, NAN, -0.0f, 0.0f}));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<int64_t>((*out)[1], {0, 1, 0, 2, 3, 4, 4}, {7});
  ASSERT_EQ((*out)[0].NumElements(), 5);
  EXPECT_TRUE(std::isnan((*out)[0].flat<float>()[2]) && std::isnan((*out)[0].flat<float>()[3]));
  EXPECT_TRUE(std::signbit((*out)[0].flat<float>()[4]));  // The first zero seen: -0.

  OpTest matrix("Unique");
  matrix.Attr("T", DT_INT32).Input(Tensor::FromVector<int32_t>({1, 2, 3, 4}, {2, 2}));
  EXPECT_THAT(matrix.Run().status().message(), HasSubstr("unique expects a 1D vector"));
}

TEST(PartitionOpsTest, ShapeFunctions) {
  tensorflow::NodeDef n;
  n.set_name("n");
  n.set_op("DynamicPartition");
  SetAttr(&n, "T", DT_FLOAT);
  SetAttr(&n, "num_partitions", int64_t{2});
  auto shapes = Infer(n, {PartialShape({4, 3}), PartialShape({4})});
  ASSERT_TRUE(shapes.ok()) << shapes.status();
  EXPECT_EQ(*shapes, (std::vector<PartialShape>{PartialShape({-1, 3}), PartialShape({-1, 3})}));
  EXPECT_FALSE(Infer(n, {PartialShape({4}), PartialShape({4, 3})}).ok());
  tensorflow::NodeDef s;
  s.set_name("s");
  s.set_op("DynamicStitch");
  SetAttr(&s, "T", DT_FLOAT);
  SetAttr(&s, "N", int64_t{2});
  shapes =
      Infer(s, {PartialShape({2}), PartialShape({1}), PartialShape({2, 3}), PartialShape({1, 3})});
  ASSERT_TRUE(shapes.ok()) << shapes.status();
  EXPECT_EQ((*shapes)[0], PartialShape({-1, 3}));
  tensorflow::NodeDef u;
  u.set_name("u");
  u.set_op("Unique");
  SetAttr(&u, "T", DT_INT32);
  shapes = Infer(u, {PartialShape({5})});
  ASSERT_TRUE(shapes.ok()) << shapes.status();
  EXPECT_EQ(*shapes, (std::vector<PartialShape>{PartialShape({-1}), PartialShape({5})}));
  EXPECT_FALSE(Infer(u, {PartialShape({5, 2})}).ok());
}

}  // namespace
}  // namespace dflow
