// Device: one place kernels run (a CPU, a GPU), with its own resource
// manager. Devices are created by CreateLocalDevices (runtime/device_mgr.h).
//
// A device with its own memory (a GPU) overrides the memory hooks: its
// kernels' outputs live there unless the kernel registered them as host
// memory, and the executor moves each input into the memory its kernel reads
// (Tensor::memory_type) with CopyTensor. A CPU has no memory of its own: the
// hooks are never called for it.
#ifndef DFLOW_FRAMEWORK_DEVICE_H_
#define DFLOW_FRAMEWORK_DEVICE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dflow/framework/allocator.h"
#include "dflow/framework/device_name.h"
#include "dflow/framework/tensor.h"
#include "dflow/framework/resource_mgr.h"
#include "dflow/framework/scatter_op.h"
#include "dflow/framework/strided_copy.h"
#include "dflow/framework/thread_pool.h"
#include "dflow/proto/device_attributes.pb.h"

namespace dflow {

inline constexpr char kDeviceCPU[] = "CPU";
inline constexpr char kDeviceGPU[] = "GPU";

// A run of bytes to copy within one device's memory.
struct CopyPiece {
  const void* from;
  void* to;
  int64_t bytes;
};

class Device {
 public:
  // `name` is a full device name; `incarnation` identifies this instance of
  // the device (it changes when the process restarts).
  Device(const DeviceName& name, uint64_t incarnation, int64_t memory_limit);
  virtual ~Device() = default;
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const std::string& name() const { return name_; }
  const DeviceName& parsed_name() const { return parsed_; }
  const std::string& device_type() const { return parsed_.type; }
  uint64_t incarnation() const { return incarnation_; }
  int64_t memory_limit() const { return memory_limit_; }
  ResourceMgr* resource_manager() { return &resource_mgr_; }
  // Name, type, memory limit and incarnation, as GetStatus reports them.
  void ToAttributes(tensorflow::DeviceAttributes* attributes) const;
  // Pool for splitting one kernel's work; shared process-wide on CPU.
  virtual ThreadPool* intra_op_pool() { return IntraOpPool(); }

  // --- memory hooks (devices with their own memory) ---
  // The device's memory; null for a CPU.
  virtual Allocator* device_allocator() { return nullptr; }
  // A copy of `t` in memory `to` (host or this device's), ordered after the
  // device's queued work on `t`; a host result is readable on return.
  virtual absl::StatusOr<Tensor> CopyTensor(const Tensor& t, MemoryType to);
  // Zeroes a tensor of device memory (allocate_output's fill), queued.
  virtual absl::Status ZeroFill(Tensor* t);
  // Copies elements from `in` to `out`, both in this device's memory, as
  // `spec` says (strided_copy.h); queued after the device's work so far.
  virtual absl::Status CopyStrided(const void* in, void* out, const StridedCopySpec& spec);
  // Row r of `out` (row_elems elements of element_size bytes, rows packed)
  // := the row_elems elements of `in` from element from[r]; both in this
  // device's memory, queued (Gather on a GPU).
  virtual absl::Status GatherRows(const void* in, void* out, absl::Span<const int64_t> from,
                                  int64_t row_elems, int element_size);
  // Copies every piece (none overlapping another's destination), queued
  // after the device's work so far: the elements of a TensorArray or a
  // TensorList gathered into one tensor or cut out of one, in one call.
  virtual absl::Status CopyPieces(absl::Span<const CopyPiece> pieces);
  // *out := a + b elementwise: three tensors of one numeric dtype and shape
  // in this device's memory, queued (gradients that TensorArrays and
  // TensorLists aggregate). Unimplemented for a dtype the device cannot add.
  virtual absl::Status AddTensors(const Tensor& a, const Tensor& b, Tensor* out);
  // For i in order, row indices[i] of `ref` (op)= row i of `updates` (or,
  // when `updates` is a scalar, that value): rows of ref's dimension 0;
  // negative indices are skipped. Both in this device's memory, queued.
  // REQUIRES: every index < ref's rows, updates of ref's dtype and of
  // indices.size() rows of ref's row shape (or a scalar), no integer
  // division by 0. Unimplemented for a dtype the device cannot scatter.
  virtual absl::Status ScatterRows(ScatterOp op, const Tensor& updates,
                                   absl::Span<const int64_t> indices, Tensor* ref);
  // Waits for the device's queued work; the first error it met.
  virtual absl::Status Sync() { return absl::OkStatus(); }

 private:
  const DeviceName parsed_;
  const std::string name_;
  const uint64_t incarnation_;
  const int64_t memory_limit_;
  ResourceMgr resource_mgr_;
};

// Device::CopyPieces for memory the host can address.
void CopyPiecesOnHost(absl::Span<const CopyPiece> pieces);

// Device::AddTensors for memory the host can address (float, double,
// int32, int64): a CPU's, or a test device's.
absl::Status AddTensorsOnHost(const Tensor& a, const Tensor& b, Tensor* out);

// Device::ScatterRows for memory the host can address (float, double,
// int32, int64; bool for kUpdate): a CPU's, or a test device's.
absl::Status ScatterRowsOnHost(ScatterOp op, const Tensor& updates,
                               absl::Span<const int64_t> indices, Tensor* ref);

}  // namespace dflow

#endif  // DFLOW_FRAMEWORK_DEVICE_H_
