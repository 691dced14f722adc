// DirectSession: runs graphs in this process over the local devices.
//
// Per distinct (feeds, fetches, targets) signature the graph is rewritten
// (feeds -> _Arg, fetches -> _Retval, pruned), placed, partitioned by device
// and turned into one Executor per device, once; every Run then only feeds
// a fresh rendezvous and call frame to those executors. Stateful nodes keep
// the device they got first, so every signature sees the same variables.
// Variables live in the devices' resource managers until Close().
//
// Thread-safe: Run may be called from several threads at once.
#ifndef DFLOW_RUNTIME_DIRECT_SESSION_H_
#define DFLOW_RUNTIME_DIRECT_SESSION_H_

#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "dflow/framework/thread_pool.h"
#include "dflow/runtime/device_mgr.h"
#include "dflow/runtime/executor.h"
#include "dflow/runtime/graph.h"
#include "dflow/runtime/session.h"
#include "dflow/runtime/session_util.h"

namespace dflow {

class DirectSession : public Session {
 public:
  // Creates the local devices (job "localhost", replica 0, task 0) and the
  // inter-op pool.
  static absl::StatusOr<std::unique_ptr<DirectSession>> New(const SessionOptions& options);
  ~DirectSession() override;

  absl::Status Create(const tensorflow::GraphDef& graph) override;
  absl::Status Extend(const tensorflow::GraphDef& graph) override;
  // Errors: NotFound / InvalidArgument naming an unknown or malformed feed,
  // fetch or target; InvalidArgument for a feed whose dtype or shape does
  // not fit; DeadlineExceeded (naming the tensors still awaited) once
  // RunOptions.timeout_in_ms or config.operation_timeout_in_ms passes; else
  // the first error of the step, "[Op 'node'] ..." first.
  absl::Status Run(const tensorflow::RunOptions& options,
                   const std::vector<std::pair<std::string, Tensor>>& feeds,
                   const std::vector<std::string>& fetches, const std::vector<std::string>& targets,
                   std::vector<Tensor>* outputs, tensorflow::RunMetadata* metadata) override;
  using Session::Run;
  absl::StatusOr<std::vector<DeviceInfo>> ListDevices() override;
  absl::Status Close() override;

  const DeviceMgr& device_mgr() const { return *device_mgr_; }
  // Signatures prepared so far (each one built its executors once).
  int num_cached_signatures() const;

 private:
  struct Signature;  // Executors and feed/fetch layout of one signature.

  DirectSession(const SessionOptions& options, std::unique_ptr<DeviceMgr> devices);
  absl::Status ExtendLocked(const tensorflow::GraphDef& graph) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::shared_ptr<const Signature>> GetOrCreateSignature(
      const std::vector<std::string>& feeds, const std::vector<std::string>& fetches,
      const std::vector<std::string>& targets);
  absl::StatusOr<std::shared_ptr<const Signature>> BuildSignature(
      const std::vector<std::string>& feeds, const std::vector<std::string>& fetches,
      const std::vector<std::string>& targets);
  absl::StatusOr<std::unique_ptr<Graph>> PlaceForSignature(const std::vector<std::string>& feeds,
                                                           const std::vector<std::string>& fetches,
                                                           const std::vector<std::string>& targets);
  // With `step_stats` the step is traced: one DeviceStepStats per device
  // is added to it.
  absl::Status RunSignature(const Signature& sig, std::vector<Tensor> args, absl::Time deadline,
                            std::vector<Tensor>* retvals,
                            tensorflow::StepStats* step_stats = nullptr);

  const SessionOptions options_;
  const std::unique_ptr<DeviceMgr> device_mgr_;
  std::unique_ptr<ThreadPool> own_pool_;  // When inter_op_parallelism_threads > 0.
  ThreadPool* inter_op_pool_;             // null: run inline
  std::atomic<int64_t> next_step_id_{1};

  // Builds one signature at a time, so stateful placements stay consistent.
  SignatureCache<Signature> signatures_;
  mutable absl::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  tensorflow::GraphDef graph_def_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const Graph> graph_ ABSL_GUARDED_BY(mu_);  // null before Create
  // Stateful node name -> device it was first placed on.
  absl::flat_hash_map<std::string, std::string> stateful_placements_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dflow

#endif  // DFLOW_RUNTIME_DIRECT_SESSION_H_
