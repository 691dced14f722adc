// GPU optimizer updates against the CPU's: three steps of each Apply and
// SparseApply op, ref and resource forms, comparing the variable and every
// slot.
#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/match.h"
#include "dflow/gpu/gpu_test_util.h"

namespace dflow {
namespace gpu {
namespace {


constexpr char kGpu[] = "/device:GPU:0";
constexpr char kCpu[] = "/device:CPU:0";

// One optimizer: its inputs in order (the first num_vars the variable and
// slots, "grad"/"delta" the gradient, the rest scalars fed each step).
struct Optimizer {
  std::string name;
  int num_vars;
  std::vector<std::string> inputs;
  std::map<std::string, bool> attrs;
};

const std::vector<Optimizer>& Optimizers() {
  static const auto* all = new std::vector<Optimizer>{
      {"GradientDescent", 1, {"var", "alpha", "delta"}, {}},
      {"Momentum", 2, {"var", "accum", "lr", "grad", "momentum"}, {{"use_nesterov", false}}},
      {"Momentum", 2, {"var", "accum", "lr", "grad", "momentum"}, {{"use_nesterov", true}}},
      {"Adam",
       3,
       {"var", "m", "v", "beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon", "grad"},
       {{"use_nesterov", false}}},
      {"Adam",
       3,
       {"var", "m", "v", "beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon", "grad"},
       {{"use_nesterov", true}}},
      {"Adagrad", 2, {"var", "accum", "lr", "grad"}, {{"update_slots", true}}},
      {"Adagrad", 2, {"var", "accum", "lr", "grad"}, {{"update_slots", false}}},
      {"RMSProp", 3, {"var", "ms", "mom", "lr", "rho", "momentum", "epsilon", "grad"}, {}},
  };
  return *all;
}

// The sparse forms a GPU runs: their inputs in TensorFlow's order.
const std::vector<Optimizer>& SparseOptimizers() {
  static const auto* all = new std::vector<Optimizer>{
      {"Momentum", 2, {"var", "accum", "lr", "grad", "indices", "momentum"}, {{"use_nesterov", false}}},
      {"Momentum", 2, {"var", "accum", "lr", "grad", "indices", "momentum"}, {{"use_nesterov", true}}},
      {"Adagrad", 2, {"var", "accum", "lr", "grad", "indices"}, {{"update_slots", true}}},
      {"Adagrad", 2, {"var", "accum", "lr", "grad", "indices"}, {{"update_slots", false}}},
      {"RMSProp", 3, {"var", "ms", "mom", "lr", "rho", "momentum", "epsilon", "grad", "indices"}, {}},
  };
  return *all;
}

bool IsSparse(const Optimizer& o) {
  return std::find(o.inputs.begin(), o.inputs.end(), "indices") != o.inputs.end();
}

// "Apply", "SparseApply", with "Resource" before them for resource variables.
std::string OpName(const Optimizer& o, bool resource) {
  return std::string(resource ? "Resource" : "") + (IsSparse(o) ? "SparseApply" : "Apply") + o.name;
}

std::string Describe(const Optimizer& o, bool resource) {
  std::string s = OpName(o, resource);
  for (const auto& [k, v] : o.attrs) absl::StrAppend(&s, " ", k, "=", v);
  return s;
}

bool IsGrad(const std::string& name) { return name == "grad" || name == "delta"; }

// The scalar `name` at step t (1-based), as an optimizer would feed it.
float ScalarAt(const std::string& name, int t) {
  if (name == "beta1_power") return std::pow(0.9f, static_cast<float>(t));
  if (name == "beta2_power") return std::pow(0.999f, static_cast<float>(t));
  if (name == "beta1" || name == "momentum") return 0.9f;
  if (name == "beta2") return 0.999f;
  if (name == "rho") return 0.95f;
  if (name == "epsilon") return 1e-7f;
  return 0.05f;  // lr, alpha
}

// Variables v0.. (slots: vK) initialised from placeholders init_vK, the
// apply node "apply" fed scalars and "grad", and reads "read_vK".
tensorflow::GraphDef ApplyGraph(const Optimizer& o, bool resource, const TensorShape& shape) {
  tensorflow::GraphDef g;
  std::vector<std::string> apply_inputs;
  for (int k = 0; k < o.num_vars; ++k) {
    const std::string v = absl::StrCat("v", k), init = absl::StrCat("init_", v);
    AddPlaceholder(&g, init);
    tensorflow::NodeDef* var = Node(&g, v, resource ? "VarHandleOp" : "VariableV2");
    SetAttr(var, "dtype", DT_FLOAT);
    SetAttr(var, "shape", shape);
    if (resource) {
      SetAttr(Node(&g, "assign_" + v, "AssignVariableOp", {v, init}), "dtype", DT_FLOAT);
      SetAttr(Node(&g, "read_" + v, "ReadVariableOp", {v}), "dtype", DT_FLOAT);
    } else {
      SetAttr(Node(&g, "assign_" + v, "Assign", {v, init}), "T", DT_FLOAT);
      SetAttr(Node(&g, "read_" + v, "Identity", {v}), "T", DT_FLOAT);
    }
    apply_inputs.push_back(v);
  }
  for (size_t i = o.num_vars; i < o.inputs.size(); ++i) {
    AddPlaceholder(&g, o.inputs[i], o.inputs[i] == "indices" ? DT_INT64 : DT_FLOAT);
    apply_inputs.push_back(o.inputs[i]);
  }
  tensorflow::NodeDef* apply = Node(&g, "apply", OpName(o, resource), apply_inputs);
  SetAttr(apply, "T", DT_FLOAT);
  if (IsSparse(o)) SetAttr(apply, "Tindices", DT_INT64);
  SetAttr(apply, "use_locking", true);
  for (const auto& [k, v] : o.attrs) SetAttr(apply, k, v);
  return g;
}

Feeds InitFeeds(const Optimizer& o, const TensorShape& shape) {
  Feeds feeds;
  for (int k = 0; k < o.num_vars; ++k) {
    // Slots positive (accumulators, second moments), the variable signed.
    feeds.push_back({absl::StrCat("init_v", k),
                     k == 0 ? RandomTensor(shape, 10) : RandomTensor(shape, 10 + k, 0.1f, 1.0f)});
  }
  return feeds;
}

// A sparse step's rows: 3 per variable row, a repeated index among them.
Tensor StepRows(const TensorShape& shape, int t) {
  const int64_t n = shape.dims() == 0 ? 0 : 3 * shape.dim_size(0) / 2;
  Tensor rows(DT_INT64, TensorShape({n}));
  for (int64_t i = 0; i < n; ++i) rows.flat<int64_t>()[i] = (i * 7 + t) % shape.dim_size(0);
  return rows;
}

Feeds StepFeeds(const Optimizer& o, const TensorShape& shape, int t) {
  Feeds feeds;
  const Tensor rows = StepRows(shape, t);
  for (size_t i = o.num_vars; i < o.inputs.size(); ++i) {
    const std::string& name = o.inputs[i];
    if (name == "indices") {
      feeds.push_back({name, rows});
    } else if (IsGrad(name)) {
      TensorShape grad = shape;  // Sparse: one row per index.
      if (IsSparse(o)) grad.set_dim(0, rows.NumElements());
      feeds.push_back({name, RandomTensor(grad, 100 + t)});
    } else {
      feeds.push_back({name, Tensor::Scalar(ScalarAt(name, t))});
    }
  }
  return feeds;
}

// Initialises, runs three steps and returns the variable and slots.
std::vector<Tensor> RunSteps(const std::string& device, const Optimizer& o, bool resource,
                             const TensorShape& shape) {
  DeviceSession s(ApplyGraph(o, resource, shape), device);
  EXPECT_TRUE(s.create_status().ok()) << s.create_status();
  std::vector<std::string> assigns, reads;
  for (int k = 0; k < o.num_vars; ++k) {
    assigns.push_back(absl::StrCat("assign_v", k));
    reads.push_back(absl::StrCat("read_v", k));
  }
  auto init = s.Run(InitFeeds(o, shape), {}, assigns);
  EXPECT_TRUE(init.ok()) << init.status();
  for (int t = 1; t <= 3; ++t) {
    auto step = s.Run(StepFeeds(o, shape, t), {}, {"apply"});
    EXPECT_TRUE(step.ok()) << "step " << t << ": " << step.status();
  }
  auto out = s.Run({}, reads);
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : std::vector<Tensor>();
}

// Runs without a GPU: the kernels this layer claims are registered.
TEST(GpuTrainingRegistryTest, KernelsAreRegisteredForTheirTypes) {
  auto node = [](const std::string& op, const std::string& attr, DataType t) {
    tensorflow::NodeDef n;
    n.set_name("n");
    n.set_op(op);
    SetAttr(&n, attr, t);
    return n;
  };
  const KernelRegistry* r = KernelRegistry::Global();
  for (const char* op : {"ApplyGradientDescent", "ApplyMomentum", "ApplyAdam", "ApplyAdagrad",
                         "ApplyRMSProp", "ResourceApplyGradientDescent", "ResourceApplyMomentum",
                         "ResourceApplyAdam", "ResourceApplyAdagrad", "ResourceApplyRMSProp",
                         "SparseApplyMomentum", "SparseApplyAdagrad", "SparseApplyRMSProp",
                         "ResourceSparseApplyMomentum", "ResourceSparseApplyAdagrad",
                         "ResourceSparseApplyRMSProp",
                         "Assign", "AssignAdd", "AssignSub", "Conv2D", "Conv2DBackpropInput",
                         "Conv2DBackpropFilter", "MaxPool", "MaxPoolGrad", "AvgPool"}) {
    EXPECT_TRUE(r->HasKernel(kDeviceGPU, node(op, "T", DT_FLOAT))) << op;
  }
  for (const char* op : {"VariableV2", "Const", "VarHandleOp", "ReadVariableOp", "AssignVariableOp",
                         "AssignAddVariableOp", "AssignSubVariableOp", "IsVariableInitialized"}) {
    EXPECT_TRUE(r->HasKernel(kDeviceGPU, node(op, "dtype", DT_FLOAT))) << op;
    // int32 stays on the CPU (shapes and indices), as in TensorFlow, but for
    // a Const, which TensorFlow's GPU keeps in host memory.
    if (std::string(op) != "Const") {
      EXPECT_FALSE(r->HasKernel(kDeviceGPU, node(op, "dtype", DT_INT32))) << op;
    }
  }
  absl::StatusOr<const KernelDef*> int32_const = r->Find(kDeviceGPU, node("Const", "dtype", DT_INT32));
  ASSERT_TRUE(int32_const.ok()) << int32_const.status();
  EXPECT_EQ((*int32_const)->host_memory_args, std::vector<std::string>{"output"});
  EXPECT_TRUE(r->HasKernel(kDeviceGPU, node("ApplyAdam", "T", DT_DOUBLE)));
  EXPECT_FALSE(r->HasKernel(kDeviceGPU, node("Conv2D", "T", DT_DOUBLE)));
}

// Three steps of `o` (ref and resource forms) on the GPU and the CPU from
// the same values: the variable and every slot agree within float rounding
// of the fused arithmetic.
void ExpectThreeStepsMatchTheCpu(const Optimizer& o, const std::vector<TensorShape>& shapes) {
  for (bool resource : {false, true}) {
    for (const TensorShape& shape : shapes) {
      const std::string what = absl::StrCat(Describe(o, resource), " ", shape.DebugString());
      std::vector<Tensor> gpu = RunSteps(kGpu, o, resource, shape);
      std::vector<Tensor> cpu = RunSteps(kCpu, o, resource, shape);
      ASSERT_EQ(gpu.size(), static_cast<size_t>(o.num_vars)) << what;
      ASSERT_EQ(cpu.size(), static_cast<size_t>(o.num_vars)) << what;
      for (int k = 0; k < o.num_vars; ++k) {
        ExpectSame(gpu[k], cpu[k], 1e-5f, 1e-6f, absl::StrCat(what, " ", o.inputs[k]));
      }
    }
  }
}

TEST(GpuTrainingTest, ThreeStepsOfEveryOptimizerMatchTheCpu) {
  DFLOW_SKIP_WITHOUT_GPU();
  for (const Optimizer& o : Optimizers()) {
    ExpectThreeStepsMatchTheCpu(o, {TensorShape({37, 29}), TensorShape({1}), TensorShape({0})});
  }
}

// Embedding rows updated by SparseApply* (each row 1.5 times a step on
// average, some repeated in a step).
TEST(GpuTrainingTest, ThreeSparseStepsOfEveryOptimizerMatchTheCpu) {
  DFLOW_SKIP_WITHOUT_GPU();
  for (const Optimizer& o : SparseOptimizers()) {
    ExpectThreeStepsMatchTheCpu(o, {TensorShape({40, 29}), TensorShape({2}), TensorShape({0, 3})});
  }
}

TEST(GpuTrainingTest, ShapeAndScalarErrorsMatchTheCpu) {
  DFLOW_SKIP_WITHOUT_GPU();
  const Optimizer& momentum = Optimizers()[1];
  const TensorShape shape({8});
  for (bool resource : {false, true}) {
    for (const char* device : {kGpu, kCpu}) {
      DeviceSession s(ApplyGraph(momentum, resource, shape), device);
      ASSERT_TRUE(s.create_status().ok()) << s.create_status();
      auto uninit = s.Run(StepFeeds(momentum, shape, 1), {}, {"apply"});
      ASSERT_FALSE(uninit.ok());
      EXPECT_EQ(uninit.status().code(), absl::StatusCode::kFailedPrecondition) << uninit.status();
      ASSERT_TRUE(s.Run(InitFeeds(momentum, shape), {}, {"assign_v0", "assign_v1"}).ok());
      Feeds bad_grad = StepFeeds(momentum, shape, 1);
      for (auto& [name, t] : bad_grad) {
        if (name == "grad") t = RandomTensor(TensorShape({9}), 1);
      }
      auto grad = s.Run(bad_grad, {}, {"apply"});
      ASSERT_FALSE(grad.ok()) << device;
      EXPECT_EQ(grad.status().code(), absl::StatusCode::kInvalidArgument) << grad.status();
      EXPECT_TRUE(absl::StrContains(grad.status().message(), "do not have the same shape"))
          << grad.status();
      Feeds bad_lr = StepFeeds(momentum, shape, 1);
      for (auto& [name, t] : bad_lr) {
        if (name == "lr") t = RandomTensor(TensorShape({2}), 2);
      }
      auto lr = s.Run(bad_lr, {}, {"apply"});
      ASSERT_FALSE(lr.ok()) << device;
      EXPECT_TRUE(absl::StrContains(lr.status().message(), "lr is not a scalar")) << lr.status();
    }
  }
}

}  // namespace
}  // namespace gpu
}  // namespace dflow
