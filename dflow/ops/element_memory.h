// Where the elements of a TensorArray or a TensorList live, and how kernels
// of every device make, copy and add them there: host memory on a CPU; on a
// GPU, the memory of the kernel's element argument (device memory, or host
// memory for int32 and the host-only types, as TensorFlow keeps them).
#ifndef DFLOW_OPS_ELEMENT_MEMORY_H_
#define DFLOW_OPS_ELEMENT_MEMORY_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dflow/framework/kernel.h"

namespace dflow {

// Elements [from, from + n) of `src` to [to, to + n) of `dst` (one dtype);
// the tensors share the buffers they name.
struct ElementCopy {
  Tensor src;
  int64_t from = 0;
  Tensor dst;
  int64_t to = 0;
  int64_t n = 0;
};

class ElementMemory {
 public:
  ElementMemory(OpKernelContext* ctx, MemoryType type) : ctx_(ctx), type_(type) {}
  // The memory of the kernel's input or output `i`.
  static ElementMemory OfInput(OpKernelContext* ctx, int i) {
    return ElementMemory(ctx, ctx->op_kernel().input_memory_type(i));
  }
  static ElementMemory OfOutput(OpKernelContext* ctx, int i) {
    return ElementMemory(ctx, ctx->op_kernel().output_memory_type(i));
  }

  // A new element, zero-filled when `zero`.
  absl::StatusOr<Tensor> New(DataType dtype, const TensorShape& shape, bool zero) const;
  // Every copy, in order; on a device queued as one Device::CopyPieces (one
  // kernel on a GPU for a stack or split of T elements, not T copies).
  absl::Status CopyAll(absl::Span<const ElementCopy> copies) const;
  // a + b (one dtype and shape), a new element: added by the device where
  // both are in its memory and it adds their dtype (Device::AddTensors),
  // else on the host (a device's elements make a round trip).
  absl::StatusOr<Tensor> Add(const Tensor& a, const Tensor& b) const;

 private:
  absl::Status CopyOnHost(const ElementCopy& c) const;
  absl::StatusOr<Tensor> ToHost(const Tensor& t) const;

  OpKernelContext* const ctx_;
  const MemoryType type_;
};

}  // namespace dflow

#endif  // DFLOW_OPS_ELEMENT_MEMORY_H_
