// Scatter ops: rows of a reference variable updated in place (ScatterAdd,
// ScatterSub, ScatterUpdate) and ScatterNd, against TensorFlow 2.21's values.
#include <string>
#include <vector>

#include "dflow/framework/attr_util.h"
#include "dflow/ops/op_test_util.h"
#include "dflow/ops/state_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<KernelOutputs> RunScatter(const std::string& op, TestRef* var, Tensor indices,
                                         Tensor updates) {
  tensorflow::NodeDef n;
  n.set_name("scatter");
  n.set_op(op);
  for (const char* in : {"ref", "indices", "updates"}) n.add_input(in);
  SetAttr(&n, "T", updates.dtype());
  SetAttr(&n, "Tindices", indices.dtype());
  ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> k, MakeKernel(n, TestCpuDevice()));
  return RunWithRefs(k.get(), TestCpuDevice(),
                     {var->value(), TensorValue{&indices}, TensorValue{&updates}});
}

std::vector<float> Floats(const Tensor& t) {
  auto f = t.flat<float>();
  return {f.begin(), f.end()};
}

TEST(ScatterOpsTest, RowsAreAddedSubtractedOrReplacedInPlace) {
  TestRef var(Tensor::FromVector<float>({1, 1, 2, 2, 3, 3}, TensorShape({3, 2})));
  // Row 2 twice: both updates count.
  auto out = RunScatter("ScatterAdd", &var, Tensor::Vec<int32_t>({2, 0, 2}),
                        Tensor::FromVector<float>({10, 20, 30, 40, 50, 60}, TensorShape({3, 2})));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(Floats(var.tensor), (std::vector<float>{31, 41, 2, 2, 63, 83}));
  EXPECT_EQ(out->refs[0], &var.tensor);  // The output is the variable.

  ASSERT_TRUE(RunScatter("ScatterSub", &var, Tensor::Vec<int64_t>({1}),
                         Tensor::FromVector<float>({1, 2}, TensorShape({1, 2})))
                  .ok());
  EXPECT_EQ(Floats(var.tensor), (std::vector<float>{31, 41, 1, 0, 63, 83}));
  ASSERT_TRUE(RunScatter("ScatterUpdate", &var, Tensor::Scalar<int32_t>(0),
                         Tensor::Vec<float>({7, 8}))
                  .ok());
  EXPECT_EQ(Floats(var.tensor), (std::vector<float>{7, 8, 1, 0, 63, 83}));
  // A scalar update goes to every element of the indexed rows.
  ASSERT_TRUE(RunScatter("ScatterUpdate", &var, Tensor::Vec<int32_t>({1, 2}), Tensor::Scalar(5.0f))
                  .ok());
  EXPECT_EQ(Floats(var.tensor), (std::vector<float>{7, 8, 5, 5, 5, 5}));
}

TEST(ScatterOpsTest, BadIndicesAndShapesChangeNothing) {
  TestRef var(Tensor::FromVector<float>({1, 1, 2, 2}, TensorShape({2, 2})));
  auto out = RunScatter("ScatterAdd", &var, Tensor::Vec<int32_t>({0, 2}),
                        Tensor::FromVector<float>({1, 1, 1, 1}, TensorShape({2, 2})));
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("indices[1] = 2 is not in [0, 2)"));
  EXPECT_EQ(Floats(var.tensor), (std::vector<float>{1, 1, 2, 2}));  // Row 0 untouched too.
  out = RunScatter("ScatterAdd", &var, Tensor::Vec<int32_t>({0}), Tensor::Vec<float>({1, 1}));
  EXPECT_THAT(out.status().message(), HasSubstr("updates.shape = indices.shape + params.shape[1:]"));
  TestRef uninitialized;
  out = RunScatter("ScatterAdd", &uninitialized, Tensor::Vec<int32_t>({0}), Tensor::Vec<float>({1}));
  EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(ScatterOpsTest, ScatterNdSumsUpdatesIntoZeros) {
  OpTest t("ScatterNd");
  t.Attr("T", DT_FLOAT).Attr("Tindices", DT_INT32);
  t.Input(Tensor::FromVector<int32_t>({1, 3, 1}, TensorShape({3, 1})))
      .Input(Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, TensorShape({3, 2})))
      .Input(Tensor::Vec<int32_t>({4, 2}));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<float>((*out)[0], {0, 0, 6, 8, 0, 0, 3, 4}, {4, 2});  // TensorFlow's.

  OpTest bad("ScatterNd");
  bad.Attr("T", DT_FLOAT).Attr("Tindices", DT_INT32);
  bad.Input(Tensor::FromVector<int32_t>({5}, TensorShape({1, 1})))
      .Input(Tensor::FromVector<float>({1, 2}, TensorShape({1, 2})))
      .Input(Tensor::Vec<int32_t>({4, 2}));
  const absl::Status s = bad.Run().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("indices[0] = [5] does not index into shape [4,2]"));

  // Index vectors of length 0 each add a whole updates slice; none adds nothing.
  OpTest whole("ScatterNd");
  whole.Attr("T", DT_FLOAT).Attr("Tindices", DT_INT32);
  whole.Input(Tensor(DT_INT32, TensorShape({2, 0})))
      .Input(Tensor::FromVector<float>({1, 2, 3, 10, 20, 30}, TensorShape({2, 3})))
      .Input(Tensor::Vec<int32_t>({3}));
  out = whole.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<float>((*out)[0], {11, 22, 33}, {3});
  OpTest none("ScatterNd");
  none.Attr("T", DT_FLOAT).Attr("Tindices", DT_INT32);
  none.Input(Tensor(DT_INT32, TensorShape({0, 0})))
      .Input(Tensor(DT_FLOAT, TensorShape({0, 3})))
      .Input(Tensor::Vec<int32_t>({3}));
  out = none.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<float>((*out)[0], {0, 0, 0}, {3});

  // A shape whose element count overflows is refused, not allocated small.
  OpTest overflow("ScatterNd");
  overflow.Attr("T", DT_FLOAT).Attr("Tindices", DT_INT64);
  overflow.Input(Tensor::FromVector<int64_t>({1}, TensorShape({1, 1})))
      .Input(Tensor::FromVector<float>({1, 1, 1, 1}, TensorShape({1, 4})))
      .Input(Tensor::Vec<int64_t>({int64_t{1} << 62, 4}));
  EXPECT_EQ(overflow.Run().status().code(), absl::StatusCode::kInvalidArgument);

  OpTest huge("ScatterNd");
  huge.Attr("T", DT_FLOAT).Attr("Tindices", DT_INT64);
  huge.Input(Tensor::FromVector<int64_t>({0}, TensorShape({1, 1})))
      .Input(Tensor::FromVector<float>({1}, TensorShape({1, 1})))
      .Input(Tensor::Vec<int64_t>({int64_t{1} << 40, 1}));
  EXPECT_EQ(huge.Run().status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(LogicalReductionTest, AllAndAny) {
  const Tensor x = Tensor::FromVector<bool>({true, false, true, true, true, true}, TensorShape({2, 3}));
  OpTest all("All");
  all.Input(x).Input(Tensor::Vec<int32_t>({1}));
  auto out = all.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<bool>((*out)[0], {false, true}, {2});
  OpTest any("Any");
  any.Attr("keep_dims", true).Input(x).Input(Tensor::Vec<int32_t>({0, 1}));
  out = any.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<bool>((*out)[0], {true}, {1, 1});
  OpTest empty("All");  // Over nothing: true.
  empty.Input(Tensor(DT_BOOL, TensorShape({0}))).Input(Tensor::Vec<int32_t>({0}));
  out = empty.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<bool>((*out)[0], {true}, {});
}

TEST(InTopKTest, TiesCountAndBadTargetsAreFalse) {
  OpTest t("InTopKV2");
  t.Input(Tensor::FromVector<float>({0.1f, 0.5f, 0.5f, 0.2f, 1, NAN, 0, 0, 0.3f, 0.2f, 0.1f, 0},
                                    TensorShape({3, 4})))
      .Input(Tensor::Vec<int32_t>({2, 1, 5}))
      .Input(Tensor::Scalar<int32_t>(1));
  auto out = t.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<bool>((*out)[0], {true, false, false}, {3});  // TensorFlow's.

  // A non-finite prediction anywhere in the row makes it false, as TensorFlow.
  OpTest nan_row("InTopKV2");
  nan_row.Input(Tensor::FromVector<float>({NAN, 1}, TensorShape({1, 2})))
      .Input(Tensor::Vec<int32_t>({1}))
      .Input(Tensor::Scalar<int32_t>(1));
  out = nan_row.Run();
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<bool>((*out)[0], {false}, {1});
  OpTest k_vector("InTopKV2");
  k_vector.Input(Tensor::FromVector<float>({1, 2}, TensorShape({1, 2})))
      .Input(Tensor::Vec<int32_t>({1}))
      .Input(Tensor::Vec<int32_t>({1}));
  EXPECT_THAT(k_vector.Run().status().message(), HasSubstr("k must be 0-D"));

  OpTest bad("InTopKV2");
  bad.Input(Tensor::FromVector<float>({1, 2}, TensorShape({1, 2})))
      .Input(Tensor::Vec<int32_t>({0, 1}))
      .Input(Tensor::Scalar<int32_t>(1));
  EXPECT_THAT(bad.Run().status().message(), HasSubstr("must match length of targets"));
}

}  // namespace
}  // namespace dflow
