// FusedBatchNorm, V2, V3 and their gradients against TensorFlow 2.21's CPU
// kernels on the same inputs (a [2,2,3,2] NHWC batch, or its NCHW transpose,
// epsilon 0.001).
#include <vector>

#include "dflow/ops/op_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

using ::testing::HasSubstr;

const std::vector<float> kX = {
    1.764052391052246f,    0.40015721321105957f, 0.978738009929657f,   2.2408931255340576f,
    1.8675580024719238f,   -0.9772778749465942f, 0.9500884413719177f,  -0.15135720372200012f,
    -0.10321885347366333f, 0.4105985164642334f,  0.14404356479644775f, 1.4542734622955322f,
    0.7610377073287964f,   0.12167501449584961f, 0.44386324286460876f, 0.3336743414402008f,
    1.4940791130065918f,   -0.2051582634449005f, 0.3130677044391632f,  -0.8540957570075989f,
    -2.5529897212982178f,  0.653618574142456f,   0.8644362092018127f,  -0.7421650290489197f};
const std::vector<float> kDy = {
    2.269754648208618f,   -1.4543657302856445f, 0.04575851559638977f,  -0.18718385696411133f,
    1.5327792167663574f,  1.4693588018417358f,  0.154947429895401f,    0.37816253304481506f,
    -0.8877857327461243f, -1.980796456336975f,  -0.34791216254234314f, 0.15634897351264954f,
    1.2302906513214111f,  1.202379822731018f,   -0.38732680678367615f, -0.302302747964859f,
    -1.0485529899597168f, -1.420017957687378f,  -1.7062702178955078f,  1.950775384902954f,
    -0.5096521973609924f, -0.4380742907524109f, -1.2527953386306763f,  0.7774903774261475f};
const TensorShape kShape({2, 2, 3, 2});

Tensor Vec(const std::vector<float>& v) { return Tensor::Vec<float>(v); }

// TensorFlow 2.21's y and dx in training, NHWC (used by several versions).
const std::vector<float> kTrainY = {
    1.6989694833755493f,  0.10204008221626282f,  0.6410883665084839f,   -0.9200521111488342f,
    1.8383997678756714f,  0.8668784499168396f,   0.6024950742721558f,   0.4082754850387573f,
    -0.8163938522338867f, 0.09624242037534714f,  -0.4833116829395294f,  -0.48327142000198364f,
    0.3478286564350128f,  0.25667086243629456f,  -0.07943064719438553f, 0.13895554840564728f,
    1.3352938890457153f,  0.43814921379089355f,  -0.2556226849555969f,  0.7984799742698669f,
    -4.116430759429932f,  -0.03869757056236267f, 0.48711466789245605f,  0.7363290190696716f};
const std::vector<float> kTrainDx = {
    2.4602715969085693f,  0.7611465454101562f,   -0.07312960177659988f, -0.49996429681777954f,
    1.4065489768981934f,  -0.44511380791664124f, 0.09082929790019989f,  -0.08935446292161942f,
    -0.693486213684082f,  1.0502915382385254f,   -0.11185487359762192f, -0.45247673988342285f,
    1.6507409811019897f,  -0.629703164100647f,   -0.34152376651763916f, 0.14158415794372559f,
    -1.8507567644119263f, 0.9254025220870972f,   -2.041215658187866f,   -0.7497338652610779f,
    1.2586448192596436f,  0.12007355690002441f,  -1.7550688982009888f,  -0.13215215504169464f};
const Tensor kBatchMean = Tensor::Vec<float>({0.5770629644393921f, 0.22373637557029724f});
const Tensor kBatchVar = Tensor::Vec<float>({1.2389262914657593f, 0.8098545074462891f});

// An NHWC [2,2,3,2] tensor's values in NCHW ([2,2,2,3]) order.
std::vector<float> ToNchw(const std::vector<float>& nhwc) {
  std::vector<float> out;
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 2; ++c)
      for (int h = 0; h < 2; ++h)
        for (int w = 0; w < 3; ++w) out.push_back(nhwc[((n * 2 + h) * 3 + w) * 2 + c]);
  return out;
}
const TensorShape kNchwShape({2, 2, 2, 3});

// Which op version runs, and on which layout.
struct Version {
  std::string op = "FusedBatchNormV3";
  bool nchw = false;
  bool v1() const { return op == "FusedBatchNorm"; }
  bool v3() const { return op == "FusedBatchNormV3"; }
  std::string grad_op() const { return "FusedBatchNormGrad" + op.substr(14); }
  Tensor Data(const std::vector<float>& nhwc) const {
    return nchw ? Tensor::FromVector<float>(ToNchw(nhwc), kNchwShape)
                : Tensor::FromVector<float>(nhwc, kShape);
  }
  void SetAttrs(OpTest& t, bool training) const {
    t.Attr("T", DT_FLOAT).Attr("epsilon", 0.001f).Attr("is_training", training);
    if (!v1()) t.Attr("U", DT_FLOAT);
    t.Attr("data_format", std::string(nchw ? "NCHW" : "NHWC"));
  }
};

absl::StatusOr<std::vector<Tensor>> Forward(bool training, const Tensor& mean, const Tensor& var,
                                            float avg_factor = 1.0f, const Version& v = {}) {
  OpTest t(v.op);
  v.SetAttrs(t, training);
  t.Attr("exponential_avg_factor", avg_factor)
      .Input(v.Data(kX))
      .Input(Vec({1.5f, -0.5f}))
      .Input(Vec({0.1f, 0.2f}))
      .Input(mean)
      .Input(var);
  return t.Run();
}

absl::StatusOr<std::vector<Tensor>> Backward(bool training, const Tensor& mean, const Tensor& var,
                                             const Version& v = {}) {
  OpTest t(v.grad_op());
  v.SetAttrs(t, training);
  t.Input(v.Data(kDy)).Input(v.Data(kX)).Input(Vec({1.5f, -0.5f})).Input(mean).Input(var);
  if (v.v3()) t.Input(Tensor::Scalar(0.0f));
  return t.Run();
}

TEST(BatchNormOpsTest, TrainingNormalizesWithTheBatchStatistics) {
  auto out = Forward(true, Vec({}), Vec({}));  // What tf.compat.v1.nn.fused_batch_norm feeds.
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<float>((*out)[0], kTrainY, kShape, 1e-5);
  ExpectTensorEq<float>((*out)[1], {0.5770629644393921f, 0.22373637557029724f}, {2}, 1e-6);
  // batch_variance is unbiased (x 12/11); reserve_space_2 keeps the biased one.
  ExpectTensorEq<float>((*out)[2], {1.3515559434890747f, 0.8834776878356934f}, {2}, 1e-6);
  ExpectTensorEq<float>((*out)[3], {0.5770629644393921f, 0.22373637557029724f}, {2}, 1e-6);
  ExpectTensorEq<float>((*out)[4], {1.2389262914657593f, 0.8098545074462891f}, {2}, 1e-6);

  auto averaged = Forward(true, Vec({0.5f, -1.0f}), Vec({2.0f, 0.5f}), 0.25f);
  ASSERT_TRUE(averaged.ok()) << averaged.status();
  ExpectTensorEq<float>((*averaged)[1], {0.5192657709121704f, -0.6940659284591675f}, {2}, 1e-6);
  ExpectTensorEq<float>((*averaged)[2], {1.8378889560699463f, 0.5958694219589233f}, {2}, 1e-6);
}

TEST(BatchNormOpsTest, InferenceUsesTheGivenStatistics) {
  auto out = Forward(false, Vec({0.5f, -1.0f}), Vec({2.0f, 0.5f}));
  ASSERT_TRUE(out.ok()) << out.status();
  const std::vector<float> first = {1.4403949975967407f, -0.7890720963478088f, 0.6076514720916748f,
                                    -2.089369297027588f, 1.5501518249511719f,  0.1839490830898285f};
  for (size_t i = 0; i < first.size(); ++i) EXPECT_NEAR((*out)[0].flat<float>()[i], first[i], 1e-5);
  ExpectTensorEq<float>((*out)[1], {0.5f, -1.0f}, {2});
}

TEST(BatchNormOpsTest, GradientInTrainingAndInference) {
  auto train = Backward(true, kBatchMean, kBatchVar);
  ASSERT_TRUE(train.ok()) << train.status();
  ExpectTensorEq<float>((*train)[0], kTrainDx, kShape, 1e-5);
  ExpectTensorEq<float>((*train)[1], {5.841885566711426f, -5.893881320953369f}, {2}, 1e-5);
  ExpectTensorEq<float>((*train)[2], {-0.9067649245262146f, 0.15177470445632935f}, {2}, 1e-5);
  EXPECT_EQ((*train)[3].shape(), TensorShape({0}));

  auto inference = Backward(false, Vec({0.5f, -1.0f}), Vec({2.0f, 0.5f}));
  ASSERT_TRUE(inference.ok()) << inference.status();
  const std::vector<float> first = {2.406836748123169f, 1.0273650884628296f, 0.04852210730314255f,
                                    0.132226824760437f, 1.6253515481948853f, -1.0379561185836792f};
  for (size_t i = 0; i < first.size(); ++i) {
    EXPECT_NEAR((*inference)[0].flat<float>()[i], first[i], 1e-5);
  }
  ExpectTensorEq<float>((*inference)[1], {4.549220561981201f, -7.235743999481201f}, {2}, 1e-5);
}

TEST(BatchNormOpsTest, BadInputsAreInvalidArgumentNamingTheNode) {
  auto bad_mean = Forward(false, Vec({0.5f}), Vec({2.0f, 0.5f}));
  EXPECT_EQ(bad_mean.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad_mean.status().message(), HasSubstr("mean must be a vector of 2 values"));
  EXPECT_THAT(bad_mean.status().message(), HasSubstr("'op'"));

  OpTest rank2("FusedBatchNormV3");
  rank2.Attr("T", DT_FLOAT)
      .Attr("U", DT_FLOAT)
      .Input(Tensor::FromVector<float>({1, 2}, TensorShape({1, 2})));
  for (int i = 0; i < 4; ++i) rank2.Input(Vec({1, 1}));
  EXPECT_THAT(rank2.Run().status().message(), HasSubstr("input must be 4-dimensional"));
}

// TensorFlow 2.21's NCHW outputs are its NHWC ones, transposed.
TEST(BatchNormOpsTest, EveryVersionInNchw) {
  for (const char* op : {"FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3"}) {
    SCOPED_TRACE(op);
    const Version v{op, /*nchw=*/true};
    auto train = Forward(true, Vec({}), Vec({}), 1.0f, v);
    ASSERT_TRUE(train.ok()) << train.status();
    ASSERT_EQ(train->size(), v.v3() ? 6u : 5u);
    ExpectTensorEq<float>((*train)[0], ToNchw(kTrainY), kNchwShape, 1e-5);
    ExpectTensorEq<float>((*train)[2], {1.3515559434890747f, 0.8834776878356934f}, {2}, 1e-6);
    ExpectTensorEq<float>((*train)[4], {1.2389262914657593f, 0.8098545074462891f}, {2}, 1e-6);
    auto dx = Backward(true, kBatchMean, kBatchVar, v);
    ASSERT_TRUE(dx.ok()) << dx.status();
    ExpectTensorEq<float>((*dx)[0], ToNchw(kTrainDx), kNchwShape, 1e-5);
    ExpectTensorEq<float>((*dx)[1], {5.841885566711426f, -5.893881320953369f}, {2}, 1e-5);
    EXPECT_EQ((*dx)[3].shape(), TensorShape({0}));
  }
  const Version v2{"FusedBatchNormV2", /*nchw=*/true};
  auto averaged = Forward(true, Vec({0.5f, -1.0f}), Vec({2.0f, 0.5f}), 0.25f, v2);
  ASSERT_TRUE(averaged.ok()) << averaged.status();
  ExpectTensorEq<float>((*averaged)[1], {0.5192657709121704f, -0.6940659284591675f}, {2}, 1e-6);
  ExpectTensorEq<float>((*averaged)[2], {1.8378889560699463f, 0.5958694219589233f}, {2}, 1e-6);
  auto inference = Forward(false, Vec({0.5f, -1.0f}), Vec({2.0f, 0.5f}), 1.0f, v2);
  ASSERT_TRUE(inference.ok()) << inference.status();
  ExpectTensorEq<float>(
      (*inference)[0],
      {1.4403949975967407f,  0.6076514720916748f,   1.5501518249511719f,  0.577271580696106f,
       -0.5396503210067749f, -0.2774544656276703f,  -0.7890720963478088f, -2.089369297027588f,
       0.1839490830898285f,  -0.39948195219039917f, -0.7964478731155396f, -1.5337005853652954f,
       0.37680310010910034f, 0.040472857654094696f, 1.1541166305541992f,  -0.09822209924459457f,
       -3.137375593185425f,  0.4864463806152344f,   -0.5923520922660828f, -0.7421085238456726f,
       -0.3614768385887146f, 0.09693313390016556f,  -0.9681174159049988f, 0.01786518096923828f},
      kNchwShape, 1e-5);
  // TensorFlow's CPU kernel refuses NCHW inference gradients; these are its
  // NHWC ones transposed.
  auto inference_dx = Backward(false, Vec({0.5f, -1.0f}), Vec({2.0f, 0.5f}), v2);
  ASSERT_TRUE(inference_dx.ok()) << inference_dx.status();
  ExpectTensorEq<float>(
      (*inference_dx)[0],
      {2.406836748123169f,   0.04852210730314255f,  1.6253515481948853f,  0.16430549323558807f,
       -0.9414036870002747f, -0.3689243495464325f,  1.0273650884628296f,  0.132226824760437f,
       -1.0379561185836792f, -0.26713430881500244f, 1.3992360830307007f,  -0.11044503003358841f,
       1.3045941591262817f,  -0.41071945428848267f, -1.1118804216384888f, -1.8093205690383911f,
       -0.5404326915740967f, -1.3284580707550049f,  -0.8493620157241821f, 0.21354688704013824f,
       1.0031017065048218f,  -1.378029227256775f,   0.3094560205936432f,  -0.5492197871208191f},
      kNchwShape, 1e-5);
  ExpectTensorEq<float>((*inference_dx)[1], {4.549220561981201f, -7.235743999481201f}, {2}, 1e-5);
}

// V1 and V2 in NHWC give V3's values.
TEST(BatchNormOpsTest, VersionOneAndTwoInNhwc) {
  for (const char* op : {"FusedBatchNorm", "FusedBatchNormV2"}) {
    SCOPED_TRACE(op);
    const Version v{op, /*nchw=*/false};
    auto train = Forward(true, Vec({}), Vec({}), 1.0f, v);
    ASSERT_TRUE(train.ok()) << train.status();
    ExpectTensorEq<float>((*train)[0], kTrainY, kShape, 1e-5);
    auto dx = Backward(true, kBatchMean, kBatchVar, v);
    ASSERT_TRUE(dx.ok()) << dx.status();
    ExpectTensorEq<float>((*dx)[0], kTrainDx, kShape, 1e-5);
    ExpectTensorEq<float>((*dx)[2], {-0.9067649245262146f, 0.15177470445632935f}, {2}, 1e-5);
  }
  // The channel count comes from dim 1 in NCHW: a scale of the last dim's size is refused.
  OpTest wrong("FusedBatchNorm");
  Version{"FusedBatchNorm", true}.SetAttrs(wrong, true);
  wrong.Input(Tensor::FromVector<float>(kX, TensorShape({2, 3, 2, 2})));
  for (int i = 0; i < 4; ++i) wrong.Input(Vec({1, 1}));
  EXPECT_THAT(InvalidArgumentOf(wrong), HasSubstr("scale must be a vector of 3 values"));
}

}  // namespace
}  // namespace dflow
