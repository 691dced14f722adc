// MLP training throughput: dflow (graph, gradients, optimizer, session) against
// the same forward/backward/SGD math written directly as one C++ loop of
// OpenBLAS calls — the limit for this machine. Batch 128, 784-256-256-10.
//
//   build/bench/train_bench --benchmark_min_time=1
// Report examples/s ("items_per_second") and the ratio dflow / hand-written.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "benchmark/benchmark.h"
#include "dflow/client/client_session.h"
#include "dflow/train/dataset.h"
#include "dflow/train/models.h"
#include "dflow/train/optimizer.h"

extern "C" void openblas_set_num_threads(int);

namespace dflow {
namespace {

constexpr int kBatch = 128, kIn = 784, kHidden = 256, kClasses = 10;
constexpr float kLearningRate = 0.1f;

struct Batch {
  Tensor features, labels;
};

Batch MakeBatch() {
  Dataset data = *MakeSyntheticDataset(kBatch, kClasses, kIn, 1);
  Batch b;
  b.features = data.features();
  b.labels = data.labels();
  return b;
}

void BM_DflowMlpStep(benchmark::State& state) {
  Scope root = Scope::NewRootScope();
  Model m = *BuildMlp(root, {.seed = 1});
  GradientDescentOptimizer sgd(kLearningRate);
  Operation train = *sgd.Minimize(root, m.loss, m.variables);
  Operation init = GlobalVariablesInitializer(root);
  ClientSession session(root);
  std::vector<Tensor> out;
  if (!session.Run({}, {}, {init}, &out).ok()) state.SkipWithError("init failed");
  Batch b = MakeBatch();
  for (auto _ : state) {
    absl::Status s =
        session.Run({{m.features, b.features}, {m.labels, b.labels}}, {m.loss}, {train}, &out);
    if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}
BENCHMARK(BM_DflowMlpStep)->UseRealTime();

// One layer's parameters and gradients.
struct Layer {
  int in, out;
  std::vector<float> w, b, dw, db;
  Layer(int in_dim, int out_dim, std::mt19937* rng) : in(in_dim), out(out_dim) {
    float limit = std::sqrt(6.0f / (in + out));
    std::uniform_real_distribution<float> u(-limit, limit);
    w.resize(size_t(in) * out);
    for (float& v : w) v = u(*rng);
    b.assign(out, 0.0f);
    dw.resize(w.size());
    db.resize(out);
  }
  // y = x·w + b, x [B,in], y [B,out].
  void Forward(const float* x, float* y) const {
    for (int r = 0; r < kBatch; ++r) std::copy(b.begin(), b.end(), y + size_t(r) * out);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kBatch, out, in, 1.0f, x, in,
                w.data(), out, 1.0f, y, out);
  }
  // dw = xᵀ·dy, db = Σ dy, dx = dy·wᵀ (when dx is wanted), then SGD.
  void Backward(const float* x, const float* dy, float* dx) {
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, in, out, kBatch, 1.0f, x, in, dy, out,
                0.0f, dw.data(), out);
    std::fill(db.begin(), db.end(), 0.0f);
    for (int r = 0; r < kBatch; ++r) {
      for (int c = 0; c < out; ++c) db[c] += dy[size_t(r) * out + c];
    }
    if (dx != nullptr) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, kBatch, in, out, 1.0f, dy, out,
                  w.data(), out, 0.0f, dx, in);
    }
    for (size_t i = 0; i < w.size(); ++i) w[i] -= kLearningRate * dw[i];
    for (int i = 0; i < out; ++i) b[i] -= kLearningRate * db[i];
  }
};

void Relu(std::vector<float>* v) {
  for (float& x : *v) x = std::max(x, 0.0f);
}
void ReluBackward(const std::vector<float>& y, std::vector<float>* dy) {
  for (size_t i = 0; i < y.size(); ++i) (*dy)[i] = y[i] > 0 ? (*dy)[i] : 0.0f;
}

// Mean sparse softmax cross-entropy; writes d(loss)/d(logits) into `d`.
float SoftmaxXent(const std::vector<float>& logits, const int32_t* labels, std::vector<float>* d) {
  float loss = 0;
  for (int r = 0; r < kBatch; ++r) {
    const float* z = &logits[size_t(r) * kClasses];
    float* g = &(*d)[size_t(r) * kClasses];
    float mx = *std::max_element(z, z + kClasses), sum = 0;
    for (int c = 0; c < kClasses; ++c) sum += g[c] = std::exp(z[c] - mx);
    for (int c = 0; c < kClasses; ++c) g[c] /= sum;
    loss -= std::log(g[labels[r]]);
    g[labels[r]] -= 1.0f;
    for (int c = 0; c < kClasses; ++c) g[c] /= kBatch;
  }
  return loss / kBatch;
}

void BM_HandWrittenMlpStep(benchmark::State& state) {
  openblas_set_num_threads(static_cast<int>(state.range(0)));
  std::mt19937 rng(1);
  Layer l1(kIn, kHidden, &rng), l2(kHidden, kHidden, &rng), l3(kHidden, kClasses, &rng);
  Batch b = MakeBatch();
  const float* x = b.features.flat<float>().data();
  const int32_t* labels = b.labels.flat<int32_t>().data();
  std::vector<float> h1(kBatch * kHidden), h2(kBatch * kHidden), logits(kBatch * kClasses);
  std::vector<float> dlogits(logits.size()), dh2(h2.size()), dh1(h1.size());
  float loss = 0;
  for (auto _ : state) {
    l1.Forward(x, h1.data());
    Relu(&h1);
    l2.Forward(h1.data(), h2.data());
    Relu(&h2);
    l3.Forward(h2.data(), logits.data());
    loss = SoftmaxXent(logits, labels, &dlogits);
    l3.Backward(h2.data(), dlogits.data(), dh2.data());
    ReluBackward(h2, &dh2);
    l2.Backward(h1.data(), dh2.data(), dh1.data());
    ReluBackward(h1, &dh1);
    l1.Backward(x, dh1.data(), nullptr);
  }
  benchmark::DoNotOptimize(loss);
  state.SetItemsProcessed(state.iterations() * kBatch);
  openblas_set_num_threads(1);  // dflow's kernels expect single-threaded BLAS.
}
BENCHMARK(BM_HandWrittenMlpStep)->Arg(1)->Arg(2)->UseRealTime();

}  // namespace
}  // namespace dflow
