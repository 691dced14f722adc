// RemoteSession: a Session whose graph runs on a master, reached through any
// MasterInterface (in-process, or gRPC for a "grpc://host:port" target).
// The graph is sent with the first Create or Extend; each Run is one RunStep.
// Every call carries a deadline: RunOptions.timeout_in_ms, else
// config.operation_timeout_in_ms, else none for steps; control calls
// (CreateSession, ExtendSession, CloseSession, ListDevices) wait at most
// `control_timeout`.
//
// Thread-safe.
//
//   RemoteSession s(std::move(master), options);
//   RETURN_IF_ERROR(s.Create(graph));
//   RETURN_IF_ERROR(s.Run({{"x:0", x}}, {"y:0"}, {}, &out));
#ifndef DFLOW_DISTRIBUTED_REMOTE_SESSION_H_
#define DFLOW_DISTRIBUTED_REMOTE_SESSION_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "dflow/distributed/master_interface.h"
#include "dflow/runtime/session.h"

namespace dflow {

class RemoteSession : public Session {
 public:
  RemoteSession(std::shared_ptr<MasterInterface> master, SessionOptions options,
                absl::Duration control_timeout = absl::Seconds(60));
  ~RemoteSession() override;  // Closes the session.

  absl::Status Create(const tensorflow::GraphDef& graph) override;
  absl::Status Extend(const tensorflow::GraphDef& graph) override;
  absl::Status Run(const tensorflow::RunOptions& options,
                   const std::vector<std::pair<std::string, Tensor>>& feeds,
                   const std::vector<std::string>& fetches, const std::vector<std::string>& targets,
                   std::vector<Tensor>* outputs, tensorflow::RunMetadata* metadata) override;
  using Session::Run;
  absl::StatusOr<std::vector<DeviceInfo>> ListDevices() override;
  absl::Status Close() override;
  // Clears `containers` (all when empty) on every task of the cluster and
  // closes every session of the master (TensorFlow's Session.reset).
  absl::Status Reset(const std::vector<std::string>& containers);

  const std::string& handle() const { return handle_; }

 private:
  CallOptions Control() const { return CallOptions::WithTimeout(control_timeout_); }

  const std::shared_ptr<MasterInterface> master_;
  const SessionOptions options_;
  const absl::Duration control_timeout_;

  absl::Mutex mu_;
  std::string handle_ ABSL_GUARDED_BY(mu_);  // Empty before the graph is sent.
  int64_t graph_version_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace dflow

#endif  // DFLOW_DISTRIBUTED_REMOTE_SESSION_H_
