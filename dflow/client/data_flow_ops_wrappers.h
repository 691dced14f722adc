// Op wrappers for queues and gradient accumulators (ops/data_flow_ops), in
// the shape of client/ops.h, for building what SyncReplicasOptimizer builds:
// a token queue and one accumulator per variable on the ps. The accumulator
// wrappers emit the resource-handle ops, as TensorFlow 2's tf.compat.v1 does.
//
//   Output q = ops::FIFOQueue(ps.WithOpName("sync_token_q"), {DT_INT64},
//                             {.shapes = {{}}, .shared_name = "sync_token_q"});
//   Operation push = ops::QueueEnqueueMany(ps, q, {tokens});
//   Output token = ops::QueueDequeue(worker, q, {DT_INT64})[0];
//   Output acc = ops::ResourceConditionalAccumulator(ps, DT_FLOAT, {2}, {.shared_name = "w"});
//   Operation apply = ops::ResourceAccumulatorApplyGradient(worker, acc, local_step, grad);
//   Output mean = ops::ResourceAccumulatorTakeGradient(ps, acc, num_replicas, DT_FLOAT);
#ifndef DFLOW_CLIENT_DATA_FLOW_OPS_WRAPPERS_H_
#define DFLOW_CLIENT_DATA_FLOW_OPS_WRAPPERS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "dflow/client/ops.h"
#include "dflow/client/scope.h"

namespace dflow::ops {

// --- queues (FIFOQueueV2 and Queue*V2) ---------------------------------------------
struct FIFOQueueAttrs {
  std::vector<TensorShape> shapes;  // empty: any shapes (then no DequeueMany)
  int64_t capacity = -1;            // unbounded
  std::string container;
  std::string shared_name;
};
// The queue's resource handle.
Output FIFOQueue(const Scope& s, const std::vector<DataType>& component_types,
                 const FIFOQueueAttrs& attrs = {});
Operation QueueEnqueue(const Scope& s, Input handle, const InputList& components);
// Enqueues each row (dimension 0) of the components.
Operation QueueEnqueueMany(const Scope& s, Input handle, const InputList& components);
OutputList QueueDequeue(const Scope& s, Input handle, const std::vector<DataType>& component_types);
OutputList QueueDequeueMany(const Scope& s, Input handle, Input n,
                            const std::vector<DataType>& component_types);
Output QueueSize(const Scope& s, Input handle);
Operation QueueClose(const Scope& s, Input handle, bool cancel_pending_enqueues = false);

// --- accumulators (ResourceConditionalAccumulator and ResourceAccumulator*) ----------
struct AccumulatorAttrs {
  std::string container;
  std::string shared_name;
  std::string reduction_type = "MEAN";  // or "SUM"
};
Output ResourceConditionalAccumulator(const Scope& s, DataType dtype, const PartialShape& shape,
                                      const AccumulatorAttrs& attrs = {});
Operation ResourceAccumulatorApplyGradient(const Scope& s, Input handle, Input local_step,
                                           Input gradient);
Output ResourceAccumulatorTakeGradient(const Scope& s, Input handle, Input num_required,
                                       DataType dtype);
Output ResourceAccumulatorNumAccumulated(const Scope& s, Input handle);
Operation ResourceAccumulatorSetGlobalStep(const Scope& s, Input handle, Input new_global_step);

}  // namespace dflow::ops

#endif  // DFLOW_CLIENT_DATA_FLOW_OPS_WRAPPERS_H_
