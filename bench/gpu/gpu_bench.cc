// GPU benchmark (issue 17): MatMul 4096² through a dflow session against
// cuBLAS called directly, in the same run. Prints one line per figure and a
// JSON summary line ("gpu_bench {...}"). Needs a GPU; exits 77 without one.
//
//   build/bench/gpu_bench [--n 4096] [--chain 20] [--steps 5]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dflow/framework/attr_util.h"
#include "dflow/gpu/gpu_device.h"
#include "dflow/runtime/direct_session.h"

namespace dflow {
namespace {

double Tflops(int64_t n, double seconds) { return 2.0 * n * n * n / seconds / 1e12; }

// Seconds per n×n×n SGEMM, cuBLAS called directly on one stream.
double DirectSgemmSeconds(int64_t n, int reps) {
  float *a, *b, *c;
  const size_t bytes = sizeof(float) * n * n;
  cudaMalloc(reinterpret_cast<void**>(&a), bytes);
  cudaMalloc(reinterpret_cast<void**>(&b), bytes);
  cudaMalloc(reinterpret_cast<void**>(&c), bytes);
  cudaMemset(a, 0, bytes);
  cudaMemset(b, 0, bytes);
  cublasHandle_t h;
  cublasCreate(&h);
  const float one = 1, zero = 0;
  auto run = [&](int k) {
    for (int i = 0; i < k; ++i) {
      cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, b, n, a, n, &zero, c, n);
    }
  };
  run(3);
  cudaDeviceSynchronize();
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  cudaEventRecord(start);
  run(reps);
  cudaEventRecord(stop);
  cudaEventSynchronize(stop);
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  cublasDestroy(h);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  return ms / 1e3 / reps;
}

tensorflow::NodeDef* AddNode(tensorflow::GraphDef* g, const std::string& name,
                             const std::string& op, std::vector<std::string> inputs) {
  tensorflow::NodeDef* n = g->add_node();
  n->set_name(name);
  n->set_op(op);
  n->set_device("/device:GPU:0");
  for (auto& in : inputs) n->add_input(in);
  return n;
}

// x = fill([n, n], 1/n); y = x·x·…·x (`chain` products), run as a target.
tensorflow::GraphDef ChainGraph(int64_t n, int chain) {
  tensorflow::GraphDef g;
  tensorflow::NodeDef* dims = AddNode(&g, "dims", "Const", {});
  dims->set_device("/device:CPU:0");
  SetAttr(dims, "value", Tensor::Vec<int32_t>({static_cast<int32_t>(n), static_cast<int32_t>(n)}));
  SetAttr(dims, "dtype", DT_INT32);
  tensorflow::NodeDef* v = AddNode(&g, "v", "Const", {});
  v->set_device("/device:CPU:0");
  SetAttr(v, "value", Tensor::Scalar<float>(1.0f / n));
  SetAttr(v, "dtype", DT_FLOAT);
  SetAttr(AddNode(&g, "x", "Fill", {"dims", "v"}), "T", DT_FLOAT);
  std::string prev = "x";
  for (int i = 0; i < chain; ++i) {
    const std::string name = absl::StrCat("y", i);
    SetAttr(AddNode(&g, name, "MatMul", {prev, "x"}), "T", DT_FLOAT);
    prev = name;
  }
  AddNode(&g, "done", "NoOp", {"^" + prev});
  return g;
}

int Main(int argc, char** argv) {
  int64_t n = 4096;
  int chain = 20, steps = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--n")) n = std::atoll(argv[i + 1]);
    if (!std::strcmp(argv[i], "--chain")) chain = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--steps")) steps = std::atoi(argv[i + 1]);
  }
  if (gpu::VisibleGpuCount() == 0) {
    std::fprintf(stderr, "gpu_bench: no GPU visible\n");
    return 77;
  }
  const double direct = DirectSgemmSeconds(n, chain);
  SessionOptions opts;
  (*opts.config.mutable_device_count())["GPU"] = 1;
  auto session = DirectSession::New(opts);
  if (!session.ok()) {
    std::fprintf(stderr, "gpu_bench: %s\n", session.status().ToString().c_str());
    return 1;
  }
  absl::Status s = (*session)->Create(ChainGraph(n, chain));
  std::vector<Tensor> out;
  auto step = [&] {
    return (*session)->Run(tensorflow::RunOptions(), {}, {}, {"done"}, &out, nullptr);
  };
  for (int i = 0; i < 2 && s.ok(); ++i) s = step();  // Warm-up: plans, pools.
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < steps && s.ok(); ++i) s = step();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!s.ok()) {
    std::fprintf(stderr, "gpu_bench: %s\n", s.ToString().c_str());
    return 1;
  }
  const double dflow = seconds / steps / chain;
  std::printf("matmul %lldx%lld cuBLAS direct: %.3f ms, %.1f TFLOP/s\n", (long long)n,
              (long long)n, direct * 1e3, Tflops(n, direct));
  std::printf("matmul %lldx%lld dflow session (chain of %d, Sync per step): %.3f ms, %.1f "
              "TFLOP/s; ratio to direct %.3f\n",
              (long long)n, (long long)n, chain, dflow * 1e3, Tflops(n, dflow), direct / dflow);
  std::printf("gpu_bench {\"n\": %lld, \"direct_ms\": %.4f, \"dflow_ms\": %.4f, \"ratio\": %.4f}\n",
              (long long)n, direct * 1e3, dflow * 1e3, direct / dflow);
  return 0;
}

}  // namespace
}  // namespace dflow

int main(int argc, char** argv) { return dflow::Main(argc, argv); }
