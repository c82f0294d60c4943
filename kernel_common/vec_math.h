// Branch-free float exp, expm1-free tanh and erf for the element loops: written with float arithmetic, selects and
// bit casts only (no libm call, no table), so GCC vectorizes a loop that calls them -- libm's scalar expf/erff/tanhf
// cost ~5-10 ns an element and stop the vectorizer. The double paths keep std:: (float64 is the accurate reference
// of the gradient checks); these are for A = float only (kernel_common/scalar_math.h picks them).
//
// The polynomials are Horner chains of explicit fused multiply-adds (OT_FMA) and nothing else is contracted (the
// CPU code builds with -ffp-contract=off): an fma is correctly rounded wherever it runs -- the vfmadd of the
// x86-64-v4 and -v3 clones of the CPU loops (OT_VEC_CLONES below), libm's fmaf in the baseline clone and
// in code without clones, the GPU's contracted a * b + c -- so a result does not depend on the clone that ran
// (bit-identical), the fused cluster interpreter equals the op-by-op kernels exactly, and the GPU evaluates the same
// operations.
//
// Accuracy (tests/cpu_ops/vec_math_test.cc, every 97th float bit pattern plus the special values, against double
// libm rounded): see the bounds asserted there. Special values as libm: Exp(+inf) = +inf, Exp(-inf) = 0, overflow to
// +inf, gradual underflow (subnormal results are rounded once, not flushed) down to 0; Erf(+-inf) = +-1; Tanh
// saturates to +-1; NaN in gives NaN out; -0 stays -0 for Erf and Tanh.
#pragma once
#if !defined(__CUDACC_RTC__)
#include <cstdint>  // under NVRTC, half.h declares the fixed-width types
#endif

#include "kernel_common/half.h"

// Compiles a CPU loop function three times, for x86-64-v4 (AVX-512), x86-64-v3 (AVX2 + FMA) and the baseline (SSE2),
// the clone picked once at load time (GCC target_clones, an ifunc); all execute the same operations (above), so give
// the same bits. Empty where unsupported. ("avx2,fma" would make two clones, neither with both; these headers'
// functions are inline, so they inline into any clone.) The v4 clone: Gelu 0.58 -> 0.41 ms, GeluGrad 0.62 -> 0.44,
// LayerNorm 0.27 -> 0.22 per tiny_lm step on a Zen 4 core (bench/RESULTS.md, session 23).
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__CUDACC__)
#define OT_VEC_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define OT_VEC_CLONES
#endif
// With OT_VEC_CLONES on a loop that takes its element function as a parameter (a lambda): every call in the loop is
// inlined into each clone. Without it GCC may keep a large element function (GeluGradErf's exp and polynomials)
// out of line after a few of the loop's call sites -- compiled for the baseline, its fmas become libm calls, ~40x
// slower (the fused GeluGrad epilogue of --fuse=full took 16 ms where the op-by-op kernel takes 0.4).
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__) && !defined(__CUDACC_RTC__)
#define OT_FLATTEN __attribute__((flatten))
#else
#define OT_FLATTEN
#endif

// a * b + c rounded once. In device code the plain expression: nvcc and NVRTC contract it into one fma (their
// default --fmad=true), with no math header needed.
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define OT_FMA(a, b, c) ((a) * (b) + (c))
#else
#define OT_FMA(a, b, c) __builtin_fmaf((a), (b), (c))
#endif

namespace ot::math {

namespace vec_detail {
// c ? a : b as a bit mask, not a ?: -- GCC threads the constant of a ?: through the code after it (a jump that its
// if-conversion cannot undo when a threaded path holds a trapping multiply), which stops the vectorizer.
OT_HD float Select(bool c, float a, float b) {
  const uint32_t m = 0u - static_cast<uint32_t>(c);
  return BitsFloat((FloatBits(a) & m) | (FloatBits(b) & ~m));
}
OT_HD float AbsF(float x) { return BitsFloat(FloatBits(x) & 0x7fffffffu); }
// |r| with the sign bit of s (r's sign bit clear).
OT_HD float WithSignOf(float r, float s) { return BitsFloat(FloatBits(r) | (FloatBits(s) & 0x80000000u)); }
}  // namespace vec_detail

// e^x. Cody-Waite reduction x = n ln2 + r, |r| <= ln2/2 (ln2 split so n * kLn2Hi is exact for |n| < 2^15), a
// degree-6 polynomial for e^r (Cephes expf), and 2^n applied as two exact power-of-two factors 2^(n/2) 2^(n - n/2)
// so results down to the subnormal range round once (gradual underflow) and those above FLT_MAX overflow to +inf.
// Below -104 the result is 0 (e^-104 rounds to 0): selected at the end, with the arithmetic done on x = 0 meanwhile
// -- computing e^-104 itself underflows, and an underflowing multiply costs a microcode assist on x86 (the causal
// mask's -1e9 made every masked score one: a masked softmax ran at half speed). x is clamped to 89 above (e^89
// overflows), which keeps n in [-150, 128]; a NaN passes the selects and the arithmetic unchanged.
OT_HD float VecExp(float x) {
  using namespace vec_detail;
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
  constexpr float kShift = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer held in the low mantissa bits
  const bool zero = x < -104.f;
  x = Select(zero, 0.f, x);
  x = Select(x > 89.f, 89.f, x);
  const float kd = x * kLog2e + kShift;  // contraction-safe: any rounding of x * kLog2e only moves n by one
  const float n = kd - kShift;
  float r = x - n * kLn2Hi;  // exact
  r = r - n * kLn2Lo;
  const float r2 = r * r;
  float p = 1.9875691500e-4f;
  p = OT_FMA(p, r, 1.3981999507e-3f);
  p = OT_FMA(p, r, 8.3334519073e-3f);
  p = OT_FMA(p, r, 4.1665795894e-2f);
  p = OT_FMA(p, r, 1.6666665459e-1f);
  p = OT_FMA(p, r, 5.0000001201e-1f);
  const float e = OT_FMA(p, r2, r) + 1.f;
  const int32_t ni = static_cast<int32_t>(FloatBits(kd) - FloatBits(kShift));  // NaN: any value, unused
  const int32_t n1 = ni >> 1, n2 = ni - n1;
  const float s1 = BitsFloat(static_cast<uint32_t>(n1 + 127) << 23);
  const float s2 = BitsFloat(static_cast<uint32_t>(n2 + 127) << 23);
  return Select(zero, 0.f, (e * s1) * s2);
}

// erf(x) (Norbert Juffa's erff construction, coefficients refit for evaluation without fma, now evaluated with
// fma): for |x| < 0.921875
// x + x p(x^2); above, 1 - e^(q(|x|)) with q a polynomial ~ -x^2, sign restored from x. |x| is clamped to 4 (erf
// rounds to 1 in float from 3.92 on), which takes +-inf to +-1; NaN fails every compare and stays NaN.
OT_HD float VecErf(float x) {
  using namespace vec_detail;
  const float t0 = AbsF(x);
  const float t = Select(t0 > 4.f, 4.f, t0);
  const float s = x * x;
  // |x| < 0.921875
  float p = -5.96761703e-4f;
  p = OT_FMA(p, s, 4.99119423e-3f);
  p = OT_FMA(p, s, -2.67681349e-2f);
  p = OT_FMA(p, s, 1.12819925e-1f);
  p = OT_FMA(p, s, -3.76125336e-1f);
  p = OT_FMA(p, s, 1.28379166e-1f);
  const float small = OT_FMA(p, x, x);
  // |x| >= 0.921875
  const float t2 = t * t;
  float q = OT_FMA(-1.72853470e-5f, t, 3.83197126e-4f);
  const float u = OT_FMA(-3.88396438e-3f, t, 2.42546219e-2f);
  q = OT_FMA(q, t2, u);
  q = OT_FMA(q, t, -1.06777877e-1f);
  q = OT_FMA(q, t, -6.34846687e-1f);
  q = OT_FMA(q, t, -1.28717512e-1f);
  q = OT_FMA(q, t, -t);
  const float big = WithSignOf(1.f - VecExp(q), x);
  return Select(t0 < 0.921875f, small, big);
}

// The standard normal cdf Phi(x) = (1 + erf(x / sqrt 2)) / 2 and the Gaussian factor e^(-x^2/2), together: what Gelu
// (x Phi(x)) and its gradient (Phi(x) + x e^(-x^2/2) / sqrt(2 pi)) need, with one exp and one branch. With a = |x|,
// Phi(-a) = e^(-a^2/2) q(t), t = 1 / (1 + k a), where q (degree 9, k = 0.6 / sqrt 2) is a relative minimax fit of
// erfcx(a / sqrt 2) / 2 in t, coefficients rounded to float one at a time with the rest refit; Phi(x) = Phi(-a) for
// x < 0 and 1 - Phi(-a) above. a^2 = s + s_lo exactly (an fma), so the exp argument carries no rounding error:
// e^(-a^2/2) = e^(-s/2) (1 - s_lo/2) to float precision. a is clamped to 20 (e^-200 is 0 in float), so +-inf give
// Phi = 1, 0 and gauss = 0; NaN stays NaN.
// Accuracy: Phi(x) within ~8 units of 2^-24 relative for x < 0 (also in the far tail, where 1 + erf in float is 0)
// and absolute above; the bounds tests/cpu_ops/vec_math_test.cc asserts. It replaces 0.5 (1 + VecErf(x / sqrt 2)),
// which evaluates both erf polynomials and an exp, plus a second exp for the gradient's Gaussian: GeluGrad is ~1.8x
// faster, Gelu ~1.2x.
struct NormalCdfGauss {
  float cdf, gauss;  // Phi(x), e^(-x^2/2)
};
OT_HD NormalCdfGauss VecNormalCdfGauss(float x) {
  using namespace vec_detail;
  const float a0 = AbsF(x);
  const float a = Select(a0 > 20.f, 20.f, a0);
  const float s = a * a;
  const float s_lo = OT_FMA(a, a, -s);
  const float e0 = VecExp(-0.5f * s);
  const float gauss = OT_FMA(e0, -0.5f * s_lo, e0);
  const float t = 1.f / OT_FMA(4.242640734e-01f, a, 1.f);
  float q = 1.755119488e-02f;
  q = OT_FMA(q, t, -1.304414123e-01f);
  q = OT_FMA(q, t, 3.787582219e-01f);
  q = OT_FMA(q, t, -5.188778639e-01f);
  q = OT_FMA(q, t, 2.782506049e-01f);
  q = OT_FMA(q, t, -2.270212397e-02f);
  q = OT_FMA(q, t, 1.619718373e-01f);
  q = OT_FMA(q, t, 1.659839600e-01f);
  q = OT_FMA(q, t, 1.695141792e-01f);
  q = OT_FMA(q, t, -8.586905096e-06f);
  const float tail = gauss * q;  // Phi(-a)
  return {Select(x < 0.f, tail, 1.f - tail), gauss};
}

// tanh(x) = sign(x) tanh(|x|): |x| + |x|^3 p(x^2) for |x| < 0.625 (Cephes tanhf), else 1 - 2 / (e^(2|x|) + 1) (e^(2|x|)
// overflowing to +inf gives exactly 1); x's sign bit put back last, so -0 stays -0. NaN takes the second form and
// stays NaN.
OT_HD float VecTanh(float x) {
  using namespace vec_detail;
  const float t = AbsF(x);
  const float s = x * x;
  float p = -5.70498872745e-3f;
  p = OT_FMA(p, s, 2.06390887954e-2f);
  p = OT_FMA(p, s, -5.37397155531e-2f);
  p = OT_FMA(p, s, 1.33314422036e-1f);
  p = OT_FMA(p, s, -3.33332819422e-1f);
  const float small = OT_FMA(p * s, t, t);
  const float big = 1.f - 2.f / (VecExp(2.f * t) + 1.f);
  return WithSignOf(Select(t < 0.625f, small, big), x);
}

}  // namespace ot::math
