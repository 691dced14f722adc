// StepStatsCollector: what one device did in one traced step, as TensorFlow's
// DeviceStepStats (dflow/proto/step_stats.proto).
//
// A step asks for a trace by giving Executor::Args::stats a collector; the
// executor then records one NodeExecStats per node it runs. Without one the
// executor records nothing and pays one branch per node.
//
//   StepStatsCollector stats(device->name());
//   args.stats = &stats;
//   RETURN_IF_ERROR(exec->Run(args));
//   stats.Finalize(run_metadata.mutable_step_stats()->add_dev_stats());
//
// Thread-safe: nodes of one step finish on many threads at once.
#ifndef DFLOW_RUNTIME_STEP_STATS_COLLECTOR_H_
#define DFLOW_RUNTIME_STEP_STATS_COLLECTOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "dflow/proto/node_def.pb.h"
#include "dflow/proto/step_stats.pb.h"

namespace dflow {

class StepStatsCollector {
 public:
  explicit StepStatsCollector(std::string device) : device_(std::move(device)) {}
  StepStatsCollector(const StepStatsCollector&) = delete;
  StepStatsCollector& operator=(const StepStatsCollector&) = delete;

  // Adds one node's stats; stamps the calling thread's id and name.
  void Record(tensorflow::NodeExecStats stats);
  // Moves everything recorded so far into `out` (device, node stats sorted
  // by start time, thread names); the collector is empty afterwards.
  void Finalize(tensorflow::DeviceStepStats* out);

  // Wall-clock microseconds since the Unix epoch, as TensorFlow's stats use.
  static int64_t NowMicros();
  // A small id for the calling thread, the same for the thread's whole life
  // and unique in the process (TensorFlow's Env::GetCurrentThreadId plays
  // this part).
  static uint32_t CurrentThreadId();

 private:
  const std::string device_;
  absl::Mutex mu_;
  std::vector<tensorflow::NodeExecStats> nodes_ ABSL_GUARDED_BY(mu_);
};

// TensorFlow's timeline label for a node: "name = Op(input, input, ...)". A
// _Send or _Recv (or their _Host variants) names the tensor and the peer
// device instead, and `bytes` when it is not negative:
// "name = _Recv(edge_3_w @/job:ps/replica:0/task:0/device:CPU:0; 1024 bytes)".
std::string TimelineLabel(const tensorflow::NodeDef& def, int64_t bytes);

// True for _Send, _Recv, _HostSend and _HostRecv.
bool IsSendOrRecv(const std::string& op);
bool IsRecvOp(const std::string& op);

}  // namespace dflow

#endif  // DFLOW_RUNTIME_STEP_STATS_COLLECTOR_H_
