// cuda_ops/cudnn_conv.h against float64 loops (cpu::NaiveConv / NaiveConvGradData / NaiveConvGradWeight on the
// inputs as rounded to the tested type). Every output element is checked (outputs start as NaN) against a bound
// tol x (the same sum over absolute values): fp32 1e-4 (FFT and Winograd algorithms round more than a direct sum),
// fp16 3e-3, bf16 2e-2 (fp32 accumulation; one rounding to the output, two with the bias). Shapes: padding, strides,
// dilations, groups (depthwise too), odd sizes, 1-D, 3-D, and end padding that cuDNN's symmetric padding expresses.
// Tests named *Gpu* (label `gpu`) skip without a device; CudnnConv.* check the host-side geometry without one.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "cpu_ops/conv.h"
#include "cpu_ops/conv_grad.h"
#include "cuda_ops/cudnn_conv.h"
#include "tests/cuda/cudnn_test_util.h"

namespace ot {
namespace {

using cuda::ConvDesc;
using cuda::ConvPass;
using cuda::FloatType;
using test::HostT;

struct Case {
  int64_t n, c_in, c_out, group;
  std::vector<int64_t> in, kernel, strides, dilations, pad_begin, pad_end;
};

ConvDesc MakeDesc(const Case& c, FloatType t, bool deterministic = false) {
  ConvDesc d;
  d.type = t;
  d.deterministic = deterministic;
  d.n = c.n;
  d.c_in = c.c_in;
  d.c_out = c.c_out;
  d.group = c.group;
  d.in_spatial = c.in;
  d.kernel = c.kernel;
  d.strides = c.strides;
  d.dilations = c.dilations;
  d.pad_begin = c.pad_begin;
  d.pad_end = c.pad_end;
  for (size_t i = 0; i < c.in.size(); ++i)
    d.out_spatial.push_back(
        (c.in[i] + c.pad_begin[i] + c.pad_end[i] - ((c.kernel[i] - 1) * c.dilations[i] + 1)) / c.strides[i] + 1);
  return d;
}

cpu::ConvSpec SpecOf(const ConvDesc& d, bool bias) {
  cpu::ConvSpec s;
  s.n = d.n;
  s.c_in = d.c_in;
  s.c_out = d.c_out;
  s.group = d.group;
  test::CopyWindowGeometry(d, s);
  s.has_bias = bias;
  return s;
}

int64_t Prod(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

std::vector<Case> Cases() {
  return {
      {2, 3, 5, 1, {7, 9}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}},                    // same padding, odd sizes
      {3, 4, 6, 2, {11, 8}, {3, 2}, {2, 2}, {1, 1}, {1, 0}, {1, 0}},                   // groups, strides, odd kernel
      {2, 4, 6, 2, {10, 9}, {3, 3}, {2, 1}, {2, 2}, {2, 1}, {2, 1}},                   // dilation
      {2, 4, 4, 4, {9, 10}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}},                   // depthwise
      {3, 2, 3, 1, {17}, {5}, {2}, {1}, {2}, {2}},                                     // 1-D
      {2, 2, 3, 1, {5, 6, 7}, {3, 3, 2}, {1, 2, 1}, {1, 1, 1}, {1, 1, 0}, {1, 1, 0}},  // 3-D
      {2, 3, 4, 1, {7, 7}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {2, 2}},                    // end pad cuDNN need not apply
      {4, 16, 32, 1, {20, 20}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}},                // a CNN layer's size
  };
}

double Tol(FloatType t) { return t == FloatType::kF32 ? 1e-4 : t == FloatType::kF16 ? 3e-3 : 2e-2; }

// One case in one type: forward (with bias), backward-data, backward-filter against the float64 loops.
void CheckCase(const Case& c, FloatType t) {
  const ConvDesc d = MakeDesc(c, t);
  SCOPED_TRACE(cuda::ToString(d));
  ASSERT_NO_THROW(cuda::ValidateConv(d));
  ASSERT_EQ(cuda::ConvUnsupportedReason(d), "");
  const int64_t nx = d.n * d.c_in * Prod(d.in_spatial), ny = d.n * d.c_out * Prod(d.out_spatial),
                nw = d.c_out * (d.c_in / d.group) * Prod(d.kernel);
  const HostT x = test::RandomT(t, nx), w = test::RandomT(t, nw), b = test::RandomT(t, d.c_out),
              dy = test::RandomT(t, ny);
  const std::vector<double> xd = x.Doubles(), wd = w.Doubles(), bd = b.Doubles(), dyd = dy.Doubles();
  const std::vector<double> xa = test::Abs(xd), wa = test::Abs(wd), ba = test::Abs(bd), dya = test::Abs(dyd);
  const cpu::ConvSpec with_bias = SpecOf(d, true), plain = SpecOf(d, false);
  const double tol = Tol(t);
  const size_t esz = cuda::FloatTypeSize(t);
  auto dx_ = test::ToDev(x), dw_ = test::ToDev(w), db_ = test::ToDev(b), ddy_ = test::ToDev(dy);

  {  // forward
    std::vector<double> ref(static_cast<size_t>(ny)), mag(static_cast<size_t>(ny));
    cpu::NaiveConv<double>(with_bias, xd.data(), wd.data(), bd.data(), ref.data());
    cpu::NaiveConv<double>(with_bias, xa.data(), wa.data(), ba.data(), mag.data());
    const size_t ws = cuda::ConvWorkspaceBytes(d, ConvPass::kForward);
    auto wsp = test::NanDev(ws);
    auto y = test::NanDev(static_cast<size_t>(ny) * esz);
    cuda::ConvForward(d, dx_->p, dw_->p, db_->p, y->p, wsp->p, ws, nullptr);
    test::ExpectWithin(test::FromDev(*y, t, ny).Doubles(), ref, mag, tol,
                       "forward (" + cuda::ConvAlgorithmName(d, ConvPass::kForward) + ")");
  }
  {  // backward data
    std::vector<double> ref(static_cast<size_t>(nx)), mag(static_cast<size_t>(nx));
    cpu::NaiveConvGradData<double>(plain, dyd.data(), wd.data(), ref.data());
    cpu::NaiveConvGradData<double>(plain, dya.data(), wa.data(), mag.data());
    const size_t ws = cuda::ConvWorkspaceBytes(d, ConvPass::kBackwardData);
    auto wsp = test::NanDev(ws);
    auto dx = test::NanDev(static_cast<size_t>(nx) * esz);
    cuda::ConvBackwardData(d, ddy_->p, dw_->p, dx->p, wsp->p, ws, nullptr);
    test::ExpectWithin(test::FromDev(*dx, t, nx).Doubles(), ref, mag, tol,
                       "backward data (" + cuda::ConvAlgorithmName(d, ConvPass::kBackwardData) + ")");
  }
  {  // backward filter
    std::vector<double> ref(static_cast<size_t>(nw)), mag(static_cast<size_t>(nw));
    cpu::NaiveConvGradWeight<double>(plain, dyd.data(), xd.data(), ref.data());
    cpu::NaiveConvGradWeight<double>(plain, dya.data(), xa.data(), mag.data());
    const size_t ws = cuda::ConvWorkspaceBytes(d, ConvPass::kBackwardFilter);
    auto wsp = test::NanDev(ws);
    auto dw = test::NanDev(static_cast<size_t>(nw) * esz);
    cuda::ConvBackwardFilter(d, ddy_->p, dx_->p, dw->p, wsp->p, ws, nullptr);
    test::ExpectWithin(test::FromDev(*dw, t, nw).Doubles(), ref, mag, tol,
                       "backward filter (" + cuda::ConvAlgorithmName(d, ConvPass::kBackwardFilter) + ")");
  }
}

TEST(CudnnConvGpu, MatchesFloat64LoopsInEveryType) {
  REQUIRE_CUDA_DEVICE();
  for (FloatType t : {FloatType::kF32, FloatType::kF16, FloatType::kBF16}) {
    SCOPED_TRACE(test::Name(t));
    for (const Case& c : Cases()) CheckCase(c, t);
  }
}

// --deterministic: deterministic algorithms only; the backward passes (where cuDNN's default algorithms may add
// with atomics) give the same bits on every run.
TEST(CudnnConvGpu, DeterministicPassesRepeatBitwise) {
  REQUIRE_CUDA_DEVICE();
  const Case c{8, 32, 32, 1, {28, 28}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}};
  for (FloatType t : {FloatType::kF32, FloatType::kF16}) {
    const ConvDesc d = MakeDesc(c, t, true);
    SCOPED_TRACE(cuda::ToString(d));
    const size_t esz = cuda::FloatTypeSize(t);
    const int64_t nx = d.n * d.c_in * Prod(d.in_spatial), ny = d.n * d.c_out * Prod(d.out_spatial),
                  nw = d.c_out * d.c_in * Prod(d.kernel);
    auto x = test::ToDev(test::RandomT(t, nx)), w = test::ToDev(test::RandomT(t, nw)),
         dy = test::ToDev(test::RandomT(t, ny));
    for (ConvPass pass : {ConvPass::kBackwardData, ConvPass::kBackwardFilter}) {
      const size_t ws = cuda::ConvWorkspaceBytes(d, pass);
      const int64_t n = pass == ConvPass::kBackwardData ? nx : nw;
      std::vector<uint8_t> first;
      for (int run = 0; run < 3; ++run) {
        auto wsp = test::NanDev(ws);
        auto out = test::NanDev(static_cast<size_t>(n) * esz);
        if (pass == ConvPass::kBackwardData)
          cuda::ConvBackwardData(d, dy->p, w->p, out->p, wsp->p, ws, nullptr);
        else
          cuda::ConvBackwardFilter(d, dy->p, x->p, out->p, wsp->p, ws, nullptr);
        const test::HostT h = test::FromDev(*out, t, n);
        if (run == 0)
          first = h.bytes;
        else
          EXPECT_EQ(h.bytes, first) << cuda::ToString(pass) << " run " << run;
      }
    }
  }
}

// The algorithm is chosen once per (desc, pass): the executor's workspace query at plan time, then launches.
TEST(CudnnConvGpu, AlgorithmChoiceIsCached) {
  REQUIRE_CUDA_DEVICE();
  const ConvDesc d = MakeDesc({2, 3, 4, 1, {9, 9}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}}, FloatType::kF32);
  const size_t ws = cuda::ConvWorkspaceBytes(d, ConvPass::kForward);
  const int64_t queries = cuda::ConvAlgorithmQueries();
  EXPECT_EQ(cuda::ConvWorkspaceBytes(d, ConvPass::kForward), ws);
  auto x = test::ToDev(test::RandomT(FloatType::kF32, 2 * 3 * 81)),
       w = test::ToDev(test::RandomT(FloatType::kF32, 4 * 3 * 9));
  auto y = test::NanDev(2 * 4 * 81 * 4), wsp = test::NanDev(ws);
  for (int i = 0; i < 3; ++i) cuda::ConvForward(d, x->p, w->p, nullptr, y->p, wsp->p, ws, nullptr);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cuda::ConvAlgorithmQueries(), queries);
  // Exact fp32 never runs with cuDNN's default math (which allows TF32 on Ampere and newer).
  EXPECT_NE(cuda::ConvAlgorithmName(d, ConvPass::kForward).find("FMA_MATH"), std::string::npos)
      << cuda::ConvAlgorithmName(d, ConvPass::kForward);
}

TEST(CudnnConvGpu, ATooSmallWorkspaceIsAnArgumentError) {
  REQUIRE_CUDA_DEVICE();
  const ConvDesc d = MakeDesc({4, 16, 32, 1, {20, 20}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}}, FloatType::kF32);
  const size_t ws = cuda::ConvWorkspaceBytes(d, ConvPass::kBackwardFilter);
  if (ws == 0) GTEST_SKIP() << "the chosen algorithm needs no workspace";
  auto x = test::ToDev(test::RandomT(FloatType::kF32, 4 * 16 * 400)),
       dy = test::ToDev(test::RandomT(FloatType::kF32, 4 * 32 * 400));
  auto dw = test::NanDev(32 * 16 * 9 * 4);
  EXPECT_THROW(cuda::ConvBackwardFilter(d, dy->p, x->p, dw->p, nullptr, 0, nullptr), std::invalid_argument);
}

// ---- host-side geometry (no GPU needed)
// --------------------------------------------------------------------------------

TEST(CudnnConv, ValidatesTheGeometry) {
  ConvDesc d = MakeDesc({2, 4, 6, 2, {9, 9}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}}, FloatType::kF32);
  EXPECT_NO_THROW(cuda::ValidateConv(d));
  ConvDesc bad = d;
  bad.out_spatial[1] = 8;
  EXPECT_THROW(cuda::ValidateConv(bad), std::invalid_argument);
  bad = d;
  bad.c_out = 5;  // not divisible by group
  EXPECT_THROW(cuda::ValidateConv(bad), std::invalid_argument);
  bad = d;
  bad.strides = {1};
  EXPECT_THROW(cuda::ValidateConv(bad), std::invalid_argument);
  bad = d;
  bad.pad_begin = {-1, 1};
  EXPECT_THROW(cuda::ValidateConv(bad), std::invalid_argument);
}

TEST(CudnnConv, NamesWhatTheSymmetricLegacyApiCannotExpress) {
  // SAME_UPPER with an even kernel: pads (0, 1); pad 0 on both sides gives one output fewer.
  ConvDesc upper = MakeDesc({1, 1, 1, 1, {6, 6}, {2, 2}, {1, 1}, {1, 1}, {0, 0}, {1, 1}}, FloatType::kF32);
  ASSERT_NO_THROW(cuda::ValidateConv(upper));
  EXPECT_NE(cuda::ConvUnsupportedReason(upper).find("symmetrically"), std::string::npos)
      << cuda::ConvUnsupportedReason(upper);
  // SAME_LOWER: pads (1, 0); pad 1 on both sides gives one output more.
  ConvDesc lower = MakeDesc({1, 1, 1, 1, {6, 6}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, {0, 0}}, FloatType::kF32);
  EXPECT_NE(cuda::ConvUnsupportedReason(lower), "");
  // A larger end pad that no window reaches, and a smaller one no window crosses: the same windows.
  EXPECT_EQ(cuda::ConvUnsupportedReason(MakeDesc({1, 1, 1, 1, {7}, {3}, {2}, {1}, {1}, {2}}, FloatType::kF16)), "");
  EXPECT_EQ(cuda::ConvUnsupportedReason(MakeDesc({1, 1, 1, 1, {8}, {3}, {2}, {1}, {1}, {0}}, FloatType::kF16)), "");
  // 4 spatial dims.
  ConvDesc four =
      MakeDesc({1, 1, 1, 1, {3, 3, 3, 3}, {1, 1, 1, 1}, {1, 1, 1, 1}, {1, 1, 1, 1}, {0, 0, 0, 0}, {0, 0, 0, 0}},
               FloatType::kF32);
  EXPECT_NE(cuda::ConvUnsupportedReason(four).find("4-D"), std::string::npos);
  // 2^31 elements.
  ConvDesc huge = MakeDesc({1 << 16, 64, 64, 1, {32, 32}, {1, 1}, {1, 1}, {1, 1}, {0, 0}, {0, 0}}, FloatType::kF32);
  EXPECT_NE(cuda::ConvUnsupportedReason(huge).find("2^31"), std::string::npos);
}

TEST(CudnnConv, DescriptionsNameEveryField) {
  ConvDesc d = MakeDesc({2, 4, 6, 2, {9, 10}, {3, 3}, {2, 1}, {1, 2}, {1, 2}, {1, 2}}, FloatType::kBF16, true);
  const std::string s = cuda::ToString(d);
  for (const char* part : {"bf16", "n=2", "c_in=4", "c_out=6", "group=2", "in=[9,10]", "strides=[2,1]",
                           "dilations=[1,2]", "pads=[1,2][1,2]", "deterministic"})
    EXPECT_NE(s.find(part), std::string::npos) << part << " in " << s;
}

}  // namespace
}  // namespace ot
