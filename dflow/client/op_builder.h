// OpBuilder: the one place op wrappers add nodes. Type attrs ("T", "N",
// "Tidx", list(type) attrs) are filled from the inputs' dtypes, the way
// TensorFlow's generated wrappers do, so a wrapper is a few lines:
//
//   Output AddV2(const Scope& s, Input x, Input y) {
//     return OpBuilder(s, "AddV2").Input(x).Input(y).Finish();
//   }
#ifndef DFLOW_CLIENT_OP_BUILDER_H_
#define DFLOW_CLIENT_OP_BUILDER_H_

#include <string>
#include <vector>

#include "dflow/client/scope.h"
#include "dflow/framework/attr_util.h"

namespace dflow {

class OpBuilder {
 public:
  OpBuilder(const Scope& scope, std::string op_type);

  OpBuilder& Input(const ::dflow::Input& in);
  OpBuilder& InputList(const std::vector<::dflow::Input>& list);
  template <typename T>
  OpBuilder& Attr(const std::string& name, const T& value) {
    SetAttr(&node_, name, value);
    return *this;
  }
  // Any attr value, e.g. a list of shapes.
  OpBuilder& Attr(const std::string& name, const tensorflow::AttrValue& value) {
    (*node_.mutable_attr())[name] = value;
    return *this;
  }

  // Adds the node; returns its outputs (empty after recording an error on the scope).
  std::vector<Output> FinishAll();
  // The first output, or an invalid Output after an error or for no-output ops.
  Output Finish();
  // For ops without outputs (NoOp, AssignVariableOp): the operation.
  Operation FinishOp();

 private:
  Operation Build(std::vector<Output>* outputs);

  Scope scope_;
  tensorflow::NodeDef node_;
  std::vector<std::vector<::dflow::Input>> args_;  // One entry per OpDef input arg.
};

}  // namespace dflow

#endif  // DFLOW_CLIENT_OP_BUILDER_H_
