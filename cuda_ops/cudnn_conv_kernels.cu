// See cudnn_conv_kernels.h.
#include <cuda_runtime.h>

#include <type_traits>

#include "cuda_ops/cudnn_conv_kernels.h"
#include "cuda_ops/launch_util.cuh"
#include "kernel_common/half.h"

namespace ot::cuda::conv_detail {

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxGrid = 1 << 20;

template <typename T>
__global__ void AddBiasKernel(int64_t total, int64_t c, int64_t s, const T* bias, T* y) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t ch = (i / s) % c;
    const float v = __fadd_rn(static_cast<float>(y[i]), static_cast<float>(bias[ch]));
    if constexpr (std::is_same_v<T, float>)
      y[i] = v;
    else
      y[i] = T(v);
  }
}

}  // namespace

void AddChannelBias(FloatType t, int64_t n, int64_t c, int64_t s, const void* bias, void* y, void* stream) {
  detail::Require(n >= 0 && c > 0 && s >= 0, "AddChannelBias: bad sizes");
  detail::Require(bias && y, "AddChannelBias: null pointer");
  const int64_t total = n * c * s;
  if (total == 0) return;
  const int64_t blocks = (total + kThreads - 1) / kThreads;
  const unsigned grid = static_cast<unsigned>(blocks < kMaxGrid ? blocks : kMaxGrid);
  detail::DispatchFloat(t, [&](auto tag) {
    using T = decltype(tag);
    AddBiasKernel<T><<<grid, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(total, c, s, static_cast<const T*>(bias),
                                                                               static_cast<T*>(y));
  });
  detail::CheckLaunch("AddChannelBias");
}

}  // namespace ot::cuda::conv_detail
