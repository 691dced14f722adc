#include "dflow/framework/attr_util.h"

#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dflow/framework/status.h"

namespace dflow {
namespace {

using tensorflow::AttrValue;
using tensorflow::NodeDef;

std::string KindName(const AttrValue& v) {
  if (v.value_case() != AttrValue::kList) return AttrValueKindName(v);
  const auto& l = v.list();
  if (l.i_size() > 0) return "list(int)";
  if (l.f_size() > 0) return "list(float)";
  if (l.b_size() > 0) return "list(bool)";
  if (l.s_size() > 0) return "list(string)";
  if (l.type_size() > 0) return "list(type)";
  if (l.shape_size() > 0) return "list(shape)";
  if (l.tensor_size() > 0) return "list(tensor)";
  if (l.func_size() > 0) return "list(func)";
  return "list";
}

// Finds attr `name`, checking it holds `kind` ("int", "list(int)", ...).
// An empty list matches every list kind.
absl::StatusOr<const AttrValue*> Find(const NodeDef& node, const std::string& name,
                                      absl::string_view kind) {
  auto it = node.attr().find(name);
  if (it == node.attr().end()) {
    return absl::NotFoundError(absl::StrCat("NodeDef '", node.name(), "' (", node.op(),
                                            ") has no attr named '", name, "'"));
  }
  std::string actual = KindName(it->second);
  bool empty_list_ok = actual == "list" && absl::StartsWith(kind, "list(");
  if (actual != kind && !empty_list_ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("attr '", name, "' of node '", node.name(), "' is ", actual, ", not ", kind));
  }
  return &it->second;
}

absl::Status RangeError(const NodeDef& node, const std::string& name, int64_t v) {
  return absl::InvalidArgumentError(absl::StrCat("attr '", name, "' of node '", node.name(),
                                                 "' value ", v, " is out of int32 range"));
}

bool FitsInt32(int64_t v) {
  return v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
}

std::string ShapeSummary(const tensorflow::TensorShapeProto& s) {
  if (s.unknown_rank()) return "<unknown>";
  std::vector<std::string> dims;
  for (const auto& d : s.dim()) dims.push_back(d.size() < 0 ? "?" : absl::StrCat(d.size()));
  return absl::StrCat("[", absl::StrJoin(dims, ","), "]");
}

std::string TensorSummary(const tensorflow::TensorProto& p) {
  absl::StatusOr<Tensor> t = Tensor::FromProto(p);
  return t.ok() ? t->DebugString() : absl::StrCat("<bad tensor: ", t.status().message(), ">");
}

std::string TypeName(int t) { return tensorflow::DataType_Name(static_cast<DataType>(t)); }

std::string ListSummary(const AttrValue::ListValue& l) {
  auto quote = [](std::string* out, const std::string& s) { absl::StrAppend(out, "'", s, "'"); };
  auto type = [](std::string* out, int t) { out->append(TypeName(t)); };
  auto shape = [](std::string* out, const tensorflow::TensorShapeProto& s) {
    out->append(ShapeSummary(s));
  };
  auto tensor = [](std::string* out, const tensorflow::TensorProto& t) {
    out->append(TensorSummary(t));
  };
  auto func = [](std::string* out, const tensorflow::NameAttrList& f) { out->append(f.name()); };
  auto bools = [](std::string* out, bool b) { out->append(b ? "true" : "false"); };
  if (l.i_size() > 0) return absl::StrCat("list(i): [", absl::StrJoin(l.i(), ", "), "]");
  if (l.f_size() > 0) return absl::StrCat("list(f): [", absl::StrJoin(l.f(), ", "), "]");
  if (l.b_size() > 0) return absl::StrCat("list(b): [", absl::StrJoin(l.b(), ", ", bools), "]");
  if (l.s_size() > 0) return absl::StrCat("list(s): [", absl::StrJoin(l.s(), ", ", quote), "]");
  if (l.type_size() > 0) {
    return absl::StrCat("list(type): [", absl::StrJoin(l.type(), ", ", type), "]");
  }
  if (l.shape_size() > 0) {
    return absl::StrCat("list(shape): [", absl::StrJoin(l.shape(), ", ", shape), "]");
  }
  if (l.tensor_size() > 0) {
    return absl::StrCat("list(tensor): [", absl::StrJoin(l.tensor(), ", ", tensor), "]");
  }
  if (l.func_size() > 0) {
    return absl::StrCat("list(func): [", absl::StrJoin(l.func(), ", ", func), "]");
  }
  return "list: []";
}

AttrValue* Mutable(NodeDef* node, const std::string& name) {
  AttrValue* v = &(*node->mutable_attr())[name];
  v->Clear();
  return v;
}

}  // namespace

// --- getters -----------------------------------------------------------------

absl::Status GetNodeAttr(const NodeDef& node, const std::string& name, int64_t* v) {
  ASSIGN_OR_RETURN(const AttrValue* a, Find(node, name, "int"));
  *v = a->i();
  return absl::OkStatus();
}

absl::Status GetNodeAttr(const NodeDef& node, const std::string& name, int32_t* v) {
  ASSIGN_OR_RETURN(const AttrValue* a, Find(node, name, "int"));
  if (!FitsInt32(a->i())) return RangeError(node, name, a->i());
  *v = static_cast<int32_t>(a->i());
  return absl::OkStatus();
}

absl::Status GetNodeAttr(const NodeDef& node, const std::string& name, float* v) {
  ASSIGN_OR_RETURN(const AttrValue* a, Find(node, name, "float"));
  *v = a->f();
  return absl::OkStatus();
}

absl::Status GetNodeAttr(const NodeDef& node, const std::string& name, bool* v) {
  ASSIGN_OR_RETURN(const AttrValue* a, Find(node, name, "bool"));
  *v = a->b();
  return absl::OkStatus();
}

absl::Status GetNodeAttr(const NodeDef& node, const std::string& name, std::string* v) {
  ASSIGN_OR_RETURN(const AttrValue* a, Find(node, name, "string"));
  *v = a->s();
  return absl::OkStatus();
}

absl::Status GetNodeAttr(const NodeDef& node, const std::string& name, DataType* v) {
  ASSIGN_OR_RETURN(const AttrValue* a, Find(node, name, "type"));
  *v = a->type();
  return absl::OkStatus();
}

absl::Status GetNodeAttr(const NodeDef& node, const std::string& name,
                         tensorflow::TensorShapeProto* v) {
  ASSIGN_OR_RETURN(const AttrValue* a, Find(node, name, "shape"));
  *v = a->shape();
  return absl::OkStatus();
}

absl::Status GetNodeAttr(const NodeDef& node, const std::string& name, Tensor* v) {
  ASSIGN_OR_RETURN(const AttrValue* a, Find(node, name, "tensor"));
  absl::StatusOr<Tensor> t = Tensor::FromProto(a->tensor());
  if (!t.ok()) {
    return WithContext(t.status(), absl::StrCat("attr '", name, "' of node '", node.name(), "'"));
  }
  *v = *std::move(t);
  return absl::OkStatus();
}

absl::Status GetNodeAttr(const NodeDef& node, const std::string& name, std::vector<int64_t>* v) {
  ASSIGN_OR_RETURN(const AttrValue* a, Find(node, name, "list(int)"));
  v->assign(a->list().i().begin(), a->list().i().end());
  return absl::OkStatus();
}

absl::Status GetNodeAttr(const NodeDef& node, const std::string& name, std::vector<int32_t>* v) {
  ASSIGN_OR_RETURN(const AttrValue* a, Find(node, name, "list(int)"));
  v->clear();
  for (int64_t i : a->list().i()) {
    if (!FitsInt32(i)) return RangeError(node, name, i);
    v->push_back(static_cast<int32_t>(i));
  }
  return absl::OkStatus();
}

absl::Status GetNodeAttr(const NodeDef& node, const std::string& name, std::vector<float>* v) {
  ASSIGN_OR_RETURN(const AttrValue* a, Find(node, name, "list(float)"));
  v->assign(a->list().f().begin(), a->list().f().end());
  return absl::OkStatus();
}

absl::Status GetNodeAttr(const NodeDef& node, const std::string& name,
                         std::vector<std::string>* v) {
  ASSIGN_OR_RETURN(const AttrValue* a, Find(node, name, "list(string)"));
  v->assign(a->list().s().begin(), a->list().s().end());
  return absl::OkStatus();
}

absl::Status GetNodeAttr(const NodeDef& node, const std::string& name, std::vector<DataType>* v) {
  ASSIGN_OR_RETURN(const AttrValue* a, Find(node, name, "list(type)"));
  v->clear();
  for (int t : a->list().type()) v->push_back(static_cast<DataType>(t));
  return absl::OkStatus();
}

bool HasNodeAttr(const NodeDef& node, const std::string& name) {
  return node.attr().find(name) != node.attr().end();
}

// --- setters -----------------------------------------------------------------

void SetAttr(NodeDef* node, const std::string& name, int64_t v) { Mutable(node, name)->set_i(v); }
void SetAttr(NodeDef* node, const std::string& name, int v) { Mutable(node, name)->set_i(v); }
void SetAttr(NodeDef* node, const std::string& name, float v) { Mutable(node, name)->set_f(v); }
void SetAttr(NodeDef* node, const std::string& name, bool v) { Mutable(node, name)->set_b(v); }
void SetAttr(NodeDef* node, const std::string& name, const std::string& v) {
  Mutable(node, name)->set_s(v);
}
void SetAttr(NodeDef* node, const std::string& name, const char* v) {
  Mutable(node, name)->set_s(v);
}
void SetAttr(NodeDef* node, const std::string& name, DataType v) {
  Mutable(node, name)->set_type(v);
}
void SetAttr(NodeDef* node, const std::string& name, const TensorShape& v) {
  v.AsProto(Mutable(node, name)->mutable_shape());
}
void SetAttr(NodeDef* node, const std::string& name, const tensorflow::TensorShapeProto& v) {
  *Mutable(node, name)->mutable_shape() = v;
}
void SetAttr(NodeDef* node, const std::string& name, const Tensor& v) {
  v.AsProtoTensorContent(Mutable(node, name)->mutable_tensor());
}
void SetAttr(NodeDef* node, const std::string& name, const std::vector<int64_t>& v) {
  auto* list = Mutable(node, name)->mutable_list();
  for (int64_t i : v) list->add_i(i);
}
void SetAttr(NodeDef* node, const std::string& name, const std::vector<int>& v) {
  auto* list = Mutable(node, name)->mutable_list();
  for (int i : v) list->add_i(i);
}
void SetAttr(NodeDef* node, const std::string& name, const std::vector<std::string>& v) {
  auto* list = Mutable(node, name)->mutable_list();
  for (const std::string& s : v) list->add_s(s);
}
void SetAttr(NodeDef* node, const std::string& name, const std::vector<DataType>& v) {
  auto* list = Mutable(node, name)->mutable_list();
  for (DataType t : v) list->add_type(t);
}

std::string AttrValueSummary(const AttrValue& v) {
  switch (v.value_case()) {
    case AttrValue::kI:
      return absl::StrCat("i: ", v.i());
    case AttrValue::kF:
      return absl::StrCat("f: ", v.f());
    case AttrValue::kB:
      return absl::StrCat("b: ", v.b() ? "true" : "false");
    case AttrValue::kS:
      return absl::StrCat("s: '", v.s(), "'");
    case AttrValue::kType:
      return absl::StrCat("type: ", TypeName(v.type()));
    case AttrValue::kShape:
      return absl::StrCat("shape: ", ShapeSummary(v.shape()));
    case AttrValue::kTensor:
      return absl::StrCat("tensor: ", TensorSummary(v.tensor()));
    case AttrValue::kFunc:
      return absl::StrCat("func: ", v.func().name());
    case AttrValue::kPlaceholder:
      return absl::StrCat("placeholder: ", v.placeholder());
    case AttrValue::kList:
      return ListSummary(v.list());
    default:
      return "<unset>";
  }
}

std::string AttrValueKindName(const AttrValue& v) {
  switch (v.value_case()) {
    case AttrValue::kI:
      return "int";
    case AttrValue::kF:
      return "float";
    case AttrValue::kB:
      return "bool";
    case AttrValue::kS:
      return "string";
    case AttrValue::kType:
      return "type";
    case AttrValue::kShape:
      return "shape";
    case AttrValue::kTensor:
      return "tensor";
    case AttrValue::kFunc:
      return "func";
    case AttrValue::kPlaceholder:
      return "placeholder";
    case AttrValue::kList:
      return "list";
    default:
      return "unset";
  }
}

}  // namespace dflow
