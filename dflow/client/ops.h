// Op wrappers: one function per op, in TensorFlow's C++ API shape
// (`ops::MatMul(scope, a, b, {.transpose_a = true})`). Each adds one node to
// the scope's graph and returns its output(s); errors are recorded on the
// scope (see Scope::status()). Type attrs come from the inputs.
#ifndef DFLOW_CLIENT_OPS_H_
#define DFLOW_CLIENT_OPS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "dflow/client/scope.h"

namespace dflow::ops {

using InputList = std::vector<Input>;

// --- constants, placeholders, identity --------------------------------------
Output Const(const Scope& s, const Tensor& value);
Output Const(const Scope& s, const Input& value);  // A literal: 1.f, {1, 2}, {{1.f}, {2.f}}
struct PlaceholderAttrs {
  PartialShape shape = PartialShape::Unknown();
};
Output Placeholder(const Scope& s, DataType dtype, const PlaceholderAttrs& attrs = {});
Output PlaceholderWithDefault(const Scope& s, Input input, const PartialShape& shape);
Output Identity(const Scope& s, Input input);
OutputList IdentityN(const Scope& s, const InputList& inputs);
Operation NoOp(const Scope& s);

// --- shapes and data movement -------------------------------------------------
Output Shape(const Scope& s, Input input, DataType out_type = DT_INT32);
Output Size(const Scope& s, Input input, DataType out_type = DT_INT32);
Output Rank(const Scope& s, Input input);
Output Reshape(const Scope& s, Input tensor, Input shape);
Output ExpandDims(const Scope& s, Input input, Input axis);
Output Squeeze(const Scope& s, Input input, const std::vector<int64_t>& axis = {});
Output Fill(const Scope& s, Input dims, Input value);
Output ZerosLike(const Scope& s, Input x);
Output OnesLike(const Scope& s, Input x);
Output Cast(const Scope& s, Input x, DataType dst_type);
Output Stack(const Scope& s, const InputList& values, int64_t axis = 0);  // Pack
Output Concat(const Scope& s, const InputList& values, Input axis);       // ConcatV2
Output Slice(const Scope& s, Input input, Input begin, Input size);
struct StridedSliceAttrs {
  int64_t begin_mask = 0, end_mask = 0, ellipsis_mask = 0, new_axis_mask = 0,
          shrink_axis_mask = 0;
};
Output StridedSlice(const Scope& s, Input input, Input begin, Input end, Input strides,
                    const StridedSliceAttrs& attrs = {});
Output GatherV2(const Scope& s, Input params, Input indices, Input axis, int64_t batch_dims = 0);
Output Transpose(const Scope& s, Input x, Input perm);
Output Tile(const Scope& s, Input input, Input multiples);
Output Range(const Scope& s, Input start, Input limit, Input delta);

// --- math ---------------------------------------------------------------------
Output Add(const Scope& s, Input x, Input y);  // AddV2
Output AddN(const Scope& s, const InputList& inputs);
Output Sub(const Scope& s, Input x, Input y);
Output Mul(const Scope& s, Input x, Input y);
Output Div(const Scope& s, Input x, Input y);  // RealDiv
Output FloorDiv(const Scope& s, Input x, Input y);
Output FloorMod(const Scope& s, Input x, Input y);
Output Maximum(const Scope& s, Input x, Input y);
Output Minimum(const Scope& s, Input x, Input y);
Output Neg(const Scope& s, Input x);
Output Abs(const Scope& s, Input x);
Output Square(const Scope& s, Input x);
Output Sqrt(const Scope& s, Input x);
Output Rsqrt(const Scope& s, Input x);
Output Exp(const Scope& s, Input x);
Output Log(const Scope& s, Input x);
Output Tanh(const Scope& s, Input x);
Output Sin(const Scope& s, Input x);
Output Cos(const Scope& s, Input x);
Output Sigmoid(const Scope& s, Input x);
Output Equal(const Scope& s, Input x, Input y);
Output NotEqual(const Scope& s, Input x, Input y);
Output Greater(const Scope& s, Input x, Input y);
Output Less(const Scope& s, Input x, Input y);
Output GreaterEqual(const Scope& s, Input x, Input y);
Output LessEqual(const Scope& s, Input x, Input y);
Output LogicalNot(const Scope& s, Input x);
Output LogicalAnd(const Scope& s, Input x, Input y);
Output Where(const Scope& s, Input condition, Input x, Input y);  // SelectV2
struct MatMulAttrs {
  bool transpose_a = false;
  bool transpose_b = false;
};
Output MatMul(const Scope& s, Input a, Input b, const MatMulAttrs& attrs = {});
struct ReduceAttrs {
  bool keep_dims = false;
};
Output Sum(const Scope& s, Input input, Input axis, const ReduceAttrs& attrs = {});
Output Mean(const Scope& s, Input input, Input axis, const ReduceAttrs& attrs = {});
Output Max(const Scope& s, Input input, Input axis, const ReduceAttrs& attrs = {});
Output Prod(const Scope& s, Input input, Input axis, const ReduceAttrs& attrs = {});
Output ArgMax(const Scope& s, Input input, Input dimension, DataType output_type = DT_INT64);

// --- neural networks --------------------------------------------------------------
Output Relu(const Scope& s, Input features);
Output BiasAdd(const Scope& s, Input value, Input bias);
Output Softmax(const Scope& s, Input logits);
Output LogSoftmax(const Scope& s, Input logits);
struct XentOutputs {
  Output loss;
  Output backprop;
};
XentOutputs SparseSoftmaxCrossEntropyWithLogits(const Scope& s, Input features, Input labels);
XentOutputs SoftmaxCrossEntropyWithLogits(const Scope& s, Input features, Input labels);
Output Conv2D(const Scope& s, Input input, Input filter, const std::vector<int64_t>& strides,
              const std::string& padding);
Output MaxPool(const Scope& s, Input input, const std::vector<int64_t>& ksize,
               const std::vector<int64_t>& strides, const std::string& padding);
Output AvgPool(const Scope& s, Input input, const std::vector<int64_t>& ksize,
               const std::vector<int64_t>& strides, const std::string& padding);

// --- random (seed/seed2 as TensorFlow's op-level seeds) ------------------------------
struct RandomAttrs {
  int64_t seed = 0;
  int64_t seed2 = 0;
};
Output RandomUniform(const Scope& s, Input shape, DataType dtype, const RandomAttrs& attrs = {});
Output RandomNormal(const Scope& s, Input shape, DataType dtype, const RandomAttrs& attrs = {});
Output TruncatedNormal(const Scope& s, Input shape, DataType dtype,
                       const RandomAttrs& attrs = {});

// --- resource variables ---------------------------------------------------------------
struct VarHandleAttrs {
  std::string container;
  std::string shared_name;
};
Output VarHandleOp(const Scope& s, DataType dtype, const PartialShape& shape,
                   const VarHandleAttrs& attrs = {});
Output ReadVariableOp(const Scope& s, Input resource, DataType dtype);
Operation AssignVariableOp(const Scope& s, Input resource, Input value);
Operation AssignAddVariableOp(const Scope& s, Input resource, Input value);
Operation AssignSubVariableOp(const Scope& s, Input resource, Input value);
Output VarIsInitializedOp(const Scope& s, Input resource);
Operation DestroyResourceOp(const Scope& s, Input resource, bool ignore_lookup_error = true);

}  // namespace dflow::ops

#endif  // DFLOW_CLIENT_OPS_H_
