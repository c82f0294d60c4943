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

// W lanes of doubles and their float, 32-bit and 64-bit integer companions (GCC's generic vectors: eight lanes are
// one AVX-512 register, where the widening conversions and the compares -- the loops' bottleneck -- take half the
// instructions that two four-lane steps do).
template <int W>
struct Lanes {
  typedef double D __attribute__((vector_size(8 * W)));
  typedef float F __attribute__((vector_size(4 * W)));
  typedef int I __attribute__((vector_size(4 * W)));
  typedef long long L __attribute__((vector_size(8 * W)));
};

// W elements of p as doubles.
// (Out-parameters, not return values: vector values across a call that GCC might not inline change with the
// target's ABI.)
template <int W, typename P>
OT_ROW_STATS_INLINE void LoadD(const P* p, typename Lanes<W>::D& d) {
  using V = Lanes<W>;
  if constexpr (std::is_same_v<P, float>) {
    typename V::F f;
    __builtin_memcpy(&f, p, sizeof f);
    d = __builtin_convertvector(f, typename V::D);
  } else {
    __builtin_memcpy(&d, p, sizeof d);
  }
}

// W elements of g as doubles, each zero where r's is not > 0 when kMask: a bitwise select (as the NCHW kernel's),
// on float rows before they are widened (exact: the same values either way).
template <int W, bool kMask, typename P>
OT_ROW_STATS_INLINE void LoadGradD(const P* g, const P* r, typename Lanes<W>::D& d) {
  using V = Lanes<W>;
  if constexpr (!kMask) {
    LoadD<W>(g, d);
  } else if constexpr (std::is_same_v<P, float>) {
    typename V::F gv, rv;
    __builtin_memcpy(&gv, g, sizeof gv);
    __builtin_memcpy(&rv, r, sizeof rv);
    gv = reinterpret_cast<typename V::F>(reinterpret_cast<typename V::I>(gv) & (rv > typename V::F{}));
    d = __builtin_convertvector(gv, typename V::D);
  } else {
    typename V::D rv;
    LoadD<W>(g, d);
    LoadD<W>(r, rv);
    d = reinterpret_cast<typename V::D>(reinterpret_cast<typename V::L>(d) & (rv > typename V::D{}));
  }
}

// The gradient's sums over rows [0, nr) for channels [ch, ch + W): d = x - shift, g = dy (masked by r > 0 when
// kMask): sum d, d^2, g, g d, held in registers over the rows.
template <int W, typename P, bool kMask>
OT_ROW_STATS_INLINE void GradMomentsLanes(const P* const* xs, const P* const* gs, const P* const* rs, int nr,
                                          int64_t ch, const double* shift, double* m0, double* m1, double* m2,
                                          double* m3) {
  using D = typename Lanes<W>::D;
  D a0, a1, a2, a3, sh;
  __builtin_memcpy(&a0, m0 + ch, sizeof a0);
  __builtin_memcpy(&a1, m1 + ch, sizeof a1);
  __builtin_memcpy(&a2, m2 + ch, sizeof a2);
  __builtin_memcpy(&a3, m3 + ch, sizeof a3);
  __builtin_memcpy(&sh, shift + ch, sizeof sh);
  for (int q = 0; q < nr; ++q) {
    D d, g;
    LoadD<W>(xs[q] + ch, d);
    LoadGradD<W, kMask>(gs[q] + ch, kMask ? rs[q] + ch : nullptr, g);
    d -= sh;
    a0 += d;
    a1 += d * d;
    a2 += g;
    a3 += g * d;
  }
  __builtin_memcpy(m0 + ch, &a0, sizeof a0);
  __builtin_memcpy(m1 + ch, &a1, sizeof a1);
  __builtin_memcpy(m2 + ch, &a2, sizeof a2);
  __builtin_memcpy(m3 + ch, &a3, sizeof a3);
}

// The gradient's sums over rows [0, nr): eight channels at a time, then four, then one (the same operations per
// element in every path, so the same bits).
template <typename P, bool kMask>
OT_VEC_CLONES void AddGradMomentsRows(const P* const* xs, const P* const* gs, const P* const* rs, int nr,
                                      const double* __restrict shift, double* __restrict m0, double* __restrict m1,
                                      double* __restrict m2, double* __restrict m3, int64_t c) {
  int64_t ch = 0;
  for (; ch + 8 <= c; ch += 8) GradMomentsLanes<8, P, kMask>(xs, gs, rs, nr, ch, shift, m0, m1, m2, m3);
  for (; ch + 4 <= c; ch += 4) GradMomentsLanes<4, P, kMask>(xs, gs, rs, nr, ch, shift, m0, m1, m2, m3);
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

// dx for channels [ch, ch + W) of nr rows (GradRows).
template <int W, typename P, typename O, bool kMask, bool kOdd>
OT_ROW_STATS_INLINE void GradLanes(const P* x, const P* g, const P* r, O* dx, int nr, int64_t ch, const double* k0,
                                   const double* mb, const double* mu, const double* q, int64_t c) {
  using V = Lanes<W>;
  typename V::D kv, mbv, muv, qv;
  __builtin_memcpy(&kv, k0 + ch, sizeof kv);
  __builtin_memcpy(&mbv, mb + ch, sizeof mbv);
  __builtin_memcpy(&muv, mu + ch, sizeof muv);
  __builtin_memcpy(&qv, q + ch, sizeof qv);
  for (int row = 0; row < nr; ++row) {
    const int64_t at = row * c + ch;
    typename V::D gv, xv;
    LoadGradD<W, kMask>(g + at, kMask ? r + at : nullptr, gv);
    LoadD<W>(x + at, xv);
    const typename V::D v = kv * (gv - mbv) - (xv - muv) * qv;
    if constexpr (kOdd) {
      // RoundToOddFloat on W lanes: the nearest float, one ulp back toward zero where that rounded away from zero,
      // and the last bit set where inexact (the same bits as the scalar function).
      const typename V::F f = __builtin_convertvector(v, typename V::F);
      const typename V::D back = __builtin_convertvector(f, typename V::D);
      const typename V::L abs_mask = typename V::L{} + 0x7fffffffffffffffLL;
      const typename V::L away =
          (reinterpret_cast<typename V::L>(back) & abs_mask) > (reinterpret_cast<typename V::L>(v) & abs_mask);
      const typename V::L inexact = back != v;
      typename V::I bits;
      __builtin_memcpy(&bits, &f, sizeof bits);
      bits += __builtin_convertvector(away, typename V::I);  // -1 where it rounded away from zero
      bits |= __builtin_convertvector(inexact, typename V::I) & 1;
      __builtin_memcpy(dx + at, &bits, sizeof bits);
    } else if constexpr (std::is_same_v<O, float>) {
      const typename V::F f = __builtin_convertvector(v, typename V::F);
      __builtin_memcpy(dx + at, &f, sizeof f);
    } else {
      __builtin_memcpy(dx + at, &v, sizeof v);
    }
  }
}

// dx = k0 (dy - mb) - (x - mu) q per channel (training), or k0 dy (q and mb zero), dy masked by r > 0 when kMask; in
// double, rounded once to O (kOdd: round-to-odd floats, narrowed to a half type by the caller); over nr consecutive
// rows of c channels (x, g, r, dx row-major [nr, c]): eight channels at a time, then four, then one, the parameters
// loaded once per group of channels (the same operations per element in every path, so the same bits).
template <typename P, typename O, bool kMask, bool kOdd>
OT_VEC_CLONES void GradRows(const P* __restrict x, const P* __restrict g, const P* __restrict r, O* __restrict dx,
                            int nr, const double* __restrict k0, const double* __restrict mb,
                            const double* __restrict mu, const double* __restrict q, int64_t c) {
  int64_t ch = 0;
  for (; ch + 8 <= c; ch += 8) GradLanes<8, P, O, kMask, kOdd>(x, g, r, dx, nr, ch, k0, mb, mu, q, c);
  for (; ch + 4 <= c; ch += 4) GradLanes<4, P, O, kMask, kOdd>(x, g, r, dx, nr, ch, k0, mb, mu, q, c);
  for (; ch < c; ++ch)
    for (int row = 0; row < nr; ++row) {
      const int64_t at = row * c + ch;
      const double gv = !kMask || r[at] > 0 ? static_cast<double>(g[at]) : 0.0;
      const double v = k0[ch] * (gv - mb[ch]) - (static_cast<double>(x[at]) - mu[ch]) * q[ch];
      if constexpr (kOdd)
        dx[at] = RoundToOddFloat(v);
      else
        dx[at] = static_cast<O>(v);
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
      const Wide<T>* xp;
      if constexpr (kIsHalf<T>) {
        LoadFloats(x + r * c, buf.data(), nr * c);
        xp = buf.data();
      } else {
        xp = x + r * c;
      }
      for (int q = 0; q < nr; ++q) xs[q] = xp + q * c;
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
  // Rows [r, r + nr) of an array as P: in place, or half rows widened into the block's buffer with one call (the
  // rows are contiguous; a call per row cost more than the arithmetic at small channel counts).
  auto group_at = [&](const T* base, int64_t r, int nr, float* buf) -> const P* {
    if constexpr (kIsHalf<T>) {
      LoadFloats(base + r * c, buf, nr * c);
      return buf;
    } else {
      return base + r * c;
    }
  };
  ForBlocks(rows, c, [&](int64_t b, int64_t r0, int64_t r1) {
    const size_t hb = kIsHalf<T> ? static_cast<size_t>(kGroup * c) : 0;
    std::vector<float> bx(hb), bg(hb), br(hb);
    double* m = part.data() + b * c * 4;
    const P *xs[kGroup], *gs[kGroup], *rs[kGroup];
    for (int64_t r = r0; r < r1; r += kGroup) {
      const int nr = static_cast<int>(std::min<int64_t>(kGroup, r1 - r));
      const P *xp = group_at(x, r, nr, bx.data()), *gp = group_at(dy, r, nr, bg.data()),
              *rp = relu_out ? group_at(relu_out, r, nr, br.data()) : nullptr;
      for (int k = 0; k < nr; ++k) {
        xs[k] = xp + k * c;
        gs[k] = gp + k * c;
        rs[k] = rp ? rp + k * c : nullptr;
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
    const size_t hb = kIsHalf<T> ? static_cast<size_t>(kGroup * c) : 0;
    std::vector<float> bx(hb), bg(hb), br(hb), out(hb);
    for (int64_t r = r0; r < r1; r += kGroup) {
      const int nr = static_cast<int>(std::min<int64_t>(kGroup, r1 - r));
      const P *xp = group_at(x, r, nr, bx.data()), *gp = group_at(dy, r, nr, bg.data()),
              *rp = relu_out ? group_at(relu_out, r, nr, br.data()) : nullptr;
      if constexpr (kIsHalf<T>) {
        if (rp)
          GradRows<P, float, true, true>(xp, gp, rp, out.data(), nr, k0.data(), mb.data(), mu.data(), q.data(), c);
        else
          GradRows<P, float, false, true>(xp, gp, nullptr, out.data(), nr, k0.data(), mb.data(), mu.data(), q.data(),
                                          c);
        StoreFloats(out.data(), dx + r * c, nr * c);
      } else {
        if (rp)
          GradRows<P, T, true, false>(xp, gp, rp, dx + r * c, nr, k0.data(), mb.data(), mu.data(), q.data(), c);
        else
          GradRows<P, T, false, false>(xp, gp, nullptr, dx + r * c, nr, k0.data(), mb.data(), mu.data(), q.data(), c);
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
