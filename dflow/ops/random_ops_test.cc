// Random ops: values equal TensorFlow's for the same seeds (reference values
// printed by TensorFlow 2.21's CPU kernels in graph mode, run twice), and the
// distributions have the right moments.
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "dflow/framework/attr_util.h"
#include "dflow/ops/kernel_test_util.h"
#include "dflow/ops/op_test_util.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

tensorflow::NodeDef RandomNode(const std::string& op, DataType dtype, int64_t seed,
                               int64_t seed2, DataType shape_type = DT_INT32) {
  tensorflow::NodeDef node;
  node.set_name("rnd");
  node.set_op(op);
  node.add_input("shape");
  SetAttr(&node, "dtype", dtype);
  SetAttr(&node, "T", shape_type);
  SetAttr(&node, "seed", seed);
  SetAttr(&node, "seed2", seed2);
  return node;
}

Tensor ShapeTensor(const std::vector<int64_t>& dims, DataType type = DT_INT32) {
  if (type == DT_INT64) return Tensor::Vec<int64_t>(dims);
  return Tensor::Vec<int32_t>(std::vector<int32_t>(dims.begin(), dims.end()));
}

// Builds the kernel once and runs it `runs` times on `shape`.
template <typename T>
std::vector<std::vector<T>> RunTimes(const tensorflow::NodeDef& node,
                                     const std::vector<int64_t>& shape, int runs) {
  std::vector<std::vector<T>> results;
  absl::StatusOr<std::unique_ptr<OpKernel>> kernel = MakeKernel(node, TestCpuDevice());
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  if (!kernel.ok()) return results;
  const DataType shape_type = node.attr().at("T").type();
  for (int r = 0; r < runs; ++r) {
    absl::StatusOr<std::vector<Tensor>> out =
        RunKernel(kernel->get(), TestCpuDevice(), {ShapeTensor(shape, shape_type)});
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) return results;
    EXPECT_EQ((*out)[0].shape(), TensorShape(absl::Span<const int64_t>(shape)));
    auto v = (*out)[0].flat<T>();
    results.emplace_back(v.begin(), v.end());
  }
  return results;
}

struct FloatCase {
  const char* op;
  int64_t seed, seed2;
  std::vector<int64_t> shape;
  std::vector<float> first, second;
};

// Exact (bitwise) equality with TensorFlow, first and second run of one kernel.
TEST(RandomOpsTest, FloatValuesEqualTensorFlow) {
  const std::vector<FloatCase> cases = {
    {"RandomUniform", 1LL, 2LL, {7},
     {0x1.a026780000000p-2f, 0x1.b7174c0000000p-1f, 0x1.c5cd800000000p-5f, 0x1.5fbba00000000p-4f, 0x1.a60b980000000p-2f, 0x1.2c14800000000p-5f, 0x1.507e440000000p-1f},
     {0x1.bafee00000000p-2f, 0x1.bce9600000000p-1f, 0x1.110c100000000p-2f, 0x1.3474940000000p-1f, 0x1.c44ab00000000p-1f, 0x1.fae5e00000000p-3f, 0x1.4f13e80000000p-2f}},
    {"RandomUniform", 87654321LL, 0LL, {2, 3},
     {0x1.9d22200000000p-4f, 0x1.f0b9b40000000p-1f, 0x1.b291380000000p-1f, 0x1.8b85400000000p-5f, 0x1.8d80400000000p-5f, 0x1.8e11280000000p-1f},
     {0x1.7d1b400000000p-4f, 0x1.3491800000000p-3f, 0x1.ec0b800000000p-6f, 0x1.3f22140000000p-1f, 0x1.b29a800000000p-4f, 0x1.5ee6580000000p-1f}},
    {"RandomUniform", -3LL, 1099511627776LL, {5},
     {0x1.b0bf400000000p-4f, 0x1.d90a540000000p-1f, 0x1.add8e80000000p-2f, 0x1.e292580000000p-2f, 0x1.9b14000000000p-3f},
     {0x1.b31e6c0000000p-1f, 0x1.cb53d80000000p-1f, 0x1.f8fc600000000p-2f, 0x1.26cb6c0000000p-1f, 0x1.ab0d880000000p-1f}},
    {"RandomStandardNormal", 1LL, 2LL, {7},
     {-0x1.0bf9ba0000000p+0f, 0x1.adedc20000000p-1f, 0x1.3c5fc60000000p+0f, 0x1.082a1e0000000p+1f, 0x1.3708540000000p-2f, 0x1.4bdbf60000000p+0f, 0x1.ebb7b00000000p-2f},
     {-0x1.e618160000000p-1f, 0x1.c293c00000000p-1f, -0x1.f3a28c0000000p-1f, -0x1.4cef640000000p+0f, 0x1.fde1300000000p-2f, 0x1.fed4880000000p-8f, 0x1.9309800000000p-2f}},
    {"RandomStandardNormal", 87654321LL, 0LL, {2, 3},
     {-0x1.98bcc60000000p-2f, 0x1.0d5e440000000p+1f, 0x1.5e5b200000000p-3f, 0x1.17d13a0000000p-1f, -0x1.3632100000000p+1f, 0x1.b0b1fe0000000p-2f},
     {0x1.c4b9a40000000p+0f, 0x1.4607700000000p+0f, -0x1.da2e7e0000000p+0f, -0x1.e461240000000p+0f, -0x1.f220fa0000000p+0f, -0x1.ac831c0000000p-1f}},
    {"RandomStandardNormal", -3LL, 1099511627776LL, {5},
     {-0x1.f374b20000000p-1f, 0x1.e1e8620000000p+0f, 0x1.e49ddc0000000p-3f, -0x1.4bd2a40000000p+0f, -0x1.cab6d20000000p+0f},
     {-0x1.5fd4cc0000000p-2f, 0x1.d24c040000000p-2f, -0x1.1703a80000000p-1f, -0x1.0e8d1e0000000p+0f, -0x1.1389c40000000p-3f}},
    {"TruncatedNormal", 1LL, 2LL, {7},
     {-0x1.0bf9ba0000000p+0f, 0x1.adedc20000000p-1f, 0x1.3c5fc60000000p+0f, 0x1.3708540000000p-2f, 0x1.8e04fe0000000p-2f, 0x1.3c98ae0000000p+0f, 0x1.ec55ce0000000p-3f},
     {-0x1.e618160000000p-1f, 0x1.c293c00000000p-1f, -0x1.f3a28c0000000p-1f, -0x1.4cef640000000p+0f, -0x1.37241c0000000p-2f, -0x1.2805380000000p-2f, 0x1.0524a60000000p-3f}},
    {"TruncatedNormal", 87654321LL, 0LL, {2, 3},
     {-0x1.98bcc60000000p-2f, 0x1.5e5b200000000p-3f, 0x1.17d13a0000000p-1f, 0x1.b0b1fe0000000p-2f, -0x1.31cad40000000p+0f, -0x1.10b8d20000000p-2f},
     {0x1.c4b9a40000000p+0f, 0x1.4607700000000p+0f, -0x1.da2e7e0000000p+0f, -0x1.e461240000000p+0f, -0x1.b986000000000p-1f, 0x1.afa8d80000000p+0f}},
    {"TruncatedNormal", -3LL, 1099511627776LL, {5},
     {-0x1.f374b20000000p-1f, 0x1.e1e8620000000p+0f, 0x1.e49ddc0000000p-3f, -0x1.4bd2a40000000p+0f, 0x1.6126fa0000000p-2f},
     {-0x1.5fd4cc0000000p-2f, 0x1.d24c040000000p-2f, -0x1.1703a80000000p-1f, -0x1.0e8d1e0000000p+0f, 0x1.5997a20000000p-2f}},
  };
  for (const FloatCase& c : cases) {
    SCOPED_TRACE(absl::StrCat(c.op, " seed=", c.seed, " seed2=", c.seed2));
    // A 2-D shape is given as int64 to cover both shape types.
    const DataType shape_type = c.shape.size() == 2 ? DT_INT64 : DT_INT32;
    auto runs = RunTimes<float>(RandomNode(c.op, DT_FLOAT, c.seed, c.seed2, shape_type),
                                c.shape, 2);
    ASSERT_EQ(runs.size(), 2u);
    EXPECT_EQ(runs[0], c.first);
    EXPECT_EQ(runs[1], c.second);
  }
}

struct DoubleCase {
  const char* op;
  std::vector<double> first, second;
};

TEST(RandomOpsTest, DoubleValuesEqualTensorFlow) {
  const std::vector<DoubleCase> cases = {
    {"RandomUniform", {0x1.0133e33b7174cp-2, 0x1.c5cd8282bf774p-2, 0x1.305cf6c12c148p-2, 0x1.07e44382cf3ccp-2, 0x1.e7caab50acf66p-1, 0x1.a888cfd3cefa6p-1, 0x1.17ea4cc7dfe9ep-1},
     {0x1.d7f712fbce960p-2, 0x1.10c104a68e928p-3, 0x1.12ac961fae5e0p-4, 0x1.3c4faac7524b6p-1, 0x1.160ee64884550p-3, 0x1.fa4b603c80e6cp-2, 0x1.b1518314a7ac0p-1}},
    {"RandomStandardNormal", {0x1.298089076cdd3p-1, -0x1.8eb3aca515204p+0, 0x1.8e4f44037f289p+0, -0x1.34d61b9fd07a9p-4, -0x1.1816ab358dc28p-2, 0x1.30293969a8e6ep-3, -0x1.683254bbe0fe9p-1},
     {0x1.d92a295b479f4p-1, 0x1.aadcae2bf6cc7p-1, -0x1.9158a5b7d87a2p+0, -0x1.b76edab6c345dp+0, 0x1.1e81053164831p-4, -0x1.ff46798cba2e0p+0, -0x1.eaa51fede7685p-2}},
    {"TruncatedNormal", {0x1.298089076cdd3p-1, -0x1.8eb3aca515204p+0, -0x1.212c734d3894dp+0, -0x1.0803aba843b6cp-1, -0x1.20bf7ca0d8c29p+0, -0x1.1e326f34231dap-1, 0x1.013f256794a06p+0},
     {0x1.d92a295b479f4p-1, 0x1.aadcae2bf6cc7p-1, -0x1.4d8137f7f3b26p-2, 0x1.0cdf5a0b62df8p+0, -0x1.0c5e935f69d18p-1, -0x1.425ed15e9de81p-1, -0x1.cef6606d32da4p-1}},
  };
  for (const DoubleCase& c : cases) {
    SCOPED_TRACE(c.op);
    auto runs = RunTimes<double>(RandomNode(c.op, DT_DOUBLE, 1, 2), {7}, 2);
    ASSERT_EQ(runs.size(), 2u);
    EXPECT_EQ(runs[0], c.first);
    EXPECT_EQ(runs[1], c.second);
  }
}

// Large outputs are split across threads; values must not depend on that.
TEST(RandomOpsTest, LargeOutputsEqualTensorFlow) {
  const std::vector<int> index = {0, 1, 4999, 50001, 100002};
  const std::vector<float> trunc = {0x1.7e9bb20000000p-3f, -0x1.19b8fc0000000p+0f, -0x1.b6b8880000000p-1f, 0x1.bedef40000000p-4f, -0x1.a41e4e0000000p-3f};
  const std::vector<double> unif = {0x1.29bce2cf24c10p-2, 0x1.6c16c25847582p-1, 0x1.6b1e579b56904p-2, 0x1.8b3ec802f9bdcp-1, 0x1.1d8fc75ff67d8p-1};
  auto t = RunTimes<float>(RandomNode("TruncatedNormal", DT_FLOAT, 7, 9), {100003}, 1);
  auto u = RunTimes<double>(RandomNode("RandomUniform", DT_DOUBLE, 7, 9), {100003}, 1);
  ASSERT_EQ(t.size(), 1u);
  ASSERT_EQ(u.size(), 1u);
  for (size_t i = 0; i < index.size(); ++i) {
    EXPECT_EQ(t[0][index[i]], trunc[i]) << "at " << index[i];
    EXPECT_EQ(u[0][index[i]], unif[i]) << "at " << index[i];
  }
}

// Mean and standard deviation of 100k samples.
template <typename T>
void Moments(const std::vector<T>& v, double* mean, double* stddev) {
  double sum = 0, sq = 0;
  for (T x : v) sum += x;
  *mean = sum / v.size();
  for (T x : v) sq += (x - *mean) * (x - *mean);
  *stddev = std::sqrt(sq / v.size());
}

TEST(RandomOpsTest, UniformStatistics) {
  auto v = RunTimes<float>(RandomNode("RandomUniform", DT_FLOAT, 0, 0), {100000}, 1);
  ASSERT_EQ(v.size(), 1u);
  double mean, stddev;
  Moments(v[0], &mean, &stddev);
  EXPECT_NEAR(mean, 0.5, 0.01);
  EXPECT_NEAR(stddev, std::sqrt(1.0 / 12), 0.01);
  for (float x : v[0]) ASSERT_TRUE(x >= 0.0f && x < 1.0f) << x;
}

TEST(RandomOpsTest, NormalStatistics) {
  auto v = RunTimes<double>(RandomNode("RandomStandardNormal", DT_DOUBLE, 0, 0), {100000}, 1);
  ASSERT_EQ(v.size(), 1u);
  double mean, stddev;
  Moments(v[0], &mean, &stddev);
  EXPECT_NEAR(mean, 0.0, 0.02);
  EXPECT_NEAR(stddev, 1.0, 0.02);
}

template <typename T>
void CheckTruncatedNormal() {
  auto v = RunTimes<T>(RandomNode("TruncatedNormal", DataTypeToEnum<T>::value, 0, 0),
                       {100000}, 1);
  ASSERT_EQ(v.size(), 1u);
  double mean, stddev;
  Moments(v[0], &mean, &stddev);
  EXPECT_NEAR(mean, 0.0, 0.02);
  // The standard deviation of a standard normal truncated to (-2, 2).
  EXPECT_NEAR(stddev, 0.8796, 0.02);
  for (T x : v[0]) ASSERT_LT(std::abs(x), T{2}) << x;
}

TEST(RandomOpsTest, TruncatedNormalStaysWithinTwoStddev) {
  CheckTruncatedNormal<float>();
  CheckTruncatedNormal<double>();
}

// seed == seed2 == 0: each kernel instance draws its own seeds.
TEST(RandomOpsTest, ZeroSeedsDifferPerKernel) {
  auto a = RunTimes<float>(RandomNode("RandomUniform", DT_FLOAT, 0, 0), {8}, 1);
  auto b = RunTimes<float>(RandomNode("RandomUniform", DT_FLOAT, 0, 0), {8}, 1);
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_NE(a[0], b[0]);
}

// A fixed seed gives the same sequence in every kernel instance, and each
// run of one kernel continues the sequence.
TEST(RandomOpsTest, FixedSeedIsDeterministicAndAdvances) {
  auto a = RunTimes<double>(RandomNode("RandomStandardNormal", DT_DOUBLE, 5, 0), {3}, 2);
  auto b = RunTimes<double>(RandomNode("RandomStandardNormal", DT_DOUBLE, 5, 0), {3}, 2);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a, b);
  EXPECT_NE(a[0], a[1]);
}

TEST(RandomOpsTest, EmptyAndScalarShapes) {
  auto empty = RunTimes<float>(RandomNode("RandomUniform", DT_FLOAT, 1, 2), {0, 3}, 1);
  ASSERT_EQ(empty.size(), 1u);
  EXPECT_TRUE(empty[0].empty());
  auto scalar = RunTimes<float>(RandomNode("TruncatedNormal", DT_FLOAT, 1, 2), {}, 1);
  ASSERT_EQ(scalar.size(), 1u);
  EXPECT_EQ(scalar[0], std::vector<float>{-0x1.0bf9bap+0f});
}

TEST(RandomOpsTest, ShapeErrors) {
  OpTest matrix("RandomUniform");
  matrix.Attr("dtype", DT_FLOAT).Attr("T", DT_INT32);
  matrix.Input(Tensor::FromVector<int32_t>({1, 2, 3, 4}, TensorShape({2, 2})));
  absl::Status s = matrix.Run().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("[RandomUniform 'op'] shape must be a vector"), std::string::npos)
      << s;
  EXPECT_NE(s.message().find("[2,2]"), std::string::npos) << s;

  OpTest negative("RandomStandardNormal");
  negative.Attr("dtype", DT_FLOAT).Attr("T", DT_INT64);
  negative.Input(Tensor::Vec<int64_t>({3, -1}));
  s = negative.Run().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("-1"), std::string::npos) << s;
}

TEST(RandomOpsTest, UnsupportedDtypeHasNoKernel) {
  OpTest t("RandomUniform");
  t.Attr("dtype", DT_INT32).Attr("T", DT_INT32);
  t.Input(Tensor::Vec<int32_t>({2}));
  EXPECT_FALSE(t.Run().ok());
}

}  // namespace
}  // namespace dflow
