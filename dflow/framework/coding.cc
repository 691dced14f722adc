#include "dflow/framework/coding.h"

namespace dflow {

bool GetVarint64(absl::string_view* in, uint64_t* v) {
  uint64_t result = 0;
  for (size_t i = 0; i < in->size() && i < 10; ++i) {
    const uint8_t b = static_cast<uint8_t>((*in)[i]);
    if (i == 9 && b > 1) return false;  // Past 64 bits.
    result |= uint64_t{b & 0x7fu} << (7 * i);
    if ((b & 0x80) == 0) {
      *v = result;
      in->remove_prefix(i + 1);
      return true;
    }
  }
  return false;
}

bool GetVarint32(absl::string_view* in, uint32_t* v) {
  absl::string_view copy = *in;
  uint64_t wide;
  if (!GetVarint64(&copy, &wide) || wide > UINT32_MAX || in->size() - copy.size() > 5) {
    return false;
  }
  *v = static_cast<uint32_t>(wide);
  *in = copy;
  return true;
}

}  // namespace dflow
