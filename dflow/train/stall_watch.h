// StallWatch: says what a training loop that stopped stepping waits for.
//
// A worker of a cluster calls Stepped() after each step. When no step has
// completed for `after`, a background thread asks every other task of the
// cluster whether it answers (a GetStatus with a short deadline) and writes
// one line naming the tasks that do not, with their errors:
//
//   [train] no step for 10.0 s since global step 212: waiting for
//   /job:worker/replica:0/task:1 at 127.0.0.1:4567, which does not answer
//   (DEADLINE_EXCEEDED: ...)
//
// or, when every task answers, that they all do (in sync training the step
// then waits for a slow worker's gradients). It reports again after twice as
// long, and so on, while the stall lasts; a step resets it.
//
//   StallWatch watch({.after = absl::Seconds(10), .tasks = cluster.AllTasks() ...,
//                     .ping = ..., .log = &std::cerr});
//   for (...) { RunStep(...); watch.Stepped(global_step); }
#ifndef DFLOW_TRAIN_STALL_WATCH_H_
#define DFLOW_TRAIN_STALL_WATCH_H_

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace dflow {

// Whether task `name` answers within `timeout` (OK), else why not.
using PingTaskFn = std::function<absl::Status(const std::string& name, absl::Duration timeout)>;

class StallWatch {
 public:
  struct Task {
    std::string name;     // "/job:ps/replica:0/task:0"
    std::string address;  // "127.0.0.1:2222", for the message
  };
  struct Options {
    absl::Duration after = absl::Seconds(10);  // Infinite or <= 0: never report.
    std::vector<Task> tasks;                   // The tasks to ask, this one excluded.
    PingTaskFn ping;                           // Unset: report without asking.
    absl::Duration ping_timeout = absl::Seconds(1);
    std::ostream* log = nullptr;               // Required; written under an internal lock.
  };

  explicit StallWatch(Options options);
  ~StallWatch();  // Stops the thread; waits at most for the pings under way.
  StallWatch(const StallWatch&) = delete;
  StallWatch& operator=(const StallWatch&) = delete;

  // A step completed; `global_step` is the step it reached.
  void Stepped(int64_t global_step);

  // The line a stall of `waited` since `global_step` is reported with, given
  // each task's ping status (in Options::tasks order; empty when unasked).
  static std::string Describe(absl::Duration waited, int64_t global_step,
                              const std::vector<Task>& tasks,
                              const std::vector<absl::Status>& pings);

 private:
  void Run();

  const Options options_;
  absl::Mutex mu_;
  absl::Time last_step_time_ ABSL_GUARDED_BY(mu_);
  int64_t last_step_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Duration next_report_ ABSL_GUARDED_BY(mu_);  // Stall length of the next report.
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace dflow

#endif  // DFLOW_TRAIN_STALL_WATCH_H_
