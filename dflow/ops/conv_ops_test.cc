// Tests for Conv2D (conv_ops.cc). Expected values come from TensorFlow 2.x's
// CPU kernel on the inputs Pattern / FilterPattern (see
// tests/data/gen_nn_reference.py); larger cases are checked against a direct
// convolution computed in double.
#include <cstdint>
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

struct ConvArgs {
  std::vector<int> strides = {1, 1, 1, 1};
  std::string padding = "SAME";
  std::vector<int> dilations = {1, 1, 1, 1};
  std::vector<int> explicit_paddings = {};
  std::string data_format = "NHWC";
};

absl::StatusOr<std::vector<Tensor>> RunConv(Tensor input, Tensor filter, const ConvArgs& a) {
  OpTest t("Conv2D", "conv");
  t.Attr("T", input.dtype())
      .Attr("strides", a.strides)
      .Attr("padding", a.padding)
      .Attr("dilations", a.dilations)
      .Attr("data_format", a.data_format);
  if (!a.explicit_paddings.empty()) t.Attr("explicit_paddings", a.explicit_paddings);
  t.Input(std::move(input)).Input(std::move(filter));
  return t.Run();
}

// Pseudo-random values in [-1, 1) from a linear congruential generator.
Tensor Noise(const TensorShape& shape, uint32_t seed) {
  Tensor t(DT_FLOAT, shape);
  uint32_t s = seed;
  for (float& v : t.flat<float>()) {
    s = s * 1664525u + 1013904223u;
    v = static_cast<float>(s >> 8) / static_cast<float>(1 << 23) - 1.0f;
  }
  return t;
}

// Direct NHWC convolution in double (the definition, no im2col).
std::vector<double> DirectConv(const Tensor& input, const Tensor& filter, const ConvArgs& a,
                               int64_t out_rows, int64_t out_cols, int64_t pad_top,
                               int64_t pad_left) {
  const int64_t n = input.dim_size(0), h = input.dim_size(1), w = input.dim_size(2),
                c = input.dim_size(3);
  const int64_t kh = filter.dim_size(0), kw = filter.dim_size(1), fc = filter.dim_size(2),
                f = filter.dim_size(3);
  const int64_t groups = c / fc, fg = f / groups;
  auto in = input.flat<float>();
  auto fl = filter.flat<float>();
  std::vector<double> out(n * out_rows * out_cols * f, 0.0);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oh = 0; oh < out_rows; ++oh)
      for (int64_t ow = 0; ow < out_cols; ++ow)
        for (int64_t o = 0; o < f; ++o) {
          const int64_t g = o / fg;
          double sum = 0;
          for (int64_t i = 0; i < kh; ++i)
            for (int64_t j = 0; j < kw; ++j) {
              const int64_t ih = oh * a.strides[1] - pad_top + i * a.dilations[1];
              const int64_t iw = ow * a.strides[2] - pad_left + j * a.dilations[2];
              if (ih < 0 || ih >= h || iw < 0 || iw >= w) continue;
              for (int64_t k = 0; k < fc; ++k) {
                sum += double{in[((b * h + ih) * w + iw) * c + g * fc + k]} *
                       double{fl[((i * kw + j) * fc + k) * f + o]};
              }
            }
          out[((b * out_rows + oh) * out_cols + ow) * f + o] = sum;
        }
  return out;
}

void ExpectMatchesDirect(const TensorShape& in_shape, const TensorShape& f_shape, const ConvArgs& a,
                         int64_t out_rows, int64_t out_cols, int64_t pad_top, int64_t pad_left) {
  Tensor input = Noise(in_shape, 1), filter = Noise(f_shape, 2);
  NN_ASSERT_OK_AND_ASSIGN(auto out, RunConv(input, filter, a));
  const std::vector<double> expected =
      DirectConv(input, filter, a, out_rows, out_cols, pad_top, pad_left);
  ASSERT_EQ(out[0].shape(),
            TensorShape({in_shape.dim_size(0), out_rows, out_cols, f_shape.dim_size(3)}));
  auto v = out[0].flat<float>();
  int bad = 0;
  for (size_t i = 0; i < expected.size() && bad < 5; ++i) {
    if (std::abs(v[i] - expected[i]) > 1e-4 * (1 + std::abs(expected[i]))) {
      ADD_FAILURE() << "at " << i << ": " << v[i] << " vs " << expected[i];
      ++bad;
    }
  }
}

// --- values from TensorFlow ------------------------------------------------------------

TEST(NnConv2DTest, SameStride1) {
  NN_ASSERT_OK_AND_ASSIGN(auto out, RunConv(Pattern(TensorShape({1, 5, 4, 2})),
                                            FilterPattern(TensorShape({3, 3, 2, 3})), {}));
  ExpectTensorEq<float>(
      out[0], {-2.125, -3.125, -3.0,   7.5,    -7.125, 6.375,  5.75,   -1.25,  6.375,  -4.375,
               6.25,   -3.375, -3.25,  -6.125, -4.5,   12.875, -10.25, 11.625, 3.375,  3.375,
               3.375,  -6.5,   4.625,  -5.625, -3.375, -9.0,   -4.5,   16.125, -9.375, 15.75,
               -4.375, 11.125, -4.875, -7.75,  0.625,  -6.75,  0.625,  -7.75,  -0.375, 11.125,
               -4.375, 11.625, -9.375, 16.125, -9.0,   -9.0,   -3.375, -7.875, 1.75,   -4.75,
               1.125,  5.75,   -1.25,  6.375,  -7.0,   11.5,   -6.0,   -6.875, -1.75,  -5.625},
      {1, 5, 4, 3});
}

TEST(NnConv2DTest, SameStride2) {
  ConvArgs a;
  a.strides = {1, 2, 2, 1};
  const std::vector<double> expected = {
      7.5,    -7.125, 6.375, -4.375, 6.25,   -3.375, 16.125, -9.375, 15.75, -7.75, 0.625,  -6.75,
      5.75,   -1.25,  6.375, -6.875, -1.75,  -5.625, -5.5,   10.0,   -6.0,  6.125, -3.875, 5.25,
      -10.25, 12.875, -9.0,  13.5,   -5.625, 12.375, -5.875, -2.0,   -6.0,  3.625, 0.5,    3.0};
  NN_ASSERT_OK_AND_ASSIGN(auto out, RunConv(Pattern(TensorShape({2, 5, 4, 2})),
                                            FilterPattern(TensorShape({3, 3, 2, 3})), a));
  ExpectTensorEq<float>(out[0], std::vector<float>(expected.begin(), expected.end()), {2, 3, 2, 3});
  // The double kernel agrees.
  NN_ASSERT_OK_AND_ASSIGN(auto out_d, RunConv(Pattern<double>(TensorShape({2, 5, 4, 2})),
                                              FilterPattern<double>(TensorShape({3, 3, 2, 3})), a));
  ExpectTensorEq<double>(out_d[0], expected, {2, 3, 2, 3});
}

TEST(NnConv2DTest, ValidStride1) {
  ConvArgs a;
  a.padding = "VALID";
  NN_ASSERT_OK_AND_ASSIGN(auto out, RunConv(Pattern(TensorShape({2, 5, 4, 2})),
                                            FilterPattern(TensorShape({3, 2, 2, 3})), a));
  ExpectTensorEq<float>(
      out[0], {-2.5,  -0.875, -3.75,  5.375,  -4.625, 4.5,    -4.625, 5.375, -3.75,  1.5, -0.75,
               0.375, 1.125,  -0.375, 0.375,  -0.625, 5.5,    0.375,  5.5,   -0.625, 4.5, -0.375,
               1.125, 0.375,  -0.75,  1.5,    0.375,  -0.375, 1.125,  0.375, -0.75,  1.5, 0.375,
               -2.5,  -0.875, -3.75,  -4.625, 5.375,  -3.75,  -0.875, -2.5,  0.375,  1.5, -0.75,
               0.375, -0.625, 5.5,    0.375,  -3.75,  -3.75,  -3.75,  5.5,   -0.625, 4.5},
      {2, 3, 3, 3});
}

TEST(NnConv2DTest, ValidStride2OddSize) {
  ConvArgs a;
  a.padding = "VALID";
  a.strides = {1, 2, 2, 1};
  NN_ASSERT_OK_AND_ASSIGN(auto out, RunConv(Pattern(TensorShape({1, 5, 5, 3})),
                                            FilterPattern(TensorShape({3, 3, 3, 2})), a));
  ExpectTensorEq<float>(out[0], {0.75, -0.375, -2.0, 1.0, -0.625, -3.125, -2.0, 5.125},
                        {1, 2, 2, 2});
}

TEST(NnConv2DTest, PointwiseFilter) {
  ConvArgs a;
  a.padding = "VALID";
  NN_ASSERT_OK_AND_ASSIGN(auto out, RunConv(Pattern(TensorShape({1, 2, 3, 3})),
                                            FilterPattern(TensorShape({1, 1, 3, 2})), a));
  ExpectTensorEq<float>(
      out[0], {2.25, -0.875, -2.125, -0.25, -1.0, -1.0, 0.125, -1.75, -1.5, 1.625, -0.375, 0.875},
      {1, 2, 3, 2});
}

TEST(NnConv2DTest, Dilated) {
  ConvArgs a;
  a.dilations = {1, 2, 2, 1};
  NN_ASSERT_OK_AND_ASSIGN(auto out, RunConv(Pattern(TensorShape({1, 5, 5, 1})),
                                            FilterPattern(TensorShape({2, 2, 1, 1})), a));
  ExpectTensorEq<float>(out[0], {1.0,   1.125, -2.5,   0.75,   1.5,    -1.0, 3.125,  1.0,    1.625,
                                 -1.75, -0.25, 2.125,  -1.375, -2.125, 2.0,  -0.875, -1.625, 3.125,
                                 1.0,   0.25,  -0.375, 0.0,    1.5,    -2.5, 0.0},
                        {1, 5, 5, 1});
}

TEST(NnConv2DTest, GroupedFilter) {
  ConvArgs a;
  a.padding = "VALID";
  NN_ASSERT_OK_AND_ASSIGN(auto out, RunConv(Pattern(TensorShape({1, 3, 3, 4})),
                                            FilterPattern(TensorShape({2, 2, 2, 2})), a));
  ExpectTensorEq<float>(out[0], {2.375, 0.125, 2.125, 0.125, 1.625, 0.125, -2.75, -1.25},
                        {1, 2, 2, 2});
}

TEST(NnConv2DTest, ExplicitPadding) {
  ConvArgs a;
  a.padding = "EXPLICIT";
  a.explicit_paddings = {0, 0, 1, 0, 0, 2, 0, 0};
  NN_ASSERT_OK_AND_ASSIGN(auto out, RunConv(Pattern(TensorShape({1, 4, 4, 1})),
                                            FilterPattern(TensorShape({3, 3, 1, 1})), a));
  ExpectTensorEq<float>(
      out[0], {-4.125, 5.25, -2.25, 1.25, 8.0, -5.75, 0.25, -1.875, -5.75, 3.875, -1.125, -1.375},
      {1, 3, 4, 1});
}

TEST(NnConv2DTest, Int32) {
  Tensor input(DT_INT32, TensorShape({1, 3, 3, 1}));
  Tensor filter(DT_INT32, TensorShape({2, 2, 1, 1}));
  for (int i = 0; i < 9; ++i) input.flat<int32_t>()[i] = i + 1;
  for (int i = 0; i < 4; ++i) filter.flat<int32_t>()[i] = i % 2 == 0 ? 1 : -1;
  ConvArgs a;
  a.padding = "VALID";
  NN_ASSERT_OK_AND_ASSIGN(auto out, RunConv(input, filter, a));
  // [[1,2,3],[4,5,6],[7,8,9]] * [[1,-1],[1,-1]]: each window gives -2.
  ExpectTensorEq<int32_t>(out[0], {-2, -2, -2, -2}, {1, 2, 2, 1});
}

// --- Fashion-MNIST-sized cases against the definition --------------------------------------

TEST(NnConv2DTest, FirstLayerShapesMatchDirectConvolution) {
  ExpectMatchesDirect({4, 28, 28, 1}, {5, 5, 1, 32}, {}, 28, 28, 2, 2);
  ConvArgs valid2;
  valid2.padding = "VALID";
  valid2.strides = {1, 2, 2, 1};
  ExpectMatchesDirect({3, 28, 28, 1}, {3, 3, 1, 32}, valid2, 13, 13, 0, 0);
}

TEST(NnConv2DTest, SecondLayerShapesMatchDirectConvolution) {
  ExpectMatchesDirect({3, 14, 14, 32}, {5, 5, 32, 64}, {}, 14, 14, 2, 2);
  ConvArgs same2;
  same2.strides = {1, 2, 2, 1};
  ExpectMatchesDirect({2, 15, 15, 32}, {3, 3, 32, 64}, same2, 8, 8, 1, 1);
}

TEST(NnConv2DTest, DilatedGroupedStridedMatchesDirectConvolution) {
  ConvArgs a;
  a.strides = {1, 2, 1, 1};
  a.dilations = {1, 2, 3, 1};
  // SAME: rows out 6, effective 5 -> pad 4 -> top 2; cols out 11, effective 7 -> pad 6 -> left 3.
  ExpectMatchesDirect({2, 11, 11, 6}, {3, 3, 3, 4}, a, 6, 11, 2, 3);
  ConvArgs e;
  e.padding = "EXPLICIT";
  e.explicit_paddings = {0, 0, 3, 1, 0, 4, 0, 0};
  ExpectMatchesDirect({2, 9, 10, 3}, {4, 3, 3, 5}, e, 10, 12, 3, 0);
}

TEST(NnConv2DTest, EmptyBatchAndEmptyOutput) {
  NN_ASSERT_OK_AND_ASSIGN(auto out, RunConv(Tensor(DT_FLOAT, TensorShape({0, 5, 5, 2})),
                                            FilterPattern(TensorShape({3, 3, 2, 4})), {}));
  EXPECT_EQ(out[0].shape(), TensorShape({0, 5, 5, 4}));
  ConvArgs a;
  a.padding = "VALID";
  NN_ASSERT_OK_AND_ASSIGN(auto out2, RunConv(Pattern(TensorShape({1, 2, 2, 2})),
                                             FilterPattern(TensorShape({3, 3, 2, 4})), a));
  EXPECT_EQ(out2[0].shape(), TensorShape({1, 0, 0, 4}));
}

// --- bad input ----------------------------------------------------------------------

void ExpectConvError(const absl::StatusOr<std::vector<Tensor>>& r, absl::StatusCode code,
                     const std::string& substr) {
  ASSERT_FALSE(r.ok()) << "expected '" << substr << "'";
  EXPECT_EQ(r.status().code(), code) << r.status();
  EXPECT_THAT(std::string(r.status().message()), HasSubstr(substr));
}

TEST(NnConv2DTest, ChannelMismatchNamesBothDepths) {
  ExpectConvError(
      RunConv(Pattern(TensorShape({1, 5, 5, 3})), FilterPattern(TensorShape({3, 3, 2, 4})), {}),
      absl::StatusCode::kInvalidArgument,
      "[Conv2D 'conv'] input depth must be evenly divisible by filter depth: 3 vs 2");
  ExpectConvError(
      RunConv(Pattern(TensorShape({1, 5, 5, 4})), FilterPattern(TensorShape({3, 3, 2, 3})), {}),
      absl::StatusCode::kInvalidArgument,
      "output depth must be evenly divisible by number of groups: 3 vs 2");
}

TEST(NnConv2DTest, RankErrors) {
  ExpectConvError(
      RunConv(Pattern(TensorShape({5, 5, 3})), FilterPattern(TensorShape({3, 3, 3, 4})), {}),
      absl::StatusCode::kInvalidArgument, "convolution input must be 4-dimensional: [5,5,3]");
  ExpectConvError(
      RunConv(Pattern(TensorShape({1, 5, 5, 3})), FilterPattern(TensorShape({3, 3, 3})), {}),
      absl::StatusCode::kInvalidArgument, "convolution filter must be 4-dimensional: [3,3,3]");
}

TEST(NnConv2DTest, BadAttrsAreRejected) {
  const Tensor in = Pattern(TensorShape({1, 5, 5, 3}));
  const Tensor f = FilterPattern(TensorShape({3, 3, 3, 4}));
  ConvArgs bad_padding;
  bad_padding.padding = "FULL";
  ExpectConvError(RunConv(in, f, bad_padding), absl::StatusCode::kInvalidArgument, "FULL");
  ConvArgs three_strides;
  three_strides.strides = {1, 1, 1};
  ExpectConvError(RunConv(in, f, three_strides), absl::StatusCode::kInvalidArgument,
                  "strides field must specify 4 dimensions");
  ConvArgs batch_stride;
  batch_stride.strides = {2, 1, 1, 1};
  ExpectConvError(RunConv(in, f, batch_stride), absl::StatusCode::kUnimplemented,
                  "strides in the batch and depth dimensions");
  ConvArgs zero_stride;
  zero_stride.strides = {1, 0, 1, 1};
  ExpectConvError(RunConv(in, f, zero_stride), absl::StatusCode::kInvalidArgument,
                  "strides should be larger than 0");
  ConvArgs short_explicit;
  short_explicit.padding = "EXPLICIT";
  short_explicit.explicit_paddings = {0, 0, 1, 1};
  ExpectConvError(RunConv(in, f, short_explicit), absl::StatusCode::kInvalidArgument,
                  "explicit_paddings attribute must contain 8 values, but got: 4");
  ConvArgs nchw;
  nchw.data_format = "NCHW";
  ExpectConvError(RunConv(in, f, nchw), absl::StatusCode::kUnimplemented,
                  "only supports the NHWC tensor format on the CPU");
}

TEST(NnConv2DTest, ValidWindowLargerThanInput) {
  ConvArgs a;
  a.padding = "VALID";
  ExpectConvError(
      RunConv(Pattern(TensorShape({1, 1, 1, 3})), FilterPattern(TensorShape({3, 3, 3, 4})), a),
      absl::StatusCode::kInvalidArgument,
      "Computed output size would be negative: -1 [input_size: 1, "
      "effective_filter_size: 3, stride: 1]");
  ExpectConvError(
      RunConv(Pattern(TensorShape({1, 4, 4, 3})), Tensor(DT_FLOAT, TensorShape({0, 3, 3, 4})), a),
      absl::StatusCode::kInvalidArgument, "filter must not have zero elements");
}

// --- shape function ----------------------------------------------------------------------

absl::StatusOr<std::vector<PartialShape>> ConvShape(const ConvArgs& a, PartialShape input,
                                                    PartialShape filter) {
  tensorflow::NodeDef node;
  node.set_name("conv");
  node.set_op("Conv2D");
  SetAttr(&node, "T", DT_FLOAT);
  SetAttr(&node, "strides", a.strides);
  SetAttr(&node, "padding", a.padding);
  SetAttr(&node, "dilations", a.dilations);
  SetAttr(&node, "data_format", a.data_format);
  SetAttr(&node, "explicit_paddings", a.explicit_paddings);
  return InferNodeShapes(node, {std::move(input), std::move(filter)});
}

TEST(NnConv2DShapeTest, Table) {
  ConvArgs same, valid, same2, valid2, nchw, dil;
  valid.padding = valid2.padding = "VALID";
  same2.strides = valid2.strides = {1, 2, 2, 1};
  nchw.data_format = "NCHW";
  dil.dilations = {1, 2, 2, 1};
  dil.padding = "VALID";
  struct Case {
    ConvArgs args;
    PartialShape input, filter;
    std::string output;
  };
  const std::vector<Case> cases = {
      {same, PartialShape({64, 28, 28, 1}), PartialShape({5, 5, 1, 32}), "[64,28,28,32]"},
      {valid, PartialShape({64, 28, 28, 1}), PartialShape({5, 5, 1, 32}), "[64,24,24,32]"},
      {same2, PartialShape({-1, 7, 7, 3}), PartialShape({3, 3, 3, 8}), "[?,4,4,8]"},
      {valid2, PartialShape({2, 7, 8, 3}), PartialShape({3, 3, 3, 8}), "[2,3,3,8]"},
      {dil, PartialShape({2, 7, 7, 3}), PartialShape({3, 3, 3, 8}), "[2,3,3,8]"},
      {same, PartialShape({2, -1, 9, 3}), PartialShape({3, 3, -1, 8}), "[2,?,9,8]"},
      {same, PartialShape(), PartialShape({3, 3, 3, 8}), "[?,?,?,8]"},
      {nchw, PartialShape({2, 3, 9, 9}), PartialShape({3, 3, 3, 8}), "[2,8,9,9]"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::vector<PartialShape>> out = ConvShape(c.args, c.input, c.filter);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].DebugString(), c.output)
        << c.input.DebugString() << " * " << c.filter.DebugString();
  }
}

TEST(NnConv2DShapeTest, Errors) {
  auto expect_error = [](const absl::StatusOr<std::vector<PartialShape>>& r,
                         const std::string& substr) {
    ASSERT_FALSE(r.ok()) << "expected '" << substr << "'";
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(substr));
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("Conv2D"));
  };
  ConvArgs same, valid, bad_strides;
  valid.padding = "VALID";
  bad_strides.strides = {1, 2, 2};
  expect_error(ConvShape(same, PartialShape({1, 5, 5, 3}), PartialShape({3, 3, 2, 4})),
               "Depth of input (3) is not a multiple of input depth of filter (2)");
  expect_error(ConvShape(same, PartialShape({5, 5, 3}), PartialShape({3, 3, 3, 4})), "rank 4");
  expect_error(ConvShape(same, PartialShape({1, 5, 5, 3}), PartialShape({3, 3, 4})), "rank 4");
  expect_error(ConvShape(valid, PartialShape({1, 2, 2, 3}), PartialShape({4, 4, 3, 4})),
               "Computed output size would be negative");
  expect_error(ConvShape(bad_strides, PartialShape({1, 5, 5, 3}), PartialShape({3, 3, 3, 4})),
               "4 dimensions");
}

}  // namespace
}  // namespace dflow
