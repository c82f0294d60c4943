// Small helpers over dims vectors shared by the convolution, pooling and GEMM kernels.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

namespace ot::cpu {

// Product of the dims (1 for none).
inline int64_t Prod(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

// Row-major strides of dims (a 0-sized dim counts as 1 so strides stay valid).
inline std::vector<int64_t> Contiguous(const std::vector<int64_t>& d) {
  std::vector<int64_t> s(d.size(), 1);
  for (int i = static_cast<int>(d.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * std::max<int64_t>(d[i + 1], 1);
  return s;
}

// Strides of logical dims [N, C, spatial...] stored channels-last, [N, spatial..., C] (NHWC for 2-D): C is the
// innermost axis, then the spatial axes in order, then N.
inline std::vector<int64_t> ChannelsLastStrides(const std::vector<int64_t>& d) {
  std::vector<int64_t> s(d.size(), 1);
  if (d.size() < 2) return Contiguous(d);
  int64_t run = std::max<int64_t>(d[1], 1);  // C: stride 1
  for (int i = static_cast<int>(d.size()) - 1; i >= 2; --i) {
    s[i] = run;
    run *= std::max<int64_t>(d[i], 1);
  }
  s[0] = run;
  return s;
}

// 1-D/2-D/3-D geometry padded to 3 dims with leading `fill`s, so one loop nest serves every rank.
inline std::vector<int64_t> Pad3(const std::vector<int64_t>& v, int64_t fill) {
  std::vector<int64_t> r(3 - v.size(), fill);
  r.insert(r.end(), v.begin(), v.end());
  return r;
}

// For output position (od, oh, ow) of a 3-D (Pad3'ed) pooling window: calls f(i) for every tap inside the input (i
// its flat index within one channel), in window order (depth, rows, columns), and returns the window's size within
// the padded input (count_include_pad's divisor). The walk the pooling kernels and their gradients share.
template <typename F>
inline int64_t ForEachPoolTap(const std::vector<int64_t>& in, const std::vector<int64_t>& k,
                              const std::vector<int64_t>& st, const std::vector<int64_t>& dl,
                              const std::vector<int64_t>& pb, const std::vector<int64_t>& pe, int64_t od, int64_t oh,
                              int64_t ow, F&& f) {
  const int64_t s0 = od * st[0] - pb[0], s1 = oh * st[1] - pb[1], s2 = ow * st[2] - pb[2];
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
        if (vh && iw >= 0 && iw < in[2]) f((id * in[1] + ih) * in[2] + iw);
      }
    }
  }
  return count_pad;
}

// For one kernel tap (kd, kh, kw) of a 3-D (Pad3'ed) convolution window: calls f(o, i) for every output position
// o whose input position i = o*stride - pad_begin + k*dilation lies inside the input (flat indices within one
// channel). The traversal the reference convolution and its two gradients share.
template <typename F>
inline void ForEachConvTap(const std::vector<int64_t>& in, const std::vector<int64_t>& out,
                           const std::vector<int64_t>& st, const std::vector<int64_t>& dl,
                           const std::vector<int64_t>& pb, int64_t kd, int64_t kh, int64_t kw, F&& f) {
  for (int64_t od = 0; od < out[0]; ++od) {
    const int64_t id = od * st[0] - pb[0] + kd * dl[0];
    if (id < 0 || id >= in[0]) continue;
    for (int64_t oh = 0; oh < out[1]; ++oh) {
      const int64_t ih = oh * st[1] - pb[1] + kh * dl[1];
      if (ih < 0 || ih >= in[1]) continue;
      for (int64_t ow = 0; ow < out[2]; ++ow) {
        const int64_t iw = ow * st[2] - pb[2] + kw * dl[2];
        if (iw < 0 || iw >= in[2]) continue;
        f((od * out[1] + oh) * out[2] + ow, (id * in[1] + ih) * in[2] + iw);
      }
    }
  }
}

}  // namespace ot::cpu
