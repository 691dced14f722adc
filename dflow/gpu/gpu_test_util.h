// Helpers for the GPU tests: graph building, random inputs, sessions whose
// unpinned nodes run on one device, and the GPU-against-CPU comparison every
// kernel test makes. Tests that need a GPU start with DFLOW_SKIP_WITHOUT_GPU().
#ifndef DFLOW_GPU_GPU_TEST_UTIL_H_
#define DFLOW_GPU_GPU_TEST_UTIL_H_

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "dflow/framework/attr_util.h"
#include "dflow/gpu/gpu_device.h"
#include "dflow/runtime/direct_session.h"
#include "gtest/gtest.h"

namespace dflow {
namespace gpu {

#define DFLOW_SKIP_WITHOUT_GPU()                                                  \
  if (::dflow::gpu::VisibleGpuCount() == 0) GTEST_SKIP() << "no GPU visible"

using Feeds = std::vector<std::pair<std::string, Tensor>>;

// A node; its attr "T" is set to `t` unless `t` is DT_INVALID.
inline tensorflow::NodeDef* AddNode(tensorflow::GraphDef* g, const std::string& name,
                                    const std::string& op, std::vector<std::string> inputs = {},
                                    DataType t = DT_FLOAT) {
  tensorflow::NodeDef* n = g->add_node();
  n->set_name(name);
  n->set_op(op);
  for (auto& in : inputs) n->add_input(in);
  if (t != DT_INVALID) SetAttr(n, "T", t);
  return n;
}

// A node without a "T" attr (variables, placeholders, ops typed otherwise).
inline tensorflow::NodeDef* Node(tensorflow::GraphDef* g, const std::string& name,
                                 const std::string& op, std::vector<std::string> inputs = {}) {
  return AddNode(g, name, op, std::move(inputs), DT_INVALID);
}

inline tensorflow::NodeDef* AddPlaceholder(tensorflow::GraphDef* g, const std::string& name,
                                           DataType dtype = DT_FLOAT) {
  tensorflow::NodeDef* n = Node(g, name, "Placeholder");
  SetAttr(n, "dtype", dtype);
  return n;
}

// A constant pinned to the CPU (GPU kernels read such inputs in host memory).
inline tensorflow::NodeDef* AddHostConst(tensorflow::GraphDef* g, const std::string& name,
                                         const Tensor& value) {
  tensorflow::NodeDef* n = Node(g, name, "Const");
  SetAttr(n, "dtype", value.dtype());
  SetAttr(n, "value", value);
  n->set_device("/device:CPU:0");
  return n;
}

// Uniform floats in [lo, hi); with `step` > 0, rounded to multiples of it
// (so that comparisons and ties happen).
inline Tensor RandomTensor(const TensorShape& shape, int seed, float lo = -1, float hi = 1,
                           float step = 0) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  Tensor t(DT_FLOAT, shape);
  for (float& v : t.flat<float>()) {
    v = u(gen);
    if (step > 0) v = std::round(v / step) * step;
  }
  return t;
}

// A session with one CPU and (where visible) one GPU.
inline std::unique_ptr<DirectSession> NewGpuSession(tensorflow::ConfigProto config = {}) {
  (*config.mutable_device_count())["GPU"] = 1;
  SessionOptions opts;
  opts.config = std::move(config);
  absl::StatusOr<std::unique_ptr<DirectSession>> s = DirectSession::New(opts);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

// `graph` with every node that has no device pinned to `device`.
inline tensorflow::GraphDef PinnedTo(tensorflow::GraphDef graph, const std::string& device) {
  for (tensorflow::NodeDef& n : *graph.mutable_node()) {
    if (n.device().empty()) n.set_device(device);
  }
  return graph;
}

// A session whose graph's unpinned nodes run on `device`, for several steps
// (variables persist between them).
class DeviceSession {
 public:
  DeviceSession(const tensorflow::GraphDef& graph, const std::string& device,
                tensorflow::ConfigProto config = {})
      : session_(NewGpuSession(std::move(config))) {
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

// Runs `graph` (nodes without a device pinned to `device`) once.
inline absl::StatusOr<std::vector<Tensor>> RunPinned(const tensorflow::GraphDef& graph,
                                                     const std::string& device, const Feeds& feeds,
                                                     const std::vector<std::string>& fetches,
                                                     const std::vector<std::string>& targets = {}) {
  DeviceSession s(graph, device);
  return s.Run(feeds, fetches, targets);
}

// a and b agree: equal shapes and dtypes; floating-point elements within
// atol + rtol * |b| (NaN matches NaN, infinities match exactly); others exact.
inline void ExpectSame(const Tensor& a, const Tensor& b, double rtol, double atol,
                       const std::string& what) {
  ASSERT_EQ(a.dtype(), b.dtype()) << what;
  ASSERT_EQ(a.shape(), b.shape()) << what;
  auto near = [&](double x, double y) {
    if (std::isnan(x) || std::isnan(y)) return std::isnan(x) && std::isnan(y);
    if (std::isinf(x) || std::isinf(y)) return x == y;
    return std::abs(x - y) <= atol + rtol * std::abs(y);
  };
  int shown = 0;
  for (int64_t i = 0; i < a.NumElements() && shown < 5; ++i) {
    bool ok;
    if (a.dtype() == DT_FLOAT) {
      ok = near(a.flat<float>()[i], b.flat<float>()[i]);
    } else if (a.dtype() == DT_DOUBLE) {
      ok = near(a.flat<double>()[i], b.flat<double>()[i]);
    } else {
      const size_t size = DataTypeSize(a.dtype());
      ok = std::memcmp(static_cast<const char*>(a.raw_data()) + i * size,
                       static_cast<const char*>(b.raw_data()) + i * size, size) == 0;
    }
    if (!ok) {
      ADD_FAILURE() << what << ": element " << i << " of " << a.shape().DebugString() << ": GPU "
                    << a.ValueString(i) << " vs CPU " << b.ValueString(i);
      ++shown;
    }
  }
}

// Runs `graph` on the GPU and on the CPU with the same feeds and expects
// every fetch to agree (see ExpectSame).
inline void CompareGpuCpu(const tensorflow::GraphDef& graph, const Feeds& feeds,
                          const std::vector<std::string>& fetches, double rtol, double atol,
                          const std::string& what) {
  absl::StatusOr<std::vector<Tensor>> gpu = RunPinned(graph, "/device:GPU:0", feeds, fetches);
  absl::StatusOr<std::vector<Tensor>> cpu = RunPinned(graph, "/device:CPU:0", feeds, fetches);
  ASSERT_TRUE(gpu.ok()) << what << ": " << gpu.status();
  ASSERT_TRUE(cpu.ok()) << what << ": " << cpu.status();
  ASSERT_EQ(gpu->size(), fetches.size());
  for (size_t i = 0; i < fetches.size(); ++i) {
    ExpectSame((*gpu)[i], (*cpu)[i], rtol, atol, what + " " + fetches[i]);
  }
}

// The status of running `graph` on the GPU.
inline absl::Status GpuRunStatus(const tensorflow::GraphDef& graph, const Feeds& feeds,
                                 const std::vector<std::string>& fetches) {
  return RunPinned(graph, "/device:GPU:0", feeds, fetches).status();
}

}  // namespace gpu
}  // namespace dflow

#endif  // DFLOW_GPU_GPU_TEST_UTIL_H_
