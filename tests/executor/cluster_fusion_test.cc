// Cluster fusion (passes/cluster_fusion.h) on small graphs sized by a real plan (training/fusion.h): which merges
// are made and refused (cycle, lite's single output, operand limit, recomputed broadcasts, memory budget), the
// program each FusedElementwise node holds, and -- differential -- the fused graph computing what the unfused one
// did on fresh random inputs.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>

#include "executor/executor.h"
#include "graph/error.h"
#include "graph/op_registry.h"
#include "graph/verifier.h"
#include "kernel_common/cluster_resources.h"
#include "tests/executor/fusion_test_util.h"
#include "tests/passes/grad_check.h"
#include "tests/test_util.h"
#include "training/fusion.h"

namespace ot {
namespace {

using test::Emit;

Value* Scalar(Graph& g, float v) { return g.AddInitializer(g.UniqueName("k"), Tensor::Scalar(v)); }

using BuildFn = test::GraphBuildFn;
using test::Count;
using test::Feeds;
using test::Input;
using test::Make;
using test::Weight;

// Cluster sizing alone: GEMM epilogues (full) have their own tests (gemm_epilogue_test.cc) except where `epilogues`.
FusionReport Fuse(Graph& g, const std::string& mode, int64_t budget = 0, int max_operands = 64,
                  bool epilogues = false) {
  FuseOptions o;
  o.epilogues = epilogues;
  o.mode = ParseFuseMode(mode);
  o.memory_budget = budget;
  o.limits.operands = max_operands;
  return test::FuseStatic(g, o);  // verified, and free of cycles
}

bool Refused(const FusionReport& r, const std::string& kind) {
  for (const RefusedMerge& m : r.refused)
    if (m.reason.rfind(kind, 0) == 0) return true;
  return false;
}

// The fused graph against the unfused one on the same fresh inputs.
void ExpectSameOutputs(const BuildFn& build, const std::string& mode, double rtol = 1e-5, double atol = 1e-7) {
  const uint64_t seed = std::random_device{}();
  auto plain = Make(build, seed), fused = Make(build, seed);
  Fuse(*fused, mode, 0, 64, /*epilogues=*/true);  // the differential covers what --fuse=full does
  const auto feeds = Feeds(*plain, seed + 1);
  Executor a(*plain), b(*fused);
  const std::vector<Tensor> want = a.Run(feeds), got = b.Run(feeds);
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) test::ExpectClose(got[i], want[i], rtol, atol);
}

// x [16, 24], b [24]: Tanh(Relu(x * 2 + b)).
void Chain(Graph& g) {
  Value* x = Input(g, "x", {16, 24});
  Value* b = Input(g, "b", {24});
  Value* y = Emit(g, "Tanh", {Emit(g, "Relu", {Emit(g, "Add", {Emit(g, "Mul", {x, Scalar(g, 2.f)}), b})})});
  g.outputs.push_back(y);
}

TEST(ClusterFusion, LiteFusesAnElementwiseChainIntoOneNode) {
  auto g = Make(Chain);
  FusionReport r = Fuse(*g, "lite");
  EXPECT_EQ(Count(*g, "FusedElementwise"), 1);
  EXPECT_EQ(Count(*g, "Mul") + Count(*g, "Add") + Count(*g, "Relu") + Count(*g, "Tanh"), 0);
  ASSERT_EQ(r.clusters.size(), 1u);
  EXPECT_EQ(r.clusters[0].ops.size(), 4u);
  EXPECT_EQ(r.clusters[0].inputs, 2);  // x and b; the scalar 2 is an immediate
  EXPECT_EQ(r.clusters[0].outputs, 1);
  EXPECT_EQ(r.clusters[0].saved_bytes, 3 * 2 * 16 * 24 * 4);  // three intermediates, each written and read once
  const std::string& p = r.clusters[0].program;
  for (const char* op : {"mul", "add", "relu", "tanh"}) EXPECT_NE(p.find(op), std::string::npos) << p;
  ExpectSameOutputs(Chain, "lite");
  ExpectSameOutputs(Chain, "full");
}

// AMP's Identity -> Cast of a parameter's gradient: one op and a copy that runs in place unfused, so no cluster; with
// a second op that computes (here a Mul before them) the three fuse, the Identity included.
TEST(ClusterFusion, NoFuseOfOneOpAndPlainCopies) {
  auto copy_cast = [](Graph& g) {
    Value* x = Input(g, "x", {16, 24}, DataType::kBFloat16);
    g.outputs.push_back(Emit(g, "Cast", {Emit(g, "Identity", {x})}, {{"to", Attribute::Int(1)}}));
  };
  auto g = Make(copy_cast);
  FusionReport r = Fuse(*g, "lite");
  EXPECT_EQ(Count(*g, "FusedElementwise"), 0) << FormatFusionReport(r);
  EXPECT_EQ(Count(*g, "Identity") + Count(*g, "Cast"), 2);
  EXPECT_TRUE(Refused(r, "does not pay: one op and plain copies")) << FormatFusionReport(r);

  auto mul_copy_cast = [](Graph& g) {
    Value* x = Input(g, "x", {16, 24}, DataType::kBFloat16);
    Value* three = g.AddInitializer(g.UniqueName("k"), Tensor::Scalar(3.f).CastTo(DataType::kBFloat16));
    Value* m = Emit(g, "Mul", {x, three});
    g.outputs.push_back(Emit(g, "Cast", {Emit(g, "Identity", {m})}, {{"to", Attribute::Int(1)}}));
  };
  auto fused = Make(mul_copy_cast);
  r = Fuse(*fused, "lite");
  ASSERT_EQ(Count(*fused, "FusedElementwise"), 1) << FormatFusionReport(r);
  EXPECT_EQ(r.clusters[0].ops.size(), 3u);
  ExpectSameOutputs(mul_copy_cast, "lite", 0.0, 0.0);
}

TEST(ClusterFusion, NoFuseWhenOff) {
  auto g = Make(Chain);
  EXPECT_TRUE(Fuse(*g, "off").clusters.empty());
  EXPECT_EQ(Count(*g, "FusedElementwise"), 0);
  EXPECT_EQ(g->nodes().size(), 4u);
  EXPECT_THROW(Fuse(*g, "most"), Error);
}

// Relu -> MatMul -> Relu: the opaque MatMul separates two clusters of one op each, which stay as they are (full
// then folds the second Relu into the GEMM's epilogue: tests/executor/gemm_epilogue_test.cc).
TEST(ClusterFusion, NoFuseAcrossAnOpaqueOp) {
  auto build = [](Graph& g) {
    Value* x = Input(g, "x", {8, 8});
    g.outputs.push_back(Emit(g, "Relu", {Emit(g, "MatMul", {Emit(g, "Relu", {x}), Weight(g, {8, 8})})}));
  };
  auto g = Make(build);
  Fuse(*g, "lite");
  EXPECT_EQ(Count(*g, "FusedElementwise"), 0);
  EXPECT_EQ(Count(*g, "Relu"), 2);
  auto full = Make(build);
  Fuse(*full, "full", 0, 64, /*epilogues=*/true);
  EXPECT_EQ(Count(*full, "FusedElementwise"), 0);
  EXPECT_EQ(Count(*full, "Relu"), 1);
  EXPECT_EQ(Count(*full, "MatMulEpilogue"), 1);
  ExpectSameOutputs(build, "full");
}

// e = Exp(x) is read by an Add and by a MatMul: fusing Exp with the Add makes two values leave the cluster.
void TwoConsumers(Graph& g) {
  Value* x = Input(g, "x", {8, 8});
  Value* e = Emit(g, "Exp", {x});
  g.outputs.push_back(Emit(g, "Add", {e, Scalar(g, 1.f)}));
  g.outputs.push_back(Emit(g, "MatMul", {e, Weight(g, {8, 8})}));
}

TEST(ClusterFusion, LiteKeepsOneOutputFullAllowsMany) {
  auto lite = Make(TwoConsumers);
  FusionReport r = Fuse(*lite, "lite");
  EXPECT_EQ(Count(*lite, "FusedElementwise"), 0);
  EXPECT_TRUE(Refused(r, "lite")) << FormatFusionReport(r);
  auto full = Make(TwoConsumers);
  r = Fuse(*full, "full");
  ASSERT_EQ(Count(*full, "FusedElementwise"), 1);
  EXPECT_EQ(r.clusters[0].outputs, 2);
  ExpectSameOutputs(TwoConsumers, "full");
}

// a = Relu(x); m = MatMul(a, w); y = Add(a, m): merging Relu into Add would put the MatMul on a cycle.
TEST(ClusterFusion, NoFuseWhenTheMergeMakesACycle) {
  auto build = [](Graph& g) {
    Value* a = Emit(g, "Relu", {Input(g, "x", {8, 8})});
    g.outputs.push_back(Emit(g, "Add", {a, Emit(g, "MatMul", {a, Weight(g, {8, 8})})}));
  };
  for (const char* mode : {"lite", "full"}) {
    auto g = Make(build);
    FusionReport r = Fuse(*g, mode);
    EXPECT_EQ(Count(*g, "FusedElementwise"), 0) << mode;
    // lite refuses first for the second output (the Relu's value is read by the MatMul too).
    EXPECT_TRUE(Refused(r, std::string(mode) == "lite" ? "lite" : "cycle")) << mode << "\n" << FormatFusionReport(r);
  }
}

// ((((x0 + x1) + x2) + x3) + x4) + x5 with at most 4 operands per kernel.
TEST(ClusterFusion, OperandLimitIsHonoured) {
  auto build = [](Graph& g) {
    Value* acc = Input(g, "x0", {4, 6});
    for (int i = 1; i < 6; ++i) acc = Emit(g, "Add", {acc, Input(g, "x" + std::to_string(i), {4, 6})});
    g.outputs.push_back(acc);
  };
  auto g = Make(build);
  FusionReport r = Fuse(*g, "full", 0, 4);
  EXPECT_TRUE(Refused(r, "kernel limit")) << FormatFusionReport(r);
  EXPECT_GE(Count(*g, "FusedElementwise"), 1);
  for (const auto& n : g->nodes())
    if (n->op_type == "FusedElementwise") {
      EXPECT_LE(n->inputs.size() + n->outputs.size(), 4u);
    }
  auto unlimited = Make(build);
  Fuse(*unlimited, "full");
  EXPECT_EQ(Count(*unlimited, "FusedElementwise"), 1);
  EXPECT_EQ(unlimited->nodes().size(), 1u);
}

// y_k = x * k for k = 1..20, all computed before any is summed: 20 values live at once. Under a limit of 40
// registers per thread (24 base + 2 per operand + live values) the program must split; with the default it is one.
void ManyLive(Graph& g) {
  Value* x = Input(g, "x", {32, 16});
  std::vector<Value*> ys;
  for (int k = 1; k <= 20; ++k) ys.push_back(Emit(g, "Mul", {x, Scalar(g, static_cast<float>(k))}));
  Value* acc = ys[0];
  for (int k = 1; k < 20; ++k) acc = Emit(g, "Add", {acc, ys[static_cast<size_t>(k)]});
  g.outputs.push_back(acc);
}

TEST(ClusterFusion, RegisterEstimateIsHonoured) {
  auto wide = Make(ManyLive);
  Fuse(*wide, "full");
  ASSERT_EQ(Count(*wide, "FusedElementwise"), 1);
  const cluster::Resources one =
      cluster::EstimateResources(cluster::ParseProgram(wide->nodes().front()->attr_string("program", "")));
  EXPECT_GE(one.max_live, 19);  // the builder evaluates in node order: every product before the first sum
  EXPECT_GT(one.registers, 40);
  auto g = Make(ManyLive);
  FuseOptions o;
  o.mode = FuseMode::kFull;
  o.epilogues = false;
  o.limits.registers = 40;
  FusionReport r = FuseForShapes(*g, o, {{"x", TensorDesc{DataType::kFloat32, {32, 16}, true}}}, {});
  VerifyGraph(*g);
  EXPECT_TRUE(Refused(r, "kernel limit: ~")) << FormatFusionReport(r);
  EXPECT_GE(Count(*g, "FusedElementwise"), 1);
  for (const auto& n : g->nodes())
    if (n->op_type == "FusedElementwise") {
      EXPECT_LE(cluster::EstimateResources(cluster::ParseProgram(n->attr_string("program", ""))).registers, 40);
    }
  ExpectSameOutputs(ManyLive, "full");
}

// A chain of 150 Relu nodes: clusters stop at the op limit (64, which keeps fusion linear in the graph), the
// refusal says so, every node is in a cluster, and the result is the unfused one.
void ReluChain(Graph& g) {
  Value* h = Emit(g, "Sub", {Input(g, "x", {8, 16}), Scalar(g, 0.25f)});
  for (int k = 0; k < 149; ++k) h = Emit(g, "Relu", {h});
  g.outputs.push_back(h);
}

TEST(ClusterFusion, ClustersStopAtTheOpLimit) {
  auto g = Make(ReluChain);
  FusionReport r = Fuse(*g, "lite");
  EXPECT_TRUE(Refused(r, "kernel limit: 65 ops > 64")) << FormatFusionReport(r);
  ASSERT_EQ(Count(*g, "FusedElementwise"), 3);
  EXPECT_EQ(r.fused_nodes, 150);
  for (const FusedCluster& c : r.clusters) EXPECT_LE(c.ops.size(), 64u);
  ExpectSameOutputs(ReluChain, "lite");
}

// s [64] -> Exp -> added to x [256, 64]: fusing the Exp would compute it 256 times per element of s.
TEST(ClusterFusion, NoFuseWhenABroadcastProducerWouldBeRecomputed) {
  auto build = [](Graph& g) {
    Value* s = Emit(g, "Exp", {Input(g, "s", {64})});
    g.outputs.push_back(Emit(g, "Add", {Input(g, "x", {256, 64}), s}));
  };
  auto g = Make(build);
  FusionReport r = Fuse(*g, "full");
  EXPECT_EQ(Count(*g, "FusedElementwise"), 0);
  EXPECT_TRUE(Refused(r, "does not pay")) << FormatFusionReport(r);
  // The same producer at the consumer's size fuses.
  auto same = Make([](Graph& g) {
    Value* s = Emit(g, "Exp", {Input(g, "s", {256, 64})});
    g.outputs.push_back(Emit(g, "Add", {Input(g, "x", {256, 64}), s}));
  });
  Fuse(*same, "full");
  EXPECT_EQ(Count(*same, "FusedElementwise"), 1);
}

// Softmax over the last axis written out: ReduceMax, Sub, Exp, ReduceSum, Div -- row reductions feeding
// broadcasts, one cluster.
void SoftmaxByHand(Graph& g) {
  Value* x = Input(g, "x", {12, 33});
  test::Attrs keep{{"keepdims", Attribute::Int(1)}, {"axes", Attribute::Ints({-1})}};
  Value* m = Emit(g, "ReduceMax", {x}, keep);
  Value* e = Emit(g, "Exp", {Emit(g, "Sub", {x, m})});
  Value* axes = g.AddInitializer("axes", Tensor::FromInt64({1}, {1}));
  Value* s = Emit(g, "ReduceSum", {e, axes}, {{"keepdims", Attribute::Int(1)}});
  g.outputs.push_back(Emit(g, "Div", {e, s}));
}

TEST(ClusterFusion, RowReductionsFeedingBroadcastsJoinTheCluster) {
  auto g = Make(SoftmaxByHand);
  FusionReport r = Fuse(*g, "lite");
  ASSERT_EQ(Count(*g, "FusedElementwise"), 1) << FormatFusionReport(r);
  EXPECT_EQ(g->nodes().size(), 1u);
  EXPECT_NE(r.clusters[0].program.find("reduce_axes 1"), std::string::npos) << r.clusters[0].program;
  ExpectSameOutputs(SoftmaxByHand, "lite");
}

TEST(ClusterFusion, NoFuseOfAReductionOverLeadingAxes) {
  auto build = [](Graph& g) {
    Value* x = Input(g, "x", {12, 33});
    Value* s = Emit(g, "ReduceSum", {Emit(g, "Exp", {x}), g.AddInitializer("axes", Tensor::FromInt64({0}, {1}))},
                    {{"keepdims", Attribute::Int(1)}});
    g.outputs.push_back(Emit(g, "Mul", {x, s}));
  };
  auto g = Make(build);
  Fuse(*g, "full");
  EXPECT_EQ(Count(*g, "ReduceSum"), 1);
  EXPECT_EQ(Count(*g, "FusedElementwise"), 0);  // Exp and Mul are each alone on either side of it
  ExpectSameOutputs(build, "full");
}

// y = MatMul(x, w1) [R, C]; s = ReduceSum(Relu(y)) per row; t2 = MatMul(MatMul(x, w2), w3); out = s * t2.
// Unfused, y dies at the Relu early. Fusing the ReduceSum with the final Mul makes the cluster wait for t2, keeping
// Relu's input (or output) alive through both MatMuls: the planned peak rises by R x C x 4 bytes. Under a budget
// below that, exactly that merge is refused and the Relu + ReduceSum merge (which costs nothing) is kept.
void BudgetGraph(Graph& g) {
  Value* x = Input(g, "x", {64, 128});
  Value* y = Emit(g, "MatMul", {x, Weight(g, {128, 256})});
  Value* r = Emit(g, "Relu", {y});
  Value* s = Emit(g, "ReduceSum", {r, g.AddInitializer("axes", Tensor::FromInt64({1}, {1}))},
                  {{"keepdims", Attribute::Int(1)}});
  Value* t = Emit(g, "MatMul", {x, Weight(g, {128, 256})});
  Value* t2 = Emit(g, "MatMul", {t, Weight(g, {256, 256})});
  g.outputs.push_back(Emit(g, "Mul", {s, t2}));
}

TEST(ClusterFusion, MemoryBudgetRefusesExactlyTheMergesThatWouldExceedIt) {
  auto free_run = Make(BudgetGraph);
  FusionReport unconstrained = Fuse(*free_run, "full");
  ASSERT_EQ(unconstrained.clusters.size(), 1u) << FormatFusionReport(unconstrained);
  EXPECT_EQ(unconstrained.clusters[0].ops.size(), 3u);
  const int64_t rc = 64 * 256 * 4;
  EXPECT_GE(unconstrained.peak_after, unconstrained.peak_before + rc - 64 * 4 * 2) << FormatFusionReport(unconstrained);

  const int64_t budget = unconstrained.peak_before + rc / 2;
  ASSERT_GT(unconstrained.peak_after, budget);
  auto g = Make(BudgetGraph);
  FusionReport r = Fuse(*g, "full", budget);
  EXPECT_LE(r.peak_after, budget) << FormatFusionReport(r);
  ASSERT_EQ(r.refused.size(), 1u) << FormatFusionReport(r);
  EXPECT_EQ(r.refused[0].reason.rfind("memory", 0), 0u) << r.refused[0].reason;
  EXPECT_NE(r.refused[0].consumer.find("Mul"), std::string::npos);
  ASSERT_EQ(r.clusters.size(), 1u);
  EXPECT_EQ(r.clusters[0].ops.size(), 2u);  // Relu + ReduceSum
  EXPECT_EQ(Count(*g, "Mul"), 1);
  ExpectSameOutputs(BudgetGraph, "full");
}

// Mixed precision: Casts, half arithmetic and a comparison + Where, rounded as the unfused kernels round.
TEST(ClusterFusion, HalfValuesAndCastsMatchTheUnfusedGraph) {
  for (DataType half : {DataType::kFloat16, DataType::kBFloat16}) {
    auto build = [half](Graph& g) {
      Value* x = Input(g, "x", {32, 40});
      Value* h = Emit(g, "Cast", {x}, {{"to", Attribute::Int(static_cast<int64_t>(half))}});
      Value* a = Emit(g, "Mul", {h, Emit(g, "Sigmoid", {h})});
      Value* pos = Emit(g, "Greater",
                        {a, Emit(g, "Cast", {Scalar(g, 0.1f)}, {{"to", Attribute::Int(static_cast<int64_t>(half))}})});
      Value* w = Emit(g, "Where", {pos, a, Emit(g, "Neg", {h})});
      g.outputs.push_back(Emit(g, "Cast", {w}, {{"to", Attribute::Int(1)}}));
    };
    ExpectSameOutputs(build, "lite", 0, 0);  // bit for bit: the same rounding after every op
    ExpectSameOutputs(build, "full", 0, 0);
  }
}

}  // namespace
}  // namespace ot
