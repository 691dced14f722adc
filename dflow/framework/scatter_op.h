// How a scattered update combines with the element it lands on (the
// Scatter* ops, Device::ScatterRows): one text for the host's loop and a
// GPU's kernel (compiled for both under nvcc), so they cannot differ.
#ifndef DFLOW_FRAMEWORK_SCATTER_OP_H_
#define DFLOW_FRAMEWORK_SCATTER_OP_H_

#include <type_traits>

#if defined(__CUDACC__)
#define DFLOW_SCATTER_FN __host__ __device__ inline
#else
#define DFLOW_SCATTER_FN inline
#endif

namespace dflow {

// +=, -=, *=, /=, min=, max=, =.
enum class ScatterOp { kAdd, kSub, kMul, kDiv, kMin, kMax, kUpdate };

// `element` (op) `update`: min and max as std::min/std::max(element, update)
// (the element wins ties and NaN comparisons); integer division of the
// lowest value by -1 wraps to itself instead of trapping. REQUIRES: no
// integer division by 0.
template <ScatterOp kOp, typename T>
DFLOW_SCATTER_FN T CombineScattered(T element, T update) {
  if constexpr (kOp == ScatterOp::kAdd) return element + update;
  if constexpr (kOp == ScatterOp::kSub) return element - update;
  if constexpr (kOp == ScatterOp::kMul) return element * update;
  if constexpr (kOp == ScatterOp::kDiv) {
    if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
      if (update == T(-1)) {
        return static_cast<T>(std::make_unsigned_t<T>(0) - std::make_unsigned_t<T>(element));
      }
    }
    return element / update;
  }
  if constexpr (kOp == ScatterOp::kMin) return update < element ? update : element;
  if constexpr (kOp == ScatterOp::kMax) return element < update ? update : element;
  if constexpr (kOp == ScatterOp::kUpdate) return update;
}

}  // namespace dflow

#undef DFLOW_SCATTER_FN

#endif  // DFLOW_FRAMEWORK_SCATTER_OP_H_
