// Tests for the gradient kernels ReluGrad, SoftplusGrad, BiasAddGrad, MaxPoolGrad,
// AvgPoolGrad (nn_grad_ops.cc), Conv2DBackpropInput and Conv2DBackpropFilter
// (conv_grad_ops.cc). Expected values come from TensorFlow 2.x's CPU kernels
// on the inputs Pattern / FilterPattern (tests/data/gen_nn_grad_reference.py);
// cases TensorFlow's CPU kernels reject (dilations, groups) and large shapes
// are checked against the definition computed in double.
#include <cmath>
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

void ExpectError(const absl::StatusOr<std::vector<Tensor>>& r, absl::StatusCode code,
                 const std::string& substr) {
  ASSERT_FALSE(r.ok()) << "expected an error containing '" << substr << "'";
  EXPECT_EQ(r.status().code(), code) << r.status();
  EXPECT_THAT(std::string(r.status().message()), HasSubstr(substr));
}

// Pseudo-random values in [-1, 1) from a linear congruential generator.
template <typename T = float>
Tensor Noise(const TensorShape& shape, uint32_t seed) {
  Tensor t(DataTypeToEnum<T>::value, shape);
  uint32_t s = seed;
  for (T& v : t.flat<T>()) {
    s = s * 1664525u + 1013904223u;
    v = static_cast<T>(static_cast<double>(s >> 8) / (1 << 23) - 1.0);
  }
  return t;
}

Tensor PlusTwo(Tensor t) {
  for (float& v : t.flat<float>()) v += 2;
  return t;
}

// --- Conv2D backprops --------------------------------------------------------------

struct ConvArgs {
  std::vector<int> strides = {1, 1, 1, 1};
  std::string padding = "SAME";
  std::vector<int> dilations = {1, 1, 1, 1};
  std::vector<int> explicit_paddings = {};
  std::string data_format = "NHWC";
};

void SetConvAttrs(OpTest* t, DataType dtype, const ConvArgs& a) {
  t->Attr("T", dtype)
      .Attr("strides", a.strides)
      .Attr("padding", a.padding)
      .Attr("dilations", a.dilations)
      .Attr("data_format", a.data_format);
  if (!a.explicit_paddings.empty()) t->Attr("explicit_paddings", a.explicit_paddings);
}

Tensor Sizes(const TensorShape& s) {
  std::vector<int32_t> v(s.dim_sizes().begin(), s.dim_sizes().end());
  return Tensor::Vec<int32_t>(v);
}

absl::StatusOr<std::vector<Tensor>> RunBackpropInput(Tensor sizes, Tensor filter, Tensor dy,
                                                     const ConvArgs& a = {}) {
  OpTest t("Conv2DBackpropInput");
  SetConvAttrs(&t, filter.dtype(), a);
  t.Input(std::move(sizes)).Input(std::move(filter)).Input(std::move(dy));
  return t.Run();
}

absl::StatusOr<std::vector<Tensor>> RunBackpropFilter(Tensor input, Tensor sizes, Tensor dy,
                                                      const ConvArgs& a = {}) {
  OpTest t("Conv2DBackpropFilter");
  SetConvAttrs(&t, input.dtype(), a);
  t.Input(std::move(input)).Input(std::move(sizes)).Input(std::move(dy));
  return t.Run();
}

struct TfConvCase {
  std::string name;
  TensorShape input, filter, out;
  ConvArgs args;
  std::vector<float> d_input, d_filter;
};

void PrintTo(const TfConvCase& c, std::ostream* os) { *os << c.name; }

std::vector<TfConvCase> TfConvCases() {
  ConvArgs same, same_s2, valid, valid_s2, explicit_pad;
  same_s2.strides = valid_s2.strides = {1, 2, 2, 1};
  valid.padding = valid_s2.padding = "VALID";
  explicit_pad.padding = "EXPLICIT";
  explicit_pad.explicit_paddings = {0, 0, 1, 0, 0, 2, 0, 0};
  return {
      {"SameStride1",
       {1, 5, 4, 2},
       {3, 3, 2, 3},
       {1, 5, 4, 3},
       same,
       {-3.25,  2.75,  -3.5,   -1.625, -0.75,  -3.0,  -1.625, -3.125, 1.5,   2.25,
        0.25,   1.0,   3.0,    -0.375, -2.125, 2.375, 0.5,    -2.875, 3.0,   -0.375,
        -1.125, 3.75,  -2.875, -1.375, 0.875,  -2.5,  3.0,    -0.375, 0.25,  1.0,
        1.875,  0.375, -3.875, -2.0,   -0.75,  -3.0,  -3.5,   -1.625, 2.375, -5.125},
       {-0.9375, 1.25,    0.0,     1.9375,  -1.0625, 2.125,   -3.25,   -3.125,  -4.375,
        1.5625,  -0.1875, 3.5625,  -1.5625, 0.5625,  1.3125,  -0.3125, -2.6875, 0.4375,
        -3.1875, 0.25,    1.625,   2.875,   4.125,   -2.1875, 2.125,   -6.0625, -2.5625,
        0.375,   3.9375,  -1.4375, 3.5,     -2.25,   1.625,   -3.8125, -1.4375, -2.5,
        -1.875,  -1.3125, 0.625,   -2.0625, 1.5625,  3.8125,  3.375,   0.1875,  -5.0625,
        -5.0625, 0.1875,  3.375,   3.8125,  1.5625,  -2.0625, 0.625,   -1.3125, -1.875}},
      {"SameStride2",
       {2, 5, 4, 2},
       {3, 3, 2, 3},
       {2, 3, 2, 3},
       same_s2,
       {3.5,    -2.5,   1.625,  3.5,    -3.75,  1.5,    -0.125, -1.25,  3.0,    -3.0,
        1.125,  3.0,    -4.0,   0.125,  -1.0,   -1.0,   -0.5,   -0.5,   -0.5,   -0.5,
        -0.25,  -1.375, -0.875, 0.25,   -3.625, 2.375,  -1.75,  -3.625, 0.25,   -0.125,
        -2.5,   -2.125, -3.125, 2.875,  -1.25,  -3.125, 0.5,    1.25,   -1.625, -2.375,
        -1.625, 2.125,  -2.0,   -1.625, 1.25,   -0.25,  -2.375, -0.875, -0.375, 0.75,
        0.75,   -0.375, 1.875,  0.75,   0.0,    1.125,  1.25,   -1.375, 2.75,   1.25,
        0.625,  1.0,    2.375,  2.0,    4.0,    -3.5,   4.75,   4.0,    2.0,    0.5,
        4.0,    5.5,    2.75,   -2.125, 2.0,    2.75,   1.375,  -0.5,   1.625,  3.5},
       {-0.125, -1.0,    0.875,  -0.5,   -0.25,  0.6875, 1.1875,  0.5,    -1.5625, 0.125,  -1.5,
        1.0,    2.0,     -2.125, 0.625,  -2.125, 1.875,  0.375,   1.8125, 0.5,     0.5625, -0.375,
        0.6875, -1.6875, 0.875,  1.5625, 1.5625, -2.0,   -1.6875, 0.6875, 1.6875,  -0.375, -0.375,
        1.5625, -0.6875, 1.875,  2.375,  0.8125, -0.75,  -1.3125, 1.0,    -1.5,    1.875,  -1.5625,
        0.5,    2.3125,  0.6875, -0.25,  0.625,  0.625,  -2.125,  0.0,    0.5625,  1.125}},
      {"ValidStride1",
       {2, 5, 4, 2},
       {3, 2, 2, 3},
       {2, 3, 3, 3},
       valid,
       {3.5,    -2.5,   0.375,  3.375,  -0.625, -1.75,  -0.5,   -0.5,   -2.25,  0.75,
        -0.625, 0.5,    -5.375, -1.25,  -2.125, -2.875, -0.875, 4.75,   -2.375, -1.625,
        -2.375, -1.625, -0.125, 3.25,   1.25,   -1.75,  -2.0,   -4.25,  -1.0,   0.875,
        3.75,   -3.0,   -2.0,   -1.625, -0.25,  -2.875, 4.5,    -1.125, -1.375, 2.75,
        2.0,    -1.75,  5.125,  -0.125, 5.5,    0.25,   1.625,  3.5,    -3.0,   2.25,
        -0.75,  -1.5,   0.0,    -1.875, 2.625,  -2.25,  -0.875, 4.75,   -5.125, 3.875,
        -5.125, 3.875,  -4.25,  -0.875, 2.75,   -2.5,   -1.25,  0.625,  -1.625, 0.25,
        -2.5,   1.25,   -1.25,  -3.125, 1.25,   -3.625, 0.5,    -3.25,  2.125,  -2.0},
       {2.0,   0.75,   3.625,   0.1875,  -0.9375, -3.4375, 4.5625,  -4.0,    3.25,
        -5.5,  3.9375, 1.0,     1.9375,  2.375,   0.75,    -2.625,  -2.0625, -1.5,
        3.125, -1.0,   -3.0625, 2.0,     0.75,    3.625,   -0.1875, 1.9375,  3.375,
        -2.0,  3.0,    -5.75,   -2.4375, -2.125,  1.625,   1.9375,  2.375,   0.75}},
      {"ValidStride2OddSize",
       {1, 5, 5, 3},
       {3, 3, 3, 2},
       {1, 2, 2, 2},
       valid_s2,
       {2.75,   2.375,  2.0,    1.625,  -1.0,   -1.375, -0.125, -0.125, -0.125, 2.75,   -2.5,
        -2.125, -1.75,  -1.375, -1.0,   2.75,   2.375,  2.0,    1.625,  -1.0,   -1.375, -0.125,
        -0.125, -0.125, 2.75,   -2.5,   -2.125, -1.75,  -1.375, -1.0,   1.875,  1.25,   0.625,
        0.0,    0.5,    -0.125, -1.125, -0.875, -0.625, 2.25,   -2.5,   -1.625, -0.75,  0.125,
        1.0,    -0.875, -1.125, -1.375, -1.625, 1.5,    1.25,   -1.0,   -0.75,  -0.5,   -0.5,
        0.0,    0.5,    1.0,    1.5,    2.0,    -0.875, -1.125, -1.375, -1.625, 1.5,    1.25,
        -1.0,   -0.75,  -0.5,   -0.5,   0.0,    0.5,    1.0,    1.5,    2.0},
       {2.0625,  1.375,   -0.1875, -0.3125, 0.3125,  -1.3125, -1.25,   2.5,     -0.0625,
        -0.5625, 0.4375,  -1.5625, -0.4375, 0.1875,  0.0625,  -0.8125, -0.8125, 1.625,
        -0.0625, -0.5625, 0.4375,  -1.5625, -0.4375, 0.1875,  0.0625,  -0.8125, -0.8125,
        1.625,   -0.3125, -0.0625, 0.1875,  -1.0625, 2.0625,  1.375,   -0.1875, -0.3125,
        -0.8125, 1.625,   -0.3125, -0.0625, 0.1875,  -1.0625, 2.0625,  1.375,   -0.1875,
        -0.3125, 0.3125,  -1.3125, -1.25,   2.5,     -0.0625, -0.5625, 0.4375,  -1.5625}},
      {"ExplicitPadding",
       {1, 4, 4, 1},
       {3, 3, 1, 2},
       {1, 3, 4, 2},
       explicit_pad,
       {4.0, 3.875, -5.5, -6.375, 2.25, -6.125, -3.625, 3.25, 0.625, -4.875, -1.5, 5.125, -1.75,
        -0.625, 0.0, -0.5},
       {3.0, -0.25, 0.8125, -1.375, -0.5625, -0.9375, 5.0, -1.3125, -1.0625, -1.8125, -0.8125,
        3.0625, -0.3125, -2.625, -0.3125, 0.5625, -1.625, 2.875}},
  };
}

class NnGradConvTfTest : public ::testing::TestWithParam<TfConvCase> {};

TEST_P(NnGradConvTfTest, BackpropInputMatchesTensorFlow) {
  const TfConvCase& c = GetParam();
  NN_ASSERT_OK_AND_ASSIGN(
      auto out, RunBackpropInput(Sizes(c.input), FilterPattern(c.filter), Pattern(c.out), c.args));
  ExpectTensorEq<float>(out[0], c.d_input, c.input);
  // The double kernel agrees.
  NN_ASSERT_OK_AND_ASSIGN(auto out_d,
                          RunBackpropInput(Sizes(c.input), FilterPattern<double>(c.filter),
                                           Pattern<double>(c.out), c.args));
  ExpectTensorEq<double>(out_d[0], std::vector<double>(c.d_input.begin(), c.d_input.end()),
                         c.input);
}

TEST_P(NnGradConvTfTest, BackpropFilterMatchesTensorFlow) {
  const TfConvCase& c = GetParam();
  NN_ASSERT_OK_AND_ASSIGN(
      auto out, RunBackpropFilter(Pattern(c.input), Sizes(c.filter), Pattern(c.out), c.args));
  ExpectTensorEq<float>(out[0], c.d_filter, c.filter);
  NN_ASSERT_OK_AND_ASSIGN(auto out_d, RunBackpropFilter(Pattern<double>(c.input), Sizes(c.filter),
                                                        Pattern<double>(c.out), c.args));
  ExpectTensorEq<double>(out_d[0], std::vector<double>(c.d_filter.begin(), c.d_filter.end()),
                         c.filter);
}

INSTANTIATE_TEST_SUITE_P(NnGradConv, NnGradConvTfTest, ::testing::ValuesIn(TfConvCases()),
                         [](const auto& info) { return info.param.name; });

// The definition of both gradients, in double: every (output pixel, filter
// tap) pair that reads an input element adds its product to both.
struct DirectGrads {
  std::vector<double> d_input, d_filter;
};

DirectGrads DirectConvGrads(const Tensor& input, const Tensor& filter, const Tensor& dy,
                            const ConvArgs& a, int64_t pad_top, int64_t pad_left) {
  const int64_t n = input.dim_size(0), h = input.dim_size(1), w = input.dim_size(2),
                c = input.dim_size(3);
  const int64_t kh = filter.dim_size(0), kw = filter.dim_size(1), fc = filter.dim_size(2),
                f = filter.dim_size(3);
  const int64_t oh_n = dy.dim_size(1), ow_n = dy.dim_size(2);
  const int64_t fg = f / (c / fc);
  auto x = input.flat<float>();
  auto wt = filter.flat<float>();
  auto g = dy.flat<float>();
  DirectGrads r{std::vector<double>(x.size()), std::vector<double>(wt.size())};
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oh = 0; oh < oh_n; ++oh)
      for (int64_t ow = 0; ow < ow_n; ++ow)
        for (int64_t o = 0; o < f; ++o) {
          const double gy = g[((b * oh_n + oh) * ow_n + ow) * f + o];
          for (int64_t i = 0; i < kh; ++i)
            for (int64_t j = 0; j < kw; ++j) {
              const int64_t ih = oh * a.strides[1] - pad_top + i * a.dilations[1];
              const int64_t iw = ow * a.strides[2] - pad_left + j * a.dilations[2];
              if (ih < 0 || ih >= h || iw < 0 || iw >= w) continue;
              for (int64_t k = 0; k < fc; ++k) {
                const int64_t xi = ((b * h + ih) * w + iw) * c + (o / fg) * fc + k;
                const int64_t wi = ((i * kw + j) * fc + k) * f + o;
                r.d_input[xi] += gy * wt[wi];
                r.d_filter[wi] += gy * x[xi];
              }
            }
        }
  return r;
}

void ExpectNear(const Tensor& actual, const std::vector<double>& expected, double tol) {
  auto v = actual.flat<float>();
  ASSERT_EQ(v.size(), expected.size());
  int bad = 0;
  for (size_t i = 0; i < expected.size() && bad < 5; ++i) {
    if (std::abs(v[i] - expected[i]) > tol * (1 + std::abs(expected[i]))) {
      ADD_FAILURE() << "at " << i << ": " << v[i] << " vs " << expected[i];
      ++bad;
    }
  }
}

void ExpectMatchesDirect(const TensorShape& in, const TensorShape& fs, const TensorShape& out,
                         const ConvArgs& a, int64_t pad_top, int64_t pad_left) {
  Tensor input = Noise(in, 1), filter = Noise(fs, 2), dy = Noise(out, 3);
  const DirectGrads want = DirectConvGrads(input, filter, dy, a, pad_top, pad_left);
  NN_ASSERT_OK_AND_ASSIGN(auto d_input, RunBackpropInput(Sizes(in), filter, dy, a));
  ASSERT_EQ(d_input[0].shape(), in);
  ExpectNear(d_input[0], want.d_input, 1e-4);
  NN_ASSERT_OK_AND_ASSIGN(auto d_filter, RunBackpropFilter(input, Sizes(fs), dy, a));
  ASSERT_EQ(d_filter[0].shape(), fs);
  ExpectNear(d_filter[0], want.d_filter, 1e-4);
}

// The shapes of the Fashion-MNIST CNN (batch cut down), many blocks per image.
TEST(NnGradConvTest, FirstLayerMatchesDefinition) {
  ExpectMatchesDirect({8, 28, 28, 1}, {5, 5, 1, 32}, {8, 28, 28, 32}, {}, 2, 2);
}

TEST(NnGradConvTest, SecondLayerMatchesDefinition) {
  ExpectMatchesDirect({4, 14, 14, 32}, {5, 5, 32, 64}, {4, 14, 14, 64}, {}, 2, 2);
}

// More images than shards: a shard's pixel blocks (163 rows of an 800-wide
// patch) run across image boundaries.
TEST(NnGradConvTest, BlocksAcrossImagesMatchDefinition) {
  ExpectMatchesDirect({12, 14, 14, 32}, {5, 5, 32, 16}, {12, 14, 14, 16}, {}, 2, 2);
}

TEST(NnGradConvTest, ValidStride2MatchesDefinition) {
  ConvArgs a;
  a.padding = "VALID";
  a.strides = {1, 2, 2, 1};
  ExpectMatchesDirect({3, 9, 11, 4}, {3, 3, 4, 5}, {3, 4, 5, 5}, a, 0, 0);
}

TEST(NnGradConvTest, UnevenStridesMatchDefinition) {
  ConvArgs a;
  a.strides = {1, 3, 2, 1};
  ExpectMatchesDirect({2, 8, 7, 3}, {2, 4, 3, 4}, {2, 3, 4, 4}, a, 0, 1);
}

TEST(NnGradConvTest, DilatedMatchesDefinition) {
  ConvArgs a;
  a.dilations = {1, 2, 2, 1};
  ExpectMatchesDirect({2, 7, 7, 2}, {3, 3, 2, 3}, {2, 7, 7, 3}, a, 2, 2);
}

TEST(NnGradConvTest, GroupedStridedMatchesDefinition) {
  ConvArgs a;
  a.strides = {1, 2, 2, 1};
  // 4 input channels, filter depth 2: two groups of 3 output channels.
  ExpectMatchesDirect({2, 5, 5, 4}, {3, 3, 2, 6}, {2, 3, 3, 6}, a, 1, 1);
}

TEST(NnGradConvTest, PointwiseMatchesDefinition) {
  ConvArgs a;
  a.padding = "VALID";
  ExpectMatchesDirect({2, 3, 4, 5}, {1, 1, 5, 3}, {2, 3, 4, 3}, a, 0, 0);
}

TEST(NnGradConvTest, TwoInputSizesTakeBatchAndDepthFromTheOtherInputs) {
  const TfConvCase c = TfConvCases()[1];  // SameStride2
  NN_ASSERT_OK_AND_ASSIGN(auto out,
                          RunBackpropInput(Tensor::Vec<int32_t>({5, 4}), FilterPattern(c.filter),
                                           Pattern(c.out), c.args));
  ExpectTensorEq<float>(out[0], c.d_input, c.input);
}

TEST(NnGradConvTest, Int32BackpropInput) {
  // input [1,2,2,1], filter [2,2,1,1] = [[1,2],[3,4]], VALID: one output.
  Tensor filter = Tensor::FromVector<int32_t>({1, 2, 3, 4}, TensorShape({2, 2, 1, 1}));
  Tensor dy = Tensor::FromVector<int32_t>({3}, TensorShape({1, 1, 1, 1}));
  ConvArgs a;
  a.padding = "VALID";
  NN_ASSERT_OK_AND_ASSIGN(auto out, RunBackpropInput(Sizes({1, 2, 2, 1}), filter, dy, a));
  ExpectTensorEq<int32_t>(out[0], {3, 6, 9, 12}, {1, 2, 2, 1});
}

TEST(NnGradConvTest, EmptyBatchGivesEmptyGradients) {
  NN_ASSERT_OK_AND_ASSIGN(auto dx,
                          RunBackpropInput(Sizes({0, 4, 4, 2}), FilterPattern({3, 3, 2, 3}),
                                           Tensor(DT_FLOAT, TensorShape({0, 4, 4, 3}))));
  EXPECT_EQ(dx[0].shape(), TensorShape({0, 4, 4, 2}));
  NN_ASSERT_OK_AND_ASSIGN(
      auto dw, RunBackpropFilter(Tensor(DT_FLOAT, TensorShape({0, 4, 4, 2})), Sizes({3, 3, 2, 3}),
                                 Tensor(DT_FLOAT, TensorShape({0, 4, 4, 3}))));
  ExpectTensorEq<float>(dw[0], std::vector<float>(54, 0.0f), {3, 3, 2, 3});
}

TEST(NnGradConvTest, BackpropInputErrors) {
  const Tensor filter = FilterPattern({3, 3, 2, 3});
  const Tensor dy = Pattern({1, 5, 4, 3});
  ExpectError(RunBackpropInput(Tensor::Vec<int32_t>({1, 5, 4}), filter, dy),
              absl::StatusCode::kInvalidArgument, "input_sizes must be a 1-D tensor of 4 or 2");
  ExpectError(RunBackpropInput(Sizes({1, 6, 4, 2}), filter, dy), absl::StatusCode::kInvalidArgument,
              "[Conv2DBackpropInput 'op'] out_backprop shape [1,5,4,3] does not match the "
              "convolution's output shape "
              "[1,6,4,3]");
  ExpectError(RunBackpropInput(Sizes({1, 5, 4, 3}), filter, dy), absl::StatusCode::kInvalidArgument,
              "evenly divisible by filter depth: 3 vs 2");
  ExpectError(RunBackpropInput(Sizes({1, -5, 4, 2}), filter, dy),
              absl::StatusCode::kInvalidArgument, "non-negative sizes, got [1,-5,4,2]");
  ExpectError(RunBackpropInput(Sizes({1, 5, 4, 2}), Pattern({3, 3, 2}), dy),
              absl::StatusCode::kInvalidArgument, "filter must be 4-dimensional, got [3,3,2]");
  ConvArgs nchw;
  nchw.data_format = "NCHW";
  ExpectError(RunBackpropInput(Sizes({1, 2, 5, 4}), filter, Pattern({1, 3, 5, 4}), nchw),
              absl::StatusCode::kInvalidArgument, "only the NHWC data format");
  ConvArgs bad_stride;
  bad_stride.strides = {2, 1, 1, 1};
  ExpectError(RunBackpropInput(Sizes({1, 5, 4, 2}), filter, dy, bad_stride),
              absl::StatusCode::kUnimplemented, "strides in the batch and depth");
}

TEST(NnGradConvTest, BackpropFilterErrors) {
  const Tensor input = Pattern({1, 5, 4, 2});
  const Tensor dy = Pattern({1, 5, 4, 3});
  ExpectError(RunBackpropFilter(input, Tensor::Vec<int32_t>({3, 3, 2}), dy),
              absl::StatusCode::kInvalidArgument, "filter_sizes must be a 1-D tensor of 4 values");
  ExpectError(RunBackpropFilter(input, Sizes({3, 3, 2, 4}), dy), absl::StatusCode::kInvalidArgument,
              "[Conv2DBackpropFilter 'op'] out_backprop shape");
  ExpectError(RunBackpropFilter(Pattern({5, 4, 2}), Sizes({3, 3, 2, 3}), dy),
              absl::StatusCode::kInvalidArgument, "input must be 4-dimensional, got [5,4,2]");
  ExpectError(RunBackpropFilter(input, Sizes({3, 3, 0, 3}), dy), absl::StatusCode::kInvalidArgument,
              "filter must not have zero elements");
  ExpectError(RunBackpropFilter(input, Sizes({3, 3, 2, 3}), Pattern({1, 5, 4})),
              absl::StatusCode::kInvalidArgument, "out_backprop must be 4-dimensional");
}

TEST(NnGradConvTest, ShapeFunctions) {
  tensorflow::NodeDef input_node;
  input_node.set_op("Conv2DBackpropInput");
  SetAttr(&input_node, "T", DT_FLOAT);
  SetAttr(&input_node, "strides", std::vector<int>{1, 1, 1, 1});
  SetAttr(&input_node, "padding", std::string("SAME"));
  NN_ASSERT_OK_AND_ASSIGN(
      auto s, InferNodeShapes(input_node, {PartialShape({4}), PartialShape({3, 3, 2, 3}),
                                           PartialShape({-1, 5, 4, 3})}));
  EXPECT_EQ(s[0], PartialShape({-1, -1, -1, -1}));
  auto bad = InferNodeShapes(
      input_node, {PartialShape({4}), PartialShape({3, 3, 2}), PartialShape({-1, 5, 4, 3})});
  EXPECT_FALSE(bad.ok());

  tensorflow::NodeDef filter_node = input_node;
  filter_node.set_op("Conv2DBackpropFilter");
  NN_ASSERT_OK_AND_ASSIGN(
      auto f, InferNodeShapes(filter_node, {PartialShape({-1, 5, 4, 2}), PartialShape({4}),
                                            PartialShape({-1, 5, 4, 3})}));
  EXPECT_EQ(f[0], PartialShape({-1, -1, -1, -1}));
  EXPECT_FALSE(InferNodeShapes(filter_node, {PartialShape({-1, 5, 4, 2}), PartialShape({3}),
                                             PartialShape({-1, 5, 4, 3})})
                   .ok());
}

// --- MaxPoolGrad --------------------------------------------------------------------------

struct PoolArgs {
  std::vector<int> ksize = {1, 2, 2, 1};
  std::vector<int> strides = {1, 2, 2, 1};
  std::string padding = "VALID";
  std::string data_format = "NHWC";
};

absl::StatusOr<std::vector<Tensor>> RunPool(const std::string& op, std::vector<Tensor> inputs,
                                            const PoolArgs& a) {
  OpTest t(op);
  t.Attr("T", inputs[0].dtype())
      .Attr("ksize", a.ksize)
      .Attr("strides", a.strides)
      .Attr("padding", a.padding)
      .Attr("data_format", a.data_format);
  for (Tensor& in : inputs) t.Input(std::move(in));
  return t.Run();
}

// MaxPoolGrad of `x` with grad = Pattern + 2 over the forward output's shape.
absl::StatusOr<std::vector<Tensor>> RunMaxPoolGrad(const Tensor& x, const PoolArgs& a) {
  ASSIGN_OR_RETURN(std::vector<Tensor> y, RunPool("MaxPool", {x}, a));
  return RunPool("MaxPoolGrad", {x, y[0], PlusTwo(Pattern(y[0].shape()))}, a);
}

TEST(NnGradMaxPoolTest, SameK2S2MatchesTensorFlow) {
  PoolArgs a;
  a.padding = "SAME";
  NN_ASSERT_OK_AND_ASSIGN(auto out, RunMaxPoolGrad(Pattern({1, 5, 5, 2}), a));
  ExpectTensorEq<float>(
      out[0],
      {0.0,  0.0,  0.0, 2.5, 0.0, 0.0,  0.0, 0.0, 0.0,  1.25, 0.0, 0.0,  0.75, 0.0,  1.5,  0.0, 0.0,
       3.25, 2.25, 0.0, 3.0, 0.0, 0.0,  0.0, 0.0, 2.75, 0.0,  0.0, 1.75, 0.0,  0.0,  2.0,  0.0, 0.0,
       0.0,  0.0,  1.0, 0.0, 0.0, 0.75, 0.0, 0.0, 2.5,  1.5,  0.0, 0.0,  3.25, 2.25, 1.25, 3.0},
      {1, 5, 5, 2});
}

TEST(NnGradMaxPoolTest, ValidK3S2MatchesTensorFlow) {
  PoolArgs a;
  a.ksize = {1, 3, 3, 1};
  std::vector<float> expected(50, 0.0f);
  expected[3] = 2.5, expected[14] = 2.25, expected[20] = 2.25, expected[25] = 6.5;
  expected[36] = 3.0;
  NN_ASSERT_OK_AND_ASSIGN(auto out, RunMaxPoolGrad(Pattern({1, 5, 5, 2}), a));
  ExpectTensorEq<float>(out[0], expected, {1, 5, 5, 2});
  // The double kernel agrees.
  NN_ASSERT_OK_AND_ASSIGN(auto y, RunPool("MaxPool", {Pattern<double>({1, 5, 5, 2})}, a));
  Tensor dy = Pattern<double>(y[0].shape());
  for (double& v : dy.flat<double>()) v += 2;
  NN_ASSERT_OK_AND_ASSIGN(auto out_d,
                          RunPool("MaxPoolGrad", {Pattern<double>({1, 5, 5, 2}), y[0], dy}, a));
  ExpectTensorEq<double>(out_d[0], std::vector<double>(expected.begin(), expected.end()),
                         {1, 5, 5, 2});
}

TEST(NnGradMaxPoolTest, OverlappingSameWindowsAddUp) {
  PoolArgs a;
  a.ksize = {1, 3, 3, 1};
  a.strides = {1, 1, 1, 1};
  a.padding = "SAME";
  NN_ASSERT_OK_AND_ASSIGN(auto out, RunMaxPoolGrad(Pattern({2, 3, 4, 1}), a));
  ExpectTensorEq<float>(out[0], {0.0, 0.75, 0.0,  9.75, 0.0, 0.0, 9.0, 0.0, 0.0, 3.25, 0.0, 0.0,
                                 0.0, 0.0,  13.0, 0.0,  0.0, 9.0, 0.0, 0.0, 0.0, 0.0,  0.0, 2.5},
                        {2, 3, 4, 1});
}

TEST(NnGradMaxPoolTest, TiesGoToTheFirstMaximum) {
  PoolArgs a;
  a.strides = {1, 1, 1, 1};
  Tensor ones(DT_FLOAT, TensorShape({1, 3, 3, 1}));
  for (float& v : ones.flat<float>()) v = 1;
  NN_ASSERT_OK_AND_ASSIGN(auto out, RunMaxPoolGrad(ones, a));
  ExpectTensorEq<float>(out[0], {0.75, 2.5, 0.0, 1.5, 3.25, 0.0, 0.0, 0.0, 0.0}, {1, 3, 3, 1});
}

TEST(NnGradMaxPoolTest, NanWinsOnlyWhenFirst) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  PoolArgs a;
  auto run = [&](std::vector<float> x) {
    return RunPool("MaxPoolGrad",
                   {Tensor::FromVector<float>(x, TensorShape({1, 2, 2, 1})),
                    Tensor::FromVector<float>({1}, TensorShape({1, 1, 1, 1})),
                    Tensor::FromVector<float>({1}, TensorShape({1, 1, 1, 1}))},
                   a);
  };
  NN_ASSERT_OK_AND_ASSIGN(auto first, run({nan, 1, 2, nan}));
  ExpectTensorEq<float>(first[0], {1, 0, 0, 0}, {1, 2, 2, 1});
  NN_ASSERT_OK_AND_ASSIGN(auto later, run({1, nan, 2, 0}));
  ExpectTensorEq<float>(later[0], {0, 0, 1, 0}, {1, 2, 2, 1});
}

// A CNN-sized batch (parallel over images): every gradient lands on an
// element that is its window's maximum, and none is lost.
TEST(NnGradMaxPoolTest, LargeBatchRoutesEveryGradientToAMaximum) {
  PoolArgs a;
  const Tensor x = Noise({16, 28, 28, 8}, 5);
  NN_ASSERT_OK_AND_ASSIGN(auto y, RunPool("MaxPool", {x}, a));
  const Tensor dy = PlusTwo(Noise(y[0].shape(), 6));  // all positive
  NN_ASSERT_OK_AND_ASSIGN(auto dx, RunPool("MaxPoolGrad", {x, y[0], dy}, a));
  double sum_dx = 0, sum_dy = 0;
  for (float v : dy.flat<float>()) sum_dy += v;
  auto xv = x.flat<float>();
  auto yv = y[0].flat<float>();
  auto dxv = dx[0].flat<float>();
  int bad = 0;
  for (int64_t i = 0; i < dx[0].NumElements(); ++i) {
    sum_dx += dxv[i];
    if (dxv[i] == 0) continue;
    // k2 s2 VALID on 28x28: element (n, h, w, c) lies in window (h/2, w/2).
    const int64_t c = i % 8, w = i / 8 % 28, h = i / (8 * 28) % 28, n = i / (8 * 28 * 28);
    const int64_t out = ((n * 14 + h / 2) * 14 + w / 2) * 8 + c;
    if (xv[i] != yv[out] && ++bad < 5) ADD_FAILURE() << "gradient at non-maximum " << i;
  }
  EXPECT_NEAR(sum_dx, sum_dy, 1e-3 * sum_dy);
}

TEST(NnGradMaxPoolTest, Errors) {
  PoolArgs a;
  const Tensor x = Pattern({1, 4, 4, 2});
  const Tensor y = Pattern({1, 2, 2, 2});
  ExpectError(RunPool("MaxPoolGrad", {x, y, Pattern({1, 3, 2, 2})}, a),
              absl::StatusCode::kInvalidArgument,
              "[MaxPoolGrad 'op'] Expected grad shape to be [1,2,2,2], but got [1,3,2,2]");
  ExpectError(RunPool("MaxPoolGrad", {x, Pattern({1, 3, 2, 2}), y}, a),
              absl::StatusCode::kInvalidArgument, "Expected orig_output shape to be [1,2,2,2]");
  ExpectError(RunPool("MaxPoolGrad", {Pattern({4, 4, 2}), y, y}, a),
              absl::StatusCode::kInvalidArgument, "orig_input must be 4-dimensional, got [4,4,2]");
  PoolArgs depth;
  depth.ksize = depth.strides = {1, 1, 1, 2};
  ExpectError(RunPool("MaxPoolGrad", {x, Pattern({1, 4, 4, 1}), Pattern({1, 4, 4, 1})}, depth),
              absl::StatusCode::kUnimplemented, "not yet supported on the depth dimension");
  PoolArgs nchw;
  nchw.ksize = nchw.strides = {1, 1, 2, 2};
  nchw.data_format = "NCHW";
  ExpectError(RunPool("MaxPoolGrad", {x, y, y}, nchw), absl::StatusCode::kInvalidArgument,
              "only supports NHWC");
}

// --- AvgPoolGrad ------------------------------------------------------------------------

// AvgPoolGrad over an `in_shape` input with grad = Pattern + 2 over the
// pooled shape (read from AvgPool's output).
absl::StatusOr<std::vector<Tensor>> RunAvgPoolGrad(const std::vector<int32_t>& in_shape,
                                                   const PoolArgs& a) {
  const TensorShape shape({in_shape[0], in_shape[1], in_shape[2], in_shape[3]});
  ASSIGN_OR_RETURN(std::vector<Tensor> y, RunPool("AvgPool", {Pattern(shape)}, a));
  OpTest t("AvgPoolGrad");
  t.Attr("T", DT_FLOAT)
      .Attr("ksize", a.ksize)
      .Attr("strides", a.strides)
      .Attr("padding", a.padding)
      .Attr("data_format", a.data_format);
  t.Input(Tensor::Vec<int32_t>(in_shape)).Input(PlusTwo(Pattern(y[0].shape())));
  return t.Run();
}

TEST(NnGradAvgPoolTest, SameK2S2MatchesTensorFlow) {
  PoolArgs a;
  a.padding = "SAME";
  NN_ASSERT_OK_AND_ASSIGN(auto out, RunAvgPoolGrad({1, 5, 5, 2}, a));
  ExpectTensorEq<float>(
      out[0],
      {0.1875, 0.625, 0.1875, 0.625, 0.375, 0.8125, 0.375, 0.8125, 1.125, 0.625,
       0.1875, 0.625, 0.1875, 0.625, 0.375, 0.8125, 0.375, 0.8125, 1.125, 0.625,
       0.75,   0.5,   0.75,   0.5,   0.25,  0.6875, 0.25,  0.6875, 0.875, 0.375,
       0.75,   0.5,   0.75,   0.5,   0.25,  0.6875, 0.25,  0.6875, 0.875, 0.375,
       1.25,   0.75,  1.25,   0.75,  1.625, 1.125,  1.625, 1.125,  1.25,  3.0},
      {1, 5, 5, 2});
}

// Overlapping windows (stride 1): each element sums its windows' shares.
TEST(NnGradAvgPoolTest, OverlappingSameWindowsMatchTensorFlow) {
  PoolArgs a;
  a.ksize = {1, 3, 3, 1};
  a.strides = {1, 1, 1, 1};
  a.padding = "SAME";
  NN_ASSERT_OK_AND_ASSIGN(auto out, RunAvgPoolGrad({1, 3, 4, 1}, a));
  ExpectTensorEq<float>(out[0],
                        {1.1180555820465088, 1.701388955116272, 2.284722328186035,
                         1.7291667461395264, 1.826388955116272, 2.7013890743255615,
                         3.222222328186035, 2.2083334922790527, 1.2222222089767456,
                         1.8472223281860352, 1.7430555820465088, 1.1458333730697632},
                        {1, 3, 4, 1});
}

// Two images, parallel over the batch; every gradient's total is kept.
TEST(NnGradAvgPoolTest, ValidK3S2MatchesTensorFlow) {
  PoolArgs a;
  a.ksize = {1, 3, 3, 1};
  NN_ASSERT_OK_AND_ASSIGN(auto out, RunAvgPoolGrad({2, 5, 5, 2}, a));
  ASSERT_EQ(out[0].shape(), TensorShape({2, 5, 5, 2}));
  auto v = out[0].flat<float>();
  // TensorFlow's first row and the second image's last element.
  const std::vector<float> first = {0.0833333358168602, 0.2777777910232544, 0.0833333358168602,
                                    0.2777777910232544, 0.25,               0.6388888955116272,
                                    0.1666666716337204, 0.3611111044883728, 0.1666666716337204,
                                    0.3611111044883728};
  for (size_t i = 0; i < first.size(); ++i) EXPECT_FLOAT_EQ(v[i], first[i]) << i;
  EXPECT_FLOAT_EQ(v[99], 0.25f);
  EXPECT_FLOAT_EQ(v[74], 0.944444477558136f);
  double sum_dx = 0;
  for (float x : v) sum_dx += x;
  NN_ASSERT_OK_AND_ASSIGN(auto y, RunPool("AvgPool", {Pattern({2, 5, 5, 2})}, a));
  const Tensor dy = PlusTwo(Pattern(y[0].shape()));
  double sum_dy = 0;
  for (float x : dy.flat<float>()) sum_dy += x;
  EXPECT_NEAR(sum_dx, sum_dy, 1e-4);
}

TEST(NnGradAvgPoolTest, Errors) {
  auto run = [](std::vector<int32_t> sizes, const Tensor& dy, const PoolArgs& a) {
    OpTest t("AvgPoolGrad");
    t.Attr("T", DT_FLOAT)
        .Attr("ksize", a.ksize)
        .Attr("strides", a.strides)
        .Attr("padding", a.padding)
        .Attr("data_format", a.data_format);
    t.Input(Tensor::Vec<int32_t>(sizes)).Input(dy);
    return t.Run();
  };
  PoolArgs a;
  // TensorFlow reads past a grad smaller than the pooled shape; dflow refuses it.
  ExpectError(run({1, 4, 4, 1}, Pattern({1, 1, 2, 1}), a), absl::StatusCode::kInvalidArgument,
              "[AvgPoolGrad 'op'] Expected grad shape to be [1,2,2,1], but got [1,1,2,1]");
  ExpectError(run({1, 4, 4, 2}, Pattern({1, 2, 2, 1}), a), absl::StatusCode::kInvalidArgument,
              "Expected grad shape to be [1,2,2,2]");
  ExpectError(run({1, 4, 4}, Pattern({1, 2, 2, 1}), a), absl::StatusCode::kInvalidArgument,
              "orig_input_shape must be a 1-D tensor of 4 values");
  ExpectError(run({1, -4, 4, 1}, Pattern({1, 2, 2, 1}), a), absl::StatusCode::kInvalidArgument,
              "orig_input_shape must hold non-negative sizes, got [1,-4,4,1]");
  ExpectError(run({1, 4, 4, 1}, Pattern({2, 2, 1}), a), absl::StatusCode::kInvalidArgument,
              "grad must be 4-dimensional, got [2,2,1]");
  PoolArgs depth;
  depth.ksize = depth.strides = {1, 1, 1, 2};
  ExpectError(run({1, 4, 4, 2}, Pattern({1, 4, 4, 1}), depth), absl::StatusCode::kUnimplemented,
              "Non-spatial pooling is not yet supported");
  PoolArgs nchw;
  nchw.ksize = nchw.strides = {1, 1, 2, 2};
  nchw.data_format = "NCHW";
  ExpectError(run({1, 1, 4, 4}, Pattern({1, 1, 2, 2}), nchw), absl::StatusCode::kInvalidArgument,
              "only supports NHWC");
  // An empty image has an empty gradient.
  NN_ASSERT_OK_AND_ASSIGN(auto empty, run({1, 0, 4, 1}, Pattern({1, 0, 2, 1}), a));
  EXPECT_EQ(empty[0].shape(), TensorShape({1, 0, 4, 1}));
}

// --- ReluGrad, SoftplusGrad, BiasAddGrad -----------------------------------------------------

// gradients * sigmoid(features), TensorFlow's values (gen_nn_reference.py).
TEST(NnGradSoftplusTest, MatchesTensorFlow) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  OpTest t("SoftplusGrad");
  t.Attr("T", DT_FLOAT)
      .Input(Tensor::FromVector<float>({1, 2, -1, 0.5, 3, 1, 1, 2, -2, 1, 1, 1, 1, 1}, {14}))
      .Input(Tensor::FromVector<float>(
          {-30, -20, -15, -14, -1, -0.25, 0, 0.5, 1, 14, 15, 20, 30, nan}, {14}));
  NN_ASSERT_OK_AND_ASSIGN(auto out, t.Run());
  const std::vector<float> tf = {9.35762223459348e-14f,   4.1223073843355e-09f,
                                 -3.0590220490012143e-07f, 4.1576402054488426e-07f,
                                 0.806824266910553f,       0.43782350420951843f,
                                 0.5f,                     1.244918704032898f,
                                 -1.4621171951293945f,     0.9999991655349731f,
                                 0.9999996423721313f,      1.0f,
                                 1.0f};
  auto v = out[0].flat<float>();
  for (size_t i = 0; i < tf.size(); ++i) EXPECT_FLOAT_EQ(v[i], tf[i]) << "element " << i;
  EXPECT_TRUE(std::isnan(v[13]));
  OpTest bad("SoftplusGrad");
  bad.Attr("T", DT_FLOAT)
      .Input(Tensor::Vec<float>({1, 2}))
      .Input(Tensor::Vec<float>({1, 2, 3}));
  ExpectError(bad.Run(), absl::StatusCode::kInvalidArgument,
              "gradients and features must have the same shape");
}

TEST(NnGradReluTest, PassesGradientWherePositive) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  OpTest t("ReluGrad");
  t.Attr("T", DT_FLOAT)
      .Input(Tensor::FromVector<float>({1.75, 3.5, 2.5, 4.25, 3.25, 2.25}, TensorShape({2, 3})))
      .Input(Tensor::FromVector<float>({-1, 0, 2, nan, 0.5, -0.25}, TensorShape({2, 3})));
  NN_ASSERT_OK_AND_ASSIGN(auto out, t.Run());
  ExpectTensorEq<float>(out[0], {0, 0, 2.5, 0, 3.25, 0}, {2, 3});
}

// 21 elements: the vectorised body (NaN and -0 inside it) and the scalar tail.
TEST(NnGradReluTest, VectorisedLoopKeepsNanAndSignedZeroRules) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> g(21), f(21), want(21);
  for (int i = 0; i < 21; ++i) {
    g[i] = i + 0.5f;
    f[i] = (i % 3 == 0) ? -1.0f : 1.0f;
  }
  f[4] = nan;
  f[5] = -0.0f;
  g[7] = nan;  // A NaN gradient where the feature is positive passes through.
  for (int i = 0; i < 21; ++i) want[i] = f[i] > 0 ? g[i] : 0.0f;
  OpTest t("ReluGrad");
  t.Attr("T", DT_FLOAT)
      .Input(Tensor::FromVector<float>(g, TensorShape({21})))
      .Input(Tensor::FromVector<float>(f, TensorShape({21})));
  NN_ASSERT_OK_AND_ASSIGN(auto out, t.Run());
  auto v = out[0].flat<float>();
  EXPECT_TRUE(std::isnan(v[7]));
  for (int i = 0; i < 21; ++i) {
    if (i != 7) EXPECT_EQ(v[i], want[i]) << i;
  }
}

TEST(NnGradReluTest, Int32AndShapeMismatch) {
  OpTest t("ReluGrad");
  t.Attr("T", DT_INT32)
      .Input(Tensor::Vec<int32_t>({5, 6, 7}))
      .Input(Tensor::Vec<int32_t>({0, -1, 2}));
  NN_ASSERT_OK_AND_ASSIGN(auto out, t.Run());
  ExpectTensorEq<int32_t>(out[0], {0, 0, 7}, {3});
  OpTest bad("ReluGrad");
  bad.Attr("T", DT_FLOAT)
      .Input(Tensor::Vec<float>({1, 2, 3}))
      .Input(Tensor::Vec<float>({1, 2, 3, 4}));
  ExpectError(bad.Run(), absl::StatusCode::kInvalidArgument,
              "[ReluGrad 'op'] gradients and features must have the same shape: gradients [3] "
              "features [4]");
}

absl::StatusOr<std::vector<Tensor>> RunBiasAddGrad(Tensor dy, const std::string& format) {
  OpTest t("BiasAddGrad");
  t.Attr("T", dy.dtype()).Attr("data_format", format).Input(std::move(dy));
  return t.Run();
}

TEST(NnGradBiasAddTest, MatchesTensorFlow) {
  NN_ASSERT_OK_AND_ASSIGN(auto nhwc, RunBiasAddGrad(Pattern({2, 3, 4}), "NHWC"));
  ExpectTensorEq<float>(nhwc[0], {-1.5, 0.75, 0.25, -0.25}, {4});
  NN_ASSERT_OK_AND_ASSIGN(auto nchw, RunBiasAddGrad(Pattern({2, 3, 2, 2}), "NCHW"));
  ExpectTensorEq<float>(nchw[0], {1.5, -0.25, -2.0}, {3});
  NN_ASSERT_OK_AND_ASSIGN(auto nchw2, RunBiasAddGrad(Pattern({2, 3}), "NCHW"));
  ExpectTensorEq<float>(nchw2[0], {0.0, 0.75, -1.25}, {3});
  NN_ASSERT_OK_AND_ASSIGN(auto d, RunBiasAddGrad(Pattern<double>({2, 3, 4}), "NHWC"));
  ExpectTensorEq<double>(d[0], {-1.5, 0.75, 0.25, -0.25}, {4});
}

// Large enough to be split over the pool, in both layouts.
TEST(NnGradBiasAddTest, LargeMatchesSumInDouble) {
  const Tensor dy = Noise({64, 12, 12, 32}, 7);
  auto v = dy.flat<float>();
  std::vector<double> nhwc(32), nchw(12);
  for (int64_t i = 0; i < dy.NumElements(); ++i) {
    nhwc[i % 32] += v[i];
    nchw[i / (12 * 32) % 12] += v[i];
  }
  NN_ASSERT_OK_AND_ASSIGN(auto a, RunBiasAddGrad(dy, "NHWC"));
  ExpectNear(a[0], nhwc, 1e-4);
  NN_ASSERT_OK_AND_ASSIGN(auto b, RunBiasAddGrad(dy, "NCHW"));
  ExpectNear(b[0], nchw, 1e-4);
}

TEST(NnGradBiasAddTest, ErrorsAndShapes) {
  ExpectError(RunBiasAddGrad(Tensor::Vec<float>({1, 2}), "NHWC"),
              absl::StatusCode::kInvalidArgument, "Input tensor must be at least 2D: [2]");
  NN_ASSERT_OK_AND_ASSIGN(auto empty,
                          RunBiasAddGrad(Tensor(DT_FLOAT, TensorShape({0, 3})), "NHWC"));
  ExpectTensorEq<float>(empty[0], {0, 0, 0}, {3});

  tensorflow::NodeDef node;
  node.set_op("BiasAddGrad");
  SetAttr(&node, "T", DT_FLOAT);
  NN_ASSERT_OK_AND_ASSIGN(auto s, InferNodeShapes(node, {PartialShape({-1, 5})}));
  EXPECT_EQ(s[0], PartialShape({5}));
  SetAttr(&node, "data_format", std::string("NCHW"));
  NN_ASSERT_OK_AND_ASSIGN(auto s2, InferNodeShapes(node, {PartialShape({2, 3, 4, 5})}));
  EXPECT_EQ(s2[0], PartialShape({3}));
  EXPECT_FALSE(InferNodeShapes(node, {PartialShape({3})}).ok());

  tensorflow::NodeDef relu;
  relu.set_op("ReluGrad");
  SetAttr(&relu, "T", DT_FLOAT);
  NN_ASSERT_OK_AND_ASSIGN(auto r,
                          InferNodeShapes(relu, {PartialShape({-1, 3}), PartialShape({2, -1})}));
  EXPECT_EQ(r[0], PartialShape({2, 3}));
  EXPECT_FALSE(InferNodeShapes(relu, {PartialShape({2, 3}), PartialShape({3, 2})}).ok());
}

}  // namespace
}  // namespace dflow
