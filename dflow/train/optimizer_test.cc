// Optimizers, variables and initializers, run end to end in a ClientSession.
// Expected values were computed by TensorFlow 2.x in tf.compat.v1 graph mode
// for the same graphs (tests/data/gen_training_reference.py).
#include "dflow/train/optimizer.h"

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "dflow/client/client_session.h"
#include "dflow/client/ops.h"
#include "dflow/client/training_ops_wrappers.h"
#include "dflow/framework/attr_util.h"
#include "dflow/train/initializers.h"
#include "dflow/train/variables.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

using ::testing::HasSubstr;
using Values = std::vector<float>;

void ExpectValues(const Tensor& t, const Values& expected, double tol = 1e-5) {
  ASSERT_EQ(t.dtype(), DT_FLOAT) << t.DebugString();
  ASSERT_EQ(t.NumElements(), static_cast<int64_t>(expected.size())) << t.DebugString();
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(t.flat<float>()[i], expected[i], tol * (1 + std::abs(expected[i]))) << "at " << i;
  }
}

const tensorflow::NodeDef* FindNode(const Scope& s, const std::string& name) {
  for (const tensorflow::NodeDef& n : s.graph_def().node()) {
    if (n.name() == name) return &n;
  }
  return nullptr;
}

std::vector<std::string> Colocation(const tensorflow::NodeDef& n) {
  std::vector<std::string> classes;
  GetNodeAttr(n, "_class", &classes).IgnoreError();
  return classes;
}

// The graph TensorFlow ran: loss = sum((w * [2, .5] - [3, 1])^2) + b^2.
struct Quadratic {
  Variable w, b, global_step;
  Output loss;
};

Quadratic BuildQuadratic(const Scope& root, bool use_resource) {
  Quadratic q;
  VariableOptions options;
  options.use_resource = use_resource;
  q.w = *MakeVariable(root, "w", Tensor::Vec<float>({1.0f, -2.0f}), options);
  q.b = *MakeVariable(root, "b", Tensor::Scalar(0.5f), options);
  q.global_step = *CreateGlobalStep(root);
  Output err = ops::Sub(root, ops::Mul(root, q.w.value(), {2.0f, 0.5f}), {3.0f, 1.0f});
  q.loss =
      ops::Add(root, ops::Sum(root, ops::Square(root, err), {0}), ops::Square(root, q.b.value()));
  return q;
}

struct OptimizerCase {
  std::string name;
  std::function<std::unique_ptr<Optimizer>()> make;
  std::vector<std::pair<Values, float>> steps;  // (w, b) after each step
  std::map<std::string, Values> variables;      // the optimizer's, after 3 steps
};

std::vector<OptimizerCase> Cases() {
  return {
      {"GradientDescent",
       [] { return std::make_unique<GradientDescentOptimizer>(0.1f); },
       {{{1.39999998f, -1.79999995f}, 0.400000006f},
        {{1.48000002f, -1.6099999f}, 0.319999993f},
        {{1.49600005f, -1.42949986f}, 0.255999982f}},
       {}},
      {"Momentum",
       [] { return std::make_unique<MomentumOptimizer>(0.1f, 0.9f); },
       {{{1.39999998f, -1.79999995f}, 0.400000006f},
        {{1.84000003f, -1.42999995f}, 0.230000004f},
        {{1.96399999f, -0.925499976f}, 0.0310000032f}},
       {{"b/Momentum", {1.99000001f}}, {"w/Momentum", {-1.23999977f, -5.0449996f}}}},
      {"MomentumNesterov",
       [] {
         return std::make_unique<MomentumOptimizer>(0.1f, 0.9f,
                                                    MomentumOptions{.use_nesterov = true});
       },
       {{{1.75999999f, -1.62f}, 0.310000002f},
        {{1.68879998f, -1.11409998f}, 0.111200005f},
        {{1.52494395f, -0.525850534f}, -0.0541759878f}},
       {{"b/Momentum", {1.59039998f}}, {"w/Momentum", {0.142399907f, -4.80604982f}}}},
      {"Adam",
       [] { return std::make_unique<AdamOptimizer>(AdamOptions{.learning_rate = 0.1f}); },
       {{{1.10000002f, -1.89999998f}, 0.400000036f},
        {{1.19881225f, -1.80007434f}, 0.301187813f},
        {{1.29512775f, -1.70027494f}, 0.204872325f}},
       {{"b/Adam", {0.213237613f}},
        {"b/Adam_1", {0.00200019171f}},
        {"beta1_power", {0.656099916f}},
        {"beta2_power", {0.996006072f}},
        {"w/Adam", {-0.852950335f, -0.527503848f}},
        {"w/Adam_1", {0.0320030637f, 0.0114006959f}}}},
      {"Adagrad",
       [] { return std::make_unique<AdagradOptimizer>(0.1f); },
       {{{1.09968901f, -1.901227f}, 0.404653728f},
        {{1.16206944f, -1.83184874f}, 0.343562663f},
        {{1.20866358f, -1.77553618f}, 0.297519594f}},
       {{"b/Adagrad", {2.22711992f}}, {"w/Adagrad", {33.6645432f, 11.5756588f}}}},
      {"RMSProp",
       [] { return std::make_unique<RMSPropOptimizer>(0.1f); },
       {{{1.25298214f, -1.82458842f}, 0.400000006f},
        {{1.3745935f, -1.67027509f}, 0.31851992f},
        {{1.43833721f, -1.53030205f}, 0.251673192f}},
       {{"b/RMSProp", {0.908181965f}},
        {"b/RMSProp_1", {0.0668467283f}},
        {"w/RMSProp", {2.47711468f, 1.71889138f}},
        {"w/RMSProp_1", {-0.0637436584f, -0.139973044f}}}},
      {"RMSPropMomentum",
       [] { return std::make_unique<RMSPropOptimizer>(0.1f, RMSPropOptions{.momentum = 0.5f}); },
       {{{1.25298214f, -1.82458842f}, 0.400000006f},
        {{1.50108457f, -1.58256936f}, 0.268519908f},
        {{1.62457299f, -1.32429516f}, 0.146058634f}},
       {{"b/RMSProp", {0.896441162f}},
        {"b/RMSProp_1", {0.122461274f}},
        {"w/RMSProp", {2.37647057f, 1.70298839f}},
        {"w/RMSProp_1", {-0.123488389f, -0.258274198f}}}},
  };
}

// Three Minimize steps of `c` match TensorFlow's, as do the optimizer's
// variables and the global step.
void RunCase(const OptimizerCase& c, bool use_resource) {
  SCOPED_TRACE(c.name + (use_resource ? " (resource)" : " (ref)"));
  Scope root = Scope::NewRootScope();
  Quadratic q = BuildQuadratic(root, use_resource);
  std::unique_ptr<Optimizer> opt = c.make();
  absl::StatusOr<Operation> train = opt->Minimize(root, q.loss, {q.w, q.b}, &q.global_step);
  ASSERT_TRUE(train.ok()) << train.status();
  Operation init = GlobalVariablesInitializer(root);
  ASSERT_TRUE(root.ok()) << root.status();

  ClientSession session(root);
  std::vector<Tensor> out;
  ASSERT_TRUE(session.Run({}, {}, {init}, &out).ok());
  for (size_t step = 0; step < c.steps.size(); ++step) {
    SCOPED_TRACE(absl::StrCat("step ", step + 1));
    absl::Status s = session.Run({}, {}, {*train}, &out);
    ASSERT_TRUE(s.ok()) << s;
    ASSERT_TRUE(session.Run({q.w.value(), q.b.value()}, &out).ok());
    ExpectValues(out[0], c.steps[step].first);
    ExpectValues(out[1], {c.steps[step].second});
  }
  std::set<std::string> seen;
  for (const Variable& v : opt->variables()) {
    auto it = c.variables.find(v.name());
    ASSERT_NE(it, c.variables.end()) << "unexpected variable " << v.name();
    ASSERT_TRUE(session.Run({v.value()}, &out).ok());
    SCOPED_TRACE(v.name());
    ExpectValues(out[0], it->second);
    seen.insert(v.name());
  }
  EXPECT_EQ(seen.size(), c.variables.size());
  ASSERT_TRUE(session.Run({q.global_step.value()}, &out).ok());
  EXPECT_EQ(out[0].scalar<int64_t>(), 3);
}

TEST(OptimizerTest, ResourceVariablesMatchTensorFlow) {
  for (const OptimizerCase& c : Cases()) RunCase(c, /*use_resource=*/true);
}

TEST(OptimizerTest, RefVariablesMatchTensorFlow) {
  for (const OptimizerCase& c : Cases()) RunCase(c, /*use_resource=*/false);
}

TEST(OptimizerTest, SlotsAreNamedAndColocatedLikeTensorFlow) {
  for (bool use_resource : {true, false}) {
    Scope root = Scope::NewRootScope();
    Quadratic q = BuildQuadratic(root, use_resource);
    AdamOptimizer adam;
    ASSERT_TRUE(adam.Minimize(root, q.loss, {q.w, q.b}, &q.global_step).ok()) << root.status();

    const std::string var_op = use_resource ? "VarHandleOp" : "VariableV2";
    for (std::string slot : {"w/Adam", "w/Adam_1", "b/Adam", "b/Adam_1"}) {
      const tensorflow::NodeDef* n = FindNode(root, slot);
      ASSERT_NE(n, nullptr) << slot;
      EXPECT_EQ(n->op(), var_op);
      const std::string owner = slot.substr(0, 1);
      EXPECT_THAT(Colocation(*n), ::testing::ElementsAre("loc:@" + owner)) << slot;
      EXPECT_THAT(Colocation(*FindNode(root, slot + "/Assign")),
                  ::testing::ElementsAre("loc:@" + owner));
    }
    EXPECT_EQ(adam.GetSlot(q.w, "m")->name(), "w/Adam");
    EXPECT_EQ(adam.GetSlot(q.w, "v")->name(), "w/Adam_1");
    EXPECT_EQ(adam.GetSlot(q.w, "momentum").status().code(), absl::StatusCode::kNotFound);
    // Beta powers beside the first variable by name ("b" < "w").
    EXPECT_THAT(Colocation(*FindNode(root, "beta1_power")), ::testing::ElementsAre("loc:@b"));

    const std::string apply = use_resource ? "ResourceApplyAdam" : "ApplyAdam";
    const tensorflow::NodeDef* update = FindNode(root, "Adam/update_w/" + apply);
    ASSERT_NE(update, nullptr);
    EXPECT_EQ(update->input(0), "w");
    EXPECT_EQ(update->input(1), "w/Adam");
    EXPECT_EQ(update->input(2), "w/Adam_1");
    EXPECT_THAT(Colocation(*update), ::testing::ElementsAre("loc:@w"));
    EXPECT_NE(FindNode(root, "Adam/learning_rate"), nullptr);

    const tensorflow::NodeDef* train = FindNode(root, "Adam");
    ASSERT_NE(train, nullptr);
    EXPECT_EQ(train->op(), "AssignAddVariableOp");
    EXPECT_EQ(train->input(0), "global_step");
    EXPECT_EQ(train->input(1), "Adam/Const");
    EXPECT_THAT(Colocation(*train), ::testing::ElementsAre("loc:@global_step"));
    const tensorflow::NodeDef* increment = FindNode(root, "Adam/Const");
    EXPECT_THAT(increment->input(), ::testing::ElementsAre("^Adam/update"));
  }
}

TEST(OptimizerTest, VariablesAreBuiltLikeTensorFlow) {
  Scope root = Scope::NewRootScope();
  VariableOptions ref;
  ref.use_resource = false;
  Variable r = *MakeVariable(root, "r", Tensor::Vec<float>({1, 2}), ref);
  Variable v = *MakeVariable(root.NewSubScope("layer"), "v", TensorShape({2, 3}), DT_FLOAT,
                             ZerosInitializer());
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(r.value().node_name(), "r/read");
  EXPECT_EQ(FindNode(root, "r")->op(), "VariableV2");
  EXPECT_EQ(FindNode(root, "r/Assign")->input(1), "r/initial_value");
  EXPECT_THAT(Colocation(*FindNode(root, "r/read")), ::testing::ElementsAre("loc:@r"));

  EXPECT_EQ(v.name(), "layer/v");
  EXPECT_EQ(v.value().node_name(), "layer/v/Read/ReadVariableOp");
  const tensorflow::NodeDef* handle = FindNode(root, "layer/v");
  std::string shared_name;
  ASSERT_TRUE(GetNodeAttr(*handle, "shared_name", &shared_name).ok());
  EXPECT_EQ(shared_name, "layer/v");
  EXPECT_EQ(FindNode(root, "layer/v/Assign")->input(1), "layer/v/Initializer/zeros");

  // A second "r" is "r_1", its nodes under "r_1/".
  Variable r1 = *MakeVariable(root, "r", Tensor::Vec<float>({3}), ref);
  EXPECT_EQ(r1.name(), "r_1");
  EXPECT_EQ(r1.value().node_name(), "r_1/read");

  Operation init = GlobalVariablesInitializer(root);
  EXPECT_THAT(FindNode(root, init.name())->input(),
              ::testing::ElementsAre("^layer/v/Assign", "^r/Assign", "^r_1/Assign"));
}

TEST(OptimizerTest, ApplyGradientsWithGivenGradients) {
  for (bool use_resource : {true, false}) {
    Scope root = Scope::NewRootScope();
    VariableOptions options;
    options.use_resource = use_resource;
    Variable v = *MakeVariable(root, "v", Tensor::Vec<float>({1, 2}), options);
    Variable unused = *MakeVariable(root, "unused", Tensor::Vec<float>({5}), options);
    GradientDescentOptimizer sgd(0.5f);
    Output grad = ops::Const(root, Tensor::Vec<float>({2, -4}));
    // A pair without a gradient is skipped; no global step: a NoOp train op.
    absl::StatusOr<Operation> train = sgd.ApplyGradients(root, {{grad, v}, {Output(), unused}});
    ASSERT_TRUE(train.ok()) << train.status();
    EXPECT_EQ(train->name(), "GradientDescent");
    EXPECT_EQ(FindNode(root, "GradientDescent")->op(), "NoOp");

    ClientSession session(root);
    std::vector<Tensor> out;
    ASSERT_TRUE(session.Run({}, {}, {GlobalVariablesInitializer(root)}, &out).ok());
    ASSERT_TRUE(session.Run({}, {}, {*train}, &out).ok());
    ASSERT_TRUE(session.Run({}, {}, {*train}, &out).ok());
    ASSERT_TRUE(session.Run({v.value(), unused.value()}, &out).ok());
    ExpectValues(out[0], {-1, 6});
    ExpectValues(out[1], {5});
  }
}

TEST(OptimizerTest, TwoOptimizersGetDistinctNames) {
  Scope root = Scope::NewRootScope();
  Variable v = *MakeVariable(root, "v", Tensor::Vec<float>({1}));
  Output grad = ops::Const(root, Tensor::Vec<float>({1}));
  GradientDescentOptimizer a(0.1f), b(0.1f);
  EXPECT_EQ(a.ApplyGradients(root, {{grad, v}})->name(), "GradientDescent");
  EXPECT_EQ(b.ApplyGradients(root, {{grad, v}})->name(), "GradientDescent_1");
  EXPECT_NE(FindNode(root, "GradientDescent_1/update_v/ResourceApplyGradientDescent"), nullptr);
}

TEST(OptimizerTest, ApplyGradientsErrors) {
  Scope root = Scope::NewRootScope();
  Variable v = *MakeVariable(root, "v", Tensor::Vec<float>({1, 2}));
  GradientDescentOptimizer sgd(0.1f);
  absl::StatusOr<Operation> none = sgd.ApplyGradients(root, {{Output(), v}});
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(none.status().message(), HasSubstr("no gradients provided for any variable: [v]"));

  Output int_grad = ops::Const(root, Tensor::Vec<int32_t>({1, 2}));
  absl::StatusOr<Operation> bad = sgd.ApplyGradients(root, {{int_grad, v}});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(),
              HasSubstr("the gradient of v is int32 but the variable is float"));
}

TEST(OptimizerTest, HyperparametersMayBeTensors) {
  Scope root = Scope::NewRootScope();
  Variable v = *MakeVariable(root, "v", Tensor::Vec<float>({1, 2}));
  Output lr = ops::Placeholder(root.WithOpName("lr"), DT_FLOAT);
  GradientDescentOptimizer sgd(lr);
  Operation train = *sgd.ApplyGradients(root, {{ops::Const(root, Tensor::Vec<float>({1, 1})), v}});
  ClientSession session(root);
  std::vector<Tensor> out;
  ASSERT_TRUE(session.Run({}, {}, {GlobalVariablesInitializer(root)}, &out).ok());
  ASSERT_TRUE(session.Run({{lr, Tensor::Scalar(0.25f)}}, {}, {train}, &out).ok());
  ASSERT_TRUE(session.Run({{lr, Tensor::Scalar(2.0f)}}, {}, {train}, &out).ok());
  ASSERT_TRUE(session.Run({v.value()}, &out).ok());
  ExpectValues(out[0], {-1.25f, -0.25f});
}

TEST(OptimizerTest, DoubleVariablesGetCastHyperparameters) {
  Scope root = Scope::NewRootScope();
  Variable v = *MakeVariable(root, "v", Tensor::Vec<double>({1, 2}));
  MomentumOptimizer opt(0.5f, 0.5f);
  Output grad = ops::Const(root, Tensor::Vec<double>({1, -1}));
  Operation train = *opt.ApplyGradients(root, {{grad, v}});
  EXPECT_EQ(FindNode(root, "Momentum/update_v/Cast")->op(), "Cast");
  ClientSession session(root);
  std::vector<Tensor> out;
  ASSERT_TRUE(session.Run({}, {}, {GlobalVariablesInitializer(root)}, &out).ok());
  ASSERT_TRUE(session.Run({}, {}, {train}, &out).ok());
  ASSERT_TRUE(session.Run({}, {}, {train}, &out).ok());
  ASSERT_TRUE(session.Run({v.value()}, &out).ok());
  // accum: 1, 1.5 → var: 1 - .5 - .75 = -0.25; 2 + .5 + .75 = 3.25.
  EXPECT_DOUBLE_EQ(out[0].flat<double>()[0], -0.25);
  EXPECT_DOUBLE_EQ(out[0].flat<double>()[1], 3.25);
}

// The status of running `v * 2` before `v` is initialized.
absl::Status ReadUninitialized(bool use_resource) {
  Scope root = Scope::NewRootScope();
  VariableOptions options;
  options.use_resource = use_resource;
  Variable v = *MakeVariable(root, "v", Tensor::Vec<float>({1, 2}), options);
  Output doubled = ops::Mul(root, v.value(), 2.0f);
  ClientSession session(root);
  std::vector<Tensor> out;
  return session.Run({doubled}, &out);
}

TEST(OptimizerTest, ReadingAnUninitializedResourceVariableFails) {
  absl::Status s = ReadUninitialized(/*use_resource=*/true);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("Variable v (container localhost) is uninitialized"));
}

// As in TensorFlow, the executor fails a non-ref read of an uninitialized
// ref variable.
TEST(OptimizerTest, ReadingAnUninitializedRefVariableFails) {
  absl::Status s = ReadUninitialized(/*use_resource=*/false);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("Attempting to use uninitialized value v"));
}

TEST(OptimizerTest, MinimizeTrainsALinearModel) {
  // y = 3x - 1 from four points; 200 Adam steps get close.
  Scope root = Scope::NewRootScope();
  Variable w = *MakeVariable(root, "w", TensorShape({1, 1}), DT_FLOAT, ZerosInitializer());
  Variable b = *MakeVariable(root, "b", TensorShape({1}), DT_FLOAT, ZerosInitializer());
  Output x = ops::Const(root, Tensor::FromVector<float>({0, 1, 2, 3}, TensorShape({4, 1})));
  Output y = ops::Const(root, Tensor::FromVector<float>({-1, 2, 5, 8}, TensorShape({4, 1})));
  Output pred = ops::Add(root, ops::MatMul(root, x, w.value()), b.value());
  Output loss = ops::Mean(root, ops::Square(root, ops::Sub(root, pred, y)), {0, 1});
  Variable step = *CreateGlobalStep(root);
  AdamOptimizer adam({.learning_rate = 0.1f});
  Operation train = *adam.Minimize(root, loss, {w, b}, &step);
  ClientSession session(root);
  std::vector<Tensor> out;
  ASSERT_TRUE(session.Run({}, {}, {GlobalVariablesInitializer(root)}, &out).ok());
  for (int i = 0; i < 300; ++i) ASSERT_TRUE(session.Run({}, {}, {train}, &out).ok());
  ASSERT_TRUE(session.Run({w.value(), b.value(), step.value(), loss}, &out).ok());
  EXPECT_NEAR(out[0].flat<float>()[0], 3.0f, 0.05f);
  EXPECT_NEAR(out[1].flat<float>()[0], -1.0f, 0.1f);
  EXPECT_EQ(out[2].scalar<int64_t>(), 300);
  EXPECT_LT(out[3].scalar<float>(), 1e-2f);
}

// --- initializers ------------------------------------------------------------------------

Tensor Initialize(const Initializer& init, const TensorShape& shape, DataType dtype = DT_FLOAT) {
  Scope root = Scope::NewRootScope();
  Variable v = *MakeVariable(root, "v", shape, dtype, init);
  ClientSession session(root);
  std::vector<Tensor> out;
  EXPECT_TRUE(session.Run({}, {}, {v.initializer()}, &out).ok());
  EXPECT_TRUE(session.Run({v.value()}, &out).ok());
  return out.empty() ? Tensor() : out[0];
}

TEST(OptimizerInitializerTest, SeededValuesMatchTensorFlow) {
  ExpectValues(
      Initialize(GlorotUniformInitializer(42), TensorShape({3, 2})),
      {0.990877151f, 0.388680935f, 0.64700985f, 0.560389757f, -0.0526785851f, 0.287039161f}, 1e-6);
  ExpectValues(Initialize(TruncatedNormalInitializer(0.5, 2.0, 7), TensorShape({4})),
               {0.406108618f, -1.90780473f, 2.83367038f, 2.84124088f}, 1e-6);
  ExpectValues(Initialize(RandomNormalInitializer(1.0, 0.5, 3), TensorShape({2, 2})),
               {1.5308311f, 0.560710847f, 1.0559361f, 1.09255862f}, 1e-6);
  ExpectValues(Initialize(RandomUniformInitializer(-1.0, 3.0, 5), TensorShape({3})),
               {0.553245068f, 1.65473127f, -0.232357025f}, 1e-6);
  Tensor d = Initialize(RandomNormalInitializer(1.0, 0.5, 3), TensorShape({3}), DT_DOUBLE);
  ASSERT_EQ(d.dtype(), DT_DOUBLE);
  EXPECT_NEAR(d.flat<double>()[0], 0.0054243696217062265, 1e-12);
  EXPECT_NEAR(d.flat<double>()[1], 1.4306659830855915, 1e-12);
  EXPECT_NEAR(d.flat<double>()[2], -0.17596194973489521, 1e-12);
}

TEST(OptimizerInitializerTest, GlorotLimitUsesFans) {
  // [2,3,4,5]: receptive field 6, fan_in 24, fan_out 30, limit sqrt(6/54).
  Tensor t = Initialize(GlorotUniformInitializer(1), TensorShape({2, 3, 4, 5}));
  ExpectValues(Tensor::Vec<float>({t.flat<float>()[0], t.flat<float>()[59], t.flat<float>()[119]}),
               {-0.17397508f, -0.317126215f, 0.207530349f}, 1e-6);
  const Fans fans = ComputeFans(TensorShape({2, 3, 4, 5}));
  EXPECT_EQ(fans.fan_in, 24);
  EXPECT_EQ(fans.fan_out, 30);
  EXPECT_EQ(ComputeFans(TensorShape({7})).fan_out, 7);
  EXPECT_EQ(ComputeFans(TensorShape({})).fan_in, 1);
}

TEST(OptimizerInitializerTest, ConstantInitializers) {
  ExpectValues(Initialize(ZerosInitializer(), TensorShape({2})), {0, 0});
  ExpectValues(Initialize(OnesInitializer(), TensorShape({3})), {1, 1, 1});
  ExpectValues(Initialize(ConstantInitializer(0.25), TensorShape({1, 2})), {0.25f, 0.25f});
  Tensor ints = Initialize(ConstantInitializer(7), TensorShape({2}), DT_INT32);
  EXPECT_EQ(ints.flat<int32_t>()[1], 7);
  // Large shapes use Fill instead of a huge Const.
  Scope root = Scope::NewRootScope();
  Variable big = *MakeVariable(root, "big", TensorShape({100, 100}), DT_FLOAT, OnesInitializer());
  EXPECT_EQ(FindNode(root, "big/Assign")->input(1), "big/Initializer/ones/Fill");
  ClientSession session(root);
  std::vector<Tensor> out;
  ASSERT_TRUE(session.Run({}, {}, {big.initializer()}, &out).ok());
  ASSERT_TRUE(session.Run({big.value()}, &out).ok());
  EXPECT_EQ(out[0].flat<float>()[9999], 1.0f);
}

TEST(OptimizerInitializerTest, UnseededInitializersDiffer) {
  Tensor a = Initialize(RandomNormalInitializer(), TensorShape({8}));
  Tensor b = Initialize(RandomNormalInitializer(), TensorShape({8}));
  bool differ = false;
  for (int i = 0; i < 8; ++i) differ |= a.flat<float>()[i] != b.flat<float>()[i];
  EXPECT_TRUE(differ);
  EXPECT_EQ(OpSeeds(std::nullopt).seed, 0);
  EXPECT_EQ(OpSeeds(5).seed, 87654321);
  EXPECT_EQ(OpSeeds(5).seed2, 5);
}

}  // namespace
}  // namespace dflow
