// cpu_ops/patch_conv_grad.h: a patchify convolution's weight gradient as one GEMM, against a double reference of
// the same bf16 operands; when it applies.
#include "cpu_ops/patch_conv_grad.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernel_common/half.h"

namespace ot::cpu {
namespace {

ConvSpec Patch(int64_t n, int64_t c, int64_t oc, int64_t h, int64_t w, int64_t kh, int64_t kw) {
  ConvSpec s;
  s.type = DnnType::kBF16;
  s.n = n;
  s.c_in = c;
  s.c_out = oc;
  s.in_spatial = {h, w};
  s.kernel = {kh, kw};
  s.strides = {kh, kw};
  s.dilations = {1, 1};
  s.pad_begin = s.pad_end = {0, 0};
  s.out_spatial = {(h - kh) / kh + 1, (w - kw) / kw + 1};
  s.channels_last = true;
  return s;
}

void CheckAgainstReference(const ConvSpec& s) {
  const int64_t oh = s.out_spatial[0], ow = s.out_spatial[1], h = s.in_spatial[0], w = s.in_spatial[1];
  const int64_t kh = s.kernel[0], kw = s.kernel[1];
  std::mt19937 rng(std::random_device{}());
  std::normal_distribution<float> nd;
  std::vector<bfloat16> x(static_cast<size_t>(s.n * h * w * s.c_in)), dy(static_cast<size_t>(s.n * oh * ow * s.c_out));
  for (auto& v : x) v = bfloat16(nd(rng));
  for (auto& v : dy) v = bfloat16(nd(rng));
  std::vector<bfloat16> dw(static_cast<size_t>(s.c_out * s.c_in * kh * kw),
                           bfloat16(std::numeric_limits<float>::quiet_NaN()));  // every element must be written
  PatchConvGradWeight pg(s);
  std::vector<uint8_t> ws(pg.workspace_bytes() + 64);
  void* aligned = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(ws.data()) + 63) / 64 * 64);
  pg.Run(dy.data(), x.data(), dw.data(), aligned);
  for (int64_t o = 0; o < s.c_out; ++o)
    for (int64_t ch = 0; ch < s.c_in; ++ch)
      for (int64_t a = 0; a < kh; ++a)
        for (int64_t b = 0; b < kw; ++b) {
          double ref = 0, mag = 0;
          for (int64_t n = 0; n < s.n; ++n)
            for (int64_t i = 0; i < oh; ++i)
              for (int64_t j = 0; j < ow; ++j) {
                const double t = static_cast<float>(dy[static_cast<size_t>(((n * oh + i) * ow + j) * s.c_out + o)]) *
                                 static_cast<double>(static_cast<float>(
                                     x[static_cast<size_t>(((n * h + i * kh + a) * w + j * kw + b) * s.c_in + ch)]));
                ref += t;
                mag += std::fabs(t);
              }
          const float got = static_cast<float>(dw[static_cast<size_t>(((o * s.c_in + ch) * kh + a) * kw + b)]);
          // bf16 output: half an ulp (2^-9 relative), and f32 accumulation over the rows.
          ASSERT_NEAR(got, ref, std::fabs(ref) * 0.0040 + mag * 1e-6) << o << " " << ch << " " << a << " " << b;
        }
}

TEST(PatchConvGradWeight, MatchesTheDoubleReference) {
  CheckAgainstReference(Patch(2, 3, 24, 32, 32, 16, 16));  // ViT's patch embedding, smaller
  CheckAgainstReference(Patch(3, 5, 7, 10, 13, 3, 4));     // rows and columns the patches leave uncovered
  CheckAgainstReference(Patch(2, 40, 24, 9, 11, 1, 1));    // pointwise: X is the patch matrix, read in place
}

TEST(PatchConvGradWeight, AppliesToPatchifyConvolutionsOnly) {
  EXPECT_TRUE(PatchGradWeightApplies(Patch(2, 3, 8, 32, 32, 16, 16)));
  ConvSpec s = Patch(2, 3, 8, 32, 32, 16, 16);
  s.pad_begin = {1, 0};
  EXPECT_FALSE(PatchGradWeightApplies(s));
  s = Patch(2, 3, 8, 32, 32, 16, 16);
  s.strides = {8, 8};
  EXPECT_FALSE(PatchGradWeightApplies(s));
  s = Patch(2, 4, 8, 32, 32, 16, 16);
  s.group = 2;
  EXPECT_FALSE(PatchGradWeightApplies(s));
  s = Patch(2, 3, 8, 32, 32, 16, 16);
  s.channels_last = false;
  EXPECT_FALSE(PatchGradWeightApplies(s));
}

}  // namespace
}  // namespace ot::cpu
