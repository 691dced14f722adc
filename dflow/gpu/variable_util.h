// Device-memory helpers for GPU kernels that write variables: the GPU's
// counterparts of Tensor::DeepCopy and Var::MutableTensor, which are CPU code
// and must never touch a device tensor.
#ifndef DFLOW_GPU_VARIABLE_UTIL_H_
#define DFLOW_GPU_VARIABLE_UTIL_H_

#include "absl/status/statusor.h"
#include "dflow/framework/tensor.h"
#include "dflow/gpu/gpu_device.h"
#include "dflow/ops/variable_ops.h"

namespace dflow {
namespace gpu {

// A new device tensor holding `t`'s value, copied on the compute stream
// (device to device; `t` may also be in host memory, then it is copied up
// and waited for). RESOURCE_EXHAUSTED when the device is out of memory.
// REQUIRES: a fixed-size dtype.
absl::StatusOr<Tensor> DeviceCopy(GpuDevice* gpu, const Tensor& t);

// The value of `var`, safe to update in place on the compute stream: when a
// snapshot (an earlier read) still shares its buffer, the value is first
// copied into a new device buffer. REQUIRES: var->is_initialized() and its
// mutex held exclusively.
absl::StatusOr<Tensor*> MutableDeviceTensor(GpuDevice* gpu, Var* var);

}  // namespace gpu
}  // namespace dflow

#endif  // DFLOW_GPU_VARIABLE_UTIL_H_
