// Every tf.data op dflow claims is registered with a CPU kernel and matches
// TensorFlow's OpDef (tests/data/tf_data_op_defs.json, written by
// tests/data/gen_tf_reference.py).
#include <fstream>
#include <set>

#include "dflow/framework/kernel.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/test_data_dir.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace dflow::data {
namespace {

using json = nlohmann::json;

std::string ArgText(const OpArg& a) {
  std::string t = a.name + ":";
  if (a.type != DT_INVALID) t += DataTypeString(a.type);
  return t + a.type_attr + "|" + a.number_attr + "|" + a.type_list_attr;
}

std::string ArgText(const json& a) {
  std::string t = a["name"].get<std::string>() + ":";
  if (a.contains("type")) t += a["type"].get<std::string>();
  return t + a.value("type_attr", "") + "|" + a.value("number_attr", "") + "|" +
         a.value("type_list_attr", "");
}

TEST(DataOpRegistryTest, OpDefsMatchTensorFlowAndHaveCpuKernels) {
  std::ifstream in(TestDataDir() + "/tf_data_op_defs.json");
  ASSERT_TRUE(in.good()) << "missing tests/data/tf_data_op_defs.json";
  const json tf_defs = json::parse(in);
  ASSERT_GE(tf_defs.size(), 15u);
  std::set<std::string> with_kernel;
  for (const KernelDef& k : KernelRegistry::Global()->ListKernels()) {
    if (k.device_type == kDeviceCPU) with_kernel.insert(k.op);
  }
  for (const auto& [name, tf] : tf_defs.items()) {
    SCOPED_TRACE(name);
    auto ours_or = OpRegistry::Global()->LookUp(name);
    ASSERT_TRUE(ours_or.ok()) << name << " is not registered";
    EXPECT_TRUE(with_kernel.count(name)) << name << " has no CPU kernel";
    const OpDef& ours = **ours_or;
    EXPECT_EQ(ours.is_stateful, tf["is_stateful"].get<bool>());
    ASSERT_EQ(ours.inputs.size(), tf["inputs"].size());
    for (size_t i = 0; i < ours.inputs.size(); ++i) {
      EXPECT_EQ(ArgText(ours.inputs[i]), ArgText(tf["inputs"][i]));
    }
    ASSERT_EQ(ours.outputs.size(), tf["outputs"].size());
    for (size_t i = 0; i < ours.outputs.size(); ++i) {
      EXPECT_EQ(ArgText(ours.outputs[i]), ArgText(tf["outputs"][i]));
    }
    ASSERT_EQ(ours.attrs.size(), tf["attrs"].size());
    for (const json& tf_attr : tf["attrs"]) {
      const std::string attr_name = tf_attr["name"];
      SCOPED_TRACE(attr_name);
      const OpAttr* attr = ours.FindAttr(attr_name);
      ASSERT_NE(attr, nullptr) << "attr missing";
      EXPECT_EQ(attr->type, tf_attr["type"].get<std::string>());
      EXPECT_EQ(attr->default_value.has_value(), tf_attr.contains("default"));
      if (attr->default_value && tf_attr.contains("default")) {
        tensorflow::AttrValue tf_default;
        ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
            tf_attr["default"].get<std::string>(), &tf_default));
        EXPECT_EQ(attr->default_value->SerializeAsString(), tf_default.SerializeAsString());
      }
      if (tf_attr.contains("minimum")) {
        ASSERT_TRUE(attr->minimum.has_value());
        EXPECT_EQ(*attr->minimum, tf_attr["minimum"].get<int64_t>());
      }
    }
  }
}

}  // namespace
}  // namespace dflow::data
