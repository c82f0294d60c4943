#include "cpu_ops/elementwise_unary.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <type_traits>

#include "cpu_ops/elementwise_common.h"
#include "cpu_ops/half_convert.h"
#include "kernel_common/scalar_math.h"

namespace ot::cpu {
namespace {

template <typename T, typename F>
void Map(const T* x, T* y, int64_t n, F f) {
  using A = ComputeType<T>;
  if constexpr (kIsHalf<T>) {
    // Half storage: each tile is widened to float, mapped by the fp32 loop (vectorizable) and rounded once.
    ParallelChunks(n, [&](int64_t b, int64_t e) {
      float buf[kHalfTile];
      for (int64_t t = b; t < e; t += kHalfTile) {
        const int64_t len = std::min(kHalfTile, e - t);
        LoadFloats(x + t, buf, len);
        for (int64_t i = 0; i < len; ++i) buf[i] = f(buf[i]);
        StoreFloats(buf, y + t, len);
      }
    });
  } else {
    ParallelChunks(n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) y[i] = static_cast<T>(f(static_cast<A>(x[i])));
    });
  }
}

// y[i] = f(x[i]) over n floats, compiled for AVX2 and for the baseline (OT_VEC_CLONES; bit-identical results): the
// loops of the ops whose float formula is kernel_common/vec_math.h's. x may equal y. Prefetch: X is read 1 KB ahead
// of the loop -- these formulas are long enough per element that the core keeps few loads in flight, and a tensor
// in memory arrives far below the stream rate without it (executor/kernels/gelu_grad.cc).
template <bool Prefetch, typename F>
OT_VEC_CLONES void FloatLoop(F f, const float* x, float* y, int64_t n) {
  int64_t i = 0;
  if constexpr (Prefetch)
    for (; i + 16 <= n; i += 16) {
      __builtin_prefetch(x + i + 256);
      for (int64_t j = i; j < i + 16; ++j) y[j] = f(x[j]);
    }
  for (; i < n; ++i) y[i] = f(x[i]);
}

// Map for those ops: float and half (in fp32 tiles) run FloatLoop; double runs Map (std:: math, not vectorized).
template <typename T, typename F>
void MapVec(const T* x, T* y, int64_t n, F f) {
  if constexpr (std::is_same_v<T, float>) {
    ParallelChunks(n, [&](int64_t b, int64_t e) { FloatLoop<true>(f, x + b, y + b, e - b); });
  } else if constexpr (kIsHalf<T>) {
    ParallelChunks(n, [&](int64_t b, int64_t e) {
      float buf[kHalfTile];
      for (int64_t t = b; t < e; t += kHalfTile) {
        const int64_t len = std::min(kHalfTile, e - t);
        LoadFloats(x + t, buf, len);
        FloatLoop<false>(f, buf, buf, len);
        StoreFloats(buf, y + t, len);
      }
    });
  } else {
    Map(x, y, n, f);
  }
}

template <typename T>
void UnaryFloat(UnaryOp op, const T* x, T* y, int64_t n, const UnaryParams& p) {
  using A = ComputeType<T>;
  const A alpha = static_cast<A>(p.alpha), beta = static_cast<A>(p.beta), gamma = static_cast<A>(p.gamma);
  const A zero = 0, one = 1;
  switch (op) {
    case UnaryOp::kIdentity:
      return Map(x, y, n, [](A v) { return v; });
    case UnaryOp::kAbs:
      return Map(x, y, n, [](A v) { return std::fabs(v); });
    case UnaryOp::kNeg:
      return Map(x, y, n, [](A v) { return -v; });
    case UnaryOp::kSign:
      return Map(x, y, n, [](A v) { return math::Sign(v); });  // keeps 0 and NaN
    case UnaryOp::kRelu:
      return Map(x, y, n, [](A v) { return math::Relu(v); });  // NaN stays NaN
    case UnaryOp::kShrink:
      return Map(x, y, n, [=](A v) { return v < -alpha ? v + beta : (v > alpha ? v - beta : zero); });
    case UnaryOp::kExp:
      return MapVec(x, y, n, [](A v) { return math::Exp(v); });
    case UnaryOp::kLog:
      return Map(x, y, n, [](A v) { return std::log(v); });
    case UnaryOp::kSqrt:
      return Map(x, y, n, [](A v) { return std::sqrt(v); });
    case UnaryOp::kReciprocal:
      return Map(x, y, n, [=](A v) { return one / v; });
    case UnaryOp::kLeakyRelu:
      return Map(x, y, n, [=](A v) { return math::LeakyRelu(v, alpha); });
    case UnaryOp::kElu:
      return Map(x, y, n, [=](A v) { return v < zero ? alpha * std::expm1(v) : v; });
    case UnaryOp::kSelu:
      return Map(x, y, n, [=](A v) { return v <= zero ? gamma * alpha * std::expm1(v) : gamma * v; });
    case UnaryOp::kSigmoid:
      return MapVec(x, y, n, [](A v) { return math::Sigmoid(v); });
    case UnaryOp::kHardSigmoid:
      return Map(x, y, n, [=](A v) { return std::max(zero, std::min(one, alpha * v + beta)); });
    case UnaryOp::kTanh:
      return MapVec(x, y, n, [](A v) { return math::Tanh(v); });
    case UnaryOp::kErf:
      return MapVec(x, y, n, [](A v) { return math::Erf(v); });
    case UnaryOp::kSoftplus:
      return Map(x, y, n, [=](A v) { return v > zero ? v + std::log1p(std::exp(-v)) : std::log1p(std::exp(v)); });
    case UnaryOp::kSoftsign:
      return Map(x, y, n, [=](A v) { return v / (one + std::fabs(v)); });
    case UnaryOp::kSin:
      return Map(x, y, n, [](A v) { return std::sin(v); });
    case UnaryOp::kCos:
      return Map(x, y, n, [](A v) { return std::cos(v); });
    case UnaryOp::kTan:
      return Map(x, y, n, [](A v) { return std::tan(v); });
    case UnaryOp::kAsin:
      return Map(x, y, n, [](A v) { return std::asin(v); });
    case UnaryOp::kAcos:
      return Map(x, y, n, [](A v) { return std::acos(v); });
    case UnaryOp::kAtan:
      return Map(x, y, n, [](A v) { return std::atan(v); });
    case UnaryOp::kSinh:
      return Map(x, y, n, [](A v) { return std::sinh(v); });
    case UnaryOp::kCosh:
      return Map(x, y, n, [](A v) { return std::cosh(v); });
    case UnaryOp::kAsinh:
      return Map(x, y, n, [](A v) { return std::asinh(v); });
    case UnaryOp::kAcosh:
      return Map(x, y, n, [](A v) { return std::acosh(v); });
    case UnaryOp::kAtanh:
      return Map(x, y, n, [](A v) { return std::atanh(v); });
    case UnaryOp::kFloor:
      return Map(x, y, n, [](A v) { return std::floor(v); });
    case UnaryOp::kCeil:
      return Map(x, y, n, [](A v) { return std::ceil(v); });
    case UnaryOp::kRound:
      return Map(x, y, n, [](A v) { return std::nearbyint(v); });  // half to even
    case UnaryOp::kThresholdedRelu:
      return Map(x, y, n, [=](A v) { return v > alpha ? v : zero; });
    case UnaryOp::kCelu:
      return Map(x, y, n, [=](A v) { return std::max(zero, v) + std::min(zero, alpha * std::expm1(v / alpha)); });
    case UnaryOp::kHardSwish:
      return Map(x, y, n, [=](A v) { return v * std::max(zero, std::min(one, v / A(6) + A(0.5))); });
    case UnaryOp::kMish:
      return Map(x, y, n, [=](A v) {
        A sp = v > zero ? v + std::log1p(std::exp(-v)) : std::log1p(std::exp(v));
        return v * std::tanh(sp);
      });
    // The formulas the fused-cluster interpreter (cpu_ops/fused_elementwise) and CUDA code share (Exp, Sigmoid, Tanh
    // and Erf above too: kernel_common/scalar_math.h, vec_math.h for float).
    case UnaryOp::kGelu:
      return MapVec(x, y, n, [](A v) { return math::GeluErf(v); });
    case UnaryOp::kGeluTanh:
      return MapVec(x, y, n, [](A v) { return math::GeluTanh(v); });
  }
}

template <typename T>
void UnaryInt(UnaryOp op, const T* x, T* y, int64_t n, const UnaryParams& p) {
  using U = std::make_unsigned_t<T>;
  switch (op) {
    case UnaryOp::kIdentity:
      return Map(x, y, n, [](T v) { return v; });
    case UnaryOp::kAbs:
      if constexpr (std::is_signed_v<T>)
        return Map(x, y, n, [](T v) { return v < 0 ? T(U(0) - U(v)) : v; });
      else
        return Map(x, y, n, [](T v) { return v; });
    case UnaryOp::kNeg:
      return Map(x, y, n, [](T v) { return T(U(0) - U(v)); });
    case UnaryOp::kSign:
      return Map(x, y, n, [](T v) { return T(v > 0 ? 1 : (v < 0 ? -1 : 0)); });
    case UnaryOp::kRelu:
      return Map(x, y, n, [](T v) { return v < 0 ? T(0) : v; });
    case UnaryOp::kShrink: {
      const double lambd = p.alpha, bias = p.beta;
      return Map(x, y, n, [=](T v) {
        double d = static_cast<double>(v);
        return static_cast<T>(d < -lambd ? d + bias : (d > lambd ? d - bias : 0.0));
      });
    }
    default:
      throw std::invalid_argument("unary op not defined for integers");
  }
}

}  // namespace

bool UnarySupportsIntegers(UnaryOp op) { return static_cast<int>(op) < static_cast<int>(UnaryOp::kExp); }

template <typename T>
void Unary(UnaryOp op, const T* x, T* y, int64_t n, const UnaryParams& p) {
  if constexpr (kIsFloat<T>)
    UnaryFloat(op, x, y, n, p);
  else
    UnaryInt(op, x, y, n, p);
}

void LogicalNot(const bool* x, bool* y, int64_t n) {
  ParallelChunks(n, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = !x[i];
  });
}

template <typename T>
void IsNaN(const T* x, bool* y, int64_t n) {
  ParallelChunks(n, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = std::isnan(static_cast<ComputeType<T>>(x[i]));
  });
}

template <typename T>
void IsInf(const T* x, bool* y, int64_t n, bool pos, bool neg) {
  ParallelChunks(n, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      auto v = static_cast<ComputeType<T>>(x[i]);
      y[i] = std::isinf(v) && (v > 0 ? pos : neg);
    }
  });
}

template <typename T>
void Clip(const T* x, T* y, int64_t n, T lo, T hi) {
  using A = ComputeType<T>;
  const A l = static_cast<A>(lo), h = static_cast<A>(hi);
  Map(x, y, n, [=](A v) {
    A r = v < l ? l : v;
    return r > h ? h : r;
  });
}

uint64_t MixBits(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

float DropoutUniform(uint64_t key, int64_t i) {
  uint64_t h = MixBits(key ^ MixBits(static_cast<uint64_t>(i)));
  return static_cast<float>(h >> 40) * (1.0f / 16777216.0f);  // 24 random bits -> [0, 1)
}

template <typename T, typename M>
void DropoutTrain(const T* x, T* y, M* mask, int64_t n, float ratio, uint64_t key) {
  using A = ComputeType<T>;
  const A scale = ratio == 0.f ? A(1) : A(1) / (A(1) - static_cast<A>(ratio));
  ParallelChunks(n, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const bool keep = ratio == 0.f || DropoutUniform(key, i) >= ratio;
      if (ratio == 0.f)
        y[i] = x[i];
      else
        y[i] = static_cast<T>(keep ? static_cast<A>(x[i]) * scale : A(0));
      if (mask) {
        if constexpr (std::is_same_v<M, bool>)
          mask[i] = keep;
        else
          mask[i] = static_cast<M>(static_cast<ComputeType<M>>(keep ? 1 : 0));
      }
    }
  });
}

#define OT_UNARY_INST(T) template void Unary<T>(UnaryOp, const T*, T*, int64_t, const UnaryParams&);
#define OT_CLIP_INST(T) template void Clip<T>(const T*, T*, int64_t, T, T);
// An instantiation list: clang-format 14 reflows it differently on each run.
// clang-format off
#define OT_FLOAT_INST(T)                                        \
  template void IsNaN<T>(const T*, bool*, int64_t);             \
  template void IsInf<T>(const T*, bool*, int64_t, bool, bool); \
  template void DropoutTrain<T, bool>(const T*, T*, bool*, int64_t, float, uint64_t); \
  template void DropoutTrain<T, T>(const T*, T*, T*, int64_t, float, uint64_t);
#define OT_NUMERIC_TYPES(X) \
  X(float) X(double) X(float16) X(bfloat16) X(int8_t) X(int16_t) X(int32_t) X(int64_t) X(uint8_t) X(uint16_t) \
  X(uint32_t) X(uint64_t)
// clang-format on
OT_NUMERIC_TYPES(OT_UNARY_INST)
OT_NUMERIC_TYPES(OT_CLIP_INST)
OT_FLOAT_INST(float)
OT_FLOAT_INST(double)
OT_FLOAT_INST(float16)
OT_FLOAT_INST(bfloat16)

}  // namespace ot::cpu
