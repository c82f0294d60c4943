// Cluster fusion (passes/cluster_fusion.h) on a fake sizer (tests/passes/fake_sizer.h): which edges it contracts and
// which it refuses, with the reason, for the facts it is given. The fused kernels' numbers are tested against the
// unfused ops in tests/executor/cluster_fusion_test.cc.
#include "passes/cluster_fusion.h"

#include <gtest/gtest.h>

#include "tests/passes/fake_sizer.h"

namespace ot {
namespace {

using test::Count;
using test::Emit;
using test::FakeSizer;
using test::Input;

FusionReport Fuse(Graph& g, FuseOptions o = FuseOptions()) {
  FakeSizer sizer;
  const FusionSizes s = sizer.Measure(g);
  ClusterFusionPass pass(o, s);
  pass.Run(g);
  return pass.report();
}

// x -> Neg -> Exp -> Mul(., y) -> Relu -> output.
std::unique_ptr<Graph> Chain() {
  return test::Make([](Graph& g) {
    Value* y = Input(g, "y", {64, 32});
    Value* v = Emit(g, "Exp", {Emit(g, "Neg", {Input(g, "x", {64, 32})})});
    g.outputs.push_back(Emit(g, "Relu", {Emit(g, "Mul", {v, y})}));
  });
}

TEST(ClusterFusionPass, ContractsAnElementwiseChainIntoOneNode) {
  auto g = Chain();
  FusionReport r = Fuse(*g);
  EXPECT_EQ(g->nodes().size(), 1u);
  ASSERT_EQ(Count(*g, "FusedElementwise"), 1);
  ASSERT_EQ(r.clusters.size(), 1u);
  EXPECT_EQ(r.clusters[0].ops.size(), 4u);
  EXPECT_EQ(r.clusters[0].inputs, 2);
  EXPECT_EQ(r.clusters[0].outputs, 1);
  EXPECT_EQ(r.clusters[0].saved_bytes, 3 * 2 * 64 * 32 * 4);  // three values written once and read once
  EXPECT_EQ(r.fused_nodes, 4);
  EXPECT_EQ(r.mode, "lite");
  EXPECT_LT(r.peak_after, r.peak_before);
}

TEST(ClusterFusionPass, OffChangesNothing) {
  auto g = Chain();
  FuseOptions o;
  o.mode = FuseMode::kOff;
  FusionReport r = Fuse(*g, o);
  EXPECT_EQ(g->nodes().size(), 4u);
  EXPECT_TRUE(r.clusters.empty());
  EXPECT_EQ(r.mode, "off");
}

TEST(ClusterFusionPass, KernelLimitsSplitTheChain) {
  auto g = Chain();
  FuseOptions o;
  o.limits.nodes = 2;
  FusionReport r = Fuse(*g, o);
  EXPECT_EQ(Count(*g, "FusedElementwise"), 2);
  EXPECT_NE(test::Refusals(r).find("kernel limit: 3 ops > 2"), std::string::npos) << test::Refusals(r);
}

// A producer broadcast into a larger domain would be recomputed per element: refused as not paying.
TEST(ClusterFusionPass, RefusesABroadcastProducer) {
  auto g = test::Make([](Graph& g) {
    Value* row = Emit(g, "Exp", {Input(g, "v", {256})});
    g.outputs.push_back(Emit(g, "Add", {row, Input(g, "m", {512, 256})}));
  });
  FusionReport r = Fuse(*g);
  EXPECT_EQ(Count(*g, "FusedElementwise"), 0);
  EXPECT_NE(test::Refusals(r).find("does not pay"), std::string::npos) << test::Refusals(r);
}

// lite: a cluster has one output; a value read outside the cluster too keeps the merge out (full allows it).
TEST(ClusterFusionPass, LiteKeepsOneOutputFullTakesMore) {
  auto build = [] {
    return test::Make([](Graph& g) {
      Value* a = Emit(g, "Neg", {Input(g, "x", {64, 32})});
      g.outputs.push_back(a);
      g.outputs.push_back(Emit(g, "Exp", {a}));
    });
  };
  auto lite = build();
  FusionReport r = Fuse(*lite);
  EXPECT_EQ(Count(*lite, "FusedElementwise"), 0);
  EXPECT_NE(test::Refusals(r).find("lite: 2 values would leave the cluster"), std::string::npos) << test::Refusals(r);
  auto full = build();
  FuseOptions o;
  o.mode = FuseMode::kFull;
  Fuse(*full, o);
  ASSERT_EQ(Count(*full, "FusedElementwise"), 1);
  EXPECT_EQ(test::Find(*full, "FusedElementwise")->outputs.size(), 2u);
}

// A path that leaves the cluster through a shape reader (a Shape folded when the plan is made, no kernel) and comes
// back into it: after the rewrite the reader would hang off the fused node and feed it -- refused as a cycle.
TEST(ClusterFusionPass, APathThroughAShapeReaderIsACycle) {
  auto g = test::Make([](Graph& g) {
    Value* a = Emit(g, "Mul", {Input(g, "x", {4, 1}), Input(g, "z", {1, 8})});  // [4, 8]: no input has its shape
    Value* zeros = Emit(g, "ConstantOfShape", {Emit(g, "Shape", {a})});
    g.outputs.push_back(Emit(g, "Add", {Emit(g, "Exp", {a}), zeros}));
  });
  FakeSizer sizer;
  for (const auto& n : g->nodes())
    if (n->op_type == "Shape" || n->op_type == "ConstantOfShape") sizer.constants.insert(n->name);
  const FusionSizes s = sizer.Measure(*g);
  ClusterFusionPass pass(FuseOptions(), s);
  pass.Run(*g);
  EXPECT_NO_THROW(g->TopologicalOrder());
  EXPECT_EQ(Count(*g, "Add"), 1) << test::Refusals(pass.report());
  EXPECT_NE(test::Refusals(pass.report()).find("cycle"), std::string::npos) << test::Refusals(pass.report());
  EXPECT_EQ(Count(*g, "FusedElementwise"), 1);  // Mul and Exp still fuse
}

}  // namespace
}  // namespace ot
