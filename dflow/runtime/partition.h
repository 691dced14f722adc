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

// Before Partition: moves each NoOp whose edges (at least one input; all of
// them control edges) all join it to nodes of one other location onto the
// device of its first input, where it relays without crossing: each such
// NoOp was two cut control edges, a round trip between tasks every step.
// Optimizers make one per training step in a between-graph program: the
// group that gathers the ps-side updates (and Adam's beta-power updates), on
// the worker, before the ps-side global step increment. A NoOp does nothing
// but order, so where it runs changes no result. Returns how many moved.
int ColocateControlRelays(Graph* g, const std::function<std::string(const Node*)>& node_to_loc);

}  // namespace dflow

#endif  // DFLOW_RUNTIME_PARTITION_H_
