#include "dflow/framework/kernel.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

namespace dflow {
namespace {

using tensorflow::NodeDef;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// --- test-only ops and kernels ---------------------------------------------------

REGISTER_OP("TestOnlyAdd")
    .Input("x: T")
    .Input("y: T")
    .Output("z: T")
    .Attr("T: {float, double, int32, uint8} = DT_FLOAT");

template <typename T>
class TestOnlyAddOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    const Tensor& y = ctx->input(1);
    if (x.shape() != y.shape()) {
      return ctx->InvalidArgument("shapes differ: ", x.shape().DebugString(), " vs ",
                                  y.shape().DebugString());
    }
    Tensor* z = ctx->allocate_output(0, x.shape());
    for (int64_t i = 0; i < x.NumElements(); ++i) {
      z->flat<T>()[i] = x.flat<T>()[i] + y.flat<T>()[i];
    }
    return absl::OkStatus();
  }
};
REGISTER_KERNEL(KernelDefBuilder("TestOnlyAdd").Device(kDeviceCPU).TypeConstraint<float>("T"),
                TestOnlyAddOp<float>);
REGISTER_KERNEL(KernelDefBuilder("TestOnlyAdd").Device(kDeviceCPU).TypeConstraint<int32_t>("T"),
                TestOnlyAddOp<int32_t>);
REGISTER_KERNEL(KernelDefBuilder("TestOnlyAdd").Device(kDeviceGPU).TypeConstraint<float>("T"),
                TestOnlyAddOp<float>);

REGISTER_OP("TestOnlyIdentityN").Input("in: T").Output("out: T").Attr("T: list(type) >= 1");

class TestOnlyIdentityNOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  absl::Status Compute(OpKernelContext* ctx) override {
    for (int i = 0; i < ctx->num_inputs(); ++i) ctx->set_output(i, ctx->input(i));
    return absl::OkStatus();
  }
};
REGISTER_KERNEL(KernelDefBuilder("TestOnlyIdentityN")
                    .Device(kDeviceCPU)
                    .TypeConstraint("T", {DT_FLOAT, DT_INT32}),
                TestOnlyIdentityNOp);

REGISTER_OP("TestOnlyScale").Input("x: float").Output("y: float").Attr("factor: int");

class TestOnlyScaleOp : public OpKernel {
 public:
  explicit TestOnlyScaleOp(OpKernelConstruction* c) : OpKernel(c) {
    c->GetAttr("factor", &factor_).IgnoreError();  // recorded on c
    if (factor_ == 0) c->SetStatus(absl::InvalidArgumentError("[TestOnlyScale] factor is 0"));
  }
  absl::Status Compute(OpKernelContext* ctx) override { return absl::OkStatus(); }
  bool IsExpensive() const override { return false; }

 private:
  int32_t factor_ = 1;
};
REGISTER_KERNEL(KernelDefBuilder("TestOnlyScale").Device(kDeviceCPU), TestOnlyScaleOp);

REGISTER_OP("TestOnlyAsync").Output("out: int32");

class TestOnlyAsyncOp : public AsyncOpKernel {
 public:
  using AsyncOpKernel::AsyncOpKernel;
  void ComputeAsync(OpKernelContext* ctx, DoneCallback done) override {
    std::thread([ctx, done = std::move(done)] {
      ctx->set_output(0, Tensor::Scalar<int32_t>(42));
      done(absl::OkStatus());
    }).detach();
  }
};
REGISTER_KERNEL(KernelDefBuilder("TestOnlyAsync").Device(kDeviceCPU), TestOnlyAsyncOp);

REGISTER_OP("TestOnlyNoKernel").Output("out: float");

// --- helpers ---------------------------------------------------------------------

Device* CpuDevice() {
  static Device* device =
      new Device(*DeviceName::Parse("/job:localhost/replica:0/task:0/device:CPU:0"), 1, 0);
  return device;
}

Device* GpuDevice() {
  static Device* device =
      new Device(*DeviceName::Parse("/job:localhost/replica:0/task:0/device:GPU:0"), 2, 0);
  return device;
}

NodeDef AddNode(DataType t) {
  NodeDef n;
  n.set_name("add");
  n.set_op("TestOnlyAdd");
  n.add_input("a");
  n.add_input("b");
  SetAttr(&n, "T", t);
  return n;
}

// Runs `kernel` on `inputs`, returning its outputs.
absl::StatusOr<std::vector<Tensor>> RunKernel(OpKernel* kernel, std::vector<Tensor> inputs) {
  OpKernelContext::Params params;
  params.device = CpuDevice();
  params.op_kernel = kernel;
  for (Tensor& t : inputs) params.inputs.push_back(TensorValue{&t, nullptr});
  OpKernelContext ctx(&params);
  RETURN_IF_ERROR(kernel->Compute(&ctx));
  std::vector<Tensor> out;
  for (int i = 0; i < ctx.num_outputs(); ++i) {
    if (!ctx.output_set(i)) return absl::InternalError("output not set");
    out.push_back(*ctx.release_output(i).tensor);
  }
  return out;
}

// --- registry lookup ------------------------------------------------------------------

TEST(KernelRegistryTest, FindsKernelByDeviceAndType) {
  KernelRegistry* r = KernelRegistry::Global();
  auto def = r->Find(kDeviceCPU, AddNode(DT_INT32));
  ASSERT_TRUE(def.ok()) << def.status();
  EXPECT_EQ((*def)->device_type, "CPU");
  EXPECT_THAT((*def)->type_constraints.at("T"), ElementsAre(DT_INT32));
  EXPECT_TRUE(r->HasKernel(kDeviceGPU, AddNode(DT_FLOAT)));
  EXPECT_FALSE(r->HasKernel(kDeviceGPU, AddNode(DT_INT32)));
}

TEST(KernelRegistryTest, UsesOpDefaultsForMissingConstraintAttrs) {
  NodeDef n = AddNode(DT_FLOAT);
  n.mutable_attr()->erase("T");  // T defaults to float.
  EXPECT_TRUE(KernelRegistry::Global()->HasKernel(kDeviceCPU, n));
}

TEST(KernelRegistryTest, NoMatchListsRegisteredKernels) {
  auto def = KernelRegistry::Global()->Find(kDeviceCPU, AddNode(DT_DOUBLE));
  ASSERT_FALSE(def.ok());
  EXPECT_EQ(def.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(def.status().message(),
            "No kernel for op 'TestOnlyAdd' on device CPU with T=double; registered: "
            "device='CPU'; T in [float] | device='CPU'; T in [int32] | "
            "device='GPU'; T in [float]");
}

TEST(KernelRegistryTest, NoKernelsAtAll) {
  NodeDef n;
  n.set_name("nk");
  n.set_op("TestOnlyNoKernel");
  auto def = KernelRegistry::Global()->Find(kDeviceCPU, n);
  ASSERT_FALSE(def.ok());
  EXPECT_EQ(def.status().message(),
            "No kernel for op 'TestOnlyNoKernel' on device CPU; registered: <none>");
}

TEST(KernelRegistryTest, ListTypeConstraintNeedsEveryElementAllowed) {
  NodeDef n;
  n.set_name("idn");
  n.set_op("TestOnlyIdentityN");
  n.add_input("a");
  n.add_input("b");
  SetAttr(&n, "T", std::vector<DataType>{DT_FLOAT, DT_INT32});
  EXPECT_TRUE(KernelRegistry::Global()->HasKernel(kDeviceCPU, n));
  SetAttr(&n, "T", std::vector<DataType>{DT_FLOAT, DT_BOOL});
  auto def = KernelRegistry::Global()->Find(kDeviceCPU, n);
  ASSERT_FALSE(def.ok());
  EXPECT_THAT(def.status().message(), HasSubstr("T=[float, bool]"));
}

TEST(KernelRegistryTest, ListKernelsHoldsRegistrations) {
  int adds = 0;
  for (const KernelDef& k : KernelRegistry::Global()->ListKernels()) {
    if (k.op == "TestOnlyAdd") ++adds;
  }
  EXPECT_EQ(adds, 3);
}

// --- kernel creation ---------------------------------------------------------------------

TEST(CreateKernelTest, CreatesAndRunsKernel) {
  auto kernel = KernelRegistry::Global()->CreateKernel(CpuDevice(), AddNode(DT_INT32));
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_EQ((*kernel)->name(), "add");
  EXPECT_EQ((*kernel)->type_string(), "TestOnlyAdd");
  EXPECT_THAT((*kernel)->input_types(), ElementsAre(DT_INT32, DT_INT32));
  EXPECT_THAT((*kernel)->output_types(), ElementsAre(DT_INT32));
  EXPECT_TRUE((*kernel)->IsExpensive());
  EXPECT_EQ((*kernel)->AsAsync(), nullptr);
  auto out =
      RunKernel(kernel->get(), {Tensor::Vec<int32_t>({1, 2}), Tensor::Vec<int32_t>({10, 20})});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 1u);
  EXPECT_THAT((*out)[0].flat<int32_t>(), ElementsAre(11, 22));
}

TEST(CreateKernelTest, KernelErrorsCarryOpAndNodePrefix) {
  auto kernel = KernelRegistry::Global()->CreateKernel(CpuDevice(), AddNode(DT_FLOAT));
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  auto out = RunKernel(kernel->get(), {Tensor::Vec<float>({1, 2}), Tensor::Vec<float>({1})});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(out.status().message(), "[TestOnlyAdd 'add'] shapes differ: [2] vs [1]");
}

TEST(CreateKernelTest, AddsDefaultAttrs) {
  NodeDef n = AddNode(DT_FLOAT);
  n.mutable_attr()->erase("T");
  auto kernel = KernelRegistry::Global()->CreateKernel(CpuDevice(), n);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_THAT((*kernel)->output_types(), ElementsAre(DT_FLOAT));
  EXPECT_TRUE(HasNodeAttr((*kernel)->def(), "T"));
}

TEST(CreateKernelTest, ReportsLookupAndValidationErrors) {
  NodeDef unknown;
  unknown.set_name("u");
  unknown.set_op("NoSuchOpAnywhere");
  auto k = KernelRegistry::Global()->CreateKernel(CpuDevice(), unknown);
  EXPECT_EQ(k.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(k.status().message(), HasSubstr("Op type not registered 'NoSuchOpAnywhere'"));

  NodeDef one_input = AddNode(DT_FLOAT);
  one_input.mutable_input()->RemoveLast();
  k = KernelRegistry::Global()->CreateKernel(CpuDevice(), one_input);
  EXPECT_EQ(k.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(k.status().message(), HasSubstr("expected 2 inputs, got 1"));

  k = KernelRegistry::Global()->CreateKernel(CpuDevice(), AddNode(tensorflow::DT_INT8));
  EXPECT_THAT(k.status().message(), HasSubstr("not in the allowed types"));

  k = KernelRegistry::Global()->CreateKernel(CpuDevice(), AddNode(DT_UINT8));
  EXPECT_EQ(k.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(k.status().message(), HasSubstr("with T=uint8"));

  k = KernelRegistry::Global()->CreateKernel(GpuDevice(), AddNode(DT_INT32));
  EXPECT_THAT(k.status().message(), HasSubstr("on device GPU with T=int32"));
}

TEST(CreateKernelTest, ConstructionFailuresAreReturned) {
  NodeDef n;
  n.set_name("scale");
  n.set_op("TestOnlyScale");
  n.add_input("x");
  SetAttr(&n, "factor", 0);
  auto k = KernelRegistry::Global()->CreateKernel(CpuDevice(), n);
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().message(), "node 'scale': [TestOnlyScale] factor is 0");

  SetAttr(&n, "factor", int64_t{1} << 40);
  k = KernelRegistry::Global()->CreateKernel(CpuDevice(), n);
  ASSERT_FALSE(k.ok());
  EXPECT_THAT(k.status().message(), HasSubstr("int32"));

  SetAttr(&n, "factor", 3);
  k = KernelRegistry::Global()->CreateKernel(CpuDevice(), n);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_FALSE((*k)->IsExpensive());
}

TEST(CreateKernelTest, AsyncKernelComputeWaits) {
  NodeDef n;
  n.set_name("async");
  n.set_op("TestOnlyAsync");
  auto k = KernelRegistry::Global()->CreateKernel(CpuDevice(), n);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_NE((*k)->AsAsync(), nullptr);
  auto out = RunKernel(k->get(), {});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].scalar<int32_t>(), 42);
}

// --- OpKernelContext outputs ------------------------------------------------------------

TEST(OpKernelContextTest, OutputsAndRefs) {
  NodeDef n;
  n.set_name("idn");
  n.set_op("TestOnlyIdentityN");
  n.add_input("a");
  n.add_input("b");
  SetAttr(&n, "T", std::vector<DataType>{DT_FLOAT, DT_INT32});
  auto k = KernelRegistry::Global()->CreateKernel(CpuDevice(), n);
  ASSERT_TRUE(k.ok()) << k.status();

  Tensor a = Tensor::Vec<float>({1.5f});
  Tensor b = Tensor::Vec<int32_t>({7});
  absl::Mutex mu;
  OpKernelContext::Params params;
  params.device = CpuDevice();
  params.op_kernel = k->get();
  params.inputs = {TensorValue{&a, &mu}, TensorValue{&b, nullptr}};
  OpKernelContext ctx(&params);
  EXPECT_EQ(ctx.num_outputs(), 2);
  EXPECT_TRUE(ctx.input_is_ref(0));
  EXPECT_FALSE(ctx.input_is_ref(1));
  EXPECT_EQ(ctx.input_ref_mutex(0), &mu);
  EXPECT_EQ(ctx.Prefix(), "[TestOnlyIdentityN 'idn'] ");
  EXPECT_FALSE(ctx.output_set(0));

  Tensor* out = ctx.allocate_output(0, TensorShape({2, 2}));
  EXPECT_EQ(out->dtype(), DT_FLOAT);
  EXPECT_EQ(out->shape(), TensorShape({2, 2}));
  EXPECT_THAT(out->flat<float>(), ElementsAre(0, 0, 0, 0));
  EXPECT_TRUE(ctx.output_set(0));
  EXPECT_FALSE(ctx.release_output(0).is_ref());

  ctx.set_output_ref(1, &mu, &b);
  TensorValue ref = ctx.release_output(1);
  EXPECT_TRUE(ref.is_ref());
  EXPECT_EQ(ref.tensor, &b);
  EXPECT_EQ(ref.mutex, &mu);

  ctx.set_output(0, a);
  EXPECT_TRUE(ctx.release_output(0).tensor->SharesBufferWith(a));
  EXPECT_FALSE(ctx.is_output_dead());
  ctx.set_is_output_dead(true);
  EXPECT_TRUE(ctx.is_output_dead());
}

}  // namespace
}  // namespace dflow
