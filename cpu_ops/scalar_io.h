// Element load/store through double for kernels that compute statistics in double: float16/bfloat16 go through
// float (their conversions are defined from float), every other type converts directly.
#pragma once
#include <type_traits>

#include "kernel_common/half.h"

namespace ot::cpu {

template <typename T>
T Store(double v) {
  if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) return T(static_cast<float>(v));
  else return static_cast<T>(v);
}

template <typename T>
double Load(T v) {
  return static_cast<double>(static_cast<std::conditional_t<std::is_same_v<T, double>, double, float>>(v));
}

}  // namespace ot::cpu
