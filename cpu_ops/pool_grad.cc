#include "cpu_ops/pool_grad.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "cpu_ops/dims.h"
#include "cpu_ops/pool_vec.h"
#include "kernel_common/vec_math.h"

namespace ot::cpu {

namespace {

// Calls f(o, window) for every output position of every plane, window = the in-input offsets of its elements
// (in window order) and count_pad = its size within the padded input.
template <typename T, typename F>
void ForEachWindow(const PoolSpec& spec, T* dx, F&& f) {
  const auto in = Pad3(spec.in_spatial, 1), out = Pad3(spec.out_spatial, 1), k = Pad3(spec.kernel, 1);
  const auto st = Pad3(spec.strides, 1), dl = Pad3(spec.dilations, 1), pb = Pad3(spec.pad_begin, 0),
             pe = Pad3(spec.pad_end, 0);
  const int64_t in_sz = in[0] * in[1] * in[2], out_sz = out[0] * out[1] * out[2];
  tbb::parallel_for(int64_t{0}, spec.n * spec.c, [&](int64_t plane) {
    T* dp = dx + plane * in_sz;
    for (int64_t i = 0; i < in_sz; ++i) dp[i] = T(0);
    std::vector<int64_t> win;
    for (int64_t od = 0; od < out[0]; ++od)
      for (int64_t oh = 0; oh < out[1]; ++oh)
        for (int64_t ow = 0; ow < out[2]; ++ow) {
          const int64_t o = (od * out[1] + oh) * out[2] + ow;
          win.clear();
          const int64_t count_pad =
              ForEachPoolTap(in, k, st, dl, pb, pe, od, oh, ow, [&](int64_t i) { win.push_back(i); });
          f(plane, plane * out_sz + o, plane * in_sz, win, count_pad, dp);
        }
  });
}

// The full 2-wide windows [0, n) of one output row of MaxPoolGrad2DTiled below (window columns 2 wide at stride 2,
// band rows x0 .. x0 + rows of stride W), L windows at a time on 32-byte vectors (GCC's generic vectors: AVX2 in the
// x86-64-v3 clone, SSE halves in the baseline): each band row's two loads split into even and odd taps by shuffles,
// the argmax as a tap code in the scalar scan's order (rows, then columns; TakesMax as compares and blends), then
// each band row of dX written once, interleaved back: dY where the tap is the argmax, else 0. Returns the windows
// done (a multiple of L); the caller's scalar loops take the rest. kRelu: dY only where the maximum is > 0.
template <typename T, bool kRelu>
OT_VEC_CLONES int64_t MaxPoolGradRow2(const T* __restrict x, const T* __restrict dy, T* __restrict dx, int64_t W,
                                      int64_t rows, int64_t n) {
  constexpr int L = 32 / sizeof(T);
  using I = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;
  typedef T V __attribute__((vector_size(32)));
  typedef I M __attribute__((vector_size(32)));
  const V zero{};
  int64_t ow = 0;
  for (; ow + L <= n; ow += L) {
    V b{};
    M code{};
    for (int64_t r = 0; r < rows; ++r) {
      V a0, a1;
      __builtin_memcpy(&a0, x + r * W + 2 * ow, sizeof(V));
      __builtin_memcpy(&a1, x + r * W + 2 * ow + L, sizeof(V));
      V e, o;  // the even and the odd taps
      pool_vec::SplitEvenOdd(a0, a1, e, o);
      const I ce = static_cast<I>(2 * r), co = static_cast<I>(2 * r + 1);
      if (r == 0) {
        b = e;
        code = M{} + ce;
      } else {
        const M t = (e > b) | ((e != e) & (b == b));
        b = t ? e : b;
        code = t ? M{} + ce : code;
      }
      const M t = (o > b) | ((o != o) & (b == b));
      b = t ? o : b;
      code = t ? M{} + co : code;
    }
    V g;
    __builtin_memcpy(&g, dy + ow, sizeof(V));
    g = zero + g;  // 0 + dY, as the accumulation into a zeroed dX gives (-0 becomes +0)
    if constexpr (kRelu) g = b > zero ? g : zero;
    for (int64_t r = 0; r < rows; ++r) {
      const V ge = code == static_cast<I>(2 * r) ? g : zero, go = code == static_cast<I>(2 * r + 1) ? g : zero;
      V d0, d1;  // ge and go interleaved (ge0 go0 ge1 go1 ...)
      pool_vec::Interleave(ge, go, d0, d1);
      __builtin_memcpy(dx + r * W + 2 * ow, &d0, sizeof(V));
      __builtin_memcpy(dx + r * W + 2 * ow + L, &d1, sizeof(V));
    }
  }
  return ow;
}

// Non-overlapping 2-D windows (stride >= kernel on both axes; 1-D pools have H = 1), no pads or dilations -- the
// common 2x2 stride 2 case. Per output row: the argmax of every full window, as a tap code (kh * KW + kw) in the
// same scan order as the scalar path (rows, then columns; first maximum wins), is found with a branchless
// select over whole output rows (vectorizes: strided loads, no closure pointers); then each input row of the
// window band is written once, dY where the tap is the argmax and 0 elsewhere (so no separate zeroing where the
// windows tile the input). Windows clipped at the right edge (ceil_mode) take the scalar scan. K2/S2 > 0 fix
// the column kernel/stride at compile time (0: the runtime values). kRelu: a window's dY is routed only where its
// maximum is > 0 (0 elsewhere).
template <typename T, int K2, int S2, bool kRelu>
void MaxPoolGrad2DTiled(int64_t planes, int64_t H, int64_t W, int64_t OH, int64_t OW, int64_t k1_, int64_t k2_,
                        int64_t s1_, int64_t s2_, const T* dy, const T* x, T* dx) {
  using Code = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;  // same width as T: a plain vector select
  const int64_t k1 = k1_, k2 = K2 > 0 ? K2 : k2_, s1 = s1_, s2 = S2 > 0 ? S2 : s2_;
  const int64_t in_sz = H * W, out_sz = OH * OW;
  // Full windows per row (they lie inside the input); the rest (ceil_mode) are clipped.
  const int64_t ow_full = W >= k2 ? std::min(OW, (W - k2) / s2 + 1) : 0;
  // The windows cover every input element exactly once: no zeroing needed.
  const bool tiles = s1 == k1 && s2 == k2 && OH * s1 == H && OW * s2 == W && ow_full == OW;
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, planes, 1), [&](const tbb::blocked_range<int64_t>& r) {
    std::vector<T> best_v(static_cast<size_t>(std::max<int64_t>(ow_full, 1)));
    std::vector<Code> best_c(best_v.size());
    for (int64_t plane = r.begin(); plane < r.end(); ++plane) {
      const T* __restrict xp = x + plane * in_sz;
      const T* __restrict yp = dy + plane * out_sz;
      T* __restrict dp = dx + plane * in_sz;
      T* __restrict bv = best_v.data();
      Code* __restrict bc = best_c.data();
      if (!tiles)
        for (int64_t i = 0; i < in_sz; ++i) dp[i] = T(0);
      for (int64_t oh = 0; oh < OH; ++oh) {
        const int64_t ih0 = oh * s1, ih1 = std::min(ih0 + k1, H);
        if (ih0 >= H) break;
        const T* __restrict yr = yp + oh * OW;
        // 2-wide windows at stride 2 in float or double: the vector routine, from window ow0 on the loops below.
        int64_t ow0 = 0;
        if constexpr (K2 == 2 && S2 == 2 && (std::is_same_v<T, float> || std::is_same_v<T, double>))
          ow0 = MaxPoolGradRow2<T, kRelu>(xp + ih0 * W, yr, dp + ih0 * W, W, ih1 - ih0, ow_full);
        // Argmax of the full windows of this output row.
        {
          const T* __restrict xr = xp + ih0 * W;
          for (int64_t ow = ow0; ow < ow_full; ++ow) {
            bv[ow] = xr[ow * s2];
            bc[ow] = 0;
          }
        }
        for (int64_t ih = ih0; ih < ih1; ++ih) {
          const T* __restrict xr = xp + ih * W;
          for (int64_t kw = ih == ih0 ? 1 : 0; kw < k2; ++kw) {
            const Code c = static_cast<Code>((ih - ih0) * k2 + kw);
            for (int64_t ow = ow0; ow < ow_full; ++ow) {
              const T v = xr[ow * s2 + kw], b = bv[ow];
              const bool take = pool_vec::TakesMax(v, b);
              bv[ow] = take ? v : b;
              bc[ow] = take ? c : bc[ow];
            }
          }
        }
        // Route dY: every element of the full windows written once (0 + dY, as the accumulation into the zeroed
        // dX gave: -0 becomes +0).
        for (int64_t ih = ih0; ih < ih1; ++ih) {
          T* __restrict dr = dp + ih * W;
          const Code c0 = static_cast<Code>((ih - ih0) * k2);
          if constexpr (K2 > 0 && K2 == S2) {
            // The taps of a window row stored together (a full interleaved group: vectorizes; one strided store
            // per tap does not).
            for (int64_t ow = ow0; ow < ow_full; ++ow) {
              const T g = !kRelu || bv[ow] > T(0) ? T(0) + yr[ow] : T(0);
              const Code cc = bc[ow];
              for (int kw = 0; kw < K2; ++kw) dr[ow * K2 + kw] = cc == c0 + kw ? g : T(0);
            }
          } else {
            for (int64_t kw = 0; kw < k2; ++kw)
              for (int64_t ow = ow0; ow < ow_full; ++ow) {
                const T g = !kRelu || bv[ow] > T(0) ? T(0) + yr[ow] : T(0);
                dr[ow * s2 + kw] = bc[ow] == static_cast<Code>(c0 + kw) ? g : T(0);
              }
          }
        }
        // Windows clipped at the right edge: the scalar scan.
        for (int64_t ow = ow_full; ow < OW; ++ow) {
          int64_t best = -1;
          for (int64_t ih = ih0; ih < ih1; ++ih)
            for (int64_t iw = ow * s2; iw < std::min(ow * s2 + k2, W); ++iw) {
              const int64_t off = ih * W + iw;
              if (best < 0 || pool_vec::TakesMax(xp[off], xp[best])) best = off;
            }
          if (best >= 0 && (!kRelu || xp[best] > T(0))) dp[best] += yr[ow];
        }
      }
    }
  });
}

// 2-D windows (1-D pools: H = 1) that overlap or are padded, without dilation -- ResNet's 3x3 stride-2 stem pool
// with pads 1. Per output row, the argmax of every window whose columns lie inside the input is found for the whole
// row at once, a branchless select over offsets (vectorizes: strided loads; windows overlap, so each keeps the
// offset of its maximum rather than a tap code), scanning the taps in window order (rows, then columns: the first
// maximum wins); windows clipped by the pads or the input's edge take the scalar scan. dY is then added at each
// window's argmax in window order -- the left edge's windows, the inside ones, the right edge's -- so elements
// shared by overlapping windows sum their dY in the order the gathered-window path adds them. kRelu: a window's dY
// goes to its argmax only where the maximum is > 0.
// One tap of a row of windows: window ow's tap sits at offset base + ow * s2 of the plane; it becomes the window's
// maximum (value and offset) where it beats the one so far (pool_vec::TakesMax: the first maximum wins, a NaN
// stays). Stride 2 and 1 at compile time (they vectorize as shuffles of contiguous loads; other strides as gathers).
template <typename T, typename Off>
OT_VEC_CLONES void ArgmaxTap(const T* __restrict xp, Off base, int64_t s2, int64_t lo, int64_t hi, T* __restrict bv,
                             Off* __restrict bo) {
  auto run = [&](auto stride) {
    for (int64_t ow = lo; ow < hi; ++ow) {
      const Off o = base + static_cast<Off>(ow * stride);
      const T v = xp[o], b = bv[ow];
      const bool take = pool_vec::TakesMax(v, b);
      bv[ow] = take ? v : b;
      bo[ow] = take ? o : bo[ow];
    }
  };
  if (s2 == 2)
    run(std::integral_constant<int64_t, 2>());
  else if (s2 == 1)
    run(std::integral_constant<int64_t, 1>());
  else
    run(s2);
}

template <typename T, bool kRelu>
void MaxPoolGrad2DWindows(int64_t planes, int64_t H, int64_t W, int64_t OH, int64_t OW, int64_t k1, int64_t k2,
                          int64_t s1, int64_t s2, int64_t p1, int64_t p2, const T* dy, const T* x, T* dx) {
  using Off = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;  // as wide as T: a plain vector select
  const int64_t in_sz = H * W, out_sz = OH * OW;
  // The windows [ow * s2 - p2, ow * s2 - p2 + k2) that lie inside [0, W): ow in [ow_lo, ow_hi).
  const int64_t ow_lo = std::min(OW, (p2 + s2 - 1) / s2);
  const int64_t ow_hi = std::max(ow_lo, W - k2 + p2 >= 0 ? std::min(OW, (W - k2 + p2) / s2 + 1) : int64_t{0});
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, planes, 1), [&](const tbb::blocked_range<int64_t>& r) {
    std::vector<T> best_v(static_cast<size_t>(std::max<int64_t>(OW, 1)));
    std::vector<Off> best_o(best_v.size());
    for (int64_t plane = r.begin(); plane < r.end(); ++plane) {
      const T* __restrict xp = x + plane * in_sz;
      const T* __restrict yp = dy + plane * out_sz;
      T* __restrict dp = dx + plane * in_sz;
      T* __restrict bv = best_v.data();
      Off* __restrict bo = best_o.data();
      for (int64_t i = 0; i < in_sz; ++i) dp[i] = T(0);
      for (int64_t oh = 0; oh < OH; ++oh) {
        const int64_t r0 = oh * s1 - p1, ih_lo = std::max<int64_t>(r0, 0), ih_hi = std::min(r0 + k1, H);
        if (ih_lo >= ih_hi) continue;  // a window of pads only: no element, no gradient
        const T* __restrict yr = yp + oh * OW;
        auto clipped = [&](int64_t ow) {
          const int64_t c0 = ow * s2 - p2, c_lo = std::max<int64_t>(c0, 0), c_hi = std::min(c0 + k2, W);
          int64_t best = -1;
          for (int64_t ih = ih_lo; ih < ih_hi; ++ih)
            for (int64_t iw = c_lo; iw < c_hi; ++iw) {
              const int64_t off = ih * W + iw;
              if (best < 0 || pool_vec::TakesMax(xp[off], xp[best])) best = off;
            }
          if (best >= 0 && (!kRelu || xp[best] > T(0))) dp[best] += yr[ow];
        };
        for (int64_t ow = 0; ow < ow_lo; ++ow) clipped(ow);
        if (ow_lo < ow_hi) {
          {
            const Off base = static_cast<Off>(ih_lo * W - p2);
            for (int64_t ow = ow_lo; ow < ow_hi; ++ow) {
              const Off o = base + static_cast<Off>(ow * s2);
              bv[ow] = xp[o];
              bo[ow] = o;
            }
          }
          for (int64_t ih = ih_lo; ih < ih_hi; ++ih)
            for (int64_t kw = ih == ih_lo ? 1 : 0; kw < k2; ++kw)
              ArgmaxTap<T, Off>(xp, static_cast<Off>(ih * W - p2 + kw), s2, ow_lo, ow_hi, bv, bo);
          for (int64_t ow = ow_lo; ow < ow_hi; ++ow)
            if (!kRelu || bv[ow] > T(0)) dp[bo[ow]] += yr[ow];
        }
        for (int64_t ow = ow_hi; ow < OW; ++ow) clipped(ow);
      }
    }
  });
}

// MaxPoolGrad without pads or dilations, windows that may overlap or 3-D: the same windows in the same order as
// ForEachWindow (clipped at the input's end, as with ceil_mode), scanned in place instead of gathered into a
// vector per window (which took ~50 ns a window). Overlapping windows accumulate in window order.
template <typename T, bool kRelu>
void MaxPoolGradDense(const PoolSpec& spec, const T* dy, const T* x, T* dx) {
  const auto in = Pad3(spec.in_spatial, 1), out = Pad3(spec.out_spatial, 1), k = Pad3(spec.kernel, 1);
  const auto st = Pad3(spec.strides, 1);
  if (in[0] == 1 && out[0] == 1 && st[1] >= k[1] && st[2] >= k[2]) {
    const int64_t planes = spec.n * spec.c;
    if (k[2] == 2 && st[2] == 2)
      return MaxPoolGrad2DTiled<T, 2, 2, kRelu>(planes, in[1], in[2], out[1], out[2], k[1], k[2], st[1], st[2], dy, x,
                                                dx);
    if (k[2] == 3 && st[2] == 3)
      return MaxPoolGrad2DTiled<T, 3, 3, kRelu>(planes, in[1], in[2], out[1], out[2], k[1], k[2], st[1], st[2], dy, x,
                                                dx);
    return MaxPoolGrad2DTiled<T, 0, 0, kRelu>(planes, in[1], in[2], out[1], out[2], k[1], k[2], st[1], st[2], dy, x,
                                              dx);
  }
  const int64_t in_sz = in[0] * in[1] * in[2], out_sz = out[0] * out[1] * out[2];
  tbb::parallel_for(int64_t{0}, spec.n * spec.c, [&](int64_t plane) {
    T* __restrict dp = dx + plane * in_sz;
    const T* __restrict xp = x + plane * in_sz;
    const T* __restrict yp = dy + plane * out_sz;
    for (int64_t i = 0; i < in_sz; ++i) dp[i] = T(0);
    for (int64_t od = 0; od < out[0]; ++od)
      for (int64_t oh = 0; oh < out[1]; ++oh)
        for (int64_t ow = 0; ow < out[2]; ++ow) {
          int64_t best = -1;
          for (int64_t id = od * st[0]; id < std::min(od * st[0] + k[0], in[0]); ++id)
            for (int64_t ih = oh * st[1]; ih < std::min(oh * st[1] + k[1], in[1]); ++ih)
              for (int64_t iw = ow * st[2]; iw < std::min(ow * st[2] + k[2], in[2]); ++iw) {
                const int64_t off = (id * in[1] + ih) * in[2] + iw;
                if (best < 0 || pool_vec::TakesMax(xp[off], xp[best])) best = off;
              }
          if (best >= 0 && (!kRelu || xp[best] > T(0))) dp[best] += yp[(od * out[1] + oh) * out[2] + ow];
        }
  });
}

}  // namespace

template <typename T>
void MaxPoolGrad(const PoolSpec& spec, const T* dy, const T* x, T* dx, bool relu) {
  bool dense = true;
  for (size_t i = 0; i < spec.kernel.size(); ++i)
    dense =
        dense && spec.pad_begin[i] == 0 && spec.pad_end[i] == 0 && (spec.dilations.empty() || spec.dilations[i] == 1);
  const size_t rank = spec.kernel.size();
  bool undilated = true;
  for (size_t i = 0; i < rank; ++i) undilated = undilated && (spec.dilations.empty() || spec.dilations[i] == 1);
  // 2-D (or 1-D) windows that overlap or are padded: the row-wise argmax. Disjoint unpadded ones: the tiled path.
  const bool disjoint = dense && spec.strides.back() >= spec.kernel.back() && spec.strides[0] >= spec.kernel[0];
  if (undilated && rank <= 2 && !disjoint) {
    const bool two = rank == 2;
    const int64_t H = two ? spec.in_spatial[0] : 1, W = spec.in_spatial.back();
    const int64_t OH = two ? spec.out_spatial[0] : 1, OW = spec.out_spatial.back();
    const int64_t k1 = two ? spec.kernel[0] : 1, s1 = two ? spec.strides[0] : 1, p1 = two ? spec.pad_begin[0] : 0;
    const int64_t k2 = spec.kernel.back(), s2 = spec.strides.back(), p2 = spec.pad_begin.back();
    if (H * W < (int64_t{1} << 31)) {
      if (relu)
        MaxPoolGrad2DWindows<T, true>(spec.n * spec.c, H, W, OH, OW, k1, k2, s1, s2, p1, p2, dy, x, dx);
      else
        MaxPoolGrad2DWindows<T, false>(spec.n * spec.c, H, W, OH, OW, k1, k2, s1, s2, p1, p2, dy, x, dx);
      return;
    }
  }
  if (dense) return relu ? MaxPoolGradDense<T, true>(spec, dy, x, dx) : MaxPoolGradDense<T, false>(spec, dy, x, dx);
  ForEachWindow(spec, dx, [&](int64_t, int64_t yo, int64_t xbase, const std::vector<int64_t>& win, int64_t, T* dp) {
    const T* xp = x + xbase;
    int64_t best = -1;
    for (int64_t off : win) {
      const T v = xp[off];
      // The first maximum wins; a NaN, once met, stays (as the forward picks it).
      if (best < 0 || v > xp[best] || (v != v && !(xp[best] != xp[best]))) best = off;
    }
    if (best >= 0 && (!relu || xp[best] > T(0))) dp[best] += dy[yo];
  });
}

template <typename T>
void AvgPoolGrad(const PoolSpec& spec, const T* dy, T* dx) {
  ForEachWindow(spec, dx, [&](int64_t, int64_t yo, int64_t, const std::vector<int64_t>& win, int64_t count_pad, T* dp) {
    const int64_t cnt = spec.count_include_pad ? count_pad : static_cast<int64_t>(win.size());
    if (cnt == 0) return;
    const T g = dy[yo] / static_cast<T>(cnt);
    for (int64_t off : win) dp[off] += g;
  });
}

template void MaxPoolGrad<float>(const PoolSpec&, const float*, const float*, float*, bool);
template void MaxPoolGrad<double>(const PoolSpec&, const double*, const double*, double*, bool);
template void AvgPoolGrad<float>(const PoolSpec&, const float*, float*);
template void AvgPoolGrad<double>(const PoolSpec&, const double*, double*);

}  // namespace ot::cpu
