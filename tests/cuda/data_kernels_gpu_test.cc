// cuda_ops/data_kernels against the CPU kernels (cpu_ops/transpose, gather, scatter_add, elementwise_cast), bit for
// bit: Transpose of every element size over the tiled, general and copy paths (outputs poisoned twice, with 0x00
// and 0xff bytes, so an unwritten element cannot pass by luck); Gather (embedding table 30522 x 768, int64 and
// int32 indices, negative indices, an outer axis, row sizes that force narrow words) and its bad-index flag;
// GatherGrad (4096 tokens into 30522 x 768 with heavy repeats) equal to cpu::GatherGrad bit for bit and on two runs;
// Cast between f32/f16/bf16 with inf/NaN/overflow/subnormal inputs; Fill.
// *Gpu* tests skip without a device; DataKernels.* (SimplifyTranspose, argument checks) run everywhere.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include "cpu_ops/elementwise_cast.h"
#include "cpu_ops/gather.h"
#include "cpu_ops/scatter_add.h"
#include "cpu_ops/transpose.h"
#include "cuda_ops/data_kernels.h"
#include "cuda_ops/device_info.h"
#include "kernel_common/half.h"
#include "tests/cuda/gpu_test_util.h"

namespace ot {
namespace {

using test::Dev;
using test::Download;
using test::Upload;

using cuda::FloatType;
using cuda::IndexType;

void Sync() {
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

std::vector<uint8_t> RandomBytes(size_t n, std::mt19937& rng) {
  std::vector<uint8_t> b(n);
  for (auto& e : b) e = static_cast<uint8_t>(rng());
  return b;
}

class DataKernelsGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  }
};

// ---- Transpose ----------------------------------------------------------------------------------------------------

TEST_F(DataKernelsGpu, TransposeMatchesCpuBitForBit) {
  struct Case {
    std::vector<int64_t> dims, perm;
  };
  const std::vector<Case> cases = {{{2, 3, 4}, {0, 2, 1}},
                                   {{64, 768}, {1, 0}},
                                   {{2, 3, 4, 5, 6, 7}, {5, 0, 3, 1, 4, 2}},
                                   {{7, 1, 33, 65}, {2, 0, 3, 1}},
                                   {{3, 5}, {0, 1}},
                                   {{12, 128, 64}, {1, 0, 2}},
                                   {{2, 12, 128, 64}, {0, 2, 1, 3}},
                                   {{2, 12, 128, 64}, {0, 1, 3, 2}},
                                   {{1, 1}, {1, 0}},
                                   {{1000, 3}, {1, 0}},
                                   {{3, 1000}, {1, 0}},
                                   {{5, 0, 3}, {2, 1, 0}},
                                   {{33, 31, 2}, {1, 2, 0}},
                                   {{4, 2, 3, 4, 2, 3}, {1, 0, 3, 2, 5, 4}}};
  std::mt19937 rng(17);
  for (size_t esz : {size_t{1}, size_t{2}, size_t{4}, size_t{8}})
    for (const Case& c : cases) {
      int64_t n = 1;
      for (int64_t d : c.dims) n *= d;
      SCOPED_TRACE("esz " + std::to_string(esz) + " case " + std::to_string(&c - cases.data()));
      const auto in = RandomBytes(static_cast<size_t>(n) * esz, rng);
      std::vector<uint8_t> ref(in.size());
      if (n > 0) cpu::Transpose(in.data(), ref.data(), esz, c.dims, c.perm);
      Dev din(in.size()), dout(in.size());
      if (n > 0) Upload(din, in);
      for (int poison : {0x00, 0xff}) {
        CUDA_OK(cudaMemset(dout.p, poison, dout.bytes ? dout.bytes : 1));
        cuda::Transpose(din.p, dout.p, esz, c.dims, c.perm, nullptr);
        Sync();
        EXPECT_EQ(Download<uint8_t>(dout, in.size()), ref) << "poison " << poison;
      }
    }
}

// ---- Gather -------------------------------------------------------------------------------------------------------

template <typename I>
void CheckGather(int64_t outer, int64_t axis_dim, int64_t inner, size_t esz, int64_t num, std::mt19937& rng) {
  SCOPED_TRACE("outer " + std::to_string(outer) + " axis " + std::to_string(axis_dim) + " inner " +
               std::to_string(inner) + " esz " + std::to_string(esz) + " num " + std::to_string(num) +
               (sizeof(I) == 4 ? " int32" : " int64"));
  const auto data = RandomBytes(static_cast<size_t>(outer * axis_dim * inner) * esz, rng);
  std::uniform_int_distribution<int64_t> u(-axis_dim, axis_dim - 1);
  std::vector<I> idx(num);
  for (auto& e : idx) e = static_cast<I>(u(rng));
  ASSERT_EQ(cpu::FindBadIndex(idx.data(), num, axis_dim), -1);
  const size_t out_bytes = static_cast<size_t>(outer * num * inner) * esz;
  std::vector<uint8_t> ref(out_bytes);
  cpu::Gather<I>(data.data(), idx.data(), num, ref.data(), outer, axis_dim, inner * static_cast<int64_t>(esz));
  Dev dd(data.size()), di(num * sizeof(I)), dout(out_bytes), dbad(4);
  Upload(dd, data);
  Upload(di, idx);
  CUDA_OK(cudaMemset(dbad.p, 0, 4));
  for (int poison : {0x00, 0xff}) {
    CUDA_OK(cudaMemset(dout.p, poison, out_bytes));
    cuda::Gather(dd.p, outer, axis_dim, inner, esz, sizeof(I) == 4 ? IndexType::kI32 : IndexType::kI64, di.p, num,
                 dout.p, static_cast<int*>(dbad.p), nullptr);
    Sync();
    EXPECT_TRUE(Download<uint8_t>(dout, out_bytes) == ref) << "poison " << poison;
  }
  EXPECT_EQ(Download<int>(dbad, 1)[0], 0);
}

TEST_F(DataKernelsGpu, GatherMatchesCpuBitForBit) {
  std::mt19937 rng(23);
  CheckGather<int64_t>(1, 30522, 768, 4, 4096, rng);  // embedding lookup, 16-byte words
  CheckGather<int32_t>(1, 30522, 768, 2, 4096, rng);
  CheckGather<int64_t>(1, 1000, 767, 2, 333, rng);  // 1534-byte rows: 2-byte words
  CheckGather<int32_t>(3, 10, 5, 8, 7, rng);        // an outer axis
  CheckGather<int64_t>(4, 9, 3, 1, 11, rng);        // bytes
  CheckGather<int64_t>(1, 1, 1, 4, 1, rng);
}

TEST_F(DataKernelsGpu, GatherOutOfRangeIndexSetsTheFlag) {
  const int64_t V = 10, D = 4;
  std::vector<float> table(V * D);
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<float>(i) + 0.5f;
  const std::vector<int64_t> idx = {3, 10, -11, -1};  // 10 and -11 are out of range
  Dev dt(table.size() * 4), di(idx.size() * 8), dout(idx.size() * D * 4), dbad(4);
  Upload(dt, table);
  Upload(di, idx);
  CUDA_OK(cudaMemset(dbad.p, 0, 4));
  CUDA_OK(cudaMemset(dout.p, 0xff, dout.bytes));
  cuda::Gather(dt.p, 1, V, D, 4, IndexType::kI64, di.p, 4, dout.p, static_cast<int*>(dbad.p), nullptr);
  Sync();
  EXPECT_EQ(Download<int>(dbad, 1)[0], 1);
  const auto out = Download<float>(dout, idx.size() * D);
  for (int64_t d = 0; d < D; ++d) {
    EXPECT_EQ(out[0 * D + d], table[3 * D + d]);
    EXPECT_EQ(out[1 * D + d], 0.f);
    EXPECT_EQ(out[2 * D + d], 0.f);
    EXPECT_EQ(out[3 * D + d], table[9 * D + d]);
  }
}

// ---- GatherGrad ---------------------------------------------------------------------------------------------------

template <typename I, typename T, typename D>
void CheckGatherGrad(int64_t num, int64_t V, int64_t dim, bool with_bad) {
  SCOPED_TRACE("num " + std::to_string(num) + " V " + std::to_string(V) + " D " + std::to_string(dim));
  std::mt19937 rng(31);
  std::uniform_int_distribution<int64_t> u(-V, V - 1), hot(0, std::min<int64_t>(49, V - 1));
  std::uniform_real_distribution<float> val(-1.f, 1.f);
  std::vector<I> idx(num);
  for (int64_t j = 0; j < num; ++j) idx[j] = static_cast<I>(j % 3 == 0 ? hot(rng) : u(rng));  // heavy repeats
  if (with_bad && num > 2) {
    idx[1] = static_cast<I>(V);
    idx[num - 1] = static_cast<I>(-V - 1);
  }
  std::vector<T> dy(num * dim);
  std::vector<float> dyf(num * dim);
  for (size_t i = 0; i < dy.size(); ++i) {
    float f = val(rng);
    if (f == 0.f) f = 0.25f;
    dy[i] = T(f);
    dyf[i] = static_cast<float>(dy[i]);
  }
  // CPU reference over the valid entries (the GPU skips bad ones; the CPU would fail).
  std::vector<I> good_idx;
  std::vector<float> good_dy;
  for (int64_t j = 0; j < num; ++j) {
    const int64_t k = idx[j];
    if (k < -V || k >= V) continue;
    good_idx.push_back(idx[j]);
    good_dy.insert(good_dy.end(), dyf.begin() + j * dim, dyf.begin() + (j + 1) * dim);
  }
  std::vector<float> ref(V * dim);
  const bool cpu_ok = cpu::GatherGrad<float, I>(good_dy.data(), good_idx.data(), static_cast<int64_t>(good_idx.size()),
                                                1, V, dim, ref.data());
  ASSERT_TRUE(cpu_ok);
  const FloatType dyt = std::is_same_v<T, float>     ? FloatType::kF32
                        : std::is_same_v<T, float16> ? FloatType::kF16
                                                     : FloatType::kBF16;
  const FloatType dxt = std::is_same_v<D, float>     ? FloatType::kF32
                        : std::is_same_v<D, float16> ? FloatType::kF16
                                                     : FloatType::kBF16;
  Dev ddy(dy.size() * sizeof(T)), di(num * sizeof(I)), ddx(V * dim * sizeof(D)), dbad(4);
  const size_t wsb = cuda::GatherGradWorkspaceBytes(num, V);
  Dev ws(wsb);
  Upload(ddy, dy);
  Upload(di, idx);
  std::vector<D> first;
  for (int run = 0; run < 2; ++run) {
    CUDA_OK(cudaMemset(dbad.p, 0, 4));
    CUDA_OK(cudaMemset(ddx.p, 0xff, ddx.bytes));
    cuda::GatherGrad(dyt, ddy.p, sizeof(I) == 4 ? IndexType::kI32 : IndexType::kI64, di.p, num, V, dim, dxt, ddx.p,
                     static_cast<int*>(dbad.p), ws.p, wsb, nullptr);
    Sync();
    EXPECT_EQ(Download<int>(dbad, 1)[0], with_bad ? 1 : 0);
    const auto got = Download<D>(ddx, V * dim);
    size_t mism = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const D want = D(ref[i]);
      if (std::memcmp(&got[i], &want, sizeof(D)) != 0 && mism++ < 3)
        ADD_FAILURE() << "element " << i << ": " << static_cast<float>(got[i]) << " vs " << ref[i];
    }
    EXPECT_EQ(mism, 0u);
    if (run == 0)
      first = got;
    else
      EXPECT_EQ(std::memcmp(first.data(), got.data(), got.size() * sizeof(D)), 0) << "runs differ";
  }
}

TEST_F(DataKernelsGpu, GatherGradMatchesCpuBitForBit) {
  CheckGatherGrad<int64_t, float, float>(4096, 30522, 768, false);
  CheckGatherGrad<int32_t, float, float>(1000, 77, 3, false);
  CheckGatherGrad<int64_t, bfloat16, float>(513, 1000, 767, false);
  CheckGatherGrad<int64_t, float16, float16>(300, 500, 64, false);
  CheckGatherGrad<int64_t, float, float>(1, 1, 1, false);
  CheckGatherGrad<int64_t, float, float>(0, 10, 8, false);  // no tokens: zeros
}

TEST_F(DataKernelsGpu, GatherGradSkipsOutOfRangeIndicesAndSetsTheFlag) {
  CheckGatherGrad<int64_t, float, float>(200, 300, 32, true);
  CheckGatherGrad<int32_t, float, float>(200, 300, 32, true);
}

// ---- Cast / Fill
// ------------------------------------------------------------------------------------------------------

template <typename S, typename D>
void CheckCast(FloatType st, FloatType dt) {
  SCOPED_TRACE(std::to_string(static_cast<int>(st)) + " -> " + std::to_string(static_cast<int>(dt)));
  std::mt19937 rng(41);
  std::uniform_real_distribution<float> u(-70000.f, 70000.f), small(-1e-6f, 1e-6f);
  const int64_t n = 1000003;
  std::vector<S> in(n);
  for (int64_t i = 0; i < n; ++i) {
    float f = i % 2 ? u(rng) : small(rng);
    if (i == 0) f = std::numeric_limits<float>::infinity();
    if (i == 1) f = -std::numeric_limits<float>::infinity();
    if (i == 2) f = std::numeric_limits<float>::quiet_NaN();
    if (i == 3) f = 65520.f;
    if (i == 4) f = 5.9604644775390625e-08f;
    if (i == 5) f = -0.f;
    in[i] = S(f);
  }
  std::vector<D> ref(n);
  cpu::Cast<S, D>(in.data(), ref.data(), n);
  Dev din(n * sizeof(S)), dout(n * sizeof(D));
  Upload(din, in);
  CUDA_OK(cudaMemset(dout.p, 0xff, dout.bytes));
  cuda::Cast(st, din.p, dt, dout.p, n, nullptr);
  Sync();
  const auto got = Download<D>(dout, n);
  size_t mism = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float a = static_cast<float>(got[i]), b = static_cast<float>(ref[i]);
    const bool same = (std::isnan(a) && std::isnan(b)) || std::memcmp(&got[i], &ref[i], sizeof(D)) == 0;
    if (!same && mism++ < 3) ADD_FAILURE() << "element " << i << ": " << a << " vs " << b;
  }
  EXPECT_EQ(mism, 0u);
}

TEST_F(DataKernelsGpu, CastMatchesCpuBitForBit) {
  CheckCast<float, float16>(FloatType::kF32, FloatType::kF16);
  CheckCast<float, bfloat16>(FloatType::kF32, FloatType::kBF16);
  CheckCast<float16, float>(FloatType::kF16, FloatType::kF32);
  CheckCast<bfloat16, float>(FloatType::kBF16, FloatType::kF32);
  CheckCast<float16, bfloat16>(FloatType::kF16, FloatType::kBF16);
  CheckCast<bfloat16, float16>(FloatType::kBF16, FloatType::kF16);
  CheckCast<float, float>(FloatType::kF32, FloatType::kF32);
}

TEST_F(DataKernelsGpu, FillWritesEveryElement) {
  const int64_t n = 100001;
  for (size_t esz : {size_t{1}, size_t{2}, size_t{4}, size_t{8}}) {
    Dev d(n * esz + 16);
    CUDA_OK(cudaMemset(d.p, 0, d.bytes));
    const uint64_t bits = 0x0123456789abcdefull;
    cuda::Fill(d.p, esz, bits, n, nullptr);
    Sync();
    const auto got = Download<uint8_t>(d, n * esz + 16);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(std::memcmp(got.data() + i * esz, &bits, esz), 0) << "esz " << esz << " element " << i;
    for (size_t i = n * esz; i < got.size(); ++i) ASSERT_EQ(got[i], 0) << "wrote past the end";
  }
  Dev h(n * 2);
  cuda::FillFloat(FloatType::kBF16, h.p, -1.5f, n, nullptr);
  Sync();
  const auto hb = Download<uint16_t>(h, n);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hb[i], FloatToBf16Bits(-1.5f));
}

// ---- host-side logic (no GPU needed)
// ----------------------------------------------------------------------------------

TEST(DataKernels, SimplifyTransposeDropsOnesAndMergesRuns) {
  auto s = cuda::SimplifyTranspose({2, 1, 3}, {2, 1, 0});
  EXPECT_EQ(s.in_dims, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(s.perm, (std::vector<int>{1, 0}));
  EXPECT_EQ(s.numel, 6);
  s = cuda::SimplifyTranspose({2, 3, 4}, {0, 1, 2});  // identity: a copy
  EXPECT_TRUE(s.perm.empty());
  EXPECT_EQ(s.numel, 24);
  s = cuda::SimplifyTranspose({2, 3, 4, 5}, {0, 2, 3, 1});  // axes 2,3 stay adjacent
  EXPECT_EQ(s.in_dims, (std::vector<int64_t>{2, 3, 20}));
  EXPECT_EQ(s.perm, (std::vector<int>{0, 2, 1}));
  s = cuda::SimplifyTranspose({2, 12, 128, 64}, {0, 2, 1, 3});
  EXPECT_EQ(s.in_dims, (std::vector<int64_t>{2, 12, 128, 64}));
  EXPECT_EQ(s.perm, (std::vector<int>{0, 2, 1, 3}));
  s = cuda::SimplifyTranspose({4, 5, 6}, {1, 2, 0});  // (5,6) merged: a 2-D swap
  EXPECT_EQ(s.in_dims, (std::vector<int64_t>{4, 30}));
  EXPECT_EQ(s.perm, (std::vector<int>{1, 0}));
  s = cuda::SimplifyTranspose({1, 1}, {1, 0});
  EXPECT_TRUE(s.perm.empty());
  s = cuda::SimplifyTranspose({5, 0, 3}, {2, 1, 0});
  EXPECT_EQ(s.numel, 0);
  s = cuda::SimplifyTranspose({}, {});
  EXPECT_TRUE(s.perm.empty());
  EXPECT_EQ(s.numel, 1);
}

TEST(DataKernels, ArgumentsAreChecked) {
  EXPECT_THROW(cuda::SimplifyTranspose({2, 3}, {0, 0}), std::invalid_argument);
  EXPECT_THROW(cuda::SimplifyTranspose({2, 3}, {0}), std::invalid_argument);
  EXPECT_THROW(cuda::SimplifyTranspose({2, -3}, {1, 0}), std::invalid_argument);
  int dummy = 0;
  EXPECT_THROW(cuda::Transpose(&dummy, &dummy, 3, {2, 3}, {1, 0}, nullptr), std::invalid_argument);
  EXPECT_THROW(cuda::Gather(&dummy, 1, 4, 4, 16, IndexType::kI64, &dummy, 1, &dummy, nullptr, nullptr),
               std::invalid_argument);
  EXPECT_THROW(cuda::Fill(&dummy, 3, 0, 1, nullptr), std::invalid_argument);
  EXPECT_THROW(cuda::GatherGrad(FloatType::kF32, &dummy, IndexType::kI64, &dummy, int64_t{1} << 31, 10, 4,
                                FloatType::kF32, &dummy, nullptr, &dummy, 1 << 20, nullptr),
               std::invalid_argument);
}

}  // namespace
}  // namespace ot
