// Test helper: a cluster of GrpcServers in this process, on 127.0.0.1 port 0,
// told each other's bound ports once all have started.
//
//   LocalCluster cluster({{"ps", 1}, {"worker", 2}});
//   cluster.target("/job:worker/replica:0/task:0");  // "grpc://127.0.0.1:40123"
#ifndef DFLOW_DISTRIBUTED_RPC_LOCAL_CLUSTER_TEST_UTIL_H_
#define DFLOW_DISTRIBUTED_RPC_LOCAL_CLUSTER_TEST_UTIL_H_

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dflow/distributed/cluster_spec.h"
#include "dflow/distributed/rpc/grpc_server.h"
#include "gtest/gtest.h"

namespace dflow {

inline tensorflow::ServerDef ServerDefFor(const ClusterSpec& cluster, const std::string& job,
                                          int task, int cpus = 2) {
  tensorflow::ServerDef def;
  *def.mutable_cluster() = cluster.ToClusterDef();
  def.set_job_name(job);
  def.set_task_index(task);
  def.set_protocol("grpc");
  (*def.mutable_default_session_config()->mutable_device_count())["CPU"] = cpus;
  return def;
}

class LocalCluster {
 public:
  explicit LocalCluster(const std::vector<std::pair<std::string, int>>& jobs, int cpus = 2) {
    ClusterSpec spec;
    for (const auto& [job, n] : jobs) {
      for (int i = 0; i < n; ++i) EXPECT_TRUE(spec.AddTask(job, i, "127.0.0.1:0").ok());
    }
    ClusterSpec bound;
    for (const TaskId& t : spec.AllTasks()) {
      auto server = GrpcServer::Create(ServerDefFor(spec, t.job, t.index, cpus));
      EXPECT_TRUE(server.ok()) << server.status();
      EXPECT_TRUE((*server)->Start().ok());
      EXPECT_TRUE(
          bound.AddTask(t.job, t.index, absl::StrCat("127.0.0.1:", (*server)->bound_port())).ok());
      servers_[ClusterSpec::TaskName(t.job, t.index)] = std::move(server).value();
    }
    for (auto& [name, server] : servers_) EXPECT_TRUE(server->UpdateCluster(bound).ok());
    spec_ = bound;
  }

  GrpcServer& server(const std::string& task) { return *servers_.at(task); }
  // "grpc://127.0.0.1:<port>" of `job`'s task `index`.
  std::string target(const std::string& job, int index) {
    return server(ClusterSpec::TaskName(job, index)).target();
  }
  const ClusterSpec& spec() const { return spec_; }
  // Stops a task's server and forgets it, as if its process had died.
  void Kill(const std::string& task) { servers_.erase(task); }

 private:
  std::map<std::string, std::unique_ptr<GrpcServer>> servers_;
  ClusterSpec spec_;
};

}  // namespace dflow

#endif  // DFLOW_DISTRIBUTED_RPC_LOCAL_CLUSTER_TEST_UTIL_H_
