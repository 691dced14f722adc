// DeviceMgr: the devices of one process (or task), owned and looked up by
// name. Thread-safe after construction (it is read-only).
//
//   ASSIGN_OR_RETURN(auto devices, CreateLocalDevices(config, "localhost", 0, 0));
//   DeviceMgr mgr(std::move(devices));
//   ASSIGN_OR_RETURN(Device* cpu1, mgr.LookupDevice("/job:localhost/replica:0/task:0/cpu:1"));
#ifndef DFLOW_RUNTIME_DEVICE_MGR_H_
#define DFLOW_RUNTIME_DEVICE_MGR_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dflow/framework/device.h"
#include "dflow/proto/config.pb.h"

namespace dflow {

class DeviceMgr {
 public:
  // REQUIRES: device names are distinct.
  explicit DeviceMgr(std::vector<std::unique_ptr<Device>> devices);
  DeviceMgr(const DeviceMgr&) = delete;
  DeviceMgr& operator=(const DeviceMgr&) = delete;

  // The device whose full name is `name` (any spelling that parses to it,
  // e.g. ".../cpu:0"); NotFound listing the known devices otherwise.
  absl::StatusOr<Device*> LookupDevice(absl::string_view name) const;
  // Devices that `spec` (possibly partial, "" = all) matches, in creation order;
  // InvalidArgument when `spec` does not parse.
  absl::StatusOr<std::vector<Device*>> ListMatching(absl::string_view spec) const;
  // All devices in creation order.
  std::vector<Device*> ListDevices() const;
  // The first CPU device; nullptr when there is none.
  Device* HostCPU() const;
  // "[/job:.../device:CPU:0, ...]" for error messages.
  std::string DeviceNamesString() const;

 private:
  std::vector<std::unique_ptr<Device>> devices_;
  absl::flat_hash_map<std::string, Device*> by_name_;
};

// CPU memory limit reported for local CPU devices (TensorFlow's figure).
inline constexpr int64_t kCpuMemoryLimit = 256 << 20;

// Makes a task's devices of one type other than CPU (the GPUs), honouring
// `config` (device_count caps how many, gpu_options.visible_device_list picks
// them). `name_prefix` is "/job:<job>/replica:<r>/task:<t>".
using DeviceFactory = std::function<absl::StatusOr<std::vector<std::unique_ptr<Device>>>(
    const tensorflow::ConfigProto& config, const std::string& name_prefix)>;
// Called at static-initialisation time by the library that brings a device
// type (dflow/gpu when built with CUDA). Thread-safe.
void RegisterDeviceFactory(const std::string& device_type, DeviceFactory factory);
// The device types with a registered factory (CPU is always available).
std::vector<std::string> RegisteredDeviceTypes();

// The local devices of task /job:<job>/replica:<replica>/task:<task>:
// config.device_count["CPU"] CPU devices (default 1), each with a fresh random
// incarnation, then the devices of every registered factory whose
// device_count is not 0 (GPUs: as many as are visible, by default).
// InvalidArgument on a bad job name or a CPU count below 1.
absl::StatusOr<std::vector<std::unique_ptr<Device>>> CreateLocalDevices(
    const tensorflow::ConfigProto& config, const std::string& job, int replica, int task);

}  // namespace dflow

#endif  // DFLOW_RUNTIME_DEVICE_MGR_H_
