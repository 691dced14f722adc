// MasterSession: one client session on a task's master. It holds the
// session's graph and the devices found at creation (on every task the
// session's device_filters allow), and per distinct (feeds, fetches,
// targets) signature it, once:
//   1. rewrites the graph (feeds -> client-terminated _Recv, fetches ->
//      client-terminated _Send on the master task's CPU) and prunes it,
//   2. places it over the session's devices (stateful nodes keep the device
//      they got first, so every signature sees the same variables),
//   3. partitions it by task with _Send/_Recv pairs, and
//   4. registers each partition with its task's worker.
// Every step then runs those partitions with one RunGraph per task under a
// fresh random step id; the first error aborts the others' steps and the
// root cause is what the client sees. Each step's worker state is dropped
// afterwards with CleanupGraph (asynchronously).
//
// Thread-safe: steps may run concurrently.
#ifndef DFLOW_DISTRIBUTED_MASTER_SESSION_H_
#define DFLOW_DISTRIBUTED_MASTER_SESSION_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "dflow/distributed/master_env.h"
#include "dflow/framework/device.h"
#include "dflow/proto/master.pb.h"
#include "dflow/runtime/graph.h"
#include "dflow/runtime/session_util.h"

namespace dflow {

class MasterSession : public std::enable_shared_from_this<MasterSession> {
 public:
  // `devices` are the session's devices, owned here; the master task's host
  // CPU must be among them. `env` (not owned) must outlive the session.
  MasterSession(std::string handle, const MasterEnv* env, tensorflow::ConfigProto config,
                std::vector<std::unique_ptr<Device>> devices);
  ~MasterSession();
  MasterSession(const MasterSession&) = delete;
  MasterSession& operator=(const MasterSession&) = delete;

  const std::string& handle() const { return handle_; }

  // Opens a worker session on every task of the session, then installs
  // `graph` (InvalidArgument when it does not import).
  absl::Status Create(const tensorflow::GraphDef& graph, absl::Time deadline);
  // Adds nodes; FailedPrecondition when current_graph_version is stale,
  // InvalidArgument for a node name already in the graph.
  absl::Status Extend(const tensorflow::ExtendSessionRequest& req,
                      tensorflow::ExtendSessionResponse* resp);
  // `feed_values` is empty (the values are in `req`) or holds one value per
  // feed of `req` (whose feeds then carry names only).
  void RunStepAsync(absl::Time deadline, const tensorflow::RunStepRequest* req,
                    std::vector<Tensor> feed_values, tensorflow::RunStepResponse* resp,
                    StatusCallback done);
  absl::Status MakeCallable(const tensorflow::MakeCallableRequest& req,
                            tensorflow::MakeCallableResponse* resp);
  void RunCallableAsync(absl::Time deadline, const tensorflow::RunCallableRequest* req,
                        tensorflow::RunCallableResponse* resp, StatusCallback done);
  // InvalidArgument for an unknown handle.
  absl::Status ReleaseCallable(const tensorflow::ReleaseCallableRequest& req);
  // The session's devices: those of the master's task as local_device.
  void ListDevices(tensorflow::ListDevicesResponse* resp) const;
  // Deletes the worker sessions (and with them every registered graph) and
  // cleans up the finished steps still waiting for a RunGraph to carry their
  // cleanup, at best effort: OK even when a task is gone or does not answer within 2 s
  // (a dead task holds no session). Later calls fail with Cancelled.
  // Idempotent.
  absl::Status Close(absl::Time deadline);

  // The deadline of a call made at `call_deadline` under `options`
  // (RunOptions.timeout_in_ms, else config.operation_timeout_in_ms).
  absl::Time StepDeadline(absl::Time call_deadline, const tensorflow::RunOptions& options) const;
  // Number of signatures prepared so far.
  int num_plans() const;
  // Whether `req`'s signature is prepared: then RunStepAsync waits on no
  // worker before it returns (its RunGraph calls are asynchronous), where a
  // new signature registers its partitions first.
  bool HasPlanFor(const tensorflow::RunStepRequest& req) const;

 private:
  struct Plan;  // The registered partitions of one signature.
  struct Step;  // One step in flight.
  using Feeds = std::vector<std::pair<std::string, Tensor>>;  // Decoded, in the caller's order.
  // Called with the fetched tensors in fetch order (owned by the step).
  using StepDone =
      std::function<void(const absl::Status&, std::vector<tensorflow::TensorProto*>& fetches)>;

  // With `step_stats` (may be null; borrowed until `done`) the step is traced: every
  // part records its devices, and they and the master's RunGraph calls are
  // merged into *step_stats before `done`.
  void RunAsync(absl::Time deadline, const Feeds& feeds, const std::vector<std::string>& fetches,
                const std::vector<std::string>& targets, tensorflow::StepStats* step_stats,
                StepDone done);
  struct Signature;
  static absl::StatusOr<Signature> Canonicalize(const Feeds& feeds,
                                                const std::vector<std::string>& fetches);
  // The step's RunGraph requests, its fed values and its fetch order.
  absl::Status BuildRequests(const Feeds& feeds, const Signature& sig, Step* step);
  // Records the step as in flight, with the deferred cleanups its RunGraph
  // calls carry; false when the session is closed.
  bool Admit(const std::shared_ptr<Step>& step);
  // Runs every part; the first error aborts the others.
  void FanOut(const std::shared_ptr<Step>& step);
  // Traced steps: the parts' device stats and one row of RunGraph calls.
  void MergeStepStats(Step* step) const;
  // Appends `graph`'s nodes to the session's graph.
  absl::Status MergeGraph(const tensorflow::GraphDef& graph) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What a plan is built for (sorted, unique names) and its key in plans_.
  struct PlanNames {
    std::vector<std::string> feeds, fetches, targets;
    std::string key;
  };
  static PlanNames NamesOfPlan(const Signature& sig, const std::vector<std::string>& targets);
  absl::StatusOr<std::shared_ptr<const Plan>> GetOrCreatePlan(const PlanNames& names,
                                                              absl::Time deadline);
  absl::StatusOr<std::shared_ptr<const Plan>> BuildPlan(const std::vector<std::string>& feeds,
                                                        const std::vector<std::string>& fetches,
                                                        const std::vector<std::string>& targets,
                                                        absl::Time deadline);
  // Rewrites `g` (the session's graph) for the signature and places it.
  absl::StatusOr<std::unique_ptr<Graph>> PlaceForPlan(std::unique_ptr<Graph> g,
                                                      const std::vector<std::string>& feeds,
                                                      const std::vector<std::string>& fetches,
                                                      const std::vector<std::string>& targets);
  // Partitions `placed` by task (and frees it) and registers the parts.
  absl::Status RegisterPartitions(std::unique_ptr<Graph> placed, absl::Time deadline, Plan* plan);
  // Gives up one count on the step (a part's, or FanOut's while it starts
  // them); the last one finishes it.
  void Release(const std::shared_ptr<Step>& step);
  void FinishStep(const std::shared_ptr<Step>& step);
  // Sends CleanupGraph for `step_id` to every part, without waiting.
  static void CleanupStep(const Plan& plan, int64_t step_id);
  static void CleanupGraphOn(WorkerInterface& worker, int64_t step_id);
  // The tasks this session spans, with their workers.
  std::vector<std::string> Tasks() const;
  WorkerInterface* WorkerFor(const std::string& task) const;

  const std::string handle_;
  const MasterEnv* const env_;  // Not owned.
  const tensorflow::ConfigProto config_;
  const std::vector<std::unique_ptr<Device>> devices_;
  Device* client_device_ = nullptr;  // The master task's host CPU, in devices_.

  SignatureCache<Plan> plans_;  // Builds one plan at a time.
  mutable absl::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  int64_t graph_version_ ABSL_GUARDED_BY(mu_) = 0;
  // The session's graph, replaced whole by ExtendSession; null once closed.
  // Only the GraphDef is kept: each signature imports its own Graph from it
  // (a kept Graph would hold 1.6x the GraphDef's bytes; importing costs
  // about twice a clone, 0.56 s against 0.29 s for 200k nodes, once per
  // signature: bench/graph_memory_bench).
  std::shared_ptr<const tensorflow::GraphDef> graph_def_ ABSL_GUARDED_BY(mu_) =
      std::make_shared<const tensorflow::GraphDef>();
  // Steps running now, which Close aborts (a step may wait on a queue for
  // ever; TensorFlow's master cancels them too).
  absl::flat_hash_map<int64_t, std::weak_ptr<Step>> in_flight_ ABSL_GUARDED_BY(mu_);
  // Per task: finished steps to clean up with the task's next RunGraph (a
  // dflow worker's: RegisterGraphResponse.dflow_cleanup_with_run_graph), at most
  // kMaxDeferredCleanups; Close sends what is left as CleanupGraph calls.
  static constexpr size_t kMaxDeferredCleanups = 64;
  absl::flat_hash_map<std::string, std::vector<int64_t>> deferred_cleanups_ ABSL_GUARDED_BY(mu_);
  // Stateful node name -> the device it was first placed on.
  absl::flat_hash_map<std::string, std::string> stateful_placements_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<int64_t, tensorflow::CallableOptions> callables_ ABSL_GUARDED_BY(mu_);
  int64_t next_callable_ ABSL_GUARDED_BY(mu_) = 1;
};

// Adds `devices` to `resp`: those of `local_task` as local_device, the
// others as remote_device.
void AddDevices(const std::vector<std::unique_ptr<Device>>& devices, const std::string& local_task,
                tensorflow::ListDevicesResponse* resp);

}  // namespace dflow

#endif  // DFLOW_DISTRIBUTED_MASTER_SESSION_H_
