#include "dflow/framework/strided_copy.h"

#include <cstring>

namespace dflow {
namespace {

template <int kBytes>
void CopyDim(const char* in, char* out, const StridedCopySpec& s, int d) {
  if (d == s.rank) {
    std::memcpy(out, in, kBytes);
    return;
  }
  for (int64_t i = 0; i < s.dims[d]; ++i) {
    CopyDim<kBytes>(in + i * s.in_strides[d] * kBytes, out + i * s.out_strides[d] * kBytes, s,
                    d + 1);
  }
}

}  // namespace

void CopyStridedOnHost(const void* in, void* out, const StridedCopySpec& spec) {
  const char* src = static_cast<const char*>(in);
  char* dst = static_cast<char*>(out);
  switch (spec.element_size) {
    case 1:
      return CopyDim<1>(src, dst, spec, 0);
    case 2:
      return CopyDim<2>(src, dst, spec, 0);
    case 4:
      return CopyDim<4>(src, dst, spec, 0);
    case 8:
      return CopyDim<8>(src, dst, spec, 0);
    default:
      return;
  }
}

void GatherRowsOnHost(const void* in, void* out, const int64_t* from, int64_t rows,
                      int64_t row_elems, int element_size) {
  const size_t row_bytes = static_cast<size_t>(row_elems) * element_size;
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(static_cast<char*>(out) + r * row_bytes,
                static_cast<const char*>(in) + from[r] * element_size, row_bytes);
  }
}

}  // namespace dflow
