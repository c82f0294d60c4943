#include "cpu_ops/pool_grad.h"
#include "cpu_ops/dims.h"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <vector>

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
          const int64_t s0 = od * st[0] - pb[0], s1 = oh * st[1] - pb[1], s2 = ow * st[2] - pb[2];
          win.clear();
          int64_t count_pad = 0;
          for (int64_t kd = 0; kd < k[0]; ++kd) {
            const int64_t id = s0 + kd * dl[0];
            if (id >= in[0] + pe[0]) break;
            const bool vd = id >= 0 && id < in[0];
            for (int64_t kh = 0; kh < k[1]; ++kh) {
              const int64_t ih = s1 + kh * dl[1];
              if (ih >= in[1] + pe[1]) break;
              const bool vh = vd && ih >= 0 && ih < in[1];
              for (int64_t kw = 0; kw < k[2]; ++kw) {
                const int64_t iw = s2 + kw * dl[2];
                if (iw >= in[2] + pe[2]) break;
                ++count_pad;
                if (!vh || iw < 0 || iw >= in[2]) continue;
                win.push_back((id * in[1] + ih) * in[2] + iw);
              }
            }
          }
          f(plane, plane * out_sz + o, plane * in_sz, win, count_pad, dp);
        }
  });
}

// MaxPoolGrad without pads or dilations (the common case: 2x2 stride 2): the same windows in the same order as
// ForEachWindow (clipped at the input's end, as with ceil_mode), scanned in place instead of gathered into a
// vector per window (which took ~50 ns a window).
template <typename T>
void MaxPoolGradDense(const PoolSpec& spec, const T* dy, const T* x, T* dx) {
  const auto in = Pad3(spec.in_spatial, 1), out = Pad3(spec.out_spatial, 1), k = Pad3(spec.kernel, 1);
  const auto st = Pad3(spec.strides, 1);
  const int64_t in_sz = in[0] * in[1] * in[2], out_sz = out[0] * out[1] * out[2];
  tbb::parallel_for(int64_t{0}, spec.n * spec.c, [&](int64_t plane) {
    T* dp = dx + plane * in_sz;
    const T* xp = x + plane * in_sz;
    const T* yp = dy + plane * out_sz;
    for (int64_t i = 0; i < in_sz; ++i) dp[i] = T(0);
    for (int64_t od = 0; od < out[0]; ++od)
      for (int64_t oh = 0; oh < out[1]; ++oh)
        for (int64_t ow = 0; ow < out[2]; ++ow) {
          int64_t best = -1;
          for (int64_t id = od * st[0]; id < std::min(od * st[0] + k[0], in[0]); ++id)
            for (int64_t ih = oh * st[1]; ih < std::min(oh * st[1] + k[1], in[1]); ++ih)
              for (int64_t iw = ow * st[2]; iw < std::min(ow * st[2] + k[2], in[2]); ++iw) {
                const int64_t off = (id * in[1] + ih) * in[2] + iw;
                const T v = xp[off];
                // The first maximum wins; a NaN, once met, stays (as the forward picks it).
                if (best < 0 || v > xp[best] || (v != v && !(xp[best] != xp[best]))) best = off;
              }
          if (best >= 0) dp[best] += yp[(od * out[1] + oh) * out[2] + ow];
        }
  });
}

}  // namespace

template <typename T>
void MaxPoolGrad(const PoolSpec& spec, const T* dy, const T* x, T* dx) {
  bool dense = true;
  for (size_t i = 0; i < spec.kernel.size(); ++i)
    dense = dense && spec.pad_begin[i] == 0 && spec.pad_end[i] == 0 &&
            (spec.dilations.empty() || spec.dilations[i] == 1);
  if (dense) return MaxPoolGradDense(spec, dy, x, dx);
  ForEachWindow(spec, dx, [&](int64_t, int64_t yo, int64_t xbase, const std::vector<int64_t>& win, int64_t, T* dp) {
    const T* xp = x + xbase;
    int64_t best = -1;
    for (int64_t off : win) {
      const T v = xp[off];
      // The first maximum wins; a NaN, once met, stays (as the forward picks it).
      if (best < 0 || v > xp[best] || (v != v && !(xp[best] != xp[best]))) best = off;
    }
    if (best >= 0) dp[best] += dy[yo];
  });
}

template <typename T>
void AvgPoolGrad(const PoolSpec& spec, const T* dy, T* dx) {
  ForEachWindow(spec, dx, [&](int64_t, int64_t yo, int64_t, const std::vector<int64_t>& win, int64_t count_pad,
                              T* dp) {
    const int64_t cnt = spec.count_include_pad ? count_pad : static_cast<int64_t>(win.size());
    if (cnt == 0) return;
    const T g = dy[yo] / static_cast<T>(cnt);
    for (int64_t off : win) dp[off] += g;
  });
}

template void MaxPoolGrad<float>(const PoolSpec&, const float*, const float*, float*);
template void MaxPoolGrad<double>(const PoolSpec&, const double*, const double*, double*);
template void AvgPoolGrad<float>(const PoolSpec&, const float*, float*);
template void AvgPoolGrad<double>(const PoolSpec&, const double*, double*);

}  // namespace ot::cpu
