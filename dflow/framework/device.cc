#include "dflow/framework/device.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "dflow/framework/tensor.h"

namespace dflow {

Device::Device(const DeviceName& name, uint64_t incarnation, int64_t memory_limit)
    : parsed_(name),
      name_(name.ToString()),
      incarnation_(incarnation),
      memory_limit_(memory_limit) {}

void Device::ToAttributes(tensorflow::DeviceAttributes* attributes) const {
  attributes->set_name(name_);
  attributes->set_device_type(device_type());
  attributes->set_memory_limit(memory_limit_);
  attributes->set_incarnation(incarnation_);
}

absl::StatusOr<Tensor> Device::CopyTensor(const Tensor& t, MemoryType to) {
  return absl::UnimplementedError(absl::StrCat(
      name_, " has no memory of its own: cannot copy a tensor to ", MemoryTypeName(to),
      " memory"));
}

absl::Status Device::ZeroFill(Tensor* t) {
  return absl::UnimplementedError(absl::StrCat(name_, " has no memory of its own to fill"));
}

absl::Status Device::GatherRows(const void* in, void* out, absl::Span<const int64_t> from,
                                int64_t row_elems, int element_size) {
  return absl::UnimplementedError(absl::StrCat(name_, " has no memory of its own to gather in"));
}

absl::Status Device::CopyStrided(const void* in, void* out, const StridedCopySpec& spec) {
  return absl::UnimplementedError(absl::StrCat(name_, " has no memory of its own to copy in"));
}

absl::Status Device::CopyPieces(absl::Span<const CopyPiece> pieces) {
  return absl::UnimplementedError(absl::StrCat(name_, " has no memory of its own to copy in"));
}

void CopyPiecesOnHost(absl::Span<const CopyPiece> pieces) {
  for (const CopyPiece& p : pieces) {
    if (p.bytes > 0) std::memcpy(p.to, p.from, static_cast<size_t>(p.bytes));
  }
}

absl::Status Device::AddTensors(const Tensor& a, const Tensor& b, Tensor* out) {
  return absl::UnimplementedError(absl::StrCat(name_, " has no memory of its own to add in"));
}

namespace {

template <typename T>
void AddAs(const Tensor& a, const Tensor& b, Tensor* out) {
  const T* x = static_cast<const T*>(a.raw_data());
  const T* y = static_cast<const T*>(b.raw_data());
  T* z = static_cast<T*>(out->raw_data());
  for (int64_t i = 0; i < out->NumElements(); ++i) z[i] = x[i] + y[i];
}

template <ScatterOp kOp, typename T>
void ScatterAs(const Tensor& updates, absl::Span<const int64_t> indices, Tensor* ref) {
  const int64_t rows = ref->dim_size(0);
  const int64_t row = rows == 0 ? 0 : ref->NumElements() / rows;
  const bool scalar = updates.dims() == 0;
  const T* in = static_cast<const T*>(updates.raw_data());
  T* out = static_cast<T*>(ref->raw_data());
  for (size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] < 0) continue;
    T* dst = out + indices[i] * row;
    for (int64_t k = 0; k < row; ++k) {
      dst[k] = CombineScattered<kOp>(dst[k], scalar ? in[0] : in[i * row + k]);
    }
  }
}

template <typename T>
void ScatterAs(ScatterOp op, const Tensor& updates, absl::Span<const int64_t> indices,
               Tensor* ref) {
  switch (op) {
    case ScatterOp::kAdd: return ScatterAs<ScatterOp::kAdd, T>(updates, indices, ref);
    case ScatterOp::kSub: return ScatterAs<ScatterOp::kSub, T>(updates, indices, ref);
    case ScatterOp::kMul: return ScatterAs<ScatterOp::kMul, T>(updates, indices, ref);
    case ScatterOp::kDiv: return ScatterAs<ScatterOp::kDiv, T>(updates, indices, ref);
    case ScatterOp::kMin: return ScatterAs<ScatterOp::kMin, T>(updates, indices, ref);
    case ScatterOp::kMax: return ScatterAs<ScatterOp::kMax, T>(updates, indices, ref);
    case ScatterOp::kUpdate: return ScatterAs<ScatterOp::kUpdate, T>(updates, indices, ref);
  }
}

}  // namespace

absl::Status Device::ScatterRows(ScatterOp op, const Tensor& updates,
                                 absl::Span<const int64_t> indices, Tensor* ref) {
  return absl::UnimplementedError(absl::StrCat(name_, " has no memory of its own to scatter in"));
}

absl::Status ScatterRowsOnHost(ScatterOp op, const Tensor& updates,
                               absl::Span<const int64_t> indices, Tensor* ref) {
  switch (ref->dtype()) {
    case DT_FLOAT: ScatterAs<float>(op, updates, indices, ref); break;
    case DT_DOUBLE: ScatterAs<double>(op, updates, indices, ref); break;
    case DT_INT32: ScatterAs<int32_t>(op, updates, indices, ref); break;
    case DT_INT64: ScatterAs<int64_t>(op, updates, indices, ref); break;
    case DT_BOOL:
      if (op != ScatterOp::kUpdate) return absl::UnimplementedError("cannot scatter into bool");
      ScatterAs<ScatterOp::kUpdate, bool>(updates, indices, ref);
      break;
    default:
      return absl::UnimplementedError(
          absl::StrCat("cannot scatter into dtype ", DataTypeString(ref->dtype())));
  }
  return absl::OkStatus();
}

absl::Status AddTensorsOnHost(const Tensor& a, const Tensor& b, Tensor* out) {
  switch (a.dtype()) {
    case DT_FLOAT:
      AddAs<float>(a, b, out);
      return absl::OkStatus();
    case DT_DOUBLE:
      AddAs<double>(a, b, out);
      return absl::OkStatus();
    case DT_INT32:
      AddAs<int32_t>(a, b, out);
      return absl::OkStatus();
    case DT_INT64:
      AddAs<int64_t>(a, b, out);
      return absl::OkStatus();
    default:
      return absl::UnimplementedError(
          absl::StrCat("cannot add gradients of dtype ", DataTypeString(a.dtype())));
  }
}

}  // namespace dflow
