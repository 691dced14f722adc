// Resource variable ops, run kernel by kernel on a fresh CPU device per test.
#include "dflow/ops/variable_ops.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "dflow/framework/attr_util.h"
#include "dflow/ops/kernel_test_util.h"
#include "dflow/ops/op_test_util.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

using tensorflow::NodeDef;

class VariableOpsTest : public ::testing::Test {
 protected:
  // The handle of VarHandleOp node `node_name` (dtype float unless given).
  Tensor Handle(const std::string& shared_name, const std::string& container = "",
                DataType dtype = DT_FLOAT, const std::string& node_name = "h") {
    NodeDef n = Node("VarHandleOp", node_name);
    SetAttr(&n, "shared_name", shared_name);
    SetAttr(&n, "container", container);
    SetAttr(&n, "dtype", dtype);
    SetAttr(&n, "shape", TensorShape({}));
    absl::StatusOr<std::vector<Tensor>> out = Run(n, {});
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? (*out)[0] : Tensor();
  }

  absl::Status Assign(const Tensor& handle, const Tensor& value, bool validate_shape = false) {
    NodeDef n = Node("AssignVariableOp", "assign", 2);
    SetAttr(&n, "dtype", value.dtype());
    SetAttr(&n, "validate_shape", validate_shape);
    return Run(n, {handle, value}).status();
  }
  absl::Status Update(const std::string& op, const Tensor& handle, const Tensor& delta) {
    NodeDef n = Node(op, "update", 2);
    SetAttr(&n, "dtype", delta.dtype());
    return Run(n, {handle, delta}).status();
  }
  absl::StatusOr<Tensor> Read(const Tensor& handle, DataType dtype = DT_FLOAT) {
    NodeDef n = Node("ReadVariableOp", "x", 1);
    SetAttr(&n, "dtype", dtype);
    ASSIGN_OR_RETURN(std::vector<Tensor> out, Run(n, {handle}));
    return out[0];
  }
  bool IsInitialized(const Tensor& handle) {
    absl::StatusOr<std::vector<Tensor>> out = Run(Node("VarIsInitializedOp", "init", 1), {handle});
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() && (*out)[0].scalar<bool>();
  }
  absl::Status Destroy(const Tensor& handle, bool ignore_lookup_error) {
    NodeDef n = Node("DestroyResourceOp", "destroy", 1);
    SetAttr(&n, "ignore_lookup_error", ignore_lookup_error);
    return Run(n, {handle}).status();
  }

  static NodeDef Node(const std::string& op, const std::string& name, int num_inputs = 0) {
    NodeDef n;
    n.set_op(op);
    n.set_name(name);
    for (int i = 0; i < num_inputs; ++i) n.add_input("in" + std::to_string(i));
    return n;
  }
  absl::StatusOr<std::vector<Tensor>> Run(const NodeDef& n, std::vector<Tensor> inputs) {
    ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> k, MakeKernel(n, device_.get()));
    return RunKernel(k.get(), device_.get(), std::move(inputs));
  }

  std::unique_ptr<Device> device_ = NewTestCpuDevice();
};

TEST_F(VariableOpsTest, HandleNamesDeviceContainerAndName) {
  Tensor h = Handle("v");
  ASSERT_EQ(h.dtype(), DT_RESOURCE);
  ASSERT_EQ(h.dims(), 0);
  const ResourceHandle& r = h.scalar<ResourceHandle>();
  EXPECT_EQ(r.device, "/job:localhost/replica:0/task:0/device:CPU:0");
  EXPECT_EQ(r.container, "localhost");
  EXPECT_EQ(r.name, "v");
  EXPECT_EQ(r.maybe_type_name, "Var");
  // Without shared_name the node's name names the variable.
  EXPECT_EQ(Handle("", "c", DT_FLOAT, "my_var").scalar<ResourceHandle>().name, "my_var");
  EXPECT_EQ(Handle("", "c").scalar<ResourceHandle>().container, "c");
}

TEST_F(VariableOpsTest, AssignThenRead) {
  Tensor h = Handle("v");
  EXPECT_FALSE(IsInitialized(h));
  ASSERT_TRUE(Assign(h, Tensor::Vec<float>({1, 2, 3})).ok());
  EXPECT_TRUE(IsInitialized(h));
  absl::StatusOr<Tensor> v = Read(h);
  ASSERT_TRUE(v.ok()) << v.status();
  ExpectTensorEq<float>(*v, {1, 2, 3}, TensorShape({3}));
  // Without validate_shape a new value may have another shape.
  ASSERT_TRUE(Assign(h, Tensor::Scalar<float>(7)).ok());
  ExpectTensorEq<float>(*Read(h), {7}, TensorShape({}));
}

TEST_F(VariableOpsTest, ValidateShapeRejectsOtherShapes) {
  Tensor h = Handle("v");
  ASSERT_TRUE(Assign(h, Tensor::Vec<float>({1, 2}), /*validate_shape=*/true).ok());
  absl::Status s = Assign(h, Tensor::Vec<float>({1, 2, 3}), /*validate_shape=*/true);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("[3]"), std::string::npos) << s;
  EXPECT_NE(s.message().find("[2]"), std::string::npos) << s;
  ExpectTensorEq<float>(*Read(h), {1, 2}, TensorShape({2}));
}

TEST_F(VariableOpsTest, AssignAddAndSub) {
  Tensor h = Handle("v");
  ASSERT_TRUE(Assign(h, Tensor::Vec<int64_t>({10, 20})).ok());
  ASSERT_TRUE(Update("AssignAddVariableOp", h, Tensor::Vec<int64_t>({1, 2})).ok());
  ASSERT_TRUE(Update("AssignSubVariableOp", h, Tensor::Vec<int64_t>({5, 5})).ok());
  ExpectTensorEq<int64_t>(*Read(h, DT_INT64), {6, 17}, TensorShape({2}));

  absl::Status s = Update("AssignAddVariableOp", h, Tensor::Vec<int64_t>({1, 2, 3}));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("[AssignAddVariableOp 'update']"), std::string::npos) << s;
  EXPECT_NE(s.message().find("[2]"), std::string::npos) << s;
}

TEST_F(VariableOpsTest, DtypeMismatchNamesBothTypes) {
  Tensor h = Handle("v");
  ASSERT_TRUE(Assign(h, Tensor::Vec<float>({1})).ok());
  absl::Status s = Assign(h, Tensor::Vec<int32_t>({1}));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("[AssignVariableOp 'assign']"), std::string::npos) << s;
  EXPECT_NE(s.message().find("float"), std::string::npos) << s;
  EXPECT_NE(s.message().find("int32"), std::string::npos) << s;

  s = Read(h, DT_INT32).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("float"), std::string::npos) << s;
  EXPECT_NE(s.message().find("int32"), std::string::npos) << s;

  s = Update("AssignAddVariableOp", h, Tensor::Vec<double>({1}));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("double"), std::string::npos) << s;
  ExpectTensorEq<float>(*Read(h), {1}, TensorShape({1}));
}

TEST_F(VariableOpsTest, UninitializedReadFailsWithFailedPrecondition) {
  Tensor h = Handle("v");
  absl::Status s = Read(h).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "[ReadVariableOp 'x'] Variable v (container localhost) is uninitialized");
  s = Update("AssignAddVariableOp", h, Tensor::Scalar<float>(1));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;

  // A Var that exists but was never assigned is uninitialized too.
  ASSERT_TRUE(device_->resource_manager()
                  ->Create<Var>("localhost", "w", std::make_shared<Var>(DT_FLOAT))
                  .ok());
  Tensor w = Handle("w");
  EXPECT_FALSE(IsInitialized(w));
  EXPECT_EQ(Read(w).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(VariableOpsTest, VariableShapeIsTheValuesShape) {
  Tensor h = Handle("shaped");
  NodeDef n = Node("VariableShape", "shape", 1);
  absl::StatusOr<std::vector<Tensor>> out = Run(n, {h});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition) << out.status();
  ASSERT_TRUE(Assign(h, Tensor(DT_FLOAT, TensorShape({3, 2}))).ok());
  out = Run(n, {h});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<int32_t>((*out)[0], {3, 2}, TensorShape({2}));
  SetAttr(&n, "out_type", DT_INT64);
  out = Run(n, {h});
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorEq<int64_t>((*out)[0], {3, 2}, TensorShape({2}));
}

TEST_F(VariableOpsTest, DestroyRemovesTheVariable) {
  Tensor h = Handle("v");
  ASSERT_TRUE(Assign(h, Tensor::Scalar<float>(1)).ok());
  ASSERT_TRUE(Destroy(h, /*ignore_lookup_error=*/false).ok());
  EXPECT_FALSE(IsInitialized(h));
  EXPECT_EQ(Read(h).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Destroy(h, /*ignore_lookup_error=*/true).ok());
  absl::Status s = Destroy(h, /*ignore_lookup_error=*/false);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_NE(s.message().find("[DestroyResourceOp 'destroy']"), std::string::npos) << s;
  // A new assignment creates a fresh variable, even of another dtype.
  ASSERT_TRUE(Assign(h, Tensor::Scalar<int32_t>(4)).ok());
  ExpectTensorEq<int32_t>(*Read(h, DT_INT32), {4}, TensorShape({}));
}

TEST_F(VariableOpsTest, SameSharedNameIsSameVariable) {
  Tensor a = Handle("shared", "", DT_FLOAT, "a");
  Tensor b = Handle("shared", "", DT_FLOAT, "b");
  ASSERT_TRUE(Assign(a, Tensor::Scalar<float>(3)).ok());
  ASSERT_TRUE(Update("AssignAddVariableOp", b, Tensor::Scalar<float>(2)).ok());
  ExpectTensorEq<float>(*Read(a), {5}, TensorShape({}));
}

TEST_F(VariableOpsTest, DifferentContainersAreSeparate) {
  Tensor a = Handle("v", "a");
  Tensor b = Handle("v", "b");
  ASSERT_TRUE(Assign(a, Tensor::Scalar<float>(1)).ok());
  EXPECT_FALSE(IsInitialized(b));
  ASSERT_TRUE(Assign(b, Tensor::Scalar<float>(2)).ok());
  ExpectTensorEq<float>(*Read(a), {1}, TensorShape({}));
  ExpectTensorEq<float>(*Read(b), {2}, TensorShape({}));
  absl::Status s = Read(Handle("v", "c")).status();
  EXPECT_NE(s.message().find("(container c)"), std::string::npos) << s;
}

TEST_F(VariableOpsTest, ReadsAreSnapshots) {
  Tensor h = Handle("v");
  Tensor init = Tensor::Vec<float>({1, 2});
  ASSERT_TRUE(Assign(h, init).ok());
  absl::StatusOr<Tensor> before = Read(h);
  ASSERT_TRUE(before.ok());
  ASSERT_TRUE(Update("AssignAddVariableOp", h, Tensor::Vec<float>({10, 10})).ok());
  ASSERT_TRUE(Update("AssignSubVariableOp", h, Tensor::Vec<float>({1, 1})).ok());
  ExpectTensorEq<float>(*before, {1, 2}, TensorShape({2}));
  ExpectTensorEq<float>(init, {1, 2}, TensorShape({2}));  // the assigned value, too
  ExpectTensorEq<float>(*Read(h), {10, 11}, TensorShape({2}));
  // A read after the snapshot was dropped still sees the latest value.
  ASSERT_TRUE(Assign(h, Tensor::Vec<float>({0, 0})).ok());
  ExpectTensorEq<float>(*before, {1, 2}, TensorShape({2}));
}

TEST_F(VariableOpsTest, MutableTensorCopiesOnlyWhenShared) {
  Var var(DT_FLOAT);
  absl::MutexLock l(var.mu());
  var.SetValue(Tensor::Vec<float>({1}));
  const void* unshared = var.MutableTensor()->raw_data();
  EXPECT_EQ(var.MutableTensor()->raw_data(), unshared);  // sole owner: in place
  Tensor snapshot = var.tensor();
  var.MutableTensor()->flat<float>()[0] = 2;
  EXPECT_NE(var.tensor().raw_data(), snapshot.raw_data());
  EXPECT_EQ(snapshot.flat<float>()[0], 1);
}

TEST_F(VariableOpsTest, AValueBorrowingAPeersMemoryIsCopied) {
  struct alignas(kTensorAlignment) Block {
    float v[2] = {3, 4};
  };
  auto owner = std::make_shared<Block>();
  Var var(DT_FLOAT);
  absl::MutexLock l(var.mu());
  var.SetValue(Tensor::Borrow(DT_FLOAT, TensorShape({2}), owner->v, owner));
  EXPECT_FALSE(var.tensor().IsBorrowed());
  EXPECT_EQ(owner.use_count(), 1);  // The variable does not hold the peer's memory.
  ExpectTensorEq<float>(var.tensor(), {3, 4}, TensorShape({2}));
}

TEST_F(VariableOpsTest, ConcurrentAssignAddGivesExactSum) {
  Tensor h = Handle("counter");
  ASSERT_TRUE(Assign(h, Tensor::Vec<float>({0, 0})).ok());
  NodeDef n = Node("AssignAddVariableOp", "add", 2);
  SetAttr(&n, "dtype", DT_FLOAT);
  absl::StatusOr<std::unique_ptr<OpKernel>> add = MakeKernel(n, device_.get());
  ASSERT_TRUE(add.ok()) << add.status();
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) {
        absl::StatusOr<std::vector<Tensor>> r =
            RunKernel(add->get(), device_.get(), {h, Tensor::Vec<float>({1, 2})});
        if (!r.ok()) ++failures;
      }
    });
  }
  // A concurrent reader only ever sees whole updates.
  for (int i = 0; i < 200; ++i) {
    absl::StatusOr<Tensor> v = Read(h);
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(v->flat<float>()[1], 2 * v->flat<float>()[0]);
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  ExpectTensorEq<float>(*Read(h), {4000, 8000}, TensorShape({2}), 0);
}

TEST_F(VariableOpsTest, VarsLockTakesEachMutexOnce) {
  auto a = std::make_shared<Var>(DT_FLOAT);
  auto b = std::make_shared<Var>(DT_FLOAT);
  {
    VarsLock lock({b.get(), a.get(), b.get()});
    a->SetValue(Tensor::Scalar<float>(1));
    b->SetValue(Tensor::Scalar<float>(2));
  }
  EXPECT_TRUE(a->Snapshot().has_value());  // unlocked again
  EXPECT_EQ(b->Snapshot()->scalar<float>(), 2);
}

TEST_F(VariableOpsTest, HandleInputMustBeAResource) {
  absl::Status s = Read(Tensor::Scalar<float>(1)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("[ReadVariableOp 'x']"), std::string::npos) << s;
}

}  // namespace
}  // namespace dflow
