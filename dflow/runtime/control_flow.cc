#include "dflow/runtime/control_flow.h"

#include <deque>
#include <map>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
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

namespace {

constexpr char kControlLoopPrefix[] = "_cloop/";

class ControlLoopBuilder {
 public:
  ControlLoopBuilder(Graph* g, ControlFlowInfo cf) : g_(g), cf_(std::move(cf)) {}

  absl::Status Run() {
    RETURN_IF_ERROR(FindLoopConds());
    // Edges first: adding nodes and edges while walking them would not be safe.
    std::vector<std::pair<Node*, int>> cut;  // (destination, frame)
    for (Node* n : g_->nodes()) {
      const int frame = cf_.frame_of[n->id()];
      if (frame <= 0) continue;
      for (const Edge* e : n->in_edges()) {
        if (e->src->assigned_device_name() != n->assigned_device_name()) {
          cut.emplace_back(n, frame);
          break;
        }
      }
    }
    for (auto [dst, frame] : cut) {
      ASSIGN_OR_RETURN(Node * merge, MergeFor(frame, dst->assigned_device_name()));
      g_->AddControlEdge(merge, dst);
    }
    return absl::OkStatus();
  }

 private:
  absl::Status FindLoopConds() {
    loop_cond_.assign(cf_.frames.size(), nullptr);
    for (Node* n : g_->nodes()) {
      if (n->type_string() != "LoopCond") continue;
      Node*& cond = loop_cond_[cf_.frame_of[n->id()]];
      if (cond != nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("[Partition] loop '", cf_.frames[cf_.frame_of[n->id()]].name,
                         "' has two LoopCond nodes: '", cond->name(), "' and '", n->name(), "'"));
      }
      cond = n;
    }
    return absl::OkStatus();
  }

  std::string NewName(const std::string& frame, absl::string_view what) {
    std::string name;
    do {
      name = absl::StrCat(kControlLoopPrefix, frame, "/", counter_++, "/", what);
    } while (g_->FindNode(name) != nullptr);
    return name;
  }

  absl::StatusOr<Node*> NewNode(const std::string& name, const std::string& op,
                                const std::string& device, const LoopFrame& frame) {
    tensorflow::NodeDef def;
    if (op == "Const") {
      def = ControlSignalConst(name, device);
    } else {
      def.set_name(name);
      def.set_op(op);
      def.set_device(device);
      SetAttr(&def, "T", DT_FLOAT);
    }
    if (op == "Enter") {
      SetAttr(&def, "frame_name", frame.name);
      SetAttr(&def, "is_constant", false);
      SetAttr(&def, "parallel_iterations", static_cast<int64_t>(frame.parallel_iterations));
    }
    if (op == "Merge") SetAttr(&def, "N", 2);
    ASSIGN_OR_RETURN(Node * n, g_->AddNode(std::move(def)));
    n->set_assigned_device_name(device);
    return n;
  }

  // The Merge of `frame`'s control loop on `device`, built on first use.
  absl::StatusOr<Node*> MergeFor(int frame, const std::string& device) {
    auto it = merges_.find({frame, device});
    if (it != merges_.end()) return it->second;
    const LoopFrame& f = cf_.frames[frame];
    Node* cond = loop_cond_[frame];
    if (cond == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "[Partition] loop '", f.name, "' runs on several devices but has no LoopCond"));
    }
    Node* start;
    if (f.parent == 0) {
      ASSIGN_OR_RETURN(start, NewNode(NewName(f.name, "start"), "Const", device, f));
    } else {
      ASSIGN_OR_RETURN(start, MergeFor(f.parent, device));
    }
    ASSIGN_OR_RETURN(Node * enter, NewNode(NewName(f.name, "enter"), "Enter", device, f));
    ASSIGN_OR_RETURN(Node * merge, NewNode(NewName(f.name, "merge"), "Merge", device, f));
    ASSIGN_OR_RETURN(Node * sw, NewNode(NewName(f.name, "switch"), "Switch", device, f));
    ASSIGN_OR_RETURN(Node * next, NewNode(NewName(f.name, "next"), "NextIteration", device, f));
    g_->AddEdge(start, 0, enter, 0);
    g_->AddEdge(enter, 0, merge, 0);
    g_->AddEdge(next, 0, merge, 1);
    g_->AddEdge(merge, 0, sw, 0);
    g_->AddEdge(cond, 0, sw, 1);
    g_->AddEdge(sw, 1, next, 0);
    // The predicate's _Recv, when the LoopCond is elsewhere, runs per iteration.
    if (cond->assigned_device_name() != device) g_->AddControlEdge(merge, sw);
    merges_.emplace(std::make_pair(frame, device), merge);
    return merge;
  }

  Graph* g_;
  const ControlFlowInfo cf_;
  std::vector<Node*> loop_cond_;  // By frame.
  std::map<std::pair<int, std::string>, Node*> merges_;
  int counter_ = 0;
};

}  // namespace

absl::Status AddControlLoops(Graph* g) {
  ASSIGN_OR_RETURN(ControlFlowInfo cf, BuildControlFlowInfo(*g));
  if (cf.frames.size() == 1) return absl::OkStatus();
  return ControlLoopBuilder(g, std::move(cf)).Run();
}

tensorflow::NodeDef ControlSignalConst(const std::string& name, const std::string& device) {
  tensorflow::NodeDef def;
  def.set_name(name);
  def.set_op("Const");
  def.set_device(device);
  SetAttr(&def, "dtype", DT_FLOAT);
  tensorflow::TensorProto value;
  value.set_dtype(DT_FLOAT);
  value.mutable_tensor_shape()->add_dim()->set_size(0);
  *(*def.mutable_attr())["value"].mutable_tensor() = value;
  return def;
}

bool IsControlLoopMerge(const Node& n) {
  return n.type_string() == "Merge" && absl::StartsWith(n.name(), kControlLoopPrefix);
}

}  // namespace dflow
