#include "dflow/runtime/function.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "dflow/framework/attr_util.h"
#include "dflow/framework/status.h"
#include "dflow/runtime/layout_rewrite.h"

namespace dflow {
namespace {

constexpr int kMaxCallDepth = 32;
constexpr char kColocationPrefix[] = "loc:@";

bool IsIf(const Node& n) { return n.type_string() == "If" || n.type_string() == "StatelessIf"; }
bool IsWhile(const Node& n) {
  return n.type_string() == "While" || n.type_string() == "StatelessWhile";
}
bool IsCall(const Node& n) {
  return n.type_string() == "PartitionedCall" || n.type_string() == "StatefulPartitionedCall";
}

// One output of a node (or, with index kControlSlot, the node itself).
struct Endpoint {
  Node* node;
  int index;
};

class Lowering {
 public:
  Lowering(const tensorflow::FunctionDefLibrary& library, Graph* graph) : graph_(graph) {
    for (const tensorflow::FunctionDef& f : library.function()) {
      functions_[f.signature().name()] = &f;
    }
  }

  absl::Status Run() {
    for (int depth = 0;; ++depth) {
      std::vector<Node*> calls;
      for (Node* n : graph_->nodes()) {
        if (IsIf(*n) || IsWhile(*n) || IsCall(*n)) calls.push_back(n);
      }
      if (calls.empty()) break;
      if (depth == kMaxCallDepth) {
        return Error(*calls.front(), absl::StrCat("functions nest deeper than ", kMaxCallDepth,
                                                  " calls (a recursive function?)"));
      }
      for (Node* n : calls) {
        RETURN_IF_ERROR(IsIf(*n) ? LowerIf(n) : IsWhile(*n) ? LowerWhile(n) : LowerCall(n));
      }
    }
    AttachLibraries();
    return graph_->TopologicalOrder().status();
  }

  // Every node still naming functions (a dataset's map function) gets
  // kFunctionLibraryAttr: the functions it reaches, so that it can run them
  // on whichever task it is partitioned to.
  void AttachLibraries() {
    if (functions_.empty()) return;
    for (Node* n : graph_->nodes()) {
      if (n->def().attr().contains(kFunctionLibraryAttr)) continue;
      std::vector<std::string> pending;
      for (const auto& [name, value] : n->def().attr()) AddFunctionNames(value, &pending);
      if (pending.empty()) continue;
      tensorflow::FunctionDefLibrary closure;
      absl::flat_hash_set<std::string> seen;
      while (!pending.empty()) {
        const std::string name = pending.back();
        pending.pop_back();
        auto it = functions_.find(name);
        if (!seen.insert(name).second || it == functions_.end()) continue;
        *closure.add_function() = *it->second;
        for (const tensorflow::NodeDef& body : it->second->node_def()) {
          for (const auto& [attr, value] : body.attr()) AddFunctionNames(value, &pending);
        }
      }
      (*n->mutable_def()->mutable_attr())[kFunctionLibraryAttr].set_s(
          closure.SerializeAsString());
    }
  }

  static void AddFunctionNames(const tensorflow::AttrValue& v, std::vector<std::string>* out) {
    if (v.has_func()) out->push_back(v.func().name());
    for (const tensorflow::NameAttrList& f : v.list().func()) out->push_back(f.name());
  }

 private:
  static absl::Status Error(const Node& call, absl::string_view message) {
    return absl::InvalidArgumentError(
        absl::StrCat("[", call.type_string(), " '", call.name(), "'] ", message));
  }

  // The call's data inputs by slot, and the sources of its control inputs.
  static void CallInputs(const Node& call, std::vector<Endpoint>* data,
                         std::vector<Node*>* control) {
    data->assign(call.num_inputs(), Endpoint{nullptr, 0});
    for (const Edge* e : call.in_edges()) {
      if (e->IsControlEdge()) {
        control->push_back(e->src);
      } else {
        (*data)[e->dst_input] = Endpoint{e->src, e->src_output};
      }
    }
  }

  absl::StatusOr<const tensorflow::FunctionDef*> Find(const Node& call,
                                                      const tensorflow::NameAttrList& fn) const {
    auto it = functions_.find(fn.name());
    if (it == functions_.end()) {
      return absl::NotFoundError(absl::StrCat("[", call.type_string(), " '", call.name(),
                                              "'] function '", fn.name(),
                                              "' is not in the graph's library"));
    }
    return it->second;
  }

  static absl::StatusOr<tensorflow::NameAttrList> FuncAttr(const Node& call,
                                                           const std::string& attr) {
    auto it = call.def().attr().find(attr);
    if (it == call.def().attr().end() || !it->second.has_func()) {
      return Error(call, absl::StrCat("has no function attr '", attr, "'"));
    }
    return it->second.func();
  }

  std::string UniqueName(const std::string& base) const {
    if (graph_->FindNode(base) == nullptr) return base;
    for (int i = 1;; ++i) {
      std::string name = absl::StrCat(base, "_", i);
      if (graph_->FindNode(name) == nullptr) return name;
    }
  }

  // A new node `op` named after `base`, on `device`, with `attrs` set.
  template <typename SetAttrs>
  absl::StatusOr<Node*> NewNode(const std::string& base, const std::string& op,
                                const std::string& device, SetAttrs set_attrs) {
    tensorflow::NodeDef def;
    def.set_name(UniqueName(base));
    def.set_op(op);
    def.set_device(device);
    set_attrs(&def);
    return graph_->AddNode(std::move(def));
  }
  absl::StatusOr<Node*> NewTyped(const std::string& base, const std::string& op,
                                 const std::string& device, DataType t) {
    return NewNode(base, op, device, [t](tensorflow::NodeDef* d) { SetAttr(d, "T", t); });
  }

  // Adds src -> dst:slot after checking the types agree.
  absl::Status Connect(const Node& call, Endpoint src, Node* dst, int slot) {
    if (slot >= dst->num_inputs()) {
      return Error(call, absl::StrCat("node '", dst->name(), "' gets more than its ",
                                      dst->num_inputs(), " input(s)"));
    }
    if (!TypesCompatible(src.node->output_type(src.index), dst->input_type(slot))) {
      return Error(call, absl::StrCat("'", src.node->name(), ":", src.index, "' is ",
                                      DataTypeString(src.node->output_type(src.index)),
                                      " but input ", slot, " of '", dst->name(), "' expects ",
                                      DataTypeString(dst->input_type(slot))));
    }
    graph_->AddEdge(src.node, src.index, dst, slot);
    return absl::OkStatus();
  }

  // Number of tensors an argument of `f`'s signature stands for.
  static absl::StatusOr<int> ArgCount(const Node& call, const tensorflow::NameAttrList& fn,
                                      const tensorflow::OpDef::ArgDef& arg) {
    if (arg.number_attr().empty() && arg.type_list_attr().empty()) return 1;
    const std::string& attr = arg.number_attr().empty() ? arg.type_list_attr() : arg.number_attr();
    auto it = fn.attr().find(attr);
    if (it == fn.attr().end()) {
      return Error(call, absl::StrCat("function '", fn.name(), "' argument '", arg.name(),
                                      "' needs attr '", attr, "', which the call does not give"));
    }
    return arg.number_attr().empty() ? it->second.list().type_size()
                                     : static_cast<int>(it->second.i());
  }

  // Replaces "$attr" placeholders in a body node by the call's attr values.
  static absl::Status Substitute(const Node& call, const tensorflow::NameAttrList& fn,
                                 tensorflow::NodeDef* def) {
    for (auto& [name, value] : *def->mutable_attr()) {
      if (value.value_case() != tensorflow::AttrValue::kPlaceholder) continue;
      auto it = fn.attr().find(value.placeholder());
      if (it == fn.attr().end()) {
        return Error(call, absl::StrCat("attr '", name, "' of '", def->name(), "' in function '",
                                        fn.name(), "' refers to '", value.placeholder(),
                                        "', which the call does not give"));
      }
      value = it->second;
    }
    return absl::OkStatus();
  }

  // A function body being inlined for one call: where each signature
  // argument's tensors are in the call's `args`, and the body's nodes by
  // their names in the function.
  struct Body {
    const Node& call;
    const tensorflow::NameAttrList& fn;
    const std::vector<Endpoint>& args;
    const tensorflow::FunctionDef* f = nullptr;
    std::map<std::string, std::pair<int, int>> arg_range;  // name -> (first, count)
    absl::flat_hash_map<std::string, Node*> nodes;
  };

  // Inlines function `fn` called by `call`: body nodes are named under
  // `prefix`, default to the call's device, read `args` for the signature's
  // inputs and wait on `pivot` (when set). Returns the tensors of its
  // outputs and the nodes of its control outputs.
  absl::Status InlineBody(const Node& call, const tensorflow::NameAttrList& fn,
                          const std::string& prefix, const std::vector<Endpoint>& args, Node* pivot,
                          std::vector<Endpoint>* rets, std::vector<Node*>* control_rets) {
    Body body{call, fn, args};
    ASSIGN_OR_RETURN(body.f, Find(call, fn));
    RETURN_IF_ERROR(MapArguments(body));
    RETURN_IF_ERROR(AddBodyNodes(prefix, body));
    for (const tensorflow::NodeDef& nd : body.f->node_def()) {
      RETURN_IF_ERROR(ConnectBodyNode(nd, body));
    }
    if (pivot != nullptr) {
      for (const auto& [name, node] : body.nodes) graph_->AddControlEdge(pivot, node);
    }
    return CollectReturns(body, rets, control_rets);
  }

  // Fills `body.arg_range`; the call must pass as many tensors as the
  // signature takes.
  absl::Status MapArguments(Body& body) {
    int num_args = 0;
    for (const tensorflow::OpDef::ArgDef& a : body.f->signature().input_arg()) {
      ASSIGN_OR_RETURN(int count, ArgCount(body.call, body.fn, a));
      body.arg_range[a.name()] = {num_args, count};
      num_args += count;
    }
    if (num_args != static_cast<int>(body.args.size())) {
      return Error(body.call, absl::StrCat("function '", body.fn.name(), "' takes ", num_args,
                                           " argument(s) but the call passes ", body.args.size()));
    }
    return absl::OkStatus();
  }

  // Adds the body's nodes, unconnected, named under `prefix`.
  absl::Status AddBodyNodes(const std::string& prefix, Body& body) {
    const std::string& fn = body.fn.name();
    for (const tensorflow::NodeDef& nd : body.f->node_def()) {
      tensorflow::NodeDef def = nd;
      def.clear_input();
      def.set_name(UniqueName(prefix + nd.name()));
      if (def.device().empty()) def.set_device(body.call.requested_device());
      RETURN_IF_ERROR(Substitute(body.call, body.fn, &def));
      absl::StatusOr<Node*> node = graph_->AddNode(std::move(def));
      if (!node.ok()) {
        return Error(body.call, absl::StrCat("in function '", fn, "': ", node.status().message()));
      }
      if (!body.nodes.emplace(nd.name(), *node).second) {
        return Error(body.call,
                     absl::StrCat("function '", fn, "' has two nodes named '", nd.name(), "'"));
      }
    }
    return absl::OkStatus();
  }

  // The tensor a body reference names: "arg", "arg:i" (element i of a list
  // argument) or "node:output_arg:i".
  absl::StatusOr<Endpoint> Resolve(const Body& body, const std::string& ref) {
    std::vector<std::string> parts = absl::StrSplit(ref, ':');
    int i = 0;
    if (parts.size() > 1 && !absl::SimpleAtoi(parts.back(), &i)) i = -1;
    if (parts.size() <= 2) {
      auto it = body.arg_range.find(parts[0]);
      if (it != body.arg_range.end() && i >= 0 && i < it->second.second) {
        return body.args[it->second.first + i];
      }
    } else if (auto src = body.nodes.find(parts[0]); src != body.nodes.end() && i >= 0) {
      int start = 0, stop = 0;
      if (parts.size() == 3 &&
          OutputRange(src->second->def(), src->second->op_def(), parts[1], &start, &stop).ok() &&
          start + i < stop) {
        return Endpoint{src->second, start + i};
      }
    }
    return Error(body.call, absl::StrCat("function '", body.fn.name(), "' refers to '", ref,
                                         "', which is neither an argument nor a node output"));
  }

  // Connects the inputs of body node `nd`, and points its colocation with
  // another body node at that node's new name.
  absl::Status ConnectBodyNode(const tensorflow::NodeDef& nd, Body& body) {
    Node* dst = body.nodes[nd.name()];
    int slot = 0;
    for (const std::string& input : nd.input()) {
      if (!input.empty() && input[0] == '^') {
        auto it = body.nodes.find(input.substr(1));
        if (it != body.nodes.end()) {
          graph_->AddControlEdge(it->second, dst);
          continue;
        }
        ASSIGN_OR_RETURN(Endpoint src, Resolve(body, input.substr(1)));
        graph_->AddControlEdge(src.node, dst);
        continue;
      }
      ASSIGN_OR_RETURN(Endpoint src, Resolve(body, input));
      RETURN_IF_ERROR(Connect(body.call, src, dst, slot++));
    }
    if (slot != dst->num_inputs()) {
      return Error(body.call, absl::StrCat("node '", nd.name(), "' of function '", body.fn.name(),
                                           "' has ", slot, " data input(s), its op takes ",
                                           dst->num_inputs()));
    }
    auto cls = dst->mutable_def()->mutable_attr()->find("_class");
    if (cls != dst->mutable_def()->mutable_attr()->end()) {
      for (std::string& s : *cls->second.mutable_list()->mutable_s()) {
        if (s.rfind(kColocationPrefix, 0) != 0) continue;
        auto target = body.nodes.find(s.substr(sizeof(kColocationPrefix) - 1));
        if (target != body.nodes.end()) s = kColocationPrefix + target->second->name();
      }
    }
    return absl::OkStatus();
  }

  // The tensors of the signature's outputs and the nodes of its control
  // outputs.
  absl::Status CollectReturns(const Body& body, std::vector<Endpoint>* rets,
                              std::vector<Node*>* control_rets) {
    const std::string& fn = body.fn.name();
    for (const tensorflow::OpDef::ArgDef& out : body.f->signature().output_arg()) {
      auto it = body.f->ret().find(out.name());
      ASSIGN_OR_RETURN(int count, ArgCount(body.call, body.fn, out));
      if (it == body.f->ret().end() || count != 1) {
        return Error(body.call, absl::StrCat("function '", fn, "' output '", out.name(),
                                             it == body.f->ret().end()
                                                 ? "' has no return value"
                                                 : "' is a list; not supported"));
      }
      ASSIGN_OR_RETURN(Endpoint src, Resolve(body, it->second));
      rets->push_back(src);
    }
    for (const std::string& name : body.f->signature().control_output()) {
      auto it = body.f->control_ret().find(name);
      auto node = it == body.f->control_ret().end() ? body.nodes.end() : body.nodes.find(it->second);
      if (node == body.nodes.end()) {
        return Error(body.call, absl::StrCat("function '", fn, "' control output '", name,
                                             "' names no node"));
      }
      control_rets->push_back(node->second);
    }
    return absl::OkStatus();
  }

  // Removes `call`; a node of the same name (IdentityN over `results`, or a
  // NoOp when there are none) takes its place, after `control` nodes, and
  // feeds every consumer the call had.
  absl::Status ReplaceCall(Node* call, const std::vector<Endpoint>& results,
                           const std::vector<Node*>& control) {
    struct Out {
      Node* dst;
      int src_output;
      int dst_input;
    };
    std::vector<Out> outs;
    for (const Edge* e : call->out_edges()) outs.push_back({e->dst, e->src_output, e->dst_input});
    const std::string name = call->name();
    const std::string device = call->requested_device();
    const DataTypeVector types = call->output_types();
    for (size_t i = 0; i < results.size(); ++i) {
      const DataType t = results[i].node->output_type(results[i].index);
      if (!TypesCompatible(t, types[i])) {
        return Error(*call, absl::StrCat("returns ", DataTypeString(t), " as output ", i,
                                         ", declared ", DataTypeString(types[i])));
      }
    }
    graph_->RemoveNode(call);
    tensorflow::NodeDef def;
    def.set_name(name);
    def.set_device(device);
    def.set_op(types.empty() ? "NoOp" : "IdentityN");
    if (!types.empty()) SetAttr(&def, "T", types);
    ASSIGN_OR_RETURN(Node * node, graph_->AddNode(std::move(def)));
    for (size_t i = 0; i < results.size(); ++i) {
      graph_->AddEdge(results[i].node, results[i].index, node, static_cast<int>(i));
    }
    for (Node* c : control) graph_->AddControlEdge(c, node);
    for (const Out& o : outs) graph_->AddEdge(node, o.src_output, o.dst, o.dst_input);
    return absl::OkStatus();
  }

  absl::Status CheckResults(const Node& call, const std::string& branch,
                            const std::vector<Endpoint>& results) {
    if (static_cast<int>(results.size()) == call.num_outputs()) return absl::OkStatus();
    return Error(call, absl::StrCat(branch, " returns ", results.size(), " value(s), the call has ",
                                    call.num_outputs(), " output(s)"));
  }

  // If(cond, args...) -> Switch per argument, both branches inlined behind
  // them, a Merge per output.
  absl::Status LowerIf(Node* n) {
    DataType tcond = DT_INVALID;
    RETURN_IF_ERROR(GetNodeAttr(n->def(), "Tcond", &tcond));
    if (tcond != DT_BOOL) {
      return Error(*n, absl::StrCat("condition is ", DataTypeString(tcond),
                                    "; only bool conditions are supported"));
    }
    ASSIGN_OR_RETURN(tensorflow::NameAttrList then_fn, FuncAttr(*n, "then_branch"));
    ASSIGN_OR_RETURN(tensorflow::NameAttrList else_fn, FuncAttr(*n, "else_branch"));
    std::vector<Endpoint> inputs;
    std::vector<Node*> control_inputs;
    CallInputs(*n, &inputs, &control_inputs);
    const std::string prefix = n->name() + "/";
    const std::string& device = n->requested_device();
    const Endpoint pred = inputs[0];

    // The predicate switched on itself: its outputs are alive only on the
    // taken side, and every node of a branch waits on that side's pivot.
    ASSIGN_OR_RETURN(Node * switch_pred,
                     NewTyped(prefix + "switch_pred", "Switch", device, DT_BOOL));
    RETURN_IF_ERROR(Connect(*n, pred, switch_pred, 0));
    RETURN_IF_ERROR(Connect(*n, pred, switch_pred, 1));
    ASSIGN_OR_RETURN(Node * pivot_t, NewTyped(prefix + "pivot_t", "Identity", device, DT_BOOL));
    ASSIGN_OR_RETURN(Node * pivot_f, NewTyped(prefix + "pivot_f", "Identity", device, DT_BOOL));
    RETURN_IF_ERROR(Connect(*n, {switch_pred, 1}, pivot_t, 0));
    RETURN_IF_ERROR(Connect(*n, {switch_pred, 0}, pivot_f, 0));
    for (Node* c : control_inputs) graph_->AddControlEdge(c, switch_pred);

    std::vector<Endpoint> then_args, else_args;
    for (int i = 1; i < n->num_inputs(); ++i) {
      ASSIGN_OR_RETURN(Node * s, NewTyped(absl::StrCat(prefix, "input_", i - 1), "Switch", device,
                                          n->input_type(i)));
      RETURN_IF_ERROR(Connect(*n, inputs[i], s, 0));
      RETURN_IF_ERROR(Connect(*n, pred, s, 1));
      for (Node* c : control_inputs) graph_->AddControlEdge(c, s);
      then_args.push_back({s, 1});
      else_args.push_back({s, 0});
    }

    std::vector<Endpoint> then_rets, else_rets;
    std::vector<Node*> then_control, else_control;
    RETURN_IF_ERROR(
        InlineBody(*n, then_fn, prefix + "then/", then_args, pivot_t, &then_rets, &then_control));
    RETURN_IF_ERROR(
        InlineBody(*n, else_fn, prefix + "else/", else_args, pivot_f, &else_rets, &else_control));
    RETURN_IF_ERROR(CheckResults(*n, "then_branch", then_rets));
    RETURN_IF_ERROR(CheckResults(*n, "else_branch", else_rets));

    std::vector<Endpoint> results;
    for (int i = 0; i < n->num_outputs(); ++i) {
      const DataType t = n->output_type(i);
      ASSIGN_OR_RETURN(Node * merge, NewNode(absl::StrCat(prefix, "output_", i), "Merge", device,
                                             [t](tensorflow::NodeDef* d) {
                                               SetAttr(d, "T", t);
                                               SetAttr(d, "N", 2);
                                             }));
      RETURN_IF_ERROR(Connect(*n, then_rets[i], merge, 0));
      RETURN_IF_ERROR(Connect(*n, else_rets[i], merge, 1));
      results.push_back({merge, 0});
    }
    // Alive once the taken branch's control outputs ran: what "^if" waits on.
    ASSIGN_OR_RETURN(Node * then_done, NewTyped(prefix + "then_done", "Identity", device, DT_BOOL));
    ASSIGN_OR_RETURN(Node * else_done, NewTyped(prefix + "else_done", "Identity", device, DT_BOOL));
    RETURN_IF_ERROR(Connect(*n, {pivot_t, 0}, then_done, 0));
    RETURN_IF_ERROR(Connect(*n, {pivot_f, 0}, else_done, 0));
    for (Node* c : then_control) graph_->AddControlEdge(c, then_done);
    for (Node* c : else_control) graph_->AddControlEdge(c, else_done);
    ASSIGN_OR_RETURN(Node * executed, NewNode(prefix + "branch_executed", "Merge", device,
                                              [](tensorflow::NodeDef* d) {
                                                SetAttr(d, "T", DT_BOOL);
                                                SetAttr(d, "N", 2);
                                              }));
    RETURN_IF_ERROR(Connect(*n, {then_done, 0}, executed, 0));
    RETURN_IF_ERROR(Connect(*n, {else_done, 0}, executed, 1));
    return ReplaceCall(n, results, {executed});
  }

  // The loop variables the body returns unchanged (TensorFlow's lowering
  // passes them with a constant Enter: no Merge, Switch or Exit); all false
  // when every variable would be, so something drives the iterations.
  absl::StatusOr<std::vector<bool>> LoopInvariants(const Node& n,
                                                   const tensorflow::NameAttrList& body_fn) {
    ASSIGN_OR_RETURN(const tensorflow::FunctionDef* body, Find(n, body_fn));
    const tensorflow::OpDef& sig = body->signature();
    std::vector<bool> invariant(n.num_inputs(), false);
    if (sig.input_arg_size() != n.num_inputs() || sig.output_arg_size() != n.num_inputs()) {
      return invariant;  // InlineBody names the mismatch.
    }
    for (int i = 0; i < n.num_inputs(); ++i) {
      auto it = body->ret().find(sig.output_arg(i).name());
      invariant[i] = it != body->ret().end() && it->second == sig.input_arg(i).name();
    }
    if (std::all_of(invariant.begin(), invariant.end(), [](bool b) { return b; })) {
      invariant.assign(invariant.size(), false);
    }
    return invariant;
  }

  // While(args...) -> a TensorFlow 1.x loop in its own frame, per loop
  // variable: Enter -> Merge (with the NextIteration of the body's result)
  // -> Switch on LoopCond(cond(merges...)) -> Exit on the false side, body
  // input on the true side. A variable the body returns unchanged (a
  // captured resource handle, say) enters as a loop invariant instead, and
  // the While's output is its input.
  absl::Status LowerWhile(Node* n) {
    ASSIGN_OR_RETURN(tensorflow::NameAttrList cond_fn, FuncAttr(*n, "cond"));
    ASSIGN_OR_RETURN(tensorflow::NameAttrList body_fn, FuncAttr(*n, "body"));
    Loop loop{*n, n->name() + "/", n->requested_device()};
    RETURN_IF_ERROR(GetNodeAttr(n->def(), "parallel_iterations", &loop.parallel));
    if (loop.parallel < 1) return Error(*n, "parallel_iterations must be at least 1");
    if (n->num_inputs() == 0) return Error(*n, "has no loop variables");
    ASSIGN_OR_RETURN(loop.invariant, LoopInvariants(*n, body_fn));
    // A varying variable's Merge and body input pivot the cond and the body.
    const int pivot = static_cast<int>(
        std::find(loop.invariant.begin(), loop.invariant.end(), false) - loop.invariant.begin());
    std::vector<Endpoint> inputs;
    std::vector<Node*> control_inputs;
    CallInputs(*n, &inputs, &control_inputs);
    RETURN_IF_ERROR(EnterFrame(inputs, control_inputs, loop));
    ASSIGN_OR_RETURN(Node * loop_cond, LoopCondition(cond_fn, loop.merges[pivot], loop));
    std::vector<Endpoint> results, body_args;
    RETURN_IF_ERROR(SwitchOnCondition(loop_cond, inputs, loop, &results, &body_args));
    std::vector<Endpoint> body_rets;
    std::vector<Node*> body_control;
    RETURN_IF_ERROR(InlineBody(*n, body_fn, loop.prefix + "body/", body_args,
                               body_args[pivot].node, &body_rets, &body_control));
    RETURN_IF_ERROR(CheckResults(*n, "body", body_rets));
    for (int i = 0; i < n->num_inputs(); ++i) {
      if (loop.invariant[i]) continue;
      ASSIGN_OR_RETURN(Node * next, NewTyped(absl::StrCat(loop.prefix, "next_iteration_", i),
                                             "NextIteration", loop.device, n->input_type(i)));
      RETURN_IF_ERROR(Connect(*n, body_rets[i], next, 0));
      // The body's side effects finish before the next iteration starts.
      for (Node* c : body_control) graph_->AddControlEdge(c, next);
      RETURN_IF_ERROR(Connect(*n, {next, 0}, loop.merges[i], 1));
    }
    return ReplaceCall(n, results, {});
  }

  // A While being lowered into the frame named after it.
  struct Loop {
    const Node& n;
    std::string prefix;  // Of the new nodes' names.
    std::string device;
    int64_t parallel = 10;
    std::vector<bool> invariant;   // Per loop variable.
    std::vector<Node*> merges;     // Per loop variable; none for an invariant.
    std::vector<Endpoint> merged;  // Each variable's value in an iteration, before the Switch.
  };

  // Enters each loop variable into the frame (after the While's control
  // inputs); a varying one goes on through a Merge, whose second input the
  // NextIteration will be.
  absl::Status EnterFrame(const std::vector<Endpoint>& inputs,
                          const std::vector<Node*>& control_inputs, Loop& loop) {
    const Node& n = loop.n;
    loop.merges.assign(n.num_inputs(), nullptr);
    for (int i = 0; i < n.num_inputs(); ++i) {
      const DataType t = n.input_type(i);
      ASSIGN_OR_RETURN(Node * enter,
                       NewNode(absl::StrCat(loop.prefix, "enter_", i), "Enter", loop.device,
                               [&](tensorflow::NodeDef* d) {
                                 SetAttr(d, "T", t);
                                 SetAttr(d, "frame_name", n.name());
                                 SetAttr(d, "is_constant", loop.invariant[i]);
                                 SetAttr(d, "parallel_iterations", loop.parallel);
                               }));
      RETURN_IF_ERROR(Connect(n, inputs[i], enter, 0));
      for (Node* c : control_inputs) graph_->AddControlEdge(c, enter);
      if (loop.invariant[i]) {
        loop.merged.push_back({enter, 0});
        continue;
      }
      ASSIGN_OR_RETURN(loop.merges[i],
                       NewNode(absl::StrCat(loop.prefix, "merge_", i), "Merge", loop.device,
                               [t](tensorflow::NodeDef* d) {
                                 SetAttr(d, "T", t);
                                 SetAttr(d, "N", 2);
                               }));
      RETURN_IF_ERROR(Connect(n, {enter, 0}, loop.merges[i], 0));
      loop.merged.push_back({loop.merges[i], 0});
    }
    return absl::OkStatus();
  }

  // The cond function inlined over the merged variables, waiting on `pivot`,
  // and the LoopCond of its one bool.
  absl::StatusOr<Node*> LoopCondition(const tensorflow::NameAttrList& cond_fn, Node* pivot,
                                      const Loop& loop) {
    std::vector<Endpoint> cond_rets;
    std::vector<Node*> cond_control;
    RETURN_IF_ERROR(InlineBody(loop.n, cond_fn, loop.prefix + "cond/", loop.merged, pivot,
                               &cond_rets, &cond_control));
    if (cond_rets.size() != 1 ||
        BaseType(cond_rets[0].node->output_type(cond_rets[0].index)) != DT_BOOL) {
      return Error(loop.n, absl::StrCat("cond function '", cond_fn.name(),
                                        "' must return one bool; it returns ", cond_rets.size(),
                                        " value(s)"));
    }
    ASSIGN_OR_RETURN(Node * loop_cond, NewNode(loop.prefix + "loop_cond", "LoopCond", loop.device,
                                               [](tensorflow::NodeDef*) {}));
    RETURN_IF_ERROR(Connect(loop.n, cond_rets[0], loop_cond, 0));
    for (Node* c : cond_control) graph_->AddControlEdge(c, loop_cond);
    return loop_cond;
  }

  // A Switch on `loop_cond` per varying variable: its false side leaves the
  // frame (the While's result), its true side is the body's input. An
  // invariant's result is the While's input.
  absl::Status SwitchOnCondition(Node* loop_cond, const std::vector<Endpoint>& inputs,
                                 const Loop& loop, std::vector<Endpoint>* results,
                                 std::vector<Endpoint>* body_args) {
    const Node& n = loop.n;
    for (int i = 0; i < n.num_inputs(); ++i) {
      if (loop.invariant[i]) {
        results->push_back(inputs[i]);
        body_args->push_back(loop.merged[i]);
        continue;
      }
      const DataType t = n.input_type(i);
      const std::string& device = loop.device;
      ASSIGN_OR_RETURN(Node * sw,
                       NewTyped(absl::StrCat(loop.prefix, "switch_", i), "Switch", device, t));
      RETURN_IF_ERROR(Connect(n, loop.merged[i], sw, 0));
      RETURN_IF_ERROR(Connect(n, {loop_cond, 0}, sw, 1));
      ASSIGN_OR_RETURN(Node * exit,
                       NewTyped(absl::StrCat(loop.prefix, "exit_", i), "Exit", device, t));
      RETURN_IF_ERROR(Connect(n, {sw, 0}, exit, 0));
      ASSIGN_OR_RETURN(Node * arg, NewTyped(absl::StrCat(loop.prefix, "body_input_", i),
                                            "Identity", device, t));
      RETURN_IF_ERROR(Connect(n, {sw, 1}, arg, 0));
      results->push_back({exit, 0});
      body_args->push_back({arg, 0});
    }
    return absl::OkStatus();
  }

  // PartitionedCall(args...) -> the body inlined, reading the call's inputs.
  absl::Status LowerCall(Node* n) {
    ASSIGN_OR_RETURN(tensorflow::NameAttrList fn, FuncAttr(*n, "f"));
    std::vector<Endpoint> inputs;
    std::vector<Node*> control_inputs;
    CallInputs(*n, &inputs, &control_inputs);
    const std::string prefix = n->name() + "/";
    Node* pivot = nullptr;
    if (!control_inputs.empty()) {
      ASSIGN_OR_RETURN(pivot, NewNode(prefix + "input_control", "NoOp", n->requested_device(),
                                      [](tensorflow::NodeDef*) {}));
      for (Node* c : control_inputs) graph_->AddControlEdge(c, pivot);
    }
    std::vector<Endpoint> rets;
    std::vector<Node*> control_rets;
    RETURN_IF_ERROR(InlineBody(*n, fn, prefix, inputs, pivot, &rets, &control_rets));
    RETURN_IF_ERROR(CheckResults(*n, "f", rets));
    return ReplaceCall(n, rets, control_rets);
  }

  Graph* graph_;
  absl::flat_hash_map<std::string, const tensorflow::FunctionDef*> functions_;
};

}  // namespace

absl::Status LowerFunctionalOps(const tensorflow::FunctionDefLibrary& library, Graph* graph) {
  return Lowering(library, graph).Run();
}

absl::StatusOr<std::unique_ptr<Graph>> GraphFromGraphDef(const tensorflow::GraphDef& def) {
  std::unique_ptr<Graph> g;
  if (HasNchwConvolutions(def)) {  // Channels-first convolutions on NHWC kernels.
    tensorflow::GraphDef nhwc = def;
    RewriteNchwToNhwc(&nhwc);
    ASSIGN_OR_RETURN(g, Graph::FromGraphDef(nhwc));
  } else {
    ASSIGN_OR_RETURN(g, Graph::FromGraphDef(def));
  }
  RETURN_IF_ERROR(LowerFunctionalOps(def.library(), g.get()));
  return g;
}

}  // namespace dflow
