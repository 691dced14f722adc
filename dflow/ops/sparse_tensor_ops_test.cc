// SparseReshape and SparseFillEmptyRows against TensorFlow 2.21's values.
#include <string>
#include <vector>

#include "dflow/ops/op_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

using ::testing::HasSubstr;

Tensor Matrix(const std::vector<int64_t>& v, int64_t columns) {
  return Tensor::FromVector<int64_t>(v, {static_cast<int64_t>(v.size()) / columns, columns});
}

absl::StatusOr<std::vector<Tensor>> Reshape(const Tensor& indices, const std::vector<int64_t>& in,
                                            const Tensor& out) {
  OpTest t("SparseReshape");
  t.Input(indices).Input(Tensor::Vec<int64_t>(in)).Input(out);
  return t.Run();
}

TEST(SparseTensorOpsTest, SparseReshapeMovesEveryIndex) {
  // TensorFlow's values.
  auto out = Reshape(Matrix({0, 1, 1, 2, 2, 0}, 2), {3, 4}, Tensor::Vec<int64_t>({2, -1}));
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<int64_t>((*out)[0], {0, 1, 1, 0, 1, 2}, {3, 2});
  ExpectTensorEq<int64_t>((*out)[1], {2, 6}, {2});
  out = Reshape(Matrix({0, 1, 1, 2}, 2), {3, 4}, Tensor::Vec<int64_t>({2, 3, 2}));
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<int64_t>((*out)[0], {0, 0, 1, 1, 0, 0}, {2, 3});
  out = Reshape(Tensor(DT_INT64, TensorShape({0, 2})), {0, 4}, Tensor::Vec<int64_t>({-1, 2}));
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<int64_t>((*out)[1], {0, 2}, {2});
}

TEST(SparseTensorOpsTest, SparseReshapeErrors) {
  auto error = [](const std::vector<int64_t>& in, const Tensor& target, int64_t columns = 2) {
    auto out = Reshape(Matrix(std::vector<int64_t>(2 * columns, 0), columns), in, target);
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(out.status().message());
  };
  EXPECT_THAT(error({3, 4}, Tensor::Vec<int64_t>({-1, -1})),
              HasSubstr("only one output dimension may be -1, not both 0 and 1"));
  EXPECT_THAT(error({3, 4}, Tensor::Vec<int64_t>({5, -1})),
              HasSubstr("Input to reshape is a SparseTensor with 12 dense values, but the "
                        "requested shape requires a multiple of 5. input_shape=[3,4] "
                        "output_shape=[5,1]"));
  EXPECT_THAT(error({3, 4}, Tensor::Vec<int64_t>({5, 2})),
              HasSubstr("Input to reshape is a tensor with 12 dense values, but the requested "
                        "shape has 10."));
  EXPECT_THAT(error({3, 4}, Tensor::Vec<int64_t>({2, -2})),
              HasSubstr("size 1 must be non-negative, not -2"));
  EXPECT_THAT(error({3, 4, 1}, Tensor::Vec<int64_t>({12})),
              HasSubstr("Input tensor rank must match input shape length."));
  EXPECT_THAT(error({3, 4}, Tensor::FromVector<int64_t>({12}, {1, 1})),
              HasSubstr("Target shape should be a vector but received shape [1,1]"));
  EXPECT_THAT(error({int64_t{1} << 40, int64_t{1} << 40}, Tensor::Vec<int64_t>({-1})),
              HasSubstr("too many elements"));
  EXPECT_THAT(error({3, 4}, Tensor::Vec<int64_t>({int64_t{1} << 40, int64_t{1} << 40})),
              HasSubstr("too many elements"));
}

absl::StatusOr<std::vector<Tensor>> Fill(const Tensor& indices, const Tensor& values,
                                         const std::vector<int64_t>& shape,
                                         const Tensor& default_value) {
  OpTest t("SparseFillEmptyRows");
  t.Attr("T", values.dtype());
  t.Input(indices).Input(values).Input(Tensor::Vec<int64_t>(shape)).Input(default_value);
  return t.Run();
}

TEST(SparseTensorOpsTest, SparseFillEmptyRowsAddsDefaults) {
  // TensorFlow's values.
  auto out = Fill(Matrix({0, 1, 0, 3, 2, 0, 3, 1}, 2), Tensor::Vec<float>({1, 2, 3, 4}), {5, 4},
                  Tensor::Scalar(-1.0f));
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<int64_t>((*out)[0], {0, 1, 0, 3, 1, 0, 2, 0, 3, 1, 4, 0}, {6, 2});
  ExpectTensorEq<float>((*out)[1], {1, 2, -1, 3, 4, -1}, {6});
  ExpectTensorEq<bool>((*out)[2], {false, true, false, false, true}, {5});
  ExpectTensorEq<int64_t>((*out)[3], {0, 1, 3, 4}, {4});
  // Unsorted rows come out grouped by row, in input order within a row.
  out = Fill(Matrix({2, 0, 0, 3, 0, 1}, 2), Tensor::Vec<float>({1, 2, 3}), {3, 4},
             Tensor::Scalar(-1.0f));
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<int64_t>((*out)[0], {0, 3, 0, 1, 1, 0, 2, 0}, {4, 2});
  ExpectTensorEq<float>((*out)[1], {2, 3, -1, 1}, {4});
  ExpectTensorEq<int64_t>((*out)[3], {3, 0, 1}, {3});
  out = Fill(Matrix({1, 0, 0}, 3), Tensor::Vec<float>({1}), {3, 4, 2}, Tensor::Scalar(-1.0f));
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<int64_t>((*out)[0], {0, 0, 0, 1, 0, 0, 2, 0, 0}, {3, 3});
  out = Fill(Matrix({0, 1}, 2), Tensor::Vec<std::string>({"x"}), {2, 4},
             Tensor::Scalar<std::string>("d"));
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<std::string>((*out)[1], {"x", "d"}, {2});
  out = Fill(Tensor(DT_INT64, TensorShape({0, 2})), Tensor(DT_FLOAT, TensorShape({0})), {0, 4},
             Tensor::Scalar(-1.0f));
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<float>((*out)[1], {}, {0});
}

TEST(SparseTensorOpsTest, SparseFillEmptyRowsErrors) {
  auto error = [](const Tensor& indices, const Tensor& values, const std::vector<int64_t>& shape,
                  const Tensor& default_value) {
    auto out = Fill(indices, values, shape, default_value);
    EXPECT_FALSE(out.ok());
    return std::string(out.status().message());
  };
  const Tensor one = Tensor::Vec<float>({1}), d = Tensor::Scalar(-1.0f);
  EXPECT_THAT(error(Matrix({5, 0}, 2), one, {3, 4}, d),
              HasSubstr("indices(0, 0) is invalid: 5 >= 3"));
  EXPECT_THAT(error(Matrix({-1, 0}, 2), one, {3, 4}, d), HasSubstr("indices(0, 0) is invalid: -1"));
  EXPECT_THAT(
      error(Matrix({1, 0}, 2), Tensor::Vec<float>({1, 2}), {3, 4}, d),
      HasSubstr("The length of `values` (2) must match the first dimension of `indices` (1)."));
  EXPECT_THAT(error(Tensor::Vec<int64_t>({1, 0}), one, {3, 4}, d),
              HasSubstr("indices must be a matrix, saw: [2]"));
  EXPECT_THAT(error(Matrix({1, 0}, 2), one, {3, 4}, Tensor::Vec<float>({-1})),
              HasSubstr("default_value must be a scalar, saw: [1]"));
  EXPECT_THAT(error(Matrix({0, 0}, 2), one, {0, 4}, d),
              HasSubstr("Received SparseTensor with dense_shape[0] = 0 but indices.shape[0] = 1"));
  EXPECT_THAT(error(Matrix({1, 0}, 2), one, {-3, 4}, d),
              HasSubstr("Expected shape dimensions to be non-negative, got -3"));
  EXPECT_THAT(error(Matrix({1, 0}, 2), one, {3, 4, 2}, d), HasSubstr("must have one element per"));
  // 2^40 empty rows: refused before allocating.
  auto huge = Fill(Tensor(DT_INT64, TensorShape({0, 2})), Tensor(DT_FLOAT, TensorShape({0})),
                   {int64_t{1} << 40, 4}, d);
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(SparseTensorOpsTest, ShapeFunctions) {
  tensorflow::NodeDef r;
  r.set_name("r");
  r.set_op("SparseReshape");
  auto shapes = Infer(r, {PartialShape({5, 2}), PartialShape({2}), PartialShape({3})});
  ASSERT_TRUE(shapes.ok()) << shapes.status();
  EXPECT_EQ(*shapes, (std::vector<PartialShape>{PartialShape({5, 3}), PartialShape({3})}));
  EXPECT_FALSE(Infer(r, {PartialShape({5}), PartialShape({2}), PartialShape({3})}).ok());
  tensorflow::NodeDef f;
  f.set_name("f");
  f.set_op("SparseFillEmptyRows");
  SetAttr(&f, "T", DT_FLOAT);
  shapes = Infer(f, {PartialShape({5, 2}), PartialShape({5}), PartialShape({2}), PartialShape({})});
  ASSERT_TRUE(shapes.ok()) << shapes.status();
  EXPECT_EQ(*shapes, (std::vector<PartialShape>{PartialShape({-1, 2}), PartialShape({-1}),
                                                PartialShape({-1}), PartialShape({5})}));
  EXPECT_FALSE(
      Infer(f, {PartialShape({5, 2}), PartialShape({5}), PartialShape({2}), PartialShape({1})})
          .ok());
}

}  // namespace
}  // namespace dflow
