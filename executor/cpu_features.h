// What this CPU can do in half precision, for --amp's hardware check.
#pragma once
#include <string>

#include "graph/dtype.h"

namespace ot {

struct CpuHalfSupport {
  bool avx512_bf16 = false;  // bf16 dot products (oneDNN's bf16 GEMM/conv at ~2x fp32)
  bool amx_bf16 = false;
  bool avx512_fp16 = false;  // fp16 arithmetic
};
CpuHalfSupport DetectCpuHalfSupport();

// "" when training in `half` on this CPU is expected to be faster than fp32; otherwise a warning that says why
// not (half precision still halves the memory of activations and half copies).
std::string AmpHardwareWarning(DataType half, const CpuHalfSupport& cpu = DetectCpuHalfSupport());

}  // namespace ot
