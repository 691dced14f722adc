// numpy broadcasting for kernels: the output shape of up to three inputs, and
// a compact plan for walking them.
//
// The plan drops size-1 output dimensions and merges neighbours that every
// input treats alike, so [N,C] + [C] becomes N rows of C contiguous elements
// and [2,1,3] x [4,1] becomes a walk over [2,4,3] with strides (3,0,1) and
// (0,1,0). Kernels then run one vectorised loop per row:
//
//   ASSIGN_OR_RETURN(BroadcastPlan plan, BroadcastPlan::Make({x.shape(), y.shape()}));
//   Tensor* z = ctx->allocate_output(0, plan.output_shape());
//   if (plan.IsFull(0) && plan.IsFull(1)) { ... one flat loop ... }
//   plan.ForEachRow(0, plan.num_rows(), [&](int64_t row, const int64_t* in_offsets) {
//     ... plan.inner_size() outputs from row * plan.inner_size(); input i starts
//     at in_offsets[i] and steps plan.inner_stride(i) (0 or 1) ...
//   });
#ifndef DFLOW_OPS_BROADCAST_H_
#define DFLOW_OPS_BROADCAST_H_

#include <array>
#include <cstdint>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dflow/framework/tensor_shape.h"

namespace dflow {

// The numpy broadcast of two shapes; InvalidArgument
// "Incompatible shapes: [2,3] vs. [2]" when a dimension pair is neither equal
// nor has a 1.
absl::StatusOr<TensorShape> BroadcastTensorShapes(const TensorShape& a, const TensorShape& b);

// The axes of `out` along which `in` was broadcast to make `out` (summing a
// gradient of `out` over them and reshaping gives the gradient of `in`).
// REQUIRES: `in` broadcasts to `out`.
std::vector<int64_t> BroadcastReductionAxes(const TensorShape& in, const TensorShape& out);

class BroadcastPlan {
 public:
  static constexpr int kMaxInputs = 3;

  // Fails with "Incompatible shapes: [2,3] vs. [2]" (" vs. " between every
  // input shape) when the shapes do not broadcast.
  static absl::StatusOr<BroadcastPlan> Make(absl::Span<const TensorShape> inputs);

  const TensorShape& output_shape() const { return output_shape_; }
  int64_t num_elements() const { return num_elements_; }
  int num_inputs() const { return num_inputs_; }
  // Input i holds every output element in order (it differs from the output
  // at most by size-1 dimensions).
  bool IsFull(int i) const { return input_elements_[i] == num_elements_; }
  // Input i has exactly one element.
  bool IsScalar(int i) const { return input_elements_[i] == 1; }

  // The output as num_rows() rows of inner_size() elements.
  int64_t inner_size() const { return dims_.back(); }
  int64_t num_rows() const { return inner_size() == 0 ? 0 : num_elements_ / inner_size(); }
  // 1 when input i advances along a row, 0 when it repeats one element.
  int64_t inner_stride(int i) const { return strides_[i].back(); }

  // Collapsed output dimensions (at least one) and per-input strides.
  absl::Span<const int64_t> dims() const { return dims_; }
  absl::Span<const int64_t> strides(int i) const { return strides_[i]; }

  // Calls fn(row, in_offsets) for each row in [begin, end), in order, where
  // in_offsets[i] is the offset of input i's first element of that row.
  template <typename Fn>
  void ForEachRow(int64_t begin, int64_t end, Fn&& fn) const;

 private:
  BroadcastPlan() = default;
  static BroadcastPlan SameShapes(absl::Span<const TensorShape> inputs);

  TensorShape output_shape_;
  int64_t num_elements_ = 0;
  int num_inputs_ = 0;
  std::array<int64_t, kMaxInputs> input_elements_{};
  absl::InlinedVector<int64_t, 4> dims_;
  std::array<absl::InlinedVector<int64_t, 4>, kMaxInputs> strides_;
};

template <typename Fn>
void BroadcastPlan::ForEachRow(int64_t begin, int64_t end, Fn&& fn) const {
  if (begin >= end) return;
  const int outer = static_cast<int>(dims_.size()) - 1;
  // The multi-index of row `begin` over the outer dimensions, and offsets.
  absl::InlinedVector<int64_t, 4> index(outer, 0);
  std::array<int64_t, kMaxInputs> offsets{};
  int64_t rest = begin;
  for (int d = outer - 1; d >= 0; --d) {
    index[d] = rest % dims_[d];
    rest /= dims_[d];
    for (int i = 0; i < num_inputs_; ++i) offsets[i] += index[d] * strides_[i][d];
  }
  for (int64_t row = begin; row < end; ++row) {
    fn(row, offsets.data());
    // Odometer step over the outer dimensions.
    for (int d = outer - 1; d >= 0; --d) {
      for (int i = 0; i < num_inputs_; ++i) offsets[i] += strides_[i][d];
      if (++index[d] < dims_[d]) break;
      for (int i = 0; i < num_inputs_; ++i) offsets[i] -= dims_[d] * strides_[i][d];
      index[d] = 0;
    }
  }
}

}  // namespace dflow

#endif  // DFLOW_OPS_BROADCAST_H_
