// cpu::Pad in every mode, with negative pads (crops), against a per-element reference.
#include "cpu_ops/pad.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "cpu_ops/slice.h"

namespace ot::cpu {
namespace {

int64_t RefIndex(int64_t i, int64_t d, PadMode m) {
  if (i >= 0 && i < d) return i;
  switch (m) {
    case PadMode::kConstant:
      return -1;
    case PadMode::kEdge:
      return i < 0 ? 0 : d - 1;
    case PadMode::kWrap:
      while (i < 0) i += d;
      return i % d;
    case PadMode::kReflect:
      while (i < 0 || i >= d) i = i < 0 ? -i : 2 * (d - 1) - i;
      return i;
  }
  return -1;
}

void Check(const std::vector<int64_t>& in_dims, const std::vector<int64_t>& pb, const std::vector<int64_t>& pe,
           PadMode mode) {
  const int r = static_cast<int>(in_dims.size());
  std::vector<int64_t> od(r);
  for (int k = 0; k < r; ++k) od[k] = in_dims[k] + pb[k] + pe[k];
  std::vector<float> in(NumElementsOf(in_dims));
  std::mt19937 rng(static_cast<unsigned>(in.size()));
  std::uniform_real_distribution<float> u(-1, 1);
  for (float& v : in) v = u(rng);
  const float value = 7.5f;
  std::vector<float> out(NumElementsOf(od), -99.f);
  Pad(in.data(), in_dims, out.data(), od, pb, mode, &value, sizeof(float));
  const std::vector<int64_t> is = ContiguousStrides(in_dims);
  for (int64_t o = 0; o < NumElementsOf(od); ++o) {
    int64_t rem = o, off = 0;
    bool constant = false;
    for (int k = r - 1; k >= 0; --k) {
      int64_t i = RefIndex(rem % od[k] - pb[k], in_dims[k], mode);
      rem /= od[k];
      if (i < 0)
        constant = true;
      else
        off += i * is[k];
    }
    ASSERT_EQ(out[o], constant ? value : in[off]) << "output element " << o;
  }
}

TEST(Pad, AllModes) {
  for (PadMode m : {PadMode::kConstant, PadMode::kReflect, PadMode::kEdge, PadMode::kWrap}) {
    SCOPED_TRACE(static_cast<int>(m));
    Check({3, 4, 5}, {1, 2, 0}, {2, 0, 3}, m);
    Check({2, 5}, {0, 4}, {1, 4}, m);
    Check({6}, {3}, {2}, m);
  }
}

TEST(Pad, NegativePadsCrop) {
  Check({4, 6}, {-1, 2}, {1, -3}, PadMode::kConstant);
  Check({4, 6}, {-1, -2}, {-1, -3}, PadMode::kEdge);
}

TEST(Pad, LargeParallel) { Check({64, 70, 33}, {1, 2, 3}, {3, 2, 1}, PadMode::kReflect); }

TEST(Pad, WrapLargerThanDim) {
  // wrap pads may exceed the dim: indices wrap around more than once
  Check({3}, {7}, {5}, PadMode::kWrap);
}

}  // namespace
}  // namespace ot::cpu
