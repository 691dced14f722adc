// StepRendezvous: the rendezvous of one step on one worker, shared by the
// worker's devices. Sends and local receives go to a LocalRendezvous; a
// receive whose source device is on another task is pulled from that task's
// worker with RecvTensor (same step id, same key).
#ifndef DFLOW_DISTRIBUTED_STEP_RENDEZVOUS_H_
#define DFLOW_DISTRIBUTED_STEP_RENDEZVOUS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "dflow/distributed/worker_interface.h"
#include "dflow/framework/cancellation.h"
#include "dflow/runtime/rendezvous_local.h"

namespace dflow {

class StepRendezvous : public Rendezvous {
 public:
  // The worker of another task, or nullptr when unknown.
  using WorkerLookup = std::function<WorkerInterface*(const std::string& task_name)>;

  // `task_name` is this worker's task ("/job:w/replica:0/task:0"). With an
  // unset `lookup`, every key is served locally.
  StepRendezvous(int64_t step_id, std::string task_name, WorkerLookup lookup);

  absl::Status Send(const ParsedKey& key, const Tensor& value, bool is_dead) override;
  // Remote when the key's source task is not this one and `lookup` is set;
  // Unavailable naming the task when lookup knows no worker for it.
  void RecvAsync(const ParsedKey& key, DoneCallback done) override;
  // Always from the local table (what a RecvTensor caller or a fetch reads).
  void RecvLocalAsync(const ParsedKey& key, DoneCallback done);
  // Fails pending and later receives, local and remote, with `status` (the
  // first abort wins); a remote receive in flight is answered at once, its
  // late reply dropped. Cancels the step's kernels (cancellation()).
  void StartAbort(const absl::Status& status) override;
  // The step's cancellation: what its waiting kernels (queues,
  // accumulators) register with; cancelled by StartAbort.
  CancellationManager* cancellation() { return &cancellation_; }
  // OK until StartAbort, then its status.
  absl::Status aborted() const;

  // Remote receives started from now on carry the earliest deadline given
  // (plus one second of grace).
  void SetDeadline(absl::Time deadline);
  // The earliest deadline given; InfiniteFuture when none.
  absl::Time deadline() const;

  // Keys still awaited, local and remote ("<key> (from <task>)"), sorted.
  std::vector<std::string> PendingRecvKeys() const;
  int64_t step_id() const { return step_id_; }

 private:
  bool IsRemote(const ParsedKey& key) const;
  void RecvRemoteAsync(const ParsedKey& key, DoneCallback done);

  const int64_t step_id_;
  const std::string task_name_;
  const WorkerLookup lookup_;
  LocalRendezvous local_;
  CancellationManager cancellation_;
  mutable absl::Mutex mu_;
  absl::Time deadline_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  // Remote receives in flight, by call id; shared with their callbacks,
  // which may run after this rendezvous is gone.
  struct InFlight {
    struct Recv {
      std::string pending;  // "<key> (from <task>)"
      DoneCallback done;
    };
    absl::Mutex mu;
    absl::Status aborted ABSL_GUARDED_BY(mu);
    uint64_t next_id ABSL_GUARDED_BY(mu) = 0;
    absl::flat_hash_map<uint64_t, Recv> recvs ABSL_GUARDED_BY(mu);
    // Removes call `id`; its callback, or nullptr once abort answered it.
    DoneCallback Take(uint64_t id);
  };
  std::shared_ptr<InFlight> in_flight_ = std::make_shared<InFlight>();
};

}  // namespace dflow

#endif  // DFLOW_DISTRIBUTED_STEP_RENDEZVOUS_H_
