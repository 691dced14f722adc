// The parsing and decoding ops against TensorFlow: every case of
// tests/data/parsing_golden.json (written by tests/data/gen_parsing_reference.py
// with TensorFlow 2.21) runs through dflow's kernel, which must return
// TensorFlow's outputs exactly (floats to 1e-6), or fail with INVALID_ARGUMENT
// holding each of the case's error fragments. (A case may compare only a
// prefix of its values: a truncated JPEG's rows past the cut.)
#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "dflow/framework/test_data_dir.h"
#include "dflow/ops/op_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace dflow {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

const json& Cases() {
  static const json* cases = [] {
    std::ifstream in(TestDataDir() + "/parsing_golden.json");
    EXPECT_TRUE(in.good()) << "missing tests/data/parsing_golden.json";
    return new json(in.good() ? json::parse(in)["cases"] : json::array());
  }();
  return *cases;
}

// TensorFlow's Python dtype names ("float32") as dflow's.
DataType DtypeOf(const json& name) {
  std::string n = name.get<std::string>();
  if (n == "float32") n = "float";
  if (n == "float64") n = "double";
  absl::StatusOr<DataType> t = DataTypeFromString(n);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *t : DT_INVALID;
}

double JsonFloat(const json& v) {
  if (v.is_number()) return v.get<double>();
  const std::string s = v.get<std::string>();
  if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
  return s == "inf" ? std::numeric_limits<double>::infinity()
                    : -std::numeric_limits<double>::infinity();
}

Tensor TensorFromJson(const json& j) {
  DataType dtype = DtypeOf(j["dtype"]);
  std::vector<int64_t> dims = j["shape"].get<std::vector<int64_t>>();
  Tensor t(dtype, TensorShape(dims));
  const json& v = j["values"];
  for (size_t i = 0; i < v.size(); ++i) {
    switch (dtype) {
      case DT_STRING:
        t.flat<std::string>()[i] = absl::HexStringToBytes(v[i].get<std::string>());
        break;
      case DT_FLOAT:
        t.flat<float>()[i] = static_cast<float>(JsonFloat(v[i]));
        break;
      case DT_DOUBLE:
        t.flat<double>()[i] = JsonFloat(v[i]);
        break;
      case DT_INT32:
        t.flat<int32_t>()[i] = v[i].get<int32_t>();
        break;
      case DT_INT64:
        t.flat<int64_t>()[i] = v[i].get<int64_t>();
        break;
      case DT_UINT8:
        t.flat<uint8_t>()[i] = v[i].get<uint8_t>();
        break;
      default:
        ADD_FAILURE() << "golden dtype " << DataTypeString(dtype);
    }
  }
  return t;
}

void SetJsonAttr(OpTest* op, const std::string& name, const json& kind_value) {
  const std::string kind = kind_value[0].get<std::string>();
  const json& v = kind_value[1];
  if (kind == "bool") {
    op->Attr(name, v.get<bool>());
  } else if (kind == "int") {
    op->Attr(name, v.get<int64_t>());
  } else if (kind == "float") {
    op->Attr(name, v.get<float>());
  } else if (kind == "string") {
    op->Attr(name, v.get<std::string>());
  } else if (kind == "type") {
    op->Attr(name, DtypeOf(v));
  } else if (kind == "list(type)") {
    std::vector<DataType> types;
    for (const auto& t : v) types.push_back(DtypeOf(t));
    op->Attr(name, types);
  } else if (kind == "list(int)") {
    op->Attr(name, v.get<std::vector<int64_t>>());
  } else if (kind == "list(string)") {
    op->Attr(name, v.get<std::vector<std::string>>());
  } else if (kind == "list(shape)") {
    auto* list = (*op->node_def().mutable_attr())[name].mutable_list();
    for (const auto& dims : v) {
      auto* shape = list->add_shape();
      for (int64_t d : dims.get<std::vector<int64_t>>()) shape->add_dim()->set_size(d);
    }
  } else {
    ADD_FAILURE() << "golden attr kind " << kind;
  }
}

// Equal dtype and shape, and equal values (the first `prefix` of them when >= 0).
void ExpectSameTensor(const Tensor& actual, const Tensor& expected, int64_t prefix = -1) {
  ASSERT_EQ(actual.dtype(), expected.dtype()) << actual.DebugString();
  ASSERT_EQ(actual.shape(), expected.shape()) << actual.DebugString();
  const int64_t n = prefix >= 0 ? std::min(prefix, expected.NumElements()) : expected.NumElements();
  for (int64_t i = 0; i < n; ++i) {
    switch (expected.dtype()) {
      case DT_FLOAT:
      case DT_DOUBLE: {
        const double a =
            expected.dtype() == DT_FLOAT ? actual.flat<float>()[i] : actual.flat<double>()[i];
        const double e =
            expected.dtype() == DT_FLOAT ? expected.flat<float>()[i] : expected.flat<double>()[i];
        if (std::isnan(e)) {
          EXPECT_TRUE(std::isnan(a)) << "at " << i;
        } else if (std::isinf(e)) {
          EXPECT_EQ(a, e) << "at " << i;
        } else {
          EXPECT_NEAR(a, e, 1e-6 * (1 + std::abs(e))) << "at " << i;
        }
        break;
      }
      default:
        EXPECT_EQ(actual.ValueString(i), expected.ValueString(i)) << "at " << i;
    }
  }
}

void RunCase(const json& c) {
  OpTest op(c["op"].get<std::string>());
  for (const auto& [name, kind_value] : c["attrs"].items()) SetJsonAttr(&op, name, kind_value);
  for (const auto& name : c["empty_lists"]) {
    (*op.node_def().mutable_attr())[name.get<std::string>()].mutable_list();
  }
  for (const json& in : c["inputs"]) op.Input(TensorFromJson(in));
  absl::StatusOr<std::vector<Tensor>> out = op.Run();
  if (c.contains("error")) {
    ASSERT_FALSE(out.ok()) << "expected an error";
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
    for (const auto& fragment : c["error"]) {
      EXPECT_THAT(std::string(out.status().message()), HasSubstr(fragment.get<std::string>()));
    }
    return;
  }
  ASSERT_TRUE(out.ok()) << out.status();
  const json& expected = c["outputs"];
  ASSERT_EQ(out->size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    SCOPED_TRACE(absl::StrCat("output ", i));
    ExpectSameTensor((*out)[i], TensorFromJson(expected[i]), c.value("compare_prefix", -1));
  }
}

// Runs every golden case of `op`; returns how many there were.
int RunGoldenCases(const std::string& op_name) {
  int n = 0;
  for (const json& c : Cases()) {
    if (c["op"] != op_name) continue;
    ++n;
    SCOPED_TRACE(c["name"].get<std::string>());
    RunCase(c);
  }
  return n;
}

TEST(ParsingGoldenTest, ParseExampleV2) { EXPECT_GT(RunGoldenCases("ParseExampleV2"), 15); }
TEST(ParsingGoldenTest, ParseExample) { EXPECT_GT(RunGoldenCases("ParseExample"), 2); }
TEST(ParsingGoldenTest, ParseSingleExample) { EXPECT_GT(RunGoldenCases("ParseSingleExample"), 1); }
TEST(ParsingGoldenTest, DecodeCSV) { EXPECT_GT(RunGoldenCases("DecodeCSV"), 10); }
TEST(ParsingGoldenTest, StringToNumber) { EXPECT_GT(RunGoldenCases("StringToNumber"), 5); }
TEST(ParsingGoldenTest, StringSplit) { EXPECT_GT(RunGoldenCases("StringSplit"), 3); }
TEST(ParsingGoldenTest, StringSplitV2) { EXPECT_GT(RunGoldenCases("StringSplitV2"), 3); }
TEST(ParsingGoldenTest, SerializeTensor) { EXPECT_GT(RunGoldenCases("SerializeTensor"), 3); }
TEST(ParsingGoldenTest, ParseTensor) { EXPECT_GT(RunGoldenCases("ParseTensor"), 5); }
TEST(ParsingGoldenTest, DecodePng) { EXPECT_GT(RunGoldenCases("DecodePng"), 15); }
TEST(ParsingGoldenTest, DecodeJpeg) { EXPECT_GT(RunGoldenCases("DecodeJpeg"), 8); }

}  // namespace
}  // namespace dflow
