#include "cpu_ops/softmax.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "cpu_ops/half_convert.h"
#include "cpu_ops/row_sum.h"
#include "kernel_common/half.h"
#include "kernel_common/scalar_math.h"

namespace ot::cpu {

namespace {

template <typename T>
using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename T, typename A>
T Store(A v) {
  if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>)
    return T(static_cast<float>(v));
  else
    return static_cast<T>(v);
}

// The float loops of a contiguous row (Softmax and LogSoftmax of float, and of half rows widened to float): e^x is
// kernel_common/vec_math.h's, every loop vectorizes; inlined into FloatRows, compiled for AVX2 and the baseline
// (OT_VEC_CLONES; no FMA, so the clones give bit-identical results). q may equal p.
#define OT_ALWAYS_INLINE inline __attribute__((always_inline))

// The row's max over its non-NaN elements (-inf if none): a NaN anywhere makes the sum, so every output, NaN anyway.
// Eight lanes in one GCC vector (the compiler left the scalar select chain scalar: a fifth of the kernel), combined
// as a tree; the order cannot change the max, only the sign of a zero one, and x - (+-0) is x either way.
OT_ALWAYS_INLINE float RowMax(const float* p, int64_t n) {
  typedef float V8 __attribute__((vector_size(32)));
  typedef float V4 __attribute__((vector_size(16)));
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  V8 acc = {kNegInf, kNegInf, kNegInf, kNegInf, kNegInf, kNegInf, kNegInf, kNegInf};
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    V8 v;
    __builtin_memcpy(&v, p + k, sizeof v);
    acc = v > acc ? v : acc;
  }
  V4 a = __builtin_shufflevector(acc, acc, 0, 1, 2, 3), b = __builtin_shufflevector(acc, acc, 4, 5, 6, 7);
  a = b > a ? b : a;
  b = __builtin_shufflevector(a, a, 2, 3, 2, 3);
  a = b > a ? b : a;
  b = __builtin_shufflevector(a, a, 1, 1, 1, 1);
  a = b > a ? b : a;
  float m = a[0];
  for (; k < n; ++k) m = p[k] > m ? p[k] : m;
  return m;
}

// e^(p[k] - m), k < n, into e and their sum (cpu_ops/row_sum.h's order, as the fused cluster's row sum). e may
// equal p.
OT_ALWAYS_INLINE double RowExp(const float* p, float* e, int64_t n, float m) {
  for (int64_t k = 0; k < n; ++k) e[k] = math::Exp(p[k] - m);
  return RowSum(e, n);
}

// The same sum without keeping the exponentials (LogSoftmax): chunks of 256 (a multiple of 4, so RowSum4 adds them
// in the one order).
OT_ALWAYS_INLINE double RowExpSum(const float* p, int64_t n, float m) {
  constexpr int64_t kChunk = 256;
  float buf[kChunk];
  RowSum4 acc;
  for (int64_t b = 0; b < n; b += kChunk) {
    const int64_t len = std::min(kChunk, n - b);
    for (int64_t k = 0; k < len; ++k) buf[k] = math::Exp(p[b + k] - m);
    acc.Add(buf, len);
  }
  return acc.Total();
}

OT_ALWAYS_INLINE void RowScale(float* q, int64_t n, float s) {
  for (int64_t k = 0; k < n; ++k) q[k] = q[k] * s;
}

OT_ALWAYS_INLINE void RowLogSoftmax(const float* p, float* q, int64_t n, float m, float ls) {
  for (int64_t k = 0; k < n; ++k) q[k] = (p[k] - m) - ls;
}

// Four softmax rows of n (N: n as a compile-time constant, 0: not): their maxima, exponentials, then the four row
// sums with their dependency chains interleaved (RowSums, each in RowSum's order: the same bits as one row at a
// time) -- a short row's sum is latency-bound alone.
template <int N>
OT_ALWAYS_INLINE void SoftmaxRows4(int64_t n_rt, const float* x, float* y) {
  const int64_t n = N > 0 ? N : n_rt;
  float m[4];
  for (int q = 0; q < 4; ++q) {
    m[q] = RowMax(x + q * n, n);
    if (std::isinf(m[q]) && m[q] < 0) m[q] = 0;  // all -inf: as in FloatRows
  }
  for (int q = 0; q < 4; ++q) {
    const float* p = x + q * n;
    float* e = y + q * n;
    for (int64_t k = 0; k < n; ++k) e[k] = math::Exp(p[k] - m[q]);
  }
  double sum[4];
  RowSums(y, 4, n, n, sum);
  for (int q = 0; q < 4; ++q) RowScale(y + q * n, n, 1.f / static_cast<float>(sum[q]));
}

// Softmax or LogSoftmax (not Hardmax) of `rows` contiguous float rows of n: the row helpers above inlined into one
// function per clone, so a short row (attention's 32 keys) pays no call per row. q may equal p.
// The float steps are those of the fused cluster's row program (graph/ops/fuse_table.cc), so --fuse=lite gives the
// same bits: the sum is rounded to float, then Softmax scales by its float reciprocal and LogSoftmax subtracts the
// float log of it.
OT_VEC_CLONES void FloatRows(SoftmaxKind kind, int64_t rows, int64_t n, const float* x, float* y) {
  int64_t i = 0;
  if (kind == SoftmaxKind::kSoftmax) {
    // Attention's usual key counts with the row length known to the compiler: whole vectors, no remainder loops.
    auto groups = [&](auto len) {
      for (; i + 4 <= rows; i += 4) SoftmaxRows4<decltype(len)::value>(n, x + i * n, y + i * n);
    };
    switch (n) {
      case 16:
        groups(std::integral_constant<int, 16>{});
        break;
      case 32:
        groups(std::integral_constant<int, 32>{});
        break;
      case 64:
        groups(std::integral_constant<int, 64>{});
        break;
      case 128:
        groups(std::integral_constant<int, 128>{});
        break;
      default:
        groups(std::integral_constant<int, 0>{});
        break;
    }
  }
  for (; i < rows; ++i) {
    const float* p = x + i * n;
    float* q = y + i * n;
    float m = RowMax(p, n);
    if (std::isinf(m) && m < 0) m = 0;  // all -inf: exp gives 0s, result is NaN as in the reference
    if (kind == SoftmaxKind::kSoftmax) {
      const float sum = static_cast<float>(RowExp(p, q, n, m));  // q = e^(x - m), then scaled in place
      RowScale(q, n, 1.f / sum);
    } else {
      const float sum = static_cast<float>(RowExpSum(p, n, m));
      RowLogSoftmax(p, q, n, m, std::log(sum));
    }
  }
}

// One column j of the slice [n] with stride `inner`, starting at p/q.
template <typename T>
void SoftmaxColumn(SoftmaxKind kind, int64_t n, int64_t inner, const T* p, T* q) {
  using A = Acc<T>;
  if constexpr (std::is_same_v<T, float>) {
    if (kind != SoftmaxKind::kHardmax && inner == 1) {
      FloatRows(kind, 1, n, p, q);
      return;
    }
  }
  A m = -std::numeric_limits<A>::infinity();
  int64_t arg = 0;
  for (int64_t k = 0; k < n; ++k) {
    A v = static_cast<A>(p[k * inner]);
    if (v > m || (k == 0 && !(v <= m))) {
      m = v;
      arg = k;
    }
  }
  if (kind == SoftmaxKind::kHardmax) {
    for (int64_t k = 0; k < n; ++k) q[k * inner] = Store<T>(A(k == arg ? 1 : 0));
    return;
  }
  if (std::isinf(m) && m < 0) m = 0;  // all -inf: exp gives 0s, result is NaN as in the reference
  double sum = 0;
  for (int64_t k = 0; k < n; ++k) sum += math::Exp(static_cast<A>(p[k * inner]) - m);
  if (kind == SoftmaxKind::kSoftmax) {
    const A inv = static_cast<A>(1.0 / sum);
    for (int64_t k = 0; k < n; ++k) q[k * inner] = Store<T>(math::Exp(static_cast<A>(p[k * inner]) - m) * inv);
  } else {
    // (x - max) - log(sum): subtracting max first keeps the precision of large inputs.
    const A ls = static_cast<A>(std::log(sum));
    for (int64_t k = 0; k < n; ++k) q[k * inner] = Store<T>((static_cast<A>(p[k * inner]) - m) - ls);
  }
}

// A tile of `nj` adjacent columns (inner > 1): the same arithmetic as SoftmaxColumn, column by column, but
// every pass reads rows of nj contiguous elements; the passes over j vectorize (float: vec_math's exp; OT_VEC_CLONES).
template <typename T>
OT_VEC_CLONES void SoftmaxTile(SoftmaxKind kind, int64_t n, int64_t inner, int64_t nj, const T* p, T* q,
                               std::vector<float>& mf, std::vector<double>& md, std::vector<double>& sum,
                               std::vector<int64_t>& arg) {
  using A = Acc<T>;
  A* m;
  if constexpr (std::is_same_v<A, double>)
    m = md.data();
  else
    m = mf.data();
  for (int64_t j = 0; j < nj; ++j) {
    m[j] = -std::numeric_limits<A>::infinity();
    arg[j] = 0;
    sum[j] = 0;
  }
  for (int64_t k = 0; k < n; ++k) {
    const T* row = p + k * inner;
    for (int64_t j = 0; j < nj; ++j) {
      const A v = static_cast<A>(row[j]);
      if (v > m[j] || (k == 0 && !(v <= m[j]))) {
        m[j] = v;
        arg[j] = k;
      }
    }
  }
  if (kind == SoftmaxKind::kHardmax) {
    for (int64_t k = 0; k < n; ++k)
      for (int64_t j = 0; j < nj; ++j) q[k * inner + j] = Store<T>(A(arg[j] == k ? 1 : 0));
    return;
  }
  for (int64_t j = 0; j < nj; ++j)
    if (std::isinf(m[j]) && m[j] < 0) m[j] = 0;
  for (int64_t k = 0; k < n; ++k) {
    const T* row = p + k * inner;
    for (int64_t j = 0; j < nj; ++j) sum[j] += math::Exp(static_cast<A>(row[j]) - m[j]);
  }
  if (kind == SoftmaxKind::kSoftmax) {
    for (int64_t j = 0; j < nj; ++j) sum[j] = static_cast<A>(1.0 / sum[j]);
    for (int64_t k = 0; k < n; ++k)
      for (int64_t j = 0; j < nj; ++j)
        q[k * inner + j] = Store<T>(math::Exp(static_cast<A>(p[k * inner + j]) - m[j]) * static_cast<A>(sum[j]));
  } else {
    for (int64_t j = 0; j < nj; ++j) sum[j] = static_cast<A>(std::log(sum[j]));
    for (int64_t k = 0; k < n; ++k)
      for (int64_t j = 0; j < nj; ++j)
        q[k * inner + j] = Store<T>((static_cast<A>(p[k * inner + j]) - m[j]) - static_cast<A>(sum[j]));
  }
}

constexpr int64_t kTile = 256;

}  // namespace

template <typename T>
void Softmax(SoftmaxKind kind, int64_t outer, int64_t n, int64_t inner, const T* x, T* y) {
  if (outer * inner == 0 || n == 0) return;
  if (inner == 1) {
    // Contiguous rows: one task owns whole rows.
    tbb::parallel_for(
        tbb::blocked_range<int64_t>(0, outer, std::max<int64_t>(1, 16384 / n)),
        [&](const tbb::blocked_range<int64_t>& r) {
          if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) {
            // Half rows: widened into float rows, the float kernel in place (the same fp32 arithmetic as on
            // the half elements, vectorizable), rounded once when stored. Rows of up to kChunk run in chunks on
            // the stack, four rows at a time (FloatRows: the same bits per row as one at a time).
            constexpr int64_t kChunk = kHalfRowChunk;
            if (kind != SoftmaxKind::kHardmax && n <= kChunk) {
              const int64_t chunk = kChunk / n;
              float buf[kChunk];
              for (int64_t i = r.begin(); i < r.end(); i += chunk) {
                const int64_t rows = std::min(chunk, r.end() - i);
                LoadFloats(x + i * n, buf, rows * n);
                FloatRows(kind, rows, n, buf, buf);
                StoreFloats(buf, y + i * n, rows * n);
              }
              return;
            }
            std::vector<float> row(static_cast<size_t>(n));
            for (int64_t i = r.begin(); i < r.end(); ++i) {
              LoadFloats(x + i * n, row.data(), n);
              SoftmaxColumn<float>(kind, n, 1, row.data(), row.data());
              StoreFloats(row.data(), y + i * n, n);
            }
          } else if constexpr (std::is_same_v<T, float>) {
            if (kind != SoftmaxKind::kHardmax)
              FloatRows(kind, r.end() - r.begin(), n, x + r.begin() * n, y + r.begin() * n);
            else
              for (int64_t i = r.begin(); i < r.end(); ++i) SoftmaxColumn(kind, n, 1, x + i * n, y + i * n);
          } else {
            for (int64_t i = r.begin(); i < r.end(); ++i) SoftmaxColumn(kind, n, 1, x + i * n, y + i * n);
          }
        },
        tbb::simple_partitioner());
    return;
  }
  // Columns in tiles of up to kTile adjacent columns of one outer slice; each tile belongs to one task.
  const int64_t tiles = (inner + kTile - 1) / kTile;
  const int64_t grain = std::max<int64_t>(1, 16384 / (n * std::min(inner, kTile)));
  tbb::parallel_for(
      tbb::blocked_range<int64_t>(0, outer * tiles, grain),
      [&](const tbb::blocked_range<int64_t>& r) {
        std::vector<float> mf(kTile);
        std::vector<double> md(kTile), sum(kTile);
        std::vector<int64_t> arg(kTile);
        for (int64_t t = r.begin(); t < r.end(); ++t) {
          const int64_t i = t / tiles, j0 = (t % tiles) * kTile, nj = std::min(kTile, inner - j0);
          const int64_t off = i * n * inner + j0;
          SoftmaxTile(kind, n, inner, nj, x + off, y + off, mf, md, sum, arg);
        }
      },
      tbb::simple_partitioner());
}

namespace {

// FloatRows' LogSoftmax steps for one element of each row: its max and exp-sum passes over the row, then only
// (x[col] - m) - log(sum), not the row's other n - 1 log-probabilities.
OT_VEC_CLONES void PickRows(int64_t rows, int64_t n, const float* x, const int64_t* col, float* out) {
  for (int64_t i = 0; i < rows; ++i) {
    if (col[i] < 0 || col[i] >= n) {
      out[i] = 0.f;
      continue;
    }
    const float* p = x + i * n;
    float m = RowMax(p, n);
    if (std::isinf(m) && m < 0) m = 0;
    const float sum = static_cast<float>(RowExpSum(p, n, m));
    out[i] = (p[col[i]] - m) - std::log(sum);
  }
}

}  // namespace

void LogSoftmaxPickF32(int64_t rows, int64_t n, const float* x, const int64_t* col, float* out) {
  if (rows <= 0 || n <= 0) return;
  tbb::parallel_for(
      tbb::blocked_range<int64_t>(0, rows, std::max<int64_t>(1, 16384 / n)),
      [&](const tbb::blocked_range<int64_t>& r) {
        PickRows(r.end() - r.begin(), n, x + r.begin() * n, col + r.begin(), out + r.begin());
      },
      tbb::simple_partitioner());
}

void SoftmaxRowsF32(int64_t rows, int64_t n, const float* x, float* y) {
  if (rows > 0 && n > 0) FloatRows(SoftmaxKind::kSoftmax, rows, n, x, y);
}

template void Softmax<float>(SoftmaxKind, int64_t, int64_t, int64_t, const float*, float*);
template void Softmax<double>(SoftmaxKind, int64_t, int64_t, int64_t, const double*, double*);
template void Softmax<float16>(SoftmaxKind, int64_t, int64_t, int64_t, const float16*, float16*);
template void Softmax<bfloat16>(SoftmaxKind, int64_t, int64_t, int64_t, const bfloat16*, bfloat16*);

}  // namespace ot::cpu
