#include "dflow/runtime/control_flow.h"

#include <deque>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "dflow/framework/attr_util.h"
#include "dflow/framework/status.h"

namespace dflow {
namespace {

absl::Status NodeError(const Node& n, absl::string_view message) {
  return absl::InvalidArgumentError(
      absl::StrCat("[", n.type_string(), " '", n.name(), "'] ", message));
}

const std::string& FrameLabel(const ControlFlowInfo& cf, int frame) {
  static const std::string kRoot = "the root frame";
  return frame == 0 ? kRoot : cf.frames[frame].name;
}

}  // namespace

absl::StatusOr<ControlFlowInfo> BuildControlFlowInfo(const Graph& g) {
  ControlFlowInfo cf;
  cf.frames.push_back(LoopFrame{});
  cf.frame_of.assign(g.num_node_ids(), -1);
  cf.entered.assign(g.num_node_ids(), -1);
  absl::flat_hash_map<std::string, int> by_name;
  // Breadth first from the nodes without inputs, which run in the root frame;
  // `from` remembers the input that set a node's frame, for error messages.
  std::vector<const Node*> from(g.num_node_ids(), nullptr);
  std::deque<const Node*> queue;
  for (const Node* n : g.nodes()) {
    if (n->in_edges().empty()) {
      cf.frame_of[n->id()] = 0;
      queue.push_back(n);
    }
  }
  while (!queue.empty()) {
    const Node* n = queue.front();
    queue.pop_front();
    const int frame = cf.frame_of[n->id()];
    int out_frame = frame;
    if (n->IsEnter()) {
      std::string name;
      int64_t parallel = 10;
      RETURN_IF_ERROR(GetNodeAttr(n->def(), "frame_name", &name));
      RETURN_IF_ERROR(GetNodeAttr(n->def(), "parallel_iterations", &parallel));
      if (name.empty()) return NodeError(*n, "has an empty frame_name");
      if (parallel < 1) return NodeError(*n, "parallel_iterations must be at least 1");
      auto [it, added] = by_name.try_emplace(name, static_cast<int>(cf.frames.size()));
      if (added) {
        cf.frames.push_back(LoopFrame{name, frame, static_cast<int>(parallel), 0});
      }
      LoopFrame& child = cf.frames[it->second];
      if (child.parent != frame) {
        return NodeError(*n, absl::StrCat("enters frame '", name, "' from ",
                                          FrameLabel(cf, frame), ", but other Enter nodes enter it from ",
                                          FrameLabel(cf, child.parent)));
      }
      if (child.parallel_iterations != parallel) {
        return NodeError(*n, absl::StrCat("has parallel_iterations ", parallel,
                                          " but another Enter of frame '", name, "' has ",
                                          child.parallel_iterations));
      }
      ++child.num_enters;
      out_frame = it->second;
      cf.entered[n->id()] = out_frame;
    } else if (n->IsExit()) {
      if (frame == 0) return NodeError(*n, "is an Exit outside any loop");
      out_frame = cf.frames[frame].parent;
    } else if (n->IsNextIteration() && frame == 0) {
      return NodeError(*n, "is a NextIteration outside any loop");
    }
    for (const Edge* e : n->out_edges()) {
      const Node* dst = e->dst;
      int& dst_frame = cf.frame_of[dst->id()];
      if (dst_frame < 0) {
        dst_frame = out_frame;
        from[dst->id()] = n;
        queue.push_back(dst);
      } else if (dst_frame != out_frame) {
        return NodeError(*dst, absl::StrCat("has inputs from two loop frames: '", n->name(),
                                            "' (", FrameLabel(cf, out_frame), ") and '",
                                            from[dst->id()]->name(), "' (",
                                            FrameLabel(cf, dst_frame), ")"));
      }
    }
  }
  for (const Node* n : g.nodes()) {
    if (cf.frame_of[n->id()] < 0) {
      return NodeError(*n, "cannot be reached from any node without inputs (a cycle "
                           "through NextIteration alone?)");
    }
  }
  return cf;
}

}  // namespace dflow
