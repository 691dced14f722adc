// Test helper: runs one kernel on a CPU device without an executor.
//
//   OpTest t("MatMul");
//   t.Attr("T", DT_FLOAT).Attr("transpose_a", true);
//   t.Input(Tensor::FromVector<float>({1, 2, 3, 4}, {2, 2}));
//   t.Input(...);
//   ASSERT_OK_AND_ASSIGN(std::vector<Tensor> out, t.Run());
#ifndef DFLOW_OPS_OP_TEST_UTIL_H_
#define DFLOW_OPS_OP_TEST_UTIL_H_

#include <memory>
#include <string>
#include <vector>

#include "dflow/framework/attr_util.h"
#include "dflow/framework/device.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/framework/status.h"
#include "dflow/framework/tensor.h"
#include "dflow/ops/kernel_test_util.h"
#include "gtest/gtest.h"

namespace dflow {

inline Device* TestCpuDevice() {
  static Device* device = [] {
    DeviceName name = *DeviceName::Parse("/job:localhost/replica:0/task:0/device:CPU:0");
    return new Device(name, /*incarnation=*/1, /*memory_limit=*/0);
  }();
  return device;
}

class OpTest {
 public:
  explicit OpTest(const std::string& op, const std::string& node_name = "op") {
    node_.set_name(node_name);
    node_.set_op(op);
  }
  template <typename T>
  OpTest& Attr(const std::string& name, const T& value) {
    SetAttr(&node_, name, value);
    return *this;
  }
  // Adds a data input fed with `value` (its NodeDef input is "in<i>").
  OpTest& Input(Tensor value) {
    node_.add_input("in" + std::to_string(inputs_.size()));
    inputs_.push_back(std::move(value));
    return *this;
  }
  tensorflow::NodeDef& node_def() { return node_; }

  // The step's resources the kernel sees (for stacks and TensorArrays).
  OpTest& StepResources(ResourceMgr* r) {
    step_resources_ = r;
    return *this;
  }
  // Creates the kernel (validating the node) and runs it once.
  absl::StatusOr<std::vector<Tensor>> Run(Device* device = TestCpuDevice()) {
    ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> kernel, MakeKernel(node_, device));
    return RunKernel(kernel.get(), device, inputs_, step_resources_);
  }

 private:
  tensorflow::NodeDef node_;
  std::vector<Tensor> inputs_;
  ResourceMgr* step_resources_ = nullptr;
};

// Runs a kernel expected to succeed; its outputs (none and a test failure
// otherwise).
inline std::vector<Tensor> OutputsOf(OpTest& t) {
  absl::StatusOr<std::vector<Tensor>> out = t.Run();
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *std::move(out) : std::vector<Tensor>();
}

// Runs a kernel expected to fail with InvalidArgument; returns its message
// ("" and a test failure otherwise).
inline std::string InvalidArgumentOf(OpTest& t) {
  absl::StatusOr<std::vector<Tensor>> out = t.Run();
  if (out.ok()) {
    ADD_FAILURE() << "expected INVALID_ARGUMENT, the kernel succeeded";
    return "";
  }
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  return std::string(out.status().message());
}

// Shape inference for `node` with the given input shapes and (optional)
// constant input values; default attrs are added, missing inputs named.
inline absl::StatusOr<std::vector<PartialShape>> Infer(tensorflow::NodeDef node,
                                                       std::vector<PartialShape> shapes,
                                                       std::vector<const Tensor*> tensors = {}) {
  ASSIGN_OR_RETURN(const OpDef* op, OpRegistry::Global()->LookUp(node.op()));
  AddDefaultAttrs(*op, &node);
  for (size_t i = node.input_size(); i < shapes.size(); ++i) {
    node.add_input("in" + std::to_string(i));
  }
  DataTypeVector in_types, out_types;
  RETURN_IF_ERROR(InOutTypesForNode(node, *op, &in_types, &out_types));
  tensors.resize(shapes.size(), nullptr);
  return InferShapes(node, *op, shapes, tensors, in_types, static_cast<int>(out_types.size()));
}

// Element-wise comparison with a relative+absolute tolerance for floats.
template <typename T>
void ExpectTensorEq(const Tensor& actual, const std::vector<T>& values,
                    const TensorShape& shape, double tol = 1e-6) {
  ASSERT_EQ(actual.dtype(), DataTypeToEnum<T>::value) << actual.DebugString();
  ASSERT_EQ(actual.shape(), shape) << actual.DebugString();
  auto a = actual.flat<T>();
  ASSERT_EQ(a.size(), values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    if constexpr (std::is_floating_point_v<T>) {
      EXPECT_NEAR(a[i], values[i], tol * (1 + std::abs(static_cast<double>(values[i]))))
          << "at " << i;
    } else {
      EXPECT_EQ(a[i], values[i]) << "at " << i;
    }
  }
}

}  // namespace dflow

#endif  // DFLOW_OPS_OP_TEST_UTIL_H_
