#include "cpu_ops/softmax.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "cpu_ops/half_convert.h"
#include "kernel_common/half.h"

namespace ot::cpu {

namespace {

template <typename T>
using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename T, typename A>
T Store(A v) {
  if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) return T(static_cast<float>(v));
  else return static_cast<T>(v);
}

// One column j of the slice [n] with stride `inner`, starting at p/q.
template <typename T>
void SoftmaxColumn(SoftmaxKind kind, int64_t n, int64_t inner, const T* p, T* q) {
  using A = Acc<T>;
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
  for (int64_t k = 0; k < n; ++k) sum += std::exp(static_cast<A>(p[k * inner]) - m);
  if (kind == SoftmaxKind::kSoftmax) {
    const A inv = static_cast<A>(1.0 / sum);
    for (int64_t k = 0; k < n; ++k) q[k * inner] = Store<T>(std::exp(static_cast<A>(p[k * inner]) - m) * inv);
  } else {
    // (x - max) - log(sum): subtracting max first keeps the precision of large inputs.
    const A ls = static_cast<A>(std::log(sum));
    for (int64_t k = 0; k < n; ++k) q[k * inner] = Store<T>((static_cast<A>(p[k * inner]) - m) - ls);
  }
}

// A tile of `nj` adjacent columns (inner > 1): the same arithmetic as SoftmaxColumn, column by column, but
// every pass reads rows of nj contiguous elements.
template <typename T>
void SoftmaxTile(SoftmaxKind kind, int64_t n, int64_t inner, int64_t nj, const T* p, T* q, std::vector<float>& mf,
                 std::vector<double>& md, std::vector<double>& sum, std::vector<int64_t>& arg) {
  using A = Acc<T>;
  A* m;
  if constexpr (std::is_same_v<A, double>) m = md.data();
  else m = mf.data();
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
    for (int64_t j = 0; j < nj; ++j) sum[j] += std::exp(static_cast<A>(row[j]) - m[j]);
  }
  if (kind == SoftmaxKind::kSoftmax) {
    for (int64_t j = 0; j < nj; ++j) sum[j] = static_cast<A>(1.0 / sum[j]);
    for (int64_t k = 0; k < n; ++k)
      for (int64_t j = 0; j < nj; ++j)
        q[k * inner + j] = Store<T>(std::exp(static_cast<A>(p[k * inner + j]) - m[j]) * static_cast<A>(sum[j]));
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
            // Half rows: widened into a float row, the float kernel in place (the same fp32 arithmetic as on
            // the half elements, vectorizable), rounded once when stored.
            std::vector<float> row(static_cast<size_t>(n));
            for (int64_t i = r.begin(); i < r.end(); ++i) {
              LoadFloats(x + i * n, row.data(), n);
              SoftmaxColumn<float>(kind, n, 1, row.data(), row.data());
              StoreFloats(row.data(), y + i * n, n);
            }
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

template void Softmax<float>(SoftmaxKind, int64_t, int64_t, int64_t, const float*, float*);
template void Softmax<double>(SoftmaxKind, int64_t, int64_t, int64_t, const double*, double*);
template void Softmax<float16>(SoftmaxKind, int64_t, int64_t, int64_t, const float16*, float16*);
template void Softmax<bfloat16>(SoftmaxKind, int64_t, int64_t, int64_t, const bfloat16*, bfloat16*);

}  // namespace ot::cpu
