// Graphs exported by real TensorFlow (tests/data/golden/*.pbtxt, made by
// tests/data/gen_tf_reference.py) load in dflow and give TensorFlow's values.
#include <cmath>
#include <fstream>

#include "dflow/client/graph_io.h"
#include "dflow/framework/test_data_dir.h"
#include "dflow/runtime/session.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace dflow {
namespace {

using json = nlohmann::json;

const std::string kGoldenDir = TestDataDir() + "/golden/";

DataType DtypeFromTf(const std::string& name) {
  if (name == "float32") return DT_FLOAT;
  if (name == "float64") return DT_DOUBLE;
  auto t = DataTypeFromString(name);
  return t.ok() ? *t : DT_INVALID;
}

Tensor TensorFromJson(const json& j) {
  DataType dtype = DtypeFromTf(j["dtype"]);
  TensorShape shape(j["shape"].get<std::vector<int64_t>>());
  Tensor t(dtype, shape);
  const json& values = j["values"];
  SwitchAll(dtype, "golden", [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto out = t.flat<T>();
    for (size_t i = 0; i < values.size(); ++i) out[i] = values[i].get<T>();
    return absl::OkStatus();
  }).IgnoreError();
  return t;
}

void ExpectMatches(const Tensor& actual, const json& expected, double tol,
                   const std::string& what) {
  Tensor want = TensorFromJson(expected);
  ASSERT_EQ(DataTypeString(actual.dtype()), DataTypeString(want.dtype())) << what;
  ASSERT_EQ(actual.shape(), want.shape()) << what;
  for (int64_t i = 0; i < want.NumElements(); ++i) {
    if (want.dtype() == DT_FLOAT || want.dtype() == DT_DOUBLE) {
      double a = want.dtype() == DT_FLOAT ? actual.flat<float>()[i] : actual.flat<double>()[i];
      double w = want.dtype() == DT_FLOAT ? want.flat<float>()[i] : want.flat<double>()[i];
      ASSERT_NEAR(a, w, tol * (1 + std::abs(w))) << what << " element " << i;
    } else {
      ASSERT_EQ(actual.ValueString(i), want.ValueString(i)) << what << " element " << i;
    }
  }
}

class TfGoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(TfGoldenTest, MatchesTensorFlow) {
  std::ifstream in(kGoldenDir + GetParam() + ".json");
  ASSERT_TRUE(in.good()) << GetParam();
  json spec = json::parse(in);
  auto graph = LoadGraphDef(kGoldenDir + spec["graph"].get<std::string>());
  ASSERT_TRUE(graph.ok()) << graph.status();

  SessionOptions options;
  if (spec["config"].contains("device_count")) {
    for (const auto& [type, n] : spec["config"]["device_count"].items()) {
      (*options.config.mutable_device_count())[type] = n.get<int>();
    }
  }
  auto session = NewDirectSession(options);
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE((*session)->Create(*graph).ok());

  int step = 0;
  for (const json& s : spec["steps"]) {
    std::vector<std::pair<std::string, Tensor>> feeds;
    for (const auto& [name, value] : s["feeds"].items()) {
      feeds.emplace_back(name, TensorFromJson(value));
    }
    std::vector<std::string> fetches = s["fetches"].get<std::vector<std::string>>();
    std::vector<std::string> targets;
    for (const auto& t : s["targets"]) targets.push_back(t.get<std::string>());
    std::vector<Tensor> outputs;
    absl::Status status = (*session)->Run(feeds, fetches, targets, &outputs);
    ASSERT_TRUE(status.ok()) << "step " << step << ": " << status;
    ASSERT_EQ(outputs.size(), fetches.size());
    for (size_t i = 0; i < fetches.size(); ++i) {
      ExpectMatches(outputs[i], s["expected"][i], s["tolerance"].get<double>(),
                    "step " + std::to_string(step) + " fetch " + fetches[i]);
    }
    ++step;
  }
}

INSTANTIATE_TEST_SUITE_P(Graphs, TfGoldenTest,
                         ::testing::Values("mlp_forward", "math_ops", "array_ops", "conv_net",
                                           "variables", "random_ops", "multi_device", "small_ops",
                                           "sparse_embedding", "word2vec_sampled", "wide_deep"));

}  // namespace
}  // namespace dflow
