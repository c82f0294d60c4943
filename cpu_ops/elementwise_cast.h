// Elementwise type conversion (ONNX Cast) between every numeric type and bool. No IR types.
#pragma once
#include <cstdint>

#include "kernel_common/half.h"

namespace ot::cpu {

// y[i] = convert(x[i]). Floating -> integer truncates toward zero (NaN -> 0; values beyond int64 saturate, then
// wrap to the target width like numpy on x86); integer -> narrower integer wraps; anything -> bool is x != 0;
// bool -> anything is 0/1; float16/bfloat16 round to nearest even. S, D: float, double, float16, bfloat16,
// int8..int64, uint8..uint64, bool.
template <typename S, typename D>
void Cast(const S* x, D* y, int64_t n);

}  // namespace ot::cpu
