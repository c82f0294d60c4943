// Unary elementwise kernels over contiguous buffers: activations, transcendental functions, rounding, Clip,
// IsNaN/IsInf, Not, Dropout. Floating types compute in float (float16/bfloat16/float32) or double and round
// on store. No IR types.
#pragma once
#include <cstdint>

#include "kernel_common/half.h"

namespace ot::cpu {

enum class UnaryOp {
  kIdentity,
  kAbs,
  kNeg,
  kSign,
  kRelu,
  kShrink,  // also for integers
  kExp,
  kLog,
  kSqrt,
  kReciprocal,
  kLeakyRelu,
  kElu,
  kSelu,
  kSigmoid,
  kHardSigmoid,
  kTanh,
  kErf,
  kSoftplus,
  kSoftsign,
  kSin,
  kCos,
  kTan,
  kAsin,
  kAcos,
  kAtan,
  kSinh,
  kCosh,
  kAsinh,
  kAcosh,
  kAtanh,
  kFloor,
  kCeil,
  kRound,
  kThresholdedRelu,
  kCelu,
  kHardSwish,
  kMish,
  kGelu,
  kGeluTanh,
};

// Attribute values; which field means what, per op:
//   LeakyRelu alpha; Elu alpha; Selu alpha, gamma; HardSigmoid alpha, beta; ThresholdedRelu alpha;
//   Celu alpha; Shrink alpha = lambd, beta = bias.
struct UnaryParams {
  float alpha = 0.f;
  float beta = 0.f;
  float gamma = 0.f;
};

// True when `op` is defined for integer element types (the ops before kExp in the enum).
bool UnarySupportsIntegers(UnaryOp op);

// y[i] = op(x[i]) for i < n. T: float, double, float16, bfloat16, and (for UnarySupportsIntegers ops) the
// signed/unsigned integers. Integer Abs/Neg wrap like two's complement. x and y may be the same buffer.
template <typename T>
void Unary(UnaryOp op, const T* x, T* y, int64_t n, const UnaryParams& p = {});

// Not over bool.
void LogicalNot(const bool* x, bool* y, int64_t n);

// IsNaN / IsInf (detect_positive, detect_negative) over floating types.
template <typename T>
void IsNaN(const T* x, bool* y, int64_t n);
template <typename T>
void IsInf(const T* x, bool* y, int64_t n, bool detect_positive, bool detect_negative);

// y = min(max(x, lo), hi) (so lo > hi gives hi everywhere, as ONNX specifies); NaN passes through.
// T: any numeric type.
template <typename T>
void Clip(const T* x, T* y, int64_t n, T lo, T hi);

// Dropout in training mode: keep[i] = u(key, i) >= ratio with u a counter-based uniform draw in [0, 1) (the same
// for any thread count); y = keep ? x / (1 - ratio) : 0. ratio == 0 gives y = x exactly and keep all true.
// mask may be null; M is bool (opset >= 10) or T (older opsets write 1/0 in the input's type).
template <typename T, typename M>
void DropoutTrain(const T* x, T* y, M* mask, int64_t n, float ratio, uint64_t key);

// The uniform draw of DropoutTrain, exposed for tests: element i of the stream `key`.
float DropoutUniform(uint64_t key, int64_t i);
// Mixes a 64-bit value (splitmix64 finaliser); used to derive per-call keys from seed and step.
uint64_t MixBits(uint64_t x);

}  // namespace ot::cpu
