// CRC-32C (Castagnoli), the checksum of TensorFlow's checkpoint data, its
// index table blocks and TFRecord: computed by carry-less multiplication
// (AVX-512 VPCLMULQDQ, else PCLMULQDQ) or the SSE4.2 crc32 instruction where
// the CPU has them, else a table, with equal results.
//
//   uint32_t crc = crc32c::Value(data, n);
//   entry.set_crc32c(crc32c::Mask(crc));
#ifndef DFLOW_IO_CRC32C_H_
#define DFLOW_IO_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace dflow::crc32c {

// The CRC of `data[0, n)` appended to a stream whose CRC so far is `crc`.
uint32_t Extend(uint32_t crc, const char* data, size_t n);

// The table path alone (what Extend uses without SSE4.2); tests compare both.
uint32_t ExtendPortable(uint32_t crc, const char* data, size_t n);

inline uint32_t Value(const char* data, size_t n) { return Extend(0, data, n); }

// The CRC of A followed by B from the CRCs of A and of B and B's length:
// Combine(Value(a), Value(b), len_b) == Extend(Value(a), b, len_b). Lets two
// threads checksum the halves of one buffer. O(log len_b) 32x32 bit-matrix
// products (zlib's crc32_combine method, over the Castagnoli polynomial).
uint32_t Combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

// Stored CRCs are masked (rotated and offset) so that a CRC of data that
// itself holds CRCs stays well mixed; the constant is TensorFlow's and LevelDB's.
inline constexpr uint32_t kMaskDelta = 0xa282ead8u;
inline uint32_t Mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + kMaskDelta; }
inline uint32_t Unmask(uint32_t masked) {
  const uint32_t rot = masked - kMaskDelta;
  return (rot >> 17) | (rot << 15);
}

}  // namespace dflow::crc32c

#endif  // DFLOW_IO_CRC32C_H_
