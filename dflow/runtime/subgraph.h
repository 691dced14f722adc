// Rewriting a placed graph for one Run signature (feeds, fetches, targets):
// fed tensors become _Arg nodes, fetched tensors feed _Retval nodes, and
// everything not needed for the fetches and targets is pruned.
//
//   std::unique_ptr<Graph> g = placed->Clone();
//   RETURN_IF_ERROR(RewriteGraphForExecution(g.get(), {"x:0"}, {"y:0"}, {"train"}, cpu0));
#ifndef DFLOW_RUNTIME_SUBGRAPH_H_
#define DFLOW_RUNTIME_SUBGRAPH_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "dflow/framework/device.h"
#include "dflow/runtime/graph.h"

namespace dflow {

// Feeds and fetches are tensor names ("node:i", or "node" for output 0);
// targets are node names. Feed i becomes an `_Arg` node (attr index = i)
// whose output replaces every data use of that tensor; fetch i becomes a
// `_Retval` node (attr index = i). Both are assigned to `client_device`.
// Then only the nodes needed to compute the _Retvals and targets remain
// (walking back over data and control edges; a fed tensor's producer stays
// only when something else needs it).
// Errors: NotFound naming an unknown feed, fetch or target ("Fetch 'y:0'
// refers to no node"); InvalidArgument for a malformed name, an output index
// out of range, or a tensor fed twice. On error the graph may be modified.
absl::Status RewriteGraphForExecution(Graph* g, const std::vector<std::string>& feeds,
                                      const std::vector<std::string>& fetches,
                                      const std::vector<std::string>& targets,
                                      const Device* client_device);

// The distributed master's variant: feed i becomes a `_Recv` and fetch i a
// `_Send`, both client-terminated on `client_device`, keyed by the tensor's
// name as given (ClientTerminatedKey), so the worker hosting
// `client_device` takes feeds from RunGraph's `send` and returns fetches in
// its `recv`. Same pruning and errors as above.
absl::Status RewriteGraphForRendezvous(Graph* g, const std::vector<std::string>& feeds,
                                       const std::vector<std::string>& fetches,
                                       const std::vector<std::string>& targets,
                                       const Device& client_device);

// The rendezvous key of a client-terminated feed or fetch `tensor_name`.
std::string ClientTerminatedKey(const Device& client_device, const std::string& tensor_name);

// Replaces each node whose outputs nothing reads as data, only waits for
// over control edges, by a NoOp of the same name, device and colocation with
// the same inputs as control inputs, repeating for the inputs it frees. Kept:
// the nodes in `keep`, stateful ops, ops that check values or steer control
// flow or call functions, nodes taking references, and nodes reading a
// Switch (whose outputs differ in deadness; a control edge cannot say which). Grappler's dependency
// optimizer does the same in TensorFlow; the common case is the gradient of
// a MatMul with respect to a fed input, built and then grouped by an
// optimizer's `gate_gradients`: one matmul a training step computed for
// nothing. Both Rewrite functions above end with it.
absl::Status ReplaceUnreadComputationsWithNoOps(Graph* g, const std::vector<Node*>& keep);

// Removes every node from which none of `roots` can be reached over data
// and control edges (the roots stay).
void PruneForReverseReachability(Graph* g, const std::vector<Node*>& roots);

}  // namespace dflow

#endif  // DFLOW_RUNTIME_SUBGRAPH_H_
