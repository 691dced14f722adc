#include "dflow/io/crc32c.h"

#include <random>
#include <string>

#include <gtest/gtest.h>

namespace dflow::crc32c {
namespace {

// Reference values of CRC-32C (RFC 3720 B.4, and LevelDB's crc32c_test).
TEST(Crc32cTest, KnownValues) {
  EXPECT_EQ(Value("123456789", 9), 0xe3069283u);
  std::string zeros(32, '\0'), ones(32, '\xff'), up(32, 0), down(32, 0);
  for (int i = 0; i < 32; ++i) {
    up[i] = static_cast<char>(i);
    down[i] = static_cast<char>(31 - i);
  }
  EXPECT_EQ(Value(zeros.data(), 32), 0x8a9136aau);
  EXPECT_EQ(Value(ones.data(), 32), 0x62a8ab43u);
  EXPECT_EQ(Value(up.data(), 32), 0x46dd794eu);
  EXPECT_EQ(Value(down.data(), 32), 0x113fdb5cu);
  EXPECT_EQ(Value("", 0), 0u);
}

TEST(Crc32cTest, ExtendEqualsOneShotAndBothPathsAgree) {
  std::mt19937 rng(7);
  std::string data(200000, '\0');
  for (char& c : data) c = static_cast<char>(rng());
  // From 64 bytes the hardware path folds 64-byte blocks with carry-less
  // multiplication (from 256 bytes, 256-byte blocks where the CPU has AVX-512's
  // VPCLMULQDQ), then 16-byte blocks, then the tail byte by byte.
  for (size_t n : {0, 1, 7, 8, 9, 63, 64, 65, 79, 80, 127, 128, 255, 256, 257, 511, 512, 575, 1000,
                   9999, 24577, 199999}) {
    const uint32_t whole = Value(data.data(), n);
    EXPECT_EQ(whole, ExtendPortable(0, data.data(), n)) << n;
    for (size_t cut : {size_t{0}, n / 3, n}) {
      EXPECT_EQ(Extend(Value(data.data(), cut), data.data() + cut, n - cut), whole) << n;
    }
  }
}

TEST(Crc32cTest, CombineEqualsTheCrcOfTheConcatenation) {
  std::mt19937 rng(13);
  std::string data(100000, '\0');
  for (char& c : data) c = static_cast<char>(rng());
  for (size_t n : {0, 1, 2, 63, 64, 1000, 65536, 100000}) {
    const uint32_t whole = Value(data.data(), n);
    for (size_t cut : {size_t{0}, size_t{1}, n / 2, n / 3, n - (n > 0), n}) {
      if (cut > n) continue;
      EXPECT_EQ(Combine(Value(data.data(), cut), Value(data.data() + cut, n - cut), n - cut), whole)
          << "length " << n << " cut at " << cut;
    }
  }
}

// Every length and alignment of the folding path's edges, from any register.
TEST(Crc32cTest, HardwareEqualsTableForEveryLengthAlignmentAndStart) {
  std::mt19937 rng(11);
  std::string data(5000, '\0');
  for (char& c : data) c = static_cast<char>(rng());
  for (size_t offset = 0; offset < 16; ++offset) {
    for (size_t n = 0; n + offset <= 400; ++n) {
      const uint32_t start = static_cast<uint32_t>(rng());
      ASSERT_EQ(Extend(start, data.data() + offset, n),
                ExtendPortable(start, data.data() + offset, n))
          << "offset " << offset << " length " << n;
    }
  }
  for (int i = 0; i < 200; ++i) {
    const size_t offset = rng() % 16, n = rng() % (data.size() - offset);
    const uint32_t start = static_cast<uint32_t>(rng());
    ASSERT_EQ(Extend(start, data.data() + offset, n),
              ExtendPortable(start, data.data() + offset, n))
        << "offset " << offset << " length " << n;
  }
}

TEST(Crc32cTest, MaskRoundTripsAndDiffers) {
  for (uint32_t crc : {0u, 1u, 0xe3069283u, 0xffffffffu}) {
    EXPECT_NE(Mask(crc), crc);
    EXPECT_EQ(Unmask(Mask(crc)), crc);
  }
}

}  // namespace
}  // namespace dflow::crc32c
