// Half-precision storage types shared by the CPU and CUDA kernels.
// float16 and bfloat16 are storage formats: arithmetic converts to float, computes, and rounds back
// (round-to-nearest-even), so the CPU reference computes exactly what a GPU kernel that does the same computes.
//
// NVRTC (cuda_ops/nvrtc_compile.h compiles generated cluster kernels that include these headers) has no host
// standard library: under __CUDACC_RTC__ the <cstdint> types are declared here and the bit casts use CUDA's
// intrinsics instead of std::memcpy. The host code is unchanged by that branch.
#pragma once
#if !defined(__CUDACC_RTC__)
#include <cstdint>
#include <cstring>
#else
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;
static_assert(sizeof(uint32_t) == 4 && sizeof(uint64_t) == 8, "NVRTC fixed-width types");
#endif

#if defined(__CUDACC__) || defined(__CUDA_ARCH__)
#define OT_HD __host__ __device__ inline
#else
#define OT_HD inline
#endif

namespace ot {

OT_HD uint32_t FloatBits(float f) {
#if defined(__CUDACC_RTC__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}
OT_HD float BitsFloat(uint32_t u) {
#if defined(__CUDACC_RTC__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

// IEEE binary16 <- binary32, round to nearest even; NaN stays NaN (quiet), overflow goes to infinity.
OT_HD uint16_t FloatToHalfBits(float f) {
#if defined(__CUDA_ARCH__)
  // The GPU's conversion instruction rounds to nearest even with IEEE overflow and subnormals: the same bits as the
  // code below for every non-NaN value, in one instruction. NaN keeps the code below's payload rule.
  if (f == f) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return static_cast<uint16_t>(h);
  }
#endif
  uint32_t x = FloatBits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) {  // inf or nan
    return static_cast<uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u | ((absx >> 13) & 0x3ffu) : 0u));
  }
  if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520 -> inf
  if (absx < 0x38800000u) {                                               // subnormal half or zero
    if (absx < 0x33000000u) return static_cast<uint16_t>(sign);           // < 2^-25 rounds to 0
    uint32_t mant = (absx & 0x7fffffu) | 0x800000u;
    int exp = static_cast<int>(absx >> 23);
    int shift = 126 - exp;  // 113 - exp + 13
    uint32_t half_mant = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1u);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half_mant & 1u))) ++half_mant;
    return static_cast<uint16_t>(sign | half_mant);
  }
  uint32_t h = ((absx - 0x38000000u) >> 13);
  uint32_t rem = absx & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

OT_HD float HalfBitsToFloat(uint16_t h) {
#if defined(__CUDA_ARCH__)
  // Widening is exact: one instruction for everything but NaN (whose payload the code below keeps).
  if ((h & 0x7c00u) != 0x7c00u || (h & 0x3ffu) == 0) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(static_cast<unsigned short>(h)));
    return f;
  }
#endif
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    if (mant == 0) return BitsFloat(sign);
    // subnormal: value = mant * 2^-24
    float v = static_cast<float>(mant) * 5.9604644775390625e-08f;
    return sign ? -v : v;
  }
  if (exp == 31) return BitsFloat(sign | 0x7f800000u | (mant << 13));
  return BitsFloat(sign | ((exp + 112u) << 23) | (mant << 13));
}

// bfloat16 <- float, round to nearest even; NaN stays a quiet NaN.
OT_HD uint16_t FloatToBf16Bits(float f) {
  uint32_t x = FloatBits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  uint32_t lsb = (x >> 16) & 1u;
  x += 0x7fffu + lsb;
  return static_cast<uint16_t>(x >> 16);
}
OT_HD float Bf16BitsToFloat(uint16_t b) { return BitsFloat(static_cast<uint32_t>(b) << 16); }

struct float16 {
  uint16_t bits = 0;
  float16() = default;
  OT_HD explicit float16(float f) : bits(FloatToHalfBits(f)) {}
  OT_HD operator float() const { return HalfBitsToFloat(bits); }
  OT_HD static float16 FromBits(uint16_t b) {
    float16 h;
    h.bits = b;
    return h;
  }
};

struct bfloat16 {
  uint16_t bits = 0;
  bfloat16() = default;
  OT_HD explicit bfloat16(float f) : bits(FloatToBf16Bits(f)) {}
  OT_HD operator float() const { return Bf16BitsToFloat(bits); }
  OT_HD static bfloat16 FromBits(uint16_t b) {
    bfloat16 h;
    h.bits = b;
    return h;
  }
};

static_assert(sizeof(float16) == 2 && sizeof(bfloat16) == 2, "half types are 2 bytes");

}  // namespace ot
