#define EIGEN_USE_THREADS

#include "dflow/framework/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <unsupported/Eigen/CXX11/Tensor>
#include <unsupported/Eigen/CXX11/ThreadPool>
#include <utility>

#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "dflow/framework/env_flag.h"

namespace dflow {
namespace {

// Below this many cycles of total work, splitting costs more than it saves.
constexpr int64_t kMinCyclesPerShard = 100000;

// One ParallelFor call. Shards are claimed from `next`, by the caller and by
// helper tasks alike, so the caller never waits on a shard nobody has started:
// nested ParallelFor calls from pool threads cannot deadlock.
struct ForState {
  ForState(int64_t total, int64_t block, int64_t shards,
           const std::function<void(int64_t, int64_t)>* fn)
      : total(total), block(block), num_shards(shards), fn(fn), done(shards) {}

  // Runs shards until none are left unclaimed.
  void RunShards() {
    for (int64_t s = next.fetch_add(1); s < num_shards; s = next.fetch_add(1)) {
      const int64_t begin = s * block;
      (*fn)(begin, std::min(total, begin + block));
      done.DecrementCount();
    }
  }

  const int64_t total;
  const int64_t block;
  const int64_t num_shards;
  // Only called for claimed shards, all of which finish before the caller
  // returns, so borrowing the caller's function is safe.
  const std::function<void(int64_t, int64_t)>* fn;  // not owned
  std::atomic<int64_t> next{0};
  absl::BlockingCounter done;
};

}  // namespace

struct ThreadPool::Impl {
  Impl(std::string name, int num_threads)
      : name(std::move(name)),
        pool(num_threads, PoolSpinning()),
        device(&pool, num_threads) {}
  const std::string name;
  Eigen::ThreadPool pool;
  Eigen::ThreadPoolDevice device;
};

ThreadPool::ThreadPool(std::string name, int num_threads)
    : impl_(std::make_unique<Impl>(std::move(name), std::max(1, num_threads))) {}

ThreadPool::~ThreadPool() = default;

void ThreadPool::Schedule(std::function<void()> fn) { impl_->pool.Schedule(std::move(fn)); }

void ThreadPool::ParallelFor(int64_t total, int64_t cost_per_unit,
                             const std::function<void(int64_t, int64_t)>& fn) {
  if (total <= 0) return;
  const int threads = NumThreads();
  const int64_t cost = std::max<int64_t>(1, cost_per_unit);
  // total * cost, saturating instead of overflowing.
  const int64_t work = total > INT64_MAX / cost ? INT64_MAX : total * cost;
  const int64_t max_shards = std::min<int64_t>(total, 4 * static_cast<int64_t>(threads));
  const int64_t wanted = std::min(max_shards, work / kMinCyclesPerShard);
  if (threads <= 1 || wanted <= 1) {
    fn(0, total);
    return;
  }
  const int64_t block = (total + wanted - 1) / wanted;
  const int64_t shards = (total + block - 1) / block;
  auto state = std::make_shared<ForState>(total, block, shards, &fn);
  const int64_t helpers = std::min<int64_t>(shards - 1, threads);
  for (int64_t i = 0; i < helpers; ++i) {
    impl_->pool.Schedule([state] { state->RunShards(); });
  }
  state->RunShards();
  state->done.Wait();
}

int ThreadPool::NumThreads() const { return impl_->pool.NumThreads(); }

bool ThreadPool::InPool() const { return impl_->pool.CurrentThreadId() != -1; }

Eigen::ThreadPoolInterface* ThreadPool::eigen_pool() { return &impl_->pool; }

const Eigen::ThreadPoolDevice* ThreadPool::eigen_device() { return &impl_->device; }

namespace {

absl::Mutex intra_op_mu;
int intra_op_threads ABSL_GUARDED_BY(intra_op_mu) = 0;
ThreadPool* intra_op_pool ABSL_GUARDED_BY(intra_op_mu) = nullptr;

absl::Mutex inter_op_mu;
int inter_op_threads ABSL_GUARDED_BY(inter_op_mu) = 0;
ThreadPool* inter_op_pool ABSL_GUARDED_BY(inter_op_mu) = nullptr;

}  // namespace

ThreadPool* IntraOpPool() {
  absl::MutexLock l(&intra_op_mu);
  if (intra_op_pool == nullptr) {
    // Unsized: the inter-op pool's threads also run kernels' shards, so the
    // process never has more busy threads than cores. (Two pools of one
    // thread per core each made a 2-core VM run four: a split MatMul's
    // helper competed with the sibling kernel the inter-op pool was running,
    // and the MLP step ran at 0.76-0.84 of the hand-written loop's speed
    // instead of 0.87-1.0; bench/train_bench.cc, BM_DflowOverHandWritten.)
    // Kernels split work only through ParallelFor, whose caller runs every
    // shard no helper has started, so sharing cannot deadlock.
    // Never destroyed: kernels may still run during static destruction.
    intra_op_pool =
        intra_op_threads > 0 ? new ThreadPool("intra_op", intra_op_threads) : InterOpPool();
  }
  return intra_op_pool;
}

ThreadPool* InterOpPool() {
  absl::MutexLock l(&inter_op_mu);
  if (inter_op_pool == nullptr) {
    // Never destroyed: kernels may still run during static destruction.
    inter_op_pool = new ThreadPool(
        "inter_op", inter_op_threads > 0
                        ? inter_op_threads
                        : std::max(2, static_cast<int>(std::thread::hardware_concurrency())));
  }
  return inter_op_pool;
}

void SetInterOpThreads(int num_threads) {
  absl::MutexLock l(&inter_op_mu);
  inter_op_threads = num_threads;  // Has no effect once the pool exists.
}

bool PoolSpinning() {
  static const bool spin = NotOffInEnv("DFLOW_POOL_SPIN");
  return spin;
}

void SetIntraOpThreads(int num_threads) {
  absl::MutexLock l(&intra_op_mu);
  intra_op_threads = num_threads;  // Has no effect once the pool exists.
}

}  // namespace dflow
