// MLP training throughput: dflow (graph, gradients, optimizer, session) against
// the same forward/backward/SGD math written directly as one C++ loop of
// OpenBLAS calls — the limit for this machine. Batch 128, 784-256-256-10.
//
//   build/bench/train_bench --benchmark_min_time=1
// Report examples/s ("items_per_second") and the ratio dflow / hand-written.
#include <cblas.h>

#include <algorithm>
#include <chrono>
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

// dflow: graph, symbolic gradients, GradientDescent, one ClientSession::Run per step.
class DflowMlp {
 public:
  DflowMlp()
      : root_(Scope::NewRootScope()),
        model_(*BuildMlp(root_, {.seed = 1})),
        train_(*GradientDescentOptimizer(kLearningRate)
                    .Minimize(root_, model_.loss, model_.variables)),
        init_(GlobalVariablesInitializer(root_)),
        session_(root_),
        batch_(MakeBatch()) {}
  absl::Status Init() { return session_.Run({}, {}, {init_}, &out_); }
  absl::Status Step() {
    return session_.Run({{model_.features, batch_.features}, {model_.labels, batch_.labels}},
                        {model_.loss}, {train_}, &out_);
  }

 private:
  Scope root_;
  Model model_;
  Operation train_, init_;
  ClientSession session_;
  Batch batch_;
  std::vector<Tensor> out_;
};

void BM_DflowMlpStep(benchmark::State& state) {
  DflowMlp mlp;
  if (!mlp.Init().ok()) state.SkipWithError("init failed");
  for (auto _ : state) {
    absl::Status s = mlp.Step();
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

// The same step as one C++ loop of OpenBLAS calls, threaded by OpenBLAS.
class HandWrittenMlp {
 public:
  HandWrittenMlp()
      : rng_(1),
        l1_(kIn, kHidden, &rng_),
        l2_(kHidden, kHidden, &rng_),
        l3_(kHidden, kClasses, &rng_),
        batch_(MakeBatch()),
        h1_(kBatch * kHidden),
        h2_(kBatch * kHidden),
        logits_(kBatch * kClasses),
        dlogits_(logits_.size()),
        dh2_(h2_.size()),
        dh1_(h1_.size()) {}
  float Step() {
    const float* x = batch_.features.flat<float>().data();
    l1_.Forward(x, h1_.data());
    Relu(&h1_);
    l2_.Forward(h1_.data(), h2_.data());
    Relu(&h2_);
    l3_.Forward(h2_.data(), logits_.data());
    const float loss = SoftmaxXent(logits_, batch_.labels.flat<int32_t>().data(), &dlogits_);
    l3_.Backward(h2_.data(), dlogits_.data(), dh2_.data());
    ReluBackward(h2_, &dh2_);
    l2_.Backward(h1_.data(), dh2_.data(), dh1_.data());
    ReluBackward(h1_, &dh1_);
    l1_.Backward(x, dh1_.data(), nullptr);
    return loss;
  }

 private:
  std::mt19937 rng_;
  Layer l1_, l2_, l3_;
  Batch batch_;
  std::vector<float> h1_, h2_, logits_, dlogits_, dh2_, dh1_;
};

void BM_HandWrittenMlpStep(benchmark::State& state) {
  openblas_set_num_threads(static_cast<int>(state.range(0)));
  HandWrittenMlp mlp;
  float loss = 0;
  for (auto _ : state) loss = mlp.Step();
  benchmark::DoNotOptimize(loss);
  state.SetItemsProcessed(state.iterations() * kBatch);
  openblas_set_num_threads(1);  // dflow's kernels expect single-threaded BLAS.
}
BENCHMARK(BM_HandWrittenMlpStep)->Arg(1)->Arg(2)->UseRealTime();

// The ratio the issue asks for, robust to a machine whose speed drifts (a
// shared VM): each iteration times kRoundSteps steps of dflow, then of the
// hand-written loop on 2 and on 1 OpenBLAS thread, back to back, and keeps
// the per-round ratios. Reported: their median and the best round's.
constexpr int kRoundSteps = 40;

template <typename F>
double SecondsFor(int steps, F&& step) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) step();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

void BM_DflowOverHandWritten(benchmark::State& state) {
  DflowMlp dflow;
  HandWrittenMlp hand;
  if (!dflow.Init().ok()) state.SkipWithError("init failed");
  std::vector<double> vs2, vs1;
  for (auto _ : state) {
    absl::Status s;
    const double t_dflow = SecondsFor(kRoundSteps, [&] { s.Update(dflow.Step()); });
    if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
    openblas_set_num_threads(2);
    const double t2 = SecondsFor(kRoundSteps, [&] { benchmark::DoNotOptimize(hand.Step()); });
    openblas_set_num_threads(1);
    const double t1 = SecondsFor(kRoundSteps, [&] { benchmark::DoNotOptimize(hand.Step()); });
    vs2.push_back(t2 / t_dflow);
    vs1.push_back(t1 / t_dflow);
  }
  state.counters["vs_2thread_median"] = Median(vs2);
  state.counters["vs_2thread_best"] = vs2.empty() ? 0 : *std::max_element(vs2.begin(), vs2.end());
  state.counters["vs_1thread_median"] = Median(vs1);
}
BENCHMARK(BM_DflowOverHandWritten)->Iterations(30)->UseRealTime();

}  // namespace
}  // namespace dflow
