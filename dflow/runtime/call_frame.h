// FunctionCallFrame: the arguments and return values of one executor run,
// read by _Arg kernels and written by _Retval kernels. Thread-safe.
//
//   FunctionCallFrame frame({x_tensor}, /*num_retvals=*/2);
//   ... run the executors with args.call_frame = &frame ...
//   ASSIGN_OR_RETURN(std::vector<Tensor> out, frame.ConsumeRetvals());
#ifndef DFLOW_RUNTIME_CALL_FRAME_H_
#define DFLOW_RUNTIME_CALL_FRAME_H_

#include <vector>

#include "absl/synchronization/mutex.h"
#include "dflow/framework/kernel.h"

namespace dflow {

class FunctionCallFrame : public CallFrameInterface {
 public:
  FunctionCallFrame(std::vector<Tensor> args, int num_retvals);

  int num_args() const override { return static_cast<int>(args_.size()); }
  int num_retvals() const override { return num_retvals_; }
  absl::StatusOr<Tensor> GetArg(int index) const override;
  absl::Status SetRetval(int index, const Tensor& value) override;

  // The return values in order; FailedPrecondition naming the first index
  // that was never set (e.g. its producer's input was dead).
  absl::StatusOr<std::vector<Tensor>> ConsumeRetvals();
  // The first return value index not set yet, or -1 when all are.
  int FirstUnsetRetval();

 private:
  const std::vector<Tensor> args_;
  const int num_retvals_;
  absl::Mutex mu_;
  std::vector<Tensor> retvals_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> retval_set_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dflow

#endif  // DFLOW_RUNTIME_CALL_FRAME_H_
