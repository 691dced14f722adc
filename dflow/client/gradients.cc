#include "dflow/client/gradients.h"

#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dflow/client/op_builder.h"
#include "dflow/client/ops.h"
#include "dflow/framework/gradient.h"
#include "dflow/framework/op_def.h"
#include "dflow/framework/status.h"

namespace dflow {
namespace {

constexpr char kCall[] = "[AddSymbolicGradients] ";

// Tensors that can carry a gradient. Resource handles do: the gradient of
// a variable's reads flows to its handle.
bool IsDifferentiable(DataType t) {
  switch (BaseType(t)) {
    case tensorflow::DT_FLOAT:
    case tensorflow::DT_DOUBLE:
    case tensorflow::DT_HALF:
    case tensorflow::DT_BFLOAT16:
    case tensorflow::DT_COMPLEX64:
    case tensorflow::DT_COMPLEX128:
    case tensorflow::DT_RESOURCE:
      return true;
    default:
      return false;
  }
}

SymTensor ToSym(const Output& o) {
  if (!o.valid()) return SymTensor();
  return SymTensor{o.node_name(), o.index(), o.type(), o.shape()};
}

Output ToOutput(const SymTensor& t) {
  if (t.node.empty()) return Output();
  return Output(Operation(t.node, t.index + 1), t.index, t.dtype, t.shape);
}

// Sets one attr of the kinds gradient functions use.
void ApplyAttr(OpBuilder* op, const std::string& name, const tensorflow::AttrValue& v) {
  using tensorflow::AttrValue;
  switch (v.value_case()) {
    case AttrValue::kB:
      op->Attr(name, v.b());
      break;
    case AttrValue::kI:
      op->Attr(name, static_cast<int64_t>(v.i()));
      break;
    case AttrValue::kF:
      op->Attr(name, v.f());
      break;
    case AttrValue::kS:
      op->Attr(name, v.s());
      break;
    case AttrValue::kType:
      op->Attr(name, v.type());
      break;
    case AttrValue::kShape:
      op->Attr(name, v.shape());
      break;
    case AttrValue::kList:
      if (v.list().type_size() > 0) {
        std::vector<DataType> types;
        for (int t : v.list().type()) types.push_back(static_cast<DataType>(t));
        op->Attr(name, types);
      } else if (v.list().s_size() > 0) {
        op->Attr(name, std::vector<std::string>(v.list().s().begin(), v.list().s().end()));
      } else {
        op->Attr(name, std::vector<int64_t>(v.list().i().begin(), v.list().i().end()));
      }
      break;
    default:
      break;
  }
}

// GradBuilder adding ops to a Scope through OpBuilder.
class ScopeGradBuilder final : public GradBuilder {
 public:
  explicit ScopeGradBuilder(const Scope& scope) : scope_(scope) {}

  std::vector<SymTensor> OpN(const std::string& op_type,
                             const std::vector<std::vector<SymTensor>>& args,
                             const AttrList& attrs) override {
    OpBuilder op(scope_, op_type);
    for (const std::vector<SymTensor>& arg : args) {
      std::vector<Input> list;
      for (const SymTensor& t : arg) list.emplace_back(ToOutput(t));
      op.InputList(list);
    }
    for (const auto& [name, value] : attrs) ApplyAttr(&op, name, value);
    std::vector<SymTensor> out;
    for (const Output& o : op.FinishAll()) out.push_back(ToSym(o));
    return out;
  }
  SymTensor Const(const Tensor& value) override { return ToSym(ops::Const(scope_, value)); }
  absl::Status status() const override { return scope_.status(); }

 private:
  Scope scope_;
};

// One output of one node of the forward graph, by node index.
struct TensorRef {
  int node = -1;
  int index = 0;
  auto operator<=>(const TensorRef&) const = default;
};

struct NodeInfo {
  const tensorflow::NodeDef* def = nullptr;
  std::vector<TensorRef> inputs;  // Data inputs, in order.
  DataTypeVector out_types;
  std::vector<std::pair<int, int>> consumers;  // (node, input slot) of data edges.
};

// Builds the gradient graph: index the forward graph, find the tensors on a
// path from xs to ys, then visit their nodes in reverse topological order
// (a node is ready once every gradient flowing into its outputs arrived).
class GradientWalker {
 public:
  GradientWalker(const Scope& scope, const std::vector<Output>& ys, const std::vector<Output>& xs)
      : scope_(scope), grad_scope_(scope.NewSubScope("gradients")), ys_out_(ys), xs_out_(xs) {}

  absl::Status Run(const std::vector<Output>& grad_ys, std::vector<Output>* grad_xs);

 private:
  absl::Status IndexGraph();
  absl::StatusOr<TensorRef> Find(const Output& o, const std::string& what) const;
  std::vector<bool>::reference Live(TensorRef t) { return live_[t.node][t.index]; }
  void MarkLive();
  void MarkActive();
  void CountPending();
  void Backprop(TensorRef t, std::optional<SymTensor> grad);
  std::optional<SymTensor> SumGrads(TensorRef t);
  SymTensor Sym(TensorRef t) const;
  absl::Status ProcessNode(int n);
  absl::Status CallGradFn(int n, const std::vector<std::optional<SymTensor>>& dys);
  Output ZerosFor(int i);

  Scope scope_;
  Scope grad_scope_;
  const std::vector<Output>& ys_out_;
  const std::vector<Output>& xs_out_;
  tensorflow::GraphDef graph_;
  std::vector<NodeInfo> nodes_;
  std::map<std::string, int> by_name_;
  std::vector<TensorRef> ys_, xs_;
  std::vector<std::vector<bool>> live_;    // A gradient can flow from an x to it.
  std::vector<std::vector<bool>> useful_;  // ... and from it to a y.
  std::vector<bool> reached_;              // Some data input is live.
  std::vector<bool> active_;               // Reached, with a useful output.
  std::vector<bool> done_;
  std::vector<int> pending_;  // Gradients still expected.
  std::map<TensorRef, std::vector<SymTensor>> grads_;
  std::deque<int> ready_;
  std::vector<std::optional<SymTensor>> x_grads_;
};

absl::Status GradientWalker::IndexGraph() {
  RETURN_IF_ERROR(scope_.ToGraphDef(&graph_));
  nodes_.resize(graph_.node_size());
  for (int n = 0; n < graph_.node_size(); ++n) {
    nodes_[n].def = &graph_.node(n);
    by_name_[graph_.node(n).name()] = n;
  }
  for (int n = 0; n < graph_.node_size(); ++n) {
    NodeInfo& info = nodes_[n];
    ASSIGN_OR_RETURN(const OpDef* op, OpRegistry::Global()->LookUp(info.def->op()));
    DataTypeVector in_types;
    RETURN_IF_ERROR(InOutTypesForNode(*info.def, *op, &in_types, &info.out_types));
    for (const std::string& in : info.def->input()) {
      if (!in.empty() && in[0] == '^') continue;
      const size_t colon = in.rfind(':');
      TensorRef src;
      std::string name = in;
      if (colon != std::string::npos) {
        name = in.substr(0, colon);
        src.index = std::stoi(in.substr(colon + 1));
      }
      auto it = by_name_.find(name);
      if (it == by_name_.end()) {
        return absl::InvalidArgumentError(absl::StrCat(kCall, "node '", info.def->name(),
                                                       "' reads '", in, "', not in the graph"));
      }
      src.node = it->second;
      nodes_[src.node].consumers.emplace_back(n, static_cast<int>(info.inputs.size()));
      info.inputs.push_back(src);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<TensorRef> GradientWalker::Find(const Output& o, const std::string& what) const {
  auto it = by_name_.find(o.node_name());
  if (!o.valid() || it == by_name_.end() ||
      o.index() >= static_cast<int>(nodes_[it->second].out_types.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat(kCall, what, " '", o.name(), "' is not an output in the scope's graph"));
  }
  return TensorRef{it->second, o.index()};
}

void GradientWalker::MarkLive() {
  std::deque<TensorRef> queue;
  for (const TensorRef& x : xs_) {
    if (!Live(x) && IsDifferentiable(nodes_[x.node].out_types[x.index])) {
      Live(x) = true;
      queue.push_back(x);
    }
  }
  while (!queue.empty()) {
    const TensorRef t = queue.front();
    queue.pop_front();
    for (const auto& [m, slot] : nodes_[t.node].consumers) {
      if (nodes_[m].inputs[slot] != t || reached_[m]) continue;
      reached_[m] = true;
      for (int k = 0; k < static_cast<int>(nodes_[m].out_types.size()); ++k) {
        if (!live_[m][k] && IsDifferentiable(nodes_[m].out_types[k])) {
          live_[m][k] = true;
          queue.push_back({m, k});
        }
      }
    }
  }
}

void GradientWalker::MarkActive() {
  std::deque<TensorRef> queue;
  for (const TensorRef& y : ys_) {
    if (Live(y) && !useful_[y.node][y.index]) {
      useful_[y.node][y.index] = true;
      queue.push_back(y);
    }
  }
  while (!queue.empty()) {
    const TensorRef t = queue.front();
    queue.pop_front();
    if (!reached_[t.node] || active_[t.node]) continue;
    active_[t.node] = true;
    for (const TensorRef& s : nodes_[t.node].inputs) {
      if (Live(s) && !useful_[s.node][s.index]) {
        useful_[s.node][s.index] = true;
        queue.push_back(s);
      }
    }
  }
}

void GradientWalker::CountPending() {
  for (const TensorRef& y : ys_) {
    if (Live(y)) ++pending_[y.node];
  }
  for (size_t n = 0; n < nodes_.size(); ++n) {
    if (!active_[n]) continue;
    for (const TensorRef& s : nodes_[n].inputs) {
      if (Live(s)) ++pending_[s.node];
    }
  }
}

void GradientWalker::Backprop(TensorRef t, std::optional<SymTensor> grad) {
  if (grad.has_value() && !grad->node.empty()) grads_[t].push_back(*std::move(grad));
  if (--pending_[t.node] == 0) ready_.push_back(t.node);
}

std::optional<SymTensor> GradientWalker::SumGrads(TensorRef t) {
  auto it = grads_.find(t);
  if (it == grads_.end() || it->second.empty()) return std::nullopt;
  if (it->second.size() == 1) return it->second[0];
  ScopeGradBuilder b(grad_scope_);
  std::vector<SymTensor> sum = b.OpN("AddN", {it->second}, {});
  if (sum.empty()) return std::nullopt;  // The scope holds the error.
  return sum[0];
}

SymTensor GradientWalker::Sym(TensorRef t) const {
  return SymTensor{nodes_[t.node].def->name(), t.index, nodes_[t.node].out_types[t.index],
                   PartialShape::Unknown()};
}

absl::Status GradientWalker::ProcessNode(int n) {
  done_[n] = true;
  const int num_out = static_cast<int>(nodes_[n].out_types.size());
  std::vector<std::optional<SymTensor>> dys(num_out);
  bool any = false;
  for (int k = 0; k < num_out; ++k) {
    dys[k] = SumGrads({n, k});
    any = any || dys[k].has_value();
  }
  RETURN_IF_ERROR(scope_.status());
  for (size_t i = 0; i < xs_.size(); ++i) {
    if (xs_[i].node == n) x_grads_[i] = dys[xs_[i].index];
  }
  if (!active_[n]) return absl::OkStatus();
  const std::string& op = nodes_[n].def->op();
  if (any && !GradientRegistry::Global()->IsNoGradient(op)) {
    return CallGradFn(n, dys);
  }
  for (const TensorRef& s : nodes_[n].inputs) {
    if (Live(s)) Backprop(s, std::nullopt);
  }
  return absl::OkStatus();
}

absl::Status GradientWalker::CallGradFn(int n, const std::vector<std::optional<SymTensor>>& dys) {
  const NodeInfo& info = nodes_[n];
  const std::string context =
      absl::StrCat(kCall, "gradient of node '", info.def->name(), "' (", info.def->op(), ")");
  const GradFn* fn = GradientRegistry::Global()->Find(info.def->op());
  if (fn == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(kCall, "no gradient is registered for op '",
                                                   info.def->op(), "' (node '", info.def->name(),
                                                   "'), which lies on a path from xs to ys"));
  }
  std::vector<SymTensor> inputs, outputs;
  for (const TensorRef& s : info.inputs) inputs.push_back(Sym(s));
  for (int k = 0; k < static_cast<int>(info.out_types.size()); ++k) outputs.push_back(Sym({n, k}));
  ScopeGradBuilder b(grad_scope_.NewSubScope(info.def->name() + "_grad"));
  GradContext g(*info.def, std::move(inputs), std::move(outputs), dys, &b);
  RETURN_IF_ERROR(WithContext((*fn)(&g), context));
  RETURN_IF_ERROR(WithContext(scope_.status(), context));
  for (size_t j = 0; j < info.inputs.size(); ++j) {
    if (Live(info.inputs[j])) Backprop(info.inputs[j], g.input_grads()[j]);
  }
  return absl::OkStatus();
}

// Zeros of x's value: ZerosLike(x), or of the variable's value for a handle.
Output GradientWalker::ZerosFor(int i) {
  const Output& x = xs_out_[i];
  if (BaseType(x.type()) != DT_RESOURCE) return ops::ZerosLike(grad_scope_, x);
  DataType dtype = DT_INVALID;
  absl::Status s = GetNodeAttr(*nodes_[xs_[i].node].def, "dtype", &dtype);
  if (!s.ok()) {
    grad_scope_.UpdateStatus(WithContext(s, absl::StrCat(kCall, "zero gradient of ", x.name())));
    return Output();
  }
  return ops::ZerosLike(grad_scope_, ops::ReadVariableOp(grad_scope_, x, dtype));
}

absl::Status GradientWalker::Run(const std::vector<Output>& grad_ys, std::vector<Output>* grad_xs) {
  if (!grad_ys.empty() && grad_ys.size() != ys_out_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(kCall, "got ", grad_ys.size(), " grad_ys for ", ys_out_.size(), " ys"));
  }
  RETURN_IF_ERROR(IndexGraph());
  for (const Output& y : ys_out_) {
    ASSIGN_OR_RETURN(TensorRef t, Find(y, "y"));
    ys_.push_back(t);
  }
  for (const Output& x : xs_out_) {
    ASSIGN_OR_RETURN(TensorRef t, Find(x, "x"));
    xs_.push_back(t);
  }
  const size_t num_nodes = nodes_.size();
  live_.resize(num_nodes);
  useful_.resize(num_nodes);
  for (size_t n = 0; n < num_nodes; ++n) {
    live_[n].assign(nodes_[n].out_types.size(), false);
    useful_[n].assign(nodes_[n].out_types.size(), false);
  }
  reached_.assign(num_nodes, false);
  active_.assign(num_nodes, false);
  done_.assign(num_nodes, false);
  pending_.assign(num_nodes, 0);
  x_grads_.assign(xs_.size(), std::nullopt);
  MarkLive();
  MarkActive();
  CountPending();

  for (size_t i = 0; i < ys_.size(); ++i) {
    if (!Live(ys_[i])) continue;
    const Output dy = grad_ys.empty() ? ops::OnesLike(grad_scope_, ys_out_[i]) : grad_ys[i];
    RETURN_IF_ERROR(scope_.status());
    if (!dy.valid()) {
      return absl::InvalidArgumentError(absl::StrCat(kCall, "grad_ys[", i, "] is not valid"));
    }
    Backprop(ys_[i], ToSym(dy));
  }
  while (!ready_.empty()) {
    const int n = ready_.front();
    ready_.pop_front();
    RETURN_IF_ERROR(ProcessNode(n));
  }
  for (size_t n = 0; n < num_nodes; ++n) {
    if (active_[n] && !done_[n]) {
      return absl::UnimplementedError(absl::StrCat(kCall, "node '", nodes_[n].def->name(),
                                                   "' lies on a cycle; loops are not supported"));
    }
  }

  grad_xs->clear();
  for (size_t i = 0; i < xs_.size(); ++i) {
    grad_xs->push_back(x_grads_[i].has_value() ? ToOutput(*x_grads_[i]) : ZerosFor(i));
  }
  return scope_.status();
}

}  // namespace

absl::Status AddSymbolicGradients(const Scope& scope, const std::vector<Output>& ys,
                                  const std::vector<Output>& xs, const std::vector<Output>& grad_ys,
                                  std::vector<Output>* grad_xs) {
  RETURN_IF_ERROR(scope.status());
  GradientWalker walker(scope, ys, xs);
  return walker.Run(grad_ys, grad_xs);
}

absl::Status AddSymbolicGradients(const Scope& scope, const Output& loss,
                                  const std::vector<Output>& xs, std::vector<Output>* grad_xs) {
  return AddSymbolicGradients(scope, std::vector<Output>{loss}, xs, {}, grad_xs);
}

}  // namespace dflow
