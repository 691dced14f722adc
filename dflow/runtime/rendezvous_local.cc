#include "dflow/runtime/rendezvous_local.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace dflow {
namespace {

absl::Status Duplicate(absl::string_view what, const std::string& key) {
  return absl::AlreadyExistsError(
      absl::StrCat("[Rendezvous] ", what, " of '", key, "' happened twice in one step"));
}

}  // namespace

LocalRendezvous::~LocalRendezvous() {
  StartAbort(absl::CancelledError("[Rendezvous] destroyed while a Recv was waiting"));
}

absl::Status LocalRendezvous::Send(const ParsedKey& key, const Tensor& value, bool is_dead) {
  DoneCallback waiter;
  {
    absl::MutexLock l(&mu_);
    if (!abort_status_.ok()) return abort_status_;
    auto [it, inserted] = table_.try_emplace(key.full_key);
    Item& item = it->second;
    if (inserted) {
      item.state = State::kSent;
      item.value = value;
      item.is_dead = is_dead;
      return absl::OkStatus();
    }
    if (item.state != State::kWaiting) return Duplicate("Send", key.full_key);
    waiter = std::move(item.waiter);
    item.waiter = nullptr;
    item.state = State::kDone;
  }
  waiter(absl::OkStatus(), value, is_dead);
  return absl::OkStatus();
}

void LocalRendezvous::RecvAsync(const ParsedKey& key, DoneCallback done) {
  absl::Status status;
  Tensor value;
  bool is_dead = false;
  {
    absl::MutexLock l(&mu_);
    if (!abort_status_.ok()) {
      status = abort_status_;
    } else {
      auto [it, inserted] = table_.try_emplace(key.full_key);
      Item& item = it->second;
      if (inserted) {
        item.state = State::kWaiting;
        item.waiter = std::move(done);
        return;
      }
      if (item.state == State::kSent) {
        value = std::move(item.value);
        is_dead = item.is_dead;
        item.value = Tensor();
        item.state = State::kDone;
      } else {
        status = Duplicate("Recv", key.full_key);
      }
    }
  }
  done(status, value, is_dead);
}

void LocalRendezvous::StartAbort(const absl::Status& status) {
  absl::Status s = status.ok() ? absl::AbortedError("[Rendezvous] aborted") : status;
  std::vector<DoneCallback> waiters;
  {
    absl::MutexLock l(&mu_);
    if (!abort_status_.ok()) return;
    abort_status_ = s;
    for (auto& [key, item] : table_) {
      if (item.state == State::kWaiting) waiters.push_back(std::move(item.waiter));
    }
    table_.clear();  // Drops parked values too.
  }
  for (DoneCallback& w : waiters) w(s, Tensor(), false);
}

std::vector<std::string> LocalRendezvous::PendingRecvKeys() const {
  std::vector<std::string> keys;
  {
    absl::MutexLock l(&mu_);
    for (const auto& [key, item] : table_) {
      if (item.state == State::kWaiting) keys.push_back(key);
    }
  }
  std::sort(keys.begin(), keys.end());
  return keys;
}

}  // namespace dflow
