// Pow with mixed base/exponent types, and the variadic folds Sum/Mean/Max/Min.
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <type_traits>

#include "cpu_ops/elementwise_binary.h"
#include "cpu_ops/elementwise_loops.h"

namespace ot::cpu {
namespace {

template <typename T>
T IntPow(T base, int64_t exp) {
  using W = std::conditional_t<sizeof(T) <= 4, uint32_t, uint64_t>;
  if (exp < 0) {
    if (base == T(1)) return T(1);
    if constexpr (std::is_signed_v<T>)
      if (base == T(-1)) return (exp & 1) ? T(-1) : T(1);
    return T(0);
  }
  W r = 1, b = static_cast<W>(base);
  uint64_t e = static_cast<uint64_t>(exp);
  while (e) {
    if (e & 1) r *= b;
    b *= b;
    e >>= 1;
  }
  return static_cast<T>(r);
}

// double -> integer T truncating toward zero, without undefined behaviour for NaN/out-of-range values.
template <typename T>
T TruncToInt(double v) {
  if (std::isnan(v)) return T(0);
  if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
  return static_cast<T>(v);
}

template <typename T, typename G>
void Fold(const std::vector<const T*>& ins, T* out, const BroadcastPlan& p, G g, bool mean) {
  using A = ComputeType<T>;
  const int k = static_cast<int>(ins.size());
  constexpr int64_t kBlock = 256;
  ForEachRun(p, [&](int64_t o, int64_t len, const int64_t* off, const int64_t* st) {
    A acc[kBlock];
    for (int64_t s = 0; s < len; s += kBlock) {
      const int64_t m = std::min(kBlock, len - s);
      const T* p0 = ins[0] + off[0] + s * st[0];
      for (int64_t j = 0; j < m; ++j) acc[j] = static_cast<A>(p0[j * st[0]]);
      for (int q = 1; q < k; ++q) {
        const T* pq = ins[q] + off[q] + s * st[q];
        const int64_t sq = st[q];
        if (sq == 1) {
          for (int64_t j = 0; j < m; ++j) acc[j] = g(acc[j], static_cast<A>(pq[j]));
        } else {
          for (int64_t j = 0; j < m; ++j) acc[j] = g(acc[j], static_cast<A>(pq[j * sq]));
        }
      }
      if (mean)
        for (int64_t j = 0; j < m; ++j) acc[j] = acc[j] / static_cast<A>(k);
      for (int64_t j = 0; j < m; ++j) out[o + s + j] = static_cast<T>(acc[j]);
    }
  });
}

}  // namespace

template <typename T, typename E>
void Pow(const T* a, const E* b, T* out, const BroadcastPlan& p) {
  if constexpr ((std::is_same_v<T, float> || kIsHalf<T>)&&kIsFloat<E>) {
    // One exponent of 2 for every element (an RMS norm's x^2): x * x in float is the same bits as pow in double
    // rounded to float (a float's square is exact in double), at a fraction of the time.
    bool one_exponent = true;
    for (int64_t s : p.strides[1]) one_exponent &= s == 0;
    if (one_exponent && p.numel > 0 && static_cast<double>(static_cast<ComputeType<E>>(b[0])) == 2.0) {
      BinaryLoop(a, b, out, p, [](T x, E) -> T {
        const float f = static_cast<float>(x);
        return static_cast<T>(f * f);
      });
      return;
    }
  }
  BinaryLoop(a, b, out, p, [](T x, E y) -> T {
    if constexpr (std::is_integral_v<T> && std::is_integral_v<E>) {
      return IntPow<T>(x, static_cast<int64_t>(y));
    } else {
      double r = std::pow(static_cast<double>(static_cast<ComputeType<T>>(x)),
                          static_cast<double>(static_cast<ComputeType<E>>(y)));
      if constexpr (std::is_integral_v<T>)
        return TruncToInt<T>(r);
      else
        return static_cast<T>(static_cast<ComputeType<T>>(r));
    }
  });
}

template <typename T>
void Variadic(VariadicOp op, const std::vector<const T*>& ins, T* out, const BroadcastPlan& p) {
  using A = ComputeType<T>;
  if (ins.empty()) throw std::invalid_argument("variadic op without inputs");
  switch (op) {
    case VariadicOp::kSum:
      return Fold(
          ins, out, p, [](A x, A y) { return A(x + y); }, false);
    case VariadicOp::kMean:
      return Fold(
          ins, out, p, [](A x, A y) { return A(x + y); }, true);
    case VariadicOp::kMax:
      if constexpr (kIsFloat<T>)
        return Fold(
            ins, out, p, [](A x, A y) { return (x >= y || std::isnan(x)) ? x : y; }, false);
      else
        return Fold(
            ins, out, p, [](A x, A y) { return x >= y ? x : y; }, false);
    case VariadicOp::kMin:
      if constexpr (kIsFloat<T>)
        return Fold(
            ins, out, p, [](A x, A y) { return (x <= y || std::isnan(x)) ? x : y; }, false);
      else
        return Fold(
            ins, out, p, [](A x, A y) { return x <= y ? x : y; }, false);
  }
}

#define OT_POW_INST(T, E) template void Pow<T, E>(const T*, const E*, T*, const BroadcastPlan&);
// An instantiation list: clang-format 14 reflows it differently on each run.
// clang-format off
#define OT_POW_EXPS(T)                                                                                   \
  OT_POW_INST(T, float) OT_POW_INST(T, double) OT_POW_INST(T, float16) OT_POW_INST(T, bfloat16)          \
  OT_POW_INST(T, int8_t) OT_POW_INST(T, int16_t) OT_POW_INST(T, int32_t) OT_POW_INST(T, int64_t)         \
  OT_POW_INST(T, uint8_t) OT_POW_INST(T, uint16_t) OT_POW_INST(T, uint32_t) OT_POW_INST(T, uint64_t)
// clang-format on
OT_POW_EXPS(float)
OT_POW_EXPS(double)
OT_POW_EXPS(float16)
OT_POW_EXPS(bfloat16)
OT_POW_EXPS(int32_t)
OT_POW_EXPS(int64_t)

#define OT_VARIADIC_INST(T) \
  template void Variadic<T>(VariadicOp, const std::vector<const T*>&, T*, const BroadcastPlan&);
OT_VARIADIC_INST(float)
OT_VARIADIC_INST(double)
OT_VARIADIC_INST(float16)
OT_VARIADIC_INST(bfloat16)
OT_VARIADIC_INST(int8_t)
OT_VARIADIC_INST(int16_t)
OT_VARIADIC_INST(int32_t)
OT_VARIADIC_INST(int64_t)
OT_VARIADIC_INST(uint8_t)
OT_VARIADIC_INST(uint16_t)
OT_VARIADIC_INST(uint32_t)
OT_VARIADIC_INST(uint64_t)

}  // namespace ot::cpu
