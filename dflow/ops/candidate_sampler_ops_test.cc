// UniformCandidateSampler, LogUniformCandidateSampler and
// ComputeAccidentalHits. The samplers' random stream is dflow's, not
// TensorFlow's: their tests check the distribution, uniqueness, the
// expected-count formulas (with TensorFlow 2.21's values where they do not
// depend on the draw) and that seeds make a kernel deterministic.
#include <cmath>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "dflow/ops/op_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

using ::testing::HasSubstr;

struct SamplerAttrs {
  int64_t num_true = 2;
  int64_t num_sampled = 3;
  bool unique = false;
  int64_t range_max = 10;
  int64_t seed = 1;
  int64_t seed2 = 2;
};

absl::StatusOr<std::unique_ptr<OpKernel>> Sampler(const std::string& op, const SamplerAttrs& a) {
  tensorflow::NodeDef n;
  n.set_name("sampler");
  n.set_op(op);
  n.add_input("true_classes");
  SetAttr(&n, "num_true", a.num_true);
  SetAttr(&n, "num_sampled", a.num_sampled);
  SetAttr(&n, "unique", a.unique);
  SetAttr(&n, "range_max", a.range_max);
  SetAttr(&n, "seed", a.seed);
  SetAttr(&n, "seed2", a.seed2);
  return MakeKernel(n, TestCpuDevice());
}

absl::StatusOr<std::vector<Tensor>> Sample(OpKernel* k, const Tensor& true_classes) {
  return RunKernel(k, TestCpuDevice(), {true_classes});
}

Tensor Classes(const std::vector<int64_t>& v, int64_t columns) {
  return Tensor::FromVector<int64_t>(v, {static_cast<int64_t>(v.size()) / columns, columns});
}

double LogUniformP(int64_t k, int64_t range) {
  return (std::log(k + 2.0) - std::log(k + 1.0)) / std::log(range + 1.0);
}

std::vector<int64_t> Values(const Tensor& t) {
  auto f = t.flat<int64_t>();
  return {f.begin(), f.end()};
}

TEST(CandidateSamplerTest, LogUniformFollowsItsDistribution) {
  SamplerAttrs a;
  a.num_true = 1;
  a.num_sampled = 200000;
  auto k = Sampler("LogUniformCandidateSampler", a);
  ASSERT_TRUE(k.ok()) << k.status();
  auto out = Sample(k->get(), Classes({4}, 1));
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<int64_t> counts(a.range_max);
  for (int64_t v : Values((*out)[0])) {
    ASSERT_GE(v, 0);
    ASSERT_LT(v, a.range_max);
    ++counts[v];
  }
  for (int64_t c = 0; c < a.range_max; ++c) {
    const double p = LogUniformP(c, a.range_max), n = static_cast<double>(a.num_sampled);
    EXPECT_NEAR(counts[c], p * n, 5 * std::sqrt(n * p * (1 - p))) << "class " << c;
  }
  // Not unique: every expected count is p * num_sampled.
  EXPECT_NEAR((*out)[1].flat<float>()[0], LogUniformP(4, 10) * 200000, 1e-1);
  for (int i = 0; i < 100; ++i) {
    const int64_t c = (*out)[0].flat<int64_t>()[i];
    EXPECT_NEAR((*out)[2].flat<float>()[i], LogUniformP(c, 10) * 200000, 1e-1);
  }
}

TEST(CandidateSamplerTest, UniformFollowsItsDistribution) {
  SamplerAttrs a;
  a.num_true = 1;
  a.num_sampled = 100000;
  a.range_max = 7;
  auto k = Sampler("UniformCandidateSampler", a);
  ASSERT_TRUE(k.ok()) << k.status();
  auto out = Sample(k->get(), Classes({6}, 1));
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<int64_t> counts(a.range_max);
  for (int64_t v : Values((*out)[0])) ++counts[v];
  for (int64_t c = 0; c < a.range_max; ++c) {
    const double p = 1.0 / 7, n = 100000;
    EXPECT_NEAR(counts[c], p * n, 5 * std::sqrt(n * p * (1 - p))) << "class " << c;
  }
  EXPECT_NEAR((*out)[1].flat<float>()[0], 100000.0 / 7, 1e-2);
}

TEST(CandidateSamplerTest, ExpectedCountsOfTrueClassesAreTensorFlows) {
  // TensorFlow 2.21: true_classes [[0, 9]], range_max 10, 3 samples.
  auto k = Sampler("LogUniformCandidateSampler", SamplerAttrs{});
  ASSERT_TRUE(k.ok()) << k.status();
  auto out = Sample(k->get(), Classes({0, 9}, 2));
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<float>((*out)[1], {0.867194474f, 0.119242296f}, {1, 2});
  EXPECT_EQ((*out)[0].shape(), TensorShape({3}));
  EXPECT_EQ((*out)[2].shape(), TensorShape({3}));
}

// With unique=True the counts are 1 - (1 - p)^num_tries (p * num_sampled
// when no draw was repeated): one num_tries must explain every count.
void ExpectUniqueCounts(const std::vector<Tensor>& out, const std::vector<int64_t>& classes,
                        int64_t num_sampled, double (*p)(int64_t)) {
  std::vector<int64_t> sampled = Values(out[0]);
  EXPECT_EQ(std::set<int64_t>(sampled.begin(), sampled.end()).size(), sampled.size());
  size_t rarest = 0;  // The least saturated count tells num_tries best.
  for (size_t i = 1; i < sampled.size(); ++i) {
    if (out[2].flat<float>()[i] < out[2].flat<float>()[rarest]) rarest = i;
  }
  const double c0 = out[2].flat<float>()[rarest], p0 = p(sampled[rarest]);
  int64_t tries = num_sampled;
  if (std::abs(c0 - p0 * num_sampled) > 1e-5) {
    tries = std::llround(std::log1p(-c0) / std::log1p(-p0));
    EXPECT_GT(tries, num_sampled);
  }
  auto expected = [&](int64_t k) {
    return tries == num_sampled ? p(k) * num_sampled : -std::expm1(tries * std::log1p(-p(k)));
  };
  for (size_t i = 0; i < sampled.size(); ++i) {
    EXPECT_NEAR(out[2].flat<float>()[i], expected(sampled[i]), 1e-4) << i;
    EXPECT_LE(out[2].flat<float>()[i], 1.0f);
  }
  for (size_t i = 0; i < classes.size(); ++i) {
    EXPECT_NEAR(out[1].flat<float>()[i], expected(classes[i]), 1e-4) << i;
  }
}

TEST(CandidateSamplerTest, UniqueSamplesAreDistinctWithTensorFlowsCounts) {
  SamplerAttrs a;
  a.unique = true;
  a.num_sampled = 8;
  auto log_uniform = Sampler("LogUniformCandidateSampler", a);
  ASSERT_TRUE(log_uniform.ok()) << log_uniform.status();
  for (int run = 0; run < 20; ++run) {
    auto out = Sample(log_uniform->get(), Classes({0, 9, 3, 3}, 2));
    ASSERT_TRUE(out.ok()) << out.status();
    ExpectUniqueCounts(*out, {0, 9, 3, 3}, 8, [](int64_t k) { return LogUniformP(k, 10); });
  }
  // num_sampled == range_max: a permutation.
  a.num_sampled = 10;
  auto uniform = Sampler("UniformCandidateSampler", a);
  ASSERT_TRUE(uniform.ok()) << uniform.status();
  auto out = Sample(uniform->get(), Classes({1, 2}, 2));
  ASSERT_TRUE(out.ok()) << out.status();
  std::vector<int64_t> sampled = Values((*out)[0]);
  EXPECT_EQ(std::set<int64_t>(sampled.begin(), sampled.end()).size(), 10u);
  ExpectUniqueCounts(*out, {1, 2}, 10, [](int64_t) { return 0.1; });
}

TEST(CandidateSamplerTest, SeedsMakeItDeterministic) {
  SamplerAttrs a;
  a.num_sampled = 20;
  a.range_max = 1000000;
  auto k1 = Sampler("LogUniformCandidateSampler", a);
  auto k2 = Sampler("LogUniformCandidateSampler", a);
  a.seed2 = 3;
  auto k3 = Sampler("LogUniformCandidateSampler", a);
  ASSERT_TRUE(k1.ok() && k2.ok() && k3.ok());
  const Tensor classes = Classes({5, 6}, 2);
  auto first = Sample(k1->get(), classes);
  auto same = Sample(k2->get(), classes);
  auto other_seed = Sample(k3->get(), classes);
  auto second = Sample(k1->get(), classes);
  ASSERT_TRUE(first.ok() && same.ok() && other_seed.ok() && second.ok());
  EXPECT_EQ(Values((*first)[0]), Values((*same)[0]));
  EXPECT_NE(Values((*first)[0]), Values((*other_seed)[0]));
  EXPECT_NE(Values((*first)[0]), Values((*second)[0]));  // The stream moves on.
}

TEST(CandidateSamplerTest, BadInputs) {
  SamplerAttrs a;
  a.unique = true;
  a.num_sampled = 5;
  a.range_max = 4;
  auto k = Sampler("LogUniformCandidateSampler", a);
  ASSERT_TRUE(k.ok());
  EXPECT_THAT(Sample(k->get(), Classes({1, 2}, 2)).status().message(),
              HasSubstr("Sampler's range is too small."));
  auto ok = Sampler("UniformCandidateSampler", SamplerAttrs{});
  ASSERT_TRUE(ok.ok());
  EXPECT_THAT(Sample(ok->get(), Classes({1, 2, 3}, 3)).status().message(),
              HasSubstr("true_classes must have num_true columns, expected: 2 was: 3"));
  EXPECT_THAT(Sample(ok->get(), Tensor::Vec<int64_t>({1, 2})).status().message(),
              HasSubstr("true_classes must be a matrix"));
  EXPECT_THAT(Sample(ok->get(), Classes({-1, 2}, 2)).status().message(),
              HasSubstr("`true_candidate` out of range [0, 10), received -1"));
  EXPECT_THAT(Sample(ok->get(), Classes({1, 10}, 2)).status().message(), HasSubstr("received 10"));
  // 2^40 samples: refused before allocating.
  SamplerAttrs huge;
  huge.num_sampled = int64_t{1} << 40;
  auto big = Sampler("UniformCandidateSampler", huge);
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(Sample(big->get(), Classes({1, 2}, 2)).status().code(),
            absl::StatusCode::kResourceExhausted);
}

absl::StatusOr<std::vector<Tensor>> AccidentalHits(const Tensor& true_classes,
                                                   const Tensor& sampled, int64_t num_true) {
  OpTest t("ComputeAccidentalHits");
  t.Attr("num_true", num_true).Input(true_classes).Input(sampled);
  return t.Run();
}

TEST(CandidateSamplerTest, ComputeAccidentalHits) {
  // TensorFlow's values: a true class hits its last position in sampled.
  constexpr float kLowest = std::numeric_limits<float>::lowest();
  auto out = AccidentalHits(Classes({1, 2, 3, 1}, 2), Tensor::Vec<int64_t>({1, 5, 3, 1}), 2);
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<int32_t>((*out)[0], {0, 1, 1}, {3});
  ExpectTensorEq<int64_t>((*out)[1], {3, 2, 3}, {3});
  ExpectTensorEq<float>((*out)[2], {kLowest, kLowest, kLowest}, {3});
  out = AccidentalHits(Classes({1, 1}, 2), Tensor::Vec<int64_t>({1}), 2);
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<int32_t>((*out)[0], {0, 0}, {2});
  ExpectTensorEq<int64_t>((*out)[1], {0, 0}, {2});

  EXPECT_THAT(
      AccidentalHits(Classes({1, 2, 3, 1}, 2), Tensor::Vec<int64_t>({1}), 3).status().message(),
      HasSubstr("true_candidates must be a batch_size * num_true matrix"));
  EXPECT_THAT(AccidentalHits(Classes({1, 2, 3, 1}, 2), Classes({1, 5}, 2), 2).status().message(),
              HasSubstr("sampled_candidates must be a vector"));
}

TEST(CandidateSamplerTest, ShapeFunctions) {
  tensorflow::NodeDef n;
  n.set_name("n");
  n.set_op("LogUniformCandidateSampler");
  SetAttr(&n, "num_true", int64_t{2});
  SetAttr(&n, "num_sampled", int64_t{7});
  SetAttr(&n, "unique", true);
  SetAttr(&n, "range_max", int64_t{100});
  auto shapes = Infer(n, {PartialShape({5, -1})});
  ASSERT_TRUE(shapes.ok()) << shapes.status();
  EXPECT_EQ(*shapes, (std::vector<PartialShape>{PartialShape({7}), PartialShape({5, 2}),
                                                PartialShape({7})}));
  EXPECT_FALSE(Infer(n, {PartialShape({5, 3})}).ok());
  EXPECT_FALSE(Infer(n, {PartialShape({5})}).ok());
}

}  // namespace
}  // namespace dflow
