#include "dflow/client/scope.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "dflow/framework/attr_util.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/status.h"

namespace dflow {
namespace {

// What a scope's graph knows of each node it holds.
struct NodeInfo {
  DataTypeVector output_types;
  std::vector<PartialShape> output_shapes;
  std::optional<Tensor> value;  // For Const nodes: used by shape functions.
  std::string device;           // As requested when the node was added.
};
using NodeMap = std::map<std::string, NodeInfo>;

// What AddNode learns of a new node's data inputs from the graph.
struct InputFacts {
  DataTypeVector types;
  std::vector<PartialShape> shapes;
  std::vector<const Tensor*> values;  // Of Const inputs; null for the others.
};

// Adds `inputs` to `node`'s inputs and returns what `nodes` knows of them;
// InvalidArgument naming the op for an input that is not in the graph.
absl::StatusOr<InputFacts> ConnectInputs(const NodeMap& nodes, const std::vector<Output>& inputs,
                                         tensorflow::NodeDef* node) {
  InputFacts facts;
  for (const Output& o : inputs) {
    auto it = nodes.find(o.node_name());
    if (it == nodes.end() || o.index() >= static_cast<int>(it->second.output_types.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "[", node->op(), " '", node->name(), "'] input ", o.name(), " is not in this graph"));
    }
    node->add_input(o.index() == 0 ? o.node_name() : o.name());
    facts.shapes.push_back(it->second.output_shapes[o.index()]);
    facts.values.push_back(it->second.value ? &*it->second.value : nullptr);
    facts.types.push_back(it->second.output_types[o.index()]);
  }
  return facts;
}

// Sets `node`'s device: its own, else the scope's `device`, then the
// scope's device function; colocation (the `_class` attr) overrides both
// with the device of the first colocated node that has one.
void PlaceNode(const NodeMap& nodes, const std::string& device,
               const std::function<std::string(const tensorflow::NodeDef&)>& device_fn,
               const std::vector<std::string>& colocate_with, tensorflow::NodeDef* node) {
  if (!colocate_with.empty()) {
    std::vector<std::string> classes;
    for (const std::string& c : colocate_with) classes.push_back("loc:@" + c);
    SetAttr(node, "_class", classes);
  }
  if (node->device().empty()) node->set_device(device);
  if (device_fn) node->set_device(device_fn(*node));
  for (const std::string& c : colocate_with) {  // The first colocation op with a device wins.
    auto it = nodes.find(c);
    if (it != nodes.end() && !it->second.device.empty()) {
      node->set_device(it->second.device);
      break;
    }
  }
}

// Completes `node` with `op`'s default attrs, validates it, checks its
// inputs' types against the op's and infers its output types and shapes:
// what the graph will know of it, or the first error.
absl::StatusOr<NodeInfo> TypeAndShape(const OpDef& op, const InputFacts& in,
                                      tensorflow::NodeDef* node) {
  AddDefaultAttrs(op, node);
  DataTypeVector expected_in, out_types;
  RETURN_IF_ERROR(ValidateNodeDef(*node, op));
  RETURN_IF_ERROR(InOutTypesForNode(*node, op, &expected_in, &out_types));
  for (size_t i = 0; i < in.types.size() && i < expected_in.size(); ++i) {
    if (BaseType(in.types[i]) != BaseType(expected_in[i]) ||
        (IsRefType(expected_in[i]) && !IsRefType(in.types[i]))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "[", node->op(), " '", node->name(), "'] input ", i, " (", node->input(i), ") is ",
          DataTypeString(in.types[i]), " but the op expects ", DataTypeString(expected_in[i])));
    }
  }
  ASSIGN_OR_RETURN(std::vector<PartialShape> out_shapes,
                   InferShapes(*node, op, in.shapes, in.values, expected_in,
                               static_cast<int>(out_types.size())));
  NodeInfo info{out_types, std::move(out_shapes), std::nullopt, node->device()};
  if (node->op() == "Const") {
    Tensor t;
    if (GetNodeAttr(*node, "value", &t).ok()) info.value = t;
  }
  return info;
}

}  // namespace

// The graph shared by a root scope and all scopes derived from it.
struct Scope::Graph {
  mutable absl::Mutex mu;
  tensorflow::GraphDef def ABSL_GUARDED_BY(mu);
  NodeMap nodes ABSL_GUARDED_BY(mu);
  std::map<std::string, int> name_counts ABSL_GUARDED_BY(mu);
  absl::Status status ABSL_GUARDED_BY(mu);

  // "base", then "base_1", "base_2", ... whichever is free.
  std::string Uniquify(const std::string& base) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    int& count = name_counts[base];
    std::string name = count == 0 ? base : absl::StrCat(base, "_", count);
    while (nodes.count(name) > 0) name = absl::StrCat(base, "_", ++count);
    ++count;
    return name;
  }
};

Input::Input(std::initializer_list<std::initializer_list<float>> rows) : is_const_(true) {
  std::vector<float> values;
  int64_t cols = rows.size() == 0 ? 0 : rows.begin()->size();
  for (const auto& r : rows) {
    if (static_cast<int64_t>(r.size()) != cols) {
      cols = -1;  // Ragged: rejected by the consuming op.
      break;
    }
    values.insert(values.end(), r.begin(), r.end());
  }
  if (cols < 0) {
    tensor_ = Tensor(DT_INVALID);
    return;
  }
  tensor_ = Tensor::FromVector(values, TensorShape({static_cast<int64_t>(rows.size()), cols}));
}

Scope Scope::NewRootScope() {
  Scope s;
  s.graph_ = std::make_shared<Graph>();
  return s;
}

Scope Scope::NewSubScope(const std::string& name) const {
  Scope s = *this;
  s.exact_name_.clear();
  if (name.empty()) return s;
  std::string unique;
  {
    absl::MutexLock l(&graph_->mu);
    unique = graph_->Uniquify(name_prefix_ + name);
  }
  s.name_prefix_ = unique + "/";
  return s;
}

Scope Scope::WithOpName(const std::string& name) const {
  Scope s = *this;
  s.exact_name_ = name;
  return s;
}

Scope Scope::WithDevice(const std::string& device) const {
  Scope s = *this;
  s.device_ = device;
  return s;
}

Scope Scope::WithControlDependencies(const std::vector<Operation>& deps) const {
  Scope s = *this;
  s.control_deps_.insert(s.control_deps_.end(), deps.begin(), deps.end());
  return s;
}

Scope Scope::WithNoControlDependencies() const {
  Scope s = *this;
  s.control_deps_.clear();
  return s;
}

Scope Scope::ColocateWith(const Operation& op) const {
  Scope s = *this;
  s.colocate_with_.push_back(op.name());
  s.device_.clear();  // As TensorFlow's colocate_with: the op's device decides.
  s.device_fn_ = nullptr;
  return s;
}

Scope Scope::WithoutPlacement() const {
  Scope s = *this;
  s.colocate_with_.clear();
  s.device_.clear();
  s.device_fn_ = nullptr;
  return s;
}

Scope Scope::WithDeviceFunction(std::function<std::string(const tensorflow::NodeDef&)> fn) const {
  Scope s = *this;
  s.device_fn_ = std::move(fn);
  return s;
}

absl::Status Scope::status() const {
  absl::MutexLock l(&graph_->mu);
  return graph_->status;
}

void Scope::UpdateStatus(const absl::Status& s) const {
  absl::MutexLock l(&graph_->mu);
  if (graph_->status.ok()) graph_->status = s;
}

std::string Scope::GetUniqueNameForOp(const std::string& op_type) const {
  absl::MutexLock l(&graph_->mu);
  return graph_->Uniquify(name_prefix_ + (exact_name_.empty() ? op_type : exact_name_));
}

absl::Status Scope::ToGraphDef(tensorflow::GraphDef* out) const {
  absl::MutexLock l(&graph_->mu);
  RETURN_IF_ERROR(graph_->status);
  *out = graph_->def;
  out->mutable_versions()->set_producer(1087);  // A TF 2.x-era producer version.
  return absl::OkStatus();
}

int Scope::num_nodes() const {
  absl::MutexLock l(&graph_->mu);
  return graph_->def.node_size();
}

const tensorflow::GraphDef& Scope::graph_def() const {
  absl::MutexLock l(&graph_->mu);
  return graph_->def;
}

Output Scope::AsOutput(const Input& in) const {
  if (!in.is_const()) return in.output();
  if (in.tensor().dtype() == DT_INVALID) {
    UpdateStatus(absl::InvalidArgumentError("[Const] ragged nested initializer list"));
    return Output();
  }
  tensorflow::NodeDef node;
  node.set_op("Const");
  SetAttr(&node, "dtype", in.tensor().dtype());
  SetAttr(&node, "value", in.tensor());
  std::vector<Output> outs;
  WithOpName("").AddNode(std::move(node), {}, &outs);
  return outs.empty() ? Output() : outs[0];
}

Operation Scope::AddNode(tensorflow::NodeDef node, const std::vector<Input>& inputs,
                         std::vector<Output>* outputs) const {
  outputs->clear();
  if (!ok()) return Operation();
  // Constants first: they are separate nodes in this scope.
  std::vector<Output> in_outputs;
  for (const Input& in : inputs) {
    Output o = AsOutput(in);
    if (!o.valid()) {
      UpdateStatus(absl::InvalidArgumentError(
          absl::StrCat("[", node.op(), "] an input is not a valid output")));
      return Operation();
    }
    in_outputs.push_back(o);
  }

  auto op_or = OpRegistry::Global()->LookUp(node.op());
  if (!op_or.ok()) {
    UpdateStatus(op_or.status());
    return Operation();
  }
  const OpDef& op = **op_or;

  absl::MutexLock l(&graph_->mu);
  if (node.name().empty()) {
    node.set_name(graph_->Uniquify(name_prefix_ + (exact_name_.empty() ? node.op() : exact_name_)));
  }
  absl::StatusOr<InputFacts> in = ConnectInputs(graph_->nodes, in_outputs, &node);
  if (!in.ok()) {
    graph_->status = in.status();
    return Operation();
  }
  for (const Operation& dep : control_deps_) node.add_input("^" + dep.name());
  PlaceNode(graph_->nodes, device_, device_fn_, colocate_with_, &node);
  absl::StatusOr<NodeInfo> info = TypeAndShape(op, *in, &node);
  if (!info.ok()) {
    graph_->status = info.status();
    return Operation();
  }
  Operation result(node.name(), static_cast<int>(info->output_types.size()));
  for (size_t i = 0; i < info->output_types.size(); ++i) {
    outputs->emplace_back(result, static_cast<int>(i), info->output_types[i],
                          info->output_shapes[i]);
  }
  graph_->nodes[node.name()] = *std::move(info);
  *graph_->def.add_node() = std::move(node);
  return result;
}

}  // namespace dflow
