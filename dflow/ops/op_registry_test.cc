// Every op dflow claims is registered, has a CPU kernel, and matches
// TensorFlow's OpDef (tests/data/tf_op_defs.json, written by real TensorFlow
// with tests/data/gen_tf_reference.py): same inputs, outputs, attrs, defaults.
#include <fstream>
#include <set>

#include "dflow/framework/kernel.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/test_data_dir.h"
#include "dflow/ops/op_def_test_util.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace dflow {
namespace {

using json = nlohmann::json;

json LoadTfOpDefs() {
  std::ifstream in(TestDataDir() + "/tf_op_defs.json");
  EXPECT_TRUE(in.good()) << "missing tests/data/tf_op_defs.json";
  return json::parse(in);
}

TEST(OpRegistryTest, EveryClaimedOpHasACpuKernel) {
  json tf_defs = LoadTfOpDefs();
  std::set<std::string> with_kernel;
  for (const KernelDef& k : KernelRegistry::Global()->ListKernels()) {
    if (k.device_type == kDeviceCPU) with_kernel.insert(k.op);
  }
  for (const auto& [name, def] : tf_defs.items()) {
    EXPECT_TRUE(OpRegistry::Global()->LookUp(name).ok()) << name << " is not registered";
    // Functional ops (If, PartitionedCall, ...) are lowered before placement.
    if (def.value("lowered", false)) continue;
    EXPECT_TRUE(with_kernel.count(name)) << name << " has no CPU kernel";
  }
  for (const char* internal : {"_Arg", "_Retval", "_Send", "_Recv"}) {
    EXPECT_TRUE(with_kernel.count(internal)) << internal << " has no CPU kernel";
  }
}

TEST(OpRegistryTest, KernelDtypesAreWithinTheirOpDefs) {
  const std::vector<KernelDef> kernels = KernelRegistry::Global()->ListKernels();
  EXPECT_GT(kernels.size(), 100u);
  for (const std::string& p : op_def_test::KernelTypeMismatches(kernels)) ADD_FAILURE() << p;
}

TEST(OpRegistryTest, KernelDtypeCheckNamesAMismatch) {
  KernelDef bad{.op = "Relu", .device_type = kDeviceCPU, .type_constraints = {{"T", {DT_STRING}}}};
  KernelDef no_attr{.op = "Relu", .device_type = kDeviceCPU, .type_constraints = {{"U", {DT_FLOAT}}}};
  KernelDef fine{.op = "Relu", .device_type = kDeviceCPU, .type_constraints = {{"T", {DT_FLOAT}}}};
  EXPECT_EQ(op_def_test::KernelTypeMismatches({bad, no_attr, fine}),
            (std::vector<std::string>{
                "Relu has a CPU kernel for T=string, which its OpDef does not allow",
                "Relu kernel constrains 'U', not a type attr"}));
}

TEST(OpRegistryTest, OpDefsMatchTensorFlow) {
  json tf_defs = LoadTfOpDefs();
  for (const auto& [name, tf] : tf_defs.items()) {
    SCOPED_TRACE(name);
    auto ours_or = OpRegistry::Global()->LookUp(name);
    if (!ours_or.ok()) continue;  // Reported by the test above.
    const OpDef& ours = **ours_or;
    op_def_test::ExpectMatchesTensorFlow(ours, tf);
  }
}

}  // namespace
}  // namespace dflow
