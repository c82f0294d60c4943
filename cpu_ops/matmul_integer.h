// Helpers of the integer and quantized linear ops (MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv):
// zero-point subtraction into a wide type before an exact GEMM/convolution, and requantization.
#pragma once
#include <cstdint>

namespace ot::cpu {

// dst[i] = src[i] - zp[(i / inner) % zp_count]; zp == nullptr means 0. Per-tensor: zp_count 1. Per-row of a
// [.., M, K] matrix: inner K, zp_count M (or batches*M). Per output channel of conv weights: inner = the
// elements of one channel.
template <typename T, typename D>
void SubtractZeroPoint(const T* src, int64_t n, const T* zp, int64_t zp_count, int64_t inner, D* dst);

// Per column of [.., K, N] matrices: dst[i] = src[i] - zp[((i / (K*N)) * N + i % N) % zp_count].
template <typename T, typename D>
void SubtractZeroPointCols(const T* src, int64_t n, const T* zp, int64_t zp_count, int64_t k, int64_t cols, D* dst);

// y[i] = saturate(round_half_even(acc[i] * mult[(i / inner) % mult_count]) + zp) in float, as onnxruntime.
template <typename Q>
void Requantize(const double* acc, int64_t n, const float* mult, int64_t mult_count, int64_t inner, int32_t zp, Q* y);

}  // namespace ot::cpu
