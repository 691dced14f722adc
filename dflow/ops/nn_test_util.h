// Test helpers shared by the nn, conv and pooling op tests: deterministic
// input patterns (repeated in tests/data/gen_nn_reference.py, which computes
// the expected outputs with TensorFlow) and a shape-function runner.
#ifndef DFLOW_OPS_NN_TEST_UTIL_H_
#define DFLOW_OPS_NN_TEST_UTIL_H_

#include <string>
#include <vector>

#include "dflow/framework/op_def.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/framework/status.h"
#include "dflow/framework/tensor.h"
#include "gtest/gtest.h"

// `NN_ASSERT_OK_AND_ASSIGN(auto out, t.Run());` fails the test on an error.
#define NN_ASSERT_OK_AND_ASSIGN(lhs, expr) \
  NN_ASSERT_OK_AND_ASSIGN_IMPL(DFLOW_CONCAT(nn_result_, __LINE__), lhs, expr)
#define NN_ASSERT_OK_AND_ASSIGN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  ASSERT_TRUE(tmp.ok()) << tmp.status();             \
  lhs = std::move(tmp).value()

namespace dflow {

// in[i] = ((7 i) mod 11 - 5) / 4: quarters in [-1.25, 1.25].
template <typename T = float>
Tensor Pattern(const TensorShape& shape) {
  Tensor t(DataTypeToEnum<T>::value, shape);
  auto v = t.flat<T>();
  for (int64_t i = 0; i < t.NumElements(); ++i) v[i] = static_cast<T>((i * 7 % 11 - 5) / 4.0);
  return t;
}

// f[i] = ((5 i) mod 9 - 4) / 2: halves in [-2, 2].
template <typename T = float>
Tensor FilterPattern(const TensorShape& shape) {
  Tensor t(DataTypeToEnum<T>::value, shape);
  auto v = t.flat<T>();
  for (int64_t i = 0; i < t.NumElements(); ++i) v[i] = static_cast<T>((i * 5 % 9 - 4) / 2.0);
  return t;
}

// Runs the registered shape function of `node` (defaults added) on `inputs`.
inline absl::StatusOr<std::vector<PartialShape>> InferNodeShapes(
    tensorflow::NodeDef node, const std::vector<PartialShape>& inputs,
    const DataTypeVector& input_types = {}) {
  ASSIGN_OR_RETURN(const OpDef* op, OpRegistry::Global()->LookUp(node.op()));
  AddDefaultAttrs(*op, &node);
  DataTypeVector in_types, out_types;
  RETURN_IF_ERROR(InOutTypesForNode(node, *op, &in_types, &out_types));
  if (!input_types.empty()) in_types = input_types;
  std::vector<const Tensor*> tensors(inputs.size(), nullptr);
  return InferShapes(node, *op, inputs, tensors, in_types, static_cast<int>(out_types.size()));
}

}  // namespace dflow

#endif  // DFLOW_OPS_NN_TEST_UTIL_H_
