// Host and device helpers shared by the hand-written CUDA kernels of cuda_ops/ (row_kernels, data_kernels,
// optimizer_kernels): argument and launch checks, workspace alignment, dispatch over the storage types, and the
// block-wide fixed-order sum their deterministic reductions use. Internal to cuda_ops (no public header includes it).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "cuda_ops/row_kernels.h"  // FloatType, IndexType
#include "kernel_common/half.h"

namespace ot::cuda::detail {

// Throws std::runtime_error("what: <CUDA message>") when the last launch failed.
inline void CheckLaunch(const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
// Argument checks, before any CUDA call: std::invalid_argument(what).
inline void Require(bool ok, const char* what) {
  if (!ok) throw std::invalid_argument(what);
}
inline size_t Align256(size_t b) { return (b + 255) & ~size_t{255}; }

template <typename F>
void DispatchFloat(FloatType t, F&& f) {
  switch (t) {
    case FloatType::kF32:
      f(float{});
      return;
    case FloatType::kF16:
      f(float16{});
      return;
    case FloatType::kBF16:
      f(bfloat16{});
      return;
  }
  throw std::invalid_argument("cuda_ops: unknown FloatType");
}
template <typename F>
void DispatchIndex(IndexType t, F&& f) {
  switch (t) {
    case IndexType::kI32:
      f(int32_t{});
      return;
    case IndexType::kI64:
      f(int64_t{});
      return;
  }
  throw std::invalid_argument("cuda_ops: unknown IndexType");
}
// Elements of esz bytes as unsigned words (bits moved, never converted); `what` names the caller in the error.
template <typename F>
void DispatchBits(size_t esz, const char* what, F&& f) {
  switch (esz) {
    case 1:
      f(uint8_t{});
      return;
    case 2:
      f(uint16_t{});
      return;
    case 4:
      f(uint32_t{});
      return;
    case 8:
      f(uint64_t{});
      return;
  }
  throw std::invalid_argument(std::string(what) + ": element size must be 1, 2, 4 or 8 bytes, not " +
                              std::to_string(esz));
}

// Sum over the block (blockDim.x a multiple of 32, <= 1024): shuffle-down tree in each warp, then the warps'
// partials by warp 0 in the same tree. sh: 33 elements of shared memory. Every thread gets the result, which depends
// only on the values and blockDim (never on scheduling).
template <typename A>
__device__ A BlockSum(A v, A* sh) {
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  if (lane == 0) sh[warp] = v;
  __syncthreads();
  if (warp == 0) {
    const unsigned nw = blockDim.x >> 5;
    A w = lane < nw ? sh[lane] : A(0);
    for (int o = 16; o > 0; o >>= 1) w += __shfl_down_sync(0xffffffffu, w, o);
    if (lane == 0) sh[32] = w;
  }
  __syncthreads();
  const A r = sh[32];
  __syncthreads();  // sh is free again for the next reduction
  return r;
}

// Element loads as float / double (a half element widened exactly) and stores of a float / double result rounded
// once to T (double -> half through a round-to-odd float: no double rounding), shared by the row and BatchNorm
// kernels.
template <typename T>
__device__ __forceinline__ float LdF(const T* p, int64_t i) {
  return static_cast<float>(p[i]);
}
template <typename T>
__device__ __forceinline__ double LdD(const T* p, int64_t i) {
  return static_cast<double>(static_cast<float>(p[i]));
}

// double -> float rounded to odd (cpu_ops/half_convert.h's RoundToOddFloat): rounding that float to a half type
// gives the correctly rounded half of the double (no double rounding).
__device__ __forceinline__ float RoundToOddFloat(double d) {
  const float f = static_cast<float>(d);
  const double back = static_cast<double>(f);
  uint32_t b = __float_as_uint(f);
  b -= static_cast<uint32_t>(fabs(back) > fabs(d));
  b |= static_cast<uint32_t>(back != d);
  return __uint_as_float(b);
}

template <typename T>
__device__ __forceinline__ T FromF(float v) {
  if constexpr (std::is_same_v<T, float>)
    return v;
  else
    return T(v);
}
template <typename T>
__device__ __forceinline__ T FromD(double v) {
  if constexpr (std::is_same_v<T, float>)
    return static_cast<float>(v);
  else
    return T(RoundToOddFloat(v));
}

}  // namespace ot::cuda::detail
