// SparseApply* and ResourceSparseApply*: only the rows `indices` names are
// updated, a repeated index once per occurrence, in order. Expected values
// are TensorFlow 2.21's (tf.raw_ops.ResourceSparseApply* on the same float32
// inputs); the ref flavour must give the same.
#include <memory>
#include <string>
#include <vector>

#include "dflow/framework/attr_util.h"
#include "dflow/ops/op_test_util.h"
#include "dflow/ops/state_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

using tensorflow::NodeDef;
using ::testing::HasSubstr;
using Values = std::vector<float>;

// Every variable and slot is [3, 2]; grad holds rows for indices 2, 0, 2.
const Values kV = {1.0f, -2.0f, 3.0f, 0.5f, -1.5f, 2.5f};
const Values kA = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f};
const Values kL = {0.01f, -0.02f, 0.03f, 0.0f, 0.05f, -0.01f};
const Values kG = {0.1f, -0.2f, 0.3f, -0.4f, 0.5f, 0.25f};
const std::vector<int64_t> kIndices = {2, 0, 2};

struct SparseCase {
  std::string op;  // Without the "SparseApply" / "ResourceSparseApply" prefix.
  std::string name;
  std::vector<std::pair<std::string, bool>> bool_attrs;
  std::vector<std::string> var_names;
  std::vector<Values> vars;
  std::vector<float> scalars;  // The scalar inputs in input order.
  std::vector<Values> expected;
};

std::vector<SparseCase> Cases() {
  return {
      {"Adagrad",
       "Adagrad",
       {{"update_slots", true}},
       {"var", "accum"},
       {kV, kA},
       {0.1f},
       {{0.931175292f, -1.93333328f, 3.0f, 0.5f, -1.57135677f, 2.4951725f},
        {0.189999998f, 0.360000014f, 0.300000012f, 0.400000006f, 0.75999999f, 0.702500045f}}},
      {"AdagradV2",
       "AdagradV2",
       {{"update_slots", true}},
       {"var", "accum"},
       {kV, kA},
       {0.1f, 0.1f},
       {{0.944018364f, -1.94285715f, 3.0f, 0.5f, -1.56373489f, 2.49557424f},
        {0.189999998f, 0.360000014f, 0.300000012f, 0.400000006f, 0.75999999f, 0.702500045f}}},
      {"Momentum",
       "Momentum",
       {{"use_nesterov", false}},
       {"var", "accum"},
       {kV, kA},
       {0.1f, 0.9f},
       {{0.961000025f, -1.97800004f, 3.0f, 0.5f, -1.65450001f, 2.41040015f},
        {0.390000015f, -0.220000014f, 0.300000012f, 0.400000006f, 0.995000005f, 0.555999994f}}},
      {"Momentum",
       "MomentumNesterov",
       {{"use_nesterov", true}},
       {"var", "accum"},
       {kV, kA},
       {0.1f, 0.9f},
       {{0.934899986f, -1.94019997f, 3.0f, 0.5f, -1.69904995f, 2.41435981f},
        {0.390000015f, -0.220000014f, 0.300000012f, 0.400000006f, 0.995000005f, 0.555999994f}}},
      {"RMSProp",
       "RMSProp",
       {},
       {"var", "ms", "mom"},
       {kV, kA, kL},
       {0.1f, 0.9f, 0.5f, 1e-07f},
       {{0.899653792f, -1.89964926f, 3.0f, 0.5f, -1.6360054f, 2.51267147f},
        {0.0989999995f, 0.195999995f, 0.300000012f, 0.400000006f, 0.430899978f, 0.495849997f},
        {0.100346215f, -0.100350767f, 0.0299999993f, 0.0f, 0.0961149037f, 0.0194448289f}}},
      {"CenteredRMSProp",
       "CenteredRMSProp",
       {},
       {"var", "mg", "ms", "mom"},
       {kV, kL, kA, kL},
       {0.1f, 0.9f, 0.5f, 1e-07f},
       {{0.898912787f, -1.89886379f, 3.0f, 0.5f, -1.63697124f, 2.51270294f},
        {0.0390000083f, -0.0580000095f, 0.0299999993f, 0.0f, 0.0995000154f, -0.00109999813f},
        {0.0989999995f, 0.195999995f, 0.300000012f, 0.400000006f, 0.430899978f, 0.495849997f},
        {0.101087205f, -0.101136245f, 0.0299999993f, 0.0f, 0.0970303938f, 0.0194343813f}}},
      {"ProximalAdagrad",
       "ProximalAdagrad",
       {},
       {"var", "accum"},
       {kV, kA},
       {0.1f, 0.05f, 0.2f},
       {{0.879356802f, -1.86290324f, 3.0f, 0.5f, -1.48353064f, 2.36508846f},
        {0.189999998f, 0.360000014f, 0.300000012f, 0.400000006f, 0.75999999f, 0.702500045f}}},
      {"ProximalGradientDescent",
       "ProximalGradientDescent",
       {},
       {"var"},
       {kV},
       {0.1f, 0.5f, 0.2f},
       {{0.90196079f, -1.87254918f, 3.0f, 0.5f, -1.40330648f, 2.30055737f}}},
      {"Ftrl",
       "Ftrl",
       {{"multiply_linear_by_lr", false}},
       {"var", "accum", "linear"},
       {kV, kA, kL},
       {0.1f, 0.01f, 0.02f, -0.5f},
       {{0.199281976f, -0.434723288f, 3.0f, 0.5f, -0.0912831426f, 0.074180223f},
        {0.189999998f, 0.360000014f, 0.300000012f, 0.400000006f, 0.75999999f, 0.702500045f},
        {-0.886621296f, 2.6357286f, 0.0299999993f, 0.0f, 0.809439301f, -0.634710789f}}},
      {"FtrlV2",
       "FtrlV2",
       {{"multiply_linear_by_lr", true}},
       {"var", "accum", "linear"},
       {kV, kA, kL},
       {0.1f, 0.01f, 0.02f, 0.05f, -0.25f},
       {{0.0705763847f, -0.167882442f, 3.0f, 0.5f, -0.111885265f, 0.0166167915f},
        {0.189999998f, 0.360000014f, 0.300000012f, 0.400000006f, 0.75999999f, 0.702500045f},
        {-0.0478782132f, 0.13171272f, 0.0299999993f, 0.0f, 0.105913863f, -0.0162792541f}}},
  };
}

Tensor Rows(const Values& v) {
  return Tensor::FromVector<float>(v, {static_cast<int64_t>(v.size() / 2), 2});
}

// The NodeDef of `kind` + op whose inputs are named after the op's args.
NodeDef UpdateNode(const std::string& op, bool resource, DataType indices_type,
                   const std::vector<std::pair<std::string, bool>>& attrs = {}) {
  NodeDef n;
  n.set_op((resource ? "ResourceSparseApply" : "SparseApply") + op);
  n.set_name("update");
  const OpDef* def = *OpRegistry::Global()->LookUp(n.op());
  for (const OpArg& arg : def->inputs) n.add_input(arg.name);
  SetAttr(&n, "T", DT_FLOAT);
  SetAttr(&n, "Tindices", indices_type);
  for (const auto& [name, value] : attrs) SetAttr(&n, name, value);
  return n;
}

// The inputs after the variables, in the op's order: scalars, grad, indices.
std::vector<Tensor> OtherInputs(const std::string& op_name, const std::vector<float>& scalars,
                                const Tensor& grad, const Tensor& indices, int num_vars) {
  const OpDef* def = *OpRegistry::Global()->LookUp(op_name);
  std::vector<Tensor> out;
  size_t next = 0;
  for (size_t i = num_vars; i < def->inputs.size(); ++i) {
    const std::string& name = def->inputs[i].name;
    if (name == "grad") {
      out.push_back(grad);
    } else if (name == "indices") {
      out.push_back(indices);
    } else {
      out.push_back(Tensor::Scalar(scalars[next++]));
    }
  }
  return out;
}

Device* Dev() { return TestCpuDevice(); }

absl::StatusOr<KernelOutputs> RunNode(const NodeDef& n, std::vector<TensorValue> inputs) {
  ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> k, MakeKernel(n, Dev()));
  return RunWithRefs(k.get(), Dev(), std::move(inputs));
}

// Runs the ref flavour (int32 indices) on refs holding `vars`.
absl::Status RunRef(const std::string& op, const std::vector<std::pair<std::string, bool>>& attrs,
                    std::vector<std::unique_ptr<TestRef>>* refs, const std::vector<float>& scalars,
                    const Tensor& grad, const std::vector<int64_t>& rows) {
  const NodeDef n = UpdateNode(op, false, DT_INT32, attrs);
  std::vector<int32_t> rows32(rows.begin(), rows.end());
  std::vector<Tensor> others = OtherInputs(n.op(), scalars, grad, Tensor::Vec<int32_t>(rows32),
                                           static_cast<int>(refs->size()));
  std::vector<TensorValue> inputs;
  for (auto& r : *refs) inputs.push_back(r->value());
  for (Tensor& t : others) inputs.push_back(TensorValue{&t});
  absl::StatusOr<KernelOutputs> out = RunNode(n, inputs);
  if (out.ok() && out->refs[0] != &(*refs)[0]->tensor) {
    return absl::InternalError("output is not the var's ref");
  }
  return out.status();
}

// Runs the resource flavour (int64 indices) on variables named prefix/<var>.
absl::Status RunResource(const std::string& op,
                         const std::vector<std::pair<std::string, bool>>& attrs,
                         const std::vector<Tensor>& handles, const std::vector<float>& scalars,
                         const Tensor& grad, const std::vector<int64_t>& rows) {
  const NodeDef n = UpdateNode(op, true, DT_INT64, attrs);
  std::vector<Tensor> all = handles;
  for (const Tensor& t : OtherInputs(n.op(), scalars, grad, Tensor::Vec<int64_t>(rows),
                                     static_cast<int>(handles.size()))) {
    all.push_back(t);
  }
  std::vector<TensorValue> inputs;
  for (Tensor& t : all) inputs.push_back(TensorValue{&t});
  return RunNode(n, inputs).status();
}

TEST(SparseTrainingOpsTest, RefUpdatesMatchTensorFlow) {
  for (const SparseCase& c : Cases()) {
    SCOPED_TRACE(c.name);
    std::vector<std::unique_ptr<TestRef>> refs;
    for (const Values& v : c.vars) refs.push_back(std::make_unique<TestRef>(Rows(v)));
    ASSERT_TRUE(RunRef(c.op, c.bool_attrs, &refs, c.scalars, Rows(kG), kIndices).ok());
    for (size_t i = 0; i < refs.size(); ++i) {
      SCOPED_TRACE(c.var_names[i]);
      ExpectTensorEq<float>(refs[i]->tensor, c.expected[i], {3, 2});
    }
  }
}

TEST(SparseTrainingOpsTest, ResourceUpdatesMatchTensorFlow) {
  for (const SparseCase& c : Cases()) {
    SCOPED_TRACE(c.name);
    std::vector<Tensor> handles;
    for (size_t i = 0; i < c.vars.size(); ++i) {
      handles.push_back(
          NewResourceVar(Dev(), "sparse/" + c.name + "/" + c.var_names[i], Rows(c.vars[i])));
    }
    ASSERT_TRUE(RunResource(c.op, c.bool_attrs, handles, c.scalars, Rows(kG), kIndices).ok());
    for (size_t i = 0; i < c.vars.size(); ++i) {
      SCOPED_TRACE(c.var_names[i]);
      ExpectTensorEq<float>(ResourceVarValue(Dev(), "sparse/" + c.name + "/" + c.var_names[i]),
                            c.expected[i], {3, 2});
    }
  }
}

// Three FTRL steps on var/accum/linear = kV/kA/kL, each row set after a
// step as TensorFlow computed it.
struct FtrlSteps {
  std::string op;
  std::vector<std::pair<std::string, bool>> bool_attrs;
  std::vector<float> scalars;
  std::vector<std::vector<Values>> after;  // Per step: var, accum, linear.
};

TEST(SparseTrainingOpsTest, FtrlStepsMatchTensorFlow) {
  const std::vector<Values> grads = {
      {0.3f, -0.1f, 0.2f, 0.4f}, {-0.5f, 0.2f, 0.1f, 0.1f}, {0.05f, 0.05f, -0.3f, 0.6f}};
  const std::vector<std::vector<int64_t>> rows = {{1, 0}, {1, 1}, {2, 1}};
  const std::vector<FtrlSteps> cases = {
      {"Ftrl",
       {},
       {0.2f, 0.05f, 0.1f, -0.5f},
       {
           {{0.0143372053f, -0.580582619f, 0.232252374f, 0.0204736106f, -1.5f, 2.5f},
            {0.140000001f, 0.360000014f, 0.390000015f, 0.409999996f, 0.5f, 0.600000024f},
            {-0.0796898976f, 1.90786433f, -0.821658313f, -0.119642265f, 0.0500000007f,
             -0.00999999978f}},
           {{0.0143372053f, -0.580582619f, 0.327665657f, -0.0355090164f, -1.5f, 2.5f},
            {0.140000001f, 0.360000014f, 0.649999976f, 0.459999979f, 0.5f, 0.600000024f},
            {-0.0796898976f, 1.90786433f, -1.43639553f, 0.177518725f, 0.0500000007f,
             -0.00999999978f}},
           {{0.0143372053f, -0.580582619f, 0.394315094f, -0.162420839f, -0.0168898255f, 0.0f},
            {0.140000001f, 0.360000014f, 0.74000001f, 0.819999993f, 0.502499998f, 0.602500021f},
            {-0.0796898976f, 1.90786433f, -1.82487631f, 0.817875743f, 0.113241613f, 0.0198491607f}},
       }},
      {"Ftrl",
       {},
       {0.2f, 0.05f, 0.1f, -0.6f},
       {
           {{0.012068077f, -0.666969419f, 0.283309579f, 0.0228653587f, -1.5f, 2.5f},
            {0.140000001f, 0.360000014f, 0.390000015f, 0.409999996f, 0.5f, 0.600000024f},
            {-0.0709610954f, 1.98997474f, -0.911799371f, -0.121533521f, 0.0500000007f,
             -0.00999999978f}},
           {{0.012068077f, -0.666969419f, 0.382897049f, -0.0374279991f, -1.5f, 2.5f},
            {0.140000001f, 0.360000014f, 0.649999976f, 0.459999979f, 0.5f, 0.600000024f},
            {-0.0709610954f, 1.98997474f, -1.60500669f, 0.174927026f, 0.0500000007f,
             -0.00999999978f}},
           {{0.012068077f, -0.666969419f, 0.4514907f, -0.1667739f, -0.01847714f, 0.0f},
            {0.140000001f, 0.360000014f, 0.74000001f, 0.819999993f, 0.502499998f, 0.602500021f},
            {-0.0709610954f, 1.98997474f, -2.02463174f, 0.823618293f, 0.114829928f, 0.0170186851f}},
       }},
      {"FtrlV2",
       {{"multiply_linear_by_lr", true}},
       {0.2f, 0.05f, 0.1f, 0.3f, -0.8f},
       {
           {{-0.448765188f, -0.293460548f, -0.337859392f, -0.0475579947f, -1.5f, 2.5f},
            {0.140000001f, 0.360000014f, 0.390000015f, 0.409999996f, 0.5f, 0.600000024f},
            {0.121044584f, 0.151334465f, 0.182584167f, 0.035207402f, 0.0500000007f,
             -0.00999999978f}},
           {{-0.448765188f, -0.293460548f, -0.150885656f, -0.12014851f, -1.5f, 2.5f},
            {0.140000001f, 0.360000014f, 0.649999976f, 0.459999979f, 0.5f, 0.600000024f},
            {0.121044584f, 0.151334465f, 0.122935653f, 0.0793601573f, 0.0500000007f,
             -0.00999999978f}},
           {{-0.448765188f, -0.293460548f, -0.0563182868f, -0.238355115f, 0.172798812f,
             -0.402494401f},
            {0.140000001f, 0.360000014f, 0.74000001f, 0.819999993f, 0.502499998f, 0.602500021f},
            {0.121044584f, 0.151334465f, 0.05651512f, 0.222898901f, -0.116555601f, 0.294464529f}},
       }},
  };
  int n = 0;
  for (const FtrlSteps& c : cases) {
    SCOPED_TRACE(n);
    const std::vector<std::string> names = {"var", "accum", "linear"};
    std::vector<std::unique_ptr<TestRef>> refs;
    std::vector<Tensor> handles;
    for (size_t i = 0; i < names.size(); ++i) {
      const Values& init = i == 0 ? kV : i == 1 ? kA : kL;
      refs.push_back(std::make_unique<TestRef>(Rows(init)));
      handles.push_back(
          NewResourceVar(Dev(), "ftrl" + std::to_string(n) + "/" + names[i], Rows(init)));
    }
    for (size_t step = 0; step < grads.size(); ++step) {
      SCOPED_TRACE(step);
      ASSERT_TRUE(RunRef(c.op, c.bool_attrs, &refs, c.scalars, Rows(grads[step]), rows[step]).ok());
      ASSERT_TRUE(
          RunResource(c.op, c.bool_attrs, handles, c.scalars, Rows(grads[step]), rows[step]).ok());
      for (size_t i = 0; i < names.size(); ++i) {
        SCOPED_TRACE(names[i]);
        ExpectTensorEq<float>(refs[i]->tensor, c.after[step][i], {3, 2}, 2e-6);
        ExpectTensorEq<float>(ResourceVarValue(Dev(), "ftrl" + std::to_string(n) + "/" + names[i]),
                              c.after[step][i], {3, 2}, 2e-6);
      }
    }
    ++n;
  }
}

TEST(SparseTrainingOpsTest, BadInputsChangeNothing) {
  auto refs = [] {
    std::vector<std::unique_ptr<TestRef>> r;
    r.push_back(std::make_unique<TestRef>(Rows(kV)));
    r.push_back(std::make_unique<TestRef>(Rows(kA)));
    return r;
  };
  auto error = [&](const Tensor& grad, const std::vector<int64_t>& rows, float lr = 0.1f) {
    std::vector<std::unique_ptr<TestRef>> r = refs();
    absl::Status s = RunRef("Adagrad", {}, &r, {lr}, grad, rows);
    ExpectTensorEq<float>(r[0]->tensor, kV, {3, 2});
    ExpectTensorEq<float>(r[1]->tensor, kA, {3, 2});
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    return std::string(s.message());
  };
  EXPECT_THAT(error(Rows({1, 1, 1, 1}), {0, 3}),
              HasSubstr("Index 3 at offset 1 in indices is out of range"));
  EXPECT_THAT(error(Rows({1, 1, 1, 1}), {-1, 0}),
              HasSubstr("Index -1 at offset 0 in indices is out of range"));
  EXPECT_THAT(error(Rows({1, 1, 1, 1, 1, 1}), {0, 1}),
              HasSubstr("grad must be the same size as indices in the first dimension"));
  EXPECT_THAT(error(Tensor::FromVector<float>({1, 1, 1, 1, 1, 1}, {2, 3}), {0, 1}),
              HasSubstr("var and grad must match in dimension 1"));
  EXPECT_THAT(error(Tensor::Vec<float>({1, 1}), {0, 1}),
              HasSubstr("var and grad do not have the same rank"));

  // Indices must be a vector; slots the variable's shape; scalars scalars.
  std::vector<std::unique_ptr<TestRef>> r = refs();
  NodeDef n = UpdateNode("Adagrad", false, DT_INT32);
  Tensor lr = Tensor::Scalar(0.1f), grad = Rows({1, 1}),
         matrix = Tensor::FromVector<int32_t>({0}, {1, 1});
  absl::StatusOr<KernelOutputs> out = RunNode(n, {r[0]->value(), r[1]->value(), TensorValue{&lr},
                                                  TensorValue{&grad}, TensorValue{&matrix}});
  EXPECT_THAT(out.status().message(), HasSubstr("indices must be one-dimensional"));
  TestRef small(Tensor::Vec<float>({1, 2}));
  Tensor row0 = Tensor::Vec<int32_t>({0});
  out = RunNode(
      n, {r[0]->value(), small.value(), TensorValue{&lr}, TensorValue{&grad}, TensorValue{&row0}});
  EXPECT_THAT(out.status().message(),
              HasSubstr("var and accum do not have the same shape: var=[3,2] accum=[2]"));
  Tensor lr_vec = Tensor::Vec<float>({0.1f});
  out = RunNode(n, {r[0]->value(), r[1]->value(), TensorValue{&lr_vec}, TensorValue{&grad},
                    TensorValue{&row0}});
  EXPECT_THAT(out.status().message(), HasSubstr("lr is not a scalar: [1]"));
  TestRef scalar(Tensor::Scalar(1.0f)), scalar_accum(Tensor::Scalar(1.0f));
  Tensor g0 = Tensor::Scalar(1.0f), i0 = Tensor(DT_INT32, TensorShape({0}));
  out = RunNode(n, {scalar.value(), scalar_accum.value(), TensorValue{&lr}, TensorValue{&g0},
                    TensorValue{&i0}});
  EXPECT_THAT(out.status().message(), HasSubstr("var must be at least 1 dimensional"));
  TestRef uninitialized;
  out = RunNode(n, {uninitialized.value(), r[1]->value(), TensorValue{&lr}, TensorValue{&grad},
                    TensorValue{&row0}});
  EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition);
  // No rows: nothing changes.
  Tensor no_grad = Tensor(DT_FLOAT, TensorShape({0, 2}));
  ASSERT_TRUE(RunNode(n, {r[0]->value(), r[1]->value(), TensorValue{&lr}, TensorValue{&no_grad},
                          TensorValue{&i0}})
                  .ok());
  ExpectTensorEq<float>(r[0]->tensor, kV, {3, 2});
}

TEST(SparseTrainingOpsTest, HyperparameterRangesAreChecked) {
  // TensorFlow's messages; the variables stay as they were.
  auto error = [](const std::string& op, const std::vector<float>& scalars,
                  const std::vector<std::pair<std::string, bool>>& attrs = {}) {
    std::vector<std::unique_ptr<TestRef>> r;
    const int num_vars = op.rfind("Ftrl", 0) == 0 ? 3 : op == "ProximalGradientDescent" ? 1 : 2;
    for (int i = 0; i < num_vars; ++i) r.push_back(std::make_unique<TestRef>(Rows(kA)));
    absl::Status s = RunRef(op, attrs, &r, scalars, Rows({1, 1}), {0});
    for (auto& ref : r) ExpectTensorEq<float>(ref->tensor, kA, {3, 2});
    return std::string(s.message());
  };
  EXPECT_THAT(error("Ftrl", {-0.1f, 0, 0, -0.5f}),
              HasSubstr("lr is not a positive scalar (or zero if multiply_linear_by_lr is set)"));
  EXPECT_THAT(error("Ftrl", {0, 0, 0, -0.5f}), HasSubstr("lr is not a positive scalar"));
  std::vector<std::unique_ptr<TestRef>> r;  // lr = 0 is allowed with multiply_linear_by_lr.
  for (int i = 0; i < 3; ++i) r.push_back(std::make_unique<TestRef>(Rows(kA)));
  EXPECT_TRUE(
      RunRef("Ftrl", {{"multiply_linear_by_lr", true}}, &r, {0, 0, 0, -0.5f}, Rows({1, 1}), {0})
          .ok());
  EXPECT_THAT(error("Ftrl", {0.1f, -1, 0, -0.5f}),
              HasSubstr("l1 regularization strength is not a non-negative scalar"));
  EXPECT_THAT(error("Ftrl", {0.1f, 0, -1, -0.5f}),
              HasSubstr("l2 regularization strength is not a non-negative scalar"));
  EXPECT_THAT(error("FtrlV2", {0.1f, 0, 0, -1, -0.5f}),
              HasSubstr("l2 shrinkage regularization strength is not a non-negative scalar"));
  EXPECT_THAT(error("Ftrl", {0.1f, 0, 0, 0.5f}),
              HasSubstr("lr_power is not a non-positive scalar"));
  EXPECT_THAT(error("ProximalAdagrad", {-0.1f, 0, 0}), HasSubstr("lr is not a positive scalar"));
  EXPECT_THAT(error("ProximalGradientDescent", {0.1f, -1, 0}),
              HasSubstr("l1 regularization strength is not a non-negative scalar"));
}

TEST(SparseTrainingOpsTest, ShapeFunctions) {
  NodeDef n = UpdateNode("Adagrad", false, DT_INT32);
  auto shapes = Infer(
      n,
      {PartialShape({3, -1}), PartialShape({-1, 2}), {}, PartialShape({5, 2}), PartialShape({5})});
  ASSERT_TRUE(shapes.ok()) << shapes.status();
  EXPECT_EQ((*shapes)[0], PartialShape({3, 2}));
  EXPECT_THAT(Infer(n, {PartialShape({3, 2}),
                        PartialShape({3, 2}),
                        {},
                        PartialShape({5, 2}),
                        PartialShape({5, 1})})
                  .status()
                  .message(),
              HasSubstr("indices must be one-dimensional"));
  EXPECT_THAT(Infer(n, {PartialShape({3, 2}), PartialShape({3, 2}), PartialShape({1}),
                        PartialShape({5, 2}), PartialShape({5})})
                  .status()
                  .message(),
              HasSubstr("lr is not a scalar"));
  EXPECT_THAT(
      Infer(
          n,
          {PartialShape({3, 2}), PartialShape({4, 2}), {}, PartialShape({5, 2}), PartialShape({5})})
          .status()
          .message(),
      HasSubstr("var and accum do not have the same shape"));
}

}  // namespace
}  // namespace dflow
