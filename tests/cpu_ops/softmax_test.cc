// cpu_ops Softmax/LogSoftmax/Hardmax against a naive double reference over [outer, n, inner].
#include "cpu_ops/softmax.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernel_common/half.h"

namespace ot::cpu {
namespace {

TEST(CpuSoftmax, MatchesReferenceForEachKindAndLayout) {
  std::mt19937_64 gen(5);
  std::uniform_real_distribution<double> u(-3, 3);
  for (auto [outer, n, inner] :
       {std::tuple<int64_t, int64_t, int64_t>{3, 7, 1}, {2, 5, 6}, {1, 1, 4}, {4, 33, 3}, {2, 3, 300}}) {
    std::vector<float> x(outer * n * inner);
    for (auto& v : x) v = static_cast<float>(u(gen));
    for (SoftmaxKind k : {SoftmaxKind::kSoftmax, SoftmaxKind::kLogSoftmax, SoftmaxKind::kHardmax}) {
      std::vector<float> y(x.size(), -7.f);
      Softmax<float>(k, outer, n, inner, x.data(), y.data());
      for (int64_t i = 0; i < outer; ++i)
        for (int64_t j = 0; j < inner; ++j) {
          double s = 0, m = -INFINITY;
          int64_t arg = 0;
          for (int64_t t = 0; t < n; ++t) {
            double v = x[(i * n + t) * inner + j];
            if (v > m) {
              m = v;
              arg = t;
            }
          }
          for (int64_t t = 0; t < n; ++t) s += std::exp(x[(i * n + t) * inner + j]);
          for (int64_t t = 0; t < n; ++t) {
            double v = x[(i * n + t) * inner + j];
            double e = k == SoftmaxKind::kSoftmax      ? std::exp(v) / s
                       : k == SoftmaxKind::kLogSoftmax ? v - std::log(s)
                                                       : (t == arg ? 1.0 : 0.0);
            ASSERT_NEAR(y[(i * n + t) * inner + j], e, 1e-5 * std::fabs(e) + 1e-6);
          }
        }
    }
  }
}

TEST(CpuSoftmax, LargeInputsStayFinite) {
  std::vector<float> x = {10000.f, 10001.f, 10002.f};
  std::vector<float> y(3);
  Softmax<float>(SoftmaxKind::kSoftmax, 1, 3, 1, x.data(), y.data());
  const double s = 1 + std::exp(-1.0) + std::exp(-2.0);
  EXPECT_NEAR(y[2], 1 / s, 1e-6);
  EXPECT_NEAR(y[0], std::exp(-2.0) / s, 1e-6);
  Softmax<float>(SoftmaxKind::kLogSoftmax, 1, 3, 1, x.data(), y.data());
  EXPECT_NEAR(y[2], -std::log(s), 1e-5);
}

TEST(CpuSoftmax, HardmaxPicksFirstMaxOnTies) {
  std::vector<double> x = {1, 3, 3, 0};
  std::vector<double> y(4);
  Softmax<double>(SoftmaxKind::kHardmax, 1, 4, 1, x.data(), y.data());
  EXPECT_EQ(y, (std::vector<double>{0, 1, 0, 0}));
}

TEST(CpuSoftmax, Bfloat16RoundsOnStore) {
  std::vector<bfloat16> x = {bfloat16(0.f), bfloat16(1.f)};
  std::vector<bfloat16> y(2);
  Softmax<bfloat16>(SoftmaxKind::kSoftmax, 1, 2, 1, x.data(), y.data());
  const float e = 1.f / (1.f + std::exp(1.f));
  EXPECT_EQ(static_cast<float>(y[0]), static_cast<float>(bfloat16(e)));
  EXPECT_EQ(static_cast<float>(y[1]), static_cast<float>(bfloat16(1 - e)));
}

}  // namespace
}  // namespace ot::cpu
