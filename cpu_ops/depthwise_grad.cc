#include "cpu_ops/depthwise_grad.h"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernel_common/vec_math.h"

namespace ot::cpu {

bool DepthwiseGradWeightApplies(const ConvSpec& s) {
  if (s.transpose || s.in_spatial.size() != 2 || s.group < 2 || s.group != s.c_in || s.group != s.c_out) return false;
  for (int64_t d : s.dilations)
    if (d != 1) return false;
  for (int64_t v : s.strides)
    if (v < 1) return false;
  return s.kernel.size() == 2 && s.kernel[0] >= 1 && s.kernel[1] >= 1;
}

namespace {

typedef float V8 __attribute__((vector_size(32)));
constexpr int64_t kLanes = 8;

inline __attribute__((always_inline)) V8 Load(const float* p) {
  V8 v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}

// out[j] += sum over i < len (a multiple of 8) of dy[i] * p[i + j], for j < M: M taps that read the same phase
// plane at consecutive offsets share each load of dY. Eight float lanes per tap, added in double at the end.
template <int M>
inline __attribute__((always_inline)) void Dots(const float* dy, const float* p, int64_t len, double* out) {
  V8 acc[M];
  for (int j = 0; j < M; ++j) acc[j] = V8{};
  for (int64_t i = 0; i < len; i += kLanes) {
    const V8 d = Load(dy + i);
    for (int j = 0; j < M; ++j) acc[j] += d * Load(p + i + j);
  }
  for (int j = 0; j < M; ++j) {
    double s = 0;
    for (int l = 0; l < kLanes; ++l) s += static_cast<double>(acc[j][l]);
    out[j] += s;
  }
}

inline __attribute__((always_inline)) void DotsAny(const float* dy, const float* p, int64_t len, int64_t m,
                                                   double* out) {
  for (; m >= 4; m -= 4, p += 4, out += 4) Dots<4>(dy, p, len, out);
  switch (m) {
    case 3:
      return Dots<3>(dy, p, len, out);
    case 2:
      return Dots<2>(dy, p, len, out);
    case 1:
      return Dots<1>(dy, p, len, out);
    default:
      return;
  }
}

// One channel. Its input plane, zero-padded, is cut into s x s phase planes (phase (a, b) holds the padded rows
// a, a + s, ... and columns b, b + s, ...) of width `we`, and dY is laid out at the same width (zeros past its
// columns): tap (kh, kw) is then one dot product of the flattened dY with phase (kh mod s, kw mod s) shifted by
// (kh / s) rows and (kw / s) columns -- a contiguous run, whatever the stride and the row width.
OT_VEC_CLONES void Channel(const ConvSpec& s, const float* dy, const float* x, int64_t c, float* dw) {
  const int64_t C = s.c_in, ih = s.in_spatial[0], iw = s.in_spatial[1], oh = s.out_spatial[0], ow = s.out_spatial[1];
  const int64_t kh = s.kernel[0], kw = s.kernel[1], sh = s.strides[0], sw = s.strides[1];
  const int64_t ph = s.pad_begin[0], pw = s.pad_begin[1];
  // Rows and columns of the padded plane that some tap reads, as whole phases.
  const int64_t hr = ((oh - 1) * sh + kh + sh - 1) / sh, we = ((ow - 1) * sw + kw + sw - 1) / sw;
  const int64_t len = (oh * we + kLanes - 1) / kLanes * kLanes;      // the flattened dY, padded to whole vectors
  const int64_t plane = hr * we + (kh / sh + 1) * we + kw + kLanes;  // a phase plus what the last taps overread
  std::vector<float> phases(static_cast<size_t>(sh * sw * plane)), dyp(static_cast<size_t>(len));
  std::vector<double> total(static_cast<size_t>(kh * kw), 0.0), got(static_cast<size_t>(kw));
  for (int64_t n = 0; n < s.n; ++n) {
    const float* xp = x + (n * C + c) * ih * iw;
    const float* dyn = dy + (n * C + c) * oh * ow;
    std::fill(phases.begin(), phases.end(), 0.f);
    for (int64_t a = 0; a < sh; ++a)
      for (int64_t r = 0; r < hr; ++r) {
        const int64_t i = r * sh + a - ph;  // the input row of padded row r * sh + a
        if (i < 0 || i >= ih) continue;
        const float* xr = xp + i * iw;
        for (int64_t b = 0; b < sw; ++b) {
          float* dst = phases.data() + (a * sw + b) * plane + r * we;
          for (int64_t q = 0; q < we; ++q) {
            const int64_t j = q * sw + b - pw;
            dst[q] = j >= 0 && j < iw ? xr[j] : 0.f;
          }
        }
      }
    std::fill(dyp.begin(), dyp.end(), 0.f);
    for (int64_t r = 0; r < oh; ++r) std::memcpy(dyp.data() + r * we, dyn + r * ow, static_cast<size_t>(ow) * 4);
    for (int64_t a = 0; a < kh; ++a)
      for (int64_t b = 0; b < sw && b < kw; ++b) {
        // Taps (a, b), (a, b + sw), ...: phase (a mod sh, b), offsets (a / sh) rows and 0, 1, ... columns.
        const float* p = phases.data() + ((a % sh) * sw + b) * plane + (a / sh) * we;
        const int64_t m = (kw - b + sw - 1) / sw;
        std::fill(got.begin(), got.begin() + m, 0.0);
        DotsAny(dyp.data(), p, len, m, got.data());
        for (int64_t t = 0; t < m; ++t) total[static_cast<size_t>(a * kw + b + t * sw)] += got[static_cast<size_t>(t)];
      }
  }
  for (int64_t t = 0; t < kh * kw; ++t) dw[c * kh * kw + t] = static_cast<float>(total[static_cast<size_t>(t)]);
}

}  // namespace

namespace {
// acc[j] += g[j] * x[j] along a block of channels.
OT_VEC_CLONES void DotAlong(const float* __restrict g, const float* __restrict x, float* __restrict acc, int64_t len) {
  for (int64_t j = 0; j < len; ++j) acc[j] += g[j] * x[j];
}
}  // namespace

void DepthwiseConvGradWeightNchw(const ConvSpec& s, const float* dy, const float* x, float* dw) {
  tbb::parallel_for(int64_t{0}, s.c_in, [&](int64_t c) { Channel(s, dy, x, c, dw); });
}

// Channels-last dY [N, OH, OW, C] and X [N, H, W, C]: per block of channels, for every output position and each of
// its taps inside the input, one product along the channels added into that tap's float sums; each image's sums
// added into double totals per (tap, channel) in image order (deterministic for any thread count).
void DepthwiseConvGradWeightLast(const ConvSpec& s, const float* dy, const float* x, float* dw) {
  const int64_t C = s.c_in, H = s.in_spatial[0], W = s.in_spatial[1], OH = s.out_spatial[0], OW = s.out_spatial[1];
  const int64_t KH = s.kernel[0], KW = s.kernel[1], SH = s.strides[0], SW = s.strides[1];
  const int64_t PH = s.pad_begin[0], PW = s.pad_begin[1], taps = KH * KW;
  constexpr int64_t kBlock = 64;
  tbb::parallel_for(int64_t{0}, (C + kBlock - 1) / kBlock, [&](int64_t blk) {
    const int64_t c0 = blk * kBlock, len = std::min(kBlock, C - c0);
    std::vector<double> total(static_cast<size_t>(taps * len), 0.0);
    std::vector<float> acc(static_cast<size_t>(taps * len));
    for (int64_t n = 0; n < s.n; ++n) {
      std::fill(acc.begin(), acc.end(), 0.f);
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          const float* g = dy + ((n * OH + oh) * OW + ow) * C + c0;
          for (int64_t kh = 0; kh < KH; ++kh) {
            const int64_t ih = oh * SH + kh - PH;
            if (ih < 0 || ih >= H) continue;
            for (int64_t kw = 0; kw < KW; ++kw) {
              const int64_t iw = ow * SW + kw - PW;
              if (iw < 0 || iw >= W) continue;
              DotAlong(g, x + ((n * H + ih) * W + iw) * C + c0, acc.data() + (kh * KW + kw) * len, len);
            }
          }
        }
      for (size_t i = 0; i < acc.size(); ++i) total[i] += acc[i];
    }
    for (int64_t j = 0; j < len; ++j)
      for (int64_t t = 0; t < taps; ++t) dw[(c0 + j) * taps + t] = static_cast<float>(total[t * len + j]);
  });
}

void DepthwiseConvGradWeight(const ConvSpec& s, const float* dy, const float* x, float* dw) {
  if (s.channels_last)
    DepthwiseConvGradWeightLast(s, dy, x, dw);
  else
    DepthwiseConvGradWeightNchw(s, dy, x, dw);
}

}  // namespace ot::cpu
