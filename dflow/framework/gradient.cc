#include "dflow/framework/gradient.h"

#include "absl/synchronization/mutex.h"

namespace dflow {

// --- attr helpers ------------------------------------------------------------

tensorflow::AttrValue AttrBool(bool v) {
  tensorflow::AttrValue a;
  a.set_b(v);
  return a;
}

tensorflow::AttrValue AttrInt(int64_t v) {
  tensorflow::AttrValue a;
  a.set_i(v);
  return a;
}

tensorflow::AttrValue AttrFloat(float v) {
  tensorflow::AttrValue a;
  a.set_f(v);
  return a;
}

tensorflow::AttrValue AttrType(DataType v) {
  tensorflow::AttrValue a;
  a.set_type(v);
  return a;
}

tensorflow::AttrValue AttrString(const std::string& v) {
  tensorflow::AttrValue a;
  a.set_s(v);
  return a;
}

tensorflow::AttrValue AttrInts(const std::vector<int64_t>& v) {
  tensorflow::AttrValue a;
  auto* list = a.mutable_list();
  for (int64_t x : v) list->add_i(x);
  return a;
}

// --- GradBuilder -------------------------------------------------------------

SymTensor GradBuilder::Op(const std::string& op_type, const std::vector<SymTensor>& inputs,
                          const AttrList& attrs) {
  std::vector<std::vector<SymTensor>> args;
  args.reserve(inputs.size());
  for (const SymTensor& in : inputs) args.push_back({in});
  std::vector<SymTensor> outs = OpN(op_type, args, attrs);
  return outs.empty() ? SymTensor() : outs[0];
}

SymTensor GradBuilder::Scalar(DataType dtype, double value) {
  Tensor t;
  absl::Status s = SwitchNumeric(dtype, "GradBuilder::Scalar", [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    t = Tensor::Scalar<T>(static_cast<T>(value));
    return absl::OkStatus();
  });
  // A dtype without a C++ scalar type: a double constant, which the
  // consuming op then rejects with a type error naming itself.
  if (!s.ok()) t = Tensor::Scalar<double>(value);
  return Const(t);
}

// --- GradContext -------------------------------------------------------------

GradContext::GradContext(const tensorflow::NodeDef& node, std::vector<SymTensor> inputs,
                         std::vector<SymTensor> outputs,
                         std::vector<std::optional<SymTensor>> grad_outputs, GradBuilder* builder)
    : node_(node),
      inputs_(std::move(inputs)),
      outputs_(std::move(outputs)),
      grad_outputs_(std::move(grad_outputs)),
      input_grads_(inputs_.size()),
      builder_(builder) {
  grad_outputs_.resize(outputs_.size());
}

SymTensor GradContext::grad_output(int i) {
  if (!grad_outputs_[i].has_value()) {
    grad_outputs_[i] = builder_->Op("ZerosLike", {outputs_[i]});
  }
  return *grad_outputs_[i];
}

// --- GradientRegistry --------------------------------------------------------

GradientRegistry* GradientRegistry::Global() {
  static GradientRegistry* registry = new GradientRegistry;
  return registry;
}

void GradientRegistry::Register(const std::string& op, GradFn fn) {
  absl::MutexLock l(&mu_);
  fns_[op] = std::move(fn);
}

const GradFn* GradientRegistry::Find(const std::string& op) const {
  absl::MutexLock l(&mu_);
  auto it = fns_.find(op);
  // std::map nodes are stable: the pointer stays valid while the entry lives.
  return it == fns_.end() ? nullptr : &it->second;
}

void GradientRegistry::RegisterNoGradient(const std::string& op) {
  absl::MutexLock l(&mu_);
  no_gradient_[op] = true;
}

bool GradientRegistry::IsNoGradient(const std::string& op) const {
  absl::MutexLock l(&mu_);
  return no_gradient_.count(op) > 0;
}

std::vector<std::string> GradientRegistry::ListOps() const {
  absl::MutexLock l(&mu_);
  std::vector<std::string> ops;
  for (const auto& [name, fn] : fns_) ops.push_back(name);
  return ops;
}

}  // namespace dflow
