#include "cpu_ops/softmax.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

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

}  // namespace

template <typename T>
void Softmax(SoftmaxKind kind, int64_t outer, int64_t n, int64_t inner, const T* x, T* y) {
  const int64_t total = outer * inner;
  if (total == 0 || n == 0) return;
  const int64_t grain = std::max<int64_t>(1, 16384 / n);
  // Each task owns whole columns; inner > 1 walks the columns of one outer slice in order.
  tbb::parallel_for(
      tbb::blocked_range<int64_t>(0, total, grain),
      [&](const tbb::blocked_range<int64_t>& r) {
        for (int64_t o = r.begin(); o < r.end(); ++o) {
          const int64_t i = o / inner, j = o % inner;
          SoftmaxColumn(kind, n, inner, x + i * n * inner + j, y + i * n * inner + j);
        }
      },
      tbb::simple_partitioner());
}

template void Softmax<float>(SoftmaxKind, int64_t, int64_t, int64_t, const float*, float*);
template void Softmax<double>(SoftmaxKind, int64_t, int64_t, int64_t, const double*, double*);
template void Softmax<float16>(SoftmaxKind, int64_t, int64_t, int64_t, const float16*, float16*);
template void Softmax<bfloat16>(SoftmaxKind, int64_t, int64_t, int64_t, const bfloat16*, bfloat16*);

}  // namespace ot::cpu
