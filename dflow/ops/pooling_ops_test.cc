// Tests for MaxPool (pooling_ops.cc). Expected values come from TensorFlow
// 2.x's CPU kernel on Pattern inputs (tests/data/gen_nn_reference.py).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
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

absl::StatusOr<std::vector<Tensor>> RunPool(Tensor input, const PoolArgs& a) {
  OpTest t("MaxPool", "pool");
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

absl::StatusOr<std::vector<PartialShape>> PoolShape(const PoolArgs& a, PartialShape input) {
  tensorflow::NodeDef node;
  node.set_name("pool");
  node.set_op("MaxPool");
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

}  // namespace
}  // namespace dflow
