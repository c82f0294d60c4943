// half_grad_update: the optimizer update reads half weight gradients as they are. The update kernel on a half
// gradient equals, bit for bit, the update on its float32 widening -- every optimizer kind, both half types, loss
// scale, clipping, statistics, accumulation, a non-finite gradient (fresh random values each run, several chunks).
// The pass removes the Casts before the update of an --amp step, and the step's losses and states stay bit for bit
// those of the step without it (bf16; fp16 with dynamic loss scaling; accumulation). Negative twins: a Cast with
// another reader, a sharded update.
#include "passes/half_grad_update.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cpu_ops/optimizer.h"
#include "graph/graph.h"
#include "graph/op_registry.h"
#include "graph/ops/optimizer_layout.h"
#include "graph/verifier.h"
#include "passes/step_graph.h"
#include "tests/passes/amp_step_util.h"
#include "tests/passes/grad_check.h"
#include "tests/test_util.h"

namespace ot {
namespace {

using test::Emit;

// The state of one parameter of a kernel-level update: parameter, states, sum, half copy.
struct ParamState {
  std::vector<float> p, s0, s1, acc;
  std::vector<uint16_t> half;
  bool operator==(const ParamState& o) const {
    return p == o.p && s0 == o.s0 && s1 == o.s1 && acc == o.acc && half == o.half;
  }
};

// Bitwise equality of float vectors (NaN-safe: the bits are compared).
bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

TEST(HalfGradUpdate, KernelOnHalfGradientsEqualsItsFloatWidening) {
  const std::vector<int64_t> sizes = {70001, 17, 32768};  // three chunks with a tail, a small tensor, one whole chunk
  for (const DataType half : {DataType::kBFloat16, DataType::kFloat16})
    for (const cpu::OptimKind kind : {cpu::OptimKind::kSgd, cpu::OptimKind::kMomentum, cpu::OptimKind::kNesterov,
                                      cpu::OptimKind::kAdam, cpu::OptimKind::kAdamW, cpu::OptimKind::kLamb})
      for (const int64_t accumulate : {int64_t{1}, int64_t{2}}) {
        SCOPED_TRACE(DataTypeName(half) + " kind " + std::to_string(static_cast<int>(kind)) + " accumulate " +
                     std::to_string(accumulate));
        cpu::OptimHyper h;
        h.kind = kind;
        h.weight_decay = 0.01;
        h.clip_grad_norm = 30.0;  // clips some steps (gradients of norm ~ sqrt(n / 3) / 2 up to 75)
        const cpu::HalfKind hk = half == DataType::kBFloat16 ? cpu::HalfKind::kBFloat16 : cpu::HalfKind::kFloat16;
        const int k = cpu::OptimStatesPerParam(kind);
        // Two runs from the same start: a (half gradients), b (their float32 widenings).
        std::vector<ParamState> a(sizes.size());
        for (size_t t = 0; t < sizes.size(); ++t) {
          const Tensor p = test::RandomTensor(DataType::kFloat32, {sizes[t]});
          a[t].p.assign(p.data<float>(), p.data<float>() + sizes[t]);
          a[t].s0.assign(k >= 1 ? sizes[t] : 0, 0.f);
          a[t].s1.assign(k >= 2 ? sizes[t] : 0, 0.f);
          a[t].acc.assign(accumulate > 1 ? sizes[t] : 0, 0.f);
          a[t].half.assign(sizes[t], 0);
        }
        std::vector<ParamState> b = a;
        int64_t step_a = 0, step_b = 0, micro_a = 0, micro_b = 0;
        for (int call = 0; call < 6; ++call) {
          std::vector<Tensor> gh(sizes.size()), g32(sizes.size());
          for (size_t t = 0; t < sizes.size(); ++t) {
            gh[t] = test::RandomTensor(DataType::kFloat32, {sizes[t]}, -1, 1).CastTo(half);
            // Exact zeros (the zero-fraction statistic) and, on call 3, an infinity: that step is skipped.
            for (int64_t i = 0; i < sizes[t]; i += 97) gh[t].SetDouble(i, 0.0);
            if (call == 3 && t == 1) gh[t].SetDouble(5, std::numeric_limits<double>::infinity());
            g32[t] = gh[t].CastTo(DataType::kFloat32);
          }
          auto tensors = [&](std::vector<ParamState>& s, const std::vector<Tensor>& g, bool half_grad) {
            std::vector<cpu::OptimTensor> ts(sizes.size());
            for (size_t t = 0; t < sizes.size(); ++t) {
              cpu::OptimTensor& o = ts[t];
              o.n = sizes[t];
              o.p = o.p_out = s[t].p.data();
              o.g = g[t].raw();
              if (half_grad) o.grad_half = hk;
              if (k >= 1) o.s0 = o.s0_out = s[t].s0.data();
              if (k >= 2) o.s1 = o.s1_out = s[t].s1.data();
              if (accumulate > 1) o.acc = o.acc_out = s[t].acc.data();
              o.half_out = s[t].half.data();
              o.half = hk;
            }
            return ts;
          };
          cpu::OptimStepOptions x;
          x.grad_scale = 0.25 * (call + 1);  // a loss scale S = 4 / (call + 1)
          x.stats = true;
          const cpu::OptimResult ra =
              cpu::MultiTensorUpdate(h, 1e-2, step_a, tensors(a, gh, true), accumulate, micro_a, x);
          const cpu::OptimResult rb =
              cpu::MultiTensorUpdate(h, 1e-2, step_b, tensors(b, g32, false), accumulate, micro_b, x);
          step_a = ra.step, step_b = rb.step, micro_a = ra.micro, micro_b = rb.micro;
          EXPECT_EQ(ra.skipped, rb.skipped) << call;
          EXPECT_EQ(ra.applied, rb.applied) << call;
          EXPECT_EQ(ra.step, rb.step) << call;
          if (ra.applied) {
            EXPECT_EQ(std::memcmp(&ra.grad_norm, &rb.grad_norm, sizeof(double)), 0) << call;
          }
          EXPECT_EQ(ra.param_norm, rb.param_norm) << call;
          EXPECT_EQ(ra.zero_fraction, rb.zero_fraction) << call;
          EXPECT_GT(ra.zero_fraction, 0.0) << call;
          for (size_t t = 0; t < sizes.size(); ++t) {
            ASSERT_TRUE(SameBits(a[t].p, b[t].p)) << "call " << call << " tensor " << t;
            ASSERT_TRUE(SameBits(a[t].s0, b[t].s0)) << "call " << call << " tensor " << t;
            ASSERT_TRUE(SameBits(a[t].s1, b[t].s1)) << "call " << call << " tensor " << t;
            ASSERT_TRUE(SameBits(a[t].acc, b[t].acc)) << "call " << call << " tensor " << t;
            ASSERT_EQ(a[t].half, b[t].half) << "call " << call << " tensor " << t;
          }
        }
        // The steps did something: some were applied and one was skipped (the infinity on call 3).
        EXPECT_EQ(step_a, accumulate == 1 ? 5 : 2);
      }
}

// The MLP step under --amp, built by the whole pipeline with or without half_grad_update.
struct AmpRun {
  std::vector<double> losses;
  std::map<std::string, Tensor> states;  // every update binding's state after the run
  int casts_before_update = 0;           // Casts whose output the update reads
  int half_grads = 0;                    // update gradient inputs of a half dtype
};

// x [6, 8] -> Gemm(W1, b1) -> Relu -> Gemm(W2, b2) -> logits (amp_test's shapes, so amp_test::Batch feeds it).
std::unique_ptr<Graph> MlpModel() {
  auto g = std::make_unique<Graph>();
  g->opset_imports[""] = 15;
  Value* x = g->AddValue("x");
  x->dtype = DataType::kFloat32;
  x->shape = Shape::Static({amp_test::kBatch, amp_test::kIn});
  g->inputs.push_back(x);
  const amp_test::Weights w = amp_test::Weights::Random();
  Value* h = Emit(*g, "Gemm", {x, g->AddInitializer("W1", w.w1), g->AddInitializer("b1", w.b1)});
  Value* logits = g->AddValue("logits");
  g->AddNode("Gemm", {Emit(*g, "Relu", {h}), g->AddInitializer("W2", w.w2), g->AddInitializer("b2", w.b2)}, {logits},
             "fc2");
  g->outputs.push_back(logits);
  InferShapes(*g, true);
  return g;
}

AmpRun RunAmpSteps(DataType half, bool fold, int64_t accumulate, uint64_t seed) {
  test::Rng().seed(seed);
  auto g = MlpModel();
  StepOptions o;
  o.loss.kind = "cross_entropy";
  o.loss.logits = "logits";
  o.loss.labels = "y";
  o.optimizer.kind = OptimizerKind::kAdamW;
  o.optimizer.lr = 0.01;
  o.optimizer.accumulate = accumulate;
  o.optimizer.clip_grad_norm = 1.0;
  o.amp.half = half;
  if (!fold) o.control.disabled = {"half_grad_update"};
  const StepGraphInfo info = BuildStepGraph(*g, o);
  AmpRun r;
  const Node* upd = amp_test::UpdateNode(*g);
  const OptimizerLayout l = OptimizerLayout::Of(*upd);
  for (int i = 0; i < l.n; ++i) {
    const Value* gv = upd->inputs[l.grad_in(i)];
    if (gv->producer && gv->producer->op_type == "Cast") ++r.casts_before_update;
    if (gv->dtype == half) ++r.half_grads;
  }
  test::Rng().seed(seed + 1);
  for (int s = 0; s < 6; ++s) {
    const std::vector<Tensor> outs = amp_test::RunStep(*g, amp_test::Batch());
    r.losses.push_back(amp_test::OutputValue(*g, outs, info.loss));
  }
  for (const auto& b : g->update_bindings) r.states[b.state->name] = b.state->initializer->Clone();
  return r;
}

TEST(HalfGradUpdate, AmpStepLosesItsCastsAndKeepsItsNumbers) {
  struct Case {
    DataType half;
    int64_t accumulate;
  };
  for (const Case c : {Case{DataType::kBFloat16, 1}, Case{DataType::kFloat16, 1}, Case{DataType::kBFloat16, 2}}) {
    SCOPED_TRACE(DataTypeName(c.half) + " accumulate " + std::to_string(c.accumulate));
    const uint64_t seed = test::Rng()();
    const AmpRun with = RunAmpSteps(c.half, true, c.accumulate, seed);
    const AmpRun without = RunAmpSteps(c.half, false, c.accumulate, seed);
    // Without the pass every weight gradient reaches the update through a Cast; with it, none does.
    EXPECT_GE(without.casts_before_update, 3);
    EXPECT_EQ(without.half_grads, 0);
    EXPECT_EQ(with.casts_before_update, 0);
    EXPECT_EQ(with.half_grads, without.casts_before_update);
    ASSERT_EQ(with.losses.size(), without.losses.size());
    for (size_t s = 0; s < with.losses.size(); ++s) {
      EXPECT_EQ(with.losses[s], without.losses[s]) << "step " << s;
      EXPECT_TRUE(std::isfinite(with.losses[s])) << "step " << s;
    }
    EXPECT_NE(with.losses.front(), with.losses.back());  // it trained
    ASSERT_EQ(with.states.size(), without.states.size());
    for (const auto& [name, t] : with.states) {
      const Tensor& u = without.states.at(name);
      ASSERT_EQ(t.nbytes(), u.nbytes()) << name;
      EXPECT_EQ(std::memcmp(t.raw(), u.raw(), t.nbytes()), 0) << name;
    }
  }
}

TEST(HalfGradUpdate, CastsWithOtherReadersAndShardedUpdatesStay) {
  // A Cast whose float32 gradient something else reads too.
  {
    amp_test::Step s = amp_test::MakeStep(amp_test::Weights::Random());
    Graph& g = *s.graph;
    Node* upd = amp_test::UpdateNode(g);
    const OptimizerLayout l = OptimizerLayout::Of(*upd);
    // Route W1's gradient through half and back, as amp does, and give the float32 value a second reader.
    Value* g32 = upd->inputs[l.grad_in(0)];
    Value* h = Emit(g, "Cast", {g32}, {{"to", Attribute::Int(static_cast<int64_t>(DataType::kBFloat16))}});
    Value* back = Emit(g, "Cast", {h}, {{"to", Attribute::Int(static_cast<int64_t>(DataType::kFloat32))}});
    g.SetInput(upd, l.grad_in(0), back);
    Value* neg = Emit(g, "Neg", {back});
    g.outputs.push_back(neg);
    InferShapes(g, true);
    VerifyGraph(g);
    HalfGradUpdatePass pass;
    EXPECT_FALSE(pass.Run(g));
    EXPECT_EQ(upd->inputs[l.grad_in(0)], back);
    // Without the second reader it folds.
    g.outputs.pop_back();
    g.RemoveNode(neg->producer);
    ASSERT_EQ(back->uses.size(), 1u);
    EXPECT_TRUE(pass.Run(g));
    EXPECT_EQ(pass.folded(), 1);
    EXPECT_EQ(upd->inputs[l.grad_in(0)], h);
    VerifyGraph(g);
  }
  // A sharded update reads float32 slices: nothing changes.
  {
    amp_test::Step s = amp_test::MakeStep(amp_test::Weights::Random(), "adam", 1, 2);
    Graph& g = *s.graph;
    Node* upd = amp_test::UpdateNode(g);
    const OptimizerLayout l = OptimizerLayout::Of(*upd);
    Value* g32 = upd->inputs[l.grad_in(1)];
    Value* h = Emit(g, "Cast", {g32}, {{"to", Attribute::Int(static_cast<int64_t>(DataType::kFloat16))}});
    Value* back = Emit(g, "Cast", {h}, {{"to", Attribute::Int(static_cast<int64_t>(DataType::kFloat32))}});
    g.SetInput(upd, l.grad_in(1), back);
    InferShapes(g, true);
    VerifyGraph(g);
    EXPECT_FALSE(HalfGradUpdatePass().Run(g));
    EXPECT_EQ(upd->inputs[l.grad_in(1)], back);
  }
}

TEST(HalfGradUpdate, InTheStepPipelineAfterLossScaling) {
  const std::vector<std::string> names = StepPassNames();
  const auto at = [&](const std::string& n) { return std::find(names.begin(), names.end(), n) - names.begin(); };
  ASSERT_LT(at("half_grad_update"), static_cast<long>(names.size()));
  EXPECT_LT(at("master_weights"), at("half_grad_update"));
  EXPECT_LT(at("loss_scaling"), at("half_grad_update"));
  EXPECT_LT(at("half_grad_update"), at("fuse_bias_grad"));
}

}  // namespace
}  // namespace ot
