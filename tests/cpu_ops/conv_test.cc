// DnnlConv and NaiveConv against a direct double reference: 1-D/2-D/3-D, groups, dilations, strides,
// asymmetric pads, bias; transposed convolution including a negative end pad (output_padding).
#include "cpu_ops/conv.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "cpu_ops/conv_grad.h"
#include "cpu_ops/pointwise_conv.h"
#include "graph/ops/linalg_util.h"
#include "kernel_common/half.h"

namespace ot::cpu {
namespace {

std::vector<float> Rand(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

int64_t Prod(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (auto x : v) p *= x;
  return p;
}

// Direct reference over flattened spatial indices (any rank): for every output and kernel position, the
// input position is out*stride - pad + k*dilation (forward), or the reverse mapping (transposed).
std::vector<double> Reference(const ConvSpec& s, const std::vector<float>& x, const std::vector<float>& w,
                              const std::vector<float>& b) {
  const int r = static_cast<int>(s.kernel.size());
  const int64_t in_sz = Prod(s.in_spatial), out_sz = Prod(s.out_spatial), k_sz = Prod(s.kernel);
  const int64_t g = s.group, icg = s.c_in / g, ocg = s.c_out / g;
  std::vector<double> y(s.n * s.c_out * out_sz, 0.0);
  for (int64_t n = 0; n < s.n; ++n)
    for (int64_t oc = 0; oc < s.c_out; ++oc) {
      const int64_t gi = oc / ocg;
      for (int64_t o = 0; o < out_sz; ++o) y[(n * s.c_out + oc) * out_sz + o] = s.has_bias ? b[oc] : 0.0;
      for (int64_t icl = 0; icl < icg; ++icl)
        for (int64_t kk = 0; kk < k_sz; ++kk) {
          const int64_t ic = gi * icg + icl;
          const double wv = s.transpose ? w[(ic * ocg + oc % ocg) * k_sz + kk] : w[(oc * icg + icl) * k_sz + kk];
          // Iterate over the "small" side: outputs for forward, inputs for transposed.
          const int64_t iter = s.transpose ? in_sz : out_sz;
          for (int64_t p = 0; p < iter; ++p) {
            int64_t rem_p = p, rem_k = kk, other = 0, mul = 1;
            bool ok = true;
            for (int d = r - 1; d >= 0; --d) {
              const auto& pdims = s.transpose ? s.in_spatial : s.out_spatial;
              const auto& odims = s.transpose ? s.out_spatial : s.in_spatial;
              const int64_t pi = rem_p % pdims[d], ki = rem_k % s.kernel[d];
              rem_p /= pdims[d];
              rem_k /= s.kernel[d];
              const int64_t q = pi * s.strides[d] - s.pad_begin[d] + ki * s.dilations[d];
              if (q < 0 || q >= odims[d]) ok = false;
              other += q * mul;
              mul *= odims[d];
            }
            if (!ok) continue;
            if (!s.transpose)
              y[(n * s.c_out + oc) * out_sz + p] += wv * x[(n * s.c_in + ic) * in_sz + other];
            else
              y[(n * s.c_out + oc) * out_sz + other] += wv * x[(n * s.c_in + ic) * in_sz + p];
          }
        }
    }
  return y;
}

ConvSpec Make(bool transpose, int64_t n, int64_t cin, int64_t cout, int64_t group, std::vector<int64_t> in,
              std::vector<int64_t> k, std::vector<int64_t> st, std::vector<int64_t> dl, std::vector<int64_t> pb,
              std::vector<int64_t> pe, std::vector<int64_t> out_pad = {}) {
  ConvSpec s;
  s.transpose = transpose;
  s.n = n, s.c_in = cin, s.c_out = cout, s.group = group;
  s.in_spatial = in, s.kernel = k, s.strides = st, s.dilations = dl;
  s.has_bias = true;
  for (size_t i = 0; i < in.size(); ++i) {
    const auto g = transpose ? linalg::ConvTransposeAxis(in[i], k[i], st[i], dl[i], pb[i], pe[i],
                                                         out_pad.empty() ? 0 : out_pad[i], -1, "NOTSET")
                             : linalg::ConvAxis(in[i], k[i], st[i], dl[i], pb[i], pe[i], "NOTSET", false);
    s.out_spatial.push_back(g.out);
    s.pad_begin.push_back(g.pad_begin);
    s.pad_end.push_back(g.pad_end);
  }
  return s;
}

void Check(const ConvSpec& s, uint64_t seed) {
  const int64_t ks = Prod(s.kernel);
  const int64_t nw = s.transpose ? s.c_in * (s.c_out / s.group) * ks : s.c_out * (s.c_in / s.group) * ks;
  auto x = Rand(s.n * s.c_in * Prod(s.in_spatial), seed), w = Rand(nw, seed + 1), b = Rand(s.c_out, seed + 2);
  auto ref = Reference(s, x, w, b);
  std::vector<float> y(ref.size(), 123.f);
  DnnlConv(s).Run(x.data(), w.data(), b.data(), y.data());
  std::vector<double> xd(x.begin(), x.end()), wd(w.begin(), w.end()), bd(b.begin(), b.end()), yd(ref.size());
  NaiveConv<double>(s, xd.data(), wd.data(), bd.data(), yd.data());
  for (size_t i = 0; i < ref.size(); ++i) {
    ASSERT_NEAR(y[i], ref[i], 1e-4 + 1e-4 * std::abs(ref[i])) << "dnnl element " << i;
    ASSERT_NEAR(yd[i], ref[i], 1e-9) << "naive element " << i;
  }
}

// The half types: DnnlConv on f16 and bf16 operands against the double reference on the rounded operands, with Y
// poisoned (NaN) first so an element left unwritten fails.
void CheckHalf(const ConvSpec& s, uint64_t seed) {
  const int64_t ks = Prod(s.kernel);
  const int64_t nw = s.transpose ? s.c_in * (s.c_out / s.group) * ks : s.c_out * (s.c_in / s.group) * ks;
  auto x = Rand(s.n * s.c_in * Prod(s.in_spatial), seed), w = Rand(nw, seed + 1), b = Rand(s.c_out, seed + 2);
  for (DnnType t : {DnnType::kF16, DnnType::kBF16}) {
    std::vector<uint16_t> xh(x.size()), wh(w.size()), bh(b.size()), yh(s.n * s.c_out * Prod(s.out_spatial), 0x7fc0);
    FromFloat(t, x.data(), xh.data(), x.size());
    FromFloat(t, w.data(), wh.data(), w.size());
    FromFloat(t, b.data(), bh.data(), b.size());
    std::vector<float> xr(x.size()), wr(w.size()), br(b.size()), y(yh.size());
    ToFloat(t, xh.data(), xr.data(), x.size());
    ToFloat(t, wh.data(), wr.data(), w.size());
    ToFloat(t, bh.data(), br.data(), b.size());
    ConvSpec st = s;
    st.type = t;
    DnnlConv(st).Run(xh.data(), wh.data(), bh.data(), yh.data());
    ToFloat(t, yh.data(), y.data(), y.size());
    auto ref = Reference(s, xr, wr, br);
    const double tol = t == DnnType::kF16 ? 3e-3 : 2e-2;
    for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], ref[i], tol * (1 + std::abs(ref[i]))) << i;
  }
}

TEST(ConvKernel, Conv1DStridedPadded) { Check(Make(false, 2, 3, 4, 1, {11}, {3}, {2}, {1}, {1}, {2}), 1); }

TEST(ConvKernel, Conv2DGroupedDilatedAsymmetricPads) {
  Check(Make(false, 2, 4, 6, 2, {7, 8}, {3, 2}, {1, 2}, {2, 1}, {1, 0}, {2, 1}), 2);
}

TEST(ConvKernel, Conv2DDepthwise) { Check(Make(false, 1, 4, 8, 4, {6, 6}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}), 3); }

TEST(ConvKernel, Conv3DStridedPadded) {
  Check(Make(false, 1, 2, 3, 1, {5, 6, 4}, {2, 3, 2}, {2, 1, 1}, {1, 1, 2}, {1, 1, 0}, {0, 1, 1}), 4);
}

TEST(ConvKernel, ConvTranspose2DGroupedStrided) {
  Check(Make(true, 2, 4, 6, 2, {3, 4}, {3, 2}, {2, 3}, {1, 2}, {1, 0}, {0, 1}), 5);
}

TEST(ConvKernel, ConvTransposeOutputPaddingBeyondEndPad) {
  // output_padding 1 with end pad 0: the last output row has no input contribution (bias only).
  ConvSpec s = Make(true, 1, 2, 3, 1, {3, 3}, {3, 3}, {2, 2}, {1, 1}, {0, 0}, {0, 0}, {1, 1});
  EXPECT_EQ(s.out_spatial, (std::vector<int64_t>{8, 8}));
  EXPECT_EQ(s.pad_end, (std::vector<int64_t>{-1, -1}));
  Check(s, 6);
}

// output_shape past the natural size (5 rows at stride 2, kernel 3: 11 natural, 12 x 13 asked): end pads -1 and -2,
// which oneDNN's deconvolution refuses; the rows past every input's reach hold the bias. Every type, with and
// without bias, grouped and dilated too.
TEST(ConvKernel, ConvTransposeOutputShapePastTheNaturalSize) {
  for (bool bias : {true, false}) {
    ConvSpec s = Make(true, 2, 4, 6, 2, {5, 5}, {3, 3}, {2, 2}, {1, 2}, {0, 0}, {0, 0});
    s.has_bias = bias;
    for (int i = 0; i < 2; ++i) {
      const auto g = linalg::ConvTransposeAxis(5, 3, 2, i == 0 ? 1 : 2, 0, 0, 0, i == 0 ? 12 : 16, "NOTSET");
      s.out_spatial[i] = g.out;
      s.pad_begin[i] = g.pad_begin;
      s.pad_end[i] = g.pad_end;
    }
    EXPECT_EQ(s.out_spatial, (std::vector<int64_t>{12, 16}));
    EXPECT_EQ(s.pad_end, (std::vector<int64_t>{-1, -3}));
    Check(s, 20 + bias);
    CheckHalf(s, 30 + bias);
  }
}

TEST(ConvKernel, ConvTranspose1DAnd3D) {
  Check(Make(true, 1, 3, 2, 1, {5}, {3}, {3}, {1}, {1}, {1}), 7);
  Check(Make(true, 1, 2, 2, 1, {2, 3, 2}, {2, 2, 2}, {2, 1, 2}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0}, {1, 0, 1}), 8);
}

TEST(ConvKernel, HalfTypesMatchFloat) {
  CheckHalf(Make(false, 1, 2, 3, 1, {5, 5}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}), 9);
}

// oneDNN's team of one thread for the block tests (blocks hold about 1 MiB per thread), restored after.
struct OneOmpThread {
  OneOmpThread() { SetOmpThreads(1); }
  ~OneOmpThread() { SetOmpThreads(0); }
};

// A batch whose layout copies pass 8 MiB runs in blocks of images (cpu_ops/conv.cc): 11 images of [32, 64, 64]
// (512 KiB of Y each) at one thread as five blocks of 2 and one of 1. Against the double naive kernel, with W
// constant (reordered once per block primitive) and fed per call; y starts as NaN, so an image no block wrote fails.
TEST(ConvKernel, LargeBatchRunsInBlocksOfImages) {
  OneOmpThread one;
  ConvSpec s = Make(false, 11, 16, 32, 1, {64, 64}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1});
  const int64_t nx = 11 * 16 * 64 * 64, nw = 32 * 16 * 9, ny = 11 * 32 * 64 * 64;
  auto x = Rand(nx, 21), w = Rand(nw, 22), b = Rand(32, 23);
  std::vector<double> xd(x.begin(), x.end()), wd(w.begin(), w.end()), bd(b.begin(), b.end()), ref(ny);
  NaiveConv<double>(s, xd.data(), wd.data(), bd.data(), ref.data());
  for (const bool constant : {true, false}) {
    SCOPED_TRACE(constant ? "constant W" : "W per call");
    DnnlConv conv(s, constant ? w.data() : nullptr);
    EXPECT_NE(conv.impl_name().find("blocks of 2 images"), std::string::npos) << conv.impl_name();
    std::vector<float> y(ny, std::numeric_limits<float>::quiet_NaN());
    conv.Run(x.data(), w.data(), b.data(), y.data());
    for (int64_t i = 0; i < ny; ++i) ASSERT_NEAR(y[i], ref[i], 1e-4 + 1e-4 * std::abs(ref[i])) << "element " << i;
  }
}

// Backward data of a large batch runs in blocks too: 11 images of dX [16, 64, 64] (256 KiB each) at one thread as
// two blocks of 4 and one of 3, against the double loops; dX starts as NaN.
TEST(ConvKernel, LargeBatchBackwardDataRunsInBlocksOfImages) {
  OneOmpThread one;
  ConvSpec s = Make(false, 11, 16, 32, 1, {64, 64}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1});
  const int64_t nx = 11 * 16 * 64 * 64, nw = 32 * 16 * 9, ny = 11 * 32 * 64 * 64;
  auto dy = Rand(ny, 31), w = Rand(nw, 32);
  std::vector<double> dyd(dy.begin(), dy.end()), wd(w.begin(), w.end()), ref(nx);
  NaiveConvGradData<double>(s, dyd.data(), wd.data(), ref.data());
  DnnlConvBackward grad(s, DnnlConvBackward::Kind::kData);
  EXPECT_EQ(grad.block_images(), 4);
  std::vector<float> dx(nx, std::numeric_limits<float>::quiet_NaN());
  grad.Run(dy.data(), w.data(), dx.data());
  for (int64_t i = 0; i < nx; ++i) ASSERT_NEAR(dx[i], ref[i], 1e-4 + 1e-4 * std::abs(ref[i])) << "element " << i;
}

// Backward weights of a large batch: 11 images of dY [32, 64, 64] (512 KiB each) at one thread as five blocks of 2
// and one of 1, whose dW are added in order, against the double loops; dW starts as NaN.
TEST(ConvKernel, LargeBatchBackwardWeightsSumsBlocksOfImages) {
  OneOmpThread one;
  ConvSpec s = Make(false, 11, 16, 32, 1, {64, 64}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1});
  const int64_t nx = 11 * 16 * 64 * 64, nw = 32 * 16 * 9, ny = 11 * 32 * 64 * 64;
  auto dy = Rand(ny, 41), x = Rand(nx, 42);
  std::vector<double> dyd(dy.begin(), dy.end()), xd(x.begin(), x.end()), ref(nw);
  NaiveConvGradWeight<double>(s, dyd.data(), xd.data(), ref.data());
  DnnlConvBackward grad(s, DnnlConvBackward::Kind::kWeights);
  EXPECT_EQ(grad.block_images(), 2);
  std::vector<float> dw(nw, std::numeric_limits<float>::quiet_NaN());
  grad.Run(dy.data(), x.data(), dw.data());
  // Each dW element sums 11 x 4096 products of magnitude <= 1 (~190 in size): float rounding allows ~1e-3.
  for (int64_t i = 0; i < nw; ++i) ASSERT_NEAR(dw[i], ref[i], 2e-3 + 1e-4 * std::abs(ref[i])) << "element " << i;
}

// bf16 through oneDNN's native kernels where it has them (this VM: AVX512-BF16): the forward in its blocked layouts,
// backward data and backward weights (dW accumulated in f32 and rounded once), against the double loops on the same
// bf16 values. Each output is within half a bf16 ulp of the reference plus the f32 accumulation's error (bounded by
// the sum of |products|, the loops run on |operands|); outputs start as NaN, so an unwritten element fails.
std::vector<bfloat16> ToBf16(const std::vector<float>& v) {
  std::vector<bfloat16> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = bfloat16(v[i]);
  return h;
}
std::vector<double> Widen(const std::vector<bfloat16>& h, bool abs = false) {
  std::vector<double> d(h.size());
  for (size_t i = 0; i < h.size(); ++i) d[i] = abs ? std::fabs(static_cast<float>(h[i])) : static_cast<float>(h[i]);
  return d;
}
void ExpectBf16Near(const std::vector<bfloat16>& got, const std::vector<double>& ref, const std::vector<double>& mag,
                    const char* what) {
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = static_cast<float>(got[i]);
    ASSERT_LE(std::fabs(g - ref[i]), std::ldexp(std::fabs(ref[i]), -8) + 1e-5 * mag[i] + 1e-30)
        << what << " element " << i << ": " << g << " vs " << ref[i];
  }
}

TEST(ConvKernel, Bf16NativeForwardAndBackwardMatchTheDoubleLoops) {
  ConvSpec s = Make(false, 4, 16, 32, 1, {20, 18}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1});
  s.type = DnnType::kBF16;
  s.has_bias = false;
  const int64_t nx = 4 * 16 * 20 * 18, nw = 32 * 16 * 9, ny = 4 * 32 * 20 * 18;
  const auto x = ToBf16(Rand(nx, 51)), w = ToBf16(Rand(nw, 52)), dy = ToBf16(Rand(ny, 53));
  const std::vector<double> xd = Widen(x), wd = Widen(w), dyd = Widen(dy);
  const std::vector<double> xa = Widen(x, true), wa = Widen(w, true), dya = Widen(dy, true);
  DnnlConv fwd(s);
  DnnlConvBackward bd(s, DnnlConvBackward::Kind::kData), bw(s, DnnlConvBackward::Kind::kWeights);
  if (!bd.native() || !bw.native()) GTEST_SKIP() << "no native bf16 convolution backward on this CPU";
  EXPECT_EQ(fwd.impl_name().find("converted"), std::string::npos) << fwd.impl_name();
  const bfloat16 nan(std::numeric_limits<float>::quiet_NaN());
  std::vector<bfloat16> y(ny, nan), dx(nx, nan), dw(nw, nan);
  fwd.Run(x.data(), w.data(), nullptr, y.data());
  bd.Run(dy.data(), w.data(), dx.data());
  bw.Run(dy.data(), x.data(), dw.data());
  std::vector<double> ry(ny), my(ny), rdx(nx), mdx(nx), rdw(nw), mdw(nw);
  NaiveConv<double>(s, xd.data(), wd.data(), nullptr, ry.data());
  NaiveConv<double>(s, xa.data(), wa.data(), nullptr, my.data());
  NaiveConvGradData<double>(s, dyd.data(), wd.data(), rdx.data());
  NaiveConvGradData<double>(s, dya.data(), wa.data(), mdx.data());
  NaiveConvGradWeight<double>(s, dyd.data(), xd.data(), rdw.data());
  NaiveConvGradWeight<double>(s, dya.data(), xa.data(), mdw.data());
  ExpectBf16Near(y, ry, my, "Y");
  ExpectBf16Near(dx, rdx, mdx, "dX");
  ExpectBf16Near(dw, rdw, mdw, "dW");
}

// [N, C, spatial...] <-> [N, spatial..., C] of a flat buffer.
template <typename T>
std::vector<T> ToChannelsLast(const std::vector<T>& v, int64_t n, int64_t c, int64_t sp) {
  std::vector<T> r(v.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < c; ++k)
      for (int64_t p = 0; p < sp; ++p) r[(i * sp + p) * c + k] = v[(i * c + k) * sp + p];
  return r;
}
template <typename T>
std::vector<T> FromChannelsLast(const std::vector<T>& v, int64_t n, int64_t c, int64_t sp) {
  std::vector<T> r(v.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < c; ++k)
      for (int64_t p = 0; p < sp; ++p) r[(i * c + k) * sp + p] = v[(i * sp + p) * c + k];
  return r;
}

// ConvSpec::channels_last: X, Y, dX and dY stored [N, spatial..., C]. The forward, backward-data and backward-weights
// results, brought back to NCHW, against the double loops on the NCHW operands (fresh random values, outputs
// poisoned with NaN so an unwritten element fails); f32 and, where the CPU has the native kernels, bf16. Geometries:
// 3x3 same-padded, 1x1 stride 2, 7x7 stride 2 on 3 channels (a stem), depthwise 3x3 and 5x5, grouped, 1-D and 3-D,
// a 3x3 with 256 channels (f32 on oneDNN's blocked layouts, reordered from and to NHWC: BlockedForChannelsLast), and
// 1x1 stride-1 ones: as GEMMs where the weights are large beside the images (2-D with and without bias, 3-D:
// cpu_ops/pointwise_conv.h), as convolutions where they are small.
TEST(ConvKernel, ChannelsLastMatchesTheNchwLoops) {
  ConvSpec pointwise_no_bias = Make(false, 2, 96, 80, 1, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0});
  pointwise_no_bias.has_bias = false;
  const std::vector<ConvSpec> specs = {
      Make(false, 2, 80, 96, 1, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0}),
      pointwise_no_bias,
      Make(false, 1, 40, 48, 1, {2, 3, 2}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0}),
      Make(false, 2, 8, 8, 1, {6, 6}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0}),
      Make(false, 2, 16, 32, 1, {9, 9}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}),
      Make(false, 3, 32, 16, 1, {8, 8}, {1, 1}, {2, 2}, {1, 1}, {0, 0}, {0, 0}),
      Make(false, 2, 3, 16, 1, {20, 20}, {7, 7}, {2, 2}, {1, 1}, {3, 3}, {3, 3}),
      Make(false, 2, 24, 24, 24, {10, 10}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}),
      Make(false, 2, 16, 16, 16, {11, 11}, {5, 5}, {2, 2}, {1, 1}, {2, 2}, {2, 2}),
      Make(false, 2, 16, 32, 4, {7, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}),
      Make(false, 2, 8, 16, 1, {13}, {3}, {1}, {1}, {1}, {1}),
      Make(false, 1, 8, 8, 1, {5, 6, 7}, {3, 3, 3}, {1, 2, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}),
      Make(false, 2, 256, 264, 1, {5, 4}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1})};
  uint64_t seed = std::random_device{}();
  for (const ConvSpec& base : specs) {
    ConvSpec s = base;
    s.channels_last = true;
    EXPECT_EQ(BlockedForChannelsLast(s), s.c_in >= 256) << "the blocked path only for the 256-channel case";
    const bool gemm = s.kernel[0] == 1 && s.strides[0] == 1 && s.c_in > 8;
    EXPECT_EQ(PointwiseGemmApplies(s), gemm);
    EXPECT_EQ(DnnlConv(s).impl_name().find("pointwise GEMM") != std::string::npos, gemm) << DnnlConv(s).impl_name();
    const int64_t isp = Prod(s.in_spatial), osp = Prod(s.out_spatial);
    const int64_t nx = s.n * s.c_in * isp, ny = s.n * s.c_out * osp, nw = s.c_out * (s.c_in / s.group) * Prod(s.kernel);
    SCOPED_TRACE("c_in " + std::to_string(s.c_in) + " c_out " + std::to_string(s.c_out) + " group " +
                 std::to_string(s.group) + " seed " + std::to_string(seed));
    const auto x = Rand(nx, seed++), w = Rand(nw, seed++), b = Rand(s.c_out, seed++), dy = Rand(ny, seed++);
    std::vector<double> xd(x.begin(), x.end()), wd(w.begin(), w.end()), bd(b.begin(), b.end()),
        dyd(dy.begin(), dy.end());
    std::vector<double> ry(ny), rdx(nx), rdw(nw);
    NaiveConv<double>(base, xd.data(), wd.data(), bd.data(), ry.data());
    NaiveConvGradData<double>(base, dyd.data(), wd.data(), rdx.data());
    NaiveConvGradWeight<double>(base, dyd.data(), xd.data(), rdw.data());
    const auto xl = ToChannelsLast(x, s.n, s.c_in, isp), dyl = ToChannelsLast(dy, s.n, s.c_out, osp);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> y(ny, nan), dx(nx, nan), dw(nw, nan);
    DnnlConv(s).Run(xl.data(), w.data(), b.data(), y.data());
    DnnlConvBackward(s, DnnlConvBackward::Kind::kData).Run(dyl.data(), w.data(), dx.data());
    DnnlConvBackward(s, DnnlConvBackward::Kind::kWeights).Run(dyl.data(), xl.data(), dw.data());
    const auto yc = FromChannelsLast(y, s.n, s.c_out, osp), dxc = FromChannelsLast(dx, s.n, s.c_in, isp);
    for (int64_t i = 0; i < ny; ++i) ASSERT_NEAR(yc[i], ry[i], 1e-4 + 1e-4 * std::abs(ry[i])) << "y " << i;
    for (int64_t i = 0; i < nx; ++i) ASSERT_NEAR(dxc[i], rdx[i], 1e-4 + 1e-4 * std::abs(rdx[i])) << "dx " << i;
    for (int64_t i = 0; i < nw; ++i) ASSERT_NEAR(dw[i], rdw[i], 1e-3 + 1e-4 * std::abs(rdw[i])) << "dw " << i;
    // bf16: the same against the loops on the rounded operands.
    ConvSpec h = s;
    h.type = DnnType::kBF16;
    DnnlConvBackward hd(h, DnnlConvBackward::Kind::kData), hw(h, DnnlConvBackward::Kind::kWeights);
    if (!hd.native() || !hw.native()) continue;  // no native bf16 kernels on this CPU: the f32 path serves it
    const auto round = [&](const std::vector<float>& v) {
      std::vector<uint16_t> r(v.size());
      FromFloat(DnnType::kBF16, v.data(), r.data(), v.size());
      return r;
    };
    const auto widen = [&](const std::vector<uint16_t>& v) {
      std::vector<double> r(v.size());
      for (size_t i = 0; i < v.size(); ++i) r[i] = Bf16BitsToFloat(v[i]);
      return r;
    };
    const auto xh = round(xl), wh = round(w), bh = round(b), dyh = round(dyl);
    const auto xr = widen(round(x)), wr = widen(wh), br = widen(bh), dyr = widen(round(dy));
    NaiveConv<double>(base, xr.data(), wr.data(), br.data(), ry.data());
    NaiveConvGradData<double>(base, dyr.data(), wr.data(), rdx.data());
    NaiveConvGradWeight<double>(base, dyr.data(), xr.data(), rdw.data());
    std::vector<uint16_t> yh(ny, 0x7fc0), dxh(nx, 0x7fc0), dwh(nw, 0x7fc0);
    DnnlConv(h).Run(xh.data(), wh.data(), bh.data(), yh.data());
    hd.Run(dyh.data(), wh.data(), dxh.data());
    hw.Run(dyh.data(), xh.data(), dwh.data());
    const auto yb = FromChannelsLast(widen(yh), s.n, s.c_out, osp),
               dxb = FromChannelsLast(widen(dxh), s.n, s.c_in, isp);
    const auto dwb = widen(dwh);
    // One bf16 rounding of each result (8 bits), on sums whose terms are exact products of bf16 values.
    for (int64_t i = 0; i < ny; ++i) ASSERT_NEAR(yb[i], ry[i], 1e-4 + std::abs(ry[i]) / 128) << "bf16 y " << i;
    for (int64_t i = 0; i < nx; ++i) ASSERT_NEAR(dxb[i], rdx[i], 1e-4 + std::abs(rdx[i]) / 128) << "bf16 dx " << i;
    for (int64_t i = 0; i < nw; ++i) ASSERT_NEAR(dwb[i], rdw[i], 1e-4 + std::abs(rdw[i]) / 128) << "bf16 dw " << i;
  }
}

}  // namespace
}  // namespace ot::cpu
