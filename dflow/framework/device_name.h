// Device names: "/job:worker/replica:0/task:1/device:CPU:0". Partial specs
// ("/job:ps", "/device:GPU:1", "/cpu:0", "/job:worker/task:3") are allowed
// and merge field by field.
#ifndef DFLOW_FRAMEWORK_DEVICE_NAME_H_
#define DFLOW_FRAMEWORK_DEVICE_NAME_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dflow {

struct DeviceName {
  bool has_job = false;
  std::string job;
  bool has_replica = false;
  int replica = 0;
  bool has_task = false;
  int task = 0;
  bool has_type = false;
  std::string type;  // Upper case: "CPU", "GPU".
  bool has_id = false;
  int id = 0;

  // Accepts the full form, legacy "/cpu:0" and "/gpu:*", "CPU:0", and "" (any).
  // Fails with InvalidArgument quoting the name.
  static absl::StatusOr<DeviceName> Parse(absl::string_view name);
  // Only the fields that are set, in canonical order: "/job:ps/task:0".
  std::string ToString() const;
  bool IsFullySpecified() const {
    return has_job && has_replica && has_task && has_type && has_id;
  }
  // True when every field set here is equal in `other` (other may be more specific).
  bool Matches(const DeviceName& other) const;
  // Fills fields of *this from `other`; a field set in both to different
  // values fails (InvalidArgument naming both specs) unless `override` is set,
  // in which case `other` wins.
  absl::Status MergeFrom(const DeviceName& other, bool override = false);
  // "/job:localhost/replica:0/task:0"
  std::string TaskName() const;
  friend bool operator==(const DeviceName& a, const DeviceName& b) {
    return a.ToString() == b.ToString();
  }
};

// Canonical full name: "/job:J/replica:R/task:T/device:TYPE:ID".
std::string FullDeviceName(absl::string_view job, int replica, int task,
                           absl::string_view type, int id);

}  // namespace dflow

#endif  // DFLOW_FRAMEWORK_DEVICE_NAME_H_
