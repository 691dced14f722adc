// Every tf.data op dflow claims is registered with a CPU kernel and matches
// TensorFlow's OpDef (tests/data/tf_data_op_defs.json, written by
// tests/data/gen_tf_reference.py).
#include <fstream>
#include <set>

#include "dflow/framework/kernel.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/test_data_dir.h"
#include "dflow/ops/op_def_test_util.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace dflow::data {
namespace {

using json = nlohmann::json;

// tf.data's kernels and the ops layer's (linked here too).
TEST(DataOpRegistryTest, KernelDtypesAreWithinTheirOpDefs) {
  const std::vector<KernelDef> kernels = KernelRegistry::Global()->ListKernels();
  EXPECT_GT(kernels.size(), 100u);
  for (const std::string& p : op_def_test::KernelTypeMismatches(kernels)) ADD_FAILURE() << p;
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
    op_def_test::ExpectMatchesTensorFlow(ours, tf);
    // Stricter for the data ops: as many attrs as TensorFlow's, and a minimum
    // wherever TensorFlow sets one.
    ASSERT_EQ(ours.attrs.size(), tf["attrs"].size());
    for (const json& tf_attr : tf["attrs"]) {
      const OpAttr* attr = ours.FindAttr(tf_attr["name"].get<std::string>());
      if (attr != nullptr && tf_attr.contains("minimum")) {
        EXPECT_TRUE(attr->minimum.has_value()) << tf_attr["name"];
      }
    }
  }
}

}  // namespace
}  // namespace dflow::data
