// loss-scaling pass: golden structure on an MLP step graph, its negative twins (mode none; a node that scales
// already), option errors, EnableOptimizerStats, and differential tests on the CPU: with a power-of-two scale the
// scaled step trains exactly like the unscaled one; an overflowing step is skipped and the scale backs off.
#include "passes/loss_scaling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "graph/ops/optimizer_layout.h"
#include "passes/master_weights.h"
#include "tests/passes/amp_step_util.h"

namespace ot {
namespace {

using namespace amp_test;

LossScaleOptions Dynamic(double init = 65536) {
  LossScaleOptions o;
  o.mode = LossScaleMode::kDynamic;
  o.init = init;
  return o;
}

TEST(LossScaling, ScalesTheSeedAndExtendsTheUpdate) {
  Step s = MakeStep(Weights::Random());
  Graph& g = *s.graph;
  const std::vector<Use> seed_readers = s.seed->uses;
  ASSERT_FALSE(seed_readers.empty());
  Node* opt = UpdateNode(g);
  const OptimizerLayout before = OptimizerLayout::Of(*opt);
  const size_t bindings = g.update_bindings.size(), outputs = g.outputs.size();

  LossScaleOptions o = Dynamic(1024);
  o.growth_interval = 100;
  o.overflows = 3;
  o.factor = 4;
  o.backoff = 0.25;
  o.min_scale = 2;
  LossScalingPass pass(o, s.seed);
  EXPECT_EQ(pass.name(), "loss_scaling");
  ASSERT_TRUE(pass.Run(g));
  VerifyGraph(g);
  InferShapes(g, true);

  // State initializers.
  Value* scale = g.FindValue("loss_scale");
  ASSERT_NE(scale, nullptr);
  EXPECT_EQ(scale, pass.scale());
  EXPECT_EQ(scale->initializer->dtype(), DataType::kFloat32);
  EXPECT_EQ(scale->initializer->GetDouble(0), 1024.0);
  for (const char* name : {"loss_scale.good_steps", "loss_scale.bad_steps"}) {
    Value* v = g.FindValue(name);
    ASSERT_NE(v, nullptr) << name;
    EXPECT_EQ(v->initializer->dtype(), DataType::kInt64);
    EXPECT_EQ(v->initializer->GetInt64(0), 0);
  }
  // The seed's readers read Mul(seed, loss_scale), a visible node.
  ASSERT_EQ(s.seed->uses.size(), 1u);
  Node* mul = s.seed->uses[0].node;
  EXPECT_EQ(mul->op_type, "Mul");
  EXPECT_EQ(mul->inputs[1], scale);
  for (const Use& u : seed_readers) EXPECT_EQ(u.node->inputs[u.input_index], mul->outputs[0]);
  // The node: attributes, three inputs at the end, three outputs, bindings.
  const OptimizerLayout l = OptimizerLayout::Of(*opt);
  EXPECT_EQ(l.loss_scaling, "dynamic");
  EXPECT_EQ(opt->attr_float("growth_factor", 0), 4.f);
  EXPECT_EQ(opt->attr_float("backoff_factor", 0), 0.25f);
  EXPECT_EQ(opt->attr_float("min_scale", 0), 2.f);
  EXPECT_EQ(opt->attr_int("growth_interval", 0), 100);
  EXPECT_EQ(opt->attr_int("overflows_to_backoff", 0), 3);
  ASSERT_EQ(static_cast<int>(opt->inputs.size()), before.num_inputs() + 3);
  ASSERT_EQ(static_cast<int>(opt->outputs.size()), before.num_outputs() + 3);
  EXPECT_EQ(opt->inputs[l.scale_in()], scale);
  EXPECT_EQ(opt->inputs[l.scale_in() + 1]->name, "loss_scale.good_steps");
  EXPECT_EQ(opt->inputs[l.scale_in() + 2]->name, "loss_scale.bad_steps");
  EXPECT_EQ(opt->outputs[l.scale_out()], pass.scale_next());
  EXPECT_EQ(pass.scale_next()->dtype, DataType::kFloat32);
  EXPECT_EQ(opt->outputs[l.scale_out() + 1]->dtype, DataType::kInt64);
  ExpectProducersConsistent(opt);
  ASSERT_EQ(g.update_bindings.size(), bindings + 3);
  for (int j = 0; j < 3; ++j) {
    EXPECT_EQ(g.update_bindings[bindings + j].state, opt->inputs[l.scale_in() + j]);
    EXPECT_EQ(g.update_bindings[bindings + j].next, opt->outputs[l.scale_out() + j]);
  }
  EXPECT_EQ(g.outputs.size(), outputs);
  // A node that scales already is left alone.
  const Shape_ snap = Snapshot(g);
  EXPECT_FALSE(LossScalingPass(o, s.seed).Run(g));
  EXPECT_TRUE(Snapshot(g) == snap);
}

// Negative twin: mode none changes nothing.
TEST(LossScaling, NoRewriteWhenModeNone) {
  Step s = MakeStep(Weights::Random());
  const Shape_ snap = Snapshot(*s.graph);
  EXPECT_FALSE(LossScalingPass(LossScaleOptions{}, s.seed).Run(*s.graph));
  EXPECT_FALSE(LossScalingPass(LossScaleOptions{}, nullptr).Run(*s.graph));
  EXPECT_TRUE(Snapshot(*s.graph) == snap);
  EXPECT_EQ(s.graph->FindValue("loss_scale"), nullptr);
  EXPECT_FALSE(UpdateNode(*s.graph)->has_attr("loss_scaling"));
}

TEST(LossScaling, BadOptionsNameTheFlag) {
  struct Bad {
    LossScaleOptions o;
    const char* flag;
  };
  std::vector<Bad> bad(6, {Dynamic(), ""});
  bad[0].o.mode = LossScaleMode::kAuto, bad[0].flag = "'auto' was not resolved";
  bad[1].o.init = 0, bad[1].flag = "--loss-scale-init";
  bad[2].o.factor = 0.5, bad[2].flag = "--loss-scale-factor";
  bad[3].o.backoff = 1.5, bad[3].flag = "--loss-scale-backoff";
  bad[4].o.growth_interval = 0, bad[4].flag = "--loss-scale-growth-interval";
  bad[5].o.overflows = 0, bad[5].flag = "--loss-scale-overflows";
  for (const Bad& b : bad) {
    Step s = MakeStep(Weights::Random(), "sgd");
    try {
      LossScalingPass(b.o, s.seed).Run(*s.graph);
      ADD_FAILURE() << "no error for " << b.flag;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(b.flag), std::string::npos) << e.what();
    }
  }
  // A seed that is not in the graph.
  Step s = MakeStep(Weights::Random(), "sgd");
  Graph other;
  Value* stray = other.AddInitializer("loss_grad_seed", Tensor::Scalar(1.f));
  EXPECT_THROW(LossScalingPass(Dynamic(), stray).Run(*s.graph), Error);
}

TEST(LossScaling, EnableOptimizerStatsAddsNamedOutputs) {
  Step s = MakeStep(Weights::Random());
  Graph& g = *s.graph;
  ASSERT_TRUE(EnableOptimizerStats(g));
  VerifyGraph(g);
  Node* opt = UpdateNode(g);
  const OptimizerLayout l = OptimizerLayout::Of(*opt);
  EXPECT_TRUE(l.stats);
  EXPECT_EQ(opt->outputs[l.param_norm_out()]->name, "param_norm");
  EXPECT_EQ(opt->outputs[l.zero_fraction_out()]->name, "zero_grad_fraction");
  EXPECT_EQ(g.outputs[g.outputs.size() - 2]->name, "param_norm");
  EXPECT_EQ(g.outputs.back()->name, "zero_grad_fraction");
  EXPECT_EQ(g.outputs.back()->dtype, DataType::kFloat32);
  // Negative twin: on already.
  const Shape_ snap = Snapshot(g);
  EXPECT_FALSE(EnableOptimizerStats(g));
  EXPECT_TRUE(Snapshot(g) == snap);
  // The outputs carry the right numbers: param_norm is the norm of the updated weights.
  const auto outs = RunStep(g, Batch());
  double sq = 0;
  for (const char* name : {"W1", "b1", "W2", "b2"}) {
    const Tensor& t = *g.FindValue(name)->initializer;
    for (int64_t e = 0; e < t.numel(); ++e) sq += t.GetDouble(e) * t.GetDouble(e);
  }
  EXPECT_NEAR(OutputValue(g, outs, "param_norm"), std::sqrt(sq), 1e-6 * std::sqrt(sq));
  const double zf = OutputValue(g, outs, "zero_grad_fraction");
  EXPECT_GE(zf, 0.0);
  EXPECT_LT(zf, 1.0);
}

// Differential: a power-of-two scale is exact in float32, so the scaled step trains like the unscaled one (same
// losses, same weights and moments); the scale grows after growth_interval steps.
TEST(LossScaling, TrainsLikeTheUnscaledGraph) {
  for (int64_t K : {1, 2}) {
    const Weights w = Weights::Random();
    Step a = MakeStep(w, "adam", K), b = MakeStep(w, "adam", K);
    LossScaleOptions o = Dynamic(1024);
    o.growth_interval = 2;
    ASSERT_TRUE(LossScalingPass(o, b.seed).Run(*b.graph));
    for (int step = 0; step < 5 * K; ++step) {
      const auto feeds = Batch();
      const auto oa = RunStep(*a.graph, feeds), ob = RunStep(*b.graph, feeds);
      EXPECT_NEAR(OutputValue(*b.graph, ob, b.loss), OutputValue(*a.graph, oa, a.loss), 1e-7);
      if ((step + 1) % K == 0) {  // grad_norm is the unscaled norm
        const double na = OutputValue(*a.graph, oa, "grad_norm");
        EXPECT_NEAR(OutputValue(*b.graph, ob, "grad_norm"), na, 1e-6 * na);
      }
    }
    for (const char* name : {"W1", "b1", "W2", "b2", "W1.exp_avg", "W2.exp_avg_sq"})
      test::ExpectClose(*b.graph->FindValue(name)->initializer, *a.graph->FindValue(name)->initializer, 1e-6, 1e-9);
    // 5 optimizer steps with growth every 2: 1024 -> 2048 -> 4096.
    EXPECT_EQ(b.graph->FindValue("loss_scale")->initializer->GetDouble(0), 4096.0);
    EXPECT_EQ(b.graph->FindValue("loss_scale.good_steps")->initializer->GetInt64(0), 1);
  }
}

// Differential with an injected overflow: an input of inf at one step makes every gradient non-finite; that step
// changes no weight or moment (bit for bit), the scale halves, and the next steps train again. The unscaled
// reference graph skips the same step.
TEST(LossScaling, InjectedOverflowSkipsTheStepAndHalvesTheScale) {
  const Weights w = Weights::Random();
  Step b = MakeStep(w, "adam");
  InsertAmpCasts(*b.graph, {"W1", "W2"}, DataType::kBFloat16);
  ASSERT_TRUE(MasterWeightsPass().Run(*b.graph));
  ASSERT_TRUE(LossScalingPass(Dynamic(), b.seed).Run(*b.graph));
  ASSERT_TRUE(EnableOptimizerStats(*b.graph));
  Graph& g = *b.graph;
  RunStep(g, Batch());
  std::vector<Tensor> before;
  for (const auto& ub : g.update_bindings) before.push_back(ub.state->initializer->Clone());
  auto feeds = Batch();
  feeds["x"].SetDouble(5, std::numeric_limits<double>::infinity());
  const auto outs = RunStep(g, feeds);
  EXPECT_NE(OutputValue(g, outs, "skipped"), 0.0);
  for (size_t i = 0; i < g.update_bindings.size(); ++i) {
    const std::string& name = g.update_bindings[i].state->name;
    const Tensor& now = *g.update_bindings[i].state->initializer;
    if (name.rfind("loss_scale", 0) == 0) continue;
    EXPECT_EQ(std::memcmp(now.raw(), before[i].raw(), now.nbytes()), 0) << name;
  }
  EXPECT_EQ(g.FindValue("loss_scale")->initializer->GetDouble(0), 32768.0);
  EXPECT_EQ(g.FindValue("loss_scale.good_steps")->initializer->GetInt64(0), 0);
  EXPECT_EQ(g.FindValue("optimizer.step")->initializer->GetInt64(0), 1);
  const auto outs2 = RunStep(g, Batch());
  EXPECT_EQ(OutputValue(g, outs2, "skipped"), 0.0);
  EXPECT_EQ(g.FindValue("optimizer.step")->initializer->GetInt64(0), 2);
  EXPECT_EQ(g.FindValue("loss_scale.good_steps")->initializer->GetInt64(0), 1);
}

}  // namespace
}  // namespace ot
