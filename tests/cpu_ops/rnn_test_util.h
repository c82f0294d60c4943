// Shared by the float32 recurrent kernels' tests (rnn_gemm_test.cc, rnn_dnnl_test.cc): fresh random operands that
// float holds exactly, float copies, null for an absent operand, and the comparison with the float64 loop kernel.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace ot::cpu::test {

inline std::vector<double> Random(std::mt19937& rng, size_t n, double scale = 1.0) {
  std::uniform_real_distribution<double> u(-scale, scale);
  std::vector<double> v(n);
  for (double& e : v) e = static_cast<double>(static_cast<float>(u(rng)));  // representable in float
  return v;
}

inline std::vector<float> F(const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); }
template <typename T>
const T* P(const std::vector<T>& v) {
  return v.empty() ? nullptr : v.data();
}
template <typename T>
T* P(std::vector<T>& v) {
  return v.empty() ? nullptr : v.data();
}

// Every element written (the outputs start as NaN) and within 1e-4 relative of the float64 result: float32 sums
// over up to 444 rows of gradients that 12 tanh steps amplify come a few 1e-5 apart from float64.
inline void ExpectClose(const std::vector<float>& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_FALSE(std::isnan(got[i])) << what << "[" << i << "] not written";
    ASSERT_NEAR(got[i], want[i], 1e-4 * (1 + std::fabs(want[i]))) << what << "[" << i << "]";
  }
}

}  // namespace ot::cpu::test
