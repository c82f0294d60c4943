#include "executor/cpu_features.h"

namespace ot {

CpuHalfSupport DetectCpuHalfSupport() {
  CpuHalfSupport s;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  s.avx512_bf16 = __builtin_cpu_supports("avx512bf16");
  s.amx_bf16 = __builtin_cpu_supports("amx-bf16");
  s.avx512_fp16 = __builtin_cpu_supports("avx512fp16");
#endif
  return s;
}

std::string AmpHardwareWarning(DataType half, const CpuHalfSupport& cpu) {
  if (half == DataType::kBFloat16 && !cpu.avx512_bf16 && !cpu.amx_bf16)
    return "--amp=bf16: this CPU has no AVX512-BF16 or AMX-BF16 instructions, so bf16 GEMMs and convolutions are "
           "converted to fp32 and computed there: half precision will be slower than fp32 on this machine (it still "
           "halves the memory of saved activations)";
  if (half == DataType::kFloat16 && !cpu.avx512_fp16)
    return "--amp=fp16: this CPU has no fp16 arithmetic (AVX512-FP16), so fp16 is a storage format here and every "
           "op converts to fp32 and back: half precision will be slower than fp32 on this machine (it still halves "
           "the memory of saved activations); fp16 pays on a GPU of compute capability 7.0 or newer";
  return "";
}

}  // namespace ot
