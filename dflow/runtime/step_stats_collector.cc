#include "dflow/runtime/step_stats_collector.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"

namespace dflow {

namespace {

std::string StringAttr(const tensorflow::NodeDef& def, const char* name) {
  auto it = def.attr().find(name);
  return it == def.attr().end() ? std::string() : it->second.s();
}

}  // namespace

int64_t StepStatsCollector::NowMicros() { return absl::GetCurrentTimeNanos() / 1000; }

uint32_t StepStatsCollector::CurrentThreadId() {
  static std::atomic<uint32_t> next{1};
  thread_local const uint32_t id = next.fetch_add(1, std::memory_order_relaxed);
  return id;
}

void StepStatsCollector::Record(tensorflow::NodeExecStats stats) {
  stats.set_thread_id(CurrentThreadId());
  absl::MutexLock l(&mu_);
  nodes_.push_back(std::move(stats));
}

void StepStatsCollector::Finalize(tensorflow::DeviceStepStats* out) {
  std::vector<tensorflow::NodeExecStats> nodes;
  {
    absl::MutexLock l(&mu_);
    nodes.swap(nodes_);
  }
  std::stable_sort(nodes.begin(), nodes.end(), [](const auto& a, const auto& b) {
    return a.all_start_micros() < b.all_start_micros();
  });
  out->set_device(device_);
  auto* names = out->mutable_thread_names();
  for (tensorflow::NodeExecStats& n : nodes) {
    if (!names->contains(n.thread_id())) {
      (*names)[n.thread_id()] = absl::StrCat("thread ", n.thread_id());
    }
    *out->add_node_stats() = std::move(n);
  }
}

bool IsRecvOp(const std::string& op) { return op == "_Recv" || op == "_HostRecv"; }

bool IsSendOrRecv(const std::string& op) {
  return op == "_Send" || op == "_HostSend" || IsRecvOp(op);
}

std::string TimelineLabel(const tensorflow::NodeDef& def, int64_t bytes) {
  if (!IsSendOrRecv(def.op())) {
    // Inputs as a GraphDef names them: "x" for "x:0".
    auto input = [](std::string* out, const std::string& in) {
      out->append(absl::EndsWith(in, ":0") ? in.substr(0, in.size() - 2) : in);
    };
    return absl::StrCat(def.name(), " = ", def.op(), "(", absl::StrJoin(def.input(), ", ", input),
                        ")");
  }
  const std::string peer = StringAttr(def, IsRecvOp(def.op()) ? "send_device" : "recv_device");
  std::string label =
      absl::StrCat(def.name(), " = ", def.op(), "(", StringAttr(def, "tensor_name"), " @", peer);
  if (bytes >= 0) absl::StrAppend(&label, "; ", bytes, " bytes");
  label += ")";
  return label;
}

}  // namespace dflow
