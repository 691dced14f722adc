// Loop frames: which while loop (TensorFlow 1.x frame) each node of a graph
// runs in. An Enter node feeds the frame named by its frame_name attr, child
// of the Enter's own frame; an Exit feeds its frame's parent; every other
// node runs in the frame of its inputs. A graph without Enter nodes has one
// frame, the root.
//
//   ASSIGN_OR_RETURN(ControlFlowInfo cf, BuildControlFlowInfo(graph));
//   const LoopFrame& f = cf.frames[cf.frame_of[node->id()]];
#ifndef DFLOW_RUNTIME_CONTROL_FLOW_H_
#define DFLOW_RUNTIME_CONTROL_FLOW_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dflow/runtime/graph.h"

namespace dflow {

struct LoopFrame {
  std::string name;  // frame_name; empty for the root frame.
  int parent = -1;   // Index in ControlFlowInfo::frames; -1 for the root.
  int parallel_iterations = 1;
  int num_enters = 0;  // Enter nodes feeding this frame.
};

struct ControlFlowInfo {
  std::vector<LoopFrame> frames;  // frames[0] is the root frame.
  std::vector<int> frame_of;      // By node id; -1 for removed ids.
  std::vector<int> entered;       // By node id: the frame an Enter feeds, else -1.
};

// InvalidArgument naming the node when a node has inputs from two frames, an
// Exit or NextIteration sits in the root frame, a frame name has two parents,
// Enter nodes of one frame disagree on parallel_iterations, or a node cannot
// be reached from the nodes without inputs.
absl::StatusOr<ControlFlowInfo> BuildControlFlowInfo(const Graph& g);

// Loops whose nodes run on more than one device, as TensorFlow's partitioner
// runs them: each device that an edge inside a loop frame reaches from
// another device gets, once per frame, a control loop
//
//   Const -> Enter -> Merge -> Switch(pred: the frame's LoopCond) -> NextIteration -> Merge
//
// (a nested frame's Enter reads its parent's control-loop Merge on that
// device instead of the Const), and that edge's destination a control edge
// from the control loop's Merge. The control loop runs the frame's
// iterations on that device; partitioning gives the _Recv of a cut edge the
// destination's control-loop Merges as control inputs, so it runs once per
// iteration, in that iteration's frame (the rendezvous key names both).
// Control-loop nodes are named "_cloop/..."; a graph without such loops is
// unchanged. REQUIRES: `g` is placed (assigned devices set).
// InvalidArgument naming the frame when a frame spanning devices has no
// LoopCond, or more than one.
absl::Status AddControlLoops(Graph* g);

// A Merge that AddControlLoops added.
bool IsControlLoopMerge(const Node& n);

// An empty float Const on `device`: the value a control signal carries (a
// cut control edge's _Send, a control loop's start).
tensorflow::NodeDef ControlSignalConst(const std::string& name, const std::string& device);

}  // namespace dflow

#endif  // DFLOW_RUNTIME_CONTROL_FLOW_H_
