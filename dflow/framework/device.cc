#include "dflow/framework/device.h"

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

}  // namespace dflow
