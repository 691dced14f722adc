#include "dflow/runtime/function_runner.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "dflow/framework/attr_util.h"
#include "dflow/framework/status.h"
#include "dflow/runtime/call_frame.h"
#include "dflow/runtime/function.h"

namespace dflow {
namespace {

absl::Status Invalid(const std::string& fn, const std::string& message) {
  return absl::InvalidArgumentError(absl::StrCat("function '", fn, "': ", message));
}

// The dtypes of a signature's args: fixed, or read from fn's type attrs.
absl::StatusOr<DataTypeVector> ArgTypes(
    const tensorflow::NameAttrList& fn,
    const google::protobuf::RepeatedPtrField<tensorflow::OpDef_ArgDef>& args) {
  DataTypeVector out;
  for (const tensorflow::OpDef_ArgDef& a : args) {
    if (!a.number_attr().empty() || !a.type_list_attr().empty()) {
      return Invalid(fn.name(), absl::StrCat("argument '", a.name(), "' is a list"));
    }
    DataType t = static_cast<DataType>(a.type());
    if (!a.type_attr().empty()) {
      auto it = fn.attr().find(a.type_attr());
      if (it == fn.attr().end() || it->second.type() == DT_INVALID) {
        return Invalid(fn.name(), absl::StrCat("argument '", a.name(), "' has type attr '",
                                               a.type_attr(), "', which the call does not set"));
      }
      t = static_cast<DataType>(it->second.type());
    }
    out.push_back(t);
  }
  return out;
}

// _Arg nodes -> PartitionedCall(fn) -> _Retval nodes.
tensorflow::GraphDef CallGraph(const tensorflow::FunctionDefLibrary& library,
                               const tensorflow::NameAttrList& fn, const DataTypeVector& args,
                               const DataTypeVector& rets) {
  tensorflow::GraphDef def;
  *def.mutable_library() = library;
  tensorflow::NodeDef* call = def.add_node();
  call->set_name("call");
  call->set_op("PartitionedCall");
  (*call->mutable_attr())["f"].mutable_func()->CopyFrom(fn);
  SetAttr(call, "Tin", args);
  SetAttr(call, "Tout", rets);
  for (int i = 0; i < args.size(); ++i) {
    tensorflow::NodeDef* a = def.add_node();
    a->set_name(absl::StrCat("arg", i));
    a->set_op("_Arg");
    SetAttr(a, "T", args[i]);
    SetAttr(a, "index", i);
    call->add_input(a->name());
  }
  for (int i = 0; i < rets.size(); ++i) {
    tensorflow::NodeDef* r = def.add_node();
    r->set_name(absl::StrCat("ret", i));
    r->set_op("_Retval");
    SetAttr(r, "T", rets[i]);
    SetAttr(r, "index", i);
    r->add_input(absl::StrCat("call:", i));
  }
  return def;
}

}  // namespace

absl::StatusOr<std::unique_ptr<FunctionRunner>> FunctionRunner::Create(
    const tensorflow::FunctionDefLibrary& library, const tensorflow::NameAttrList& fn,
    Device* device) {
  const tensorflow::FunctionDef* body = nullptr;
  for (const tensorflow::FunctionDef& f : library.function()) {
    if (f.signature().name() == fn.name()) body = &f;
  }
  if (body == nullptr) {
    return absl::NotFoundError(absl::StrCat("function '", fn.name(), "' is not in the library"));
  }
  ASSIGN_OR_RETURN(DataTypeVector args, ArgTypes(fn, body->signature().input_arg()));
  ASSIGN_OR_RETURN(DataTypeVector rets, ArgTypes(fn, body->signature().output_arg()));
  auto graph = GraphFromGraphDef(CallGraph(library, fn, args, rets));
  if (!graph.ok()) return Invalid(fn.name(), std::string(graph.status().message()));
  for (Node* n : (*graph)->nodes()) n->set_assigned_device_name(device->name());
  auto executor = Executor::Create(*std::move(graph), device);
  if (!executor.ok()) return Invalid(fn.name(), std::string(executor.status().message()));
  return std::unique_ptr<FunctionRunner>(
      new FunctionRunner(fn.name(), std::move(args), std::move(rets), *std::move(executor)));
}

absl::StatusOr<std::vector<Tensor>> FunctionRunner::Run(std::vector<Tensor> args,
                                                        CancellationManager* cancellation) const {
  if (args.size() != arg_types_.size()) {
    return Invalid(name_,
                   absl::StrCat("takes ", arg_types_.size(), " argument(s), got ", args.size()));
  }
  for (int i = 0; i < args.size(); ++i) {
    if (args[i].dtype() != arg_types_[i]) {
      return Invalid(name_, absl::StrCat("argument ", i, " must be ", DataTypeString(arg_types_[i]),
                                         ", got ", DataTypeString(args[i].dtype())));
    }
  }
  FunctionCallFrame frame(std::move(args), static_cast<int>(ret_types_.size()));
  Executor::Args run_args;
  run_args.call_frame = &frame;
  run_args.cancellation_manager = cancellation;
  absl::Status s = executor_->Run(run_args);
  if (!s.ok()) return WithContext(s, absl::StrCat("function '", name_, "'"));
  return frame.ConsumeRetvals();
}

}  // namespace dflow
