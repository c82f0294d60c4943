// Softmax, LogSoftmax and Hardmax along the middle dim of [outer, n, inner] (the executor maps both the
// opset < 13 "coerce to 2-D at axis" form, inner = 1, and the opset >= 13 single-axis form onto this).
// Statistics in float (double for float64 inputs); the max is subtracted before exp. Contiguous float (and half,
// widened) rows take the float steps of the fused cluster's row program (cpu_ops/softmax.cc), so fusion keeps bits.
#pragma once
#include <cstdint>

namespace ot::cpu {

enum class SoftmaxKind { kSoftmax, kLogSoftmax, kHardmax };

// T: float, double, float16, bfloat16. y may not alias x.
template <typename T>
void Softmax(SoftmaxKind kind, int64_t outer, int64_t n, int64_t inner, const T* x, T* y);

// Softmax of `rows` contiguous float rows of n in the calling thread: the float steps of Softmax above (and of the
// fused cluster's softmax rows, cpu_ops/fused_elementwise.cc). y may equal x.
void SoftmaxRowsF32(int64_t rows, int64_t n, const float* x, float* y);

// out[i] = LogSoftmax(row i of x)[col[i]] for `rows` contiguous float rows of n, the bits Softmax(kLogSoftmax) writes
// there, without the row's other log-probabilities (the loss reads one a row); 0 where col[i] is outside [0, n).
void LogSoftmaxPickF32(int64_t rows, int64_t n, const float* x, const int64_t* col, float* out);

}  // namespace ot::cpu
