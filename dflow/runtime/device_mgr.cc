#include "dflow/runtime/device_mgr.h"

#include <map>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "dflow/framework/device_name.h"
#include "dflow/framework/status.h"

namespace dflow {

DeviceMgr::DeviceMgr(std::vector<std::unique_ptr<Device>> devices)
    : devices_(std::move(devices)) {
  for (const auto& d : devices_) by_name_[d->name()] = d.get();
}

absl::StatusOr<Device*> DeviceMgr::LookupDevice(absl::string_view name) const {
  auto it = by_name_.find(name);
  if (it != by_name_.end()) return it->second;
  absl::StatusOr<DeviceName> parsed = DeviceName::Parse(name);
  if (parsed.ok() && parsed->IsFullySpecified()) {
    it = by_name_.find(parsed->ToString());
    if (it != by_name_.end()) return it->second;
  }
  return absl::NotFoundError(absl::StrCat("[DeviceMgr] unknown device '", name,
                                          "'; known devices: ", DeviceNamesString()));
}

absl::StatusOr<std::vector<Device*>> DeviceMgr::ListMatching(absl::string_view spec) const {
  ASSIGN_OR_RETURN(DeviceName parsed, DeviceName::Parse(spec));
  std::vector<Device*> out;
  for (const auto& d : devices_) {
    if (parsed.Matches(d->parsed_name())) out.push_back(d.get());
  }
  return out;
}

std::vector<Device*> DeviceMgr::ListDevices() const {
  std::vector<Device*> out;
  for (const auto& d : devices_) out.push_back(d.get());
  return out;
}

Device* DeviceMgr::HostCPU() const {
  for (const auto& d : devices_) {
    if (d->device_type() == kDeviceCPU) return d.get();
  }
  return nullptr;
}

std::string DeviceMgr::DeviceNamesString() const {
  std::vector<std::string> names;
  for (const auto& d : devices_) names.push_back(d->name());
  return absl::StrCat("[", absl::StrJoin(names, ", "), "]");
}

namespace {

struct FactoryRegistry {
  absl::Mutex mu;
  std::map<std::string, DeviceFactory> factories ABSL_GUARDED_BY(mu);
};

FactoryRegistry* Factories() {
  static FactoryRegistry* r = new FactoryRegistry;  // Never destroyed.
  return r;
}

}  // namespace

void RegisterDeviceFactory(const std::string& device_type, DeviceFactory factory) {
  FactoryRegistry* r = Factories();
  absl::MutexLock l(&r->mu);
  r->factories[device_type] = std::move(factory);
}

std::vector<std::string> RegisteredDeviceTypes() {
  FactoryRegistry* r = Factories();
  absl::MutexLock l(&r->mu);
  std::vector<std::string> types;
  for (const auto& [type, f] : r->factories) types.push_back(type);
  return types;
}

absl::StatusOr<std::vector<std::unique_ptr<Device>>> CreateLocalDevices(
    const tensorflow::ConfigProto& config, const std::string& job, int replica, int task) {
  int num_cpus = 1;
  auto it = config.device_count().find(kDeviceCPU);
  if (it != config.device_count().end()) num_cpus = it->second;
  if (num_cpus < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "[CreateLocalDevices] device_count[\"CPU\"] must be at least 1, got ", num_cpus));
  }
  if (replica < 0 || task < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "[CreateLocalDevices] negative replica or task: replica=", replica, " task=", task));
  }
  absl::BitGen gen;
  std::vector<std::unique_ptr<Device>> devices;
  for (int i = 0; i < num_cpus; ++i) {
    ASSIGN_OR_RETURN(DeviceName name,
                     DeviceName::Parse(FullDeviceName(job, replica, task, kDeviceCPU, i)));
    if (!name.IsFullySpecified() || name.job != job) {
      return absl::InvalidArgumentError(
          absl::StrCat("[CreateLocalDevices] bad job name '", job, "'"));
    }
    uint64_t incarnation = 0;
    while (incarnation == 0) incarnation = absl::Uniform<uint64_t>(gen);
    devices.push_back(std::make_unique<Device>(name, incarnation, kCpuMemoryLimit));
  }
  std::map<std::string, DeviceFactory> factories;
  {
    FactoryRegistry* r = Factories();
    absl::MutexLock l(&r->mu);
    factories = r->factories;
  }
  const std::string prefix = absl::StrCat("/job:", job, "/replica:", replica, "/task:", task);
  for (const auto& [type, factory] : factories) {
    auto count = config.device_count().find(type);
    if (count != config.device_count().end() && count->second <= 0) continue;
    ASSIGN_OR_RETURN(std::vector<std::unique_ptr<Device>> more, factory(config, prefix));
    for (auto& d : more) devices.push_back(std::move(d));
  }
  return devices;
}

}  // namespace dflow
