// An in-process cluster for the service fuzzers: /job:worker/task:0 (two
// CPUs) and /job:ps/task:0 (one CPU), each with its devices; the Workers are
// made per input (fresh state) on one shared pool. RunCalls is their loop
// over an input's calls.
#ifndef DFLOW_FUZZ_CLUSTER_UTIL_H_
#define DFLOW_FUZZ_CLUSTER_UTIL_H_

#include <cstdlib>
#include <map>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "dflow/distributed/call_options.h"
#include "dflow/distributed/worker.h"
#include "dflow/framework/attr_util.h"
#include "dflow/framework/thread_pool.h"
#include "dflow/proto/config.pb.h"
#include "dflow/runtime/device_mgr.h"
#include "fuzz/fuzz_util.h"

namespace dflow::fuzz {

inline constexpr char kWorkerTask[] = "/job:worker/replica:0/task:0";
inline constexpr char kPsTask[] = "/job:ps/replica:0/task:0";
// Every call an input makes gets this long; a step or receive that waits
// longer (an empty queue, a never-sent tensor) fails with DeadlineExceeded.
inline constexpr absl::Duration kCallTimeout = absl::Milliseconds(500);

class FuzzCluster {
 public:
  FuzzCluster() : pool_("fuzz_inter_op", 2) {
    AddTask("worker", 2);
    AddTask("ps", 1);
  }
  // Fresh workers (the devices, and so variables, stay: inputs reset them).
  void NewWorkers() {
    workers_.clear();
    for (auto& [name, mgr] : mgrs_) {
      WorkerOptions opts;
      opts.inter_op_pool = &pool_;
      opts.default_timeout = kCallTimeout;
      opts.worker_for_task = [this](const std::string& task) { return worker(task); };
      workers_[name] = std::make_unique<Worker>(mgr.get(), std::move(opts));
    }
  }
  void DropWorkers() { workers_.clear(); }
  WorkerInterface* worker(const std::string& task) {
    auto it = workers_.find(task);
    return it == workers_.end() ? nullptr : it->second.get();
  }
  DeviceMgr* mgr(const std::string& task) { return mgrs_.at(task).get(); }

 private:
  void AddTask(const std::string& job, int cpus) {
    tensorflow::ConfigProto config;
    (*config.mutable_device_count())["CPU"] = cpus;
    auto devices = CreateLocalDevices(config, job, 0, 0);
    if (!devices.ok()) std::abort();
    mgrs_["/job:" + job + "/replica:0/task:0"] =
        std::make_unique<DeviceMgr>(std::move(devices).value());
  }

  ThreadPool pool_;
  std::map<std::string, std::unique_ptr<DeviceMgr>> mgrs_;
  std::map<std::string, std::unique_ptr<Worker>> workers_;
};

// LLVMFuzzerInitialize of a service fuzzer: the common setup (fuzz_util.h)
// and its cluster, kept for every input.
inline FuzzCluster* InitServiceFuzzer() {
  InitCommon();
  return new FuzzCluster();
}

// LLVMFuzzerTestOneInput of a service fuzzer: an input over kMaxInputBytes
// is refused (-1); otherwise `run()` calls the services of fresh workers,
// dropped after.
template <typename Fn>
int FuzzOneInput(FuzzCluster* cluster, size_t size, Fn&& run) {
  if (size > kMaxInputBytes) return -1;
  cluster->NewWorkers();
  run();
  cluster->DropWorkers();
  return 0;
}

// The loop of the service fuzzers: up to eight calls of an input
// (fuzz_util.h's CallReader), each passed on as
// `call(method % num_methods, bytes, options)`, options with a kCallTimeout
// deadline.
template <typename Fn>
void RunCalls(const uint8_t* data, size_t size, int num_methods, Fn&& call) {
  CallReader calls(data, size);
  int method;
  std::string bytes;
  for (int n = 0; n < 8 && calls.Next(&method, &bytes); ++n) {
    call(method % num_methods, bytes, CallOptions::WithTimeout(kCallTimeout));
  }
}

// A NodeDef for seeds.
inline tensorflow::NodeDef* AddNode(tensorflow::GraphDef* g, const std::string& name,
                                    const std::string& op, std::vector<std::string> inputs,
                                    const std::string& device = "") {
  tensorflow::NodeDef* n = g->add_node();
  n->set_name(name);
  n->set_op(op);
  for (auto& in : inputs) n->add_input(in);
  n->set_device(device);
  return n;
}

}  // namespace dflow::fuzz

#endif  // DFLOW_FUZZ_CLUSTER_UTIL_H_
