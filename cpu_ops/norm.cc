#include "cpu_ops/norm.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <type_traits>
#include <vector>

#include "cpu_ops/half_convert.h"
#include "cpu_ops/row_stats.h"
#include "cpu_ops/scalar_io.h"
#include "kernel_common/half.h"
#include "kernel_common/scalar_math.h"
#include "kernel_common/vec_math.h"

namespace ot::cpu {

namespace {

// Tasks of about `work` elements each (a fixed split: it depends only on the sizes).
int64_t Grain(int64_t work_per_item) { return std::max<int64_t>(1, 32768 / std::max<int64_t>(work_per_item, 1)); }

template <typename F>
void ParallelItems(int64_t items, int64_t work_per_item, F&& f) {
  tbb::parallel_for(
      tbb::blocked_range<int64_t>(0, items, Grain(work_per_item)),
      [&](const tbb::blocked_range<int64_t>& r) {
        for (int64_t i = r.begin(); i < r.end(); ++i) f(i);
      },
      tbb::simple_partitioner());
}

// Half rows are widened once (vectorized) into a float buffer of the calling task, so the double loops read
// floats instead of converting element by element; other types are read in place.
template <typename T>
auto Widen(const T* p, int64_t n, std::vector<float>& buf) {
  if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) {
    buf.resize(static_cast<size_t>(n));
    LoadFloats(p, buf.data(), n);
    return static_cast<const float*>(buf.data());
  } else {
    return p;
  }
}

// q[j] = value(j) for j < n. Half types: value is evaluated in fp32 on the widened row (vectorized) and each
// element rounded once by the vectorized narrowing; other types: in double, then stored.
template <typename T, typename F>
void WriteRow(T* q, int64_t n, std::vector<float>& buf, F&& value) {
  if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) {
    buf.resize(static_cast<size_t>(n));
    float* b = buf.data();
    for (int64_t j = 0; j < n; ++j) b[j] = static_cast<float>(value(j));
    StoreFloats(b, q, n);
  } else {
    for (int64_t j = 0; j < n; ++j) q[j] = Store<T>(value(j));
  }
}

// Eight double lanes as two vectors of four (GCC's generic vectors: AVX2 in the x86-64-v3 clone, SSE halves in the
// baseline); lane l takes the elements j = l mod 8. Written out because GCC's vectorizer paired the sums of one
// element (d, d^2) into one register instead and converted the floats one at a time (~6 GB/s).
typedef double D4 __attribute__((vector_size(32)));
struct Lanes8 {
  D4 lo{}, hi{};
};
// Elements j .. j + 7 of p as two vectors of doubles.
template <typename P>
OT_ROW_STATS_INLINE void Load8(const P* p, D4& lo, D4& hi) {
  if constexpr (std::is_same_v<P, float>) {
    typedef float F4 __attribute__((vector_size(16)));
    F4 a, b;
    __builtin_memcpy(&a, p, sizeof a);
    __builtin_memcpy(&b, p + 4, sizeof b);
    lo = __builtin_convertvector(a, D4);
    hi = __builtin_convertvector(b, D4);
  } else {
    __builtin_memcpy(&lo, p, sizeof lo);
    __builtin_memcpy(&hi, p + 4, sizeof hi);
  }
}
// The lanes folded in a fixed tree: ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)).
OT_ROW_STATS_INLINE double Fold8(const Lanes8& a) {
  return ((a.lo[0] + a.lo[1]) + (a.lo[2] + a.lo[3])) + ((a.hi[0] + a.hi[1]) + (a.hi[2] + a.hi[3]));
}

// One pass over n contiguous elements (P float or double) with d = p[j] - shift: m[0] += sum d, m[1] += sum d^2
// (eight double lanes, a fixed fold, the tail in order).
template <typename P>
OT_VEC_CLONES void LaneShiftedMoments(const P* __restrict p, int64_t n, double shift, double* m) {
  Lanes8 a, b;
  const D4 sh = D4{} + shift;
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    D4 lo, hi;
    Load8(p + j, lo, hi);
    lo -= sh, hi -= sh;
    a.lo += lo, a.hi += hi;
    b.lo += lo * lo, b.hi += hi * hi;
  }
  double sa = Fold8(a), sb = Fold8(b);
  for (; j < n; ++j) {
    const double d = static_cast<double>(p[j]) - shift;
    sa += d;
    sb += d * d;
  }
  m[0] += sa;
  m[1] += sb;
}

// Float LayerNorm rows [r0, r1) (cols > 0): each row's mean and 1/sqrt(biased var + eps) in double
// (cpu_ops/row_stats.h, four rows at a time; the backward recomputes the same), then y = (x - mean) inv scale
// [+ bias] in double, rounded once; scale/bias are the normalized-order parameters (bias null when the op has
// none). y may alias x: a group's statistics are taken before any of its rows is written, and a row's y[j] after
// its x[j] is read.
OT_VEC_CLONES void LayerNormRowsF32(int64_t r0, int64_t r1, int64_t cols, const float* x, const double* sc,
                                    const double* bs, double eps, float* y, float* mean_out, float* invstd_out) {
  constexpr int64_t kGroup = 4;
  double mu[kGroup], ri[kGroup];
  for (int64_t g = r0; g < r1; g += kGroup) {
    const int64_t n = std::min(kGroup, r1 - g);
    row_stats::StatsOfRowRange(x, cols, g, g + n, eps, mu, ri);
    for (int64_t q = 0; q < n; ++q) {
      const float* xr = x + (g + q) * cols;
      float* yr = y + (g + q) * cols;
      const double m = mu[q], inv = ri[q];
      if (bs)
        for (int64_t j = 0; j < cols; ++j)
          yr[j] = static_cast<float>((static_cast<double>(xr[j]) - m) * inv * sc[j] + bs[j]);
      else
        for (int64_t j = 0; j < cols; ++j) yr[j] = static_cast<float>((static_cast<double>(xr[j]) - m) * inv * sc[j]);
      if (mean_out) mean_out[g + q] = static_cast<float>(m);
      if (invstd_out) invstd_out[g + q] = static_cast<float>(inv);
    }
  }
}

// s = a + b in float (Add's kernel: the same bits); s may alias a or b.
OT_VEC_CLONES void AddF32(const float* a, const float* b, float* s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) s[i] = a[i] + b[i];
}

// One pass over a plane of x and g (as LaneShiftedMoments: eight lanes, a fixed fold, the tail in order), d = x -
// shift: m[0] += sum d, m[1] += sum d^2, m[2] += sum g, m[3] += sum g d. kMask: g is a Relu's dY, masked by its
// output r (g where r > 0, else 0: ReluGrad's select), so the masked gradient is never stored.
template <typename P, bool kMask = false>
OT_VEC_CLONES void LaneMoments(const P* __restrict x, const P* __restrict g, const P* __restrict r, int64_t n,
                               double shift, double* m) {
  Lanes8 a, b, e, f;
  const D4 sh = D4{} + shift;
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    D4 lo, hi, glo, ghi;
    Load8(x + j, lo, hi);
    Load8(g + j, glo, ghi);
    if constexpr (kMask) {  // a bitwise select (GCC's vector ?: was not one here)
      typedef long long L4 __attribute__((vector_size(32)));
      D4 rlo, rhi;
      Load8(r + j, rlo, rhi);
      glo = reinterpret_cast<D4>(reinterpret_cast<L4>(glo) & (rlo > D4{}));
      ghi = reinterpret_cast<D4>(reinterpret_cast<L4>(ghi) & (rhi > D4{}));
    }
    lo -= sh, hi -= sh;
    a.lo += lo, a.hi += hi;
    b.lo += lo * lo, b.hi += hi * hi;
    e.lo += glo, e.hi += ghi;
    f.lo += glo * lo, f.hi += ghi * hi;
  }
  double sa = Fold8(a), sb = Fold8(b), se = Fold8(e), sf = Fold8(f);
  for (; j < n; ++j) {
    const double d = static_cast<double>(x[j]) - shift;
    const double gv = !kMask || r[j] > 0 ? static_cast<double>(g[j]) : 0.0;
    sa += d;
    sb += d * d;
    se += gv;
    sf += gv * d;
  }
  m[0] += sa;
  m[1] += sb;
  m[2] += se;
  m[3] += sf;
}

// q[j] = (p[j] - m) a + b for a float or double row, in double, rounded once; kRelu: then Relu of the rounded value
// (what a Relu node reading the stored row computes).
template <typename T, bool kRelu>
OT_VEC_CLONES void BatchNormApplyRow(const T* __restrict p, T* __restrict q, int64_t n, double m, double a, double b) {
  for (int64_t j = 0; j < n; ++j) {
    const T v = static_cast<T>((static_cast<double>(p[j]) - m) * a + b);
    q[j] = kRelu ? math::Relu(v) : v;
  }
}

// dX of one plane (or piece of one): k0 dy (inference statistics), else k0 (dy - mb) - (x - mu) q; in double,
// rounded once to O (kOdd: to a round-to-odd float, which the caller narrows to a half type: rounded once in all).
// kMask: dy is gp where rp > 0, else 0 (as LaneMoments).
template <typename P, typename O, bool kMask, bool kOdd = false>
OT_VEC_CLONES void BatchNormGradRow(const P* __restrict xp, const P* __restrict gp, const P* __restrict rp,
                                    O* __restrict op, int64_t n, bool inference, double k0, double mb, double mu,
                                    double q) {
  // The mask as a bitwise and on the stored bits: GCC turned a ?: here into a branch per element (6x slower).
  using U = std::conditional_t<sizeof(P) == 4, uint32_t, uint64_t>;
  auto dy = [&](int64_t j) {
    if constexpr (kMask) {
      U bits;
      __builtin_memcpy(&bits, gp + j, sizeof bits);
      bits &= U{0} - static_cast<U>(rp[j] > 0);
      P v;
      __builtin_memcpy(&v, &bits, sizeof v);
      return static_cast<double>(v);
    }
    return static_cast<double>(gp[j]);
  };
  auto out = [](double v) {
    if constexpr (kOdd)
      return RoundToOddFloat(v);
    else
      return static_cast<O>(v);
  };
  if (inference)
    for (int64_t j = 0; j < n; ++j) op[j] = out(k0 * dy(j));
  else
    for (int64_t j = 0; j < n; ++j) op[j] = out(k0 * (dy(j) - mb) - (static_cast<double>(xp[j]) - mu) * q);
}

// out[j] = g[j] where r[j] > 0, else +0, on the half bits (0 < r's bits <= +infinity's: positive, NaN excluded):
// ReluGrad's select for a half piece of a folded Relu's gradient, before it is widened.
template <typename T>
OT_VEC_CLONES void MaskHalf(const T* __restrict g, const T* __restrict r, T* __restrict out, int64_t n) {
  constexpr uint16_t kInf = std::is_same_v<T, bfloat16> ? 0x7f80 : 0x7c00;
  for (int64_t j = 0; j < n; ++j)
    out[j].bits = g[j].bits & static_cast<uint16_t>(0u - (static_cast<uint16_t>(r[j].bits - 1u) < kInf));
}

}  // namespace

template <typename T>
void RowMoments(int64_t rows, int64_t cols, const T* x, double* mean, double* var) {
  ParallelItems(rows, cols, [&](int64_t r) {
    const T* p = x + r * cols;
    double s = 0;
    for (int64_t j = 0; j < cols; ++j) s += Load(p[j]);
    const double m = cols ? s / cols : 0.0;
    double v = 0;
    for (int64_t j = 0; j < cols; ++j) {
      const double d = Load(p[j]) - m;
      v += d * d;
    }
    mean[r] = m;
    var[r] = cols ? v / cols : 0.0;
  });
}

template <typename T>
void ChannelMoments(int64_t n, int64_t c, int64_t spatial, const T* x, double* mean, double* var) {
  const int64_t count = n * spatial;
  ParallelItems(c, count, [&](int64_t ch) {
    std::vector<float> buf;
    // One pass: each plane's sums of d = x - shift and d^2 by LaneShiftedMoments (vectorized, a fixed order), added
    // to the channel's totals in plane order. The shift is a value of the channel (its first element), so d is of
    // the order of the standard deviation and sum(d^2) / count - mean(d)^2 does not cancel (as BatchNormGrad's
    // statistics); two passes read the channel twice, and the kernel's time is its reads.
    const double shift = count ? static_cast<double>(Load(x[ch * spatial])) : 0.0;
    double m[2] = {0, 0};
    for (int64_t i = 0; i < n; ++i)
      LaneShiftedMoments(Widen(x + (i * c + ch) * spatial, spatial, buf), spatial, shift, m);
    const double md = count ? m[0] / count : 0.0;
    mean[ch] = shift + md;
    var[ch] = count ? std::max(0.0, m[1] / count - md * md) : 0.0;
  });
}

template <typename T>
void BatchNormApply(int64_t n, int64_t c, int64_t spatial, const T* x, const double* scale, const double* bias,
                    const double* mean, const double* var, double eps, T* y, bool relu) {
  ParallelItems(n * c, spatial, [&](int64_t nc) {
    const int64_t ch = nc % c;
    const double a = scale[ch] / std::sqrt(var[ch] + eps), m = mean[ch], b = bias[ch];
    if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) {
      std::vector<float> in, out(static_cast<size_t>(spatial));
      const float* p = Widen(x + nc * spatial, spatial, in);
      float* o = out.data();
      // fp32 arithmetic on the widened row (vectorized), rounded once to T when stored.
      const float mf = static_cast<float>(m), af = static_cast<float>(a), bf = static_cast<float>(b);
      for (int64_t j = 0; j < spatial; ++j) o[j] = (p[j] - mf) * af + bf;
      // Relu before the rounding: the same values as after it (rounding keeps the sign), but a negative that rounds
      // to zero gives +0 where Relu of the rounded -0 keeps -0.
      if (relu)
        for (int64_t j = 0; j < spatial; ++j) o[j] = math::Relu(o[j]);
      StoreFloats(o, y + nc * spatial, spatial);
    } else if (relu) {
      BatchNormApplyRow<T, true>(x + nc * spatial, y + nc * spatial, spatial, m, a, b);
    } else {
      BatchNormApplyRow<T, false>(x + nc * spatial, y + nc * spatial, spatial, m, a, b);
    }
  });
}

template <typename T>
void BatchNormGrad(int64_t n, int64_t c, int64_t spatial, const T* dy, const T* x, const double* scale,
                   const double* mean, const double* var, double eps, T* dx, double* dscale, double* dbias,
                   const T* relu_out, double* dx_sum) {
  constexpr bool kHalf = std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>;
  static_assert(kHalf || std::is_same_v<T, float> || std::is_same_v<T, double>);
  using P = std::conditional_t<kHalf, float, T>;  // the planes as the loops read them
  using Buf = std::array<float, kHalf ? kHalfTile : 1>;
  using HalfBuf = std::array<std::conditional_t<kHalf, T, float>, kHalf ? kHalfTile : 1>;
  const int64_t count = n * spatial;
  const double cnt = static_cast<double>(count);
  // Planes are read in pieces: a float or double plane whole, in place; a half plane kHalfTile elements at a time,
  // widened to float on the stack (exact, in L1), so its sums and its dX run on float pieces. A folded Relu's mask
  // is applied inside the float loops, and to half dY pieces before they are widened (R is never widened).
  const int64_t tile = kHalf ? kHalfTile : std::max<int64_t>(spatial, 1);
  const bool mask_in_loops = !kHalf && relu_out;
  ParallelItems(c, count, [&](int64_t ch) {
    Buf wx, wg, wr, wo;
    HalfBuf wm;
    auto piece = [&](const T* base, int64_t i, int64_t j, int64_t len, Buf& buf) -> const P* {
      const T* p = base + (i * c + ch) * spatial + j;
      if constexpr (kHalf) {
        LoadFloats(p, buf.data(), len);
        return buf.data();
      } else {
        return p;
      }
    };
    auto dy_piece = [&](int64_t i, int64_t j, int64_t len) -> const P* {
      if constexpr (kHalf) {
        if (relu_out) {
          const int64_t at = (i * c + ch) * spatial + j;
          MaskHalf(dy + at, relu_out + at, wm.data(), len);
          LoadFloats(wm.data(), wg.data(), len);
          return wg.data();
        }
      }
      return piece(dy, i, j, len, wg);
    };
    // One pass for all the sums, each piece in LaneMoments' fixed order, pieces in order, shifted by a value
    // of the channel (its first element; the given mean in inference) so that sum(d^2) - n mean(d)^2 does not
    // cancel: d = x - shift is of the order of the standard deviation. Reading X and dY once for the statistics
    // and once for dX (instead of three times) is what the kernel's time is.
    const double shift = mean ? mean[ch] : (count ? Load(x[ch * spatial]) : 0.0);
    double m[4] = {0, 0, 0, 0};
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < spatial; j += tile) {
        const int64_t len = std::min(tile, spatial - j);
        const P *xp = piece(x, i, j, len, wx), *gp = dy_piece(i, j, len);
        if (mask_in_loops)
          LaneMoments<P, true>(xp, gp, piece(relu_out, i, j, len, wr), len, shift, m);
        else
          LaneMoments<P, false>(xp, gp, nullptr, len, shift, m);
      }
    const double md = count ? m[0] / cnt : 0.0;  // mean(x) - shift
    const double mu = mean ? mean[ch] : shift + md;
    const double sb = m[2], sgx = mean ? m[3] : m[3] - md * m[2];  // sum(dy), sum(dy (x - mu))
    const double bvar = count ? std::max(0.0, m[1] / cnt - md * md) : 0.0;
    const double r = 1.0 / std::sqrt((mean ? var[ch] : bvar) + eps);
    const double ss = sgx * r;  // sum(dy xhat)
    if (dscale) dscale[ch] = ss;
    if (dbias) dbias[ch] = sb;
    // dx = k0 (dy - mb) - (x - mu) q, q = k0 r ms (training); k0 dy (inference).
    const double k0 = scale[ch] * r;
    const double mb = mean ? 0.0 : sb / cnt, q = mean ? 0.0 : k0 * r * (ss / cnt);
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < spatial; j += tile) {
        const int64_t len = std::min(tile, spatial - j);
        T* o = dx + (i * c + ch) * spatial + j;
        const P *xp = piece(x, i, j, len, wx), *gp = dy_piece(i, j, len);
        if constexpr (kHalf) {
          BatchNormGradRow<P, float, false, true>(xp, gp, nullptr, wo.data(), len, !!mean, k0, mb, mu, q);
          StoreFloats(wo.data(), o, len);
        } else {
          const P* rp = relu_out ? piece(relu_out, i, j, len, wr) : nullptr;
          if (relu_out)
            BatchNormGradRow<T, T, true>(xp, gp, rp, o, len, !!mean, k0, mb, mu, q);
          else
            BatchNormGradRow<T, T, false>(xp, gp, nullptr, o, len, !!mean, k0, mb, mu, q);
        }
      }
      // The plane just written (one piece: float or double), summed while in cache as ReduceSum's kernel sums it
      // (cpu_ops/reduce.h SumRun).
      if constexpr (!kHalf)
        if (dx_sum) sum += SumRun(dx + (i * c + ch) * spatial, spatial);
    }
    if (dx_sum) dx_sum[ch] = sum;
  });
}

// LayerNorm of float rows, or of half rows of up to kHalfRowChunk: the parameters widened to double once in the
// normalized order, the rows by LayerNormRowsF32; half rows in chunks widened to float on the stack (exact), y
// rounded once to T.
// residual (float only, or null): the rows normalized are x + residual, written to sum_out first (Add's float add)
// one block of rows at a time, so the block is normalized while in cache.
template <typename T>
void LayerNormFloatRows(int64_t rows, int64_t cols, const T* x, const T* scale, const T* bias,
                        const std::vector<int64_t>& scale_idx, const std::vector<int64_t>& bias_idx, double eps, T* y,
                        float* mean_out, float* invstd_out, const T* residual = nullptr, T* sum_out = nullptr) {
  std::vector<double> sd(static_cast<size_t>(cols)), bd(static_cast<size_t>(cols), 0.0);
  for (int64_t j = 0; j < cols; ++j) {
    sd[j] = static_cast<double>(static_cast<float>(scale[scale_idx.empty() ? j : scale_idx[j]]));
    if (bias) bd[j] = static_cast<double>(static_cast<float>(bias[bias_idx.empty() ? j : bias_idx[j]]));
  }
  if (rows <= 0 || cols <= 0) return;
  const double* bs = bias ? bd.data() : nullptr;
  tbb::parallel_for(
      tbb::blocked_range<int64_t>(0, rows, Grain(cols)),
      [&](const tbb::blocked_range<int64_t>& br) {
        if constexpr (std::is_same_v<T, float>) {
          const float* rows_in = x;
          if (residual) {
            const int64_t o = br.begin() * cols;
            AddF32(x + o, residual + o, sum_out + o, (br.end() - br.begin()) * cols);
            rows_in = sum_out;
          }
          LayerNormRowsF32(br.begin(), br.end(), cols, rows_in, sd.data(), bs, eps, y, mean_out, invstd_out);
        } else {
          const int64_t chunk = std::max<int64_t>(1, kHalfRowChunk / cols);
          for (int64_t c0 = br.begin(); c0 < br.end(); c0 += chunk) {
            const int64_t cn = std::min(chunk, br.end() - c0);
            float xb[kHalfRowChunk], yb[kHalfRowChunk];
            LoadFloats(x + c0 * cols, xb, cn * cols);
            LayerNormRowsF32(0, cn, cols, xb, sd.data(), bs, eps, yb, mean_out ? mean_out + c0 : nullptr,
                             invstd_out ? invstd_out + c0 : nullptr);
            StoreFloats(yb, y + c0 * cols, cn * cols);
          }
        }
      },
      tbb::simple_partitioner());
}

template <typename T>
void LayerNorm(int64_t rows, int64_t cols, const T* x, const T* scale, const T* bias,
               const std::vector<int64_t>& scale_idx, const std::vector<int64_t>& bias_idx, double eps, T* y,
               float* mean_out, float* invstd_out) {
  if constexpr (!std::is_same_v<T, double>) {
    if (std::is_same_v<T, float> || cols <= kHalfRowChunk) {
      LayerNormFloatRows(rows, cols, x, scale, bias, scale_idx, bias_idx, eps, y, mean_out, invstd_out);
      return;
    }
  }
  // double (the gradient checks' reference), and longer half rows: in double, rounded once.
  ParallelItems(rows, cols, [&](int64_t r) {
    std::vector<float> in, out;
    const auto* p = Widen(x + r * cols, cols, in);
    double s = 0;
    for (int64_t j = 0; j < cols; ++j) s += Load(p[j]);
    const double m = cols ? s / cols : 0.0;
    double v = 0;
    for (int64_t j = 0; j < cols; ++j) {
      const double d = Load(p[j]) - m;
      v += d * d;
    }
    const double inv = 1.0 / std::sqrt((cols ? v / cols : 0.0) + eps);
    WriteRow(y + r * cols, cols, out, [&](int64_t j) {
      double o = (Load(p[j]) - m) * inv * Load(scale[scale_idx.empty() ? j : scale_idx[j]]);
      if (bias) o += Load(bias[bias_idx.empty() ? j : bias_idx[j]]);
      return o;
    });
    if (mean_out) mean_out[r] = static_cast<float>(m);
    if (invstd_out) invstd_out[r] = static_cast<float>(inv);
  });
}

void ResidualLayerNormF32(int64_t rows, int64_t cols, const float* x, const float* residual, const float* scale,
                          const float* bias, const std::vector<int64_t>& scale_idx,
                          const std::vector<int64_t>& bias_idx, double eps, float* sum, float* y, float* mean_out,
                          float* invstd_out) {
  LayerNormFloatRows(rows, cols, x, scale, bias, scale_idx, bias_idx, eps, y, mean_out, invstd_out, residual, sum);
}

// One float plane of InstanceNormalization: the statistics as a LayerNorm row's (row_stats.h: vectorized lanes in
// double), then y = (x - mean) (scale inv) + bias in double, rounded once. y may alias x.
OT_VEC_CLONES void InstanceNormPlaneF32(const float* x, int64_t n, double eps, double scale, double bias, float* y) {
  double mu, inv;
  row_stats::StatsOfRows<1>(x, n, eps, &mu, &inv);
  const double a = scale * inv;
  for (int64_t j = 0; j < n; ++j) y[j] = static_cast<float>((static_cast<double>(x[j]) - mu) * a + bias);
}

template <typename T>
void InstanceNorm(int64_t n, int64_t c, int64_t spatial, const T* x, const T* scale, const T* bias, double eps, T* y) {
  if constexpr (std::is_same_v<T, float>) {
    if (spatial > 0) {
      ParallelItems(n * c, spatial, [&](int64_t nc) {
        const int64_t ch = nc % c;
        InstanceNormPlaneF32(x + nc * spatial, spatial, eps, scale[ch], bias[ch], y + nc * spatial);
      });
      return;
    }
  }
  ParallelItems(n * c, spatial, [&](int64_t nc) {
    const int64_t ch = nc % c;
    std::vector<float> in, out;
    const auto* p = Widen(x + nc * spatial, spatial, in);
    double s = 0;
    for (int64_t j = 0; j < spatial; ++j) s += Load(p[j]);
    const double m = spatial ? s / spatial : 0.0;
    double v = 0;
    for (int64_t j = 0; j < spatial; ++j) {
      const double d = Load(p[j]) - m;
      v += d * d;
    }
    const double a = Load(scale[ch]) / std::sqrt((spatial ? v / spatial : 0.0) + eps), b = Load(bias[ch]);
    if constexpr (std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>) {
      const float mf = static_cast<float>(m), af = static_cast<float>(a), bf = static_cast<float>(b);
      WriteRow(y + nc * spatial, spatial, out, [&](int64_t j) { return (p[j] - mf) * af + bf; });
    } else {
      WriteRow(y + nc * spatial, spatial, out, [&](int64_t j) { return (Load(p[j]) - m) * a + b; });
    }
  });
}

template <typename T>
void MeanVarianceNorm(const std::vector<int64_t>& dims, const std::vector<bool>& reduce, const T* x, T* y) {
  const ReduceGeometry g = MakeReduceGeometry(dims, reduce);
  const int64_t inner = g.inner;
  if (g.out_numel() == 0 || g.count == 0) return;
  // One task per output row; the inner run is handled as a vector of statistics.
  ParallelItems(g.rows, inner * g.count, [&](int64_t row) {
    const int64_t base = RowBase(g, row);
    std::vector<double> s(inner, 0.0), s2(inner, 0.0);
    ForEachReducedRun(g, [&](int64_t off, int64_t n, int64_t stride) {
      for (int64_t k = 0; k < n; ++k) {
        const T* p = x + base + off + k * stride;
        for (int64_t j = 0; j < inner; ++j) {
          const double v = Load(p[j]);
          s[j] += v;
          s2[j] += v * v;
        }
      }
    });
    for (int64_t j = 0; j < inner; ++j) {
      const double m = s[j] / g.count;
      s[j] = m;
      s2[j] = 1.0 / (std::sqrt(std::max(0.0, s2[j] / g.count - m * m)) + 1e-9);
    }
    ForEachReducedRun(g, [&](int64_t off, int64_t n, int64_t stride) {
      for (int64_t k = 0; k < n; ++k) {
        const T* p = x + base + off + k * stride;
        T* q = y + base + off + k * stride;
        for (int64_t j = 0; j < inner; ++j) q[j] = Store<T>((Load(p[j]) - s[j]) * s2[j]);
      }
    });
  });
}

template <typename T>
void LpNorm(int p, int64_t outer, int64_t n, int64_t inner, const T* x, T* y) {
  ParallelItems(outer * inner, n, [&](int64_t o) {
    const int64_t i = o / inner, j = o % inner;
    const T* a = x + i * n * inner + j;
    T* b = y + i * n * inner + j;
    double norm = 0;
    for (int64_t k = 0; k < n; ++k) {
      const double v = Load(a[k * inner]);
      norm += p == 1 ? std::fabs(v) : v * v;
    }
    if (p == 2) norm = std::sqrt(norm);
    const double inv = norm == 0 ? 0.0 : 1.0 / norm;
    for (int64_t k = 0; k < n; ++k) b[k * inner] = Store<T>(Load(a[k * inner]) * inv);
  });
}

#define OT_INSTANTIATE(T)                                                                                           \
  template void RowMoments<T>(int64_t, int64_t, const T*, double*, double*);                                        \
  template void ChannelMoments<T>(int64_t, int64_t, int64_t, const T*, double*, double*);                           \
  template void BatchNormApply<T>(int64_t, int64_t, int64_t, const T*, const double*, const double*, const double*, \
                                  const double*, double, T*, bool);                                                 \
  template void LayerNorm<T>(int64_t, int64_t, const T*, const T*, const T*, const std::vector<int64_t>&,           \
                             const std::vector<int64_t>&, double, T*, float*, float*);                              \
  template void InstanceNorm<T>(int64_t, int64_t, int64_t, const T*, const T*, const T*, double, T*);               \
  template void MeanVarianceNorm<T>(const std::vector<int64_t>&, const std::vector<bool>&, const T*, T*);           \
  template void LpNorm<T>(int, int64_t, int64_t, int64_t, const T*, T*);
OT_INSTANTIATE(float)
OT_INSTANTIATE(double)
OT_INSTANTIATE(float16)
OT_INSTANTIATE(bfloat16)
#undef OT_INSTANTIATE
template void BatchNormGrad<float>(int64_t, int64_t, int64_t, const float*, const float*, const double*, const double*,
                                   const double*, double, float*, double*, double*, const float*, double*);
template void BatchNormGrad<double>(int64_t, int64_t, int64_t, const double*, const double*, const double*,
                                    const double*, const double*, double, double*, double*, double*, const double*,
                                    double*);
template void BatchNormGrad<float16>(int64_t, int64_t, int64_t, const float16*, const float16*, const double*,
                                     const double*, const double*, double, float16*, double*, double*, const float16*,
                                     double*);
template void BatchNormGrad<bfloat16>(int64_t, int64_t, int64_t, const bfloat16*, const bfloat16*, const double*,
                                      const double*, const double*, double, bfloat16*, double*, double*,
                                      const bfloat16*, double*);

}  // namespace ot::cpu
