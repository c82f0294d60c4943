// BatchNormalization over channels-last activations (cpu_ops/norm.h's *Last functions): x is [rows, c], NHWC's
// N*H*W rows of C channels, so every loop runs along the channels, contiguous, with per-channel parameters in
// arrays. Statistics: rows in fixed blocks of kBlockRows, each block's per-channel sums in double (shifted by each
// channel's first value, so sum(d^2) - n mean(d)^2 does not cancel), the blocks' sums added in block order -- the
// same bits whatever the thread count. The NCHW kernels (norm.cc) add in another order: the results agree to
// rounding, not bit for bit.
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "cpu_ops/half_convert.h"
#include "cpu_ops/norm.h"
#include "cpu_ops/row_stats.h"
#include "kernel_common/half.h"
#include "kernel_common/scalar_math.h"
#include "kernel_common/vec_math.h"

namespace ot::cpu {

namespace {

constexpr int64_t kBlockRows = 128;

template <typename T>
constexpr bool kIsHalf = std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>;

// The value type the loops read: float for the half types (widened per row), else T.
template <typename T>
using Wide = std::conditional_t<kIsHalf<T>, float, T>;

// Row r of x as Wide<T>: the row itself, or widened into buf (c floats).
template <typename T>
const Wide<T>* RowOf(const T* x, int64_t r, int64_t c, float* buf) {
  if constexpr (kIsHalf<T>) {
    LoadFloats(x + r * c, buf, c);
    return buf;
  } else {
    return x + r * c;
  }
}

// Over every block of rows in parallel: f(block, row_begin, row_end).
template <typename F>
void ForBlocks(int64_t rows, int64_t c, F&& f) {
  const int64_t blocks = (rows + kBlockRows - 1) / kBlockRows;
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, kBlockRows * c));
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, blocks, grain), [&](const tbb::blocked_range<int64_t>& br) {
    for (int64_t b = br.begin(); b != br.end(); ++b) f(b, b * kBlockRows, std::min(rows, (b + 1) * kBlockRows));
  });
}

// Rows are summed kGroup at a time: per chunk of 4 channels, the sums held in registers over the group's rows (each
// channel's sums still take the rows in order, so the bits are those of a row-by-row loop), instead of every row
// loading and storing the whole row of sums.
constexpr int kGroup = 8;

using row_stats::D4;

// Four elements of p as doubles (GCC's generic vectors, written out: its vectorizer left these loops scalar).
template <typename P>
OT_ROW_STATS_INLINE void Load4(const P* p, D4& v) {
  if constexpr (std::is_same_v<P, float>)
    row_stats::Widen4(p, v);
  else
    __builtin_memcpy(&v, p, sizeof v);
}
OT_ROW_STATS_INLINE void Store4(double* p, const D4& v) { __builtin_memcpy(p, &v, sizeof v); }

// acc[ch] += x - shift[ch], sq[ch] += (x - shift[ch])^2 over rows xs[0..nr).
template <typename P>
OT_VEC_CLONES void AddMomentsRows(const P* const* xs, int nr, const double* __restrict shift, double* __restrict acc,
                                  double* __restrict sq, int64_t c) {
  int64_t ch = 0;
  for (; ch + 4 <= c; ch += 4) {
    D4 a, b, sh;
    Load4(acc + ch, a);
    Load4(sq + ch, b);
    Load4(shift + ch, sh);
    for (int q = 0; q < nr; ++q) {
      D4 d;
      Load4(xs[q] + ch, d);
      d -= sh;
      a += d;
      b += d * d;
    }
    Store4(acc + ch, a);
    Store4(sq + ch, b);
  }
  for (; ch < c; ++ch)
    for (int q = 0; q < nr; ++q) {
      const double d = static_cast<double>(xs[q][ch]) - shift[ch];
      acc[ch] += d;
      sq[ch] += d * d;
    }
}

// The gradient's sums over rows [0, nr): d = x - shift, g = dy (masked by r > 0 when kMask: a bitwise select, as
// the NCHW kernel's): sum d, d^2, g, g d.
template <typename P, bool kMask>
OT_VEC_CLONES void AddGradMomentsRows(const P* const* xs, const P* const* gs, const P* const* rs, int nr,
                                      const double* __restrict shift, double* __restrict m0, double* __restrict m1,
                                      double* __restrict m2, double* __restrict m3, int64_t c) {
  typedef long long L4 __attribute__((vector_size(32)));
  int64_t ch = 0;
  for (; ch + 4 <= c; ch += 4) {
    D4 a0, a1, a2, a3, sh;
    Load4(m0 + ch, a0);
    Load4(m1 + ch, a1);
    Load4(m2 + ch, a2);
    Load4(m3 + ch, a3);
    Load4(shift + ch, sh);
    for (int q = 0; q < nr; ++q) {
      D4 d, g;
      Load4(xs[q] + ch, d);
      Load4(gs[q] + ch, g);
      if constexpr (kMask) {
        D4 r;
        Load4(rs[q] + ch, r);
        g = reinterpret_cast<D4>(reinterpret_cast<L4>(g) & (r > D4{}));
      }
      d -= sh;
      a0 += d;
      a1 += d * d;
      a2 += g;
      a3 += g * d;
    }
    Store4(m0 + ch, a0);
    Store4(m1 + ch, a1);
    Store4(m2 + ch, a2);
    Store4(m3 + ch, a3);
  }
  for (; ch < c; ++ch)
    for (int q = 0; q < nr; ++q) {
      const double d = static_cast<double>(xs[q][ch]) - shift[ch];
      const double gv = !kMask || rs[q][ch] > 0 ? static_cast<double>(gs[q][ch]) : 0.0;
      m0[ch] += d;
      m1[ch] += d * d;
      m2[ch] += gv;
      m3[ch] += gv * d;
    }
}

// y = (x - m) a + b per channel, in double, rounded once (O float or double), then Relu when kRelu.
template <typename P, typename O, bool kRelu>
OT_VEC_CLONES void ApplyRow(const P* __restrict x, O* __restrict y, const double* __restrict m,
                            const double* __restrict a, const double* __restrict b, int64_t c) {
  for (int64_t ch = 0; ch < c; ++ch) {
    const O v = static_cast<O>((static_cast<double>(x[ch]) - m[ch]) * a[ch] + b[ch]);
    y[ch] = kRelu ? math::Relu(v) : v;
  }
}

// The half rows' apply: float arithmetic on the widened row (as the NCHW kernel's half path), Relu before rounding.
template <bool kRelu>
OT_VEC_CLONES void ApplyRowF(const float* __restrict x, float* __restrict y, const float* __restrict m,
                             const float* __restrict a, const float* __restrict b, int64_t c) {
  for (int64_t ch = 0; ch < c; ++ch) {
    const float v = (x[ch] - m[ch]) * a[ch] + b[ch];
    y[ch] = kRelu ? math::Relu(v) : v;
  }
}

// dx = k0 (dy - mb) - (x - mu) q per channel (training), or k0 dy (q and mb zero), dy masked by r > 0 when kMask; in
// double, rounded once to O (kOdd: round-to-odd floats, narrowed to a half type by the caller). Float and double
// rows four channels at a time in explicit vectors (the same operations as the scalar tail, so the same bits).
template <typename P, typename O, bool kMask, bool kOdd>
OT_VEC_CLONES void GradRow(const P* __restrict x, const P* __restrict g, const P* __restrict r, O* __restrict dx,
                           const double* __restrict k0, const double* __restrict mb, const double* __restrict mu,
                           const double* __restrict q, int64_t c) {
  typedef long long L4 __attribute__((vector_size(32)));
  typedef float F4 __attribute__((vector_size(16)));
  typedef int I4 __attribute__((vector_size(16)));
  int64_t ch = 0;
  {
    for (; ch + 4 <= c; ch += 4) {
      D4 xv, gv, kv, mbv, muv, qv;
      Load4(x + ch, xv);
      Load4(g + ch, gv);
      if constexpr (kMask) {
        D4 rv;
        Load4(r + ch, rv);
        gv = reinterpret_cast<D4>(reinterpret_cast<L4>(gv) & (rv > D4{}));
      }
      Load4(k0 + ch, kv);
      Load4(mb + ch, mbv);
      Load4(mu + ch, muv);
      Load4(q + ch, qv);
      const D4 v = kv * (gv - mbv) - (xv - muv) * qv;
      if constexpr (kOdd) {
        // RoundToOddFloat on four lanes: the nearest float, one ulp back toward zero where that rounded away from
        // zero, and the last bit set where inexact (the same bits as the scalar function).
        const F4 f = __builtin_convertvector(v, F4);
        const D4 back = __builtin_convertvector(f, D4);
        const L4 abs_mask = L4{} + 0x7fffffffffffffffLL;
        const L4 away = (reinterpret_cast<L4>(back) & abs_mask) > (reinterpret_cast<L4>(v) & abs_mask);
        const L4 inexact = back != v;
        I4 bits;
        __builtin_memcpy(&bits, &f, sizeof bits);
        bits += __builtin_convertvector(away, I4);  // -1 where it rounded away from zero
        bits |= __builtin_convertvector(inexact, I4) & 1;
        __builtin_memcpy(dx + ch, &bits, sizeof bits);
      } else if constexpr (std::is_same_v<O, float>) {
        const F4 f = __builtin_convertvector(v, F4);
        __builtin_memcpy(dx + ch, &f, sizeof f);
      } else {
        __builtin_memcpy(dx + ch, &v, sizeof v);
      }
    }
  }
  for (; ch < c; ++ch) {
    const double gv = !kMask || r[ch] > 0 ? static_cast<double>(g[ch]) : 0.0;
    const double v = k0[ch] * (gv - mb[ch]) - (static_cast<double>(x[ch]) - mu[ch]) * q[ch];
    if constexpr (kOdd)
      dx[ch] = RoundToOddFloat(v);
    else
      dx[ch] = static_cast<O>(v);
  }
}

template <typename T>
double FirstOf(const T* x, int64_t ch) {
  if constexpr (kIsHalf<T>)
    return static_cast<double>(static_cast<float>(x[ch]));
  else
    return static_cast<double>(x[ch]);
}

}  // namespace

template <typename T>
void ChannelMomentsLast(int64_t rows, int64_t c, const T* x, double* mean, double* var) {
  const int64_t blocks = (rows + kBlockRows - 1) / kBlockRows;
  std::vector<double> shift(static_cast<size_t>(c), 0.0), part(static_cast<size_t>(blocks * c * 2), 0.0);
  if (rows > 0)
    for (int64_t ch = 0; ch < c; ++ch) shift[ch] = FirstOf(x, ch);
  ForBlocks(rows, c, [&](int64_t b, int64_t r0, int64_t r1) {
    std::vector<float> buf(kIsHalf<T> ? kGroup * c : 0);
    double* acc = part.data() + b * c * 2;
    const Wide<T>* xs[kGroup];
    for (int64_t r = r0; r < r1; r += kGroup) {
      const int nr = static_cast<int>(std::min<int64_t>(kGroup, r1 - r));
      for (int q = 0; q < nr; ++q) xs[q] = RowOf(x, r + q, c, buf.data() + (kIsHalf<T> ? q * c : 0));
      AddMomentsRows(xs, nr, shift.data(), acc, acc + c, c);
    }
  });
  const double cnt = static_cast<double>(rows);
  for (int64_t ch = 0; ch < c; ++ch) {
    double s = 0, s2 = 0;
    for (int64_t b = 0; b < blocks; ++b) {
      s += part[(b * 2) * c + ch];
      s2 += part[(b * 2 + 1) * c + ch];
    }
    const double md = rows ? s / cnt : 0.0;
    mean[ch] = shift[ch] + md;
    var[ch] = rows ? std::max(0.0, s2 / cnt - md * md) : 0.0;
  }
}

template <typename T>
void BatchNormApplyLast(int64_t rows, int64_t c, const T* x, const double* scale, const double* bias,
                        const double* mean, const double* var, double eps, T* y, bool relu) {
  std::vector<double> a(static_cast<size_t>(c)), m(mean, mean + c), b(bias, bias + c);
  for (int64_t ch = 0; ch < c; ++ch) a[ch] = scale[ch] / std::sqrt(var[ch] + eps);
  if constexpr (kIsHalf<T>) {
    std::vector<float> mf(m.begin(), m.end()), af(a.begin(), a.end()), bf(b.begin(), b.end());
    ForBlocks(rows, c, [&](int64_t, int64_t r0, int64_t r1) {
      std::vector<float> in(static_cast<size_t>(c)), out(static_cast<size_t>(c));
      for (int64_t r = r0; r < r1; ++r) {
        LoadFloats(x + r * c, in.data(), c);
        if (relu)
          ApplyRowF<true>(in.data(), out.data(), mf.data(), af.data(), bf.data(), c);
        else
          ApplyRowF<false>(in.data(), out.data(), mf.data(), af.data(), bf.data(), c);
        StoreFloats(out.data(), y + r * c, c);
      }
    });
  } else {
    ForBlocks(rows, c, [&](int64_t, int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        if (relu)
          ApplyRow<T, T, true>(x + r * c, y + r * c, m.data(), a.data(), b.data(), c);
        else
          ApplyRow<T, T, false>(x + r * c, y + r * c, m.data(), a.data(), b.data(), c);
      }
    });
  }
}

template <typename T>
void BatchNormGradLast(int64_t rows, int64_t c, const T* dy, const T* x, const double* scale, const double* mean,
                       const double* var, double eps, T* dx, double* dscale, double* dbias, const T* relu_out) {
  using P = Wide<T>;
  const int64_t blocks = (rows + kBlockRows - 1) / kBlockRows;
  std::vector<double> shift(static_cast<size_t>(c), 0.0), part(static_cast<size_t>(blocks * c * 4), 0.0);
  for (int64_t ch = 0; ch < c; ++ch) shift[ch] = mean ? mean[ch] : (rows ? FirstOf(x, ch) : 0.0);
  // The rows of x, dy (and Relu's output) as P; half rows widened into the block's buffers.
  auto rows_at = [&](int64_t r, std::vector<float>& bx, std::vector<float>& bg, std::vector<float>& br, const P*& xp,
                     const P*& gp, const P*& rp) {
    xp = RowOf(x, r, c, bx.data());
    gp = RowOf(dy, r, c, bg.data());
    rp = relu_out ? RowOf(relu_out, r, c, br.data()) : nullptr;
  };
  ForBlocks(rows, c, [&](int64_t b, int64_t r0, int64_t r1) {
    const size_t hb = kIsHalf<T> ? static_cast<size_t>(kGroup * c) : 0;
    std::vector<float> bx(hb), bg(hb), br(hb);
    double* m = part.data() + b * c * 4;
    const P *xs[kGroup], *gs[kGroup], *rs[kGroup];
    for (int64_t r = r0; r < r1; r += kGroup) {
      const int nr = static_cast<int>(std::min<int64_t>(kGroup, r1 - r));
      for (int q = 0; q < nr; ++q) {
        const size_t o = kIsHalf<T> ? static_cast<size_t>(q * c) : 0;
        xs[q] = RowOf(x, r + q, c, bx.data() + o);
        gs[q] = RowOf(dy, r + q, c, bg.data() + o);
        rs[q] = relu_out ? RowOf(relu_out, r + q, c, br.data() + o) : nullptr;
      }
      if (relu_out)
        AddGradMomentsRows<P, true>(xs, gs, rs, nr, shift.data(), m, m + c, m + 2 * c, m + 3 * c, c);
      else
        AddGradMomentsRows<P, false>(xs, gs, rs, nr, shift.data(), m, m + c, m + 2 * c, m + 3 * c, c);
    }
  });
  const double cnt = static_cast<double>(rows);
  std::vector<double> k0(static_cast<size_t>(c)), mb(static_cast<size_t>(c)), mu(static_cast<size_t>(c)),
      q(static_cast<size_t>(c));
  for (int64_t ch = 0; ch < c; ++ch) {
    double s[4] = {0, 0, 0, 0};
    for (int64_t b = 0; b < blocks; ++b)
      for (int k = 0; k < 4; ++k) s[k] += part[(b * 4 + k) * c + ch];
    // As the NCHW kernel (norm.cc BatchNormGrad): mean(x) - shift, sum(dy), sum(dy (x - mu)), the variance.
    const double md = rows ? s[0] / cnt : 0.0;
    mu[ch] = mean ? mean[ch] : shift[ch] + md;
    const double sb = s[2], sgx = mean ? s[3] : s[3] - md * s[2];
    const double bvar = rows ? std::max(0.0, s[1] / cnt - md * md) : 0.0;
    const double r = 1.0 / std::sqrt((mean ? var[ch] : bvar) + eps);
    const double ss = sgx * r;
    if (dscale) dscale[ch] = ss;
    if (dbias) dbias[ch] = sb;
    k0[ch] = scale[ch] * r;
    mb[ch] = mean ? 0.0 : sb / cnt;
    q[ch] = mean ? 0.0 : k0[ch] * r * (ss / cnt);
  }
  ForBlocks(rows, c, [&](int64_t, int64_t r0, int64_t r1) {
    const size_t hb = kIsHalf<T> ? static_cast<size_t>(c) : 0;
    std::vector<float> bx(hb), bg(hb), br(hb), out(hb);
    for (int64_t r = r0; r < r1; ++r) {
      const P *xp, *gp, *rp;
      rows_at(r, bx, bg, br, xp, gp, rp);
      if constexpr (kIsHalf<T>) {
        if (rp)
          GradRow<P, float, true, true>(xp, gp, rp, out.data(), k0.data(), mb.data(), mu.data(), q.data(), c);
        else
          GradRow<P, float, false, true>(xp, gp, nullptr, out.data(), k0.data(), mb.data(), mu.data(), q.data(), c);
        StoreFloats(out.data(), dx + r * c, c);
      } else {
        if (rp)
          GradRow<P, T, true, false>(xp, gp, rp, dx + r * c, k0.data(), mb.data(), mu.data(), q.data(), c);
        else
          GradRow<P, T, false, false>(xp, gp, nullptr, dx + r * c, k0.data(), mb.data(), mu.data(), q.data(), c);
      }
    }
  });
}

#define OT_NORM_LAST(T)                                                                                        \
  template void ChannelMomentsLast<T>(int64_t, int64_t, const T*, double*, double*);                           \
  template void BatchNormApplyLast<T>(int64_t, int64_t, const T*, const double*, const double*, const double*, \
                                      const double*, double, T*, bool);                                        \
  template void BatchNormGradLast<T>(int64_t, int64_t, const T*, const T*, const double*, const double*,       \
                                     const double*, double, T*, double*, double*, const T*);
OT_NORM_LAST(float)
OT_NORM_LAST(double)
OT_NORM_LAST(float16)
OT_NORM_LAST(bfloat16)
#undef OT_NORM_LAST

}  // namespace ot::cpu
