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

}  // namespace ot::cpu
