// Batch-norm folds (passes/fuse_batch_norm.h) under --fuse=lite and full, sized by a real plan (training/fusion.h):
// BatchNormalization -> Relu becomes BatchNormRelu, ReluGrad -> BatchNormGrad becomes BatchNormGrad {relu}, and a
// ReduceSum of dX over every axis but the channels becomes BatchNormGrad's output 3. Each fold claims the separate
// ops' bits, so the differential tests compare the folded graph with the unfused one exactly, on fresh random inputs
// (odd plane sizes: the vector loops' tails run). Negative twins: a Y or dY that something else reads, other axes,
// planes too small or one channel for ReduceSum's plane order, --fuse=off, and a memory budget.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <random>
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
using test::EmitInternal;
using test::EmitN;
using test::Find;
using test::Input;
using test::Make;
using test::Weight;

struct Shape4 {
  int64_t n = 3, c = 5, h = 6, w = 7;  // planes of 42: five vectors of eight and a tail of two
  DataType t = DataType::kFloat32;
  std::vector<int64_t> sum_axes{0, 2, 3};
  bool y_out = false;   // Y is also a graph output
  bool dy_out = false;  // dY is also a graph output
};

// A training block's forward and backward as the step graph has them: BatchNormalization (training) -> Relu -> R,
// read by a Neg (the forward's result: R is no graph output); ReluGrad(dR, R) -> BatchNormGrad -> dX, dScale, dB;
// ReduceSum(dX) (a convolution's bias gradient).
void Block(Graph& g, const Shape4& s) {
  Value* x = Input(g, "x", {s.n, s.c, s.h, s.w}, s.t);
  Value* dr = Input(g, "dr", {s.n, s.c, s.h, s.w}, s.t);
  Value* scale = Weight(g, {s.c});
  Value* bias = Weight(g, {s.c});
  Value* mean = Weight(g, {s.c});
  Value* var = g.AddInitializer(g.UniqueName("var"), test::RandomTensor(DataType::kFloat32, {s.c}, 0.5, 2.0));
  auto bn = EmitN(g, "BatchNormalization", {x, scale, bias, mean, var}, 3,
                  {{"epsilon", Attribute::Float(1e-5f)},
                   {"momentum", Attribute::Float(0.9f)},
                   {"training_mode", Attribute::Int(1)}});
  Value* r = Emit(g, "Relu", {bn[0]});
  g.outputs.push_back(Emit(g, "Neg", {r}));
  g.outputs.push_back(bn[1]);
  g.outputs.push_back(bn[2]);
  if (s.y_out) g.outputs.push_back(bn[0]);
  Value* dy = EmitInternal(g, "ReluGrad", {dr, r}, 1, {})[0];
  if (s.dy_out) g.outputs.push_back(dy);
  auto grads = EmitInternal(g, "BatchNormGrad", {dy, x, scale}, 3,
                            {{"epsilon", Attribute::Float(1e-5f)}, {"training", Attribute::Int(1)}});
  for (Value* v : grads) g.outputs.push_back(v);
  Value* axes = g.AddInitializer(g.UniqueName("axes"), Tensor::FromInt64(s.sum_axes, {int64_t(s.sum_axes.size())}));
  g.outputs.push_back(Emit(g, "ReduceSum", {grads[0], axes}, {{"keepdims", Attribute::Int(0)}}));
}

// The folded graph against the unfused one on the same fresh inputs: every output the same bits (NaN where NaN).
void ExpectSameBits(const Shape4& s, const std::string& mode = "lite") {
  test::ExpectFusedMatches([&](Graph& g) { Block(g, s); }, mode, "BatchNormGrad", 0.0, 0.0);
}

TEST(BatchNormFold, LiteFoldsReluReluGradAndTheBiasSum) {
  Shape4 s;
  auto g = Make([&](Graph& g) { Block(g, s); });
  FusionReport r = test::FuseStatic(*g, "lite");
  EXPECT_EQ(Count(*g, "BatchNormalization") + Count(*g, "Relu") + Count(*g, "ReluGrad") + Count(*g, "ReduceSum"), 0)
      << FormatFusionReport(r);
  const Node* f = Find(*g, "BatchNormRelu");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->domain, kInternalDomain);
  EXPECT_EQ(f->attr_int("training_mode", 0), 1);
  const Node* b = Find(*g, "BatchNormGrad");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->attr_int("relu", 0), 1);
  ASSERT_EQ(b->inputs.size(), 6u);
  EXPECT_EQ(b->inputs[5], f->outputs[0]);  // R, the mask
  EXPECT_EQ(b->inputs[0]->name, "dr");
  ASSERT_EQ(b->outputs.size(), 4u);
  EXPECT_EQ(b->outputs[3]->shape.StaticDims(), (std::vector<int64_t>{5}));
  ASSERT_EQ(r.clusters.size(), 2u) << FormatFusionReport(r);
  EXPECT_EQ(r.clusters[0].ops.size(), 2u);
  EXPECT_EQ(r.clusters[1].ops.size(), 3u);
  const int64_t plane_bytes = 3 * 5 * 42 * 4;
  EXPECT_EQ(r.clusters[0].saved_bytes, 2 * plane_bytes);  // Y written and read
  EXPECT_EQ(r.clusters[1].saved_bytes, 3 * plane_bytes);  // dY written and read, dX read again
  EXPECT_EQ(r.fused_nodes, 5);
  ExpectSameBits(s);
}

TEST(BatchNormFold, FullFoldsTheSame) { ExpectSameBits(Shape4{}, "full"); }

// Half types fold Relu and ReluGrad (the kernels widen the planes to float); the bias sum stays a ReduceSum, whose
// half kernel does not sum plane by plane.
TEST(BatchNormFold, HalfTypesFoldReluAndReluGradButNotTheSum) {
  for (DataType t : {DataType::kBFloat16, DataType::kFloat16}) {
    Shape4 s;
    s.t = t;
    auto g = Make([&](Graph& g) { Block(g, s); });
    FusionReport r = test::FuseStatic(*g, "lite");
    EXPECT_EQ(Count(*g, "BatchNormRelu"), 1);
    EXPECT_EQ(Find(*g, "BatchNormGrad")->attr_int("relu", 0), 1) << FormatFusionReport(r);
    EXPECT_EQ(Count(*g, "ReluGrad"), 0);
    EXPECT_EQ(Count(*g, "ReduceSum"), 1);
    EXPECT_FALSE(Find(*g, "BatchNormGrad")->has_output(3));
    EXPECT_TRUE(test::RefusedWith(r, "float32/float64")) << FormatFusionReport(r);
    test::ExpectFusedMatches([&](Graph& g) { Block(g, s); }, "lite", "BatchNormRelu", 0.0, 0.0);
  }
}

// The half kernel's mask, the graph folded by hand (R a Relu of another input than the norm's): BatchNormGrad
// {relu} (dR, X, scale, -, -, R) against ReluGrad + BatchNormGrad, the same bits.
TEST(BatchNormFold, HalfKernelMasksAsReluGrad) {
  for (DataType t : {DataType::kBFloat16, DataType::kFloat16}) {
    auto build = [t](bool folded) {
      return [t, folded](Graph& g) {
        Value* x = Input(g, "x", {3, 4, 5, 7}, t);
        Value* dr = Input(g, "dr", {3, 4, 5, 7}, t);
        Value* r = Emit(g, "Relu", {Input(g, "y", {3, 4, 5, 7}, t)});
        Value* scale = Weight(g, {4});
        test::Attrs a{{"epsilon", Attribute::Float(1e-5f)}, {"training", Attribute::Int(1)}};
        std::vector<Value*> grads;
        if (folded) {
          a["relu"] = Attribute::Int(1);
          grads = EmitInternal(g, "BatchNormGrad", {dr, x, scale, nullptr, nullptr, r}, 3, a);
        } else {
          grads = EmitInternal(g, "BatchNormGrad", {EmitInternal(g, "ReluGrad", {dr, r}, 1, {})[0], x, scale}, 3, a);
        }
        for (Value* v : grads) g.outputs.push_back(v);
      };
    };
    auto plain = Make(build(false), 3), fused = Make(build(true), 3);
    const std::map<std::string, Tensor> feeds = test::Feeds(*plain, 4);
    Executor a(*plain), b(*fused);
    const std::vector<Tensor> want = a.Run(feeds), got = b.Run(feeds);
    ASSERT_EQ(want.size(), 3u);
    for (size_t i = 0; i < want.size(); ++i) test::ExpectClose(got[i], want[i], 0.0, 0.0);
  }
}

TEST(BatchNormFold, NoFoldWhenYOrDYIsReadElsewhere) {
  Shape4 s;
  s.y_out = true;
  s.dy_out = true;
  auto g = Make([&](Graph& g) { Block(g, s); });
  test::FuseStatic(*g, "lite");
  EXPECT_EQ(Count(*g, "BatchNormRelu"), 0);
  EXPECT_EQ(Count(*g, "BatchNormalization"), 1);
  EXPECT_EQ(Count(*g, "ReluGrad"), 1);
  EXPECT_EQ(Find(*g, "BatchNormGrad")->attr_int("relu", 0), 0);
  EXPECT_EQ(Count(*g, "ReduceSum"), 0);  // the sum does not depend on those
  ExpectSameBits(s);
}

TEST(BatchNormFold, NoFoldUnderOff) {
  auto g = Make([&](Graph& g) { Block(g, Shape4{}); });
  const size_t nodes = g->nodes().size();
  test::FuseStatic(*g, "off");
  EXPECT_EQ(g->nodes().size(), nodes);
  EXPECT_EQ(Count(*g, "BatchNormRelu"), 0);
}

TEST(BatchNormFold, NoSumFoldOverOtherAxes) {
  Shape4 s;
  s.sum_axes = {0, 2};
  auto g = Make([&](Graph& g) { Block(g, s); });
  test::FuseStatic(*g, "lite");
  EXPECT_EQ(Count(*g, "ReduceSum"), 1);
  EXPECT_EQ(Find(*g, "BatchNormGrad")->outputs.size(), 3u);
}

TEST(BatchNormFold, NoSumFoldWhereReduceSumHasAnotherOrder) {
  Shape4 small;  // planes of 12 elements: ReduceSum's generic loop
  small.h = 3;
  small.w = 4;
  Shape4 one;  // one channel: ReduceSum sums all of dX as one run
  one.c = 1;
  for (const Shape4& s : {small, one}) {
    auto g = Make([&](Graph& g) { Block(g, s); });
    FusionReport r = test::FuseStatic(*g, "lite");
    EXPECT_EQ(Count(*g, "ReduceSum"), 1);
    EXPECT_TRUE(test::RefusedWith(r, "another order")) << FormatFusionReport(r);
    EXPECT_EQ(Find(*g, "BatchNormGrad")->attr_int("relu", 0), 1);
    ExpectSameBits(s);
  }
}

TEST(BatchNormFold, LargePlanesAndNegativeAxesKeepTheBits) {
  Shape4 s;
  s.n = 4, s.c = 3, s.h = 33, s.w = 31;
  s.sum_axes = {-1, 0, -2};
  ExpectSameBits(s);
}

TEST(BatchNormFold, ReluGradFoldRefusedUnderATightBudget) {
  Shape4 s;
  auto plain = Make([&](Graph& g) { Block(g, s); });
  std::map<std::string, TensorDesc> descs;
  for (const Value* v : plain->RealInputs()) descs[v->name] = TensorDesc{v->dtype, v->shape.StaticDims(), true};
  const int64_t peak = Plan::Compile(*plain, descs, {}, 0, true)->memory_plan().peak_live_bytes;
  ASSERT_GT(peak, 0);
  // Holding R (its last reader was ReluGrad) until BatchNormGrad adds its bytes: a budget one byte short refuses.
  const int64_t r_bytes = 3 * 5 * 42 * 4;
  auto g = Make([&](Graph& g) { Block(g, s); });
  FuseOptions o;
  o.mode = FuseMode::kLite;
  o.memory_budget = peak + r_bytes - 1;
  FusionReport r = test::FuseStatic(*g, o);
  EXPECT_EQ(Find(*g, "BatchNormGrad")->attr_int("relu", 0), 0) << FormatFusionReport(r);
  EXPECT_TRUE(test::RefusedWith(r, "memory budget")) << FormatFusionReport(r);
  EXPECT_EQ(Count(*g, "BatchNormRelu"), 1);  // the forward fold holds nothing longer
  auto h = Make([&](Graph& g) { Block(g, s); });
  o.memory_budget = peak + r_bytes;
  test::FuseStatic(*h, o);
  EXPECT_EQ(Find(*h, "BatchNormGrad")->attr_int("relu", 0), 1);
}

// ReluGrad's select where R <= 0 gives 0 even for a NaN or infinite dR; the folded kernel masks the same way, so
// every gradient stays finite.
TEST(BatchNormFold, MaskedNaNGradientsGiveWhatReluGradGives) {
  Shape4 s;
  auto build = [&](Graph& g) { Block(g, s); };
  auto plain = Make(build, 7), fused = Make(build, 7);
  test::FuseStatic(*fused, "lite");
  ASSERT_EQ(Find(*fused, "BatchNormGrad")->attr_int("relu", 0), 1);
  std::map<std::string, Tensor> feeds = test::Feeds(*plain, 8);
  Executor a(*plain), b(*fused);
  // Output 0 is -R: NaN and infinity in dR wherever R is 0.
  const Tensor neg_r = a.Run(feeds)[0];
  Tensor& dr = feeds.at("dr");
  int masked = 0;
  for (int64_t i = 0; i < dr.numel(); ++i)
    if (neg_r.GetDouble(i) >= 0) {
      dr.SetDouble(i, masked % 2 ? std::numeric_limits<double>::infinity() : std::nan(""));
      ++masked;
    }
  ASSERT_GT(masked, 10);
  const std::vector<Tensor> want = a.Run(feeds), got = b.Run(feeds);
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    test::ExpectClose(got[i], want[i], 0.0, 0.0);
    for (int64_t j = 0; j < got[i].numel(); ++j) ASSERT_TRUE(std::isfinite(got[i].GetDouble(j))) << i << " " << j;
  }
}

}  // namespace
}  // namespace ot
