#include "dflow/ops/element_memory.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dflow/framework/device.h"
#include "dflow/ops/array_util.h"

namespace dflow {

absl::StatusOr<Tensor> ElementMemory::New(DataType dtype, const TensorShape& shape,
                                          bool zero) const {
  if (type_ == MemoryType::kHost) {
    return zero ? Tensor(dtype, shape) : Tensor::ForOverwrite(dtype, shape);
  }
  Device* device = ctx_->device();
  if (device->device_allocator() == nullptr) {  // A GPU's list read by a CPU kernel.
    return absl::InvalidArgumentError(absl::StrCat(
        ctx_->Prefix(), "elements in device memory on ", device->name(), ", which has none"));
  }
  ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(device->device_allocator(), dtype, shape));
  if (zero) RETURN_IF_ERROR(device->ZeroFill(&t));
  return t;
}

absl::Status ElementMemory::CopyOnHost(const ElementCopy& c) const {
  if (c.n == 0) return absl::OkStatus();
  if (c.src.memory_type() != MemoryType::kHost || c.dst.memory_type() != MemoryType::kHost) {
    return absl::InternalError(
        absl::StrCat(ctx_->Prefix(), "a host copy of elements in device memory"));
  }
  Tensor dst = c.dst;  // Shares the buffer it writes.
  return SwitchByElementSize(c.src.dtype(), "element copy", [&](auto tag) {
    using T = typename decltype(tag)::type;
    std::copy_n(ElementsOf<T>(c.src) + c.from, c.n, MutableElementsOf<T>(&dst) + c.to);
    return absl::OkStatus();
  });
}

absl::Status ElementMemory::CopyAll(absl::Span<const ElementCopy> copies) const {
  if (type_ == MemoryType::kHost) {
    for (const ElementCopy& c : copies) RETURN_IF_ERROR(CopyOnHost(c));
    return absl::OkStatus();
  }
  std::vector<CopyPiece> pieces;
  pieces.reserve(copies.size());
  for (const ElementCopy& c : copies) {
    Tensor dst = c.dst;
    ASSIGN_OR_RETURN(const int size, DeviceCopyElementSize(ctx_, c.src, dst));
    pieces.push_back({static_cast<const char*>(c.src.raw_data()) + c.from * size,
                      static_cast<char*>(dst.raw_data()) + c.to * size, c.n * size});
  }
  return ctx_->device()->CopyPieces(pieces);
}

absl::StatusOr<Tensor> ElementMemory::Add(const Tensor& a, const Tensor& b) const {
  const bool on_device = a.memory_type() == MemoryType::kDevice &&
                         b.memory_type() == MemoryType::kDevice;
  if (on_device && type_ == MemoryType::kDevice) {
    ASSIGN_OR_RETURN(Tensor sum, New(a.dtype(), a.shape(), /*zero=*/false));
    absl::Status added = ctx_->device()->AddTensors(a, b, &sum);
    if (!absl::IsUnimplemented(added)) {
      RETURN_IF_ERROR(added);
      return sum;
    }
  }
  ASSIGN_OR_RETURN(Tensor x, ToHost(a));
  ASSIGN_OR_RETURN(Tensor y, ToHost(b));
  Tensor sum = Tensor::ForOverwrite(a.dtype(), a.shape());
  RETURN_IF_ERROR(AddTensorsOnHost(x, y, &sum));
  if (type_ == MemoryType::kHost) return sum;
  return ctx_->device()->CopyTensor(sum, MemoryType::kDevice);
}

absl::StatusOr<Tensor> ElementMemory::ToHost(const Tensor& t) const {
  if (t.memory_type() == MemoryType::kHost) return t;
  return ctx_->device()->CopyTensor(t, MemoryType::kHost);
}

}  // namespace dflow
