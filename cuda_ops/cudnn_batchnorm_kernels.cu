// Our BatchNorm kernels: see cudnn_batchnorm_kernels.h. Arithmetic follows the CPU kernels (cpu_ops/norm.cc
// BatchNormApply, executor/kernels/internal_norm.cc BatchNormGrad) with explicitly rounded operations (__dadd_rn,
// __fmul_rn, ...), so nvcc's default FMA contraction does not change them.
#include <cuda_runtime.h>

#include <type_traits>

#include "cuda_ops/cudnn_batchnorm_kernels.h"
#include "cuda_ops/launch_util.cuh"
#include "kernel_common/half.h"

namespace ot::cuda::bn_detail {

namespace {

using detail::BlockSum;
using detail::CheckLaunch;
using detail::DispatchFloat;

constexpr int kThreads = 256;          // per block of the chunk and element kernels (a multiple of 32)
constexpr int64_t kChunkElems = 1024;  // target elements per chunk
constexpr int64_t kMaxChunks = 128;
constexpr int kMaxGrid = 1 << 20;

int GridFor(int64_t items, int per_block) {
  const int64_t b = (items + per_block - 1) / per_block;
  return static_cast<int>(b < 1 ? 1 : (b < kMaxGrid ? b : kMaxGrid));
}

using detail::FromD;  // cuda_ops/launch_util.cuh
using detail::LdD;

// Offset of element e (of n s) of channel ch.
__device__ __forceinline__ int64_t Offset(int64_t e, int64_t c, int64_t s, int64_t ch) {
  const int64_t b = e / s;
  return (b * c + ch) * s + (e - b * s);
}

// Chunk k of [0, m) in `chunks` parts: [k m / chunks, (k + 1) m / chunks).
__device__ __forceinline__ int64_t ChunkStart(int64_t k, int64_t m, int64_t chunks) { return k * m / chunks; }

template <typename S>
__device__ __forceinline__ void Stat(const S* mean, const S* var, int64_t ch, double* mu, double* v) {
  *mu = static_cast<double>(mean[ch]);
  *v = static_cast<double>(var[ch]);
}

// ---- statistics -----------------------------------------------------------------------------------------------------

// partials[(ch chunks + k) 2 + {0, 1}] = sum over chunk k of (x - x_first), of (x - x_first)^2.
template <typename T>
__global__ void StatsPartials(int64_t c, int64_t s, int64_t m, int64_t chunks, const T* x, double* partials) {
  __shared__ double sh[33];
  const int64_t ch = blockIdx.y, k = blockIdx.x;
  const double shift = LdD(x, ch * s);  // element 0 of the channel
  double s1 = 0, s2 = 0;
  const int64_t hi = ChunkStart(k + 1, m, chunks);
  for (int64_t e = ChunkStart(k, m, chunks) + threadIdx.x; e < hi; e += blockDim.x) {
    const double v = __dsub_rn(LdD(x, Offset(e, c, s, ch)), shift);
    s1 = __dadd_rn(s1, v);
    s2 = __dadd_rn(s2, __dmul_rn(v, v));
  }
  s1 = BlockSum(s1, sh);
  s2 = BlockSum(s2, sh);
  if (threadIdx.x == 0) {
    partials[(ch * chunks + k) * 2] = s1;
    partials[(ch * chunks + k) * 2 + 1] = s2;
  }
}

template <typename T>
__global__ void StatsFinalize(int64_t c, int64_t s, int64_t m, int64_t chunks, const T* x, const double* partials,
                              double momentum, const float* rm, const float* rv, float* rm_out, float* rv_out,
                              double* stats) {
  const int64_t ch = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (ch >= c) return;
  double s1 = 0, s2 = 0;
  for (int64_t k = 0; k < chunks; ++k) {
    s1 = __dadd_rn(s1, partials[(ch * chunks + k) * 2]);
    s2 = __dadd_rn(s2, partials[(ch * chunks + k) * 2 + 1]);
  }
  const double md = static_cast<double>(m);
  const double d = __ddiv_rn(s1, md);  // mean - x_first
  double var = __dsub_rn(__ddiv_rn(s2, md), __dmul_rn(d, d));
  if (!(var >= 0)) var = var < 0 ? 0.0 : var;  // rounding can leave a tiny negative; NaN stays NaN
  const double mean = __dadd_rn(LdD(x, ch * s), d);
  stats[ch] = mean;
  stats[c + ch] = var;
  // ONNX / the CPU kernel: momentum * running + (1 - momentum) * batch, the batch variance biased. The running input
  // is read before the output is written (they may alias).
  const double keep = momentum, take = __dsub_rn(1.0, momentum);
  if (rm_out)
    rm_out[ch] = __double2float_rn(__dadd_rn(__dmul_rn(keep, static_cast<double>(rm[ch])), __dmul_rn(take, mean)));
  if (rv_out)
    rv_out[ch] = __double2float_rn(__dadd_rn(__dmul_rn(keep, static_cast<double>(rv[ch])), __dmul_rn(take, var)));
}

// ---- normalization --------------------------------------------------------------------------------------------------

template <typename T, typename S>
__global__ void ApplyKernel(int64_t total, int64_t c, int64_t s, const T* x, const float* scale, const float* bias,
                            const S* mean, const S* var, double eps, T* y) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t ch = (i / s) % c;
    double mu, v;
    Stat(mean, var, ch, &mu, &v);
    const double a = __ddiv_rn(static_cast<double>(scale[ch]), __dsqrt_rn(__dadd_rn(v, eps)));
    const double b = static_cast<double>(bias[ch]);
    if constexpr (std::is_same_v<T, float>) {
      y[i] = __double2float_rn(__dadd_rn(__dmul_rn(__dsub_rn(static_cast<double>(x[i]), mu), a), b));
    } else {
      // cpu::BatchNormApply's half path: float arithmetic from the float coefficients, rounded once to T.
      const float mf = __double2float_rn(mu), af = __double2float_rn(a), bf = __double2float_rn(b);
      y[i] = T(__fadd_rn(__fmul_rn(__fsub_rn(static_cast<float>(x[i]), mf), af), bf));
    }
  }
}

// ---- backward -------------------------------------------------------------------------------------------------------

// partials[(ch chunks + k) 2 + {0, 1}] = sum over chunk k of dy, of dy xhat.
template <typename T, typename S>
__global__ void GradPartials(int64_t c, int64_t s, int64_t m, int64_t chunks, const T* dy, const T* x, const S* mean,
                             const S* var, double eps, double* partials) {
  __shared__ double sh[33];
  const int64_t ch = blockIdx.y, k = blockIdx.x;
  double mu, v;
  Stat(mean, var, ch, &mu, &v);
  const double r = __ddiv_rn(1.0, __dsqrt_rn(__dadd_rn(v, eps)));
  double sb = 0, ss = 0;
  const int64_t hi = ChunkStart(k + 1, m, chunks);
  for (int64_t e = ChunkStart(k, m, chunks) + threadIdx.x; e < hi; e += blockDim.x) {
    const int64_t o = Offset(e, c, s, ch);
    const double g = LdD(dy, o), xh = __dmul_rn(__dsub_rn(LdD(x, o), mu), r);
    sb = __dadd_rn(sb, g);
    ss = __dadd_rn(ss, __dmul_rn(g, xh));
  }
  sb = BlockSum(sb, sh);
  ss = BlockSum(ss, sh);
  if (threadIdx.x == 0) {
    partials[(ch * chunks + k) * 2] = sb;
    partials[(ch * chunks + k) * 2 + 1] = ss;
  }
}

__global__ void GradFinalize(int64_t c, int64_t chunks, const double* partials, double* sums, float* dscale,
                             float* dbias) {
  const int64_t ch = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (ch >= c) return;
  double sb = 0, ss = 0;
  for (int64_t k = 0; k < chunks; ++k) {
    sb = __dadd_rn(sb, partials[(ch * chunks + k) * 2]);
    ss = __dadd_rn(ss, partials[(ch * chunks + k) * 2 + 1]);
  }
  sums[ch] = sb;
  sums[c + ch] = ss;
  if (dscale) dscale[ch] = __double2float_rn(ss);
  if (dbias) dbias[ch] = __double2float_rn(sb);
}

template <typename T, typename S>
__global__ void DxKernel(int64_t total, int64_t c, int64_t s, int64_t m, const T* dy, const T* x, const float* scale,
                         const S* mean, const S* var, double eps, bool training, const double* sums, T* dx) {
  const double md = static_cast<double>(m);
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t ch = (i / s) % c;
    double mu, v;
    Stat(mean, var, ch, &mu, &v);
    const double r = __ddiv_rn(1.0, __dsqrt_rn(__dadd_rn(v, eps)));
    const double k0 = __dmul_rn(static_cast<double>(scale[ch]), r);
    const double g = LdD(dy, i);
    double out;
    if (training) {
      const double mb = __ddiv_rn(sums[ch], md), ms = __ddiv_rn(sums[c + ch], md);
      const double xh = __dmul_rn(__dsub_rn(LdD(x, i), mu), r);
      out = __dmul_rn(k0, __dsub_rn(__dsub_rn(g, mb), __dmul_rn(xh, ms)));
    } else {
      out = __dmul_rn(k0, g);
    }
    dx[i] = FromD<T>(out);
  }
}

void RequireSizes(int64_t n, int64_t c, int64_t s, const char* what) {
  detail::Require(n > 0 && c > 0 && s > 0, what);
  detail::Require(c <= 65535, "BatchNorm kernels: more than 65535 channels");  // grid.y of the chunk kernels
}

}  // namespace

int64_t Chunks(int64_t m) {
  const int64_t k = (m + kChunkElems - 1) / kChunkElems;
  return k < 1 ? 1 : (k > kMaxChunks ? kMaxChunks : k);
}

size_t PartialBytes(int64_t c, int64_t m) { return static_cast<size_t>(c * Chunks(m) * 2) * sizeof(double); }

void ChannelStats(FloatType xt, int64_t n, int64_t c, int64_t s, const void* x, double momentum, const float* rm,
                  const float* rv, float* rm_out, float* rv_out, double* partials, double* stats, void* stream) {
  RequireSizes(n, c, s, "ChannelStats: n, c and spatial must be positive");
  detail::Require(x && partials && stats, "ChannelStats: null pointer");
  detail::Require((!rm_out || rm) && (!rv_out || rv), "ChannelStats: a running-statistics output without its input");
  const int64_t m = n * s, chunks = Chunks(m);
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  DispatchFloat(xt, [&](auto tag) {
    using T = decltype(tag);
    const T* xp = static_cast<const T*>(x);
    StatsPartials<T><<<dim3(static_cast<unsigned>(chunks), static_cast<unsigned>(c)), kThreads, 0, st>>>(
        c, s, m, chunks, xp, partials);
    StatsFinalize<T><<<GridFor(c, kThreads), kThreads, 0, st>>>(c, s, m, chunks, xp, partials, momentum, rm, rv, rm_out,
                                                                rv_out, stats);
  });
  CheckLaunch("BatchNorm statistics");
}

void Apply(FloatType xt, int64_t n, int64_t c, int64_t s, const void* x, const float* scale, const float* bias,
           const double* stats, const float* mean_f, const float* var_f, double eps, void* y, void* stream) {
  RequireSizes(n, c, s, "BatchNorm Apply: n, c and spatial must be positive");
  detail::Require(x && scale && bias && y && (stats != nullptr) != (mean_f != nullptr && var_f != nullptr),
                  "BatchNorm Apply: null pointer, or both/neither statistics given");
  const int64_t total = n * c * s;
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  DispatchFloat(xt, [&](auto tag) {
    using T = decltype(tag);
    const T* xp = static_cast<const T*>(x);
    T* yp = static_cast<T*>(y);
    if (stats)
      ApplyKernel<T, double>
          <<<GridFor(total, kThreads), kThreads, 0, st>>>(total, c, s, xp, scale, bias, stats, stats + c, eps, yp);
    else
      ApplyKernel<T, float>
          <<<GridFor(total, kThreads), kThreads, 0, st>>>(total, c, s, xp, scale, bias, mean_f, var_f, eps, yp);
  });
  CheckLaunch("BatchNorm apply");
}

void Backward(FloatType xt, int64_t n, int64_t c, int64_t s, const void* dy, const void* x, const float* scale,
              const double* stats, const float* mean_f, const float* var_f, double eps, bool training, void* dx,
              float* dscale, float* dbias, double* partials, double* sums, void* stream) {
  RequireSizes(n, c, s, "BatchNorm Backward: n, c and spatial must be positive");
  detail::Require(
      dy && x && scale && dx && partials && sums && (stats != nullptr) != (mean_f != nullptr && var_f != nullptr),
      "BatchNorm Backward: null pointer, or both/neither statistics given");
  const int64_t m = n * s, chunks = Chunks(m), total = n * c * s;
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  DispatchFloat(xt, [&](auto tag) {
    using T = decltype(tag);
    const T* dyp = static_cast<const T*>(dy);
    const T* xp = static_cast<const T*>(x);
    T* dxp = static_cast<T*>(dx);
    const dim3 grid(static_cast<unsigned>(chunks), static_cast<unsigned>(c));
    if (stats)
      GradPartials<T, double><<<grid, kThreads, 0, st>>>(c, s, m, chunks, dyp, xp, stats, stats + c, eps, partials);
    else
      GradPartials<T, float><<<grid, kThreads, 0, st>>>(c, s, m, chunks, dyp, xp, mean_f, var_f, eps, partials);
    GradFinalize<<<GridFor(c, kThreads), kThreads, 0, st>>>(c, chunks, partials, sums, dscale, dbias);
    if (stats)
      DxKernel<T, double><<<GridFor(total, kThreads), kThreads, 0, st>>>(total, c, s, m, dyp, xp, scale, stats,
                                                                         stats + c, eps, training, sums, dxp);
    else
      DxKernel<T, float><<<GridFor(total, kThreads), kThreads, 0, st>>>(total, c, s, m, dyp, xp, scale, mean_f, var_f,
                                                                        eps, training, sums, dxp);
  });
  CheckLaunch("BatchNorm backward");
}

}  // namespace ot::cuda::bn_detail
