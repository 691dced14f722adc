#include "dflow/client/ops.h"

#include "dflow/client/op_builder.h"

namespace dflow::ops {
namespace {

tensorflow::TensorShapeProto ShapeProto(const PartialShape& shape) {
  tensorflow::TensorShapeProto p;
  shape.AsProto(&p);
  return p;
}

Output Unary(const Scope& s, const char* op, Input x) {
  return OpBuilder(s, op).Input(x).Finish();
}

Output Binary(const Scope& s, const char* op, Input x, Input y) {
  return OpBuilder(s, op).Input(x).Input(y).Finish();
}

Output Reduce(const Scope& s, const char* op, Input input, Input axis, const ReduceAttrs& a) {
  return OpBuilder(s, op).Input(input).Input(axis).Attr("keep_dims", a.keep_dims).Finish();
}

Output Random(const Scope& s, const char* op, Input shape, DataType dtype,
              const RandomAttrs& a) {
  return OpBuilder(s, op)
      .Input(shape)
      .Attr("dtype", dtype)
      .Attr("seed", a.seed)
      .Attr("seed2", a.seed2)
      .Finish();
}

Operation Assign(const Scope& s, const char* op, Input resource, Input value) {
  // "dtype" is the value's type; OpBuilder fills it from the input.
  return OpBuilder(s, op).Input(resource).Input(value).FinishOp();
}

XentOutputs Xent(const Scope& s, const char* op, Input features, Input labels) {
  OutputList out = OpBuilder(s, op).Input(features).Input(labels).FinishAll();
  if (out.size() != 2) return {};
  return {out[0], out[1]};
}

Output Pool(const Scope& s, const char* op, Input input, const std::vector<int64_t>& ksize,
            const std::vector<int64_t>& strides, const std::string& padding) {
  return OpBuilder(s, op)
      .Input(input)
      .Attr("ksize", ksize)
      .Attr("strides", strides)
      .Attr("padding", padding)
      .Finish();
}

}  // namespace

Output Const(const Scope& s, const Tensor& value) {
  return OpBuilder(s, "Const").Attr("dtype", value.dtype()).Attr("value", value).Finish();
}
Output Const(const Scope& s, const Input& value) {
  if (!value.is_const()) return Identity(s, value);
  return Const(s, value.tensor());
}
Output Placeholder(const Scope& s, DataType dtype, const PlaceholderAttrs& attrs) {
  return OpBuilder(s, "Placeholder")
      .Attr("dtype", dtype)
      .Attr("shape", ShapeProto(attrs.shape))
      .Finish();
}
Output PlaceholderWithDefault(const Scope& s, Input input, const PartialShape& shape) {
  return OpBuilder(s, "PlaceholderWithDefault")
      .Input(input)
      .Attr("shape", ShapeProto(shape))
      .Finish();
}
Output Identity(const Scope& s, Input input) { return Unary(s, "Identity", input); }
OutputList IdentityN(const Scope& s, const InputList& inputs) {
  return OpBuilder(s, "IdentityN").InputList(inputs).FinishAll();
}
Operation NoOp(const Scope& s) { return OpBuilder(s, "NoOp").FinishOp(); }

Output Shape(const Scope& s, Input input, DataType out_type) {
  return OpBuilder(s, "Shape").Input(input).Attr("out_type", out_type).Finish();
}
Output Size(const Scope& s, Input input, DataType out_type) {
  return OpBuilder(s, "Size").Input(input).Attr("out_type", out_type).Finish();
}
Output Rank(const Scope& s, Input input) { return Unary(s, "Rank", input); }
Output Reshape(const Scope& s, Input tensor, Input shape) {
  return Binary(s, "Reshape", tensor, shape);
}
Output ExpandDims(const Scope& s, Input input, Input axis) {
  return Binary(s, "ExpandDims", input, axis);
}
Output Squeeze(const Scope& s, Input input, const std::vector<int64_t>& axis) {
  return OpBuilder(s, "Squeeze").Input(input).Attr("squeeze_dims", axis).Finish();
}
Output Fill(const Scope& s, Input dims, Input value) { return Binary(s, "Fill", dims, value); }
Output ZerosLike(const Scope& s, Input x) { return Unary(s, "ZerosLike", x); }
Output OnesLike(const Scope& s, Input x) { return Unary(s, "OnesLike", x); }
Output Cast(const Scope& s, Input x, DataType dst_type) {
  return OpBuilder(s, "Cast").Input(x).Attr("DstT", dst_type).Finish();
}
Output Stack(const Scope& s, const InputList& values, int64_t axis) {
  return OpBuilder(s, "Pack").InputList(values).Attr("axis", axis).Finish();
}
Output Concat(const Scope& s, const InputList& values, Input axis) {
  return OpBuilder(s, "ConcatV2").InputList(values).Input(axis).Finish();
}
Output Slice(const Scope& s, Input input, Input begin, Input size) {
  return OpBuilder(s, "Slice").Input(input).Input(begin).Input(size).Finish();
}
Output StridedSlice(const Scope& s, Input input, Input begin, Input end, Input strides,
                    const StridedSliceAttrs& a) {
  return OpBuilder(s, "StridedSlice")
      .Input(input)
      .Input(begin)
      .Input(end)
      .Input(strides)
      .Attr("begin_mask", a.begin_mask)
      .Attr("end_mask", a.end_mask)
      .Attr("ellipsis_mask", a.ellipsis_mask)
      .Attr("new_axis_mask", a.new_axis_mask)
      .Attr("shrink_axis_mask", a.shrink_axis_mask)
      .Finish();
}
Output GatherV2(const Scope& s, Input params, Input indices, Input axis, int64_t batch_dims) {
  return OpBuilder(s, "GatherV2")
      .Input(params)
      .Input(indices)
      .Input(axis)
      .Attr("batch_dims", batch_dims)
      .Finish();
}
Output Transpose(const Scope& s, Input x, Input perm) { return Binary(s, "Transpose", x, perm); }
Output Tile(const Scope& s, Input input, Input multiples) {
  return Binary(s, "Tile", input, multiples);
}
Output Range(const Scope& s, Input start, Input limit, Input delta) {
  return OpBuilder(s, "Range").Input(start).Input(limit).Input(delta).Finish();
}

Output Add(const Scope& s, Input x, Input y) { return Binary(s, "AddV2", x, y); }
Output AddN(const Scope& s, const InputList& inputs) {
  return OpBuilder(s, "AddN").InputList(inputs).Finish();
}
Output Sub(const Scope& s, Input x, Input y) { return Binary(s, "Sub", x, y); }
Output Mul(const Scope& s, Input x, Input y) { return Binary(s, "Mul", x, y); }
Output Div(const Scope& s, Input x, Input y) { return Binary(s, "RealDiv", x, y); }
Output FloorDiv(const Scope& s, Input x, Input y) { return Binary(s, "FloorDiv", x, y); }
Output FloorMod(const Scope& s, Input x, Input y) { return Binary(s, "FloorMod", x, y); }
Output Maximum(const Scope& s, Input x, Input y) { return Binary(s, "Maximum", x, y); }
Output Minimum(const Scope& s, Input x, Input y) { return Binary(s, "Minimum", x, y); }
Output Neg(const Scope& s, Input x) { return Unary(s, "Neg", x); }
Output Abs(const Scope& s, Input x) { return Unary(s, "Abs", x); }
Output Square(const Scope& s, Input x) { return Unary(s, "Square", x); }
Output Sqrt(const Scope& s, Input x) { return Unary(s, "Sqrt", x); }
Output Rsqrt(const Scope& s, Input x) { return Unary(s, "Rsqrt", x); }
Output Exp(const Scope& s, Input x) { return Unary(s, "Exp", x); }
Output Log(const Scope& s, Input x) { return Unary(s, "Log", x); }
Output Tanh(const Scope& s, Input x) { return Unary(s, "Tanh", x); }
Output Sin(const Scope& s, Input x) { return Unary(s, "Sin", x); }
Output Cos(const Scope& s, Input x) { return Unary(s, "Cos", x); }
Output Sigmoid(const Scope& s, Input x) { return Unary(s, "Sigmoid", x); }
Output Equal(const Scope& s, Input x, Input y) { return Binary(s, "Equal", x, y); }
Output NotEqual(const Scope& s, Input x, Input y) { return Binary(s, "NotEqual", x, y); }
Output Greater(const Scope& s, Input x, Input y) { return Binary(s, "Greater", x, y); }
Output Less(const Scope& s, Input x, Input y) { return Binary(s, "Less", x, y); }
Output GreaterEqual(const Scope& s, Input x, Input y) { return Binary(s, "GreaterEqual", x, y); }
Output LessEqual(const Scope& s, Input x, Input y) { return Binary(s, "LessEqual", x, y); }
Output LogicalNot(const Scope& s, Input x) { return Unary(s, "LogicalNot", x); }
Output LogicalAnd(const Scope& s, Input x, Input y) { return Binary(s, "LogicalAnd", x, y); }
Output Where(const Scope& s, Input condition, Input x, Input y) {
  return OpBuilder(s, "SelectV2").Input(condition).Input(x).Input(y).Finish();
}
Output MatMul(const Scope& s, Input a, Input b, const MatMulAttrs& attrs) {
  return OpBuilder(s, "MatMul")
      .Input(a)
      .Input(b)
      .Attr("transpose_a", attrs.transpose_a)
      .Attr("transpose_b", attrs.transpose_b)
      .Finish();
}
Output Sum(const Scope& s, Input input, Input axis, const ReduceAttrs& a) {
  return Reduce(s, "Sum", input, axis, a);
}
Output Mean(const Scope& s, Input input, Input axis, const ReduceAttrs& a) {
  return Reduce(s, "Mean", input, axis, a);
}
Output Max(const Scope& s, Input input, Input axis, const ReduceAttrs& a) {
  return Reduce(s, "Max", input, axis, a);
}
Output Prod(const Scope& s, Input input, Input axis, const ReduceAttrs& a) {
  return Reduce(s, "Prod", input, axis, a);
}
Output ArgMax(const Scope& s, Input input, Input dimension, DataType output_type) {
  return OpBuilder(s, "ArgMax")
      .Input(input)
      .Input(dimension)
      .Attr("output_type", output_type)
      .Finish();
}

Output Relu(const Scope& s, Input features) { return Unary(s, "Relu", features); }
Output BiasAdd(const Scope& s, Input value, Input bias) {
  return Binary(s, "BiasAdd", value, bias);
}
Output Softmax(const Scope& s, Input logits) { return Unary(s, "Softmax", logits); }
Output LogSoftmax(const Scope& s, Input logits) { return Unary(s, "LogSoftmax", logits); }
XentOutputs SparseSoftmaxCrossEntropyWithLogits(const Scope& s, Input features, Input labels) {
  return Xent(s, "SparseSoftmaxCrossEntropyWithLogits", features, labels);
}
XentOutputs SoftmaxCrossEntropyWithLogits(const Scope& s, Input features, Input labels) {
  return Xent(s, "SoftmaxCrossEntropyWithLogits", features, labels);
}
Output Conv2D(const Scope& s, Input input, Input filter, const std::vector<int64_t>& strides,
              const std::string& padding) {
  return OpBuilder(s, "Conv2D")
      .Input(input)
      .Input(filter)
      .Attr("strides", strides)
      .Attr("padding", padding)
      .Finish();
}
Output MaxPool(const Scope& s, Input input, const std::vector<int64_t>& ksize,
               const std::vector<int64_t>& strides, const std::string& padding) {
  return Pool(s, "MaxPool", input, ksize, strides, padding);
}
Output AvgPool(const Scope& s, Input input, const std::vector<int64_t>& ksize,
               const std::vector<int64_t>& strides, const std::string& padding) {
  return Pool(s, "AvgPool", input, ksize, strides, padding);
}

Output RandomUniform(const Scope& s, Input shape, DataType dtype, const RandomAttrs& a) {
  return Random(s, "RandomUniform", shape, dtype, a);
}
Output RandomNormal(const Scope& s, Input shape, DataType dtype, const RandomAttrs& a) {
  return Random(s, "RandomStandardNormal", shape, dtype, a);
}
Output TruncatedNormal(const Scope& s, Input shape, DataType dtype, const RandomAttrs& a) {
  return Random(s, "TruncatedNormal", shape, dtype, a);
}

Output VarHandleOp(const Scope& s, DataType dtype, const PartialShape& shape,
                   const VarHandleAttrs& a) {
  return OpBuilder(s, "VarHandleOp")
      .Attr("dtype", dtype)
      .Attr("shape", ShapeProto(shape))
      .Attr("container", a.container)
      .Attr("shared_name", a.shared_name)
      .Finish();
}
Output ReadVariableOp(const Scope& s, Input resource, DataType dtype) {
  return OpBuilder(s, "ReadVariableOp").Input(resource).Attr("dtype", dtype).Finish();
}
Operation AssignVariableOp(const Scope& s, Input resource, Input value) {
  return Assign(s, "AssignVariableOp", resource, value);
}
Operation AssignAddVariableOp(const Scope& s, Input resource, Input value) {
  return Assign(s, "AssignAddVariableOp", resource, value);
}
Operation AssignSubVariableOp(const Scope& s, Input resource, Input value) {
  return Assign(s, "AssignSubVariableOp", resource, value);
}
Output VarIsInitializedOp(const Scope& s, Input resource) {
  return Unary(s, "VarIsInitializedOp", resource);
}
Operation DestroyResourceOp(const Scope& s, Input resource, bool ignore_lookup_error) {
  return OpBuilder(s, "DestroyResourceOp")
      .Input(resource)
      .Attr("ignore_lookup_error", ignore_lookup_error)
      .FinishOp();
}

}  // namespace dflow::ops
