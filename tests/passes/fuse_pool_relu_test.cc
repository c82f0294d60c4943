// The pool ReluGrad fold (passes/fuse_pool_relu.h) on a fake sizer (tests/passes/fake_sizer.h): what it rewrites and
// what it refuses for which facts. The folded kernel's numbers are tested against the unfused ops in
// tests/executor/pool_relu_fold_test.cc.
#include "passes/fuse_pool_relu.h"

#include <gtest/gtest.h>

#include "tests/passes/fake_sizer.h"

namespace ot {
namespace {

using test::Count;
using test::EmitInternal;
using test::FakeSizer;
using test::Input;

// Relu -> R; MaxPoolGrad(dP, X) -> dR; ReluGrad(dR, R) -> dY. `other_x`: the pool's X is another Relu's output.
std::unique_ptr<Graph> Block(bool dr_out = false, bool other_x = false) {
  return test::Make([&](Graph& g) {
    Value* r = test::Emit(g, "Relu", {Input(g, "x", {2, 3, 8, 8})});
    Value* x = other_x ? test::Emit(g, "Relu", {Input(g, "x2", {2, 3, 8, 8})}) : r;
    test::Attrs a{{"kernel_shape", Attribute::Ints({2, 2})}, {"strides", Attribute::Ints({2, 2})}};
    Value* dr = EmitInternal(g, "MaxPoolGrad", {Input(g, "dp", {2, 3, 4, 4}), x}, 1, a)[0];
    if (dr_out) g.outputs.push_back(dr);
    g.outputs.push_back(EmitInternal(g, "ReluGrad", {dr, r})[0]);
  });
}

FusionReport Fold(Graph& g, FakeSizer& sizer) {
  FusionReport r;
  const FusionSizes s = sizer.Measure(g);
  PoolReluFoldPass(FuseOptions(), s, s.planned_peak, &r).Run(g);
  return r;
}

TEST(PoolReluFoldPass, ReluGradGoesIntoTheMaxPoolGrad) {
  auto g = Block();
  FakeSizer sizer;
  FusionReport r = Fold(*g, sizer);
  EXPECT_EQ(Count(*g, "ReluGrad"), 0);
  const Node* m = test::Find(*g, "MaxPoolGrad");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->attr_int("relu", 0), 1);
  EXPECT_EQ(m->outputs[0], g->outputs[0]);
  ASSERT_EQ(r.clusters.size(), 1u);
  EXPECT_EQ(r.clusters[0].kind, "fold");
  EXPECT_EQ(r.clusters[0].saved_bytes, 2 * 2 * 3 * 8 * 8 * 4);  // dR written once and read once
  EXPECT_EQ(r.fused_nodes, 2);
}

TEST(PoolReluFoldPass, RefusesAnotherXOrAdRReadElsewhere) {
  for (bool other_x : {false, true}) {
    auto g = Block(/*dr_out=*/!other_x, other_x);
    FakeSizer sizer;
    FusionReport r = Fold(*g, sizer);
    EXPECT_EQ(Count(*g, "ReluGrad"), 1);
    ASSERT_EQ(r.refused.size(), 1u) << test::Refusals(r);
    EXPECT_NE(r.refused[0].reason.find(other_x ? "X is not the Relu output" : "other readers"), std::string::npos)
        << r.refused[0].reason;
    EXPECT_TRUE(r.clusters.empty());
  }
}

// The facts decide: a ReluGrad that is no kernel, or a dY of another dtype than dR, is left alone.
TEST(PoolReluFoldPass, FollowsTheSizersFacts) {
  {
    auto g = Block();
    FakeSizer sizer;
    for (const auto& n : g->nodes())
      if (n->op_type == "ReluGrad") sizer.constants.insert(n->name);
    Fold(*g, sizer);
    EXPECT_EQ(Count(*g, "ReluGrad"), 1);
  }
  {
    auto g = Block();
    FakeSizer sizer;
    sizer.edit = [](const Graph& g, FusionSizes& s) { s.values[g.outputs[0]].dims.dtype = DataType::kFloat16; };
    Fold(*g, sizer);
    EXPECT_EQ(Count(*g, "ReluGrad"), 1);
  }
}

}  // namespace
}  // namespace ot
