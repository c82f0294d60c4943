#include "cpu_ops/row_grad.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "cpu_ops/half_convert.h"
#include "cpu_ops/row_stats.h"
#include "cpu_ops/row_sum.h"
#include "kernel_common/scalar_math.h"
#include "kernel_common/vec_math.h"

namespace ot::cpu {

namespace {

// Rows per task: about 16K elements, at least one row. Fixed by the shape only (never by the thread count).
int64_t RowsPerBlock(int64_t cols) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, cols)); }

using row_stats::Fold8;

// One LayerNorm row in one pass over x and dy and one over the buffers: xh[j] = (x - mu) r and g[j] = dy scale are
// kept (dx may alias dy or x, so every input element is read before any dx is written), the block's column sums
// ds/db take dy xhat and dy, and the row sums of g and g xhat run in eight lanes in the same loop (it vectorizes:
// no serial chain through one accumulator, and x, dy are read once where four passes read them before).
OT_VEC_CLONES void LayerNormGradRow(int64_t cols, const float* dy, const float* x, const double* __restrict s,
                                    double mu, double r, float* dx, double* __restrict xh, double* __restrict g,
                                    double* __restrict ds, double* __restrict db, const float* add) {
  // Eight lanes as two explicit vectors of four doubles (GCC's SLP does not vectorize this loop body by itself);
  // lane l takes the elements j = l mod 8, folded by Fold8 -- one fixed order in every clone.
  using row_stats::D4;
  using row_stats::F4;
  D4 vg[2] = {{0, 0, 0, 0}, {0, 0, 0, 0}}, vgx[2] = {{0, 0, 0, 0}, {0, 0, 0, 0}};
  int64_t j = 0;
  for (; j + 8 <= cols; j += 8)
    for (int h = 0; h < 2; ++h) {
      const int64_t k = j + 4 * h;
      F4 xf, df;
      D4 sv, dsv, dbv;
      std::memcpy(&xf, x + k, sizeof xf);
      std::memcpy(&df, dy + k, sizeof df);
      std::memcpy(&sv, s + k, sizeof sv);
      std::memcpy(&dsv, ds + k, sizeof dsv);
      std::memcpy(&dbv, db + k, sizeof dbv);
      const D4 hx = (__builtin_convertvector(xf, D4) - mu) * r, d = __builtin_convertvector(df, D4);
      dsv += d * hx;
      dbv += d;
      const D4 gv = d * sv;
      vg[h] += gv;
      vgx[h] += gv * hx;
      std::memcpy(ds + k, &dsv, sizeof dsv);
      std::memcpy(db + k, &dbv, sizeof dbv);
      std::memcpy(xh + k, &hx, sizeof hx);
      std::memcpy(g + k, &gv, sizeof gv);
    }
  double tg = Fold8(vg[0], vg[1]), tgx = Fold8(vgx[0], vgx[1]);
  for (; j < cols; ++j) {
    const double h = (static_cast<double>(x[j]) - mu) * r, d = static_cast<double>(dy[j]);
    ds[j] += d * h;
    db[j] += d;
    const double gv = d * s[j];
    tg += gv;
    tgx += gv * h;
    xh[j] = h;
    g[j] = gv;
  }
  const double inv = 1.0 / static_cast<double>(cols);
  const double mg = tg * inv, mgx = tgx * inv;
  if (add) {
    // Sum's float add of the rounded dx and the addend (a + b == b + a in IEEE): the unfused bits. add[j] is read
    // at the element it writes, so dx may alias add.
    for (j = 0; j < cols; ++j) dx[j] = static_cast<float>(r * (g[j] - mg - xh[j] * mgx)) + add[j];
  } else {
    for (j = 0; j < cols; ++j) dx[j] = static_cast<float>(r * (g[j] - mg - xh[j] * mgx));
  }
}

// The rows' statistics (cpu_ops/row_stats.h: the forward's own), in this file's clones.
OT_VEC_CLONES void RowStats(const float* x, int64_t cols, int64_t r0, int64_t r1, double eps, double* mu, double* r) {
  row_stats::StatsOfRowRange(x, cols, r0, r1, eps, mu, r);
}

// dx = y (dy - s), s = sum(dy y): the products and the result in float, s the double row sum of the float products
// (cpu_ops/row_sum.h) rounded to float -- the fused cluster's steps (graph/ops/fuse_table.cc), so --fuse=lite gives
// these bits. The products go through a chunk buffer so dx may alias dy or y.
OT_VEC_CLONES void SoftmaxGradRow(int64_t len, const float* dy, const float* y, float* dx) {
  constexpr int64_t kChunk = 256;  // a multiple of 4 (RowSum4)
  float buf[kChunk];
  RowSum4 acc;
  for (int64_t b = 0; b < len; b += kChunk) {
    const int64_t n = std::min(kChunk, len - b);
    for (int64_t k = 0; k < n; ++k) buf[k] = dy[b + k] * y[b + k];
    acc.Add(buf, n);
  }
  const float s = static_cast<float>(acc.Total());
  for (int64_t j = 0; j < len; ++j) dx[j] = y[j] * (dy[j] - s);
}

// Four consecutive rows of len <= kGroupLen at once, each with SoftmaxGradRow's steps and bits: the products of
// all four, then their four row sums with the dependency chains interleaved (RowSums; a short row's sum is
// latency-bound alone), then dx. The products go through the buffer, so dx may alias dy or y.
constexpr int64_t kGroupLen = 256;
OT_VEC_CLONES void SoftmaxGradRows4(int64_t len, const float* dy, const float* y, float* dx) {
  float buf[4 * kGroupLen];
  for (int64_t k = 0; k < 4 * len; ++k) buf[k] = dy[k] * y[k];
  double sum[4];
  RowSums(buf, 4, len, len, sum);
  for (int q = 0; q < 4; ++q) {
    const float s = static_cast<float>(sum[q]);
    const int64_t o = q * len;
    for (int64_t j = 0; j < len; ++j) dx[o + j] = y[o + j] * (dy[o + j] - s);
  }
}

// Softmax cross-entropy backward of one sample [c, d], d > 1, over columns j in [j0, j1): e = e^(x - max) in
// float into dx, column sums in double (in class order), then dx = (e / sum - onehot) f. m/sum: (j1 - j0) each.
template <typename I>
OT_VEC_CLONES void SceGradColumns(int64_t c, int64_t d, int64_t j0, int64_t j1, const float* x, const I* t,
                                  const double* f, float* dx, float* m, double* sum, int64_t* tc, double* et) {
  const int64_t w = j1 - j0;
  for (int64_t j = 0; j < w; ++j) {
    m[j] = -std::numeric_limits<float>::infinity();
    sum[j] = 0;
    tc[j] = static_cast<int64_t>(t[j0 + j]);
  }
  for (int64_t k = 0; k < c; ++k) {
    const float* row = x + k * d + j0;
    for (int64_t j = 0; j < w; ++j) m[j] = row[j] > m[j] ? row[j] : m[j];
  }
  for (int64_t j = 0; j < w; ++j) m[j] = m[j] == -std::numeric_limits<float>::infinity() ? 0.f : m[j];
  for (int64_t k = 0; k < c; ++k) {
    const float* row = x + k * d + j0;
    float* out = dx + k * d + j0;
    for (int64_t j = 0; j < w; ++j) out[j] = math::VecExp(row[j] - m[j]);
    for (int64_t j = 0; j < w; ++j) sum[j] += static_cast<double>(out[j]);
  }
  for (int64_t j = 0; j < w; ++j) sum[j] = 1.0 / sum[j];
  // (p - onehot) f: every element as p f (p - 0 is p), then each column's target element again with its e saved
  // before (a compare in the vector loop would stop the vectorizer).
  for (int64_t j = 0; j < w; ++j) et[j] = f[j0 + j] == 0.0 ? 0.0 : static_cast<double>(dx[tc[j] * d + j0 + j]);
  for (int64_t k = 0; k < c; ++k) {
    float* out = dx + k * d + j0;
    for (int64_t j = 0; j < w; ++j) out[j] = static_cast<float>((static_cast<double>(out[j]) * sum[j]) * f[j0 + j]);
  }
  for (int64_t j = 0; j < w; ++j) {
    const double fj = f[j0 + j];
    if (fj == 0.0) {
      // Ignored positions are exactly 0, even where x is not finite.
      for (int64_t k = 0; k < c; ++k) dx[k * d + j0 + j] = 0.f;
    } else {
      dx[tc[j] * d + j0 + j] = static_cast<float>((et[j] * sum[j] - 1.0) * fj);
    }
  }
}

// The d == 1 form: one contiguous row of c classes.
template <typename I>
OT_VEC_CLONES void SceGradRow(int64_t c, const float* x, I t, double f, float* dx) {
  if (f == 0.0) {
    for (int64_t k = 0; k < c; ++k) dx[k] = 0.f;
    return;
  }
  // The max over eight lanes (a NaN is skipped here but makes the sum, so every output, NaN anyway).
  float lanes[8];
  for (int l = 0; l < 8; ++l) lanes[l] = -std::numeric_limits<float>::infinity();
  int64_t q = 0;
  for (; q + 8 <= c; q += 8)
    for (int l = 0; l < 8; ++l) lanes[l] = x[q + l] > lanes[l] ? x[q + l] : lanes[l];
  for (; q < c; ++q) lanes[0] = x[q] > lanes[0] ? x[q] : lanes[0];
  float m = lanes[0];
  for (int l = 1; l < 8; ++l) m = lanes[l] > m ? lanes[l] : m;
  if (m == -std::numeric_limits<float>::infinity()) m = 0.f;
  // e^(x - m) into dx a chunk at a time, each chunk summed while it is in L1 (chunks of a multiple of 4: RowSum4's
  // order over the whole row).
  constexpr int64_t kChunk = 256;
  RowSum4 acc;
  for (int64_t b = 0; b < c; b += kChunk) {
    const int64_t len = std::min(kChunk, c - b);
    for (int64_t k = 0; k < len; ++k) dx[b + k] = math::VecExp(x[b + k] - m);
    acc.Add(dx + b, len);
  }
  const double inv = 1.0 / acc.Total();
  // (p - onehot) f as p f everywhere, one float multiply by f / sum (within an ulp of the double product), then the
  // target's element from its saved e in double (see SceGradColumns).
  const double et = static_cast<double>(dx[t]);
  const float scale = static_cast<float>(inv * f);
  for (int64_t j = 0; j < c; ++j) dx[j] = dx[j] * scale;
  dx[t] = static_cast<float>((et * inv - 1.0) * f);
}

}  // namespace

namespace {

// The float rows of one half chunk (at most kHalfChunkFloats elements): widened into stack buffers (exact), so the
// half paths allocate nothing beyond the float path's own per-block buffers.
constexpr int64_t kHalfChunkFloats = kHalfRowChunk;

// The float rows of one chunk of n elements of two inputs and an output: for T = float the tensors themselves; for
// a half type both inputs widened into `wide` (a at 0, b at kHalfChunkFloats) and the output computed at
// 2 kHalfChunkFloats, rounded once to T by Store.
template <typename T>
struct FloatChunk {
  static constexpr bool kHalf = !std::is_same_v<T, float>;
  const float *a, *b;
  float* out;
  FloatChunk(const T* a0, const T* b0, T* out0, int64_t n, float* wide) {
    if constexpr (kHalf) {
      LoadFloats(a0, wide, n);
      LoadFloats(b0, wide + kHalfChunkFloats, n);
      a = wide;
      b = wide + kHalfChunkFloats;
      out = wide + 2 * kHalfChunkFloats;
    } else {
      a = a0;
      b = b0;
      out = out0;
    }
  }
  void Store(T* out0, int64_t n) const {
    if constexpr (kHalf) StoreFloats(out, out0, n);
  }
};

// T = float: the rows in place. T = float16/bfloat16: chunks of rows widened to float, the same float rows, dx
// rounded once to T (cols <= kHalfChunkFloats).
template <typename T>
void LayerNormGradT(int64_t rows, int64_t cols, const T* dy, const T* x, const double* scale, const float* mean,
                    const float* invstd, double eps, T* dx, double* dscale, double* dbias, const float* addend) {
  constexpr bool kHalf = !std::is_same_v<T, float>;
  std::fill(dscale, dscale + cols, 0.0);
  std::fill(dbias, dbias + cols, 0.0);
  if (rows <= 0 || cols <= 0) return;
  const int64_t per = RowsPerBlock(cols), blocks = (rows + per - 1) / per;
  const int64_t chunk = kHalf ? std::max<int64_t>(1, kHalfChunkFloats / cols) : per;  // rows run together
  // Per block: its column sums of dy xhat and dy (2 * cols), reduced in block order after the parallel part.
  std::vector<double> part(static_cast<size_t>(blocks * 2 * cols), 0.0);
  tbb::parallel_for(
      tbb::blocked_range<int64_t>(0, blocks, 1),
      [&](const tbb::blocked_range<int64_t>& br) {
        std::vector<double> xh(static_cast<size_t>(cols)), g(static_cast<size_t>(cols));
        std::vector<double> mus(static_cast<size_t>(per)), ris(static_cast<size_t>(per));
        for (int64_t b = br.begin(); b < br.end(); ++b) {
          double* ds = part.data() + b * 2 * cols;
          double* db = ds + cols;
          const int64_t b0 = b * per, b1 = std::min(rows, (b + 1) * per);
          for (int64_t r0 = b0; r0 < b1; r0 += chunk) {
            const int64_t r1 = std::min(b1, r0 + chunk), n = (r1 - r0) * cols;
            float wide[3 * kHalfChunkFloats];  // x, dy, dx of a half chunk
            const FloatChunk<T> c(x + r0 * cols, dy + r0 * cols, dx + r0 * cols, n, wide);
            const float *xs = c.a, *dys = c.b;
            float* dxs = c.out;
            if (mean) {
              for (int64_t r = r0; r < r1; ++r) {
                mus[r - r0] = mean[r];
                ris[r - r0] = invstd[r];
              }
            } else {
              RowStats(xs, cols, 0, r1 - r0, eps, mus.data(), ris.data());
            }
            for (int64_t r = 0; r < r1 - r0; ++r)
              LayerNormGradRow(cols, dys + r * cols, xs + r * cols, scale, mus[r], ris[r], dxs + r * cols, xh.data(),
                               g.data(), ds, db, addend ? addend + (r0 + r) * cols : nullptr);
            c.Store(dx + r0 * cols, n);
          }
        }
      },
      tbb::simple_partitioner());
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t j = 0; j < cols; ++j) {
      dscale[j] += part[b * 2 * cols + j];
      dbias[j] += part[b * 2 * cols + cols + j];
    }
}

// nr float rows of len: four at a time while they fit SoftmaxGradRows4, then one at a time (the same bits).
void SoftmaxGradFloatRows(int64_t nr, int64_t len, const float* dy, const float* y, float* dx) {
  int64_t i = 0;
  if (len <= kGroupLen)
    for (; i + 4 <= nr; i += 4) SoftmaxGradRows4(len, dy + i * len, y + i * len, dx + i * len);
  for (; i < nr; ++i) SoftmaxGradRow(len, dy + i * len, y + i * len, dx + i * len);
}

template <typename T>
void SoftmaxGradT(int64_t rows, int64_t len, const T* dy, const T* y, T* dx) {
  constexpr bool kHalf = !std::is_same_v<T, float>;
  if (rows <= 0 || len <= 0) return;
  const int64_t per = RowsPerBlock(len);
  const int64_t chunk = kHalf ? std::max<int64_t>(1, kHalfChunkFloats / len) : per;
  tbb::parallel_for(
      tbb::blocked_range<int64_t>(0, rows, per),
      [&](const tbb::blocked_range<int64_t>& br) {
        for (int64_t r0 = br.begin(); r0 < br.end(); r0 += chunk) {
          const int64_t nr = std::min(br.end() - r0, chunk);
          float wide[3 * kHalfChunkFloats];  // dy, y, dx of a half chunk
          const FloatChunk<T> c(dy + r0 * len, y + r0 * len, dx + r0 * len, nr * len, wide);
          const float *dys = c.a, *ys = c.b;
          float* dxs = c.out;
          SoftmaxGradFloatRows(nr, len, dys, ys, dxs);
          c.Store(dx + r0 * len, nr * len);
        }
      },
      tbb::simple_partitioner());
}

}  // namespace

void LayerNormGradF32(int64_t rows, int64_t cols, const float* dy, const float* x, const double* scale,
                      const float* mean, const float* invstd, double eps, float* dx, double* dscale, double* dbias,
                      const float* addend) {
  LayerNormGradT(rows, cols, dy, x, scale, mean, invstd, eps, dx, dscale, dbias, addend);
}

template <typename T>
void LayerNormGradHalf(int64_t rows, int64_t cols, const T* dy, const T* x, const double* scale, const float* mean,
                       const float* invstd, double eps, T* dx, double* dscale, double* dbias) {
  LayerNormGradT(rows, cols, dy, x, scale, mean, invstd, eps, dx, dscale, dbias, nullptr);
}
template void LayerNormGradHalf(int64_t, int64_t, const float16*, const float16*, const double*, const float*,
                                const float*, double, float16*, double*, double*);
template void LayerNormGradHalf(int64_t, int64_t, const bfloat16*, const bfloat16*, const double*, const float*,
                                const float*, double, bfloat16*, double*, double*);

void SoftmaxGradF32(int64_t rows, int64_t len, const float* dy, const float* y, float* dx) {
  SoftmaxGradT(rows, len, dy, y, dx);
}

void SoftmaxGradRowsF32(int64_t rows, int64_t len, const float* dy, const float* y, float* dx) {
  if (rows > 0 && len > 0) SoftmaxGradFloatRows(rows, len, dy, y, dx);
}

template <typename T>
void SoftmaxGradHalf(int64_t rows, int64_t len, const T* dy, const T* y, T* dx) {
  SoftmaxGradT(rows, len, dy, y, dx);
}
template void SoftmaxGradHalf(int64_t, int64_t, const float16*, const float16*, float16*);
template void SoftmaxGradHalf(int64_t, int64_t, const bfloat16*, const bfloat16*, bfloat16*);

template <typename I>
void SoftmaxCrossEntropyGradF32(int64_t n, int64_t c, int64_t d, const float* x, const I* target, const double* f,
                                float* dx) {
  if (n <= 0 || c <= 0 || d <= 0) return;
  if (d == 1) {
    tbb::parallel_for(
        tbb::blocked_range<int64_t>(0, n, RowsPerBlock(c)),
        [&](const tbb::blocked_range<int64_t>& r) {
          for (int64_t i = r.begin(); i < r.end(); ++i) SceGradRow<I>(c, x + i * c, target[i], f[i], dx + i * c);
        },
        tbb::simple_partitioner());
    return;
  }
  // Columns in tiles of up to 64 adjacent positions of one sample, each tile owned by one task.
  constexpr int64_t kCols = 64;
  const int64_t tiles = (d + kCols - 1) / kCols;
  tbb::parallel_for(
      tbb::blocked_range<int64_t>(0, n * tiles, std::max<int64_t>(1, 16384 / (c * std::min(d, kCols)))),
      [&](const tbb::blocked_range<int64_t>& r) {
        float m[kCols];
        double sum[kCols];
        int64_t tc[kCols];
        double et[kCols];
        for (int64_t q = r.begin(); q < r.end(); ++q) {
          const int64_t i = q / tiles, j0 = (q % tiles) * kCols, j1 = std::min(d, j0 + kCols);
          SceGradColumns<I>(c, d, j0, j1, x + i * c * d, target + i * d, f + i * d, dx + i * c * d, m, sum, tc, et);
        }
      },
      tbb::simple_partitioner());
}

template <typename I, typename H>
void SoftmaxCrossEntropyGradRowsToHalf(int64_t n, int64_t c, const float* x, const I* target, const double* f, H* dx) {
  if (n <= 0 || c <= 0) return;
  tbb::parallel_for(
      tbb::blocked_range<int64_t>(0, n, RowsPerBlock(c)),
      [&](const tbb::blocked_range<int64_t>& r) {
        std::vector<float> row(static_cast<size_t>(c));
        for (int64_t i = r.begin(); i < r.end(); ++i) {
          SceGradRow<I>(c, x + i * c, target[i], f[i], row.data());
          StoreFloats(row.data(), dx + i * c, c);
        }
      },
      tbb::simple_partitioner());
}

template void SoftmaxCrossEntropyGradRowsToHalf<int32_t, float16>(int64_t, int64_t, const float*, const int32_t*,
                                                                  const double*, float16*);
template void SoftmaxCrossEntropyGradRowsToHalf<int64_t, float16>(int64_t, int64_t, const float*, const int64_t*,
                                                                  const double*, float16*);
template void SoftmaxCrossEntropyGradRowsToHalf<int32_t, bfloat16>(int64_t, int64_t, const float*, const int32_t*,
                                                                   const double*, bfloat16*);
template void SoftmaxCrossEntropyGradRowsToHalf<int64_t, bfloat16>(int64_t, int64_t, const float*, const int64_t*,
                                                                   const double*, bfloat16*);

template void SoftmaxCrossEntropyGradF32<int32_t>(int64_t, int64_t, int64_t, const float*, const int32_t*,
                                                  const double*, float*);
template void SoftmaxCrossEntropyGradF32<int64_t>(int64_t, int64_t, int64_t, const float*, const int64_t*,
                                                  const double*, float*);

}  // namespace ot::cpu
