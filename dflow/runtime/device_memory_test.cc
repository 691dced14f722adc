// Devices with their own memory, checked without a GPU: a GPU-typed test
// device whose "device memory" is host memory from a tagged allocator, with
// test kernels that fail unless their inputs arrive in the memory they
// registered. Covers GPU-first placement with CPU fallback, the executor's
// copies between memories, HostMemory args, allocation failures and the
// end-of-step Sync.
#include <atomic>
#include <initializer_list>
#include <map>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dflow/framework/attr_util.h"
#include "dflow/framework/kernel.h"
#include "dflow/ops/state_ops.h"
#include "dflow/runtime/device_mgr.h"
#include "dflow/runtime/device_test_util.h"
#include "dflow/runtime/direct_session.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

std::atomic<bool> g_fake_gpus_on{false};
std::atomic<int> g_syncs{0};
std::atomic<int> g_copies_to_device{0};
std::atomic<int> g_copies_to_host{0};
std::atomic<int> g_moves{0};
std::atomic<int> g_adds{0};
std::atomic<int> g_scatters{0};

// A HostMemoryGpu of 1 MiB that counts its copies (between memories and
// within its own), additions and syncs.
class FakeGpu : public testing_util::HostMemoryGpu {
 public:
  explicit FakeGpu(const DeviceName& name) : HostMemoryGpu(name, uint64_t{1} << 20) {}
  absl::StatusOr<Tensor> CopyTensor(const Tensor& t, MemoryType to) override {
    ASSIGN_OR_RETURN(Tensor out, HostMemoryGpu::CopyTensor(t, to));
    ++(to == MemoryType::kDevice ? g_copies_to_device : g_copies_to_host);
    return out;
  }
  absl::Status CopyStrided(const void* in, void* out, const StridedCopySpec& spec) override {
    ++g_moves;
    return HostMemoryGpu::CopyStrided(in, out, spec);
  }
  absl::Status GatherRows(const void* in, void* out, absl::Span<const int64_t> from,
                          int64_t row_elems, int element_size) override {
    ++g_moves;
    return HostMemoryGpu::GatherRows(in, out, from, row_elems, element_size);
  }
  absl::Status CopyPieces(absl::Span<const CopyPiece> pieces) override {
    ++g_moves;
    return HostMemoryGpu::CopyPieces(pieces);
  }
  absl::Status AddTensors(const Tensor& a, const Tensor& b, Tensor* out) override {
    ++g_adds;
    return HostMemoryGpu::AddTensors(a, b, out);
  }
  absl::Status ScatterRows(ScatterOp op, const Tensor& updates, absl::Span<const int64_t> indices,
                           Tensor* ref) override {
    ++g_scatters;
    return HostMemoryGpu::ScatterRows(op, updates, indices, ref);
  }
  absl::Status Sync() override {
    ++g_syncs;
    return absl::OkStatus();
  }
};

const bool kFactory = [] {
  RegisterDeviceFactory("GPU", [](const tensorflow::ConfigProto&, const std::string& prefix)
                                   -> absl::StatusOr<std::vector<std::unique_ptr<Device>>> {
    std::vector<std::unique_ptr<Device>> out;
    if (!g_fake_gpus_on) return out;
    ASSIGN_OR_RETURN(DeviceName name, DeviceName::Parse(prefix + "/device:GPU:0"));
    out.push_back(std::make_unique<FakeGpu>(name));
    return out;
  });
  return true;
}();

absl::Status ExpectMemory(OpKernelContext* ctx, int i, MemoryType want) {
  if (ctx->input(i).memory_type() != want) {
    return ctx->InvalidArgument("input ", i, " is in ", MemoryTypeName(ctx->input(i).memory_type()),
                                " memory, expected ", MemoryTypeName(want));
  }
  return absl::OkStatus();
}

// Neg of a float tensor, reading and writing "device" memory.
class FakeGpuNeg : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    RETURN_IF_ERROR(ExpectMemory(ctx, 0, MemoryType::kDevice));
    const Tensor& x = ctx->input(0);
    Tensor* y = ctx->allocate_output_for_overwrite(0, x.shape());
    if (!y->IsInitialized()) return absl::OkStatus();  // allocation_status says why.
    if (y->memory_type() != MemoryType::kDevice) return ctx->InvalidArgument("host output");
    const float* in = static_cast<const float*>(x.raw_data());
    float* out = static_cast<float*>(y->raw_data());
    for (int64_t i = 0; i < x.NumElements(); ++i) out[i] = -in[i];
    return absl::OkStatus();
  }
};
REGISTER_KERNEL(KernelDefBuilder("Neg").Device(kDeviceGPU).TypeConstraint<float>("T"),
                FakeGpuNeg);

// Reshape with its shape in host memory, as a GPU registers it.
class FakeGpuReshape : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    RETURN_IF_ERROR(ExpectMemory(ctx, 0, MemoryType::kDevice));
    RETURN_IF_ERROR(ExpectMemory(ctx, 1, MemoryType::kHost));
    std::vector<int64_t> dims;
    for (int32_t d : ctx->input(1).flat<int32_t>()) dims.push_back(d);
    ASSIGN_OR_RETURN(Tensor out, ctx->input(0).Reshaped(TensorShape(dims)));
    ctx->set_output(0, out);
    return absl::OkStatus();
  }
};
REGISTER_KERNEL(KernelDefBuilder("Reshape").Device(kDeviceGPU).HostMemory("shape"),
                FakeGpuReshape);

// Assign of a ref variable in "device" memory, as a GPU's: the value is
// copied into the device's memory.
class FakeGpuAssign : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    RETURN_IF_ERROR(ExpectMemory(ctx, 1, MemoryType::kDevice));
    ASSIGN_OR_RETURN(Tensor value, ctx->device()->CopyTensor(ctx->input(1), MemoryType::kDevice));
    {
      absl::MutexLock l(ctx->input_ref_mutex(0));
      *ctx->mutable_input(0) = std::move(value);
    }
    ForwardRefInput(ctx, 0, 0);
    return absl::OkStatus();
  }
};
REGISTER_KERNEL(KernelDefBuilder("Assign").Device(kDeviceGPU).TypeConstraint<float>("T"),
                FakeGpuAssign);

class DeviceMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    g_fake_gpus_on = true;
    g_syncs = g_copies_to_device = g_copies_to_host = g_moves = g_adds = g_scatters = 0;
  }
  void TearDown() override { g_fake_gpus_on = false; }

  std::unique_ptr<DirectSession> Session(bool soft = false) {
    SessionOptions opts;
    opts.config.set_allow_soft_placement(soft);
    auto s = DirectSession::New(opts);
    EXPECT_TRUE(s.ok()) << s.status();
    return *std::move(s);
  }

  // Runs `g` once in a new session with `x` fed, fetching `fetches` into
  // `out`; device_of_ then says where each node ran.
  absl::Status RunPlaced(const tensorflow::GraphDef& g, Tensor x,
                         const std::vector<std::string>& fetches, std::vector<Tensor>* out) {
    auto s = Session();
    RETURN_IF_ERROR(s->Create(g));
    tensorflow::RunOptions opts;
    opts.set_output_partition_graphs(true);
    tensorflow::RunMetadata meta;
    RETURN_IF_ERROR(s->Run(opts, {{"x", std::move(x)}}, fetches, {}, out, &meta));
    for (const auto& part : meta.partition_graphs()) {
      for (const auto& n : part.node()) device_of_[n.name()] = n.device();
    }
    return absl::OkStatus();
  }

  // Each of `nodes` ran on the device whose name ends in `device` ("GPU:0").
  void ExpectRanOn(const std::string& device, std::initializer_list<const char*> nodes) {
    for (const char* name : nodes) {
      EXPECT_TRUE(absl::EndsWith(device_of_[name], device)) << name << ": " << device_of_[name];
    }
  }

  std::map<std::string, std::string> device_of_;
};

tensorflow::NodeDef* Node(tensorflow::GraphDef* g, const std::string& name, const std::string& op,
                          std::vector<std::string> inputs, const std::string& device = "") {
  tensorflow::NodeDef* n = g->add_node();
  n->set_name(name);
  n->set_op(op);
  n->set_device(device);
  for (auto& in : inputs) n->add_input(in);
  SetAttr(n, "T", DT_FLOAT);
  return n;
}

// The values of a float tensor in host memory.
std::vector<float> FloatsOf(const Tensor& t) {
  return std::vector<float>(t.flat<float>().data(), t.flat<float>().data() + t.NumElements());
}

// x, a float placeholder: every graph's fed input.
void FedX(tensorflow::GraphDef* g) {
  tensorflow::NodeDef* x = g->add_node();
  x->set_name("x");
  x->set_op("Placeholder");
  SetAttr(x, "dtype", DT_FLOAT);
}

// An int32 constant (shapes, axes, indices).
void Int32Const(tensorflow::GraphDef* g, const std::string& name, const Tensor& value) {
  tensorflow::NodeDef* n = g->add_node();
  n->set_name(name);
  n->set_op("Const");
  SetAttr(n, "dtype", DT_INT32);
  SetAttr(n, "value", value);
}

// x (fed) -> neg (GPU kernel) -> sq (CPU only) -> neg2 (GPU kernel)
tensorflow::GraphDef Chain(const std::string& sq_device = "") {
  tensorflow::GraphDef g;
  FedX(&g);
  Node(&g, "neg", "Neg", {"x"});
  Node(&g, "sq", "Square", {"neg"}, sq_device);
  Node(&g, "neg2", "Neg", {"sq"});
  return g;
}

TEST_F(DeviceMemoryTest, NodesWithAGpuKernelGoToTheGpuTheRestToTheCpu) {
  std::vector<Tensor> out;
  absl::Status st = RunPlaced(Chain(), Tensor::Vec<float>({1, -2, 3}), {"neg2"}, &out);
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].memory_type(), MemoryType::kHost);
  EXPECT_EQ(out[0].flat<float>()[0], -1.0f);
  EXPECT_EQ(out[0].flat<float>()[1], -4.0f);
  EXPECT_EQ(out[0].flat<float>()[2], -9.0f);
  ExpectRanOn("GPU:0", {"neg", "neg2"});
  ExpectRanOn("CPU:0", {"sq"});
  // x and sq's value cross into device memory, neg's and neg2's out of it.
  EXPECT_EQ(g_copies_to_device, 2);
  EXPECT_EQ(g_copies_to_host, 2);
  EXPECT_GE(g_syncs, 1);  // The GPU partition's step ended with a Sync.
}

// An empty output of a GPU kernel still comes back in host memory: a fetched
// tensor must not hold the device's allocator, which dies with the session.
TEST_F(DeviceMemoryTest, EmptyTensorsCrossMemoriesToo) {
  std::vector<Tensor> out;
  {
    auto s = Session();
    ASSERT_TRUE(s->Create(Chain()).ok());
    absl::Status st = s->Run(tensorflow::RunOptions(), {{"x", Tensor(DT_FLOAT, TensorShape({0, 3}))}},
                             {"neg2"}, {}, &out, nullptr);
    ASSERT_TRUE(st.ok()) << st;
  }
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].shape(), TensorShape({0, 3}));
  EXPECT_EQ(out[0].memory_type(), MemoryType::kHost);
  EXPECT_EQ(g_copies_to_host, 2);
}

TEST_F(DeviceMemoryTest, HostMemoryArgsStayOnTheHost) {
  tensorflow::GraphDef g;
  FedX(&g);
  Int32Const(&g, "shape", Tensor::Vec<int32_t>({2, 2}));
  tensorflow::NodeDef* r = Node(&g, "r", "Reshape", {"x", "shape"}, "/device:GPU:0");
  SetAttr(r, "Tshape", DT_INT32);
  auto s = Session();
  ASSERT_TRUE(s->Create(g).ok());
  std::vector<Tensor> out;
  absl::Status st = s->Run(tensorflow::RunOptions(), {{"x", Tensor::Vec<float>({1, 2, 3, 4})}},
                           {"r"}, {}, &out, nullptr);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(out[0].shape(), TensorShape({2, 2}));
  EXPECT_EQ(out[0].flat<float>()[3], 4.0f);
}

TEST_F(DeviceMemoryTest, APinnedNodeWithoutAGpuKernelFailsOrFallsBackWithSoftPlacement) {
  auto hard = Session(/*soft=*/false);
  ASSERT_TRUE(hard->Create(Chain("/device:GPU:0")).ok());
  std::vector<Tensor> out;
  absl::Status st = hard->Run(tensorflow::RunOptions(), {{"x", Tensor::Vec<float>({2})}},
                              {"neg2"}, {}, &out, nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(absl::StrContains(st.message(), "sq")) << st;

  auto soft = Session(/*soft=*/true);
  ASSERT_TRUE(soft->Create(Chain("/device:GPU:0")).ok());
  st = soft->Run(tensorflow::RunOptions(), {{"x", Tensor::Vec<float>({2})}}, {"neg2"}, {}, &out,
                 nullptr);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(out[0].flat<float>()[0], -4.0f);
}

// The shape arithmetic of a gradient on a GPU: int32 element-wise ops run
// there with every argument in host memory (as TensorFlow's), so nothing
// crosses to the CPU and no tensor is copied but the fed x.
TEST_F(DeviceMemoryTest, Int32ShapeArithmeticRunsOnTheGpuInHostMemory) {
  tensorflow::GraphDef g;
  FedX(&g);
  Node(&g, "neg", "Neg", {"x"});
  SetAttr(Node(&g, "shape", "Shape", {"neg"}), "out_type", DT_INT32);
  Int32Const(&g, "two", Tensor::Scalar<int32_t>(2));
  for (auto [name, op] : std::vector<std::pair<std::string, std::string>>{
           {"bigger", "Maximum"}, {"half", "FloorDiv"}, {"over", "Greater"}}) {
    SetAttr(Node(&g, name, op, {"shape", "two"}), "T", DT_INT32);
  }
  SetAttr(Node(&g, "ones", "OnesLike", {"shape"}), "T", DT_INT32);
  SetAttr(Node(&g, "kept", "SelectV2", {"over", "bigger", "ones"}), "T", DT_INT32);
  std::vector<Tensor> out;
  absl::Status st = RunPlaced(g, Tensor(DT_FLOAT, TensorShape({2, 3})), {"half", "kept"}, &out);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(out[0].flat<int32_t>()[0], 1);  // [2, 3] // 2
  EXPECT_EQ(out[0].flat<int32_t>()[1], 1);
  EXPECT_EQ(out[1].flat<int32_t>()[0], 1);  // 2 > 2 fails: one
  EXPECT_EQ(out[1].flat<int32_t>()[1], 3);  // max(3, 2)
  ExpectRanOn("GPU:0", {"shape", "bigger", "half", "over", "ones", "kept"});
  EXPECT_EQ(g_copies_to_device, 1);  // x
  EXPECT_EQ(g_copies_to_host, 0);
}

// A TensorFlow 1.x while loop negating x three times: i counts in int32.
constexpr char kNegateThrice[] = R"pb(
  node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
  node { name: "zero" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
         attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape {} int_val: 0 } } } }
  node { name: "three" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
         attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape {} int_val: 3 } } } }
  node { name: "one" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
         attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape {} int_val: 1 } } } }
  node { name: "i_enter" op: "Enter" input: "zero" attr { key: "T" value { type: DT_INT32 } }
         attr { key: "frame_name" value { s: "loop" } } }
  node { name: "x_enter" op: "Enter" input: "x" attr { key: "T" value { type: DT_FLOAT } }
         attr { key: "frame_name" value { s: "loop" } } }
  node { name: "limit" op: "Enter" input: "three" attr { key: "T" value { type: DT_INT32 } }
         attr { key: "frame_name" value { s: "loop" } } attr { key: "is_constant" value { b: true } } }
  node { name: "step" op: "Enter" input: "one" attr { key: "T" value { type: DT_INT32 } }
         attr { key: "frame_name" value { s: "loop" } } attr { key: "is_constant" value { b: true } } }
  node { name: "i_merge" op: "Merge" input: "i_enter" input: "i_next"
         attr { key: "T" value { type: DT_INT32 } } attr { key: "N" value { i: 2 } } }
  node { name: "x_merge" op: "Merge" input: "x_enter" input: "x_next"
         attr { key: "T" value { type: DT_FLOAT } } attr { key: "N" value { i: 2 } } }
  node { name: "less" op: "Less" input: "i_merge" input: "limit"
         attr { key: "T" value { type: DT_INT32 } } }
  node { name: "cond" op: "LoopCond" input: "less" }
  node { name: "i_switch" op: "Switch" input: "i_merge" input: "cond"
         attr { key: "T" value { type: DT_INT32 } } }
  node { name: "x_switch" op: "Switch" input: "x_merge" input: "cond"
         attr { key: "T" value { type: DT_FLOAT } } }
  node { name: "i_body" op: "AddV2" input: "i_switch:1" input: "step"
         attr { key: "T" value { type: DT_INT32 } } }
  node { name: "x_body" op: "Neg" input: "x_switch:1" attr { key: "T" value { type: DT_FLOAT } } }
  node { name: "i_next" op: "NextIteration" input: "i_body"
         attr { key: "T" value { type: DT_INT32 } } }
  node { name: "x_next" op: "NextIteration" input: "x_body"
         attr { key: "T" value { type: DT_FLOAT } } }
  node { name: "x_exit" op: "Exit" input: "x_switch" attr { key: "T" value { type: DT_FLOAT } } }
)pb";

// A loop whose body runs on the GPU runs there whole, as in TensorFlow: its
// control flow has GPU kernels, so x enters device memory once and leaves
// once, however many iterations (it used to cross to the CPU's Merge and
// Switch and back every iteration).
TEST_F(DeviceMemoryTest, ALoopWithItsBodyOnTheGpuStaysOnTheGpu) {
  tensorflow::GraphDef g;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(kNegateThrice, &g));
  std::vector<Tensor> out;
  absl::Status st = RunPlaced(g, Tensor::Vec<float>({1, -2}), {"x_exit"}, &out);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(out[0].flat<float>()[0], -1.0f);
  EXPECT_EQ(out[0].flat<float>()[1], 2.0f);
  ExpectRanOn("GPU:0", {"i_enter", "x_enter", "i_merge", "x_merge", "less", "cond", "i_switch",
                        "x_switch", "i_body", "x_body", "i_next", "x_next", "x_exit"});
  EXPECT_EQ(g_copies_to_device, 1);  // x
  EXPECT_EQ(g_copies_to_host, 1);    // the result
}

// The stack a while loop's gradient saves forward values on: on a GPU the
// values stay in device memory between the push and the pop.
TEST_F(DeviceMemoryTest, AStackOnTheGpuKeepsItsValuesThere) {
  tensorflow::GraphDef g;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(R"pb(
    node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
    node { name: "max" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
           attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape {} int_val: -1 } } } }
    node { name: "stack" op: "StackV2" input: "max"
           attr { key: "elem_type" value { type: DT_FLOAT } } }
    node { name: "neg" op: "Neg" input: "x" attr { key: "T" value { type: DT_FLOAT } } }
    node { name: "push" op: "StackPushV2" input: "stack" input: "neg"
           attr { key: "T" value { type: DT_FLOAT } } }
    node { name: "pop" op: "StackPopV2" input: "stack" input: "^push"
           attr { key: "elem_type" value { type: DT_FLOAT } } }
    node { name: "out" op: "Neg" input: "pop" attr { key: "T" value { type: DT_FLOAT } } }
  )pb", &g));
  std::vector<Tensor> out;
  absl::Status st = RunPlaced(g, Tensor::Vec<float>({3}), {"out"}, &out);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(out[0].flat<float>()[0], 3.0f);
  ExpectRanOn("GPU:0", {"stack", "push", "pop"});
  EXPECT_EQ(g_copies_to_device, 1);  // x
  EXPECT_EQ(g_copies_to_host, 1);    // the result
}

// What a dynamic_rnn does with TensorArrays, on a GPU: scatter the input's
// rows, read one, write it to another array, gather (an unwritten element
// reads as zeros), split and concat. Every array op runs on the GPU and the
// elements never leave device memory: x goes in once, the two results come
// out once each, and sizes and lengths are host values.
constexpr char kTensorArrays[] = R"pb(
  node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
  node { name: "neg" op: "Neg" input: "x" attr { key: "T" value { type: DT_FLOAT } } }
  node { name: "two" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
         attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape {} int_val: 2 } } } }
  node { name: "three" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
         attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape {} int_val: 3 } } } }
  node { name: "rows" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
         attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape { dim { size: 2 } }
                                              int_val: 0 int_val: 1 } } } }
  node { name: "one" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
         attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape {} int_val: 1 } } } }
  node { name: "ends" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
         attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape { dim { size: 2 } }
                                              int_val: 0 int_val: 2 } } } }
  node { name: "lengths" op: "Const" attr { key: "dtype" value { type: DT_INT64 } }
         attr { key: "value" value { tensor { dtype: DT_INT64 tensor_shape { dim { size: 2 } }
                                              int64_val: 1 int64_val: 1 } } } }
  node { name: "inputs" op: "TensorArrayV3" input: "two"
         attr { key: "dtype" value { type: DT_FLOAT } } }
  node { name: "scatter" op: "TensorArrayScatterV3" input: "inputs" input: "rows" input: "neg"
         input: "inputs:1" attr { key: "T" value { type: DT_FLOAT } } }
  node { name: "read" op: "TensorArrayReadV3" input: "inputs" input: "one" input: "scatter"
         attr { key: "dtype" value { type: DT_FLOAT } } }
  node { name: "cell" op: "Neg" input: "read" attr { key: "T" value { type: DT_FLOAT } } }
  node { name: "outputs" op: "TensorArrayV3" input: "three"
         attr { key: "dtype" value { type: DT_FLOAT } }
         attr { key: "element_shape" value { shape { dim { size: 3 } } } } }
  node { name: "write" op: "TensorArrayWriteV3" input: "outputs" input: "two" input: "cell"
         input: "outputs:1" attr { key: "T" value { type: DT_FLOAT } } }
  node { name: "gather" op: "TensorArrayGatherV3" input: "outputs" input: "ends" input: "write"
         attr { key: "dtype" value { type: DT_FLOAT } } }
  node { name: "size" op: "TensorArraySizeV3" input: "outputs" input: "write" }
  node { name: "parts" op: "TensorArrayV3" input: "two"
         attr { key: "dtype" value { type: DT_FLOAT } } }
  node { name: "split" op: "TensorArraySplitV3" input: "parts" input: "neg" input: "lengths"
         input: "parts:1" attr { key: "T" value { type: DT_FLOAT } } }
  node { name: "concat" op: "TensorArrayConcatV3" input: "parts" input: "split"
         attr { key: "dtype" value { type: DT_FLOAT } } }
)pb";

TEST_F(DeviceMemoryTest, TensorArraysOnTheGpuKeepTheirElementsThere) {
  tensorflow::GraphDef g;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(kTensorArrays, &g));
  absl::StatusOr<Tensor> x = Tensor::Vec<float>({1, 2, 3, 4, 5, 6}).Reshaped(TensorShape({2, 3}));
  ASSERT_TRUE(x.ok()) << x.status();
  std::vector<Tensor> out;
  absl::Status st = RunPlaced(g, *x, {"gather", "size", "concat", "concat:1"}, &out);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(out[0].DebugString(), "Tensor<float, [2,3]>: [0 0 0 4 5 6]");
  EXPECT_EQ(out[1].scalar<int32_t>(), 3);
  EXPECT_EQ(out[2].DebugString(), "Tensor<float, [2,3]>: [-1 -2 -3 -4 -5 -6]");
  EXPECT_EQ(out[3].DebugString(), "Tensor<int64, [2]>: [1 1]");
  ExpectRanOn("GPU:0", {"inputs", "scatter", "read", "outputs", "write", "gather", "size", "parts",
                        "split", "concat"});
  EXPECT_EQ(g_moves, 4);  // scatter, gather, split, concat: one device call each for 2 rows
  EXPECT_EQ(g_copies_to_device, 1);  // x
  EXPECT_EQ(g_copies_to_host, 2);    // gather and concat
}

// A gradient array adds a second write to an element (a forward element
// read twice); on a GPU the device adds, and the element stays in device
// memory.
TEST_F(DeviceMemoryTest, AGradientTensorArrayOnTheGpuAddsItsWrites) {
  tensorflow::GraphDef g;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(R"pb(
    node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
    node { name: "neg" op: "Neg" input: "x" attr { key: "T" value { type: DT_FLOAT } } }
    node { name: "one" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
           attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape {} int_val: 1 } } } }
    node { name: "zero" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
           attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape {} int_val: 0 } } } }
    node { name: "ta" op: "TensorArrayV3" input: "one"
           attr { key: "dtype" value { type: DT_FLOAT } } }
    node { name: "grad" op: "TensorArrayGradV3" input: "ta" input: "ta:1"
           attr { key: "source" value { s: "gradients" } } }
    node { name: "first" op: "TensorArrayWriteV3" input: "grad" input: "zero" input: "neg"
           input: "grad:1" attr { key: "T" value { type: DT_FLOAT } } }
    node { name: "second" op: "TensorArrayWriteV3" input: "grad" input: "zero" input: "neg"
           input: "first" attr { key: "T" value { type: DT_FLOAT } } }
    node { name: "sum" op: "TensorArrayReadV3" input: "grad" input: "zero" input: "second"
           attr { key: "dtype" value { type: DT_FLOAT } } }
    node { name: "out" op: "Neg" input: "sum" attr { key: "T" value { type: DT_FLOAT } } }
  )pb", &g));
  std::vector<Tensor> out;
  absl::Status st = RunPlaced(g, Tensor::Vec<float>({1.5f, -2}), {"out"}, &out);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(out[0].DebugString(), "Tensor<float, [2]>: [3 -4]");
  ExpectRanOn("GPU:0", {"ta", "grad", "first", "second", "sum", "out"});
  EXPECT_EQ(g_adds, 1);
  EXPECT_EQ(g_copies_to_host, 1);  // out: the sum made no round trip
}

// The ops that move elements rather than compute, on the negation of x:
// [2,3,4] (fed); each output is named in `fetches`.
tensorflow::GraphDef MovingOps(std::vector<std::string>* fetches) {
  tensorflow::GraphDef g;
  FedX(&g);
  Node(&g, "neg", "Neg", {"x"});
  Int32Const(&g, "perm", Tensor::Vec<int32_t>({2, 0, 1}));
  Node(&g, "transpose", "Transpose", {"neg", "perm"});
  Int32Const(&g, "axis", Tensor::Vec<int32_t>({1}));
  SetAttr(Node(&g, "concat", "ConcatV2", {"neg", "neg", "axis"}), "N", 2);
  Int32Const(&g, "last", Tensor::Vec<int32_t>({2}));
  SetAttr(Node(&g, "split", "Split", {"last", "neg"}), "num_split", 2);
  Int32Const(&g, "sizes", Tensor::Vec<int32_t>({1, 2}));
  tensorflow::NodeDef* split_v = Node(&g, "split_v", "SplitV", {"neg", "sizes", "axis"});
  SetAttr(split_v, "num_split", 2);
  SetAttr(split_v, "Tlen", DT_INT32);
  tensorflow::NodeDef* unpack = Node(&g, "unpack", "Unpack", {"neg"});
  SetAttr(unpack, "num", 3);
  SetAttr(unpack, "axis", 1);
  tensorflow::NodeDef* pack = Node(&g, "pack", "Pack", {"neg", "neg"});
  SetAttr(pack, "N", 2);
  SetAttr(pack, "axis", 1);
  Int32Const(&g, "begin", Tensor::Vec<int32_t>({0, 1, 1}));
  Int32Const(&g, "size", Tensor::Vec<int32_t>({2, 2, -1}));
  SetAttr(Node(&g, "slice", "Slice", {"neg", "begin", "size"}), "Index", DT_INT32);
  // neg[:, ::2, 3:0:-2] and neg[1].
  Int32Const(&g, "ss_begin", Tensor::Vec<int32_t>({0, 0, 3}));
  Int32Const(&g, "ss_end", Tensor::Vec<int32_t>({2, 3, 0}));
  Int32Const(&g, "ss_strides", Tensor::Vec<int32_t>({1, 2, -2}));
  SetAttr(Node(&g, "strided", "StridedSlice", {"neg", "ss_begin", "ss_end", "ss_strides"}),
          "Index", DT_INT32);
  Int32Const(&g, "one", Tensor::Vec<int32_t>({1}));
  Int32Const(&g, "two", Tensor::Vec<int32_t>({2}));
  Int32Const(&g, "step", Tensor::Vec<int32_t>({1}));
  tensorflow::NodeDef* row = Node(&g, "row", "StridedSlice", {"neg", "one", "two", "step"});
  SetAttr(row, "Index", DT_INT32);
  SetAttr(row, "shrink_axis_mask", 1);
  // neg[:, [2, 0, 2]] and neg[[1]].
  Int32Const(&g, "picks", Tensor::Vec<int32_t>({2, 0, 2}));
  Int32Const(&g, "dim1", Tensor::Scalar<int32_t>(1));
  tensorflow::NodeDef* gather = Node(&g, "gather", "GatherV2", {"neg", "picks", "dim1"});
  SetAttr(gather, "Taxis", DT_INT32);
  for (tensorflow::NodeDef* n : {gather, Node(&g, "gather_v1", "Gather", {"neg", "one"})}) {
    n->mutable_attr()->erase("T");
    SetAttr(n, "Tparams", DT_FLOAT);
    SetAttr(n, "Tindices", DT_INT32);
  }
  // The gradients of Slice and StridedSlice: neg padded by [[1, 0], [0, 2],
  // [1, 1]], and `strided` put back where it came from in zeros of x's shape.
  absl::StatusOr<Tensor> paddings = Tensor::Vec<int32_t>({1, 0, 0, 2, 1, 1}).Reshaped(
      TensorShape({3, 2}));
  Int32Const(&g, "paddings", *paddings);
  SetAttr(Node(&g, "pad", "Pad", {"neg", "paddings"}), "Tpaddings", DT_INT32);
  Int32Const(&g, "x_shape", Tensor::Vec<int32_t>({2, 3, 4}));
  SetAttr(Node(&g, "strided_grad", "StridedSliceGrad",
               {"x_shape", "ss_begin", "ss_end", "ss_strides", "strided"}),
          "Index", DT_INT32);
  *fetches = {"transpose", "concat",  "split:0", "split:1", "split_v:0", "split_v:1", "unpack:0",
              "unpack:2",  "pack",    "slice",   "strided", "row",       "gather",    "gather_v1",
              "pad",       "strided_grad"};
  return g;
}

// On a GPU they copy in device memory (Device::CopyStrided: strided layouts,
// negative strides, pieces of rows) and give the CPU kernels' values.
TEST_F(DeviceMemoryTest, OpsThatMoveElementsRunOnTheGpuAndMatchTheCpu) {
  std::vector<std::string> fetches;
  const tensorflow::GraphDef g = MovingOps(&fetches);
  std::vector<float> values(24);
  for (int i = 0; i < 24; ++i) values[i] = static_cast<float>(i + 1);
  absl::StatusOr<Tensor> x = Tensor::Vec<float>(values).Reshaped(TensorShape({2, 3, 4}));
  ASSERT_TRUE(x.ok()) << x.status();
  std::vector<Tensor> on_gpu;
  absl::Status st = RunPlaced(g, *x, fetches, &on_gpu);
  ASSERT_TRUE(st.ok()) << st;
  ExpectRanOn("GPU:0", {"transpose", "concat", "split", "split_v", "unpack", "pack", "slice",
                        "strided", "row", "gather", "gather_v1", "pad", "strided_grad"});
  EXPECT_EQ(g_copies_to_device, 1);                                    // x
  EXPECT_EQ(g_copies_to_host, static_cast<int>(fetches.size()));  // the results
  // One copy in device memory per output piece and per concatenated input;
  // one per gather, pad and gradient.
  EXPECT_EQ(g_moves, 1 + 2 + 2 + 2 + 3 + 2 + 1 + 1 + 1 + 2 + 2);

  g_fake_gpus_on = false;
  auto cpu = Session();
  ASSERT_TRUE(cpu->Create(g).ok());
  std::vector<Tensor> on_cpu;
  st = cpu->Run(tensorflow::RunOptions(), {{"x", *x}}, fetches, {}, &on_cpu, nullptr);
  ASSERT_TRUE(st.ok()) << st;
  for (size_t i = 0; i < fetches.size(); ++i) {
    EXPECT_EQ(on_gpu[i].shape(), on_cpu[i].shape()) << fetches[i];
    EXPECT_EQ(FloatsOf(on_gpu[i]), FloatsOf(on_cpu[i])) << fetches[i];
  }
  EXPECT_EQ(FloatsOf(on_gpu[10]), (std::vector<float>{-4, -2, -12, -10, -16, -14, -24, -22}));
  EXPECT_EQ(FloatsOf(on_gpu[13]), (std::vector<float>{-13, -14, -15, -16, -17, -18, -19, -20,
                                                        -21, -22, -23, -24}));
  EXPECT_EQ(on_gpu[14].shape(), TensorShape({3, 5, 6}));
  std::vector<float> strided_grad(24, 0.0f);  // neg[:, ::2, 3:0:-2] back in place.
  for (int i : {3, 1, 11, 9, 15, 13, 23, 21}) strided_grad[i] = -(i + 1.0f);
  EXPECT_EQ(FloatsOf(on_gpu[15]), strided_grad);
}

// A ref variable on the GPU (an embedding) takes sparse updates there:
// ScatterSub and ScatterAdd (SGD's update of an embedding, Adam's of its
// slots) with repeated indices combine its rows in device memory, one device
// call each, in the updates' order. x = [4,2] of 1..8 (fed); var := -x; the
// updates are -x's first three rows.
TEST_F(DeviceMemoryTest, ScattersIntoAGpuVariableStayOnTheGpu) {
  tensorflow::GraphDef g;
  FedX(&g);
  Node(&g, "neg", "Neg", {"x"});
  tensorflow::NodeDef* var = Node(&g, "var", "VariableV2", {});
  var->mutable_attr()->erase("T");
  SetAttr(var, "dtype", DT_FLOAT);
  SetAttr(var, "shape", TensorShape({4, 2}));
  Node(&g, "init", "Assign", {"var", "neg"});
  Int32Const(&g, "begin", Tensor::Vec<int32_t>({0, 0}));
  Int32Const(&g, "size", Tensor::Vec<int32_t>({3, 2}));
  SetAttr(Node(&g, "updates", "Slice", {"neg", "begin", "size"}), "Index", DT_INT32);
  Int32Const(&g, "rows", Tensor::Vec<int32_t>({2, 0, 2}));
  Int32Const(&g, "other_rows", Tensor::Vec<int32_t>({1, 1, 3}));
  SetAttr(Node(&g, "sub", "ScatterSub", {"var", "rows", "updates", "^init"}), "Tindices",
          DT_INT32);
  SetAttr(Node(&g, "add", "ScatterAdd", {"sub", "other_rows", "updates"}), "Tindices", DT_INT32);
  absl::StatusOr<Tensor> x = Tensor::Vec<float>({1, 2, 3, 4, 5, 6, 7, 8}).Reshaped({4, 2});
  ASSERT_TRUE(x.ok()) << x.status();
  std::vector<Tensor> out;
  absl::Status st = RunPlaced(g, *x, {"add"}, &out);
  ASSERT_TRUE(st.ok()) << st;
  ExpectRanOn("GPU:0", {"var", "init", "updates", "sub", "add"});
  EXPECT_EQ(g_scatters, 2);
  EXPECT_EQ(g_copies_to_device, 2);  // x, and Assign's copy of -x into the variable
  EXPECT_EQ(g_copies_to_host, 1);    // the variable's value, fetched
  // Row 2: -5 - (-1) - (-5), row 0: -1 - (-3); rows 1 and 3 get 2 and 1 adds.
  EXPECT_EQ(FloatsOf(out[0]), (std::vector<float>{2, 2, -7, -10, 1, 2, -12, -14}));
}

// UnsortedSegmentSum on the GPU (a gather's gradient made dense): rows of
// -x added into zeros in device memory, negative ids dropped, one device
// call. x = [4,2] of 1..8.
TEST_F(DeviceMemoryTest, UnsortedSegmentSumAddsOnTheGpu) {
  tensorflow::GraphDef g;
  FedX(&g);
  Node(&g, "neg", "Neg", {"x"});
  Int32Const(&g, "ids", Tensor::Vec<int32_t>({1, -1, 1, 0}));
  Int32Const(&g, "num", Tensor::Scalar<int32_t>(3));
  tensorflow::NodeDef* sum = Node(&g, "sum", "UnsortedSegmentSum", {"neg", "ids", "num"});
  SetAttr(sum, "Tindices", DT_INT32);
  SetAttr(sum, "Tnumsegments", DT_INT32);
  absl::StatusOr<Tensor> x = Tensor::Vec<float>({1, 2, 3, 4, 5, 6, 7, 8}).Reshaped({4, 2});
  ASSERT_TRUE(x.ok()) << x.status();
  std::vector<Tensor> out;
  absl::Status st = RunPlaced(g, *x, {"sum"}, &out);
  ASSERT_TRUE(st.ok()) << st;
  ExpectRanOn("GPU:0", {"neg", "sum"});
  EXPECT_EQ(g_scatters, 1);
  EXPECT_EQ(out[0].shape(), TensorShape({3, 2}));
  EXPECT_EQ(FloatsOf(out[0]), (std::vector<float>{-7, -8, -6, -8, 0, 0}));
}

// The TensorList ops of control flow v2 on x = [2,3] (fed, negated on the
// GPU): a list made from it, one element read and negated into a reserved
// list (its unset elements stack as zeros), pushed onto and popped from an
// empty list, the first list added to itself (a gradient's AddN of lists),
// zeros like the reserved one, and x split into rows and concatenated.
// Every list op runs on the GPU with its elements in device memory: x goes
// in once, the five stacked, popped or concatenated results come out once
// each (lengths are host values), and the two lists are added by the device.
TEST_F(DeviceMemoryTest, TensorListsOnTheGpuKeepTheirElementsThere) {
  tensorflow::GraphDef g;
  FedX(&g);
  Node(&g, "neg", "Neg", {"x"});
  Int32Const(&g, "shape", Tensor::Vec<int32_t>({3}));
  Int32Const(&g, "one", Tensor::Scalar<int32_t>(1));
  Int32Const(&g, "two", Tensor::Scalar<int32_t>(2));
  Int32Const(&g, "three", Tensor::Scalar<int32_t>(3));
  Int32Const(&g, "unbounded", Tensor::Scalar<int32_t>(-1));
  auto list_op = [&](const std::string& name, const std::string& op,
                     std::vector<std::string> inputs) {
    tensorflow::NodeDef* n = Node(&g, name, op, std::move(inputs));
    n->mutable_attr()->erase("T");
    SetAttr(n, "element_dtype", DT_FLOAT);
    if (op != "TensorListStack" && op != "TensorListGetItem" && op != "TensorListSetItem" &&
        op != "TensorListPushBack" && op != "TensorListPopBack") {
      SetAttr(n, "shape_type", DT_INT32);
    }
    return n;
  };
  list_op("rows", "TensorListFromTensor", {"neg", "shape"});
  list_op("item", "TensorListGetItem", {"rows", "one", "shape"});
  Node(&g, "cell", "Neg", {"item"});
  list_op("reserved", "TensorListReserve", {"shape", "three"});
  list_op("set", "TensorListSetItem", {"reserved", "two", "cell"});
  SetAttr(list_op("stack", "TensorListStack", {"set", "shape"}), "num_elements", int64_t{3});
  list_op("empty", "EmptyTensorList", {"shape", "unbounded"});
  list_op("push", "TensorListPushBack", {"empty", "cell"});
  list_op("pop", "TensorListPopBack", {"push", "shape"});
  tensorflow::NodeDef* sum = Node(&g, "sum", "AddN", {"rows", "rows"});
  SetAttr(sum, "T", tensorflow::DT_VARIANT);
  SetAttr(sum, "N", 2);
  list_op("stack_sum", "TensorListStack", {"sum", "shape"});
  SetAttr(Node(&g, "zeros", "ZerosLike", {"set"}), "T", tensorflow::DT_VARIANT);
  list_op("stack_zeros", "TensorListStack", {"zeros", "shape"});
  tensorflow::NodeDef* length = Node(&g, "length", "TensorListLength", {"set"});
  length->mutable_attr()->erase("T");
  Int32Const(&g, "row_shape", Tensor::Vec<int32_t>({-1, 3}));
  for (const auto& [name, value] :
       {std::pair{"lengths", Tensor::Vec<int64_t>({1, 1})}, {"no_lengths", Tensor::Vec<int64_t>({})}}) {
    tensorflow::NodeDef* c = Node(&g, name, "Const", {});
    c->mutable_attr()->erase("T");
    SetAttr(c, "dtype", DT_INT64);
    SetAttr(c, "value", value);
  }
  list_op("split", "TensorListSplit", {"neg", "row_shape", "lengths"});
  list_op("concat", "TensorListConcatV2", {"split", "row_shape", "no_lengths"});

  absl::StatusOr<Tensor> x = Tensor::Vec<float>({1, 2, 3, 4, 5, 6}).Reshaped(TensorShape({2, 3}));
  ASSERT_TRUE(x.ok()) << x.status();
  std::vector<Tensor> out;
  absl::Status st =
      RunPlaced(g, *x, {"stack", "pop:1", "stack_sum", "stack_zeros", "length", "concat",
                        "concat:1"}, &out);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(out[0].shape(), TensorShape({3, 3}));
  EXPECT_EQ(FloatsOf(out[0]), (std::vector<float>{0, 0, 0, 0, 0, 0, 4, 5, 6}));
  EXPECT_EQ(out[1].DebugString(), "Tensor<float, [3]>: [4 5 6]");
  EXPECT_EQ(out[2].DebugString(), "Tensor<float, [2,3]>: [-2 -4 -6 -8 -10 -12]");
  EXPECT_EQ(out[3].shape(), TensorShape({3, 3}));
  EXPECT_EQ(FloatsOf(out[3]), std::vector<float>(9, 0.0f));
  EXPECT_EQ(out[4].scalar<int32_t>(), 3);
  EXPECT_EQ(out[5].DebugString(), "Tensor<float, [2,3]>: [-1 -2 -3 -4 -5 -6]");
  EXPECT_EQ(out[6].DebugString(), "Tensor<int64, [2]>: [1 1]");
  ExpectRanOn("GPU:0", {"rows", "item", "reserved", "set", "stack", "empty", "push", "pop", "sum",
                        "stack_sum", "zeros", "stack_zeros", "length", "split", "concat"});
  EXPECT_EQ(g_copies_to_device, 1);  // x
  EXPECT_EQ(g_copies_to_host, 5);    // the stacks, the popped element and the concat
  EXPECT_EQ(g_adds, 2);              // one per element of the added lists
  // One device call for each op that copies elements (FromTensor, Stack x3,
  // Split, ConcatV2), whatever their count.
  EXPECT_EQ(g_moves, 6);
}

TEST_F(DeviceMemoryTest, AnOutputTheDeviceCannotHoldIsResourceExhaustedAndTheSessionGoesOn) {
  auto s = Session();
  ASSERT_TRUE(s->Create(Chain()).ok());
  std::vector<Tensor> out;
  // 256k floats = 1 MiB: the copy of x in fits the fake GPU's 1 MiB, neg's output does not.
  absl::Status st = s->Run(tensorflow::RunOptions(),
                           {{"x", Tensor(DT_FLOAT, TensorShape({256 << 10}))}}, {"neg2"}, {}, &out,
                           nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "FakeGPU memory")) << st;
  st = s->Run(tensorflow::RunOptions(), {{"x", Tensor::Vec<float>({3})}}, {"neg2"}, {}, &out,
              nullptr);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(out[0].flat<float>()[0], -9.0f);
}

// A device tensor's bytes are not the host's to read: its DebugString (in
// variables' DebugString, logs and errors) shows the shape only.
TEST(DeviceTensorTest, DebugStringShowsNoValuesOfDeviceMemory) {
  testing_util::HostMemoryGpu gpu(*DeviceName::Parse("/job:a/replica:0/task:0/device:GPU:0"));
  absl::StatusOr<Tensor> t =
      Tensor::Allocate(gpu.device_allocator(), DT_FLOAT, TensorShape({2, 3}));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->DebugString(), "Tensor<float, [2,3]>: (in device memory)");
  EXPECT_EQ(Tensor::Vec<float>({1, 2}).DebugString(), "Tensor<float, [2]>: [1 2]");
}

TEST(DeviceFactoryTest, DeviceCountZeroCreatesNoneOfThatType) {
  g_fake_gpus_on = true;
  tensorflow::ConfigProto config;
  (*config.mutable_device_count())["GPU"] = 0;
  auto devices = CreateLocalDevices(config, "localhost", 0, 0);
  g_fake_gpus_on = false;
  ASSERT_TRUE(devices.ok()) << devices.status();
  EXPECT_EQ(devices->size(), 1u);
}

}  // namespace
}  // namespace dflow
