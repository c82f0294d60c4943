// Our small kernels beside cuDNN's convolution (cudnn_conv_kernels.cu), internal to cuda_ops.
#pragma once
#include <cstdint>

#include "cuda_ops/row_kernels.h"  // FloatType

namespace ot::cuda::conv_detail {

// y[b, ch, j] += bias[ch] for y [n, c, s] of type t (bias of type t): the sum in fp32, rounded once to t (what
// cudnnAddTensor computes, but for every type -- the legacy API documents no bfloat16 for it -- and with no
// descriptor). Asynchronous on `stream`; std::invalid_argument / std::runtime_error as the other launchers.
void AddChannelBias(FloatType t, int64_t n, int64_t c, int64_t s, const void* bias, void* y, void* stream);

}  // namespace ot::cuda::conv_detail
