// Bulk conversions between the half storage types (float16, bfloat16) and float, for the kernels that compute a
// half tensor in fp32 tiles: load a tile into floats, run the fp32 loop (vectorized by the compiler), round the
// tile back once when storing. Bit-identical to kernel_common/half.h's scalar conversions (round to nearest
// even, NaN stays a quiet NaN, overflow to infinity, fp16 subnormals kept): the F16C/AVX2 paths are used only
// where the CPU has them (checked once at run time), and the scalar functions otherwise.
#pragma once
#include <cstdint>
#include <type_traits>

#include "kernel_common/half.h"

namespace ot::cpu {

// double -> float rounded to odd (truncated, with the last bit set when inexact): rounding that float to a half
// type (at least 2 fewer mantissa bits) then gives the correctly rounded half of the double, where plain
// double -> float -> half can round twice (1 + 2^-11 + 2^-40 is above fp16's tie, but its nearest float is the
// tie itself, which rounds to even: down).
// Branch-free (it runs once per stored element): an |f| rounded away from zero steps one ulp back toward zero
// (sign-magnitude bits: minus one), and an inexact result gets its last bit set. NaN stays NaN, an exact
// value (infinities included) is unchanged, a finite d beyond float's range gives FLT_MAX (odd), which rounds to
// infinity in both half types as d would.
inline float RoundToOddFloat(double d) {
  const float f = static_cast<float>(d);
  const double back = static_cast<double>(f);
  uint32_t b = FloatBits(f);
  b -= static_cast<uint32_t>((back < 0 ? -back : back) > (d < 0 ? -d : d));
  b |= static_cast<uint32_t>(back != d);
  return BitsFloat(b);
}

// dst[i] = RoundToOddFloat(src[i]) (AVX2 four at a time where the CPU has it): for kernels that compute in
// double and store half, followed by StoreFloats.
void DoublesToFloatsRoundOdd(const double* src, float* dst, int64_t n);

// A half value from a double, rounded once (to nearest even).
template <typename T>
inline T HalfFromDouble(double d) {
  return T(RoundToOddFloat(d));
}

void HalfToFloat(const float16* src, float* dst, int64_t n);
void FloatToHalf(const float* src, float16* dst, int64_t n);
void Bf16ToFloat(const bfloat16* src, float* dst, int64_t n);
void FloatToBf16(const float* src, bfloat16* dst, int64_t n);

// Tile length the elementwise kernels use for half tensors: 2 KiB of floats per operand, in L1.
constexpr int64_t kHalfTile = 512;

// The row kernels' half paths (LayerNorm, Softmax and their gradients): rows of up to this many elements are widened
// to float in chunks of at most this many floats per operand, on the stack, and run through the float32 rows.
constexpr int64_t kHalfRowChunk = 2048;

// dst[i] = float(src[i]) for T in {float16, bfloat16, float}.
template <typename T>
inline void LoadFloats(const T* src, float* dst, int64_t n) {
  if constexpr (std::is_same_v<T, float16>) {
    HalfToFloat(src, dst, n);
  } else if constexpr (std::is_same_v<T, bfloat16>) {
    Bf16ToFloat(src, dst, n);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(src[i]);
  }
}

// dst[i] = T(src[i]), rounding to nearest even for the half types.
template <typename T>
inline void StoreFloats(const float* src, T* dst, int64_t n) {
  if constexpr (std::is_same_v<T, float16>) {
    FloatToHalf(src, dst, n);
  } else if constexpr (std::is_same_v<T, bfloat16>) {
    FloatToBf16(src, dst, n);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<T>(src[i]);
  }
}

}  // namespace ot::cpu
