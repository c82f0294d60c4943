// The batch-norm folds (passes/fuse_batch_norm.h) on a fake sizer (tests/passes/fake_sizer.h): relu, relu grad and
// bias sum rewritten for the right facts, refused for the others (memory budget, dtype, plane size). Their kernels'
// numbers are tested against the unfused ops in tests/executor/batch_norm_fold_test.cc.
#include "passes/fuse_batch_norm.h"

#include <gtest/gtest.h>

#include "tests/passes/fake_sizer.h"

namespace ot {
namespace {

using test::Count;
using test::Emit;
using test::EmitInternal;
using test::FakeSizer;
using test::Input;

struct Block {
  std::vector<int64_t> x{3, 5, 6, 7};
  bool computed_r_last = false;  // R's last reader is the ReluGrad (no forward reader after it)
};

// BatchNormalization (training) -> Relu -> R, read by a Neg; ReluGrad(dR, R) -> BatchNormGrad -> dX, dScale, dB;
// ReduceSum(dX) over every axis but the channels.
std::unique_ptr<Graph> Build(const Block& b) {
  return test::Make([&](Graph& g) {
    const int64_t c = b.x[1];
    Value* x = Input(g, "x", b.x);
    Value* dr = Input(g, "dr", b.x);
    std::vector<Value*> w;
    for (int i = 0; i < 4; ++i)
      w.push_back(g.AddInitializer(g.UniqueName("w"), test::RandomTensor(DataType::kFloat32, {c}, 0.5, 2.0)));
    auto bn = test::EmitN(g, "BatchNormalization", {x, w[0], w[1], w[2], w[3]}, 3,
                          {{"epsilon", Attribute::Float(1e-5f)}, {"training_mode", Attribute::Int(1)}});
    Value* r = Emit(g, "Relu", {bn[0]});
    if (!b.computed_r_last) g.outputs.push_back(Emit(g, "Neg", {r}));
    g.outputs.push_back(bn[1]);
    g.outputs.push_back(bn[2]);
    Value* dy = EmitInternal(g, "ReluGrad", {dr, r})[0];
    auto grads = EmitInternal(g, "BatchNormGrad", {dy, x, w[0]}, 3,
                              {{"epsilon", Attribute::Float(1e-5f)}, {"training", Attribute::Int(1)}});
    for (Value* v : grads) g.outputs.push_back(v);
    Value* axes = g.AddInitializer(g.UniqueName("axes"), Tensor::FromInt64({0, 2, 3}, {3}));
    g.outputs.push_back(Emit(g, "ReduceSum", {grads[0], axes}, {{"keepdims", Attribute::Int(0)}}));
  });
}

FusionReport Fold(Graph& g, FakeSizer& sizer, int64_t budget = 0, int64_t peak = -1) {
  FuseOptions o;
  o.memory_budget = budget;
  FusionReport r;
  const FusionSizes s = sizer.Measure(g);
  BatchNormFoldPass(o, s, peak < 0 ? s.planned_peak : peak, &r).Run(g);
  return r;
}

TEST(BatchNormFoldPass, FoldsReluReluGradAndTheBiasSum) {
  auto g = Build({});
  FakeSizer sizer;
  FusionReport r = Fold(*g, sizer);
  EXPECT_EQ(Count(*g, "Relu"), 0);
  EXPECT_EQ(Count(*g, "ReluGrad"), 0);
  EXPECT_EQ(Count(*g, "ReduceSum"), 0);
  const Node* fwd = test::Find(*g, "BatchNormRelu");
  ASSERT_NE(fwd, nullptr);
  EXPECT_EQ(fwd->domain, kInternalDomain);
  const Node* bg = test::Find(*g, "BatchNormGrad");
  ASSERT_NE(bg, nullptr);
  EXPECT_EQ(bg->attr_int("relu", 0), 1);
  ASSERT_EQ(bg->outputs.size(), 4u);
  EXPECT_EQ(bg->outputs[3], g->outputs.back());
  EXPECT_EQ(bg->attr_int("sum_keepdims", 1), 0);
  // Two entries: the forward norm (BatchNormalization + Relu) and the gradient (BatchNormGrad + ReluGrad + ReduceSum).
  ASSERT_EQ(r.clusters.size(), 2u);
  EXPECT_EQ(r.clusters[1].ops.size(), 3u);
  EXPECT_EQ(r.fused_nodes, 2 + 2 + 1);
  const int64_t plane = 3 * 5 * 6 * 7 * 4;
  EXPECT_EQ(r.saved_bytes, 2 * plane + 2 * plane + plane);  // Y, dY written and read; dX read once more
}

// Where ReluGrad was R's last reader, the fold holds R until BatchNormGrad: refused when that passes the budget.
TEST(BatchNormFoldPass, ReluGradFoldRespectsTheBudget) {
  Block b;
  b.computed_r_last = true;
  const int64_t plane = 3 * 5 * 6 * 7 * 4;
  {
    auto g = Build(b);
    FakeSizer sizer;
    FusionReport r = Fold(*g, sizer, /*budget=*/1000 * plane, /*peak=*/1000 * plane - plane + 1);
    EXPECT_EQ(Count(*g, "ReluGrad"), 1);
    ASSERT_EQ(r.refused.size(), 1u) << test::Refusals(r);
    EXPECT_NE(r.refused[0].reason.find("memory budget"), std::string::npos) << r.refused[0].reason;
  }
  {
    auto g = Build(b);
    FakeSizer sizer;
    FusionReport r = Fold(*g, sizer, /*budget=*/1000 * plane, /*peak=*/1000 * plane - plane);
    EXPECT_EQ(Count(*g, "ReluGrad"), 0) << test::Refusals(r);
  }
}

// The channel sum folds only where ReduceSum sums plane by plane, in float32/float64.
TEST(BatchNormFoldPass, BiasSumNeedsLargePlanesAndFloat) {
  Block small;
  small.x = {3, 5, 3, 5};  // planes of 15 elements
  auto g = Build(small);
  FakeSizer sizer;
  FusionReport r = Fold(*g, sizer);
  EXPECT_EQ(Count(*g, "ReduceSum"), 1);
  EXPECT_NE(test::Refusals(r).find("plane by plane"), std::string::npos) << test::Refusals(r);

  auto h = Build({});
  FakeSizer half;
  half.edit = [](const Graph& g, FusionSizes& s) {
    for (const auto& n : g.nodes())
      if (n->op_type == "BatchNormGrad") s.values[n->outputs[0]].dims.dtype = DataType::kFloat16;
  };
  r = Fold(*h, half);
  EXPECT_EQ(Count(*h, "ReduceSum"), 1);
  EXPECT_NE(test::Refusals(r).find("float32/float64"), std::string::npos) << test::Refusals(r);
}

}  // namespace
}  // namespace ot
