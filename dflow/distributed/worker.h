// Worker: the in-process worker service of one task, over the task's devices.
//
// Worker sessions hold registered graphs. RegisterGraph takes the GraphDef of
// this task's partition (nodes placed on this task's devices, cut edges as
// _Send/_Recv), splits it by local device and builds one executor per device.
// RunGraph runs them for one step with a per-step rendezvous shared by all
// local devices, as TensorFlow's RunGraphRequest does:
//   - `send`: NamedTensorProto whose name is a rendezvous key; the value is
//     sent into the step's rendezvous before the executors start (it feeds a
//     _Recv with client_terminated=true);
//   - `recv_key`: rendezvous keys read back after the step (values of
//     _Send nodes with client_terminated=true), returned in `recv`.
// The step rendezvous lives until CleanupGraph(step_id), so RecvTensor can
// serve a peer (parked until the local _Send runs). A _Recv whose source
// device is on another task pulls the tensor with RecvTensor from that task's
// WorkerInterface, found through WorkerOptions::worker_for_task.
//
//   DeviceMgr devices(...);                // "/job:worker/replica:0/task:0/..."
//   Worker worker(&devices, {});
//   RETURN_IF_ERROR(worker.RegisterGraph(req, &resp));
//   RETURN_IF_ERROR(worker.RunGraph(run, &out, CallOptions::WithTimeout(absl::Seconds(10))));
#ifndef DFLOW_DISTRIBUTED_WORKER_H_
#define DFLOW_DISTRIBUTED_WORKER_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "dflow/distributed/worker_interface.h"
#include "dflow/framework/thread_pool.h"
#include "dflow/runtime/device_mgr.h"

namespace dflow {

class DeadlineTimer;
class StepRendezvous;

struct WorkerOptions {
  // The worker of another task ("/job:ps/replica:0/task:0"), or nullptr when
  // unknown. Unset: tensors cannot come from other tasks.
  std::function<WorkerInterface*(const std::string& task_name)> worker_for_task;
  // Runs kernels. Null: the worker makes its own pool.
  ThreadPool* inter_op_pool = nullptr;
  // RunGraph and RecvTensor calls that carry no deadline (TensorFlow's would
  // wait forever) get one this far out; a RecvTensor gets its step's
  // deadline instead when the step has one here.
  absl::Duration default_timeout = absl::Hours(1);
  // RecvTensor calls waiting for their tensor at once (over gRPC and the data
  // plane together); more are RESOURCE_EXHAUSTED. Each holds its caller's
  // call and a deadline timer until the tensor comes, so a peer asking for
  // tensors of steps that never run cannot grow this task without bound.
  int max_waiting_recvs = 65536;
  // RegisterGraph with a graph of more nodes (its library functions'
  // included) is ResourceExhausted before anything is built. Zero or less:
  // no limit. A master's partition holds a _Send/_Recv per tensor it
  // exchanges besides its share of the session's nodes, so a server gives
  // its worker twice its master's limit.
  int64_t max_graph_nodes = 0;
};

class Worker : public WorkerInterface {
 public:
  // `devices` (not owned) must outlive the worker and be non-empty, all of
  // one task.
  Worker(DeviceMgr* devices, WorkerOptions options);
  ~Worker() override;
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // "/job:worker/replica:0/task:0"
  const std::string& task_name() const { return task_name_; }
  DeviceMgr* device_mgr() const { return devices_; }

  void GetStatusAsync(const CallOptions& opts, const tensorflow::GetStatusRequest* req,
                      tensorflow::GetStatusResponse* resp, StatusCallback done) override;
  // InvalidArgument for an empty handle, AlreadyExists for a known one.
  void CreateWorkerSessionAsync(const CallOptions& opts,
                                const tensorflow::CreateWorkerSessionRequest* req,
                                tensorflow::CreateWorkerSessionResponse* resp,
                                StatusCallback done) override;
  // Frees the session's graphs; an unknown handle is not an error.
  void DeleteWorkerSessionAsync(const CallOptions& opts,
                                const tensorflow::DeleteWorkerSessionRequest* req,
                                tensorflow::DeleteWorkerSessionResponse* resp,
                                StatusCallback done) override;
  // Nodes without a device go to the host CPU; a node on a device this task
  // lacks fails with InvalidArgument naming node, device and local devices.
  // Requests with create_worker_session_called=false use the worker's
  // default session; with it set, an unknown session handle is Aborted
  // (TensorFlow's "the worker probably restarted").
  void RegisterGraphAsync(const CallOptions& opts, const tensorflow::RegisterGraphRequest* req,
                          tensorflow::RegisterGraphResponse* resp, StatusCallback done) override;
  // Aborted for an unknown graph handle, as TensorFlow.
  void DeregisterGraphAsync(const CallOptions& opts, const tensorflow::DeregisterGraphRequest* req,
                            tensorflow::DeregisterGraphResponse* resp,
                            StatusCallback done) override;
  // The first failing executor cancels the others; the error returned is the
  // root cause ("[node 'x' (Op)] ..."), not a cancellation it caused. At
  // opts.deadline (options.default_timeout when none) the step is aborted
  // with DeadlineExceeded naming the keys still awaited. Malformed keys and undecodable tensors are
  // InvalidArgument; a recv_key the step did not produce is InvalidArgument naming it. With
  // store_errors_in_response_body the error goes into the response instead.
  void RunGraphAsync(const CallOptions& opts, const tensorflow::RunGraphRequest* req,
                     tensorflow::RunGraphResponse* resp, StatusCallback done) override;
  void RunGraphWithTensorsAsync(const CallOptions& opts, const tensorflow::RunGraphRequest* req,
                                TensorSends sends, tensorflow::RunGraphResponse* resp,
                                StatusCallback done) override;
  // Drops the step's rendezvous (parked RecvTensor calls fail with Cancelled).
  void CleanupGraphAsync(const CallOptions& opts, const tensorflow::CleanupGraphRequest* req,
                         tensorflow::CleanupGraphResponse* resp, StatusCallback done) override;
  // Clears the named resource containers on every device (the default
  // container when none is named, as TensorFlow).
  void CleanupAllAsync(const CallOptions& opts, const tensorflow::CleanupAllRequest* req,
                       tensorflow::CleanupAllResponse* resp, StatusCallback done) override;
  // Serves a tensor sent on this task, waiting for its _Send if needed (the
  // step's rendezvous is created if the step has not started here yet). The
  // result shares the sent tensor's buffer (no copy).
  // InvalidArgument for a malformed key or a source device not on this task;
  // Aborted when the key's source incarnation is not the device's (the task
  // restarted); DeadlineExceeded at opts.deadline (when none: the step's, or
  // options.default_timeout). The state of a step that never ran here goes
  // when its last RecvTensor is answered.
  void RecvTensorAsync(const CallOptions& opts, const tensorflow::RecvTensorRequest* req,
                       RecvTensorResult* resp, StatusCallback done) override;

  // Number of steps whose rendezvous is held (for tests and leak checks).
  int NumLiveSteps() const;
  // RecvTensor calls waiting for their tensor now.
  int NumWaitingRecvs() const { return waiting_recvs_.load(); }

 private:
  struct GraphItem;
  struct Session;
  struct RunState;
  struct Step {
    std::shared_ptr<StepRendezvous> rendez;
    bool ran = false;       // A RunGraph of the step came.
    int waiting_recvs = 0;  // Its RecvTensor calls not answered yet.
  };
  enum class StepUse { kRun, kRecv };

  absl::StatusOr<std::shared_ptr<Session>> FindSession(const std::string& handle,
                                                       bool create_called) const;
  absl::StatusOr<std::shared_ptr<const GraphItem>> FindGraph(const std::string& session,
                                                             bool create_called,
                                                             const std::string& graph) const;
  absl::StatusOr<std::shared_ptr<GraphItem>> BuildGraph(const tensorflow::GraphDef& def);
  std::shared_ptr<StepRendezvous> FindOrCreateStep(int64_t step_id, StepUse use);
  // Forgets the step (CleanupGraph): its rendezvous is aborted and later
  // calls for it fail at once.
  void CleanupStep(int64_t step_id);
  // A RecvTensor of `step_id` on `rendez` was answered: forgets a step that
  // never ran once none waits on it.
  void RecvEnded(int64_t step_id, const StepRendezvous* rendez);
  // Puts the request's sends and then `sends` into the step.
  absl::Status FeedSends(const tensorflow::RunGraphRequest& req, const TensorSends& sends,
                         StepRendezvous* rendez);
  absl::Status CollectRecvs(const tensorflow::RunGraphRequest& req, StepRendezvous* rendez,
                            tensorflow::RunGraphResponse* resp);
  // A running step's deadline: on it the step fails, naming what it waits for.
  void ScheduleStepTimeout(const std::shared_ptr<RunState>& run, absl::Time deadline);
  // Runs every executor of the step's graph; the last one done finishes it.
  void StartExecutors(const std::shared_ptr<RunState>& run, absl::Time deadline);
  void FinishRun(const std::shared_ptr<RunState>& run);

  // Held by every RunGraph in flight; the last holder tells ~Worker.
  struct Running {
    std::shared_ptr<absl::Notification> none_left;
    ~Running() {
      if (none_left != nullptr) none_left->Notify();
    }
  };

  DeviceMgr* const devices_;
  const WorkerOptions options_;
  std::string task_name_;
  std::unique_ptr<ThreadPool> own_pool_;
  ThreadPool* pool_;
  std::unique_ptr<DeadlineTimer> timer_;
  std::atomic<int64_t> next_graph_id_{1};
  std::atomic<int> waiting_recvs_{0};  // Bounded by options_.max_waiting_recvs.
  std::shared_ptr<Running> running_ = std::make_shared<Running>();

  mutable absl::Mutex mu_;
  std::shared_ptr<Session> default_session_;
  absl::flat_hash_map<std::string, std::shared_ptr<Session>> sessions_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<int64_t, Step> steps_ ABSL_GUARDED_BY(mu_);
  // The latest cleaned-up steps (at most kRememberedSteps): a RunGraph or
  // RecvTensor arriving after its step's CleanupGraph (an aborted step's
  // straggler) fails at once instead of waiting for a step that is over.
  static constexpr size_t kRememberedSteps = 1 << 16;
  absl::flat_hash_set<int64_t> cleaned_steps_ ABSL_GUARDED_BY(mu_);
  std::deque<int64_t> cleaned_order_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dflow

#endif  // DFLOW_DISTRIBUTED_WORKER_H_
