// FusedBatchNormV3 and its gradient against TensorFlow 2.21's CPU kernels on
// the same inputs (a [2,2,3,2] NHWC batch, epsilon 0.001).
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

absl::StatusOr<std::vector<Tensor>> Forward(bool training, const Tensor& mean, const Tensor& var,
                                            float avg_factor = 1.0f) {
  OpTest t("FusedBatchNormV3");
  t.Attr("T", DT_FLOAT)
      .Attr("U", DT_FLOAT)
      .Attr("epsilon", 0.001f)
      .Attr("is_training", training)
      .Attr("exponential_avg_factor", avg_factor)
      .Input(Tensor::FromVector<float>(kX, kShape))
      .Input(Vec({1.5f, -0.5f}))
      .Input(Vec({0.1f, 0.2f}))
      .Input(mean)
      .Input(var);
  return t.Run();
}

absl::StatusOr<std::vector<Tensor>> Backward(bool training, const Tensor& mean, const Tensor& var) {
  OpTest t("FusedBatchNormGradV3");
  t.Attr("T", DT_FLOAT)
      .Attr("U", DT_FLOAT)
      .Attr("epsilon", 0.001f)
      .Attr("is_training", training)
      .Input(Tensor::FromVector<float>(kDy, kShape))
      .Input(Tensor::FromVector<float>(kX, kShape))
      .Input(Vec({1.5f, -0.5f}))
      .Input(mean)
      .Input(var)
      .Input(Tensor::Scalar(0.0f));
  return t.Run();
}

TEST(BatchNormOpsTest, TrainingNormalizesWithTheBatchStatistics) {
  auto out = Forward(true, Vec({}), Vec({}));  // What tf.compat.v1.nn.fused_batch_norm feeds.
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<float>((*out)[0],
                        {1.6989694833755493f, 0.10204008221626282f, 0.6410883665084839f,
                         -0.9200521111488342f, 1.8383997678756714f, 0.8668784499168396f,
                         0.6024950742721558f, 0.4082754850387573f, -0.8163938522338867f,
                         0.09624242037534714f, -0.4833116829395294f, -0.48327142000198364f,
                         0.3478286564350128f, 0.25667086243629456f, -0.07943064719438553f,
                         0.13895554840564728f, 1.3352938890457153f, 0.43814921379089355f,
                         -0.2556226849555969f, 0.7984799742698669f, -4.116430759429932f,
                         -0.03869757056236267f, 0.48711466789245605f, 0.7363290190696716f},
                        kShape, 1e-5);
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
                                    -2.089369297027588f, 1.5501518249511719f, 0.1839490830898285f};
  for (size_t i = 0; i < first.size(); ++i) EXPECT_NEAR((*out)[0].flat<float>()[i], first[i], 1e-5);
  ExpectTensorEq<float>((*out)[1], {0.5f, -1.0f}, {2});
}

TEST(BatchNormOpsTest, GradientInTrainingAndInference) {
  auto train = Backward(true, Vec({0.5770629644393921f, 0.22373637557029724f}),
                        Vec({1.2389262914657593f, 0.8098545074462891f}));
  ASSERT_TRUE(train.ok()) << train.status();
  ExpectTensorEq<float>((*train)[0],
                        {2.4602715969085693f, 0.7611465454101562f, -0.07312960177659988f,
                         -0.49996429681777954f, 1.4065489768981934f, -0.44511380791664124f,
                         0.09082929790019989f, -0.08935446292161942f, -0.693486213684082f,
                         1.0502915382385254f, -0.11185487359762192f, -0.45247673988342285f,
                         1.6507409811019897f, -0.629703164100647f, -0.34152376651763916f,
                         0.14158415794372559f, -1.8507567644119263f, 0.9254025220870972f,
                         -2.041215658187866f, -0.7497338652610779f, 1.2586448192596436f,
                         0.12007355690002441f, -1.7550688982009888f, -0.13215215504169464f},
                        kShape, 1e-5);
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
  rank2.Attr("T", DT_FLOAT).Attr("U", DT_FLOAT).Input(Tensor::FromVector<float>({1, 2}, TensorShape({1, 2})));
  for (int i = 0; i < 4; ++i) rank2.Input(Vec({1, 1}));
  EXPECT_THAT(rank2.Run().status().message(), HasSubstr("input must be 4-dimensional"));

  OpTest nchw("FusedBatchNormV3");
  nchw.Attr("T", DT_FLOAT).Attr("U", DT_FLOAT).Attr("data_format", std::string("NCHW"));
  nchw.Input(Tensor::FromVector<float>(kX, kShape));
  for (int i = 0; i < 4; ++i) nchw.Input(Vec({1, 1}));
  EXPECT_EQ(nchw.Run().status().code(), absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace dflow
