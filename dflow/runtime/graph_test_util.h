// Test helpers for graph transformations (graph, placer, subgraph, partition
// tests): a small GraphDef builder and fake devices. The test-only ops named
// here ("RtTest*") are registered in graph_test.cc, which is linked into the
// same test binary.
#ifndef DFLOW_RUNTIME_GRAPH_TEST_UTIL_H_
#define DFLOW_RUNTIME_GRAPH_TEST_UTIL_H_

#include <memory>
#include <string>
#include <vector>

#include "dflow/framework/attr_util.h"
#include "dflow/framework/device.h"
#include "dflow/framework/device_name.h"
#include "dflow/proto/graph.pb.h"
#include "dflow/runtime/graph.h"
#include "gtest/gtest.h"

namespace dflow {
namespace testing_util {

// Test ops (see graph_test.cc):
//   RtTestAdd(a: T, b: T) -> T                 CPU kernel
//   RtTestGpuAble(x: float) -> float            CPU and GPU kernels
//   RtTestVarHandle() -> resource               CPU kernel, stateful
//   RtTestReadVar(r: resource) -> dtype         CPU kernel
//   RtTestRefVar() -> Ref(dtype)                CPU kernel, stateful
//   RtTestAssign(ref: Ref(T), value: T) -> Ref(T)  CPU kernel
//   RtTestNoKernel(x: float) -> float           no kernel at all

class GraphBuilder {
 public:
  tensorflow::NodeDef* Node(const std::string& name, const std::string& op,
                            std::vector<std::string> inputs = {},
                            const std::string& device = "") {
    tensorflow::NodeDef* n = def_.add_node();
    n->set_name(name);
    n->set_op(op);
    for (std::string& in : inputs) n->add_input(std::move(in));
    n->set_device(device);
    return n;
  }
  // A float (or `dtype`) scalar constant.
  tensorflow::NodeDef* Const(const std::string& name, const std::string& device = "",
                             DataType dtype = DT_FLOAT) {
    tensorflow::NodeDef* n = Node(name, "Const", {}, device);
    SetAttr(n, "dtype", dtype);
    tensorflow::TensorProto value;
    value.set_dtype(dtype);
    if (dtype == DT_FLOAT) value.add_float_val(1.0f);
    if (dtype == DT_INT32) value.add_int_val(1);
    *(*n->mutable_attr())["value"].mutable_tensor() = value;
    return n;
  }
  tensorflow::NodeDef* Add(const std::string& name, const std::string& a, const std::string& b,
                           const std::string& device = "") {
    tensorflow::NodeDef* n = Node(name, "RtTestAdd", {a, b}, device);
    SetAttr(n, "T", DT_FLOAT);
    return n;
  }
  tensorflow::NodeDef* Identity(const std::string& name, const std::string& in,
                                const std::string& device = "") {
    tensorflow::NodeDef* n = Node(name, "Identity", {in}, device);
    SetAttr(n, "T", DT_FLOAT);
    return n;
  }
  tensorflow::NodeDef* NoOp(const std::string& name, std::vector<std::string> controls,
                            const std::string& device = "") {
    return Node(name, "NoOp", std::move(controls), device);
  }
  tensorflow::GraphDef& def() { return def_; }
  std::unique_ptr<Graph> Build() {
    absl::StatusOr<std::unique_ptr<Graph>> g = Graph::FromGraphDef(def_);
    EXPECT_TRUE(g.ok()) << g.status();
    return g.ok() ? std::move(g).value() : nullptr;
  }

 private:
  tensorflow::GraphDef def_;
};

inline std::unique_ptr<Device> MakeDevice(const std::string& name, uint64_t incarnation = 7) {
  return std::make_unique<Device>(*DeviceName::Parse(name), incarnation, 0);
}

inline std::vector<Device*> Raw(const std::vector<std::unique_ptr<Device>>& devices) {
  std::vector<Device*> out;
  for (const auto& d : devices) out.push_back(d.get());
  return out;
}

inline std::string LocalCpu(int i) {
  return "/job:localhost/replica:0/task:0/device:CPU:" + std::to_string(i);
}

}  // namespace testing_util
}  // namespace dflow

#endif  // DFLOW_RUNTIME_GRAPH_TEST_UTIL_H_
