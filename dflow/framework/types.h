// Element types: TensorFlow's DataType enum, its names, sizes and a
// compile-time mapping from C++ types.
#ifndef DFLOW_FRAMEWORK_TYPES_H_
#define DFLOW_FRAMEWORK_TYPES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "dflow/proto/types.pb.h"

namespace dflow {

using tensorflow::DataType;
using tensorflow::DT_BOOL;
using tensorflow::DT_DOUBLE;
using tensorflow::DT_FLOAT;
using tensorflow::DT_INT32;
using tensorflow::DT_INT64;
using tensorflow::DT_INVALID;
using tensorflow::DT_RESOURCE;
using tensorflow::DT_STRING;
using tensorflow::DT_UINT8;

struct ResourceHandle;  // resource_handle.h

// "float", "int32", "float_ref", ... as TensorFlow names them.
std::string DataTypeString(DataType dtype);
// Parses "float", "DT_FLOAT", "int32", ...
absl::StatusOr<DataType> DataTypeFromString(absl::string_view name);
// Bytes per element for fixed-size types, 0 for string/resource/variant.
int DataTypeSize(DataType dtype);
bool IsRefType(DataType dtype);
DataType BaseType(DataType dtype);
DataType MakeRefType(DataType dtype);
// The dtypes a Tensor can hold in dflow today.
bool IsSupportedDataType(DataType dtype);
std::string DataTypeListString(const std::vector<DataType>& types);

template <typename T>
struct DataTypeToEnum;
#define DFLOW_MATCH_TYPE_AND_ENUM(TYPE, ENUM)          \
  template <>                                          \
  struct DataTypeToEnum<TYPE> {                        \
    static constexpr DataType value = tensorflow::ENUM; \
  }
DFLOW_MATCH_TYPE_AND_ENUM(float, DT_FLOAT);
DFLOW_MATCH_TYPE_AND_ENUM(double, DT_DOUBLE);
DFLOW_MATCH_TYPE_AND_ENUM(int32_t, DT_INT32);
DFLOW_MATCH_TYPE_AND_ENUM(int64_t, DT_INT64);
DFLOW_MATCH_TYPE_AND_ENUM(uint8_t, DT_UINT8);
DFLOW_MATCH_TYPE_AND_ENUM(bool, DT_BOOL);
DFLOW_MATCH_TYPE_AND_ENUM(std::string, DT_STRING);
DFLOW_MATCH_TYPE_AND_ENUM(ResourceHandle, DT_RESOURCE);
#undef DFLOW_MATCH_TYPE_AND_ENUM

template <typename T>
struct TypeTag {
  using type = T;
};

// Calls fn(TypeTag<T>{}) with T the C++ type of `dtype` among the numeric
// types (float, double, int32, int64, uint8, bool); returns fn's result, or
// an InvalidArgument naming `what` when dtype is not numeric.
//   return SwitchNumeric(dtype, "AddV2", [&](auto tag) -> absl::Status {
//     using T = typename decltype(tag)::type; ... });
template <typename Fn>
absl::Status SwitchNumeric(DataType dtype, absl::string_view what, Fn&& fn) {
  switch (dtype) {
    case tensorflow::DT_FLOAT: return fn(TypeTag<float>{});
    case tensorflow::DT_DOUBLE: return fn(TypeTag<double>{});
    case tensorflow::DT_INT32: return fn(TypeTag<int32_t>{});
    case tensorflow::DT_INT64: return fn(TypeTag<int64_t>{});
    case tensorflow::DT_UINT8: return fn(TypeTag<uint8_t>{});
    case tensorflow::DT_BOOL: return fn(TypeTag<bool>{});
    default:
      return absl::InvalidArgumentError(
          std::string(what) + ": unsupported dtype " + DataTypeString(dtype));
  }
}

// As SwitchNumeric, also covering string.
template <typename Fn>
absl::Status SwitchAll(DataType dtype, absl::string_view what, Fn&& fn) {
  if (dtype == tensorflow::DT_STRING) return fn(TypeTag<std::string>{});
  return SwitchNumeric(dtype, what, std::forward<Fn>(fn));
}

}  // namespace dflow

#endif  // DFLOW_FRAMEWORK_TYPES_H_
