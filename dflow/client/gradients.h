// Symbolic gradients of a Scope's graph, as TensorFlow's C++
// AddSymbolicGradients and Python's tf.gradients build them:
//
//   Output loss = ops::Mean(root, ops::Square(root, ops::Sub(root, pred, y)), {0, 1});
//   std::vector<Output> grads;
//   absl::Status s = AddSymbolicGradients(root, loss, {w, b}, &grads);
//   // grads[i] = d(loss)/d(xs[i]), same dtype and shape as xs[i].
//
// Semantics:
// - The result is the gradient of sum_j <grad_ys[j], ys[j]> (grad_ys default
//   to ones): every path from an x to any y counts, including paths through
//   other ys and other xs (total derivatives, as tf.gradients).
// - Only nodes on a path from some x to some y are differentiated, in
//   reverse topological order; gradients meeting at one tensor are summed
//   with AddN. New nodes go under the name scope "gradients/" ("gradients_1/"
//   for a second call, ...), each op's under "gradients/<node>_grad/".
// - Gradients flow only through float, double (and resource) tensors: an
//   integer or bool edge carries none (shapes, indices, comparisons). Ops
//   registered with REGISTER_NO_GRADIENT stop the flow.
// - A node on a path whose op has no gradient function fails the call with
//   InvalidArgument naming the op and the node.
// - An x that no y depends on (or an integer x) gets zeros of its own shape
//   (ZerosLike), as tf.gradients(..., unconnected_gradients="zero"); TF's C++
//   API would fail instead, which makes optimizers over partly-used
//   variables awkward.
// - Resource variables: an x may be a ReadVariableOp output (the common
//   case: the gradient of that read), or the VarHandleOp's resource output,
//   whose gradient is the sum over all its reads (ReadVariableOp's gradient
//   passes to the handle, as in TensorFlow); an unread variable's gradient is
//   zeros of the variable's value.
#ifndef DFLOW_CLIENT_GRADIENTS_H_
#define DFLOW_CLIENT_GRADIENTS_H_

#include <vector>

#include "absl/status/status.h"
#include "dflow/client/scope.h"

namespace dflow {

// Adds the gradients of `ys` with respect to `xs` to the scope's graph;
// `grad_ys` are the gradients flowing into ys (empty: ones of each y's
// shape). On success `grad_xs` holds one gradient per x. Fails when an
// argument is not in the scope's graph, when a node on the path has no
// gradient function, or when the scope already holds an error.
absl::Status AddSymbolicGradients(const Scope& scope, const std::vector<Output>& ys,
                                  const std::vector<Output>& xs, const std::vector<Output>& grad_ys,
                                  std::vector<Output>* grad_xs);

// The gradients of one `loss` (any shape; seeded with ones).
absl::Status AddSymbolicGradients(const Scope& scope, const Output& loss,
                                  const std::vector<Output>& xs, std::vector<Output>* grad_xs);

}  // namespace dflow

#endif  // DFLOW_CLIENT_GRADIENTS_H_
