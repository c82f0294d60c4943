#include "cpu_ops/pool.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "cpu_ops/dims.h"
#include "cpu_ops/half_convert.h"
#include "cpu_ops/pool_vec.h"
#include "cpu_ops/row_sum.h"
#include "kernel_common/half.h"
#include "kernel_common/vec_math.h"

namespace ot::cpu {

namespace {

template <typename T>
struct Compute {
  using type =
      std::conditional_t<std::is_same_v<T, double>, double, std::conditional_t<std::is_integral_v<T>, T, float>>;
};

// Max and average pooling without dilation or indices (what models use): each window is clipped to the input
// once, per dim, so the inner loop has no bounds checks and no per-element branch on the pool kind.
template <typename T, PoolKind kKind>
void PoolDense(const PoolSpec& spec, const T* x, T* y) {
  using C = typename Compute<T>::type;
  const auto in = Pad3(spec.in_spatial, 1), out = Pad3(spec.out_spatial, 1), k = Pad3(spec.kernel, 1);
  const auto st = Pad3(spec.strides, 1), pb = Pad3(spec.pad_begin, 0), pe = Pad3(spec.pad_end, 0);
  const int64_t in_sz = in[0] * in[1] * in[2], out_sz = out[0] * out[1] * out[2];
  // Per dim and output index: the window clipped to the input [lo, hi) and its size within the padded input.
  struct Range {
    int64_t lo, hi, padded;
  };
  std::vector<Range> ranges[3];
  for (int d = 0; d < 3; ++d)
    for (int64_t o = 0; o < out[d]; ++o) {
      const int64_t s = o * st[d] - pb[d];
      const int64_t e = std::min(s + k[d], in[d] + pe[d]);
      ranges[d].push_back({std::max<int64_t>(s, 0), std::min(e, in[d]), e - s});
    }
  // For each kernel column kw, the output columns whose input column ow*stride - pad + kw lies in the input:
  // the inner loop runs over those with no bounds check (and vectorises).
  std::vector<std::pair<int64_t, int64_t>> ow_valid(k[2]);
  for (int64_t kw = 0; kw < k[2]; ++kw) {
    int64_t lo = 0, hi = 0;
    for (int64_t ow = 0; ow < out[2]; ++ow) {
      const int64_t iw = ow * st[2] - pb[2] + kw;
      const bool in_window = iw < ranges[2][ow].hi && iw >= ranges[2][ow].lo;
      if (in_window && hi == lo)
        lo = ow, hi = ow + 1;
      else if (in_window)
        hi = ow + 1;
    }
    ow_valid[kw] = {lo, hi};
  }
  tbb::parallel_for(int64_t{0}, spec.n * spec.c, [&](int64_t plane) {
    const T* xp = x + plane * in_sz;
    T* yp = y + plane * out_sz;
    std::vector<C> acc(out[2]);
    for (int64_t od = 0; od < out[0]; ++od) {
      const Range rd = ranges[0][od];
      for (int64_t oh = 0; oh < out[1]; ++oh) {
        const Range rh = ranges[1][oh];
        C init;
        if constexpr (kKind != PoolKind::kMax)
          init = 0;
        else if constexpr (std::is_integral_v<C>)
          init = std::numeric_limits<C>::lowest();
        else
          init = -std::numeric_limits<C>::infinity();
        std::fill(acc.begin(), acc.end(), init);
        for (int64_t id = rd.lo; id < rd.hi; ++id)
          for (int64_t ih = rh.lo; ih < rh.hi; ++ih) {
            const T* row = xp + (id * in[1] + ih) * in[2];
            for (int64_t kw = 0; kw < k[2]; ++kw) {
              const T* base = row + kw - pb[2];
              const int64_t s = st[2];
              C* a = acc.data();
              for (int64_t ow = ow_valid[kw].first; ow < ow_valid[kw].second; ++ow) {
                const C v = static_cast<C>(base[ow * s]);
                // Max: a NaN, once taken, stays (every comparison with it is false).
                if constexpr (kKind == PoolKind::kMax)
                  a[ow] = (v > a[ow] || v != v) ? v : a[ow];
                else
                  a[ow] += v;
              }
            }
          }
        T* yrow = yp + (od * out[1] + oh) * out[2];
        for (int64_t ow = 0; ow < out[2]; ++ow) {
          if constexpr (kKind == PoolKind::kMax) {
            yrow[ow] = static_cast<T>(acc[ow]);
          } else {
            const Range rw = ranges[2][ow];
            const int64_t cnt = spec.count_include_pad ? rd.padded * rh.padded * rw.padded
                                                       : (rd.hi - rd.lo) * (rh.hi - rh.lo) * (rw.hi - rw.lo);
            yrow[ow] = static_cast<T>(cnt > 0 ? acc[ow] / static_cast<C>(cnt) : C(0));
          }
        }
      }
    }
  });
}

using pool_vec::TakesMax;

// y[ow] = the maximum of the K taps x[ow K .. ow K + K) (kFirst), or of y[ow] followed by those taps: one input row
// of a band of windows that do not overlap along the row. Taps in window order, so the value is the scalar scan's.
template <typename T, int K, bool kFirst>
void MaxRowTapsScalar(const T* __restrict x, T* __restrict y, int64_t n) {
  for (int64_t ow = 0; ow < n; ++ow) {
    T b = kFirst ? x[ow * K] : y[ow];
    for (int kw = kFirst ? 1 : 0; kw < K; ++kw) {
      const T v = x[ow * K + kw];
      b = TakesMax(v, b) ? v : b;
    }
    y[ow] = b;
  }
}

// The same for K = 2 on 32-byte vectors (GCC's generic vectors: AVX2 in the x86-64-v3 clone, two SSE halves in the
// baseline): two loads hold the taps of L windows, even/odd shuffles split them, and TakesMax, written out on
// vectors, becomes compares and a blend. GCC does not vectorize the scalar loop (it keeps the NaN test a branch).
template <typename T, bool kFirst>
OT_VEC_CLONES void MaxRowTaps2(const T* __restrict x, T* __restrict y, int64_t n) {
  constexpr int L = 32 / sizeof(T);
  typedef T V __attribute__((vector_size(32)));
  int64_t ow = 0;
  for (; ow + L <= n; ow += L) {
    V a0, a1, b;
    __builtin_memcpy(&a0, x + 2 * ow, sizeof(V));
    __builtin_memcpy(&a1, x + 2 * ow + L, sizeof(V));
    V e, o;  // the even and the odd taps
    pool_vec::SplitEvenOdd(a0, a1, e, o);
    if constexpr (kFirst) {
      b = e;
    } else {
      __builtin_memcpy(&b, y + ow, sizeof(V));
      b = ((e > b) | ((e != e) & (b == b))) ? e : b;
    }
    b = ((o > b) | ((o != o) & (b == b))) ? o : b;
    __builtin_memcpy(y + ow, &b, sizeof(V));
  }
  MaxRowTapsScalar<T, 2, kFirst>(x + 2 * ow, y + ow, n - ow);
}

template <typename T, int K, bool kFirst>
void MaxRowTaps(const T* x, T* y, int64_t n) {
  if constexpr (K == 2)
    MaxRowTaps2<T, kFirst>(x, y, n);
  else
    MaxRowTapsScalar<T, K, kFirst>(x, y, n);
}

// 2-D (or 1-D) max pooling whose windows tile each row (column stride = kernel width K, every window inside the
// row, no pads or dilations; rows may overlap, and a band may be clipped at the bottom, as with ceil_mode): per
// output row, the first input row of its band sets the maxima and each further row folds in. The windowed path read
// the taps with a runtime stride, one window row at a time (the CNN's 2x2 pools ran at 4 GB/s).
template <typename T, int K>
void MaxPoolRows(int64_t planes, int64_t H, int64_t W, int64_t OH, int64_t OW, int64_t k1, int64_t s1, const T* x,
                 T* y) {
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(H * W, 1));
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, planes, grain), [&](const tbb::blocked_range<int64_t>& r) {
    for (int64_t p = r.begin(); p < r.end(); ++p)
      for (int64_t oh = 0; oh < OH; ++oh) {
        const int64_t ih0 = oh * s1, ih1 = std::min(ih0 + k1, H);
        T* yr = y + (p * OH + oh) * OW;
        MaxRowTaps<T, K, true>(x + (p * H + ih0) * W, yr, OW);
        for (int64_t ih = ih0 + 1; ih < ih1; ++ih) MaxRowTaps<T, K, false>(x + (p * H + ih) * W, yr, OW);
      }
  });
}

// Global average pooling (the window is the whole plane, no pads): the mean of each contiguous plane, summed in
// double in RowSum's fixed order (four interleaved lanes; half planes widened to float a tile at a time, which keeps
// the lanes' order since the tile is a multiple of four), four planes at a time interleaved so that short planes
// are not one latency-bound chain each. The windowed path walked a 16x16 plane as 256 dependent float adds.
template <typename T>
void PoolGlobalAvg(int64_t planes, int64_t plane_sz, const T* x, T* y) {
  const double inv = 1.0 / static_cast<double>(plane_sz);
  const int64_t grain = std::max<int64_t>(4, (32768 / std::max<int64_t>(plane_sz, 1)) / 4 * 4);
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, planes, grain), [&](const tbb::blocked_range<int64_t>& r) {
    int64_t p = r.begin();
    if constexpr (std::is_same_v<T, float>) {
      double s[4];
      for (; p + 4 <= r.end(); p += 4) {
        RowSumsInterleaved<4>(x + p * plane_sz, plane_sz, plane_sz, s);
        for (int q = 0; q < 4; ++q) y[p + q] = static_cast<T>(s[q] * inv);
      }
      for (; p < r.end(); ++p) y[p] = static_cast<T>(RowSum(x + p * plane_sz, plane_sz) * inv);
    } else if constexpr (std::is_same_v<T, double>) {
      for (; p < r.end(); ++p) {
        const double* xp = x + p * plane_sz;
        double lane[4] = {0, 0, 0, 0}, tail = 0;
        int64_t j = 0;
        for (; j + 4 <= plane_sz; j += 4)
          for (int k = 0; k < 4; ++k) lane[k] += xp[j + k];
        for (; j < plane_sz; ++j) tail += xp[j];
        y[p] = (((lane[0] + lane[1]) + (lane[2] + lane[3])) + tail) * inv;
      }
    } else {
      float buf[kHalfTile];
      for (; p < r.end(); ++p) {
        RowSum4 s;
        for (int64_t j = 0; j < plane_sz; j += kHalfTile) {
          const int64_t m = std::min<int64_t>(kHalfTile, plane_sz - j);
          LoadFloats(x + p * plane_sz + j, buf, m);
          s.Add(buf, m);
        }
        y[p] = static_cast<T>(static_cast<float>(s.Total() * inv));
      }
    }
  });
}

}  // namespace

template <typename T>
void Pool(const PoolSpec& spec, const T* x, T* y, int64_t* indices) {
  using C = typename Compute<T>::type;
  bool global = spec.kind == PoolKind::kAvg && !std::is_integral_v<C>;
  for (size_t d = 0; d < spec.in_spatial.size(); ++d)
    global = global && spec.kernel[d] == spec.in_spatial[d] && spec.out_spatial[d] == 1 && spec.pad_begin[d] == 0 &&
             spec.pad_end[d] == 0 && (spec.dilations.empty() || spec.dilations[d] == 1);
  if constexpr (!std::is_integral_v<C>) {
    if (global) {
      int64_t plane_sz = 1;
      for (int64_t d : spec.in_spatial) plane_sz *= d;
      if (plane_sz > 0) return PoolGlobalAvg<T>(spec.n * spec.c, plane_sz, x, y);
    }
  }
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    const auto in = Pad3(spec.in_spatial, 1), out = Pad3(spec.out_spatial, 1), k = Pad3(spec.kernel, 1);
    const auto st = Pad3(spec.strides, 1), pb = Pad3(spec.pad_begin, 0), pe = Pad3(spec.pad_end, 0);
    bool rows = spec.kind == PoolKind::kMax && !indices && in[0] == 1 && out[0] == 1 && k[2] == st[2] &&
                (k[2] == 2 || k[2] == 3) && out[2] * k[2] <= in[2] && out[1] >= 1 && (out[1] - 1) * st[1] < in[1];
    for (int d = 0; d < 3; ++d) rows = rows && pb[d] == 0 && pe[d] == 0;
    for (int64_t d : spec.dilations) rows = rows && d == 1;
    if (rows && out[2] > 0) {
      const int64_t planes = spec.n * spec.c;
      if (k[2] == 2) return MaxPoolRows<T, 2>(planes, in[1], in[2], out[1], out[2], k[1], st[1], x, y);
      return MaxPoolRows<T, 3>(planes, in[1], in[2], out[1], out[2], k[1], st[1], x, y);
    }
  }
  bool dense = !indices && spec.kind != PoolKind::kLp;
  for (int64_t d : spec.dilations) dense &= d == 1;
  if (dense && !std::is_integral_v<C>) {
    if (spec.kind == PoolKind::kMax)
      PoolDense<T, PoolKind::kMax>(spec, x, y);
    else
      PoolDense<T, PoolKind::kAvg>(spec, x, y);
    return;
  }
  const int rank = static_cast<int>(spec.in_spatial.size());
  const auto in = Pad3(spec.in_spatial, 1), out = Pad3(spec.out_spatial, 1), k = Pad3(spec.kernel, 1);
  const auto st = Pad3(spec.strides, 1), dl = Pad3(spec.dilations, 1), pb = Pad3(spec.pad_begin, 0),
             pe = Pad3(spec.pad_end, 0);
  const int64_t in_sz = in[0] * in[1] * in[2], out_sz = out[0] * out[1] * out[2];
  // Column-major plane offsets for storage_order = 1: the first spatial dim varies fastest.
  std::vector<int64_t> cm_stride(3, 0);
  {
    int64_t s = 1;
    for (int d = 3 - rank; d < 3; ++d) {
      cm_stride[d] = s;
      s *= in[d];
    }
  }
  tbb::parallel_for(int64_t{0}, spec.n * spec.c, [&](int64_t plane) {
    const T* xp = x + plane * in_sz;
    T* yp = y + plane * out_sz;
    int64_t* ip = indices ? indices + plane * out_sz : nullptr;
    for (int64_t od = 0; od < out[0]; ++od)
      for (int64_t oh = 0; oh < out[1]; ++oh)
        for (int64_t ow = 0; ow < out[2]; ++ow) {
          const int64_t o = (od * out[1] + oh) * out[2] + ow;
          C best = std::numeric_limits<C>::lowest();
          if constexpr (!std::is_integral_v<C>) best = -std::numeric_limits<C>::infinity();
          int64_t best_idx = -1;
          double sum = 0;
          int64_t count_in = 0;
          const int64_t count_pad = ForEachPoolTap(in, k, st, dl, pb, pe, od, oh, ow, [&](int64_t off) {
            ++count_in;
            const C v = static_cast<C>(xp[off]);
            if (spec.kind == PoolKind::kMax) {
              // The first maximum wins; a NaN, once met, stays (it compares false with everything).
              if (best_idx < 0 || v > best || (v != v && !(best != best))) {
                best = v;
                const int64_t id = off / (in[1] * in[2]), ih = (off / in[2]) % in[1], iw = off % in[2];
                best_idx = spec.indices_col_major ? id * cm_stride[0] + ih * cm_stride[1] + iw * cm_stride[2] : off;
              }
            } else if (spec.kind == PoolKind::kAvg) {
              sum += static_cast<double>(v);
            } else {
              const double a = std::fabs(static_cast<double>(v));
              sum += spec.p == 1 ? a : spec.p == 2 ? a * a : std::pow(a, static_cast<double>(spec.p));
            }
          });
          if (spec.kind == PoolKind::kMax) {
            yp[o] = static_cast<T>(best);
            if (ip) ip[o] = best_idx < 0 ? -1 : plane * in_sz + best_idx;
          } else if (spec.kind == PoolKind::kAvg) {
            const int64_t cnt = spec.count_include_pad ? count_pad : count_in;
            yp[o] = static_cast<T>(cnt > 0 ? sum / static_cast<double>(cnt) : 0.0);
          } else {
            const double r = spec.p == 1 ? sum : spec.p == 2 ? std::sqrt(sum) : std::pow(sum, 1.0 / spec.p);
            yp[o] = static_cast<T>(r);
          }
        }
  });
}

template void Pool<float>(const PoolSpec&, const float*, float*, int64_t*);
template void Pool<double>(const PoolSpec&, const double*, double*, int64_t*);
template void Pool<float16>(const PoolSpec&, const float16*, float16*, int64_t*);
template void Pool<bfloat16>(const PoolSpec&, const bfloat16*, bfloat16*, int64_t*);
template void Pool<int8_t>(const PoolSpec&, const int8_t*, int8_t*, int64_t*);
template void Pool<uint8_t>(const PoolSpec&, const uint8_t*, uint8_t*, int64_t*);
template void Pool<int32_t>(const PoolSpec&, const int32_t*, int32_t*, int64_t*);
template void Pool<int64_t>(const PoolSpec&, const int64_t*, int64_t*, int64_t*);

}  // namespace ot::cpu
