// Float32 backward kernels of the row-wise ops of a training step: LayerNormalization, Softmax, and softmax
// cross-entropy. The executor's generic kernels (executor/kernels/internal_norm.cc) handle every dtype one row at a
// time in double; these are the float32 paths of the same formulas, parallel over fixed blocks of rows and
// vectorized (compiled for AVX2 and the baseline, bit-identical between the two).
// Precision: arithmetic in double (sums over interleaved lanes added in a fixed order: eight for LayerNorm,
// cpu_ops/row_stats.h; four for the softmax rows, cpu_ops/row_sum.h), rounded once when stored; only the softmax's
// e^x is a float (kernel_common/vec_math.h, <= 2 ulp), and SoftmaxGradF32 takes the float steps of its fused cluster
// (the products and the result in float, their sum in double rounded to float). Deterministic: the blocks do not
// depend on the thread count, and per-column sums over rows are reduced block by block in block order.
#pragma once
#include <cstdint>

#include "cpu_ops/half_convert.h"
#include "kernel_common/half.h"

namespace ot::cpu {

// LayerNormalization backward over `rows` rows of `cols`: xhat = (x - mu) r, g = dy * scale,
//   dx = r (g - mean(g) - xhat mean(g xhat)),  dscale[j] = sum over rows of dy xhat,  dbias[j] = sum of dy.
// `scale` has cols elements (its broadcast already resolved). mean/invstd: the forward's per-row statistics, or
// both null to compute them from x (mean, biased variance, r = 1 / sqrt(var + eps)). dscale/dbias (cols doubles
// each) are written. dx may alias dy or x. addend (rows x cols, or null): dx = float(that dx) + addend, the float
// add of a Sum taking the gradient in (the residual fold, passes/fuse_residual_norm.h); dx may alias it.
void LayerNormGradF32(int64_t rows, int64_t cols, const float* dy, const float* x, const double* scale,
                      const float* mean, const float* invstd, double eps, float* dx, double* dscale, double* dbias,
                      const float* addend = nullptr);

// Softmax backward along contiguous rows of `len`: dx = y (dy - sum(dy y)) in float (above). dx may alias dy or y.
void SoftmaxGradF32(int64_t rows, int64_t len, const float* dy, const float* y, float* dx);
// The same rows in the calling thread (the fused cluster's SoftmaxGrad rows, cpu_ops/fused_elementwise.cc).
void SoftmaxGradRowsF32(int64_t rows, int64_t len, const float* dy, const float* y, float* dx);

// The same two for T = float16 or bfloat16 rows (AMP) of at most kHalfRowChunk elements (cpu_ops/half_convert.h):
// chunks of rows widened to float on the stack (exact), the float32 rows above, dx rounded once to T. dx may alias
// dy, x or y.
template <typename T>
void LayerNormGradHalf(int64_t rows, int64_t cols, const T* dy, const T* x, const double* scale, const float* mean,
                       const float* invstd, double eps, T* dx, double* dscale, double* dbias);
template <typename T>
void SoftmaxGradHalf(int64_t rows, int64_t len, const T* dy, const T* y, T* dx);

// Softmax cross-entropy backward: scores x are [n, c, d], target [n, d] (class ids; entries with f == 0 are not
// read), f[n * d] the factor of each position (weight of its class times dLoss and the mean's 1/sum, 0 where the
// target is ignored): dx[i, k, j] = (softmax over k of x[i, :, j] - (k == t)) * f[i, j], and exactly 0 where
// f[i, j] == 0. The targets must lie in [0, c) where f != 0 (the caller checks). dx may not alias x.
template <typename I>
void SoftmaxCrossEntropyGradF32(int64_t n, int64_t c, int64_t d, const float* x, const I* target, const double* f,
                                float* dx);

// The same for rows (d = 1) into a half dx (float16 or bfloat16): each row computed in float as above, then rounded
// once -- the bits of SoftmaxCrossEntropyGradF32 followed by a Cast, without the float gradient in memory.
template <typename I, typename H>
void SoftmaxCrossEntropyGradRowsToHalf(int64_t n, int64_t c, const float* x, const I* target, const double* f, H* dx);

}  // namespace ot::cpu
