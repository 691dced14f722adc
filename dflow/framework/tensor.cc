#include "dflow/framework/tensor.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <limits>
#include <new>
#include <atomic>
#include <algorithm>

#include <unistd.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "dflow/framework/coding.h"
#include "dflow/framework/status.h"
#include "dflow/framework/variant.h"

namespace dflow {
namespace {

size_t ElementBytes(DataType dtype) {
  switch (BaseType(dtype)) {
    case DT_STRING: return sizeof(std::string);
    case DT_RESOURCE: return sizeof(ResourceHandle);
    case tensorflow::DT_VARIANT: return sizeof(Variant);
    default: return DataTypeSize(dtype);
  }
}

// Fills `out` from a typed repeated field: an empty field means zeros, a short
// one repeats its last value (TensorFlow's encoding of splat constants).
template <typename T, typename Field>
absl::Status FillFromField(const Field& field, absl::Span<T> out, absl::string_view name) {
  if (field.size() > static_cast<int64_t>(out.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TensorProto: ", field.size(), " values in ", name, " but shape holds ", out.size()));
  }
  if (field.empty()) return absl::OkStatus();
  int64_t i = 0;
  for (const auto& v : field) out[i++] = static_cast<T>(v);
  for (; i < static_cast<int64_t>(out.size()); ++i) out[i] = out[i - 1];
  return absl::OkStatus();
}

// Recycles large buffers. A fresh multi-megabyte allocation is a new mapping
// from the OS whose first touch faults in every page (measured: 64 MiB took
// ~35 ms, five times the kernel's own loop); training allocates the same
// sizes every step, so freed buffers are kept, by exact size, up to a bound.
// From 64 KiB: malloc trims and re-faults buffers of a few hundred KiB too (an
// MLP's 784x256 weights, its activations and fed batch), ~23 page faults a
// cluster step and 10% of its CPU before they were kept here.
class LargeBufferCache {
 public:
  static constexpr size_t kMinBytes = size_t{64} << 10;
  static constexpr size_t kMaxCachedBytes = size_t{512} << 20;

  static LargeBufferCache* Get() {
    static LargeBufferCache* cache = new LargeBufferCache;  // Never destroyed.
    return cache;
  }

  void* Allocate(size_t bytes) {
    if (bytes >= kMinBytes) {
      absl::MutexLock l(&mu_);
      auto it = free_.find(bytes);
      if (it != free_.end()) {
        void* p = it->second;
        free_.erase(it);
        cached_bytes_ -= bytes;
        return p;
      }
    }
    return ::operator new(bytes, std::align_val_t(kTensorAlignment));
  }

  void Free(void* p, size_t bytes) {
    if (bytes >= kMinBytes) {
      absl::MutexLock l(&mu_);
      if (cached_bytes_ + bytes <= kMaxCachedBytes) {
        free_.emplace(bytes, p);
        cached_bytes_ += bytes;
        return;
      }
    }
    ::operator delete(p, std::align_val_t(kTensorAlignment));
  }

 private:
  absl::Mutex mu_;
  std::multimap<size_t, void*> free_ ABSL_GUARDED_BY(mu_);
  size_t cached_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

size_t AllocationBytes(size_t bytes) {
  size_t alloc = bytes == 0 ? kTensorAlignment : bytes;
  return (alloc + kTensorAlignment - 1) / kTensorAlignment * kTensorAlignment;
}

// Reads TensorFlow's string list (tensor_content of a string tensor): the
// varint32 length of every element, then all their bytes. The lengths must
// add up to exactly the bytes that follow.
absl::Status DecodeStringContent(absl::string_view content, const TensorShape& shape,
                                 Tensor* out) {
  const int64_t n = shape.num_elements();
  if (static_cast<uint64_t>(n) > content.size()) {  // Every element takes >= 1 byte.
    return absl::InvalidArgumentError(absl::StrCat(
        "TensorProto: string tensor_content of ", content.size(), " bytes cannot hold ",
        shape.DebugString(), " (", n, " elements)"));
  }
  std::vector<uint32_t> lengths(n);
  uint64_t total = 0;
  absl::string_view rest = content;
  for (int64_t i = 0; i < n; ++i) {
    if (!GetVarint32(&rest, &lengths[i])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "TensorProto: string tensor_content: bad length of element ", i));
    }
    total += lengths[i];
  }
  if (total != rest.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TensorProto: string tensor_content: lengths add up to ", total, " bytes but ",
        rest.size(), " follow"));
  }
  RETURN_IF_ERROR(CheckTensorBytes(DT_STRING, shape, total));
  *out = Tensor(DT_STRING, shape);
  auto strings = out->flat<std::string>();
  for (int64_t i = 0; i < n; ++i) {
    strings[i].assign(rest.data(), lengths[i]);
    rest.remove_prefix(lengths[i]);
  }
  return absl::OkStatus();
}

// The heap bytes of the strings a string_val field makes for `n` elements:
// a short field repeats its last value, and each repeat counts.
uint64_t StringFieldBytes(const google::protobuf::RepeatedPtrField<std::string>& field,
                          int64_t n) {
  uint64_t bytes = 0;
  for (const std::string& v : field) bytes += v.size();
  if (!field.empty() && n > field.size()) {
    bytes += static_cast<uint64_t>(n - field.size()) * field.rbegin()->size();
  }
  return bytes;
}

std::atomic<uint64_t>& ByteLimit() {
  static std::atomic<uint64_t> limit{[] {
    if (const char* env = std::getenv("DFLOW_MAX_TENSOR_BYTES")) {
      uint64_t bytes = 0;
      if (absl::SimpleAtoi(env, &bytes) && bytes > 0) return bytes;
    }
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    const uint64_t physical = pages > 0 && page > 0 ? uint64_t(pages) * page : uint64_t{16} << 30;
    return std::min<uint64_t>(uint64_t{8} << 30, physical / 2);
  }()};
  return limit;
}

}  // namespace

TensorBuffer::TensorBuffer(DataType dtype, int64_t num_elements, bool zero_fill)
    : dtype_(BaseType(dtype)), num_elements_(num_elements) {
  bytes_ = static_cast<size_t>(num_elements) * ElementBytes(dtype_);
  data_ = LargeBufferCache::Get()->Allocate(AllocationBytes(bytes_));
  if (dtype_ == DT_STRING) {
    auto* p = static_cast<std::string*>(data_);
    for (int64_t i = 0; i < num_elements_; ++i) new (p + i) std::string();
  } else if (dtype_ == DT_RESOURCE) {
    auto* p = static_cast<ResourceHandle*>(data_);
    for (int64_t i = 0; i < num_elements_; ++i) new (p + i) ResourceHandle();
  } else if (dtype_ == tensorflow::DT_VARIANT) {
    auto* p = static_cast<Variant*>(data_);
    for (int64_t i = 0; i < num_elements_; ++i) new (p + i) Variant();
  } else if (zero_fill) {
    std::memset(data_, 0, bytes_);
  }
}

TensorBuffer::TensorBuffer(Allocator* allocator, size_t bytes, bool* ok)
    : allocator_(allocator), dtype_(DT_INVALID), num_elements_(0), bytes_(bytes) {
  data_ = allocator->Allocate(AllocationBytes(bytes_));
  *ok = data_ != nullptr;
}

TensorBuffer::TensorBuffer(void* data, size_t bytes, std::shared_ptr<const void> owner)
    : owner_(std::move(owner)), dtype_(DT_INVALID), num_elements_(0), bytes_(bytes), data_(data) {}

TensorBuffer::~TensorBuffer() {
  if (owner_ != nullptr) return;  // The owner's reference goes with this buffer.
  if (allocator_ != nullptr) {
    if (data_ != nullptr) allocator_->Deallocate(data_, AllocationBytes(bytes_));
    return;
  }
  if (dtype_ == DT_STRING) {
    auto* p = static_cast<std::string*>(data_);
    for (int64_t i = 0; i < num_elements_; ++i) p[i].~basic_string();
  } else if (dtype_ == DT_RESOURCE) {
    auto* p = static_cast<ResourceHandle*>(data_);
    for (int64_t i = 0; i < num_elements_; ++i) p[i].~ResourceHandle();
  } else if (dtype_ == tensorflow::DT_VARIANT) {
    auto* p = static_cast<Variant*>(data_);
    for (int64_t i = 0; i < num_elements_; ++i) p[i].~Variant();
  }
  LargeBufferCache::Get()->Free(data_, AllocationBytes(bytes_));
}

Tensor::Tensor(DataType dtype, const TensorShape& shape)
    : dtype_(BaseType(dtype)),
      shape_(shape),
      buf_(std::make_shared<TensorBuffer>(dtype, shape.num_elements())) {}

Tensor Tensor::ForOverwrite(DataType dtype, const TensorShape& shape) {
  Tensor t;
  t.dtype_ = BaseType(dtype);
  t.shape_ = shape;
  t.buf_ = std::make_shared<TensorBuffer>(dtype, shape.num_elements(), /*zero_fill=*/false);
  return t;
}

absl::StatusOr<Tensor> Tensor::Allocate(Allocator* allocator, DataType dtype,
                                         const TensorShape& shape) {
  Tensor t;
  t.dtype_ = BaseType(dtype);
  t.shape_ = shape;
  bool ok = false;
  t.buf_ = std::make_shared<TensorBuffer>(allocator, t.TotalBytes(), &ok);
  if (!ok) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "out of memory on ", allocator->Name(), " allocating ", DataTypeString(dtype),
        shape.DebugString(), " (", t.TotalBytes(), " bytes)"));
  }
  return t;
}

Tensor Tensor::Borrow(DataType dtype, const TensorShape& shape, void* data,
                      std::shared_ptr<const void> owner) {
  Tensor t;
  t.dtype_ = BaseType(dtype);
  t.shape_ = shape;
  t.buf_ = std::make_shared<TensorBuffer>(data, t.TotalBytes(), std::move(owner));
  return t;
}

size_t Tensor::TotalBytes() const {
  return static_cast<size_t>(NumElements()) * ElementBytes(dtype_);
}

uint64_t TensorByteLimit() { return ByteLimit().load(std::memory_order_relaxed); }

void SetTensorByteLimit(uint64_t bytes) { ByteLimit().store(bytes, std::memory_order_relaxed); }

absl::Status CheckTensorBytes(DataType dtype, const TensorShape& shape, uint64_t extra_bytes) {
  const uint64_t limit = TensorByteLimit();
  const uint64_t n = static_cast<uint64_t>(shape.num_elements());
  const uint64_t element_bytes = std::max<uint64_t>(ElementBytes(dtype), 1);
  if (n <= limit / element_bytes && extra_bytes <= limit - n * element_bytes) {
    return absl::OkStatus();
  }
  return absl::ResourceExhaustedError(absl::StrFormat(
      "%s%s would take %u x %u bytes%s, over the %s limit for one tensor "
      "(SetTensorByteLimit / DFLOW_MAX_TENSOR_BYTES)",
      DataTypeString(dtype), shape.DebugString(), n, element_bytes,
      extra_bytes ? absl::StrCat(" + ", extra_bytes, " bytes of strings") : "",
      limit % (1 << 30) == 0 ? absl::StrCat(limit >> 30, " GiB") : absl::StrCat(limit, " bytes")));
}

absl::StatusOr<Tensor> Tensor::FromProto(const tensorflow::TensorProto& proto) {
  DataType dtype = proto.dtype();
  if (!IsSupportedDataType(dtype) || IsRefType(dtype)) {
    return absl::UnimplementedError(
        absl::StrCat("TensorProto: dtype ", DataTypeString(dtype), " is not supported"));
  }
  ASSIGN_OR_RETURN(TensorShape shape, TensorShape::FromProto(proto.tensor_shape()));
  if (!proto.tensor_content().empty()) {
    if (dtype == DT_STRING) {
      Tensor t;
      RETURN_IF_ERROR(DecodeStringContent(proto.tensor_content(), shape, &t));
      return t;
    }
    if (dtype == DT_RESOURCE) {
      return absl::InvalidArgumentError(absl::StrCat(
          "TensorProto: tensor_content is not allowed for dtype ", DataTypeString(dtype)));
    }
    // Checked before allocating, so a lying shape cannot request huge memory.
    const uint64_t needed =
        static_cast<uint64_t>(shape.num_elements()) * DataTypeSize(dtype);
    if (shape.num_elements() > std::numeric_limits<int64_t>::max() / DataTypeSize(dtype) ||
        proto.tensor_content().size() != needed) {
      return absl::InvalidArgumentError(absl::StrCat(
          "TensorProto: tensor_content has ", proto.tensor_content().size(),
          " bytes but ", DataTypeString(dtype), shape.DebugString(), " needs ", needed));
    }
    Tensor t(dtype, shape);
    std::memcpy(t.raw_data(), proto.tensor_content().data(), t.TotalBytes());
    if (dtype == DT_BOOL) {  // Any nonzero byte is true; other bool bytes are UB.
      auto* b = static_cast<uint8_t*>(t.raw_data());
      for (int64_t i = 0; i < t.NumElements(); ++i) b[i] = b[i] != 0;
    }
    return t;
  }
  // Typed fields may encode a splat (one value for the whole shape), so the
  // shape alone sizes the allocation: refuse absurd ones instead of dying of
  // memory exhaustion. Strings count their bytes, each repeat included.
  RETURN_IF_ERROR(CheckTensorBytes(
      dtype, shape,
      dtype == DT_STRING ? StringFieldBytes(proto.string_val(), shape.num_elements()) : 0));
  Tensor t(dtype, shape);
  const int64_t n = t.NumElements();
  if (n == 0) return t;
  switch (dtype) {
    case DT_FLOAT:
      RETURN_IF_ERROR(FillFromField(proto.float_val(), t.flat<float>(), "float_val"));
      break;
    case DT_DOUBLE:
      RETURN_IF_ERROR(FillFromField(proto.double_val(), t.flat<double>(), "double_val"));
      break;
    case DT_INT32:
      RETURN_IF_ERROR(FillFromField(proto.int_val(), t.flat<int32_t>(), "int_val"));
      break;
    case DT_UINT8:
      RETURN_IF_ERROR(FillFromField(proto.int_val(), t.flat<uint8_t>(), "int_val"));
      break;
    case DT_INT64:
      RETURN_IF_ERROR(FillFromField(proto.int64_val(), t.flat<int64_t>(), "int64_val"));
      break;
    case DT_BOOL:
      RETURN_IF_ERROR(FillFromField(proto.bool_val(), t.flat<bool>(), "bool_val"));
      break;
    case DT_STRING:
      RETURN_IF_ERROR(FillFromField(proto.string_val(), t.flat<std::string>(), "string_val"));
      break;
    case DT_RESOURCE: {
      auto out = t.flat<ResourceHandle>();
      if (proto.resource_handle_val_size() > n) {
        return absl::InvalidArgumentError("TensorProto: too many resource_handle_val");
      }
      for (int i = 0; i < proto.resource_handle_val_size(); ++i) {
        out[i].FromProto(proto.resource_handle_val(i));
      }
      break;
    }
    default:
      break;
  }
  return t;
}

void Tensor::AsProtoTensorContent(tensorflow::TensorProto* proto) const {
  proto->Clear();
  proto->set_dtype(dtype_);
  shape_.AsProto(proto->mutable_tensor_shape());
  // Variants write no values (never their bytes): see CheckEncodable.
  if (dtype_ == DT_STRING || dtype_ == DT_RESOURCE || dtype_ == tensorflow::DT_VARIANT) {
    AsProtoField(proto);
    return;
  }
  proto->set_tensor_content(static_cast<const char*>(raw_data()), TotalBytes());
}

void Tensor::AsProtoField(tensorflow::TensorProto* proto) const {
  proto->Clear();
  proto->set_dtype(dtype_);
  shape_.AsProto(proto->mutable_tensor_shape());
  switch (dtype_) {
    case DT_FLOAT:
      for (float v : flat<float>()) proto->add_float_val(v);
      break;
    case DT_DOUBLE:
      for (double v : flat<double>()) proto->add_double_val(v);
      break;
    case DT_INT32:
      for (int32_t v : flat<int32_t>()) proto->add_int_val(v);
      break;
    case DT_UINT8:
      for (uint8_t v : flat<uint8_t>()) proto->add_int_val(v);
      break;
    case DT_INT64:
      for (int64_t v : flat<int64_t>()) proto->add_int64_val(v);
      break;
    case DT_BOOL:
      for (bool v : flat<bool>()) proto->add_bool_val(v);
      break;
    case DT_STRING:
      for (const std::string& v : flat<std::string>()) proto->add_string_val(v);
      break;
    case DT_RESOURCE:
      for (const ResourceHandle& v : flat<ResourceHandle>()) {
        v.AsProto(proto->add_resource_handle_val());
      }
      break;
    default:
      break;
  }
}

absl::StatusOr<Tensor> Tensor::Reshaped(const TensorShape& shape) const {
  if (shape.num_elements() != NumElements()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot reshape a tensor with ", NumElements(), " elements to shape ",
        shape.DebugString(), " (", shape.num_elements(), " elements)"));
  }
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

Tensor Tensor::DeepCopy() const {
  if (buf_ == nullptr) return *this;  // Nothing to copy (e.g. a default Tensor).
  Tensor t = ForOverwrite(dtype_, shape_);
  if (dtype_ == DT_STRING) {
    std::copy_n(flat<std::string>().begin(), NumElements(), t.flat<std::string>().begin());
  } else if (dtype_ == DT_RESOURCE) {
    std::copy_n(flat<ResourceHandle>().begin(), NumElements(),
                t.flat<ResourceHandle>().begin());
  } else if (dtype_ == tensorflow::DT_VARIANT) {  // Each value cloned.
    std::copy_n(VariantData(*this), NumElements(), VariantData(t));
  } else if (TotalBytes() > 0) {
    std::memcpy(t.raw_data(), raw_data(), TotalBytes());
  }
  return t;
}

std::string Tensor::ValueString(int64_t i) const {
  switch (dtype_) {
    case DT_FLOAT: return absl::StrFormat("%.9g", flat<float>()[i]);
    case DT_DOUBLE: return absl::StrFormat("%.17g", flat<double>()[i]);
    case DT_INT32: return absl::StrCat(flat<int32_t>()[i]);
    case DT_UINT8: return absl::StrCat(flat<uint8_t>()[i]);
    case DT_INT64: return absl::StrCat(flat<int64_t>()[i]);
    case DT_BOOL: return flat<bool>()[i] ? "true" : "false";
    case DT_STRING: return flat<std::string>()[i];
    case DT_RESOURCE: return flat<ResourceHandle>()[i].DebugString();
    case tensorflow::DT_VARIANT: return VariantData(*this)[i].DebugString();
    default: return "?";
  }
}

std::string Tensor::DebugString(int max_entries) const {
  std::string out = absl::StrCat("Tensor<", DataTypeString(dtype_), ", ",
                                 shape_.DebugString(), ">: ");
  // Device memory: the host cannot read the values.
  if (memory_type() == MemoryType::kDevice) return out + "(in device memory)";
  out += "[";
  const int64_t n = IsInitialized() ? NumElements() : 0;
  for (int64_t i = 0; i < n && i < max_entries; ++i) {
    if (i > 0) out += " ";
    out += ValueString(i);
  }
  if (n > max_entries) out += " ...";
  return out + "]";
}

}  // namespace dflow
