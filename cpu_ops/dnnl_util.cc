#include "cpu_ops/dnnl_util.h"

#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>

#include "cpu_ops/threads.h"
#include "kernel_common/half.h"

namespace ot::cpu {

// One setting process-wide: the executor's --threads sets it through cpu_ops/threads.h.
int OmpThreads() { return IntraOpThreads(); }

void SetOmpThreads(int n) { SetIntraOpThreads(n > 0 ? n : 0); }

dnnl::engine& DnnlEngine() {
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}

dnnl::stream& DnnlStream() {
  static dnnl::stream s(DnnlEngine());
  return s;
}

void PrepareDnnlCall() { omp_set_num_threads(OmpThreads()); }

size_t DnnTypeSize(DnnType t) { return t == DnnType::kF32 ? 4 : 2; }

void ToFloat(DnnType t, const void* src, float* dst, int64_t n) {
  switch (t) {
    case DnnType::kF32:
      for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<const float*>(src)[i];
      break;
    case DnnType::kF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = HalfBitsToFloat(static_cast<const uint16_t*>(src)[i]);
      break;
    case DnnType::kBF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = Bf16BitsToFloat(static_cast<const uint16_t*>(src)[i]);
      break;
  }
}

void FromFloat(DnnType t, const float* src, void* dst, int64_t n) {
  switch (t) {
    case DnnType::kF32:
      for (int64_t i = 0; i < n; ++i) static_cast<float*>(dst)[i] = src[i];
      break;
    case DnnType::kF16:
      for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(dst)[i] = FloatToHalfBits(src[i]);
      break;
    case DnnType::kBF16:
      for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(dst)[i] = FloatToBf16Bits(src[i]);
      break;
  }
}

}  // namespace ot::cpu
