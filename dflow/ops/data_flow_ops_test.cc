// Queues and accumulators, kernel by kernel on a fresh CPU device per test,
// with a CancellationManager standing in for the step. Waiting kernels are
// run with ComputeAsync, so a test sees that they return before finishing.
// Messages follow TensorFlow 1.x's (checked with tf.compat.v1).
#include "dflow/ops/data_flow_ops.h"

#include <algorithm>
#include <deque>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "dflow/framework/attr_util.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/test_data_dir.h"
#include "dflow/ops/kernel_fixture.h"
#include "dflow/ops/kernel_test_util.h"
#include "dflow/ops/op_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace dflow {
namespace {

using tensorflow::NodeDef;
using ::testing::HasSubstr;

// "(in:type, ...) -> (out:type, ...) [attr:type=default>=min{values}, ...] stateful",
// refs marked '&', defaults as one-line text protos.
std::string Signature(const OpDef& op) {
  auto arg = [](const OpArg& a) {
    std::string type = a.type != DT_INVALID ? DataTypeString(a.type) : "";
    return absl::StrCat(a.name, ":", type, a.type_attr, a.number_attr, a.type_list_attr,
                        a.is_ref ? "&" : "");
  };
  std::vector<std::string> ins, outs, attrs;
  for (const OpArg& a : op.inputs) ins.push_back(arg(a));
  for (const OpArg& a : op.outputs) outs.push_back(arg(a));
  for (const OpAttr& a : op.attrs) {
    std::string text = absl::StrCat(a.name, ":", a.type);
    if (a.default_value) absl::StrAppend(&text, "=", a.default_value->ShortDebugString());
    if (a.minimum) absl::StrAppend(&text, ">=", *a.minimum);
    if (!a.allowed_values.empty()) {
      std::vector<std::string> values = a.allowed_values;
      std::sort(values.begin(), values.end());
      absl::StrAppend(&text, "{", absl::StrJoin(values, ","), "}");
    }
    attrs.push_back(text);
  }
  std::sort(attrs.begin(), attrs.end());
  return absl::StrCat("(", absl::StrJoin(ins, ", "), ") -> (", absl::StrJoin(outs, ", "), ") [",
                      absl::StrJoin(attrs, ", "), "]", op.is_stateful ? " stateful" : "");
}

// Printed from TensorFlow 2.21's op_def_registry (defaults as one-line text
// protos; dtype attrs' allowed types are not compared: dflow's are a subset).
TEST(DataFlowOpDefTest, OpDefsMatchTensorFlow) {
  const std::vector<std::pair<std::string, std::string>> tf = {
      {"FIFOQueueV2",
       R"(() -> (handle:resource))"
       R"( [capacity:int=i: -1, component_types:list(type)>=1, container:string=s: "", )"
       R"(shapes:list(shape)=list { }>=0, shared_name:string=s: ""] stateful)"},
      {"QueueEnqueueV2", R"((handle:resource, components:Tcomponents) -> ())"
                         R"( [Tcomponents:list(type)>=1, timeout_ms:int=i: -1] stateful)"},
      {"QueueEnqueueManyV2", R"((handle:resource, components:Tcomponents) -> ())"
                             R"( [Tcomponents:list(type)>=1, timeout_ms:int=i: -1] stateful)"},
      {"QueueDequeueV2", R"((handle:resource) -> (components:component_types))"
                         R"( [component_types:list(type)>=1, timeout_ms:int=i: -1] stateful)"},
      {"QueueDequeueManyV2", R"((handle:resource, n:int32) -> (components:component_types))"
                             R"( [component_types:list(type)>=1, timeout_ms:int=i: -1] stateful)"},
      {"QueueSizeV2", R"((handle:resource) -> (size:int32))"
                      R"( [] stateful)"},
      {"QueueCloseV2", R"((handle:resource) -> ())"
                       R"( [cancel_pending_enqueues:bool=b: false] stateful)"},
      {"ConditionalAccumulator",
       R"(() -> (handle:string&))"
       R"( [container:string=s: "", dtype:type, reduction_type:string=s: "MEAN"{MEAN,SUM}, )"
       R"(shape:shape, shared_name:string=s: ""] stateful)"},
      {"AccumulatorApplyGradient", R"((handle:string&, local_step:int64, gradient:dtype) -> ())"
                                   R"( [dtype:type])"},
      {"AccumulatorTakeGradient", R"((handle:string&, num_required:int32) -> (average:dtype))"
                                  R"( [dtype:type])"},
      {"AccumulatorNumAccumulated", R"((handle:string&) -> (num_accumulated:int32))"
                                    R"( [])"},
      {"AccumulatorSetGlobalStep", R"((handle:string&, new_global_step:int64) -> ())"
                                   R"( [])"},
      {"ResourceConditionalAccumulator",
       R"(() -> (handle:resource))"
       R"( [container:string=s: "", dtype:type, reduction_type:string=s: "MEAN"{MEAN,SUM}, )"
       R"(shape:shape, shared_name:string=s: ""] stateful)"},
      {"ResourceAccumulatorApplyGradient",
       R"((handle:resource, local_step:int64, gradient:dtype) -> ())"
       R"( [dtype:type] stateful)"},
      {"ResourceAccumulatorTakeGradient",
       R"((handle:resource, num_required:int32) -> (average:dtype))"
       R"( [dtype:type] stateful)"},
      {"ResourceAccumulatorNumAccumulated", R"((handle:resource) -> (num_accumulated:int32))"
                                            R"( [] stateful)"},
      {"ResourceAccumulatorSetGlobalStep", R"((handle:resource, new_global_step:int64) -> ())"
                                           R"( [] stateful)"},
  };
  for (const auto& [name, signature] : tf) {
    absl::StatusOr<const OpDef*> op = OpRegistry::Global()->LookUp(name);
    ASSERT_TRUE(op.ok()) << op.status();
    EXPECT_EQ(Signature(**op), signature) << name;
    NodeDef n;
    n.set_op(name);
    EXPECT_TRUE(KernelRegistry::Global()->HasKernel(kDeviceCPU, n)) << name;
  }
  for (const char* name : {"ConditionalAccumulator", "AccumulatorTakeGradient"}) {
    const OpAttr* dtype = (*OpRegistry::Global()->LookUp(name))->FindAttr("dtype");
    ASSERT_NE(dtype, nullptr);
    EXPECT_THAT(dtype->allowed_types, ::testing::Contains(DT_FLOAT));
    EXPECT_THAT(dtype->allowed_types, ::testing::Not(::testing::Contains(DT_STRING)));
  }
}

// --- harness (KernelTest: kernel_fixture.h) ------------------------------------------

class DataFlowOpsTest : public KernelTest {
 protected:
  // A FIFOQueueV2 handle; shapes empty = unspecified.
  Tensor Queue(const std::string& node, std::vector<DataType> types,
               std::vector<TensorShape> shapes, int64_t capacity = -1,
               const std::string& shared_name = "") {
    absl::StatusOr<Tensor> h = TryQueue(node, types, shapes, capacity, shared_name);
    EXPECT_TRUE(h.ok()) << h.status();
    return h.ok() ? *h : Tensor();
  }
  absl::StatusOr<Tensor> TryQueue(const std::string& node, std::vector<DataType> types,
                                  std::vector<TensorShape> shapes, int64_t capacity,
                                  const std::string& shared_name) {
    NodeDef n = Node("FIFOQueueV2", node, 0);
    SetAttr(&n, "component_types", types);
    tensorflow::AttrValue list;
    list.mutable_list();
    for (const TensorShape& s : shapes) s.AsProto(list.mutable_list()->add_shape());
    (*n.mutable_attr())["shapes"] = list;
    SetAttr(&n, "capacity", capacity);
    SetAttr(&n, "shared_name", shared_name);
    OpKernel* k = Kernel(n);
    if (k == nullptr) return absl::InternalError("no kernel");
    std::unique_ptr<KernelRun> run = Start(k, {});
    RETURN_IF_ERROR(run->Wait());
    return run->output(0);
  }
  std::unique_ptr<KernelRun> Enqueue(const Tensor& handle, std::vector<Tensor> tuple,
                                     bool many = false, CancellationManager* cm = nullptr) {
    NodeDef n = Node(many ? "QueueEnqueueManyV2" : "QueueEnqueueV2", "enqueue",
                     1 + static_cast<int>(tuple.size()));
    std::vector<DataType> types;
    for (const Tensor& t : tuple) types.push_back(t.dtype());
    SetAttr(&n, "Tcomponents", types);
    std::vector<TensorValue> inputs = {In(handle)};
    for (Tensor& t : tuple) inputs.push_back(In(std::move(t)));
    return Start(Kernel(n), std::move(inputs), cm);
  }
  std::unique_ptr<KernelRun> Dequeue(const Tensor& handle, std::vector<DataType> types,
                                     CancellationManager* cm = nullptr,
                                     absl::Time deadline = absl::InfiniteFuture()) {
    NodeDef n = Node("QueueDequeueV2", "dequeue", 1);
    SetAttr(&n, "component_types", types);
    return Start(Kernel(n), {In(handle)}, cm, deadline);
  }
  std::unique_ptr<KernelRun> DequeueMany(const Tensor& handle, int32_t count,
                                         std::vector<DataType> types) {
    NodeDef n = Node("QueueDequeueManyV2", "dequeue_many", 2);
    SetAttr(&n, "component_types", types);
    return Start(Kernel(n), {In(handle), In(Tensor::Scalar<int32_t>(count))});
  }
  std::unique_ptr<KernelRun> Close(const Tensor& handle, bool cancel_pending_enqueues = false) {
    NodeDef n = Node("QueueCloseV2", "close", 1);
    SetAttr(&n, "cancel_pending_enqueues", cancel_pending_enqueues);
    return Start(Kernel(n), {In(handle)});
  }
  int32_t Size(const Tensor& handle) {
    std::unique_ptr<KernelRun> run = Start(Kernel(Node("QueueSizeV2", "size", 1)), {In(handle)});
    absl::Status s = run->Wait();
    EXPECT_TRUE(s.ok()) << s;
    return s.ok() ? run->output(0).scalar<int32_t>() : -1;
  }
};

const std::vector<DataType> kFloatInt = {DT_FLOAT, DT_INT32};
const std::vector<TensorShape> kVec2Scalar = {TensorShape({2}), TensorShape()};

// --- queue tests --------------------------------------------------------------------

TEST_F(DataFlowOpsTest, DequeuesTuplesInEnqueueOrder) {
  Tensor q = Queue("q", kFloatInt, kVec2Scalar);
  for (int i = 0; i < 3; ++i) {
    std::unique_ptr<KernelRun> e =
        Enqueue(q, {Tensor::Vec<float>({1.f * i, 10.f * i}), Tensor::Scalar<int32_t>(i)});
    ASSERT_TRUE(e->Wait().ok()) << e->status;
  }
  EXPECT_EQ(Size(q), 3);
  for (int i = 0; i < 3; ++i) {
    std::unique_ptr<KernelRun> d = Dequeue(q, kFloatInt);
    ASSERT_TRUE(d->Wait().ok()) << d->status;
    ExpectTensorEq<float>(d->output(0), {1.f * i, 10.f * i}, TensorShape({2}));
    ExpectTensorEq<int32_t>(d->output(1), {i}, TensorShape());
  }
  EXPECT_EQ(Size(q), 0);
}

TEST_F(DataFlowOpsTest, EnqueueManySplitsRowsAndDequeueManyStacksThem) {
  Tensor q = Queue("q", kFloatInt, kVec2Scalar);
  std::unique_ptr<KernelRun> e =
      Enqueue(q,
              {Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, TensorShape({3, 2})),
               Tensor::Vec<int32_t>({7, 8, 9})},
              /*many=*/true);
  ASSERT_TRUE(e->Wait().ok()) << e->status;
  EXPECT_EQ(Size(q), 3);
  std::unique_ptr<KernelRun> d = DequeueMany(q, 2, kFloatInt);
  ASSERT_TRUE(d->Wait().ok()) << d->status;
  ExpectTensorEq<float>(d->output(0), {1, 2, 3, 4}, TensorShape({2, 2}));
  ExpectTensorEq<int32_t>(d->output(1), {7, 8}, TensorShape({2}));
  std::unique_ptr<KernelRun> one = Dequeue(q, kFloatInt);
  ASSERT_TRUE(one->Wait().ok()) << one->status;
  ExpectTensorEq<float>(one->output(0), {5, 6}, TensorShape({2}));
  ExpectTensorEq<int32_t>(one->output(1), {9}, TensorShape());
}

TEST_F(DataFlowOpsTest, DequeueManyWaitsForAllItsElements) {
  Tensor q = Queue("q", {DT_INT64}, {TensorShape()});
  std::unique_ptr<KernelRun> d = DequeueMany(q, 3, {DT_INT64});
  EXPECT_FALSE(d->finished()) << "ComputeAsync returned before the elements exist";
  for (int64_t i = 0; i < 3; ++i) {
    EXPECT_FALSE(d->finished()) << "finished with " << i << " of 3 elements";
    ASSERT_TRUE(Enqueue(q, {Tensor::Scalar<int64_t>(i)})->Wait().ok());
  }
  ASSERT_TRUE(d->Wait().ok()) << d->status;
  ExpectTensorEq<int64_t>(d->output(0), {0, 1, 2}, TensorShape({3}));
  EXPECT_EQ(Size(q), 0);
}

TEST_F(DataFlowOpsTest, WrongTuplesAreInvalidArgument) {
  Tensor q = Queue("q", kFloatInt, kVec2Scalar);
  std::unique_ptr<KernelRun> arity = Enqueue(q, {Tensor::Vec<float>({1, 2})});
  EXPECT_EQ(arity->Wait().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(arity->status.message(),
              HasSubstr("Wrong number of components in tuple. Expected 2, got 1"));
  std::unique_ptr<KernelRun> type =
      Enqueue(q, {Tensor::Vec<float>({1, 2}), Tensor::Scalar<int64_t>(3)});
  EXPECT_EQ(type->Wait().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(type->status.message(),
              HasSubstr("Type mismatch in tuple component 1. Expected int32, got int64"));
  std::unique_ptr<KernelRun> shape =
      Enqueue(q, {Tensor::Vec<float>({1, 2, 3}), Tensor::Scalar<int32_t>(3)});
  EXPECT_EQ(shape->Wait().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(shape->status.message(),
              HasSubstr("Shape mismatch in tuple component 0. Expected [2], got [3]"));
  EXPECT_THAT(shape->status.message(), HasSubstr("[QueueEnqueueV2 'enqueue']"));
  EXPECT_EQ(Size(q), 0);

  Tensor unshaped = Queue("unshaped", {DT_FLOAT}, {});
  std::unique_ptr<KernelRun> many = DequeueMany(unshaped, 1, {DT_FLOAT});
  EXPECT_EQ(many->Wait().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(many->status.message(), HasSubstr("requires the components to have specified"));
}

TEST_F(DataFlowOpsTest, FullQueueHoldsEnqueueWithoutAThreadUntilADequeue) {
  Tensor q = Queue("q", {DT_INT32}, {TensorShape()}, /*capacity=*/1);
  ASSERT_TRUE(Enqueue(q, {Tensor::Scalar<int32_t>(1)})->Wait().ok());
  // ComputeAsync returns at once; the enqueue waits inside the queue.
  std::unique_ptr<KernelRun> blocked = Enqueue(q, {Tensor::Scalar<int32_t>(2)});
  EXPECT_FALSE(blocked->finished());
  EXPECT_EQ(Size(q), 1);

  std::unique_ptr<KernelRun> d = Dequeue(q, {DT_INT32});
  ASSERT_TRUE(d->Wait().ok()) << d->status;
  EXPECT_EQ(d->output(0).scalar<int32_t>(), 1);
  ASSERT_TRUE(blocked->finished()) << "the dequeue made room; the enqueue finished with it";
  EXPECT_TRUE(blocked->status.ok()) << blocked->status;
  EXPECT_EQ(Size(q), 1);
}

TEST_F(DataFlowOpsTest, EnqueueManyLargerThanCapacityFillsAsRoomAppears) {
  Tensor q = Queue("q", {DT_INT32}, {TensorShape()}, /*capacity=*/2);
  std::unique_ptr<KernelRun> e = Enqueue(q, {Tensor::Vec<int32_t>({1, 2, 3, 4, 5})}, true);
  EXPECT_FALSE(e->finished());
  EXPECT_EQ(Size(q), 2);
  std::unique_ptr<KernelRun> d = DequeueMany(q, 5, {DT_INT32});
  ASSERT_TRUE(d->Wait().ok()) << d->status;
  ExpectTensorEq<int32_t>(d->output(0), {1, 2, 3, 4, 5}, TensorShape({5}));
  EXPECT_TRUE(e->Wait().ok()) << e->status;
}

TEST_F(DataFlowOpsTest, CloseFailsWaitingDequeuesAndLaterEnqueues) {
  Tensor q = Queue("q", {DT_INT32}, {TensorShape()});
  ASSERT_TRUE(Enqueue(q, {Tensor::Scalar<int32_t>(7)})->Wait().ok());
  std::unique_ptr<KernelRun> many = DequeueMany(q, 3, {DT_INT32});
  EXPECT_FALSE(many->finished());
  EXPECT_EQ(Size(q), 0) << "a waiting DequeueMany holds the elements it took";

  ASSERT_TRUE(Close(q)->Wait().ok());
  EXPECT_EQ(many->Wait().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(many->status.message(),
              HasSubstr("FIFOQueue 'q' is closed and has insufficient elements (requested 3, "
                        "current size 1)"));
  EXPECT_EQ(Size(q), 1) << "the elements it took went back";

  std::unique_ptr<KernelRun> late = Enqueue(q, {Tensor::Scalar<int32_t>(8)});
  EXPECT_EQ(late->Wait().code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(late->status.message(), HasSubstr("FIFOQueue 'q' is closed."));

  // What is left can still be dequeued; then dequeues fail at once.
  std::unique_ptr<KernelRun> d = Dequeue(q, {DT_INT32});
  ASSERT_TRUE(d->Wait().ok()) << d->status;
  EXPECT_EQ(d->output(0).scalar<int32_t>(), 7);
  EXPECT_EQ(Dequeue(q, {DT_INT32})->Wait().code(), absl::StatusCode::kOutOfRange);

  std::unique_ptr<KernelRun> again = Close(q);
  EXPECT_EQ(again->Wait().code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(again->status.message(), HasSubstr("Queue 'q' is already closed."));
  EXPECT_TRUE(Close(q, /*cancel_pending_enqueues=*/true)->Wait().ok());
}

TEST_F(DataFlowOpsTest, CloseWaitsBehindPendingEnqueuesUnlessCancellingThem) {
  Tensor q = Queue("q", {DT_INT32}, {TensorShape()}, /*capacity=*/1);
  ASSERT_TRUE(Enqueue(q, {Tensor::Scalar<int32_t>(1)})->Wait().ok());
  std::unique_ptr<KernelRun> pending = Enqueue(q, {Tensor::Scalar<int32_t>(2)});
  std::unique_ptr<KernelRun> close = Close(q);
  EXPECT_FALSE(close->finished()) << "a plain close lets the waiting enqueue finish first";
  ASSERT_TRUE(Dequeue(q, {DT_INT32})->Wait().ok());
  EXPECT_TRUE(pending->Wait().ok()) << pending->status;
  EXPECT_TRUE(close->Wait().ok()) << close->status;
  EXPECT_EQ(Size(q), 1);

  Tensor r = Queue("r", {DT_INT32}, {TensorShape()}, /*capacity=*/1);
  ASSERT_TRUE(Enqueue(r, {Tensor::Scalar<int32_t>(1)})->Wait().ok());
  std::unique_ptr<KernelRun> cancelled = Enqueue(r, {Tensor::Scalar<int32_t>(2)});
  ASSERT_TRUE(Close(r, /*cancel_pending_enqueues=*/true)->Wait().ok());
  EXPECT_EQ(cancelled->Wait().code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(cancelled->status.message(), HasSubstr("Enqueue operation was cancelled"));
  EXPECT_EQ(Size(r), 1);
}

TEST_F(DataFlowOpsTest, StepCancellationEndsAWaitingDequeue) {
  Tensor q = Queue("q", {DT_INT32}, {TensorShape()});
  CancellationManager cm;
  std::unique_ptr<KernelRun> d = Dequeue(q, {DT_INT32}, &cm);
  EXPECT_FALSE(d->finished());
  cm.StartCancel();
  ASSERT_TRUE(d->finished()) << "cancellation finishes the wait at once";
  EXPECT_EQ(d->status.code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(d->status.message(), HasSubstr("[QueueDequeueV2 'dequeue'] Dequeue operation"));

  // An already cancelled step does not wait at all; the queue still works.
  std::unique_ptr<KernelRun> late = Dequeue(q, {DT_INT32}, &cm);
  EXPECT_EQ(late->Wait().code(), absl::StatusCode::kCancelled);
  ASSERT_TRUE(Enqueue(q, {Tensor::Scalar<int32_t>(5)})->Wait().ok());
  EXPECT_EQ(Size(q), 1) << "no cancelled dequeue took the element";
}

TEST_F(DataFlowOpsTest, WaitCancelledAfterTheStepDeadlineIsDeadlineExceeded) {
  Tensor q = Queue("q", {DT_INT32}, {TensorShape()});
  CancellationManager cm;
  const absl::Time start = absl::Now();
  std::unique_ptr<KernelRun> d =
      Dequeue(q, {DT_INT32}, &cm, /*deadline=*/absl::Now() + absl::Milliseconds(50));
  // What a session or worker does at the step's deadline.
  absl::SleepFor(absl::Milliseconds(60));
  cm.StartCancel();
  EXPECT_EQ(d->Wait().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(d->status.message(), HasSubstr("Dequeue on FIFOQueue 'q' timed out"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
}

TEST_F(DataFlowOpsTest, CancelledDequeueManyReturnsItsElements) {
  Tensor q = Queue("q", {DT_INT32}, {TensorShape()});
  CancellationManager cm;
  NodeDef n = Node("QueueDequeueManyV2", "dequeue_many", 2);
  SetAttr(&n, "component_types", std::vector<DataType>{DT_INT32});
  std::unique_ptr<KernelRun> many = Start(Kernel(n), {In(q), In(Tensor::Scalar<int32_t>(3))}, &cm);
  ASSERT_TRUE(Enqueue(q, {Tensor::Vec<int32_t>({1, 2})}, true)->Wait().ok());
  EXPECT_EQ(Size(q), 0);
  cm.StartCancel();
  EXPECT_EQ(many->Wait().code(), absl::StatusCode::kCancelled);
  std::unique_ptr<KernelRun> d = DequeueMany(q, 2, {DT_INT32});
  ASSERT_TRUE(d->Wait().ok()) << d->status;
  ExpectTensorEq<int32_t>(d->output(0), {1, 2}, TensorShape({2}));
}

TEST_F(DataFlowOpsTest, QueuesAreSharedBySharedName) {
  // Two nodes (as in two sessions' graphs) naming one queue.
  Tensor a = Queue("a", {DT_INT32}, {TensorShape()}, 5, "shared_q");
  Tensor b = Queue("b", {DT_INT32}, {TensorShape()}, 5, "shared_q");
  Tensor other = Queue("c", {DT_INT32}, {TensorShape()}, 5, "");
  ASSERT_TRUE(Enqueue(a, {Tensor::Scalar<int32_t>(42)})->Wait().ok());
  EXPECT_EQ(Size(b), 1);
  EXPECT_EQ(Size(other), 0);
  std::unique_ptr<KernelRun> d = Dequeue(b, {DT_INT32});
  ASSERT_TRUE(d->Wait().ok()) << d->status;
  EXPECT_EQ(d->output(0).scalar<int32_t>(), 42);

  absl::StatusOr<Tensor> mismatch = TryQueue("d", {DT_INT32}, {TensorShape()}, 7, "shared_q");
  EXPECT_EQ(mismatch.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(mismatch.status().message(),
              HasSubstr("Shared queue 'shared_q' has capacity 5 but requested capacity was 7"));
  absl::StatusOr<Tensor> types = TryQueue("e", {DT_FLOAT}, {TensorShape()}, 5, "shared_q");
  EXPECT_EQ(types.status().code(), absl::StatusCode::kInvalidArgument);

  absl::StatusOr<std::shared_ptr<FIFOQueue>> queue =
      device_->resource_manager()->Lookup<FIFOQueue>("localhost", "shared_q");
  ASSERT_TRUE(queue.ok()) << queue.status();
  EXPECT_EQ((*queue)->Size(), 0);
}

TEST(FIFOQueueTest, DestroyingAQueueFailsWaitsWithoutACancellationManager) {
  auto q = std::make_shared<FIFOQueue>("q", std::vector<DataType>{DT_INT32},
                                       std::vector<TensorShape>{}, /*capacity=*/-1);
  absl::Status status;
  bool called = false;
  q->Dequeue(Waiter{}, [&](absl::Status s, FIFOQueue::Tuple) {
    status = s;
    called = true;
  });
  EXPECT_FALSE(called);
  q.reset();
  ASSERT_TRUE(called);
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(status.message(), HasSubstr("FIFOQueue 'q' was destroyed"));
}

// Producers and consumers on their own threads through a small queue: every
// element arrives once, and each producer's elements in its order.
TEST(FIFOQueueTest, ConcurrentProducersAndConsumers) {
  constexpr int kThreads = 4, kPerThread = 300;
  auto q = std::make_shared<FIFOQueue>("q", std::vector<DataType>{DT_INT32},
                                       std::vector<TensorShape>{TensorShape()}, /*capacity=*/3);
  // Runs one queue call and waits (bounded) for its callback.
  auto call = [](const std::function<void(FIFOQueue::DoneCallback)>& op) {
    auto done = std::make_shared<absl::Notification>();
    auto result = std::make_shared<std::pair<absl::Status, FIFOQueue::Tuple>>();
    op([done, result](absl::Status s, FIFOQueue::Tuple t) {
      *result = {s, std::move(t)};
      done->Notify();
    });
    if (!done->WaitForNotificationWithTimeout(absl::Seconds(5))) {
      return std::pair<absl::Status, FIFOQueue::Tuple>{absl::DeadlineExceededError("stuck"), {}};
    }
    return *result;
  };
  std::vector<std::vector<int32_t>> received(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        absl::Status s = call([&](FIFOQueue::DoneCallback cb) {
                           q->Enqueue({Tensor::Scalar<int32_t>(t * kPerThread + i)}, Waiter{}, cb);
                         }).first;
        ASSERT_TRUE(s.ok()) << s;
      }
    });
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        auto [s, tuple] = call([&](FIFOQueue::DoneCallback cb) { q->Dequeue(Waiter{}, cb); });
        ASSERT_TRUE(s.ok()) << s;
        received[t].push_back(tuple[0].scalar<int32_t>());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  std::vector<int32_t> all;
  for (const auto& r : received) {
    // A consumer sees each producer's elements in increasing order.
    std::vector<int32_t> last(kThreads, -1);
    for (int32_t v : r) {
      EXPECT_GT(v, last[v / kPerThread]);
      last[v / kPerThread] = v;
    }
    all.insert(all.end(), r.begin(), r.end());
  }
  std::sort(all.begin(), all.end());
  ASSERT_EQ(all.size(), static_cast<size_t>(kThreads * kPerThread));
  for (int i = 0; i < kThreads * kPerThread; ++i) EXPECT_EQ(all[i], i);
  EXPECT_EQ(q->Size(), 0);
}

// --- accumulator tests -----------------------------------------------------------------

// Runs every test with the Ref(string) handle (false) and the resource one (true).
class AccumulatorTest : public DataFlowOpsTest, public ::testing::WithParamInterface<bool> {
 protected:
  std::string Op(const std::string& name) const { return (GetParam() ? "Resource" : "") + name; }
  TensorValue Accumulator(const std::string& node, const std::string& reduction = "MEAN",
                          const std::string& shared_name = "",
                          const TensorShape& shape = TensorShape({2})) {
    absl::StatusOr<TensorValue> h = TryAccumulator(node, DT_FLOAT, reduction, shared_name, shape);
    EXPECT_TRUE(h.ok()) << h.status();
    return h.ok() ? *h : TensorValue{};
  }
  absl::StatusOr<TensorValue> TryAccumulator(const std::string& node, DataType dtype,
                                             const std::string& reduction,
                                             const std::string& shared_name,
                                             const TensorShape& shape = TensorShape({2})) {
    NodeDef n = Node(Op("ConditionalAccumulator"), node, 0);
    SetAttr(&n, "dtype", dtype);
    SetAttr(&n, "shape", shape);
    SetAttr(&n, "reduction_type", reduction);
    SetAttr(&n, "shared_name", shared_name);
    OpKernel* k = Kernel(n);
    if (k == nullptr) return absl::InternalError("no kernel");
    std::unique_ptr<KernelRun> run = Start(k, {});
    RETURN_IF_ERROR(run->Wait());
    TensorValue v = run->ctx->release_output(0);
    EXPECT_EQ(v.is_ref(), !GetParam());
    return v.is_ref() ? v : In(*v.tensor);
  }
  std::unique_ptr<KernelRun> Apply(TensorValue h, int64_t local_step, Tensor grad) {
    NodeDef n = Node(Op("AccumulatorApplyGradient"), "apply", 3);
    SetAttr(&n, "dtype", grad.dtype());
    return Start(Kernel(n), {h, In(Tensor::Scalar<int64_t>(local_step)), In(std::move(grad))});
  }
  void ApplyOk(TensorValue h, int64_t local_step, std::vector<float> grad) {
    std::unique_ptr<KernelRun> run = Apply(h, local_step, Tensor::Vec<float>(grad));
    EXPECT_TRUE(run->Wait().ok()) << run->status;
  }
  std::unique_ptr<KernelRun> Take(TensorValue h, int32_t num_required,
                                  CancellationManager* cm = nullptr) {
    NodeDef n = Node(Op("AccumulatorTakeGradient"), "take", 2);
    SetAttr(&n, "dtype", DT_FLOAT);
    return Start(Kernel(n), {h, In(Tensor::Scalar<int32_t>(num_required))}, cm);
  }
  int32_t NumAccumulated(TensorValue h) {
    std::unique_ptr<KernelRun> run =
        Start(Kernel(Node(Op("AccumulatorNumAccumulated"), "n", 1)), {h});
    absl::Status s = run->Wait();
    EXPECT_TRUE(s.ok()) << s;
    return s.ok() ? run->output(0).scalar<int32_t>() : -1;
  }
  void SetGlobalStep(TensorValue h, int64_t step) {
    std::unique_ptr<KernelRun> run =
        Start(Kernel(Node(Op("AccumulatorSetGlobalStep"), "set_step", 2)),
              {h, In(Tensor::Scalar<int64_t>(step))});
    EXPECT_TRUE(run->Wait().ok()) << run->status;
  }
  std::shared_ptr<ConditionalAccumulator> Resource(const std::string& name) {
    absl::StatusOr<std::shared_ptr<ConditionalAccumulator>> acc =
        device_->resource_manager()->Lookup<ConditionalAccumulator>("localhost", name);
    EXPECT_TRUE(acc.ok()) << acc.status();
    return acc.ok() ? *acc : nullptr;
  }
};

INSTANTIATE_TEST_SUITE_P(RefAndResource, AccumulatorTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Resource" : "Ref"; });

TEST_P(AccumulatorTest, TakeReturnsTheMeanResetsAndAdvancesTheStep) {
  TensorValue acc = Accumulator("acc");
  ApplyOk(acc, 0, {1, 2});
  ApplyOk(acc, 0, {3, 4});
  ApplyOk(acc, 0, {5, 9});
  EXPECT_EQ(NumAccumulated(acc), 3);
  std::unique_ptr<KernelRun> take = Take(acc, 3);
  ASSERT_TRUE(take->Wait().ok()) << take->status;
  ExpectTensorEq<float>(take->output(0), {3, 5}, TensorShape({2}));
  EXPECT_EQ(NumAccumulated(acc), 0);
  EXPECT_EQ(Resource("acc")->global_step(), 1);
}

TEST_P(AccumulatorTest, MeanOfLongGradientsDividesEachSumLikeTensorFlow) {
  // 37 elements: whole vector packets and a tail. Sums 2i + 1 divided by 3,
  // which a multiplication by 1/3 would round differently (5/3, 7/3, ...).
  constexpr int kN = 37;
  std::vector<float> a(kN), b(kN), c(kN), mean(kN);
  for (int i = 0; i < kN; ++i) {
    a[i] = static_cast<float>(i);
    b[i] = static_cast<float>(2 * i + 1);
    c[i] = -static_cast<float>(i);
    mean[i] = (a[i] + b[i] + c[i]) / 3.0f;
  }
  TensorValue acc = Accumulator("acc", "MEAN", "", TensorShape({kN}));
  ApplyOk(acc, 0, a);
  ApplyOk(acc, 0, b);
  ApplyOk(acc, 0, c);
  std::unique_ptr<KernelRun> take = Take(acc, 3);
  ASSERT_TRUE(take->Wait().ok()) << take->status;
  ExpectTensorEq<float>(take->output(0), mean, TensorShape({kN}), /*tol=*/0);
  EXPECT_NE(mean[2], 5.0f * (1.0f / 3.0f));
}

TEST_P(AccumulatorTest, SumReduction) {
  TensorValue acc = Accumulator("acc", "SUM");
  ApplyOk(acc, 0, {1, 2});
  ApplyOk(acc, 0, {3, 4});
  std::unique_ptr<KernelRun> take = Take(acc, 2);
  ASSERT_TRUE(take->Wait().ok()) << take->status;
  ExpectTensorEq<float>(take->output(0), {4, 6}, TensorShape({2}));
}

TEST_P(AccumulatorTest, TakeWaitsWithoutAThreadForNumRequired) {
  TensorValue acc = Accumulator("acc");
  std::unique_ptr<KernelRun> take = Take(acc, 2);
  EXPECT_FALSE(take->finished()) << "ComputeAsync returned; the take waits in the accumulator";
  ApplyOk(acc, 0, {1, 1});
  EXPECT_FALSE(take->finished()) << "1 of 2 gradients";
  ApplyOk(acc, 0, {3, 5});
  ASSERT_TRUE(take->finished()) << "the second apply completed the take";
  ASSERT_TRUE(take->status.ok()) << take->status;
  ExpectTensorEq<float>(take->output(0), {2, 3}, TensorShape({2}));
  EXPECT_EQ(Resource("acc")->global_step(), 1);

  // Gradients of step 0 are now stale: dropped, silently, and counted.
  ApplyOk(acc, 0, {100, 100});
  ApplyOk(acc, 0, {7, 7, 7});  // stale, so not even checked (as TensorFlow)
  EXPECT_EQ(NumAccumulated(acc), 0);
  EXPECT_EQ(Resource("acc")->num_dropped_stale(), 2);
  ApplyOk(acc, 1, {6, 8});
  EXPECT_EQ(NumAccumulated(acc), 1);
}

TEST_P(AccumulatorTest, SetGlobalStepMovesTheStalenessBar) {
  TensorValue acc = Accumulator("acc");
  SetGlobalStep(acc, 5);
  ApplyOk(acc, 4, {1, 1});
  EXPECT_EQ(NumAccumulated(acc), 0);
  EXPECT_EQ(Resource("acc")->num_dropped_stale(), 1);
  ApplyOk(acc, 5, {1, 1});
  ApplyOk(acc, 9, {3, 3});
  EXPECT_EQ(NumAccumulated(acc), 2);
  SetGlobalStep(acc, 2);  // Going back is allowed, as in TensorFlow.
  ApplyOk(acc, 4, {5, 5});
  EXPECT_EQ(NumAccumulated(acc), 3);
  std::unique_ptr<KernelRun> take = Take(acc, 3);
  ASSERT_TRUE(take->Wait().ok()) << take->status;
  ExpectTensorEq<float>(take->output(0), {3, 3}, TensorShape({2}));
  EXPECT_EQ(Resource("acc")->global_step(), 3);
}

TEST_P(AccumulatorTest, BadGradientsAreInvalidArgumentNamingTheAccumulator) {
  TensorValue acc = Accumulator("grad_acc");
  std::unique_ptr<KernelRun> dtype = Apply(acc, 0, Tensor::Vec<int32_t>({1, 2}));
  EXPECT_EQ(dtype->Wait().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(dtype->status.message(), HasSubstr("ConditionalAccumulator 'grad_acc'"));
  EXPECT_THAT(dtype->status.message(), HasSubstr("float"));
  std::unique_ptr<KernelRun> shape = Apply(acc, 0, Tensor::Vec<float>({1, 2, 3}));
  EXPECT_EQ(shape->Wait().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(shape->status.message(), HasSubstr("ConditionalAccumulator 'grad_acc': Shape "
                                                 "mismatch: expected [2], got [3]"));
  EXPECT_EQ(NumAccumulated(acc), 0);

  std::unique_ptr<KernelRun> zero = Take(acc, 0);
  EXPECT_EQ(zero->Wait().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(zero->status.message(),
              HasSubstr("Argument num_required must be positive, but was 0"));
}

TEST_P(AccumulatorTest, StepCancellationEndsAWaitingTake) {
  TensorValue acc = Accumulator("acc");
  CancellationManager cm;
  std::unique_ptr<KernelRun> take = Take(acc, 2, &cm);
  ApplyOk(acc, 0, {1, 1});
  EXPECT_FALSE(take->finished());
  cm.StartCancel();
  EXPECT_EQ(take->Wait().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(NumAccumulated(acc), 1) << "the gradient stays for the next take";
  EXPECT_EQ(Resource("acc")->global_step(), 0);
}

TEST_P(AccumulatorTest, SharedByName) {
  TensorValue a = Accumulator("a", "MEAN", "grads");
  TensorValue b = Accumulator("b", "MEAN", "grads");
  ApplyOk(a, 0, {2, 4});
  EXPECT_EQ(NumAccumulated(b), 1);
  absl::StatusOr<TensorValue> other = TryAccumulator("c", DT_DOUBLE, "MEAN", "grads");
  EXPECT_EQ(other.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(other.status().message(), HasSubstr("Shared accumulator 'grads'"));
}

// --- RandomShuffleQueue, PaddingFIFOQueue, DequeueUpTo, IsClosed ---------------------

// A queue operation's result, when it finished synchronously.
struct Result {
  bool finished = false;
  absl::Status status;
  Queue::Tuple tuple;
  Queue::DoneCallback Callback() {
    return [this](absl::Status s, Queue::Tuple t) {
      finished = true;
      status = std::move(s);
      tuple = std::move(t);
    };
  }
};

std::shared_ptr<Queue> ShuffleQueue(int64_t min_after_dequeue, int64_t seed,
                                    int64_t capacity = -1) {
  QueueOptions o;
  o.kind = QueueOptions::Kind::kRandomShuffle;
  o.min_after_dequeue = min_after_dequeue;
  o.seed = seed;
  return std::make_shared<Queue>("shuffle", std::vector<DataType>{DT_INT32},
                                 std::vector<TensorShape>{TensorShape()}, capacity, o);
}

void EnqueueInts(Queue* q, int from, int to) {
  for (int i = from; i < to; ++i) {
    Result r;
    q->Enqueue({Tensor::Scalar<int32_t>(i)}, Waiter{}, r.Callback());
    ASSERT_TRUE(r.finished && r.status.ok()) << r.status;
  }
}

// Closes `q` and dequeues everything left.
std::vector<int> DrainInts(Queue* q) {
  Result closed;
  q->Close(false, Waiter{}, closed.Callback());
  std::vector<int> out;
  while (true) {
    Result r;
    q->Dequeue(Waiter{}, r.Callback());
    EXPECT_TRUE(r.finished);
    if (!r.finished || !r.status.ok()) break;
    out.push_back(r.tuple[0].scalar<int32_t>());
  }
  return out;
}

TEST(RandomShuffleQueueTest, DequeueWaitsAboveMinAfterDequeueUntilClosed) {
  std::shared_ptr<Queue> q = ShuffleQueue(/*min_after_dequeue=*/3, /*seed=*/7);
  EnqueueInts(q.get(), 0, 3);
  Result waiting;
  q->Dequeue(Waiter{}, waiting.Callback());
  EXPECT_FALSE(waiting.finished) << "3 elements are not more than min_after_dequeue";
  EnqueueInts(q.get(), 3, 4);
  ASSERT_TRUE(waiting.finished);
  EXPECT_TRUE(waiting.status.ok()) << waiting.status;
  EXPECT_EQ(q->Size(), 3);

  std::vector<int> rest = DrainInts(q.get());  // Once closed, everything comes out...
  rest.push_back(waiting.tuple[0].scalar<int32_t>());
  std::sort(rest.begin(), rest.end());
  EXPECT_EQ(rest, (std::vector<int>{0, 1, 2, 3}));
  Result end;  // ...then OUT_OF_RANGE, as QueueRunner and Coordinator expect.
  q->Dequeue(Waiter{}, end.Callback());
  EXPECT_EQ(end.status.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(end.status.message(), HasSubstr("RandomShuffleQueue 'shuffle' is closed"));
}

TEST(RandomShuffleQueueTest, SeededQueuesRepeatTheirOrderAndShuffle) {
  std::shared_ptr<Queue> a = ShuffleQueue(0, 42), b = ShuffleQueue(0, 42), c = ShuffleQueue(0, 43);
  for (Queue* q : {a.get(), b.get(), c.get()}) EnqueueInts(q, 0, 20);
  const std::vector<int> order = DrainInts(a.get());
  EXPECT_EQ(order, DrainInts(b.get()));
  EXPECT_NE(order, DrainInts(c.get()));
  std::vector<int> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_NE(order, sorted) << "20 elements left in order: not shuffled";
  for (int i = 0; i < 20; ++i) EXPECT_EQ(sorted[i], i);
}

// Enqueues, dequeues (one, many, up to) and closes run one at a time, so the
// queue's contents at each dequeue are fixed (also where a close fails a
// waiting DequeueMany, which puts back what it took): every dequeue takes the
// elements TensorFlow's RandomShuffleQueue took (tests/data/shuffle_golden.json,
// written by tests/data/gen_shuffle_reference.py).
TEST(RandomShuffleQueueTest, DequeuesTensorFlowsElements) {
  std::ifstream in(TestDataDir() + "/shuffle_golden.json");
  ASSERT_TRUE(in.good()) << "missing tests/data/shuffle_golden.json";
  const nlohmann::json golden = nlohmann::json::parse(in);
  ASSERT_EQ(golden["queue"].size(), 4u);
  for (const auto& c : golden["queue"]) {
    QueueOptions o;
    o.kind = QueueOptions::Kind::kRandomShuffle;
    o.min_after_dequeue = c["min_after_dequeue"];
    o.seed = c["seed"];
    o.seed2 = c["seed2"];
    auto q = std::make_shared<Queue>("shuffle", std::vector<DataType>{DT_INT32},
                                     std::vector<TensorShape>{TensorShape()}, 1000, o);
    for (const auto& step : c["steps"]) {
      SCOPED_TRACE(absl::StrCat("seed ", c["seed"].dump(), " step ", step.dump()));
      const std::string kind = step[0];
      Result r;
      if (kind == "enqueue_many") {
        q->EnqueueMany({Tensor::Vec<int32_t>(step[1].get<std::vector<int32_t>>())}, Waiter{},
                       r.Callback());
      } else if (kind == "close") {
        q->Close(false, Waiter{}, r.Callback());
      } else if (kind == "dequeue") {
        q->Dequeue(Waiter{}, r.Callback());
      } else if (kind == "dequeue_many_close") {
        q->DequeueMany(step[1].get<int64_t>(), Waiter{}, r.Callback());
        EXPECT_FALSE(r.finished) << "waits above min_after_dequeue";
        Result closed;
        q->Close(false, Waiter{}, closed.Callback());
        EXPECT_TRUE(closed.finished && closed.status.ok()) << closed.status;
      } else {
        q->DequeueMany(step[1].get<int64_t>(), kind == "dequeue_up_to", Waiter{}, r.Callback());
      }
      ASSERT_TRUE(r.finished) << "the step waits";
      if (kind == "enqueue_many" || kind == "close") {
        EXPECT_TRUE(r.status.ok()) << r.status;
        continue;
      }
      const nlohmann::json& want = step.back();
      if (want == "OutOfRange") {
        EXPECT_EQ(r.status.code(), absl::StatusCode::kOutOfRange) << r.status;
        continue;
      }
      ASSERT_TRUE(r.status.ok()) << r.status;
      auto got = r.tuple[0].flat<int32_t>();
      EXPECT_EQ(std::vector<int32_t>(got.begin(), got.end()), want.get<std::vector<int32_t>>());
    }
  }
}

// Each of 5 elements is first out of a fresh unseeded queue about 1/5 of
// 5000 times: counts within 6 standard deviations (~170) of 1000 (a false
// alarm about once in 10^8 runs; an order bias of 20% is caught).
TEST(RandomShuffleQueueTest, DequeueIsUniform) {
  std::vector<int> first(5, 0);
  std::vector<int> second_of_three(3, 0);  // Also with min_after_dequeue 2.
  for (int trial = 0; trial < 5000; ++trial) {
    std::shared_ptr<Queue> q = ShuffleQueue(0, 0);
    EnqueueInts(q.get(), 0, 5);
    Result r;
    q->Dequeue(Waiter{}, r.Callback());
    ASSERT_TRUE(r.status.ok());
    ++first[r.tuple[0].scalar<int32_t>()];
  }
  for (int trial = 0; trial < 3000; ++trial) {
    std::shared_ptr<Queue> q = ShuffleQueue(2, 0);
    EnqueueInts(q.get(), 0, 3);
    Result r;
    q->Dequeue(Waiter{}, r.Callback());
    ASSERT_TRUE(r.status.ok());
    ++second_of_three[r.tuple[0].scalar<int32_t>()];
  }
  for (int i = 0; i < 5; ++i) {
    EXPECT_NEAR(first[i], 1000, 170) << "element " << i;
  }
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(second_of_three[i], 1000, 160) << "element " << i;
  }
}

TEST(RandomShuffleQueueTest, StepCancellationEndsADequeueHeldByMinAfterDequeue) {
  std::shared_ptr<Queue> q = ShuffleQueue(5, 1);
  EnqueueInts(q.get(), 0, 5);
  CancellationManager cm;
  Result r;
  q->Dequeue(Waiter{&cm, absl::InfiniteFuture()}, r.Callback());
  EXPECT_FALSE(r.finished);
  cm.StartCancel();
  ASSERT_TRUE(r.finished);
  EXPECT_EQ(r.status.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(q->Size(), 5);
}

std::shared_ptr<Queue> PaddingQueue(std::vector<DataType> types, std::vector<PartialShape> shapes) {
  QueueOptions o;
  o.kind = QueueOptions::Kind::kPaddingFIFO;
  o.padded_shapes = std::move(shapes);
  return std::make_shared<Queue>("pad", std::move(types), std::vector<TensorShape>{}, -1, o);
}

TEST(PaddingFIFOQueueTest, DequeueManyPadsEachUnknownDimensionToItsLongestRow) {
  std::shared_ptr<Queue> q =
      PaddingQueue({DT_INT32, DT_STRING}, {PartialShape({-1, 2}), PartialShape({-1})});
  Result e1, e2;
  q->Enqueue({Tensor::FromVector<int32_t>({1, 2}, TensorShape({1, 2})),
              Tensor::Vec<std::string>({"a", "b", "c"})},
             Waiter{}, e1.Callback());
  q->Enqueue({Tensor::FromVector<int32_t>({3, 4, 5, 6, 7, 8}, TensorShape({3, 2})),
              Tensor::Vec<std::string>({"d"})},
             Waiter{}, e2.Callback());
  ASSERT_TRUE(e1.status.ok() && e2.status.ok()) << e1.status << e2.status;
  Result bad;
  q->Enqueue({Tensor::FromVector<int32_t>({1, 2, 3}, TensorShape({1, 3})),
              Tensor::Vec<std::string>({"x"})},
             Waiter{}, bad.Callback());
  EXPECT_EQ(bad.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status.message(), HasSubstr("Expected [?,2], got [1,3]"));

  Result d;
  q->DequeueMany(2, Waiter{}, d.Callback());
  ASSERT_TRUE(d.status.ok()) << d.status;
  ExpectTensorEq<int32_t>(d.tuple[0], {1, 2, 0, 0, 0, 0, 3, 4, 5, 6, 7, 8}, TensorShape({2, 3, 2}));
  ExpectTensorEq<std::string>(d.tuple[1], {"a", "b", "c", "d", "", ""}, TensorShape({2, 3}));
}

TEST_F(DataFlowOpsTest, PaddingQueueKernelNeedsOneShapePerComponent) {
  NodeDef n = Node("PaddingFIFOQueueV2", "pad", 0);
  SetAttr(&n, "component_types", std::vector<DataType>{DT_INT32});
  absl::StatusOr<std::unique_ptr<OpKernel>> k = MakeKernel(n, device_.get());
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(k.status().message(), HasSubstr("[PaddingFIFOQueueV2 'pad'] shapes must give one"));
}

TEST_F(DataFlowOpsTest, DequeueUpToReturnsWhatIsLeftOnceClosedThenOutOfRange) {
  Tensor q = Queue("q", {DT_INT32}, {TensorShape()});
  ASSERT_TRUE(Enqueue(q, {Tensor::Vec<int32_t>({1, 2, 3, 4, 5})}, /*many=*/true)->Wait().ok());
  NodeDef n = Node("QueueDequeueUpToV2", "up_to", 2);
  SetAttr(&n, "component_types", std::vector<DataType>{DT_INT32});
  OpKernel* up_to = Kernel(n);
  std::unique_ptr<KernelRun> full = Start(up_to, {In(q), In(Tensor::Scalar<int32_t>(3))});
  ASSERT_TRUE(full->Wait().ok()) << full->status;
  ExpectTensorEq<int32_t>(full->output(0), {1, 2, 3}, TensorShape({3}));
  std::unique_ptr<KernelRun> waiting = Start(up_to, {In(q), In(Tensor::Scalar<int32_t>(3))});
  EXPECT_FALSE(waiting->finished()) << "open queue: waits for 3";

  OpKernel* is_closed = Kernel(Node("QueueIsClosedV2", "is_closed", 1));
  std::unique_ptr<KernelRun> open = Start(is_closed, {In(q)});
  ASSERT_TRUE(open->Wait().ok());
  EXPECT_FALSE(open->output(0).scalar<bool>());
  ASSERT_TRUE(Close(q)->Wait().ok());
  ASSERT_TRUE(waiting->Wait().ok()) << waiting->status;
  ExpectTensorEq<int32_t>(waiting->output(0), {4, 5}, TensorShape({2}));
  std::unique_ptr<KernelRun> closed = Start(is_closed, {In(q)});
  ASSERT_TRUE(closed->Wait().ok());
  EXPECT_TRUE(closed->output(0).scalar<bool>());

  std::unique_ptr<KernelRun> end = Start(up_to, {In(q), In(Tensor::Scalar<int32_t>(3))});
  EXPECT_EQ(end->Wait().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(end->status.message(), HasSubstr("is closed and has insufficient elements"));
}

TEST_F(DataFlowOpsTest, SharedQueueOfAnotherKindIsInvalidArgument) {
  Tensor fifo = Queue("a", {DT_INT32}, {TensorShape()}, -1, "shared");
  NodeDef n = Node("RandomShuffleQueueV2", "b", 0);
  SetAttr(&n, "component_types", std::vector<DataType>{DT_INT32});
  SetAttr(&n, "shared_name", std::string("shared"));
  std::unique_ptr<KernelRun> run = Start(Kernel(n), {});
  EXPECT_EQ(run->Wait().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(run->status.message(), HasSubstr("Shared queue 'shared' is a FIFOQueue"));
}

}  // namespace
}  // namespace dflow
