// MasterEnv: what a task's master needs from its server: the task's name and
// devices, the cluster's tasks, and a way to reach each task's worker.
#ifndef DFLOW_DISTRIBUTED_MASTER_ENV_H_
#define DFLOW_DISTRIBUTED_MASTER_ENV_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "dflow/distributed/worker_interface.h"
#include "dflow/proto/config.pb.h"

namespace dflow {

struct MasterEnv {
  // This task, "/job:worker/replica:0/task:0".
  std::string task_name;
  // Every task of the cluster (this one included), by name.
  std::vector<std::string> cluster_tasks;
  // The worker of a task: this task's own Worker in-process, the others
  // remote. Not owned; nullptr for an unknown task. Must be thread-safe.
  std::function<WorkerInterface*(const std::string& task_name)> worker_for_task;
  // Used by sessions whose CreateSession carries no config.
  tensorflow::ConfigProto default_session_config;
  // How long device discovery waits for a task's GetStatus.
  absl::Duration discovery_timeout = absl::Seconds(10);
  // A session no call has used for this long is closed (TensorFlow's
  // Master(env, session_gc_seconds)); checked every min(session_gc / 4,
  // 10 s). Zero or less: never.
  absl::Duration session_gc = absl::Hours(24);
  // CreateSession beyond this many open sessions is ResourceExhausted.
  int max_sessions = 1024;
  // A session's graph (its nodes and its library functions' nodes, after
  // every ExtendSession) may have at most this many nodes; more is
  // ResourceExhausted before anything is built. Zero or less: no limit.
  int64_t max_graph_nodes = 0;
};

}  // namespace dflow

#endif  // DFLOW_DISTRIBUTED_MASTER_ENV_H_
