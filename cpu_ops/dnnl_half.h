// Choosing between a native half (f16/bf16) oneDNN primitive and f32 on converted operands, shared by the GEMM
// and convolution wrappers (cpu_ops/matmul.cc, cpu_ops/conv.cc). Includes oneDNN's header: for those files only.
#pragma once
#include <functional>
#include <oneapi/dnnl/dnnl.hpp>

#include "cpu_ops/dnnl_util.h"

namespace ot::cpu {

inline dnnl::memory::data_type ToDnnl(DnnType t) {
  switch (t) {
    case DnnType::kF16:
      return dnnl::memory::data_type::f16;
    case DnnType::kBF16:
      return dnnl::memory::data_type::bf16;
    default:
      return dnnl::memory::data_type::f32;
  }
}

// Makes the half primitive with `make(ToDnnl(t))` when the mode allows and oneDNN has a real implementation (`make`
// throws NotNativeHalf on a reference one); returns true when the caller must run f32 on converted operands instead.
inline bool MakeNativeHalfOrConvert(DnnType t, const std::function<void(dnnl::memory::data_type)>& make) {
  if (GetHalfGemmMode() == HalfGemmMode::kF32) return true;
  try {
    make(ToDnnl(t));
    return false;
  } catch (const dnnl::error&) {
    return true;
  } catch (const NotNativeHalf&) {
    return true;
  }
}

}  // namespace ot::cpu
