// Shared pieces of the kernel benchmarks: one CPU device and a runner that
// creates a kernel once and runs it many times on fixed inputs (no executor).
//
//   KernelRunner runner(node, {Filled({n, n}, 0.5f), Filled({n, n}, 0.25f)});
//   if (!runner.error().empty()) state.SkipWithError(runner.error().c_str());
//   for (auto _ : state) runner.Run();
#ifndef DFLOW_BENCH_BENCH_UTIL_H_
#define DFLOW_BENCH_BENCH_UTIL_H_

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dflow/framework/device.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/tensor.h"

namespace dflow {

inline Device* BenchDevice() {
  static Device* device =
      new Device(*DeviceName::Parse("/job:localhost/replica:0/task:0/device:CPU:0"), 1, 0);
  return device;
}

// One kernel, created once, run many times on fixed inputs.
class KernelRunner {
 public:
  KernelRunner(tensorflow::NodeDef node, std::vector<Tensor> inputs) : inputs_(std::move(inputs)) {
    for (size_t i = 0; i < inputs_.size(); ++i) node.add_input("in" + std::to_string(i));
    auto kernel = KernelRegistry::Global()->CreateKernel(BenchDevice(), node);
    if (!kernel.ok()) {
      error_ = std::string(kernel.status().message());
      return;
    }
    kernel_ = *std::move(kernel);
  }

  const std::string& error() const { return error_; }

  // Runs once; returns false (and records the error) on failure.
  bool Run() {
    OpKernelContext::Params params;
    params.device = BenchDevice();
    params.op_kernel = kernel_.get();
    params.runner = [](std::function<void()> fn) { fn(); };
    for (Tensor& t : inputs_) params.inputs.push_back(TensorValue{&t, nullptr});
    OpKernelContext ctx(&params);
    absl::Status s = kernel_->Compute(&ctx);
    if (!s.ok()) error_ = std::string(s.message());
    return s.ok();
  }

 private:
  std::vector<Tensor> inputs_;
  std::unique_ptr<OpKernel> kernel_;
  std::string error_;
};

// A float tensor of `shape` with every element `value`.
inline Tensor Filled(const TensorShape& shape, float value) {
  Tensor t(DT_FLOAT, shape);
  for (float& v : t.flat<float>()) v = value;
  return t;
}

}  // namespace dflow

#endif  // DFLOW_BENCH_BENCH_UTIL_H_
