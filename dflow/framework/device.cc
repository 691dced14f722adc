#include "dflow/framework/device.h"

namespace dflow {

Device::Device(const DeviceName& name, uint64_t incarnation, int64_t memory_limit)
    : parsed_(name),
      name_(name.ToString()),
      incarnation_(incarnation),
      memory_limit_(memory_limit) {}

}  // namespace dflow
