// float16/bfloat16 conversions against exhaustive or reference checks.
#include "kernel_common/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

namespace ot {
namespace {

// Every half bit pattern survives half -> float -> half (NaNs stay NaN).
TEST(Half, EveryFloat16RoundTrips) {
  for (uint32_t b = 0; b < 65536; ++b) {
    float f = HalfBitsToFloat(static_cast<uint16_t>(b));
    uint16_t back = FloatToHalfBits(f);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(HalfBitsToFloat(back))) << b;
    } else {
      ASSERT_EQ(back, b) << "bits " << b << " value " << f;
    }
  }
}

// float -> half rounds to the nearest representable half, ties to even: compare with a search over the
// neighbouring halves in double.
TEST(Half, FloatToHalfRoundsToNearestEven) {
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<uint32_t> bits(0, 0xffffffffu);
  for (int i = 0; i < 200000; ++i) {
    float f = BitsFloat(bits(rng));
    if (std::isnan(f)) continue;
    uint16_t h = FloatToHalfBits(f);
    double hv = HalfBitsToFloat(h);
    if (std::fabs(f) >= 65520.0) {
      EXPECT_TRUE(std::isinf(hv)) << f;
      continue;
    }
    // No other half is closer.
    for (int d : {-1, 1}) {
      uint16_t n = static_cast<uint16_t>(h + d);
      double nv = HalfBitsToFloat(n);
      if (std::isnan(nv) || std::isinf(nv) || ((n ^ h) & 0x8000)) continue;
      double e0 = std::fabs(hv - f), e1 = std::fabs(nv - f);
      ASSERT_LE(e0, e1) << "value " << f;
      if (e0 == e1) {
        ASSERT_EQ(h & 1, 0) << "tie must go to even: " << f;
      }
    }
  }
  EXPECT_EQ(FloatToHalfBits(65504.0f), 0x7bffu);
  EXPECT_EQ(FloatToHalfBits(65520.0f), 0x7c00u);                  // rounds up to infinity
  EXPECT_EQ(FloatToHalfBits(5.9604644775390625e-08f), 0x0001u);   // smallest subnormal
  EXPECT_EQ(FloatToHalfBits(2.98023223876953125e-08f), 0x0000u);  // half of it ties to even (0)
}

TEST(Half, Bfloat16RoundsToNearestEvenAndKeepsNaN) {
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<uint32_t> bits(0, 0xffffffffu);
  for (int i = 0; i < 200000; ++i) {
    uint32_t u = bits(rng);
    float f = BitsFloat(u);
    uint16_t b = FloatToBf16Bits(f);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(Bf16BitsToFloat(b)));
      continue;
    }
    double lo = Bf16BitsToFloat(static_cast<uint16_t>(u >> 16));
    double hi = Bf16BitsToFloat(static_cast<uint16_t>((u >> 16) + 1));
    // Past the largest finite bf16 the next step is infinity, reached by rounding at 2^128 (IEEE overflow).
    if (std::isinf(hi)) hi = std::copysign(std::ldexp(1.0, 128), f);
    double got = Bf16BitsToFloat(b);
    double dlo = std::fabs(f - lo), dhi = std::fabs(f - hi);
    if (dlo < dhi)
      EXPECT_EQ(got, lo);
    else if (dhi < dlo && std::fabs(hi) == std::ldexp(1.0, 128))
      EXPECT_TRUE(std::isinf(got)) << f;
    else if (dhi < dlo)
      EXPECT_EQ(got, hi) << f;
    else
      EXPECT_EQ(b & 1, 0);
  }
}

}  // namespace
}  // namespace ot
