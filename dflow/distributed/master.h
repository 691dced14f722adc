// Master: the in-process master service of one task. CreateSession finds
// the session's devices (GetStatus on every task its device_filters allow,
// always including this task, under a deadline) and opens a MasterSession;
// the other calls find the session by handle and delegate to it. Reset
// closes every session of this master and clears resource containers
// (variables) on the tasks the filters allow. Sessions are bounded: at most
// env.max_sessions, and one unused for env.session_gc is closed by a
// collector thread (a later call on it is Aborted, as for a closed one).
//
// Thread-safe.
//
//   Master master(env);
//   tensorflow::CreateSessionResponse created;
//   RETURN_IF_ERROR(master.CreateSession(req, &created,
//   CallOptions::WithTimeout(absl::Seconds(30))));
#ifndef DFLOW_DISTRIBUTED_MASTER_H_
#define DFLOW_DISTRIBUTED_MASTER_H_

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "dflow/distributed/master_env.h"
#include "dflow/distributed/master_interface.h"
#include "dflow/framework/thread_pool.h"

namespace dflow {

class Device;
class MasterSession;

class Master : public MasterInterface {
 public:
  explicit Master(MasterEnv env);
  ~Master() override;  // Closes the remaining sessions.
  Master(const Master&) = delete;
  Master& operator=(const Master&) = delete;

  // Unavailable naming the task when a task does not answer discovery
  // within env.discovery_timeout; InvalidArgument for a bad filter or graph;
  // ResourceExhausted when env.max_sessions are open.
  void CreateSessionAsync(const CallOptions& opts, const tensorflow::CreateSessionRequest* req,
                          tensorflow::CreateSessionResponse* resp, StatusCallback done) override;
  // The methods below fail with Aborted for an unknown session handle (the
  // master may have restarted), as TensorFlow does.
  void ExtendSessionAsync(const CallOptions& opts, const tensorflow::ExtendSessionRequest* req,
                          tensorflow::ExtendSessionResponse* resp, StatusCallback done) override;
  // Unimplemented: dflow has no partial runs.
  void PartialRunSetupAsync(const CallOptions& opts, const tensorflow::PartialRunSetupRequest* req,
                            tensorflow::PartialRunSetupResponse* resp,
                            StatusCallback done) override;
  // With store_errors_in_response_body the step's error goes into the
  // response and the call itself succeeds.
  void RunStepAsync(const CallOptions& opts, const tensorflow::RunStepRequest* req,
                    tensorflow::RunStepResponse* resp, StatusCallback done) override;
  void RunStepWithTensorsAsync(const CallOptions& opts, tensorflow::RunStepRequest* req,
                               std::vector<Tensor> feed_values, tensorflow::RunStepResponse* resp,
                               StatusCallback done) override;
  void CloseSessionAsync(const CallOptions& opts, const tensorflow::CloseSessionRequest* req,
                         tensorflow::CloseSessionResponse* resp, StatusCallback done) override;
  // With a session handle: the session's devices; without: every device of
  // the cluster (this task's as local_device).
  void ListDevicesAsync(const CallOptions& opts, const tensorflow::ListDevicesRequest* req,
                        tensorflow::ListDevicesResponse* resp, StatusCallback done) override;
  void ResetAsync(const CallOptions& opts, const tensorflow::ResetRequest* req,
                  tensorflow::ResetResponse* resp, StatusCallback done) override;
  void MakeCallableAsync(const CallOptions& opts, const tensorflow::MakeCallableRequest* req,
                         tensorflow::MakeCallableResponse* resp, StatusCallback done) override;
  void RunCallableAsync(const CallOptions& opts, const tensorflow::RunCallableRequest* req,
                        tensorflow::RunCallableResponse* resp, StatusCallback done) override;
  void ReleaseCallableAsync(const CallOptions& opts, const tensorflow::ReleaseCallableRequest* req,
                            tensorflow::ReleaseCallableResponse* resp,
                            StatusCallback done) override;

  int NumSessions() const;

 private:
  // Starts the step on the master's thread pool, or, for a caller in this
  // process that waits anyway, on its own thread (one wake-up less a step).
  // `feed_values` is empty or has one value per feed of `req` (whose feeds
  // then carry names only).
  void StartStep(const CallOptions& opts, const tensorflow::RunStepRequest* req,
                 std::vector<Tensor> feed_values, tensorflow::RunStepResponse* resp,
                 StatusCallback done, bool on_caller_thread);
  // The devices of every task that `filters` allow (this task always),
  // asked concurrently with GetStatus.
  absl::StatusOr<std::vector<std::unique_ptr<Device>>> DiscoverDevices(
      const std::vector<std::string>& filters, absl::Time deadline);
  // Tasks of the cluster that `filters` (device specs) allow; this task always.
  absl::StatusOr<std::vector<std::string>> FilteredTasks(const std::vector<std::string>& filters);
  // The session, marked used now; Aborted when unknown.
  absl::StatusOr<std::shared_ptr<MasterSession>> FindSession(const std::string& handle);
  // Closes the sessions unused for env_.session_gc, every so often, until
  // the master is destroyed.
  void CollectIdleSessions();

  struct Entry {
    std::shared_ptr<MasterSession> session;
    absl::Time last_used;
  };

  const MasterEnv env_;
  // Runs the calls that wait on workers (discovery, registration, steps).
  std::unique_ptr<ThreadPool> pool_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> sessions_ ABSL_GUARDED_BY(mu_);
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  std::thread collector_;  // Runs CollectIdleSessions when env_.session_gc > 0.
};

}  // namespace dflow

#endif  // DFLOW_DISTRIBUTED_MASTER_H_
