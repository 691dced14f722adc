// Typed access to a NodeDef's attrs.
//   int64_t axis; RETURN_IF_ERROR(GetNodeAttr(node, "axis", &axis));
#ifndef DFLOW_FRAMEWORK_ATTR_UTIL_H_
#define DFLOW_FRAMEWORK_ATTR_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "dflow/framework/tensor.h"
#include "dflow/framework/tensor_shape.h"
#include "dflow/framework/types.h"
#include "dflow/proto/attr_value.pb.h"
#include "dflow/proto/node_def.pb.h"

namespace dflow {

using AttrMap = google::protobuf::Map<std::string, tensorflow::AttrValue>;

// Each fails with NotFound when the attr is absent and InvalidArgument when it
// holds another kind of value, naming the node and attr.
absl::Status GetNodeAttr(const tensorflow::NodeDef& node, const std::string& name, int64_t* v);
absl::Status GetNodeAttr(const tensorflow::NodeDef& node, const std::string& name, int32_t* v);
absl::Status GetNodeAttr(const tensorflow::NodeDef& node, const std::string& name, float* v);
absl::Status GetNodeAttr(const tensorflow::NodeDef& node, const std::string& name, bool* v);
absl::Status GetNodeAttr(const tensorflow::NodeDef& node, const std::string& name, std::string* v);
absl::Status GetNodeAttr(const tensorflow::NodeDef& node, const std::string& name, DataType* v);
absl::Status GetNodeAttr(const tensorflow::NodeDef& node, const std::string& name,
                         tensorflow::TensorShapeProto* v);
absl::Status GetNodeAttr(const tensorflow::NodeDef& node, const std::string& name, Tensor* v);
absl::Status GetNodeAttr(const tensorflow::NodeDef& node, const std::string& name,
                         std::vector<int64_t>* v);
absl::Status GetNodeAttr(const tensorflow::NodeDef& node, const std::string& name,
                         std::vector<int32_t>* v);
absl::Status GetNodeAttr(const tensorflow::NodeDef& node, const std::string& name,
                         std::vector<float>* v);
absl::Status GetNodeAttr(const tensorflow::NodeDef& node, const std::string& name,
                         std::vector<std::string>* v);
absl::Status GetNodeAttr(const tensorflow::NodeDef& node, const std::string& name,
                         std::vector<DataType>* v);
bool HasNodeAttr(const tensorflow::NodeDef& node, const std::string& name);

// Setters for building NodeDefs.
void SetAttr(tensorflow::NodeDef* node, const std::string& name, int64_t v);
void SetAttr(tensorflow::NodeDef* node, const std::string& name, int v);
void SetAttr(tensorflow::NodeDef* node, const std::string& name, float v);
void SetAttr(tensorflow::NodeDef* node, const std::string& name, bool v);
void SetAttr(tensorflow::NodeDef* node, const std::string& name, const std::string& v);
void SetAttr(tensorflow::NodeDef* node, const std::string& name, const char* v);
void SetAttr(tensorflow::NodeDef* node, const std::string& name, DataType v);
void SetAttr(tensorflow::NodeDef* node, const std::string& name, const TensorShape& v);
void SetAttr(tensorflow::NodeDef* node, const std::string& name,
             const tensorflow::TensorShapeProto& v);
void SetAttr(tensorflow::NodeDef* node, const std::string& name, const Tensor& v);
void SetAttr(tensorflow::NodeDef* node, const std::string& name, const std::vector<int64_t>& v);
void SetAttr(tensorflow::NodeDef* node, const std::string& name, const std::vector<int>& v);
void SetAttr(tensorflow::NodeDef* node, const std::string& name,
             const std::vector<std::string>& v);
void SetAttr(tensorflow::NodeDef* node, const std::string& name,
             const std::vector<DataType>& v);

// "i: 3", "type: DT_FLOAT", "list(i): [1, 2]"... for error messages.
std::string AttrValueSummary(const tensorflow::AttrValue& v);

// The kind an attr value holds: "int", "float", "type", ..., "list" for any
// list, "unset" when empty.
std::string AttrValueKindName(const tensorflow::AttrValue& v);

}  // namespace dflow

#endif  // DFLOW_FRAMEWORK_ATTR_UTIL_H_
