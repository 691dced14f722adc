#include "dflow/train/step_trace.h"

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace dflow {
namespace {

constexpr char kWorker[] = "/job:worker/replica:0/task:0/device:CPU:0";
constexpr char kPs[] = "/job:ps/replica:0/task:0/device:CPU:0";

tensorflow::NodeExecStats Node(const std::string& name, const std::string& label, int64_t start,
                               int64_t dur, uint32_t tid) {
  tensorflow::NodeExecStats ns;
  ns.set_node_name(name);
  ns.set_timeline_label(label);
  ns.set_all_start_micros(start);
  ns.set_op_end_rel_micros(dur);
  ns.set_all_end_rel_micros(dur);
  ns.set_thread_id(tid);
  return ns;
}

// A ps sends w to the worker, which multiplies by it.
tensorflow::StepStats TwoTaskStep() {
  tensorflow::StepStats s;
  tensorflow::DeviceStepStats* ps = s.add_dev_stats();
  ps->set_device(kPs);
  *ps->add_node_stats() = Node("w", "w = VarHandleOp()", 1000, 5, 7);
  *ps->add_node_stats() =
      Node("w/_1", std::string("w/_1 = _Send(edge_1_w @") + kWorker + "; 64 bytes)", 1005, 10, 7);
  tensorflow::DeviceStepStats* worker = s.add_dev_stats();
  worker->set_device(kWorker);
  (*worker->mutable_thread_names())[3] = "pool 3";
  *worker->add_node_stats() =
      Node("w/_2", std::string("w/_2 = _Recv(edge_1_w @") + kPs + "; 64 bytes)", 990, 40, 3);
  *worker->add_node_stats() = Node("mul", "mul = Mul(x, w/_2)", 1031, 20, 4);
  return s;
}

TEST(ChromeTraceJsonTest, RowsEventsAndTransfers) {
  nlohmann::json trace = nlohmann::json::parse(ChromeTraceJson(TwoTaskStep()));
  std::map<int, std::string> procs;
  std::set<std::pair<int, int>> threads;
  std::map<std::string, nlohmann::json> ops;
  int flows = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name")
      procs[e["pid"].get<int>()] = e["args"]["name"];
    if (e["ph"] == "M" && e["name"] == "thread_name")
      threads.insert(std::make_pair(e["pid"].get<int>(), e["tid"].get<int>()));
    if (e["ph"] == "X") ops[e["args"]["name"].get<std::string>()] = e;
    if (e["ph"] == "s" || e["ph"] == "f") ++flows;
  }
  ASSERT_EQ(procs.size(), 2u);  // One row per device, sorted by name.
  EXPECT_EQ(procs[1], kPs);
  EXPECT_EQ(procs[2], kWorker);
  EXPECT_EQ(threads.size(), 3u);  // ps: 7; worker: 3 and 4.
  ASSERT_EQ(ops.size(), 4u);
  EXPECT_EQ(ops["mul"]["name"], "Mul");
  EXPECT_EQ(ops["mul"]["pid"], 2);
  EXPECT_EQ(ops["mul"]["tid"], 4);
  EXPECT_EQ(ops["mul"]["ts"], 1031 - 990);  // Relative to the step's first event.
  EXPECT_EQ(ops["mul"]["dur"], 20);
  EXPECT_EQ(ops["w/_2"]["name"], "_Recv");
  EXPECT_EQ(flows, 2);  // The ps's send to the worker's recv.
}

TEST(ChromeTraceJsonTest, EmptyStepIsValid) {
  nlohmann::json trace = nlohmann::json::parse(ChromeTraceJson(tensorflow::StepStats()));
  EXPECT_TRUE(trace["traceEvents"].is_array());
  EXPECT_TRUE(trace["traceEvents"].empty());
}

TEST(StepTracerTest, TracesEachListedStepOnceAtOrPastIt) {
  StepTracer tracer({5, 7, 20}, "", "");
  int64_t listed = -1;
  EXPECT_FALSE(tracer.ShouldTrace(4, &listed));
  EXPECT_TRUE(tracer.ShouldTrace(5, &listed));
  EXPECT_EQ(listed, 5);
  EXPECT_FALSE(tracer.ShouldTrace(5, &listed));  // Once.
  // Async: the global step jumped past 7; the first step after takes it.
  EXPECT_TRUE(tracer.ShouldTrace(9, &listed));
  EXPECT_EQ(listed, 7);
  EXPECT_FALSE(tracer.ShouldTrace(10, &listed));
  StepTracer off({}, "", "");
  EXPECT_FALSE(off.enabled());
  EXPECT_FALSE(off.ShouldTrace(0, &listed));
}

TEST(StepTracerTest, WritesNamedFile) {
  const std::string dir = ::testing::TempDir() + "/step_trace_test";
  StepTracer tracer({3}, dir, "worker1");
  absl::StatusOr<std::string> path = tracer.Write(3, TwoTaskStep());
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*path, dir + "/trace_worker1_step3.json");
  std::ifstream in(*path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_TRUE(nlohmann::json::parse(text.str()).contains("traceEvents"));
  EXPECT_EQ(tracer.files(), std::vector<std::string>{*path});
  std::remove(path->c_str());
}

TEST(ParseTraceStepsTest, ListsAndErrors) {
  EXPECT_EQ(*ParseTraceSteps("5"), std::vector<int64_t>{5});
  EXPECT_EQ(*ParseTraceSteps("1, 10,100"), (std::vector<int64_t>{1, 10, 100}));
  EXPECT_TRUE(ParseTraceSteps("")->empty());
  absl::StatusOr<std::vector<int64_t>> bad = ParseTraceSteps("3,x");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'x'"), std::string::npos) << bad.status();
  EXPECT_FALSE(ParseTraceSteps("-1").ok());
}

}  // namespace
}  // namespace dflow
