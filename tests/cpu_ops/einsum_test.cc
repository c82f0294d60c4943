// StridedReduceCopy: transpose, diagonal (summed strides), broadcast (stride 0) and reduction.
#include "cpu_ops/einsum.h"

#include <gtest/gtest.h>

namespace ot::cpu {
namespace {

TEST(EinsumKernel, TransposeCopy) {
  std::vector<float> a{1, 2, 3, 4, 5, 6}, out(6);  // [2,3] -> [3,2]
  StridedReduceCopy<float>(a.data(), {3, 2}, {1, 3}, {}, {}, out.data());
  EXPECT_EQ(out, (std::vector<float>{1, 4, 2, 5, 3, 6}));
}

TEST(EinsumKernel, DiagonalAndTrace) {
  std::vector<int64_t> a{1, 2, 3, 4, 5, 6, 7, 8, 9}, diag(3), trace(1);
  StridedReduceCopy<int64_t>(a.data(), {3}, {4}, {}, {}, diag.data());
  EXPECT_EQ(diag, (std::vector<int64_t>{1, 5, 9}));
  StridedReduceCopy<int64_t>(a.data(), {}, {}, {3}, {4}, trace.data());
  EXPECT_EQ(trace[0], 15);
}

TEST(EinsumKernel, ReduceRowsAndBroadcast) {
  std::vector<double> a{1, 2, 3, 4, 5, 6}, rows(2), bc(6);
  StridedReduceCopy<double>(a.data(), {2}, {3}, {3}, {1}, rows.data());
  EXPECT_EQ(rows, (std::vector<double>{6, 15}));
  StridedReduceCopy<double>(a.data(), {2, 3}, {0, 1}, {}, {}, bc.data());  // row 0 broadcast
  EXPECT_EQ(bc, (std::vector<double>{1, 2, 3, 1, 2, 3}));
}

TEST(EinsumKernel, LargeSumIsSequentialAndExact) {
  std::vector<float> a(5000, 0.1f), out(1);
  StridedReduceCopy<float>(a.data(), {1}, {0}, {5000}, {1}, out.data());
  EXPECT_NEAR(out[0], 500.0, 1e-3);
}

}  // namespace
}  // namespace ot::cpu
