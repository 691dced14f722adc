#include "dflow/train/step_trace.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <map>
#include <tuple>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "dflow/framework/status.h"
#include "dflow/io/file.h"
#include "nlohmann/json.hpp"

namespace dflow {

namespace {

using nlohmann::json;

// The parts of a timeline label "name = Op(args)".
struct Label {
  std::string op;
  std::string args;
};

Label ParseLabel(const tensorflow::NodeExecStats& ns) {
  const std::string& l = ns.timeline_label();
  const size_t eq = l.find(" = ");
  const size_t open = eq == std::string::npos ? std::string::npos : l.find('(', eq);
  if (open == std::string::npos || l.empty() || l.back() != ')') return {ns.node_name(), ""};
  return {l.substr(eq + 3, open - eq - 3), l.substr(open + 1, l.size() - open - 2)};
}

// A _Send's or _Recv's (tensor, peer) from "tensor @peer; N bytes".
std::pair<std::string, std::string> TransferOf(const std::string& args) {
  const size_t at = args.find(" @");
  if (at == std::string::npos) return {args, ""};
  std::string peer = args.substr(at + 2);
  peer = peer.substr(0, peer.find(';'));
  return {args.substr(0, at), peer};
}

bool IsSend(const std::string& op) { return op == "_Send" || op == "_HostSend"; }
bool IsRecv(const std::string& op) { return op == "_Recv" || op == "_HostRecv"; }

json Meta(const char* name, int pid, int tid, json args) {
  json e = {{"name", name}, {"ph", "M"}, {"pid", pid}, {"args", std::move(args)}};
  if (tid >= 0) e["tid"] = tid;
  return e;
}

// Where one end of a transfer is drawn.
struct TransferEnd {
  int pid;
  uint32_t tid;
  int64_t ts;
};
// (sender device, receiver device, tensor) -> one end of its transfer.
using TransferEnds = std::map<std::tuple<std::string, std::string, std::string>, TransferEnd>;

// The earliest start of any node, the trace's time 0.
int64_t EarliestStart(const tensorflow::StepStats& stats) {
  int64_t base = std::numeric_limits<int64_t>::max();
  for (const auto& dev : stats.dev_stats()) {
    for (const auto& ns : dev.node_stats()) base = std::min(base, ns.all_start_micros());
  }
  return base == std::numeric_limits<int64_t>::max() ? 0 : base;
}

// Device `dev` as row `pid`: its name, its threads' names and a slice per
// node; the ends of its transfers go to `sends` and `recvs`.
void AddDeviceRow(const tensorflow::DeviceStepStats& dev, int pid, int64_t base, json& events,
                  TransferEnds& sends, TransferEnds& recvs) {
  events.push_back(Meta("process_name", pid, -1, {{"name", dev.device()}}));
  events.push_back(Meta("process_sort_index", pid, -1, {{"sort_index", pid}}));
  std::set<uint32_t> tids;
  for (const auto& ns : dev.node_stats()) tids.insert(ns.thread_id());
  for (uint32_t tid : tids) {
    auto it = dev.thread_names().find(tid);
    const std::string name =
        it != dev.thread_names().end() ? it->second : absl::StrCat("thread ", tid);
    events.push_back(Meta("thread_name", pid, static_cast<int>(tid), {{"name", name}}));
  }
  for (const auto& ns : dev.node_stats()) {
    const Label label = ParseLabel(ns);
    const int64_t ts = ns.all_start_micros() - base;
    const int64_t dur = std::max<int64_t>(ns.all_end_rel_micros(), 0);
    events.push_back(
        {{"name", label.op},
         {"cat", "Op"},
         {"ph", "X"},
         {"pid", pid},
         {"tid", ns.thread_id()},
         {"ts", ts},
         {"dur", dur},
         {"args", {{"name", ns.node_name()}, {"op", label.op}, {"label", ns.timeline_label()}}}});
    if (IsSend(label.op) || IsRecv(label.op)) {
      auto [tensor, peer] = TransferOf(label.args);
      const bool send = IsSend(label.op);
      auto key = send ? std::make_tuple(dev.device(), peer, tensor)
                      : std::make_tuple(peer, dev.device(), tensor);
      // A send's arrow leaves from its middle, so it binds to its slice.
      (send ? sends : recvs)[key] =
          TransferEnd{pid, ns.thread_id(), send ? ts + dur / 2 : ts + dur};
    }
  }
}

// A flow arrow per transfer between devices: from the end of the _Send to
// the end of the _Recv that received it.
void AddTransferArrows(const TransferEnds& sends, const TransferEnds& recvs, json& events) {
  int flow = 0;
  for (const auto& [key, recv] : recvs) {
    auto it = sends.find(key);
    if (it == sends.end() || it->second.pid == recv.pid) continue;
    const std::string name = absl::StrCat("transfer ", std::get<2>(key));
    ++flow;
    events.push_back({{"name", name},
                      {"cat", "Transfer"},
                      {"ph", "s"},
                      {"id", flow},
                      {"pid", it->second.pid},
                      {"tid", it->second.tid},
                      {"ts", it->second.ts}});
    events.push_back({{"name", name},
                      {"cat", "Transfer"},
                      {"ph", "f"},
                      {"bp", "e"},
                      {"id", flow},
                      {"pid", recv.pid},
                      {"tid", recv.tid},
                      {"ts", recv.ts}});
  }
}

}  // namespace

std::string ChromeTraceJson(const tensorflow::StepStats& stats) {
  const int64_t base = EarliestStart(stats);
  // Rows in device-name order, so a task's devices sit together.
  std::vector<int> order(stats.dev_stats_size());
  for (int i = 0; i < stats.dev_stats_size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return stats.dev_stats(a).device() < stats.dev_stats(b).device();
  });
  json events = json::array();
  TransferEnds sends, recvs;
  for (size_t row = 0; row < order.size(); ++row) {
    AddDeviceRow(stats.dev_stats(order[row]), static_cast<int>(row) + 1, base, events, sends,
                 recvs);
  }
  AddTransferArrows(sends, recvs, events);
  json trace = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
  return trace.dump(1);
}

StepTracer::StepTracer(std::vector<int64_t> steps, std::string dir, std::string label)
    : dir_(dir.empty() ? "." : std::move(dir)),
      label_(std::move(label)),
      enabled_(!steps.empty()),
      steps_(steps.begin(), steps.end()) {}

bool StepTracer::ShouldTrace(int64_t global_step, int64_t* listed) {
  if (!enabled_) return false;
  absl::MutexLock l(&mu_);
  if (steps_.empty() || *steps_.begin() > global_step) return false;
  // Listed steps already passed unseen are taken together with this one.
  auto last = steps_.upper_bound(global_step);
  *listed = *std::prev(last);
  steps_.erase(steps_.begin(), last);
  return true;
}

absl::StatusOr<std::string> StepTracer::Write(int64_t step, const tensorflow::StepStats& stats) {
  RETURN_IF_ERROR(io::CreateDirs(dir_));
  const std::string path =
      absl::StrCat(dir_, "/trace", label_.empty() ? "" : "_", label_, "_step", step, ".json");
  const std::string tmp = path + ".tmp";
  ASSIGN_OR_RETURN(std::unique_ptr<io::WritableFile> file, io::WritableFile::Create(tmp));
  RETURN_IF_ERROR(file->Append(ChromeTraceJson(stats)));
  RETURN_IF_ERROR(file->Close());
  RETURN_IF_ERROR(io::RenameFile(tmp, path));
  absl::MutexLock l(&mu_);
  files_.push_back(path);
  return path;
}

std::vector<std::string> StepTracer::files() const {
  absl::MutexLock l(&mu_);
  return files_;
}

absl::Status RunMaybeTraced(StepTracer* tracer, int64_t global_step, const StepRunner& run) {
  int64_t listed;
  if (tracer == nullptr || !tracer->ShouldTrace(global_step, &listed)) {
    return run(tensorflow::RunOptions(), nullptr);
  }
  tensorflow::RunOptions options;
  options.set_trace_level(tensorflow::RunOptions::FULL_TRACE);
  tensorflow::RunMetadata metadata;
  RETURN_IF_ERROR(run(options, &metadata));
  return tracer->Write(listed, metadata.step_stats()).status();
}

absl::StatusOr<std::vector<int64_t>> ParseTraceSteps(const std::string& list) {
  std::vector<int64_t> steps;
  if (list.empty()) return steps;
  for (absl::string_view item : absl::StrSplit(list, ',')) {
    int64_t step;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(item), &step) || step < 0) {
      return absl::InvalidArgumentError(absl::StrCat("--trace-steps: '", std::string(item),
                                                     "' is not a global step (a number >= 0) in '",
                                                     list, "'"));
    }
    steps.push_back(step);
  }
  return steps;
}

}  // namespace dflow
