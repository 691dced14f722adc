// Helpers shared by the array-manipulation op families (array_ops.cc,
// shape_ops.cc, slice_ops.cc): reading index tensors, moving elements of any
// dtype by their byte size, and canonicalising axes.
#ifndef DFLOW_OPS_ARRAY_UTIL_H_
#define DFLOW_OPS_ARRAY_UTIL_H_

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "dflow/framework/kernel.h"
#include "dflow/framework/shape_inference.h"
#include "dflow/framework/tensor.h"
#include "dflow/framework/thread_pool.h"
#include "dflow/framework/types.h"

namespace dflow {

class OpKernelContext;

// The types a pure data-movement kernel accepts.
inline const DataTypeVector& MovableTypes() {
  static const DataTypeVector kTypes = {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64,
                                        DT_UINT8, DT_BOOL,   DT_STRING};
  return kTypes;
}

// Index-typed inputs ("Tidx", "Tshape", "Index", ...).
inline const DataTypeVector& IndexTypes() {
  static const DataTypeVector kTypes = {DT_INT32, DT_INT64};
  return kTypes;
}

// The dtypes shape and layout kernels take in a GPU's memory. int32 tensors
// stay in host memory (they are shapes and indices, computed by the CPU), as
// in TensorFlow: int32 registrations name every tensor arg HostMemory.
inline const DataTypeVector& GpuTensorTypes() {
  static const DataTypeVector kTypes = {DT_FLOAT, DT_DOUBLE, DT_INT64, DT_BOOL};
  return kTypes;
}

// Registers Kernel, a kernel that forwards its inputs (Identity, Switch,
// Merge, Enter, ...), for `op` on a GPU as TensorFlow registers such kernels:
// for T in GpuTensorTypes() and the host-only types (string, resource,
// variant) with `host_args` in host memory, and for T in `host_value_types`
// (int32: counters, shapes and indices, which host-memory args read) with
// `value_args` in host memory.
template <typename Kernel>
struct GpuForwardKernel {
  GpuForwardKernel(const char* op, std::initializer_list<const char*> host_args,
                   std::initializer_list<const char*> value_args,
                   const DataTypeVector& host_value_types = {DT_INT32}) {
    DataTypeVector types;
    for (DataType t : GpuTensorTypes()) {
      if (std::find(host_value_types.begin(), host_value_types.end(), t) == host_value_types.end()) {
        types.push_back(t);
      }
    }
    for (DataType t : {DT_STRING, DT_RESOURCE, tensorflow::DT_VARIANT}) types.push_back(t);
    KernelDefBuilder b(op);
    b.Device(kDeviceGPU).TypeConstraint("T", types);
    for (const char* arg : host_args) b.HostMemory(arg);
    Register(b);
    KernelDefBuilder on_host(op);
    on_host.Device(kDeviceGPU).TypeConstraint("T", host_value_types);
    for (const char* arg : value_args) on_host.HostMemory(arg);
    Register(on_host);
  }
  static void Register(const KernelDefBuilder& b) {
    KernelRegistry::Global()->Register(
        b.Build(), [](OpKernelConstruction* c) -> std::unique_ptr<OpKernel> {
          return std::make_unique<Kernel>(c);
        });
  }
};

// The values of an int32/int64 tensor of any shape, in row-major order.
// `what` names the input in the error for any other dtype.
absl::StatusOr<std::vector<int64_t>> IndexValues(const Tensor& t, absl::string_view what);

// The one value of an int32/int64 tensor holding exactly one element.
absl::StatusOr<int64_t> IndexScalar(const Tensor& t, absl::string_view what);

// Calls fn(TypeTag<T>{}) with T an unsigned integer of `dtype`'s element size,
// or std::string for strings: for kernels that only move elements, so one
// instantiation serves float, int32, ... alike.
template <typename Fn>
absl::Status SwitchByElementSize(DataType dtype, absl::string_view what, Fn&& fn) {
  if (dtype == DT_STRING) return fn(TypeTag<std::string>{});
  if (IsSupportedDataType(dtype) && dtype != DT_RESOURCE) {
    switch (DataTypeSize(dtype)) {
      case 1:
        return fn(TypeTag<uint8_t>{});
      case 2:
        return fn(TypeTag<uint16_t>{});
      case 4:
        return fn(TypeTag<uint32_t>{});
      case 8:
        return fn(TypeTag<uint64_t>{});
      default:
        break;
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat(what, ": unsupported dtype ", DataTypeString(dtype)));
}

// Typed views of a tensor's buffer for SwitchByElementSize's T.
template <typename T>
const T* ElementsOf(const Tensor& t) {
  return static_cast<const T*>(t.raw_data());
}
template <typename T>
T* MutableElementsOf(Tensor* t) {
  return static_cast<T*>(t->raw_data());
}

// For shape functions: the values of constant int32/int64 input `i`, nullopt
// when the input is not constant.
absl::StatusOr<std::optional<std::vector<int64_t>>> ConstIndexInput(InferenceContext* c, int i,
                                                                    absl::string_view what);

// The length of a 1-D partial shape, or kUnknownDim.
inline int64_t VectorLength(const PartialShape& s) {
  return s.rank_known() && s.rank() == 1 ? s.dim(0) : kUnknownDim;
}

// Product of dims [begin, end) of `dims`.
int64_t DimProduct(absl::Span<const int64_t> dims, int begin, int end);

// Maps `axis` in [-rank, rank) to [0, rank); false when out of range.
inline bool CanonicalAxis(int64_t axis, int rank, int64_t* out) {
  if (axis < -rank || axis >= rank) return false;
  *out = axis < 0 ? axis + rank : axis;
  return true;
}

// "[1,2,3]" for error messages.
inline std::string DimsString(absl::Span<const int64_t> dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ","), "]");
}

// ResourceExhausted when an output of `num_elements` elements of `dtype`
// would exceed the per-tensor limit (a typo in a shape must not abort the
// process on allocation).
absl::Status CheckOutputSize(int64_t num_elements, DataType dtype, absl::string_view op);

// `dims` as the shape of an output of `dtype`: InvalidArgument naming `op`
// when a dim is negative or the element count overflows, ResourceExhausted
// when the tensor would pass CheckOutputSize's limit or (but for strings,
// whose bytes are unknown here) the process's TensorByteLimit().
absl::StatusOr<TensorShape> OutputShape(absl::Span<const int64_t> dims, DataType dtype,
                                        absl::string_view op);

// Fill's kernel checks on every device (with the op prefix): `dims` (input
// 0) a vector of sizes >= 0, `value` (input 1) one element; the shape.
absl::StatusOr<TensorShape> FillShape(const OpKernelContext& ctx);
// Tile's kernel checks on every device: `multiples` (input 1) one value
// >= 0 per dimension of x (input 0), none overflowing it; the output's
// shape, and the multiples in `*multiples`.
absl::StatusOr<TensorShape> TileShape(const OpKernelContext& ctx, std::vector<int64_t>* multiples);
// Select (v1)'s kernel checks on every device: 'then' (input 1) and 'else'
// (input 2) of one shape, the condition (input 0) a scalar, of their shape,
// or, for 'then' of rank > 1, a vector of its first dimension's size. The
// number of elements of 'then' each element of the condition chooses
// between (0 for a scalar condition: it chooses for all).
absl::StatusOr<int64_t> SelectElementsPerCondition(const OpKernelContext& ctx);
// BroadcastTo's kernel checks on every device: `shape` (input 1) a vector
// of sizes >= 0, of rank at least x's (input 0), and x at that rank (leading
// 1s; `*in_dims`) has each dimension equal to the output's or 1; the
// output's shape.
absl::StatusOr<TensorShape> BroadcastToShape(const OpKernelContext& ctx,
                                             std::vector<int64_t>* in_dims);

// Whether a kernel with a `bad_indices_policy` attr ("", DEFAULT, ERROR or
// IGNORE) skips out-of-range indices; InvalidArgument for any other policy.
absl::StatusOr<bool> IgnoresBadIndices(absl::string_view op, absl::string_view policy);

// Copies rows of every input, side by side, into `out`: for each of `outer`
// rows, input i contributes row_sizes[i] consecutive elements. This is
// Concat along an axis (and Pack) once shapes are flattened to 2-D.
// Splits big copies over `pool` when not null.
// REQUIRES: out holds outer * sum(row_sizes) elements of the inputs' dtype.
absl::Status ConcatRows(const std::vector<const Tensor*>& inputs,
                        const std::vector<int64_t>& row_sizes, int64_t outer, Tensor* out,
                        ThreadPool* pool);

// out[i_0, ..., i_k] = in[begin_0 + i_0 * strides_0, ...] for every index of
// `out` (same rank as `in`; strides may be negative).
// REQUIRES: every index read is inside `in`.
absl::Status StridedCopy(const Tensor& in, absl::Span<const int64_t> begin,
                         absl::Span<const int64_t> strides, Tensor* out);

// --- moving elements on a device with its own memory (a GPU) ----------------
// Kernels that move rather than compute serve a GPU through
// Device::CopyStrided: each branches on its output's memory type and, for
// device memory, calls these instead of the host loops above.

// The element size of a copy from `in` to `out` on ctx's device; Internal
// unless both are its memory and of one dtype of 1, 2, 4 or 8 bytes.
absl::StatusOr<int> DeviceCopyElementSize(OpKernelContext* ctx, const Tensor& in,
                                          const Tensor& out);
// For every index (i_0, ...) below `dims`: out[out_offset + sum(i_d *
// out_strides[d])] = in[in_offset + sum(i_d * in_strides[d])], queued on
// ctx's device; `in` and `out` are in its memory. Unimplemented when the
// copy keeps more than StridedCopySpec::kMaxDims dims of size > 1.
absl::Status CopyOnDevice(OpKernelContext* ctx, const Tensor& in, int64_t in_offset, Tensor* out,
                          int64_t out_offset, absl::Span<const int64_t> dims,
                          absl::Span<const int64_t> in_strides,
                          absl::Span<const int64_t> out_strides);
// Row r of `out` := the row_elems elements of `in` from element from[r],
// queued on ctx's device; `in` and `out` are in its memory.
absl::Status GatherRowsOnDevice(OpKernelContext* ctx, const Tensor& in,
                                absl::Span<const int64_t> from, int64_t row_elems, Tensor* out);
// StridedCopyOn's reverse in device memory: out[begin + i * strides] = in[i]
// for every index i of `in` (of out's rank), queued on ctx's device; out's
// other elements are left as they are (Pad's and StridedSliceGrad's zeros).
absl::Status StridedScatterOnDevice(OpKernelContext* ctx, const Tensor& in,
                                    absl::Span<const int64_t> begin,
                                    absl::Span<const int64_t> strides, Tensor* out);
// ConcatRows into `out` (ctx's output, in either memory).
absl::Status ConcatRowsOn(OpKernelContext* ctx, const std::vector<const Tensor*>& inputs,
                          const std::vector<int64_t>& row_sizes, int64_t outer, Tensor* out);
// StridedCopy into `out` (ctx's output, in either memory).
absl::Status StridedCopyOn(OpKernelContext* ctx, const Tensor& in, absl::Span<const int64_t> begin,
                           absl::Span<const int64_t> strides, Tensor* out);

// The shape Reshape gives `input_dims` for the requested `sizes` (one may
// be -1); errors are TensorFlow's. Shared by the CPU and GPU Reshape.
absl::StatusOr<std::vector<int64_t>> ReshapeDims(absl::Span<const int64_t> input_dims,
                                                 std::vector<int64_t> sizes);

}  // namespace dflow

#endif  // DFLOW_OPS_ARRAY_UTIL_H_
