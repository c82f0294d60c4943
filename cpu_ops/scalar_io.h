// Element load/store through double for kernels that compute statistics in double: float16/bfloat16 are stored
// rounded once from the double (through a round-to-odd float), every other type converts directly.
#pragma once
#include <type_traits>

#include "cpu_ops/half_convert.h"
#include "kernel_common/half.h"

namespace ot::cpu {

template <typename T>
T Store(double v) {
  if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>)
    return HalfFromDouble<T>(v);
  else
    return static_cast<T>(v);
}

template <typename T>
double Load(T v) {
  return static_cast<double>(static_cast<std::conditional_t<std::is_same_v<T, double>, double, float>>(v));
}

}  // namespace ot::cpu
