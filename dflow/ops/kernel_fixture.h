// A gtest fixture for stateful and asynchronous kernels (queues, readers,
// accumulators) on a fresh CPU device: kernels are built once from NodeDefs
// and run many times; a run may finish later, and is waited for with a bound.
//
//   class QueueTest : public KernelTest {};
//   TEST_F(QueueTest, ...) {
//     OpKernel* dequeue = Kernel(Node("QueueDequeueV2", "dequeue", 1));
//     std::unique_ptr<KernelRun> run = Start(dequeue, {In(queue)});
//     ASSERT_TRUE(run->Wait().ok());
//   }
#ifndef DFLOW_OPS_KERNEL_FIXTURE_H_
#define DFLOW_OPS_KERNEL_FIXTURE_H_

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "dflow/ops/kernel_test_util.h"
#include "gtest/gtest.h"

namespace dflow {

// One kernel run, which may finish later (async kernels).
struct KernelRun {
  OpKernelContext::Params params;
  std::unique_ptr<OpKernelContext> ctx;
  absl::Notification notified;
  absl::Status status;

  bool finished() const { return notified.HasBeenNotified(); }
  // The run's status, waiting for it at most 5 s.
  absl::Status Wait() {
    if (!notified.WaitForNotificationWithTimeout(absl::Seconds(5))) {
      return absl::DeadlineExceededError("test: the kernel did not finish within 5 s");
    }
    return status;
  }
  Tensor output(int i) { return *ctx->release_output(i).tensor; }
};

class KernelTest : public ::testing::Test {
 protected:
  // A node of `op` named `name` with inputs "in0", "in1", ...
  static tensorflow::NodeDef Node(const std::string& op, const std::string& name, int num_inputs) {
    tensorflow::NodeDef n;
    n.set_op(op);
    n.set_name(name);
    for (int i = 0; i < num_inputs; ++i) n.add_input(absl::StrCat("in", i));
    return n;
  }
  // The kernel of `n` on the fixture's device (kept by the fixture); null
  // after a test failure when it cannot be built.
  OpKernel* Kernel(const tensorflow::NodeDef& n) {
    absl::StatusOr<std::unique_ptr<OpKernel>> k = MakeKernel(n, device_.get());
    EXPECT_TRUE(k.ok()) << k.status();
    if (!k.ok()) return nullptr;
    kernels_.push_back(*std::move(k));
    return kernels_.back().get();
  }
  // A plain input (kept alive by the fixture).
  TensorValue In(Tensor t) {
    values_.push_back(std::move(t));
    return TensorValue{&values_.back(), nullptr};
  }
  // Starts `kernel`; async kernels may still be waiting when this returns.
  std::unique_ptr<KernelRun> Start(OpKernel* kernel, std::vector<TensorValue> inputs,
                                   CancellationManager* cm = nullptr,
                                   absl::Time deadline = absl::InfiniteFuture()) {
    auto run = std::make_unique<KernelRun>();
    run->params.device = device_.get();
    run->params.op_kernel = kernel;
    run->params.step_id = 1;
    run->params.runner = [](std::function<void()> fn) { fn(); };
    run->params.inputs = std::move(inputs);
    run->params.cancellation_manager = cm;
    run->params.deadline = deadline;
    run->ctx = std::make_unique<OpKernelContext>(&run->params);
    KernelRun* r = run.get();
    auto done = [r](absl::Status s) {
      r->status = std::move(s);
      r->notified.Notify();
    };
    if (AsyncOpKernel* async = kernel->AsAsync()) {
      async->ComputeAsync(r->ctx.get(), done);
    } else {
      done(kernel->Compute(r->ctx.get()));
    }
    return run;
  }

  std::unique_ptr<Device> device_ = NewTestCpuDevice();

 private:
  std::vector<std::unique_ptr<OpKernel>> kernels_;
  std::deque<Tensor> values_;  // Inputs; a deque keeps their addresses.
};

}  // namespace dflow

#endif  // DFLOW_OPS_KERNEL_FIXTURE_H_
