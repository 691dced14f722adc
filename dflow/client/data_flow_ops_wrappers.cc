#include "dflow/client/data_flow_ops_wrappers.h"

#include "dflow/client/op_builder.h"

namespace dflow::ops {
namespace {

// A list(shape) attr value, for OpBuilder::Attr (which calls SetAttr).
struct ShapeList {
  std::vector<TensorShape> shapes;
};
void SetAttr(tensorflow::NodeDef* node, const std::string& name, const ShapeList& v) {
  tensorflow::AttrValue& attr = (*node->mutable_attr())[name];
  attr.mutable_list();
  for (const TensorShape& shape : v.shapes) shape.AsProto(attr.mutable_list()->add_shape());
}

tensorflow::TensorShapeProto ShapeProto(const PartialShape& shape) {
  tensorflow::TensorShapeProto p;
  shape.AsProto(&p);
  return p;
}

}  // namespace

Output FIFOQueue(const Scope& s, const std::vector<DataType>& component_types,
                 const FIFOQueueAttrs& a) {
  return OpBuilder(s, "FIFOQueueV2")
      .Attr("component_types", component_types)
      .Attr("shapes", ShapeList{a.shapes})
      .Attr("capacity", a.capacity)
      .Attr("container", a.container)
      .Attr("shared_name", a.shared_name)
      .Finish();
}

Operation QueueEnqueue(const Scope& s, Input handle, const InputList& components) {
  return OpBuilder(s, "QueueEnqueueV2").Input(handle).InputList(components).FinishOp();
}

Operation QueueEnqueueMany(const Scope& s, Input handle, const InputList& components) {
  return OpBuilder(s, "QueueEnqueueManyV2").Input(handle).InputList(components).FinishOp();
}

OutputList QueueDequeue(const Scope& s, Input handle,
                        const std::vector<DataType>& component_types) {
  return OpBuilder(s, "QueueDequeueV2")
      .Input(handle)
      .Attr("component_types", component_types)
      .FinishAll();
}

OutputList QueueDequeueMany(const Scope& s, Input handle, Input n,
                            const std::vector<DataType>& component_types) {
  return OpBuilder(s, "QueueDequeueManyV2")
      .Input(handle)
      .Input(n)
      .Attr("component_types", component_types)
      .FinishAll();
}

Output QueueSize(const Scope& s, Input handle) {
  return OpBuilder(s, "QueueSizeV2").Input(handle).Finish();
}

Operation QueueClose(const Scope& s, Input handle, bool cancel_pending_enqueues) {
  return OpBuilder(s, "QueueCloseV2")
      .Input(handle)
      .Attr("cancel_pending_enqueues", cancel_pending_enqueues)
      .FinishOp();
}

Output ResourceConditionalAccumulator(const Scope& s, DataType dtype, const PartialShape& shape,
                                      const AccumulatorAttrs& a) {
  return OpBuilder(s, "ResourceConditionalAccumulator")
      .Attr("dtype", dtype)
      .Attr("shape", ShapeProto(shape))
      .Attr("container", a.container)
      .Attr("shared_name", a.shared_name)
      .Attr("reduction_type", a.reduction_type)
      .Finish();
}

Operation ResourceAccumulatorApplyGradient(const Scope& s, Input handle, Input local_step,
                                           Input gradient) {
  return OpBuilder(s, "ResourceAccumulatorApplyGradient")
      .Input(handle)
      .Input(local_step)
      .Input(gradient)
      .FinishOp();
}

Output ResourceAccumulatorTakeGradient(const Scope& s, Input handle, Input num_required,
                                       DataType dtype) {
  return OpBuilder(s, "ResourceAccumulatorTakeGradient")
      .Input(handle)
      .Input(num_required)
      .Attr("dtype", dtype)
      .Finish();
}

Output ResourceAccumulatorNumAccumulated(const Scope& s, Input handle) {
  return OpBuilder(s, "ResourceAccumulatorNumAccumulated").Input(handle).Finish();
}

Operation ResourceAccumulatorSetGlobalStep(const Scope& s, Input handle, Input new_global_step) {
  return OpBuilder(s, "ResourceAccumulatorSetGlobalStep")
      .Input(handle)
      .Input(new_global_step)
      .FinishOp();
}

}  // namespace dflow::ops
