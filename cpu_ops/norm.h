// Normalisations over raw buffers: BatchNormalization (inference and training statistics),
// LayerNormalization, InstanceNormalization, MeanVarianceNormalization, LpNormalization.
// Statistics are computed in double (two passes: mean, then centred variance), one task per statistic, so the
// results do not depend on the thread count. T: float, double, float16, bfloat16 (computed in float/double,
// rounded on store).
#pragma once
#include <cstdint>
#include <vector>

#include "cpu_ops/reduce.h"

namespace ot::cpu {

// Mean and biased variance of each of `rows` rows of `cols` contiguous elements.
template <typename T>
void RowMoments(int64_t rows, int64_t cols, const T* x, double* mean, double* var);

// Mean and biased variance per channel of x laid out [n, c, spatial] (over n and spatial).
template <typename T>
void ChannelMoments(int64_t n, int64_t c, int64_t spatial, const T* x, double* mean, double* var);

// y[n,c,s] = (x - mean[c]) * scale[c] / sqrt(var[c] + eps) + bias[c]; per-channel params given in double.
// relu: y = Relu(that) (a BatchNormalization followed by Relu, passes/fuse_batch_norm.h); the same values as the
// two ops (float, double: the same bits; half types: +0 where Relu of a negative rounded to -0 keeps -0).
template <typename T>
void BatchNormApply(int64_t n, int64_t c, int64_t spatial, const T* x, const double* scale, const double* bias,
                    const double* mean, const double* var, double eps, T* y, bool relu = false);

// Backward of BatchNormalization over x, dy [n, c, spatial] (T = float, double, float16, bfloat16): with
// mean == nullptr the batch statistics (biased variance) are recomputed from x and dx = k (dy - mean(dy) - xhat
// mean(dy xhat)), otherwise (inference) mean/var are given and dx = k dy; k = scale / sqrt(var + eps), xhat =
// (x - mean) / sqrt(var + eps). dscale[c] = sum(dy xhat), dbias[c] = sum(dy) (either may be null). One task per
// channel, planes in order, sums in double: independent of the thread count. Half planes are widened to float
// (exact) and summed as float planes are; their dx is rounded once from the double.
// Folded neighbours (passes/fuse_batch_norm.h), each the same bits as the separate op:
//   relu_out (may be null): dy is the gradient of a Relu's output relu_out, masked as ReluGrad does (dy where
//            relu_out > 0, else 0), in both passes;
//   dx_sum (may be null): per channel, the sum of dx over n and spatial as ReduceSum sums it (SumRun of each
//            plane, planes in order): a convolution's bias gradient when the convolution feeds the norm. Float and
//            double only: null for the half types.
template <typename T>
void BatchNormGrad(int64_t n, int64_t c, int64_t spatial, const T* dy, const T* x, const double* scale,
                   const double* mean, const double* var, double eps, T* dx, double* dscale, double* dbias,
                   const T* relu_out = nullptr, double* dx_sum = nullptr);

// The same three over channels-last activations, x [rows, c] (NHWC: rows = N*H*W; cpu_ops/norm_last.cc), as the
// channels_last pass lays out a CNN: the statistics of each channel over the rows, the same formulas and precision
// (half rows widened to float; dx rounded once), summed in fixed blocks of rows in order (independent of the thread
// count; not the NCHW kernels' order, so equal to them to rounding). No dx_sum.
template <typename T>
void ChannelMomentsLast(int64_t rows, int64_t c, const T* x, double* mean, double* var);
template <typename T>
void BatchNormApplyLast(int64_t rows, int64_t c, const T* x, const double* scale, const double* bias,
                        const double* mean, const double* var, double eps, T* y, bool relu = false);
template <typename T>
void BatchNormGradLast(int64_t rows, int64_t c, const T* dy, const T* x, const double* scale, const double* mean,
                       const double* var, double eps, T* dx, double* dscale, double* dbias,
                       const T* relu_out = nullptr);

// LayerNormalization over rows of `cols`: y = (x - mean) * invstd * scale[idx[j]] + bias[idx[j]], where
// idx maps a column to its (broadcast) parameter element; empty idx = identity. bias may be null.
// mean_out / invstd_out (one per row, may be null) receive the statistics. float16/bfloat16 rows take the float
// kernel on blocks of rows widened to float, y rounded once to T.
template <typename T>
void LayerNorm(int64_t rows, int64_t cols, const T* x, const T* scale, const T* bias,
               const std::vector<int64_t>& scale_idx, const std::vector<int64_t>& bias_idx, double eps, T* y,
               float* mean_out, float* invstd_out);

// The residual fold of passes/fuse_residual_norm.h: sum = x + residual (float adds, as Add), then y = LayerNorm of
// sum, as LayerNorm<float> gives it, one block of rows at a time while the block is in cache. sum may alias x or
// residual; y may not alias any input.
void ResidualLayerNormF32(int64_t rows, int64_t cols, const float* x, const float* residual, const float* scale,
                          const float* bias, const std::vector<int64_t>& scale_idx,
                          const std::vector<int64_t>& bias_idx, double eps, float* sum, float* y, float* mean_out,
                          float* invstd_out);

// InstanceNormalization of x [n, c, spatial] with scale[c], bias[c].
template <typename T>
void InstanceNorm(int64_t n, int64_t c, int64_t spatial, const T* x, const T* scale, const T* bias, double eps, T* y);

// MeanVarianceNormalization: y = (x - mean) / (sqrt(E[x^2] - mean^2) + 1e-9) with the statistics over the
// reduced dims of g (a geometry over x's dims); x and y have the same (full) shape `dims`.
template <typename T>
void MeanVarianceNorm(const std::vector<int64_t>& dims, const std::vector<bool>& reduce, const T* x, T* y);

// LpNormalization along the middle dim of [outer, n, inner], p = 1 or 2; a zero norm gives 0.
template <typename T>
void LpNorm(int p, int64_t outer, int64_t n, int64_t inner, const T* x, T* y);

}  // namespace ot::cpu
