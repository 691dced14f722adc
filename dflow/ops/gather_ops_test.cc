// Gather (v1), ResourceGather and GatherNd against TensorFlow 2.21's values
// (GatherV2 is covered by array_ops_test.cc and the golden tests).
#include <string>
#include <vector>

#include "dflow/ops/op_test_util.h"
#include "dflow/ops/state_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

using ::testing::HasSubstr;

template <typename T = float>
Tensor Iota(const TensorShape& shape) {
  Tensor t(DataTypeToEnum<T>::value, shape);
  for (int64_t i = 0; i < t.NumElements(); ++i) t.flat<T>()[i] = static_cast<T>(i);
  return t;
}

absl::StatusOr<std::vector<Tensor>> RunGather(const std::string& op, const Tensor& params,
                                              const Tensor& indices) {
  OpTest t(op);
  t.Attr("Tparams", params.dtype()).Attr("Tindices", indices.dtype());
  t.Input(params).Input(indices);
  return t.Run();
}

TEST(GatherOpsTest, GatherPicksRowsOfAxisZero) {
  auto out = RunGather("Gather", Iota({3, 4}),
                       Tensor::FromVector<int64_t>({2, 0, 1, 1}, TensorShape({2, 2})));
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<float>((*out)[0], {8, 9, 10, 11, 0, 1, 2, 3, 4, 5, 6, 7, 4, 5, 6, 7},
                        {2, 2, 4});  // TensorFlow's.
  out = RunGather("Gather", Tensor::Vec<bool>({true, false, true}), Tensor::Vec<int32_t>({2, 1}));
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<bool>((*out)[0], {true, false}, {2});
  out = RunGather("Gather", Iota({3, 4}), Tensor(DT_INT32, TensorShape({2, 0})));
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<float>((*out)[0], {}, {2, 0, 4});
}

TEST(GatherOpsTest, GatherRejectsBadIndicesAndScalars) {
  auto out = RunGather("Gather", Iota({3, 4}), Tensor::Vec<int32_t>({0, 3}));
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("indices[1] = 3 is not in [0, 3)"));
  out = RunGather("Gather", Iota({3}), Tensor::Vec<int32_t>({-1}));
  EXPECT_THAT(out.status().message(), HasSubstr("indices[0] = -1 is not in [0, 3)"));
  out = RunGather("Gather", Tensor::Scalar(1.0f), Tensor::Vec<int32_t>({0}));
  EXPECT_THAT(out.status().message(), HasSubstr("params must be at least 1 dimensional"));
  // 2^21 copies of a 2^20-element row: refused before allocating 8 TiB.
  Tensor many(DT_INT32, TensorShape({int64_t{1} << 21}));
  out = RunGather("Gather", Tensor(DT_FLOAT, TensorShape({1, int64_t{1} << 20})), many);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted);
}

absl::StatusOr<std::vector<Tensor>> RunResourceGather(const Tensor& handle, const Tensor& indices,
                                                      int64_t batch_dims = 0,
                                                      DataType dtype = DT_FLOAT) {
  OpTest t("ResourceGather");
  t.Attr("dtype", dtype).Attr("Tindices", indices.dtype()).Attr("batch_dims", batch_dims);
  t.Input(handle).Input(indices);
  return t.Run();
}

TEST(GatherOpsTest, ResourceGatherReadsRowsOfTheVariable) {
  const Tensor h = NewResourceVar(TestCpuDevice(), "gather/v", Iota({2, 3, 4}));
  auto out = RunResourceGather(h, Tensor::Vec<int32_t>({1, 0}));
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<float> want;  // Row 1 (12..23), then row 0 (0..11).
  for (int i = 0; i < 24; ++i) want.push_back(static_cast<float>((i + 12) % 24));
  ExpectTensorEq<float>((*out)[0], want, {2, 3, 4});
  // batch_dims = 1 gathers along axis 1 within each batch row (TensorFlow's values).
  out = RunResourceGather(h, Tensor::FromVector<int64_t>({1, 0, 2, 2}, TensorShape({2, 2})), 1);
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<float>((*out)[0], {4, 5, 6, 7, 0, 1, 2, 3, 20, 21, 22, 23, 20, 21, 22, 23},
                        {2, 2, 4});
  // A scalar index drops the gathered axis.
  out = RunResourceGather(h, Tensor::Scalar<int32_t>(1));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), TensorShape({3, 4}));
}

TEST(GatherOpsTest, ResourceGatherErrors) {
  const Tensor h = NewResourceVar(TestCpuDevice(), "gather/bad", Iota({2, 3, 4}));
  auto out = RunResourceGather(h, Tensor::Vec<int32_t>({2}));
  EXPECT_THAT(out.status().message(), HasSubstr("indices[0] = 2 is not in [0, 2)"));
  // TensorFlow aborts on a dtype mismatch and reads out of bounds on a batch
  // mismatch; both are errors here.
  out = RunResourceGather(h, Tensor::Vec<int32_t>({0}), 0, DT_INT32);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("wrong dtype: expected int32, got float"));
  out = RunResourceGather(h, Tensor::FromVector<int32_t>({1, 0}, TensorShape({1, 2})), 1);
  EXPECT_THAT(out.status().message(), HasSubstr("params.shape[0]: 2 should be equal to indices"));
  out = RunResourceGather(h, Tensor::FromVector<int32_t>({0, 0}, TensorShape({2, 1})), 3);
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  out = RunResourceGather(ResourceVarHandle(TestCpuDevice(), "gather/missing"),
                          Tensor::Vec<int32_t>({0}));
  EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(GatherOpsTest, GatherNdPicksSlices) {
  // TensorFlow's values.
  auto out = RunGather("GatherNd", Iota({3, 4}),
                       Tensor::FromVector<int32_t>({2, 1, 0, 3}, TensorShape({2, 2})));
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<float>((*out)[0], {9, 3}, {2});
  out = RunGather("GatherNd", Iota<double>({2, 3, 4}),
                  Tensor::FromVector<int64_t>({1, 2, 0, 1}, TensorShape({1, 2, 2})));
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<double>((*out)[0], {20, 21, 22, 23, 4, 5, 6, 7}, {1, 2, 4});
  out = RunGather("GatherNd", Iota<int32_t>({2, 3, 4}),
                  Tensor::FromVector<int32_t>({1, 2, 3, 0, 0, 1}, TensorShape({2, 3})));
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<int32_t>((*out)[0], {23, 1}, {2});
  // Index vectors of length 0 pick the whole of params.
  out = RunGather("GatherNd", Iota({2, 2}), Tensor(DT_INT32, TensorShape({2, 0})));
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<float>((*out)[0], {0, 1, 2, 3, 0, 1, 2, 3}, {2, 2, 2});
}

TEST(GatherOpsTest, GatherNdErrorsAndIgnoredIndices) {
  auto out = RunGather("GatherNd", Iota({3, 4}),
                       Tensor::FromVector<int32_t>({0, 0, 2, 4}, TensorShape({1, 2, 2})));
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(),
              HasSubstr("indices[0,1] = [2, 4] does not index into param shape [3,4]"));
  out = RunGather("GatherNd", Iota({3, 4}),
                  Tensor::FromVector<int32_t>({-1, 0}, TensorShape({1, 2})));
  EXPECT_THAT(out.status().message(), HasSubstr("[-1, 0] does not index"));
  out = RunGather("GatherNd", Iota({3, 4}),
                  Tensor::FromVector<int32_t>({2, 1, 0}, TensorShape({1, 3})));
  EXPECT_THAT(out.status().message(),
              HasSubstr("index innermost dimension length must be <= params rank; saw: 3 vs. 2"));
  out = RunGather("GatherNd", Iota({3, 4}), Tensor::Scalar<int32_t>(1));
  EXPECT_THAT(out.status().message(), HasSubstr("indices must be at least a vector"));
  out = RunGather("GatherNd", Tensor::Scalar(3.0f), Tensor(DT_INT32, TensorShape({0})));
  EXPECT_THAT(out.status().message(), HasSubstr("params must be at least a vector"));

  // IGNORE leaves zeros where an index is out of range (TensorFlow's values).
  OpTest ignore("GatherNd");
  ignore.Attr("Tparams", DT_FLOAT).Attr("Tindices", DT_INT32).Attr("bad_indices_policy", "IGNORE");
  ignore.Input(Iota({3, 4}))
      .Input(Tensor::FromVector<int32_t>({0, 0, 2, 4, 1, 1}, TensorShape({3, 2})));
  out = ignore.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<float>((*out)[0], {0, 0, 5}, {3});
  OpTest bad_policy("GatherNd");
  bad_policy.Attr("Tparams", DT_FLOAT).Attr("Tindices", DT_INT32).Attr("bad_indices_policy", "X");
  bad_policy.Input(Iota({3, 4})).Input(Tensor::FromVector<int32_t>({0, 0}, TensorShape({1, 2})));
  EXPECT_EQ(bad_policy.Run().status().code(), absl::StatusCode::kInvalidArgument);

  // 2^22 copies of a 2^20-element params: refused before allocating.
  out = RunGather("GatherNd", Tensor(DT_FLOAT, TensorShape({1, int64_t{1} << 20})),
                  Tensor(DT_INT32, TensorShape({int64_t{1} << 22, 0})));
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(GatherOpsTest, ShapeFunctions) {
  tensorflow::NodeDef g;
  g.set_name("g");
  g.set_op("Gather");
  SetAttr(&g, "Tparams", DT_FLOAT);
  SetAttr(&g, "Tindices", DT_INT32);
  auto shapes = Infer(g, {PartialShape({3, 4}), PartialShape({2, -1})});
  ASSERT_TRUE(shapes.ok()) << shapes.status();
  EXPECT_EQ((*shapes)[0], PartialShape({2, -1, 4}));
  EXPECT_FALSE(Infer(g, {PartialShape::Scalar(), PartialShape({2})}).ok());
  g.set_op("GatherNd");
  shapes = Infer(g, {PartialShape({3, 4, 5}), PartialShape({-1, 2})});
  ASSERT_TRUE(shapes.ok()) << shapes.status();
  EXPECT_EQ((*shapes)[0], PartialShape({-1, 5}));
  shapes = Infer(g, {PartialShape({3, 4}), PartialShape({2, -1})});
  ASSERT_TRUE(shapes.ok()) << shapes.status();
  EXPECT_EQ((*shapes)[0], PartialShape::Unknown());
  EXPECT_THAT(Infer(g, {PartialShape({3, 4}), PartialShape({2, 3})}).status().message(),
              HasSubstr("index innermost dimension length must be <= params rank"));
}

}  // namespace
}  // namespace dflow
