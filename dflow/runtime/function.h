// Functions in a graph: the bodies in a GraphDef's library, called by the
// functional ops TensorFlow 2 writes into graphs (tf.cond -> If or
// StatelessIf, tf.function -> PartitionedCall / StatefulPartitionedCall).
//
// dflow does not run functions as separate executors. Like TensorFlow's own
// lowering pass, it rewrites them into the graph before placement, so their
// nodes are placed, partitioned and run like any other:
//   - a call's body is inlined (arguments wired to the call's inputs);
//   - an If becomes Switch nodes on its inputs, both branches inlined behind
//     them, and a Merge per output; the branch not taken runs dead;
//   - a While becomes a TensorFlow 1.x loop (Enter, Merge, LoopCond, Switch,
//     Exit, NextIteration; see control_flow.h) around its inlined condition
//     and body, in a frame named after the While node.
// The call node's name then belongs to an IdentityN over its results, so
// fetches and control dependencies naming it keep working.
// Ops that run a function themselves (a dataset's map function, an iterator's
// dataset factory: dflow/data) keep their call: the functions each reaches are
// copied into its kFunctionLibraryAttr, which travels with the node through
// partitioning, and FunctionRunner (function_runner.h) runs them.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<Graph> g, GraphFromGraphDef(def));
#ifndef DFLOW_RUNTIME_FUNCTION_H_
#define DFLOW_RUNTIME_FUNCTION_H_

#include <memory>

#include "absl/status/statusor.h"
#include "dflow/proto/function.pb.h"
#include "dflow/proto/graph.pb.h"
#include "dflow/runtime/graph.h"

namespace dflow {

// The attr holding a serialized FunctionDefLibrary of the functions a node's
// func attrs reach.
inline constexpr char kFunctionLibraryAttr[] = "_dflow_function_library";

// Rewrites every If, StatelessIf, While, StatelessWhile, PartitionedCall and
// StatefulPartitionedCall in *graph (and those their bodies contain) as
// described above. Errors name the call node and the function: a function missing from `library`, an
// argument count or type that disagrees with the call, a non-bool If or
// While condition, recursion deeper than 32 calls.
absl::Status LowerFunctionalOps(const tensorflow::FunctionDefLibrary& library, Graph* graph);

// Graph::FromGraphDef (of def with its NCHW convolutions and pools rewritten
// to NHWC: runtime/layout_rewrite.h) followed by LowerFunctionalOps with
// def.library().
absl::StatusOr<std::unique_ptr<Graph>> GraphFromGraphDef(const tensorflow::GraphDef& def);

}  // namespace dflow

#endif  // DFLOW_RUNTIME_FUNCTION_H_
