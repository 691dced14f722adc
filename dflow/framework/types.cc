#include "dflow/framework/types.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dflow {
namespace {

struct TypeName {
  DataType dtype;
  const char* name;
  int size;
};

constexpr TypeName kTypeNames[] = {
    {tensorflow::DT_FLOAT, "float", 4},       {tensorflow::DT_DOUBLE, "double", 8},
    {tensorflow::DT_INT32, "int32", 4},       {tensorflow::DT_UINT8, "uint8", 1},
    {tensorflow::DT_INT16, "int16", 2},       {tensorflow::DT_INT8, "int8", 1},
    {tensorflow::DT_STRING, "string", 0},     {tensorflow::DT_COMPLEX64, "complex64", 8},
    {tensorflow::DT_INT64, "int64", 8},       {tensorflow::DT_BOOL, "bool", 1},
    {tensorflow::DT_QINT8, "qint8", 1},       {tensorflow::DT_QUINT8, "quint8", 1},
    {tensorflow::DT_QINT32, "qint32", 4},     {tensorflow::DT_BFLOAT16, "bfloat16", 2},
    {tensorflow::DT_QINT16, "qint16", 2},     {tensorflow::DT_QUINT16, "quint16", 2},
    {tensorflow::DT_UINT16, "uint16", 2},     {tensorflow::DT_COMPLEX128, "complex128", 16},
    {tensorflow::DT_HALF, "half", 2},         {tensorflow::DT_RESOURCE, "resource", 0},
    {tensorflow::DT_VARIANT, "variant", 0},   {tensorflow::DT_UINT32, "uint32", 4},
    {tensorflow::DT_UINT64, "uint64", 8},
};

const TypeName* Find(DataType base) {
  for (const auto& t : kTypeNames) {
    if (t.dtype == base) return &t;
  }
  return nullptr;
}

}  // namespace

bool IsRefType(DataType dtype) { return dtype > 100; }
DataType BaseType(DataType dtype) {
  return IsRefType(dtype) ? static_cast<DataType>(dtype - 100) : dtype;
}
DataType MakeRefType(DataType dtype) {
  return IsRefType(dtype) ? dtype : static_cast<DataType>(dtype + 100);
}

std::string DataTypeString(DataType dtype) {
  const TypeName* t = Find(BaseType(dtype));
  if (t == nullptr) return absl::StrCat("unknown dtype ", static_cast<int>(dtype));
  return IsRefType(dtype) ? absl::StrCat(t->name, "_ref") : std::string(t->name);
}

absl::StatusOr<DataType> DataTypeFromString(absl::string_view name) {
  std::string n = absl::AsciiStrToLower(name);
  if (absl::StartsWith(n, "dt_")) n = n.substr(3);
  bool ref = absl::EndsWith(n, "_ref");
  if (ref) n = n.substr(0, n.size() - 4);
  for (const auto& t : kTypeNames) {
    if (n == t.name) return ref ? MakeRefType(t.dtype) : t.dtype;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown dtype name '", name, "'"));
}

int DataTypeSize(DataType dtype) {
  const TypeName* t = Find(BaseType(dtype));
  return t == nullptr ? 0 : t->size;
}

bool IsSupportedDataType(DataType dtype) {
  switch (BaseType(dtype)) {
    case tensorflow::DT_FLOAT:
    case tensorflow::DT_DOUBLE:
    case tensorflow::DT_INT32:
    case tensorflow::DT_INT64:
    case tensorflow::DT_UINT8:
    case tensorflow::DT_BOOL:
    case tensorflow::DT_STRING:
    case tensorflow::DT_RESOURCE:
      return true;
    default:
      return false;
  }
}

std::string DataTypeListString(const std::vector<DataType>& types) {
  return absl::StrCat(
      "[", absl::StrJoin(types, ", ", [](std::string* out, DataType t) {
        out->append(DataTypeString(t));
      }),
      "]");
}

}  // namespace dflow
