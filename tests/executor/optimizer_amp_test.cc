// OptimizerUpdate's mixed-precision parts on the CPU executor (issue 4): half copies of the master weights,
// loss scaling (unscaling inside the update, skip on overflow, dynamic scale rules) and the stats outputs.
// Fresh random data every run; the reference is float64 written here from torch.optim's formulas and the
// GradScaler / TF ExponentialUpdateLossScaleManager rules, independent of kernel_common/optim_math.h.
// Node layout: graph/ops/optimizer_layout.h.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "executor/executor.h"
#include "graph/error.h"
#include "graph/graph.h"
#include "graph/ops/optimizer_layout.h"
#include "tests/test_util.h"

namespace ot {
namespace {

constexpr double kB1 = 0.9, kB2 = 0.999, kEps = 1e-8;

bool SameBits(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.dims() == b.dims() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

Tensor Scalar(DataType t, double v) {
  Tensor s(t, {});
  s.SetDouble(0, v);
  return s;
}

// One OptimizerUpdate node whose state is carried from call to call, as the Trainer's update bindings do.
struct Runner {
  std::string kind = "adam";
  std::vector<std::vector<int64_t>> shapes = {{70001}, {4, 5}, {3}};  // the first spans three kernel chunks
  int64_t accumulate = 1;
  std::vector<int64_t> half_params;
  DataType half = DataType::kFloat16;
  std::string scaling = "none";
  bool stats = false;
  double lr = 0.01, clip = 0, eps = kEps;
  std::map<std::string, Attribute> extra;  // growth_interval, ...
  std::string node_name = "amp_update";

  // State.
  std::vector<Tensor> p, states, acc;  // states: state j of parameter i at j*n + i
  int64_t step = 0, micro = 0;
  float scale = 1;
  int64_t good = 0, bad = 0;

  OptimizerLayout layout;
  std::vector<Tensor> ins, outs;  // of the last call

  int n() const { return static_cast<int>(shapes.size()); }
  int k() const { return OptimizerStatesPerParam(kind); }

  void Init() {
    p.clear();
    states.clear();
    acc.clear();
    for (const auto& s : shapes) p.push_back(test::RandomTensor(DataType::kFloat32, s));
    for (int j = 0; j < k(); ++j)
      for (const auto& s : shapes) states.push_back(Tensor(DataType::kFloat32, s));
    for (const auto& s : shapes) acc.push_back(Tensor(DataType::kFloat32, s));
  }

  Node* Build(Graph& g, std::map<std::string, Tensor>& feeds, int drop_inputs = 0) {
    g.opset_imports[""] = 17;
    std::vector<Tensor> in = {Scalar(DataType::kFloat64, lr), Scalar(DataType::kInt64, static_cast<double>(step))};
    in.insert(in.end(), p.begin(), p.end());
    in.insert(in.end(), grads.begin(), grads.end());
    in.insert(in.end(), states.begin(), states.end());
    if (accumulate > 1) {
      in.push_back(Scalar(DataType::kInt64, static_cast<double>(micro)));
      in.insert(in.end(), acc.begin(), acc.end());
    }
    if (scaling != "none") {
      in.push_back(Scalar(DataType::kFloat32, scale));
      in.push_back(Scalar(DataType::kInt64, static_cast<double>(good)));
      in.push_back(Scalar(DataType::kInt64, static_cast<double>(bad)));
    }
    in.resize(in.size() - drop_inputs);
    ins = in;
    std::vector<Value*> iv, ov;
    for (size_t i = 0; i < in.size(); ++i) {
      Value* v = g.AddValue("in" + std::to_string(i));
      v->dtype = in[i].dtype();
      v->shape = Shape::Static(in[i].dims());
      g.inputs.push_back(v);
      iv.push_back(v);
      feeds[v->name] = in[i];
    }
    Node tmp;
    tmp.attrs = Attrs();
    layout = OptimizerLayout::Of(tmp);
    for (int i = 0; i < layout.num_outputs(); ++i) ov.push_back(g.AddValue("out" + std::to_string(i)));
    Node* node = g.AddNode("OptimizerUpdate", iv, ov, node_name);
    node->domain = kInternalDomain;
    node->opset = 1;
    node->attrs = Attrs();
    g.outputs = ov;
    return node;
  }

  std::map<std::string, Attribute> Attrs() const {
    std::map<std::string, Attribute> a = extra;
    a["kind"] = Attribute::String(kind);
    a["num_params"] = Attribute::Int(n());
    Tensor hp(DataType::kFloat64, {6});
    const double hv[6] = {kB1, kB2, eps, 0.0, 0.9, clip};
    for (int i = 0; i < 6; ++i) hp.SetDouble(i, hv[i]);
    a["hyperparameters"] = Attribute::TensorValue(hp);
    if (accumulate > 1) a["accumulate"] = Attribute::Int(accumulate);
    if (!half_params.empty()) {
      a["half_params"] = Attribute::Ints(half_params);
      a["half_dtype"] = Attribute::Int(static_cast<int64_t>(half));
    }
    if (scaling != "none") a["loss_scaling"] = Attribute::String(scaling);
    if (stats) a["stats"] = Attribute::Int(1);
    return a;
  }

  std::vector<Tensor> grads;

  // Runs one call with gradients `g` and carries every state output into the next call.
  void Call(const std::vector<Tensor>& g) {
    grads = g;
    Graph graph;
    std::map<std::string, Tensor> feeds;
    Build(graph, feeds);
    Executor ex(graph);
    outs = ex.Run(feeds);
    const OptimizerLayout& l = layout;
    for (int i = 0; i < n(); ++i) p[i] = outs[l.param_out(i)];
    for (int j = 0; j < k(); ++j)
      for (int i = 0; i < n(); ++i) states[j * n() + i] = outs[l.state_out(j, i)];
    step = outs[l.step_out()].GetInt64(0);
    if (accumulate > 1) {
      micro = outs[l.micro_out()].GetInt64(0);
      for (int i = 0; i < n(); ++i) acc[i] = outs[l.acc_out(i)];
    }
    if (scaling != "none") {
      scale = static_cast<float>(outs[l.scale_out()].GetDouble(0));
      good = outs[l.scale_out() + 1].GetInt64(0);
      bad = outs[l.scale_out() + 2].GetInt64(0);
    }
  }

  bool skipped() const { return outs[layout.skipped_out()].GetDouble(0) != 0; }
  double grad_norm() const { return outs[layout.grad_norm_out()].GetDouble(0); }
  const Tensor& half_copy(int j) const { return outs[layout.half_out(j)]; }

  std::vector<Tensor> RandomGrads(double times = 1.0) const {
    std::vector<Tensor> g;
    for (const auto& s : shapes) {
      Tensor t = test::RandomTensor(DataType::kFloat32, s);
      for (int64_t e = 0; e < t.numel(); ++e) t.SetDouble(e, t.GetDouble(e) * times);
      g.push_back(t);
    }
    return g;
  }
};

std::vector<Tensor> Scaled(const std::vector<Tensor>& g, double s) {
  std::vector<Tensor> r;
  for (const Tensor& t : g) {
    Tensor c = t.Clone();
    for (int64_t e = 0; e < c.numel(); ++e) c.SetDouble(e, t.GetDouble(e) * s);
    r.push_back(c);
  }
  return r;
}

// Float64 reference of one applied optimizer step (sgd or adam, no weight decay) from float32 state `r`, on the
// (mean, unscaled) gradients `g`, with torch's global-norm clipping. Returns the new parameters; updates moments.
struct RefState {
  std::vector<std::vector<double>> p, m, v;
  int64_t step = 0;
};
std::vector<double> Vec(const Tensor& t) {
  std::vector<double> v(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) v[i] = t.GetDouble(i);
  return v;
}
RefState FromRunner(const Runner& r) {
  RefState s;
  for (int i = 0; i < r.n(); ++i) {
    s.p.push_back(Vec(r.p[i]));
    if (r.kind == "adam") {
      s.m.push_back(Vec(r.states[i]));
      s.v.push_back(Vec(r.states[r.n() + i]));
    }
  }
  s.step = r.step;
  return s;
}
double RefNorm(const std::vector<std::vector<double>>& g) {
  double sq = 0;
  for (const auto& t : g)
    for (double e : t) sq += e * e;
  return std::sqrt(sq);
}
void RefApply(RefState& s, const std::string& kind, double lr, double clip, std::vector<std::vector<double>> g,
              double eps = kEps) {
  const double norm = RefNorm(g);
  const double coef = clip > 0 ? std::min(1.0, clip / (norm + 1e-6)) : 1.0;
  s.step += 1;
  const double bc1 = 1 - std::pow(kB1, s.step), bc2 = 1 - std::pow(kB2, s.step);
  for (size_t i = 0; i < s.p.size(); ++i)
    for (size_t e = 0; e < s.p[i].size(); ++e) {
      const double gr = g[i][e] * coef;
      if (kind == "sgd") {
        s.p[i][e] -= lr * gr;
      } else {
        double& m = s.m[i][e];
        double& v = s.v[i][e];
        m = kB1 * m + (1 - kB1) * gr;
        v = kB2 * v + (1 - kB2) * gr * gr;
        s.p[i][e] -= lr / bc1 * m / (std::sqrt(v) / std::sqrt(bc2) + eps);
      }
    }
}
// The gradient the K-th micro-step applies, as the kernel forms it: float32 running sums acc = f32(acc + g), the
// mean f32((acc + g) / K) at the K-th (with K = 1 the gradient itself, never rounded). Elements whose mean nearly
// cancels are sensitive to these roundings under Adam (|m| ~ eps), so the reference rounds where the kernel does.
void AddGrads(std::vector<std::vector<double>>& acc, const std::vector<Tensor>& g, int64_t K, bool last) {
  if (acc.empty())
    for (const Tensor& t : g) acc.emplace_back(t.numel(), 0.0);
  for (size_t i = 0; i < g.size(); ++i)
    for (int64_t e = 0; e < g[i].numel(); ++e) {
      double v = acc[i][e] + g[i].GetDouble(e);
      if (K > 1) v = static_cast<float>(last ? v * (1.0 / static_cast<double>(K)) : v);
      acc[i][e] = v;
    }
}

void ExpectParamsNear(const Runner& r, const RefState& s, double rtol, const std::string& what) {
  for (int i = 0; i < r.n(); ++i) {
    int bad = 0;
    for (int64_t e = 0; e < r.p[i].numel(); ++e) {
      const double got = r.p[i].GetDouble(e), want = s.p[i][e];
      if (!(std::fabs(got - want) <= rtol * std::max(1.0, std::fabs(want))) && ++bad <= 3)
        ADD_FAILURE() << what << ": p" << i << "[" << e << "] = " << got << ", reference " << want;
    }
  }
}

// Every half copy equals round(p) of its parameter after the call, bit for bit.
void ExpectHalfCopiesExact(const Runner& r, const std::string& what) {
  for (int j = 0; j < static_cast<int>(r.half_params.size()); ++j) {
    const Tensor& h = r.half_copy(j);
    ASSERT_EQ(h.dtype(), r.half) << what;
    EXPECT_TRUE(SameBits(h, r.p[r.half_params[j]].CastTo(r.half))) << what << ": half copy " << j;
  }
}

TEST(OptimizerAmp, HalfCopiesEqualRoundedMaster) {
  for (const char* kind : {"sgd", "adam"})
    for (DataType half : {DataType::kFloat16, DataType::kBFloat16})
      for (int64_t K : {1, 3}) {
        const std::string what = std::string(kind) + " " + DataTypeName(half) + " accumulate " + std::to_string(K);
        Runner r;
        r.kind = kind;
        r.half = half;
        r.accumulate = K;
        r.half_params = {0, 2};
        r.lr = 0.05;
        r.Init();
        for (int s = 0; s < 2; ++s) {
          RefState ref = FromRunner(r);
          std::vector<std::vector<double>> sum;
          for (int mstep = 0; mstep < K; ++mstep) {
            const std::vector<Tensor> g = r.RandomGrads();
            const std::vector<Tensor> p_before = r.p;
            AddGrads(sum, g, K, mstep + 1 == K);
            r.Call(g);
            ASSERT_EQ(static_cast<int>(r.outs.size()), r.layout.num_outputs());
            EXPECT_FALSE(r.skipped());
            ExpectHalfCopiesExact(r, what);
            if (mstep + 1 < K) {  // micro-step: parameters unchanged, half copy = round(p)
              for (int i = 0; i < r.n(); ++i) EXPECT_TRUE(SameBits(r.p[i], p_before[i])) << what;
              EXPECT_TRUE(std::isnan(r.grad_norm()));
            }
          }
          RefApply(ref, kind, r.lr, 0, sum);
          ExpectParamsNear(r, ref, 2e-6, what + " step " + std::to_string(s));
          EXPECT_EQ(r.step, s + 1);
        }
        // The copies are real half values: some parameters change when rounded.
        bool rounded = false;
        for (int64_t e = 0; e < r.p[0].numel() && !rounded; ++e)
          rounded = r.half_copy(0).GetDouble(e) != r.p[0].GetDouble(e);
        EXPECT_TRUE(rounded) << what;
      }
}

// Gradients multiplied by S with loss scale S give the update of the unscaled gradients with S = 1; clipping and
// accumulation see unscaled gradients, grad_norm is the unscaled norm.
TEST(OptimizerAmp, LossScaledGradientsGiveTheUnscaledUpdate) {
  for (int64_t K : {1, 3})
    for (double S : {1024.0, 1000.0, 0.25}) {
      const std::string what = "accumulate " + std::to_string(K) + " S " + std::to_string(S);
      Runner a;
      a.scaling = "static";
      a.accumulate = K;
      a.clip = 5.0;  // the norm of the random gradients (~ sqrt(70000/3) ~ 150) is far above: clipping acts
      // With S = 1000 the scaled gradients round differently (g*S in float32, then the float32 sums); eps 1e-3
      // keeps Adam's direction well conditioned for elements whose mean cancels, so 1e-6 is a fair bound.
      a.eps = 1e-3;
      a.Init();
      Runner b = a;
      for (Tensor& t : b.p) t = t.Clone();
      b.scale = static_cast<float>(S);
      RefState ref = FromRunner(a);
      std::vector<std::vector<double>> sum;
      for (int mstep = 0; mstep < K; ++mstep) {
        const std::vector<Tensor> g = a.RandomGrads();
        AddGrads(sum, g, K, mstep + 1 == K);
        a.Call(g);
        b.Call(Scaled(g, S));
      }
      const double ref_norm = RefNorm(sum);
      EXPECT_NEAR(b.grad_norm(), ref_norm, 1e-6 * ref_norm) << what;
      EXPECT_NEAR(a.grad_norm(), ref_norm, 1e-6 * ref_norm) << what;
      RefApply(ref, a.kind, a.lr, a.clip, sum, a.eps);
      ExpectParamsNear(a, ref, 2e-6, what);
      ExpectParamsNear(b, ref, 2e-6, what);
      for (int i = 0; i < a.n(); ++i)
        for (int64_t e = 0; e < a.p[i].numel(); ++e) {
          const double x = a.p[i].GetDouble(e), y = b.p[i].GetDouble(e);
          ASSERT_LE(std::fabs(x - y), 1e-6 * std::max(1.0, std::fabs(x))) << what << " p" << i << "[" << e << "]";
          if (S != 1000.0) {
            ASSERT_EQ(x, y) << what << ": a power-of-two scale is exact";
          }
        }
      // Moments: exact for a power-of-two scale; for S = 1000 within the rounding of g*S carried through the
      // float32 sums (absolute, at 1e-6 of the moments' typical size: m ~ 3e-3, v ~ 1e-6).
      for (int j = 0; j < 2 * a.n(); ++j) {
        if (S != 1000.0) {
          EXPECT_TRUE(SameBits(b.states[j], a.states[j])) << what << " state " << j;
        } else {
          test::ExpectClose(b.states[j], a.states[j], 1e-5, j < a.n() ? 3e-9 : 1e-12);
        }
      }
      EXPECT_EQ(b.scale, static_cast<float>(S)) << "static scale changed";
    }
}

// Runs one finite step (so moments are not zero), then one with an inf in one gradient element.
TEST(OptimizerAmp, InjectedOverflowSkipsBitIdenticalAndBacksOff) {
  for (int64_t K : {1, 3}) {
    const std::string what = "accumulate " + std::to_string(K);
    Runner r;
    r.scaling = "dynamic";
    r.accumulate = K;
    r.half_params = {1};
    r.stats = true;
    r.Init();
    r.scale = 65536;
    for (int mstep = 0; mstep < K; ++mstep) r.Call(r.RandomGrads(65536));
    ASSERT_FALSE(r.skipped());
    EXPECT_EQ(r.good, 1) << what;
    EXPECT_EQ(r.scale, 65536.f) << what;
    const std::vector<Tensor> p0 = r.p, s0 = r.states;
    const int64_t step0 = r.step;
    for (int mstep = 0; mstep < K; ++mstep) {
      std::vector<Tensor> g = r.RandomGrads(65536);
      if (mstep == 0) g[0].SetDouble(12345, std::numeric_limits<double>::infinity());  // poisons the sum
      r.Call(g);
      if (mstep + 1 < K) {
        EXPECT_EQ(r.scale, 65536.f) << "a micro-step moved the scale";
        EXPECT_EQ(r.good, 1) << what;
      }
    }
    EXPECT_TRUE(r.skipped()) << what;
    EXPECT_FALSE(std::isfinite(r.grad_norm())) << what;
    for (int i = 0; i < r.n(); ++i) EXPECT_TRUE(SameBits(r.p[i], p0[i])) << what << " p" << i;
    for (size_t j = 0; j < s0.size(); ++j) EXPECT_TRUE(SameBits(r.states[j], s0[j])) << what << " state " << j;
    for (const Tensor& a : r.acc) EXPECT_TRUE(SameBits(a, Tensor(DataType::kFloat32, a.dims()))) << what;
    EXPECT_EQ(r.step, step0);
    EXPECT_EQ(r.micro, 0);
    ExpectHalfCopiesExact(r, what);
    EXPECT_EQ(r.scale, 32768.f) << what;
    EXPECT_EQ(r.good, 0) << what;
    EXPECT_EQ(r.bad, 0) << what;
    // The next finite step applies with the halved scale.
    for (int mstep = 0; mstep < K; ++mstep) r.Call(r.RandomGrads(32768));
    EXPECT_FALSE(r.skipped());
    EXPECT_EQ(r.step, step0 + 1);
    EXPECT_EQ(r.good, 1);
  }
}

TEST(OptimizerAmp, ScaleGrowsAfterGrowthInterval) {
  Runner r;
  r.kind = "sgd";
  r.shapes = {{5, 3}};
  r.scaling = "dynamic";
  r.extra["growth_interval"] = Attribute::Int(3);
  r.Init();
  r.scale = 256;
  const float want_scale[] = {256, 256, 512, 512, 512, 1024};
  const int64_t want_good[] = {1, 2, 0, 1, 2, 0};
  for (int s = 0; s < 6; ++s) {
    r.Call(r.RandomGrads(r.scale));
    EXPECT_FALSE(r.skipped());
    EXPECT_EQ(r.scale, want_scale[s]) << "step " << s;
    EXPECT_EQ(r.good, want_good[s]) << "step " << s;
  }
  // Growth that would overflow float32 keeps the scale (and resets the count).
  r.scale = 3e38f;
  r.good = 2;
  r.Call(r.RandomGrads());
  EXPECT_EQ(r.scale, 3e38f);
  EXPECT_EQ(r.good, 0);
  // growth_factor 3 (the attribute is used).
  r.extra["growth_factor"] = Attribute::Float(3.f);
  r.scale = 10;
  r.good = 2;
  r.Call(r.RandomGrads(10));
  EXPECT_EQ(r.scale, 30.f);
}

TEST(OptimizerAmp, OverflowsToBackoffTwoHalvesOnTheSecondOverflow) {
  Runner r;
  r.kind = "sgd";
  r.shapes = {{6}, {2, 2}};
  r.scaling = "dynamic";
  r.extra["overflows_to_backoff"] = Attribute::Int(2);
  r.Init();
  r.scale = 1024;
  auto overflow = [&] {
    std::vector<Tensor> g = r.RandomGrads(r.scale);
    g[1].SetDouble(3, std::numeric_limits<double>::quiet_NaN());
    r.Call(g);
    EXPECT_TRUE(r.skipped());
  };
  r.Call(r.RandomGrads(r.scale));
  EXPECT_EQ(r.good, 1);
  overflow();
  EXPECT_EQ(r.scale, 1024.f);
  EXPECT_EQ(r.bad, 1);
  EXPECT_EQ(r.good, 0);
  r.Call(r.RandomGrads(r.scale));  // a finite step in between keeps the overflow count (TF)
  EXPECT_EQ(r.bad, 1);
  EXPECT_EQ(r.good, 1);
  overflow();
  EXPECT_EQ(r.scale, 512.f);
  EXPECT_EQ(r.bad, 0);
  overflow();
  EXPECT_EQ(r.scale, 512.f);
  EXPECT_EQ(r.bad, 1);
}

TEST(OptimizerAmp, BackoffStopsAtMinScale) {
  Runner r;
  r.kind = "sgd";
  r.shapes = {{4}};
  r.scaling = "dynamic";
  r.Init();
  r.scale = 1.5f;
  std::vector<Tensor> g = r.RandomGrads();
  g[0].SetDouble(0, -std::numeric_limits<double>::infinity());
  r.Call(g);
  EXPECT_EQ(r.scale, 1.f);  // max(1, 0.75)
  r.Call(g);
  EXPECT_EQ(r.scale, 1.f);
  r.extra["min_scale"] = Attribute::Float(0.125f);
  r.extra["backoff_factor"] = Attribute::Float(0.25f);
  r.Call(g);
  EXPECT_EQ(r.scale, 0.25f);
  r.Call(g);
  EXPECT_EQ(r.scale, 0.125f);
  EXPECT_TRUE(r.skipped());
}

TEST(OptimizerAmp, StaticScaleNeverChanges) {
  Runner r;
  r.scaling = "static";
  r.extra["growth_interval"] = Attribute::Int(1);
  r.Init();
  r.scale = 128;
  r.good = 5;
  r.bad = 2;
  const std::vector<Tensor> p0 = r.p;
  std::vector<Tensor> g = r.RandomGrads(128);
  g[2].SetDouble(0, std::numeric_limits<double>::infinity());
  r.Call(g);
  EXPECT_TRUE(r.skipped());
  for (int i = 0; i < r.n(); ++i) EXPECT_TRUE(SameBits(r.p[i], p0[i]));
  r.Call(r.RandomGrads(128));
  EXPECT_FALSE(r.skipped());
  EXPECT_EQ(r.scale, 128.f);
  EXPECT_EQ(r.good, 5);
  EXPECT_EQ(r.bad, 2);
}

// param_norm: the norm of every parameter after the call; zero_grad_fraction: exact zeros (either sign) among
// this call's incoming gradients.
TEST(OptimizerAmp, StatsOutputs) {
  for (int64_t K : {1, 3}) {
    Runner r;
    r.stats = true;
    r.accumulate = K;
    r.scaling = "dynamic";
    r.Init();
    int64_t total = 0;
    for (const auto& s : r.shapes) total += NumElements(s);
    for (int call = 0; call < 2 * K; ++call) {
      std::vector<Tensor> g = r.RandomGrads(r.scale);
      int64_t zeros = 0;
      for (Tensor& t : g)
        for (int64_t e = call; e < t.numel(); e += 7 + call) {  // a different share each call
          t.SetDouble(e, e % 2 ? 0.0 : -0.0);
          ++zeros;
        }
      r.Call(g);
      const double want_zero = static_cast<double>(zeros) / static_cast<double>(total);
      EXPECT_NEAR(r.outs[r.layout.zero_fraction_out()].GetDouble(0), want_zero, 1e-7) << "call " << call;
      double sq = 0;
      for (const Tensor& p : r.p)
        for (int64_t e = 0; e < p.numel(); ++e) sq += p.GetDouble(e) * p.GetDouble(e);
      EXPECT_NEAR(r.outs[r.layout.param_norm_out()].GetDouble(0), std::sqrt(sq), 1e-6 * std::sqrt(sq));
      EXPECT_EQ(r.outs[r.layout.param_norm_out()].dtype(), DataType::kFloat32);
    }
  }
}

// User errors: operand lists that do not match the attributes, a half copy of a parameter that does not exist.
TEST(OptimizerAmp, MalformedNodesNameTheNode) {
  auto expect_error = [](Runner& r, int drop, const std::string& needle) {
    r.grads = r.RandomGrads();
    Graph g;
    std::map<std::string, Tensor> feeds;
    r.Build(g, feeds, drop);
    try {
      Executor ex(g);
      ex.Run(feeds);
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(r.node_name), std::string::npos) << msg;
      EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    }
  };
  Runner r;
  r.scaling = "dynamic";
  r.Init();
  expect_error(r, 1, "inputs");  // bad_steps missing
  Runner h;
  h.half_params = {0, 3};
  h.Init();
  expect_error(h, 0, "half_params[1] = 3");
  Runner d;
  d.half_params = {1, 0};
  d.Init();
  expect_error(d, 0, "ascending");
  Runner t;
  t.half_params = {0};
  t.half = DataType::kFloat32;
  t.Init();
  expect_error(t, 0, "half_dtype");
  Runner m;
  m.scaling = "dynamic_plus";
  m.Init();
  expect_error(m, 0, "loss_scaling");
}

}  // namespace
}  // namespace ot
