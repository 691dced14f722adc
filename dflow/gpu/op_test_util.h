// Graph building and GPU-vs-CPU comparison for the GPU kernel tests
// (cwise_ops_test.cc, reduction_ops_test.cc).
#ifndef DFLOW_GPU_OP_TEST_UTIL_H_
#define DFLOW_GPU_OP_TEST_UTIL_H_

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "dflow/framework/attr_util.h"
#include "dflow/gpu/gpu_test_util.h"

namespace dflow {
namespace gpu {

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

inline void AddPlaceholder(tensorflow::GraphDef* g, const std::string& name,
                           DataType dtype = DT_FLOAT) {
  tensorflow::NodeDef* n = AddNode(g, name, "Placeholder", {}, DT_INVALID);
  SetAttr(n, "dtype", dtype);
}

// A constant pinned to the CPU (GPU kernels read such inputs in host memory).
inline void AddHostConst(tensorflow::GraphDef* g, const std::string& name, const Tensor& value) {
  tensorflow::NodeDef* n = AddNode(g, name, "Const", {}, DT_INVALID);
  SetAttr(n, "dtype", value.dtype());
  SetAttr(n, "value", value);
  n->set_device("/device:CPU:0");
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
inline void CompareGpuCpu(const tensorflow::GraphDef& graph,
                          const std::vector<std::pair<std::string, Tensor>>& feeds,
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
inline absl::Status GpuRunStatus(const tensorflow::GraphDef& graph,
                                 const std::vector<std::pair<std::string, Tensor>>& feeds,
                                 const std::vector<std::string>& fetches) {
  return RunPinned(graph, "/device:GPU:0", feeds, fetches).status();
}

}  // namespace gpu
}  // namespace dflow

#endif  // DFLOW_GPU_OP_TEST_UTIL_H_
