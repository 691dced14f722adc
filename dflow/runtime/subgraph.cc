#include "dflow/runtime/subgraph.h"

#include <algorithm>
#include <functional>
#include <map>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "dflow/framework/attr_util.h"
#include "dflow/framework/rendezvous.h"
#include "dflow/framework/status.h"

namespace dflow {
namespace {

struct TensorId {
  Node* node;
  int index;
};

// Resolves `name` (a feed or fetch, as `what` says) to a node output.
absl::StatusOr<TensorId> ResolveTensor(Graph* g, const std::string& what, const std::string& name) {
  std::string node_name;
  int index = 0;
  absl::Status s = ParseTensorName(name, &node_name, &index);
  if (!s.ok()) return WithContext(s, absl::StrCat("[Session] ", what, " '", name, "'"));
  if (index == kControlSlot) {
    return absl::InvalidArgumentError(
        absl::StrCat("[Session] ", what, " '", name, "' names a control input, not a tensor"));
  }
  Node* n = g->FindNode(node_name);
  if (n == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("[Session] ", what, " '", name, "' refers to no node in the graph"));
  }
  if (index >= n->num_outputs()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "[Session] ", what, " '", name, "' asks for output ", index, " of node '", n->name(), "' (",
        n->type_string(), "), which has ", n->num_outputs(), " output(s)"));
  }
  return TensorId{n, index};
}

// Checks that no consumer of a fed tensor takes it by reference: a fed
// value cannot stand in for a variable.
absl::Status CheckFeedable(const std::string& name, const TensorId& t) {
  for (const Edge* e : t.node->out_edges()) {
    if (e->src_output == t.index && IsRefType(e->dst->input_type(e->dst_input))) {
      return absl::InvalidArgumentError(
          absl::StrCat("[Session] Feed '", name, "' cannot be fed: node '", e->dst->name(), "' (",
                       e->dst->type_string(), ") takes it by reference"));
    }
  }
  return absl::OkStatus();
}

// "<base>", or "<base>_1", "<base>_2", ... : the first name not in `g`.
std::string UniqueName(const Graph& g, const std::string& base) {
  std::string name = base;
  for (int k = 1; g.FindNode(name) != nullptr; ++k) name = absl::StrCat(base, "_", k);
  return name;
}

// Adds `_Arg` / `_Retval` number `index` for tensor `t`, on `device`.
absl::StatusOr<Node*> AddCallNode(Graph* g, const std::string& op, const std::string& prefix,
                                  const TensorId& t, int index, const Device* device) {
  tensorflow::NodeDef def;
  def.set_name(UniqueName(*g, absl::StrCat(prefix, t.node->name(), "_", t.index, "_", index)));
  def.set_op(op);
  SetAttr(&def, "T", BaseType(t.node->output_type(t.index)));
  SetAttr(&def, "index", static_cast<int64_t>(index));
  if (device != nullptr) def.set_device(device->name());
  ASSIGN_OR_RETURN(Node * n, g->AddNode(std::move(def)));
  if (device != nullptr) n->set_assigned_device_name(device->name());
  return n;
}

// Moves every data use of `t` onto output 0 of `arg`.
void Reroute(Graph* g, const TensorId& t, Node* arg) {
  std::vector<const Edge*> uses;
  for (const Edge* e : t.node->out_edges()) {
    if (e->src_output == t.index) uses.push_back(e);
  }
  for (const Edge* e : uses) {
    Node* dst = e->dst;
    int slot = e->dst_input;
    g->RemoveEdge(e);
    g->AddEdge(arg, 0, dst, slot);
  }
}

// Ops that must run even when nothing reads their outputs: they check
// values (CheckNumerics), steer control flow, or call functions whose
// bodies may have effects their op does not declare.
bool MustCompute(const Node& n) {
  static const auto* kOps = new absl::flat_hash_set<std::string>{
      "CheckNumerics", "ControlTrigger", "LoopCond", "PartitionedCall",
      "If", "StatelessIf", "While", "StatelessWhile", "Case", "StatelessCase",
      "SymbolicGradient"};
  return n.IsStateful() || n.IsSwitch() || n.IsMerge() || n.IsEnter() || n.IsExit() ||
         n.IsNextIteration() || kOps->contains(n.type_string());
}

// Whether `n` computes outputs that nothing reads as data: every edge out
// of it is a control edge.
bool OnlyOrdersOthers(const Node& n) {
  if (n.num_outputs() == 0 || n.num_inputs() == 0 || n.out_edges().empty()) return false;
  for (const Edge* e : n.out_edges()) {
    if (!e->IsControlEdge()) return false;
  }
  for (DataType t : n.input_types()) {
    if (IsRefType(t)) return false;
  }
  // A Switch's outputs differ in deadness, which a control edge from it
  // cannot carry: the Identity reading one (a branch's pivot) must stay.
  for (const Edge* e : n.in_edges()) {
    if (!e->IsControlEdge() && e->src->IsSwitch()) return false;
  }
  return !MustCompute(n);
}

// Replaces `n` by a NoOp of the same name, device and colocation that waits
// for what `n` waited for and is waited for by what waited for `n`.
// Returns the sources of `n`'s former data inputs.
absl::StatusOr<std::vector<Node*>> ReplaceWithNoOp(Graph* g, Node* n) {
  tensorflow::NodeDef def;
  def.set_name(n->name());
  def.set_op("NoOp");
  def.set_device(n->requested_device());
  if (auto it = n->def().attr().find("_class"); it != n->def().attr().end()) {
    (*def.mutable_attr())["_class"] = it->second;
  }
  std::vector<Node*> sources, data_sources, sinks;
  for (const Edge* e : n->in_edges()) {
    if (std::find(sources.begin(), sources.end(), e->src) == sources.end()) {
      sources.push_back(e->src);
    }
    if (!e->IsControlEdge()) data_sources.push_back(e->src);
  }
  for (const Edge* e : n->out_edges()) sinks.push_back(e->dst);
  const std::string assigned = n->assigned_device_name();
  g->RemoveNode(n);
  ASSIGN_OR_RETURN(Node * noop, g->AddNode(std::move(def)));
  noop->set_assigned_device_name(assigned);
  for (Node* src : sources) g->AddControlEdge(src, noop);
  for (Node* dst : sinks) g->AddControlEdge(noop, dst);
  return data_sources;
}

}  // namespace

absl::Status ReplaceUnreadComputationsWithNoOps(Graph* g, const std::vector<Node*>& keep) {
  const absl::flat_hash_set<const Node*> kept(keep.begin(), keep.end());
  std::vector<int> stack;  // Node ids; a replaced node's id then names nothing.
  for (const Node* n : g->nodes()) stack.push_back(n->id());
  while (!stack.empty()) {
    Node* n = g->node(stack.back());
    stack.pop_back();
    if (n == nullptr || kept.contains(n) || !OnlyOrdersOthers(*n)) continue;
    ASSIGN_OR_RETURN(std::vector<Node*> inputs, ReplaceWithNoOp(g, n));
    for (const Node* in : inputs) stack.push_back(in->id());  // Maybe read by nothing now.
  }
  return absl::OkStatus();
}

void PruneForReverseReachability(Graph* g, const std::vector<Node*>& roots) {
  std::vector<bool> needed(g->num_node_ids(), false);
  std::vector<Node*> stack;
  for (Node* r : roots) {
    if (!needed[r->id()]) stack.push_back(r);
    needed[r->id()] = true;
  }
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge* e : n->in_edges()) {
      if (!needed[e->src->id()]) {
        needed[e->src->id()] = true;
        stack.push_back(e->src);
      }
    }
  }
  for (Node* n : g->nodes()) {
    if (!needed[n->id()]) g->RemoveNode(n);
  }
}

namespace {

// The resolved names of one Run call.
struct Signature {
  std::vector<TensorId> feeds, fetches;
  std::vector<Node*> targets;
  std::map<std::pair<int, int>, size_t> fed;  // (node id, output) -> feed position
};

absl::StatusOr<Signature> Resolve(Graph* g, const std::vector<std::string>& feeds,
                                  const std::vector<std::string>& fetches,
                                  const std::vector<std::string>& targets) {
  Signature sig;
  for (const std::string& name : feeds) {
    ASSIGN_OR_RETURN(TensorId t, ResolveTensor(g, "Feed", name));
    if (!sig.fed.emplace(std::make_pair(t.node->id(), t.index), sig.feeds.size()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("[Session] Feed '", name, "' is fed more than once"));
    }
    RETURN_IF_ERROR(CheckFeedable(name, t));
    sig.feeds.push_back(t);
  }
  for (const std::string& name : fetches) {
    ASSIGN_OR_RETURN(TensorId t, ResolveTensor(g, "Fetch", name));
    sig.fetches.push_back(t);
  }
  for (const std::string& name : targets) {
    Node* n = g->FindNode(name);
    if (n == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("[Session] Target '", name, "' refers to no node in the graph"));
    }
    sig.targets.push_back(n);
  }
  return sig;
}

// How feeds enter and fetches leave the graph: each makes the node for
// feed or fetch number `index` of tensor `t` named `name`.
using EndpointMaker = std::function<absl::StatusOr<Node*>(Graph* g, const TensorId& t, int index,
                                                          const std::string& name)>;

absl::Status Rewrite(Graph* g, const std::vector<std::string>& feeds,
                     const std::vector<std::string>& fetches,
                     const std::vector<std::string>& targets, const EndpointMaker& make_feed,
                     const EndpointMaker& make_fetch) {
  // 1. Resolve every name before changing anything.
  ASSIGN_OR_RETURN(Signature sig, Resolve(g, feeds, fetches, targets));
  // 2. Feeds: a new source node replaces each fed tensor.
  std::vector<Node*> args;
  for (size_t i = 0; i < sig.feeds.size(); ++i) {
    ASSIGN_OR_RETURN(Node * arg, make_feed(g, sig.feeds[i], static_cast<int>(i), feeds[i]));
    Reroute(g, sig.feeds[i], arg);
    args.push_back(arg);
  }
  // 3. Fetches: a new sink node reads each fetched tensor (the feed's node when it is fed).
  std::vector<Node*> roots = sig.targets;
  for (size_t i = 0; i < sig.fetches.size(); ++i) {
    TensorId src = sig.fetches[i];
    auto it = sig.fed.find({src.node->id(), src.index});
    if (it != sig.fed.end()) src = TensorId{args[it->second], 0};
    ASSIGN_OR_RETURN(Node * ret, make_fetch(g, sig.fetches[i], static_cast<int>(i), fetches[i]));
    g->AddEdge(src.node, src.index, ret, 0);
    roots.push_back(ret);
  }
  // 4. Keep only what the fetches and targets need, and compute only what is read.
  PruneForReverseReachability(g, roots);
  return ReplaceUnreadComputationsWithNoOps(g, roots);
}

// A client-terminated `_Send` or `_Recv` of tensor `t` called `name`, on `client`.
absl::StatusOr<Node*> AddClientTerminated(Graph* g, const std::string& op, const TensorId& t,
                                          int index, const std::string& name,
                                          const Device& client) {
  tensorflow::NodeDef def;
  const bool recv = op == "_Recv";
  def.set_name(UniqueName(
      *g, absl::StrCat(recv ? "_recv_" : "_send_", t.node->name(), "_", t.index, "_", index)));
  def.set_op(op);
  def.set_device(client.name());
  SetAttr(&def, recv ? "tensor_type" : "T", BaseType(t.node->output_type(t.index)));
  SetAttr(&def, "tensor_name", name);
  SetAttr(&def, "send_device", client.name());
  SetAttr(&def, "send_device_incarnation", static_cast<int64_t>(client.incarnation()));
  SetAttr(&def, "recv_device", client.name());
  SetAttr(&def, "client_terminated", true);
  ASSIGN_OR_RETURN(Node * n, g->AddNode(std::move(def)));
  n->set_assigned_device_name(client.name());
  return n;
}

}  // namespace

absl::Status RewriteGraphForExecution(Graph* g, const std::vector<std::string>& feeds,
                                      const std::vector<std::string>& fetches,
                                      const std::vector<std::string>& targets,
                                      const Device* client_device) {
  auto call_node = [client_device](const std::string& op, const std::string& prefix) {
    return [=](Graph* g, const TensorId& t, int index, const std::string&) {
      return AddCallNode(g, op, prefix, t, index, client_device);
    };
  };
  return Rewrite(g, feeds, fetches, targets, call_node("_Arg", "_arg_"),
                 call_node("_Retval", "_retval_"));
}

absl::Status RewriteGraphForRendezvous(Graph* g, const std::vector<std::string>& feeds,
                                       const std::vector<std::string>& fetches,
                                       const std::vector<std::string>& targets,
                                       const Device& client_device) {
  auto endpoint = [&client_device](const std::string& op) {
    return [&client_device, op](Graph* g, const TensorId& t, int index, const std::string& name) {
      return AddClientTerminated(g, op, t, index, name, client_device);
    };
  };
  return Rewrite(g, feeds, fetches, targets, endpoint("_Recv"), endpoint("_Send"));
}

std::string ClientTerminatedKey(const Device& client_device, const std::string& tensor_name) {
  return Rendezvous::CreateKey(client_device.name(), client_device.incarnation(),
                               client_device.name(), tensor_name);
}

}  // namespace dflow
