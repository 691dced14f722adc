#include "dflow/runtime/graph.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "dflow/framework/status.h"
#include "dflow/framework/types.h"

namespace dflow {
namespace {

std::string NodeLabel(const tensorflow::NodeDef& def) {
  return absl::StrCat("node '", def.name(), "' (", def.op(), ")");
}

// Adds "[Graph] node 'x' (Op): " unless the message already names the node.
absl::Status NodeError(const tensorflow::NodeDef& def, const absl::Status& s) {
  if (s.ok() || absl::StrContains(s.message(), absl::StrCat("'", def.name(), "'"))) return s;
  return WithContext(s, absl::StrCat("[Graph] ", NodeLabel(def)));
}

std::string InputString(const Edge& e) {
  if (e.IsControlEdge()) return absl::StrCat("^", e.src->name());
  if (e.src_output == 0) return e.src->name();
  return absl::StrCat(e.src->name(), ":", e.src_output);
}

// Within nodes that cannot be ordered, walks back along in-edges from `start`
// until a node repeats: that node lies on a cycle.
const Node* NodeOnCycle(const Node* start, const std::vector<int>& pending) {
  std::vector<bool> seen(pending.size(), false);
  const Node* n = start;
  while (!seen[n->id()]) {
    seen[n->id()] = true;
    for (const Edge* e : n->in_edges()) {
      if (pending[e->src->id()] > 0 && !e->src->IsNextIteration()) {
        n = e->src;
        break;
      }
    }
  }
  return n;
}

// The data inputs of `def` in order, and its control inputs; fails on a
// malformed name or a data input after a control input.
absl::Status SplitInputs(const tensorflow::NodeDef& def,
                         std::vector<std::pair<std::string, int>>* data,
                         std::vector<std::string>* control) {
  for (const std::string& in : def.input()) {
    std::string name;
    int index = 0;
    RETURN_IF_ERROR(NodeError(def, ParseTensorName(in, &name, &index)));
    if (index == kControlSlot) {
      control->push_back(std::move(name));
    } else if (!control->empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "[Graph] ", NodeLabel(def), ": data input '", in, "' follows a control input"));
    } else {
      data->emplace_back(std::move(name), index);
    }
  }
  return absl::OkStatus();
}

// Rewrites n's NodeDef inputs from its in-edges: data inputs by slot, then
// control inputs.
void RebuildInputs(Node* n) {
  std::vector<const Edge*> data, control;
  for (const Edge* e : n->in_edges()) (e->IsControlEdge() ? control : data).push_back(e);
  std::stable_sort(data.begin(), data.end(),
                   [](const Edge* a, const Edge* b) { return a->dst_input < b->dst_input; });
  tensorflow::NodeDef* def = n->mutable_def();
  def->clear_input();
  for (const Edge* e : data) def->add_input(InputString(*e));
  for (const Edge* e : control) def->add_input(InputString(*e));
}

// Updates n's NodeDef inputs after `e` was appended to its in-edges: appends
// when the new input sorts last (the common case while building), else rebuilds.
void AppendInput(Node* n, const Edge* e) {
  bool last = true;
  for (const Edge* other : n->in_edges()) {
    if (other == e) continue;
    if (!e->IsControlEdge() && (other->IsControlEdge() || other->dst_input > e->dst_input)) {
      last = false;
      break;
    }
  }
  if (last && n->def().input_size() + 1 == static_cast<int>(n->in_edges().size())) {
    n->mutable_def()->add_input(InputString(*e));
  } else {
    RebuildInputs(n);
  }
}

// Validates `def`'s attrs (not its inputs, which come from edges) and
// computes its flattened input and output types.
absl::Status ValidateAttrsOnly(const tensorflow::NodeDef& def, const OpDef& op,
                               DataTypeVector* inputs, DataTypeVector* outputs) {
  absl::Status types = InOutTypesForNode(def, op, inputs, outputs);
  // Validate a copy with the expected number of inputs, so that only attr
  // problems can fail; when the types are unknown the attrs are at fault.
  tensorflow::NodeDef check = def;
  check.clear_input();
  for (size_t i = 0; types.ok() && i < inputs->size(); ++i) check.add_input()->assign(1, 'x');
  RETURN_IF_ERROR(NodeError(def, ValidateNodeDef(check, op)));
  return NodeError(def, types);
}

}  // namespace

absl::Status ParseTensorName(const std::string& text, std::string* node, int* index) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("[ParseTensorName] malformed tensor name '", text, "': ", why));
  };
  absl::string_view s = text;
  if (absl::ConsumePrefix(&s, "^")) {
    if (s.empty() || absl::StrContains(s, ':')) return bad("expected '^node'");
    *node = std::string(s);
    *index = kControlSlot;
    return absl::OkStatus();
  }
  size_t colon = s.rfind(':');
  if (colon == absl::string_view::npos) {
    if (s.empty()) return bad("empty name");
    *node = std::string(s);
    *index = 0;
    return absl::OkStatus();
  }
  absl::string_view name = s.substr(0, colon), digits = s.substr(colon + 1);
  int value = 0;
  if (name.empty() || absl::StrContains(name, ':')) return bad("expected 'node:index'");
  if (digits.empty() || digits.size() > 9 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      !absl::SimpleAtoi(digits, &value)) {
    return bad("output index is not a non-negative integer");
  }
  *node = std::string(name);
  *index = value;
  return absl::OkStatus();
}

absl::StatusOr<const Edge*> Node::input_edge(int idx) const {
  for (const Edge* e : in_edges_) {
    if (e->dst_input == idx) return e;
  }
  return absl::NotFoundError(
      absl::StrCat("[Graph] node '", name(), "' has no edge into input ", idx));
}

// --- construction -----------------------------------------------------------

absl::StatusOr<Node*> Graph::AddNode(tensorflow::NodeDef def) {
  if (def.name().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("[Graph] a node of op '", def.op(), "' has an empty name"));
  }
  if (by_name_.contains(def.name())) {
    return absl::InvalidArgumentError(
        absl::StrCat("[Graph] duplicate node name '", def.name(), "'"));
  }
  absl::StatusOr<const OpDef*> op = OpRegistry::Global()->LookUp(def.op());
  if (!op.ok()) {
    return absl::NotFoundError(absl::StrCat("[Graph] ", NodeLabel(def), ": op '", def.op(),
                                            "' is not registered"));
  }
  AddDefaultAttrs(**op, &def);
  auto node = std::make_unique<Node>();
  RETURN_IF_ERROR(ValidateAttrsOnly(def, **op, &node->input_types_, &node->output_types_));
  node->id_ = static_cast<int>(nodes_.size());
  node->op_def_ = *op;
  node->def_ = std::move(def);
  node->def_.clear_input();
  Node* raw = node.get();
  by_name_[raw->name()] = raw;
  nodes_.push_back(std::move(node));
  return raw;
}

const Edge* Graph::AddEdge(Node* src, int src_output, Node* dst, int dst_input) {
  edges_.push_back(Edge{src, src_output, dst, dst_input, static_cast<int>(edges_.size())});
  edge_live_.push_back(true);
  const Edge* e = &edges_.back();
  src->out_edges_.push_back(e);
  dst->in_edges_.push_back(e);
  // Keep the NodeDef's input list equal to the edges: kernels read it.
  AppendInput(dst, e);
  return e;
}

void Graph::RemoveEdge(const Edge* e) {
  if (!edge_live_[e->id]) return;
  edge_live_[e->id] = false;
  auto drop = [e](std::vector<const Edge*>* v) { v->erase(std::find(v->begin(), v->end(), e)); };
  drop(&e->src->out_edges_);
  drop(&e->dst->in_edges_);
  RebuildInputs(e->dst);
}

void Graph::RemoveNode(Node* n) {
  while (!n->in_edges_.empty()) RemoveEdge(n->in_edges_.back());
  while (!n->out_edges_.empty()) RemoveEdge(n->out_edges_.back());
  by_name_.erase(n->name());
  nodes_[n->id()].reset();
}

Node* Graph::FindNode(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

std::vector<Node*> Graph::nodes() const {
  std::vector<Node*> out;
  out.reserve(by_name_.size());
  for (const auto& n : nodes_) {
    if (n != nullptr) out.push_back(n.get());
  }
  return out;
}

int Graph::num_nodes() const { return static_cast<int>(by_name_.size()); }

// --- FromGraphDef -----------------------------------------------------------

namespace {

// Checks that `src:index` exists and may feed `dst`'s input `slot`.
absl::Status CheckDataInput(const Node* src, int index, const Node* dst, int slot) {
  if (index >= src->num_outputs()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "[Graph] ", NodeLabel(dst->def()), ": input ", slot, " names output ", index,
        " of node '", src->name(), "', which has ", src->num_outputs(), " output(s)"));
  }
  if (!TypesCompatible(src->output_type(index), dst->input_type(slot))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "[Graph] ", NodeLabel(dst->def()), ": input ", slot, " expects ",
        DataTypeString(dst->input_type(slot)), " but '", src->name(), ":", index,
        "' is ", DataTypeString(src->output_type(index))));
  }
  return absl::OkStatus();
}

// Adds the edges named by `def`'s inputs into `dst`.
absl::Status ConnectInputs(Graph* g, Node* dst, const tensorflow::NodeDef& def) {
  std::vector<std::pair<std::string, int>> data;
  std::vector<std::string> control;
  RETURN_IF_ERROR(SplitInputs(def, &data, &control));
  if (static_cast<int>(data.size()) != dst->num_inputs()) {
    return absl::InvalidArgumentError(
        absl::StrCat("[Graph] ", NodeLabel(def), ": expects ", dst->num_inputs(),
                     " data input(s) but has ", data.size()));
  }
  auto find = [&](const std::string& name) -> absl::StatusOr<Node*> {
    Node* src = g->FindNode(name);
    if (src == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "[Graph] ", NodeLabel(def), ": input '", name, "' names no node in the graph"));
    }
    return src;
  };
  for (int slot = 0; slot < static_cast<int>(data.size()); ++slot) {
    ASSIGN_OR_RETURN(Node * src, find(data[slot].first));
    RETURN_IF_ERROR(CheckDataInput(src, data[slot].second, dst, slot));
    g->AddEdge(src, data[slot].second, dst, slot);
  }
  for (const std::string& name : control) {
    ASSIGN_OR_RETURN(Node * src, find(name));
    g->AddControlEdge(src, dst);
  }
  return absl::OkStatus();
}

}  // namespace

bool TypesCompatible(DataType out, DataType in) {
  return out == in || (IsRefType(out) && !IsRefType(in) && BaseType(out) == in);
}

std::vector<UnsupportedOp> UnsupportedOps(const tensorflow::GraphDef& def, bool functions) {
  // A node whose op names a library function is unsupported too: dflow
  // calls functions through PartitionedCall and If only.
  std::vector<UnsupportedOp> out;
  absl::flat_hash_map<std::string, size_t> index;  // op -> its entry in `out`.
  auto visit = [&](const tensorflow::NodeDef& node, const std::string& label) {
    if (OpRegistry::Global()->LookUp(node.op()).ok()) return;
    auto [it, added] = index.try_emplace(node.op(), out.size());
    if (added) out.push_back({node.op(), {}});
    out[it->second].nodes.push_back(label);
  };
  for (const auto& node : def.node()) visit(node, node.name());
  if (functions) {
    for (const auto& f : def.library().function()) {
      for (const auto& node : f.node_def()) {
        visit(node, absl::StrCat(f.signature().name(), "/", node.name()));
      }
    }
  }
  return out;
}

std::string DescribeUnsupportedOps(const std::vector<UnsupportedOp>& ops) {
  constexpr size_t kNamesShown = 3;
  std::vector<std::string> parts;
  for (const UnsupportedOp& u : ops) {
    std::vector<std::string> shown(u.nodes.begin(),
                                   u.nodes.begin() + std::min(u.nodes.size(), kNamesShown));
    if (u.nodes.size() > kNamesShown) shown.push_back("...");
    parts.push_back(absl::StrCat(u.op, " (", u.nodes.size(), u.nodes.size() == 1 ? " node: " : " nodes: ",
                                 absl::StrJoin(shown, ", "), ")"));
  }
  return absl::StrCat(ops.size(), ops.size() == 1 ? " op" : " ops",
                      " dflow does not support: ", absl::StrJoin(parts, ", "));
}

absl::StatusOr<std::unique_ptr<Graph>> Graph::FromGraphDef(const tensorflow::GraphDef& def) {
  // Every unsupported op at once, not only the first: what a user needs to
  // know before porting a program.
  if (std::vector<UnsupportedOp> unsupported = UnsupportedOps(def, /*functions=*/false);
      !unsupported.empty()) {
    return absl::NotFoundError(absl::StrCat("[Graph] the graph uses ",
                                            DescribeUnsupportedOps(unsupported),
                                            " (`dflow ops` lists the ops it has)"));
  }
  auto g = std::make_unique<Graph>();
  g->versions_ = def.versions();
  for (const tensorflow::NodeDef& nd : def.node()) {
    RETURN_IF_ERROR(g->AddNode(nd).status());
  }
  for (int i = 0; i < def.node_size(); ++i) {
    RETURN_IF_ERROR(ConnectInputs(g.get(), g->node(i), def.node(i)));
  }
  RETURN_IF_ERROR(g->TopologicalOrder().status());
  return g;
}

std::unique_ptr<Graph> Graph::Clone() const {
  auto g = std::make_unique<Graph>();
  g->versions_ = versions_;
  std::vector<Node*> map(nodes_.size(), nullptr);
  for (const auto& n : nodes_) {
    if (n == nullptr) continue;
    auto copy = std::make_unique<Node>();
    copy->id_ = static_cast<int>(g->nodes_.size());
    copy->def_ = n->def_;
    copy->def_.clear_input();
    copy->op_def_ = n->op_def_;
    copy->input_types_ = n->input_types_;
    copy->output_types_ = n->output_types_;
    copy->assigned_device_ = n->assigned_device_;
    map[n->id()] = copy.get();
    g->by_name_[copy->name()] = copy.get();
    g->nodes_.push_back(std::move(copy));
  }
  for (const auto& n : nodes_) {
    if (n == nullptr) continue;
    for (const Edge* e : n->in_edges_) {
      g->AddEdge(map[e->src->id()], e->src_output, map[e->dst->id()], e->dst_input);
    }
  }
  return g;
}

absl::StatusOr<std::vector<Node*>> Graph::TopologicalOrder() const {
  // Kahn's algorithm over data and control edges, loop back edges aside.
  std::vector<int> pending(nodes_.size(), 0);
  std::vector<Node*> ready, order;
  for (Node* n : nodes()) {
    for (const Edge* e : n->in_edges()) pending[n->id()] += !e->src->IsNextIteration();
    if (pending[n->id()] == 0) ready.push_back(n);
  }
  while (!ready.empty()) {
    Node* n = ready.back();
    ready.pop_back();
    order.push_back(n);
    if (n->IsNextIteration()) continue;
    for (const Edge* e : n->out_edges()) {
      if (--pending[e->dst->id()] == 0) ready.push_back(e->dst);
    }
  }
  if (static_cast<int>(order.size()) == num_nodes()) {
    return order;
  }
  for (Node* n : nodes()) {
    if (pending[n->id()] > 0) {
      const Node* c = NodeOnCycle(n, pending);
      return absl::FailedPreconditionError(absl::StrCat(
          "[Graph] the graph has a cycle through ", NodeLabel(c->def())));
    }
  }
  return absl::InternalError("[Graph] topological order lost nodes");
}

void Graph::ToGraphDef(tensorflow::GraphDef* out) const {
  out->Clear();
  *out->mutable_versions() = versions_;
  for (const Node* n : nodes()) {
    tensorflow::NodeDef* nd = out->add_node();
    *nd = n->def();
    if (!n->assigned_device_name().empty()) nd->set_device(n->assigned_device_name());
  }
}

}  // namespace dflow
