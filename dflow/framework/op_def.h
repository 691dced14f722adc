// Op definitions: what an op takes, returns and accepts as attrs, registered
// in TensorFlow's spec syntax:
//
//   REGISTER_OP("MatMul")
//       .Input("a: T")
//       .Input("b: T")
//       .Output("product: T")
//       .Attr("transpose_a: bool = false")
//       .Attr("T: {float, double, int32, int64}")
//       .SetShapeFn(MatMulShape);
//
// Input/Output specs: "name: T" (type attr), "name: float" (fixed type),
// "name: N * T" (N copies), "name: Tlist" (a list(type) attr), "name: Ref(T)".
// Attr specs: "name: int", "name: int >= 1", "name: bool = false",
// "name: {float, double} = DT_FLOAT", "name: {'SAME', 'VALID'}",
// "name: list(int)", "name: shape", "name: tensor", "name: string = ''";
// type sets may use TensorFlow's "numbertype" / "realnumbertype".
#ifndef DFLOW_FRAMEWORK_OP_DEF_H_
#define DFLOW_FRAMEWORK_OP_DEF_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "dflow/framework/status.h"
#include "dflow/framework/types.h"
#include "dflow/proto/attr_value.pb.h"
#include "dflow/proto/node_def.pb.h"

namespace dflow {

class InferenceContext;
using ShapeFn = std::function<absl::Status(InferenceContext*)>;
using DataTypeVector = std::vector<DataType>;

// One input or output of an op.
struct OpArg {
  std::string name;
  DataType type = DT_INVALID;   // A fixed type, or
  std::string type_attr;        // the "type" attr giving it,
  std::string number_attr;      // with an "int" attr giving a repeat count;
  std::string type_list_attr;   // or a "list(type)" attr giving every type.
  bool is_ref = false;
};

struct OpAttr {
  std::string name;
  std::string type;  // "int", "float", "bool", "string", "type", "shape",
                     // "tensor", "func", or "list(...)" of one of these.
  std::optional<tensorflow::AttrValue> default_value;
  std::vector<DataType> allowed_types;      // Empty: any.
  std::vector<std::string> allowed_values;  // For strings; empty: any.
  std::optional<int64_t> minimum;           // For int, and list lengths.
};

struct OpDef {
  std::string name;
  std::vector<OpArg> inputs;
  std::vector<OpArg> outputs;
  std::vector<OpAttr> attrs;
  bool is_stateful = false;
  ShapeFn shape_fn;  // Unset: outputs have unknown shape.

  const OpAttr* FindAttr(const std::string& attr_name) const;
};

// Builds an OpDef from spec strings. Spec errors are programmer errors found
// at start-up: Finalize() reports them, the registrar aborts on them.
class OpDefBuilder {
 public:
  explicit OpDefBuilder(std::string op_name);
  OpDefBuilder& Input(std::string spec);
  OpDefBuilder& Output(std::string spec);
  OpDefBuilder& Attr(std::string spec);
  OpDefBuilder& SetIsStateful();
  OpDefBuilder& SetShapeFn(ShapeFn fn);
  absl::StatusOr<OpDef> Finalize() const;

 private:
  OpDef def_;
  std::vector<std::string> input_specs_, output_specs_, attr_specs_;
};

// All registered ops, by name. Thread-safe.
class OpRegistry {
 public:
  static OpRegistry* Global();
  absl::Status Register(OpDef def);
  // NotFound naming the op when it is not registered.
  absl::StatusOr<const OpDef*> LookUp(const std::string& op_name) const;
  std::vector<std::string> ListOps() const;

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<OpDef>> ops_ ABSL_GUARDED_BY(mu_);
};

struct OpDefBuilderReceiver {
  OpDefBuilderReceiver(const OpDefBuilder& builder);  // NOLINT: implicit by design.
};

#define REGISTER_OP(name)                                                  \
  static ::dflow::OpDefBuilderReceiver DFLOW_CONCAT(dflow_op_reg_, __COUNTER__) \
      [[maybe_unused]] = ::dflow::OpDefBuilder(name)

// --- NodeDef helpers against an OpDef -------------------------------------

// Adds the op's default values for attrs the node does not set.
void AddDefaultAttrs(const OpDef& op, tensorflow::NodeDef* node);
// Checks attrs (present, right kind, allowed values) and the number of data
// inputs; errors name the node and the attr.
absl::Status ValidateNodeDef(const tensorflow::NodeDef& node, const OpDef& op);
// The flattened input and output types of `node` (refs as *_REF types).
absl::Status InOutTypesForNode(const tensorflow::NodeDef& node, const OpDef& op,
                               DataTypeVector* inputs, DataTypeVector* outputs);
// Number of flattened outputs, and the index range of output arg `name`.
absl::Status OutputRange(const tensorflow::NodeDef& node, const OpDef& op,
                         const std::string& name, int* start, int* stop);
// The same for input arg `name`.
absl::Status InputRange(const tensorflow::NodeDef& node, const OpDef& op,
                        const std::string& name, int* start, int* stop);

}  // namespace dflow

#endif  // DFLOW_FRAMEWORK_OP_DEF_H_
