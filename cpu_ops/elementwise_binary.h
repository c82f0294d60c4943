// Binary, ternary and variadic elementwise kernels with numpy broadcasting: arithmetic, Pow with mixed types,
// comparisons and logic (bool outputs), Mod, BitShift, PRelu, Where, Sum/Mean/Max/Min. Operands are broadcast
// through a BroadcastPlan made once per plan (MakeBroadcastPlan, cpu_ops/elementwise_common.h). No IR types.
#pragma once
#include <cstdint>
#include <vector>

#include "cpu_ops/elementwise_common.h"
#include "kernel_common/half.h"

namespace ot::cpu {

enum class BinaryOp {
  // out has the operands' type T:
  kAdd,
  kSub,
  kMul,
  kDiv,
  kMax,
  kMin,
  kMod,   // Python/numpy sign semantics (result has the divisor's sign); integer x % 0 = 0
  kFmod,  // C fmod / % semantics (result has the dividend's sign)
  kShiftLeft,
  kShiftRight,  // unsigned integers; shifts >= the bit width give 0
  kPRelu,       // a < 0 ? a * b : a
  // out is bool:
  kEqual,
  kLess,
  kGreater,
  kLessOrEqual,
  kGreaterOrEqual,
  kAnd,
  kOr,
  kXor,  // bool operands
};

inline bool BinaryOutputsBool(BinaryOp op) { return static_cast<int>(op) >= static_cast<int>(BinaryOp::kEqual); }
// Whether `op` is defined for element type class: float (incl. half), signed/unsigned integer, bool.
bool BinarySupports(BinaryOp op, bool is_float, bool is_integer, bool is_unsigned, bool is_bool);

// out[i] = op(a[.], b[.]) over plan (operand 0 = a, operand 1 = b). out is T* or bool* (BinaryOutputsBool).
// Integer Add/Sub/Mul wrap; integer Div truncates toward zero and x / 0 = 0. T: float, double, float16,
// bfloat16, all integers, bool (comparisons and logic only).
template <typename T>
void Binary(BinaryOp op, const T* a, const T* b, void* out, const BroadcastPlan& plan);

// out[i] = pow(a, b) in out's (= a's) type. Integer base and exponent use exact integer powers (wrapping);
// otherwise the power is computed in double and converted (truncated toward zero for an integer base).
// T: float, double, float16, bfloat16, int32, int64. E: any numeric type.
template <typename T, typename E>
void Pow(const T* a, const E* b, T* out, const BroadcastPlan& plan);

// out = cond ? x : y over plan (operands cond, x, y). T: any type.
template <typename T>
void Where(const bool* cond, const T* x, const T* y, T* out, const BroadcastPlan& plan);

enum class VariadicOp { kSum, kMean, kMax, kMin };
// out = fold of all inputs (operand k = ins[k]), accumulated in the compute type (float for half types) in input
// order, rounded once on store. Alias-safe: every output element reads all its inputs before it is written.
template <typename T>
void Variadic(VariadicOp op, const std::vector<const T*>& ins, T* out, const BroadcastPlan& plan);

}  // namespace ot::cpu
