// Lp pooling on the GPU (ONNX LpPool / GlobalLpPool forward): y = (sum over the window of |x|^p)^(1/p), our own
// kernels (cuDNN has no Lp mode). X [N, C, in...] -> Y [N, C, out...], 1-D to 3-D, any kernel_shape, strides,
// dilations and begin/end pads (padding is zero, so it adds nothing), out sizes from the caller's geometry (floor or
// ceil mode: the kernel only needs where each window starts, o * stride - pad_begin). The CPU's loops
// (cpu_ops/pool.h, PoolKind::kLp) are the reference and the contract: terms |x|^p and their sum in double (p = 1:
// |x|, p = 2: x*x, else the integer power), the root sqrt (p = 2) or pow(sum, 1/p) in double, rounded once to the
// type (f32/f16/bf16); a window with no element inside the input gives 0.
//
// Two kernels, both deterministic (a fixed summation order that does not depend on scheduling): windows of fewer
// than 256 elements run one thread per output (the sum in window order); larger ones (GlobalLpPool over a plane, big
// kernels) one block per output, the block's threads striding over the window, their partials combined by a
// fixed-order shuffle tree (launch_util.cuh BlockSum).
//
// Plain host C++ over device pointers and a stream (void* = cudaStream_t); no IR types. Asynchronous; argument
// errors are std::invalid_argument (checked on the host before any CUDA call), a failed launch std::runtime_error.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "cuda_ops/row_kernels.h"  // FloatType

namespace ot::cuda {

struct LpPoolDesc {
  FloatType type = FloatType::kF32;  // X and Y
  int64_t p = 2;                     // the norm's order, >= 1
  int64_t n = 0, c = 0;
  // One value per spatial dim (1 to 3); dilations 1 = dense; pads >= 0.
  std::vector<int64_t> in_spatial, out_spatial, kernel, strides, dilations, pad_begin, pad_end;
};

std::string ToString(const LpPoolDesc& d);

// Host-only. Throws std::invalid_argument when the desc is malformed: 0 or more than 3 spatial dims, vectors of
// different lengths, n / c / sizes negative, kernel, strides or dilations not positive, negative pads, p < 1.
void ValidateLpPool(const LpPoolDesc& d);

// y = Lp pooling of x (every element of y written). Empty y: nothing launched.
void LpPoolForward(const LpPoolDesc& d, const void* x, void* y, void* stream);

}  // namespace ot::cuda
