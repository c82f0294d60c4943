// Residual folds (passes/fuse_residual_norm.h) under --fuse=lite and full, sized by a real plan (training/fusion.h):
// Add(X, R) -> LayerNormalization becomes ResidualLayerNorm, LayerNormGrad -> Sum(dX, G) becomes LayerNormGrad with
// G as input 5. Each fold claims the separate ops' bits, so the differential tests compare the folded graph with
// the unfused one exactly, on fresh random inputs (rows of 67: the vector loops' tails run; computed operands, so
// the memory plan may run the folds in place). Negative twins: --fuse=off, a broadcast residual, bfloat16, a Sum of
// three, a dX that something else reads, an addend computed from the LayerNormGrad itself, and a memory budget.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "executor/plan.h"
#include "graph/graph.h"
#include "tests/executor/fusion_test_util.h"
#include "tests/test_util.h"
#include "training/fusion.h"

namespace ot {
namespace {

using test::Count;
using test::Emit;
using test::Find;
using test::Input;
using test::Make;
using test::Weight;

struct Block {
  int64_t n = 3, t = 5, c = 67;
  DataType dt = DataType::kFloat32;
  bool internal_ln = false;  // ai.onnxtrain.LayerNormalization (a model of opset < 17) instead of ai.onnx's
  bool computed = false;     // X, R and G computed here (Neg of inputs), each read last by the op the fold takes
  bool broadcast_r = false;  // R of shape [c]
  bool sum_of_three = false;
  bool dx_out = false;        // dX also a graph output
  bool addend_after = false;  // G computed from LayerNormGrad's dScale
};

// A transformer block's residual stream, forward and backward as the step graph has them: S = X + R, Y =
// LayerNorm(S), the next residual S + Y (S read after the norm); LayerNormGrad(dY, S, Scale) -> dX, dScale, dB,
// and the residual gradient Sum(dX, G).
void Build(Graph& g, const Block& b) {
  const std::vector<int64_t> d{b.n, b.t, b.c};
  Value* x = Input(g, "x", d, b.dt);
  Value* r = Input(g, "r", b.broadcast_r ? std::vector<int64_t>{b.c} : d, b.dt);
  Value* dy = Input(g, "dy", d, b.dt);
  Value* gin = Input(g, "g", d, b.dt);
  if (b.computed) {
    x = Emit(g, "Neg", {x});
    r = Emit(g, "Neg", {r});
    gin = Emit(g, "Neg", {gin});
  }
  Value* scale = Weight(g, {b.c}, b.dt);
  Value* bias = Weight(g, {b.c}, b.dt);
  Value* s = Emit(g, "Add", {x, r});
  Value* y = Emit(g, "LayerNormalization", {s, scale, bias},
                  {{"axis", Attribute::Int(-1)}, {"epsilon", Attribute::Float(1e-5f)}});
  if (b.internal_ln) test::MakeInternal(g, y->producer);
  g.outputs.push_back(Emit(g, "Add", {s, y}));
  auto grads = test::EmitInternal(g, "LayerNormGrad", {dy, s, scale}, 3,
                                  {{"axis", Attribute::Int(-1)}, {"epsilon", Attribute::Float(1e-5f)}});
  g.outputs.push_back(grads[1]);
  g.outputs.push_back(grads[2]);
  if (b.dx_out) g.outputs.push_back(grads[0]);
  Value* addend = b.addend_after ? Emit(g, "Add", {gin, grads[1]}) : gin;
  std::vector<Value*> terms{grads[0], addend};
  if (b.sum_of_three) terms.push_back(Emit(g, "Neg", {dy}));
  g.outputs.push_back(Emit(g, "Sum", terms));
}

void ExpectSameBits(const Block& b, const std::string& mode = "lite") {
  test::ExpectFusedMatches([&](Graph& g) { Build(g, b); }, mode, "LayerNormGrad", 0.0, 0.0);
}

const Node* Grad(const Graph& g) { return Find(g, "LayerNormGrad"); }

TEST(ResidualNormFold, LiteFoldsTheAddAndTheGradientSum) {
  Block b;
  auto g = Make([&](Graph& g) { Build(g, b); });
  FusionReport r = test::FuseStatic(*g, "lite");
  EXPECT_EQ(Count(*g, "LayerNormalization"), 0) << FormatFusionReport(r);
  EXPECT_EQ(Count(*g, "Add"), 1);  // the next residual's
  EXPECT_EQ(Count(*g, "Sum"), 0);
  const Node* ln = Find(*g, "ResidualLayerNorm");
  ASSERT_NE(ln, nullptr);
  EXPECT_EQ(ln->domain, kInternalDomain);
  ASSERT_EQ(ln->inputs.size(), 4u);
  EXPECT_EQ(ln->inputs[0]->name, "x");
  EXPECT_EQ(ln->inputs[3]->name, "r");
  ASSERT_EQ(ln->outputs.size(), 4u);
  const Value* s = ln->outputs[3];
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->producer, ln);
  EXPECT_EQ(Grad(*g)->inputs[1], s);  // the backward still reads S
  ASSERT_EQ(Grad(*g)->inputs.size(), 6u);
  EXPECT_EQ(Grad(*g)->inputs[5]->name, "g");
  EXPECT_EQ(Grad(*g)->outputs[0], g->outputs.back());  // the Sum's output, now LayerNormGrad's
  ASSERT_EQ(r.clusters.size(), 2u) << FormatFusionReport(r);
  const int64_t bytes = 3 * 5 * 67 * 4;
  EXPECT_EQ(r.clusters[0].saved_bytes, bytes);      // S read again by the norm
  EXPECT_EQ(r.clusters[1].saved_bytes, 2 * bytes);  // dX written and read
  EXPECT_EQ(r.fused_nodes, 4);
  ExpectSameBits(b);
}

TEST(ResidualNormFold, FullFoldsTheSame) { ExpectSameBits(Block{}, "full"); }

TEST(ResidualNormFold, ComputedOperandsKeepTheBitsInPlace) {
  Block b;
  b.computed = true;
  b.n = 7, b.t = 11;
  ExpectSameBits(b);
  // The memory plan runs them in place: dX into G's memory, S into X's or R's (each dies at the fold).
  auto g = Make([&](Graph& g) { Build(g, b); });
  test::FuseStatic(*g, "lite");
  std::map<std::string, TensorDesc> descs;
  for (const Value* v : g->RealInputs()) descs[v->name] = TensorDesc{v->dtype, v->shape.StaticDims(), true};
  auto plan = Plan::Compile(*g, descs, {}, 0, true);
  int inplace = 0;
  for (const Plan::StepView& st : plan->step_views())
    if (st.node->op_type == "ResidualLayerNorm" || st.node->op_type == "LayerNormGrad")
      inplace += static_cast<int>(st.inplace.size());
  EXPECT_GE(inplace, 2);
}

TEST(ResidualNormFold, InternalLayerNormOfOldOpsetsFolds) {
  Block b;
  b.internal_ln = true;
  auto g = Make([&](Graph& g) { Build(g, b); });
  test::FuseStatic(*g, "lite");
  EXPECT_EQ(Count(*g, "ResidualLayerNorm"), 1);
  ExpectSameBits(b);
}

TEST(ResidualNormFold, NoFoldUnderOff) {
  auto g = Make([&](Graph& g) { Build(g, Block{}); });
  test::FuseStatic(*g, "off");
  EXPECT_EQ(Count(*g, "ResidualLayerNorm"), 0);
  EXPECT_EQ(Count(*g, "Sum"), 1);
  EXPECT_EQ(Grad(*g)->inputs.size(), 3u);
}

TEST(ResidualNormFold, NoAddFoldForABroadcastResidual) {
  Block b;
  b.broadcast_r = true;
  auto g = Make([&](Graph& g) { Build(g, b); });
  FusionReport r = test::FuseStatic(*g, "lite");
  EXPECT_EQ(Count(*g, "ResidualLayerNorm"), 0);
  EXPECT_TRUE(test::RefusedWith(r, "sum's own shape")) << FormatFusionReport(r);
  EXPECT_EQ(Count(*g, "Sum"), 0);  // the backward fold does not depend on it
  ExpectSameBits(b);
}

TEST(ResidualNormFold, NoFoldInBfloat16) {
  Block b;
  b.dt = DataType::kBFloat16;
  auto g = Make([&](Graph& g) { Build(g, b); });
  FusionReport r = test::FuseStatic(*g, "lite");
  EXPECT_EQ(Count(*g, "ResidualLayerNorm"), 0);
  EXPECT_EQ(Count(*g, "Sum"), 1);
  EXPECT_TRUE(test::RefusedWith(r, "float32 operands")) << FormatFusionReport(r);
  EXPECT_TRUE(test::RefusedWith(r, "float32 dY")) << FormatFusionReport(r);
}

TEST(ResidualNormFold, NoSumFoldForThreeTermsOrAShareddX) {
  for (int which = 0; which < 2; ++which) {
    Block b;
    (which == 0 ? b.sum_of_three : b.dx_out) = true;
    auto g = Make([&](Graph& g) { Build(g, b); });
    test::FuseStatic(*g, "lite");  // (a cluster may take the Sum instead)
    EXPECT_EQ(Grad(*g)->inputs.size(), 3u) << which;
    EXPECT_EQ(Count(*g, "ResidualLayerNorm"), 1) << which;
    ExpectSameBits(b);
  }
}

// G = g + dScale depends on the LayerNormGrad: taking it in would make a cycle.
TEST(ResidualNormFold, NoSumFoldWhenTheAddendComesFromTheGrad) {
  Block b;
  b.addend_after = true;
  auto g = Make([&](Graph& g) { Build(g, b); });
  FusionReport r = test::FuseStatic(*g, "lite");  // checks for a cycle
  EXPECT_EQ(Grad(*g)->inputs.size(), 3u);
  EXPECT_TRUE(test::RefusedWith(r, "computed after")) << FormatFusionReport(r);
  ExpectSameBits(b);
}

TEST(ResidualNormFold, AddFoldRefusedUnderATightBudget) {
  Block b;
  b.computed = true;
  auto plain = Make([&](Graph& g) { Build(g, b); });
  std::map<std::string, TensorDesc> descs;
  for (const Value* v : plain->RealInputs()) descs[v->name] = TensorDesc{v->dtype, v->shape.StaticDims(), true};
  const int64_t peak = Plan::Compile(*plain, descs, {}, 0, true)->memory_plan().peak_live_bytes;
  ASSERT_GT(peak, 0);
  // -X and -R were last read by the Add: holding both until the norm adds their bytes.
  const int64_t more = 2 * 3 * 5 * 67 * 4;
  FuseOptions o;
  o.mode = FuseMode::kLite;
  o.memory_budget = peak + more - 1;
  auto g = Make([&](Graph& g) { Build(g, b); });
  FusionReport r = test::FuseStatic(*g, o);
  EXPECT_EQ(Count(*g, "ResidualLayerNorm"), 0) << FormatFusionReport(r);
  EXPECT_TRUE(test::RefusedWith(r, "memory budget")) << FormatFusionReport(r);
  EXPECT_EQ(Count(*g, "Sum"), 0);  // the gradient fold holds nothing longer
  o.memory_budget = peak + more;
  auto h = Make([&](Graph& g) { Build(g, b); });
  test::FuseStatic(*h, o);
  EXPECT_EQ(Count(*h, "ResidualLayerNorm"), 1);
}

}  // namespace
}  // namespace ot
