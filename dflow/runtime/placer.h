// Placer: assigns every node of a graph to one device, following
// TensorFlow's rules:
//  - a requested device (NodeDef.device, possibly partial: "/job:ps",
//    "/device:CPU:1", "/cpu:0") must match a device with a kernel for the node;
//  - colocation groups are placed together: nodes whose "_class" attr lists
//    "loc:@other", and the two ends of a DT_RESOURCE edge or of an edge into a
//    ref input (a variable and the ops that update it); their requests merge
//    field by field ("loc:@" naming a node not in the graph, e.g. pruned, is
//    ignored);
//  - among matching devices, GPU beats CPU when every node of the group has a
//    GPU kernel; then the default device, then its task, then the lowest name;
//  - unconstrained nodes go to `default_device`, except a generator (no
//    inputs, one output feeding one consumer, e.g. a Const), which joins its
//    consumer's device when it has a kernel there;
//  - with soft placement an impossible device type or id is dropped instead
//    of failing.
// A node already carrying an assigned device keeps it.
#ifndef DFLOW_RUNTIME_PLACER_H_
#define DFLOW_RUNTIME_PLACER_H_

#include <vector>

#include "absl/status/status.h"
#include "dflow/framework/device.h"
#include "dflow/runtime/graph.h"

namespace dflow {

struct PlacerOptions {
  bool allow_soft_placement = false;
  // Prints "name: (Op): /job:.../device:CPU:0" per node to stderr.
  bool log_device_placement = false;
};

// Sets every node's assigned device name to one of `devices`.
// `default_device` (may be null) receives unconstrained nodes. Errors
// (InvalidArgument) name the node, the requested device and the available
// devices; on error the graph may be partly assigned.
absl::Status Place(Graph* graph, const std::vector<Device*>& devices,
                   const Device* default_device, const PlacerOptions& opts);

}  // namespace dflow

#endif  // DFLOW_RUNTIME_PLACER_H_
