// LocalRendezvous: the in-process rendezvous of one step. A Send parks its
// value until the matching Recv arrives; a Recv parks its callback until the
// Send arrives. Values are handed over by sharing the Tensor's buffer, never
// copied. Thread-safe.
//
//   LocalRendezvous rendez;
//   RETURN_IF_ERROR(rendez.Send(key, tensor, /*is_dead=*/false));
//   rendez.RecvAsync(key, [](const absl::Status& s, const Tensor& t, bool dead) {...});
#ifndef DFLOW_RUNTIME_RENDEZVOUS_LOCAL_H_
#define DFLOW_RUNTIME_RENDEZVOUS_LOCAL_H_

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "dflow/framework/rendezvous.h"

namespace dflow {

class LocalRendezvous : public Rendezvous {
 public:
  LocalRendezvous() = default;
  // Fails every Recv still waiting with Cancelled.
  ~LocalRendezvous() override;
  LocalRendezvous(const LocalRendezvous&) = delete;
  LocalRendezvous& operator=(const LocalRendezvous&) = delete;

  // AlreadyExists naming the key when it was already sent this step; the
  // abort status after StartAbort.
  absl::Status Send(const ParsedKey& key, const Tensor& value, bool is_dead) override;
  // `done` runs at once when the value is here (or the rendezvous aborted),
  // else on the thread of the matching Send or of StartAbort. A second Recv
  // of one key fails with AlreadyExists.
  void RecvAsync(const ParsedKey& key, DoneCallback done) override;
  // The first call wins; `status` must be non-OK (OK becomes Aborted).
  void StartAbort(const absl::Status& status) override;

  // Keys whose Recv is waiting for a Send, sorted (for "stalled step" errors).
  std::vector<std::string> PendingRecvKeys() const;

 private:
  enum class State { kSent, kWaiting, kDone };
  struct Item {
    State state = State::kDone;
    Tensor value;          // kSent
    bool is_dead = false;  // kSent
    DoneCallback waiter;   // kWaiting
  };

  mutable absl::Mutex mu_;
  absl::Status abort_status_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, Item> table_ ABSL_GUARDED_BY(mu_);
};

}  // namespace dflow

#endif  // DFLOW_RUNTIME_RENDEZVOUS_LOCAL_H_
