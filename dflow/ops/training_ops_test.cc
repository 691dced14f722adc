// Optimizer update kernels (Apply* on ref variables, ResourceApply* on
// resource variables). Expected values were computed by TensorFlow 2.x's
// tf.raw_ops.ResourceApply* on the same float32 inputs (see
// tests/data/gen_training_reference.py; AdagradV2, CenteredRMSProp, the
// Proximal ops and Ftrl/FtrlV2: TensorFlow 2.21). Sparse updates:
// sparse_training_ops_test.cc.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "dflow/framework/attr_util.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/ops/kernel_test_util.h"
#include "dflow/ops/op_test_util.h"
#include "dflow/ops/state_test_util.h"
#include "dflow/ops/variable_ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

using tensorflow::NodeDef;
using ::testing::HasSubstr;

// Written by TensorFlow 2.x's op_def_registry.
TEST(TrainingOpsDefTest, OpDefsMatchTensorFlow) {
  const std::vector<std::pair<std::string, std::string>> tf = {
      {"ApplyGradientDescent",
       "(var:T&, alpha:T, delta:T) -> (out:T&) [T:type, use_locking:bool=false]"},
      {"ResourceApplyGradientDescent",
       "(var:resource, alpha:T, delta:T) -> () [T:type, use_locking:bool=false] stateful"},
      {"ApplyMomentum",
       "(var:T&, accum:T&, lr:T, grad:T, momentum:T) -> (out:T&) [T:type, "
       "use_locking:bool=false, use_nesterov:bool=false]"},
      {"ResourceApplyMomentum",
       "(var:resource, accum:resource, lr:T, grad:T, momentum:T) -> () [T:type, "
       "use_locking:bool=false, use_nesterov:bool=false] stateful"},
      {"ApplyAdam",
       "(var:T&, m:T&, v:T&, beta1_power:T, beta2_power:T, lr:T, beta1:T, beta2:T, epsilon:T, "
       "grad:T) -> (out:T&) [T:type, use_locking:bool=false, use_nesterov:bool=false]"},
      {"ResourceApplyAdam",
       "(var:resource, m:resource, v:resource, beta1_power:T, beta2_power:T, lr:T, beta1:T, "
       "beta2:T, epsilon:T, grad:T) -> () [T:type, use_locking:bool=false, "
       "use_nesterov:bool=false] stateful"},
      {"ApplyAdagrad",
       "(var:T&, accum:T&, lr:T, grad:T) -> (out:T&) [T:type, update_slots:bool=true, "
       "use_locking:bool=false]"},
      {"ResourceApplyAdagrad",
       "(var:resource, accum:resource, lr:T, grad:T) -> () [T:type, update_slots:bool=true, "
       "use_locking:bool=false] stateful"},
      {"ApplyRMSProp",
       "(var:T&, ms:T&, mom:T&, lr:T, rho:T, momentum:T, epsilon:T, grad:T) -> (out:T&) "
       "[T:type, use_locking:bool=false]"},
      {"ResourceApplyRMSProp",
       "(var:resource, ms:resource, mom:resource, lr:T, rho:T, momentum:T, epsilon:T, grad:T) "
       "-> () [T:type, use_locking:bool=false] stateful"},
  };
  for (const auto& [name, signature] : tf) {
    absl::StatusOr<const OpDef*> op = OpRegistry::Global()->LookUp(name);
    ASSERT_TRUE(op.ok()) << op.status();
    EXPECT_EQ(OpSignature(**op), signature) << name;
  }
}

using Values = std::vector<float>;

const Values kVar = {1.0f, -2.0f, 3.0f, 0.5f};
const Values kGrad = {0.1f, -0.2f, 0.3f, -0.4f};
const Values kAccum = {0.1f, 0.2f, 0.3f, 0.4f};
const Values kM = {0.01f, -0.02f, 0.03f, 0.0f};
const Values kV = {0.001f, 0.002f, 0.003f, 0.004f};
const Values kMs = {0.5f, 0.6f, 0.7f, 0.8f};
const Values kMom = {0.01f, 0.02f, -0.03f, 0.0f};

// One update: the variable and slots before and after (TensorFlow's
// values), and the other inputs in the op's order (scalars and grad).
struct UpdateCase {
  std::string op;  // Without the "Apply" / "ResourceApply" prefix.
  std::string name;
  std::vector<std::pair<std::string, bool>> bool_attrs;
  std::vector<std::string> var_names;
  std::vector<Values> vars;
  std::vector<Values> others;  // One element = a scalar.
  std::vector<Values> expected;
};

std::vector<UpdateCase> Cases() {
  const Values lr = {0.1f};
  return {
      {"GradientDescent",
       "GradientDescent",
       {},
       {"var"},
       {kVar},
       {lr, kGrad},
       {{0.99000001f, -1.98000002f, 2.97000003f, 0.540000021f}}},
      {"Momentum",
       "Momentum",
       {{"use_nesterov", false}},
       {"var", "accum"},
       {kVar, kAccum},
       {lr, kGrad, {0.9f}},
       {{0.981000006f, -1.99800003f, 2.94300008f, 0.504000008f},
        {0.189999998f, -0.0200000107f, 0.570000052f, -0.0400000215f}}},
      {"Momentum",
       "MomentumNesterov",
       {{"use_nesterov", true}},
       {"var", "accum"},
       {kVar, kAccum},
       {lr, kGrad, {0.9f}},
       {{0.972899973f, -1.97819996f, 2.91869998f, 0.543600023f},
        {0.189999998f, -0.0200000107f, 0.570000052f, -0.0400000215f}}},
      {"Adam",
       "Adam",
       {{"use_nesterov", false}},
       {"var", "m", "v"},
       {kVar, kM, kV},
       {{0.729f}, {0.997002999f}, lr, {0.9f}, {0.999f}, {1e-7f}, kGrad},
       {{0.987916887f, -1.98299587f, 2.9792757f, 0.512534142f},
        {0.0190000013f, -0.0380000025f, 0.0570000075f, -0.0400000103f},
        {0.00100899988f, 0.00203799969f, 0.00308699883f, 0.00415599812f}}},
      {"Adam",
       "AdamNesterov",
       {{"use_nesterov", true}},
       {"var", "m", "v"},
       {kVar, kM, kV},
       {{0.729f}, {0.997002999f}, lr, {0.9f}, {0.999f}, {1e-7f}, kGrad},
       {{0.982765615f, -1.97574675f, 2.97044063f, 0.523814857f},
        {0.0190000013f, -0.0380000025f, 0.0570000075f, -0.0400000103f},
        {0.00100899988f, 0.00203799969f, 0.00308699883f, 0.00415599812f}}},
      {"Adagrad",
       "Adagrad",
       {{"update_slots", true}},
       {"var", "accum"},
       {kVar, kAccum},
       {lr, kGrad},
       {{0.969848871f, -1.95917511f, 2.95196152f, 0.553452253f},
        {0.109999999f, 0.24000001f, 0.390000015f, 0.560000002f}}},
      {"Adagrad",
       "AdagradFrozenSlots",
       {{"update_slots", false}},
       {"var", "accum"},
       {kVar, kAccum},
       {lr, kGrad},
       {{0.968377233f, -1.95527864f, 2.94522786f, 0.563245535f}, kAccum}},
      {"RMSProp",
       "RMSProp",
       {},
       {"var", "ms", "mom"},
       {kVar, kMs, kMom},
       {lr, {0.9f}, {0.5f}, {1e-10f}, kGrad},
       {{0.980109394f, -1.98288369f, 2.97747064f, 0.546625257f},
        {0.450999975f, 0.54400003f, 0.638999999f, 0.736000001f},
        {0.0198905859f, -0.0171163101f, 0.0225293338f, -0.0466252416f}}},
      {"AdagradV2",
       "AdagradV2",
       {{"update_slots", true}},
       {"var", "accum"},
       {kVar, kAccum},
       {{0.1f}, {0.1f}, kGrad},
       {{0.976833761f, -1.96609581f, 2.95859218f, 0.547151387f},
        {0.109999999f, 0.24000001f, 0.390000015f, 0.560000002f}}},
      {"CenteredRMSProp",
       "CenteredRMSProp",
       {},
       {"var", "mg", "ms", "mom"},
       {kVar, kM, kMs, kMom},
       {{0.1f}, {0.9f}, {0.5f}, {1e-10f}, kGrad},
       {{0.980103433f, -1.98284769f, 2.97737479f, 0.54667598f},
        {0.0190000013f, -0.0380000025f, 0.0570000075f, -0.0400000103f},
        {0.450999975f, 0.54400003f, 0.638999999f, 0.736000001f},
        {0.0198965482f, -0.0171523672f, 0.0226251073f, -0.0466760062f}}},
      {"ProximalAdagrad",
       "ProximalAdagrad",
       {},
       {"var", "accum"},
       {kVar, kAccum},
       {{0.1f}, {0.05f}, {0.2f}, kGrad},
       {{0.90047276f, -1.87252367f, 2.85259914f, 0.532538056f},
        {0.109999999f, 0.24000001f, 0.390000015f, 0.560000002f}}},
      {"ProximalGradientDescent",
       "ProximalGradientDescent",
       {},
       {"var"},
       {kVar},
       {{0.1f}, {0.5f}, {0.2f}, kGrad},
       {{0.921568632f, -1.89215696f, 2.86274529f, 0.480392188f}}},
      {"ProximalGradientDescent",
       "ProximalGradientDescentNoL1",
       {},
       {"var"},
       {kVar},
       {{0.1f}, {0.0f}, {0.2f}, kGrad},
       {{0.970588267f, -1.94117653f, 2.91176486f, 0.529411793f}}},
      {"Ftrl",
       "Ftrl",
       {{"multiply_linear_by_lr", false}},
       {"var", "accum", "linear"},
       {kVar, kAccum, kM},
       {kGrad, {0.1f}, {0.01f}, {0.02f}, {-0.5f}},
       {{0.0102326376f, -0.126278624f, 0.312381446f, 0.128850088f},
        {0.109999999f, 0.24000001f, 0.390000015f, 0.560000002f},
        {-0.0443471223f, 0.633687556f, -1.97331667f, -0.979379773f}}},
      {"Ftrl",
       "FtrlPower",
       {{"multiply_linear_by_lr", false}},
       {"var", "accum", "linear"},
       {kVar, kAccum, kM},
       {kGrad, {0.1f}, {0.01f}, {0.02f}, {-0.3f}},
       {{0.00488207582f, -0.0707300156f, 0.181015506f, 0.0939694643f},
        {0.109999999f, 0.24000001f, 0.390000015f, 0.560000002f},
        {-0.035373345f, 0.473793298f, -1.38193417f, -0.803424239f}}},
      {"Ftrl",
       "FtrlMultiplyLinearByLr",
       {{"multiply_linear_by_lr", true}},
       {"var", "accum", "linear"},
       {kVar, kAccum, kM},
       {kGrad, {0.1f}, {0.01f}, {0.02f}, {-0.5f}},
       {{-0.0106216464f, -0.0898338407f, 0.269421965f, 0.128850088f},
        {0.109999999f, 0.24000001f, 0.390000015f, 0.560000002f},
        {0.00456528831f, 0.0453687496f, -0.170331657f, -0.0979379863f}}},
      {"FtrlV2",
       "FtrlV2",
       {{"multiply_linear_by_lr", false}},
       {"var", "accum", "linear"},
       {kVar, kAccum, kM},
       {kGrad, {0.1f}, {0.01f}, {0.02f}, {0.05f}, {-0.7f}},
       {{-0.0286898743f, -0.121546052f, 0.376700073f, 0.155014575f},
        {0.109999999f, 0.24000001f, 0.390000015f, 0.560000002f},
        {0.0723408386f, 0.462460458f, -1.97374988f, -1.04920959f}}},
      {"FtrlV2",
       "FtrlV2MultiplyLinearByLrPowerZero",
       {{"multiply_linear_by_lr", true}},
       {"var", "accum", "linear"},
       {kVar, kAccum, kM},
       {kGrad, {0.1f}, {0.01f}, {0.02f}, {0.05f}, {0.0f}},
       {{-0.0288844649f, 0.0587649457f, -0.088645421f, 0.0338645466f},
        {0.109999999f, 0.24000001f, 0.390000015f, 0.560000002f},
        {0.0300000012f, -0.0600000024f, 0.0900000036f, -0.0350000001f}}},
  };
}

Tensor FromValues(const Values& v) {
  return v.size() == 1 ? Tensor::Scalar<float>(v[0]) : Tensor::Vec<float>(v);
}

class TrainingOpsTest : public ::testing::Test {
 protected:
  // The NodeDef of `op` ("Apply<op>" or "ResourceApply<op>") named "update",
  // whose inputs are named after the op's input args.
  static NodeDef UpdateNode(const std::string& op, bool resource, DataType dtype = DT_FLOAT,
                            const std::vector<std::pair<std::string, bool>>& attrs = {}) {
    NodeDef n;
    n.set_op((resource ? "ResourceApply" : "Apply") + op);
    n.set_name("update");
    const OpDef* def = *OpRegistry::Global()->LookUp(n.op());
    for (const OpArg& arg : def->inputs) n.add_input(arg.name);
    SetAttr(&n, "T", dtype);
    for (const auto& [name, value] : attrs) SetAttr(&n, name, value);
    return n;
  }

  // A resource variable named `name` holding `value`, and its handle.
  Tensor ResourceVar(const std::string& name, const Tensor& value) {
    auto var = std::make_shared<Var>(value.dtype());
    {
      absl::MutexLock l(var->mu());
      var->SetValue(value);
    }
    EXPECT_TRUE(device_->resource_manager()->Create<Var>("localhost", name, var).ok());
    return Handle(name);
  }
  Tensor Handle(const std::string& name) {
    Tensor h(DT_RESOURCE);
    h.scalar<ResourceHandle>() = MakeResourceHandle<Var>(device_->name(), "localhost", name);
    return h;
  }
  Tensor ResourceValue(const std::string& name) {
    std::shared_ptr<Var> var = *device_->resource_manager()->Lookup<Var>("localhost", name);
    return *var->Snapshot();
  }

  absl::StatusOr<KernelOutputs> Run(const NodeDef& n, std::vector<TensorValue> inputs) {
    ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> k, MakeKernel(n, device_.get()));
    return RunWithRefs(k.get(), device_.get(), std::move(inputs));
  }

  // Runs the ref flavour of `c`; returns the variable and slots after it.
  std::vector<Tensor> RunRefCase(const UpdateCase& c) {
    std::vector<std::unique_ptr<TestRef>> refs;
    std::vector<Tensor> others;
    for (const Values& v : c.vars) refs.push_back(std::make_unique<TestRef>(Tensor::Vec(v)));
    for (const Values& v : c.others) others.push_back(FromValues(v));
    std::vector<TensorValue> inputs;
    for (auto& r : refs) inputs.push_back(r->value());
    for (Tensor& t : others) inputs.push_back(TensorValue{&t});
    absl::StatusOr<KernelOutputs> out =
        Run(UpdateNode(c.op, false, DT_FLOAT, c.bool_attrs), inputs);
    EXPECT_TRUE(out.ok()) << out.status();
    if (out.ok()) EXPECT_EQ(out->refs[0], &refs[0]->tensor) << "output is the var's ref";
    std::vector<Tensor> after;
    for (auto& r : refs) after.push_back(r->tensor);
    return after;
  }

  // Runs the resource flavour of `c`; returns the variable and slots after it.
  std::vector<Tensor> RunResourceCase(const UpdateCase& c) {
    std::vector<Tensor> inputs_owned;
    for (size_t i = 0; i < c.vars.size(); ++i) {
      inputs_owned.push_back(ResourceVar(c.name + "/" + c.var_names[i], Tensor::Vec(c.vars[i])));
    }
    for (const Values& v : c.others) inputs_owned.push_back(FromValues(v));
    std::vector<TensorValue> inputs;
    for (Tensor& t : inputs_owned) inputs.push_back(TensorValue{&t});
    absl::StatusOr<KernelOutputs> out = Run(UpdateNode(c.op, true, DT_FLOAT, c.bool_attrs), inputs);
    EXPECT_TRUE(out.ok()) << out.status();
    std::vector<Tensor> after;
    for (const std::string& v : c.var_names) after.push_back(ResourceValue(c.name + "/" + v));
    return after;
  }

  std::unique_ptr<Device> device_ = NewTestCpuDevice();
};

TEST_F(TrainingOpsTest, RefUpdatesMatchTensorFlow) {
  for (const UpdateCase& c : Cases()) {
    SCOPED_TRACE(c.name);
    std::vector<Tensor> after = RunRefCase(c);
    for (size_t i = 0; i < after.size(); ++i) {
      SCOPED_TRACE(c.var_names[i]);
      ExpectTensorEq<float>(after[i], c.expected[i], TensorShape({4}), 1e-6);
    }
  }
}

TEST_F(TrainingOpsTest, ResourceUpdatesMatchTensorFlow) {
  for (const UpdateCase& c : Cases()) {
    SCOPED_TRACE(c.name);
    std::vector<Tensor> after = RunResourceCase(c);
    for (size_t i = 0; i < after.size(); ++i) {
      SCOPED_TRACE(c.var_names[i]);
      ExpectTensorEq<float>(after[i], c.expected[i], TensorShape({4}), 1e-6);
    }
  }
}

TEST_F(TrainingOpsTest, DoubleGradientDescent) {
  TestRef v(Tensor::Vec<double>({1.0, 2.0}));
  Tensor alpha = Tensor::Scalar<double>(0.5);
  Tensor delta = Tensor::Vec<double>({0.25, -1.0});
  ASSERT_TRUE(Run(UpdateNode("GradientDescent", false, DT_DOUBLE),
                  {v.value(), TensorValue{&alpha}, TensorValue{&delta}})
                  .ok());
  ExpectTensorEq<double>(v.tensor, {0.875, 2.5}, TensorShape({2}));
}

TEST_F(TrainingOpsTest, LargeVariableIsUpdatedEverywhere) {
  const int64_t n = 300001;  // Above the parallel threshold, not a block multiple.
  std::vector<float> values(n), grads(n);
  for (int64_t i = 0; i < n; ++i) {
    values[i] = static_cast<float>(i % 97);
    grads[i] = static_cast<float>(i % 13) - 6.0f;
  }
  TestRef v(Tensor::Vec<float>(values));
  TestRef accum(Tensor::Vec<float>(std::vector<float>(n, 1.0f)));
  Tensor lr = Tensor::Scalar(0.5f), grad = Tensor::Vec<float>(grads),
         momentum = Tensor::Scalar(0.9f);
  ASSERT_TRUE(Run(UpdateNode("Momentum", false), {v.value(), accum.value(), TensorValue{&lr},
                                                  TensorValue{&grad}, TensorValue{&momentum}})
                  .ok());
  auto var = v.tensor.flat<float>();
  // Every element: shards and the update's L1-sized blocks all end somewhere.
  for (int64_t i = 0; i < n; ++i) {
    const float acc = 0.9f + grads[i];
    ASSERT_FLOAT_EQ(var[i], values[i] - 0.5f * acc) << i;
  }
}

// As TensorFlow: reference variables update in place (their reads alias the
// buffer); resource variables copy on write, so an earlier read keeps its value.
TEST_F(TrainingOpsTest, RefUpdatesInPlaceResourceUpdatesLeaveReadsAlone) {
  TestRef v(Tensor::Vec<float>({1, 2}));
  Tensor aliased = v.tensor;
  Tensor alpha = Tensor::Scalar(1.0f), delta = Tensor::Vec<float>({1, 1});
  ASSERT_TRUE(Run(UpdateNode("GradientDescent", false),
                  {v.value(), TensorValue{&alpha}, TensorValue{&delta}})
                  .ok());
  ExpectTensorEq<float>(aliased, {0, 1}, TensorShape({2}));
  ExpectTensorEq<float>(v.tensor, {0, 1}, TensorShape({2}));

  Tensor handle = ResourceVar("r", Tensor::Vec<float>({1, 2}));
  Tensor read = ResourceValue("r");
  ASSERT_TRUE(Run(UpdateNode("GradientDescent", true),
                  {TensorValue{&handle}, TensorValue{&alpha}, TensorValue{&delta}})
                  .ok());
  ExpectTensorEq<float>(read, {1, 2}, TensorShape({2}));
  ExpectTensorEq<float>(ResourceValue("r"), {0, 1}, TensorShape({2}));
}

TEST_F(TrainingOpsTest, GradShapeMismatchFails) {
  TestRef v(Tensor::Vec<float>({1, 2}));
  Tensor alpha = Tensor::Scalar(1.0f), delta = Tensor::Vec<float>({1, 1, 1});
  absl::StatusOr<KernelOutputs> out = Run(UpdateNode("GradientDescent", false),
                                          {v.value(), TensorValue{&alpha}, TensorValue{&delta}});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(out.status().message(),
            "[ApplyGradientDescent 'update'] var and delta do not have the same shape: "
            "var=[2] delta=[3]");
  ExpectTensorEq<float>(v.tensor, {1, 2}, TensorShape({2}));

  Tensor handle = ResourceVar("r", Tensor::Vec<float>({1, 2}));
  Tensor accum = ResourceVar("acc", Tensor::Vec<float>({1, 2, 3}));
  Tensor lr = Tensor::Scalar(1.0f), grad = Tensor::Vec<float>({1, 1});
  out = Run(UpdateNode("Adagrad", true),
            {TensorValue{&handle}, TensorValue{&accum}, TensorValue{&lr}, TensorValue{&grad}});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(),
              HasSubstr("var and accum do not have the same shape: var=[2] accum=[3]"));
}

TEST_F(TrainingOpsTest, NonScalarHyperparameterFails) {
  TestRef v(Tensor::Vec<float>({1, 2})), accum(Tensor::Vec<float>({1, 1}));
  Tensor lr = Tensor::Scalar(0.1f), grad = Tensor::Vec<float>({1, 1});
  Tensor momentum = Tensor::Vec<float>({0.9f, 0.9f});
  absl::StatusOr<KernelOutputs> out =
      Run(UpdateNode("Momentum", false),
          {v.value(), accum.value(), TensorValue{&lr}, TensorValue{&grad}, TensorValue{&momentum}});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("momentum is not a scalar: [2]"));
}

TEST_F(TrainingOpsTest, UninitializedRefVariableFails) {
  TestRef v, accum(Tensor::Vec<float>({1, 1}));
  Tensor lr = Tensor::Scalar(0.1f), grad = Tensor::Vec<float>({1, 1});
  absl::StatusOr<KernelOutputs> out =
      Run(UpdateNode("Adagrad", false),
          {v.value(), accum.value(), TensorValue{&lr}, TensorValue{&grad}});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(out.status().message(),
            "[ApplyAdagrad 'update'] Attempting to use uninitialized value var");
}

TEST_F(TrainingOpsTest, UninitializedResourceVariableFails) {
  Tensor handle = Handle("never_assigned");
  Tensor alpha = Tensor::Scalar(1.0f), delta = Tensor::Vec<float>({1});
  absl::StatusOr<KernelOutputs> out =
      Run(UpdateNode("GradientDescent", true),
          {TensorValue{&handle}, TensorValue{&alpha}, TensorValue{&delta}});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(out.status().message(), HasSubstr("never_assigned"));
  EXPECT_THAT(out.status().message(), HasSubstr("uninitialized"));
}

TEST_F(TrainingOpsTest, ResourceVariableOfAnotherDtypeFails) {
  Tensor handle = ResourceVar("d", Tensor::Vec<double>({1.0}));
  Tensor alpha = Tensor::Scalar(1.0f), delta = Tensor::Vec<float>({1});
  absl::StatusOr<KernelOutputs> out =
      Run(UpdateNode("GradientDescent", true),
          {TensorValue{&handle}, TensorValue{&alpha}, TensorValue{&delta}});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(),
              HasSubstr("var is a variable of dtype double but T is float"));
}

TEST_F(TrainingOpsTest, ConcurrentUnlockedUpdatesAreNotLost) {
  // use_locking=false still locks in dflow: no update is lost.
  TestRef v(Tensor::Vec<float>({0, 0}));
  Tensor handle = ResourceVar("shared", Tensor::Vec<float>({0, 0}));
  std::unique_ptr<OpKernel> ref_k =
      *MakeKernel(UpdateNode("GradientDescent", false), device_.get());
  std::unique_ptr<OpKernel> res_k = *MakeKernel(UpdateNode("GradientDescent", true), device_.get());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      Tensor alpha = Tensor::Scalar(1.0f), delta = Tensor::Vec<float>({-1, 1});
      Tensor h = handle;
      for (int i = 0; i < 500; ++i) {
        ASSERT_TRUE(RunWithRefs(ref_k.get(), device_.get(),
                                {v.value(), TensorValue{&alpha}, TensorValue{&delta}})
                        .ok());
        ASSERT_TRUE(RunWithRefs(res_k.get(), device_.get(),
                                {TensorValue{&h}, TensorValue{&alpha}, TensorValue{&delta}})
                        .ok());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  ExpectTensorEq<float>(v.tensor, {2000, -2000}, TensorShape({2}));
  ExpectTensorEq<float>(ResourceValue("shared"), {2000, -2000}, TensorShape({2}));
}

TEST_F(TrainingOpsTest, ShapeFunctionsCheckShapesAtGraphConstruction) {
  const OpDef* op = *OpRegistry::Global()->LookUp("ApplyMomentum");
  NodeDef n = UpdateNode("Momentum", false);
  AddDefaultAttrs(*op, &n);
  const DataTypeVector types = {MakeRefType(DT_FLOAT), MakeRefType(DT_FLOAT), DT_FLOAT, DT_FLOAT,
                                DT_FLOAT};
  const std::vector<const Tensor*> no_values(5, nullptr);
  absl::StatusOr<std::vector<PartialShape>> shapes = InferShapes(
      n, *op, {PartialShape({2, -1}), PartialShape::Unknown(), {}, PartialShape({-1, 3}), {}},
      no_values, types, 1);
  ASSERT_TRUE(shapes.ok()) << shapes.status();
  EXPECT_EQ((*shapes)[0], PartialShape({2, 3}));

  shapes = InferShapes(n, *op, {PartialShape({2}), PartialShape({2}), {}, PartialShape({3}), {}},
                       no_values, types, 1);
  EXPECT_THAT(shapes.status().message(), HasSubstr("var and grad do not have the same shape"));
  shapes = InferShapes(
      n, *op, {PartialShape({2}), PartialShape({2}), PartialShape({1}), PartialShape({2}), {}},
      no_values, types, 1);
  EXPECT_THAT(shapes.status().message(), HasSubstr("lr is not a scalar"));
}

}  // namespace
}  // namespace dflow
