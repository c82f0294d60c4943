// What the x86 CPU this runs on supports, from CPUID and XGETBV (also the OS's saving of the wider registers), read
// once. Written with <cpuid.h> rather than __builtin_cpu_supports, whose feature names differ between GCC and
// Clang versions (Clang 14 knows no "f16c").
#pragma once

namespace ot::cpu {

struct CpuCaps {
  bool avx = false, avx2 = false, f16c = false;
  bool avx512_bf16 = false;  // bf16 dot products
  bool avx512_fp16 = false;  // fp16 arithmetic
  bool amx_bf16 = false;
};
const CpuCaps& GetCpuCaps();

}  // namespace ot::cpu
