// Helpers for GPU tests: a graph run once on /device:GPU:0 and once on
// /device:CPU:0, and the skip when no GPU is visible.
#ifndef DFLOW_GPU_GPU_TEST_UTIL_H_
#define DFLOW_GPU_GPU_TEST_UTIL_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dflow/gpu/gpu_device.h"
#include "dflow/runtime/direct_session.h"
#include "gtest/gtest.h"

namespace dflow {
namespace gpu {

#define DFLOW_SKIP_WITHOUT_GPU()                                                  \
  if (::dflow::gpu::VisibleGpuCount() == 0) GTEST_SKIP() << "no GPU visible"

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

// Runs `graph` (nodes without a device pinned to `device`) and fetches.
inline absl::StatusOr<std::vector<Tensor>> RunPinned(
    const tensorflow::GraphDef& graph, const std::string& device,
    const std::vector<std::pair<std::string, Tensor>>& feeds,
    const std::vector<std::string>& fetches, const std::vector<std::string>& targets = {}) {
  std::unique_ptr<DirectSession> s = NewGpuSession();
  if (s == nullptr) return absl::InternalError("no session");
  RETURN_IF_ERROR(s->Create(PinnedTo(graph, device)));
  std::vector<Tensor> out;
  RETURN_IF_ERROR(s->Run(tensorflow::RunOptions(), feeds, fetches, targets, &out, nullptr));
  return out;
}

// Element-wise |a - b| <= atol + rtol * |b| for float tensors of one shape.
inline void ExpectNear(const Tensor& a, const Tensor& b, float rtol, float atol,
                       const std::string& what) {
  ASSERT_EQ(a.shape(), b.shape()) << what;
  ASSERT_EQ(a.dtype(), b.dtype()) << what;
  auto x = a.flat<float>(), y = b.flat<float>();
  int shown = 0;
  for (int64_t i = 0; i < a.NumElements() && shown < 5; ++i) {
    if (!(std::abs(x[i] - y[i]) <= atol + rtol * std::abs(y[i]))) {
      ADD_FAILURE() << what << ": element " << i << ": GPU " << x[i] << " vs CPU " << y[i];
      ++shown;
    }
  }
}

}  // namespace gpu
}  // namespace dflow

#endif  // DFLOW_GPU_GPU_TEST_UTIL_H_
