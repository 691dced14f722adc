// Graph: a GraphDef turned into nodes and edges the runtime can transform
// (place, prune, partition) and execute. Not thread-safe; build it, then
// share it read-only.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<Graph> g, Graph::FromGraphDef(def));
//   for (Node* n : g->nodes()) { ... n->in_edges() ... }
#ifndef DFLOW_RUNTIME_GRAPH_H_
#define DFLOW_RUNTIME_GRAPH_H_

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "dflow/framework/op_def.h"
#include "dflow/proto/graph.pb.h"

namespace dflow {

class Node;
inline constexpr int kControlSlot = -1;

struct Edge {
  Node* src;
  int src_output;  // kControlSlot for a control edge.
  Node* dst;
  int dst_input;   // kControlSlot for a control edge.
  int id;
  bool IsControlEdge() const { return src_output == kControlSlot; }
};

class Node {
 public:
  int id() const { return id_; }
  const std::string& name() const { return def_.name(); }
  const std::string& type_string() const { return def_.op(); }
  const tensorflow::NodeDef& def() const { return def_; }
  const OpDef& op_def() const { return *op_def_; }
  int num_inputs() const { return static_cast<int>(input_types_.size()); }
  int num_outputs() const { return static_cast<int>(output_types_.size()); }
  DataType input_type(int i) const { return input_types_[i]; }
  DataType output_type(int i) const { return output_types_[i]; }
  const DataTypeVector& input_types() const { return input_types_; }
  const DataTypeVector& output_types() const { return output_types_; }

  // The device the user asked for (NodeDef.device), possibly partial.
  const std::string& requested_device() const { return def_.device(); }
  void set_requested_device(const std::string& d) { def_.set_device(d); }
  // The full device name chosen by the placer; empty before placement.
  const std::string& assigned_device_name() const { return assigned_device_; }
  void set_assigned_device_name(std::string d) { assigned_device_ = std::move(d); }

  const std::vector<const Edge*>& in_edges() const { return in_edges_; }
  const std::vector<const Edge*>& out_edges() const { return out_edges_; }
  // The edge feeding data input `idx`; NotFound when it has none.
  absl::StatusOr<const Edge*> input_edge(int idx) const;

  bool IsStateful() const { return op_def_->is_stateful; }
  bool IsSend() const { return type_string() == "_Send" || type_string() == "_HostSend"; }
  bool IsRecv() const { return type_string() == "_Recv" || type_string() == "_HostRecv"; }
  bool IsConstant() const { return type_string() == "Const"; }
  // Control flow (TensorFlow 1.x conds and while loops; see control_flow.h).
  bool IsSwitch() const { return type_string() == "Switch" || type_string() == "RefSwitch"; }
  bool IsMerge() const { return type_string() == "Merge" || type_string() == "RefMerge"; }
  bool IsEnter() const { return type_string() == "Enter" || type_string() == "RefEnter"; }
  bool IsExit() const { return type_string() == "Exit" || type_string() == "RefExit"; }
  bool IsNextIteration() const {
    return type_string() == "NextIteration" || type_string() == "RefNextIteration";
  }

  // Attr edits after construction (e.g. rewriting a Recv's key).
  tensorflow::NodeDef* mutable_def() { return &def_; }

 private:
  friend class Graph;
  int id_ = -1;
  tensorflow::NodeDef def_;
  const OpDef* op_def_ = nullptr;  // not owned; lives in OpRegistry
  DataTypeVector input_types_;
  DataTypeVector output_types_;
  std::string assigned_device_;
  std::vector<const Edge*> in_edges_;
  std::vector<const Edge*> out_edges_;
};

// An op a GraphDef uses that dflow has not registered, and the nodes using
// it (a node of a library function as "function/node").
struct UnsupportedOp {
  std::string op;
  std::vector<std::string> nodes;
};
// The ops `def` uses that are not registered, in order of first use: those
// of its nodes, and with `functions` those of its library's functions too.
std::vector<UnsupportedOp> UnsupportedOps(const tensorflow::GraphDef& def, bool functions);
// "2 ops dflow does not support: Foo (2 nodes: a, b), Bar (1 node: c)".
std::string DescribeUnsupportedOps(const std::vector<UnsupportedOp>& ops);

class Graph {
 public:
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // Builds and validates: every op registered (else NOT_FOUND listing every
  // unregistered op and its nodes), defaults added, attrs valid,
  // node names unique, every input names an existing node and output with a
  // matching dtype, control inputs ("^x") after data inputs, no cycle.
  // Errors name the offending node.
  static absl::StatusOr<std::unique_ptr<Graph>> FromGraphDef(const tensorflow::GraphDef& def);
  // A copy of this graph (node ids may differ; names, devices and edges equal).
  std::unique_ptr<Graph> Clone() const;

  // Adds a node without connecting its inputs; `def.input` is ignored here
  // and rebuilt from edges by ToGraphDef. Fails on an unknown op, bad attrs
  // or a duplicate name.
  absl::StatusOr<Node*> AddNode(tensorflow::NodeDef def);
  // REQUIRES: both nodes in this graph; slots in range (or kControlSlot for both).
  const Edge* AddEdge(Node* src, int src_output, Node* dst, int dst_input);
  const Edge* AddControlEdge(Node* src, Node* dst) {
    return AddEdge(src, kControlSlot, dst, kControlSlot);
  }
  void RemoveEdge(const Edge* e);
  void RemoveNode(Node* n);  // And its edges.

  Node* FindNode(const std::string& name) const;
  // Live nodes in id order.
  std::vector<Node*> nodes() const;
  int num_nodes() const;
  // Upper bound on node ids, for arrays indexed by id.
  int num_node_ids() const { return static_cast<int>(nodes_.size()); }
  Node* node(int id) const { return nodes_[id].get(); }

  // Nodes so that every node follows its inputs, except the back edges of
  // loops (out of NextIteration nodes); FailedPrecondition naming a node on
  // the cycle when there is any other.
  absl::StatusOr<std::vector<Node*>> TopologicalOrder() const;

  // Writes nodes in id order, inputs rebuilt from edges (data inputs by slot,
  // then "^control"), devices = assigned device if set, else requested.
  void ToGraphDef(tensorflow::GraphDef* out) const;

  const tensorflow::VersionDef& versions() const { return versions_; }
  void set_versions(const tensorflow::VersionDef& v) { versions_ = v; }

 private:
  std::vector<std::unique_ptr<Node>> nodes_;  // nullptr once removed
  std::deque<Edge> edges_;
  std::vector<bool> edge_live_;
  absl::flat_hash_map<std::string, Node*> by_name_;
  tensorflow::VersionDef versions_;
};

// A producer's output may feed a consumer's input when the types are equal,
// or when a ref output feeds a plain input of its base type.
bool TypesCompatible(DataType out, DataType in);

// Splits "name", "name:2" and "^name" into node name, output index
// (kControlSlot for "^") ; InvalidArgument on malformed text.
absl::Status ParseTensorName(const std::string& text, std::string* node, int* index);

}  // namespace dflow

#endif  // DFLOW_RUNTIME_GRAPH_H_
