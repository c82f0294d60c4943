#include "executor/cpu_features.h"

#include "cpu_ops/cpu_caps.h"

namespace ot {

CpuHalfSupport DetectCpuHalfSupport() {
  const cpu::CpuCaps& c = cpu::GetCpuCaps();
  CpuHalfSupport s;
  s.avx512_bf16 = c.avx512_bf16;
  s.amx_bf16 = c.amx_bf16;
  s.avx512_fp16 = c.avx512_fp16;
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
