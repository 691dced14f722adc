// Tensor: a dtype, a shape and a ref-counted, 64-byte-aligned buffer.
//
// Copying a Tensor shares its buffer (no data copy); DeepCopy() duplicates it.
// Tensors of dtype string and resource hold std::string / ResourceHandle
// objects, constructed and destroyed with the buffer.
//
//   Tensor t(DT_FLOAT, TensorShape({2, 3}));
//   absl::Span<float> v = t.flat<float>();
//   v[0] = 1.0f;
#ifndef DFLOW_FRAMEWORK_TENSOR_H_
#define DFLOW_FRAMEWORK_TENSOR_H_

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dflow/framework/allocator.h"
#include "dflow/framework/resource_handle.h"
#include "dflow/framework/tensor_shape.h"
#include "dflow/framework/types.h"
#include "dflow/proto/tensor.pb.h"

namespace dflow {

inline constexpr size_t kTensorAlignment = 64;

// Owns one aligned allocation of typed elements. Thread-compatible.
class TensorBuffer {
 public:
  // Allocates and value-initialises `num_elements` of `dtype`; with
  // `zero_fill` false, elements of fixed-size types are left unset (string
  // and resource elements are always constructed).
  TensorBuffer(DataType dtype, int64_t num_elements, bool zero_fill = true);
  // Takes `bytes` from `allocator`, uninitialised; *ok is false when it has
  // none left. REQUIRES: a fixed-size dtype.
  TensorBuffer(Allocator* allocator, size_t bytes, bool* ok);
  // Borrows `bytes` at `data`, which `owner` keeps alive; nothing is freed
  // here but the reference to `owner`. REQUIRES: a fixed-size dtype.
  TensorBuffer(void* data, size_t bytes, std::shared_ptr<const void> owner);
  ~TensorBuffer();
  TensorBuffer(const TensorBuffer&) = delete;
  TensorBuffer& operator=(const TensorBuffer&) = delete;

  void* data() const { return data_; }
  size_t size() const { return bytes_; }
  // Null for ordinary host memory.
  Allocator* allocator() const { return allocator_; }
  bool borrowed() const { return owner_ != nullptr; }

 private:
  Allocator* allocator_ = nullptr;
  std::shared_ptr<const void> owner_;  // Set: borrowed memory.
  DataType dtype_;
  int64_t num_elements_;
  size_t bytes_;
  void* data_;
};

class Tensor {
 public:
  // An empty float scalar with no buffer; IsInitialized() is false.
  Tensor() = default;
  // Allocates a zero-filled tensor. REQUIRES: IsSupportedDataType(dtype).
  Tensor(DataType dtype, const TensorShape& shape);
  explicit Tensor(DataType dtype) : Tensor(dtype, TensorShape()) {}
  // A tensor whose elements the caller overwrites before anyone reads them:
  // fixed-size elements are left unset (no zero-fill pass).
  // REQUIRES: IsSupportedDataType(dtype).
  static Tensor ForOverwrite(DataType dtype, const TensorShape& shape);
  // An uninitialised tensor whose bytes come from `allocator` (a device's
  // memory, pinned host memory); RESOURCE_EXHAUSTED naming the allocator
  // when it has none left. REQUIRES: a fixed-size dtype.
  static absl::StatusOr<Tensor> Allocate(Allocator* allocator, DataType dtype,
                                         const TensorShape& shape);
  // A tensor over host memory this process did not allocate for it (a peer's
  // shared region), no copy: `owner` keeps `data` mapped until the last
  // tensor sharing the buffer goes. REQUIRES: a fixed-size dtype, `data`
  // aligned to kTensorAlignment and holding shape.num_elements() elements.
  static Tensor Borrow(DataType dtype, const TensorShape& shape, void* data,
                       std::shared_ptr<const void> owner);
  // Whether the buffer is borrowed (Borrow): whoever keeps the tensor for
  // long (a variable) keeps a copy instead, so that the owner can be reused.
  bool IsBorrowed() const { return buf_ != nullptr && buf_->borrowed(); }

  // Scalars and vectors from values: Tensor::Scalar(3.0f), Tensor::Vec<int32_t>({1,2}).
  template <typename T>
  static Tensor Scalar(T value) {
    Tensor t(DataTypeToEnum<T>::value, TensorShape());
    t.flat<T>()[0] = std::move(value);
    return t;
  }
  template <typename T>
  static Tensor Vec(const std::vector<T>& values) {
    return FromVector(values, TensorShape({static_cast<int64_t>(values.size())}));
  }
  // REQUIRES: values.size() == shape.num_elements().
  template <typename T>
  static Tensor FromVector(const std::vector<T>& values, const TensorShape& shape) {
    Tensor t(DataTypeToEnum<T>::value, shape);
    std::copy(values.begin(), values.end(), t.flat<T>().begin());
    return t;
  }

  // Parses a TensorProto (tensor_content, for strings TensorFlow's list of
  // varint32 lengths and then the bytes, or the typed *_val fields). Fails
  // with a message naming the problem on an unsupported dtype, a bad shape,
  // a content size that does not match the shape, or a tensor over
  // TensorByteLimit() (RESOURCE_EXHAUSTED, before allocating).
  static absl::StatusOr<Tensor> FromProto(const tensorflow::TensorProto& proto);
  // Writes tensor_content for fixed-size types, string_val / resource_handle_val otherwise.
  void AsProtoTensorContent(tensorflow::TensorProto* proto) const;
  // Writes the typed *_val fields (what TensorFlow's Python writes for small constants).
  void AsProtoField(tensorflow::TensorProto* proto) const;

  DataType dtype() const { return dtype_; }
  const TensorShape& shape() const { return shape_; }
  int dims() const { return shape_.dims(); }
  int64_t dim_size(int d) const { return shape_.dim_size(d); }
  int64_t NumElements() const { return shape_.num_elements(); }
  size_t TotalBytes() const;
  bool IsInitialized() const { return buf_ != nullptr || NumElements() == 0; }
  // kDevice when the bytes are in a device's memory: then only that device's
  // kernels and copies may touch raw_data(), never CPU code (flat(),
  // AsProto*, DeepCopy); DebugString then shows no values.
  MemoryType memory_type() const {
    return buf_ != nullptr && buf_->allocator() != nullptr ? buf_->allocator()->memory_type()
                                                           : MemoryType::kHost;
  }
  bool SharesBufferWith(const Tensor& other) const {
    return buf_ != nullptr && buf_ == other.buf_;
  }
  // References to the buffer. A caller that sees 1 and then writes the buffer
  // in place is ordered after every other holder's last read of it: the
  // holder's release is its reference drop, paired here with an acquire fence
  // (use_count() itself is a relaxed load), as TensorFlow's RefCountIsOne.
  long BufferUseCount() const {
    const long n = buf_.use_count();
    std::atomic_thread_fence(std::memory_order_acquire);
    return n;
  }

  // Element views. REQUIRES: DataTypeToEnum<T>::value == dtype().
  template <typename T>
  absl::Span<T> flat() {
    return absl::Span<T>(static_cast<T*>(raw_data()), NumElements());
  }
  template <typename T>
  absl::Span<const T> flat() const {
    return absl::Span<const T>(static_cast<const T*>(raw_data()), NumElements());
  }
  template <typename T>
  const T& scalar() const { return flat<T>()[0]; }
  template <typename T>
  T& scalar() { return flat<T>()[0]; }
  void* raw_data() const { return buf_ ? buf_->data() : nullptr; }

  // A tensor sharing this buffer with another shape of the same element
  // count; fails when the counts differ.
  absl::StatusOr<Tensor> Reshaped(const TensorShape& shape) const;
  // A fresh buffer holding a copy of the elements.
  Tensor DeepCopy() const;

  // "Tensor<float, [2,3]>: [1 2 3 ...]" with at most `max_entries` values;
  // "Tensor<float, [2,3]>: (in device memory)" for a tensor in device memory.
  std::string DebugString(int max_entries = 6) const;
  // One value as text, e.g. for JSON output.
  std::string ValueString(int64_t i) const;

 private:
  DataType dtype_ = DT_FLOAT;
  TensorShape shape_;
  std::shared_ptr<TensorBuffer> buf_;
};

// The one byte limit every tensor built from outside the process obeys (a
// request's constants and feeds, tensors received from a peer, tensors read
// from a checkpoint): checked before allocating, strings counted by their
// bytes. Default: half the physical memory, at most 8 GiB; the environment
// variable DFLOW_MAX_TENSOR_BYTES overrides it. Thread-safe.
uint64_t TensorByteLimit();
void SetTensorByteLimit(uint64_t bytes);

// OK when a tensor of `dtype` and `shape` whose elements own `extra_bytes`
// more on the heap (the bytes of its strings) fits the limit; else
// RESOURCE_EXHAUSTED naming the dtype, shape and sizes.
absl::Status CheckTensorBytes(DataType dtype, const TensorShape& shape,
                              uint64_t extra_bytes = 0);

}  // namespace dflow

#endif  // DFLOW_FRAMEWORK_TENSOR_H_
