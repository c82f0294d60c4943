// master-weights pass: golden structure on an MLP step graph with the Casts the amp pass inserts, its negative
// twins (no Cast of a trained parameter: nothing changes), user errors, HalfCopies(), and a differential test:
// the graph with the amp Casts and the rewritten graph train the same (same losses, same fp32 weights) on the CPU.
#include "passes/master_weights.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "graph/ops/optimizer_layout.h"
#include "passes/amp.h"
#include "passes/loss_scaling.h"
#include "tests/passes/amp_step_util.h"

namespace ot {
namespace {

using namespace amp_test;

TEST(MasterWeights, RewritesParameterCastsIntoHalfState) {
  for (DataType half : {DataType::kFloat16, DataType::kBFloat16}) {
    Step s = MakeStep(Weights::Random());
    Graph& g = *s.graph;
    // W2 before W1: the half copies still come out in parameter order.
    const std::vector<Node*> casts = InsertAmpCasts(g, {"W2", "W1"}, half);
    std::vector<Value*> cast_outs = {casts[0]->outputs[0], casts[1]->outputs[0]};
    std::vector<std::vector<Use>> readers = {cast_outs[0]->uses, cast_outs[1]->uses};
    const size_t bindings = g.update_bindings.size();
    Node* opt = UpdateNode(g);
    const OptimizerLayout before = OptimizerLayout::Of(*opt);

    MasterWeightsPass pass;
    EXPECT_EQ(pass.name(), "master_weights");
    ASSERT_TRUE(pass.Run(g));
    VerifyGraph(g);
    InferShapes(g, true);

    // The Casts of W1 and W2 are gone; their readers read the half state.
    for (const auto& n : g.nodes()) EXPECT_EQ(n->name.rfind("amp/Cast_", 0), std::string::npos) << n->name;
    const char* names[2] = {"W2", "W1"};
    for (int c = 0; c < 2; ++c) {
      Value* hstate = g.FindValue(std::string(names[c]) + ".half");
      ASSERT_NE(hstate, nullptr);
      ASSERT_TRUE(hstate->initializer);
      EXPECT_EQ(hstate->dtype, half);
      // round(P) bit for bit.
      const Tensor want = g.FindValue(names[c])->initializer->CastTo(half);
      EXPECT_EQ(std::memcmp(hstate->initializer->raw(), want.raw(), want.nbytes()), 0);
      ASSERT_EQ(hstate->uses.size(), readers[c].size());
      for (const Use& u : readers[c]) EXPECT_EQ(u.node->inputs[u.input_index], hstate);
    }
    // The node: half_params ascending (W1 is parameter 0 or 2 ... whichever; ascending indices of W1 and W2).
    ASSERT_EQ(g.update_bindings.size(), bindings + 2);
    const OptimizerLayout l = OptimizerLayout::Of(*opt);
    ASSERT_EQ(l.m(), 2);
    EXPECT_LT(l.half_params[0], l.half_params[1]);
    EXPECT_EQ(l.half_dtype, static_cast<int64_t>(half));
    EXPECT_EQ(static_cast<int>(opt->outputs.size()), before.num_outputs() + 2);
    EXPECT_EQ(opt->inputs.size(), static_cast<size_t>(before.num_inputs()));  // gradients still float32
    for (int i = 0; i < l.n; ++i) EXPECT_EQ(opt->inputs[l.grad_in(i)]->dtype, DataType::kFloat32);
    ExpectProducersConsistent(opt);
    for (int j = 0; j < 2; ++j) {
      Value* hnext = opt->outputs[l.half_out(j)];
      EXPECT_EQ(hnext->dtype, half);
      Value* param = opt->inputs[l.param_in(static_cast<int>(l.half_params[j]))];
      EXPECT_EQ(hnext->shape.ToString(), param->shape.ToString());
      bool bound = false;
      for (const auto& ub : g.update_bindings) bound |= ub.next == hnext && ub.state->name == param->name + ".half";
      EXPECT_TRUE(bound) << param->name;
    }
    // HalfCopies: (master, half) pairs in parameter order.
    const auto pairs = HalfCopies(g);
    ASSERT_EQ(pairs.size(), 2u);
    for (const auto& [master, copy] : pairs) EXPECT_EQ(copy->name, master->name + ".half");
    EXPECT_EQ(pairs[0].first, opt->inputs[l.param_in(static_cast<int>(l.half_params[0]))]);
    // Idempotent: a second run finds nothing to rewrite.
    EXPECT_FALSE(MasterWeightsPass().Run(g));
  }
}

// Negative twin: Casts that are not of trained parameters (the input x; a frozen weight) stay.
TEST(MasterWeights, NoRewriteWhenNoCastOfATrainedParameter) {
  Step s = MakeStep(Weights::Random());
  Graph& g = *s.graph;
  Value* x = g.FindValue("x");
  Value* xh = g.AddValue("x_f16");
  Node* c = g.AddNode("Cast", {x}, {xh}, "amp/Cast_x");
  c->attrs["to"] = Attribute::Int(static_cast<int64_t>(DataType::kFloat16));
  g.outputs.push_back(xh);
  // A Cast of a trained parameter to float64 is not a half copy either.
  Value* wd = g.AddValue("W1_f64");
  g.AddNode("Cast", {g.FindValue("W1")}, {wd}, "W1_to_f64")->attrs["to"] =
      Attribute::Int(static_cast<int64_t>(DataType::kFloat64));
  g.outputs.push_back(wd);
  InferShapes(g);
  const Shape_ snap = Snapshot(g);
  EXPECT_FALSE(MasterWeightsPass().Run(g));
  EXPECT_TRUE(Snapshot(g) == snap);
  EXPECT_FALSE(UpdateNode(g)->has_attr("half_params"));
  EXPECT_TRUE(HalfCopies(g).empty());
}

TEST(MasterWeights, NoRewriteWithoutAnOptimizer) {
  Graph g;
  g.opset_imports[""] = 17;
  Value* w = g.AddInitializer("W", test::RandomTensor(DataType::kFloat32, {2, 2}));
  Value* h = g.AddValue("Wh");
  g.AddNode("Cast", {w}, {h}, "c")->attrs["to"] = Attribute::Int(static_cast<int64_t>(DataType::kFloat16));
  g.outputs.push_back(h);
  EXPECT_FALSE(MasterWeightsPass().Run(g));
  EXPECT_EQ(g.nodes().size(), 1u);
}

TEST(MasterWeights, MixedHalfDtypesAreAnError) {
  Step s = MakeStep(Weights::Random());
  Graph& g = *s.graph;
  InsertAmpCasts(g, {"W1"}, DataType::kFloat16);
  InsertAmpCasts(g, {"W2"}, DataType::kBFloat16);
  try {
    MasterWeightsPass().Run(g);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("amp/Cast_"), std::string::npos) << msg;  // names the Cast node
    EXPECT_NE(msg.find("one dtype"), std::string::npos) << msg;
  }
}

// Stats and loss scaling added before the half copies keep their places after them (layout order).
TEST(MasterWeights, HalfCopiesGoBeforeLossScaleAndStatsOutputs) {
  Step s = MakeStep(Weights::Random(), "sgd", 2);
  Graph& g = *s.graph;
  EnableOptimizerStats(g);
  LossScaleOptions lo;
  lo.mode = LossScaleMode::kDynamic;
  ASSERT_TRUE(LossScalingPass(lo, s.seed).Run(g));
  InsertAmpCasts(g, {"b2", "W1"}, DataType::kBFloat16);
  ASSERT_TRUE(MasterWeightsPass().Run(g));
  VerifyGraph(g);
  Node* opt = UpdateNode(g);
  const OptimizerLayout l = OptimizerLayout::Of(*opt);
  ASSERT_EQ(static_cast<int>(opt->outputs.size()), l.num_outputs());
  ExpectProducersConsistent(opt);
  EXPECT_EQ(opt->outputs[l.half_out(0)]->name, "W1.half.next");
  EXPECT_EQ(opt->outputs[l.half_out(1)]->name, "b2.half.next");
  EXPECT_EQ(opt->outputs[l.scale_out()]->name, "loss_scale.next");
  EXPECT_EQ(opt->outputs[l.param_norm_out()]->name, "param_norm");
  EXPECT_EQ(opt->outputs[l.zero_fraction_out()]->name, "zero_grad_fraction");
  EXPECT_EQ(opt->outputs[l.micro_out()]->name, "optimizer.micro_step.next");
}

// Differential: the step with amp's Casts of the parameters and the rewritten step (half state refreshed by the
// update kernel) compute the same losses and fp32 weights over several steps (and both differ from fp32).
TEST(MasterWeights, TrainsLikeTheCastGraph) {
  for (DataType half : {DataType::kFloat16, DataType::kBFloat16})
    for (int64_t K : {1, 2}) {
      const Weights w = Weights::Random();
      Step a = MakeStep(w, "adam", K), b = MakeStep(w, "adam", K), ref = MakeStep(w, "adam", K);
      InsertAmpCasts(*a.graph, {"W1", "W2", "b1"}, half);
      InsertAmpCasts(*b.graph, {"W1", "W2", "b1"}, half);
      ASSERT_TRUE(MasterWeightsPass().Run(*b.graph));
      double max_diff_fp32 = 0;
      for (int step = 0; step < 4 * K; ++step) {
        const auto feeds = Batch();
        const auto oa = RunStep(*a.graph, feeds), ob = RunStep(*b.graph, feeds), oref = RunStep(*ref.graph, feeds);
        const double la = OutputValue(*a.graph, oa, a.loss), lb = OutputValue(*b.graph, ob, b.loss);
        EXPECT_NEAR(lb, la, 1e-6 * std::fabs(la)) << DataTypeName(half) << " step " << step;
        max_diff_fp32 = std::max(max_diff_fp32, std::fabs(la - OutputValue(*ref.graph, oref, ref.loss)));
      }
      for (const char* name : {"W1", "W2", "b1", "b2"})
        test::ExpectClose(*b.graph->FindValue(name)->initializer, *a.graph->FindValue(name)->initializer, 1e-6, 1e-7);
      // The half state is round(master) after the last step.
      for (const auto& [master, copy] : HalfCopies(*b.graph)) {
        const Tensor want = master->initializer->CastTo(half);
        EXPECT_EQ(std::memcmp(copy->initializer->raw(), want.raw(), want.nbytes()), 0) << copy->name;
      }
      EXPECT_GT(max_diff_fp32, 0.0) << "the half weights should change the numbers";
    }
}

}  // namespace
}  // namespace ot

namespace ot {
namespace {

using namespace amp_test;

// With the real amp pass: every Cast of a trained parameter it inserted becomes half state, none is left, and the
// rewritten step trains like the amp step (the half GEMMs read the same rounded weights).
TEST(MasterWeights, AfterTheAmpPass) {
  for (DataType half : {DataType::kBFloat16, DataType::kFloat16}) {
    const Weights w = Weights::Random();
    Step a = MakeStep(w, "adam"), b = MakeStep(w, "adam");
    AmpOptions ao;
    ao.half = half;
    ASSERT_TRUE(AmpPass(ao).Run(*a.graph));
    ASSERT_TRUE(AmpPass(ao).Run(*b.graph));
    ASSERT_TRUE(MasterWeightsPass().Run(*b.graph));
    VerifyGraph(*b.graph);
    Node* opt = UpdateNode(*b.graph);
    const OptimizerLayout l = OptimizerLayout::Of(*opt);
    for (const auto& n : b.graph->nodes())
      if (n->op_type == "Cast") {
        for (int i = 0; i < l.n; ++i)
          EXPECT_NE(n->inputs[0], opt->inputs[l.param_in(i)]) << n->name << " still casts a parameter";
      }
    EXPECT_EQ(static_cast<int>(HalfCopies(*b.graph).size()), l.m());
    EXPECT_GE(l.m(), 2) << "the two Gemm weights are read in half";
    for (int i = 0; i < l.n; ++i) EXPECT_EQ(opt->inputs[l.grad_in(i)]->dtype, DataType::kFloat32);
    for (int step = 0; step < 4; ++step) {
      const auto feeds = Batch();
      const auto oa = RunStep(*a.graph, feeds), ob = RunStep(*b.graph, feeds);
      const double la = OutputValue(*a.graph, oa, a.loss), lb = OutputValue(*b.graph, ob, b.loss);
      EXPECT_TRUE(std::isfinite(lb));
      EXPECT_NEAR(lb, la, 1e-6 * std::fabs(la)) << DataTypeName(half) << " step " << step;
    }
    for (const char* name : {"W1", "W2", "b1", "b2"})
      test::ExpectClose(*b.graph->FindValue(name)->initializer, *a.graph->FindValue(name)->initializer, 1e-6, 1e-7);
  }
}

}  // namespace
}  // namespace ot
