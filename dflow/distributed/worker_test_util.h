// Test helpers shared by the worker tests (in-process and over gRPC): a
// task's devices and worker, and a builder for partition GraphDefs as a
// master would send them.
#ifndef DFLOW_DISTRIBUTED_WORKER_TEST_UTIL_H_
#define DFLOW_DISTRIBUTED_WORKER_TEST_UTIL_H_

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "dflow/distributed/worker.h"
#include "dflow/framework/attr_util.h"
#include "dflow/framework/rendezvous.h"
#include "gtest/gtest.h"

namespace dflow::worker_test {

// One task's devices and its worker.
struct Task {
  Task(const std::string& job, int index, int cpus, WorkerOptions opts = {}) {
    tensorflow::ConfigProto config;
    (*config.mutable_device_count())["CPU"] = cpus;
    auto devices = CreateLocalDevices(config, job, 0, index);
    EXPECT_TRUE(devices.ok()) << devices.status();
    mgr = std::make_unique<DeviceMgr>(std::move(devices).value());
    worker = std::make_unique<Worker>(mgr.get(), std::move(opts));
  }
  std::string Cpu(int i) const { return mgr->ListDevices()[i]->name(); }
  uint64_t Incarnation(int i) const { return mgr->ListDevices()[i]->incarnation(); }
  // The key of a tensor sent from CPU:i of this task to `dst`.
  std::string Key(int i, const std::string& dst, const std::string& name) const {
    return Rendezvous::CreateKey(Cpu(i), Incarnation(i), dst, name);
  }

  std::unique_ptr<DeviceMgr> mgr;
  std::unique_ptr<Worker> worker;
};

// A small GraphDef builder for partitions as a master would send them.
class Builder {
 public:
  tensorflow::NodeDef* Node(const std::string& name, const std::string& op,
                            std::vector<std::string> inputs, const std::string& device) {
    tensorflow::NodeDef* n = def_.add_node();
    n->set_name(name);
    n->set_op(op);
    for (auto& in : inputs) n->add_input(in);
    n->set_device(device);
    return n;
  }
  void Const(const std::string& name, const Tensor& value, const std::string& device) {
    tensorflow::NodeDef* n = Node(name, "Const", {}, device);
    SetAttr(n, "dtype", value.dtype());
    SetAttr(n, "value", value);
  }
  void Binary(const std::string& name, const std::string& op, const std::string& a,
              const std::string& b, const std::string& device) {
    SetAttr(Node(name, op, {a, b}, device), "T", DT_FLOAT);
  }
  // _Recv of `tensor_name` sent from `src` (incarnation `inc`) to `dst`.
  void Recv(const std::string& name, const std::string& tensor_name, const std::string& src,
            uint64_t inc, const std::string& dst, bool client, const std::string& device) {
    tensorflow::NodeDef* n = Node(name, "_Recv", {}, device);
    SetAttr(n, "tensor_type", DT_FLOAT);
    SetKeyAttrs(n, tensor_name, src, inc, dst, client);
  }
  void Send(const std::string& name, const std::string& input, const std::string& tensor_name,
            const std::string& src, uint64_t inc, const std::string& dst, bool client,
            const std::string& device) {
    tensorflow::NodeDef* n = Node(name, "_Send", {input}, device);
    SetAttr(n, "T", DT_FLOAT);
    SetKeyAttrs(n, tensor_name, src, inc, dst, client);
  }
  const tensorflow::GraphDef& def() const { return def_; }

 private:
  static void SetKeyAttrs(tensorflow::NodeDef* n, const std::string& tensor_name,
                          const std::string& src, uint64_t inc, const std::string& dst,
                          bool client) {
    SetAttr(n, "tensor_name", tensor_name);
    SetAttr(n, "send_device", src);
    SetAttr(n, "send_device_incarnation", static_cast<int64_t>(inc));
    SetAttr(n, "recv_device", dst);
    SetAttr(n, "client_terminated", client);
  }
  tensorflow::GraphDef def_;
};

// The partitions of y = 2 * v with v = [1, 2, 3] on the ps and the
// multiplication on the worker: the ps sends v ("edge_v"), the worker
// receives it and sends y to its client (key `worker.Key(0, w0, "y")`).
struct PsWorkerGraphs {
  tensorflow::GraphDef ps;
  tensorflow::GraphDef worker;
};
inline PsWorkerGraphs DoubleOnWorker(const Task& ps, const Task& worker) {
  const std::string p0 = ps.Cpu(0), w0 = worker.Cpu(0);
  Builder psb;
  psb.Const("v", Tensor::Vec<float>({1, 2, 3}), p0);
  psb.Send("send_v", "v", "edge_v", p0, ps.Incarnation(0), w0, false, p0);
  Builder wb;
  wb.Recv("recv_v", "edge_v", p0, ps.Incarnation(0), w0, false, w0);
  wb.Const("two", Tensor::Scalar(2.0f), w0);
  wb.Binary("double", "Mul", "recv_v", "two", w0);
  wb.Send("y", "double", "y", w0, worker.Incarnation(0), w0, true, w0);
  return {psb.def(), wb.def()};
}

// Registers `def` on `w` and returns its graph handle.
inline absl::StatusOr<std::string> Register(WorkerInterface* w, const tensorflow::GraphDef& def,
                                            const CallOptions& opts = {}) {
  tensorflow::RegisterGraphRequest req;
  *req.mutable_graph_def() = def;
  tensorflow::RegisterGraphResponse resp;
  absl::Status s = w->RegisterGraph(req, &resp, opts);
  if (!s.ok()) return s;
  return resp.graph_handle();
}

inline tensorflow::NamedTensorProto Named(const std::string& key, const Tensor& t) {
  tensorflow::NamedTensorProto p;
  p.set_name(key);
  t.AsProtoTensorContent(p.mutable_tensor());
  return p;
}

inline std::vector<float> Floats(const tensorflow::TensorProto& p) {
  absl::StatusOr<Tensor> t = Tensor::FromProto(p);
  EXPECT_TRUE(t.ok()) << t.status();
  if (!t.ok()) return {};
  auto f = t->flat<float>();
  return std::vector<float>(f.begin(), f.end());
}

inline std::vector<float> Floats(const Tensor& t) {
  auto f = t.flat<float>();
  return std::vector<float>(f.begin(), f.end());
}

// v (a [3] float variable on /job:ps), init assigns [1, 2, 3];
// y = v * 2 on /job:worker/task:1; r = a resource variable on worker 1.
inline tensorflow::GraphDef PsWorkerGraph() {
  Builder b;
  tensorflow::NodeDef* v = b.Node("v", "VariableV2", {}, "/job:ps/task:0");
  SetAttr(v, "dtype", DT_FLOAT);
  tensorflow::TensorShapeProto shape;
  shape.add_dim()->set_size(3);
  SetAttr(v, "shape", shape);
  b.Const("init_value", Tensor::Vec<float>({1, 2, 3}), "/job:ps/task:0");
  tensorflow::NodeDef* init = b.Node("init", "Assign", {"v", "init_value"}, "/job:ps/task:0");
  SetAttr(init, "T", DT_FLOAT);
  b.Const("two", Tensor::Scalar(2.0f), "/job:worker/task:1");
  b.Binary("y", "Mul", "v", "two", "/job:worker/task:1");
  tensorflow::NodeDef* r = b.Node("r", "VarHandleOp", {}, "/job:worker/task:1");
  SetAttr(r, "dtype", DT_FLOAT);
  SetAttr(r, "shape", tensorflow::TensorShapeProto());
  SetAttr(r, "shared_name", std::string("r"));
  tensorflow::NodeDef* assign_r =
      b.Node("assign_r", "AssignVariableOp", {"r", "two"}, "/job:worker/task:1");
  SetAttr(assign_r, "dtype", DT_FLOAT);
  return b.def();
}

// A Reshape on the ps that fails ("bad": 3 values into [2, 2]) and "after" on
// worker 1, which waits for it.
inline tensorflow::GraphDef KernelErrorGraph() {
  Builder b;
  b.Const("three", Tensor::Vec<float>({1, 2, 3}), "/job:ps/task:0");
  b.Const("shape", Tensor::Vec<int32_t>({2, 2}), "/job:ps/task:0");
  tensorflow::NodeDef* bad = b.Node("bad", "Reshape", {"three", "shape"}, "/job:ps/task:0");
  SetAttr(bad, "T", DT_FLOAT);
  SetAttr(bad, "Tshape", DT_INT32);
  b.Binary("after", "Mul", "bad", "bad", "/job:worker/task:1");
  return b.def();
}

// A float tensor of `n` random bit patterns (NaNs and denormals included).
inline Tensor RandomBits(int64_t n, uint32_t seed) {
  Tensor t(DT_FLOAT, TensorShape({n}));
  std::mt19937 rng(seed);
  auto* p = static_cast<uint32_t*>(t.raw_data());
  for (int64_t i = 0; i < n; ++i) p[i] = rng();
  return t;
}

inline bool SameBytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.TotalBytes()) == 0;
}

}  // namespace dflow::worker_test

#endif  // DFLOW_DISTRIBUTED_WORKER_TEST_UTIL_H_
