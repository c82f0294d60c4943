#include "cpu_ops/dnnl_util.h"

#include <omp.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>

#include "cpu_ops/half_convert.h"
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

size_t DnnlCallHeapBytes(int memory_args) {
  return static_cast<size_t>(memory_args) * 1024 + static_cast<size_t>(OmpThreads()) * 17 * 1024;
}

HalfGemmMode GetHalfGemmMode() {
  static const HalfGemmMode mode = [] {
    const char* e = std::getenv("ONNXTRAIN_CPU_HALF_GEMM");
    const std::string v = e ? e : "";
    return v == "native" ? HalfGemmMode::kNative : v == "f32" ? HalfGemmMode::kF32 : HalfGemmMode::kAuto;
  }();
  return mode;
}

bool IsReferenceImpl(const char* impl_info) { return impl_info == nullptr || std::strstr(impl_info, "ref") != nullptr; }

size_t DnnTypeSize(DnnType t) { return t == DnnType::kF32 ? 4 : 2; }

namespace {
// Splits [0, n) into fixed chunks (deterministic, element-wise so any split gives the same result).
template <typename F>
void ForChunks(int64_t n, F&& f) {
  const int64_t grain = 1 << 16;
  if (n <= grain) {
    f(int64_t{0}, n);
    return;
  }
  tbb::parallel_for(int64_t{0}, (n + grain - 1) / grain,
                    [&](int64_t c) { f(c * grain, std::min(n, (c + 1) * grain)); });
}
}  // namespace

void ToFloat(DnnType t, const void* src, float* dst, int64_t n) {
  ForChunks(n, [&](int64_t b, int64_t e) {
    switch (t) {
      case DnnType::kF32:
        for (int64_t i = b; i < e; ++i) dst[i] = static_cast<const float*>(src)[i];
        break;
      case DnnType::kF16:
        HalfToFloat(static_cast<const float16*>(src) + b, dst + b, e - b);
        break;
      case DnnType::kBF16:
        Bf16ToFloat(static_cast<const bfloat16*>(src) + b, dst + b, e - b);
        break;
    }
  });
}

void FromFloat(DnnType t, const float* src, void* dst, int64_t n) {
  ForChunks(n, [&](int64_t b, int64_t e) {
    switch (t) {
      case DnnType::kF32:
        for (int64_t i = b; i < e; ++i) static_cast<float*>(dst)[i] = src[i];
        break;
      case DnnType::kF16:
        FloatToHalf(src + b, static_cast<float16*>(dst) + b, e - b);
        break;
      case DnnType::kBF16:
        FloatToBf16(src + b, static_cast<bfloat16*>(dst) + b, e - b);
        break;
    }
  });
}

}  // namespace ot::cpu
