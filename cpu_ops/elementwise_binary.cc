#include "cpu_ops/elementwise_binary.h"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <type_traits>

#include "cpu_ops/elementwise_loops.h"

namespace ot::cpu {
namespace {

// Wide unsigned type for wrapping integer arithmetic without promotion to (overflowing) int.
template <typename T>
using WideU = std::conditional_t<sizeof(T) <= 4, uint32_t, uint64_t>;

template <typename T, typename G>
void Arith(const T* a, const T* b, T* out, const BroadcastPlan& p, G g) {
  using A = ComputeType<T>;
  if constexpr (kIsHalf<T>)
    BinaryLoopHalf(a, b, out, p, [&](float x, float y) { return static_cast<float>(g(x, y)); });
  else
    BinaryLoop(a, b, out, p, [&](T x, T y) { return static_cast<T>(g(static_cast<A>(x), static_cast<A>(y))); });
}

template <typename T>
void ArithFloat(BinaryOp op, const T* a, const T* b, T* out, const BroadcastPlan& p) {
  using A = ComputeType<T>;
  switch (op) {
    case BinaryOp::kAdd:
      return Arith(a, b, out, p, [](A x, A y) { return x + y; });
    case BinaryOp::kSub:
      return Arith(a, b, out, p, [](A x, A y) { return x - y; });
    case BinaryOp::kMul:
      return Arith(a, b, out, p, [](A x, A y) { return x * y; });
    case BinaryOp::kDiv:
      return Arith(a, b, out, p, [](A x, A y) { return x / y; });
    // NaN in either operand gives NaN (numpy maximum/minimum).
    case BinaryOp::kMax:
      return Arith(a, b, out, p, [](A x, A y) { return (x >= y || std::isnan(x)) ? x : y; });
    case BinaryOp::kMin:
      return Arith(a, b, out, p, [](A x, A y) { return (x <= y || std::isnan(x)) ? x : y; });
    case BinaryOp::kFmod:
      return Arith(a, b, out, p, [](A x, A y) { return std::fmod(x, y); });
    case BinaryOp::kMod:
      return Arith(a, b, out, p, [](A x, A y) {
        A r = std::fmod(x, y);
        if (r != A(0) && ((r < A(0)) != (y < A(0)))) r += y;
        return r;
      });
    case BinaryOp::kPRelu:
      return Arith(a, b, out, p, [](A x, A y) { return x < A(0) ? x * y : x; });
    default:
      throw std::invalid_argument("binary op not defined for floating types");
  }
}

template <typename T>
void ArithInt(BinaryOp op, const T* a, const T* b, T* out, const BroadcastPlan& p) {
  using W = WideU<T>;
  constexpr bool kSigned = std::is_signed_v<T>;
  switch (op) {
    case BinaryOp::kAdd:
      return Arith(a, b, out, p, [](T x, T y) { return T(W(x) + W(y)); });
    case BinaryOp::kSub:
      return Arith(a, b, out, p, [](T x, T y) { return T(W(x) - W(y)); });
    case BinaryOp::kMul:
      return Arith(a, b, out, p, [](T x, T y) { return T(W(x) * W(y)); });
    case BinaryOp::kDiv:
      return Arith(a, b, out, p, [](T x, T y) {
        if (y == 0) return T(0);
        if constexpr (kSigned)
          if (y == T(-1)) return T(W(0) - W(x));  // avoids the min / -1 trap
        return T(x / y);
      });
    case BinaryOp::kMax:
      return Arith(a, b, out, p, [](T x, T y) { return x >= y ? x : y; });
    case BinaryOp::kMin:
      return Arith(a, b, out, p, [](T x, T y) { return x <= y ? x : y; });
    case BinaryOp::kFmod:
      return Arith(a, b, out, p, [](T x, T y) {
        if (y == 0) return T(0);
        if constexpr (kSigned)
          if (y == T(-1)) return T(0);
        return T(x % y);
      });
    case BinaryOp::kMod:
      return Arith(a, b, out, p, [](T x, T y) {
        if (y == 0) return T(0);
        if constexpr (kSigned) {
          if (y == T(-1)) return T(0);
          T r = T(x % y);
          if (r != 0 && ((r < 0) != (y < 0))) r = T(r + y);
          return r;
        } else {
          return T(x % y);
        }
      });
    case BinaryOp::kShiftLeft:
      if constexpr (!kSigned)
        return Arith(a, b, out, p, [](T x, T y) { return y >= sizeof(T) * 8 ? T(0) : T(W(x) << y); });
      break;
    case BinaryOp::kShiftRight:
      if constexpr (!kSigned)
        return Arith(a, b, out, p, [](T x, T y) { return y >= sizeof(T) * 8 ? T(0) : T(x >> y); });
      break;
    case BinaryOp::kPRelu:
      return Arith(a, b, out, p, [](T x, T y) { return x < 0 ? T(W(x) * W(y)) : x; });
    default:
      break;
  }
  throw std::invalid_argument("binary op not defined for this integer type");
}

}  // namespace

bool BinarySupports(BinaryOp op, bool is_float, bool is_integer, bool is_unsigned, bool is_bool) {
  switch (op) {
    case BinaryOp::kAdd:
    case BinaryOp::kSub:
    case BinaryOp::kMul:
    case BinaryOp::kDiv:
    case BinaryOp::kMax:
    case BinaryOp::kMin:
    case BinaryOp::kMod:
    case BinaryOp::kFmod:
    case BinaryOp::kPRelu:
      return is_float || is_integer;
    case BinaryOp::kShiftLeft:
    case BinaryOp::kShiftRight:
      return is_integer && is_unsigned;
    case BinaryOp::kEqual:
    case BinaryOp::kLess:
    case BinaryOp::kGreater:
    case BinaryOp::kLessOrEqual:
    case BinaryOp::kGreaterOrEqual:
      return is_float || is_integer || is_bool;
    case BinaryOp::kAnd:
    case BinaryOp::kOr:
    case BinaryOp::kXor:
      return is_bool;
  }
  return false;
}

template <typename T>
void Binary(BinaryOp op, const T* a, const T* b, void* out, const BroadcastPlan& plan) {
  if (BinaryOutputsBool(op)) return CompareBinary<T>(op, a, b, static_cast<bool*>(out), plan);
  if constexpr (kIsFloat<T>)
    ArithFloat(op, a, b, static_cast<T*>(out), plan);
  else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
    ArithInt(op, a, b, static_cast<T*>(out), plan);
  else
    throw std::invalid_argument("arithmetic on bool");
}

#define OT_BINARY_INST(T) template void Binary<T>(BinaryOp, const T*, const T*, void*, const BroadcastPlan&);
OT_BINARY_INST(float)
OT_BINARY_INST(double)
OT_BINARY_INST(float16)
OT_BINARY_INST(bfloat16)
OT_BINARY_INST(int8_t)
OT_BINARY_INST(int16_t)
OT_BINARY_INST(int32_t)
OT_BINARY_INST(int64_t)
OT_BINARY_INST(uint8_t)
OT_BINARY_INST(uint16_t)
OT_BINARY_INST(uint32_t)
OT_BINARY_INST(uint64_t)
OT_BINARY_INST(bool)

}  // namespace ot::cpu
