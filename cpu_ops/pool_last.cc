// Max and average pooling over channels-last activations, [N, spatial..., C] (cpu_ops/pool.h's PoolLast and
// pool_grad.h's *Last): per output position, the window's taps in window order (rows, then columns), each tap one
// loop along the channels (contiguous, vectorized). The same semantics as the NCHW kernels: max takes a NaN and
// keeps it, a window with no input element gives the lowest value (avg: 0); the gradient goes to each channel's first
// maximum (a NaN once met), average windows divide by the window clipped to the input (or to the padded input with
// count_include_pad). Tasks own one image and a block of channels: deterministic, every dX element written by one.
#include <tbb/blocked_range2d.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "cpu_ops/dims.h"
#include "cpu_ops/half_convert.h"
#include "cpu_ops/pool.h"
#include "cpu_ops/pool_grad.h"
#include "kernel_common/half.h"
#include "kernel_common/vec_math.h"

namespace ot::cpu {

namespace {

constexpr int64_t kChannelBlock = 64;

// The geometry padded to 3-D.
struct Geo {
  std::vector<int64_t> in, out, k, st, dl, pb, pe;
  int64_t in_sz, out_sz;
  explicit Geo(const PoolSpec& s)
      : in(Pad3(s.in_spatial, 1)),
        out(Pad3(s.out_spatial, 1)),
        k(Pad3(s.kernel, 1)),
        st(Pad3(s.strides, 1)),
        dl(Pad3(s.dilations, 1)),
        pb(Pad3(s.pad_begin, 0)),
        pe(Pad3(s.pad_end, 0)),
        in_sz(in[0] * in[1] * in[2]),
        out_sz(out[0] * out[1] * out[2]) {}
  // The input positions of output position o's window that lie inside the input, in window order, into `taps`;
  // returns the window's size within the padded input (count_include_pad's divisor).
  int64_t Taps(int64_t o, std::vector<int64_t>& taps) const {
    taps.clear();
    const int64_t od = o / (out[1] * out[2]), oh = (o / out[2]) % out[1], ow = o % out[2];
    return ForEachPoolTap(in, k, st, dl, pb, pe, od, oh, ow, [&](int64_t i) { taps.push_back(i); });
  }
};

// Over every (image, block of channels): f(n, c0, c1).
template <typename F>
void ForImageChannels(int64_t n, int64_t c, F&& f) {
  tbb::parallel_for(tbb::blocked_range2d<int64_t>(0, n, 1, 0, c, kChannelBlock),
                    [&](const tbb::blocked_range2d<int64_t>& r) {
                      for (int64_t i = r.rows().begin(); i != r.rows().end(); ++i)
                        f(i, r.cols().begin(), r.cols().end());
                    });
}

template <typename T>
using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename T>
inline Acc<T> Get(const T& v) {
  return static_cast<Acc<T>>(v);
}

template <typename T>
OT_VEC_CLONES void MaxTap(const T* __restrict x, Acc<T>* __restrict a, int64_t len) {
  for (int64_t j = 0; j < len; ++j) {
    const Acc<T> v = Get(x[j]);
    a[j] = (v > a[j] || v != v) ? v : a[j];  // a NaN, once taken, stays
  }
}

template <typename T>
OT_VEC_CLONES void SumTap(const T* __restrict x, Acc<T>* __restrict a, int64_t len) {
  for (int64_t j = 0; j < len; ++j) a[j] += Get(x[j]);
}

// One tap of a window for every channel: where x beats the maximum so far (TakesMax's rule: greater, or a NaN over a
// number), it and its input position become the new maximum. Selects only: the loop vectorizes.
template <typename T>
OT_VEC_CLONES void ArgmaxTap(const T* __restrict x, int64_t at, T* __restrict bv, int64_t* __restrict best,
                             int64_t len) {
  for (int64_t j = 0; j < len; ++j) {
    const T v = x[j], b = bv[j];
    const bool take = (v > b) | ((v != v) & (b == b));
    bv[j] = take ? v : b;
    best[j] = take ? at : best[j];
  }
}

}  // namespace

template <typename T>
void PoolLast(const PoolSpec& spec, const T* x, T* y) {
  const Geo g(spec);
  const int64_t C = spec.c;
  const bool max = spec.kind == PoolKind::kMax;
  ForImageChannels(spec.n, C, [&](int64_t n, int64_t c0, int64_t c1) {
    const int64_t len = c1 - c0;
    std::vector<Acc<T>> acc(static_cast<size_t>(len));
    std::vector<int64_t> taps;
    const T* xi = x + n * g.in_sz * C + c0;
    T* yi = y + n * g.out_sz * C + c0;
    for (int64_t o = 0; o < g.out_sz; ++o) {
      const int64_t count_pad = g.Taps(o, taps);
      std::fill(acc.begin(), acc.end(), max ? -std::numeric_limits<Acc<T>>::infinity() : Acc<T>(0));
      for (int64_t t : taps) {
        if (max)
          MaxTap(xi + t * C, acc.data(), len);
        else
          SumTap(xi + t * C, acc.data(), len);
      }
      T* yo = yi + o * C;
      if (max) {
        for (int64_t j = 0; j < len; ++j) yo[j] = static_cast<T>(acc[j]);
      } else {
        const int64_t cnt = spec.count_include_pad ? count_pad : static_cast<int64_t>(taps.size());
        for (int64_t j = 0; j < len; ++j) yo[j] = static_cast<T>(cnt ? acc[j] / static_cast<Acc<T>>(cnt) : Acc<T>(0));
      }
    }
  });
}

template <typename T>
void MaxPoolGradLast(const PoolSpec& spec, const T* dy, const T* x, T* dx, bool relu) {
  using A = Acc<T>;
  constexpr bool kHalf = std::is_same_v<T, float16> || std::is_same_v<T, bfloat16>;
  const Geo g(spec);
  const int64_t C = spec.c;
  ForImageChannels(spec.n, C, [&](int64_t n, int64_t c0, int64_t c1) {
    const int64_t len = c1 - c0;
    const T* xi = x + n * g.in_sz * C;
    T* di = dx + n * g.in_sz * C;
    // Half types: the window values widened (exact: the same argmax), dX summed in float here and rounded once.
    std::vector<A> sums(kHalf ? static_cast<size_t>(g.in_sz * len) : 0), xw(kHalf ? static_cast<size_t>(len) : 0),
        gw(kHalf ? static_cast<size_t>(len) : 0);
    auto dx_at = [&](int64_t p) -> A* {
      if constexpr (kHalf)
        return sums.data() + p * len;
      else
        return di + p * C + c0;
    };
    auto x_at = [&](int64_t p) -> const A* {
      if constexpr (kHalf) {
        LoadFloats(xi + p * C + c0, xw.data(), len);
        return xw.data();
      } else {
        return xi + p * C + c0;
      }
    };
    for (int64_t p = 0; p < g.in_sz; ++p) std::fill(dx_at(p), dx_at(p) + len, A(0));
    std::vector<int64_t> taps, best(static_cast<size_t>(len));
    std::vector<A> bv(static_cast<size_t>(len));
    for (int64_t o = 0; o < g.out_sz; ++o) {
      g.Taps(o, taps);
      if (taps.empty()) continue;
      std::fill(best.begin(), best.end(), taps[0]);
      const A* first = x_at(taps[0]);
      std::copy(first, first + len, bv.begin());
      // The first maximum wins; a NaN, once met, stays (as the forward picks it).
      for (size_t q = 1; q < taps.size(); ++q) ArgmaxTap(x_at(taps[q]), taps[q], bv.data(), best.data(), len);
      const T* go = dy + (n * g.out_sz + o) * C + c0;
      const A* gv;
      if constexpr (kHalf) {
        LoadFloats(go, gw.data(), len);
        gv = gw.data();
      } else {
        gv = go;
      }
      for (int64_t j = 0; j < len; ++j)
        if (!relu || bv[j] > A(0)) dx_at(best[j])[j] += gv[j];  // bv[j]: X at the argmax
    }
    if constexpr (kHalf)
      for (int64_t p = 0; p < g.in_sz; ++p) StoreFloats(dx_at(p), di + p * C + c0, len);
  });
}

template <typename T>
void AvgPoolGradLast(const PoolSpec& spec, const T* dy, T* dx) {
  const Geo g(spec);
  const int64_t C = spec.c;
  ForImageChannels(spec.n, C, [&](int64_t n, int64_t c0, int64_t c1) {
    const int64_t len = c1 - c0;
    T* di = dx + n * g.in_sz * C + c0;
    for (int64_t p = 0; p < g.in_sz; ++p) std::fill(di + p * C, di + p * C + len, T(0));
    std::vector<int64_t> taps;
    std::vector<T> gv(static_cast<size_t>(len));
    for (int64_t o = 0; o < g.out_sz; ++o) {
      const int64_t count_pad = g.Taps(o, taps);
      const int64_t cnt = spec.count_include_pad ? count_pad : static_cast<int64_t>(taps.size());
      if (cnt == 0) continue;
      const T* go = dy + (n * g.out_sz + o) * C + c0;
      for (int64_t j = 0; j < len; ++j) gv[j] = go[j] / static_cast<T>(cnt);
      for (int64_t t : taps) {
        T* d = di + t * C;
        for (int64_t j = 0; j < len; ++j) d[j] += gv[j];
      }
    }
  });
}

template void PoolLast<float>(const PoolSpec&, const float*, float*);
template void PoolLast<double>(const PoolSpec&, const double*, double*);
template void PoolLast<float16>(const PoolSpec&, const float16*, float16*);
template void PoolLast<bfloat16>(const PoolSpec&, const bfloat16*, bfloat16*);
template void MaxPoolGradLast<float>(const PoolSpec&, const float*, const float*, float*, bool);
template void MaxPoolGradLast<double>(const PoolSpec&, const double*, const double*, double*, bool);
template void MaxPoolGradLast<float16>(const PoolSpec&, const float16*, const float16*, float16*, bool);
template void MaxPoolGradLast<bfloat16>(const PoolSpec&, const bfloat16*, const bfloat16*, bfloat16*, bool);
template void AvgPoolGradLast<float>(const PoolSpec&, const float*, float*);
template void AvgPoolGradLast<double>(const PoolSpec&, const double*, double*);

}  // namespace ot::cpu
