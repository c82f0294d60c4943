// cuda_ops/strided_copy.h (Expand, Tile, the bounded StridedCopy) against the CPU's copies (cpu_ops/tile.h) and a
// host loop, bit for bit, for elements of 1, 2, 4 and 8 bytes; and the executor's Expand / Tile nodes
// (executor/cuda/kernels_data.cc) against the CPU executor for f32/f16/bf16/int64/int32/bool. Device outputs start
// as 0xFF bytes and inputs never hold an all-0xFF element, so an element the kernel never writes fails. The host
// logic (SimplifyStrided, ExpandStrides, argument checks made before any CUDA call) runs without a GPU; the rest is
// label `gpu` (tests named *Gpu*), skipped without a device.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "cpu_ops/tile.h"
#include "cuda_ops/strided_copy.h"
#include "executor/device.h"
#include "graph/tensor.h"
#include "tests/cuda/cudnn_test_util.h"
#include "tests/test_util.h"

namespace ot {
namespace {

using Dims = std::vector<int64_t>;

int64_t Prod(const Dims& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

std::string Str(const Dims& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(v[i]);
  }
  s += ']';
  return s;
}

// n elements of esz random bytes, none of them all 0xFF (the poison of an unwritten output).
std::vector<uint8_t> RandomBytes(int64_t n, size_t esz) {
  std::vector<uint8_t> b(static_cast<size_t>(n) * esz);
  for (auto& x : b) x = static_cast<uint8_t>(test::Rng()() & 0xFF);
  for (int64_t i = 0; i < n; ++i) {
    bool all = true;
    for (size_t k = 0; k < esz; ++k) all = all && b[static_cast<size_t>(i) * esz + k] == 0xFF;
    if (all) b[static_cast<size_t>(i) * esz] = 0;
  }
  return b;
}

std::vector<uint8_t> Bytes(const test::Dev& d, size_t n) {
  std::vector<uint8_t> v(n);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  if (n) {
    EXPECT_EQ(cudaMemcpy(v.data(), d.p, n, cudaMemcpyDeviceToHost), cudaSuccess);
  }
  return v;
}

// The first differing element, or -1.
int64_t FirstDiff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b, size_t esz) {
  if (a.size() != b.size()) return -2;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) return static_cast<int64_t>(i / esz);
  return -1;
}

const size_t kSizes[] = {1, 2, 4, 8};

// ---- host logic (no GPU) ----------------------------------------------------------------------------------------

TEST(StridedCopy, SimplifyDropsOnesAndMergesAxes) {
  // GlobalAveragePool's gradient: [N, C, 1, 1] -> [N, C, H, W] is [N C] rows read once each, [H W] broadcast.
  const Dims out{8, 16, 7, 7};
  cuda::StridedShape s = cuda::SimplifyStrided(out, cuda::ExpandStrides({8, 16, 1, 1}, out));
  EXPECT_EQ(s.dims, (Dims{128, 49}));
  EXPECT_EQ(s.strides, (Dims{1, 0}));
  EXPECT_EQ(s.numel, 8 * 16 * 49);
  // A plain copy is one axis; leading broadcast axes merge with each other but not with the copied block.
  s = cuda::SimplifyStrided({2, 3, 4, 5}, cuda::ExpandStrides({4, 5}, {2, 3, 4, 5}));
  EXPECT_EQ(s.dims, (Dims{6, 20}));
  EXPECT_EQ(s.strides, (Dims{0, 1}));
  // Every dim 1: nothing left to count, one element.
  s = cuda::SimplifyStrided({1, 1, 1}, {0, 0, 0});
  EXPECT_TRUE(s.dims.empty());
  EXPECT_EQ(s.numel, 1);
  // An empty output: numel 0, no axes.
  s = cuda::SimplifyStrided({3, 0, 2}, {2, 0, 1});
  EXPECT_EQ(s.numel, 0);
  EXPECT_TRUE(s.dims.empty());
  // A bounded inner axis does not merge into its outer one; a bounded outer one takes the merged limit.
  s = cuda::SimplifyStrided({4, 5, 6}, {30, 6, 1}, {4, 3, 6});
  EXPECT_EQ(s.dims, (Dims{4, 30}));
  EXPECT_EQ(s.limits, (Dims{4, 18}));
  EXPECT_EQ(s.strides, (Dims{30, 1}));
}

TEST(StridedCopy, BadArgumentsThrowBeforeAnyCudaCall) {
  EXPECT_THROW(cuda::ExpandStrides({3, 2}, {3, 4}), std::invalid_argument);  // 2 does not broadcast to 4
  EXPECT_THROW(cuda::ExpandStrides({2, 3, 4}, {3, 4}), std::invalid_argument);
  EXPECT_NO_THROW(cuda::ExpandStrides({1, 3, 1}, {5, 2, 3, 0}));
  EXPECT_THROW(cuda::Expand(nullptr, {2}, nullptr, {2, 2}, 3, nullptr), std::invalid_argument);
  EXPECT_THROW(cuda::Tile(nullptr, {2, 2}, {1}, nullptr, 4, nullptr), std::invalid_argument);
  EXPECT_THROW(cuda::SimplifyStrided({2, 3}, {3, 1}, {2, 4}), std::invalid_argument);
  EXPECT_THROW(cuda::SimplifyStrided({2, 3}, {3}), std::invalid_argument);
  // Nothing to copy: no launch, no pointer needed (runs without a GPU).
  EXPECT_NO_THROW(cuda::Expand(nullptr, {2, 1}, nullptr, {2, 0}, 4, nullptr));
}

// ---- launchers on the GPU ---------------------------------------------------------------------------------------

struct ExpandCase {
  Dims in, out;
};
std::vector<ExpandCase> ExpandCases() {
  return {
      {{3, 1, 5}, {2, 3, 4, 5}},  // rank increase and a middle dim of 1
      {{}, {2, 3}},               // a scalar
      {{1}, {7}},
      {{4, 1}, {4, 6}},                                      // innermost broadcast
      {{1, 1, 1}, {1, 1, 1}},                                // all ones: one element
      {{5}, {3, 5}},                                         // leading broadcast of a contiguous row
      {{1, 3, 1, 2}, {4, 3, 5, 2}},                          // alternating
      {{64, 1, 1}, {64, 56, 56}},                            // GlobalAveragePool's gradient
      {{2, 1, 3, 1, 2, 1, 2, 1}, {2, 3, 3, 2, 2, 2, 2, 3}},  // rank 8, nothing merges
      {{1, 3}, {2, 3}},
      {{3, 1}, {3, 1}},          // same shape: a copy
      {{1, 1000}, {300, 1000}},  // large rows
  };
}

TEST(StridedCopyGpu, ExpandMatchesTheCpuBitForBit) {
  REQUIRE_CUDA_DEVICE();
  for (size_t esz : kSizes)
    for (const ExpandCase& c : ExpandCases()) {
      SCOPED_TRACE("esz " + std::to_string(esz) + " " + Str(c.in) + " -> " + Str(c.out));
      const int64_t ni = Prod(c.in), no = Prod(c.out);
      const std::vector<uint8_t> x = RandomBytes(ni, esz);
      std::vector<uint8_t> ref(static_cast<size_t>(no) * esz);
      cpu::Expand(x.data(), c.in, ref.data(), c.out, esz);
      auto dx = test::ToDev(x.data(), x.size());
      auto dy = test::NanDev(ref.size());
      ASSERT_NO_THROW(cuda::Expand(dx->p, c.in, dy->p, c.out, esz, nullptr));
      EXPECT_EQ(FirstDiff(Bytes(*dy, ref.size()), ref, esz), -1);
    }
}

TEST(StridedCopyGpu, EmptyExpandWritesNothing) {
  REQUIRE_CUDA_DEVICE();
  auto dx = test::ToDev(RandomBytes(6, 4).data(), 24);
  auto guard = test::NanDev(64);
  ASSERT_NO_THROW(cuda::Expand(dx->p, {2, 1, 3}, guard->p, {2, 0, 3}, 4, nullptr));
  ASSERT_NO_THROW(cuda::Tile(dx->p, {2, 3}, {0, 4}, guard->p, 4, nullptr));
  const std::vector<uint8_t> g = Bytes(*guard, 64);
  for (uint8_t b : g) ASSERT_EQ(b, 0xFF);
}

TEST(StridedCopyGpu, TileMatchesTheCpuBitForBit) {
  REQUIRE_CUDA_DEVICE();
  const std::vector<std::pair<Dims, Dims>> cases = {
      {{3}, {4}},
      {{2, 3}, {1, 1}},
      {{2, 3}, {3, 1}},
      {{2, 3}, {1, 5}},
      {{1, 4, 1}, {2, 3, 5}},
      {{2, 3, 4}, {2, 1, 3}},
      {{5, 7}, {9, 11}},
      {{2, 1, 2, 1, 2, 1, 2, 1}, {1, 2, 1, 2, 1, 2, 1, 2}},
  };
  for (size_t esz : kSizes)
    for (const auto& [in, reps] : cases) {
      SCOPED_TRACE("esz " + std::to_string(esz) + " " + Str(in) + " x " + Str(reps));
      Dims out;
      for (size_t k = 0; k < in.size(); ++k) out.push_back(in[k] * reps[k]);
      const std::vector<uint8_t> x = RandomBytes(Prod(in), esz);
      std::vector<uint8_t> ref(static_cast<size_t>(Prod(out)) * esz);
      cpu::Tile(x.data(), in, reps, ref.data(), esz);
      auto dx = test::ToDev(x.data(), x.size());
      auto dy = test::NanDev(ref.size());
      ASSERT_NO_THROW(cuda::Tile(dx->p, in, reps, dy->p, esz, nullptr));
      EXPECT_EQ(FirstDiff(Bytes(*dy, ref.size()), ref, esz), -1);
    }
}

// A crop with a window past the source's end (ConvTranspose's cropped path): zeros there, the source elsewhere.
TEST(StridedCopyGpu, BoundedCopyZeroFillsPastTheLimits) {
  REQUIRE_CUDA_DEVICE();
  const Dims src{6, 9, 8};  // [planes, rows, cols]
  const Dims dims{6, 7, 9};
  const Dims strides{72, 8, 1};
  const Dims limits{6, 5, 6};      // rows past 5 and cols past 6 are zero
  const int64_t base = 3 * 8 + 2;  // the window starts at row 3, col 2
  for (size_t esz : kSizes) {
    SCOPED_TRACE("esz " + std::to_string(esz));
    const std::vector<uint8_t> x = RandomBytes(Prod(src), esz);
    std::vector<uint8_t> ref(static_cast<size_t>(Prod(dims)) * esz, 0);
    for (int64_t p = 0; p < dims[0]; ++p)
      for (int64_t r = 0; r < dims[1]; ++r)
        for (int64_t c = 0; c < dims[2]; ++c) {
          if (r >= limits[1] || c >= limits[2]) continue;
          const int64_t o = (p * dims[1] + r) * dims[2] + c, i = base + p * strides[0] + r * strides[1] + c;
          std::memcpy(ref.data() + o * static_cast<int64_t>(esz), x.data() + i * static_cast<int64_t>(esz), esz);
        }
    auto dx = test::ToDev(x.data(), x.size());
    auto dy = test::NanDev(ref.size());
    ASSERT_NO_THROW(cuda::StridedCopy(dx->p, base, dims, strides, limits, dy->p, esz, nullptr));
    EXPECT_EQ(FirstDiff(Bytes(*dy, ref.size()), ref, esz), -1);
  }
}

// ---- the executor's nodes -----------------------------------------------------------------------------------------

Tensor Ints(const Dims& v) {
  Tensor t(DataType::kInt64, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.SetDouble(static_cast<int64_t>(i), static_cast<double>(v[i]));
  return t;
}

void ExpectSameBytes(const Tensor& got, const Tensor& want) {
  ASSERT_EQ(DataTypeName(got.dtype()), DataTypeName(want.dtype()));
  ASSERT_EQ(DimsToString(got.dims()), DimsToString(want.dims()));
  ASSERT_EQ(got.nbytes(), want.nbytes());
  if (want.nbytes() == 0) return;
  EXPECT_EQ(std::memcmp(got.raw(), want.raw(), want.nbytes()), 0);
}

// One node on the GPU and on the CPU (input 1 a constant, as exporters give shape and repeats), compared bitwise.
void CompareNode(const std::string& op, const Tensor& x, const Tensor& arg) {
  SCOPED_TRACE(op + " " + DataTypeName(x.dtype()) + " " + Str(x.dims()));
  const std::vector<Tensor> cpu = test::RunOp(op, {x, arg}, {}, 1, 13, {1}, nullptr);
  const std::vector<Tensor> gpu = test::RunOp(op, {x, arg}, {}, 1, 13, {1}, test::Gpu());
  ASSERT_EQ(cpu.size(), 1u);
  ASSERT_EQ(gpu.size(), 1u);
  ExpectSameBytes(gpu[0], cpu[0]);
}

const DataType kTypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16,
                           DataType::kInt64,   DataType::kInt32,   DataType::kBool};

Tensor Random(DataType t, const Dims& dims) {
  // Integers in [-50, 50), bool 0/1 (RandomTensor floors integer draws).
  return t == DataType::kBool ? test::RandomTensor(t, dims, 0, 2) : test::RandomTensor(t, dims, -50, 50);
}

TEST(ExecutorExpandGpu, ExpandMatchesTheCpu) {
  REQUIRE_GPU();
  for (DataType t : kTypes) {
    CompareNode("Expand", Random(t, {3, 1, 5}), Ints({2, 3, 4, 5}));  // rank increase
    CompareNode("Expand", Random(t, {4, 1}), Ints({1, 6}));           // shape smaller than X on an axis: X's dim stays
    CompareNode("Expand", Random(t, {8, 16, 1, 1}), Ints({8, 16, 7, 7}));
    CompareNode("Expand", Random(t, {1}), Ints({5, 1}));
    CompareNode("Expand", Random(t, {2, 3}), Ints({1, 1, 2, 3}));  // same numel: a view or copy
    CompareNode("Expand", Random(t, {2, 1, 3}), Ints({2, 0, 3}));  // empty
  }
}

TEST(ExecutorExpandGpu, TileMatchesTheCpu) {
  REQUIRE_GPU();
  for (DataType t : kTypes) {
    CompareNode("Tile", Random(t, {2, 3}), Ints({3, 2}));
    CompareNode("Tile", Random(t, {1, 4, 1}), Ints({2, 1, 5}));
    CompareNode("Tile", Random(t, {2, 3}), Ints({1, 1}));
    CompareNode("Tile", Random(t, {2, 3}), Ints({0, 2}));  // empty
  }
}

}  // namespace
}  // namespace ot
