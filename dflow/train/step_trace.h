// Step traces for `dflow train --trace-steps`: which steps to trace, and a
// traced step's StepStats as a Chrome trace (chrome://tracing, Perfetto).
//
//   StepTracer tracer({5, 100}, "/tmp/run", "worker0");
//   if (tracer.ShouldTrace(global_step)) { run with FULL_TRACE; tracer.Write(...) }
//
// The trace is {"traceEvents": [...]}: a process row per device (each task's
// devices, and the master's RunGraph calls), a thread row per executor
// thread, a complete ("X") event per node, and a flow arrow from each _Send
// to the _Recv on another device that got its tensor (the transfer).
#ifndef DFLOW_TRAIN_STEP_TRACE_H_
#define DFLOW_TRAIN_STEP_TRACE_H_

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "dflow/proto/config.pb.h"
#include "dflow/proto/step_stats.pb.h"

namespace dflow {

// `stats` as Chrome trace JSON; times relative to the step's first event.
std::string ChromeTraceJson(const tensorflow::StepStats& stats);

// Thread-safe: a worker's towers step concurrently.
class StepTracer {
 public:
  // `steps`: the global steps to trace; `dir`: where the files go; `label`:
  // names the writing task in file names ("" in a single process).
  StepTracer(std::vector<int64_t> steps, std::string dir, std::string label);

  bool enabled() const { return enabled_; }
  // Whether the step about to run, with the global step at `global_step`
  // before it, is to be traced: the first such step at or past a listed
  // step not traced yet (in async training other workers move the global
  // step, so this worker may never see it exactly). Returns the listed step
  // in *listed; each listed step is handed out once.
  bool ShouldTrace(int64_t global_step, int64_t* listed);
  // Writes the trace of listed step `step` as DIR/trace[_LABEL]_stepN.json
  // and returns its path.
  absl::StatusOr<std::string> Write(int64_t step, const tensorflow::StepStats& stats);
  // The files written so far.
  std::vector<std::string> files() const;

 private:
  const std::string dir_;
  const std::string label_;
  const bool enabled_;
  mutable absl::Mutex mu_;
  std::set<int64_t> steps_ ABSL_GUARDED_BY(mu_);  // Not traced yet.
  std::vector<std::string> files_ ABSL_GUARDED_BY(mu_);
};

// Runs one step with `options` (FULL_TRACE when traced, else default) and
// `metadata` (null when not traced), writing the trace when `tracer`
// (may be null) says the step at `global_step` is to be traced.
using StepRunner =
    std::function<absl::Status(const tensorflow::RunOptions&, tensorflow::RunMetadata*)>;
absl::Status RunMaybeTraced(StepTracer* tracer, int64_t global_step, const StepRunner& run);

// Parses "--trace-steps" ("5" or "5,100,200"): InvalidArgument naming the
// bad item for anything but non-negative integers.
absl::StatusOr<std::vector<int64_t>> ParseTraceSteps(const std::string& list);

}  // namespace dflow

#endif  // DFLOW_TRAIN_STEP_TRACE_H_
