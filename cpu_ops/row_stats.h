// The per-row statistics of the float LayerNormalization kernels, forward (cpu_ops/norm.cc) and backward
// (cpu_ops/row_grad.cc, when the forward's Mean/InvStdDev are not saved): mean and 1 / sqrt(biased var + eps) in
// double. One definition, so the backward recomputes exactly the statistics the forward normalized with.
// Order: each sum runs over eight lanes (lane l takes the elements j = l mod 8; two explicit vectors of four
// doubles, since GCC does not vectorize the scalar lane idiom once the loop body grows), folded as
// ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)), the tail added in order. It depends on cols alone: a row's
// statistics are the same in any group of rows, in every target_clones clone (no fma is formed: -ffp-contract=off),
// for any thread count. Rows are taken four at a time with their dependency chains interleaved -- a short row's
// sums are latency-bound one row at a time (LayerNormGrad on [1024, 64]: 0.21 -> 0.09 ms with this and its one-pass
// row, 1 thread).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

namespace ot::cpu::row_stats {

#define OT_ROW_STATS_INLINE inline __attribute__((always_inline))

typedef double D4 __attribute__((vector_size(32)));
typedef float F4 __attribute__((vector_size(16)));

// The fixed fold of eight lanes.
OT_ROW_STATS_INLINE double Fold8(const double* a) {
  return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}
OT_ROW_STATS_INLINE double Fold8(const D4& lo, const D4& hi) {
  const double a[8] = {lo[0], lo[1], lo[2], lo[3], hi[0], hi[1], hi[2], hi[3]};
  return Fold8(a);
}

// Four floats widened to doubles (through an out-parameter: a 32-byte vector returned by value from code built
// without AVX changes the ABI, which GCC warns of).
OT_ROW_STATS_INLINE void Widen4(const float* p, D4& out) {
  F4 f;
  std::memcpy(&f, p, sizeof f);
  out = __builtin_convertvector(f, D4);
}

// Mean and 1/sqrt(var + eps) of R consecutive rows of x (row stride cols) into mu[R], r[R].
template <int R>
OT_ROW_STATS_INLINE void StatsOfRows(const float* x, int64_t cols, double eps, double* mu, double* r) {
  D4 a[R][2];
  for (int q = 0; q < R; ++q) a[q][0] = a[q][1] = D4{0, 0, 0, 0};
  int64_t j = 0;
  for (; j + 8 <= cols; j += 8)
    for (int q = 0; q < R; ++q)
      for (int h = 0; h < 2; ++h) {
        D4 w;
        Widen4(x + q * cols + j + 4 * h, w);
        a[q][h] += w;
      }
  for (int q = 0; q < R; ++q) {
    double t = Fold8(a[q][0], a[q][1]);
    for (int64_t k = j; k < cols; ++k) t += static_cast<double>(x[q * cols + k]);
    mu[q] = t / static_cast<double>(cols);
    a[q][0] = a[q][1] = D4{0, 0, 0, 0};
  }
  for (j = 0; j + 8 <= cols; j += 8)
    for (int q = 0; q < R; ++q)
      for (int h = 0; h < 2; ++h) {
        D4 d;
        Widen4(x + q * cols + j + 4 * h, d);
        d -= mu[q];
        a[q][h] += d * d;
      }
  for (int q = 0; q < R; ++q) {
    double v = Fold8(a[q][0], a[q][1]);
    for (int64_t k = j; k < cols; ++k) {
      const double d = static_cast<double>(x[q * cols + k]) - mu[q];
      v += d * d;
    }
    r[q] = 1.0 / std::sqrt(v / static_cast<double>(cols) + eps);
  }
}

// The statistics of rows [r0, r1) of x into mu[0 .. r1 - r0), r[...]: groups of four, then one at a time. Inline
// into the caller's OT_VEC_CLONES function.
OT_ROW_STATS_INLINE void StatsOfRowRange(const float* x, int64_t cols, int64_t r0, int64_t r1, double eps, double* mu,
                                         double* r) {
  int64_t i = r0;
  for (; i + 4 <= r1; i += 4) StatsOfRows<4>(x + i * cols, cols, eps, mu + (i - r0), r + (i - r0));
  for (; i < r1; ++i) StatsOfRows<1>(x + i * cols, cols, eps, mu + (i - r0), r + (i - r0));
}

}  // namespace ot::cpu::row_stats
