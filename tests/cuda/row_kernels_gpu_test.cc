// cuda_ops/row_kernels against the repo's CPU kernels (cpu_ops/norm, softmax, loss, row_grad) and float64 host
// references, on fresh seeded random inputs (never zeros), with every output poisoned with NaN bytes (0xff) before
// the launch so an element left unwritten fails. Tolerance: relative L2 error ||gpu - ref|| / ||ref|| below 1e-5 for
// float32 and 1e-2 for float16/bfloat16 (the inputs of both sides are the same stored values); deterministic
// reductions (LayerNorm dgamma/dbeta, ReduceRowsToColumns, the loss sums) are compared bit for bit across two runs.
// Tests named *Gpu* skip without a device; RowKernels.* check host-side logic and run everywhere.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include "cpu_ops/loss.h"
#include "cpu_ops/norm.h"
#include "cpu_ops/row_grad.h"
#include "cpu_ops/softmax.h"
#include "cuda_ops/device_info.h"
#include "cuda_ops/row_kernels.h"
#include "kernel_common/half.h"
#include "tests/cuda/gpu_test_util.h"

namespace ot {
namespace {

using test::Dev;
using test::Download;
using test::Upload;

using cuda::FloatType;
using cuda::IndexType;
using cuda::LossReduction;

template <typename T>
FloatType TypeOf() {
  if constexpr (std::is_same_v<T, float>)
    return FloatType::kF32;
  else if constexpr (std::is_same_v<T, float16>)
    return FloatType::kF16;
  else
    return FloatType::kBF16;
}
template <typename T>
const char* Name() {
  if constexpr (std::is_same_v<T, float>)
    return "f32";
  else if constexpr (std::is_same_v<T, float16>)
    return "f16";
  else
    return "bf16";
}
template <typename T>
double Tol() {
  return std::is_same_v<T, float> ? 1e-5 : 1e-2;
}

// Random values in [lo, hi) away from zero, stored as T.
template <typename T>
std::vector<T> Random(size_t n, std::mt19937& rng, float lo = -2.f, float hi = 2.f) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<T> v(n);
  for (auto& e : v) {
    float f = u(rng);
    if (std::fabs(f) < 1e-3f) f = 0.5f;
    e = T(f);
  }
  return v;
}

template <typename T>
std::vector<double> ToD(const std::vector<T>& v) {
  std::vector<double> d(v.size());
  for (size_t i = 0; i < v.size(); ++i) d[i] = static_cast<double>(static_cast<float>(v[i]));
  return d;
}

void Poison(const Dev& d) { ASSERT_EQ(cudaMemset(d.p, 0xff, d.bytes), cudaSuccess); }
void Sync() {
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// Relative L2 error; every element of got must be finite (not NaN poison) where ref is.
void ExpectClose(const std::vector<double>& got, const std::vector<double>& ref, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  double num = 0, den = 0;
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isfinite(ref[i]) && !std::isfinite(got[i])) {
      if (bad++ < 3) ADD_FAILURE() << what << ": element " << i << " is " << got[i] << ", expected " << ref[i];
      continue;
    }
    num += (got[i] - ref[i]) * (got[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  EXPECT_EQ(bad, 0u) << what << ": non-finite elements";
  const double rel = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  EXPECT_LT(rel, tol) << what << ": relative L2 error " << rel;
}

class RowKernelsGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  }
};

const std::vector<std::pair<int64_t, int64_t>> kShapes = {{1, 1},    {4096, 768}, {7, 3},    {5, 767},
                                                          {3, 3072}, {1, 30522},  {4096, 1}, {33, 1000}};

// ---- LayerNorm forward --------------------------------------------------------------------------------------------

template <typename T>
void CheckLayerNormForward(bool f32_params, bool with_beta) {
  std::mt19937 rng(1234);
  for (auto [rows, cols] : kShapes) {
    SCOPED_TRACE(std::string(Name<T>()) + " rows " + std::to_string(rows) + " cols " + std::to_string(cols) +
                 (f32_params ? " f32 params" : "") + (with_beta ? "" : " no beta"));
    const size_t n = static_cast<size_t>(rows * cols);
    auto x = Random<T>(n, rng, -3.f, 5.f);
    auto g = Random<T>(static_cast<size_t>(cols), rng, 0.5f, 1.5f);  // stored as T: exact as float too
    auto b = Random<T>(static_cast<size_t>(cols), rng);
    std::vector<float> gf(g.size()), bf(b.size());
    for (size_t j = 0; j < g.size(); ++j) {
      gf[j] = static_cast<float>(g[j]);
      bf[j] = static_cast<float>(b[j]);
    }
    const double eps = 1e-5;
    std::vector<T> yref(n);
    std::vector<float> mref(rows), iref(rows);
    cpu::LayerNorm<T>(rows, cols, x.data(), g.data(), with_beta ? b.data() : nullptr, {}, {}, eps, yref.data(),
                      mref.data(), iref.data());
    Dev dx(n * sizeof(T)), dy(n * sizeof(T)), dg(cols * 4), db(cols * 4), dm(rows * 4), di(rows * 4);
    Upload(dx, x);
    if (f32_params) {
      Upload(dg, gf);
      Upload(db, bf);
    } else {
      Upload(dg, g);
      Upload(db, b);
    }
    Poison(dy);
    Poison(dm);
    Poison(di);
    cuda::LayerNormForward(rows, cols, TypeOf<T>(), dx.p, f32_params ? FloatType::kF32 : TypeOf<T>(), dg.p,
                           with_beta ? db.p : nullptr, eps, dy.p, dm.as<float>(), di.as<float>(), nullptr);
    Sync();
    ExpectClose(ToD(Download<T>(dy, n)), ToD(yref), Tol<T>(), "y");
    ExpectClose(ToD(Download<float>(dm, rows)), ToD(mref), 1e-5, "mean");
    ExpectClose(ToD(Download<float>(di, rows)), ToD(iref), 1e-5, "invstd");
  }
}

TEST_F(RowKernelsGpu, LayerNormForwardMatchesCpu) {
  CheckLayerNormForward<float>(false, true);
  CheckLayerNormForward<float>(false, false);
  CheckLayerNormForward<float16>(false, true);
  CheckLayerNormForward<bfloat16>(false, true);
  CheckLayerNormForward<float16>(true, true);
  CheckLayerNormForward<bfloat16>(true, false);
}

// ---- LayerNorm backward -------------------------------------------------------------------------------------------

// float64 reference of the backward (the formulas of cpu::LayerNormGradF32).
void LayerNormGradRef(int64_t rows, int64_t cols, const std::vector<double>& dy, const std::vector<double>& x,
                      const std::vector<double>& g, const float* mean, const float* inv, double eps,
                      std::vector<double>& dx, std::vector<double>& dg, std::vector<double>& db) {
  dx.assign(dy.size(), 0);
  dg.assign(cols, 0);
  db.assign(cols, 0);
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = x.data() + r * cols;
    const double* dyr = dy.data() + r * cols;
    double mu, rs;
    if (mean) {
      mu = mean[r];
      rs = inv[r];
    } else {
      double s = 0;
      for (int64_t j = 0; j < cols; ++j) s += xr[j];
      mu = s / cols;
      double v = 0;
      for (int64_t j = 0; j < cols; ++j) v += (xr[j] - mu) * (xr[j] - mu);
      rs = 1.0 / std::sqrt(v / cols + eps);
    }
    double sg = 0, sgx = 0;
    for (int64_t j = 0; j < cols; ++j) {
      const double xh = (xr[j] - mu) * rs, gg = dyr[j] * g[j];
      sg += gg;
      sgx += gg * xh;
      dg[j] += dyr[j] * xh;
      db[j] += dyr[j];
    }
    sg /= cols;
    sgx /= cols;
    for (int64_t j = 0; j < cols; ++j) {
      const double xh = (xr[j] - mu) * rs;
      dx[r * cols + j] = rs * (dyr[j] * g[j] - sg - xh * sgx);
    }
  }
}

template <typename T>
void CheckLayerNormBackward(bool saved, bool f32_params) {
  std::mt19937 rng(99);
  for (auto [rows, cols] : kShapes) {
    SCOPED_TRACE(std::string(Name<T>()) + " rows " + std::to_string(rows) + " cols " + std::to_string(cols) +
                 (saved ? " saved stats" : " recomputed stats") + (f32_params ? " f32 params" : ""));
    const size_t n = static_cast<size_t>(rows * cols);
    auto x = Random<T>(n, rng, -3.f, 5.f);
    auto dyv = Random<T>(n, rng);
    auto g = Random<T>(static_cast<size_t>(cols), rng, 0.5f, 1.5f);
    std::vector<float> gf(g.size());
    for (size_t j = 0; j < g.size(); ++j) gf[j] = static_cast<float>(g[j]);
    const double eps = 1e-5;
    // The forward's saved statistics, from the CPU.
    std::vector<T> ytmp(n);
    std::vector<float> mean(rows), inv(rows);
    cpu::LayerNorm<T>(rows, cols, x.data(), g.data(), nullptr, {}, {}, eps, ytmp.data(), mean.data(), inv.data());
    std::vector<double> rdx, rdg, rdb;
    LayerNormGradRef(rows, cols, ToD(dyv), ToD(x), ToD(g), saved ? mean.data() : nullptr, saved ? inv.data() : nullptr,
                     eps, rdx, rdg, rdb);
    const FloatType pt = f32_params ? FloatType::kF32 : TypeOf<T>();
    const size_t ps = f32_params ? 4 : sizeof(T);
    Dev ddy(n * sizeof(T)), dxx(n * sizeof(T)), dg(cols * ps), dm(rows * 4), di(rows * 4), ddx(n * sizeof(T)),
        ddg(cols * ps), ddb(cols * ps);
    const size_t wsb = cuda::LayerNormBackwardWorkspaceBytes(rows, cols);
    Dev ws(wsb);
    Upload(ddy, dyv);
    Upload(dxx, x);
    if (f32_params)
      Upload(dg, gf);
    else
      Upload(dg, g);
    Upload(dm, mean);
    Upload(di, inv);
    std::vector<uint8_t> first_dx, first_dg, first_db;
    for (int run = 0; run < 2; ++run) {
      Poison(ddx);
      Poison(ddg);
      Poison(ddb);
      cuda::LayerNormBackward(rows, cols, TypeOf<T>(), ddy.p, dxx.p, pt, dg.p, saved ? dm.as<float>() : nullptr,
                              saved ? di.as<float>() : nullptr, eps, ddx.p, ddg.p, ddb.p, ws.p, wsb, nullptr);
      Sync();
      auto bdx = Download<uint8_t>(ddx, n * sizeof(T));
      auto bdg = Download<uint8_t>(ddg, cols * ps);
      auto bdb = Download<uint8_t>(ddb, cols * ps);
      if (run == 0) {
        first_dx = bdx;
        first_dg = bdg;
        first_db = bdb;
        continue;
      }
      EXPECT_EQ(bdx, first_dx) << "dx differs between two runs";
      EXPECT_EQ(bdg, first_dg) << "dgamma differs between two runs";
      EXPECT_EQ(bdb, first_db) << "dbeta differs between two runs";
    }
    ExpectClose(ToD(Download<T>(ddx, n)), rdx, Tol<T>(), "dx");
    if (f32_params) {
      ExpectClose(ToD(Download<float>(ddg, cols)), rdg, 1e-5, "dgamma");
      ExpectClose(ToD(Download<float>(ddb, cols)), rdb, 1e-5, "dbeta");
    } else {
      ExpectClose(ToD(Download<T>(ddg, cols)), rdg, Tol<T>(), "dgamma");
      ExpectClose(ToD(Download<T>(ddb, cols)), rdb, Tol<T>(), "dbeta");
    }
    if constexpr (std::is_same_v<T, float>) {
      // The repo's float32 CPU kernel too.
      std::vector<double> gd = ToD(g), cdg(cols), cdb(cols);
      std::vector<float> cdx(n);
      cpu::LayerNormGradF32(rows, cols, dyv.data(), x.data(), gd.data(), saved ? mean.data() : nullptr,
                            saved ? inv.data() : nullptr, eps, cdx.data(), cdg.data(), cdb.data());
      ExpectClose(ToD(Download<float>(ddx, n)), ToD(cdx), 1e-5, "dx vs cpu::LayerNormGradF32");
      ExpectClose(ToD(Download<float>(ddg, cols)), cdg, 1e-5, "dgamma vs cpu::LayerNormGradF32");
      ExpectClose(ToD(Download<float>(ddb, cols)), cdb, 1e-5, "dbeta vs cpu::LayerNormGradF32");
    }
  }
}

TEST_F(RowKernelsGpu, LayerNormBackwardMatchesCpuAndIsDeterministic) {
  CheckLayerNormBackward<float>(true, true);
  CheckLayerNormBackward<float>(false, true);
  CheckLayerNormBackward<float16>(true, false);
  CheckLayerNormBackward<float16>(true, true);
  CheckLayerNormBackward<bfloat16>(false, true);
}

TEST_F(RowKernelsGpu, LayerNormBackwardInPlaceDx) {
  // dx written over dy: the column sums run first, so dgamma/dbeta are those of the original dy.
  std::mt19937 rng(5);
  const int64_t rows = 300, cols = 768;
  const size_t n = rows * cols;
  auto x = Random<float>(n, rng), dyv = Random<float>(n, rng), g = Random<float>(cols, rng, 0.5f, 1.5f);
  std::vector<double> rdx, rdg, rdb;
  LayerNormGradRef(rows, cols, ToD(dyv), ToD(x), ToD(g), nullptr, nullptr, 1e-5, rdx, rdg, rdb);
  Dev ddy(n * 4), dxx(n * 4), dg(cols * 4), ddg(cols * 4), ddb(cols * 4);
  const size_t wsb = cuda::LayerNormBackwardWorkspaceBytes(rows, cols);
  Dev ws(wsb);
  Upload(ddy, dyv);
  Upload(dxx, x);
  Upload(dg, g);
  Poison(ddg);
  Poison(ddb);
  cuda::LayerNormBackward(rows, cols, FloatType::kF32, ddy.p, dxx.p, FloatType::kF32, dg.p, nullptr, nullptr, 1e-5,
                          ddy.p, ddg.p, ddb.p, ws.p, wsb, nullptr);
  Sync();
  ExpectClose(ToD(Download<float>(ddy, n)), rdx, 1e-5, "dx in place");
  ExpectClose(ToD(Download<float>(ddg, cols)), rdg, 1e-5, "dgamma");
  ExpectClose(ToD(Download<float>(ddb, cols)), rdb, 1e-5, "dbeta");
}

// ---- Softmax ------------------------------------------------------------------------------------------------------

template <typename T>
void CheckSoftmaxForward(bool log) {
  std::mt19937 rng(7);
  for (auto [rows, cols] : kShapes) {
    SCOPED_TRACE(std::string(Name<T>()) + (log ? " LogSoftmax" : " Softmax") + " rows " + std::to_string(rows) +
                 " cols " + std::to_string(cols));
    const size_t n = rows * cols;
    auto x = Random<T>(n, rng, -8.f, 8.f);
    std::vector<T> ref(n);
    cpu::Softmax<T>(log ? cpu::SoftmaxKind::kLogSoftmax : cpu::SoftmaxKind::kSoftmax, rows, cols, 1, x.data(),
                    ref.data());
    Dev dx(n * sizeof(T)), dy(n * sizeof(T));
    Upload(dx, x);
    Poison(dy);
    cuda::SoftmaxForward(log, rows, cols, TypeOf<T>(), dx.p, dy.p, nullptr);
    Sync();
    ExpectClose(ToD(Download<T>(dy, n)), ToD(ref), Tol<T>(), "y");
  }
}

TEST_F(RowKernelsGpu, SoftmaxForwardMatchesCpu) {
  for (bool log : {false, true}) {
    CheckSoftmaxForward<float>(log);
    CheckSoftmaxForward<float16>(log);
    CheckSoftmaxForward<bfloat16>(log);
  }
}

template <typename T>
void CheckSoftmaxBackward(bool log) {
  std::mt19937 rng(8);
  for (auto [rows, cols] : kShapes) {
    SCOPED_TRACE(std::string(Name<T>()) + (log ? " LogSoftmax" : " Softmax") + " rows " + std::to_string(rows) +
                 " cols " + std::to_string(cols));
    const size_t n = rows * cols;
    auto x = Random<T>(n, rng, -4.f, 4.f);
    std::vector<T> y(n);
    cpu::Softmax<T>(log ? cpu::SoftmaxKind::kLogSoftmax : cpu::SoftmaxKind::kSoftmax, rows, cols, 1, x.data(),
                    y.data());
    auto dyv = Random<T>(n, rng);
    const std::vector<double> yd = ToD(y), dd = ToD(dyv);
    std::vector<double> ref(n);
    for (int64_t r = 0; r < rows; ++r) {
      double s = 0;
      for (int64_t j = 0; j < cols; ++j) s += log ? dd[r * cols + j] : dd[r * cols + j] * yd[r * cols + j];
      for (int64_t j = 0; j < cols; ++j) {
        const size_t i = r * cols + j;
        ref[i] = log ? dd[i] - std::exp(yd[i]) * s : yd[i] * (dd[i] - s);
      }
    }
    Dev ddy(n * sizeof(T)), dyy(n * sizeof(T)), ddx(n * sizeof(T));
    Upload(ddy, dyv);
    Upload(dyy, y);
    Poison(ddx);
    cuda::SoftmaxBackward(log, rows, cols, TypeOf<T>(), ddy.p, dyy.p, ddx.p, nullptr);
    Sync();
    const auto got = ToD(Download<T>(ddx, n));
    ExpectClose(got, ref, Tol<T>(), "dx");
    if constexpr (std::is_same_v<T, float>) {
      if (!log) {
        std::vector<float> c(n);
        cpu::SoftmaxGradF32(rows, cols, dyv.data(), y.data(), c.data());
        ExpectClose(got, ToD(c), 1e-5, "dx vs cpu::SoftmaxGradF32");
      }
    }
  }
}

TEST_F(RowKernelsGpu, SoftmaxBackwardMatchesCpu) {
  for (bool log : {false, true}) {
    CheckSoftmaxBackward<float>(log);
    CheckSoftmaxBackward<float16>(log);
    CheckSoftmaxBackward<bfloat16>(log);
  }
}

// ---- Softmax cross-entropy ----------------------------------------------------------------------------------------

const std::vector<std::pair<int64_t, int64_t>> kSceShapes = {{1, 1},    {7, 3},    {64, 30522},
                                                             {4096, 3}, {33, 767}, {5, 3072}};

cpu::LossReduction CpuRed(LossReduction r) {
  return r == LossReduction::kNone  ? cpu::LossReduction::kNone
         : r == LossReduction::kSum ? cpu::LossReduction::kSum
                                    : cpu::LossReduction::kMean;
}

template <typename T, typename I>
std::vector<I> Labels(int64_t n, int64_t c, int64_t ignore, std::mt19937& rng) {
  std::uniform_int_distribution<int64_t> u(0, c - 1);
  std::vector<I> l(n);
  for (int64_t i = 0; i < n; ++i) l[i] = static_cast<I>(i % 5 == 3 ? ignore : u(rng));
  return l;
}

template <typename T, typename I>
void CheckSceForward(LossReduction red, bool weighted) {
  std::mt19937 rng(11);
  const int64_t ignore = -100;
  for (auto [n, c] : kSceShapes) {
    SCOPED_TRACE(std::string(Name<T>()) + (sizeof(I) == 4 ? " int32" : " int64") + " red " +
                 std::to_string(static_cast<int>(red)) + (weighted ? " weighted" : "") + " n " + std::to_string(n) +
                 " c " + std::to_string(c));
    auto x = Random<T>(n * c, rng, -6.f, 6.f);
    auto labels = Labels<T, I>(n, c, ignore, rng);
    auto w = Random<T>(c, rng, 0.25f, 2.f);
    const size_t nout = red == LossReduction::kNone ? n : 1;
    std::vector<T> ref(nout), lpref(n * c);
    cpu::SoftmaxCrossEntropyLoss<T, I>(CpuRed(red), n, c, 1, x.data(), labels.data(), weighted ? w.data() : nullptr,
                                       ignore, ref.data(), lpref.data());
    Dev dx(n * c * sizeof(T)), dl(n * sizeof(I)), dw(c * sizeof(T)), dout(nout * sizeof(T)), dlp(n * c * sizeof(T)),
        dbad(4);
    const size_t wsb = cuda::SoftmaxCrossEntropyWorkspaceBytes(n);
    Dev ws(wsb);
    Upload(dx, x);
    Upload(dl, labels);
    Upload(dw, w);
    CUDA_OK(cudaMemset(dbad.p, 0, 4));
    std::vector<uint8_t> first;
    for (int run = 0; run < 2; ++run) {
      Poison(dout);
      Poison(dlp);
      cuda::SoftmaxCrossEntropyForward(red, n, c, TypeOf<T>(), dx.p, sizeof(I) == 4 ? IndexType::kI32 : IndexType::kI64,
                                       dl.p, weighted ? dw.p : nullptr, ignore, dout.p, dlp.p, dbad.as<int>(), ws.p,
                                       wsb, nullptr);
      Sync();
      auto bytes = Download<uint8_t>(dout, nout * sizeof(T));
      if (run == 0)
        first = bytes;
      else
        EXPECT_EQ(bytes, first) << "loss differs between two runs";
    }
    EXPECT_EQ(Download<int>(dbad, 1)[0], 0);
    ExpectClose(ToD(Download<T>(dlp, n * c)), ToD(lpref), Tol<T>(), "log_prob");
    ExpectClose(ToD(Download<T>(dout, nout)), ToD(ref), Tol<T>(), "loss");
  }
}

TEST_F(RowKernelsGpu, SoftmaxCrossEntropyForwardMatchesCpu) {
  for (LossReduction red : {LossReduction::kNone, LossReduction::kSum, LossReduction::kMean})
    for (bool weighted : {false, true}) {
      CheckSceForward<float, int64_t>(red, weighted);
      CheckSceForward<float16, int64_t>(red, weighted);
    }
  CheckSceForward<float, int32_t>(LossReduction::kMean, false);
  CheckSceForward<bfloat16, int32_t>(LossReduction::kMean, true);
}

template <typename T, typename I>
void CheckSceBackward(LossReduction red, bool weighted) {
  std::mt19937 rng(12);
  const int64_t ignore = -1;
  for (auto [n, c] : kSceShapes) {
    SCOPED_TRACE(std::string(Name<T>()) + (sizeof(I) == 4 ? " int32" : " int64") + " red " +
                 std::to_string(static_cast<int>(red)) + (weighted ? " weighted" : "") + " n " + std::to_string(n) +
                 " c " + std::to_string(c));
    auto x = Random<T>(n * c, rng, -6.f, 6.f);
    auto labels = Labels<T, I>(n, c, ignore, rng);
    auto w = Random<T>(c, rng, 0.25f, 2.f);
    const bool none = red == LossReduction::kNone;
    auto dloss = Random<T>(none ? n : 1, rng, 0.5f, 2.f);
    // The executor's per-row factor f (internal_norm.cc LossGrad), then the float64 reference.
    const std::vector<double> wd = ToD(w), gd = ToD(dloss), xd = ToD(x);
    double wsum = 0;
    for (int64_t i = 0; i < n; ++i)
      if (labels[i] != ignore) wsum += weighted ? wd[labels[i]] : 1.0;
    const double scale = red == LossReduction::kMean ? (wsum != 0 ? 1.0 / wsum : 0.0) : 1.0;
    std::vector<double> f(n), ref(n * c);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t t = labels[i];
      f[i] = t == ignore ? 0.0 : (weighted ? wd[t] : 1.0) * gd[none ? i : 0] * scale;
      double m = -INFINITY, s = 0;
      for (int64_t k = 0; k < c; ++k) m = std::max(m, xd[i * c + k]);
      for (int64_t k = 0; k < c; ++k) s += std::exp(xd[i * c + k] - m);
      for (int64_t k = 0; k < c; ++k)
        ref[i * c + k] = f[i] == 0.0 ? 0.0 : (std::exp(xd[i * c + k] - m) / s - (k == t ? 1.0 : 0.0)) * f[i];
    }
    Dev dx(n * c * sizeof(T)), dl(n * sizeof(I)), dw(c * sizeof(T)), dg(dloss.size() * sizeof(T)),
        ddx(n * c * sizeof(T)), dbad(4);
    const size_t wsb = cuda::SoftmaxCrossEntropyWorkspaceBytes(n);
    Dev ws(wsb);
    Upload(dx, x);
    Upload(dl, labels);
    Upload(dw, w);
    Upload(dg, dloss);
    Poison(ddx);
    CUDA_OK(cudaMemset(dbad.p, 0, 4));
    cuda::SoftmaxCrossEntropyBackward(red, n, c, TypeOf<T>(), dg.p, dx.p,
                                      sizeof(I) == 4 ? IndexType::kI32 : IndexType::kI64, dl.p,
                                      weighted ? dw.p : nullptr, ignore, ddx.p, dbad.as<int>(), ws.p, wsb, nullptr);
    Sync();
    EXPECT_EQ(Download<int>(dbad, 1)[0], 0);
    const auto got = ToD(Download<T>(ddx, n * c));
    ExpectClose(got, ref, Tol<T>(), "dlogits");
    for (int64_t i = 0; i < n; ++i) {
      if (labels[i] != ignore) continue;
      for (int64_t k = 0; k < c; ++k) ASSERT_EQ(got[i * c + k], 0.0) << "ignored row " << i << " not zero";
    }
    if constexpr (std::is_same_v<T, float>) {
      std::vector<float> cdx(n * c);
      cpu::SoftmaxCrossEntropyGradF32<I>(n, c, 1, x.data(), labels.data(), f.data(), cdx.data());
      ExpectClose(got, ToD(cdx), 1e-5, "dlogits vs cpu::SoftmaxCrossEntropyGradF32");
    }
  }
}

TEST_F(RowKernelsGpu, SoftmaxCrossEntropyBackwardMatchesCpu) {
  for (LossReduction red : {LossReduction::kNone, LossReduction::kSum, LossReduction::kMean})
    for (bool weighted : {false, true}) {
      CheckSceBackward<float, int64_t>(red, weighted);
      CheckSceBackward<bfloat16, int64_t>(red, weighted);
    }
  CheckSceBackward<float, int32_t>(LossReduction::kMean, false);
  CheckSceBackward<float16, int32_t>(LossReduction::kSum, true);
}

TEST_F(RowKernelsGpu, SoftmaxCrossEntropyBadLabelSetsTheFlag) {
  const int64_t n = 4, c = 5;
  std::mt19937 rng(3);
  auto x = Random<float>(n * c, rng);
  std::vector<int64_t> labels = {1, 7, 2, -100};  // 7 is out of range; -100 ignored
  Dev dx(n * c * 4), dl(n * 8), dout(4), dg(4), ddx(n * c * 4), dbad(4);
  const size_t wsb = cuda::SoftmaxCrossEntropyWorkspaceBytes(n);
  Dev ws(wsb);
  Upload(dx, x);
  Upload(dl, labels);
  Upload(dg, std::vector<float>{1.f});
  CUDA_OK(cudaMemset(dbad.p, 0, 4));
  cuda::SoftmaxCrossEntropyForward(LossReduction::kMean, n, c, FloatType::kF32, dx.p, IndexType::kI64, dl.p, nullptr,
                                   -100, dout.p, nullptr, dbad.as<int>(), ws.p, wsb, nullptr);
  Sync();
  EXPECT_EQ(Download<int>(dbad, 1)[0], 1);
  CUDA_OK(cudaMemset(dbad.p, 0, 4));
  Poison(ddx);
  cuda::SoftmaxCrossEntropyBackward(LossReduction::kMean, n, c, FloatType::kF32, dg.p, dx.p, IndexType::kI64, dl.p,
                                    nullptr, -100, ddx.p, dbad.as<int>(), ws.p, wsb, nullptr);
  Sync();
  EXPECT_EQ(Download<int>(dbad, 1)[0], 1);
  const auto got = Download<float>(ddx, n * c);
  for (int64_t k = 0; k < c; ++k) {
    EXPECT_EQ(got[1 * c + k], 0.f);  // the bad row
    EXPECT_EQ(got[3 * c + k], 0.f);  // the ignored row
    EXPECT_TRUE(std::isfinite(got[0 * c + k]));
  }
}

// ---- Column sums ----------------------------------------------------------------------------------------------------

template <typename T>
void CheckColumnSums(FloatType yt) {
  std::mt19937 rng(21);
  // Plus long columns (more than 256 chunks of 64 rows: the one-block-per-column finalize).
  std::vector<std::pair<int64_t, int64_t>> shapes = kShapes;
  shapes.insert(shapes.end(), {{100000, 1}, {20000, 3}});
  for (auto [rows, cols] : shapes) {
    SCOPED_TRACE(std::string(Name<T>()) + " rows " + std::to_string(rows) + " cols " + std::to_string(cols));
    const size_t n = rows * cols;
    auto x = Random<T>(n, rng);
    const auto xd = ToD(x);
    std::vector<double> ref(cols, 0.0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < cols; ++j) ref[j] += xd[r * cols + j];
    const size_t ys = cuda::FloatTypeSize(yt);
    Dev dx(n * sizeof(T)), dy(cols * ys);
    const size_t wsb = cuda::ReduceRowsToColumnsWorkspaceBytes(rows, cols);
    Dev ws(wsb);
    Upload(dx, x);
    std::vector<uint8_t> first;
    for (int run = 0; run < 2; ++run) {
      Poison(dy);
      cuda::ReduceRowsToColumns(rows, cols, TypeOf<T>(), dx.p, yt, dy.p, ws.p, wsb, nullptr);
      Sync();
      auto b = Download<uint8_t>(dy, cols * ys);
      if (run == 0)
        first = b;
      else
        EXPECT_EQ(b, first) << "column sums differ between two runs";
    }
    std::vector<double> got(cols);
    if (yt == FloatType::kF32)
      got = ToD(Download<float>(dy, cols));
    else if (yt == FloatType::kF16)
      got = ToD(Download<float16>(dy, cols));
    else
      got = ToD(Download<bfloat16>(dy, cols));
    ExpectClose(got, ref, yt == FloatType::kF32 ? 1e-5 : 1e-2, "column sums");
  }
}

TEST_F(RowKernelsGpu, ReduceRowsToColumnsIsDeterministicAndExact) {
  CheckColumnSums<float>(FloatType::kF32);
  CheckColumnSums<float16>(FloatType::kF32);
  CheckColumnSums<bfloat16>(FloatType::kBF16);
  CheckColumnSums<float16>(FloatType::kF16);
}

// ---- host-side logic (no GPU needed)
// ----------------------------------------------------------------------------------

TEST(RowKernels, BlockThreadsDependOnlyOnTheWidth) {
  EXPECT_EQ(cuda::RowBlockThreads(1), 32);
  EXPECT_EQ(cuda::RowBlockThreads(128), 32);
  EXPECT_EQ(cuda::RowBlockThreads(129), 64);
  EXPECT_EQ(cuda::RowBlockThreads(768), 256);
  EXPECT_EQ(cuda::RowBlockThreads(3072), 1024);
  EXPECT_EQ(cuda::RowBlockThreads(30522), 1024);
  EXPECT_EQ(cuda::FloatTypeSize(FloatType::kF32), 4u);
  EXPECT_EQ(cuda::FloatTypeSize(FloatType::kBF16), 2u);
}

TEST(RowKernels, ArgumentsAreCheckedBeforeAnyLaunch) {
  int dummy = 0;
  // Half parameters for a float32 input.
  EXPECT_THROW(cuda::LayerNormForward(2, 3, FloatType::kF32, &dummy, FloatType::kF16, &dummy, nullptr, 1e-5, &dummy,
                                      nullptr, nullptr, nullptr),
               std::invalid_argument);
  // Mean without invstd.
  EXPECT_THROW(cuda::LayerNormBackward(2, 3, FloatType::kF32, &dummy, &dummy, FloatType::kF32, &dummy,
                                       reinterpret_cast<float*>(&dummy), nullptr, 1e-5, &dummy, nullptr, nullptr,
                                       &dummy, 1 << 20, nullptr),
               std::invalid_argument);
  // Workspace too small.
  EXPECT_THROW(cuda::LayerNormBackward(100, 3, FloatType::kF32, &dummy, &dummy, FloatType::kF32, &dummy, nullptr,
                                       nullptr, 1e-5, &dummy, &dummy, nullptr, &dummy, 8, nullptr),
               std::invalid_argument);
  EXPECT_THROW(cuda::ReduceRowsToColumns(100, 3, FloatType::kF32, &dummy, FloatType::kF32, &dummy, &dummy, 8, nullptr),
               std::invalid_argument);
  EXPECT_THROW(
      cuda::SoftmaxCrossEntropyForward(LossReduction::kMean, 4, 0, FloatType::kF32, &dummy, IndexType::kI64, &dummy,
                                       nullptr, -1, &dummy, nullptr, nullptr, &dummy, 1 << 20, nullptr),
      std::invalid_argument);
  EXPECT_GE(cuda::LayerNormBackwardWorkspaceBytes(4096, 768), size_t{2 * 4096 * 8 + 2 * 64 * 768 * 8});
  EXPECT_EQ(cuda::ReduceRowsToColumnsWorkspaceBytes(65, 10), size_t{256});  // 2 chunks x 10 doubles, aligned
}

}  // namespace
}  // namespace ot
