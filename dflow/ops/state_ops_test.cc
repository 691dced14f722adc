// Reference-variable ops (VariableV2, Assign, AssignAdd, AssignSub,
// IsVariableInitialized), kernel by kernel on a fresh CPU device per test.
// Error texts follow TensorFlow 1.x's (checked with tf.compat.v1).
#include "dflow/ops/state_ops.h"

#include <string>
#include <thread>
#include <vector>

#include "dflow/framework/attr_util.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/ops/kernel_test_util.h"
#include "dflow/ops/op_test_util.h"
#include "dflow/ops/state_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

using tensorflow::NodeDef;
using ::testing::HasSubstr;

// Written by TensorFlow 2.x's op_def_registry (tf.compat.v1 ops).
TEST(StateOpsDefTest, OpDefsMatchTensorFlow) {
  const std::vector<std::pair<std::string, std::string>> tf = {
      {"VariableV2",
       "() -> (ref:dtype&) [container:string='', dtype:type, shape:shape, "
       "shared_name:string=''] stateful"},
      {"Assign",
       "(ref:T&, value:T) -> (output_ref:T&) [T:type, use_locking:bool=true, "
       "validate_shape:bool=true]"},
      {"AssignAdd", "(ref:T&, value:T) -> (output_ref:T&) [T:type, use_locking:bool=false]"},
      {"AssignSub", "(ref:T&, value:T) -> (output_ref:T&) [T:type, use_locking:bool=false]"},
      {"IsVariableInitialized", "(ref:dtype&) -> (is_initialized:bool) [dtype:type]"},
  };
  for (const auto& [name, signature] : tf) {
    absl::StatusOr<const OpDef*> op = OpRegistry::Global()->LookUp(name);
    ASSERT_TRUE(op.ok()) << op.status();
    EXPECT_EQ(OpSignature(**op), signature) << name;
  }
}

class StateOpsTest : public ::testing::Test {
 protected:
  // A VariableV2 kernel for node `node` (shared_name and container optional).
  std::unique_ptr<OpKernel> Variable(const std::string& node, DataType dtype = DT_FLOAT,
                                     const std::string& shared_name = "",
                                     const std::string& container = "") {
    NodeDef n = Node("VariableV2", node, {});
    SetAttr(&n, "dtype", dtype);
    SetAttr(&n, "shape", TensorShape({2}));
    SetAttr(&n, "shared_name", shared_name);
    SetAttr(&n, "container", container);
    return Kernel(n);
  }
  // Runs a VariableV2 kernel and returns its ref output.
  TensorValue Ref(OpKernel* variable) {
    OpKernelContext::Params params;
    params.device = device_.get();
    params.op_kernel = variable;
    OpKernelContext ctx(&params);
    absl::Status s = variable->Compute(&ctx);
    EXPECT_TRUE(s.ok()) << s;
    return ctx.release_output(0);
  }
  absl::StatusOr<KernelOutputs> Assign(TensorValue ref, Tensor value, bool validate_shape = true) {
    NodeDef n = Node("Assign", "assign", {"v", "value"});
    SetAttr(&n, "T", value.dtype());
    SetAttr(&n, "validate_shape", validate_shape);
    return Run(n, {ref, TensorValue{&value}});
  }
  absl::StatusOr<KernelOutputs> Update(const std::string& op, TensorValue ref, Tensor delta) {
    NodeDef n = Node(op, "update", {"v", "delta"});
    SetAttr(&n, "T", delta.dtype());
    return Run(n, {ref, TensorValue{&delta}});
  }
  bool IsInitialized(TensorValue ref) {
    NodeDef n = Node("IsVariableInitialized", "is_init", {"v"});
    SetAttr(&n, "dtype", DT_FLOAT);
    absl::StatusOr<KernelOutputs> out = Run(n, {ref});
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() && out->values[0].scalar<bool>();
  }

  static NodeDef Node(const std::string& op, const std::string& name,
                      const std::vector<std::string>& inputs) {
    NodeDef n;
    n.set_op(op);
    n.set_name(name);
    for (const std::string& in : inputs) n.add_input(in);
    return n;
  }
  std::unique_ptr<OpKernel> Kernel(const NodeDef& n) {
    absl::StatusOr<std::unique_ptr<OpKernel>> k = MakeKernel(n, device_.get());
    EXPECT_TRUE(k.ok()) << k.status();
    return k.ok() ? *std::move(k) : nullptr;
  }
  absl::StatusOr<KernelOutputs> Run(const NodeDef& n, std::vector<TensorValue> inputs) {
    ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> k, MakeKernel(n, device_.get()));
    return RunWithRefs(k.get(), device_.get(), std::move(inputs));
  }

  std::unique_ptr<Device> device_ = NewTestCpuDevice();
};

TEST_F(StateOpsTest, VariableStartsUninitializedAndAssignInitializesIt) {
  std::unique_ptr<OpKernel> v = Variable("v");
  TensorValue ref = Ref(v.get());
  ASSERT_TRUE(ref.is_ref());
  EXPECT_FALSE(IsInitialized(ref));

  absl::StatusOr<KernelOutputs> out = Assign(ref, Tensor::Vec<float>({1, 2}));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->refs[0], ref.tensor) << "Assign forwards the variable's ref";
  EXPECT_TRUE(IsInitialized(ref));
  // A later run of the same VariableV2 sees the value.
  ExpectTensorEq<float>(*Ref(v.get()).tensor, {1, 2}, TensorShape({2}));
}

TEST_F(StateOpsTest, VariablesShareStorageByContainerAndSharedName) {
  std::unique_ptr<OpKernel> a = Variable("a", DT_FLOAT, "shared");
  std::unique_ptr<OpKernel> b = Variable("b", DT_FLOAT, "shared");
  std::unique_ptr<OpKernel> other_container = Variable("c", DT_FLOAT, "shared", "elsewhere");
  std::unique_ptr<OpKernel> by_node_name = Variable("d");
  ASSERT_TRUE(Assign(Ref(a.get()), Tensor::Vec<float>({3, 4})).ok());

  ExpectTensorEq<float>(*Ref(b.get()).tensor, {3, 4}, TensorShape({2}));
  EXPECT_FALSE(IsInitialized(Ref(other_container.get())));
  EXPECT_FALSE(IsInitialized(Ref(by_node_name.get())));
}

TEST_F(StateOpsTest, SharingAVariableWithAnotherDtypeFails) {
  std::unique_ptr<OpKernel> f = Variable("v", DT_FLOAT, "x");
  std::unique_ptr<OpKernel> i = Variable("w", DT_INT32, "x");
  Ref(f.get());
  OpKernelContext::Params params;
  params.device = device_.get();
  params.op_kernel = i.get();
  OpKernelContext ctx(&params);
  absl::Status s = i->Compute(&ctx);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("of dtype float as int32"));
}

TEST_F(StateOpsTest, AssignChecksShapesUnlessToldNotTo) {
  TestRef v(Tensor::Vec<float>({1, 2}));
  absl::StatusOr<KernelOutputs> bad = Assign(v.value(), Tensor::Vec<float>({1, 2, 3}));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(),
              HasSubstr("[Assign 'assign'] Assign requires shapes of both tensors to match. "
                        "lhs shape= [2] rhs shape= [3]"));
  ExpectTensorEq<float>(v.tensor, {1, 2}, TensorShape({2}));

  ASSERT_TRUE(Assign(v.value(), Tensor::Vec<float>({1, 2, 3}), /*validate_shape=*/false).ok());
  ExpectTensorEq<float>(v.tensor, {1, 2, 3}, TensorShape({3}));
}

TEST_F(StateOpsTest, AssignCopiesTheValue) {
  TestRef v;
  Tensor value = Tensor::Vec<float>({5, 6});
  ASSERT_TRUE(Assign(v.value(), value).ok());
  EXPECT_FALSE(v.tensor.SharesBufferWith(value));
  value.flat<float>()[0] = 100;
  ExpectTensorEq<float>(v.tensor, {5, 6}, TensorShape({2}));
}

TEST_F(StateOpsTest, AssignDoesNotChangeEarlierReads) {
  TestRef v(Tensor::Vec<float>({1, 2}));
  Tensor snapshot = v.tensor;  // What the executor hands a non-ref consumer.
  ASSERT_TRUE(Assign(v.value(), Tensor::Vec<float>({7, 8})).ok());
  ExpectTensorEq<float>(snapshot, {1, 2}, TensorShape({2}));
  ExpectTensorEq<float>(v.tensor, {7, 8}, TensorShape({2}));
}

TEST_F(StateOpsTest, AssignAddAndSubUpdateInPlace) {
  TestRef f(Tensor::Vec<float>({1.5f, -2}));
  ASSERT_TRUE(Update("AssignAdd", f.value(), Tensor::Vec<float>({0.25f, 1})).ok());
  ExpectTensorEq<float>(f.tensor, {1.75f, -1}, TensorShape({2}));
  TestRef i(Tensor::Vec<int64_t>({10, 20}));
  absl::StatusOr<KernelOutputs> out = Update("AssignSub", i.value(), Tensor::Vec<int64_t>({3, 30}));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->refs[0], &i.tensor);
  ExpectTensorEq<int64_t>(i.tensor, {7, -10}, TensorShape({2}));
}

// As in TensorFlow, a reference variable is updated in place: a read of it
// ("v/read", an Identity of the ref) aliases the buffer and sees the update
// (TF 2.21: fetching v/read and assign_add(v, 1) in one step gives the new
// value for both; SyncReplicasOptimizer's tokens rely on it).
TEST_F(StateOpsTest, AssignAddUpdatesInPlaceAsTensorFlowDoes) {
  TestRef v(Tensor::Vec<float>({1, 2}));
  Tensor read = v.tensor;
  ASSERT_TRUE(Update("AssignAdd", v.value(), Tensor::Vec<float>({1, 1})).ok());
  ExpectTensorEq<float>(read, {2, 3}, TensorShape({2}));
  ExpectTensorEq<float>(v.tensor, {2, 3}, TensorShape({2}));
}

TEST_F(StateOpsTest, AssignAddOfUninitializedVariableFails) {
  TestRef v;
  absl::StatusOr<KernelOutputs> out = Update("AssignAdd", v.value(), Tensor::Vec<float>({1, 1}));
  EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(out.status().message(), "[AssignAdd 'update'] Attempting to use uninitialized value v");
}

TEST_F(StateOpsTest, AssignAddShapeMismatchFails) {
  TestRef v(Tensor::Vec<float>({1, 2}));
  absl::StatusOr<KernelOutputs> out = Update("AssignSub", v.value(), Tensor::Vec<float>({1, 1, 1}));
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(),
              HasSubstr("Parameters and update must be the same size: ref [2] vs update [3]"));
}

TEST_F(StateOpsTest, ConcurrentAssignAddsAreNotLost) {
  TestRef v(Tensor::Vec<float>({0}));
  NodeDef n = Node("AssignAdd", "add", {"v", "one"});
  SetAttr(&n, "T", DT_FLOAT);
  std::unique_ptr<OpKernel> k = Kernel(n);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      Tensor one = Tensor::Vec<float>({1});
      for (int i = 0; i < 500; ++i) {
        ASSERT_TRUE(RunWithRefs(k.get(), device_.get(), {v.value(), TensorValue{&one}}).ok());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  ExpectTensorEq<float>(v.tensor, {2000}, TensorShape({1}));
}

TEST_F(StateOpsTest, ShapeFunctions) {
  const OpDef* variable = *OpRegistry::Global()->LookUp("VariableV2");
  NodeDef n = Node("VariableV2", "v", {});
  SetAttr(&n, "dtype", DT_FLOAT);
  SetAttr(&n, "shape", TensorShape({3, 4}));
  AddDefaultAttrs(*variable, &n);
  absl::StatusOr<std::vector<PartialShape>> shapes = InferShapes(n, *variable, {}, {}, {}, 1);
  ASSERT_TRUE(shapes.ok()) << shapes.status();
  EXPECT_EQ((*shapes)[0], PartialShape({3, 4}));

  const OpDef* assign = *OpRegistry::Global()->LookUp("Assign");
  NodeDef a = Node("Assign", "a", {"v", "x"});
  SetAttr(&a, "T", DT_FLOAT);
  AddDefaultAttrs(*assign, &a);
  DataTypeVector types = {MakeRefType(DT_FLOAT), DT_FLOAT};
  EXPECT_FALSE(
      InferShapes(a, *assign, {PartialShape({3}), PartialShape({4})}, {nullptr, nullptr}, types, 1)
          .ok());
  SetAttr(&a, "validate_shape", false);
  shapes =
      InferShapes(a, *assign, {PartialShape({3}), PartialShape({4})}, {nullptr, nullptr}, types, 1);
  ASSERT_TRUE(shapes.ok()) << shapes.status();
  EXPECT_EQ((*shapes)[0], PartialShape({4}));
}

}  // namespace
}  // namespace dflow
