#include "dflow/distributed/step_rendezvous.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dflow/framework/status.h"

namespace dflow {

StepRendezvous::StepRendezvous(int64_t step_id, std::string task_name, WorkerLookup lookup)
    : step_id_(step_id), task_name_(std::move(task_name)), lookup_(std::move(lookup)) {}

absl::Status StepRendezvous::Send(const ParsedKey& key, const Tensor& value, bool is_dead) {
  return local_.Send(key, value, is_dead);
}

bool StepRendezvous::IsRemote(const ParsedKey& key) const {
  return lookup_ != nullptr && key.src.has_job && key.src.TaskName() != task_name_;
}

void StepRendezvous::RecvAsync(const ParsedKey& key, DoneCallback done) {
  if (IsRemote(key)) {
    RecvRemoteAsync(key, std::move(done));
  } else {
    local_.RecvAsync(key, std::move(done));
  }
}

void StepRendezvous::RecvLocalAsync(const ParsedKey& key, DoneCallback done) {
  local_.RecvAsync(key, std::move(done));
}

void StepRendezvous::StartAbort(const absl::Status& status) {
  local_.StartAbort(status);
  std::vector<DoneCallback> answered;
  absl::Status first;
  {
    absl::MutexLock l(&in_flight_->mu);
    if (in_flight_->aborted.ok()) in_flight_->aborted = status;
    first = in_flight_->aborted;
    for (auto& [id, recv] : in_flight_->recvs) answered.push_back(std::move(recv.done));
    in_flight_->recvs.clear();
  }
  for (DoneCallback& done : answered) done(first, Tensor(), false);
  // Last, so that receivers report the abort's status, not a bare cancel.
  cancellation_.StartCancel();
}

absl::Status StepRendezvous::aborted() const {
  absl::MutexLock l(&in_flight_->mu);
  return in_flight_->aborted;
}

StepRendezvous::DoneCallback StepRendezvous::InFlight::Take(uint64_t id) {
  absl::MutexLock l(&mu);
  auto it = recvs.find(id);
  if (it == recvs.end()) return nullptr;
  DoneCallback done = std::move(it->second.done);
  recvs.erase(it);
  return done;
}

std::vector<std::string> StepRendezvous::PendingRecvKeys() const {
  std::vector<std::string> out = local_.PendingRecvKeys();
  {
    absl::MutexLock l(&in_flight_->mu);
    for (const auto& [id, recv] : in_flight_->recvs) out.push_back(recv.pending);
  }
  std::sort(out.begin(), out.end());
  return out;
}

void StepRendezvous::SetDeadline(absl::Time deadline) {
  absl::MutexLock l(&mu_);
  deadline_ = std::min(deadline_, deadline);
}

absl::Time StepRendezvous::deadline() const {
  absl::MutexLock l(&mu_);
  return deadline_;
}

void StepRendezvous::RecvRemoteAsync(const ParsedKey& key, DoneCallback done) {
  const std::string task = key.src.TaskName();
  WorkerInterface* worker = lookup_(task);
  if (worker == nullptr) {
    done(absl::UnavailableError(absl::StrCat("[Rendezvous] no worker known for task ", task,
                                             " to receive '", key.full_key, "' from")),
         Tensor(), false);
    return;
  }
  struct Call {
    tensorflow::RecvTensorRequest req;
    RecvTensorResult resp;
  };
  auto call = std::make_shared<Call>();
  call->req.set_step_id(step_id_);
  call->req.set_rendezvous_key(key.full_key);
  CallOptions opts;
  {
    absl::MutexLock l(&mu_);
    // A grace second lets the step's own deadline fire first and name what
    // it still awaited; the remote call then ends soon after.
    opts.deadline = deadline_ + absl::Seconds(1);
  }
  uint64_t id = 0;
  absl::Status aborted;
  {
    absl::MutexLock l(&in_flight_->mu);
    aborted = in_flight_->aborted;
    if (aborted.ok()) {
      id = in_flight_->next_id++;
      in_flight_->recvs[id] = {absl::StrCat(key.full_key, " (from ", task, ")"), std::move(done)};
    }
  }
  if (!aborted.ok()) {
    done(aborted, Tensor(), false);
    return;
  }
  worker->RecvTensorAsync(
      opts, &call->req, &call->resp,
      [call, task, id, in_flight = in_flight_](const absl::Status& s) {
        DoneCallback done = in_flight->Take(id);
        if (done == nullptr) return;  // The step was aborted meanwhile.
        if (!s.ok()) {
          done(WithContext(s, absl::StrCat("RecvTensor from ", task)), Tensor(), false);
          return;
        }
        if (call->resp.is_dead) {
          done(absl::OkStatus(), Tensor(), true);
          return;
        }
        done(absl::OkStatus(), call->resp.tensor, false);
      });
}

}  // namespace dflow
