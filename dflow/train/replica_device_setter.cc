#include "dflow/train/replica_device_setter.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dflow/framework/attr_util.h"
#include "dflow/framework/device_name.h"
#include "dflow/framework/types.h"

namespace dflow {

std::vector<std::string> ReplicaDeviceSetterOptions::DefaultPsOps() {
  return {"Variable",
          "VariableV2",
          "AutoReloadVariable",
          "MutableHashTable",
          "MutableHashTableV2",
          "MutableHashTableOfTensors",
          "MutableHashTableOfTensorsV2",
          "MutableDenseHashTable",
          "MutableDenseHashTableV2",
          "VarHandleOp",
          "BoostedTreesEnsembleResourceHandleOp",
          "BoostedTreesQuantileStreamResourceHandleOp",
          "ResourceConditionalAccumulator",
          "DecisionTreeResource"};
}

absl::StatusOr<ReplicaDeviceSetterOptions> ReplicaDeviceSetterOptions::FromCluster(
    const ClusterSpec& cluster, const std::string& worker_device) {
  if (!cluster.HasJob("ps")) {
    return absl::InvalidArgumentError(
        absl::StrCat("the cluster ", cluster.ToJson(), " has no \"ps\" job"));
  }
  ReplicaDeviceSetterOptions o;
  o.ps_tasks = cluster.NumTasks("ps");
  o.worker_device = worker_device;
  return o;
}

absl::StatusOr<PsStrategy> ParsePsStrategy(const std::string& name) {
  if (name == "bytes") return PsStrategy::kGreedyByBytes;
  if (name == "round-robin") return PsStrategy::kRoundRobin;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown ps strategy '", name, "'; use bytes or round-robin"));
}

int64_t VariableBytes(const tensorflow::NodeDef& node) {
  DataType dtype;
  tensorflow::TensorShapeProto shape;
  if (!GetNodeAttr(node, "dtype", &dtype).ok() || !GetNodeAttr(node, "shape", &shape).ok() ||
      shape.unknown_rank()) {
    return 0;
  }
  int64_t elements = 1;
  for (const auto& dim : shape.dim()) {
    if (dim.size() < 0) return 0;
    elements *= dim.size();
  }
  return elements * DataTypeSize(dtype);
}

ReplicaDeviceSetter::ReplicaDeviceSetter(ReplicaDeviceSetterOptions options)
    : options_(std::move(options)) {
  absl::MutexLock l(&mu_);
  bytes_.assign(std::max(options_.ps_tasks, 0), 0);
}

int ReplicaDeviceSetter::ChooseTask(const tensorflow::NodeDef& node, int64_t bytes) {
  absl::MutexLock l(&mu_);
  int task = 0;
  if (options_.strategy == PsStrategy::kRoundRobin) {
    task = next_;
    next_ = (next_ + 1) % options_.ps_tasks;
  } else {
    task = static_cast<int>(std::min_element(bytes_.begin(), bytes_.end()) - bytes_.begin());
  }
  bytes_[task] += bytes;
  placed_[node.name()] = task;
  return task;
}

std::string ReplicaDeviceSetter::DeviceFor(const tensorflow::NodeDef& node,
                                           const std::string& worker_device) {
  // What the scope already set; unparsable specs are left for the placer to report.
  absl::StatusOr<DeviceName> current = DeviceName::Parse(node.device());
  if (!current.ok()) return node.device();
  const bool ps_op =
      options_.ps_tasks > 0 && !options_.ps_device.empty() &&
      std::find(options_.ps_ops.begin(), options_.ps_ops.end(), node.op()) != options_.ps_ops.end();
  absl::StatusOr<DeviceName> device = DeviceName::Parse(ps_op ? options_.ps_device : worker_device);
  if (!device.ok()) return node.device();
  if (ps_op && device->has_job && (!current->has_job || current->job == device->job)) {
    device->has_task = true;
    device->task = ChooseTask(node, VariableBytes(node));
  }
  device->MergeFrom(*current, /*override=*/true).IgnoreError();  // Cannot fail with override.
  return device->ToString();
}

std::vector<int64_t> ReplicaDeviceSetter::bytes_per_task() const {
  absl::MutexLock l(&mu_);
  return bytes_;
}

std::map<std::string, int> ReplicaDeviceSetter::task_of_variable() const {
  absl::MutexLock l(&mu_);
  return placed_;
}

}  // namespace dflow
