// Test-only: checks one of dflow's OpDefs against TensorFlow's, as
// tests/data/gen_tf_reference.py writes them into JSON (inputs, outputs,
// statefulness, attrs with types, defaults, allowed types and minimums).
// Shared by the op registry tests of every layer that registers ops.
#ifndef DFLOW_OPS_OP_DEF_TEST_UTIL_H_
#define DFLOW_OPS_OP_DEF_TEST_UTIL_H_

#include <set>
#include <string>
#include <vector>

#include "dflow/framework/kernel.h"
#include "dflow/framework/op_def.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace dflow::op_def_test {

// TensorFlow's dtype names in the JSON are numpy-style ("float32").
inline std::string TfTypeName(const std::string& n) {
  if (n == "float32") return "float";
  if (n == "float64") return "double";
  if (n == "float16") return "half";
  return n;
}

inline std::string ArgText(const OpArg& a) {
  std::string t = a.name + ":";
  if (a.type != DT_INVALID) t += DataTypeString(a.type);
  t += a.type_attr + "|" + a.number_attr + "|" + a.type_list_attr;
  return t + (a.is_ref ? "|ref" : "");
}

inline std::string ArgText(const nlohmann::json& a) {
  std::string t = a["name"].get<std::string>() + ":";
  if (a.contains("type")) t += TfTypeName(a["type"].get<std::string>());
  t += a.value("type_attr", "") + "|" + a.value("number_attr", "") + "|" +
       a.value("type_list_attr", "");
  return t + (a.value("is_ref", false) ? "|ref" : "");
}

// Non-fatal failures name what differs; call under SCOPED_TRACE(op name).
inline void ExpectMatchesTensorFlow(const OpDef& ours, const nlohmann::json& tf) {
  using json = nlohmann::json;
  EXPECT_EQ(ours.is_stateful, tf["is_stateful"].get<bool>());
  ASSERT_EQ(ours.inputs.size(), tf["inputs"].size());
  for (size_t i = 0; i < ours.inputs.size(); ++i) {
    EXPECT_EQ(ArgText(ours.inputs[i]), ArgText(tf["inputs"][i]));
  }
  ASSERT_EQ(ours.outputs.size(), tf["outputs"].size());
  for (size_t i = 0; i < ours.outputs.size(); ++i) {
    EXPECT_EQ(ArgText(ours.outputs[i]), ArgText(tf["outputs"][i]));
  }
  for (const json& tf_attr : tf["attrs"]) {
    std::string attr_name = tf_attr["name"];
    SCOPED_TRACE(attr_name);
    const OpAttr* attr = ours.FindAttr(attr_name);
    ASSERT_NE(attr, nullptr) << "attr missing";
    EXPECT_EQ(attr->type, tf_attr["type"].get<std::string>());
    EXPECT_EQ(attr->default_value.has_value(), tf_attr.contains("default"));
    if (attr->default_value && tf_attr.contains("default")) {
      tensorflow::AttrValue tf_default;
      ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
          tf_attr["default"].get<std::string>(), &tf_default));
      if (tf_default.has_f()) {
        EXPECT_FLOAT_EQ(attr->default_value->f(), tf_default.f());
      } else {
        EXPECT_EQ(attr->default_value->SerializeAsString(), tf_default.SerializeAsString())
            << "ours: " << attr->default_value->ShortDebugString()
            << " tf: " << tf_default.ShortDebugString();
      }
    }
    if (tf_attr.contains("allowed_types") && !attr->allowed_types.empty()) {
      std::set<std::string> tf_types;
      for (const auto& t : tf_attr["allowed_types"]) tf_types.insert(TfTypeName(t));
      for (DataType t : attr->allowed_types) {
        EXPECT_TRUE(tf_types.count(DataTypeString(t)))
            << DataTypeString(t) << " is not allowed by TensorFlow";
      }
    }
    if (tf_attr.contains("minimum") && attr->minimum) {
      EXPECT_EQ(*attr->minimum, tf_attr["minimum"].get<int64_t>());
    }
  }
  for (const OpAttr& attr : ours.attrs) {
    bool known = false;
    for (const json& tf_attr : tf["attrs"]) known |= tf_attr["name"] == attr.name;
    EXPECT_TRUE(known) << "attr " << attr.name << " is not TensorFlow's";
  }
}

// The kernels among `kernels` whose type constraints name something other
// than an attr of type "type" or "list(type)" of their op, or a dtype that
// attr does not allow: a kernel for a dtype the OpDef refuses can never be
// chosen, and a dtype list written twice (attr string, kernel registration)
// has drifted. One line per problem, naming the op, attr and dtype.
inline std::vector<std::string> KernelTypeMismatches(const std::vector<KernelDef>& kernels) {
  std::vector<std::string> problems;
  for (const KernelDef& k : kernels) {
    auto op = OpRegistry::Global()->LookUp(k.op);
    if (!op.ok()) {
      problems.push_back("kernel for unregistered op " + k.op);
      continue;
    }
    for (const auto& [attr_name, types] : k.type_constraints) {
      const OpAttr* attr = (*op)->FindAttr(attr_name);
      if (attr == nullptr || (attr->type != "type" && attr->type != "list(type)")) {
        problems.push_back(k.op + " kernel constrains '" + attr_name + "', not a type attr");
        continue;
      }
      if (attr->allowed_types.empty()) continue;  // Any type.
      const std::set<DataType> allowed(attr->allowed_types.begin(), attr->allowed_types.end());
      for (DataType t : types) {
        if (allowed.count(t) == 0) {
          problems.push_back(k.op + " has a " + k.device_type + " kernel for " + attr_name + "=" +
                             DataTypeString(t) + ", which its OpDef does not allow");
        }
      }
    }
  }
  return problems;
}

}  // namespace dflow::op_def_test

#endif  // DFLOW_OPS_OP_DEF_TEST_UTIL_H_
