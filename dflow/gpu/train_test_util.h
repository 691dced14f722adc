// Graph-building helpers for the GPU variable, training and convolution
// tests: nodes, random inputs, and a session that runs several steps on one
// device (variables persist between them).
#ifndef DFLOW_GPU_TRAIN_TEST_UTIL_H_
#define DFLOW_GPU_TRAIN_TEST_UTIL_H_

#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "dflow/framework/attr_util.h"
#include "dflow/gpu/gpu_test_util.h"

namespace dflow {
namespace gpu {
namespace testing {

inline tensorflow::NodeDef* Node(tensorflow::GraphDef* g, const std::string& name,
                                 const std::string& op, std::vector<std::string> inputs = {}) {
  tensorflow::NodeDef* n = g->add_node();
  n->set_name(name);
  n->set_op(op);
  for (auto& in : inputs) n->add_input(in);
  return n;
}

inline tensorflow::NodeDef* Placeholder(tensorflow::GraphDef* g, const std::string& name,
                                        DataType dtype = DT_FLOAT) {
  tensorflow::NodeDef* n = Node(g, name, "Placeholder");
  SetAttr(n, "dtype", dtype);
  return n;
}

// A Const pinned to the CPU (int32 shapes for HostMemory inputs).
inline tensorflow::NodeDef* HostConst(tensorflow::GraphDef* g, const std::string& name,
                                      const Tensor& value) {
  tensorflow::NodeDef* n = Node(g, name, "Const");
  SetAttr(n, "dtype", value.dtype());
  SetAttr(n, "value", value);
  n->set_device("/device:CPU:0");
  return n;
}

// Uniform floats in [lo, hi).
inline Tensor Random(const TensorShape& shape, int seed, float lo = -1, float hi = 1) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  Tensor t(DT_FLOAT, shape);
  for (float& v : t.flat<float>()) v = u(gen);
  return t;
}

using Feeds = std::vector<std::pair<std::string, Tensor>>;

// A session whose graph's unpinned nodes run on `device`.
class DeviceSession {
 public:
  DeviceSession(const tensorflow::GraphDef& graph, const std::string& device)
      : session_(NewGpuSession()) {
    if (session_ != nullptr) status_ = session_->Create(PinnedTo(graph, device));
  }
  const absl::Status& create_status() const { return status_; }

  absl::StatusOr<std::vector<Tensor>> Run(const Feeds& feeds, const std::vector<std::string>& fetches,
                                          const std::vector<std::string>& targets = {}) {
    RETURN_IF_ERROR(status_);
    std::vector<Tensor> out;
    RETURN_IF_ERROR(
        session_->Run(tensorflow::RunOptions(), feeds, fetches, targets, &out, nullptr));
    return out;
  }

 private:
  std::unique_ptr<DirectSession> session_;
  absl::Status status_ = absl::InternalError("no session");
};

}  // namespace testing
}  // namespace gpu
}  // namespace dflow

#endif  // DFLOW_GPU_TRAIN_TEST_UTIL_H_
