// Per-node overhead of the executor: a chain of N Identity nodes run as one
// step, through Executor::Run and through DirectSession::Run, against the
// same kernels called back to back without an executor (the baseline).
// The "per_node" counter is seconds per node ("180n" = 180 ns).
//
//   build/bench/executor_bench --benchmark_min_time=0.5
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "dflow/framework/attr_util.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/thread_pool.h"
#include "dflow/runtime/call_frame.h"
#include "dflow/runtime/direct_session.h"
#include "dflow/runtime/executor.h"
#include "dflow/runtime/graph.h"
#include "dflow/runtime/rendezvous_local.h"

namespace dflow {
namespace {

constexpr char kDevice[] = "/job:localhost/replica:0/task:0/device:CPU:0";

// c -> n1 -> ... -> n<len> (Identity), optionally fetched by a _Retval.
tensorflow::GraphDef ChainGraph(int len, bool retval) {
  tensorflow::GraphDef g;
  tensorflow::NodeDef* c = g.add_node();
  c->set_name("n0");
  c->set_op("Const");
  SetAttr(c, "dtype", DT_FLOAT);
  SetAttr(c, "value", Tensor::Scalar<float>(1));
  for (int i = 1; i <= len; ++i) {
    tensorflow::NodeDef* n = g.add_node();
    n->set_name(absl::StrCat("n", i));
    n->set_op("Identity");
    n->add_input(absl::StrCat("n", i - 1));
    SetAttr(n, "T", DT_FLOAT);
  }
  if (retval) {
    tensorflow::NodeDef* r = g.add_node();
    r->set_name("ret");
    r->set_op("_Retval");
    r->add_input(absl::StrCat("n", len));
    SetAttr(r, "T", DT_FLOAT);
    SetAttr(r, "index", 0);
  }
  return g;
}

Device* BenchDevice() {
  static Device* d = new Device(*DeviceName::Parse(kDevice), 1, 0);
  return d;
}

void SetPerNode(benchmark::State& state, int nodes) {
  state.counters["per_node"] = benchmark::Counter(
      nodes, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

// Baseline: the Identity kernel computed `len` times in a row, no executor.
void BM_KernelsBackToBack(benchmark::State& state) {
  const int len = static_cast<int>(state.range(0));
  tensorflow::NodeDef def = ChainGraph(1, false).node(1);
  auto kernel = KernelRegistry::Global()->CreateKernel(BenchDevice(), def);
  if (!kernel.ok()) {
    state.SkipWithError(std::string(kernel.status().message()).c_str());
    return;
  }
  Tensor value = Tensor::Scalar<float>(1);
  OpKernelContext::Params params;
  params.device = BenchDevice();
  params.op_kernel = kernel->get();
  params.inputs.push_back(TensorValue{&value});
  for (auto _ : state) {
    for (int i = 0; i < len; ++i) {
      OpKernelContext ctx(&params);
      benchmark::DoNotOptimize((*kernel)->Compute(&ctx));
      value = *ctx.release_output(0).tensor;
    }
  }
  SetPerNode(state, len);
}
BENCHMARK(BM_KernelsBackToBack)->Arg(1000);

// One step of the chain through Executor::Run; range(1) = 1 uses a pool
// runner, range(1) = 2 runs inline and traces every node (a StepStatsCollector).
void BM_ExecutorChain(benchmark::State& state) {
  const int len = static_cast<int>(state.range(0));
  auto graph = Graph::FromGraphDef(ChainGraph(len, true));
  if (!graph.ok()) {
    state.SkipWithError(std::string(graph.status().message()).c_str());
    return;
  }
  auto exec = Executor::Create(*std::move(graph), BenchDevice());
  if (!exec.ok()) {
    state.SkipWithError(std::string(exec.status().message()).c_str());
    return;
  }
  ThreadPool pool("bench", 2);
  Executor::Args args;
  if (state.range(1) == 1) {
    args.runner = [&pool](std::function<void()> fn) { pool.Schedule(std::move(fn)); };
  }
  for (auto _ : state) {
    LocalRendezvous rendezvous;
    FunctionCallFrame frame({}, 1);
    std::optional<StepStatsCollector> stats;  // Only in the traced case.
    if (state.range(1) == 2) args.stats = &stats.emplace(kDevice);
    args.rendezvous = &rendezvous;
    args.call_frame = &frame;
    absl::Status s = (*exec)->Run(args);
    if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
  }
  SetPerNode(state, len + 2);
}
BENCHMARK(BM_ExecutorChain)->Args({1000, 0})->Args({1000, 1})->Args({10, 1})->Args({1000, 2});

// The same chain through DirectSession::Run (fetching its end).
void BM_DirectSessionChain(benchmark::State& state) {
  const int len = static_cast<int>(state.range(0));
  auto session = DirectSession::New(SessionOptions());
  if (!session.ok() || !(*session)->Create(ChainGraph(len, false)).ok()) {
    state.SkipWithError("session setup failed");
    return;
  }
  const std::string fetch = absl::StrCat("n", len);
  std::vector<Tensor> out;
  for (auto _ : state) {
    absl::Status s = (*session)->Run({}, {fetch}, {}, &out);
    if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
  }
  SetPerNode(state, len + 2);
}
BENCHMARK(BM_DirectSessionChain)->Arg(1000)->Arg(10);

}  // namespace
}  // namespace dflow
