// The dflow subcommands; main.cc parses flags (CLI11 stays in that one file).
#ifndef DFLOW_TOOLS_DFLOW_COMMANDS_H_
#define DFLOW_TOOLS_DFLOW_COMMANDS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "dflow/train/trainer.h"

namespace dflow::cli {

struct RunGraphFlags {
  std::string graph_path;            // .pb (binary) or .pbtxt (text)
  std::vector<std::string> fetches;  // "name:0"
  std::vector<std::string> feeds;    // "name=JSON"
  std::vector<std::string> targets;
  std::string config_path;           // ConfigProto in text format
  std::string session_target;        // "" (in-process) or grpc://host:port
};

// Prints one JSON object per fetched tensor on stdout:
//   {"name":"y:0","dtype":"float","shape":[2],"values":[1,2]}
absl::Status RunGraph(const RunGraphFlags& flags);

struct ServerFlags {
  std::string cluster;  // JSON or @file; empty: TF_CONFIG
  std::string job;
  int task = -1;
  int cpus = 1;  // CPU devices of the task
};

// Serves one task of a cluster (master and worker services on its port)
// until SIGTERM or SIGINT; prints its target and devices on stdout.
absl::Status ServerCommand(const ServerFlags& flags);

// Lists registered ops and the device types and dtypes of their kernels.
absl::Status ListOps(bool as_json);

// Trains a model (see dflow/train/trainer.h), printing live progress on
// stderr and a summary on stdout.
absl::Status TrainCommand(const TrainOptions& options);

}  // namespace dflow::cli

#endif  // DFLOW_TOOLS_DFLOW_COMMANDS_H_
