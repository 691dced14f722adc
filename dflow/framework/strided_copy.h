// StridedCopySpec: a copy of elements between two strided layouts, the one
// primitive of kernels that move rather than compute (Transpose, Slice,
// StridedSlice, ConcatV2, Pack, Split, Unpack, TensorArrays) on a device with
// its own memory (Device::CopyStrided). For every index (i_0, ..., i_{r-1})
// below `dims`, the element at in + sum(i_d * in_strides[d]) goes to
// out + sum(i_d * out_strides[d]); strides count elements of `element_size`
// bytes and may be negative (a reversed StridedSlice). Plain data: the CUDA
// kernels take it as it is.
#ifndef DFLOW_FRAMEWORK_STRIDED_COPY_H_
#define DFLOW_FRAMEWORK_STRIDED_COPY_H_

#include <cstdint>

namespace dflow {

struct StridedCopySpec {
  static constexpr int kMaxDims = 8;
  int rank = 0;          // 0: one element.
  int element_size = 0;  // Bytes: 1, 2, 4 or 8.
  int64_t dims[kMaxDims] = {};
  int64_t in_strides[kMaxDims] = {};
  int64_t out_strides[kMaxDims] = {};

  int64_t NumElements() const {
    int64_t n = 1;
    for (int d = 0; d < rank; ++d) n *= dims[d];
    return n;
  }
};

// The copy on the host (a device whose memory the host can read; tests).
void CopyStridedOnHost(const void* in, void* out, const StridedCopySpec& spec);

// Device::GatherRows on the host: row r of `out` := `row_elems` elements of
// `element_size` bytes from element from[r] of `in`.
void GatherRowsOnHost(const void* in, void* out, const int64_t* from, int64_t rows,
                      int64_t row_elems, int element_size);

}  // namespace dflow

#endif  // DFLOW_FRAMEWORK_STRIDED_COPY_H_
