// Maximum and minimum as TensorFlow's (Eigen's PropagateNaN): NaN when
// either operand is NaN. Device code (.cu files) only.
#ifndef DFLOW_GPU_NAN_MATH_H_
#define DFLOW_GPU_NAN_MATH_H_

#include <type_traits>

namespace dflow {
namespace gpu {

#ifdef __CUDACC__
template <typename T>
__device__ inline T MaxNaN(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (isnan(a)) return a;
    if (isnan(b)) return b;
  }
  return a < b ? b : a;
}

template <typename T>
__device__ inline T MinNaN(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (isnan(a)) return a;
    if (isnan(b)) return b;
  }
  return b < a ? b : a;
}
#endif

}  // namespace gpu
}  // namespace dflow

#endif  // DFLOW_GPU_NAN_MATH_H_
