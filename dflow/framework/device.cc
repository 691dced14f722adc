#include "dflow/framework/device.h"

#include "absl/strings/str_cat.h"
#include "dflow/framework/tensor.h"

namespace dflow {

Device::Device(const DeviceName& name, uint64_t incarnation, int64_t memory_limit)
    : parsed_(name),
      name_(name.ToString()),
      incarnation_(incarnation),
      memory_limit_(memory_limit) {}

void Device::ToAttributes(tensorflow::DeviceAttributes* attributes) const {
  attributes->set_name(name_);
  attributes->set_device_type(device_type());
  attributes->set_memory_limit(memory_limit_);
  attributes->set_incarnation(incarnation_);
}

absl::StatusOr<Tensor> Device::CopyTensor(const Tensor& t, MemoryType to) {
  return absl::UnimplementedError(absl::StrCat(
      name_, " has no memory of its own: cannot copy a tensor to ", MemoryTypeName(to),
      " memory"));
}

absl::Status Device::ZeroFill(Tensor* t) {
  return absl::UnimplementedError(absl::StrCat(name_, " has no memory of its own to fill"));
}

absl::Status Device::GatherRows(const void* in, void* out, absl::Span<const int64_t> from,
                                int64_t row_elems, int element_size) {
  return absl::UnimplementedError(absl::StrCat(name_, " has no memory of its own to gather in"));
}

absl::Status Device::CopyStrided(const void* in, void* out, const StridedCopySpec& spec) {
  return absl::UnimplementedError(absl::StrCat(name_, " has no memory of its own to copy in"));
}

}  // namespace dflow
