#include "cpu_ops/half_convert.h"

#include "cpu_ops/cpu_caps.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define OT_X86 1
#endif

namespace ot::cpu {

namespace {

#ifdef OT_X86
// The build targets baseline x86-64; the 8-wide paths are compiled for AVX2/F16C and taken only when the CPU
// reports them.
bool HasF16c() { return GetCpuCaps().f16c; }
bool HasAvx2() { return GetCpuCaps().avx2; }

__attribute__((target("avx,f16c"))) int64_t HalfToFloat8(const float16* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  return i;
}

// _MM_FROUND_TO_NEAREST_INT: round to nearest even, as FloatToHalfBits; overflow gives infinity and NaN a quiet
// NaN with the payload's top bits, also as FloatToHalfBits.
__attribute__((target("avx,f16c"))) int64_t FloatToHalf8(const float* src, float16* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  return i;
}

__attribute__((target("avx2"))) int64_t Bf16ToFloat8(const bfloat16* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm256_slli_epi32(w, 16));
  }
  return i;
}

// FloatToBf16Bits eight at a time: x + 0x7fff + lsb, top half; NaN -> (x >> 16) | 0x40 (quiet).
__attribute__((target("avx2"))) int64_t FloatToBf16x8(const float* src, bfloat16* dst, int64_t n) {
  const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff);
  const __m256i absmask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
  const __m256i quiet = _mm256_set1_epi32(0x40);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), one);
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(x, _mm256_add_epi32(bias, lsb)), 16);
    __m256i nan_r = _mm256_or_si256(_mm256_srli_epi32(x, 16), quiet);
    __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, absmask), inf);  // both operands non-negative
    r = _mm256_blendv_epi8(r, nan_r, is_nan);
    // Pack the eight 32-bit lanes (each < 2^16) to 16 bits; packus works per 128-bit half, hence the permute.
    __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm256_castsi256_si128(p));
  }
  return i;
}

// RoundToOddFloat four at a time: f = nearest float; one step toward zero where |f| > |d|; last bit set where
// f != d (NaN included, as in the scalar version).
__attribute__((target("avx2"))) int64_t RoundOdd4(const double* src, float* dst, int64_t n) {
  const __m256d abs_mask = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fffffffffffffffLL));
  const __m256i pick = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);  // low halves of the 64-bit masks
  const __m128i one = _mm_set1_epi32(1);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m256d d = _mm256_loadu_pd(src + i);
    const __m128 f = _mm256_cvtpd_ps(d);
    const __m256d back = _mm256_cvtps_pd(f);
    const __m256d away = _mm256_cmp_pd(_mm256_and_pd(back, abs_mask), _mm256_and_pd(d, abs_mask), _CMP_GT_OQ);
    const __m256d inexact = _mm256_cmp_pd(back, d, _CMP_NEQ_UQ);
    const __m128i away32 = _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(_mm256_castpd_si256(away), pick));
    const __m128i inex32 = _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(_mm256_castpd_si256(inexact), pick));
    __m128i b = _mm_add_epi32(_mm_castps_si128(f), away32);  // + (-1) where rounded away from zero
    b = _mm_or_si128(b, _mm_and_si128(inex32, one));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), b);
  }
  return i;
}
#endif

}  // namespace

void DoublesToFloatsRoundOdd(const double* src, float* dst, int64_t n) {
  int64_t i = 0;
#ifdef OT_X86
  if (HasAvx2()) i = RoundOdd4(src, dst, n);
#endif
  for (; i < n; ++i) dst[i] = RoundToOddFloat(src[i]);
}

void HalfToFloat(const float16* src, float* dst, int64_t n) {
  int64_t i = 0;
#ifdef OT_X86
  if (HasF16c()) i = HalfToFloat8(src, dst, n);
#endif
  for (; i < n; ++i) dst[i] = HalfBitsToFloat(src[i].bits);
}

void FloatToHalf(const float* src, float16* dst, int64_t n) {
  int64_t i = 0;
#ifdef OT_X86
  if (HasF16c()) i = FloatToHalf8(src, dst, n);
#endif
  for (; i < n; ++i) dst[i].bits = FloatToHalfBits(src[i]);
}

void Bf16ToFloat(const bfloat16* src, float* dst, int64_t n) {
  int64_t i = 0;
#ifdef OT_X86
  if (HasAvx2()) i = Bf16ToFloat8(src, dst, n);
#endif
  for (; i < n; ++i) dst[i] = Bf16BitsToFloat(src[i].bits);
}

void FloatToBf16(const float* src, bfloat16* dst, int64_t n) {
  int64_t i = 0;
#ifdef OT_X86
  if (HasAvx2()) i = FloatToBf16x8(src, dst, n);
#endif
  for (; i < n; ++i) dst[i].bits = FloatToBf16Bits(src[i]);
}

}  // namespace ot::cpu
