// cuda_ops/optimizer_kernels against cpu::MultiTensorUpdate (cpu_ops/optimizer.h): several Adam/AdamW steps over a
// list of tensors (sizes 1 .. 3 chunks; float32, float16 and bfloat16 gradients; fp16/bf16 half copies) with a
// dynamic loss scale, clipping on and off, fresh seeded gradients every step. Parameters and moments must stay
// within 1e-6 relative (L2) of the CPU's, the grad norm too, the step counter and the loss scale must follow the
// CPU's LossScaleUpdate, the half copies must be the rounded parameters bit for bit. A step with an inf or NaN
// gradient must change no parameter, moment, half copy or step counter (bitwise) and halve the scale.
// *Gpu* tests skip without a device; OptimizerKernels.* (host-side packing) run everywhere.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "cpu_ops/optimizer.h"
#include "cuda_ops/device_info.h"
#include "cuda_ops/optimizer_kernels.h"
#include "kernel_common/half.h"
#include "kernel_common/optim_math.h"
#include "tests/cuda/gpu_test_util.h"

namespace ot {
namespace {

using test::Dev;
using test::Download;
using test::DownScalar;
using test::Upload;
using test::UpScalar;

using cuda::FloatType;

double RelL2(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return std::numeric_limits<double>::infinity();
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

class OptimizerKernelsGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  }
};

// One parameter on both sides.
struct Param {
  int64_t n;
  FloatType gt;  // gradient storage type
  bool half_copy;
  FloatType ht;                // half copy type
  std::vector<float> p, m, v;  // CPU state
  std::unique_ptr<Dev> dp, dg, dm, dv, dh;
};

// Gradient values g * S stored as gt; returns what the CPU sees (the stored values as float).
std::vector<float> StoreGrad(const std::vector<float>& g, float scale, FloatType t, std::vector<uint8_t>& bytes) {
  std::vector<float> seen(g.size());
  bytes.resize(g.size() * (t == FloatType::kF32 ? 4 : 2));
  for (size_t i = 0; i < g.size(); ++i) {
    const float s = g[i] * scale;
    if (t == FloatType::kF32) {
      std::memcpy(bytes.data() + 4 * i, &s, 4);
      seen[i] = s;
    } else {
      const uint16_t h = t == FloatType::kF16 ? FloatToHalfBits(s) : FloatToBf16Bits(s);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
      seen[i] = t == FloatType::kF16 ? HalfBitsToFloat(h) : Bf16BitsToFloat(h);
    }
  }
  return seen;
}

struct Rig {
  std::vector<Param> ps;
  std::unique_ptr<Dev> block, ws;
  Dev scale{4}, good{8}, bad{8}, step{8}, found{4}, norm{4};
  cuda::OptimList list;
  size_t ws_bytes = 0;
};

void Build(Rig& r, std::mt19937& rng) {
  const std::vector<std::tuple<int64_t, FloatType, bool, FloatType>> spec = {
      {1, FloatType::kF32, false, FloatType::kF16},     {3, FloatType::kF16, true, FloatType::kF16},
      {1000, FloatType::kF32, true, FloatType::kBF16},  {40000, FloatType::kF32, false, FloatType::kF16},
      {16384, FloatType::kBF16, true, FloatType::kF16}, {767, FloatType::kF32, false, FloatType::kF16}};
  std::uniform_real_distribution<float> u(-1.f, 1.f), pos(1e-4f, 1e-2f);
  std::vector<cuda::OptimTensor> ts;
  for (auto [n, gt, hc, ht] : spec) {
    Param q;
    q.n = n;
    q.gt = gt;
    q.half_copy = hc;
    q.ht = ht;
    q.p.resize(n);
    q.m.resize(n);
    q.v.resize(n);
    for (int64_t i = 0; i < n; ++i) {
      q.p[i] = u(rng);
      q.m[i] = 0.01f * u(rng);
      q.v[i] = pos(rng);
    }
    q.dp = std::make_unique<Dev>(n * 4);
    q.dg = std::make_unique<Dev>(n * 4);
    q.dm = std::make_unique<Dev>(n * 4);
    q.dv = std::make_unique<Dev>(n * 4);
    q.dh = std::make_unique<Dev>(n * 2);
    Upload(*q.dp, q.p);
    Upload(*q.dm, q.m);
    Upload(*q.dv, q.v);
    ASSERT_EQ(cudaMemset(q.dh->p, 0xff, n * 2), cudaSuccess);
    cuda::OptimTensor t;
    t.param = static_cast<float*>(q.dp->p);
    t.grad = q.dg->p;
    t.s0 = static_cast<float*>(q.dm->p);
    t.s1 = static_cast<float*>(q.dv->p);
    t.half_copy = hc ? q.dh->p : nullptr;
    t.n = n;
    t.grad_type = gt;
    t.half_type = ht;
    ts.push_back(t);
    r.ps.push_back(std::move(q));
  }
  const cuda::OptimPack pack = cuda::PackOptimTensors(ts, cuda::OptimKind::kAdam);
  r.block = std::make_unique<Dev>(pack.bytes.size());
  Upload(*r.block, pack.bytes);
  r.list.device_block = r.block->p;
  r.list.num_tensors = pack.num_tensors;
  r.list.num_chunks = pack.num_chunks;
  r.list.states = pack.states;
  r.ws_bytes = cuda::OptimWorkspaceBytes(pack.num_chunks, pack.num_tensors);
  r.ws = std::make_unique<Dev>(r.ws_bytes);
}

// Runs `steps` steps on both sides and compares. `poison_step`: the step (0-based) whose gradient of tensor 2 gets
// a non-finite element (-1: none).
void RunSteps(bool adamw, double clip, int steps, int poison_step, float poison_value) {
  std::mt19937 rng(2024);
  Rig r;
  Build(r, rng);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  cuda::OptimHyper h;
  h.lr = 1e-3;
  h.beta1 = 0.9;
  h.beta2 = 0.999;
  h.eps = 1e-8;
  h.weight_decay = 0.01;
  h.kind = adamw ? cuda::OptimKind::kAdamW : cuda::OptimKind::kAdam;
  h.max_grad_norm = clip;
  cpu::OptimHyper ch;
  ch.kind = adamw ? cpu::OptimKind::kAdamW : cpu::OptimKind::kAdam;
  ch.beta1 = h.beta1;
  ch.beta2 = h.beta2;
  ch.eps = h.eps;
  ch.weight_decay = h.weight_decay;
  ch.clip_grad_norm = clip;
  cuda::LossScaleState ls;
  ls.scale = static_cast<float*>(r.scale.p);
  ls.good = static_cast<int64_t*>(r.good.p);
  ls.bad = static_cast<int64_t*>(r.bad.p);
  ls.growth_interval = 3;
  float scale = 1024.f;  // the host's copy of the loss-scale state
  int64_t good = 0, bad = 0, step = 0;
  UpScalar(r.scale, scale);
  UpScalar(r.good, good);
  UpScalar(r.bad, bad);
  UpScalar(r.step, step);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  bool applied_any = false;  // the half copies are written from the first applied step on
  for (int s = 0; s < steps; ++s) {
    SCOPED_TRACE("step " + std::to_string(s));
    // Snapshot of the device state before the step (for the skipped-step check).
    std::vector<std::vector<float>> before_p, before_m, before_v;
    std::vector<std::vector<uint16_t>> before_h;
    for (auto& q : r.ps) {
      before_p.push_back(Download<float>(*q.dp, q.n));
      before_m.push_back(Download<float>(*q.dm, q.n));
      before_v.push_back(Download<float>(*q.dv, q.n));
      before_h.push_back(Download<uint16_t>(*q.dh, q.n));
    }
    std::vector<std::vector<float>> seen(r.ps.size());
    for (size_t k = 0; k < r.ps.size(); ++k) {
      auto& q = r.ps[k];
      std::vector<float> g(q.n);
      for (auto& e : g) e = 0.1f * u(rng);
      if (s == poison_step && k == 2) g[q.n / 2] = poison_value;
      std::vector<uint8_t> bytes;
      seen[k] = StoreGrad(g, scale, q.gt, bytes);
      Upload(*q.dg, bytes);
    }
    CUDA_OK(cudaMemset(r.norm.p, 0xff, 4));
    CUDA_OK(cudaMemset(r.found.p, 0xff, 4));
    cuda::MultiTensorStep(r.list, h, ls, {}, static_cast<int64_t*>(r.step.p), static_cast<int*>(r.found.p),
                          static_cast<float*>(r.norm.p), r.ws->p, r.ws_bytes, nullptr);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaDeviceSynchronize());
    // CPU step on the same stored gradients.
    std::vector<cpu::OptimTensor> cts(r.ps.size());
    std::vector<std::vector<float>> po(r.ps.size()), mo(r.ps.size()), vo(r.ps.size());
    for (size_t k = 0; k < r.ps.size(); ++k) {
      auto& q = r.ps[k];
      po[k].resize(q.n);
      mo[k].resize(q.n);
      vo[k].resize(q.n);
      cts[k].n = q.n;
      cts[k].p = q.p.data();
      cts[k].g = seen[k].data();
      cts[k].s0 = q.m.data();
      cts[k].s1 = q.v.data();
      cts[k].p_out = po[k].data();
      cts[k].s0_out = mo[k].data();
      cts[k].s1_out = vo[k].data();
    }
    cpu::OptimStepOptions opt;
    opt.grad_scale = 1.0 / static_cast<double>(scale);
    const cpu::OptimResult res = cpu::MultiTensorUpdate(ch, h.lr, step, cts, 1, 0, opt);
    for (size_t k = 0; k < r.ps.size(); ++k) {
      r.ps[k].p = po[k];
      r.ps[k].m = mo[k];
      r.ps[k].v = vo[k];
    }
    LossScaleUpdate<float>(!res.skipped, scale, good, bad, 2.f, 0.5f, 3, 1, 1.f);
    step = res.step;
    applied_any |= !res.skipped;
    EXPECT_EQ(res.skipped, s == poison_step);
    EXPECT_EQ(DownScalar<int>(r.found), res.skipped ? 1 : 0);
    EXPECT_EQ(DownScalar<int64_t>(r.step), step);
    EXPECT_EQ(DownScalar<float>(r.scale), scale);
    EXPECT_EQ(DownScalar<int64_t>(r.good), good);
    EXPECT_EQ(DownScalar<int64_t>(r.bad), bad);
    const float norm = DownScalar<float>(r.norm);
    if (res.skipped) {
      EXPECT_FALSE(std::isfinite(norm));
    } else {
      EXPECT_NEAR(norm, res.grad_norm, 1e-6 * res.grad_norm);
    }
    for (size_t k = 0; k < r.ps.size(); ++k) {
      SCOPED_TRACE("tensor " + std::to_string(k));
      auto& q = r.ps[k];
      const auto gp = Download<float>(*q.dp, q.n), gm = Download<float>(*q.dm, q.n), gv = Download<float>(*q.dv, q.n);
      const auto gh = Download<uint16_t>(*q.dh, q.n);
      if (res.skipped) {
        // Nothing moved, bit for bit.
        EXPECT_EQ(std::memcmp(gp.data(), before_p[k].data(), q.n * 4), 0);
        EXPECT_EQ(std::memcmp(gm.data(), before_m[k].data(), q.n * 4), 0);
        EXPECT_EQ(std::memcmp(gv.data(), before_v[k].data(), q.n * 4), 0);
        EXPECT_EQ(std::memcmp(gh.data(), before_h[k].data(), q.n * 2), 0);
      }
      EXPECT_LT(RelL2(gp, q.p), 1e-6) << "param";
      EXPECT_LT(RelL2(gm, q.m), 1e-6) << "m";
      EXPECT_LT(RelL2(gv, q.v), 1e-6) << "v";
      if (q.half_copy && applied_any) {
        // After any applied step, the copy is the rounded parameter.
        size_t mism = 0;
        for (int64_t i = 0; i < q.n; ++i) {
          const uint16_t want = q.ht == FloatType::kF16 ? FloatToHalfBits(gp[i]) : FloatToBf16Bits(gp[i]);
          mism += gh[i] != want;
        }
        EXPECT_EQ(mism, 0u) << "half copy";
      }
    }
  }
}

TEST_F(OptimizerKernelsGpu, AdamStepsMatchCpu) { RunSteps(false, 0.0, 7, -1, 0.f); }
TEST_F(OptimizerKernelsGpu, AdamWWithClippingMatchesCpu) { RunSteps(true, 0.5, 7, -1, 0.f); }
TEST_F(OptimizerKernelsGpu, InfGradientSkipsTheStepAndHalvesTheScale) {
  RunSteps(true, 0.0, 5, 2, std::numeric_limits<float>::infinity());
}
TEST_F(OptimizerKernelsGpu, NanGradientSkipsTheStep) {
  RunSteps(false, 1.0, 4, 1, std::numeric_limits<float>::quiet_NaN());
}

TEST_F(OptimizerKernelsGpu, GradNormIsDeterministic) {
  std::mt19937 rng(77);
  Rig r;
  Build(r, rng);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (auto& q : r.ps) {
    std::vector<float> g(q.n);
    for (auto& e : g) e = u(rng);
    std::vector<uint8_t> bytes;
    StoreGrad(g, 1.f, q.gt, bytes);
    Upload(*q.dg, bytes);
  }
  uint32_t first = 0;
  for (int run = 0; run < 3; ++run) {
    CUDA_OK(cudaMemset(r.norm.p, 0xff, 4));
    cuda::MultiTensorGradCheck(r.list, nullptr, {}, static_cast<int*>(r.found.p), static_cast<float*>(r.norm.p),
                               r.ws->p, r.ws_bytes, nullptr);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaDeviceSynchronize());
    EXPECT_EQ(DownScalar<int>(r.found), 0);
    const uint32_t bits = FloatBits(DownScalar<float>(r.norm));
    if (run == 0)
      first = bits;
    else
      EXPECT_EQ(bits, first);
  }
}

// ---- host-side logic (no GPU needed)
// ----------------------------------------------------------------------------------

TEST(OptimizerKernels, PackOptimTensorsLaysOutChunkOffsets) {
  float f = 0;
  std::vector<cuda::OptimTensor> ts(4);
  const int64_t sizes[4] = {0, 1, cuda::kOptimChunk, cuda::kOptimChunk + 1};
  for (int i = 0; i < 4; ++i) {
    ts[i].n = sizes[i];
    ts[i].param = ts[i].s0 = ts[i].s1 = &f;
    ts[i].grad = &f;
  }
  const cuda::OptimPack p = cuda::PackOptimTensors(ts, cuda::OptimKind::kAdam);
  EXPECT_EQ(p.num_tensors, 4);
  EXPECT_EQ(p.num_chunks, 4);
  const size_t tb = 4 * sizeof(cuda::OptimTensor);
  ASSERT_EQ(p.bytes.size(), tb + 5 * 8);
  std::vector<int64_t> off(5);
  std::memcpy(off.data(), p.bytes.data() + tb, 5 * 8);
  EXPECT_EQ(off, (std::vector<int64_t>{0, 0, 1, 2, 4}));
  cuda::OptimTensor back;
  std::memcpy(&back, p.bytes.data() + 3 * sizeof(cuda::OptimTensor), sizeof back);
  EXPECT_EQ(back.n, cuda::kOptimChunk + 1);
  EXPECT_EQ(cuda::PackOptimTensors({}, cuda::OptimKind::kLamb, true).num_chunks, 0);
}

TEST(OptimizerKernels, PackOptimTensorsRejectsBadTensors) {
  float f = 0;
  cuda::OptimTensor t;
  t.n = -1;
  EXPECT_THROW(cuda::PackOptimTensors({t}, cuda::OptimKind::kSgd), std::invalid_argument);
  t.n = 5;  // null pointers
  EXPECT_THROW(cuda::PackOptimTensors({t}, cuda::OptimKind::kSgd), std::invalid_argument);
  t.param = &f;
  t.grad = &f;
  EXPECT_NO_THROW(cuda::PackOptimTensors({t}, cuda::OptimKind::kSgd));                            // SGD has no state
  EXPECT_THROW(cuda::PackOptimTensors({t}, cuda::OptimKind::kMomentum), std::invalid_argument);   // no buffer
  EXPECT_THROW(cuda::PackOptimTensors({t}, cuda::OptimKind::kSgd, true), std::invalid_argument);  // no sum
  t.s0 = &f;
  EXPECT_NO_THROW(cuda::PackOptimTensors({t}, cuda::OptimKind::kNesterov));
  EXPECT_THROW(cuda::PackOptimTensors({t}, cuda::OptimKind::kLamb), std::invalid_argument);  // no second moment
  t.s1 = &f;
  t.acc = &f;
  const cuda::OptimPack lamb = cuda::PackOptimTensors({t}, cuda::OptimKind::kLamb, true);
  EXPECT_EQ(lamb.states, 2);
  EXPECT_TRUE(lamb.accumulate);
  t.half_copy = &f;
  t.half_type = FloatType::kF32;
  EXPECT_THROW(cuda::PackOptimTensors({t}, cuda::OptimKind::kAdam), std::invalid_argument);
  t.half_type = FloatType::kBF16;
  EXPECT_NO_THROW(cuda::PackOptimTensors({t}, cuda::OptimKind::kAdam));
  // Pass 1's sums and flags, LAMB's per-chunk norms and per-tensor ratios.
  EXPECT_GE(cuda::OptimWorkspaceBytes(1000, 10), size_t{256 + 8000 + 4000 + 2 * 8000 + 80});
  EXPECT_EQ(cuda::OptimStateCount(cuda::OptimKind::kSgd), 0);
  EXPECT_EQ(cuda::OptimStateCount(cuda::OptimKind::kNesterov), 1);
  EXPECT_EQ(cuda::OptimStateCount(cuda::OptimKind::kLamb), 2);
}

TEST(OptimizerKernels, StepArgumentsAreChecked) {
  cuda::OptimList l;
  int dummy = 0;
  EXPECT_THROW(cuda::MultiTensorGradCheck(l, nullptr, {}, nullptr, nullptr, &dummy, 1 << 20, nullptr),
               std::invalid_argument);
  EXPECT_THROW(cuda::MultiTensorGradCheck(l, nullptr, {}, &dummy, nullptr, &dummy, 8, nullptr), std::invalid_argument);
  cuda::OptimHyper h;
  h.lr_schedule = 7;
  int64_t st = 0;
  EXPECT_THROW(cuda::MultiTensorUpdate(l, h, nullptr, {}, &st, &dummy, &dummy, 1 << 20, nullptr),
               std::invalid_argument);
  // A list packed without the states or sums a call needs is refused before anything is launched.
  l.num_chunks = 1;
  l.num_tensors = 1;
  l.device_block = &dummy;
  l.states = 1;
  h.lr_schedule = 0;
  h.kind = cuda::OptimKind::kLamb;
  EXPECT_THROW(cuda::MultiTensorUpdate(l, h, nullptr, {}, &st, &dummy, &dummy, 1 << 20, nullptr),
               std::invalid_argument);
  h.kind = cuda::OptimKind::kMomentum;
  cuda::AccumState acc;
  acc.micro = &st;
  acc.k = 2;
  EXPECT_THROW(cuda::MultiTensorUpdate(l, h, nullptr, acc, &st, &dummy, &dummy, 1 << 20, nullptr),
               std::invalid_argument);
  EXPECT_THROW(cuda::MultiTensorGradCheck(l, nullptr, acc, &dummy, nullptr, &dummy, 1 << 20, nullptr),
               std::invalid_argument);
  cuda::LossScaleState ls;
  float sc = 1;
  ls.scale = &sc;  // dynamic without counters
  EXPECT_THROW(cuda::FinishOptimizerStep(&dummy, &st, ls, {}, nullptr), std::invalid_argument);
}

}  // namespace
}  // namespace ot
