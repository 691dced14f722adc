// Partition: splits a placed graph into one GraphDef per location (a device,
// or a task for the distributed master). Every data edge between locations
// becomes a _Send on the source side and a _Recv on the destination side;
// every control edge between locations becomes a dummy Const on the source
// side (control-dependent on the source node) sent to a _Recv that is a
// control input of the destination node.
//
//   PartitionOptions opts;
//   opts.node_to_loc = [](const Node* n) { return n->assigned_device_name(); };
//   opts.get_incarnation = [&](const std::string& d) { return mgr.Lookup(d)->incarnation(); };
//   ASSIGN_OR_RETURN(auto parts, Partition(*graph, opts));
#ifndef DFLOW_RUNTIME_PARTITION_H_
#define DFLOW_RUNTIME_PARTITION_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "dflow/proto/graph.pb.h"
#include "dflow/runtime/graph.h"

namespace dflow {

struct PartitionOptions {
  // The partition a node belongs to. Unset: its assigned device.
  std::function<std::string(const Node*)> node_to_loc;
  // The incarnation of a device, written into _Send/_Recv. Unset: 0.
  std::function<uint64_t(const std::string& device)> get_incarnation;
  // A fresh node name starting with `prefix`, unique in every partition.
  // Unset: "<prefix>/_<n>" with a counter, skipping names of the graph.
  std::function<std::string(const std::string& prefix)> new_name;
};

// One GraphDef per location, keyed by location. Node devices are the
// assigned devices (else the requested ones); versions are kept. One
// _Send/_Recv pair serves all consumers of a tensor at one destination; its
// tensor_name is "edge_<edge id>_<source node>", its send/recv devices the
// devices of the producer and of the first consumer. InvalidArgument when a
// node has no location or device, or a ref input is fed across locations.
// A while loop may span locations once AddControlLoops (control_flow.h) gave
// it a control loop on each device its cut edges reach: a cut edge's _Recv
// then runs once per iteration, after the destination's control-loop Merge.
absl::StatusOr<std::map<std::string, tensorflow::GraphDef>> Partition(const Graph& g,
                                                                      const PartitionOptions& opts);

// Before Partition: moves onto another location the nodes that only cost
// transfers where they are, each to the device of its first neighbour there:
//  - a NoOp whose edges (at least one input; all control edges) all join it
//    to nodes of one other location: it relays there without crossing, where
//    it was two cut control edges, a round trip between tasks every step;
//  - a Const without inputs whose (data) consumers all sit in one other
//    location, onto a device of the same type: its value is made there
//    instead of sent.
// Decided in topological order (loops' back edges aside); a graph with another
// cycle is left as placed.
// Optimizers make both in a between-graph program: the group that gathers
// the ps-side updates (and Adam's beta-power updates) sits on the worker
// before the ps-side global step increment, and the hyperparameters (Adam's
// learning rate, betas, epsilon) are worker-side constants the ps-side
// updates read. Neither node has an effect of its own (a NoOp only orders, a
// Const is its value), so no result changes. Returns how many moved.
int ColocateRelaysAndConstants(Graph* g, const std::function<std::string(const Node*)>& node_to_loc);

}  // namespace dflow

#endif  // DFLOW_RUNTIME_PARTITION_H_
