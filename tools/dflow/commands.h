// The dflow subcommands; main.cc parses flags (CLI11 stays in that one file).
#ifndef DFLOW_TOOLS_DFLOW_COMMANDS_H_
#define DFLOW_TOOLS_DFLOW_COMMANDS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dflow/distributed/cluster_spec.h"
#include "dflow/distributed/rpc/grpc_server.h"
#include "dflow/distributed/rpc/security.h"
#include "dflow/train/trainer.h"

namespace dflow::cli {

// `dflow --version`: "dflow 0.1.0\ngit commit <sha>\nbuild type Release\nCUDA no",
// filled in when CMake configures the build (version.cc.in).
std::string VersionText();

// --auth-token-file, --tls-cert, --tls-key, --tls-ca (SECURITY.md); "" = off.
using SecurityFlags = SecurityFiles;

// Reads the files named by `flags` (security.h: LoadSecurityOptions) and
// makes them what this process's gRPC clients present
// (SetDefaultClientSecurity). Off when no flag is given.
absl::StatusOr<SecurityOptions> ApplySecurityFlags(const SecurityFlags& flags);

struct RunGraphFlags {
  std::string graph_path;            // .pb (binary) or .pbtxt (text)
  std::vector<std::string> fetches;  // "name:0"
  std::vector<std::string> feeds;    // "name=JSON"
  std::vector<std::string> targets;
  std::string config_path;     // ConfigProto in text format
  std::string session_target;  // "" (in-process) or grpc://host:port
  SecurityFlags security;      // What a grpc:// target is called with.
};

// Prints one JSON object per fetched tensor on stdout:
//   {"name":"y:0","dtype":"float","shape":[2],"values":[1,2]}
absl::Status RunGraph(const RunGraphFlags& flags);

struct ServerFlags {
  std::string cluster;  // JSON or @file; empty: TF_CONFIG
  std::string job;
  int task = -1;
  int cpus = 1;                       // CPU devices of the task
  double session_gc_seconds = 86400;  // <= 0: sessions are never collected
  int max_sessions = 1024;
  int64_t max_graph_nodes = 0;    // 0: no limit
  int64_t max_request_bytes = 0;  // 0: no limit
  SecurityFlags security;  // Empty fields: TF_CONFIG's keys of the same names.
};

// Serves one task of a cluster (master and worker services on its port)
// until SIGTERM or SIGINT; prints its target and devices on stdout.
absl::Status ServerCommand(const ServerFlags& flags);

// Starts task `job`/`task` of `cluster` and logs its target and devices;
// SIGTERM and SIGINT from now on go to ServeUntilSignal.
absl::StatusOr<std::unique_ptr<GrpcServer>> StartTaskServer(
    const ClusterSpec& cluster, const std::string& job, int task, int cpus,
    const GrpcServer::Options& options = GrpcServer::Options(), int gpus = -1);
// Serves until SIGTERM or SIGINT, then stops the server.
void ServeUntilSignal(GrpcServer* server);

struct ClusterFlags {
  int ps = 1;
  int workers = 2;
  std::string mode = "between-sync";
  int max_restarts = 3;                 // Per task killed by a signal.
  std::vector<std::string> train_args;  // Passed to every task's `dflow train`.
  SecurityFlags security;               // Passed to every task.
  // Throwaway CA, certificate and token in a temporary directory, passed to
  // every task and removed at the end (with any of `security`: refused).
  bool secure = false;
};

// Runs a training cluster as local processes (see cluster_command.cc).
absl::Status ClusterCommand(const ClusterFlags& flags);

struct DataConvertFlags {
  std::string format = "tfrecord";
  std::string out_dir;
  int shards = 4;
  std::string data_dir;  // "": the Debian package's Fashion-MNIST
};

// `dflow data convert`: Fashion-MNIST as TFRecord files (train/tfrecord_input.h).
absl::Status DataConvertCommand(const DataConvertFlags& flags);

// Lists registered ops and the device types and dtypes of their kernels.
absl::Status ListOps(bool as_json);
// Prints every op the GraphDef at `path` uses (in its library's functions
// too) that dflow has not registered, with the nodes using it; NOT_FOUND if
// there are any.
absl::Status CheckOps(const std::string& path);

// Trains a model (see dflow/train/trainer.h), printing live progress on
// stderr and a summary on stdout. With a cluster it first starts its task's
// server: a ps task then only serves (until SIGTERM), a worker trains
// through it (dflow/train/cluster_trainer.h).
// `security`: what the task's server requires and its clients present.
absl::Status TrainCommand(const TrainOptions& options, const SecurityFlags& security = {});

}  // namespace dflow::cli

#endif  // DFLOW_TOOLS_DFLOW_COMMANDS_H_
