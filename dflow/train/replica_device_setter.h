// ReplicaDeviceSetter: TensorFlow's replica_device_setter as a device
// function for Scope. Variables and other parameter-server ops go to a ps
// task chosen by a strategy; every other op goes to the worker device. A
// device already set on the op (by a device scope) wins field by field, as
// with TensorFlow's merge_devices.
//
//   ReplicaDeviceSetterOptions o;
//   o.ps_tasks = 2;  // or FromCluster(cluster, "/job:worker/task:1")
//   o.worker_device = "/job:worker/task:1";
//   auto setter = std::make_shared<ReplicaDeviceSetter>(o);
//   Scope s = root.WithDeviceFunction([setter](auto& node) { return setter->DeviceFor(node); });
//   ... build the model in `s` ...
//   setter->bytes_per_task();  // what each ps task holds
//
// Strategies: kGreedyByBytes (default: the ps task holding the fewest bytes
// so far takes the next variable, first on ties; TensorFlow's round-robin
// left ps tasks idle when variable sizes differ) and kRoundRobin
// (TensorFlow's default). Both depend only on the order and sizes of the
// variables created, so replicas building the same model put identically
// named variables on the same ps task.
#ifndef DFLOW_TRAIN_REPLICA_DEVICE_SETTER_H_
#define DFLOW_TRAIN_REPLICA_DEVICE_SETTER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "dflow/distributed/cluster_spec.h"
#include "dflow/proto/node_def.pb.h"

namespace dflow {

enum class PsStrategy { kGreedyByBytes, kRoundRobin };

struct ReplicaDeviceSetterOptions {
  int ps_tasks = 0;  // 0: every op goes to worker_device.
  std::string ps_device = "/job:ps";
  std::string worker_device = "/job:worker";
  // Ops placed on the ps: TensorFlow's STANDARD_PS_OPS by default.
  std::vector<std::string> ps_ops = DefaultPsOps();
  PsStrategy strategy = PsStrategy::kGreedyByBytes;

  static std::vector<std::string> DefaultPsOps();
  // ps_tasks from the cluster's "ps" job (InvalidArgument when it has none).
  static absl::StatusOr<ReplicaDeviceSetterOptions> FromCluster(const ClusterSpec& cluster,
                                                                const std::string& worker_device);
};

// "bytes" or "round-robin"; InvalidArgument naming the allowed values otherwise.
absl::StatusOr<PsStrategy> ParsePsStrategy(const std::string& name);

class ReplicaDeviceSetter {
 public:
  explicit ReplicaDeviceSetter(ReplicaDeviceSetterOptions options);

  // The device for `node` (its device field holds what the scope set).
  std::string DeviceFor(const tensorflow::NodeDef& node) {
    return DeviceFor(node, options_.worker_device);
  }
  // The same with another worker device (one tower's, sharing the strategy).
  std::string DeviceFor(const tensorflow::NodeDef& node, const std::string& worker_device);

  // Bytes of the variables placed by the strategy, per ps task (all tasks).
  std::vector<int64_t> bytes_per_task() const;
  // Which ps task each variable placed by the strategy went to.
  std::map<std::string, int> task_of_variable() const;

 private:
  // The strategy's ps task for `node`, which holds `bytes`.
  int ChooseTask(const tensorflow::NodeDef& node, int64_t bytes);

  const ReplicaDeviceSetterOptions options_;
  mutable absl::Mutex mu_;
  std::vector<int64_t> bytes_ ABSL_GUARDED_BY(mu_);
  int next_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, int> placed_ ABSL_GUARDED_BY(mu_);
};

// The bytes a variable op holds (dtype size x elements of its "shape" attr);
// 0 when the shape is not fully known or the op is not a variable.
int64_t VariableBytes(const tensorflow::NodeDef& node);

}  // namespace dflow

#endif  // DFLOW_TRAIN_REPLICA_DEVICE_SETTER_H_
