// Bytes per node of a large graph in a server, stage by stage.
//
//   build/bench/graph_memory_bench [--nodes 200000] [--op Identity|AddV2]
//
// Builds a chain GraphDef (a Const, then `nodes` ops each reading the one
// before; AddV2 also reads the Const), then:
//   1. runs it through a real in-process Master + Worker of one task, as
//      `dflow server` does (CreateSession, the first RunStep fetching the end
//      of the chain, a second RunStep, CloseSession), and
//   2. measures the runtime's pieces one at a time (Graph, its clone, the
//      partition GraphDef, the executor and its kernels).
// "held" is the heap in use after a stage minus before (mallinfo2: small
// blocks + mmapped ones), "peak" the growth of peak RSS during it
// (/proc/self/status VmHWM, reset through /proc/self/clear_refs). Not a
// test: it prints a table (and each stage's wall time, s), and the numbers go to
// docs/performance.md.
#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "dflow/distributed/master.h"
#include "dflow/distributed/worker.h"
#include "dflow/framework/attr_util.h"
#include "dflow/runtime/device_mgr.h"
#include "dflow/runtime/executor.h"
#include "dflow/runtime/function.h"
#include "dflow/runtime/graph.h"
#include "dflow/runtime/partition.h"

namespace dflow {
namespace {

int64_t HeapInUse() {
  struct mallinfo2 m = mallinfo2();
  return static_cast<int64_t>(m.uordblks + m.hblkhd);
}

// A field of /proc/self/status in bytes ("VmHWM", "VmRSS"); -1 when absent.
int64_t ProcStatusBytes(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::atoll(line.c_str() + field.size() + 1) * 1024;
  }
  return -1;
}

// Starts a new peak: VmHWM becomes the current RSS.
void ResetPeak() { std::ofstream("/proc/self/clear_refs") << "5"; }

class Table {
 public:
  explicit Table(int64_t nodes) : nodes_(nodes) {
    std::printf("%-46s %10s %7s %10s %7s %7s\n", "stage", "held MB", "B/node", "peak+ MB", "B/node",
                "s");
  }
  // Starts measuring a stage.
  void Begin() {
    malloc_trim(0);
    heap_ = HeapInUse();
    ResetPeak();
    rss_ = ProcStatusBytes("VmRSS");
    start_ = absl::Now();
  }
  void End(const std::string& stage) {
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start_);
    const int64_t held = HeapInUse() - heap_;
    const int64_t peak = ProcStatusBytes("VmHWM") - rss_;
    std::printf("%-46s %10.1f %7.0f %10.1f %7.0f %7.2f\n", stage.c_str(), held / 1e6,
                static_cast<double>(held) / nodes_, peak / 1e6, static_cast<double>(peak) / nodes_,
                seconds);
    std::fflush(stdout);
  }

 private:
  int64_t nodes_;
  int64_t heap_ = 0;
  int64_t rss_ = 0;
  absl::Time start_;
};

tensorflow::GraphDef Chain(int nodes, const std::string& op) {
  tensorflow::GraphDef def;
  tensorflow::NodeDef* c = def.add_node();
  c->set_name("c");
  c->set_op("Const");
  SetAttr(c, "dtype", DT_FLOAT);
  Tensor one(DT_FLOAT, TensorShape({}));
  one.flat<float>()[0] = 1;
  SetAttr(c, "value", one);
  std::string prev = "c";
  for (int i = 0; i < nodes; ++i) {
    tensorflow::NodeDef* n = def.add_node();
    n->set_name(absl::StrCat("n", i));
    n->set_op(op);
    n->add_input(prev);
    if (op == "AddV2") n->add_input("c");
    SetAttr(n, "T", DT_FLOAT);
    prev = n->name();
  }
  return def;
}

// Calls an in-process service method and waits for it.
template <typename Method, typename Req, typename Resp>
absl::Status Call(Method method, const Req& req, Resp* resp) {
  absl::Notification done;
  absl::Status status;
  CallOptions opts;
  opts.deadline = absl::Now() + absl::Minutes(10);
  method(opts, &req, resp, [&](const absl::Status& s) {
    status = s;
    done.Notify();
  });
  done.WaitForNotification();
  return status;
}

void Check(const absl::Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, std::string(s.ToString()).c_str());
    std::exit(1);
  }
}

// Part 1: a real master and worker, as `dflow server` holds them.
void ServerStages(int nodes, const std::string& op) {
  std::printf("\n-- server: one task, Master + Worker in-process, %d-node %s chain --\n", nodes,
              op.c_str());
  Table t(nodes);
  tensorflow::ConfigProto config;
  auto devices = CreateLocalDevices(config, "localhost", 0, 0);
  Check(devices.status(), "devices");
  DeviceMgr mgr(*std::move(devices));
  auto worker = std::make_unique<Worker>(&mgr, WorkerOptions{});
  MasterEnv env;
  env.task_name = "/job:localhost/replica:0/task:0";
  env.cluster_tasks = {env.task_name};
  env.worker_for_task = [&](const std::string& task) -> WorkerInterface* {
    return task == env.task_name ? worker.get() : nullptr;
  };
  auto master = std::make_unique<Master>(env);

  t.Begin();
  auto create = std::make_unique<tensorflow::CreateSessionRequest>();
  *create->mutable_graph_def() = Chain(nodes, op);
  t.End("request: GraphDef parsed (CreateSession)");

  t.Begin();
  tensorflow::CreateSessionResponse created;
  Check(Call([&](auto&&... a) { master->CreateSessionAsync(a...); }, *create, &created),
        "CreateSession");
  t.End("CreateSession: master's graph");
  t.Begin();
  create.reset();
  t.End("request freed");

  tensorflow::RunStepRequest run;
  run.set_session_handle(created.session_handle());
  run.add_fetch(absl::StrCat("n", nodes - 1));
  t.Begin();
  tensorflow::RunStepResponse resp;
  Check(Call([&](auto&&... a) { master->RunStepAsync(a...); }, run, &resp), "RunStep 1");
  t.End("RunStep 1: plan + registration + step");
  t.Begin();
  tensorflow::RunStepResponse resp2;
  Check(Call([&](auto&&... a) { master->RunStepAsync(a...); }, run, &resp2), "RunStep 2");
  t.End("RunStep 2: a step alone");

  t.Begin();
  tensorflow::CloseSessionRequest close;
  close.set_session_handle(created.session_handle());
  tensorflow::CloseSessionResponse closed;
  Check(Call([&](auto&&... a) { master->CloseSessionAsync(a...); }, close, &closed),
        "CloseSession");
  absl::SleepFor(absl::Milliseconds(200));  // The session goes after the reply.
  t.End("CloseSession (negative: freed)");
}

// Part 2: the pieces, each kept alive while the next is measured.
void ComponentStages(int nodes, const std::string& op) {
  std::printf("\n-- components, %d-node %s chain --\n", nodes, op.c_str());
  Table t(nodes);
  tensorflow::ConfigProto config;
  auto devices = CreateLocalDevices(config, "localhost", 0, 0);
  Check(devices.status(), "devices");
  DeviceMgr mgr(*std::move(devices));
  Device* cpu = mgr.HostCPU();

  t.Begin();
  tensorflow::GraphDef def = Chain(nodes, op);
  t.End("GraphDef");
  t.Begin();
  auto graph = GraphFromGraphDef(def);
  Check(graph.status(), "GraphFromGraphDef");
  t.End("Graph (FromGraphDef)");
  t.Begin();
  std::unique_ptr<Graph> clone = (*graph)->Clone();
  t.End("Graph::Clone");
  for (Node* n : clone->nodes()) n->set_assigned_device_name(cpu->name());
  t.Begin();
  PartitionOptions popts;
  auto parts = Partition(*clone, popts);
  Check(parts.status(), "Partition");
  t.End("Partition: the part's GraphDef");
  t.Begin();
  auto part = Graph::FromGraphDef(parts->begin()->second);
  Check(part.status(), "part");
  t.End("Graph of the part");
  t.Begin();
  auto exec = Executor::Create(*std::move(part), cpu);
  Check(exec.status(), "Executor::Create");
  t.End("Executor::Create (frees the part's Graph)");
  Executor::Args args;
  t.Begin();
  Check((*exec)->Run(args), "Run");
  t.End("Executor::Run (one step, inline)");
}

}  // namespace
}  // namespace dflow

int main(int argc, char** argv) {
  int nodes = 200000;
  std::string op = "Identity";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--nodes") == 0) nodes = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--op") == 0) op = argv[i + 1];
  }
  if (nodes < 1 || (op != "Identity" && op != "AddV2")) {
    std::fprintf(stderr, "usage: graph_memory_bench [--nodes N>0] [--op Identity|AddV2]\n");
    return 2;
  }
  dflow::ServerStages(nodes, op);
  dflow::ComponentStages(nodes, op);
  return 0;
}
