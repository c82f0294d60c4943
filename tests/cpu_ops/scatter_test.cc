// cpu::ScatterElements / ScatterND with every reduction, duplicates accumulating in order.
#include "cpu_ops/scatter.h"

#include <gtest/gtest.h>

#include <vector>

#include "kernel_common/half.h"

namespace ot::cpu {
namespace {

TEST(ScatterElements, ReductionsWithDuplicates) {
  // data [2, 3]; indices/updates [2, 2] along axis 1, both updates of row 0 hit column 1.
  const std::vector<float> data{1, 2, 3, 4, 5, 6};
  const std::vector<int64_t> idx{1, -2, 0, 2};
  const std::vector<float> upd{10, 20, 30, 40};
  struct Case {
    ScatterReduction red;
    std::vector<float> want;
  };
  const std::vector<Case> cases{
      {ScatterReduction::kNone, {1, 20, 3, 30, 5, 40}},   {ScatterReduction::kAdd, {1, 32, 3, 34, 5, 46}},
      {ScatterReduction::kMul, {1, 400, 3, 120, 5, 240}}, {ScatterReduction::kMax, {1, 20, 3, 30, 5, 40}},
      {ScatterReduction::kMin, {1, 2, 3, 4, 5, 6}},
  };
  for (const Case& c : cases) {
    std::vector<float> out(6);
    ScatterElements(data.data(), {2, 3}, idx.data(), upd.data(), {2, 2}, 1, c.red, out.data());
    EXPECT_EQ(out, c.want) << static_cast<int>(c.red);
  }
}

TEST(ScatterElements, Axis0Int32IndicesHalf) {
  std::vector<float16> data(6, float16(0.f)), out(6);
  const std::vector<int32_t> idx{1, 0, 1};
  const std::vector<float16> upd{float16(1.5f), float16(2.5f), float16(-3.f)};
  ScatterElements(data.data(), {2, 3}, idx.data(), upd.data(), {1, 3}, 0, ScatterReduction::kAdd, out.data());
  const std::vector<float> want{0, 2.5f, 0, 1.5f, 0, -3.f};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(static_cast<float>(out[i]), want[i]) << i;
}

TEST(ScatterND, SlicesAndReductions) {
  // data [4, 2]; indices [3, 1] address rows; updates [3, 2]; row 1 twice.
  const std::vector<int64_t> data{1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<int64_t> idx{1, -1, 1};
  const std::vector<int64_t> upd{10, 20, 30, 40, 50, 60};
  std::vector<int64_t> out(8);
  ScatterND(data.data(), {4, 2}, idx.data(), {3, 1}, upd.data(), ScatterReduction::kNone, out.data());
  EXPECT_EQ(out, (std::vector<int64_t>{1, 2, 50, 60, 5, 6, 30, 40}));
  ScatterND(data.data(), {4, 2}, idx.data(), {3, 1}, upd.data(), ScatterReduction::kAdd, out.data());
  EXPECT_EQ(out, (std::vector<int64_t>{1, 2, 63, 84, 5, 6, 37, 48}));
  ScatterND(data.data(), {4, 2}, idx.data(), {3, 1}, upd.data(), ScatterReduction::kMul, out.data());
  EXPECT_EQ(out, (std::vector<int64_t>{1, 2, 3 * 10 * 50, 4 * 20 * 60, 5, 6, 7 * 30, 8 * 40}));
}

TEST(ScatterND, ScalarElements) {
  const std::vector<float> data{1, 2, 3, 4};
  const std::vector<int64_t> idx{1, 0, 0, 1};  // tuples (1,0), (0,1) of data [2, 2]
  const std::vector<float> upd{9, 8};
  std::vector<float> out(4);
  ScatterND(data.data(), {2, 2}, idx.data(), {2, 2}, upd.data(), ScatterReduction::kMax, out.data());
  EXPECT_EQ(out, (std::vector<float>{1, 8, 9, 4}));
}

}  // namespace
}  // namespace ot::cpu
