// The one float-row sum of the CPU kernels whose fused twin is a cluster program's row reduction: Softmax,
// LogSoftmax and SoftmaxGrad (cpu_ops/softmax.cc, cpu_ops/row_grad.cc) and the cluster interpreter's kReduceSum
// (cpu_ops/fused_elementwise.cc). Every one adds in double over four interleaved lanes, elements past the last full
// group of four into a separate tail, combined as ((l0 + l1) + (l2 + l3)) + tail: the order is fixed by n alone
// (deterministic for any thread count, vectorizable), and because it is the same order everywhere a fused softmax
// gives the unfused kernels' bits -- which --fuse=lite must, since Adam turns the rounding noise of a gradient that
// is zero in exact arithmetic (the attention's key bias) into full-size updates.
#pragma once
#include <cstdint>

namespace ot::cpu {

#define OT_ROW_SUM_INLINE inline __attribute__((always_inline))

// A running sum of consecutive chunks of one row; every chunk but the last must have a multiple of 4 elements.
struct RowSum4 {
  double lane[4] = {0, 0, 0, 0};
  double tail = 0;
  OT_ROW_SUM_INLINE void Add(const float* x, int64_t n) {
    int64_t j = 0;
    for (; j + 4 <= n; j += 4)
      for (int k = 0; k < 4; ++k) lane[k] += static_cast<double>(x[j + k]);
    for (; j < n; ++j) tail += static_cast<double>(x[j]);
  }
  OT_ROW_SUM_INLINE double Total() const { return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + tail; }
};

// The sum of x[0..n).
OT_ROW_SUM_INLINE double RowSum(const float* x, int64_t n) {
  RowSum4 s;
  s.Add(x, n);
  return s.Total();
}

// The sums of R rows of n (row stride `stride`) into out[R], each in RowSum's order, the R rows' dependency chains
// interleaved: a short row (attention's 32 keys) is one chain of n / 4 dependent vector adds, latency-bound one
// row at a time. Explicit vectors of four doubles (lane k takes the elements j = k mod 4), so every clone adds in
// the one order; inline into an OT_VEC_CLONES caller.
template <int R>
OT_ROW_SUM_INLINE void RowSumsInterleaved(const float* x, int64_t stride, int64_t n, double* out) {
  typedef double D4 __attribute__((vector_size(32)));
  typedef float F4 __attribute__((vector_size(16)));
  D4 acc[R];
  for (int q = 0; q < R; ++q) acc[q] = D4{0, 0, 0, 0};
  int64_t j = 0;
  for (; j + 4 <= n; j += 4)
    for (int q = 0; q < R; ++q) {
      F4 f;
      __builtin_memcpy(&f, x + q * stride + j, sizeof f);
      acc[q] += __builtin_convertvector(f, D4);
    }
  for (int q = 0; q < R; ++q) {
    double tail = 0;
    for (int64_t k = j; k < n; ++k) tail += static_cast<double>(x[q * stride + k]);
    out[q] = ((acc[q][0] + acc[q][1]) + (acc[q][2] + acc[q][3])) + tail;
  }
}

// RowSum of `rows` rows of n (row stride `stride`) into out[rows]: four rows at a time, then one at a time.
OT_ROW_SUM_INLINE void RowSums(const float* x, int64_t rows, int64_t stride, int64_t n, double* out) {
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) RowSumsInterleaved<4>(x + r * stride, stride, n, out + r);
  for (; r < rows; ++r) out[r] = RowSum(x + r * stride, n);
}

}  // namespace ot::cpu
