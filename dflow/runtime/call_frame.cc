#include "dflow/runtime/call_frame.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace dflow {

FunctionCallFrame::FunctionCallFrame(std::vector<Tensor> args, int num_retvals)
    : args_(std::move(args)),
      num_retvals_(num_retvals),
      retvals_(num_retvals),
      retval_set_(num_retvals, false) {}

absl::StatusOr<Tensor> FunctionCallFrame::GetArg(int index) const {
  if (index < 0 || index >= num_args()) {
    return absl::OutOfRangeError(
        absl::StrCat("[CallFrame] argument ", index, " out of range [0, ", num_args(), ")"));
  }
  return args_[index];
}

absl::Status FunctionCallFrame::SetRetval(int index, const Tensor& value) {
  if (index < 0 || index >= num_retvals_) {
    return absl::OutOfRangeError(
        absl::StrCat("[CallFrame] return value ", index, " out of range [0, ", num_retvals_, ")"));
  }
  absl::MutexLock l(&mu_);
  if (retval_set_[index]) {
    return absl::AlreadyExistsError(
        absl::StrCat("[CallFrame] return value ", index, " was set twice"));
  }
  retvals_[index] = value;
  retval_set_[index] = true;
  return absl::OkStatus();
}

int FunctionCallFrame::FirstUnsetRetval() {
  absl::MutexLock l(&mu_);
  for (int i = 0; i < num_retvals_; ++i) {
    if (!retval_set_[i]) return i;
  }
  return -1;
}

absl::StatusOr<std::vector<Tensor>> FunctionCallFrame::ConsumeRetvals() {
  absl::MutexLock l(&mu_);
  for (int i = 0; i < num_retvals_; ++i) {
    if (!retval_set_[i]) {
      return absl::FailedPreconditionError(
          absl::StrCat("[CallFrame] return value ", i, " was not computed"));
    }
  }
  std::vector<Tensor> out = std::move(retvals_);
  retvals_.assign(num_retvals_, Tensor());
  retval_set_.assign(num_retvals_, false);
  return out;
}

}  // namespace dflow
