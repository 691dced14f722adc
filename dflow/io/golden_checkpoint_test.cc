// Checkpoints written by real TensorFlow 2.21 (tests/data/checkpoints, made by
// tests/data/gen_checkpoint_reference.py) read back with TensorFlow's values,
// and dflow computes exactly TensorFlow's keys for partitioned variables.
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/escaping.h"
#include "dflow/framework/test_data_dir.h"
#include "dflow/io/tensor_bundle.h"
#include "dflow/io/test_util.h"
#include "nlohmann/json.hpp"

namespace dflow::io {
namespace {

using nlohmann::json;

const std::string kDir = TestDataDir() + "/checkpoints";

json Expected() {
  std::ifstream in(kDir + "/expected.json");
  return json::parse(in, nullptr, /*allow_exceptions=*/false);
}

// Compares a tensor with expected.json's dtype name, shape and values.
void ExpectValues(const Tensor& t, const json& want, const std::string& what) {
  SCOPED_TRACE(what);
  std::vector<int64_t> dims;
  for (int d = 0; d < t.dims(); ++d) dims.push_back(t.dim_size(d));
  EXPECT_EQ(json(dims), want["shape"]);
  const std::string dtype = want["dtype"];
  const json& v = want["values"];
  ASSERT_EQ(v.size(), size_t(t.NumElements()));
  for (int64_t i = 0; i < t.NumElements(); ++i) {
    if (dtype == "float32") {
      EXPECT_EQ(t.flat<float>()[i], v[i].get<float>()) << i;
    } else if (dtype == "float64") {
      EXPECT_EQ(t.flat<double>()[i], v[i].get<double>()) << i;
    } else if (dtype == "int32") {
      EXPECT_EQ(t.flat<int32_t>()[i], v[i].get<int32_t>()) << i;
    } else if (dtype == "int64") {
      EXPECT_EQ(t.flat<int64_t>()[i], v[i].get<int64_t>()) << i;
    } else if (dtype == "uint8") {
      EXPECT_EQ(t.flat<uint8_t>()[i], v[i].get<int>()) << i;
    } else if (dtype == "bool") {
      EXPECT_EQ(t.flat<bool>()[i], v[i].get<bool>()) << i;
    } else if (dtype == "string") {
      EXPECT_EQ(absl::BytesToHexString(t.flat<std::string>()[i]), v[i].get<std::string>()) << i;
    } else {
      ADD_FAILURE() << "dtype " << dtype;
    }
  }
}

TEST(GoldenCheckpointTest, TensorFlowsCheckpointsRestoreWithItsValues) {
  const json expected = Expected();
  ASSERT_TRUE(expected.is_object()) << "unreadable " << kDir << "/expected.json";
  for (const char* name : {"basic", "partitioned", "sharded"}) {
    const json& ckpt = expected[name];
    absl::StatusOr<std::unique_ptr<BundleReader>> r =
        BundleReader::Open(kDir + "/" + ckpt["prefix"].get<std::string>());
    ASSERT_TRUE(r.ok()) << r.status();
    std::vector<std::string> names;
    for (const auto& [key, entry] : (*r)->Tensors()) names.push_back(key);
    std::vector<std::string> want_names;
    for (const json& t : ckpt["tensors"]) want_names.push_back(t["name"]);
    EXPECT_EQ(names, want_names) << name;
    for (const json& t : ckpt["tensors"]) {
      absl::StatusOr<Tensor> value = (*r)->Read(t["name"]);
      ASSERT_TRUE(value.ok()) << value.status();
      ExpectValues(*value, t, absl::StrCat(name, "/", t["name"].get<std::string>()));
    }
  }
}

TEST(GoldenCheckpointTest, SlicesOfPartitionedVariablesMatchTensorFlow) {
  const json expected = Expected();
  const json& ckpt = expected["partitioned"];
  auto r = BundleReader::Open(kDir + "/" + ckpt["prefix"].get<std::string>());
  ASSERT_TRUE(r.ok()) << r.status();
  for (const json& c : ckpt["slice_restores"]) {
    const std::string spec = c["shape_and_slice"];
    absl::StatusOr<std::optional<ShapeAndSlice>> s = ParseShapeAndSlice(spec);
    ASSERT_TRUE(s.ok() && s->has_value()) << spec;
    absl::StatusOr<Tensor> value = (*r)->ReadSlice(c["name"], (**s).slice);
    ASSERT_TRUE(value.ok()) << value.status();
    ExpectValues(*value, c, spec);
  }
  // Every slice key TensorFlow wrote is the one dflow computes from the
  // slices listed in the full tensor's entry.
  std::set<std::string> tf_keys, ours;
  for (const json& e : ckpt["raw_index"]) {
    const std::string key = absl::HexStringToBytes(e["key_hex"].get<std::string>());
    if (!key.empty() && key[0] == '\0') tf_keys.insert(key);
  }
  for (const auto& [name, entry] : (*r)->Tensors()) {
    for (const auto& proto : entry.slices()) {
      ours.insert(EncodeTensorNameSlice(name, *TensorSlice::FromProto(proto)));
    }
  }
  EXPECT_EQ(ours, tf_keys);
  EXPECT_EQ(tf_keys.size(), 5u);  // emb in 3 row slices, cols in 2 column slices.
}

// dflow's writer, given TensorFlow's tensors in TensorFlow's order, writes
// TensorFlow's data file byte for byte, and entries with TensorFlow's
// offsets, sizes and checksums.
TEST(GoldenCheckpointTest, DflowWritesTensorFlowsBytes) {
  const json expected = Expected();
  const json& ckpt = expected["basic"];
  const std::string tf_prefix = kDir + "/" + ckpt["prefix"].get<std::string>();
  auto tf_reader = BundleReader::Open(tf_prefix);
  ASSERT_TRUE(tf_reader.ok());
  TempDir dir;
  const std::string prefix = dir.path() + "/model";
  auto w = BundleWriter::Create(prefix);
  ASSERT_TRUE(w.ok());
  for (const auto& [key, entry] : (*tf_reader)->Tensors()) {
    ASSERT_TRUE((*w)->Add(key, *(*tf_reader)->Read(key)).ok()) << key;
  }
  ASSERT_TRUE((*w)->Finish().ok());
  EXPECT_EQ(ReadFileOrDie(prefix + ".data-00000-of-00001"),
            ReadFileOrDie(tf_prefix + ".data-00000-of-00001"));
  auto mine = BundleReader::Open(prefix);
  ASSERT_TRUE(mine.ok());
  auto theirs = (*tf_reader)->Tensors();
  for (const auto& [key, entry] : (*mine)->Tensors()) {
    EXPECT_EQ(entry.SerializeAsString(), theirs[key].SerializeAsString()) << key;
  }
}

}  // namespace
}  // namespace dflow::io
