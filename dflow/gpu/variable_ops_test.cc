// GPU variables against the CPU's: reference and resource variables,
// Const, and their error cases.
#include "absl/strings/match.h"
#include "dflow/gpu/gpu_test_util.h"

namespace dflow {
namespace gpu {
namespace {


constexpr char kGpu[] = "/device:GPU:0";
constexpr char kCpu[] = "/device:CPU:0";

// v = VariableV2 [shape]; init: v = x; add: v += d; sub: v -= d; value: read.
tensorflow::GraphDef RefVariableGraph(const TensorShape& shape) {
  tensorflow::GraphDef g;
  AddPlaceholder(&g, "x");
  AddPlaceholder(&g, "d");
  tensorflow::NodeDef* v = Node(&g, "v", "VariableV2");
  SetAttr(v, "dtype", DT_FLOAT);
  SetAttr(v, "shape", shape);
  SetAttr(Node(&g, "init", "Assign", {"v", "x"}), "T", DT_FLOAT);
  SetAttr(Node(&g, "add", "AssignAdd", {"v", "d"}), "T", DT_FLOAT);
  SetAttr(Node(&g, "sub", "AssignSub", {"v", "d"}), "T", DT_FLOAT);
  SetAttr(Node(&g, "value", "Identity", {"v"}), "T", DT_FLOAT);
  SetAttr(Node(&g, "is_init", "IsVariableInitialized", {"v"}), "dtype", DT_FLOAT);
  return g;
}

// Runs init, add, add, sub on `device` and returns the value after each.
std::vector<Tensor> RefSteps(const std::string& device, const TensorShape& shape) {
  DeviceSession s(RefVariableGraph(shape), device);
  EXPECT_TRUE(s.create_status().ok()) << s.create_status();
  std::vector<Tensor> values;
  auto step = [&](const char* target, int seed) {
    // The update's output is the variable after it.
    auto out = s.Run({{"x", RandomTensor(shape, 1)}, {"d", RandomTensor(shape, seed)}}, {target});
    EXPECT_TRUE(out.ok()) << target << ": " << out.status();
    // A copy: on the CPU a fetched ref output shares the variable's buffer,
    // which the next in-place update changes.
    if (out.ok()) values.push_back((*out)[0].DeepCopy());
  };
  step("init", 2);
  step("add", 3);
  step("add", 4);
  step("sub", 5);
  return values;
}

TEST(GpuVariableTest, RefVariableAssignAddSubMatchTheCpu) {
  DFLOW_SKIP_WITHOUT_GPU();
  for (const TensorShape& shape :
       {TensorShape({1}), TensorShape({257}), TensorShape({37, 29}), TensorShape({0, 3})}) {
    std::vector<Tensor> gpu = RefSteps(kGpu, shape);
    std::vector<Tensor> cpu = RefSteps(kCpu, shape);
    ASSERT_EQ(gpu.size(), 4u);
    ASSERT_EQ(cpu.size(), 4u);
    for (int i = 0; i < 4; ++i) {
      ExpectSame(gpu[i], cpu[i], 1e-6f, 1e-6f, absl::StrCat(shape.DebugString(), " step ", i));
    }
  }
}

TEST(GpuVariableTest, IsVariableInitializedAndUninitializedErrors) {
  DFLOW_SKIP_WITHOUT_GPU();
  const TensorShape shape({5});
  DeviceSession s(RefVariableGraph(shape), kGpu);
  ASSERT_TRUE(s.create_status().ok()) << s.create_status();
  auto before = s.Run({}, {"is_init"});
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_FALSE((*before)[0].scalar<bool>());
  auto add = s.Run({{"d", RandomTensor(shape, 1)}}, {}, {"add"});
  ASSERT_FALSE(add.ok());
  EXPECT_EQ(add.status().code(), absl::StatusCode::kFailedPrecondition) << add.status();
  EXPECT_TRUE(absl::StrContains(add.status().message(), "uninitialized")) << add.status();
  ASSERT_TRUE(s.Run({{"x", RandomTensor(shape, 2)}}, {}, {"init"}).ok());
  auto after = s.Run({}, {"is_init"});
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_TRUE((*after)[0].scalar<bool>());
}

TEST(GpuVariableTest, AssignValidatesShapesUnlessToldNot) {
  DFLOW_SKIP_WITHOUT_GPU();
  tensorflow::GraphDef g = RefVariableGraph(TensorShape({4}));
  tensorflow::NodeDef* loose = Node(&g, "loose", "Assign", {"v", "x"});
  SetAttr(loose, "T", DT_FLOAT);
  SetAttr(loose, "validate_shape", false);
  DeviceSession s(g, kGpu);
  ASSERT_TRUE(s.create_status().ok()) << s.create_status();
  ASSERT_TRUE(s.Run({{"x", RandomTensor(TensorShape({4}), 1)}}, {}, {"init"}).ok());
  auto bad = s.Run({{"x", RandomTensor(TensorShape({3}), 2)}}, {}, {"init"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "Assign requires shapes")) << bad.status();
  Tensor x = RandomTensor(TensorShape({2, 3}), 3);
  auto out = s.Run({{"x", x}}, {"loose"});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectSame((*out)[0], x, 0, 0, "reshaped by validate_shape=false");
  auto mismatch = s.Run({{"d", RandomTensor(TensorShape({6}), 4)}}, {}, {"add"});
  ASSERT_FALSE(mismatch.ok());
  EXPECT_TRUE(absl::StrContains(mismatch.status().message(), "must be the same size"))
      << mismatch.status();
}

TEST(GpuVariableTest, ConstIsCopiedToTheDeviceOnce) {
  DFLOW_SKIP_WITHOUT_GPU();
  tensorflow::GraphDef g;
  Tensor value = RandomTensor(TensorShape({3, 301}), 7);
  tensorflow::NodeDef* c = Node(&g, "c", "Const");
  SetAttr(c, "dtype", DT_FLOAT);
  SetAttr(c, "value", value);
  SetAttr(Node(&g, "out", "Identity", {"c"}), "T", DT_FLOAT);
  DeviceSession s(g, kGpu);
  ASSERT_TRUE(s.create_status().ok()) << s.create_status();
  for (int i = 0; i < 2; ++i) {
    auto out = s.Run({}, {"out"});
    ASSERT_TRUE(out.ok()) << out.status();
    ExpectSame((*out)[0], value, 0, 0, absl::StrCat("run ", i));
  }
}

// h = VarHandleOp; init: h = x; add/sub: h +-= d; read; plus a read taken
// before an update in the same step ("snap", before "add_after_snap").
tensorflow::GraphDef ResourceGraph(const TensorShape& shape) {
  tensorflow::GraphDef g;
  AddPlaceholder(&g, "x");
  AddPlaceholder(&g, "d");
  tensorflow::NodeDef* h = Node(&g, "h", "VarHandleOp");
  SetAttr(h, "dtype", DT_FLOAT);
  SetAttr(h, "shape", shape);
  SetAttr(Node(&g, "init", "AssignVariableOp", {"h", "x"}), "dtype", DT_FLOAT);
  SetAttr(Node(&g, "add", "AssignAddVariableOp", {"h", "d"}), "dtype", DT_FLOAT);
  SetAttr(Node(&g, "sub", "AssignSubVariableOp", {"h", "d"}), "dtype", DT_FLOAT);
  SetAttr(Node(&g, "read", "ReadVariableOp", {"h"}), "dtype", DT_FLOAT);
  SetAttr(Node(&g, "snap", "ReadVariableOp", {"h"}), "dtype", DT_FLOAT);
  SetAttr(Node(&g, "add_after_snap", "AssignAddVariableOp", {"h", "d", "^snap"}), "dtype",
          DT_FLOAT);
  Node(&g, "is_init", "VarIsInitializedOp", {"h"});
  Node(&g, "shape", "VariableShape", {"h"});
  return g;
}

std::vector<Tensor> ResourceSteps(const std::string& device, const TensorShape& shape) {
  DeviceSession s(ResourceGraph(shape), device);
  EXPECT_TRUE(s.create_status().ok()) << s.create_status();
  std::vector<Tensor> values;
  auto step = [&](const char* target, int seed) {
    auto update = s.Run({{"x", RandomTensor(shape, 1)}, {"d", RandomTensor(shape, seed)}}, {}, {target});
    EXPECT_TRUE(update.ok()) << target << ": " << update.status();
    auto out = s.Run({}, {"read"});
    EXPECT_TRUE(out.ok()) << target << ": " << out.status();
    // A copy: on the CPU a fetched ref output shares the variable's buffer,
    // which the next in-place update changes.
    if (out.ok()) values.push_back((*out)[0].DeepCopy());
  };
  step("init", 2);
  step("add", 3);
  step("sub", 4);
  step("add", 5);
  return values;
}

TEST(GpuVariableTest, ResourceVariableUpdatesMatchTheCpu) {
  DFLOW_SKIP_WITHOUT_GPU();
  for (const TensorShape& shape : {TensorShape({}), TensorShape({1000}), TensorShape({0})}) {
    std::vector<Tensor> gpu = ResourceSteps(kGpu, shape);
    std::vector<Tensor> cpu = ResourceSteps(kCpu, shape);
    ASSERT_EQ(gpu.size(), 4u);
    ASSERT_EQ(cpu.size(), 4u);
    for (int i = 0; i < 4; ++i) {
      ExpectSame(gpu[i], cpu[i], 1e-6f, 1e-6f, absl::StrCat(shape.DebugString(), " step ", i));
    }
  }
}

// A variable of [200, 3] := x (a reference one, or with `resource` a
// resource one); then each Scatter op (ResourceScatter op) in turn with 500
// int64 indices (repeated, so a row takes many updates in order) and the
// updates u (a scalar for Mul). Returns the variable after each op, and for
// a resource variable last a read taken before a ResourceScatterAdd of the
// same step (a snapshot the update must not change).
std::vector<Tensor> ScatterSteps(const std::string& device, bool resource) {
  const TensorShape shape({200, 3});
  tensorflow::GraphDef g = resource ? ResourceGraph(shape) : RefVariableGraph(shape);
  AddPlaceholder(&g, "u");
  AddPlaceholder(&g, "scale");
  AddPlaceholder(&g, "rows", DT_INT64);
  const std::vector<std::string> ops = {"Add", "Sub", "Mul", "Div", "Min", "Max", "Update"};
  for (const std::string& op : ops) {
    const std::string updates = op == "Mul" ? "scale" : "u";
    tensorflow::NodeDef* n =
        resource ? Node(&g, op, "ResourceScatter" + op, {"h", "rows", updates})
                 : AddNode(&g, op, "Scatter" + op, {"v", "rows", updates}, DT_FLOAT);
    SetAttr(n, resource ? "dtype" : "T", DT_FLOAT);
    SetAttr(n, "Tindices", DT_INT64);
  }
  if (resource) {
    tensorflow::NodeDef* n =
        Node(&g, "add_after_snap_rows", "ResourceScatterAdd", {"h", "rows", "u", "^snap"});
    SetAttr(n, "dtype", DT_FLOAT);
    SetAttr(n, "Tindices", DT_INT64);
  }
  DeviceSession s(g, device);
  EXPECT_TRUE(s.create_status().ok()) << s.create_status();
  Tensor rows(DT_INT64, TensorShape({500}));
  for (int64_t i = 0; i < 500; ++i) rows.flat<int64_t>()[i] = (i * 37) % 200 / 2;  // Rows < 100.
  const Feeds feeds = {{"x", RandomTensor(shape, 1, 0.5f, 2)},
                       {"u", RandomTensor(TensorShape({500, 3}), 2, 0.5f, 2)},
                       {"scale", Tensor::Scalar(1.0625f)},
                       {"rows", rows}};
  EXPECT_TRUE(s.Run(feeds, {}, {"init"}).ok());
  std::vector<Tensor> values;
  auto keep = [&](const std::string& what, absl::StatusOr<std::vector<Tensor>> out) {
    EXPECT_TRUE(out.ok()) << what << ": " << out.status();
    if (out.ok()) values.push_back((*out)[0].DeepCopy());
  };
  for (const std::string& op : ops) {
    if (!resource) {  // A reference op outputs the variable.
      keep(op, s.Run(feeds, {op}));
      continue;
    }
    EXPECT_TRUE(s.Run(feeds, {}, {op}).ok()) << op;
    keep(op, s.Run({}, {"read"}));
  }
  if (resource) keep("snapshot", s.Run(feeds, {"snap"}, {"add_after_snap_rows"}));
  return values;
}

// Sparse updates of a GPU variable (an embedding's) give the CPU's values
// exactly: a row's repeated updates apply in the updates' order; a resource
// variable's earlier read keeps its value.
TEST(GpuVariableTest, ScatterOpsMatchTheCpu) {
  DFLOW_SKIP_WITHOUT_GPU();
  for (const bool resource : {false, true}) {
    std::vector<Tensor> gpu = ScatterSteps(kGpu, resource);
    std::vector<Tensor> cpu = ScatterSteps(kCpu, resource);
    ASSERT_EQ(gpu.size(), resource ? 8u : 7u);
    ASSERT_EQ(cpu.size(), gpu.size());
    for (size_t i = 0; i < gpu.size(); ++i) {
      ExpectSame(gpu[i], cpu[i], 0, 0, absl::StrCat("resource ", resource, " step ", i));
    }
    if (resource) ExpectSame(gpu[7], gpu[6], 0, 0, "the read before the last update");
  }
}

TEST(GpuVariableTest, AReadIsASnapshotThatLaterUpdatesDoNotChange) {
  DFLOW_SKIP_WITHOUT_GPU();
  const TensorShape shape({300});
  DeviceSession s(ResourceGraph(shape), kGpu);
  ASSERT_TRUE(s.create_status().ok()) << s.create_status();
  Tensor x = RandomTensor(shape, 1);
  auto before = s.Run({}, {"is_init"});
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_FALSE((*before)[0].scalar<bool>());
  ASSERT_TRUE(s.Run({{"x", x}}, {}, {"init"}).ok());
  auto out = s.Run({{"d", RandomTensor(shape, 2)}}, {"snap", "is_init", "shape"}, {"add_after_snap"});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectSame((*out)[0], x, 0, 0, "snapshot");
  EXPECT_TRUE((*out)[1].scalar<bool>());
  ASSERT_EQ((*out)[2].NumElements(), 1);
  EXPECT_EQ((*out)[2].flat<int32_t>()[0], 300);
  auto read = s.Run({}, {"read"});
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_NE((*read)[0].flat<float>()[0], x.flat<float>()[0]);  // The update happened.
}

TEST(GpuVariableTest, ResourceErrorsMatchTheCpu) {
  DFLOW_SKIP_WITHOUT_GPU();
  const TensorShape shape({4});
  DeviceSession s(ResourceGraph(shape), kGpu);
  ASSERT_TRUE(s.create_status().ok()) << s.create_status();
  auto read = s.Run({}, {"read"});
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kFailedPrecondition) << read.status();
  EXPECT_TRUE(absl::StrContains(read.status().message(), "is uninitialized")) << read.status();
  ASSERT_TRUE(s.Run({{"x", RandomTensor(shape, 1)}}, {}, {"init"}).ok());
  auto add = s.Run({{"d", RandomTensor(TensorShape({5}), 2)}}, {}, {"add"});
  ASSERT_FALSE(add.ok());
  EXPECT_EQ(add.status().code(), absl::StatusCode::kInvalidArgument) << add.status();
  EXPECT_TRUE(absl::StrContains(add.status().message(), "shapes must be equal")) << add.status();
}

}  // namespace
}  // namespace gpu
}  // namespace dflow
