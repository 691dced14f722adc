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
  // Past 24 KiB the hardware path checksums three blocks at once and joins them.
  for (size_t n : {0, 1, 7, 8, 9, 63, 64, 1000, 9999, 24575, 24576, 24577, 49160, 199999}) {
    const uint32_t whole = Value(data.data(), n);
    EXPECT_EQ(whole, ExtendPortable(0, data.data(), n)) << n;
    for (size_t cut : {size_t{0}, n / 3, n}) {
      EXPECT_EQ(Extend(Value(data.data(), cut), data.data() + cut, n - cut), whole) << n;
    }
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
