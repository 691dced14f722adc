// Tests for nn_ops.cc. Expected values come from TensorFlow 2.x's CPU kernels
// (tests/data/gen_nn_reference.py prints them).
#include <cmath>
#include <functional>
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

// logits with rows far from zero: exp() of them overflows without the max shift.
Tensor LargeLogits() {
  return Tensor::FromVector<float>({1000, 1001, 1002, -1000, 0, 1000, 1, 2, 3}, {3, 3});
}

void ExpectError(const absl::StatusOr<std::vector<Tensor>>& result, absl::StatusCode code,
                 const std::string& substr) {
  ASSERT_FALSE(result.ok()) << "expected an error containing '" << substr << "'";
  EXPECT_EQ(result.status().code(), code) << result.status();
  EXPECT_THAT(std::string(result.status().message()), HasSubstr(substr));
}

// --- Softplus -------------------------------------------------------------------

// TensorFlow's values (tests/data/gen_nn_reference.py, "Softplus"): x itself
// above 13.94 (float), exp(x) below -13.94, log(exp(x) + 1) between; NaN stays.
TEST(NnSoftplusTest, FloatMatchesTensorFlow) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  OpTest t("Softplus");
  t.Attr("T", DT_FLOAT)
      .Input(Tensor::FromVector<float>(
          {-30, -20, -15, -14, -1, -0.25, 0, 0.5, 1, 14, 15, 20, 30, nan}, {2, 7}));
  NN_ASSERT_OK_AND_ASSIGN(auto out, t.Run());
  ASSERT_EQ(out[0].shape(), TensorShape({2, 7}));
  const std::vector<float> tf = {9.357622912219837e-14f, 2.06115369216775e-09f,
                                 3.0590231858695915e-07f, 8.315287232107949e-07f,
                                 0.3132616877555847f,    0.5759394764900208f,
                                 0.6931471824645996f,    0.9740769267082214f,
                                 1.31326162815094f,      14.0f,
                                 15.0f,                  20.0f,
                                 30.0f};
  auto v = out[0].flat<float>();
  for (size_t i = 0; i < tf.size(); ++i) EXPECT_FLOAT_EQ(v[i], tf[i]) << "element " << i;
  EXPECT_TRUE(std::isnan(v[13]));
}

TEST(NnSoftplusTest, DoubleMatchesTensorFlow) {
  OpTest t("Softplus");
  t.Attr("T", DT_DOUBLE)
      .Input(Tensor::FromVector<double>({-40, -37, -36, -35, -1, 0, 1, 35, 36, 37, 40}, {11}));
  NN_ASSERT_OK_AND_ASSIGN(auto out, t.Run());
  const std::vector<double> tf = {4.248354255291589e-18, 8.533047625744065e-17,
                                  2.3195228302435696e-16, 6.305116760146989e-16,
                                  0.3132616875182228,     0.6931471805599453,
                                  1.3132616875182228,     35.0,
                                  36.0,                   37.0,
                                  40.0};
  auto v = out[0].flat<double>();
  for (size_t i = 0; i < tf.size(); ++i) EXPECT_DOUBLE_EQ(v[i], tf[i]) << "element " << i;
}

TEST(NnSoftplusTest, Int32HasNoKernel) {
  OpTest t("Softplus");
  t.Attr("T", DT_INT32).Input(Tensor::Vec<int32_t>({1, 2}));
  EXPECT_FALSE(t.Run().ok());
}

// --- Relu -----------------------------------------------------------------------

TEST(NnReluTest, ClampsNegativesAndKeepsNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  OpTest t("Relu");
  t.Attr("T", DT_FLOAT).Input(Tensor::FromVector<float>({-2, -0.5, 0, 0.5, 3, nan}, {2, 3}));
  NN_ASSERT_OK_AND_ASSIGN(auto out, t.Run());
  auto v = out[0].flat<float>();
  EXPECT_EQ(out[0].shape(), TensorShape({2, 3}));
  EXPECT_EQ(v[0], 0);
  EXPECT_EQ(v[1], 0);
  EXPECT_EQ(v[2], 0);
  EXPECT_EQ(v[3], 0.5f);
  EXPECT_EQ(v[4], 3);
  EXPECT_TRUE(std::isnan(v[5])) << "TensorFlow's relu(nan) is nan";
}

// 21 elements: the vectorised body (NaN and -0 inside it) and the scalar tail.
TEST(NnReluTest, VectorisedLoopKeepsNanAndNegativeZero) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x(21);
  for (int i = 0; i < 21; ++i) x[i] = (i % 2 == 0) ? -1.5f * i : 1.5f * i;
  x[3] = nan;
  x[9] = -0.0f;
  x[20] = nan;
  OpTest t("Relu");
  t.Attr("T", DT_FLOAT).Input(Tensor::FromVector<float>(x, TensorShape({21})));
  NN_ASSERT_OK_AND_ASSIGN(auto out, t.Run());
  auto v = out[0].flat<float>();
  for (int i = 0; i < 21; ++i) {
    if (std::isnan(x[i])) {
      EXPECT_TRUE(std::isnan(v[i])) << i;
    } else {
      EXPECT_EQ(v[i], x[i] < 0 ? 0.0f : x[i]) << i;
    }
  }
  EXPECT_TRUE(std::signbit(v[9])) << "relu(-0) is -0, as x < 0 ? 0 : x";
}

TEST(NnReluTest, Int32AndLargeInput) {
  OpTest t("Relu");
  t.Attr("T", DT_INT32).Input(Tensor::Vec<int32_t>({-3, 0, 7}));
  NN_ASSERT_OK_AND_ASSIGN(auto out, t.Run());
  ExpectTensorEq<int32_t>(out[0], {0, 0, 7}, {3});

  // Big enough to be split over the intra-op pool.
  Tensor big = Pattern(TensorShape({1000, 301}));
  OpTest b("Relu");
  b.Attr("T", DT_FLOAT).Input(big);
  NN_ASSERT_OK_AND_ASSIGN(auto big_out, b.Run());
  for (int64_t i = 0; i < big.NumElements(); ++i) {
    ASSERT_EQ(big_out[0].flat<float>()[i], std::max(0.0f, big.flat<float>()[i])) << i;
  }
}

// --- BiasAdd ----------------------------------------------------------------------

// LRN and LRNGrad against TensorFlow 2.21 (depth_radius 2, bias 1.5,
// alpha 0.3, beta 0.75, 7 channels: windows cut at both ends).
OpTest& LrnAttrs(OpTest& t) {
  return t.Attr("depth_radius", int64_t{2}).Attr("bias", 1.5f).Attr("alpha", 0.3f).Attr("beta", 0.75f);
}

TEST(NnLrnTest, ForwardAndGradientMatchTensorFlow) {
  const TensorShape shape({1, 2, 1, 7});
  const Tensor x = Tensor::FromVector<float>(
      {1.6243454f, -0.6117564f, -0.5281718f, -1.0729686f, 0.8654076f, -2.3015387f, 1.7448118f,
       -0.7612069f, 0.3190391f, -0.2493704f, 1.4621079f, -2.0601406f, -0.3224172f, -0.3840544f},
      shape);
  const std::vector<float> want_y = {
      0.820076584815979f,    -0.28015995025634766f, -0.2284245789051056f,  -0.38999268412590027f,
      0.2730223536491394f,   -0.7360435724258423f,  0.5918554067611694f,   -0.5061562061309814f,
      0.1673247069120407f,   -0.09467455744743347f, 0.5720024704933167f,   -0.8035996556282043f,
      -0.12626923620700836f, -0.17514950037002563f};
  OpTest forward("LRN");
  LrnAttrs(forward).Input(x);
  auto y = forward.Run();
  ASSERT_TRUE(y.ok()) << y.status();
  ExpectTensorEq<float>((*y)[0], want_y, shape, 1e-5);

  const Tensor dy = Tensor::FromVector<float>(
      {1.1337694f, -1.0998913f, -0.1724282f, -0.8778584f, 0.0422137f, 0.5828152f, -1.1006192f,
       1.1447237f, 0.9015907f, 0.5024943f, 0.9008560f, -0.6837279f, -0.1228902f, -0.9357694f},
      shape);
  OpTest backward("LRNGrad");
  LrnAttrs(backward).Input(dy).Input(x).Input((*y)[0]);
  auto dx = backward.Run();
  ASSERT_TRUE(dx.ok()) << dx.status();
  ExpectTensorEq<float>(
      (*dx)[0],
      {0.2102613002061844f, -0.34287071228027344f, 0.06487677246332169f, -0.2615605294704437f,
       0.06930139660835266f, 0.024158120155334473f, -0.18062560260295868f, 0.6633591055870056f,
       0.4926803708076477f, 0.19284871220588684f, 0.11609050631523132f, 0.06049344316124916f,
       0.0049765147268772125f, -0.38898587226867676f},
      shape, 1e-5);

  OpTest rank3("LRN");
  rank3.Input(Tensor::FromVector<float>({1, 2}, TensorShape({1, 1, 2})));
  const absl::Status s = rank3.Run().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("input must be 4-dimensional"));
}

TEST(NnBiasAddTest, NhwcAddsAlongLastDim) {
  OpTest t("BiasAdd");
  t.Attr("T", DT_FLOAT)
      .Input(Tensor::FromVector<float>({1, 2, 3, 4, 5, 6, 7, 8}, {1, 2, 2, 2}))
      .Input(Tensor::Vec<float>({10, 100}));
  NN_ASSERT_OK_AND_ASSIGN(auto out, t.Run());
  ExpectTensorEq<float>(out[0], {11, 102, 13, 104, 15, 106, 17, 108}, {1, 2, 2, 2});
}

TEST(NnBiasAddTest, NchwAddsAlongDimOne) {
  OpTest t("BiasAdd");
  t.Attr("T", DT_FLOAT).Attr("data_format", "NCHW");
  t.Input(Pattern(TensorShape({2, 3, 2}))).Input(Tensor::Vec<float>({1, 2, 3}));
  NN_ASSERT_OK_AND_ASSIGN(auto out, t.Run());
  // TensorFlow: tf.raw_ops.BiasAdd(value=pattern([2,3,2]), bias=[1,2,3], data_format="NCHW").
  ExpectTensorEq<float>(
      out[0], {-0.25, 1.5, 1.5, 3.25, 3.25, 2.25, 2.0, 1.0, 1.0, 2.75, 2.75, 1.75}, {2, 3, 2});
}

TEST(NnBiasAddTest, NchwOnMatrixAddsAlongLastDim) {
  OpTest t("BiasAdd");
  t.Attr("T", DT_DOUBLE).Attr("data_format", "NCHW");
  t.Input(Tensor::FromVector<double>({0, 1, 2, 3, 4, 5, 6, 7}, {2, 4}));
  t.Input(Tensor::Vec<double>({1, 2, 3, 4}));
  NN_ASSERT_OK_AND_ASSIGN(auto out, t.Run());
  ExpectTensorEq<double>(out[0], {1, 3, 5, 7, 5, 7, 9, 11}, {2, 4});
}

TEST(NnBiasAddTest, BadShapesAreClearErrors) {
  auto run = [](Tensor value, Tensor bias) {
    OpTest t("BiasAdd", "bias_add");
    t.Attr("T", DT_FLOAT).Input(std::move(value)).Input(std::move(bias));
    return t.Run();
  };
  ExpectError(run(Tensor::Vec<float>({1, 2}), Tensor::Vec<float>({1, 2})),
              absl::StatusCode::kInvalidArgument,
              "[BiasAdd 'bias_add'] Input tensor must be at least 2D: [2]");
  ExpectError(run(Pattern(TensorShape({2, 4})), Pattern(TensorShape({1, 4}))),
              absl::StatusCode::kInvalidArgument, "Biases must be 1D: [1,4]");
  ExpectError(run(Pattern(TensorShape({2, 4})), Pattern(TensorShape({3}))),
              absl::StatusCode::kInvalidArgument, "bias [3] vs. value [2,4]");
}

// --- Softmax / LogSoftmax -------------------------------------------------------------

TEST(NnSoftmaxTest, LargeLogitsAreStable) {
  OpTest t("Softmax");
  t.Attr("T", DT_FLOAT).Input(LargeLogits());
  NN_ASSERT_OK_AND_ASSIGN(auto out, t.Run());
  ExpectTensorEq<float>(out[0],
                        {0.09003057330846786, 0.2447284758090973, 0.6652409434318542, 0.0, 0.0, 1.0,
                         0.09003057330846786, 0.2447284758090973, 0.6652409434318542},
                        {3, 3}, 1e-6);
}

TEST(NnSoftmaxTest, LogSoftmaxLargeLogits) {
  OpTest t("LogSoftmax");
  t.Attr("T", DT_FLOAT).Input(LargeLogits());
  NN_ASSERT_OK_AND_ASSIGN(auto out, t.Run());
  ExpectTensorEq<float>(
      out[0],
      {-2.4076058864593506, -1.4076058864593506, -0.40760594606399536, -2000.0, -1000.0, 0.0,
       -2.4076058864593506, -1.4076058864593506, -0.40760594606399536},
      {3, 3}, 1e-6);
}

TEST(NnSoftmaxTest, HigherRankUsesLastAxisAndDouble) {
  Tensor logits = Pattern<double>(TensorShape({2, 3, 5}));
  OpTest t("Softmax");
  t.Attr("T", DT_DOUBLE).Input(logits);
  NN_ASSERT_OK_AND_ASSIGN(auto out, t.Run());
  ASSERT_EQ(out[0].shape(), TensorShape({2, 3, 5}));
  auto x = logits.flat<double>();
  auto y = out[0].flat<double>();
  for (int r = 0; r < 6; ++r) {
    double sum = 0;
    for (int c = 0; c < 5; ++c) sum += std::exp(x[r * 5 + c]);
    for (int c = 0; c < 5; ++c) EXPECT_NEAR(y[r * 5 + c], std::exp(x[r * 5 + c]) / sum, 1e-14);
  }
}

TEST(NnSoftmaxTest, ScalarIsAnError) {
  OpTest t("Softmax", "sm");
  t.Attr("T", DT_FLOAT).Input(Tensor::Scalar(1.0f));
  ExpectError(t.Run(), absl::StatusCode::kInvalidArgument,
              "[Softmax 'sm'] logits must have >= 1 dimension, got []");
}

TEST(NnSoftmaxTest, EmptyInputGivesEmptyOutput) {
  OpTest t("LogSoftmax");
  t.Attr("T", DT_FLOAT).Input(Tensor(DT_FLOAT, TensorShape({0, 3})));
  NN_ASSERT_OK_AND_ASSIGN(auto out, t.Run());
  EXPECT_EQ(out[0].shape(), TensorShape({0, 3}));
}

// --- SparseSoftmaxCrossEntropyWithLogits ---------------------------------------------

TEST(NnSparseXentTest, LargeLogitsMatchTensorFlow) {
  for (DataType label_type : {DT_INT32, DT_INT64}) {
    OpTest t("SparseSoftmaxCrossEntropyWithLogits");
    t.Attr("T", DT_FLOAT).Attr("Tlabels", label_type).Input(LargeLogits());
    t.Input(label_type == DT_INT32 ? Tensor::Vec<int32_t>({0, 1, 2})
                                   : Tensor::Vec<int64_t>({0, 1, 2}));
    NN_ASSERT_OK_AND_ASSIGN(auto out, t.Run());
    ExpectTensorEq<float>(out[0], {2.4076058864593506, 1000.0, 0.40760594606399536}, {3}, 1e-6);
    ExpectTensorEq<float>(out[1],
                          {-0.9099694490432739, 0.2447284758090973, 0.6652409434318542, 0.0, -1.0,
                           1.0, 0.09003057330846786, 0.2447284758090973, -0.33475905656814575},
                          {3, 3}, 1e-6);
  }
}

TEST(NnSparseXentTest, LabelOutOfRangeNamesLabelAndClasses) {
  auto run = [](Tensor labels) {
    OpTest t("SparseSoftmaxCrossEntropyWithLogits", "xent");
    t.Attr("T", DT_FLOAT).Attr("Tlabels", labels.dtype());
    t.Input(Tensor(DT_FLOAT, TensorShape({3, 10}))).Input(std::move(labels));
    return t.Run();
  };
  ExpectError(run(Tensor::Vec<int32_t>({1, 2, 10})), absl::StatusCode::kInvalidArgument,
              "[SparseSoftmaxCrossEntropyWithLogits 'xent'] Received a label value of 10 which "
              "is outside the valid range of [0, 10).  Label values: 1 2 10");
  ExpectError(run(Tensor::Vec<int64_t>({1, -1, 3})), absl::StatusCode::kInvalidArgument,
              "Received a label value of -1 which is outside the valid range of [0, 10)");
}

TEST(NnSparseXentTest, BadShapesAreClearErrors) {
  auto run = [](TensorShape logits, Tensor labels) {
    OpTest t("SparseSoftmaxCrossEntropyWithLogits");
    t.Attr("T", DT_FLOAT).Attr("Tlabels", DT_INT32);
    t.Input(Tensor(DT_FLOAT, logits)).Input(std::move(labels));
    return t.Run();
  };
  ExpectError(run({3}, Tensor::Vec<int32_t>({0, 1, 2})), absl::StatusCode::kInvalidArgument,
              "logits must be 2-D, but got shape [3]");
  ExpectError(run({3, 4}, Tensor(DT_INT32, TensorShape({3, 1}))),
              absl::StatusCode::kInvalidArgument, "labels must be 1-D, but got shape [3,1]");
  ExpectError(run({3, 4}, Tensor::Vec<int32_t>({0, 1})), absl::StatusCode::kInvalidArgument,
              "same first dimension, got logits shape [3,4] and labels shape [2]");
  ExpectError(run({3, 0}, Tensor::Vec<int32_t>({0, 0, 0})), absl::StatusCode::kInvalidArgument,
              "Must have at least one class, but got logits shape [3,0]");
}

TEST(NnSparseXentTest, EmptyBatch) {
  OpTest t("SparseSoftmaxCrossEntropyWithLogits");
  t.Attr("T", DT_FLOAT).Attr("Tlabels", DT_INT32);
  t.Input(Tensor(DT_FLOAT, TensorShape({0, 4}))).Input(Tensor(DT_INT32, TensorShape({0})));
  NN_ASSERT_OK_AND_ASSIGN(auto out, t.Run());
  EXPECT_EQ(out[0].shape(), TensorShape({0}));
  EXPECT_EQ(out[1].shape(), TensorShape({0, 4}));
}

// The MLP's case: batch 128, 10 classes, split over the pool; checked
// against the definition in double.
TEST(NnSparseXentTest, TrainingBatchMatchesDefinition) {
  const int64_t batch = 128, classes = 10;
  Tensor logits = Pattern(TensorShape({batch, classes}));
  std::vector<int64_t> labels(batch);
  for (int64_t i = 0; i < batch; ++i) labels[i] = (i * 3) % classes;
  OpTest t("SparseSoftmaxCrossEntropyWithLogits");
  t.Attr("T", DT_FLOAT).Input(logits).Input(Tensor::Vec<int64_t>(labels));
  NN_ASSERT_OK_AND_ASSIGN(auto out, t.Run());
  auto x = logits.flat<float>();
  for (int64_t r = 0; r < batch; ++r) {
    double sum = 0;
    for (int64_t c = 0; c < classes; ++c) sum += std::exp(double{x[r * classes + c]});
    EXPECT_NEAR(out[0].flat<float>()[r], std::log(sum) - x[r * classes + labels[r]], 1e-5);
    for (int64_t c = 0; c < classes; ++c) {
      const double expected = std::exp(double{x[r * classes + c]}) / sum - (c == labels[r]);
      EXPECT_NEAR(out[1].flat<float>()[r * classes + c], expected, 1e-6);
    }
  }
}

// --- SoftmaxCrossEntropyWithLogits -------------------------------------------------

Tensor XentLabels() {
  return Tensor::FromVector<float>({0.25, 0.25, 0.5, 0, 1, 0, 1, 0, 0}, {3, 3});
}

absl::StatusOr<std::vector<Tensor>> RunXent(Tensor logits, Tensor labels) {
  OpTest t("SoftmaxCrossEntropyWithLogits", "xent");
  t.Attr("T", DT_FLOAT).Input(std::move(logits)).Input(std::move(labels));
  return t.Run();
}

TEST(NnXentTest, LargeLogitsMatchTensorFlow) {
  NN_ASSERT_OK_AND_ASSIGN(auto out, RunXent(LargeLogits(), XentLabels()));
  ExpectTensorEq<float>(out[0], {1.1576058864593506, 1000.0, 2.4076058864593506}, {3}, 1e-6);
  ExpectTensorEq<float>(out[1],
                        {-0.15996941924095154, -0.00527152419090271, 0.16524094343185425, 0.0, -1.0,
                         1.0, -0.9099694490432739, 0.2447284758090973, 0.6652409434318542},
                        {3, 3}, 1e-6);
}

TEST(NnXentTest, BroadcastsLabelsAcrossRows) {
  NN_ASSERT_OK_AND_ASSIGN(
      auto out, RunXent(LargeLogits(), Tensor::FromVector<float>({0.5, 0.25, 0.25}, {1, 3})));
  ExpectTensorEq<float>(out[0], {1.6576058864593506, 1250.0, 1.6576058864593506}, {3}, 1e-6);
  ExpectTensorEq<float>(
      out[1],
      {-0.40996941924095154, -0.00527152419090271, 0.41524094343185425, -0.5, -0.25, 0.75,
       -0.40996941924095154, -0.00527152419090271, 0.41524094343185425},
      {3, 3}, 1e-6);
}

TEST(NnXentTest, BroadcastsRankOneLogits) {
  NN_ASSERT_OK_AND_ASSIGN(auto out, RunXent(Tensor::Vec<float>({1, 2, 4}), XentLabels()));
  ExpectTensorEq<float>(out[0], {1.4198460578918457, 2.1698460578918457, 3.1698460578918457}, {3},
                        1e-6);
  ExpectTensorEq<float>(out[1],
                        {-0.20798993110656738, -0.13580480217933655, 0.34379470348358154,
                         0.04201006889343262, -0.8858047723770142, 0.8437947034835815,
                         -0.9579899311065674, 0.11419519782066345, 0.8437947034835815},
                        {3, 3}, 1e-6);
}

TEST(NnXentTest, BroadcastsColumnOfLabels) {
  // labels [3,1] broadcast along the classes: every class gets the row's value.
  NN_ASSERT_OK_AND_ASSIGN(auto out, RunXent(Tensor::FromVector<float>({0, 0, 0, 0}, {2, 2}),
                                            Tensor::FromVector<float>({1, 0.5}, {2, 1})));
  ExpectTensorEq<float>(out[0], {2 * std::log(2.0f), std::log(2.0f)}, {2});
  ExpectTensorEq<float>(out[1], {-0.5, -0.5, 0, 0}, {2, 2});
}

TEST(NnXentTest, BadShapesAreClearErrors) {
  ExpectError(RunXent(Pattern(TensorShape({3, 4})), Pattern(TensorShape({3, 5}))),
              absl::StatusCode::kInvalidArgument,
              "[SoftmaxCrossEntropyWithLogits 'xent'] logits and labels must be broadcastable: "
              "logits_size=[3,4] labels_size=[3,5]");
  ExpectError(RunXent(Pattern(TensorShape({4})), Pattern(TensorShape({4}))),
              absl::StatusCode::kInvalidArgument,
              "must be either 2-dimensional, or broadcasted to be 2-dimensional");
  ExpectError(RunXent(Pattern(TensorShape({2, 2, 4})), Pattern(TensorShape({2, 2, 4}))),
              absl::StatusCode::kInvalidArgument,
              "must be either 2-dimensional, or broadcasted to be 2-dimensional");
}

// --- shape functions --------------------------------------------------------------

struct ShapeCase {
  std::string op;
  std::function<void(tensorflow::NodeDef*)> attrs;
  std::vector<PartialShape> inputs;
  std::vector<std::string> outputs;  // DebugStrings; empty: an error is expected
  std::string error = "";            // substring of the error
};

void CheckShapeCases(const std::vector<ShapeCase>& cases) {
  for (const ShapeCase& c : cases) {
    tensorflow::NodeDef node;
    node.set_name("n");
    node.set_op(c.op);
    SetAttr(&node, "T", DT_FLOAT);
    if (c.attrs) c.attrs(&node);
    std::string in;
    for (const PartialShape& s : c.inputs) in += s.DebugString() + " ";
    SCOPED_TRACE(c.op + " on " + in);
    absl::StatusOr<std::vector<PartialShape>> out = InferNodeShapes(node, c.inputs);
    if (c.outputs.empty()) {
      ASSERT_FALSE(out.ok()) << "expected error '" << c.error << "'";
      EXPECT_THAT(std::string(out.status().message()), HasSubstr(c.error));
      continue;
    }
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ(out->size(), c.outputs.size());
    for (size_t i = 0; i < c.outputs.size(); ++i) {
      EXPECT_EQ((*out)[i].DebugString(), c.outputs[i]) << "output " << i;
    }
  }
}

TEST(NnShapeFnTest, ActivationsSoftmaxAndBias) {
  const PartialShape unknown;
  auto nchw = [](tensorflow::NodeDef* n) { SetAttr(n, "data_format", "NCHW"); };
  CheckShapeCases({
      {"Relu", nullptr, {PartialShape({2, -1})}, {"[2,?]"}},
      {"Softmax", nullptr, {PartialShape({8, 10})}, {"[8,10]"}},
      {"Softmax", nullptr, {unknown}, {"<unknown>"}},
      {"Softmax", nullptr, {PartialShape::Scalar()}, {}, "at least rank 1"},
      {"LogSoftmax", nullptr, {PartialShape({2, 3, 4})}, {"[2,3,4]"}},
      {"BiasAdd", nullptr, {PartialShape({-1, 5}), PartialShape({5})}, {"[?,5]"}},
      {"BiasAdd", nullptr, {PartialShape({4, -1}), PartialShape({5})}, {"[4,5]"}},
      {"BiasAdd", nullptr, {PartialShape({4, 3}), PartialShape({5})}, {}, "bias size must match"},
      {"BiasAdd", nullptr, {PartialShape({4}), PartialShape({4})}, {}, "at least rank 2"},
      {"BiasAdd", nullptr, {PartialShape({4, 4}), PartialShape({1, 4})}, {}, "rank 1"},
      {"BiasAdd", nchw, {PartialShape({2, -1, 7, 7}), PartialShape({3})}, {"[2,3,7,7]"}},
      {"BiasAdd", nullptr, {unknown, PartialShape({3})}, {"<unknown>"}},
  });
}

TEST(NnShapeFnTest, CrossEntropies) {
  const PartialShape unknown;
  CheckShapeCases({
      {"SparseSoftmaxCrossEntropyWithLogits",
       nullptr,
       {PartialShape({-1, 10}), PartialShape({64})},
       {"[64]", "[64,10]"}},
      {"SparseSoftmaxCrossEntropyWithLogits", nullptr, {unknown, unknown}, {"[?]", "[?,?]"}},
      {"SparseSoftmaxCrossEntropyWithLogits",
       nullptr,
       {PartialShape({32, 10}), PartialShape({64})},
       {},
       "same first dimension"},
      {"SparseSoftmaxCrossEntropyWithLogits",
       nullptr,
       {PartialShape({32}), PartialShape({32})},
       {},
       "rank 2"},
      {"SoftmaxCrossEntropyWithLogits",
       nullptr,
       {PartialShape({-1, 10}), PartialShape({64, 10})},
       {"[64]", "[64,10]"}},
      {"SoftmaxCrossEntropyWithLogits",
       nullptr,
       {PartialShape({64, 10}), PartialShape({1, 10})},
       {"[64]", "[64,10]"}},
      {"SoftmaxCrossEntropyWithLogits",
       nullptr,
       {PartialShape({10}), PartialShape({64, 10})},
       {"[64]", "[64,10]"}},
      {"SoftmaxCrossEntropyWithLogits",
       nullptr,
       {PartialShape({64, 10}), PartialShape({64, 9})},
       {},
       "broadcastable"},
      {"SoftmaxCrossEntropyWithLogits",
       nullptr,
       {PartialShape({10}), PartialShape({10})},
       {},
       "rank 2"},
  });
}

// --- registry -----------------------------------------------------------------------

TEST(NnRegistryTest, OpsAndFloatKernelsAreRegistered) {
  for (const char* op :
       {"Relu", "BiasAdd", "Softmax", "LogSoftmax", "SparseSoftmaxCrossEntropyWithLogits",
        "SoftmaxCrossEntropyWithLogits", "Conv2D", "MaxPool"}) {
    EXPECT_TRUE(OpRegistry::Global()->LookUp(op).ok()) << op;
    tensorflow::NodeDef node;
    node.set_op(op);
    SetAttr(&node, "T", DT_FLOAT);
    EXPECT_TRUE(KernelRegistry::Global()->HasKernel(kDeviceCPU, node)) << op;
  }
}

}  // namespace
}  // namespace dflow
