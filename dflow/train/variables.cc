#include "dflow/train/variables.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <vector>

#include "dflow/client/ops.h"
#include "dflow/client/training_ops_wrappers.h"
#include "dflow/framework/attr_util.h"
#include "dflow/framework/status.h"

namespace dflow {

// Builds the nodes of one variable (see variables.h for the layout).
class VariableBuilder {
 public:
  using ValueFn = std::function<Output(const Scope& inner)>;

  static absl::StatusOr<Variable> Build(const Scope& scope, const std::string& name,
                                        const TensorShape& shape, DataType dtype,
                                        const ValueFn& initial_value,
                                        const VariableOptions& options) {
    RETURN_IF_ERROR(scope.status());
    Variable v;
    v.dtype_ = dtype;
    v.shape_ = shape;
    v.is_resource_ = options.use_resource;
    const Scope vs = scope.NewSubScope(name);
    const std::string full = ScopeName(vs);
    const Scope outer = options.colocate_with ? scope.ColocateWith(*options.colocate_with) : scope;
    std::vector<Output> outs;
    v.op_ = AddNodeNamed(outer, full, VariableNode(full, shape, dtype, options), {}, &outs);
    if (!v.op_.valid() || outs.empty()) return scope.status();
    v.handle_ = outs[0];

    const Scope inner = vs.ColocateWith(options.colocate_with ? *options.colocate_with : v.op_);
    Output init = initial_value(inner);
    if (!init.valid()) return scope.status();
    if (v.is_resource_) {
      v.initializer_ = ops::AssignVariableOp(inner.WithOpName("Assign"), v.handle_, init);
      v.value_ = ops::ReadVariableOp(inner.NewSubScope("Read").WithOpName("ReadVariableOp"),
                                     v.handle_, dtype);
    } else {
      v.initializer_ = ops::Assign(inner.WithOpName("Assign"), v.handle_, init).op();
      v.value_ = ops::Identity(inner.WithOpName("read"), v.handle_);
    }
    RETURN_IF_ERROR(scope.status());
    return v;
  }

  // The variable of graph node `n` (a VarHandleOp or VariableV2), as Build made it.
  static absl::StatusOr<Variable> FromNode(const tensorflow::NodeDef& n,
                                           const std::set<std::string>& nodes) {
    Variable v;
    RETURN_IF_ERROR(GetNodeAttr(n, "dtype", &v.dtype_));
    tensorflow::TensorShapeProto shape;
    RETURN_IF_ERROR(GetNodeAttr(n, "shape", &shape));
    ASSIGN_OR_RETURN(v.shape_, TensorShape::FromProto(shape));
    v.is_resource_ = n.op() == "VarHandleOp";
    v.op_ = Operation(n.name(), 1);
    v.handle_ = Output(v.op_, 0, v.is_resource_ ? DT_RESOURCE : MakeRefType(v.dtype_),
                       PartialShape::FromProto(shape));
    const std::string read = n.name() + (v.is_resource_ ? "/Read/ReadVariableOp" : "/read");
    if (nodes.count(read)) v.value_ = Output(Operation(read, 1), 0, v.dtype_, v.handle_.shape());
    if (nodes.count(n.name() + "/Assign")) v.initializer_ = Operation(n.name() + "/Assign", 1);
    return v;
  }

 private:
  static tensorflow::NodeDef VariableNode(const std::string& full, const TensorShape& shape,
                                          DataType dtype, const VariableOptions& options) {
    tensorflow::NodeDef n;
    n.set_op(options.use_resource ? "VarHandleOp" : "VariableV2");
    SetAttr(&n, "dtype", dtype);
    SetAttr(&n, "shape", shape);
    SetAttr(&n, "container", options.container);
    // TF 1.x names a resource variable's storage after the variable.
    SetAttr(&n, "shared_name", options.use_resource ? full : std::string());
    return n;
  }
};

Output Variable::Read(const Scope& s) const {
  // As TensorFlow's ResourceVariable.value(): the read ignores the caller's
  // colocation (an update colocated with another variable on another ps
  // task) and runs beside its variable.
  const Scope beside = s.WithoutPlacement();
  return is_resource_ ? ops::ReadVariableOp(beside, handle_, dtype_)
                      : ops::Identity(beside, handle_);
}

Operation Variable::Assign(const Scope& s, Input value) const {
  return is_resource_ ? ops::AssignVariableOp(s, handle_, value)
                      : ops::Assign(s, handle_, value).op();
}

Operation Variable::AssignAdd(const Scope& s, Input value) const {
  return is_resource_ ? ops::AssignAddVariableOp(s, handle_, value)
                      : ops::AssignAdd(s, handle_, value).op();
}

absl::StatusOr<Variable> MakeVariable(const Scope& scope, const std::string& name,
                                      const TensorShape& shape, DataType dtype,
                                      const Initializer& init, const VariableOptions& options) {
  return VariableBuilder::Build(
      scope, name, shape, dtype,
      [&](const Scope& inner) { return init(inner.NewSubScope("Initializer"), shape, dtype); },
      options);
}

absl::StatusOr<Variable> MakeVariable(const Scope& scope, const std::string& name,
                                      const Tensor& initial_value, const VariableOptions& options) {
  return VariableBuilder::Build(
      scope, name, initial_value.shape(), initial_value.dtype(),
      [&](const Scope& inner) {
        return ops::Const(inner.WithOpName("initial_value"), initial_value);
      },
      options);
}

Operation GlobalVariablesInitializer(const Scope& scope) {
  tensorflow::GraphDef graph;
  absl::Status s = scope.ToGraphDef(&graph);
  if (!s.ok()) {
    scope.UpdateStatus(s);
    return Operation();
  }
  std::set<std::string> variables;
  for (const tensorflow::NodeDef& n : graph.node()) {
    if (n.op() == "VariableV2" || n.op() == "VarHandleOp") variables.insert(n.name());
  }
  std::vector<Operation> initializers;
  for (const tensorflow::NodeDef& n : graph.node()) {
    if (n.op() != "Assign" && n.op() != "AssignVariableOp") continue;
    if (n.input_size() == 0 || variables.count(n.input(0)) == 0) continue;
    if (n.name() == n.input(0) + "/Assign") initializers.emplace_back(n.name(), 1);
  }
  std::sort(initializers.begin(), initializers.end(),
            [](const Operation& a, const Operation& b) { return a.name() < b.name(); });
  return ops::NoOp(scope.WithOpName("init").WithControlDependencies(initializers));
}

absl::StatusOr<std::vector<Variable>> GlobalVariables(const Scope& scope) {
  tensorflow::GraphDef graph;
  RETURN_IF_ERROR(scope.ToGraphDef(&graph));
  std::set<std::string> nodes;
  for (const tensorflow::NodeDef& n : graph.node()) nodes.insert(n.name());
  std::vector<Variable> out;
  for (const tensorflow::NodeDef& n : graph.node()) {
    if (n.op() != "VariableV2" && n.op() != "VarHandleOp") continue;
    ASSIGN_OR_RETURN(Variable v, VariableBuilder::FromNode(n, nodes));
    out.push_back(std::move(v));
  }
  return out;
}

std::vector<Output> VariablesInitialized(const Scope& root, const std::string& device_prefix) {
  absl::StatusOr<std::vector<Variable>> variables = GlobalVariables(root);
  if (!variables.ok()) {
    root.UpdateStatus(variables.status());
    return {};
  }
  std::map<std::string, std::string> device_of;
  for (const auto& node : root.graph_def().node()) device_of[node.name()] = node.device();
  std::vector<Output> out;
  Scope s = root.NewSubScope("report_uninitialized_variables");
  for (const Variable& v : *variables) {
    if (device_of[v.name()].rfind(device_prefix, 0) != 0) continue;
    Scope c = s.ColocateWith(v.op());
    out.push_back(v.is_resource() ? ops::VarIsInitializedOp(c, v.handle())
                                  : ops::IsVariableInitialized(c, v.handle()));
  }
  return out;
}

absl::StatusOr<Variable> CreateGlobalStep(const Scope& scope, bool use_resource) {
  VariableOptions options;
  options.use_resource = use_resource;
  return MakeVariable(scope, "global_step", TensorShape({}), DT_INT64, ZerosInitializer(), options);
}

std::string ScopeName(const Scope& scope) {
  // A fresh name in the scope is "<prefix>/_" (or "_<n>" when taken).
  const std::string probe = scope.WithOpName("").GetUniqueNameForOp("_");
  const size_t slash = probe.rfind('/');
  return slash == std::string::npos ? std::string() : probe.substr(0, slash);
}

Operation AddNodeNamed(const Scope& scope, const std::string& name, tensorflow::NodeDef node,
                       const std::vector<Input>& inputs, std::vector<Output>* outputs) {
  node.set_name(name);
  return scope.AddNode(std::move(node), inputs, outputs);
}

}  // namespace dflow
