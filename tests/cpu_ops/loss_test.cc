// cpu_ops NLL and softmax cross-entropy losses: reductions, weights, ignore_index (mean divides by the weights
// of the targets not ignored), N-d inputs, out-of-range targets.
#include "cpu_ops/loss.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <vector>

namespace ot::cpu {
namespace {

TEST(CpuLoss, NllReductionsWeightsAndIgnoreIndex) {
  const int64_t N = 2, C = 3, D = 2;
  // input[n, c, d]
  std::vector<float> in = {-0.1f, -0.2f, -1.f,  -2.f,  -3.f,  -4.f,  //
                           -0.5f, -0.6f, -0.7f, -0.8f, -0.9f, -1.1f};
  std::vector<int64_t> t = {2, 1, 0, 2};  // target[n, d]
  std::vector<float> w = {0.5f, 2.f, 4.f};
  std::vector<float> none(4), s(1), m(1);
  NllLoss<float, int64_t>(LossReduction::kNone, N, C, D, in.data(), t.data(), w.data(), 1, none.data());
  // (n0,d0): t=2 -> -in[0,2,0]*4 = 12; (n0,d1): t=1 ignored -> 0; (n1,d0): t=0 -> 0.5*0.5; (n1,d1): t=2 -> 1.1*4
  EXPECT_NEAR(none[0], 12, 1e-6);
  EXPECT_EQ(none[1], 0);
  EXPECT_NEAR(none[2], 0.25, 1e-6);
  EXPECT_NEAR(none[3], 4.4, 1e-5);
  NllLoss<float, int64_t>(LossReduction::kSum, N, C, D, in.data(), t.data(), w.data(), 1, s.data());
  EXPECT_NEAR(s[0], 16.65, 1e-5);
  NllLoss<float, int64_t>(LossReduction::kMean, N, C, D, in.data(), t.data(), w.data(), 1, m.data());
  EXPECT_NEAR(m[0], 16.65 / (4 + 0.5 + 4), 1e-5);
  // No weights: mean over the 3 targets not ignored.
  NllLoss<float, int64_t>(LossReduction::kMean, N, C, D, in.data(), t.data(), nullptr, 1, m.data());
  EXPECT_NEAR(m[0], (3 + 0.5 + 1.1) / 3, 1e-5);
}

TEST(CpuLoss, NllRejectsOutOfRangeTarget) {
  std::vector<float> in = {-1, -2};
  std::vector<int32_t> t = {2};
  float out;
  EXPECT_THROW((NllLoss<float, int32_t>(LossReduction::kSum, 1, 2, 1, in.data(), t.data(), nullptr, -100, &out)),
               std::out_of_range);
  t[0] = -100;  // ignored: no throw, zero loss
  NllLoss<float, int32_t>(LossReduction::kSum, 1, 2, 1, in.data(), t.data(), nullptr, -100, &out);
  EXPECT_EQ(out, 0);
}

TEST(CpuLoss, SoftmaxCrossEntropyMatchesReference) {
  const int64_t N = 3, C = 5, D = 4;
  std::mt19937_64 g(11);
  std::uniform_real_distribution<double> u(-2, 2);
  std::vector<double> x(N * C * D);
  for (auto& v : x) v = u(g);
  std::vector<int32_t> t(N * D);
  for (auto& v : t) v = static_cast<int32_t>(g() % C);
  std::vector<double> lp(x.size()), out(1);
  SoftmaxCrossEntropyLoss<double, int32_t>(LossReduction::kMean, N, C, D, x.data(), t.data(), nullptr, -1, out.data(),
                                           lp.data());
  double sum = 0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t d = 0; d < D; ++d) {
      double se = 0;
      for (int64_t c = 0; c < C; ++c) se += std::exp(x[(n * C + c) * D + d]);
      for (int64_t c = 0; c < C; ++c)
        ASSERT_NEAR(lp[(n * C + c) * D + d], x[(n * C + c) * D + d] - std::log(se), 1e-12);
      sum += std::log(se) - x[(n * C + t[n * D + d]) * D + d];
    }
  EXPECT_NEAR(out[0], sum / (N * D), 1e-12);
}

// Float rows without a log-probability output compute only each target's: the same bits as the whole LogSoftmax,
// for every reduction, with and without weights, ignored targets among them, rows of several lengths; the double
// reference within float rounding; an out-of-range target still throws.
TEST(CpuLoss, SoftmaxCrossEntropyPicksTheTargetsBitForBit) {
  std::mt19937_64 g(std::random_device{}());
  for (int64_t c : {1, 7, 64, 1000, 8192}) {
    const int64_t n = 1 + static_cast<int64_t>(g() % 40);
    std::normal_distribution<float> z(0.f, 3.f);
    std::vector<float> x(static_cast<size_t>(n * c)), w(static_cast<size_t>(c));
    for (auto& v : x) v = z(g);
    for (auto& v : w) v = 0.25f + static_cast<float>(g() % 8);
    std::vector<int64_t> t(static_cast<size_t>(n));
    for (auto& v : t) v = g() % 5 == 0 ? -100 : static_cast<int64_t>(g() % c);
    t[0] = c - 1;  // at least one target counted
    for (const LossReduction red : {LossReduction::kNone, LossReduction::kSum, LossReduction::kMean}) {
      for (const bool weighted : {false, true}) {
        const float* wp = weighted ? w.data() : nullptr;
        const size_t m = red == LossReduction::kNone ? static_cast<size_t>(n) : 1;
        std::vector<float> full(m, NAN), picked(m, NAN), lp(x.size());
        SoftmaxCrossEntropyLoss<float, int64_t>(red, n, c, 1, x.data(), t.data(), wp, -100, full.data(), lp.data());
        SoftmaxCrossEntropyLoss<float, int64_t>(red, n, c, 1, x.data(), t.data(), wp, -100, picked.data(), nullptr);
        for (size_t i = 0; i < m; ++i) ASSERT_EQ(full[i], picked[i]) << "c " << c << " i " << i;
        double sum = 0, wsum = 0;
        for (int64_t i = 0; i < n; ++i) {
          if (t[i] == -100) continue;
          double mx = x[i * c], se = 0;
          for (int64_t k = 0; k < c; ++k) mx = std::max<double>(mx, x[i * c + k]);
          for (int64_t k = 0; k < c; ++k) se += std::exp(x[i * c + k] - mx);
          const double wi = weighted ? w[t[i]] : 1.0, l = (mx + std::log(se) - x[i * c + t[i]]) * wi;
          if (red == LossReduction::kNone) {
            ASSERT_NEAR(picked[i], l, 1e-5 * (1 + std::abs(l)));
          }
          sum += l;
          wsum += wi;
        }
        if (red != LossReduction::kNone) {
          const double want = red == LossReduction::kSum ? sum : sum / wsum;
          EXPECT_NEAR(picked[0], want, 1e-5 * (1 + std::abs(want)));
        }
      }
    }
    t[n - 1] = c;
    float out;
    EXPECT_THROW((SoftmaxCrossEntropyLoss<float, int64_t>(LossReduction::kSum, n, c, 1, x.data(), t.data(), nullptr,
                                                          -100, &out, nullptr)),
                 std::out_of_range);
  }
}

}  // namespace
}  // namespace ot::cpu
