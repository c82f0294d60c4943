// cuda_ops/cudnn_batchnorm.h against float64 loops of the CPU kernels' formulas (executor/kernels/norm.cc,
// internal_norm.cc): training forward with the ONNX running update (biased batch variance), inference forward,
// backward through the batch statistics and with given statistics; fp32/fp16/bf16 X, fp32 parameters; both
// implementations (cuDNN where it runs, and our kernels, forced). Every output element is checked (outputs start as
// NaN) against tol x the magnitude of its terms: fp32 1e-5 (2e-5 for the backward's dX), fp16 2e-3, bf16 1.6e-2;
// the running statistics and the parameter gradients (fp32 sums) 1e-5 in every type.
#include <gtest/gtest.h>

#include <cmath>

#include "cuda_ops/cudnn_batchnorm.h"
#include "tests/cuda/cudnn_test_util.h"

namespace ot {
namespace {

using cuda::BatchNormDesc;
using cuda::FloatType;
using test::HostT;

struct Shape3 {
  int64_t n, c, s;
};

std::vector<Shape3> Shapes() { return {{4, 3, 35}, {6, 5, 1}, {3, 16, 13}, {2, 2, 2500}}; }

double Tol(FloatType t) { return t == FloatType::kF32 ? 1e-5 : t == FloatType::kF16 ? 2e-3 : 1.6e-2; }

int64_t Idx(const Shape3& z, int64_t b, int64_t ch, int64_t j) { return (b * z.c + ch) * z.s + j; }

// Batch mean and biased variance per channel, two passes in double (cpu::ChannelMoments).
void Moments(const Shape3& z, const std::vector<double>& x, std::vector<double>* mean, std::vector<double>* var) {
  const double m = static_cast<double>(z.n * z.s);
  mean->assign(static_cast<size_t>(z.c), 0.0);
  var->assign(static_cast<size_t>(z.c), 0.0);
  for (int64_t ch = 0; ch < z.c; ++ch) {
    double s = 0;
    for (int64_t b = 0; b < z.n; ++b)
      for (int64_t j = 0; j < z.s; ++j) s += x[static_cast<size_t>(Idx(z, b, ch, j))];
    const double mu = s / m;
    double v = 0;
    for (int64_t b = 0; b < z.n; ++b)
      for (int64_t j = 0; j < z.s; ++j) v += std::pow(x[static_cast<size_t>(Idx(z, b, ch, j))] - mu, 2);
    (*mean)[static_cast<size_t>(ch)] = mu;
    (*var)[static_cast<size_t>(ch)] = v / m;
  }
}

// y and |scale xhat| + |bias| (the bound's scale).
void Normalize(const Shape3& z, const std::vector<double>& x, const std::vector<float>& scale,
               const std::vector<float>& bias, const std::vector<double>& mean, const std::vector<double>& var,
               double eps, std::vector<double>* y, std::vector<double>* mag) {
  y->resize(x.size());
  mag->resize(x.size());
  for (int64_t b = 0; b < z.n; ++b)
    for (int64_t ch = 0; ch < z.c; ++ch)
      for (int64_t j = 0; j < z.s; ++j) {
        const size_t i = static_cast<size_t>(Idx(z, b, ch, j));
        const double xh = (x[i] - mean[static_cast<size_t>(ch)]) / std::sqrt(var[static_cast<size_t>(ch)] + eps);
        (*y)[i] = xh * scale[static_cast<size_t>(ch)] + bias[static_cast<size_t>(ch)];
        (*mag)[i] = std::fabs(xh * scale[static_cast<size_t>(ch)]) + std::fabs(bias[static_cast<size_t>(ch)]) + 1e-3;
      }
}

struct Inputs {
  HostT x, dy;
  std::vector<float> scale, bias, rmean, rvar;
};

Inputs MakeInputs(const Shape3& z, FloatType t) {
  Inputs in;
  in.x = test::RandomT(t, z.n * z.c * z.s, -2, 3);  // a non-zero mean
  in.dy = test::RandomT(t, z.n * z.c * z.s);
  in.scale = test::RandomF(z.c, 0.5, 1.5);
  in.bias = test::RandomF(z.c, -1, 1);
  in.rmean = test::RandomF(z.c, -1, 1);
  in.rvar = test::RandomF(z.c, 0.5, 2);
  return in;
}

BatchNormDesc Desc(const Shape3& z, FloatType t, bool own) {
  BatchNormDesc d;
  d.n = z.n;
  d.c = z.c;
  d.spatial = z.s;
  d.xt = t;
  d.eps = 1e-5;
  d.own_kernels = own;
  return d;
}

void CheckForward(const Shape3& z, FloatType t, bool own) {
  const BatchNormDesc d = Desc(z, t, own);
  SCOPED_TRACE(cuda::ToString(d) + (cuda::BatchNormUsesCudnn(d) ? " (cuDNN)" : " (our kernels)"));
  const Inputs in = MakeInputs(z, t);
  const std::vector<double> x = in.x.Doubles();
  const int64_t total = z.n * z.c * z.s;
  const size_t esz = cuda::FloatTypeSize(t);
  const double momentum = 0.9, tol = Tol(t);
  auto dx = test::ToDev(in.x), ds = test::ToDev(in.scale), db = test::ToDev(in.bias), dm = test::ToDev(in.rmean),
       dv = test::ToDev(in.rvar);

  // Training: batch statistics; running = m running + (1 - m) batch with the BIASED batch variance.
  std::vector<double> mean, var, y, mag;
  Moments(z, x, &mean, &var);
  Normalize(z, x, in.scale, in.bias, mean, var, d.eps, &y, &mag);
  std::vector<double> rm(static_cast<size_t>(z.c)), rv(static_cast<size_t>(z.c));
  for (size_t ch = 0; ch < rm.size(); ++ch) {
    rm[ch] = momentum * in.rmean[ch] + (1 - momentum) * mean[ch];
    rv[ch] = momentum * in.rvar[ch] + (1 - momentum) * var[ch];
  }
  const size_t ws = cuda::BatchNormWorkspaceBytes(d);
  auto wsp = test::NanDev(ws);
  auto dy = test::NanDev(static_cast<size_t>(total) * esz);
  auto drm = test::NanDev(static_cast<size_t>(z.c) * 4), drv = test::NanDev(static_cast<size_t>(z.c) * 4);
  cuda::BatchNormForwardTraining(d, dx->p, ds->as<float>(), db->as<float>(), dm->as<float>(), dv->as<float>(), momentum,
                                 dy->p, drm->as<float>(), drv->as<float>(), wsp->p, ws, nullptr);
  test::ExpectWithin(test::FromDev(*dy, t, total).Doubles(), y, mag, tol, "training y");
  test::ExpectWithin(test::FloatsFromDev(*drm, z.c), rm, test::Abs(rm), 1e-6, "running mean");
  test::ExpectWithin(test::FloatsFromDev(*drv, z.c), rv, test::Abs(rv), 1e-6, "running var");

  // Inference with the given statistics.
  std::vector<double> gm(in.rmean.begin(), in.rmean.end()), gv(in.rvar.begin(), in.rvar.end());
  Normalize(z, x, in.scale, in.bias, gm, gv, d.eps, &y, &mag);
  auto yi = test::NanDev(static_cast<size_t>(total) * esz);
  cuda::BatchNormForwardInference(d, dx->p, ds->as<float>(), db->as<float>(), dm->as<float>(), dv->as<float>(), yi->p,
                                  nullptr);
  test::ExpectWithin(test::FromDev(*yi, t, total).Doubles(), y, mag, tol, "inference y");
}

void CheckBackward(const Shape3& z, FloatType t, bool own, bool training) {
  const BatchNormDesc d = Desc(z, t, own);
  SCOPED_TRACE(cuda::ToString(d) + (training ? " training" : " inference") +
               (cuda::BatchNormUsesCudnn(d) && training ? " (cuDNN)" : " (our kernels)"));
  const Inputs in = MakeInputs(z, t);
  const std::vector<double> x = in.x.Doubles(), g = in.dy.Doubles();
  const int64_t total = z.n * z.c * z.s;
  const size_t esz = cuda::FloatTypeSize(t);
  std::vector<double> mean, var;
  if (training) {
    Moments(z, x, &mean, &var);
  } else {
    mean.assign(in.rmean.begin(), in.rmean.end());
    var.assign(in.rvar.begin(), in.rvar.end());
  }
  // internal_norm.cc BatchNormGrad: dScale = sum(dy xhat), dB = sum(dy); dX = k (dy - mean(dy) - xhat mean(dy xhat))
  // (training) or k dy (inference), k = scale / sqrt(var + eps).
  const double m = static_cast<double>(z.n * z.s);
  std::vector<double> dsr(static_cast<size_t>(z.c)), dbr(static_cast<size_t>(z.c)), dsm(static_cast<size_t>(z.c)),
      dbm(static_cast<size_t>(z.c)), dxr(x.size()), dxm(x.size());
  for (int64_t ch = 0; ch < z.c; ++ch) {
    const size_t c = static_cast<size_t>(ch);
    const double r = 1 / std::sqrt(var[c] + d.eps);
    for (int64_t b = 0; b < z.n; ++b)
      for (int64_t j = 0; j < z.s; ++j) {
        const size_t i = static_cast<size_t>(Idx(z, b, ch, j));
        const double xh = (x[i] - mean[c]) * r;
        dbr[c] += g[i];
        dsr[c] += g[i] * xh;
        dbm[c] += std::fabs(g[i]);
        dsm[c] += std::fabs(g[i] * xh);
      }
    const double k = in.scale[c] * r;
    for (int64_t b = 0; b < z.n; ++b)
      for (int64_t j = 0; j < z.s; ++j) {
        const size_t i = static_cast<size_t>(Idx(z, b, ch, j));
        const double xh = (x[i] - mean[c]) * r;
        dxr[i] = training ? k * (g[i] - dbr[c] / m - xh * dsr[c] / m) : k * g[i];
        dxm[i] = std::fabs(k) * (std::fabs(g[i]) + (training ? dbm[c] / m + std::fabs(xh) * dsm[c] / m : 0.0));
      }
  }
  auto dx_in = test::ToDev(in.x), ddy = test::ToDev(in.dy), ds = test::ToDev(in.scale), dm = test::ToDev(in.rmean),
       dv = test::ToDev(in.rvar);
  const size_t ws = cuda::BatchNormWorkspaceBytes(d);
  auto wsp = test::NanDev(ws);
  auto ddx = test::NanDev(static_cast<size_t>(total) * esz);
  auto dds = test::NanDev(static_cast<size_t>(z.c) * 4), ddb = test::NanDev(static_cast<size_t>(z.c) * 4);
  cuda::BatchNormBackward(d, ddy->p, dx_in->p, ds->as<float>(), training ? nullptr : dm->as<float>(),
                          training ? nullptr : dv->as<float>(), ddx->p, dds->as<float>(), ddb->as<float>(), wsp->p, ws,
                          nullptr);
  test::ExpectWithin(test::FromDev(*ddx, t, total).Doubles(), dxr, dxm, t == FloatType::kF32 ? 2e-5 : Tol(t), "dX");
  test::ExpectWithin(test::FloatsFromDev(*dds, z.c), dsr, dsm, 1e-5, "dScale");
  test::ExpectWithin(test::FloatsFromDev(*ddb, z.c), dbr, dbm, 1e-5, "dBias");

  // Unwanted parameter gradients (null) are allowed; dX is still right.
  auto ddx2 = test::NanDev(static_cast<size_t>(total) * esz);
  cuda::BatchNormBackward(d, ddy->p, dx_in->p, ds->as<float>(), training ? nullptr : dm->as<float>(),
                          training ? nullptr : dv->as<float>(), ddx2->p, nullptr, nullptr, wsp->p, ws, nullptr);
  test::ExpectWithin(test::FromDev(*ddx2, t, total).Doubles(), dxr, dxm, t == FloatType::kF32 ? 2e-5 : Tol(t),
                     "dX without dScale/dBias");
}

TEST(CudnnBatchNormGpu, ForwardMatchesFloat64Loops) {
  REQUIRE_CUDA_DEVICE();
  for (FloatType t : {FloatType::kF32, FloatType::kF16, FloatType::kBF16})
    for (bool own : {false, true})
      for (const Shape3& z : Shapes()) CheckForward(z, t, own);
}

TEST(CudnnBatchNormGpu, BackwardMatchesFloat64Loops) {
  REQUIRE_CUDA_DEVICE();
  for (FloatType t : {FloatType::kF32, FloatType::kF16, FloatType::kBF16})
    for (bool own : {false, true})
      for (bool training : {true, false})
        for (const Shape3& z : Shapes()) CheckBackward(z, t, own, training);
}

// Our kernels' sums run over a fixed partition in a fixed order: the same bits on every run.
TEST(CudnnBatchNormGpu, OwnKernelsRepeatBitwise) {
  REQUIRE_CUDA_DEVICE();
  const Shape3 z{16, 8, 900};
  const BatchNormDesc d = Desc(z, FloatType::kF32, true);
  const Inputs in = MakeInputs(z, FloatType::kF32);
  const int64_t total = z.n * z.c * z.s;
  auto x = test::ToDev(in.x), dy = test::ToDev(in.dy), s = test::ToDev(in.scale), b = test::ToDev(in.bias),
       rm = test::ToDev(in.rmean), rv = test::ToDev(in.rvar);
  const size_t ws = cuda::BatchNormWorkspaceBytes(d);
  std::vector<uint8_t> first;
  for (int run = 0; run < 3; ++run) {
    auto wsp = test::NanDev(ws), y = test::NanDev(static_cast<size_t>(total) * 4),
         dx = test::NanDev(static_cast<size_t>(total) * 4), om = test::NanDev(32), ov = test::NanDev(32),
         gs = test::NanDev(32), gb = test::NanDev(32);
    cuda::BatchNormForwardTraining(d, x->p, s->as<float>(), b->as<float>(), rm->as<float>(), rv->as<float>(), 0.9, y->p,
                                   om->as<float>(), ov->as<float>(), wsp->p, ws, nullptr);
    cuda::BatchNormBackward(d, dy->p, x->p, s->as<float>(), nullptr, nullptr, dx->p, gs->as<float>(), gb->as<float>(),
                            wsp->p, ws, nullptr);
    std::vector<uint8_t> all;
    for (const auto* dev : {y.get(), dx.get(), om.get(), ov.get(), gs.get(), gb.get()}) {
      const HostT h = test::FromDev(*dev, FloatType::kF32, static_cast<int64_t>(dev->bytes / 4));
      all.insert(all.end(), h.bytes.begin(), h.bytes.end());
    }
    if (run == 0)
      first = all;
    else
      EXPECT_EQ(all, first) << "run " << run;
  }
}

// The running statistics may be updated in place (an output aliasing its input).
TEST(CudnnBatchNormGpu, RunningStatisticsInPlace) {
  REQUIRE_CUDA_DEVICE();
  const Shape3 z{4, 3, 10};
  for (bool own : {false, true}) {
    const BatchNormDesc d = Desc(z, FloatType::kF32, own);
    const Inputs in = MakeInputs(z, FloatType::kF32);
    std::vector<double> mean, var;
    Moments(z, in.x.Doubles(), &mean, &var);
    auto x = test::ToDev(in.x), s = test::ToDev(in.scale), b = test::ToDev(in.bias), rm = test::ToDev(in.rmean),
         rv = test::ToDev(in.rvar);
    const size_t ws = cuda::BatchNormWorkspaceBytes(d);
    auto wsp = test::NanDev(ws), y = test::NanDev(static_cast<size_t>(z.n * z.c * z.s) * 4);
    cuda::BatchNormForwardTraining(d, x->p, s->as<float>(), b->as<float>(), rm->as<float>(), rv->as<float>(), 0.25,
                                   y->p, rm->as<float>(), rv->as<float>(), wsp->p, ws, nullptr);
    std::vector<double> erm(3), erv(3);
    for (size_t ch = 0; ch < 3; ++ch) {
      erm[ch] = 0.25 * in.rmean[ch] + 0.75 * mean[ch];
      erv[ch] = 0.25 * in.rvar[ch] + 0.75 * var[ch];
    }
    test::ExpectWithin(test::FloatsFromDev(*rm, 3), erm, test::Abs(erm), 1e-6, "running mean in place");
    test::ExpectWithin(test::FloatsFromDev(*rv, 3), erv, test::Abs(erv), 1e-6, "running var in place");
  }
}

// ---- host side (no GPU needed)
// ------------------------------------------------------------------------------------------

TEST(CudnnBatchNorm, ChoosesTheImplementationAndChecksArguments) {
  BatchNormDesc d = Desc({4, 3, 5}, FloatType::kF32, false);
  EXPECT_TRUE(cuda::BatchNormUsesCudnn(d));
  d.xt = FloatType::kF16;
  EXPECT_TRUE(cuda::BatchNormUsesCudnn(d));
  d.xt = FloatType::kBF16;  // the legacy API documents no bfloat16 X
  EXPECT_FALSE(cuda::BatchNormUsesCudnn(d));
  d.xt = FloatType::kF32;
  d.own_kernels = true;
  EXPECT_FALSE(cuda::BatchNormUsesCudnn(d));
  d.own_kernels = false;
  d.n = int64_t{1} << 20;
  d.spatial = 1 << 12;  // 2^32 x 3 elements: int indexing would overflow
  EXPECT_FALSE(cuda::BatchNormUsesCudnn(d));
  EXPECT_THROW(cuda::ValidateBatchNorm(Desc({0, 3, 5}, FloatType::kF32, false)), std::invalid_argument);
  BatchNormDesc e = Desc({4, 3, 5}, FloatType::kF32, false);
  e.eps = 0;
  EXPECT_THROW(cuda::ValidateBatchNorm(e), std::invalid_argument);
  EXPECT_GT(cuda::BatchNormWorkspaceBytes(Desc({4, 3, 5}, FloatType::kF32, false)), 0u);
  EXPECT_NE(cuda::ToString(Desc({4, 3, 5}, FloatType::kBF16, true)).find("bf16"), std::string::npos);
}

}  // namespace
}  // namespace ot
