#include "dflow/io/crc32c.h"

#include <array>
#include <cstring>

namespace dflow::crc32c {
namespace {

constexpr uint32_t kPolynomial = 0x82f63b78u;  // Castagnoli, bit-reversed.

// table[k][b]: the CRC of byte b followed by k zero bytes (slicing by 8).
using Tables = std::array<std::array<uint32_t, 256>, 8>;

constexpr Tables MakeTables() {
  Tables t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t c = b;
    for (int i = 0; i < 8; ++i) c = (c >> 1) ^ ((c & 1) ? kPolynomial : 0);
    t[0][b] = c;
  }
  for (int k = 1; k < 8; ++k) {
    for (uint32_t b = 0; b < 256; ++b) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xff];
  }
  return t;
}

constexpr Tables kTables = MakeTables();

// The CRC register after `n` bytes from register value `c` (no inversion:
// Extend's input and output are the register inverted).
uint32_t RawPortable(uint32_t c, const char* p, size_t n) {
  const auto* u = reinterpret_cast<const uint8_t*>(p);
  for (; n >= 8; n -= 8, u += 8) {
    uint64_t w;
    std::memcpy(&w, u, 8);  // Little-endian hosts only, as the checkpoint format.
    w ^= c;
    c = kTables[7][w & 0xff] ^ kTables[6][(w >> 8) & 0xff] ^ kTables[5][(w >> 16) & 0xff] ^
        kTables[4][(w >> 24) & 0xff] ^ kTables[3][(w >> 32) & 0xff] ^
        kTables[2][(w >> 40) & 0xff] ^ kTables[1][(w >> 48) & 0xff] ^ kTables[0][w >> 56];
  }
  for (; n > 0; --n, ++u) c = (c >> 8) ^ kTables[0][(c ^ *u) & 0xff];
  return c;
}

}  // namespace

uint32_t ExtendPortable(uint32_t crc, const char* p, size_t n) {
  return ~RawPortable(~crc, p, n);
}

namespace {

#if defined(__x86_64__)
// Three independent streams hide the crc32 instruction's 3-cycle latency:
// blocks A, B, C of kStride bytes are checksummed at once, then joined with
// the register's linearity: crc(A|B|C) = Z2(crc(A)) ^ Z(crc(B)) ^ crc(C),
// where Z is "then kStride zero bytes" (a table per byte of the register).
constexpr size_t kStride = 8192;

struct ShiftTable {
  uint32_t t[4][256];
  uint32_t operator()(uint32_t c) const {
    return t[0][c & 0xff] ^ t[1][(c >> 8) & 0xff] ^ t[2][(c >> 16) & 0xff] ^ t[3][c >> 24];
  }
};

const ShiftTable& ZeroShift() {
  static const ShiftTable* table = [] {
    auto* z = new ShiftTable;
    static const char zeros[kStride] = {};
    uint32_t basis[32];
    for (int b = 0; b < 32; ++b) basis[b] = RawPortable(uint32_t{1} << b, zeros, kStride);
    for (int j = 0; j < 4; ++j) {
      for (uint32_t v = 0; v < 256; ++v) {
        uint32_t x = 0;
        for (int b = 0; b < 8; ++b) {
          if (v & (1u << b)) x ^= basis[8 * j + b];
        }
        z->t[j][v] = x;
      }
    }
    return z;
  }();
  return *table;
}

__attribute__((target("sse4.2"))) uint32_t ExtendSse42(uint32_t crc, const char* p, size_t n) {
  uint64_t c = ~crc;
  if (n >= 3 * kStride) {
    const ShiftTable& z = ZeroShift();
    for (; n >= 3 * kStride; n -= 3 * kStride, p += 3 * kStride) {
      uint64_t c1 = 0, c2 = 0;
      for (size_t i = 0; i < kStride; i += 8) {
        uint64_t a, b, d;
        std::memcpy(&a, p + i, 8);
        std::memcpy(&b, p + kStride + i, 8);
        std::memcpy(&d, p + 2 * kStride + i, 8);
        c = __builtin_ia32_crc32di(c, a);
        c1 = __builtin_ia32_crc32di(c1, b);
        c2 = __builtin_ia32_crc32di(c2, d);
      }
      c = z(z(static_cast<uint32_t>(c))) ^ z(static_cast<uint32_t>(c1)) ^ c2;
    }
  }
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    c = __builtin_ia32_crc32di(c, w);
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  for (; n > 0; --n, ++p) c32 = __builtin_ia32_crc32qi(c32, static_cast<uint8_t>(*p));
  return ~c32;
}

bool HaveSse42() {
  static const bool have = [] {
    __builtin_cpu_init();  // Needed before static initialisation has run it.
    return __builtin_cpu_supports("sse4.2") != 0;
  }();
  return have;
}
#endif

}  // namespace

uint32_t Extend(uint32_t crc, const char* data, size_t n) {
#if defined(__x86_64__)
  if (HaveSse42()) return ExtendSse42(crc, data, n);
#endif
  return ExtendPortable(crc, data, n);
}

}  // namespace dflow::crc32c
