#include "cpu_ops/reduce.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernel_common/half.h"
#include "kernel_common/vec_math.h"

namespace ot::cpu {

ReduceGeometry MakeReduceGeometry(const std::vector<int64_t>& dims, const std::vector<bool>& reduce) {
  // Runs of (size, reduced) with size-1 dims dropped; adjacent runs of the same kind merge.
  std::vector<int64_t> sizes;
  std::vector<bool> red;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] == 1) continue;
    if (!sizes.empty() && red.back() == reduce[d]) {
      sizes.back() *= dims[d];
    } else {
      sizes.push_back(dims[d]);
      red.push_back(reduce[d]);
    }
  }
  std::vector<int64_t> strides(sizes.size());
  int64_t s = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = s;
    s *= sizes[i];
  }
  ReduceGeometry g;
  size_t n = sizes.size();
  if (n > 0 && !red[n - 1]) {
    g.inner = sizes[n - 1];
    --n;
  }
  for (size_t i = 0; i < n; ++i) {
    if (red[i]) {
      g.red_dims.push_back(sizes[i]);
      g.red_strides.push_back(strides[i]);
      g.count *= sizes[i];
    } else {
      g.kept_dims.push_back(sizes[i]);
      g.kept_strides.push_back(strides[i]);
      g.rows *= sizes[i];
    }
  }
  return g;
}

int64_t RowBase(const ReduceGeometry& g, int64_t r) {
  int64_t off = 0;
  for (size_t d = g.kept_dims.size(); d-- > 0;) {
    off += (r % g.kept_dims[d]) * g.kept_strides[d];
    r /= g.kept_dims[d];
  }
  return off;
}

namespace {

template <typename T>
constexpr bool kIsFloat = std::is_floating_point_v<T> || std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>;

template <typename T>
using FloatAcc = std::conditional_t<std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>, float, double>;

template <typename A>
A Lowest() {
  return std::numeric_limits<A>::has_infinity ? -std::numeric_limits<A>::infinity() : std::numeric_limits<A>::lowest();
}
template <typename A>
A Highest() {
  return std::numeric_limits<A>::has_infinity ? std::numeric_limits<A>::infinity() : std::numeric_limits<A>::max();
}

template <typename A>
bool IsNan(A v) {
  if constexpr (std::is_floating_point_v<A>)
    return std::isnan(v);
  else
    return false;
}

template <typename T, typename A>
T Store(A v) {
  if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>)
    return T(static_cast<float>(v));
  else
    return static_cast<T>(v);
}

// Chunks of outputs a task handles: tiles of `inner` so a small number of long rows still spreads.
constexpr int64_t kInnerTile = 512;
// Chunk of a long contiguous reduction that one task reduces when there are too few outputs to spread.
constexpr int64_t kChunk = 16384;

template <typename A>
A Finalize(ReduceKind kind, A v, int64_t count) {
  switch (kind) {
    case ReduceKind::kMean:
      if constexpr (std::is_floating_point_v<A>)
        return v / static_cast<A>(count);
      else
        return count ? v / static_cast<A>(count) : A(0);
    case ReduceKind::kL2:
      return static_cast<A>(std::sqrt(v));
    case ReduceKind::kLogSum:
      return static_cast<A>(std::log(v));
    default:
      return v;
  }
}

// Few outputs, each a long contiguous run (reduce-all, or a handful of rows): fixed chunks of kChunk
// elements are reduced in parallel and their partials combined in chunk order, so the result depends only on
// the sizes, never on the thread count. Not for LogSumExp (two passes).
template <typename T, typename A>
void ReduceChunked(ReduceKind kind, const ReduceGeometry& g, A init, const T* x, T* y) {
  const int64_t chunks = (g.count + kChunk - 1) / kChunk;
  std::vector<A> part(g.rows * chunks);
  auto elem = [kind](A v) -> A {
    switch (kind) {
      case ReduceKind::kL1:
        return v < 0 ? -v : v;
      case ReduceKind::kL2:
      case ReduceKind::kSumSquare:
        return v * v;
      default:
        return v;
    }
  };
  auto combine = [kind](A a, A v) -> A {
    switch (kind) {
      case ReduceKind::kMax:
        return (v > a || IsNan(v)) && !IsNan(a) ? v : a;
      case ReduceKind::kMin:
        return (v < a || IsNan(v)) && !IsNan(a) ? v : a;
      case ReduceKind::kProd:
        return a * v;
      default:
        return a + v;
    }
  };
  tbb::parallel_for(
      tbb::blocked_range<int64_t>(0, g.rows * chunks, 1),
      [&](const tbb::blocked_range<int64_t>& r) {
        for (int64_t t = r.begin(); t < r.end(); ++t) {
          const int64_t row = t / chunks, c0 = (t % chunks) * kChunk, nc = std::min(kChunk, g.count - c0);
          const T* p = x + RowBase(g, row) + c0;
          A a = init;
          for (int64_t k = 0; k < nc; ++k) a = combine(a, elem(static_cast<A>(p[k])));
          part[t] = a;
        }
      },
      tbb::simple_partitioner());
  for (int64_t row = 0; row < g.rows; ++row) {
    A a = init;
    for (int64_t c = 0; c < chunks; ++c) a = combine(a, part[row * chunks + c]);
    y[row] = Store<T>(Finalize(kind, a, g.count));
  }
}

// Sum of f(p[j]) over n contiguous elements in double: eight independent lanes (one vector add chain each, so
// the loop vectorizes and is not bound by the latency of one serial add), folded in a fixed tree, then the tail
// in order. The result depends only on n and the data (deterministic).
template <ReduceKind K, typename T>
double SumContiguous(const T* __restrict p, int64_t n) {
  auto f = [](double v) {
    if constexpr (K == ReduceKind::kL1)
      return v < 0 ? -v : v;
    else if constexpr (K == ReduceKind::kL2 || K == ReduceKind::kSumSquare)
      return v * v;
    else
      return v;
  };
  double a[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int l = 0; l < 8; ++l) a[l] += f(static_cast<double>(p[j + l]));
  double s = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
  for (; j < n; ++j) s += f(static_cast<double>(p[j]));
  return s;
}

}  // namespace

template <typename T>
double SumRun(const T* p, int64_t n) {
  return SumContiguous<ReduceKind::kSum>(p, n);
}
template double SumRun<float>(const float*, int64_t);
template double SumRun<double>(const double*, int64_t);

namespace {

// Sum-like reductions of float/double whose last reduced run is contiguous and the output has no inner run
// (e.g. a conv bias gradient, ReduceSum over (0, 2, 3) of NCHW): one task per output, each contiguous run summed
// by SumContiguous and the runs added in row-major order. (The generic path below carried one accumulator
// through the element loop: a serial dependency, ~4 cycles an element.)
template <ReduceKind K, typename T>
void ReduceSumRuns(const ReduceGeometry& g, const T* x, T* y) {
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(g.count, 1));
  tbb::parallel_for(
      tbb::blocked_range<int64_t>(0, g.rows, grain),
      [&](const tbb::blocked_range<int64_t>& r) {
        for (int64_t row = r.begin(); row < r.end(); ++row) {
          const T* xb = x + RowBase(g, row);
          double acc = 0;
          ForEachReducedRun(g, [&](int64_t off, int64_t n, int64_t) { acc += SumContiguous<K>(xb + off, n); });
          y[row] = Store<T>(Finalize(K, acc, g.count));
        }
      },
      tbb::simple_partitioner());
}

template <typename T>
bool TryReduceSumRuns(ReduceKind kind, const ReduceGeometry& g, const T* x, T* y) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    if (g.inner != 1 || g.red_dims.empty() || g.red_strides.back() != 1 || g.red_dims.back() < 16) return false;
    switch (kind) {
      case ReduceKind::kSum:
        ReduceSumRuns<ReduceKind::kSum>(g, x, y);
        return true;
      case ReduceKind::kMean:
        ReduceSumRuns<ReduceKind::kMean>(g, x, y);
        return true;
      case ReduceKind::kSumSquare:
        ReduceSumRuns<ReduceKind::kSumSquare>(g, x, y);
        return true;
      case ReduceKind::kL1:
        ReduceSumRuns<ReduceKind::kL1>(g, x, y);
        return true;
      case ReduceKind::kL2:
        ReduceSumRuns<ReduceKind::kL2>(g, x, y);
        return true;
      case ReduceKind::kLogSum:
        ReduceSumRuns<ReduceKind::kLogSum>(g, x, y);
        return true;
      default:
        return false;
    }
  }
  return false;
}

template <typename T, typename A>
void ReduceTyped(ReduceKind kind, const ReduceGeometry& g, const T* x, T* y) {
  const int64_t inner = g.inner;
  if (inner == 1 && g.red_dims.size() == 1 && g.red_strides[0] == 1 && g.rows < 8 && g.count >= 4 * kChunk &&
      kind != ReduceKind::kLogSumExp) {
    A init = 0;
    if (kind == ReduceKind::kMax) {
      if constexpr (std::is_integral_v<T>)
        init = static_cast<A>(std::numeric_limits<T>::lowest());
      else
        init = Lowest<A>();
    } else if (kind == ReduceKind::kMin) {
      if constexpr (std::is_integral_v<T>)
        init = static_cast<A>(std::numeric_limits<T>::max());
      else
        init = Highest<A>();
    } else if (kind == ReduceKind::kProd) {
      init = 1;
    }
    ReduceChunked<T, A>(kind, g, init, x, y);
    return;
  }
  if (TryReduceSumRuns(kind, g, x, y)) return;
  const int64_t tiles_per_row = std::max<int64_t>(1, (inner + kInnerTile - 1) / kInnerTile);
  const int64_t tasks = g.rows * tiles_per_row;
  const int64_t work_per_task = std::max<int64_t>(1, std::min(inner, kInnerTile) * std::max<int64_t>(g.count, 1));
  const int64_t grain = std::max<int64_t>(1, 32768 / work_per_task);
  auto body = [&](const tbb::blocked_range<int64_t>& range) {
    std::vector<A> acc(std::min(inner, kInnerTile)), aux;
    if (kind == ReduceKind::kLogSumExp) aux.resize(acc.size());
    for (int64_t t = range.begin(); t < range.end(); ++t) {
      const int64_t row = t / tiles_per_row;
      const int64_t j0 = (t % tiles_per_row) * kInnerTile;
      const int64_t nj = std::min(kInnerTile, inner - j0);
      const T* xb = x + RowBase(g, row) + j0;
      T* yb = y + row * inner + j0;
      A init = 0;
      // Identities in T's range (an empty reduction of int32 max gives INT32_MIN, not a wrapped int64).
      if (kind == ReduceKind::kMax || kind == ReduceKind::kLogSumExp) {
        if constexpr (std::is_integral_v<T>)
          init = static_cast<A>(std::numeric_limits<T>::lowest());
        else
          init = Lowest<A>();
      } else if (kind == ReduceKind::kMin) {
        if constexpr (std::is_integral_v<T>)
          init = static_cast<A>(std::numeric_limits<T>::max());
        else
          init = Highest<A>();
      } else if (kind == ReduceKind::kProd)
        init = 1;
      std::fill(acc.begin(), acc.begin() + nj, init);
      auto accumulate = [&](auto&& op) {
        ForEachReducedRun(g, [&](int64_t off, int64_t n, int64_t stride) {
          for (int64_t k = 0; k < n; ++k) {
            const T* p = xb + off + k * stride;
            for (int64_t j = 0; j < nj; ++j) op(acc[j], static_cast<A>(p[j]), j);
          }
        });
      };
      switch (kind) {
        case ReduceKind::kSum:
        case ReduceKind::kMean:
        case ReduceKind::kLogSum:
          accumulate([](A& a, A v, int64_t) { a += v; });
          break;
        case ReduceKind::kMax:
          accumulate([](A& a, A v, int64_t) {
            if (v > a || IsNan(v)) a = IsNan(a) ? a : v;
          });
          break;
        case ReduceKind::kMin:
          accumulate([](A& a, A v, int64_t) {
            if (v < a || IsNan(v)) a = IsNan(a) ? a : v;
          });
          break;
        case ReduceKind::kProd:
          accumulate([](A& a, A v, int64_t) { a *= v; });
          break;
        case ReduceKind::kL1:
          accumulate([](A& a, A v, int64_t) { a += v < 0 ? -v : v; });
          break;
        case ReduceKind::kL2:
        case ReduceKind::kSumSquare:
          accumulate([](A& a, A v, int64_t) { a += v * v; });
          break;
        case ReduceKind::kLogSumExp: {
          accumulate([](A& a, A v, int64_t) {
            if (v > a || IsNan(v)) a = IsNan(a) ? a : v;
          });
          std::copy(acc.begin(), acc.begin() + nj, aux.begin());
          std::fill(acc.begin(), acc.begin() + nj, A(0));
          accumulate([&](A& a, A v, int64_t j) {
            const A m = std::isinf(aux[j]) ? A(0) : aux[j];
            a += std::exp(v - m);
          });
          for (int64_t j = 0; j < nj; ++j) acc[j] = std::log(acc[j]) + (std::isinf(aux[j]) ? A(0) : aux[j]);
          break;
        }
      }
      for (int64_t j = 0; j < nj; ++j) yb[j] = Store<T>(Finalize(kind, acc[j], g.count));
    }
  };
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, tasks, grain), body, tbb::simple_partitioner());
}

}  // namespace

template <typename T>
void Reduce(ReduceKind kind, const ReduceGeometry& g, const T* x, T* y) {
  if (g.out_numel() == 0) return;
  if constexpr (kIsFloat<T>) {
    // A sum over the leading axes ([count, inner] -> [inner]: a channels-last bias gradient) as column sums.
    if (kind == ReduceKind::kSum && g.rows == 1 && g.inner > 1 && g.red_dims.size() == 1 &&
        g.red_strides[0] == g.inner) {
      SumRowsToColumns(x, g.count, g.inner, y);
      return;
    }
    ReduceTyped<T, FloatAcc<T>>(kind, g, x, y);
  } else {
    if (kind == ReduceKind::kL2 || kind == ReduceKind::kLogSum || kind == ReduceKind::kLogSumExp)
      ReduceTyped<T, double>(kind, g, x, y);
    else
      ReduceTyped<T, int64_t>(kind, g, x, y);
  }
}

template <typename T>
void ArgReduce(bool is_max, bool select_last, int64_t outer, int64_t n, int64_t inner, const T* x, int64_t* y) {
  const int64_t total = outer * inner;
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(n, 1));
  tbb::parallel_for(
      tbb::blocked_range<int64_t>(0, total, grain),
      [&](const tbb::blocked_range<int64_t>& r) {
        for (int64_t o = r.begin(); o < r.end(); ++o) {
          const int64_t i = o / inner, j = o % inner;
          const T* p = x + i * n * inner + j;
          using A = std::conditional_t<kIsFloat<T>, float, T>;
          A best = static_cast<A>(p[0]);
          int64_t bi = 0;
          for (int64_t k = 1; k < n; ++k) {
            A v = static_cast<A>(p[k * inner]);
            bool better = is_max ? (select_last ? v >= best : v > best) : (select_last ? v <= best : v < best);
            if (better) {
              best = v;
              bi = k;
            }
          }
          y[o] = bi;
        }
      },
      tbb::simple_partitioner());
}

template <typename T>
void CumSum(bool exclusive, bool reverse, int64_t outer, int64_t n, int64_t inner, const T* x, T* y) {
  using A = std::conditional_t<kIsFloat<T>, FloatAcc<T>, int64_t>;
  const int64_t total = outer * inner;
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(n, 1));
  tbb::parallel_for(
      tbb::blocked_range<int64_t>(0, total, grain),
      [&](const tbb::blocked_range<int64_t>& r) {
        for (int64_t o = r.begin(); o < r.end(); ++o) {
          const int64_t i = o / inner, j = o % inner;
          const T* p = x + i * n * inner + j;
          T* q = y + i * n * inner + j;
          A acc = 0;
          for (int64_t t = 0; t < n; ++t) {
            const int64_t k = reverse ? n - 1 - t : t;
            const A v = static_cast<A>(p[k * inner]);
            if (exclusive) {
              q[k * inner] = Store<T>(acc);
              acc += v;
            } else {
              acc += v;
              q[k * inner] = Store<T>(acc);
            }
          }
        }
      },
      tbb::simple_partitioner());
}

#define OT_INSTANTIATE(T)                                                                \
  template void Reduce<T>(ReduceKind, const ReduceGeometry&, const T*, T*);              \
  template void ArgReduce<T>(bool, bool, int64_t, int64_t, int64_t, const T*, int64_t*); \
  template void CumSum<T>(bool, bool, int64_t, int64_t, int64_t, const T*, T*);
OT_INSTANTIATE(float)
OT_INSTANTIATE(double)
OT_INSTANTIATE(float16)
OT_INSTANTIATE(bfloat16)
OT_INSTANTIATE(int32_t)
OT_INSTANTIATE(int64_t)
OT_INSTANTIATE(uint8_t)
OT_INSTANTIATE(int8_t)
OT_INSTANTIATE(uint32_t)
OT_INSTANTIATE(uint64_t)
#undef OT_INSTANTIATE

namespace {

// a[j] += x[i * cols + j] for rows i in order, j < w: each column summed in double in row order. Compiled for AVX2
// too (OT_VEC_CLONES: four double lanes a vector, half rows widened by F16C; the same adds in the same order, so the
// same bits): a bias gradient's column sums ran two lanes wide, ~100 us for [1024, 256].
template <typename T>
OT_VEC_CLONES void AddRowsToAcc(const T* __restrict x, int64_t rows, int64_t cols, int64_t w, double* __restrict a) {
  using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
  for (int64_t i = 0; i < rows; ++i) {
    const T* __restrict row = x + i * cols;
    for (int64_t j = 0; j < w; ++j) a[j] += static_cast<double>(static_cast<A>(row[j]));
  }
}

}  // namespace

// Tasks of column blocks (kBlock wide) and row chunks (kRowChunk rows), each summing its rows in order in double into
// its chunk's partial sums, which are then added in chunk order (one chunk: the sum itself). The split depends on rows
// and cols alone, never on the threads: deterministic. (One task per column block before: a bias gradient of 256
// channels, PoolFormer's [12544, 256], ran on one thread at a third of the other kernels' bandwidth.)
template <typename T>
void SumRowsToColumnsBatched(const T* x, int64_t batch, int64_t rows, int64_t cols, T* y) {
  using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
  constexpr int64_t kBlock = 512, kRowChunk = 2048;
  const int64_t blocks = (cols + kBlock - 1) / kBlock;
  const int64_t chunks = std::max<int64_t>(1, (rows + kRowChunk - 1) / kRowChunk);
  std::vector<double> part(static_cast<size_t>(batch * chunks * cols), 0.0);  // [batch, chunk, cols]
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, batch * chunks * blocks), [&](const tbb::blocked_range<int64_t>& r) {
    for (int64_t t = r.begin(); t != r.end(); ++t) {
      const int64_t bc = t / blocks, b = bc / chunks, c = bc % chunks;
      const int64_t j0 = t % blocks * kBlock, w = std::min(kBlock, cols - j0);
      const int64_t r0 = c * kRowChunk, n = std::min(kRowChunk, rows - r0);
      AddRowsToAcc<T>(x + (b * rows + r0) * cols + j0, n, cols, w, part.data() + bc * cols + j0);
    }
  });
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t j = 0; j < cols; ++j) {
      double s = 0;
      for (int64_t c = 0; c < chunks; ++c) s += part[static_cast<size_t>((b * chunks + c) * cols + j)];
      y[b * cols + j] = static_cast<T>(static_cast<A>(s));
    }
}

template <typename T>
void SumRowsToColumns(const T* x, int64_t rows, int64_t cols, T* y) {
  SumRowsToColumnsBatched(x, 1, rows, cols, y);
}

template void SumRowsToColumns<float>(const float*, int64_t, int64_t, float*);
template void SumRowsToColumns<double>(const double*, int64_t, int64_t, double*);
template void SumRowsToColumns<float16>(const float16*, int64_t, int64_t, float16*);
template void SumRowsToColumns<bfloat16>(const bfloat16*, int64_t, int64_t, bfloat16*);
template void SumRowsToColumnsBatched<float>(const float*, int64_t, int64_t, int64_t, float*);
template void SumRowsToColumnsBatched<double>(const double*, int64_t, int64_t, int64_t, double*);
template void SumRowsToColumnsBatched<float16>(const float16*, int64_t, int64_t, int64_t, float16*);
template void SumRowsToColumnsBatched<bfloat16>(const bfloat16*, int64_t, int64_t, int64_t, bfloat16*);

}  // namespace ot::cpu
