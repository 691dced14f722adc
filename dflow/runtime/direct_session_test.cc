#include "dflow/runtime/direct_session.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dflow/framework/attr_util.h"
#include "dflow/ops/variable_ops.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

// --- GraphDef building helpers ------------------------------------------------------

tensorflow::NodeDef* Node(tensorflow::GraphDef* g, const std::string& name, const std::string& op,
                          std::vector<std::string> inputs = {}, const std::string& device = "") {
  tensorflow::NodeDef* n = g->add_node();
  n->set_name(name);
  n->set_op(op);
  for (auto& in : inputs) n->add_input(in);
  n->set_device(device);
  return n;
}

void Const(tensorflow::GraphDef* g, const std::string& name, const Tensor& value,
           const std::string& device = "") {
  tensorflow::NodeDef* n = Node(g, name, "Const", {}, device);
  SetAttr(n, "value", value);
  SetAttr(n, "dtype", value.dtype());
}

void Placeholder(tensorflow::GraphDef* g, const std::string& name, DataType dtype,
                 const TensorShape& shape) {
  tensorflow::NodeDef* n = Node(g, name, "Placeholder");
  SetAttr(n, "dtype", dtype);
  SetAttr(n, "shape", shape);
}

void Binary(tensorflow::GraphDef* g, const std::string& name, const std::string& op,
            const std::string& a, const std::string& b, const std::string& device = "",
            DataType dtype = DT_FLOAT) {
  SetAttr(Node(g, name, op, {a, b}, device), "T", dtype);
}

std::vector<float> Values(const Tensor& t) {
  auto f = t.flat<float>();
  return std::vector<float>(f.begin(), f.end());
}

std::unique_ptr<DirectSession> NewSession(tensorflow::ConfigProto config = {}) {
  SessionOptions opts;
  opts.config = std::move(config);
  absl::StatusOr<std::unique_ptr<DirectSession>> s = DirectSession::New(opts);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

// x: float[2] placeholder; y = x + [1, 2]; z = y * y.
tensorflow::GraphDef XYZGraph() {
  tensorflow::GraphDef g;
  Placeholder(&g, "x", DT_FLOAT, TensorShape({2}));
  Const(&g, "c", Tensor::Vec<float>({1, 2}));
  Binary(&g, "y", "AddV2", "x", "c");
  Binary(&g, "z", "Mul", "y", "y");
  return g;
}

// --- tests ------------------------------------------------------------------------------

TEST(DirectSessionTest, FeedsFetchesInCallerOrder) {
  auto s = NewSession();
  ASSERT_TRUE(s->Create(XYZGraph()).ok());
  std::vector<Tensor> out;
  absl::Status st = s->Run({{"x:0", Tensor::Vec<float>({3, 4})}}, {"z", "y:0", "z:0"}, {}, &out);
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(Values(out[0]), (std::vector<float>{16, 36}));
  EXPECT_EQ(Values(out[1]), (std::vector<float>{4, 6}));
  EXPECT_EQ(Values(out[2]), (std::vector<float>{16, 36}));
}

TEST(DirectSessionTest, FeedingAnIntermediateTensorSkipsItsProducer) {
  auto s = NewSession();
  ASSERT_TRUE(s->Create(XYZGraph()).ok());
  std::vector<Tensor> out;
  // x is never fed: y is fed directly, so the placeholder never runs.
  absl::Status st = s->Run({{"y", Tensor::Vec<float>({2, 5})}}, {"z"}, {}, &out);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(Values(out[0]), (std::vector<float>{4, 25}));
}

TEST(DirectSessionTest, RepeatedRunsHitTheCache) {
  auto s = NewSession();
  tensorflow::GraphDef g = XYZGraph();
  Placeholder(&g, "w", DT_FLOAT, TensorShape({2}));
  Binary(&g, "v", "AddV2", "x", "w");
  ASSERT_TRUE(s->Create(g).ok());
  std::vector<Tensor> out;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(s->Run({{"x", Tensor::Vec<float>({1, 1})}}, {"z"}, {}, &out).ok());
  }
  EXPECT_EQ(s->num_cached_signatures(), 1);
  // Same signature in another order and spelling: still one entry.
  Tensor one = Tensor::Vec<float>({1, 1});
  ASSERT_TRUE(s->Run({{"x", one}, {"w:0", one}}, {"v", "z"}, {}, &out).ok());
  ASSERT_TRUE(s->Run({{"w", one}, {"x:0", one}}, {"z:0", "v:0"}, {}, &out).ok());
  EXPECT_EQ(s->num_cached_signatures(), 2);
  EXPECT_EQ(Values(out[1]), (std::vector<float>{2, 2}));
}

TEST(DirectSessionTest, TargetsRunForTheirEffects) {
  auto s = NewSession();
  tensorflow::GraphDef g;
  tensorflow::NodeDef* v = Node(&g, "v", "VarHandleOp");
  SetAttr(v, "dtype", DT_FLOAT);
  SetAttr(v, "shape", TensorShape());
  SetAttr(v, "shared_name", "v");
  Const(&g, "one", Tensor::Scalar<float>(1));
  Const(&g, "two", Tensor::Scalar<float>(2));
  SetAttr(Node(&g, "init", "AssignVariableOp", {"v", "one"}), "dtype", DT_FLOAT);
  SetAttr(Node(&g, "inc", "AssignAddVariableOp", {"v", "two"}), "dtype", DT_FLOAT);
  SetAttr(Node(&g, "read", "ReadVariableOp", {"v"}), "dtype", DT_FLOAT);
  ASSERT_TRUE(s->Create(g).ok());
  std::vector<Tensor> out;
  ASSERT_TRUE(s->Run({}, {}, {"init"}, &out).ok());
  EXPECT_TRUE(out.empty());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(s->Run({}, {}, {"inc"}, &out).ok());
  absl::Status st = s->Run({}, {"read"}, {}, &out);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(out[0].scalar<float>(), 7.0f);  // Variables persist across runs.

  // Close drops the variables and refuses later calls.
  Device* cpu = s->device_mgr().HostCPU();
  ASSERT_TRUE(cpu->resource_manager()->Lookup<Var>("localhost", "v").ok());
  ASSERT_TRUE(s->Close().ok());
  EXPECT_FALSE(cpu->resource_manager()->Lookup<Var>("localhost", "v").ok());
  EXPECT_EQ(s->Run({}, {"read"}, {}, &out).code(), absl::StatusCode::kCancelled);
}

TEST(DirectSessionTest, OutputsMayBeNullOnlyWithoutFetches) {
  auto s = NewSession();
  ASSERT_TRUE(s->Create(XYZGraph()).ok());
  Tensor x = Tensor::Vec<float>({1, 2});
  EXPECT_TRUE(s->Run(tensorflow::RunOptions(), {{"x", x}}, {}, {"z"}, nullptr, nullptr).ok());
  absl::Status st = s->Run(tensorflow::RunOptions(), {{"x", x}}, {"z"}, {}, nullptr, nullptr);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
}

TEST(DirectSessionTest, FourCpuDevicesExchangeTensors) {
  tensorflow::ConfigProto config;
  (*config.mutable_device_count())["CPU"] = 4;
  auto s = NewSession(config);
  absl::StatusOr<std::vector<DeviceInfo>> devices = s->ListDevices();
  ASSERT_TRUE(devices.ok());
  ASSERT_EQ(devices->size(), 4u);
  EXPECT_EQ((*devices)[3].name, "/job:localhost/replica:0/task:0/device:CPU:3");

  tensorflow::GraphDef g;
  Const(&g, "a", Tensor::Vec<float>({1, 2}), "/device:CPU:0");
  Binary(&g, "b", "AddV2", "a", "a", "/device:CPU:1");                // [2, 4]
  Binary(&g, "c", "Mul", "b", "a", "/device:CPU:2");                  // [2, 8]
  Binary(&g, "d", "AddV2", "c", "b", "/job:localhost/device:CPU:3");  // [4, 12]
  ASSERT_TRUE(s->Create(g).ok());
  tensorflow::RunOptions opts;
  opts.set_output_partition_graphs(true);
  tensorflow::RunMetadata meta;
  std::vector<Tensor> out;
  absl::Status st = s->Run(opts, {}, {"d", "b"}, {}, &out, &meta);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(Values(out[0]), (std::vector<float>{4, 12}));
  EXPECT_EQ(Values(out[1]), (std::vector<float>{2, 4}));
  ASSERT_EQ(meta.partition_graphs_size(), 4);
  int sends = 0, recvs = 0;
  for (const auto& part : meta.partition_graphs()) {
    for (const auto& n : part.node()) {
      sends += n.op() == "_Send";
      recvs += n.op() == "_Recv";
    }
  }
  EXPECT_GE(sends, 4);
  EXPECT_EQ(sends, recvs);
}

TEST(DirectSessionTest, TraceLevelFillsStepStatsPerDevice) {
  tensorflow::ConfigProto config;
  (*config.mutable_device_count())["CPU"] = 2;
  auto s = NewSession(config);
  tensorflow::GraphDef g;
  Const(&g, "a", Tensor::Vec<float>({1, 2}), "/device:CPU:0");
  Binary(&g, "b", "AddV2", "a", "a", "/device:CPU:1");
  ASSERT_TRUE(s->Create(g).ok());
  std::vector<Tensor> out;
  tensorflow::RunMetadata plain;
  ASSERT_TRUE(s->Run(tensorflow::RunOptions(), {}, {"b"}, {}, &out, &plain).ok());
  EXPECT_FALSE(plain.has_step_stats());  // Not asked for: nothing recorded.
  tensorflow::RunOptions opts;
  opts.set_trace_level(tensorflow::RunOptions::FULL_TRACE);
  tensorflow::RunMetadata meta;
  absl::Status st = s->Run(opts, {}, {"b"}, {}, &out, &meta);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(Values(out[0]), (std::vector<float>{2, 4}));
  std::map<std::string, std::set<std::string>> ops_by_device;
  for (const auto& dev : meta.step_stats().dev_stats()) {
    for (const auto& n : dev.node_stats()) {
      const std::string& label = n.timeline_label();
      ops_by_device[dev.device()].insert(label.substr(label.find(" = ") + 3));
    }
  }
  ASSERT_EQ(ops_by_device.size(), 2u);
  const auto& cpu0 = ops_by_device["/job:localhost/replica:0/task:0/device:CPU:0"];
  const auto& cpu1 = ops_by_device["/job:localhost/replica:0/task:0/device:CPU:1"];
  auto has = [](const std::set<std::string>& ops, const std::string& prefix) {
    return std::any_of(ops.begin(), ops.end(),
                       [&](const std::string& op) { return op.rfind(prefix, 0) == 0; });
  };
  EXPECT_TRUE(cpu0.contains("Const()")) << ::testing::PrintToString(cpu0);
  EXPECT_TRUE(has(cpu1, "AddV2(")) << ::testing::PrintToString(cpu1);
  // The tensor crosses devices: a _Send on CPU:0 names CPU:1, its _Recv CPU:0.
  EXPECT_TRUE(has(cpu0, "_Send(") &&
              std::any_of(cpu0.begin(), cpu0.end(),
                          [](const std::string& op) {
                            return absl::StrContains(
                                op, "@/job:localhost/replica:0/task:0/device:CPU:1");
                          }))
      << ::testing::PrintToString(cpu0);
  EXPECT_TRUE(has(cpu1, "_Recv(")) << ::testing::PrintToString(cpu1);
}

TEST(DirectSessionTest, ErrorOnOneDeviceFailsTheStepWithoutHanging) {
  tensorflow::ConfigProto config;
  (*config.mutable_device_count())["CPU"] = 2;
  auto s = NewSession(config);
  tensorflow::GraphDef g;
  Const(&g, "a", Tensor::Vec<float>({1, 2, 3}), "/device:CPU:0");
  Const(&g, "shape", Tensor::Vec<int32_t>({2, 2}), "/device:CPU:1");
  tensorflow::NodeDef* r = Node(&g, "r", "Reshape", {"a", "shape"}, "/device:CPU:1");
  SetAttr(r, "T", DT_FLOAT);
  Binary(&g, "out", "AddV2", "r", "r", "/device:CPU:0");
  ASSERT_TRUE(s->Create(g).ok());
  std::vector<Tensor> out;
  absl::Status st = s->Run({}, {"out"}, {}, &out);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "'r'")) << st;
}

TEST(DirectSessionTest, WrongFeedDtypeOrShapeIsRejected) {
  auto s = NewSession();
  ASSERT_TRUE(s->Create(XYZGraph()).ok());
  std::vector<Tensor> out;
  absl::Status st = s->Run({{"x", Tensor::Vec<int32_t>({1, 2})}}, {"z"}, {}, &out);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(st.message(), "'x'")) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "int32")) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "float")) << st;
  st = s->Run({{"x", Tensor::Vec<float>({1, 2, 3})}}, {"z"}, {}, &out);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(st.message(), "[3]")) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "[2]")) << st;
}

TEST(DirectSessionTest, UnknownNamesAreReported) {
  auto s = NewSession();
  ASSERT_TRUE(s->Create(XYZGraph()).ok());
  std::vector<Tensor> out;
  Tensor x = Tensor::Vec<float>({1, 2});
  absl::Status st = s->Run({{"x", x}}, {"nope:0"}, {}, &out);
  EXPECT_TRUE(st.code() == absl::StatusCode::kNotFound ||
              st.code() == absl::StatusCode::kInvalidArgument)
      << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "nope")) << st;
  st = s->Run({{"ghost", x}}, {"z"}, {}, &out);
  EXPECT_FALSE(st.ok());
  EXPECT_TRUE(absl::StrContains(st.message(), "ghost")) << st;
  st = s->Run({{"x", x}}, {"z:7"}, {}, &out);
  EXPECT_FALSE(st.ok());
  st = s->Run({{"x", x}}, {}, {"missing_target"}, &out);
  EXPECT_FALSE(st.ok());
  EXPECT_TRUE(absl::StrContains(st.message(), "missing_target")) << st;
  st = s->Run({{"x", x}, {"x:0", x}}, {"z"}, {}, &out);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_EQ(s->Run({}, {}, {}, &out).code(), absl::StatusCode::kInvalidArgument);
}

tensorflow::GraphDef NeverFedRecvGraph() {
  const std::string dev = "/job:localhost/replica:0/task:0/device:CPU:0";
  tensorflow::GraphDef g;
  tensorflow::NodeDef* recv = Node(&g, "wait", "_Recv", {}, dev);
  SetAttr(recv, "tensor_type", DT_FLOAT);
  SetAttr(recv, "tensor_name", "never_sent");
  SetAttr(recv, "send_device", dev);
  SetAttr(recv, "send_device_incarnation", int64_t{1});
  SetAttr(recv, "recv_device", dev);
  SetAttr(Node(&g, "y", "Identity", {"wait"}), "T", DT_FLOAT);
  return g;
}

TEST(DirectSessionTest, RunTimeoutCancelsTheStep) {
  auto s = NewSession();
  ASSERT_TRUE(s->Create(NeverFedRecvGraph()).ok());
  tensorflow::RunOptions opts;
  opts.set_timeout_in_ms(100);
  std::vector<Tensor> out;
  absl::Status st = s->Run(opts, {}, {"y"}, {}, &out, nullptr);
  EXPECT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "never_sent")) << st;
}

TEST(DirectSessionTest, ConfigOperationTimeoutApplies) {
  tensorflow::ConfigProto config;
  config.set_operation_timeout_in_ms(50);
  auto s = NewSession(config);
  ASSERT_TRUE(s->Create(NeverFedRecvGraph()).ok());
  std::vector<Tensor> out;
  EXPECT_EQ(s->Run({}, {"y"}, {}, &out).code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(DirectSessionTest, ConcurrentRunsFromFourThreads) {
  tensorflow::ConfigProto config;
  (*config.mutable_device_count())["CPU"] = 2;
  config.set_inter_op_parallelism_threads(3);
  auto s = NewSession(config);
  tensorflow::GraphDef g = XYZGraph();
  g.mutable_node(3)->set_device("/device:CPU:1");  // z on the other device.
  ASSERT_TRUE(s->Create(g).ok());
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        float v = static_cast<float>(t * 100 + i);
        std::vector<Tensor> out;
        absl::Status st = s->Run({{"x", Tensor::Vec<float>({v, v})}}, {"z", "y"}, {}, &out);
        if (!st.ok() ||
            Values(out[0]) != std::vector<float>{(v + 1) * (v + 1), (v + 2) * (v + 2)} ||
            Values(out[1]) != std::vector<float>{v + 1, v + 2}) {
          ++failures;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(s->num_cached_signatures(), 1);
}

TEST(DirectSessionTest, ExtendAddsNodesAndCreateTwiceFails) {
  auto s = NewSession();
  ASSERT_TRUE(s->Create(XYZGraph()).ok());
  EXPECT_EQ(s->Create(XYZGraph()).code(), absl::StatusCode::kFailedPrecondition);
  tensorflow::GraphDef more;
  Binary(&more, "w", "AddV2", "z", "y");
  ASSERT_TRUE(s->Extend(more).ok());
  EXPECT_EQ(s->Extend(more).code(), absl::StatusCode::kInvalidArgument);  // 'w' exists.
  std::vector<Tensor> out;
  absl::Status st = s->Run({{"x", Tensor::Vec<float>({0, 0})}}, {"w"}, {}, &out);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(Values(out[0]), (std::vector<float>{2, 6}));  // [1,4] + [1,2]
}

TEST(DirectSessionTest, KernelErrorNamesTheNode) {
  auto s = NewSession();
  tensorflow::GraphDef g;
  for (const char* name : {"a", "b"}) {
    tensorflow::NodeDef* n = Node(&g, name, "Placeholder");
    SetAttr(n, "dtype", DT_FLOAT);
    tensorflow::TensorShapeProto vector_of_any_length;
    vector_of_any_length.add_dim()->set_size(-1);
    SetAttr(n, "shape", vector_of_any_length);
  }
  Binary(&g, "sum", "AddV2", "a", "b");
  ASSERT_TRUE(s->Create(g).ok());
  std::vector<Tensor> out;
  absl::Status st = s->Run(
      {{"a", Tensor::Vec<float>({1, 2})}, {"b", Tensor::Vec<float>({1, 2, 3})}}, {"sum"}, {}, &out);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "AddV2 'sum'")) << st;
}

}  // namespace
}  // namespace dflow
