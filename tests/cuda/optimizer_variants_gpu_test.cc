// Every optimizer kind and gradient accumulation of cuda_ops/optimizer_kernels against cpu::MultiTensorUpdate
// (cpu_ops/optimizer.h), call by call: SGD (with and without weight decay), momentum, Nesterov, LAMB (with and
// without weight decay), Adam and AdamW, over six tensors of odd sizes (1 element .. 3 chunks; float32, float16 and
// bfloat16 gradients; fp16/bf16 half copies), with no, a static and a dynamic loss scale, clipping, linear and
// cosine LR schedules with warm-up, and --grad-accum K. Inputs are fresh random values from a std::random_device
// seed (printed with every failure). After every call every output element is checked:
//   - parameters and states within 1e-5 relative + 1e-6 of the tensor's largest value of the CPU's (both compute
//     in double; the GPU's norm sums run in another order and its compiler may fuse multiply-adds, so the float
//     results may differ by an ulp or two, compounding over the calls); the hyperparameters are chosen so that each
//     term (weight decay, momentum, clipping, schedule) moves values by far more than that;
//   - the gradient sums bit for bit (the same IEEE double steps on both sides);
//   - the half copies are the GPU's parameters rounded, bit for bit;
//   - the step and micro-step counters, the skipped flag, the loss-scale state exactly, the grad norm to 1e-6
//     (NaN on a micro-step that only accumulated);
//   - a skipped step (an inf or NaN in one gradient) and a micro-step that only accumulated leave every parameter,
//     state and half copy byte as it was.
// *Gpu* tests skip without a device.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "cpu_ops/optimizer.h"
#include "cuda_ops/device_info.h"
#include "cuda_ops/optimizer_kernels.h"
#include "kernel_common/half.h"
#include "kernel_common/optim_math.h"
#include "tests/cuda/gpu_test_util.h"

namespace ot {
namespace {

using cuda::FloatType;
using test::Dev;
using test::Download;
using test::DownScalar;
using test::Upload;
using test::UpScalar;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

enum class Scaling { kNone, kStatic, kDynamic };

struct Case {
  std::string name;
  cpu::OptimKind kind;
  double lr = 1e-2, wd = 0, clip = 0;
  Scaling scaling = Scaling::kNone;
  int schedule = 0;
  int64_t warmup = 0, total = 0;
  int64_t accumulate = 1;
  int calls = 6;         // kernel calls (micro-steps with accumulation)
  int poison_call = -1;  // the call whose gradient of tensor 2 gets poison_value (-1: none)
  float poison_value = kInf;
};

cuda::OptimKind DeviceKind(cpu::OptimKind k) {
  switch (k) {
    case cpu::OptimKind::kSgd:
      return cuda::OptimKind::kSgd;
    case cpu::OptimKind::kMomentum:
      return cuda::OptimKind::kMomentum;
    case cpu::OptimKind::kNesterov:
      return cuda::OptimKind::kNesterov;
    case cpu::OptimKind::kAdam:
      return cuda::OptimKind::kAdam;
    case cpu::OptimKind::kAdamW:
      return cuda::OptimKind::kAdamW;
    case cpu::OptimKind::kLamb:
      return cuda::OptimKind::kLamb;
  }
  return cuda::OptimKind::kAdam;
}

uint16_t Round(float p, FloatType t) { return t == FloatType::kBF16 ? FloatToBf16Bits(p) : FloatToHalfBits(p); }

// Gradient values g * S stored as `t`; returns what the CPU sees (the stored values as float).
std::vector<float> StoreGrad(const std::vector<float>& g, float scale, FloatType t, std::vector<uint8_t>& bytes) {
  std::vector<float> seen(g.size());
  bytes.resize(g.size() * (t == FloatType::kF32 ? 4 : 2));
  for (size_t i = 0; i < g.size(); ++i) {
    const float s = g[i] * scale;
    if (t == FloatType::kF32) {
      std::memcpy(bytes.data() + 4 * i, &s, 4);
      seen[i] = s;
    } else {
      const uint16_t h = Round(s, t);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
      seen[i] = t == FloatType::kF16 ? HalfBitsToFloat(h) : Bf16BitsToFloat(h);
    }
  }
  return seen;
}

bool SameBytes(const void* a, const void* b, size_t n) { return std::memcmp(a, b, n) == 0; }

// Every element of `gpu` within 1e-5 |cpu| + 1e-6 max|cpu| of `cpu`; reports the first few mismatches.
void ExpectClose(const std::vector<float>& gpu, const std::vector<float>& cpu, const char* what) {
  ASSERT_EQ(gpu.size(), cpu.size());
  double scale = 0;
  for (float c : cpu) scale = std::max(scale, std::fabs(static_cast<double>(c)));
  int bad = 0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    const double g = gpu[i], c = cpu[i], tol = 1e-5 * std::fabs(c) + 1e-6 * scale;
    if (!(std::fabs(g - c) <= tol)) {
      if (++bad <= 5) ADD_FAILURE() << what << "[" << i << "]: gpu " << g << ", cpu " << c << " (tol " << tol << ")";
    }
  }
  EXPECT_EQ(bad, 0) << what << ": elements out of tolerance";
}

// One parameter on both sides: the CPU's state (host vectors) and the GPU's (device buffers).
struct Param {
  int64_t n;
  FloatType gt;  // gradient storage type
  bool half;     // has a half copy
  FloatType ht;  // its type
  std::vector<float> p, s0, s1, acc;
  std::unique_ptr<Dev> dp, dg, ds0, ds1, dacc, dh;
};

// The GPU's state of one parameter, downloaded.
struct Snapshot {
  std::vector<float> p, s0, s1, acc;
  std::vector<uint16_t> h;
};

struct Rig {
  int states = 0;
  bool accumulate = false;
  std::vector<Param> ps;
  std::unique_ptr<Dev> block, ws;
  Dev scale{4}, good{8}, bad{8}, step{8}, micro{8}, found{4}, norm{4}, lr{8};
  cuda::OptimList list;
  size_t ws_bytes = 0;

  Snapshot Get(const Param& q) const {
    Snapshot s;
    s.p = Download<float>(*q.dp, q.n);
    if (states >= 1) s.s0 = Download<float>(*q.ds0, q.n);
    if (states >= 2) s.s1 = Download<float>(*q.ds1, q.n);
    if (accumulate) s.acc = Download<float>(*q.dacc, q.n);
    if (q.half) s.h = Download<uint16_t>(*q.dh, q.n);
    return s;
  }
};

// Six tensors: one element, three, odd sizes below a chunk, one just over a chunk, one of almost three chunks.
// Momentum buffers and moments start non-zero (a momentum buffer must be ignored by the first step); the sums
// start at zero (the state's value between optimizer steps); half copies hold round(p), as master_weights makes them.
void Build(Rig& r, cpu::OptimKind kind, bool accumulate, std::mt19937& rng) {
  struct Spec {
    int64_t n;
    FloatType gt;
    bool half;
    FloatType ht;
  };
  const std::vector<Spec> spec = {{1, FloatType::kF32, false, FloatType::kF16},
                                  {3, FloatType::kF16, true, FloatType::kF16},
                                  {767, FloatType::kF32, true, FloatType::kBF16},
                                  {1000, FloatType::kBF16, false, FloatType::kF16},
                                  {cuda::kOptimChunk + 1, FloatType::kF32, true, FloatType::kF16},
                                  {40001, FloatType::kF32, false, FloatType::kF16}};
  r.states = cpu::OptimStatesPerParam(kind);
  r.accumulate = accumulate;
  std::uniform_real_distribution<float> u(-1.f, 1.f), pos(1e-4f, 1e-2f);
  std::vector<cuda::OptimTensor> ts;
  for (const Spec& sp : spec) {
    Param q;
    q.n = sp.n;
    q.gt = sp.gt;
    q.half = sp.half;
    q.ht = sp.ht;
    q.p.resize(q.n);
    for (float& e : q.p) e = u(rng);
    q.dp = std::make_unique<Dev>(q.n * 4);
    q.dg = std::make_unique<Dev>(q.n * 4);
    Upload(*q.dp, q.p);
    cuda::OptimTensor t;
    t.param = q.dp->as<float>();
    t.grad = q.dg->p;
    t.n = q.n;
    t.grad_type = q.gt;
    t.half_type = q.ht;
    if (r.states >= 1) {
      q.s0.resize(q.n);
      for (float& e : q.s0) e = 0.05f * u(rng);
      q.ds0 = std::make_unique<Dev>(q.n * 4);
      Upload(*q.ds0, q.s0);
      t.s0 = q.ds0->as<float>();
    }
    if (r.states >= 2) {
      q.s1.resize(q.n);
      for (float& e : q.s1) e = pos(rng);
      q.ds1 = std::make_unique<Dev>(q.n * 4);
      Upload(*q.ds1, q.s1);
      t.s1 = q.ds1->as<float>();
    }
    if (accumulate) {
      q.acc.assign(q.n, 0.f);
      q.dacc = std::make_unique<Dev>(q.n * 4);
      Upload(*q.dacc, q.acc);
      t.acc = q.dacc->as<float>();
    }
    if (q.half) {
      std::vector<uint16_t> h(q.n);
      for (int64_t i = 0; i < q.n; ++i) h[i] = Round(q.p[i], q.ht);
      q.dh = std::make_unique<Dev>(q.n * 2);
      Upload(*q.dh, h);
      t.half_copy = q.dh->p;
    }
    ts.push_back(t);
    r.ps.push_back(std::move(q));
  }
  const cuda::OptimPack pack = cuda::PackOptimTensors(ts, DeviceKind(kind), accumulate);
  r.block = std::make_unique<Dev>(pack.bytes.size());
  Upload(*r.block, pack.bytes);
  r.list = {r.block->p, pack.num_tensors, pack.num_chunks, pack.states, pack.accumulate};
  r.ws_bytes = cuda::OptimWorkspaceBytes(pack.num_chunks, pack.num_tensors);
  r.ws = std::make_unique<Dev>(r.ws_bytes);
}

// gtest prints a parameter in the test's name (and so in CTest's): its name, not its bytes.
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class OptimizerVariantsGpu : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_P(OptimizerVariantsGpu, MatchesTheCpuAtEveryCall) {
  const Case& cs = GetParam();
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  const bool accumulating = cs.accumulate > 1;
  Rig r;
  Build(r, cs.kind, accumulating, rng);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());

  cpu::OptimHyper ch;
  ch.kind = cs.kind;
  ch.beta1 = 0.9;
  ch.beta2 = 0.999;
  ch.eps = cs.kind == cpu::OptimKind::kLamb ? 1e-6 : 1e-8;
  ch.weight_decay = cs.wd;
  ch.momentum = 0.9;
  ch.clip_grad_norm = cs.clip;
  cuda::OptimHyper h;
  h.kind = DeviceKind(cs.kind);
  h.lr_device_f64 = r.lr.as<double>();  // the executor's form: the base rate as a device double
  h.beta1 = ch.beta1;
  h.beta2 = ch.beta2;
  h.eps = ch.eps;
  h.weight_decay = ch.weight_decay;
  h.momentum = ch.momentum;
  h.max_grad_norm = ch.clip_grad_norm;
  h.lr_schedule = cs.schedule;
  h.warmup = cs.warmup;
  h.total_steps = cs.total;
  UpScalar(r.lr, cs.lr);

  // The host's copy of the counters and the loss-scale state.
  float scale = cs.scaling == Scaling::kDynamic ? 1024.f : cs.scaling == Scaling::kStatic ? 512.f : 1.f;
  int64_t good = 0, bad = 0, step = 0, micro = 0;
  cuda::LossScaleState ls;
  if (cs.scaling != Scaling::kNone) {
    ls.scale = r.scale.as<float>();
    ls.good = r.good.as<int64_t>();
    ls.bad = r.bad.as<int64_t>();
  }
  ls.dynamic = cs.scaling == Scaling::kDynamic;
  ls.growth_interval = 3;  // the scale grows within the test
  UpScalar(r.scale, scale);
  UpScalar(r.good, good);
  UpScalar(r.bad, bad);
  UpScalar(r.step, step);
  UpScalar(r.micro, micro);
  cuda::AccumState accum;
  if (accumulating) {
    accum.micro = r.micro.as<int64_t>();
    accum.k = cs.accumulate;
  }

  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (int call = 0; call < cs.calls; ++call) {
    SCOPED_TRACE("call " + std::to_string(call));
    std::vector<Snapshot> before;
    for (const Param& q : r.ps) before.push_back(r.Get(q));
    std::vector<std::vector<float>> seen(r.ps.size());
    for (size_t k = 0; k < r.ps.size(); ++k) {
      Param& q = r.ps[k];
      std::vector<float> g(q.n);
      for (float& e : g) e = 0.1f * u(rng);
      if (call == cs.poison_call && k == 2) g[q.n / 2] = cs.poison_value;
      std::vector<uint8_t> bytes;
      seen[k] = StoreGrad(g, scale, q.gt, bytes);
      Upload(*q.dg, bytes);
    }
    CUDA_OK(cudaMemset(r.norm.p, 0x7f, 4));
    CUDA_OK(cudaMemset(r.found.p, 0x7f, 4));
    cuda::MultiTensorStep(r.list, h, ls, accum, r.step.as<int64_t>(), r.found.as<int>(), r.norm.as<float>(), r.ws->p,
                          r.ws_bytes, nullptr);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaDeviceSynchronize());

    // The CPU's call (executor/kernels/internal_optim.cc's arithmetic) on the same stored gradients.
    const double lr = cs.lr * LrScheduleFactor(cs.schedule, step, cs.warmup, cs.total);
    std::vector<cpu::OptimTensor> cts(r.ps.size());
    std::vector<std::vector<float>> po(r.ps.size()), so0(r.ps.size()), so1(r.ps.size()), acco(r.ps.size());
    for (size_t k = 0; k < r.ps.size(); ++k) {
      Param& q = r.ps[k];
      cpu::OptimTensor& t = cts[k];
      t.n = q.n;
      t.p = q.p.data();
      t.g = seen[k].data();
      po[k].resize(q.n);
      t.p_out = po[k].data();
      if (r.states >= 1) {
        so0[k].resize(q.n);
        t.s0 = q.s0.data();
        t.s0_out = so0[k].data();
      }
      if (r.states >= 2) {
        so1[k].resize(q.n);
        t.s1 = q.s1.data();
        t.s1_out = so1[k].data();
      }
      if (accumulating) {
        acco[k].resize(q.n);
        t.acc = q.acc.data();
        t.acc_out = acco[k].data();
      }
    }
    cpu::OptimStepOptions opt;
    if (cs.scaling != Scaling::kNone) opt.grad_scale = 1.0 / static_cast<double>(scale);
    const cpu::OptimResult res = cpu::MultiTensorUpdate(ch, lr, step, cts, cs.accumulate, micro, opt);
    if (cs.scaling == Scaling::kDynamic && res.applied)
      LossScaleUpdate<float>(!res.skipped, scale, good, bad, 2.f, 0.5f, 3, 1, 1.f);
    step = res.step;
    if (accumulating) micro = res.micro;
    for (size_t k = 0; k < r.ps.size(); ++k) {
      r.ps[k].p = po[k];
      if (r.states >= 1) r.ps[k].s0 = so0[k];
      if (r.states >= 2) r.ps[k].s1 = so1[k];
      if (accumulating) r.ps[k].acc = acco[k];
    }

    // The scalars.
    const bool poisoned_step =
        cs.poison_call >= 0 && res.applied && call / cs.accumulate == cs.poison_call / cs.accumulate;
    EXPECT_EQ(res.skipped, poisoned_step) << "the CPU reference itself";
    EXPECT_EQ(DownScalar<int>(r.found), res.skipped ? 1 : 0);
    EXPECT_EQ(DownScalar<int64_t>(r.step), step);
    if (accumulating) {
      EXPECT_EQ(DownScalar<int64_t>(r.micro), micro);
    }
    EXPECT_EQ(DownScalar<float>(r.scale), scale);
    if (cs.scaling != Scaling::kNone) {
      EXPECT_EQ(DownScalar<int64_t>(r.good), good);
      EXPECT_EQ(DownScalar<int64_t>(r.bad), bad);
    }
    const float norm = DownScalar<float>(r.norm);
    if (!res.applied)
      EXPECT_TRUE(std::isnan(norm)) << "a micro-step that only accumulated reports no norm";
    else if (res.skipped)
      EXPECT_FALSE(std::isfinite(norm));
    else
      EXPECT_NEAR(norm, res.grad_norm, 1e-6 * res.grad_norm);

    // Every element.
    for (size_t k = 0; k < r.ps.size(); ++k) {
      SCOPED_TRACE("tensor " + std::to_string(k) + " (" + std::to_string(r.ps[k].n) + " elements)");
      const Param& q = r.ps[k];
      const Snapshot got = r.Get(q);
      if (res.skipped || !res.applied) {
        // Nothing moved, bit for bit.
        EXPECT_TRUE(SameBytes(got.p.data(), before[k].p.data(), q.n * 4)) << "param";
        if (r.states >= 1) {
          EXPECT_TRUE(SameBytes(got.s0.data(), before[k].s0.data(), q.n * 4)) << "state 0";
        }
        if (r.states >= 2) {
          EXPECT_TRUE(SameBytes(got.s1.data(), before[k].s1.data(), q.n * 4)) << "state 1";
        }
        if (q.half) {
          EXPECT_TRUE(SameBytes(got.h.data(), before[k].h.data(), q.n * 2)) << "half copy";
        }
      }
      ExpectClose(got.p, q.p, "param");
      if (r.states >= 1) ExpectClose(got.s0, q.s0, "state 0");
      if (r.states >= 2) ExpectClose(got.s1, q.s1, "state 1");
      if (accumulating) {
        EXPECT_TRUE(SameBytes(got.acc.data(), q.acc.data(), q.n * 4)) << "gradient sum";
        if (res.applied) {
          int64_t nonzero = 0;
          for (int64_t i = 0; i < q.n; ++i) nonzero += got.acc[i] != 0.f;
          EXPECT_EQ(nonzero, 0) << "the sum after an optimizer step must be zero";
        }
      }
      if (q.half) {
        int64_t mism = 0;
        for (int64_t i = 0; i < q.n; ++i) mism += got.h[i] != Round(got.p[i], q.ht);
        EXPECT_EQ(mism, 0) << "half copy != round(param)";
      }
    }
    if (::testing::Test::HasFailure()) break;  // one failing call is enough to read
  }
}

Case Make(std::string name, cpu::OptimKind kind, double lr, double wd) {
  Case c;
  c.name = std::move(name);
  c.kind = kind;
  c.lr = lr;
  c.wd = wd;
  return c;
}

std::vector<Case> Cases() {
  using K = cpu::OptimKind;
  std::vector<Case> v;
  Case c;
  // Plain steps of every kind.
  v.push_back(Make("Sgd", K::kSgd, 0.05, 0));
  c = Make("SgdWeightDecayDynamicScale", K::kSgd, 0.05, 0.05);
  c.scaling = Scaling::kDynamic;
  v.push_back(c);
  c = Make("MomentumClipDynamicScale", K::kMomentum, 0.05, 0.01);
  c.clip = 0.5;
  c.scaling = Scaling::kDynamic;
  v.push_back(c);
  c = Make("NesterovStaticScaleLinearWarmup", K::kNesterov, 0.05, 0.01);
  c.scaling = Scaling::kStatic;
  c.schedule = 1;
  c.warmup = 2;
  c.total = 8;
  v.push_back(c);
  c = Make("LambClipDynamicScaleCosine", K::kLamb, 1e-2, 0.05);
  c.clip = 1.0;
  c.scaling = Scaling::kDynamic;
  c.schedule = 2;
  c.warmup = 1;
  c.total = 6;
  v.push_back(c);
  v.push_back(Make("LambNoWeightDecay", K::kLamb, 1e-2, 0));  // trust ratio 1: an Adam step of the direction
  c = Make("AdamWCosine", K::kAdamW, 1e-2, 0.1);
  c.schedule = 2;
  c.total = 5;
  v.push_back(c);
  // An inf or NaN gradient: the step changes nothing; the scale backs off.
  c = Make("SgdInfSkips", K::kSgd, 0.05, 0.05);
  c.scaling = Scaling::kDynamic;
  c.poison_call = 2;
  v.push_back(c);
  c = Make("MomentumInfOnTheFirstStepSkips", K::kMomentum, 0.05, 0.01);  // the next step is still the first
  c.scaling = Scaling::kDynamic;
  c.poison_call = 0;
  v.push_back(c);
  c = Make("NesterovNanSkips", K::kNesterov, 0.05, 0.01);
  c.clip = 0.5;
  c.poison_call = 3;
  c.poison_value = kNaN;
  v.push_back(c);
  c = Make("LambInfSkips", K::kLamb, 1e-2, 0.05);
  c.scaling = Scaling::kDynamic;
  c.poison_call = 2;
  v.push_back(c);
  // Gradient accumulation.
  c = Make("SgdAccumulate2", K::kSgd, 0.05, 0.01);
  c.accumulate = 2;
  c.calls = 8;
  v.push_back(c);
  c = Make("MomentumAccumulate3DynamicScaleClip", K::kMomentum, 0.05, 0.01);
  c.accumulate = 3;
  c.calls = 9;
  c.scaling = Scaling::kDynamic;
  c.clip = 0.5;
  v.push_back(c);
  c = Make("NesterovAccumulate2StaticScale", K::kNesterov, 0.05, 0);
  c.accumulate = 2;
  c.calls = 6;
  c.scaling = Scaling::kStatic;
  v.push_back(c);
  c = Make("LambAccumulate2ClipLinear", K::kLamb, 1e-2, 0.05);
  c.accumulate = 2;
  c.calls = 8;
  c.clip = 1.0;
  c.schedule = 1;
  c.warmup = 1;
  c.total = 5;
  v.push_back(c);
  c = Make("AdamAccumulate2DynamicScale", K::kAdam, 1e-2, 0.05);
  c.accumulate = 2;
  c.calls = 8;
  c.scaling = Scaling::kDynamic;
  v.push_back(c);
  // An inf in a micro-step that only accumulates is carried in the sum: the K-th call skips and zeroes the sums.
  c = Make("MomentumAccumulate3InfInAMicroStep", K::kMomentum, 0.05, 0.01);
  c.accumulate = 3;
  c.calls = 9;
  c.scaling = Scaling::kDynamic;
  c.poison_call = 4;
  v.push_back(c);
  c = Make("LambAccumulate2NanOnTheLastMicroStep", K::kLamb, 1e-2, 0.05);
  c.accumulate = 2;
  c.calls = 8;
  c.scaling = Scaling::kDynamic;
  c.poison_call = 3;
  c.poison_value = kNaN;
  v.push_back(c);
  return v;
}

INSTANTIATE_TEST_SUITE_P(Kinds, OptimizerVariantsGpu, ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return info.param.name; });

// LAMB's per-tensor norms are fixed-order sums: the same call from the same state gives the same bits.
TEST(OptimizerVariantsDeterminismGpu, LambStepIsBitwiseRepeatable) {
  if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  Rig r;
  Build(r, cpu::OptimKind::kLamb, false, rng);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (Param& q : r.ps) {
    std::vector<float> g(q.n);
    for (float& e : g) e = 0.1f * u(rng);
    std::vector<uint8_t> bytes;
    StoreGrad(g, 1.f, q.gt, bytes);
    Upload(*q.dg, bytes);
  }
  cuda::OptimHyper h;
  h.kind = cuda::OptimKind::kLamb;
  h.lr = 1e-2;
  h.eps = 1e-6;
  h.weight_decay = 0.05;
  h.max_grad_norm = 1.0;
  std::vector<Snapshot> first;
  for (int run = 0; run < 3; ++run) {
    SCOPED_TRACE("run " + std::to_string(run));
    for (Param& q : r.ps) {  // the same starting state every run
      Upload(*q.dp, q.p);
      Upload(*q.ds0, q.s0);
      Upload(*q.ds1, q.s1);
    }
    UpScalar(r.step, int64_t{0});
    cuda::MultiTensorStep(r.list, h, cuda::LossScaleState{}, {}, r.step.as<int64_t>(), r.found.as<int>(),
                          r.norm.as<float>(), r.ws->p, r.ws_bytes, nullptr);
    CUDA_OK(cudaDeviceSynchronize());
    for (size_t k = 0; k < r.ps.size(); ++k) {
      const Snapshot s = r.Get(r.ps[k]);
      if (run == 0) {
        first.push_back(s);
        EXPECT_FALSE(SameBytes(s.p.data(), r.ps[k].p.data(), r.ps[k].n * 4)) << "the step moved nothing";
        continue;
      }
      EXPECT_TRUE(SameBytes(s.p.data(), first[k].p.data(), r.ps[k].n * 4)) << "tensor " << k;
      EXPECT_TRUE(SameBytes(s.s0.data(), first[k].s0.data(), r.ps[k].n * 4)) << "tensor " << k;
      EXPECT_TRUE(SameBytes(s.s1.data(), first[k].s1.data(), r.ps[k].n * 4)) << "tensor " << k;
    }
  }
}

}  // namespace
}  // namespace ot
