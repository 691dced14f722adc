#include "dflow/client/op_builder.h"

#include "absl/strings/str_cat.h"
#include "dflow/framework/op_def.h"

namespace dflow {

OpBuilder::OpBuilder(const Scope& scope, std::string op_type) : scope_(scope) {
  node_.set_op(std::move(op_type));
}

OpBuilder& OpBuilder::Input(const ::dflow::Input& in) {
  args_.push_back({in});
  return *this;
}

OpBuilder& OpBuilder::InputList(const std::vector<::dflow::Input>& list) {
  args_.push_back(list);
  return *this;
}

Operation OpBuilder::Build(std::vector<Output>* outputs) {
  outputs->clear();
  if (!scope_.ok()) return Operation();
  auto op_or = OpRegistry::Global()->LookUp(node_.op());
  if (!op_or.ok()) {
    scope_.UpdateStatus(op_or.status());
    return Operation();
  }
  const OpDef& op = **op_or;
  if (args_.size() != op.inputs.size()) {
    scope_.UpdateStatus(absl::InvalidArgumentError(absl::StrCat(
        "[", node_.op(), "] takes ", op.inputs.size(), " inputs, got ", args_.size())));
    return Operation();
  }
  // Constants become Const nodes now, so their dtypes can fill type attrs.
  std::vector<::dflow::Input> flat;
  for (size_t a = 0; a < args_.size(); ++a) {
    const OpArg& arg = op.inputs[a];
    std::vector<DataType> types;
    for (const ::dflow::Input& in : args_[a]) {
      Output o = scope_.AsOutput(in);
      if (!o.valid()) return Operation();
      types.push_back(BaseType(o.type()));
      flat.emplace_back(o);
    }
    if (!arg.number_attr.empty() && !HasNodeAttr(node_, arg.number_attr)) {
      SetAttr(&node_, arg.number_attr, static_cast<int64_t>(types.size()));
    }
    if (!arg.type_attr.empty() && !types.empty() && !HasNodeAttr(node_, arg.type_attr)) {
      SetAttr(&node_, arg.type_attr, types[0]);
    }
    if (!arg.type_list_attr.empty() && !HasNodeAttr(node_, arg.type_list_attr)) {
      SetAttr(&node_, arg.type_list_attr, types);
    }
  }
  return scope_.AddNode(node_, flat, outputs);
}

std::vector<Output> OpBuilder::FinishAll() {
  std::vector<Output> outputs;
  Build(&outputs);
  return outputs;
}

Output OpBuilder::Finish() {
  std::vector<Output> outputs;
  Build(&outputs);
  return outputs.empty() ? Output() : outputs[0];
}

Operation OpBuilder::FinishOp() {
  std::vector<Output> outputs;
  return Build(&outputs);
}

}  // namespace dflow
