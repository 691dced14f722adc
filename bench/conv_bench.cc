// Convolution kernel throughput on the Fashion-MNIST CNN's two layers
// (batch 64): Conv2D forward, Conv2DBackpropInput and Conv2DBackpropFilter,
// each in GFLOP/s next to a plain cblas_sgemm of the same FLOP count (the
// forward product as one call: [pixels, patch] x [patch, filters]) measured
// in the same run with OpenBLAS's own threads, one per intra-op pool thread.
// `vs_sgemm` is the kernel's rate over that baseline's.
//
//   build/bench/conv_bench --benchmark_min_time=0.5
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "benchmark/benchmark.h"
#include "dflow/framework/attr_util.h"
#include "dflow/framework/device.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/tensor.h"

namespace dflow {
namespace {

// A layer: NHWC input, HWIO filter, SAME padding, stride 1.
struct Layer {
  int64_t batch, rows, cols, depth, k, filters;
  int64_t pixels() const { return batch * rows * cols; }
  int64_t patch() const { return k * k * depth; }
  double flops() const { return 2.0 * pixels() * patch() * filters; }
  TensorShape input() const { return TensorShape({batch, rows, cols, depth}); }
  TensorShape filter() const { return TensorShape({k, k, depth, filters}); }
  TensorShape output() const { return TensorShape({batch, rows, cols, filters}); }
};

const Layer kLayers[] = {{64, 28, 28, 1, 5, 32}, {64, 14, 14, 32, 5, 64}};

Tensor Sizes(const TensorShape& s) {
  return Tensor::Vec<int32_t>(std::vector<int32_t>(s.dim_sizes().begin(), s.dim_sizes().end()));
}

tensorflow::NodeDef ConvNode(const std::string& op) {
  tensorflow::NodeDef node;
  node.set_name("conv");
  node.set_op(op);
  SetAttr(&node, "T", DT_FLOAT);
  SetAttr(&node, "strides", std::vector<int>{1, 1, 1, 1});
  SetAttr(&node, "padding", std::string("SAME"));
  return node;
}

// The forward product of layer `l` as one cblas_sgemm call.
class Sgemm {
 public:
  explicit Sgemm(const Layer& l)
      : m_(static_cast<int>(l.pixels())),
        n_(static_cast<int>(l.filters)),
        k_(static_cast<int>(l.patch())),
        a_(static_cast<size_t>(m_) * k_, 0.5f),
        b_(static_cast<size_t>(k_) * n_, 0.25f),
        c_(static_cast<size_t>(m_) * n_) {}
  void Run() {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m_, n_, k_, 1.0f, a_.data(), k_,
                b_.data(), n_, 0.0f, c_.data(), n_);
    benchmark::DoNotOptimize(c_.data());
  }

 private:
  int m_, n_, k_;
  std::vector<float> a_, b_, c_;
};

// Seconds of the layer's sgemm, best of a few, with `threads` OpenBLAS
// threads (then back to dflow's setting of 1).
double SgemmSeconds(const Layer& l, int threads) {
  Sgemm sgemm(l);
  openblas_set_num_threads(threads);
  double best = 1e30;
  for (int rep = 0; rep < 10; ++rep) {
    auto start = std::chrono::steady_clock::now();
    sgemm.Run();
    best = std::min(
        best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  openblas_set_num_threads(1);
  return best;
}

void RunKernel(benchmark::State& state, KernelRunner* runner, const Layer& l) {
  if (!runner->error().empty()) return state.SkipWithError(runner->error().c_str());
  const int threads = BenchDevice()->intra_op_pool()->NumThreads();
  const double sgemm_gflops = l.flops() / SgemmSeconds(l, threads) * 1e-9;
  auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    if (!runner->Run()) return state.SkipWithError(runner->error().c_str());
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double gflops = l.flops() * state.iterations() / seconds * 1e-9;
  state.counters["GFLOP/s"] = gflops;
  state.counters["sgemm_GFLOP/s"] = sgemm_gflops;
  state.counters["vs_sgemm"] = gflops / sgemm_gflops;
  state.counters["threads"] = threads;
}

void BM_Conv2D(benchmark::State& state) {
  const Layer& l = kLayers[state.range(0)];
  KernelRunner runner(ConvNode("Conv2D"), {Filled(l.input(), 0.5f), Filled(l.filter(), 0.25f)});
  RunKernel(state, &runner, l);
}

void BM_Conv2DBackpropInput(benchmark::State& state) {
  const Layer& l = kLayers[state.range(0)];
  KernelRunner runner(ConvNode("Conv2DBackpropInput"),
                      {Sizes(l.input()), Filled(l.filter(), 0.25f), Filled(l.output(), 0.5f)});
  RunKernel(state, &runner, l);
}

void BM_Conv2DBackpropFilter(benchmark::State& state) {
  const Layer& l = kLayers[state.range(0)];
  KernelRunner runner(ConvNode("Conv2DBackpropFilter"),
                      {Filled(l.input(), 0.5f), Sizes(l.filter()), Filled(l.output(), 0.25f)});
  RunKernel(state, &runner, l);
}

// The baseline alone, with 1 thread and with 2.
void BM_SgemmSameFlops(benchmark::State& state) {
  const Layer& l = kLayers[state.range(0)];
  Sgemm sgemm(l);
  openblas_set_num_threads(static_cast<int>(state.range(1)));
  for (auto _ : state) sgemm.Run();
  openblas_set_num_threads(1);
  state.counters["GFLOP"] =
      benchmark::Counter(l.flops() * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

BENCHMARK(BM_Conv2D)->Arg(0)->Arg(1)->ArgName("layer")->UseRealTime()->Unit(
    benchmark::kMillisecond);
BENCHMARK(BM_Conv2DBackpropInput)
    ->Arg(0)
    ->Arg(1)
    ->ArgName("layer")
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Conv2DBackpropFilter)
    ->Arg(0)
    ->Arg(1)
    ->ArgName("layer")
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SgemmSameFlops)
    ->ArgsProduct({{0, 1}, {1, 2}})
    ->ArgNames({"layer", "threads"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace dflow
