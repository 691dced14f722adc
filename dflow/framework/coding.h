// Little-endian fixed-width integers and base-128 varints, as protobuf,
// LevelDB tables and TensorFlow's checkpoints encode them.
#ifndef DFLOW_FRAMEWORK_CODING_H_
#define DFLOW_FRAMEWORK_CODING_H_

#include <cstdint>
#include <cstring>
#include <string>

#include "absl/strings/string_view.h"

namespace dflow {

inline void EncodeFixed32(char* dst, uint32_t v) { std::memcpy(dst, &v, 4); }  // LE hosts.
inline uint32_t DecodeFixed32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline void PutFixed32(std::string* dst, uint32_t v) {
  char buf[4];
  EncodeFixed32(buf, v);
  dst->append(buf, 4);
}

inline void PutVarint64(std::string* dst, uint64_t v) {
  while (v >= 0x80) {
    dst->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  dst->push_back(static_cast<char>(v));
}
inline void PutVarint32(std::string* dst, uint32_t v) { PutVarint64(dst, v); }

// Parses a varint from the front of `*in` and drops its bytes; false (and
// `*in` unchanged) when it is truncated or longer than the type allows.
bool GetVarint64(absl::string_view* in, uint64_t* v);
bool GetVarint32(absl::string_view* in, uint32_t* v);

}  // namespace dflow

#endif  // DFLOW_FRAMEWORK_CODING_H_
