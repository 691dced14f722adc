// Variables in a Scope's graph, built as TensorFlow 1.x's Python builds them
// so GraphDefs match node for node:
//
//   resource (tf.compat.v1.Variable(use_resource=True)):
//     w                        VarHandleOp (shared_name "w")
//     w/Initializer/...        the initial value (or w/initial_value: a Const)
//     w/Assign                 AssignVariableOp(w, initial value)
//     w/Read/ReadVariableOp    the value
//   reference (TF 1.x's default, VariableV2):
//     w                        VariableV2
//     w/Initializer/...        (or w/initial_value)
//     w/Assign                 Assign(w, initial value)
//     w/read                   Identity(w): the value
//
// Every node but the variable itself is colocated with it (`_class:
// loc:@w`). Usage:
//
//   ASSIGN_OR_RETURN(Variable w, MakeVariable(root, "w", TensorShape({784, 10}), DT_FLOAT,
//                                             GlorotUniformInitializer(1)));
//   Output logits = ops::MatMul(root, x, w.value());
//   Operation init = GlobalVariablesInitializer(root);
//   session.Run({}, {}, {init}, nullptr);
#ifndef DFLOW_TRAIN_VARIABLES_H_
#define DFLOW_TRAIN_VARIABLES_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "dflow/client/scope.h"
#include "dflow/train/initializers.h"

namespace dflow {

struct VariableOptions {
  // Resource variables (VarHandleOp) when true, reference variables
  // (VariableV2, TensorFlow 1.x's default) when false.
  bool use_resource = true;
  std::string container;
  // When set, every node of the variable is colocated with this op instead
  // of the variable (how optimizers place slots beside their variable).
  std::optional<Operation> colocate_with;
};

// A handle on the nodes of one variable. Cheap to copy.
class Variable {
 public:
  Variable() = default;

  // The variable node's name, e.g. "layer1/w".
  const std::string& name() const { return op_.name(); }
  DataType dtype() const { return dtype_; }
  const TensorShape& shape() const { return shape_; }
  bool is_resource() const { return is_resource_; }
  bool valid() const { return op_.valid(); }

  // The VarHandleOp or VariableV2 node (what colocation names).
  const Operation& op() const { return op_; }
  // A resource handle, or the ref output for reference variables.
  const Output& handle() const { return handle_; }
  // The variable's value: w/Read/ReadVariableOp or w/read.
  const Output& value() const { return value_; }
  // Sets the initial value (w/Assign).
  const Operation& initializer() const { return initializer_; }

  // A new read of the current value (ReadVariableOp, or Identity of the ref),
  // placed beside the variable whatever the colocation of `s`.
  Output Read(const Scope& s) const;
  // Adds `var = value` (AssignVariableOp / Assign) and returns the op.
  Operation Assign(const Scope& s, Input value) const;
  // Adds `var += value` (AssignAddVariableOp / AssignAdd) and returns the op.
  Operation AssignAdd(const Scope& s, Input value) const;

 private:
  friend class VariableBuilder;
  Operation op_;
  Output handle_;
  Output value_;
  Operation initializer_;
  DataType dtype_ = DT_INVALID;
  TensorShape shape_;
  bool is_resource_ = false;
};

// Adds variable `name` (unique in `scope`: "w", then "w_1", ...) whose
// initial value `init` builds under "<name>/Initializer/". Errors (a bad
// dtype, a scope already in error) are returned and recorded on the scope.
absl::StatusOr<Variable> MakeVariable(const Scope& scope, const std::string& name,
                                      const TensorShape& shape, DataType dtype,
                                      const Initializer& init, const VariableOptions& options = {});
// As above with a constant initial value ("<name>/initial_value").
absl::StatusOr<Variable> MakeVariable(const Scope& scope, const std::string& name,
                                      const Tensor& initial_value,
                                      const VariableOptions& options = {});

// A NoOp "init" (uniquified) depending on the initializer of every variable
// in the scope's graph: each "<v>/Assign" whose first input is variable v
// (VariableV2 or VarHandleOp), as tf.compat.v1.global_variables_initializer.
Operation GlobalVariablesInitializer(const Scope& scope);

// The int64 scalar "global_step" (zeros, colocated with itself), as
// tf.compat.v1.train.get_or_create_global_step builds it (resource by default).
absl::StatusOr<Variable> CreateGlobalStep(const Scope& scope, bool use_resource = true);

// Every variable of the scope's graph (VarHandleOp and VariableV2 nodes: the
// model's, the optimizer's slots, the global step), in graph order: what
// TensorFlow's Saver saves by default.
absl::StatusOr<std::vector<Variable>> GlobalVariables(const Scope& scope);

// One scalar bool per variable placed on a device starting with
// `device_prefix` ("" for all, "/job:ps" for the shared ones): is it
// initialized? Colocated with each variable. What a chief's initialization
// or restore sets, and what other workers wait for.
std::vector<Output> VariablesInitialized(const Scope& root, const std::string& device_prefix = "");

// The full name of `scope`'s name prefix, without the trailing '/' ("" for
// the root). Reserves the name "<prefix>/_" in the graph.
std::string ScopeName(const Scope& scope);

// Adds `node` to `scope`'s graph named exactly `name` (which the caller got
// unique from the scope, e.g. as ScopeName of a fresh subscope), with the
// scope's device, control dependencies and colocation.
Operation AddNodeNamed(const Scope& scope, const std::string& name, tensorflow::NodeDef node,
                       const std::vector<Input>& inputs, std::vector<Output>* outputs);

}  // namespace dflow

#endif  // DFLOW_TRAIN_VARIABLES_H_
