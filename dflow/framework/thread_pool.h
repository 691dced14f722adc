// ThreadPool: a fixed set of worker threads (Eigen's non-blocking pool).
// Thread-safe.
#ifndef DFLOW_FRAMEWORK_THREAD_POOL_H_
#define DFLOW_FRAMEWORK_THREAD_POOL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace Eigen {
class ThreadPoolInterface;
struct ThreadPoolDevice;
}  // namespace Eigen

namespace dflow {

class ThreadPool {
 public:
  ThreadPool(std::string name, int num_threads);
  ~ThreadPool();  // Waits for scheduled work to finish.
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  void Schedule(std::function<void()> fn);
  // Runs fn(begin, end) over shards of [0, total) in parallel and returns when
  // all are done. `cost_per_unit` (≈ cycles per element) sets shard sizes, so
  // cheap small loops run inline on the caller.
  void ParallelFor(int64_t total, int64_t cost_per_unit,
                   const std::function<void(int64_t, int64_t)>& fn);
  int NumThreads() const;
  // True when called from one of this pool's threads.
  bool InPool() const;
  Eigen::ThreadPoolInterface* eigen_pool();
  // A device for Eigen tensor expressions: `out.device(*pool->eigen_device()) = a + b;`
  const Eigen::ThreadPoolDevice* eigen_device();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The process-wide intra-op pool (one budget per process, shared by every
// device, session and server), where kernels run the shards of a
// ParallelFor. Unless SetIntraOpThreads() sized it before first use, it is
// the inter-op pool itself: kernels and their shards share one thread per
// core. Its eigen_device() blocks the calling thread until every shard is
// done, so use it only from threads outside the pool.
ThreadPool* IntraOpPool();
void SetIntraOpThreads(int num_threads);

// The process-wide inter-op pool, where executors run kernels: shared by
// every session and server of the process that does not ask for its own
// (DESIGN §4), one thread per core (at least two) unless SetInterOpThreads()
// sized it before first use (num_threads <= 0 keeps the default).
ThreadPool* InterOpPool();
void SetInterOpThreads(int num_threads);

// Whether pool threads spin a while for new work before they sleep (Eigen's
// pools; on unless the environment sets DFLOW_POOL_SPIN=0, read once by the
// first pool). Spinning saves a wake-up per task when the process has its
// cores to itself (one process trains ~20% faster with it), and takes cores
// from other processes when more busy processes than cores share a host,
// which is why `dflow cluster` turns it off in its tasks then.
bool PoolSpinning();

}  // namespace dflow

#endif  // DFLOW_FRAMEWORK_THREAD_POOL_H_
