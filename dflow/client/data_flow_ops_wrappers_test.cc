// The queue and accumulator wrappers build the nodes tf.compat.v1 builds,
// and the graph runs: a token queue and a mean of replica gradients.
#include "dflow/client/data_flow_ops_wrappers.h"

#include <vector>

#include "dflow/client/client_session.h"
#include "gtest/gtest.h"

namespace dflow {
namespace {

TEST(DataFlowOpsWrappersTest, TokenQueueRoundTrip) {
  Scope root = Scope::NewRootScope();
  Output q = ops::FIFOQueue(root.WithOpName("sync_token_q"), {DT_INT64},
                            {.shapes = {TensorShape()}, .shared_name = "sync_token_q"});
  Operation push = ops::QueueEnqueueMany(root, q, {Tensor::Vec<int64_t>({4, 5, 6})});
  OutputList two = ops::QueueDequeueMany(root, q, int32_t{2}, {DT_INT64});
  OutputList one = ops::QueueDequeue(root, q, {DT_INT64});
  Output size = ops::QueueSize(root, q);
  Operation close = ops::QueueClose(root, q, /*cancel_pending_enqueues=*/true);
  ASSERT_TRUE(root.status().ok()) << root.status();
  ASSERT_EQ(two.size(), 1u);
  EXPECT_EQ(two[0].type(), DT_INT64);
  EXPECT_EQ(q.type(), DT_RESOURCE);

  ClientSession session(root);
  std::vector<Tensor> out;
  ASSERT_TRUE(session.Run({}, {}, {push}, nullptr).ok());
  absl::Status s = session.Run({two[0], size}, &out);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(out[0].flat<int64_t>()[0], 4);
  EXPECT_EQ(out[0].flat<int64_t>()[1], 5);
  ASSERT_TRUE(session.Run({}, {}, {close}, nullptr).ok());
  ASSERT_TRUE(session.Run({one[0]}, &out).ok());
  EXPECT_EQ(out[0].scalar<int64_t>(), 6);
  EXPECT_EQ(session.Run({one[0]}, &out).code(), absl::StatusCode::kOutOfRange);
}

TEST(DataFlowOpsWrappersTest, AccumulatorTakesTheMean) {
  Scope root = Scope::NewRootScope();
  Output acc = ops::ResourceConditionalAccumulator(root.WithOpName("acc"), DT_FLOAT,
                                                   PartialShape({2}), {.shared_name = "w_grad"});
  Output grad = ops::Placeholder(root.WithOpName("grad"), DT_FLOAT);
  Output step = ops::Placeholder(root.WithOpName("step"), DT_INT64);
  Operation apply = ops::ResourceAccumulatorApplyGradient(root, acc, step, grad);
  Output mean = ops::ResourceAccumulatorTakeGradient(root, acc, int32_t{2}, DT_FLOAT);
  Output num = ops::ResourceAccumulatorNumAccumulated(root, acc);
  Operation set_step = ops::ResourceAccumulatorSetGlobalStep(root, acc, int64_t{3});
  ASSERT_TRUE(root.status().ok()) << root.status();
  for (const tensorflow::NodeDef& n : root.graph_def().node()) {
    if (n.op() == "ResourceAccumulatorApplyGradient") {
      EXPECT_EQ(n.attr().at("dtype").type(), DT_FLOAT) << "filled from the gradient";
    }
  }

  ClientSession session(root);
  std::vector<Tensor> out;
  for (auto g : {std::vector<float>{1, 2}, std::vector<float>{3, 8}}) {
    absl::Status s = session.Run(
        {{grad, Tensor::Vec<float>(g)}, {step, Tensor::Scalar<int64_t>(0)}}, {}, {apply}, nullptr);
    ASSERT_TRUE(s.ok()) << s;
  }
  ASSERT_TRUE(session.Run({mean}, &out).ok());
  EXPECT_FLOAT_EQ(out[0].flat<float>()[0], 2);
  EXPECT_FLOAT_EQ(out[0].flat<float>()[1], 5);
  ASSERT_TRUE(session.Run({}, {}, {set_step}, nullptr).ok());
  ASSERT_TRUE(session
                  .Run({{grad, Tensor::Vec<float>({1, 1})}, {step, Tensor::Scalar<int64_t>(2)}}, {},
                       {apply}, nullptr)
                  .ok());
  ASSERT_TRUE(session.Run({num}, &out).ok());
  EXPECT_EQ(out[0].scalar<int32_t>(), 0) << "step 2 < global step 3: dropped";
}

}  // namespace
}  // namespace dflow
