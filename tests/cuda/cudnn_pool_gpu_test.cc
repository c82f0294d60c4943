// cuda_ops/cudnn_pool.h against the CPU's pooling loops run in float64 (cpu::Pool, cpu::MaxPoolGrad,
// cpu::AvgPoolGrad on the inputs as rounded to the tested type). Every output element is checked (outputs start as
// NaN). Max pooling forward must be exact (it selects an input); its backward routes dY exactly where windows do
// not overlap and adds in fp32 where they do; averages are within tol x the sum of |terms| / count (fp32 1e-5,
// fp16 2e-3, bf16 1.6e-2). Max-pooling inputs have no ties inside a window (a random permutation-like pattern of
// distinct values), because cuDNN and the CPU may route a tie's gradient to different elements.
#include <gtest/gtest.h>

#include <cmath>

#include "cpu_ops/pool.h"
#include "cpu_ops/pool_grad.h"
#include "cuda_ops/cudnn_pool.h"
#include "tests/cuda/cudnn_test_util.h"

namespace ot {
namespace {

using cuda::FloatType;
using cuda::PoolDesc;
using cuda::PoolMode;
using test::HostT;

struct Case {
  int64_t n, c;
  std::vector<int64_t> in, kernel, strides, pad_begin, pad_end;
};

int64_t Prod(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

PoolDesc MakeDesc(const Case& c, FloatType t, PoolMode mode, bool deterministic = false) {
  PoolDesc d;
  d.type = t;
  d.mode = mode;
  d.deterministic = deterministic;
  d.n = c.n;
  d.c = c.c;
  d.in_spatial = c.in;
  d.kernel = c.kernel;
  d.strides = c.strides;
  d.dilations = std::vector<int64_t>(c.in.size(), 1);
  d.pad_begin = c.pad_begin;
  d.pad_end = c.pad_end;
  for (size_t i = 0; i < c.in.size(); ++i)
    d.out_spatial.push_back((c.in[i] + c.pad_begin[i] + c.pad_end[i] - c.kernel[i]) / c.strides[i] + 1);
  return d;
}

cpu::PoolSpec SpecOf(const PoolDesc& d) {
  cpu::PoolSpec s = test::PoolSpecGeometry(d);
  s.kind = d.mode == PoolMode::kMax ? cpu::PoolKind::kMax : cpu::PoolKind::kAvg;
  s.count_include_pad = d.mode == PoolMode::kAvgIncludePad;
  return s;
}

std::vector<Case> Cases() {
  return {
      {2, 3, {8, 8}, {2, 2}, {2, 2}, {0, 0}, {0, 0}},                 // the fashion CNN's MaxPool(2)
      {2, 3, {9, 10}, {3, 3}, {2, 2}, {1, 1}, {1, 1}},                // padded, strided, odd sizes
      {1, 4, {7, 6}, {3, 3}, {1, 1}, {1, 1}, {1, 1}},                 // overlapping windows (backward adds)
      {3, 2, {13}, {3}, {2}, {1}, {1}},                               // 1-D
      {1, 2, {4, 6, 6}, {2, 3, 2}, {2, 1, 2}, {0, 1, 0}, {0, 1, 1}},  // 3-D, an end pad no window needs
      {2, 5, {6, 7}, {6, 7}, {1, 1}, {0, 0}, {0, 0}},                 // global
  };
}

// Distinct values inside every window: ((idx * a + b) mod 251 - 125) / 64 with a random a in [1, 250] and b: two
// elements less than 251 apart in the flat index differ (251 is prime), and every value is exact in bf16.
HostT NoTies(FloatType t, int64_t n) {
  const int64_t a = 1 + static_cast<int64_t>(test::Rng()() % 250), b = static_cast<int64_t>(test::Rng()() % 251);
  HostT h(t, n);
  for (int64_t i = 0; i < n; ++i) h.Set(i, static_cast<double>((i * a + b) % 251 - 125) / 64.0);
  return h;
}

double Tol(FloatType t) { return t == FloatType::kF32 ? 1e-5 : t == FloatType::kF16 ? 2e-3 : 1.6e-2; }

void CheckCase(const Case& c, FloatType t, PoolMode mode, bool deterministic) {
  const PoolDesc d = MakeDesc(c, t, mode, deterministic);
  SCOPED_TRACE(cuda::ToString(d));
  ASSERT_NO_THROW(cuda::ValidatePool(d));
  ASSERT_EQ(cuda::PoolUnsupportedReason(d), "");
  const cpu::PoolSpec spec = SpecOf(d);
  const int64_t nx = d.n * d.c * Prod(d.in_spatial), ny = d.n * d.c * Prod(d.out_spatial);
  const bool max = mode == PoolMode::kMax;
  const HostT x = max ? NoTies(t, nx) : test::RandomT(t, nx), dy = test::RandomT(t, ny);
  const std::vector<double> xd = x.Doubles(), dyd = dy.Doubles();
  const size_t esz = cuda::FloatTypeSize(t);
  const double tol = Tol(t);
  auto dxin = test::ToDev(x), ddy = test::ToDev(dy);

  // forward
  std::vector<double> ref(static_cast<size_t>(ny)), mag(static_cast<size_t>(ny));
  cpu::Pool<double>(spec, xd.data(), ref.data(), nullptr);
  const std::vector<double> xa = test::Abs(xd);
  cpu::Pool<double>(spec, xa.data(), mag.data(), nullptr);
  auto y = test::NanDev(static_cast<size_t>(ny) * esz);
  const size_t fws = cuda::PoolForwardWorkspaceBytes(d);
  auto fwsp = test::NanDev(fws);
  cuda::PoolForward(d, dxin->p, y->p, fwsp->p, fws, nullptr);
  // Max: the selected input itself (bound 0); averages: rounded once from an fp32 sum.
  test::ExpectWithin(test::FromDev(*y, t, ny).Doubles(), ref, mag, max ? 0.0 : tol, "forward");

  // backward
  std::vector<double> dref(static_cast<size_t>(nx)), dmag(static_cast<size_t>(nx));
  const std::vector<double> dya = test::Abs(dyd);
  if (max) {
    cpu::MaxPoolGrad<double>(spec, dyd.data(), xd.data(), dref.data());
    cpu::MaxPoolGrad<double>(spec, dya.data(), xd.data(), dmag.data());
  } else {
    cpu::AvgPoolGrad<double>(spec, dyd.data(), dref.data());
    cpu::AvgPoolGrad<double>(spec, dya.data(), dmag.data());
  }
  const size_t ws = cuda::PoolBackwardWorkspaceBytes(d);
  auto wsp = test::NanDev(ws);
  auto dx = test::NanDev(static_cast<size_t>(nx) * esz);
  cuda::PoolBackward(d, ddy->p, max ? dxin->p : nullptr, dx->p, wsp->p, ws, nullptr);
  test::ExpectWithin(test::FromDev(*dx, t, nx).Doubles(), dref, dmag, tol, "backward");
}

TEST(CudnnPoolGpu, MatchesFloat64LoopsInEveryType) {
  REQUIRE_CUDA_DEVICE();
  for (FloatType t : {FloatType::kF32, FloatType::kF16, FloatType::kBF16})
    for (PoolMode mode : {PoolMode::kMax, PoolMode::kAvgIncludePad, PoolMode::kAvgExcludePad})
      for (const Case& c : Cases()) {
        if (mode == PoolMode::kAvgIncludePad && !cuda::PoolUnsupportedReason(MakeDesc(c, t, mode)).empty())
          continue;  // count_include_pad past the end padding: refused (checked below)
        CheckCase(c, t, mode, false);
      }
}

TEST(CudnnPoolGpu, DeterministicMaxPoolingMatchesAndRepeatsBitwise) {
  REQUIRE_CUDA_DEVICE();
  const Case c{4, 8, {15, 15}, {3, 3}, {1, 1}, {1, 1}, {1, 1}};  // every input in up to 9 windows
  for (FloatType t : {FloatType::kF32, FloatType::kF16}) {
    CheckCase(c, t, PoolMode::kMax, true);
    const PoolDesc d = MakeDesc(c, t, PoolMode::kMax, true);
    const int64_t nx = 4 * 8 * 225;
    auto x = test::ToDev(NoTies(t, nx)), dy = test::ToDev(test::RandomT(t, nx));
    const size_t ws = cuda::PoolBackwardWorkspaceBytes(d);
    std::vector<uint8_t> first;
    for (int run = 0; run < 3; ++run) {
      auto wsp = test::NanDev(ws);
      auto dx = test::NanDev(static_cast<size_t>(nx) * cuda::FloatTypeSize(t));
      cuda::PoolBackward(d, dy->p, x->p, dx->p, wsp->p, ws, nullptr);
      const HostT h = test::FromDev(*dx, t, nx);
      if (run == 0)
        first = h.bytes;
      else
        EXPECT_EQ(h.bytes, first) << "run " << run;
    }
  }
}

// A NaN in a window is that window's max (cpu::Pool keeps a NaN once met).
TEST(CudnnPoolGpu, MaxPoolingPropagatesNaN) {
  REQUIRE_CUDA_DEVICE();
  const PoolDesc d = MakeDesc({1, 1, {4, 4}, {2, 2}, {2, 2}, {0, 0}, {0, 0}}, FloatType::kF32, PoolMode::kMax);
  std::vector<float> x(16, 1.f);
  x[5] = std::nanf("");
  auto dxin = test::ToDev(x);
  auto y = test::NanDev(4 * sizeof(float));
  ASSERT_EQ(cudaMemset(y->p, 0, 16), cudaSuccess);
  cuda::PoolForward(d, dxin->p, y->p, nullptr, 0, nullptr);
  const std::vector<double> got = test::FloatsFromDev(*y, 4);
  EXPECT_TRUE(std::isnan(got[0]));
  EXPECT_EQ(got[1], 1.0);
  EXPECT_EQ(got[2], 1.0);
  EXPECT_EQ(got[3], 1.0);
}

// ---- host-side geometry (no GPU needed)
// --------------------------------------------------------------------------------

TEST(CudnnPool, NamesWhatCudnnCannotExpress) {
  const Case ok{1, 1, {8, 8}, {3, 3}, {2, 2}, {1, 1}, {1, 1}};
  PoolDesc d = MakeDesc(ok, FloatType::kF32, PoolMode::kMax);
  ASSERT_NO_THROW(cuda::ValidatePool(d));
  EXPECT_EQ(cuda::PoolUnsupportedReason(d), "");
  PoolDesc dil = d;
  dil.dilations = {2, 1};
  EXPECT_NE(cuda::PoolUnsupportedReason(dil).find("dilation"), std::string::npos);
  // ceil_mode: 8 with window 3, stride 2, no pads gives 3 outputs (floor) or 4 (ceil).
  PoolDesc ceil = MakeDesc({1, 1, {8, 8}, {3, 3}, {2, 2}, {0, 0}, {0, 0}}, FloatType::kF32, PoolMode::kMax);
  ceil.out_spatial = {4, 4};
  EXPECT_NE(cuda::PoolUnsupportedReason(ceil).find("ceil_mode"), std::string::npos);
  // ceil_mode where it changes nothing (the windows tile the input) runs.
  EXPECT_EQ(cuda::PoolUnsupportedReason(
                MakeDesc({1, 1, {8, 8}, {2, 2}, {2, 2}, {0, 0}, {0, 0}}, FloatType::kF32, PoolMode::kMax)),
            "");
  // A pad as large as the window.
  PoolDesc big = MakeDesc({1, 1, {8, 8}, {2, 2}, {1, 1}, {2, 2}, {2, 2}}, FloatType::kF32, PoolMode::kAvgExcludePad);
  EXPECT_NE(cuda::PoolUnsupportedReason(big).find("pad"), std::string::npos);
  // count_include_pad where a ceil-mode window passes the end padding: 6 with pads (1, 0), window 2, stride 2 has 4
  // windows in ceil mode -- cuDNN's count with pad 1 on both sides -- but the last, [5, 7), ends past 6 + 0, where
  // ONNX divides by 1 and cuDNN by 2. Max pooling and the padding-excluding average run it.
  PoolDesc inc = MakeDesc({1, 1, {6}, {2}, {2}, {1}, {0}}, FloatType::kF32, PoolMode::kAvgIncludePad);
  inc.out_spatial = {4};
  EXPECT_NE(cuda::PoolUnsupportedReason(inc).find("count_include_pad"), std::string::npos)
      << cuda::PoolUnsupportedReason(inc);
  inc.mode = PoolMode::kAvgExcludePad;
  EXPECT_EQ(cuda::PoolUnsupportedReason(inc), "");
  inc.mode = PoolMode::kMax;
  EXPECT_EQ(cuda::PoolUnsupportedReason(inc), "");
  PoolDesc four = MakeDesc({1, 1, {2, 2, 2, 2}, {1, 1, 1, 1}, {1, 1, 1, 1}, {0, 0, 0, 0}, {0, 0, 0, 0}},
                           FloatType::kF32, PoolMode::kMax);
  EXPECT_NE(cuda::PoolUnsupportedReason(four).find("4-D"), std::string::npos);
}

TEST(CudnnPool, WorkspaceIsTheRecomputedOutputForMaxOnly) {
  PoolDesc d = MakeDesc({2, 3, {8, 8}, {2, 2}, {2, 2}, {0, 0}, {0, 0}}, FloatType::kF16, PoolMode::kMax);
  EXPECT_EQ(cuda::PoolBackwardWorkspaceBytes(d), 256u * ((2 * 3 * 16 * 2 + 255) / 256));
  EXPECT_EQ(cuda::PoolForwardWorkspaceBytes(d), 0u);
  d.mode = PoolMode::kAvgExcludePad;
  EXPECT_EQ(cuda::PoolBackwardWorkspaceBytes(d), 0u);
  // bf16 runs widened to fp32: X and Y in the forward; dY, dX (and X, Y for max) in the backward.
  d.type = FloatType::kBF16;
  auto a256 = [](size_t b) { return (b + 255) / 256 * 256; };
  const size_t x32 = a256(2 * 3 * 64 * 4), y32 = a256(2 * 3 * 16 * 4);
  EXPECT_EQ(cuda::PoolForwardWorkspaceBytes(d), x32 + y32);
  EXPECT_EQ(cuda::PoolBackwardWorkspaceBytes(d), y32 + x32);
  d.mode = PoolMode::kMax;
  EXPECT_EQ(cuda::PoolBackwardWorkspaceBytes(d), y32 + y32 + x32 + x32);
}

}  // namespace
}  // namespace ot
