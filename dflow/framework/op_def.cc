#include "dflow/framework/op_def.h"

#include <cstdio>
#include <cstdlib>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "dflow/framework/attr_util.h"
#include "google/protobuf/text_format.h"

namespace dflow {
namespace {

using tensorflow::AttrValue;
using tensorflow::NodeDef;

// ---------------------------------------------------------------------------
// Spec parsing helpers.

std::string Trim(absl::string_view s) { return std::string(absl::StripAsciiWhitespace(s)); }

absl::Status SpecError(const std::string& op, absl::string_view spec, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("[", op, "] bad spec '", spec, "': ", why));
}

bool IsIdentifier(absl::string_view s) {
  if (s.empty() || absl::ascii_isdigit(s[0])) return false;
  for (char ch : s) {
    if (!absl::ascii_isalnum(ch) && ch != '_') return false;
  }
  return true;
}

// Splits "name: rest" at the first ':'.
absl::Status SplitNameAndRest(const std::string& op, absl::string_view spec, std::string* name,
                              std::string* rest) {
  size_t colon = spec.find(':');
  if (colon == absl::string_view::npos) return SpecError(op, spec, "expected 'name: ...'");
  *name = Trim(spec.substr(0, colon));
  *rest = Trim(spec.substr(colon + 1));
  if (!IsIdentifier(*name)) return SpecError(op, spec, "bad name");
  if (rest->empty()) return SpecError(op, spec, "missing type");
  return absl::OkStatus();
}

// The numeric types dflow computes with (TensorFlow's "numbertype" narrowed).
const std::vector<DataType>& NumericTypes() {
  static const auto* types =
      new std::vector<DataType>{DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64, DT_UINT8};
  return *types;
}

// Splits a comma-separated list, respecting quotes.
std::vector<std::string> SplitList(absl::string_view s) {
  std::vector<std::string> out;
  std::string cur;
  char quote = 0;
  for (char ch : s) {
    if (quote != 0) {
      if (ch == quote) quote = 0;
      cur += ch;
    } else if (ch == '\'' || ch == '"') {
      quote = ch;
      cur += ch;
    } else if (ch == ',') {
      out.push_back(Trim(cur));
      cur.clear();
    } else {
      cur += ch;
    }
  }
  if (!Trim(cur).empty() || !out.empty()) out.push_back(Trim(cur));
  return out;
}

bool IsQuoted(absl::string_view s) {
  return s.size() >= 2 && (s.front() == '\'' || s.front() == '"') && s.back() == s.front();
}

// Parses one element of a type set: a type name or a type-class keyword.
absl::Status AddTypes(absl::string_view item, std::vector<DataType>* out) {
  if (item == "numbertype" || item == "realnumbertype") {
    out->insert(out->end(), NumericTypes().begin(), NumericTypes().end());
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(DataType t, DataTypeFromString(item));
  out->push_back(t);
  return absl::OkStatus();
}

// Parses "{float, int32}" or "{'SAME', 'VALID'}" into `attr`; returns the
// base type ("type" or "string").
absl::StatusOr<std::string> ParseSet(absl::string_view body, OpAttr* attr) {
  std::vector<std::string> items = SplitList(body);
  if (items.empty()) return absl::InvalidArgumentError("empty set");
  if (IsQuoted(items[0])) {
    for (const std::string& item : items) {
      if (!IsQuoted(item)) return absl::InvalidArgumentError("mixed set");
      attr->allowed_values.push_back(item.substr(1, item.size() - 2));
    }
    return std::string("string");
  }
  for (const std::string& item : items) RETURN_IF_ERROR(AddTypes(item, &attr->allowed_types));
  return std::string("type");
}

bool IsBaseAttrType(absl::string_view t) {
  static const std::set<std::string, std::less<>> kTypes = {"int",  "float", "bool",   "string",
                                                            "type", "shape", "tensor", "func"};
  return kTypes.count(t) > 0;
}

// Parses the type part of an attr spec ("int", "list({float, int32})", ...).
absl::Status ParseAttrType(absl::string_view t, OpAttr* attr) {
  if (t == "numbertype" || t == "realnumbertype") {
    attr->type = "type";
    attr->allowed_types = NumericTypes();
    return absl::OkStatus();
  }
  if (IsBaseAttrType(t)) {
    attr->type = std::string(t);
    return absl::OkStatus();
  }
  if (absl::StartsWith(t, "{") && absl::EndsWith(t, "}")) {
    ASSIGN_OR_RETURN(attr->type, ParseSet(t.substr(1, t.size() - 2), attr));
    return absl::OkStatus();
  }
  if (absl::StartsWith(t, "list(") && absl::EndsWith(t, ")")) {
    RETURN_IF_ERROR(ParseAttrType(Trim(t.substr(5, t.size() - 6)), attr));
    if (absl::StartsWith(attr->type, "list(")) {
      return absl::InvalidArgumentError("nested lists");
    }
    attr->type = absl::StrCat("list(", attr->type, ")");
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown attr type '", t, "'"));
}

absl::StatusOr<std::string> Unquote(absl::string_view s) {
  if (!IsQuoted(s))
    return absl::InvalidArgumentError(absl::StrCat("expected a quoted string: ", s));
  return std::string(s.substr(1, s.size() - 2));
}

absl::StatusOr<int64_t> ParseInt(absl::string_view s) {
  int64_t v;
  if (!absl::SimpleAtoi(s, &v)) return absl::InvalidArgumentError(absl::StrCat("bad int: ", s));
  return v;
}

absl::StatusOr<float> ParseFloat(absl::string_view s) {
  float v;
  if (!absl::SimpleAtof(s, &v)) return absl::InvalidArgumentError(absl::StrCat("bad float: ", s));
  return v;
}

absl::StatusOr<bool> ParseBool(absl::string_view s) {
  if (s == "true") return true;
  if (s == "false") return false;
  return absl::InvalidArgumentError(absl::StrCat("bad bool: ", s));
}

// "{ unknown_rank: true }" (text proto), "[]" / "[2, 3]" (dims; -1 unknown).
absl::Status ParseShape(absl::string_view s, tensorflow::TensorShapeProto* out) {
  if (absl::StartsWith(s, "[") && absl::EndsWith(s, "]")) {
    for (const std::string& d : SplitList(s.substr(1, s.size() - 2))) {
      ASSIGN_OR_RETURN(int64_t v, ParseInt(d));
      out->add_dim()->set_size(v);
    }
    return absl::OkStatus();
  }
  if (absl::StartsWith(s, "{") && absl::EndsWith(s, "}")) {
    std::string body(s.substr(1, s.size() - 2));
    if (google::protobuf::TextFormat::ParseFromString(body, out)) return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("bad shape: ", s));
}

absl::Status ParseTensor(absl::string_view s, tensorflow::TensorProto* out) {
  std::string body(s);
  if (absl::StartsWith(s, "{") && absl::EndsWith(s, "}")) body = body.substr(1, body.size() - 2);
  if (google::protobuf::TextFormat::ParseFromString(body, out)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("bad tensor: ", s));
}

// Parses one scalar value of base attr type `type` into `v`.
absl::Status ParseScalarValue(const std::string& type, absl::string_view s, AttrValue* v) {
  if (type == "int") {
    ASSIGN_OR_RETURN(int64_t i, ParseInt(s));
    v->set_i(i);
  } else if (type == "float") {
    ASSIGN_OR_RETURN(float f, ParseFloat(s));
    v->set_f(f);
  } else if (type == "bool") {
    ASSIGN_OR_RETURN(bool b, ParseBool(s));
    v->set_b(b);
  } else if (type == "string") {
    ASSIGN_OR_RETURN(std::string str, Unquote(s));
    v->set_s(str);
  } else if (type == "type") {
    ASSIGN_OR_RETURN(DataType t, DataTypeFromString(s));
    v->set_type(t);
  } else if (type == "shape") {
    RETURN_IF_ERROR(ParseShape(s, v->mutable_shape()));
  } else if (type == "tensor") {
    RETURN_IF_ERROR(ParseTensor(s, v->mutable_tensor()));
  } else {
    return absl::InvalidArgumentError(absl::StrCat("attrs of type ", type, " take no default"));
  }
  return absl::OkStatus();
}

// Appends the scalar `item` to the list field of `v` matching `elem_type`.
void AppendToList(const std::string& elem_type, const AttrValue& item, AttrValue* v) {
  auto* list = v->mutable_list();
  if (elem_type == "int") list->add_i(item.i());
  if (elem_type == "float") list->add_f(item.f());
  if (elem_type == "bool") list->add_b(item.b());
  if (elem_type == "string") list->add_s(item.s());
  if (elem_type == "type") list->add_type(item.type());
  if (elem_type == "shape") *list->add_shape() = item.shape();
  if (elem_type == "tensor") *list->add_tensor() = item.tensor();
}

absl::StatusOr<AttrValue> ParseDefault(const std::string& type, absl::string_view s) {
  AttrValue v;
  if (!absl::StartsWith(type, "list(")) {
    RETURN_IF_ERROR(ParseScalarValue(type, s, &v));
    return v;
  }
  if (!absl::StartsWith(s, "[") || !absl::EndsWith(s, "]")) {
    return absl::InvalidArgumentError(absl::StrCat("list default must be [...]: ", s));
  }
  std::string elem_type = type.substr(5, type.size() - 6);
  v.mutable_list();
  for (const std::string& item_text : SplitList(s.substr(1, s.size() - 2))) {
    AttrValue item;
    RETURN_IF_ERROR(ParseScalarValue(elem_type, item_text, &item));
    AppendToList(elem_type, item, &v);
  }
  return v;
}

// Index of the first '=' outside quotes that is not part of ">=".
size_t FindDefaultEquals(absl::string_view s) {
  char quote = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    char ch = s[i];
    if (quote != 0) {
      if (ch == quote) quote = 0;
    } else if (ch == '\'' || ch == '"') {
      quote = ch;
    } else if (ch == '=' && (i == 0 || s[i - 1] != '>')) {
      return i;
    }
  }
  return absl::string_view::npos;
}

absl::Status CheckDefaultAllowed(const OpAttr& attr);

absl::StatusOr<OpAttr> ParseAttrSpec(const std::string& op, absl::string_view spec) {
  OpAttr attr;
  std::string rest;
  RETURN_IF_ERROR(SplitNameAndRest(op, spec, &attr.name, &rest));
  std::string type_part = rest, default_part;
  size_t eq = FindDefaultEquals(rest);
  if (eq != std::string::npos) {
    type_part = Trim(rest.substr(0, eq));
    default_part = Trim(rest.substr(eq + 1));
    if (default_part.empty()) return SpecError(op, spec, "empty default");
  }
  size_t ge = type_part.find(">=");
  if (ge != std::string::npos) {
    auto min = ParseInt(Trim(type_part.substr(ge + 2)));
    if (!min.ok()) return SpecError(op, spec, min.status().message());
    attr.minimum = *min;
    type_part = Trim(type_part.substr(0, ge));
  }
  absl::Status s = ParseAttrType(type_part, &attr);
  if (!s.ok()) return SpecError(op, spec, s.message());
  if (attr.minimum && attr.type != "int" && !absl::StartsWith(attr.type, "list(")) {
    return SpecError(op, spec, "a minimum needs an int or list attr");
  }
  if (!default_part.empty()) {
    absl::StatusOr<AttrValue> v = ParseDefault(attr.type, default_part);
    if (!v.ok()) return SpecError(op, spec, v.status().message());
    attr.default_value = *std::move(v);
    s = CheckDefaultAllowed(attr);
    if (!s.ok()) return SpecError(op, spec, s.message());
  }
  return attr;
}

absl::StatusOr<OpArg> ParseArgSpec(const std::string& op, absl::string_view spec,
                                   const std::vector<OpAttr>& attrs) {
  OpArg arg;
  std::string rest;
  RETURN_IF_ERROR(SplitNameAndRest(op, spec, &arg.name, &rest));
  if (absl::StartsWith(rest, "Ref(") && absl::EndsWith(rest, ")")) {
    arg.is_ref = true;
    rest = Trim(rest.substr(4, rest.size() - 5));
  }
  size_t star = rest.find('*');
  if (star != std::string::npos) {
    arg.number_attr = Trim(rest.substr(0, star));
    rest = Trim(rest.substr(star + 1));
  }
  auto find = [&](const std::string& n) -> const OpAttr* {
    for (const OpAttr& a : attrs) {
      if (a.name == n) return &a;
    }
    return nullptr;
  };
  if (!arg.number_attr.empty()) {
    const OpAttr* n = find(arg.number_attr);
    if (n == nullptr) return SpecError(op, spec, absl::StrCat("no attr '", arg.number_attr, "'"));
    if (n->type != "int")
      return SpecError(op, spec, absl::StrCat("attr '", n->name, "' is not an int"));
  }
  if (const OpAttr* t = find(rest)) {
    if (t->type == "type") {
      arg.type_attr = rest;
    } else if (t->type == "list(type)" && arg.number_attr.empty()) {
      arg.type_list_attr = rest;
    } else {
      return SpecError(
          op, spec, absl::StrCat("attr '", rest, "' is ", t->type, ", not a type or list(type)"));
    }
    return arg;
  }
  absl::StatusOr<DataType> fixed = DataTypeFromString(rest);
  if (!fixed.ok()) return SpecError(op, spec, absl::StrCat("no attr or type named '", rest, "'"));
  arg.type = *fixed;
  return arg;
}

// ---------------------------------------------------------------------------
// Value checks shared by spec defaults and NodeDef validation.

// The element kinds present in a list value.
std::vector<std::string> ListKinds(const AttrValue::ListValue& l) {
  std::vector<std::string> kinds;
  if (l.i_size() > 0) kinds.push_back("int");
  if (l.f_size() > 0) kinds.push_back("float");
  if (l.b_size() > 0) kinds.push_back("bool");
  if (l.s_size() > 0) kinds.push_back("string");
  if (l.type_size() > 0) kinds.push_back("type");
  if (l.shape_size() > 0) kinds.push_back("shape");
  if (l.tensor_size() > 0) kinds.push_back("tensor");
  if (l.func_size() > 0) kinds.push_back("func");
  return kinds;
}

int64_t ListLength(const AttrValue::ListValue& l) {
  return l.i_size() + l.f_size() + l.b_size() + l.s_size() + l.type_size() + l.shape_size() +
         l.tensor_size() + l.func_size();
}

// Checks that `v` holds a value of attr type `type` ("int", "list(type)", ...).
absl::Status CheckKind(const std::string& type, const AttrValue& v) {
  if (!absl::StartsWith(type, "list(")) {
    if (AttrValueKindName(v) == type) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat("holds ", AttrValueKindName(v), ", not ", type));
  }
  if (v.value_case() != AttrValue::kList) {
    return absl::InvalidArgumentError(absl::StrCat("holds ", AttrValueKindName(v), ", not ", type));
  }
  std::string elem = type.substr(5, type.size() - 6);
  for (const std::string& k : ListKinds(v.list())) {
    if (k != elem) {
      return absl::InvalidArgumentError(absl::StrCat("holds list(", k, "), not ", type));
    }
  }
  return absl::OkStatus();
}

bool Contains(const std::vector<DataType>& v, DataType t) {
  return std::find(v.begin(), v.end(), t) != v.end();
}

absl::Status CheckAllowedType(const OpAttr& attr, DataType t) {
  if (attr.allowed_types.empty() || Contains(attr.allowed_types, t)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("value ", DataTypeString(t),
                                                 " is not in the allowed types ",
                                                 DataTypeListString(attr.allowed_types)));
}

absl::Status CheckAllowedString(const OpAttr& attr, const std::string& s) {
  if (attr.allowed_values.empty() ||
      std::find(attr.allowed_values.begin(), attr.allowed_values.end(), s) !=
          attr.allowed_values.end()) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("value '", s, "' is not in the allowed values ['",
                                                 absl::StrJoin(attr.allowed_values, "', '"), "']"));
}

// Checks allowed types / values and minima of a value of the right kind.
absl::Status CheckValue(const OpAttr& attr, const AttrValue& v) {
  if (attr.type == "type") return CheckAllowedType(attr, v.type());
  if (attr.type == "string") return CheckAllowedString(attr, v.s());
  if (attr.type == "int" && attr.minimum && v.i() < *attr.minimum) {
    return absl::InvalidArgumentError(
        absl::StrCat("value ", v.i(), " is less than the minimum ", *attr.minimum));
  }
  if (attr.type == "list(type)") {
    for (int t : v.list().type()) RETURN_IF_ERROR(CheckAllowedType(attr, static_cast<DataType>(t)));
  }
  if (attr.type == "list(string)") {
    for (const std::string& s : v.list().s()) RETURN_IF_ERROR(CheckAllowedString(attr, s));
  }
  if (absl::StartsWith(attr.type, "list(") && attr.minimum &&
      ListLength(v.list()) < *attr.minimum) {
    return absl::InvalidArgumentError(absl::StrCat(
        "list has ", ListLength(v.list()), " values, fewer than the minimum ", *attr.minimum));
  }
  return absl::OkStatus();
}

absl::Status CheckDefaultAllowed(const OpAttr& attr) {
  RETURN_IF_ERROR(CheckKind(attr.type, *attr.default_value));
  return CheckValue(attr, *attr.default_value);
}

// ---------------------------------------------------------------------------
// NodeDef helpers.

std::string NodeLabel(const NodeDef& node) {
  return absl::StrCat("NodeDef '", node.name(), "' (", node.op(), ")");
}

absl::Status NodeError(const NodeDef& node, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(NodeLabel(node), ": ", message));
}

// The most tensors a list arg ("N * T") may hold.
constexpr int64_t kMaxArgListLength = int64_t{1} << 20;

// The flattened types of one arg.
absl::Status ArgTypes(const NodeDef& node, const OpArg& arg, DataTypeVector* out) {
  DataTypeVector types;
  if (!arg.type_list_attr.empty()) {
    RETURN_IF_ERROR(GetNodeAttr(node, arg.type_list_attr, &types));
  } else {
    DataType t = arg.type;
    if (!arg.type_attr.empty()) RETURN_IF_ERROR(GetNodeAttr(node, arg.type_attr, &t));
    int64_t n = 1;
    if (!arg.number_attr.empty()) RETURN_IF_ERROR(GetNodeAttr(node, arg.number_attr, &n));
    if (n < 0) return NodeError(node, absl::StrCat("attr '", arg.number_attr, "' is negative"));
    // A typo'd count (Split's num_split = 1e12) must fail here, not in the allocator.
    if (n > kMaxArgListLength) {
      return NodeError(node, absl::StrCat("attr '", arg.number_attr, "' = ", n, " exceeds the ",
                                          kMaxArgListLength, " tensors one arg may hold"));
    }
    types.assign(n, t);
  }
  for (DataType t : types) out->push_back(arg.is_ref ? MakeRefType(t) : t);
  return absl::OkStatus();
}

absl::Status ArgsTypes(const NodeDef& node, const std::vector<OpArg>& args, DataTypeVector* out) {
  for (const OpArg& arg : args) RETURN_IF_ERROR(ArgTypes(node, arg, out));
  return absl::OkStatus();
}

absl::Status ValidateAttrs(const NodeDef& node, const OpDef& op) {
  for (const OpAttr& attr : op.attrs) {
    auto it = node.attr().find(attr.name);
    if (it == node.attr().end()) {
      return NodeError(node, absl::StrCat("missing attr '", attr.name, "'"));
    }
    absl::Status s = CheckKind(attr.type, it->second);
    if (s.ok()) s = CheckValue(attr, it->second);
    if (!s.ok()) return NodeError(node, absl::StrCat("attr '", attr.name, "' ", s.message()));
  }
  for (const auto& [name, value] : node.attr()) {
    if (!absl::StartsWith(name, "_") && op.FindAttr(name) == nullptr) {
      return NodeError(node, absl::StrCat("unknown attr '", name, "'"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateInputCount(const NodeDef& node, const OpDef& op) {
  int data_inputs = 0;
  bool seen_control = false;
  for (const std::string& in : node.input()) {
    if (absl::StartsWith(in, "^")) {
      seen_control = true;
    } else if (seen_control) {
      return NodeError(node, absl::StrCat("data input '", in, "' after a control input"));
    } else {
      ++data_inputs;
    }
  }
  DataTypeVector types;
  RETURN_IF_ERROR(ArgsTypes(node, op.inputs, &types));
  if (data_inputs != static_cast<int>(types.size())) {
    return NodeError(node, absl::StrCat("expected ", types.size(), " inputs, got ", data_inputs));
  }
  return absl::OkStatus();
}

// Checks that the attrs named by `arg` exist with the right kinds.
absl::Status CheckArgAttrs(const OpDef& def, const OpArg& arg) {
  auto need = [&](const std::string& name, absl::string_view kind) -> absl::Status {
    if (name.empty()) return absl::OkStatus();
    const OpAttr* a = def.FindAttr(name);
    if (a == nullptr || a->type != kind) {
      return absl::InvalidArgumentError(absl::StrCat("[", def.name, "] arg '", arg.name,
                                                     "' needs a ", kind, " attr '", name, "'"));
    }
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(need(arg.type_attr, "type"));
  RETURN_IF_ERROR(need(arg.number_attr, "int"));
  return need(arg.type_list_attr, "list(type)");
}

}  // namespace

// ---------------------------------------------------------------------------

const OpAttr* OpDef::FindAttr(const std::string& attr_name) const {
  for (const OpAttr& a : attrs) {
    if (a.name == attr_name) return &a;
  }
  return nullptr;
}

OpDefBuilder::OpDefBuilder(std::string op_name) { def_.name = std::move(op_name); }

OpDefBuilder& OpDefBuilder::Input(std::string spec) {
  input_specs_.push_back(std::move(spec));
  return *this;
}

OpDefBuilder& OpDefBuilder::Output(std::string spec) {
  output_specs_.push_back(std::move(spec));
  return *this;
}

OpDefBuilder& OpDefBuilder::Attr(std::string spec) {
  attr_specs_.push_back(std::move(spec));
  return *this;
}

OpDefBuilder& OpDefBuilder::SetIsStateful() {
  def_.is_stateful = true;
  return *this;
}

OpDefBuilder& OpDefBuilder::SetShapeFn(ShapeFn fn) {
  def_.shape_fn = std::move(fn);
  return *this;
}

absl::StatusOr<OpDef> OpDefBuilder::Finalize() const {
  OpDef def = def_;
  if (!IsIdentifier(def.name)) {
    return absl::InvalidArgumentError(absl::StrCat("bad op name '", def.name, "'"));
  }
  std::set<std::string> names;
  for (const std::string& spec : attr_specs_) {
    ASSIGN_OR_RETURN(OpAttr attr, ParseAttrSpec(def.name, spec));
    if (!names.insert(attr.name).second) return SpecError(def.name, spec, "duplicate attr");
    def.attrs.push_back(std::move(attr));
  }
  for (const auto* specs : {&input_specs_, &output_specs_}) {
    std::set<std::string> arg_names;
    auto& args = specs == &input_specs_ ? def.inputs : def.outputs;
    for (const std::string& spec : *specs) {
      ASSIGN_OR_RETURN(OpArg arg, ParseArgSpec(def.name, spec, def.attrs));
      if (!arg_names.insert(arg.name).second) return SpecError(def.name, spec, "duplicate arg");
      RETURN_IF_ERROR(CheckArgAttrs(def, arg));
      args.push_back(std::move(arg));
    }
  }
  return def;
}

OpRegistry* OpRegistry::Global() {
  static OpRegistry* registry = new OpRegistry;
  return registry;
}

absl::Status OpRegistry::Register(OpDef def) {
  absl::MutexLock l(&mu_);
  const std::string name = def.name;
  if (!ops_.emplace(name, std::make_unique<OpDef>(std::move(def))).second) {
    return absl::AlreadyExistsError(absl::StrCat("op '", name, "' is already registered"));
  }
  return absl::OkStatus();
}

absl::StatusOr<const OpDef*> OpRegistry::LookUp(const std::string& op_name) const {
  absl::ReaderMutexLock l(&mu_);
  auto it = ops_.find(op_name);
  if (it == ops_.end()) {
    return absl::NotFoundError(absl::StrCat("Op type not registered '", op_name, "'"));
  }
  return it->second.get();
}

std::vector<std::string> OpRegistry::ListOps() const {
  absl::ReaderMutexLock l(&mu_);
  std::vector<std::string> names;
  for (const auto& [name, def] : ops_) names.push_back(name);
  return names;
}

OpDefBuilderReceiver::OpDefBuilderReceiver(const OpDefBuilder& builder) {
  absl::StatusOr<OpDef> def = builder.Finalize();
  absl::Status s = def.ok() ? OpRegistry::Global()->Register(*std::move(def)) : def.status();
  if (!s.ok()) {
    std::fprintf(stderr, "dflow: REGISTER_OP failed: %s\n", std::string(s.message()).c_str());
    std::abort();
  }
}

void AddDefaultAttrs(const OpDef& op, NodeDef* node) {
  auto* attrs = node->mutable_attr();
  for (const OpAttr& attr : op.attrs) {
    if (attr.default_value && attrs->find(attr.name) == attrs->end()) {
      (*attrs)[attr.name] = *attr.default_value;
    }
  }
}

absl::Status ValidateNodeDef(const NodeDef& node, const OpDef& op) {
  if (node.op() != op.name) {
    return NodeError(node, absl::StrCat("validated against op '", op.name, "'"));
  }
  RETURN_IF_ERROR(ValidateAttrs(node, op));
  return ValidateInputCount(node, op);
}

absl::Status InOutTypesForNode(const NodeDef& node, const OpDef& op, DataTypeVector* inputs,
                               DataTypeVector* outputs) {
  inputs->clear();
  outputs->clear();
  RETURN_IF_ERROR(ArgsTypes(node, op.inputs, inputs));
  return ArgsTypes(node, op.outputs, outputs);
}

namespace {

absl::Status ArgRange(const NodeDef& node, const OpDef& op, const std::vector<OpArg>& args,
                      const char* kind, const std::string& name, int* start, int* stop) {
  int begin = 0;
  for (const OpArg& arg : args) {
    DataTypeVector types;
    RETURN_IF_ERROR(ArgTypes(node, arg, &types));
    if (arg.name == name) {
      *start = begin;
      *stop = begin + static_cast<int>(types.size());
      return absl::OkStatus();
    }
    begin += static_cast<int>(types.size());
  }
  return absl::InvalidArgumentError(
      absl::StrCat("[", op.name, "] has no ", kind, " named '", name, "'"));
}

}  // namespace

absl::Status OutputRange(const NodeDef& node, const OpDef& op, const std::string& name, int* start,
                         int* stop) {
  return ArgRange(node, op, op.outputs, "output", name, start, stop);
}

absl::Status InputRange(const NodeDef& node, const OpDef& op, const std::string& name, int* start,
                        int* stop) {
  return ArgRange(node, op, op.inputs, "input", name, start, stop);
}

}  // namespace dflow
