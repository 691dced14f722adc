// Session: runs steps of a graph. DirectSession runs in this process; a gRPC
// session (distributed/) talks to a remote master. Thread-safe: Run may be
// called from several threads at once.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<Session> s, NewDirectSession(options));
//   RETURN_IF_ERROR(s->Create(graph_def));
//   std::vector<Tensor> out;
//   RETURN_IF_ERROR(s->Run({{"x:0", x}}, {"y:0"}, {"train"}, &out));
#ifndef DFLOW_RUNTIME_SESSION_H_
#define DFLOW_RUNTIME_SESSION_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "dflow/framework/tensor.h"
#include "dflow/proto/config.pb.h"
#include "dflow/proto/graph.pb.h"

namespace dflow {

struct SessionOptions {
  // "" or "local" for an in-process session; "grpc://host:port" for a remote master.
  std::string target;
  tensorflow::ConfigProto config;
};

struct DeviceInfo {
  std::string name;         // "/job:localhost/replica:0/task:0/device:CPU:0"
  std::string device_type;  // "CPU"
  int64_t memory_limit = 0;
  uint64_t incarnation = 0;
};

class Session {
 public:
  virtual ~Session() = default;

  // Installs the graph. FailedPrecondition if a graph was already created.
  virtual absl::Status Create(const tensorflow::GraphDef& graph) = 0;
  // Adds nodes to the graph (names must be new).
  virtual absl::Status Extend(const tensorflow::GraphDef& graph) = 0;
  // Feeds tensors ("node:index" or "node" = ":0"), evaluates `fetches`
  // (returned in order in *outputs) and runs `targets` for their effects.
  // `outputs` may be null when there are no fetches.
  virtual absl::Status Run(const tensorflow::RunOptions& options,
                           const std::vector<std::pair<std::string, Tensor>>& feeds,
                           const std::vector<std::string>& fetches,
                           const std::vector<std::string>& targets,
                           std::vector<Tensor>* outputs,
                           tensorflow::RunMetadata* metadata) = 0;
  absl::Status Run(const std::vector<std::pair<std::string, Tensor>>& feeds,
                   const std::vector<std::string>& fetches,
                   const std::vector<std::string>& targets, std::vector<Tensor>* outputs) {
    return Run(tensorflow::RunOptions(), feeds, fetches, targets, outputs, nullptr);
  }
  virtual absl::StatusOr<std::vector<DeviceInfo>> ListDevices() = 0;
  // Frees the session's resources; later calls fail with Cancelled.
  virtual absl::Status Close() = 0;
};

// Creates an in-process session over this process's devices
// (config.device_count{"CPU": N} gives N CPU devices).
absl::StatusOr<std::unique_ptr<Session>> NewDirectSession(const SessionOptions& options);

}  // namespace dflow

#endif  // DFLOW_RUNTIME_SESSION_H_
