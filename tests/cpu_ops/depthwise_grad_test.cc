// Depthwise weight gradient (cpu_ops/depthwise_grad.h) against the double loops (NaiveConvGradWeight<double>) on
// fresh random shapes: kernels 1-7 wide (square and not), strides 1-3, symmetric and asymmetric pads (some larger
// than the kernel's reach), rows narrower and wider than the eight lanes, batches 1-3; dW starts as NaN so every
// element must be written. Which specs it takes (2-D depthwise, dilation 1, forward), and that oneDNN 2.6 has no jit
// kernel for the 5x5 ones it replaces (the reason for it: its gemm-based implementation).
#include "cpu_ops/depthwise_grad.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "cpu_ops/conv_grad.h"
#include "graph/ops/linalg_util.h"

namespace ot::cpu {
namespace {

ConvSpec Depthwise(int64_t n, int64_t c, std::vector<int64_t> in, std::vector<int64_t> k, std::vector<int64_t> st,
                   std::vector<int64_t> pb, std::vector<int64_t> pe) {
  ConvSpec s;
  s.n = n, s.c_in = c, s.c_out = c, s.group = c;
  s.in_spatial = in, s.kernel = k, s.strides = st, s.dilations = {1, 1};
  for (size_t i = 0; i < 2; ++i) {
    const auto g = linalg::ConvAxis(in[i], k[i], st[i], 1, pb[i], pe[i], "NOTSET", false);
    s.out_spatial.push_back(g.out);
    s.pad_begin.push_back(g.pad_begin);
    s.pad_end.push_back(g.pad_end);
  }
  return s;
}

void Check(const ConvSpec& s, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  const int64_t c = s.c_in, nx = s.n * c * s.in_spatial[0] * s.in_spatial[1];
  const int64_t ny = s.n * c * s.out_spatial[0] * s.out_spatial[1], nw = c * s.kernel[0] * s.kernel[1];
  std::vector<float> x(nx), dy(ny);
  for (float& v : x) v = u(rng);
  for (float& v : dy) v = u(rng);
  std::vector<double> xd(x.begin(), x.end()), dyd(dy.begin(), dy.end()), ref(nw), mag(nw);
  NaiveConvGradWeight<double>(s, dyd.data(), xd.data(), ref.data());
  for (double& v : xd) v = std::fabs(v);
  for (double& v : dyd) v = std::fabs(v);
  NaiveConvGradWeight<double>(s, dyd.data(), xd.data(), mag.data());  // the sum of |terms|: the rounding's scale
  ASSERT_TRUE(DepthwiseGradWeightApplies(s));
  std::vector<float> dw(nw, std::numeric_limits<float>::quiet_NaN());
  DepthwiseConvGradWeight(s, dy.data(), x.data(), dw.data());
  for (int64_t i = 0; i < nw; ++i)
    ASSERT_LE(std::fabs(dw[i] - ref[i]), 1e-6 * mag[i] + 1e-30)
        << "element " << i << " of k" << s.kernel[0] << "x" << s.kernel[1] << " s" << s.strides[0] << "x"
        << s.strides[1] << " in " << s.in_spatial[0] << "x" << s.in_spatial[1] << ": " << dw[i] << " vs " << ref[i];
}

TEST(DepthwiseGradWeight, MatchesTheDoubleLoopsOnRandomShapes) {
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_int_distribution<int64_t> kd(1, 7), sd(1, 3), pd(0, 4), hd(1, 30), nd(1, 3), cd(2, 9);
  for (int t = 0; t < 60; ++t) {
    const int64_t kh = kd(rng), kw = t % 3 == 0 ? kh : kd(rng);
    const int64_t ih = std::max(hd(rng), kh), iw = std::max(hd(rng), kw);
    const ConvSpec s =
        Depthwise(nd(rng), cd(rng), {ih, iw}, {kh, kw}, {sd(rng), sd(rng)}, {pd(rng), pd(rng)}, {pd(rng), pd(rng)});
    if (s.out_spatial[0] < 1 || s.out_spatial[1] < 1) continue;
    Check(s, rng);
  }
  // The layers it exists for: EfficientNet's 5x5 at stride 1 and 2, MobileNetV3's 5x5 stride 2 and 3x3.
  for (const ConvSpec& s : {Depthwise(2, 24, {28, 28}, {5, 5}, {1, 1}, {2, 2}, {2, 2}),
                            Depthwise(2, 16, {56, 56}, {5, 5}, {2, 2}, {2, 2}, {2, 2}),
                            Depthwise(3, 8, {14, 14}, {3, 3}, {2, 2}, {1, 1}, {1, 1})})
    Check(s, rng);
}

TEST(DepthwiseGradWeight, TakesOnlyTwoDimensionalDepthwiseConvolutions) {
  EXPECT_TRUE(DepthwiseGradWeightApplies(Depthwise(1, 4, {8, 8}, {5, 5}, {1, 1}, {2, 2}, {2, 2})));
  ConvSpec s = Depthwise(1, 4, {8, 8}, {3, 3}, {1, 1}, {1, 1}, {1, 1});
  s.dilations = {2, 1};
  EXPECT_FALSE(DepthwiseGradWeightApplies(s));
  s = Depthwise(1, 4, {8, 8}, {3, 3}, {1, 1}, {1, 1}, {1, 1});
  s.c_out = 8;  // a channel multiplier of 2
  EXPECT_FALSE(DepthwiseGradWeightApplies(s));
  s = Depthwise(1, 4, {8, 8}, {3, 3}, {1, 1}, {1, 1}, {1, 1});
  s.group = 2;  // grouped, not depthwise
  EXPECT_FALSE(DepthwiseGradWeightApplies(s));
  s = Depthwise(1, 4, {8, 8}, {3, 3}, {1, 1}, {1, 1}, {1, 1});
  s.transpose = true;
  EXPECT_FALSE(DepthwiseGradWeightApplies(s));
  s = Depthwise(1, 1, {8, 8}, {3, 3}, {1, 1}, {1, 1}, {1, 1});
  EXPECT_FALSE(DepthwiseGradWeightApplies(s));  // one channel: an ordinary convolution
}

// Why the kernel exists: oneDNN's f32 depthwise backward-weights implementation for a 5x5 kernel is gemm-based
// (and jit_dw for 3x3). If a newer oneDNN gains a jit kernel, the routing in executor/kernels/internal_conv.cc
// keeps using it and this test says so.
TEST(DepthwiseGradWeight, OneDnnRunsGemmForFiveByFiveDepthwise) {
  const DnnlConvBackward five(Depthwise(4, 240, {28, 28}, {5, 5}, {1, 1}, {2, 2}, {2, 2}),
                              DnnlConvBackward::Kind::kWeights);
  const DnnlConvBackward three(Depthwise(4, 240, {28, 28}, {3, 3}, {1, 1}, {1, 1}, {1, 1}),
                               DnnlConvBackward::Kind::kWeights);
  EXPECT_NE(five.impl_name().find("gemm"), std::string::npos) << five.impl_name();
  EXPECT_EQ(three.impl_name().find("gemm"), std::string::npos) << three.impl_name();
}

}  // namespace
}  // namespace ot::cpu
