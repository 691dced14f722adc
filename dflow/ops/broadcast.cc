#include "dflow/ops/broadcast.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "dflow/framework/status.h"

namespace dflow {
namespace {

// Dimension d of `s` left-padded with 1s to `rank` dimensions.
int64_t PaddedDim(const TensorShape& s, int rank, int d) {
  const int pad = rank - s.dims();
  return d < pad ? 1 : s.dim_size(d - pad);
}

absl::Status IncompatibleShapes(absl::Span<const TensorShape> inputs) {
  std::string msg = "Incompatible shapes: ";
  for (size_t i = 0; i < inputs.size(); ++i) {
    absl::StrAppend(&msg, i == 0 ? "" : " vs. ", inputs[i].DebugString());
  }
  return absl::InvalidArgumentError(msg);
}

// The broadcast output dimensions, or an error showing every input shape.
absl::StatusOr<std::vector<int64_t>> OutputDims(absl::Span<const TensorShape> inputs) {
  int rank = 0;
  for (const TensorShape& s : inputs) rank = std::max(rank, s.dims());
  std::vector<int64_t> out(rank, 1);
  for (int d = 0; d < rank; ++d) {
    for (const TensorShape& s : inputs) {
      const int64_t in = PaddedDim(s, rank, d);
      if (in == out[d] || in == 1) continue;
      if (out[d] != 1) return IncompatibleShapes(inputs);
      out[d] = in;
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<TensorShape> BroadcastTensorShapes(const TensorShape& a, const TensorShape& b) {
  if (a == b) return a;
  const TensorShape inputs[] = {a, b};
  ASSIGN_OR_RETURN(std::vector<int64_t> dims, OutputDims(inputs));
  return TensorShape(dims);
}

std::vector<int64_t> BroadcastReductionAxes(const TensorShape& in, const TensorShape& out) {
  std::vector<int64_t> axes;
  const int pad = out.dims() - in.dims();
  for (int d = 0; d < out.dims(); ++d) {
    if (d < pad || (in.dim_size(d - pad) == 1 && out.dim_size(d) != 1)) axes.push_back(d);
  }
  return axes;
}

// Equal shapes (the common case: two scalars in a loop, a gradient and its
// variable): one row of every element, each input advancing along it. What
// the general path computes, without its allocations.
BroadcastPlan BroadcastPlan::SameShapes(absl::Span<const TensorShape> inputs) {
  BroadcastPlan plan;
  plan.num_inputs_ = static_cast<int>(inputs.size());
  plan.output_shape_ = inputs[0];
  plan.num_elements_ = inputs[0].num_elements();
  plan.dims_.push_back(plan.num_elements_);
  for (int i = 0; i < plan.num_inputs_; ++i) {
    plan.input_elements_[i] = plan.num_elements_;
    plan.strides_[i].push_back(1);
  }
  return plan;
}

absl::StatusOr<BroadcastPlan> BroadcastPlan::Make(absl::Span<const TensorShape> inputs) {
  if (inputs.empty() || inputs.size() > kMaxInputs) {
    return absl::InternalError(
        absl::StrCat("BroadcastPlan takes 1 to ", kMaxInputs, " inputs, got ", inputs.size()));
  }
  if (std::all_of(inputs.begin() + 1, inputs.end(),
                  [&](const TensorShape& s) { return s == inputs[0]; })) {
    return SameShapes(inputs);
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> out_dims, OutputDims(inputs));
  BroadcastPlan plan;
  plan.num_inputs_ = static_cast<int>(inputs.size());
  plan.output_shape_ = TensorShape(out_dims);
  plan.num_elements_ = plan.output_shape_.num_elements();
  const int rank = static_cast<int>(out_dims.size());
  // Per collapsed dimension: which inputs repeat along it (bit i = input i).
  absl::InlinedVector<unsigned, 4> repeat_masks;
  for (int d = 0; d < rank; ++d) {
    if (out_dims[d] == 1) continue;  // Every input is 1 there too.
    unsigned mask = 0;
    for (int i = 0; i < plan.num_inputs_; ++i) {
      if (PaddedDim(inputs[i], rank, d) == 1) mask |= 1u << i;
    }
    if (!repeat_masks.empty() && repeat_masks.back() == mask) {
      plan.dims_.back() *= out_dims[d];
    } else {
      plan.dims_.push_back(out_dims[d]);
      repeat_masks.push_back(mask);
    }
  }
  if (plan.dims_.empty()) {  // A single element.
    plan.dims_.push_back(1);
    repeat_masks.push_back(0);
  }
  for (int i = 0; i < plan.num_inputs_; ++i) {
    plan.input_elements_[i] = inputs[i].num_elements();
    auto& strides = plan.strides_[i];
    strides.resize(plan.dims_.size());
    int64_t running = 1;
    for (int g = static_cast<int>(plan.dims_.size()) - 1; g >= 0; --g) {
      const bool repeats = (repeat_masks[g] >> i) & 1u;
      strides[g] = repeats ? 0 : running;
      if (!repeats) running *= plan.dims_[g];
    }
  }
  return plan;
}

}  // namespace dflow
