// Symbolic gradients: each differentiable op registers a function that, given
// the gradients flowing into its outputs, adds the ops computing the
// gradients of its inputs. Gradient functions live beside their ops in ops/;
// the graph they build is reached through GradBuilder, which the client
// layer implements over a Scope (so ops/ never depends on client/).
//
//   absl::Status MatMulGrad(GradContext* g) {
//     // d(a) = dy · bᵀ,  d(b) = aᵀ · dy   (no transposes set)
//     g->SetInputGrad(0, g->b()->Op("MatMul", {g->grad_output(0), g->input(1)},
//                                   {{"transpose_b", AttrBool(true)}}));
//     g->SetInputGrad(1, g->b()->Op("MatMul", {g->input(0), g->grad_output(0)},
//                                   {{"transpose_a", AttrBool(true)}}));
//     return absl::OkStatus();
//   }
//   REGISTER_GRADIENT("MatMul", MatMulGrad);
#ifndef DFLOW_FRAMEWORK_GRADIENT_H_
#define DFLOW_FRAMEWORK_GRADIENT_H_

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/framework/status.h"
#include "dflow/framework/tensor.h"
#include "dflow/proto/node_def.pb.h"

namespace dflow {

// A tensor of the graph being built: output `index` of node `node`.
struct SymTensor {
  std::string node;
  int index = 0;
  DataType dtype = DT_INVALID;
  PartialShape shape;
  std::string name() const { return node + ":" + std::to_string(index); }
};

using AttrList = std::vector<std::pair<std::string, tensorflow::AttrValue>>;
tensorflow::AttrValue AttrBool(bool v);
tensorflow::AttrValue AttrInt(int64_t v);
tensorflow::AttrValue AttrFloat(float v);
tensorflow::AttrValue AttrType(DataType v);
tensorflow::AttrValue AttrString(const std::string& v);
tensorflow::AttrValue AttrInts(const std::vector<int64_t>& v);

// Adds ops to the graph under construction. Type attrs ("T", "N", ...) are
// filled from the inputs' dtypes, as the client's op wrappers do. Errors are
// recorded and returned by status(); ops added after an error return an
// invalid SymTensor (empty node).
class GradBuilder {
 public:
  virtual ~GradBuilder() = default;
  // Adds op `op_type` with `inputs` (one per input arg; list args take
  // `list_inputs` instead) and returns all its outputs.
  virtual std::vector<SymTensor> OpN(const std::string& op_type,
                                     const std::vector<std::vector<SymTensor>>& args,
                                     const AttrList& attrs) = 0;
  virtual SymTensor Const(const Tensor& value) = 0;
  virtual absl::Status status() const = 0;

  // Output 0 of an op whose every input arg is a single tensor.
  SymTensor Op(const std::string& op_type, const std::vector<SymTensor>& inputs,
               const AttrList& attrs = {});
  // A scalar constant of `dtype` holding `value`.
  SymTensor Scalar(DataType dtype, double value);
};

// What a gradient function sees for one forward node.
class GradContext {
 public:
  GradContext(const tensorflow::NodeDef& node, std::vector<SymTensor> inputs,
              std::vector<SymTensor> outputs, std::vector<std::optional<SymTensor>> grad_outputs,
              GradBuilder* builder);

  const tensorflow::NodeDef& node() const { return node_; }
  template <typename T>
  absl::Status GetAttr(const std::string& name, T* value) const {
    return GetNodeAttr(node_, name, value);
  }
  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  int num_outputs() const { return static_cast<int>(outputs_.size()); }
  const SymTensor& input(int i) const { return inputs_[i]; }
  const SymTensor& output(int i) const { return outputs_[i]; }
  // The gradient flowing into output i: zeros of the output's shape when no
  // path from the loss reaches it (built lazily with ZerosLike).
  SymTensor grad_output(int i);
  bool has_grad_output(int i) const { return grad_outputs_[i].has_value(); }
  GradBuilder* b() const { return builder_; }

  // Sets d(loss)/d(input i). Inputs left unset get no gradient (e.g. integer
  // inputs such as shapes and axes).
  void SetInputGrad(int i, SymTensor grad) { input_grads_[i] = std::move(grad); }
  const std::vector<std::optional<SymTensor>>& input_grads() const { return input_grads_; }

 private:
  const tensorflow::NodeDef& node_;
  std::vector<SymTensor> inputs_;
  std::vector<SymTensor> outputs_;
  std::vector<std::optional<SymTensor>> grad_outputs_;
  std::vector<std::optional<SymTensor>> input_grads_;
  GradBuilder* builder_;  // not owned
};

using GradFn = std::function<absl::Status(GradContext*)>;

// Thread-safe.
class GradientRegistry {
 public:
  static GradientRegistry* Global();
  void Register(const std::string& op, GradFn fn);
  // nullptr when the op has no gradient registered.
  const GradFn* Find(const std::string& op) const;
  // Ops registered as having no gradient (Shape, ArgMax, comparisons, ...).
  void RegisterNoGradient(const std::string& op);
  bool IsNoGradient(const std::string& op) const;
  std::vector<std::string> ListOps() const;

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, GradFn> fns_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, bool> no_gradient_ ABSL_GUARDED_BY(mu_);
};

struct GradientRegistrar {
  GradientRegistrar(const std::string& op, GradFn fn) {
    GradientRegistry::Global()->Register(op, std::move(fn));
  }
};
struct NoGradientRegistrar {
  explicit NoGradientRegistrar(const std::string& op) {
    GradientRegistry::Global()->RegisterNoGradient(op);
  }
};

#define REGISTER_GRADIENT(op, fn)                                                  \
  static ::dflow::GradientRegistrar DFLOW_CONCAT(dflow_grad_reg_, __COUNTER__)(op, fn)
#define REGISTER_NO_GRADIENT(op)                                                     \
  static ::dflow::NoGradientRegistrar DFLOW_CONCAT(dflow_nograd_reg_, __COUNTER__)(op)

}  // namespace dflow

#endif  // DFLOW_FRAMEWORK_GRADIENT_H_
