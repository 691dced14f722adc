// ClusterSpec: the jobs of a cluster and the "host:port" address of each of
// their tasks, as TensorFlow's tf.train.ClusterSpec. Read from JSON
// (`{"ps":["127.0.0.1:2222"],"worker":["h1:2222","h2:2222"]}`, or a job given
// as {"<index>":"addr"} for sparse task indices), from a file ("@path"), or
// from the TF_CONFIG environment variable, and converted to and from
// tensorflow::ClusterDef.
//
//   ASSIGN_OR_RETURN(ClusterSpec spec, ClusterSpec::FromJsonOrFile(flag));
//   ASSIGN_OR_RETURN(std::string addr, spec.TaskAddress("worker", 1));
//   spec.TaskName("worker", 1);  // "/job:worker/replica:0/task:1"
#ifndef DFLOW_DISTRIBUTED_CLUSTER_SPEC_H_
#define DFLOW_DISTRIBUTED_CLUSTER_SPEC_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dflow/proto/cluster.pb.h"

namespace dflow {

// One task of a cluster.
struct TaskId {
  std::string job;
  int index = 0;
  friend bool operator==(const TaskId& a, const TaskId& b) {
    return a.job == b.job && a.index == b.index;
  }
};

class ClusterSpec {
 public:
  ClusterSpec() = default;

  // `json` maps job names to a list of addresses or to {"index": address}.
  // InvalidArgument naming the problem: malformed JSON, a job that is not a
  // valid name or has no tasks, an address that is not "host:port".
  static absl::StatusOr<ClusterSpec> FromJson(absl::string_view json);
  // "@path" reads the JSON from a file (NotFound naming it when unreadable);
  // anything else is JSON.
  static absl::StatusOr<ClusterSpec> FromJsonOrFile(absl::string_view json_or_file);
  // Same checks as FromJson.
  static absl::StatusOr<ClusterSpec> FromClusterDef(const tensorflow::ClusterDef& def);
  tensorflow::ClusterDef ToClusterDef() const;
  // {"job":["addr",...]} for dense jobs, {"job":{"i":"addr"}} for sparse ones.
  std::string ToJson() const;

  // Adds or replaces one task after checking the job name and address.
  absl::Status AddTask(const std::string& job, int index, const std::string& address);

  std::vector<std::string> jobs() const;  // Sorted.
  bool HasJob(absl::string_view job) const { return jobs_.count(std::string(job)) > 0; }
  // Task indices of `job`, ascending; empty when the job is unknown.
  std::vector<int> TaskIndices(absl::string_view job) const;
  int NumTasks(absl::string_view job) const;
  // NotFound naming the job and its tasks when there is no such task.
  absl::StatusOr<std::string> TaskAddress(absl::string_view job, int index) const;
  // Every task, ordered by job then index.
  std::vector<TaskId> AllTasks() const;
  bool empty() const { return jobs_.empty(); }

  // "/job:<job>/replica:0/task:<index>"
  static std::string TaskName(absl::string_view job, int index);

 private:
  std::map<std::string, std::map<int, std::string>> jobs_;
};

// The cluster and this process's task, from TF_CONFIG's JSON
// {"cluster": {...}, "task": {"type": "worker", "index": 0}}, and dflow's
// optional security keys (files, as the flags of the same names; see
// SECURITY.md): "auth_token_file", "tls_cert", "tls_key", "tls_ca".
struct TfConfig {
  ClusterSpec cluster;
  TaskId task;
  std::string auth_token_file;
  std::string tls_cert;
  std::string tls_key;
  std::string tls_ca;
};

// InvalidArgument naming what is wrong: malformed JSON, no "cluster", no or
// bad "task", a security key that is not a string, a task type that is not a
// job of the cluster, an index out of range.
absl::StatusOr<TfConfig> ParseTfConfig(absl::string_view json);
// NotFound when TF_CONFIG is unset or empty; else ParseTfConfig's result.
absl::StatusOr<TfConfig> TfConfigFromEnv();

// OK when `address` is "host:port" with a non-empty host (names, IPv4, or
// "[v6]") and a port in 0..65535; InvalidArgument quoting it otherwise.
absl::Status ValidateAddress(absl::string_view address);

}  // namespace dflow

#endif  // DFLOW_DISTRIBUTED_CLUSTER_SPEC_H_
