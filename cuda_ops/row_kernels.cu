// Row kernels: see row_kernels.h. One block per row (a grid-stride loop over rows), RowBlockThreads(cols) threads;
// every reduction is a fixed per-thread strided sum followed by a shuffle-down tree (BlockSum/BlockMax), so results
// depend only on the sizes. Column sums: blocks of 32 columns x 8 row lanes over 64-row chunks, partials to the
// workspace, then one thread per column adds the chunks in order.
#include <cuda_runtime.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "cuda_ops/launch_util.cuh"
#include "cuda_ops/row_kernels.h"
#include "kernel_common/half.h"
#include "kernel_common/scalar_math.h"

namespace ot::cuda {

namespace {

using detail::Align256;
using detail::BlockSum;
using detail::CheckLaunch;
using detail::DispatchFloat;
using detail::DispatchIndex;
using detail::Require;

constexpr int kColTile = 32;        // columns per block of the column-partials kernel (threadIdx.x)
constexpr int kColLanes = 8;        // row lanes per block (threadIdx.y)
constexpr int64_t kChunkRows = 64;  // rows per chunk: the fixed row partition of the two-stage column sums
constexpr int kMaxGrid = 1 << 20;

__host__ __device__ inline int64_t Chunks(int64_t rows) { return (rows + kChunkRows - 1) / kChunkRows; }

int GridFor(int64_t items) { return static_cast<int>(items < kMaxGrid ? (items < 1 ? 1 : items) : kMaxGrid); }

// ---- device helpers: LdF/LdD/FromF/FromD (cuda_ops/launch_util.cuh) ----------------------------------------

using detail::FromD;
using detail::FromF;
using detail::LdD;
using detail::LdF;

// Max over the block with cpu_ops/softmax's RowMax combine (a > b ? a : b from -inf: NaNs are skipped).
__device__ float BlockMax(float v, float* sh) {
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  for (int o = 16; o > 0; o >>= 1) {
    const float u = __shfl_down_sync(0xffffffffu, v, o);
    v = u > v ? u : v;
  }
  if (lane == 0) sh[warp] = v;
  __syncthreads();
  if (warp == 0) {
    const unsigned nw = blockDim.x >> 5;
    float w = lane < nw ? sh[lane] : -INFINITY;
    for (int o = 16; o > 0; o >>= 1) {
      const float u = __shfl_down_sync(0xffffffffu, w, o);
      w = u > w ? u : w;
    }
    if (lane == 0) sh[32] = w;
  }
  __syncthreads();
  const float r = sh[32];
  __syncthreads();
  return r;
}

// The row's max over its non-NaN elements, 0 when there is none above -inf (cpu_ops/softmax: exp then gives 0s).
template <typename T>
__device__ float RowMaxShifted(const T* xr, int64_t cols, float* shf) {
  float mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
    const float v = LdF(xr, j);
    mx = v > mx ? v : mx;
  }
  float m = BlockMax(mx, shf);
  if (isinf(m) && m < 0.f) m = 0.f;
  return m;
}

// ---- LayerNorm ----------------------------------------------------------------------------------------------------

template <typename T, typename P>
__global__ void LayerNormFwdKernel(int64_t rows, int64_t cols, const T* x, const P* gamma, const P* beta, double eps,
                                   T* y, float* mean, float* invstd) {
  __shared__ double sh[33];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * cols;
    T* yr = y + r * cols;
    double s = 0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += LdD(xr, j);
    const double m = BlockSum(s, sh) / static_cast<double>(cols);
    double v = 0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const double d = LdD(xr, j) - m;
      v += d * d;
    }
    const double inv = 1.0 / sqrt(BlockSum(v, sh) / static_cast<double>(cols) + eps);
    if constexpr (std::is_same_v<T, float>) {
      for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
        double o = (LdD(xr, j) - m) * inv * LdD(gamma, j);
        if (beta) o += LdD(beta, j);
        yr[j] = static_cast<float>(o);
      }
    } else {
      const float mf = static_cast<float>(m), invf = static_cast<float>(inv);
      for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
        float o = (LdF(xr, j) - mf) * invf * LdF(gamma, j);
        if (beta) o += LdF(beta, j);
        yr[j] = FromF<T>(o);
      }
    }
    if (threadIdx.x == 0) {
      if (mean) mean[r] = static_cast<float>(m);
      if (invstd) invstd[r] = static_cast<float>(inv);
    }
  }
}

// Per-row statistics of the backward into the workspace (double): the saved float ones widened, or recomputed.
template <typename T>
__global__ void LayerNormStatsKernel(int64_t rows, int64_t cols, const T* x, const float* mean, const float* invstd,
                                     double eps, double* mu_out, double* r_out) {
  __shared__ double sh[33];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    if (mean) {
      if (threadIdx.x == 0) {
        mu_out[r] = static_cast<double>(mean[r]);
        r_out[r] = static_cast<double>(invstd[r]);
      }
      continue;
    }
    const T* xr = x + r * cols;
    double s = 0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += LdD(xr, j);
    const double m = BlockSum(s, sh) / static_cast<double>(cols);
    double v = 0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const double d = LdD(xr, j) - m;
      v += d * d;
    }
    const double rr = 1.0 / sqrt(BlockSum(v, sh) / static_cast<double>(cols) + eps);
    if (threadIdx.x == 0) {
      mu_out[r] = m;
      r_out[r] = rr;
    }
  }
}

// dx of one row per block (double, cpu::LayerNormGradF32's order): all of dy and x are read for the sums before any
// dx element is written, and each thread rewrites only elements it read, so dx may alias dy or x.
template <typename T, typename P>
__global__ void LayerNormDxKernel(int64_t rows, int64_t cols, const T* dy, const T* x, const P* gamma,
                                  const double* mu_ws, const double* r_ws, T* dx) {
  __shared__ double sh[33];
  const double inv_cols = 1.0 / static_cast<double>(cols);
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* dyr = dy + r * cols;
    const T* xr = x + r * cols;
    T* dxr = dx + r * cols;
    const double mu = mu_ws[r], rs = r_ws[r];
    double sg = 0, sgx = 0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const double xh = (LdD(xr, j) - mu) * rs, g = LdD(dyr, j) * LdD(gamma, j);
      sg += g;
      sgx += g * xh;
    }
    const double mg = BlockSum(sg, sh) * inv_cols;
    const double mgx = BlockSum(sgx, sh) * inv_cols;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const double xh = (LdD(xr, j) - mu) * rs, g = LdD(dyr, j) * LdD(gamma, j);
      dxr[j] = FromD<T>(rs * (g - mg - xh * mgx));
    }
  }
}

// Column partials over 64-row chunks: block (32 columns, 8 row lanes); lane ty sums rows r0+ty, r0+ty+8, ... in
// order, then lane 0 adds the 8 lanes in order. kLn: part0 = sum dy xhat, part1 = sum dy (a = dy); otherwise
// part0 = sum a.
template <typename T, bool kLn>
__global__ void ColumnPartialsKernel(int64_t rows, int64_t cols, const T* a, const T* x, const double* mu_ws,
                                     const double* r_ws, double* part0, double* part1) {
  __shared__ double s0[kColLanes][kColTile];
  __shared__ double s1[kColLanes][kColTile];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kColTile + tx;
  const int64_t chunks = Chunks(rows);
  for (int64_t chunk = blockIdx.y; chunk < chunks; chunk += gridDim.y) {
    const int64_t r0 = chunk * kChunkRows, r1 = r0 + kChunkRows < rows ? r0 + kChunkRows : rows;
    double a0 = 0, a1 = 0;
    if (c < cols) {
      for (int64_t r = r0 + ty; r < r1; r += kColLanes) {
        const double av = LdD(a, r * cols + c);
        if constexpr (kLn) {
          const double xh = (LdD(x, r * cols + c) - mu_ws[r]) * r_ws[r];
          a0 += av * xh;
          a1 += av;
        } else {
          a0 += av;
        }
      }
    }
    s0[ty][tx] = a0;
    s1[ty][tx] = a1;
    __syncthreads();
    if (ty == 0 && c < cols) {
      double t0 = 0, t1 = 0;
      for (int k = 0; k < kColLanes; ++k) {
        t0 += s0[k][tx];
        t1 += s1[k][tx];
      }
      part0[chunk * cols + c] = t0;
      if constexpr (kLn) part1[chunk * cols + c] = t1;
    }
    __syncthreads();
  }
}

// Many chunks (long columns, few of them: a whole tensor summed to a scalar): one block per column, each thread
// adding the chunks c = t, t + 256, ... in order, then the block's fixed tree. The choice between the two finalize
// kernels depends only on the sizes, so a result never changes from run to run.
constexpr int64_t kTreeFinalizeChunks = 256;
template <typename P>
__global__ void ColumnTreeFinalizeKernel(int64_t chunks, int64_t cols, const double* part0, const double* part1,
                                         P* out0, P* out1) {
  __shared__ double sh[33];
  for (int64_t c = blockIdx.x; c < cols; c += gridDim.x) {
    double s0 = 0, s1 = 0;
    for (int64_t k = threadIdx.x; k < chunks; k += blockDim.x) {
      if (out0) s0 += part0[k * cols + c];
      if (out1) s1 += part1[k * cols + c];
    }
    if (out0) {
      s0 = BlockSum(s0, sh);
      if (threadIdx.x == 0) out0[c] = FromD<P>(s0);
    }
    if (out1) {
      s1 = BlockSum(s1, sh);
      if (threadIdx.x == 0) out1[c] = FromD<P>(s1);
    }
  }
}

// out[c] = sum over chunks, in chunk order (null out: skipped).
template <typename P>
__global__ void ColumnFinalizeKernel(int64_t chunks, int64_t cols, const double* part0, const double* part1, P* out0,
                                     P* out1) {
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < cols;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if (out0) {
      double s = 0;
      for (int64_t k = 0; k < chunks; ++k) s += part0[k * cols + c];
      out0[c] = FromD<P>(s);
    }
    if (out1) {
      double s = 0;
      for (int64_t k = 0; k < chunks; ++k) s += part1[k * cols + c];
      out1[c] = FromD<P>(s);
    }
  }
}

// ---- Softmax ------------------------------------------------------------------------------------------------------

template <typename T, bool kLog>
__global__ void SoftmaxFwdKernel(int64_t rows, int64_t cols, const T* x, T* y) {
  __shared__ double shd[33];
  __shared__ float shf[33];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * cols;
    T* yr = y + r * cols;
    const float m = RowMaxShifted(xr, cols, shf);
    double s = 0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += static_cast<double>(math::Exp(LdF(xr, j) - m));
    s = BlockSum(s, shd);
    if constexpr (!kLog) {
      const float sc = static_cast<float>(1.0 / s);
      for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) yr[j] = FromF<T>(math::Exp(LdF(xr, j) - m) * sc);
    } else {
      const float ls = static_cast<float>(log(s));
      for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) yr[j] = FromF<T>((LdF(xr, j) - m) - ls);
    }
  }
}

template <typename T, bool kLog>
__global__ void SoftmaxBwdKernel(int64_t rows, int64_t cols, const T* dy, const T* y, T* dx) {
  __shared__ double sh[33];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* dyr = dy + r * cols;
    const T* yr = y + r * cols;
    T* dxr = dx + r * cols;
    double s = 0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += kLog ? LdD(dyr, j) : LdD(dyr, j) * LdD(yr, j);
    s = BlockSum(s, sh);
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const double d = LdD(dyr, j), v = LdD(yr, j);
      dxr[j] = FromD<T>(kLog ? d - exp(v) * s : v * (d - s));
    }
  }
}

// ---- Softmax cross-entropy ----------------------------------------------------------------------------------------

template <typename T, typename I>
__global__ void SceFwdRowKernel(int64_t n, int64_t c, const T* x, const I* labels, const T* w, int64_t ignore,
                                T* log_prob, double* row_loss, double* row_w, T* loss_none, int* bad) {
  __shared__ double shd[33];
  __shared__ float shf[33];
  for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    const T* xr = x + i * c;
    const float m = RowMaxShifted(xr, c, shf);
    double s = 0;
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x) s += static_cast<double>(math::Exp(LdF(xr, j) - m));
    s = BlockSum(s, shd);
    const float ls = static_cast<float>(log(s));
    if (log_prob)
      for (int64_t j = threadIdx.x; j < c; j += blockDim.x) log_prob[i * c + j] = FromF<T>((LdF(xr, j) - m) - ls);
    if (threadIdx.x == 0) {
      const int64_t t = static_cast<int64_t>(labels[i]);
      double l = 0, wt = 0;
      if (t != ignore) {
        if (t < 0 || t >= c) {
          if (bad) *bad = 1;
        } else {
          // The stored (rounded) log-probability, as the CPU's NllLoss reads it.
          const T lp = FromF<T>((LdF(xr, t) - m) - ls);
          wt = w ? LdD(w, t) : 1.0;
          l = -static_cast<double>(static_cast<float>(lp)) * wt;
        }
      }
      row_loss[i] = l;
      row_w[i] = wt;
      if (loss_none) loss_none[i] = FromD<T>(l);
    }
  }
}

// One block: out[0] = sum of row_loss (sum) or that over the sum of row_w (mean).
template <typename T>
__global__ void SceReduceKernel(int64_t n, const double* row_loss, const double* row_w, bool mean, T* out) {
  __shared__ double sh[33];
  double s = 0, ws = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    s += row_loss[i];
    ws += row_w[i];
  }
  s = BlockSum(s, sh);
  ws = BlockSum(ws, sh);
  if (threadIdx.x == 0) out[0] = FromD<T>(mean ? s / ws : s);
}

// One block: scale[0] = 1 / (sum of w[t_i] over valid rows not ignored) for mean (0 when that sum is 0), else 1.
template <typename T, typename I>
__global__ void SceGradScaleKernel(int64_t n, int64_t c, const I* labels, const T* w, int64_t ignore, bool mean,
                                   double* scale) {
  __shared__ double sh[33];
  double ws = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const int64_t t = static_cast<int64_t>(labels[i]);
    if (t != ignore && t >= 0 && t < c) ws += w ? LdD(w, t) : 1.0;
  }
  ws = BlockSum(ws, sh);
  if (threadIdx.x == 0) scale[0] = mean ? (ws != 0 ? 1.0 / ws : 0.0) : 1.0;
}

template <typename T, typename I>
__global__ void SceBwdRowKernel(int64_t n, int64_t c, const T* dloss, bool none, const T* x, const I* labels,
                                const T* w, int64_t ignore, const double* scale, T* dx, int* bad) {
  __shared__ double shd[33];
  __shared__ float shf[33];
  for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    const T* xr = x + i * c;
    T* dxr = dx + i * c;
    const int64_t t = static_cast<int64_t>(labels[i]);
    double f = 0;
    if (t != ignore) {
      if (t < 0 || t >= c) {
        if (bad && threadIdx.x == 0) *bad = 1;
      } else {
        f = (w ? LdD(w, t) : 1.0) * LdD(dloss, none ? i : 0) * scale[0];
      }
    }
    if (f == 0.0) {  // uniform over the block: every thread computed the same f
      for (int64_t j = threadIdx.x; j < c; j += blockDim.x) dxr[j] = FromF<T>(0.f);
      continue;
    }
    const float m = RowMaxShifted(xr, c, shf);
    double s = 0;
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x) s += static_cast<double>(math::Exp(LdF(xr, j) - m));
    const double inv = 1.0 / BlockSum(s, shd);
    for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
      const double e = static_cast<double>(math::Exp(LdF(xr, j) - m));
      dxr[j] = FromD<T>(j == t ? (e * inv - 1.0) * f : (e * inv) * f);
    }
  }
}

struct LnWs {
  double *mu, *r, *p0, *p1;
};
LnWs LayoutLn(void* ws, int64_t rows, int64_t cols) {
  char* b = static_cast<char*>(ws);
  const size_t sr = Align256(static_cast<size_t>(rows) * 8),
               sp = Align256(static_cast<size_t>(Chunks(rows) * cols) * 8);
  LnWs l;
  l.mu = reinterpret_cast<double*>(b);
  l.r = reinterpret_cast<double*>(b + sr);
  l.p0 = reinterpret_cast<double*>(b + 2 * sr);
  l.p1 = reinterpret_cast<double*>(b + 2 * sr + sp);
  return l;
}

dim3 ColumnGrid(int64_t rows, int64_t cols) {
  const int64_t gx = (cols + kColTile - 1) / kColTile, gy = Chunks(rows);
  return dim3(static_cast<unsigned>(gx), static_cast<unsigned>(gy < 65535 ? gy : 65535));
}

int FinalizeGrid(int64_t cols) { return GridFor((cols + 255) / 256); }

}  // namespace

size_t FloatTypeSize(FloatType t) { return t == FloatType::kF32 ? 4 : 2; }

int RowBlockThreads(int64_t cols) {
  int t = 32;
  while (t < 1024 && static_cast<int64_t>(t) * 4 < cols) t *= 2;
  return t;
}

void LayerNormForward(int64_t rows, int64_t cols, FloatType xt, const void* x, FloatType pt, const void* gamma,
                      const void* beta, double eps, void* y, float* mean, float* invstd, void* stream) {
  Require(rows >= 0 && cols >= 0, "LayerNormForward: negative size");
  Require(pt == xt || pt == FloatType::kF32, "LayerNormForward: gamma/beta must be float32 or the input's type");
  if (rows == 0 || cols == 0) return;
  Require(x && gamma && y, "LayerNormForward: null x, gamma or y");
  Require(cols < (int64_t{1} << 31), "LayerNormForward: row too wide");
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  DispatchFloat(xt, [&](auto tag) {
    using T = decltype(tag);
    auto launch = [&](auto ptag) {
      using P = decltype(ptag);
      LayerNormFwdKernel<T, P><<<GridFor(rows), RowBlockThreads(cols), 0, s>>>(
          rows, cols, static_cast<const T*>(x), static_cast<const P*>(gamma), static_cast<const P*>(beta), eps,
          static_cast<T*>(y), mean, invstd);
    };
    if (pt == FloatType::kF32)
      launch(float{});
    else
      launch(T{});
  });
  CheckLaunch("LayerNormForward");
}

size_t LayerNormBackwardWorkspaceBytes(int64_t rows, int64_t cols) {
  if (rows <= 0 || cols <= 0) return 0;
  return 2 * Align256(static_cast<size_t>(rows) * 8) + 2 * Align256(static_cast<size_t>(Chunks(rows) * cols) * 8);
}

void LayerNormBackward(int64_t rows, int64_t cols, FloatType xt, const void* dy, const void* x, FloatType pt,
                       const void* gamma, const float* mean, const float* invstd, double eps, void* dx, void* dgamma,
                       void* dbeta, void* workspace, size_t workspace_bytes, void* stream) {
  Require(rows >= 0 && cols >= 0, "LayerNormBackward: negative size");
  Require(pt == xt || pt == FloatType::kF32, "LayerNormBackward: gamma must be float32 or the input's type");
  Require((mean == nullptr) == (invstd == nullptr), "LayerNormBackward: mean and invstd must be given together");
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (cols == 0) return;
  if (rows == 0) {
    // Empty batch: the parameter gradients are zeros.
    if (dgamma) Require(cudaMemsetAsync(dgamma, 0, cols * FloatTypeSize(pt), s) == cudaSuccess, "memset dgamma");
    if (dbeta) Require(cudaMemsetAsync(dbeta, 0, cols * FloatTypeSize(pt), s) == cudaSuccess, "memset dbeta");
    return;
  }
  Require(dy && x && gamma && dx, "LayerNormBackward: null dy, x, gamma or dx");
  Require(workspace && workspace_bytes >= LayerNormBackwardWorkspaceBytes(rows, cols),
          "LayerNormBackward: workspace too small (LayerNormBackwardWorkspaceBytes)");
  Require(cols < (int64_t{1} << 31), "LayerNormBackward: row too wide");
  const LnWs w = LayoutLn(workspace, rows, cols);
  const int threads = RowBlockThreads(cols);
  DispatchFloat(xt, [&](auto tag) {
    using T = decltype(tag);
    const T* tdy = static_cast<const T*>(dy);
    const T* tx = static_cast<const T*>(x);
    LayerNormStatsKernel<T><<<GridFor(rows), mean ? 32 : threads, 0, s>>>(rows, cols, tx, mean, invstd, eps, w.mu, w.r);
    CheckLaunch("LayerNormBackward stats");
    auto launch = [&](auto ptag) {
      using P = decltype(ptag);
      if (dgamma || dbeta) {
        // Column sums first: they read dy and x, which dx may overwrite.
        ColumnPartialsKernel<T, true>
            <<<ColumnGrid(rows, cols), dim3(kColTile, kColLanes), 0, s>>>(rows, cols, tdy, tx, w.mu, w.r, w.p0, w.p1);
        CheckLaunch("LayerNormBackward column partials");
        if (Chunks(rows) > kTreeFinalizeChunks)
          ColumnTreeFinalizeKernel<P><<<GridFor(cols), 256, 0, s>>>(Chunks(rows), cols, w.p0, w.p1,
                                                                    static_cast<P*>(dgamma), static_cast<P*>(dbeta));
        else
          ColumnFinalizeKernel<P><<<FinalizeGrid(cols), 256, 0, s>>>(Chunks(rows), cols, w.p0, w.p1,
                                                                     static_cast<P*>(dgamma), static_cast<P*>(dbeta));
        CheckLaunch("LayerNormBackward column finalize");
      }
      LayerNormDxKernel<T, P><<<GridFor(rows), threads, 0, s>>>(rows, cols, tdy, tx, static_cast<const P*>(gamma), w.mu,
                                                                w.r, static_cast<T*>(dx));
      CheckLaunch("LayerNormBackward dx");
    };
    if (pt == FloatType::kF32)
      launch(float{});
    else
      launch(T{});
  });
}

void SoftmaxForward(bool log, int64_t rows, int64_t cols, FloatType t, const void* x, void* y, void* stream) {
  Require(rows >= 0 && cols >= 0, "SoftmaxForward: negative size");
  if (rows == 0 || cols == 0) return;
  Require(x && y, "SoftmaxForward: null x or y");
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  DispatchFloat(t, [&](auto tag) {
    using T = decltype(tag);
    if (log)
      SoftmaxFwdKernel<T, true>
          <<<GridFor(rows), RowBlockThreads(cols), 0, s>>>(rows, cols, static_cast<const T*>(x), static_cast<T*>(y));
    else
      SoftmaxFwdKernel<T, false>
          <<<GridFor(rows), RowBlockThreads(cols), 0, s>>>(rows, cols, static_cast<const T*>(x), static_cast<T*>(y));
  });
  CheckLaunch("SoftmaxForward");
}

void SoftmaxBackward(bool log, int64_t rows, int64_t cols, FloatType t, const void* dy, const void* y, void* dx,
                     void* stream) {
  Require(rows >= 0 && cols >= 0, "SoftmaxBackward: negative size");
  if (rows == 0 || cols == 0) return;
  Require(dy && y && dx, "SoftmaxBackward: null dy, y or dx");
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  DispatchFloat(t, [&](auto tag) {
    using T = decltype(tag);
    const T* a = static_cast<const T*>(dy);
    const T* b = static_cast<const T*>(y);
    if (log)
      SoftmaxBwdKernel<T, true><<<GridFor(rows), RowBlockThreads(cols), 0, s>>>(rows, cols, a, b, static_cast<T*>(dx));
    else
      SoftmaxBwdKernel<T, false><<<GridFor(rows), RowBlockThreads(cols), 0, s>>>(rows, cols, a, b, static_cast<T*>(dx));
  });
  CheckLaunch("SoftmaxBackward");
}

size_t SoftmaxCrossEntropyWorkspaceBytes(int64_t n) { return 2 * Align256(static_cast<size_t>(n > 0 ? n : 1) * 8); }

void SoftmaxCrossEntropyForward(LossReduction red, int64_t n, int64_t c, FloatType t, const void* logits, IndexType it,
                                const void* labels, const void* weight, int64_t ignore_index, void* loss,
                                void* log_prob, int* bad_label, void* workspace, size_t workspace_bytes, void* stream) {
  Require(n >= 0 && c > 0, "SoftmaxCrossEntropyForward: need n >= 0 and c > 0");
  Require(loss != nullptr, "SoftmaxCrossEntropyForward: null loss");
  Require(workspace && workspace_bytes >= SoftmaxCrossEntropyWorkspaceBytes(n),
          "SoftmaxCrossEntropyForward: workspace too small (SoftmaxCrossEntropyWorkspaceBytes)");
  Require(n == 0 || (logits && labels), "SoftmaxCrossEntropyForward: null logits or labels");
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  double* row_loss = static_cast<double*>(workspace);
  double* row_w =
      reinterpret_cast<double*>(static_cast<char*>(workspace) + Align256(static_cast<size_t>(n > 0 ? n : 1) * 8));
  DispatchFloat(t, [&](auto tag) {
    using T = decltype(tag);
    DispatchIndex(it, [&](auto itag) {
      using I = decltype(itag);
      if (n > 0) {
        SceFwdRowKernel<T, I><<<GridFor(n), RowBlockThreads(c), 0, s>>>(
            n, c, static_cast<const T*>(logits), static_cast<const I*>(labels), static_cast<const T*>(weight),
            ignore_index, static_cast<T*>(log_prob), row_loss, row_w,
            red == LossReduction::kNone ? static_cast<T*>(loss) : nullptr, bad_label);
        CheckLaunch("SoftmaxCrossEntropyForward rows");
      }
      if (red != LossReduction::kNone) {
        SceReduceKernel<T><<<1, 1024, 0, s>>>(n, row_loss, row_w, red == LossReduction::kMean, static_cast<T*>(loss));
        CheckLaunch("SoftmaxCrossEntropyForward reduce");
      }
    });
  });
}

void SoftmaxCrossEntropyBackward(LossReduction red, int64_t n, int64_t c, FloatType t, const void* dloss,
                                 const void* logits, IndexType it, const void* labels, const void* weight,
                                 int64_t ignore_index, void* dlogits, int* bad_label, void* workspace,
                                 size_t workspace_bytes, void* stream) {
  Require(n >= 0 && c > 0, "SoftmaxCrossEntropyBackward: need n >= 0 and c > 0");
  if (n == 0) return;
  Require(dloss && logits && labels && dlogits, "SoftmaxCrossEntropyBackward: null argument");
  Require(workspace && workspace_bytes >= SoftmaxCrossEntropyWorkspaceBytes(n),
          "SoftmaxCrossEntropyBackward: workspace too small (SoftmaxCrossEntropyWorkspaceBytes)");
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  double* scale = static_cast<double*>(workspace);
  DispatchFloat(t, [&](auto tag) {
    using T = decltype(tag);
    DispatchIndex(it, [&](auto itag) {
      using I = decltype(itag);
      const I* lab = static_cast<const I*>(labels);
      const T* w = static_cast<const T*>(weight);
      SceGradScaleKernel<T, I><<<1, 1024, 0, s>>>(n, c, lab, w, ignore_index, red == LossReduction::kMean, scale);
      CheckLaunch("SoftmaxCrossEntropyBackward scale");
      SceBwdRowKernel<T, I><<<GridFor(n), RowBlockThreads(c), 0, s>>>(
          n, c, static_cast<const T*>(dloss), red == LossReduction::kNone, static_cast<const T*>(logits), lab, w,
          ignore_index, scale, static_cast<T*>(dlogits), bad_label);
      CheckLaunch("SoftmaxCrossEntropyBackward rows");
    });
  });
}

size_t ReduceRowsToColumnsWorkspaceBytes(int64_t rows, int64_t cols) {
  if (rows <= 0 || cols <= 0) return 0;
  return Align256(static_cast<size_t>(Chunks(rows) * cols) * 8);
}

void ReduceRowsToColumns(int64_t rows, int64_t cols, FloatType xt, const void* x, FloatType yt, void* y,
                         void* workspace, size_t workspace_bytes, void* stream) {
  Require(rows >= 0 && cols >= 0, "ReduceRowsToColumns: negative size");
  if (cols == 0) return;
  Require(y != nullptr, "ReduceRowsToColumns: null y");
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (rows == 0) {
    Require(cudaMemsetAsync(y, 0, cols * FloatTypeSize(yt), s) == cudaSuccess, "ReduceRowsToColumns: memset");
    return;
  }
  Require(x != nullptr, "ReduceRowsToColumns: null x");
  Require(workspace && workspace_bytes >= ReduceRowsToColumnsWorkspaceBytes(rows, cols),
          "ReduceRowsToColumns: workspace too small (ReduceRowsToColumnsWorkspaceBytes)");
  double* part = static_cast<double*>(workspace);
  DispatchFloat(xt, [&](auto tag) {
    using T = decltype(tag);
    ColumnPartialsKernel<T, false><<<ColumnGrid(rows, cols), dim3(kColTile, kColLanes), 0, s>>>(
        rows, cols, static_cast<const T*>(x), nullptr, nullptr, nullptr, part, nullptr);
  });
  CheckLaunch("ReduceRowsToColumns partials");
  DispatchFloat(yt, [&](auto tag) {
    using P = decltype(tag);
    if (Chunks(rows) > kTreeFinalizeChunks)
      ColumnTreeFinalizeKernel<P>
          <<<GridFor(cols), 256, 0, s>>>(Chunks(rows), cols, part, nullptr, static_cast<P*>(y), nullptr);
    else
      ColumnFinalizeKernel<P>
          <<<FinalizeGrid(cols), 256, 0, s>>>(Chunks(rows), cols, part, nullptr, static_cast<P*>(y), nullptr);
  });
  CheckLaunch("ReduceRowsToColumns finalize");
}

}  // namespace ot::cuda
