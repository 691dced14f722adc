// Graph construction in TensorFlow's C++ API shape.
//
//   Scope root = Scope::NewRootScope();
//   Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT);
//   Output w = ops::Const(root, Tensor::FromVector<float>({1, 2}, TensorShape({2, 1})));
//   Output y = ops::MatMul(root.WithOpName("y"), x, w);
//   if (!root.status().ok()) ...          // first construction error, if any
//   ClientSession session(root);
//   session.Run({{x, batch}}, {y}, &out);
//
// Scopes are cheap values sharing one graph. Name scopes ("layer1/..."),
// device scopes, control dependencies and colocation are inherited by child
// scopes. Each op added is validated against its OpDef and its shape function
// runs, so errors surface at construction time (recorded in status()).
#ifndef DFLOW_CLIENT_SCOPE_H_
#define DFLOW_CLIENT_SCOPE_H_

#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/framework/tensor.h"
#include "dflow/proto/graph.pb.h"

namespace dflow {

class Scope;

// A node in the graph being built.
class Operation {
 public:
  Operation() = default;
  Operation(std::string name, int num_outputs) : name_(std::move(name)), num_outputs_(num_outputs) {}
  const std::string& name() const { return name_; }
  int num_outputs() const { return num_outputs_; }
  bool valid() const { return !name_.empty(); }

 private:
  std::string name_;
  int num_outputs_ = 0;
};

// One output of a node: "name:index".
class Output {
 public:
  Output() = default;
  Output(Operation op, int index, DataType dtype, PartialShape shape)
      : op_(std::move(op)), index_(index), dtype_(dtype), shape_(std::move(shape)) {}
  const Operation& op() const { return op_; }
  const std::string& node_name() const { return op_.name(); }
  int index() const { return index_; }
  DataType type() const { return dtype_; }
  const PartialShape& shape() const { return shape_; }
  // "name:index" as used for fetches and feeds.
  std::string name() const { return op_.name() + ":" + std::to_string(index_); }
  bool valid() const { return op_.valid(); }

 private:
  Operation op_;
  int index_ = 0;
  DataType dtype_ = DT_INVALID;
  PartialShape shape_;
};

// An op input: an Output, or a constant (a Tensor, or literal values that
// become a Const node in the consuming op's scope).
class Input {
 public:
  Input(Output o) : output_(std::move(o)) {}                    // NOLINT
  Input(Operation op) : output_(op, 0, DT_INVALID, {}) {}       // NOLINT
  Input(Tensor t) : tensor_(std::move(t)), is_const_(true) {}   // NOLINT
  Input(float v) : Input(Tensor::Scalar<float>(v)) {}           // NOLINT
  Input(double v) : Input(Tensor::Scalar<double>(v)) {}         // NOLINT
  Input(int32_t v) : Input(Tensor::Scalar<int32_t>(v)) {}       // NOLINT
  Input(int64_t v) : Input(Tensor::Scalar<int64_t>(v)) {}       // NOLINT
  Input(bool v) : Input(Tensor::Scalar<bool>(v)) {}             // NOLINT
  Input(const char* v) : Input(Tensor::Scalar<std::string>(v)) {}  // NOLINT
  Input(std::initializer_list<float> v) : Input(Tensor::Vec<float>(v)) {}      // NOLINT
  Input(std::initializer_list<int32_t> v) : Input(Tensor::Vec<int32_t>(v)) {}  // NOLINT
  Input(std::initializer_list<int64_t> v) : Input(Tensor::Vec<int64_t>(v)) {}  // NOLINT
  // A nested list: {{1.f, 2.f}, {3.f, 4.f}} is a [2,2] float constant.
  Input(std::initializer_list<std::initializer_list<float>> rows);  // NOLINT

  bool is_const() const { return is_const_; }
  const Output& output() const { return output_; }
  const Tensor& tensor() const { return tensor_; }

 private:
  Output output_;
  Tensor tensor_;
  bool is_const_ = false;
};

using OutputList = std::vector<Output>;

class Scope {
 public:
  static Scope NewRootScope();

  // A child scope whose op names are prefixed "<name>/".
  Scope NewSubScope(const std::string& name) const;
  // The next op added with this scope is named exactly `name` (uniquified
  // with "_1", "_2"... only when taken).
  Scope WithOpName(const std::string& name) const;
  Scope WithDevice(const std::string& device) const;
  // Ops added get a control dependency on each of `deps`.
  Scope WithControlDependencies(const std::vector<Operation>& deps) const;
  Scope WithControlDependencies(const Output& dep) const {
    return WithControlDependencies(std::vector<Operation>{dep.op()});
  }
  Scope WithNoControlDependencies() const;
  // Ops added are colocated with `op` (the `_class: loc:@op` attr) and take
  // its device; device scopes and functions set before do not apply (as
  // TensorFlow's colocate_with).
  Scope ColocateWith(const Operation& op) const;
  Scope ColocateWith(const Output& o) const { return ColocateWith(o.op()); }
  // No colocation, device or device function (TensorFlow's
  // colocate_with(None, ignore_existing=True)): ops added go where their
  // inputs take them, e.g. a variable read beside its variable.
  Scope WithoutPlacement() const;
  // A device function: called with each new op's NodeDef (after name scopes)
  // to choose its device; replica_device_setter is one.
  Scope WithDeviceFunction(std::function<std::string(const tensorflow::NodeDef&)> fn) const;

  // The first construction error in this graph, or OK.
  absl::Status status() const;
  bool ok() const { return status().ok(); }
  void UpdateStatus(const absl::Status& s) const;

  // Unique name for a new op of type `op_type` in this scope.
  std::string GetUniqueNameForOp(const std::string& op_type) const;
  const std::string& device() const { return device_; }

  // The graph built so far.
  absl::Status ToGraphDef(tensorflow::GraphDef* out) const;
  // The number of nodes in the graph built so far (cheap: no copy).
  int num_nodes() const;
  const tensorflow::GraphDef& graph_def() const;

  // Adds a node: fills name (if empty) from the scope, device, control
  // dependencies and colocation; validates it; infers output types and
  // shapes. Returns an invalid Operation after recording an error.
  // `inputs` are turned into node inputs (constants become Const nodes).
  Operation AddNode(tensorflow::NodeDef node, const std::vector<Input>& inputs,
                    std::vector<Output>* outputs) const;
  // Turns an Input into an Output, creating a Const node for constants.
  Output AsOutput(const Input& in) const;

 private:
  struct Graph;
  Scope() = default;

  std::shared_ptr<Graph> graph_;
  std::string name_prefix_;  // "a/b/" or ""
  std::string exact_name_;
  std::string device_;
  std::vector<Operation> control_deps_;
  std::vector<std::string> colocate_with_;
  std::function<std::string(const tensorflow::NodeDef&)> device_fn_;
};

}  // namespace dflow

#endif  // DFLOW_CLIENT_SCOPE_H_
