// Scalar element functions shared by the CPU kernels (cpu_ops/fused_elementwise's interpreter) and the CUDA code
// the cluster programs turn into: one definition of each formula, so a fused cluster computes what the op-by-op
// kernels compute. A is float or double. Every function is branch-free in the sense that matters for the
// vectorizer (selects only), and NaN behaves as the ONNX kernels do (noted per function).
// exp, erf and tanh of a float are kernel_common/vec_math.h's (branch-free, vectorizable, <= 2 ulp); a double's are
// std:: (float64 stays the accurate reference of the gradient checks). Every float kernel that computes one of these
// ops -- op by op or in a fused cluster -- calls Exp/Erf/Tanh here, so both compute the same function.
//
// Under NVRTC (__CUDACC_RTC__: no <cmath>, no <type_traits>) the double paths call CUDA's global exp/erf/tanh
// through the namespace scalar_detail::stdm below (std itself on the host), and kIsFloat is a two-line trait; the
// host code is the same.
#pragma once
#if !defined(__CUDACC_RTC__)
#include <cmath>
#include <type_traits>
#endif

#include "kernel_common/half.h"
#include "kernel_common/vec_math.h"

namespace ot::math {

namespace scalar_detail {  // a namespace of its own: cpu_ops has kIsFloat traits of other meanings
#if defined(__CUDACC_RTC__)
namespace stdm {
using ::erf;
using ::exp;
using ::tanh;
}  // namespace stdm
template <typename A>
inline constexpr bool kIsFloat = false;
template <>
inline constexpr bool kIsFloat<float> = true;
#else
namespace stdm = ::std;
template <typename A>
inline constexpr bool kIsFloat = std::is_same_v<A, float>;
#endif
}  // namespace scalar_detail

// sqrt(1/2), sqrt(2/pi), 1/sqrt(2 pi), and the tanh-form Gelu's cubic coefficient.
constexpr double kSqrtHalf = 0.70710678118654752440;
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;
constexpr double kGeluCubic = 0.044715;

// e^v, erf(v), tanh(v): vec_math for float, std:: for double.
template <typename A>
OT_HD A Exp(A v) {
  if constexpr (scalar_detail::kIsFloat<A>) {
    return VecExp(v);
  } else {
    using scalar_detail::stdm::exp;
    return exp(v);
  }
}
template <typename A>
OT_HD A Erf(A v) {
  if constexpr (scalar_detail::kIsFloat<A>) {
    return VecErf(v);
  } else {
    using scalar_detail::stdm::erf;
    return erf(v);
  }
}
template <typename A>
OT_HD A Tanh(A v) {
  if constexpr (scalar_detail::kIsFloat<A>) {
    return VecTanh(v);
  } else {
    using scalar_detail::stdm::tanh;
    return tanh(v);
  }
}

// 1, -1, or v itself (keeps 0, -0 and NaN).
template <typename A>
OT_HD A Sign(A v) {
  return v > A(0) ? A(1) : (v < A(0) ? A(-1) : v);
}

// max(v, 0); NaN stays NaN.
template <typename A>
OT_HD A Relu(A v) {
  return v < A(0) ? A(0) : v;
}

template <typename A>
OT_HD A LeakyRelu(A v, A alpha) {
  return v < A(0) ? alpha * v : v;
}

// 1 / (1 + exp(-v)), evaluated without overflow on either side: e = exp(-|v|) <= 1, then 1 / (1 + e) for v >= 0 and
// e / (1 + e) below (a select for float, so the loop vectorizes; NaN takes the second form and stays NaN).
template <typename A>
OT_HD A Sigmoid(A v) {
  if constexpr (scalar_detail::kIsFloat<A>) {
    const float e = VecExp(-vec_detail::AbsF(v));
    return vec_detail::Select(v >= 0.f, 1.f, e) / (1.f + e);
  } else {
    using scalar_detail::stdm::exp;
    if (v >= A(0)) return A(1) / (A(1) + exp(-v));
    const A e = exp(v);
    return e / (A(1) + e);
  }
}

// Gelu: erf form 0.5 v (1 + erf(v / sqrt 2)); tanh form 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3))).
// A float's erf form is v Phi(v) through vec_math's VecNormalCdfGauss (one exp, one branch, no erf).
template <typename A>
OT_HD A GeluErf(A v) {
  if constexpr (scalar_detail::kIsFloat<A>) {
    return v * VecNormalCdfGauss(v).cdf;
  } else {
    return A(0.5) * v * (A(1) + Erf(v * A(kSqrtHalf)));
  }
}
template <typename A>
OT_HD A GeluTanh(A v) {
  return A(0.5) * v * (A(1) + Tanh(A(kSqrt2OverPi) * (v + A(kGeluCubic) * v * v * v)));
}

// dX of Gelu for dY = dy at X = v (formulas of graph/grad/norm_grad.cc):
//   erf:  dy (Phi(v) + v phi(v)),  Phi(v) = (1 + erf(v / sqrt 2)) / 2,  phi(v) = exp(-v^2 / 2) / sqrt(2 pi)
//   tanh: dy ((1 + t) / 2 + v (1 - t^2) k (1 + 3 a v^2) / 2),  t = tanh(k (v + a v^3)), k = sqrt(2/pi), a = 0.044715
template <typename A>
OT_HD A GeluGradErf(A dy, A v) {
  if constexpr (scalar_detail::kIsFloat<A>) {
    const NormalCdfGauss c = VecNormalCdfGauss(v);  // Phi and the Gaussian from one exp
    return dy * (c.cdf + v * (float(kInvSqrt2Pi) * c.gauss));
  } else {
    const A cdf = A(0.5) * (A(1) + Erf(v * A(kSqrtHalf)));
    const A pdf = A(kInvSqrt2Pi) * Exp(A(-0.5) * v * v);
    return dy * (cdf + v * pdf);
  }
}
template <typename A>
OT_HD A GeluGradTanh(A dy, A v) {
  const A k = A(kSqrt2OverPi), a = A(kGeluCubic), a3 = A(3 * kGeluCubic);
  const A v2 = v * v;
  const A t = Tanh(k * (v + a * v2 * v));
  return dy * (A(0.5) * (A(1) + t) + A(0.5) * v * (A(1) - t * t) * k * (A(1) + a3 * v2));
}

// ReluGrad(dY, X): dy where x > 0, else 0 -- a select, not dy * (x > 0): a NaN or infinite dy where x <= 0
// gives 0, as the op-by-op kernel (executor/kernels/internal.cc) does.
template <typename A>
OT_HD A ReluGrad(A dy, A x) {
  return x > A(0) ? dy : A(0);
}

// Max/Min of two values; NaN in either gives NaN (numpy maximum/minimum, the ONNX Max/Min kernels).
template <typename A>
OT_HD A NanMax(A x, A y) {
  return (x >= y || x != x) ? x : y;
}
template <typename A>
OT_HD A NanMin(A x, A y) {
  return (x <= y || x != x) ? x : y;
}

// The running max/min of a row reduction (cpu_ops/reduce.cc's combine): a NaN, once seen, stays.
template <typename A>
OT_HD A ReduceMaxStep(A acc, A v) {
  return ((v > acc || v != v) && acc == acc) ? v : acc;
}
template <typename A>
OT_HD A ReduceMinStep(A acc, A v) {
  return ((v < acc || v != v) && acc == acc) ? v : acc;
}

// A float rounded to the half types and back (what storing it in a float16/bfloat16 tensor keeps).
OT_HD float RoundToHalf(float v) { return HalfBitsToFloat(FloatToHalfBits(v)); }
OT_HD float RoundToBf16(float v) { return Bf16BitsToFloat(FloatToBf16Bits(v)); }

}  // namespace ot::math
