// Math kernel throughput against baselines measured in the same run:
//   MatMul kernel GFLOP/s   vs  cblas_sgemm called directly with 1 and 2 threads;
//   AddV2 kernel GB/s       vs  memcpy of the same bytes;
//   AddV2's loop alone (output already allocated) for same-shape, scalar,
//   row-bias and column broadcasts, and the output allocation alone.
// Kernels are created once and run directly (no executor), on the process's
// intra-op pool like any dflow CPU kernel.
//
//   build/bench/math_bench --benchmark_min_time=0.5
#include <cblas.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "benchmark/benchmark.h"
#include "dflow/framework/attr_util.h"
#include "dflow/framework/device.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/tensor.h"
#include "dflow/ops/broadcast.h"
#include "dflow/ops/cwise_ops.h"

namespace dflow {
namespace {

void SetGflops(benchmark::State& state, int64_t n) {
  state.counters["GFLOP/s"] =
      benchmark::Counter(2e-9 * n * n * n, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_MatMulKernel(benchmark::State& state) {
  const int64_t n = state.range(0);
  tensorflow::NodeDef node;
  node.set_name("matmul");
  node.set_op("MatMul");
  SetAttr(&node, "T", DT_FLOAT);
  KernelRunner runner(node, {Filled({n, n}, 0.5f), Filled({n, n}, 0.25f)});
  if (!runner.error().empty()) return state.SkipWithError(runner.error().c_str());
  for (auto _ : state) {
    if (!runner.Run()) return state.SkipWithError(runner.error().c_str());
  }
  state.counters["pool_threads"] = BenchDevice()->intra_op_pool()->NumThreads();
  SetGflops(state, n);
}
BENCHMARK(BM_MatMulKernel)->Arg(128)->Arg(512)->Arg(1024)->UseRealTime();

// The baseline: one cblas_sgemm call with OpenBLAS's own threads.
void BM_CblasSgemm(benchmark::State& state) {
  const int64_t n = state.range(0);
  const int threads = static_cast<int>(state.range(1));
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
  openblas_set_num_threads(threads);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n,
                0.0f, c.data(), n);
    benchmark::DoNotOptimize(c.data());
  }
  openblas_set_num_threads(1);  // dflow's setting, for the benchmarks that follow.
  SetGflops(state, n);
}
BENCHMARK(BM_CblasSgemm)
    ->ArgsProduct({{128, 512, 1024}, {1, 2}})
    ->ArgNames({"n", "threads"})
    ->UseRealTime();

constexpr int64_t kAddElements = 16 * 1024 * 1024;

// Bytes an elementwise add moves: two inputs read, one output written.
void BM_AddV2Kernel(benchmark::State& state) {
  tensorflow::NodeDef node;
  node.set_name("add");
  node.set_op("AddV2");
  SetAttr(&node, "T", DT_FLOAT);
  KernelRunner runner(node, {Filled({kAddElements}, 1.0f), Filled({kAddElements}, 2.0f)});
  if (!runner.error().empty()) return state.SkipWithError(runner.error().c_str());
  for (auto _ : state) {
    if (!runner.Run()) return state.SkipWithError(runner.error().c_str());
  }
  state.SetBytesProcessed(state.iterations() * 3 * kAddElements * sizeof(float));
}
BENCHMARK(BM_AddV2Kernel)->UseRealTime()->Unit(benchmark::kMillisecond);

// The baseline: memcpy of one input's bytes (one read, one write) into a
// buffer that is already mapped.
void BM_Memcpy(benchmark::State& state) {
  std::vector<float> src(kAddElements, 1.0f), dst(kAddElements, 0.0f);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), kAddElements * sizeof(float));
    benchmark::DoNotOptimize(dst.data());
  }
  state.SetBytesProcessed(state.iterations() * 2 * kAddElements * sizeof(float));
}
BENCHMARK(BM_Memcpy)->UseRealTime()->Unit(benchmark::kMillisecond);

// The cost the framework adds to AddV2: allocating (and zero-filling) a
// fresh 64 MiB output every run.
void BM_AllocateOutput(benchmark::State& state) {
  for (auto _ : state) {
    Tensor t(DT_FLOAT, TensorShape({kAddElements}));
    benchmark::DoNotOptimize(t.raw_data());
  }
  state.SetBytesProcessed(state.iterations() * kAddElements * sizeof(float));
}
BENCHMARK(BM_AllocateOutput)->UseRealTime()->Unit(benchmark::kMillisecond);

// AddV2's loop into a preallocated output: x is [rows, cols], y as given.
void BM_AddV2Loop(benchmark::State& state) {
  const int64_t cols = state.range(0);
  const int64_t rows = kAddElements / cols;
  const int64_t y_kind = state.range(1);  // 0: same shape, 1: scalar, 2: [cols], 3: [rows, 1]
  const TensorShape x_shape({rows, cols});
  const TensorShape y_shape = y_kind == 0   ? x_shape
                              : y_kind == 1 ? TensorShape({})
                              : y_kind == 2 ? TensorShape({cols})
                                            : TensorShape({rows, 1});
  Tensor x = Filled(x_shape, 1.0f), y = Filled(y_shape, 2.0f), z = Filled(x_shape, 0.0f);
  auto plan = BroadcastPlan::Make({x_shape, y_shape});
  ThreadPool* pool = BenchDevice()->intra_op_pool();
  for (auto _ : state) {
    cwise::RunBinary<float, float, Eigen::internal::scalar_sum_op<float, float>>(
        pool, *plan, x.flat<float>().data(), y.flat<float>().data(), z.flat<float>().data());
    benchmark::DoNotOptimize(z.raw_data());
  }
  const int64_t y_bytes = y_kind == 0 ? kAddElements * sizeof(float) : 0;
  state.SetBytesProcessed(state.iterations() * (2 * kAddElements * sizeof(float) + y_bytes));
}
BENCHMARK(BM_AddV2Loop)
    ->Args({1024, 0})
    ->Args({1024, 1})
    ->Args({16, 2})
    ->Args({256, 2})
    ->Args({16, 3})
    ->Args({256, 3})
    ->ArgNames({"cols", "y"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace dflow
