#include "dflow/train/stall_watch.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace dflow {

StallWatch::StallWatch(Options options) : options_(std::move(options)) {
  last_step_time_ = absl::Now();
  next_report_ = options_.after;
  if (options_.after > absl::ZeroDuration() && options_.after != absl::InfiniteDuration()) {
    thread_ = std::thread([this] { Run(); });
  }
}

StallWatch::~StallWatch() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void StallWatch::Stepped(int64_t global_step) {
  absl::MutexLock l(&mu_);
  last_step_time_ = absl::Now();
  last_step_ = global_step;
  next_report_ = options_.after;
}

std::string StallWatch::Describe(absl::Duration waited, int64_t global_step,
                                 const std::vector<Task>& tasks,
                                 const std::vector<absl::Status>& pings) {
  std::string line = absl::StrFormat("[train] no step for %.1f s since global step %d",
                                     absl::ToDoubleSeconds(waited), global_step);
  if (pings.empty()) return line;
  std::vector<std::string> silent;
  for (size_t i = 0; i < tasks.size() && i < pings.size(); ++i) {
    if (pings[i].ok()) continue;
    silent.push_back(absl::StrCat(tasks[i].name, " at ", tasks[i].address,
                                  ", which does not answer (", pings[i].ToString(), ")"));
  }
  if (silent.empty()) {
    return absl::StrCat(line, "; every task answers (", tasks.size(),
                        " asked): the step waits for a slow task, e.g. a sync step for a "
                        "straggler's gradients");
  }
  return absl::StrCat(line, ": waiting for ", absl::StrJoin(silent, "; "));
}

void StallWatch::Run() {
  const absl::Duration tick = std::min(options_.after / 4, absl::Milliseconds(250));
  absl::MutexLock l(&mu_);
  while (!stop_) {
    mu_.AwaitWithTimeout(absl::Condition(&stop_), tick);
    if (stop_) break;
    const absl::Duration waited = absl::Now() - last_step_time_;
    if (waited < next_report_) continue;
    next_report_ *= 2;
    const int64_t step = last_step_;
    const absl::Time since = last_step_time_;
    mu_.Unlock();  // Pings take up to ping_timeout; steps must not wait for them.
    std::vector<absl::Status> pings;
    if (options_.ping) {
      pings.resize(options_.tasks.size());
      std::vector<std::thread> askers;
      for (size_t i = 0; i < options_.tasks.size(); ++i) {
        askers.emplace_back([this, i, &pings] {
          pings[i] = options_.ping(options_.tasks[i].name, options_.ping_timeout);
        });
      }
      for (std::thread& t : askers) t.join();
    }
    const std::string line = Describe(waited, step, options_.tasks, pings);
    mu_.Lock();
    // A step that completed while the tasks were asked ends this stall.
    if (last_step_time_ == since && !stop_) *options_.log << line << std::endl;
  }
}

}  // namespace dflow
