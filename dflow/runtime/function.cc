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

  // Inlines function `fn` called by `call`: body nodes are named under
  // `prefix`, default to the call's device, read `args` for the signature's
  // inputs and wait on `pivot` (when set). Returns the tensors of its
  // outputs and the nodes of its control outputs.
  absl::Status InlineBody(const Node& call, const tensorflow::NameAttrList& fn,
                          const std::string& prefix, const std::vector<Endpoint>& args, Node* pivot,
                          std::vector<Endpoint>* rets, std::vector<Node*>* control_rets) {
    ASSIGN_OR_RETURN(const tensorflow::FunctionDef* f, Find(call, fn));
    const tensorflow::OpDef& sig = f->signature();
    std::map<std::string, std::pair<int, int>> arg_range;  // name -> (first, count)
    int num_args = 0;
    for (const tensorflow::OpDef::ArgDef& a : sig.input_arg()) {
      ASSIGN_OR_RETURN(int count, ArgCount(call, fn, a));
      arg_range[a.name()] = {num_args, count};
      num_args += count;
    }
    if (num_args != static_cast<int>(args.size())) {
      return Error(call, absl::StrCat("function '", fn.name(), "' takes ", num_args,
                                      " argument(s) but the call passes ", args.size()));
    }

    absl::flat_hash_map<std::string, Node*> body;
    for (const tensorflow::NodeDef& nd : f->node_def()) {
      tensorflow::NodeDef def = nd;
      def.clear_input();
      def.set_name(UniqueName(prefix + nd.name()));
      if (def.device().empty()) def.set_device(call.requested_device());
      RETURN_IF_ERROR(Substitute(call, fn, &def));
      absl::StatusOr<Node*> node = graph_->AddNode(std::move(def));
      if (!node.ok()) {
        return Error(call,
                     absl::StrCat("in function '", fn.name(), "': ", node.status().message()));
      }
      if (!body.emplace(nd.name(), *node).second) {
        return Error(
            call, absl::StrCat("function '", fn.name(), "' has two nodes named '", nd.name(), "'"));
      }
    }

    // "arg", "arg:i" (element i of a list argument) or "node:output_arg:i".
    auto resolve = [&](const std::string& ref) -> absl::StatusOr<Endpoint> {
      std::vector<std::string> parts = absl::StrSplit(ref, ':');
      int i = 0;
      if (parts.size() > 1 && !absl::SimpleAtoi(parts.back(), &i)) i = -1;
      if (parts.size() <= 2) {
        auto it = arg_range.find(parts[0]);
        if (it != arg_range.end() && i >= 0 && i < it->second.second) {
          return args[it->second.first + i];
        }
      } else if (parts.size() == 3 && body.contains(parts[0]) && i >= 0) {
        Node* src = body[parts[0]];
        int start = 0, stop = 0;
        if (OutputRange(src->def(), src->op_def(), parts[1], &start, &stop).ok() &&
            start + i < stop) {
          return Endpoint{src, start + i};
        }
      }
      return Error(call, absl::StrCat("function '", fn.name(), "' refers to '", ref,
                                      "', which is neither an argument nor a node output"));
    };

    for (const tensorflow::NodeDef& nd : f->node_def()) {
      Node* dst = body[nd.name()];
      int slot = 0;
      for (const std::string& input : nd.input()) {
        if (!input.empty() && input[0] == '^') {
          auto it = body.find(input.substr(1));
          if (it != body.end()) {
            graph_->AddControlEdge(it->second, dst);
            continue;
          }
          ASSIGN_OR_RETURN(Endpoint src, resolve(input.substr(1)));
          graph_->AddControlEdge(src.node, dst);
          continue;
        }
        ASSIGN_OR_RETURN(Endpoint src, resolve(input));
        RETURN_IF_ERROR(Connect(call, src, dst, slot++));
      }
      if (slot != dst->num_inputs()) {
        return Error(call, absl::StrCat("node '", nd.name(), "' of function '", fn.name(), "' has ",
                                        slot, " data input(s), its op takes ", dst->num_inputs()));
      }
      // Colocation with another body node follows that node's new name.
      auto cls = dst->mutable_def()->mutable_attr()->find("_class");
      if (cls != dst->mutable_def()->mutable_attr()->end()) {
        for (std::string& s : *cls->second.mutable_list()->mutable_s()) {
          if (s.rfind(kColocationPrefix, 0) != 0) continue;
          auto target = body.find(s.substr(sizeof(kColocationPrefix) - 1));
          if (target != body.end()) s = kColocationPrefix + target->second->name();
        }
      }
    }
    if (pivot != nullptr) {
      for (const auto& [name, node] : body) graph_->AddControlEdge(pivot, node);
    }

    for (const tensorflow::OpDef::ArgDef& out : sig.output_arg()) {
      auto it = f->ret().find(out.name());
      ASSIGN_OR_RETURN(int count, ArgCount(call, fn, out));
      if (it == f->ret().end() || count != 1) {
        return Error(call, absl::StrCat("function '", fn.name(), "' output '", out.name(),
                                        it == f->ret().end() ? "' has no return value"
                                                             : "' is a list; not supported"));
      }
      ASSIGN_OR_RETURN(Endpoint src, resolve(it->second));
      rets->push_back(src);
    }
    for (const std::string& name : sig.control_output()) {
      auto it = f->control_ret().find(name);
      if (it == f->control_ret().end() || !body.contains(it->second)) {
        return Error(call, absl::StrCat("function '", fn.name(), "' control output '", name,
                                        "' names no node"));
      }
      control_rets->push_back(body[it->second]);
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
    int64_t parallel = 10;
    RETURN_IF_ERROR(GetNodeAttr(n->def(), "parallel_iterations", &parallel));
    if (parallel < 1) return Error(*n, "parallel_iterations must be at least 1");
    if (n->num_inputs() == 0) return Error(*n, "has no loop variables");
    ASSIGN_OR_RETURN(std::vector<bool> invariant, LoopInvariants(*n, body_fn));
    // A varying variable's Merge and body input pivot the cond and the body.
    const int pivot = static_cast<int>(
        std::find(invariant.begin(), invariant.end(), false) - invariant.begin());
    std::vector<Endpoint> inputs;
    std::vector<Node*> control_inputs;
    CallInputs(*n, &inputs, &control_inputs);
    const std::string prefix = n->name() + "/";
    const std::string& device = n->requested_device();
    const std::string frame = n->name();

    std::vector<Node*> merges(n->num_inputs(), nullptr);
    std::vector<Endpoint> merged;
    for (int i = 0; i < n->num_inputs(); ++i) {
      const DataType t = n->input_type(i);
      ASSIGN_OR_RETURN(Node * enter, NewNode(absl::StrCat(prefix, "enter_", i), "Enter", device,
                                             [&](tensorflow::NodeDef* d) {
                                               SetAttr(d, "T", t);
                                               SetAttr(d, "frame_name", frame);
                                               SetAttr(d, "is_constant", invariant[i]);
                                               SetAttr(d, "parallel_iterations", parallel);
                                             }));
      RETURN_IF_ERROR(Connect(*n, inputs[i], enter, 0));
      for (Node* c : control_inputs) graph_->AddControlEdge(c, enter);
      if (invariant[i]) {
        merged.push_back({enter, 0});
        continue;
      }
      ASSIGN_OR_RETURN(merges[i], NewNode(absl::StrCat(prefix, "merge_", i), "Merge", device,
                                          [t](tensorflow::NodeDef* d) {
                                            SetAttr(d, "T", t);
                                            SetAttr(d, "N", 2);
                                          }));
      RETURN_IF_ERROR(Connect(*n, {enter, 0}, merges[i], 0));
      merged.push_back({merges[i], 0});
    }
    std::vector<Endpoint> cond_rets;
    std::vector<Node*> cond_control;
    RETURN_IF_ERROR(InlineBody(*n, cond_fn, prefix + "cond/", merged, merges[pivot], &cond_rets,
                               &cond_control));
    if (cond_rets.size() != 1 ||
        BaseType(cond_rets[0].node->output_type(cond_rets[0].index)) != DT_BOOL) {
      return Error(*n, absl::StrCat("cond function '", cond_fn.name(),
                                    "' must return one bool; it returns ", cond_rets.size(),
                                    " value(s)"));
    }
    ASSIGN_OR_RETURN(Node * loop_cond, NewNode(prefix + "loop_cond", "LoopCond", device,
                                               [](tensorflow::NodeDef*) {}));
    RETURN_IF_ERROR(Connect(*n, cond_rets[0], loop_cond, 0));
    for (Node* c : cond_control) graph_->AddControlEdge(c, loop_cond);

    std::vector<Endpoint> results, body_args;
    for (int i = 0; i < n->num_inputs(); ++i) {
      if (invariant[i]) {
        results.push_back(inputs[i]);
        body_args.push_back(merged[i]);
        continue;
      }
      const DataType t = n->input_type(i);
      ASSIGN_OR_RETURN(Node * sw, NewTyped(absl::StrCat(prefix, "switch_", i), "Switch", device, t));
      RETURN_IF_ERROR(Connect(*n, merged[i], sw, 0));
      RETURN_IF_ERROR(Connect(*n, {loop_cond, 0}, sw, 1));
      ASSIGN_OR_RETURN(Node * exit, NewTyped(absl::StrCat(prefix, "exit_", i), "Exit", device, t));
      RETURN_IF_ERROR(Connect(*n, {sw, 0}, exit, 0));
      ASSIGN_OR_RETURN(Node * arg,
                       NewTyped(absl::StrCat(prefix, "body_input_", i), "Identity", device, t));
      RETURN_IF_ERROR(Connect(*n, {sw, 1}, arg, 0));
      results.push_back({exit, 0});
      body_args.push_back({arg, 0});
    }
    std::vector<Endpoint> body_rets;
    std::vector<Node*> body_control;
    RETURN_IF_ERROR(InlineBody(*n, body_fn, prefix + "body/", body_args, body_args[pivot].node,
                               &body_rets, &body_control));
    RETURN_IF_ERROR(CheckResults(*n, "body", body_rets));
    for (int i = 0; i < n->num_inputs(); ++i) {
      if (invariant[i]) continue;
      ASSIGN_OR_RETURN(Node * next, NewTyped(absl::StrCat(prefix, "next_iteration_", i),
                                             "NextIteration", device, n->input_type(i)));
      RETURN_IF_ERROR(Connect(*n, body_rets[i], next, 0));
      // The body's side effects finish before the next iteration starts.
      for (Node* c : body_control) graph_->AddControlEdge(c, next);
      RETURN_IF_ERROR(Connect(*n, {next, 0}, merges[i], 1));
    }
    return ReplaceCall(n, results, {});
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
  ASSIGN_OR_RETURN(std::unique_ptr<Graph> g, Graph::FromGraphDef(def));
  RETURN_IF_ERROR(LowerFunctionalOps(def.library(), g.get()));
  return g;
}

}  // namespace dflow
