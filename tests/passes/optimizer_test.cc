// Optimizer pass: structure of the rewrite, and several training steps on a tiny model compared with a
// reference of torch.optim (Apex FusedLAMB for LAMB) written here in double, independent of optim_math.h.
// Model: y = W x + b, loss = ReduceSum((y - t)^2), W [3,4], b [3,1], x [4,2], t [3,2] (x and t frozen).
#include "cpu_ops/optimizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "executor/executor.h"
#include "graph/error.h"
#include "graph/graph.h"
#include "graph/op_registry.h"
#include "graph/verifier.h"
#include "passes/autodiff.h"
#include "passes/optimizer.h"
#include "tests/test_util.h"

namespace ot {
namespace {

Value* Emit(Graph& g, const std::string& op, std::vector<Value*> ins) {
  Value* out = g.AddValue(g.UniqueName(op + "_out"));
  g.AddNode(op, ins, {out}, g.UniqueName(op));
  return out;
}

struct Model {
  std::unique_ptr<Graph> g;
  std::unique_ptr<OptimizerPass> opt;
};

Model Build(DataType t, const Tensor& W, const Tensor& b, const Tensor& x, const Tensor& tg, OptimizerOptions o) {
  Model m;
  m.g = std::make_unique<Graph>();
  Graph& g = *m.g;
  g.opset_imports[""] = 17;
  Value* w = g.AddInitializer("W", W.CastTo(t));
  Value* bv = g.AddInitializer("b", b.CastTo(t));
  Value* xv = g.AddInitializer("x", x.CastTo(t));
  Value* tv = g.AddInitializer("t", tg.CastTo(t));
  Value* y = Emit(g, "Add", {Emit(g, "MatMul", {w, xv}), bv});
  Value* d = Emit(g, "Sub", {y, tv});
  Value* loss = g.AddValue("loss");
  Node* red = g.AddNode("ReduceSum", {Emit(g, "Mul", {d, d})}, {loss}, "loss_sum");
  red->attrs["keepdims"] = Attribute::Int(0);
  g.outputs.push_back(loss);
  AutodiffPass ad({"loss", "^(x|t)$"});
  EXPECT_TRUE(ad.Run(g));
  m.opt = std::make_unique<OptimizerPass>(o, ad.params(), ad.grads());
  EXPECT_TRUE(m.opt->Run(g));
  VerifyGraph(g);
  return m;
}

// One step: runs the graph with the `next` values as extra outputs, writes them into the state initializers.
// Returns {grad_norm, skipped}.
std::pair<double, bool> Step(Graph& g) {
  const size_t base = g.outputs.size();
  for (const auto& ub : g.update_bindings) g.outputs.push_back(ub.next);
  std::vector<Tensor> outs;
  {
    Executor ex(g);
    outs = ex.Run({});
  }
  g.outputs.resize(base);
  for (size_t i = 0; i < g.update_bindings.size(); ++i)
    g.update_bindings[i].state->initializer = std::make_shared<Tensor>(outs[base + i]);
  return {outs[base - 2].GetDouble(0), outs[base - 1].GetDouble(0) != 0};
}

std::vector<double> Vec(const Tensor& t) {
  std::vector<double> v(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) v[i] = t.GetDouble(i);
  return v;
}

// ---- Reference (torch.optim semantics, double) ----
struct Ref {
  OptimizerOptions o;
  std::vector<std::vector<double>> p, m, v, buf;
  int64_t step = 0;
};

// Gradients of the model at the reference parameters: d = W x + b - t; dW = 2 d x^T; db = 2 sum_j d.
std::vector<std::vector<double>> RefGrads(const Ref& r, const std::vector<double>& x, const std::vector<double>& t) {
  const auto& W = r.p[0];
  const auto& b = r.p[1];
  std::vector<double> d(6), dW(12, 0.0), db(3, 0.0);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j) {
      double s = b[i] - t[i * 2 + j];
      for (int k = 0; k < 4; ++k) s += W[i * 4 + k] * x[k * 2 + j];
      d[i * 2 + j] = s;
    }
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j) {
      for (int k = 0; k < 4; ++k) dW[i * 4 + k] += 2 * d[i * 2 + j] * x[k * 2 + j];
      db[i] += 2 * d[i * 2 + j];
    }
  return {dW, db};
}

double RefStep(Ref& r, std::vector<std::vector<double>> g) {
  const OptimizerOptions& o = r.o;
  double sq = 0;
  for (auto& gi : g)
    for (double e : gi) sq += e * e;
  const double norm = std::sqrt(sq);
  if (o.clip_grad_norm > 0) {  // torch.nn.utils.clip_grad_norm_
    const double coef = std::min(1.0, o.clip_grad_norm / (norm + 1e-6));
    for (auto& gi : g)
      for (double& e : gi) e *= coef;
  }
  const double lr = o.lr, wd = o.WeightDecay(), eps = o.Eps(), b1 = o.beta1, b2 = o.beta2, mu = o.momentum;
  r.step += 1;
  const double bc1 = 1 - std::pow(b1, r.step), bc2 = 1 - std::pow(b2, r.step);
  for (size_t i = 0; i < r.p.size(); ++i) {
    auto& p = r.p[i];
    auto& gi = g[i];
    std::vector<double> upd(p.size());
    for (size_t e = 0; e < p.size(); ++e) {
      double gr = gi[e];
      switch (o.kind) {
        case OptimizerKind::kSgd:
        case OptimizerKind::kMomentum:
        case OptimizerKind::kNesterov: {
          if (wd != 0) gr += wd * p[e];
          if (o.kind != OptimizerKind::kSgd) {
            double& bf = r.buf[i][e];
            bf = r.step == 1 ? gr : mu * bf + gr;
            gr = o.kind == OptimizerKind::kNesterov ? gr + mu * bf : bf;
          }
          p[e] -= lr * gr;
          break;
        }
        case OptimizerKind::kAdam:
        case OptimizerKind::kAdamW: {
          if (o.kind == OptimizerKind::kAdamW)
            p[e] *= 1 - lr * wd;
          else if (wd != 0)
            gr += wd * p[e];
          double& m = r.m[i][e];
          double& v = r.v[i][e];
          m = m + (gr - m) * (1 - b1);
          v = v * b2 + (1 - b2) * gr * gr;
          p[e] -= lr / bc1 * m / (std::sqrt(v) / std::sqrt(bc2) + eps);
          break;
        }
        case OptimizerKind::kLamb: {  // Apex FusedLAMB, adam_w_mode, stage 1
          double& m = r.m[i][e];
          double& v = r.v[i][e];
          m = b1 * m + (1 - b1) * gr;
          v = b2 * v + (1 - b2) * gr * gr;
          upd[e] = (m / bc1) / (std::sqrt(v / bc2) + eps) + wd * p[e];
          break;
        }
      }
    }
    if (o.kind == OptimizerKind::kLamb) {  // stage 2: trust ratio per tensor
      double pn = 0, un = 0;
      for (size_t e = 0; e < p.size(); ++e) {
        pn += p[e] * p[e];
        un += upd[e] * upd[e];
      }
      pn = std::sqrt(pn);
      un = std::sqrt(un);
      const double ratio = (wd != 0 && pn != 0 && un != 0) ? pn / un : 1.0;
      for (size_t e = 0; e < p.size(); ++e) p[e] -= lr * ratio * upd[e];
    }
  }
  return norm;
}

void CheckTraining(DataType dt, OptimizerOptions o, double rtol, int steps = 6) {
  Tensor W = test::RandomTensor(DataType::kFloat64, {3, 4});
  Tensor b = test::RandomTensor(DataType::kFloat64, {3, 1});
  Tensor x = test::RandomTensor(DataType::kFloat64, {4, 2});
  Tensor t = test::RandomTensor(DataType::kFloat64, {3, 2});
  // Clipping must clip whatever the draw: targets 10 above the range of W x + b (|.| <= 5) make every residual at
  // least 4 in size, so each element of the bias gradient (twice a row's residual sum) at least 16.
  if (o.clip_grad_norm > 0)
    for (int64_t e = 0; e < t.numel(); ++e) t.SetDouble(e, t.GetDouble(e) + 10);
  if (dt == DataType::kFloat32) {  // the reference starts from the same (rounded) values
    W = W.CastTo(dt).CastTo(DataType::kFloat64);
    b = b.CastTo(dt).CastTo(DataType::kFloat64);
    x = x.CastTo(dt).CastTo(DataType::kFloat64);
    t = t.CastTo(dt).CastTo(DataType::kFloat64);
  }
  Model mdl = Build(dt, W, b, x, t, o);
  Graph& g = *mdl.g;
  Ref r;
  r.o = o;
  r.p = {Vec(W), Vec(b)};
  for (const auto& p : r.p) {
    r.m.emplace_back(p.size(), 0.0);
    r.v.emplace_back(p.size(), 0.0);
    r.buf.emplace_back(p.size(), 0.0);
  }
  for (int s = 0; s < steps; ++s) {
    const double ref_norm = RefStep(r, RefGrads(r, Vec(x), Vec(t)));
    auto [norm, skipped] = Step(g);
    EXPECT_FALSE(skipped);
    EXPECT_NEAR(norm, ref_norm, 1e-5 * ref_norm) << "step " << s;
    if (o.clip_grad_norm > 0 && s == 0) {
      EXPECT_GT(ref_norm, 2 * o.clip_grad_norm) << "the clipping test must clip";
    }
    EXPECT_EQ(g.FindValue("optimizer.step")->initializer->GetInt64(0), s + 1);
    const char* names[2] = {"W", "b"};
    for (int i = 0; i < 2; ++i) {
      const Tensor& p = *g.FindValue(names[i])->initializer;
      ASSERT_EQ(p.dtype(), dt);
      for (int64_t e = 0; e < p.numel(); ++e)
        EXPECT_NEAR(p.GetDouble(e), r.p[i][e], rtol * std::max(1.0, std::fabs(r.p[i][e])))
            << OptimizerKindName(o.kind) << " step " << s << " " << names[i] << "[" << e << "]";
    }
  }
}

OptimizerOptions Opts(OptimizerKind k, double lr) {
  OptimizerOptions o;
  o.kind = k;
  o.lr = lr;
  return o;
}

const OptimizerKind kAll[] = {OptimizerKind::kSgd,  OptimizerKind::kMomentum, OptimizerKind::kNesterov,
                              OptimizerKind::kAdam, OptimizerKind::kAdamW,    OptimizerKind::kLamb};

TEST(Optimizer, MatchesTorchFloat64) {
  for (OptimizerKind k : kAll) CheckTraining(DataType::kFloat64, Opts(k, 0.02), 1e-6);
}

TEST(Optimizer, MatchesTorchFloat32) {
  for (OptimizerKind k : kAll) CheckTraining(DataType::kFloat32, Opts(k, 0.02), 1e-5);
}

TEST(Optimizer, WeightDecayFloat64) {
  for (OptimizerKind k : kAll) {
    OptimizerOptions o = Opts(k, 0.05);
    o.weight_decay = 0.1;
    CheckTraining(DataType::kFloat64, o, 1e-6);
  }
}

TEST(Optimizer, LambWithoutWeightDecayIsAdamDirection) {
  OptimizerOptions o = Opts(OptimizerKind::kLamb, 0.05);
  o.weight_decay = 0.0;
  CheckTraining(DataType::kFloat64, o, 1e-6);
}

TEST(Optimizer, ClipGradNorm) {
  for (OptimizerKind k : kAll) {
    OptimizerOptions o = Opts(k, 0.05);
    o.clip_grad_norm = 0.5;  // the model's gradient norm is many times this (CheckTraining)
    o.beta1 = 0.8;
    o.beta2 = 0.99;
    CheckTraining(DataType::kFloat64, o, 1e-6);
    CheckTraining(DataType::kFloat32, o, 1e-5);
  }
}

TEST(Optimizer, DefaultsFollowTorchAndApex) {
  EXPECT_EQ(OptimizerOptions{}.kind, OptimizerKind::kAdam);
  EXPECT_EQ(Opts(OptimizerKind::kAdam, 1e-3).WeightDecay(), 0.0);
  EXPECT_EQ(Opts(OptimizerKind::kAdamW, 1e-3).WeightDecay(), 0.01);
  EXPECT_EQ(Opts(OptimizerKind::kLamb, 1e-3).WeightDecay(), 0.01);
  EXPECT_EQ(Opts(OptimizerKind::kAdam, 1e-3).Eps(), 1e-8);
  EXPECT_EQ(Opts(OptimizerKind::kLamb, 1e-3).Eps(), 1e-6);
  EXPECT_EQ(ParseOptimizerKind("nesterov"), OptimizerKind::kNesterov);
  EXPECT_THROW(ParseOptimizerKind("adagrad"), Error);
}

TEST(Optimizer, Structure) {
  Tensor W = test::RandomTensor(DataType::kFloat32, {3, 4}), b = test::RandomTensor(DataType::kFloat32, {3, 1});
  Tensor x = test::RandomTensor(DataType::kFloat32, {4, 2}), t = test::RandomTensor(DataType::kFloat32, {3, 2});
  Model m = Build(DataType::kFloat32, W, b, x, t, Opts(OptimizerKind::kAdam, 1e-3));
  Graph& g = *m.g;
  int updates = 0;
  for (const auto& n : g.nodes()) updates += n->op_type == "OptimizerUpdate" && n->domain == kInternalDomain;
  EXPECT_EQ(updates, 1);  // one multi-tensor node, not one per parameter
  // W, b, their exp_avg and exp_avg_sq, the step counter.
  ASSERT_EQ(g.update_bindings.size(), 7u);
  EXPECT_EQ(g.update_bindings[0].state->name, "W");
  EXPECT_EQ(g.update_bindings[2].state->name, "W.exp_avg");
  EXPECT_EQ(g.update_bindings[4].state->name, "W.exp_avg_sq");
  EXPECT_EQ(g.update_bindings[6].state->name, "optimizer.step");
  for (const auto& ub : g.update_bindings) {
    EXPECT_EQ(ub.next->dtype, ub.state->dtype) << ub.state->name;
    EXPECT_EQ(ub.next->shape.ToString(), ub.state->shape.ToString()) << ub.state->name;
    EXPECT_EQ(ub.next->producer, m.opt->update_node());
  }
  ASSERT_NE(g.FindValue("optimizer.lr"), nullptr);
  EXPECT_EQ(g.FindValue("optimizer.lr")->initializer->GetDouble(0), 1e-3);
  // Outputs: the loss, grad_norm, skipped; the gradients are consumed.
  ASSERT_EQ(g.outputs.size(), 3u);
  EXPECT_EQ(g.outputs[0]->name, "loss");
  EXPECT_EQ(g.outputs[1], m.opt->grad_norm());
  EXPECT_EQ(g.outputs[2], m.opt->skipped());
  EXPECT_EQ(m.opt->skipped()->dtype, DataType::kBool);
}

TEST(Optimizer, StateCountsPerKind) {
  const size_t want[] = {3, 5, 5, 7, 7, 7};  // params + states + step counter
  for (int i = 0; i < 6; ++i) {
    Tensor W = test::RandomTensor(DataType::kFloat32, {3, 4}), b = test::RandomTensor(DataType::kFloat32, {3, 1});
    Tensor x = test::RandomTensor(DataType::kFloat32, {4, 2}), t = test::RandomTensor(DataType::kFloat32, {3, 2});
    Model m = Build(DataType::kFloat32, W, b, x, t, Opts(kAll[i], 1e-3));
    EXPECT_EQ(m.g->update_bindings.size(), want[i]) << OptimizerKindName(kAll[i]);
  }
}

// Negative twin: nothing to train, nothing changes.
TEST(Optimizer, NoUpdateWithoutParameters) {
  Graph g;
  g.opset_imports[""] = 17;
  Value* x = g.AddInitializer("x", Tensor::Scalar(1.0f));
  g.outputs.push_back(Emit(g, "Neg", {x}));
  const size_t values = g.values().size(), nodes = g.nodes().size();
  OptimizerPass pass(Opts(OptimizerKind::kAdam, 1e-3), {}, {});
  EXPECT_FALSE(pass.Run(g));
  EXPECT_EQ(g.values().size(), values);
  EXPECT_EQ(g.nodes().size(), nodes);
  EXPECT_TRUE(g.update_bindings.empty());
}

// A step whose gradients are not all finite changes nothing, bit for bit, and reports skipped.
TEST(Optimizer, NonFiniteGradientSkipsTheStep) {
  for (OptimizerKind k : kAll)
    for (DataType dt : {DataType::kFloat32, DataType::kFloat64}) {
      Tensor W = test::RandomTensor(DataType::kFloat64, {3, 4}), b = test::RandomTensor(DataType::kFloat64, {3, 1});
      Tensor x = test::RandomTensor(DataType::kFloat64, {4, 2}), t = test::RandomTensor(DataType::kFloat64, {3, 2});
      OptimizerOptions o = Opts(k, 0.05);
      o.clip_grad_norm = 1.0;
      Model m = Build(dt, W, b, x, t, o);
      Graph& g = *m.g;
      Step(g);  // a normal step first, so the states are not zero
      std::vector<Tensor> before;
      for (const auto& ub : g.update_bindings) before.push_back(ub.state->initializer->Clone());
      // x[0] = inf: dW's first column becomes inf/NaN and everything else follows.
      g.FindValue("x")->initializer->SetDouble(0, std::numeric_limits<double>::infinity());
      auto [norm, skipped] = Step(g);
      EXPECT_TRUE(skipped) << OptimizerKindName(k);
      EXPECT_FALSE(std::isfinite(norm));
      for (size_t i = 0; i < g.update_bindings.size(); ++i) {
        const Tensor& now = *g.update_bindings[i].state->initializer;
        ASSERT_EQ(now.nbytes(), before[i].nbytes());
        EXPECT_EQ(std::memcmp(now.raw(), before[i].raw(), now.nbytes()), 0)
            << OptimizerKindName(k) << " " << g.update_bindings[i].state->name;
      }
      EXPECT_EQ(g.FindValue("optimizer.step")->initializer->GetInt64(0), 1);
      // Finite again: the step proceeds and the counter advances.
      g.FindValue("x")->initializer->SetDouble(0, 0.5);
      auto [norm2, skipped2] = Step(g);
      EXPECT_FALSE(skipped2);
      EXPECT_TRUE(std::isfinite(norm2));
      EXPECT_EQ(g.FindValue("optimizer.step")->initializer->GetInt64(0), 2);
    }
}

// The kernel on tensors spanning many chunks: results do not depend on how TBB splits the work (run twice,
// bit-identical), and a NaN in the last chunk of the last tensor still skips everything.
TEST(Optimizer, MultiChunkKernelIsDeterministic) {
  const int64_t sizes[] = {100003, 7, 70000};
  std::vector<std::vector<float>> p, g, m, v;
  for (int64_t n : sizes) {
    Tensor a = test::RandomTensor(DataType::kFloat32, {n}), b = test::RandomTensor(DataType::kFloat32, {n});
    p.emplace_back(a.data<float>(), a.data<float>() + n);
    g.emplace_back(b.data<float>(), b.data<float>() + n);
    m.emplace_back(n, 0.01f);
    v.emplace_back(n, 0.02f);
  }
  auto run = [&](std::vector<std::vector<float>>& po, std::vector<std::vector<float>>& mo,
                 std::vector<std::vector<float>>& vo) {
    std::vector<cpu::OptimTensor> ts(3);
    po = p;
    mo = m;
    vo = v;
    for (int i = 0; i < 3; ++i)
      ts[i] = {sizes[i],    false,        p[i].data(),  g[i].data(), m[i].data(),
               v[i].data(), po[i].data(), mo[i].data(), vo[i].data()};
    cpu::OptimHyper h;
    h.kind = cpu::OptimKind::kLamb;
    h.weight_decay = 0.01;
    h.clip_grad_norm = 1.0;
    return cpu::MultiTensorUpdate(h, 1e-3, 3, ts);
  };
  std::vector<std::vector<float>> p1, m1, v1, p2, m2, v2;
  const cpu::OptimResult r1 = run(p1, m1, v1), r2 = run(p2, m2, v2);
  EXPECT_EQ(r1.grad_norm, r2.grad_norm);
  EXPECT_FALSE(r1.skipped);
  EXPECT_EQ(r1.step, 4);
  EXPECT_EQ(p1, p2);
  EXPECT_EQ(m1, m2);
  EXPECT_EQ(v1, v2);
  EXPECT_NE(p1[0], p[0]);
  double sq = 0;
  for (const auto& gi : g)
    for (float e : gi) sq += static_cast<double>(e) * e;
  EXPECT_NEAR(r1.grad_norm, std::sqrt(sq), 1e-12 * std::sqrt(sq));
  g[2].back() = std::numeric_limits<float>::quiet_NaN();
  const cpu::OptimResult r3 = run(p1, m1, v1);
  EXPECT_TRUE(r3.skipped);
  EXPECT_EQ(r3.step, 3);
  EXPECT_EQ(p1, p);
  EXPECT_EQ(m1, m);
  EXPECT_EQ(v1, v);
}

}  // namespace
}  // namespace ot

namespace ot {
namespace {
// The schema rejects an unknown kind and operand lists that do not match num_params.
TEST(Optimizer, SchemaRejectsMalformedNodes) {
  Tensor W = test::RandomTensor(DataType::kFloat32, {3, 4}), b = test::RandomTensor(DataType::kFloat32, {3, 1});
  Tensor x = test::RandomTensor(DataType::kFloat32, {4, 2}), t = test::RandomTensor(DataType::kFloat32, {3, 2});
  Model m = Build(DataType::kFloat32, W, b, x, t, Opts(OptimizerKind::kMomentum, 1e-3));
  Node* n = m.opt->update_node();
  EXPECT_NO_THROW(InferNode(*n));
  n->attrs["kind"] = Attribute::String("adagrad");
  EXPECT_THROW(InferNode(*n), Error);
  n->attrs["kind"] = Attribute::String("adam");  // needs two states per parameter, the node has one
  EXPECT_THROW(InferNode(*n), Error);
  n->attrs["kind"] = Attribute::String("momentum");
  n->attrs["num_params"] = Attribute::Int(3);
  EXPECT_THROW(InferNode(*n), Error);
}
}  // namespace
}  // namespace ot

namespace ot {
namespace {

// Adam/AdamW on float32 parameters has two loops (cpu_ops/optimizer.cc): in place (the plan's call, four restrict
// pointers) and into separate outputs (blocks through local arrays). They give the same bits, and three steps stay
// within a few float roundings of the same steps in double -- for Adam, L2 Adam and AdamW, with clipping and a
// loss-scale factor.
TEST(Optimizer, AdamInPlaceEqualsOutOfPlaceAndFollowsDouble) {
  const int64_t n = 70001;  // three chunks, a tail of the vector loop
  for (int variant = 0; variant < 3; ++variant) {
    SCOPED_TRACE(variant);
    cpu::OptimHyper h;
    h.kind = variant == 2 ? cpu::OptimKind::kAdamW : cpu::OptimKind::kAdam;
    h.weight_decay = variant == 0 ? 0.0 : 0.05;
    h.clip_grad_norm = 50.0;
    Tensor p0 = test::RandomTensor(DataType::kFloat32, {n});
    std::vector<float> p(p0.data<float>(), p0.data<float>() + n), m(n, 0.f), v(n, 0.f);
    std::vector<float> po = p, mo = m, vo = v;  // out of place: fresh outputs every step
    std::vector<double> pd(p.begin(), p.end()), md(n, 0.0), vd(n, 0.0);
    for (int64_t step = 0; step < 3; ++step) {
      Tensor gt = test::RandomTensor(DataType::kFloat32, {n});
      const float* g = gt.data<float>();
      cpu::OptimStepOptions x;
      x.grad_scale = 0.5;  // gradients scaled by S = 2
      cpu::OptimTensor in{n, false, p.data(), g, m.data(), v.data(), p.data(), m.data(), v.data()};
      std::vector<float> pn(n), mn(n), vn(n);
      cpu::OptimTensor out{n, false, po.data(), g, mo.data(), vo.data(), pn.data(), mn.data(), vn.data()};
      const cpu::OptimResult a = cpu::MultiTensorUpdate(h, 1e-2, step, {in}, 1, 0, x);
      const cpu::OptimResult b = cpu::MultiTensorUpdate(h, 1e-2, step, {out}, 1, 0, x);
      ASSERT_FALSE(a.skipped);
      EXPECT_EQ(a.grad_norm, b.grad_norm);
      ASSERT_EQ(0, std::memcmp(p.data(), pn.data(), n * 4)) << "step " << step;
      ASSERT_EQ(0, std::memcmp(m.data(), mn.data(), n * 4));
      ASSERT_EQ(0, std::memcmp(v.data(), vn.data(), n * 4));
      po = pn, mo = mn, vo = vn;
      // The same step in double (torch.optim.Adam's formula).
      double sq = 0;
      for (int64_t i = 0; i < n; ++i) sq += 0.25 * static_cast<double>(g[i]) * g[i];
      const double coef = std::min(1.0, h.clip_grad_norm / (std::sqrt(sq) + 1e-6)) * 0.5;
      const double t = static_cast<double>(step + 1), bc1 = 1 - std::pow(h.beta1, t), bc2 = 1 - std::pow(h.beta2, t);
      for (int64_t i = 0; i < n; ++i) {
        double gi = coef * g[i];
        if (variant == 1) gi += h.weight_decay * pd[i];
        if (variant == 2) pd[i] *= 1 - 1e-2 * h.weight_decay;
        md[i] += (1 - h.beta1) * (gi - md[i]);
        vd[i] = vd[i] * h.beta2 + (1 - h.beta2) * gi * gi;
        pd[i] -= 1e-2 / bc1 * md[i] / (std::sqrt(vd[i]) / std::sqrt(bc2) + h.eps);
      }
    }
    double err = 0, ref = 0, merr = 0, mref = 0;
    for (int64_t i = 0; i < n; ++i) {
      err += (p[i] - pd[i]) * (p[i] - pd[i]);
      ref += pd[i] * pd[i];
      merr += (m[i] - md[i]) * (m[i] - md[i]);
      mref += md[i] * md[i];
    }
    EXPECT_LT(std::sqrt(err / ref), 3e-7);
    EXPECT_LT(std::sqrt(merr / mref), 3e-7);
    EXPECT_NE(p[0], p0.data<float>()[0]);
  }
}

}  // namespace
}  // namespace ot
