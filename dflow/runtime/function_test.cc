// Control flow and functions: Switch/Merge deadness in the executor, and the
// lowering of If / StatelessIf / PartitionedCall from a GraphDef's library.
// Golden cases replay graphs TensorFlow wrote and the values it computed
// (tests/data/control_flow, from gen_control_flow_reference.py).
#include "dflow/runtime/function.h"

#include <atomic>
#include <cmath>
#include <fstream>
#include <functional>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "dflow/framework/attr_util.h"
#include "dflow/framework/status.h"
#include "dflow/framework/test_data_dir.h"
#include "dflow/runtime/direct_session.h"
#include "dflow/runtime/session_util.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace dflow {
namespace {

const std::string kDir = TestDataDir() + "/control_flow/";

tensorflow::GraphDef ParseGraph(const std::string& text) {
  tensorflow::GraphDef g;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &g)) << text;
  return g;
}

std::unique_ptr<DirectSession> NewSession(int cpus = 1) {
  SessionOptions options;
  (*options.config.mutable_device_count())["CPU"] = cpus;
  absl::StatusOr<std::unique_ptr<DirectSession>> s = DirectSession::New(options);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

// --- golden: TensorFlow's graphs, TensorFlow's values ---------------------------

Tensor FromJson(const nlohmann::json& j) {
  std::vector<int64_t> dims = j["shape"].get<std::vector<int64_t>>();
  const std::string dtype = j["dtype"];
  const nlohmann::json& v = j["values"];
  if (dtype == "float") return Tensor::FromVector(v.get<std::vector<float>>(), TensorShape(dims));
  if (dtype == "int64") {
    return Tensor::FromVector(v.get<std::vector<int64_t>>(), TensorShape(dims));
  }
  if (dtype == "int32") {
    return Tensor::FromVector(v.get<std::vector<int32_t>>(), TensorShape(dims));
  }
  Tensor t(DT_BOOL, TensorShape(dims));
  for (size_t i = 0; i < v.size(); ++i) t.flat<bool>()[i] = v[i].get<bool>();
  return t;
}

void ExpectEqual(const Tensor& want, const Tensor& got, const std::string& what) {
  ASSERT_EQ(want.dtype(), got.dtype()) << what;
  ASSERT_EQ(want.shape(), got.shape()) << what;
  for (int64_t i = 0; i < want.NumElements(); ++i) {
    switch (want.dtype()) {
      case DT_FLOAT:
        // 1e-5 relative: dflow's tanh and sums round differently from TensorFlow's.
        EXPECT_NEAR(want.flat<float>()[i], got.flat<float>()[i],
                    1e-5 * std::abs(want.flat<float>()[i]) + 1e-7)
            << what << " [" << i << "]";
        break;
      case DT_INT64:
        EXPECT_EQ(want.flat<int64_t>()[i], got.flat<int64_t>()[i]) << what << " [" << i << "]";
        break;
      case DT_INT32:
        EXPECT_EQ(want.flat<int32_t>()[i], got.flat<int32_t>()[i]) << what << " [" << i << "]";
        break;
      default:
        EXPECT_EQ(want.flat<bool>()[i], got.flat<bool>()[i]) << what << " [" << i << "]";
    }
  }
}

nlohmann::json GoldenCases() {
  std::ifstream in(kDir + "cases.json");
  EXPECT_TRUE(in.good()) << "missing tests/data/control_flow/cases.json";
  return in.good() ? nlohmann::json::parse(in)["cases"] : nlohmann::json::array();
}

class ControlFlowGoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ControlFlowGoldenTest, ReplaysTensorFlowsRuns) {
  for (const nlohmann::json& c : GoldenCases()) {
    if (c["name"] != GetParam()) continue;
    std::ifstream in(kDir + c["graph"].get<std::string>());
    std::stringstream text;
    text << in.rdbuf();
    std::unique_ptr<DirectSession> s = NewSession(c.value("cpus", 1));
    absl::Status created = s->Create(ParseGraph(text.str()));
    ASSERT_TRUE(created.ok()) << created;
    for (const std::string& op : c["init"]) ASSERT_TRUE(s->Run({}, {}, {op}, nullptr).ok()) << op;
    int k = 0;
    for (const nlohmann::json& run : c["runs"]) {
      std::vector<std::pair<std::string, Tensor>> feeds;
      for (const auto& [name, value] : run["feeds"].items())
        feeds.emplace_back(name, FromJson(value));
      std::vector<std::string> fetches = run["fetches"];
      std::vector<std::string> targets = run["targets"];
      std::vector<Tensor> out;
      absl::Status st = s->Run(feeds, fetches, targets, &out);
      ASSERT_TRUE(st.ok()) << GetParam() << " run " << k << ": " << st;
      for (size_t i = 0; i < fetches.size(); ++i) {
        ExpectEqual(FromJson(run["expected"][i]), out[i],
                    absl::StrCat(GetParam(), " run ", k, " ", fetches[i]));
      }
      ++k;
    }
    EXPECT_GT(k, 0);
    return;
  }
  FAIL() << "no golden case " << GetParam();
}

INSTANTIATE_TEST_SUITE_P(TensorFlowGraphs, ControlFlowGoldenTest,
                         ::testing::Values("cond_v1", "cond_v2", "cond_v2_resource",
                                           "function_call", "global_step_read_ref",
                                           "global_step_read_resource", "while_v1",
                                           "while_v1_parallel", "while_v1_nested",
                                           "while_v1_in_cond", "while_v1_ref", "while_v2",
                                           "while_v2_nested", "while_v2_resource", "while_v1_grad",
                                           "tensor_array_v1", "while_v1_devices",
                                           "while_v1_nested_devices", "while_v1_grad_devices"));

// --- Switch / Merge in the executor ---------------------------------------------

// pred ? x * 2 : x + 10 as TensorFlow 1.x writes it, with a counter bumped
// by a node with no data input on the true side (it runs only there, through
// the pivot's control edge), and the merge's value_index.
constexpr char kSwitchMerge[] = R"pb(
  node {
    name: "x"
    op: "Placeholder"
    attr {
      key: "dtype"
      value { type: DT_FLOAT }
    }
  }
  node {
    name: "pred"
    op: "Placeholder"
    attr {
      key: "dtype"
      value { type: DT_BOOL }
    }
  }
  node {
    name: "two"
    op: "Const"
    attr {
      key: "dtype"
      value { type: DT_FLOAT }
    }
    attr {
      key: "value"
      value { tensor { dtype: DT_FLOAT float_val: 2 } }
    }
  }
  node {
    name: "ten"
    op: "Const"
    attr {
      key: "dtype"
      value { type: DT_FLOAT }
    }
    attr {
      key: "value"
      value { tensor { dtype: DT_FLOAT float_val: 10 } }
    }
  }
  node {
    name: "sw"
    op: "Switch"
    input: "x"
    input: "pred"
    attr {
      key: "T"
      value { type: DT_FLOAT }
    }
  }
  node {
    name: "sp"
    op: "Switch"
    input: "pred"
    input: "pred"
    attr {
      key: "T"
      value { type: DT_BOOL }
    }
  }
  node {
    name: "pivot_t"
    op: "Identity"
    input: "sp:1"
    attr {
      key: "T"
      value { type: DT_BOOL }
    }
  }
  node {
    name: "t"
    op: "Mul"
    input: "sw:1"
    input: "two"
    attr {
      key: "T"
      value { type: DT_FLOAT }
    }
  }
  node {
    name: "f"
    op: "AddV2"
    input: "sw:0"
    input: "ten"
    attr {
      key: "T"
      value { type: DT_FLOAT }
    }
  }
  node {
    name: "m"
    op: "Merge"
    input: "f"
    input: "t"
    attr {
      key: "T"
      value { type: DT_FLOAT }
    }
    attr {
      key: "N"
      value { i: 2 }
    }
  }
  node {
    name: "v"
    op: "VariableV2"
    attr {
      key: "dtype"
      value { type: DT_FLOAT }
    }
    attr {
      key: "shape"
      value { shape {} }
    }
  }
  node {
    name: "zero"
    op: "Const"
    attr {
      key: "dtype"
      value { type: DT_FLOAT }
    }
    attr {
      key: "value"
      value { tensor { dtype: DT_FLOAT float_val: 0 } }
    }
  }
  node {
    name: "init"
    op: "Assign"
    input: "v"
    input: "zero"
    attr {
      key: "T"
      value { type: DT_FLOAT }
    }
  }
  node {
    name: "one"
    op: "Const"
    input: "^pivot_t"
    attr {
      key: "dtype"
      value { type: DT_FLOAT }
    }
    attr {
      key: "value"
      value { tensor { dtype: DT_FLOAT float_val: 1 } }
    }
  }
  node {
    name: "bump"
    op: "AssignAdd"
    input: "v"
    input: "one"
    attr {
      key: "T"
      value { type: DT_FLOAT }
    }
  }
  node {
    name: "f_side"
    op: "Cast"
    input: "sp:0"
    attr {
      key: "SrcT"
      value { type: DT_BOOL }
    }
    attr {
      key: "DstT"
      value { type: DT_FLOAT }
    }
  }
  node {
    name: "done"
    op: "Merge"
    input: "f_side"
    input: "bump"
    attr {
      key: "T"
      value { type: DT_FLOAT }
    }
    attr {
      key: "N"
      value { i: 2 }
    }
  }
)pb";

TEST(SwitchMergeTest, TakenBranchRunsUntakenIsDead) {
  std::unique_ptr<DirectSession> s = NewSession();
  ASSERT_TRUE(s->Create(ParseGraph(kSwitchMerge)).ok());
  ASSERT_TRUE(s->Run({}, {}, {"init"}, nullptr).ok());
  const Tensor x = Tensor::Vec<float>({1, 2, 3});
  for (bool p : {true, false, true}) {
    std::vector<Tensor> out;
    absl::Status st =
        s->Run({{"x", x}, {"pred", Tensor::Scalar(p)}}, {"m:0", "m:1", "done:1"}, {}, &out);
    ASSERT_TRUE(st.ok()) << st;
    ExpectEqual(p ? Tensor::Vec<float>({2, 4, 6}) : Tensor::Vec<float>({11, 12, 13}), out[0],
                "m:0");
    EXPECT_EQ(out[1].scalar<int32_t>(), p ? 1 : 0);
    EXPECT_EQ(out[2].scalar<int32_t>(), p ? 1 : 0);
  }
  std::vector<Tensor> v;
  ASSERT_TRUE(s->Run({}, {"v:0"}, {}, &v).ok());
  EXPECT_EQ(v[0].scalar<float>(), 2.0f) << "the bump ran once per true step only";
}

TEST(SwitchMergeTest, FetchingADeadTensorIsAnError) {
  std::unique_ptr<DirectSession> s = NewSession();
  tensorflow::GraphDef g = ParseGraph(kSwitchMerge);
  g.mutable_node()->RemoveLast();  // done
  g.mutable_node()->RemoveLast();  // f_side
  ASSERT_TRUE(s->Create(g).ok());
  std::vector<Tensor> out;
  absl::Status st =
      s->Run({{"x", Tensor::Vec<float>({1})}, {"pred", Tensor::Scalar(false)}}, {"t:0"}, {}, &out);
  EXPECT_FALSE(st.ok());
  // The step still finishes, and the live side is fine.
  ASSERT_TRUE(
      s->Run({{"x", Tensor::Vec<float>({1})}, {"pred", Tensor::Scalar(false)}}, {"f:0"}, {}, &out)
          .ok());
  EXPECT_EQ(out[0].flat<float>()[0], 11.0f);
}

TEST(SwitchMergeTest, PredicateMustBeAScalar) {
  std::unique_ptr<DirectSession> s = NewSession();
  tensorflow::GraphDef g = ParseGraph(kSwitchMerge);
  g.mutable_node()->RemoveLast();
  g.mutable_node()->RemoveLast();
  ASSERT_TRUE(s->Create(g).ok());
  std::vector<Tensor> out;
  Tensor pred(DT_BOOL, TensorShape({2}));
  absl::Status st = s->Run({{"x", Tensor::Vec<float>({1})}, {"pred", pred}}, {"m:0"}, {}, &out);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "'sw'")) << st;
}

// --- loops (TensorFlow 1.x frames) -----------------------------------------------

tensorflow::GraphDef GoldenGraph(const std::string& name) {
  std::ifstream in(kDir + name + ".pbtxt");
  std::stringstream text;
  text << in.rdbuf();
  return ParseGraph(text.str());
}

TEST(LoopTest, CancellingTheStepEndsARunningLoop) {
  std::unique_ptr<DirectSession> s = NewSession();
  ASSERT_TRUE(s->Create(GoldenGraph("while_v1")).ok());
  tensorflow::RunOptions opts;
  opts.set_timeout_in_ms(200);
  std::vector<Tensor> out;
  const absl::Time start = absl::Now();
  // 2^31 iterations would take hours: the deadline must end the loop.
  absl::Status st = s->Run(opts, {{"n", Tensor::Scalar<int32_t>(INT32_MAX)}}, {"total:0"}, {},
                           &out, nullptr);
  EXPECT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded) << st;
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  // The session is fine afterwards.
  ASSERT_TRUE(s->Run({{"n", Tensor::Scalar<int32_t>(3)}}, {"total:0"}, {}, &out).ok());
  ExpectEqual(Tensor::Vec<float>({3, 6, 9}), out[0], "0 + 1 + 2 times x");
}

// Four threads run the nested-loop graph `s` holds with different bounds;
// returns how many steps failed or got a total other than
// sum over i < n, j < i of i * j.
int WrongNestedTotals(DirectSession* s) {
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < 20; ++k) {
        const int n = (t + k) % 7;
        std::vector<Tensor> out;
        absl::Status st = s->Run({{"n", Tensor::Scalar<int32_t>(n)}}, {"total:0"}, {}, &out);
        int want = 0;
        for (int i = 0; i < n; ++i) {
          for (int j = 0; j < i; ++j) want += i * j;
        }
        if (!st.ok() || out[0].scalar<int32_t>() != want) ++wrong;
      }
    });
  }
  for (std::thread& th : threads) th.join();
  return wrong.load();
}

TEST(LoopTest, ConcurrentStepsRunTheirOwnIterations) {
  std::unique_ptr<DirectSession> s = NewSession();
  ASSERT_TRUE(s->Create(GoldenGraph("while_v1_nested")).ok());
  EXPECT_EQ(WrongNestedTotals(s.get()), 0);
}

// A loop whose body runs partly on CPU:1: values cross both ways, so each
// device gets a control loop of the same frame, and every _Recv inside the
// frame waits on its Merge: values cross once per iteration, under keys
// naming frame and iteration.
TEST(LoopTest, LoopAcrossDevicesRunsAControlLoopOnEachDevice) {
  std::unique_ptr<DirectSession> s = NewSession(2);
  ASSERT_TRUE(s->Create(GoldenGraph("while_v1_devices")).ok());
  tensorflow::RunOptions opts;
  opts.set_output_partition_graphs(true);
  std::vector<Tensor> out;
  tensorflow::RunMetadata meta;
  ASSERT_TRUE(s->Run(opts, {{"n", Tensor::Scalar<int32_t>(7)}}, {"total:0"}, {}, &out, &meta).ok());
  ASSERT_EQ(meta.partition_graphs_size(), 2);
  std::set<std::string> control_enters;  // Their devices.
  int recvs_in_frame = 0;
  for (const tensorflow::GraphDef& part : meta.partition_graphs()) {
    for (const tensorflow::NodeDef& n : part.node()) {
      if (n.op() == "Enter" && absl::StartsWith(n.name(), "_cloop/")) {
        EXPECT_TRUE(control_enters.insert(n.device()).second) << n.device();
        EXPECT_EQ(n.attr().at("frame_name").s(), "span/while_context");
      }
      if (n.op() != "_Recv") continue;
      for (const std::string& in : n.input()) {
        if (absl::StartsWith(in, "^_cloop/")) ++recvs_in_frame;
      }
    }
  }
  EXPECT_EQ(control_enters.size(), 2u);
  EXPECT_GT(recvs_in_frame, 0);
}

TEST(LoopTest, CancellingALoopAcrossDevicesEndsIt) {
  std::unique_ptr<DirectSession> s = NewSession(2);
  ASSERT_TRUE(s->Create(GoldenGraph("while_v1_devices")).ok());
  tensorflow::RunOptions opts;
  opts.set_timeout_in_ms(200);
  std::vector<Tensor> out;
  const absl::Time start = absl::Now();
  absl::Status st =
      s->Run(opts, {{"n", Tensor::Scalar<int32_t>(INT32_MAX)}}, {"total:0"}, {}, &out, nullptr);
  EXPECT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded) << st;
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  ASSERT_TRUE(s->Run({{"n", Tensor::Scalar<int32_t>(0)}}, {"total:0"}, {}, &out).ok());
  ExpectEqual(Tensor::Vec<float>({0, 0, 0}), out[0], "no iteration");
}

TEST(LoopTest, ConcurrentStepsOfALoopAcrossDevices) {
  std::unique_ptr<DirectSession> s = NewSession(2);
  ASSERT_TRUE(s->Create(GoldenGraph("while_v1_nested_devices")).ok());
  EXPECT_EQ(WrongNestedTotals(s.get()), 0);
}

TEST(LoopTest, MalformedFramesAreRefusedNamingTheNode) {
  auto create = [](const std::string& text) {
    std::unique_ptr<DirectSession> s = NewSession();
    absl::Status st = s->Create(ParseGraph(text));
    std::vector<Tensor> out;
    if (st.ok()) st = s->Run({}, {"out:0"}, {}, &out);
    return st;
  };
  constexpr char kConst[] = R"pb(
    node { name: "c" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
           attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape {} int_val: 1 } } } }
  )pb";
  absl::Status st = create(absl::StrCat(kConst, R"pb(
    node { name: "out" op: "Exit" input: "c" attr { key: "T" value { type: DT_INT32 } } })pb"));
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "'out'")) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "outside any loop")) << st;

  // One input from inside a loop, one from outside.
  st = create(absl::StrCat(kConst, R"pb(
    node { name: "e" op: "Enter" input: "c" attr { key: "T" value { type: DT_INT32 } }
           attr { key: "frame_name" value { s: "loop" } } }
    node { name: "out" op: "AddV2" input: "e" input: "c"
           attr { key: "T" value { type: DT_INT32 } } })pb"));
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "two loop frames")) << st;

  // A cycle that does not go through NextIteration.
  st = create(absl::StrCat(kConst, R"pb(
    node { name: "m" op: "Merge" input: "c" input: "out"
           attr { key: "T" value { type: DT_INT32 } } attr { key: "N" value { i: 2 } } }
    node { name: "out" op: "Identity" input: "m" attr { key: "T" value { type: DT_INT32 } } })pb"));
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "cycle")) << st;
}

// --- lowering -------------------------------------------------------------------

// out = If(pred, x) with then: x * 3 (a Const inside, no inputs), else: x.
constexpr char kIf[] = R"pb(
  node {
    name: "x"
    op: "Placeholder"
    attr {
      key: "dtype"
      value { type: DT_FLOAT }
    }
  }
  node {
    name: "pred"
    op: "Placeholder"
    attr {
      key: "dtype"
      value { type: DT_BOOL }
    }
  }
  node {
    name: "cond"
    op: "StatelessIf"
    input: "pred"
    input: "x"
    attr {
      key: "Tcond"
      value { type: DT_BOOL }
    }
    attr {
      key: "Tin"
      value { list { type: DT_FLOAT } }
    }
    attr {
      key: "Tout"
      value { list { type: DT_FLOAT } }
    }
    attr {
      key: "then_branch"
      value { func { name: "times3" } }
    }
    attr {
      key: "else_branch"
      value { func { name: "same" } }
    }
  }
  node {
    name: "out"
    op: "Identity"
    input: "cond"
    attr {
      key: "T"
      value { type: DT_FLOAT }
    }
  }
  library {
    function {
      signature {
        name: "times3"
        input_arg { name: "a" type: DT_FLOAT }
        output_arg { name: "r" type: DT_FLOAT }
      }
      node_def {
        name: "three"
        op: "Const"
        attr {
          key: "dtype"
          value { type: DT_FLOAT }
        }
        attr {
          key: "value"
          value { tensor { dtype: DT_FLOAT float_val: 3 } }
        }
      }
      node_def {
        name: "mul"
        op: "Mul"
        input: "a"
        input: "three:output:0"
        attr {
          key: "T"
          value { type: DT_FLOAT }
        }
      }
      ret { key: "r" value: "mul:z:0" }
    }
    function {
      signature {
        name: "same"
        input_arg { name: "a" type: DT_FLOAT }
        output_arg { name: "r" type: DT_FLOAT }
      }
      ret { key: "r" value: "a" }
    }
  }
)pb";

absl::StatusOr<std::vector<Tensor>> RunIf(const tensorflow::GraphDef& g, bool pred,
                                          const std::string& fetch = "out:0") {
  std::unique_ptr<DirectSession> s = NewSession();
  RETURN_IF_ERROR(s->Create(g));
  std::vector<Tensor> out;
  RETURN_IF_ERROR(s->Run({{"x", Tensor::Vec<float>({1, 2})}, {"pred", Tensor::Scalar(pred)}},
                         {fetch}, {}, &out));
  return out;
}

TEST(LowerFunctionalOpsTest, IfRunsTheSelectedBranch) {
  const tensorflow::GraphDef g = ParseGraph(kIf);
  absl::StatusOr<std::vector<Tensor>> t = RunIf(g, true);
  ASSERT_TRUE(t.ok()) << t.status();
  ExpectEqual(Tensor::Vec<float>({3, 6}), (*t)[0], "true");
  absl::StatusOr<std::vector<Tensor>> f = RunIf(g, false);
  ASSERT_TRUE(f.ok()) << f.status();
  ExpectEqual(Tensor::Vec<float>({1, 2}), (*f)[0], "false");
  // The If's own name still answers fetches.
  absl::StatusOr<std::vector<Tensor>> by_name = RunIf(g, true, "cond:0");
  ASSERT_TRUE(by_name.ok()) << by_name.status();
  ExpectEqual(Tensor::Vec<float>({3, 6}), (*by_name)[0], "cond:0");
}

// The then-branch's body runs on another device: on the false side its dead
// input crosses to CPU:1 and its dead result crosses back to the Merge.
TEST(LowerFunctionalOpsTest, DeadBranchCrossesDevices) {
  tensorflow::GraphDef g = ParseGraph(kIf);
  for (tensorflow::NodeDef& n : *g.mutable_node()) n.set_device("/device:CPU:0");
  g.mutable_library()->mutable_function(0)->mutable_node_def(1)->set_device("/device:CPU:1");
  SessionOptions opts;
  (*opts.config.mutable_device_count())["CPU"] = 2;
  absl::StatusOr<std::unique_ptr<DirectSession>> s = DirectSession::New(opts);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE((*s)->Create(g).ok());
  tensorflow::RunOptions run_opts;
  run_opts.set_output_partition_graphs(true);
  for (bool pred : {false, true, false}) {
    std::vector<Tensor> out;
    tensorflow::RunMetadata meta;
    absl::Status st =
        (*s)->Run(run_opts, {{"x", Tensor::Vec<float>({1, 2})}, {"pred", Tensor::Scalar(pred)}},
                  {"out:0"}, {}, &out, &meta);
    ASSERT_TRUE(st.ok()) << st;
    ExpectEqual(pred ? Tensor::Vec<float>({3, 6}) : Tensor::Vec<float>({1, 2}), out[0], "out");
    EXPECT_EQ(meta.partition_graphs_size(), 2);
  }
}

// Merge bookkeeping is per step: steps taking different branches at once
// never see each other's live inputs.
TEST(LowerFunctionalOpsTest, ConcurrentStepsTakeTheirOwnBranches) {
  std::unique_ptr<DirectSession> s = NewSession();
  ASSERT_TRUE(s->Create(ParseGraph(kIf)).ok());
  std::atomic<int> wrong{0}, failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        const bool pred = (i + t) % 2 == 0;
        const float x = static_cast<float>(t * 1000 + i);
        std::vector<Tensor> out;
        if (!s->Run({{"x", Tensor::Vec<float>({x})}, {"pred", Tensor::Scalar(pred)}}, {"out:0"},
                    {}, &out)
                 .ok()) {
          ++failed;
          continue;
        }
        if (out[0].flat<float>()[0] != (pred ? 3 * x : x)) ++wrong;
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(wrong.load(), 0);
}

TEST(LowerFunctionalOpsTest, LoweredGraphHasSwitchesMergesAndNoIf) {
  absl::StatusOr<std::unique_ptr<Graph>> g = GraphFromGraphDef(ParseGraph(kIf));
  ASSERT_TRUE(g.ok()) << g.status();
  int switches = 0, merges = 0;
  for (Node* n : (*g)->nodes()) {
    EXPECT_NE(n->type_string(), "StatelessIf");
    switches += n->type_string() == "Switch";
    merges += n->type_string() == "Merge";
  }
  EXPECT_EQ(switches, 2);  // the predicate and x
  EXPECT_EQ(merges, 2);    // the output and branch_executed
  ASSERT_NE((*g)->FindNode("cond/then/mul"), nullptr);
  EXPECT_EQ((*g)->FindNode("cond")->type_string(), "IdentityN");
}

// A loop variable the body returns unchanged (the resource handle the body
// increments, the bound it compares with) enters as a loop invariant, as TensorFlow lowers it: a
// constant Enter, no Merge, Switch or Exit of its own, and the While's
// output is its input.
TEST(LowerFunctionalOpsTest, WhileLoopInvariantsEnterAsConstants) {
  absl::StatusOr<std::unique_ptr<Graph>> g = GraphFromGraphDef(GoldenGraph("while_v2_resource"));
  ASSERT_TRUE(g.ok()) << g.status();
  int constant_enters = 0, constant_resources = 0, enters = 0, merges = 0, exits = 0;
  for (Node* n : (*g)->nodes()) {
    if (n->IsEnter()) {
      ++enters;
      bool is_constant = false;
      ASSERT_TRUE(GetNodeAttr(n->def(), "is_constant", &is_constant).ok());
      constant_enters += is_constant;
      constant_resources += is_constant && n->input_type(0) == DT_RESOURCE;
    }
    merges += n->type_string() == "Merge";
    exits += n->IsExit();
  }
  EXPECT_EQ(constant_resources, 1);
  EXPECT_EQ(merges, enters - constant_enters);
  EXPECT_EQ(exits, merges);
}

// Edits the first function's body or the call, then expects `code` with
// every `words` in the message.
void ExpectLoweringError(const std::function<void(tensorflow::GraphDef*)>& edit,
                         absl::StatusCode code, std::vector<std::string> words) {
  tensorflow::GraphDef g = ParseGraph(kIf);
  edit(&g);
  absl::StatusOr<std::unique_ptr<Graph>> lowered = GraphFromGraphDef(g);
  ASSERT_FALSE(lowered.ok());
  EXPECT_EQ(lowered.status().code(), code) << lowered.status();
  for (const std::string& w : words) {
    EXPECT_TRUE(absl::StrContains(lowered.status().message(), w)) << lowered.status();
  }
}

tensorflow::NodeDef* CondNode(tensorflow::GraphDef* g) { return g->mutable_node(2); }

TEST(LowerFunctionalOpsTest, BadCallsAreNamed) {
  ExpectLoweringError(
      [](tensorflow::GraphDef* g) {
        (*CondNode(g)->mutable_attr())["then_branch"].mutable_func()->set_name("nowhere");
      },
      absl::StatusCode::kNotFound, {"[StatelessIf 'cond']", "'nowhere'", "library"});
  ExpectLoweringError(
      [](tensorflow::GraphDef* g) {
        g->mutable_library()->mutable_function(0)->mutable_signature()->add_input_arg()->set_name(
            "extra");
      },
      absl::StatusCode::kInvalidArgument, {"'cond'", "'times3' takes 2", "passes 1"});
  ExpectLoweringError(
      [](tensorflow::GraphDef* g) {
        g->mutable_library()->mutable_function(0)->mutable_node_def(1)->set_input(1, "ghost:y:0");
      },
      absl::StatusCode::kInvalidArgument, {"'cond'", "'ghost:y:0'"});
  ExpectLoweringError(
      [](tensorflow::GraphDef* g) {
        (*g->mutable_library()->mutable_function(0)->mutable_ret())["r"] = "three:output:0";
        SetAttr(g->mutable_library()->mutable_function(0)->mutable_node_def(0), "dtype", DT_INT32);
        tensorflow::TensorProto* v = (*g->mutable_library()
                                           ->mutable_function(0)
                                           ->mutable_node_def(0)
                                           ->mutable_attr())["value"]
                                         .mutable_tensor();
        v->set_dtype(DT_INT32);
        v->clear_float_val();
        v->add_int_val(3);
      },
      absl::StatusCode::kInvalidArgument, {"'cond'", "int32", "float"});
  ExpectLoweringError(
      [](tensorflow::GraphDef* g) {
        // Both branches take (a, p); then_branch returns the same If again.
        tensorflow::NodeDef* cond = CondNode(g);
        cond->add_input("pred");
        (*cond->mutable_attr())["Tin"].mutable_list()->add_type(DT_BOOL);
        for (int i = 0; i < 2; ++i) {
          tensorflow::OpDef::ArgDef* p =
              g->mutable_library()->mutable_function(i)->mutable_signature()->add_input_arg();
          p->set_name("p");
          p->set_type(DT_BOOL);
        }
        tensorflow::FunctionDef* f = g->mutable_library()->mutable_function(0);
        tensorflow::NodeDef* again = f->add_node_def();
        *again = *cond;
        again->set_name("again");
        again->clear_input();
        for (const char* in : {"p", "a", "p"}) again->add_input(in);
        (*f->mutable_ret())["r"] = "again:output:0";
      },
      absl::StatusCode::kInvalidArgument, {"deeper than 32"});
}

TEST(LowerFunctionalOpsTest, ConditionMustBeBool) {
  tensorflow::GraphDef g = ParseGraph(kIf);
  for (tensorflow::NodeDef& n : *g.mutable_node()) {
    if (n.name() == "pred") SetAttr(&n, "dtype", DT_INT32);
    if (n.name() == "cond") SetAttr(&n, "Tcond", DT_INT32);
  }
  absl::StatusOr<std::unique_ptr<Graph>> lowered = GraphFromGraphDef(g);
  ASSERT_FALSE(lowered.ok());
  EXPECT_TRUE(absl::StrContains(lowered.status().message(), "only bool")) << lowered.status();
}

TEST(LowerFunctionalOpsTest, ExtendMergesLibrariesAndRejectsConflicts) {
  tensorflow::GraphDef base = ParseGraph(kIf);
  tensorflow::GraphDef ext;
  *ext.mutable_library()->add_function() = base.library().function(0);  // same: fine
  tensorflow::FunctionDef* extra = ext.mutable_library()->add_function();
  extra->mutable_signature()->set_name("extra");
  tensorflow::GraphDef merged = base;
  absl::Status extended = ExtendGraphDef(&merged, ext);
  ASSERT_TRUE(extended.ok()) << extended;
  EXPECT_EQ(merged.library().function_size(), 3);
  tensorflow::GraphDef conflict;
  *conflict.mutable_library()->add_function() = base.library().function(0);
  conflict.mutable_library()->mutable_function(0)->mutable_ret()->at("r") = "a";
  absl::Status st = ExtendGraphDef(&merged, conflict);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(st.message(), "'times3'")) << st;
  EXPECT_EQ(merged.library().function_size(), 3);
}

}  // namespace
}  // namespace dflow
