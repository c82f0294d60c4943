#include "cpu_ops/cpu_caps.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace ot::cpu {

namespace {
CpuCaps Detect() {
  CpuCaps c;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, cx = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &cx, &d)) return c;
  const bool osxsave = cx & (1u << 27);
  unsigned long long xcr0 = 0;
  if (osxsave) {
    unsigned lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    xcr0 = (static_cast<unsigned long long>(hi) << 32) | lo;
  }
  const bool ymm = (xcr0 & 0x6) == 0x6;            // SSE and AVX state saved by the OS
  const bool zmm = ymm && (xcr0 & 0xe0) == 0xe0;   // opmask and the upper ZMM state
  const bool tiles = (xcr0 & 0x60000) == 0x60000;  // AMX tile config and data
  c.avx = ymm && (cx & (1u << 28));
  c.f16c = c.avx && (cx & (1u << 29));
  unsigned max_leaf = __get_cpuid_max(0, nullptr);
  if (max_leaf >= 7) {
    __cpuid_count(7, 0, a, b, cx, d);
    c.avx2 = c.avx && (b & (1u << 5));
    c.avx512_fp16 = zmm && (d & (1u << 23));
    c.amx_bf16 = tiles && (d & (1u << 22));
    __cpuid_count(7, 1, a, b, cx, d);
    c.avx512_bf16 = zmm && (a & (1u << 5));
  }
#endif
  return c;
}
}  // namespace

const CpuCaps& GetCpuCaps() {
  static const CpuCaps caps = Detect();
  return caps;
}

}  // namespace ot::cpu
