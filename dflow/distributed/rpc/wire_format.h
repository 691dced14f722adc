// The pieces of protobuf's wire format that the RPC layer writes and reads by
// hand around tensor bytes (tensor_coding.cc: RecvTensorResponse without a
// copy; data_plane_frames.cc: the data plane's port advertisement): wire
// types, tags and varints. Encoding is framework/coding.h's PutVarint64.
//
//   PutVarint(Tag(kTensorDtype, kVarint), &out);
//   if (!ReadVarint([&](uint8_t* b) { return reader.Byte(b); }, &v)) return Truncated(...);
#ifndef DFLOW_DISTRIBUTED_RPC_WIRE_FORMAT_H_
#define DFLOW_DISTRIBUTED_RPC_WIRE_FORMAT_H_

#include <cstdint>
#include <string>

#include "dflow/framework/coding.h"

namespace dflow::wire {

// Wire types (protobuf's encoding documentation).
inline constexpr uint32_t kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;

// The key of field `field` with wire type `wire_type`.
constexpr uint32_t Tag(uint32_t field, uint32_t wire_type) { return field << 3 | wire_type; }

// Appends `v` as a varint.
inline void PutVarint(uint64_t v, std::string* out) { PutVarint64(out, v); }

// Decodes a varint from the bytes `next_byte(uint8_t*)` hands out one at a
// time (false when they run out). False when the bytes end early or the
// varint is longer than ten bytes.
template <typename NextByte>
bool ReadVarint(NextByte&& next_byte, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    uint8_t b = 0;
    if (!next_byte(&b)) return false;
    *v |= uint64_t{b & 0x7fu} << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

}  // namespace dflow::wire

#endif  // DFLOW_DISTRIBUTED_RPC_WIRE_FORMAT_H_
