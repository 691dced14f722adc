// Test helpers for stateful kernels: build a kernel once, run it many times
// (OpTest builds a fresh kernel for every Run).
//
//   absl::StatusOr<std::unique_ptr<OpKernel>> k = MakeKernel(node, device);
//   absl::StatusOr<std::vector<Tensor>> a = RunKernel(k->get(), device, {shape});
//   absl::StatusOr<std::vector<Tensor>> b = RunKernel(k->get(), device, {shape});
#ifndef DFLOW_OPS_KERNEL_TEST_UTIL_H_
#define DFLOW_OPS_KERNEL_TEST_UTIL_H_

#include <memory>
#include <string>
#include <vector>

#include "dflow/framework/device.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/status.h"
#include "dflow/framework/tensor.h"

namespace dflow {

// A fresh CPU device (with its own, empty ResourceMgr) named as a local task's CPU.
inline std::unique_ptr<Device> NewTestCpuDevice(
    const std::string& name = "/job:localhost/replica:0/task:0/device:CPU:0") {
  return std::make_unique<Device>(*DeviceName::Parse(name), /*incarnation=*/1,
                                  /*memory_limit=*/0);
}

inline absl::StatusOr<std::unique_ptr<OpKernel>> MakeKernel(const tensorflow::NodeDef& node,
                                                           Device* device) {
  return KernelRegistry::Global()->CreateKernel(device, node);
}

// Runs `kernel` once on `device` with `inputs` as its (non-ref) inputs and
// returns its outputs. Thread-safe when the kernel is.
// `step_resources`: what OpKernelContext::step_resources() returns (stacks,
// TensorArrays); null as outside a step.
inline absl::StatusOr<std::vector<Tensor>> RunKernel(OpKernel* kernel, Device* device,
                                                     std::vector<Tensor> inputs,
                                                     ResourceMgr* step_resources = nullptr) {
  OpKernelContext::Params params;
  params.device = device;
  params.step_resources = step_resources;
  params.op_kernel = kernel;
  params.step_id = 1;
  params.runner = [](std::function<void()> fn) { fn(); };
  for (Tensor& t : inputs) params.inputs.push_back(TensorValue{&t, nullptr});
  OpKernelContext ctx(&params);
  RETURN_IF_ERROR(kernel->Compute(&ctx));
  std::vector<Tensor> out;
  for (int i = 0; i < ctx.num_outputs(); ++i) {
    TensorValue v = ctx.release_output(i);
    if (v.tensor == nullptr) {
      return absl::InternalError("output " + std::to_string(i) + " was not set");
    }
    out.push_back(*v.tensor);
  }
  return out;
}

}  // namespace dflow

#endif  // DFLOW_OPS_KERNEL_TEST_UTIL_H_
