// Tests for MaxPool and AvgPool (pooling_ops.cc). Expected values come from TensorFlow
// 2.x's CPU kernel on Pattern inputs (tests/data/gen_nn_reference.py).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "dflow/framework/kernel.h"
#include "dflow/ops/nn_test_util.h"
#include "dflow/ops/op_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

using ::testing::HasSubstr;

struct PoolArgs {
  std::vector<int> ksize = {1, 2, 2, 1};
  std::vector<int> strides = {1, 2, 2, 1};
  std::string padding = "VALID";
  std::string data_format = "NHWC";
};

absl::StatusOr<std::vector<Tensor>> RunPool(Tensor input, const PoolArgs& a,
                                            const std::string& op = "MaxPool") {
  OpTest t(op, "pool");
  t.Attr("T", input.dtype())
      .Attr("ksize", a.ksize)
      .Attr("strides", a.strides)
      .Attr("padding", a.padding)
      .Attr("data_format", a.data_format);
  t.Input(std::move(input));
  return t.Run();
}

void ExpectPoolError(const absl::StatusOr<std::vector<Tensor>>& r, absl::StatusCode code,
                     const std::string& substr) {
  ASSERT_FALSE(r.ok()) << "expected '" << substr << "'";
  EXPECT_EQ(r.status().code(), code) << r.status();
  EXPECT_THAT(std::string(r.status().message()), HasSubstr(substr));
}

TEST(NnMaxPoolTest, SameK2S2OddSize) {
  PoolArgs a;
  a.padding = "SAME";
  NN_ASSERT_OK_AND_ASSIGN(auto out, RunPool(Pattern(TensorShape({1, 5, 5, 2})), a));
  ExpectTensorEq<float>(out[0],
                        {0.5, 1.25, 1.25, 1.0, 0.0, 0.75, 0.75, 0.75, 1.25, 1.25, 1.0, 1.0, 0.75,
                         -0.25, -0.5, 1.25, 0.25, -0.75},
                        {1, 3, 3, 2});
}

TEST(NnMaxPoolTest, ValidK3S2) {
  PoolArgs a;
  a.ksize = {1, 3, 3, 1};
  NN_ASSERT_OK_AND_ASSIGN(auto out, RunPool(Pattern(TensorShape({1, 5, 5, 2})), a));
  ExpectTensorEq<float>(out[0], {1.25, 1.25, 1.25, 1.25, 0.75, 1.25, 1.25, 1.25}, {1, 2, 2, 2});
}

TEST(NnMaxPoolTest, SamePaddingIsNotZero) {
  // All inputs negative: a padded zero would win if padding were compared.
  Tensor in = Pattern(TensorShape({1, 3, 3, 1}));
  for (float& v : in.flat<float>()) v = -std::abs(v) - 1;
  PoolArgs a;
  a.ksize = {1, 3, 3, 1};
  a.strides = {1, 1, 1, 1};
  a.padding = "SAME";
  NN_ASSERT_OK_AND_ASSIGN(auto out, RunPool(in, a));
  ExpectTensorEq<float>(out[0], {-1.25, -1.25, -1.25, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0},
                        {1, 3, 3, 1});
}

TEST(NnMaxPoolTest, DepthwisePooling) {
  PoolArgs a;
  a.ksize = {1, 1, 1, 2};
  a.strides = {1, 1, 1, 2};
  NN_ASSERT_OK_AND_ASSIGN(auto out, RunPool(Pattern(TensorShape({1, 2, 2, 4})), a));
  ExpectTensorEq<float>(out[0], {0.5, 1.25, 0.25, 1.0, 0.75, -0.25, 0.5, 1.25}, {1, 2, 2, 2});
}

TEST(NnMaxPoolTest, NanIsSkippedLikeTensorFlow) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  PoolArgs a;
  a.strides = {1, 1, 1, 1};
  NN_ASSERT_OK_AND_ASSIGN(auto out,
                          RunPool(Tensor::FromVector<float>({nan, 1, 2, 3}, {1, 2, 2, 1}), a));
  ExpectTensorEq<float>(out[0], {3}, {1, 1, 1, 1});
}

TEST(NnMaxPoolTest, IntegerTypes) {
  Tensor in(DT_INT64, TensorShape({1, 2, 2, 1}));
  in.flat<int64_t>()[0] = -5, in.flat<int64_t>()[1] = -7;
  in.flat<int64_t>()[2] = -9, in.flat<int64_t>()[3] = -6;
  NN_ASSERT_OK_AND_ASSIGN(auto out, RunPool(in, {}));
  ExpectTensorEq<int64_t>(out[0], {-5}, {1, 1, 1, 1});
}

// The CNN's case: [64, 28, 28, 32], 2x2 stride 2, against a direct loop.
TEST(NnMaxPoolTest, TrainingSizeMatchesDirectLoop) {
  const int64_t n = 64, h = 28, w = 28, c = 32;
  Tensor in(DT_FLOAT, TensorShape({n, h, w, c}));
  auto x = in.flat<float>();
  for (int64_t i = 0; i < in.NumElements(); ++i) x[i] = static_cast<float>((i * 7919) % 1009);
  NN_ASSERT_OK_AND_ASSIGN(auto out, RunPool(in, {}));
  ASSERT_EQ(out[0].shape(), TensorShape({n, 14, 14, c}));
  auto y = out[0].flat<float>();
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oh = 0; oh < 14; ++oh)
      for (int64_t ow = 0; ow < 14; ++ow)
        for (int64_t k = 0; k < c; ++k) {
          float m = -1;
          for (int64_t i = 0; i < 2; ++i)
            for (int64_t j = 0; j < 2; ++j)
              m = std::max(m, x[((b * h + 2 * oh + i) * w + 2 * ow + j) * c + k]);
          ASSERT_EQ(y[((b * 14 + oh) * 14 + ow) * c + k], m) << b << " " << oh << " " << ow;
        }
}

TEST(NnMaxPoolTest, BadInputIsAClearError) {
  ExpectPoolError(RunPool(Pattern(TensorShape({5, 5, 3})), {}), absl::StatusCode::kInvalidArgument,
                  "[MaxPool 'pool'] input must be 4-dimensional (NHWC), got [5,5,3]");
  PoolArgs batch;
  batch.ksize = {2, 2, 2, 1};
  ExpectPoolError(RunPool(Pattern(TensorShape({2, 4, 4, 1})), batch),
                  absl::StatusCode::kUnimplemented, "not yet supported on the batch dimension");
  PoolArgs bad_padding;
  bad_padding.padding = "FULL";
  ExpectPoolError(RunPool(Pattern(TensorShape({1, 4, 4, 1})), bad_padding),
                  absl::StatusCode::kInvalidArgument, "FULL");
  PoolArgs too_big;
  too_big.ksize = {1, 3, 3, 1};
  too_big.strides = {1, 1, 1, 1};
  ExpectPoolError(RunPool(Pattern(TensorShape({1, 1, 1, 3})), too_big),
                  absl::StatusCode::kInvalidArgument, "Computed output size would be negative");
  PoolArgs nchw;
  nchw.data_format = "NCHW";
  nchw.ksize = nchw.strides = {1, 1, 2, 2};
  ExpectPoolError(RunPool(Pattern(TensorShape({1, 1, 4, 4})), nchw),
                  absl::StatusCode::kInvalidArgument, "only supports NHWC");
  PoolArgs depth;
  depth.ksize = depth.strides = {1, 1, 1, 2};
  ExpectPoolError(RunPool(Pattern(TensorShape({1, 2, 2, 5})), depth),
                  absl::StatusCode::kUnimplemented, "evenly divide the input depth");
  PoolArgs zero;
  zero.ksize = {1, 0, 2, 1};
  ExpectPoolError(RunPool(Pattern(TensorShape({1, 4, 4, 1})), zero),
                  absl::StatusCode::kInvalidArgument, "ksize must be positive");
}

// --- AvgPool ----------------------------------------------------------------------------

absl::StatusOr<std::vector<Tensor>> RunAvgPool(Tensor input, const PoolArgs& a) {
  return RunPool(std::move(input), a, "AvgPool");
}

// Edge windows of SAME average only the elements inside the image.
TEST(NnAvgPoolTest, SameK2S2MatchesTensorFlow) {
  PoolArgs a;
  a.padding = "SAME";
  NN_ASSERT_OK_AND_ASSIGN(auto out, RunAvgPool(Pattern(TensorShape({1, 5, 5, 2})), a));
  ExpectTensorEq<float>(out[0],
                        {-0.375, 0.0, 0.4375, 0.125, -0.5, -0.125, -0.4375, -0.0625, 0.375,
                         0.0625, 0.125, 0.5, 0.375, -0.625, -0.875, 0.875, 0.25, -0.75},
                        {1, 3, 3, 2});
}

TEST(NnAvgPoolTest, ValidK3S2MatchesTensorFlow) {
  PoolArgs a;
  a.ksize = {1, 3, 3, 1};
  NN_ASSERT_OK_AND_ASSIGN(auto out, RunAvgPool(Pattern(TensorShape({2, 5, 5, 2})), a));
  const std::vector<float> tf = {
      -0.1111111119389534, 0.1111111119389534,  0.1666666716337204,   0.0833333358168602,
      -0.25,               -0.02777777798473835, 0.02777777798473835, 0.25,
      0.0,                 -0.0833333358168602, -0.02777777798473835, -0.1111111119389534,
      0.1666666716337204,  0.0833333358168602,  -0.1666666716337204,  -0.25};
  ASSERT_EQ(out[0].shape(), TensorShape({2, 2, 2, 2}));
  auto v = out[0].flat<float>();
  for (size_t i = 0; i < tf.size(); ++i) EXPECT_FLOAT_EQ(v[i], tf[i]) << i;
  // The double kernel agrees.
  NN_ASSERT_OK_AND_ASSIGN(auto d, RunAvgPool(Pattern<double>(TensorShape({2, 5, 5, 2})), a));
  auto dv = d[0].flat<double>();
  for (size_t i = 0; i < tf.size(); ++i) EXPECT_NEAR(dv[i], tf[i], 1e-7) << i;
}

TEST(NnAvgPoolTest, OverlappingSameWindowsMatchTensorFlow) {
  PoolArgs a;
  a.ksize = {1, 3, 3, 1};
  a.strides = {1, 1, 1, 1};
  a.padding = "SAME";
  NN_ASSERT_OK_AND_ASSIGN(auto out, RunAvgPool(Pattern(TensorShape({1, 3, 4, 1})), a));
  const std::vector<float> tf = {-0.3125, -0.125, 0.25,   0.4375, -0.25, -0.1388888955116272,
                                 0.0833333358168602, 0.0416666679084301, -0.1875, 0.0,
                                 -0.0833333358168602, -0.125};
  auto v = out[0].flat<float>();
  for (size_t i = 0; i < tf.size(); ++i) EXPECT_FLOAT_EQ(v[i], tf[i]) << i;
}

TEST(NnAvgPoolTest, NanPropagatesAndEmptyWindowsGiveAnEmptyOutput) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  NN_ASSERT_OK_AND_ASSIGN(
      auto out, RunAvgPool(Tensor::FromVector<float>({nan, 1, 2, 3}, TensorShape({1, 2, 2, 1})),
                           PoolArgs{}));
  EXPECT_TRUE(std::isnan(out[0].flat<float>()[0]));
  PoolArgs k3;
  k3.ksize = {1, 3, 3, 1};
  NN_ASSERT_OK_AND_ASSIGN(auto empty, RunAvgPool(Pattern(TensorShape({1, 1, 1, 1})), k3));
  EXPECT_EQ(empty[0].shape(), TensorShape({1, 0, 0, 1}));
}

TEST(NnAvgPoolTest, BadInputIsAClearError) {
  ExpectPoolError(RunAvgPool(Pattern(TensorShape({4, 4, 1})), {}),
                  absl::StatusCode::kInvalidArgument,
                  "[AvgPool 'pool'] input must be 4-dimensional (NHWC), got [4,4,1]");
  PoolArgs depth;
  depth.ksize = depth.strides = {1, 1, 1, 2};
  ExpectPoolError(RunAvgPool(Pattern(TensorShape({1, 4, 4, 4})), depth),
                  absl::StatusCode::kUnimplemented, "Non-spatial pooling is not yet supported");
  PoolArgs batch;
  batch.ksize = {2, 2, 2, 1};
  ExpectPoolError(RunAvgPool(Pattern(TensorShape({2, 4, 4, 1})), batch),
                  absl::StatusCode::kUnimplemented, "not yet supported on the batch dimension");
  PoolArgs nchw;
  nchw.data_format = "NCHW";
  nchw.ksize = nchw.strides = {1, 1, 2, 2};
  ExpectPoolError(RunAvgPool(Pattern(TensorShape({1, 1, 4, 4})), nchw),
                  absl::StatusCode::kInvalidArgument, "only supports NHWC");
  Tensor ints(DT_INT32, TensorShape({1, 2, 2, 1}));
  ASSERT_FALSE(RunAvgPool(ints, {}).ok());
}

absl::StatusOr<std::vector<PartialShape>> PoolShape(const PoolArgs& a, PartialShape input,
                                                    const std::string& op = "MaxPool") {
  tensorflow::NodeDef node;
  node.set_name("pool");
  node.set_op(op);
  SetAttr(&node, "T", DT_FLOAT);
  SetAttr(&node, "ksize", a.ksize);
  SetAttr(&node, "strides", a.strides);
  SetAttr(&node, "padding", a.padding);
  SetAttr(&node, "data_format", a.data_format);
  return InferNodeShapes(node, {std::move(input)});
}

TEST(NnMaxPoolShapeTest, Table) {
  PoolArgs valid, same, same3, depth, nchw;
  same.padding = same3.padding = "SAME";
  same3.ksize = {1, 3, 3, 1};
  same3.strides = {1, 1, 1, 1};
  depth.ksize = depth.strides = {1, 1, 1, 4};
  nchw.data_format = "NCHW";
  nchw.ksize = nchw.strides = {1, 1, 2, 2};
  struct Case {
    PoolArgs args;
    PartialShape input;
    std::string output;
  };
  const std::vector<Case> cases = {
      {valid, PartialShape({64, 28, 28, 32}), "[64,14,14,32]"},
      {valid, PartialShape({64, 7, 7, 64}), "[64,3,3,64]"},
      {same, PartialShape({64, 7, 7, 64}), "[64,4,4,64]"},
      {same3, PartialShape({-1, 5, -1, 2}), "[?,5,?,2]"},
      {depth, PartialShape({2, 3, 3, 8}), "[2,3,3,2]"},
      {nchw, PartialShape({2, 3, 8, 6}), "[2,3,4,3]"},
      {valid, PartialShape(), "[?,?,?,?]"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::vector<PartialShape>> out = PoolShape(c.args, c.input);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].DebugString(), c.output) << c.input.DebugString();
  }
  absl::StatusOr<std::vector<PartialShape>> bad = PoolShape(valid, PartialShape({28, 28, 1}));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("rank 4"));
  bad = PoolShape(depth, PartialShape({2, 3, 3, 6}));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("does not evenly divide"));
}

// AvgPool's shape function keeps the depth, as TensorFlow's (its kernel
// refuses a depth window).
TEST(NnAvgPoolShapeTest, SpatialWindowsAndDepthKept) {
  PoolArgs valid, same, depth;
  same.padding = "SAME";
  depth.ksize = depth.strides = {1, 1, 1, 2};
  for (const auto& [args, input, output] :
       std::vector<std::tuple<PoolArgs, PartialShape, std::string>>{
           {valid, PartialShape({64, 28, 28, 32}), "[64,14,14,32]"},
           {same, PartialShape({-1, 7, 7, 64}), "[?,4,4,64]"},
           {depth, PartialShape({2, 5, 5, 4}), "[2,5,5,4]"}}) {
    absl::StatusOr<std::vector<PartialShape>> out = PoolShape(args, input, "AvgPool");
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].DebugString(), output) << input.DebugString();
  }
}

}  // namespace
}  // namespace dflow
