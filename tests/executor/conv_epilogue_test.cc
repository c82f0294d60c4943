// Conv epilogue fusion (passes/fuse_epilogue.h) under --fuse=full, sized by a real plan (training/fusion.h): the
// ConvEpilogue node a fold makes, the folds refused (lite, a domain larger than Y, float64, ConvTranspose), and --
// differential -- the fused graph computing what the unfused one did on fresh random inputs, with the images cut
// into blocks of unequal size (executor/kernels/conv_epilogue.cc: about 1 MiB of Y per block), operands that stay
// and that advance with the images, row reductions, weights given per call, and bfloat16.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "executor/threads.h"
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

// One thread for the whole test: the blocks hold about 1 MiB of Y per thread, and the block counts below are those of
// one thread (restored to the default after).
struct OneThread {
  OneThread() { SetThreadCount(1); }
  ~OneThread() { SetThreadCount(0); }
};

void ExpectSameOutputs(const test::GraphBuildFn& build, double rtol = 1e-5, double atol = 1e-5) {
  OneThread one;
  test::ExpectFusedMatches(build, "full", "ConvEpilogue", rtol, atol);
}

Value* Conv(Graph& g, Value* x, Value* w, Value* b) {
  std::vector<Value*> ins{x, w};
  if (b) ins.push_back(b);
  return Emit(g, "Conv", ins, {{"pads", Attribute::Ints({1, 1, 1, 1})}, {"kernel_shape", Attribute::Ints({3, 3})}});
}

// Conv (bias) -> Relu over images of [16, 64, 64]: 5 in float (256 KiB of Y each) run as blocks of 3 and 2 images,
// 9 in bfloat16 (128 KiB) as blocks of 5 and 4.
void ConvRelu(Graph& g, DataType t) {
  const int64_t n = t == DataType::kFloat32 ? 5 : 9;
  Value* y = Conv(g, Input(g, "x", {n, 3, 64, 64}, t), Weight(g, {16, 3, 3, 3}, t), Weight(g, {16}, t));
  g.outputs.push_back(Emit(g, "Relu", {y}));
}

TEST(ConvEpilogue, FullFoldsTheReluAfterAConvolution) {
  auto g = Make([](Graph& g) { ConvRelu(g, DataType::kFloat32); });
  FusionReport r = test::FuseStatic(*g, "full");
  ASSERT_EQ(Count(*g, "ConvEpilogue"), 1) << FormatFusionReport(r);
  EXPECT_EQ(Count(*g, "Conv") + Count(*g, "Relu"), 0);
  const Node* e = Find(*g, "ConvEpilogue");
  EXPECT_EQ(e->domain, kInternalDomain);
  EXPECT_EQ(e->inputs.size(), 3u);   // X, W, B: the program reads only Y
  EXPECT_EQ(e->outputs.size(), 1u);  // Y is read by nothing else: not stored
  EXPECT_EQ(e->attr_ints("pads"), (std::vector<int64_t>{1, 1, 1, 1}));
  ASSERT_NE(e->attr("fused_ops"), nullptr);
  EXPECT_EQ(e->attr("fused_ops")->strings.size(), 2u);
  EXPECT_EQ(e->outputs[0]->shape.StaticDims(), (std::vector<int64_t>{5, 16, 64, 64}));
  bool reported = false;
  for (const FusedCluster& c : r.clusters) reported = reported || (c.name == e->name && c.saved_bytes > 0);
  EXPECT_TRUE(reported) << FormatFusionReport(r);
  ExpectSameOutputs([](Graph& g) { ConvRelu(g, DataType::kFloat32); });
}

TEST(ConvEpilogue, Bfloat16MatchesTheUnfusedOne) {
  // bf16 outputs: one rounding of an fp32 value that another batch blocking may change in its last bits.
  ExpectSameOutputs([](Graph& g) { ConvRelu(g, DataType::kBFloat16); }, 1e-2, 1e-2);
}

// A residual block's tail: Relu(Conv(x) * s + r) with s [16, 1, 1] the same for every image and r of Y's shape
// advancing with them; W is a graph input (fed per call, as in training), the convolution has no bias, and Y is
// also a graph output (stored). 7 images of [16, 64, 64] (256 KiB): blocks of 4 and 3.
void ResidualTail(Graph& g) {
  Value* y = Conv(g, Input(g, "x", {7, 8, 64, 64}), Input(g, "w", {16, 8, 3, 3}), nullptr);
  Value* s = Input(g, "s", {16, 1, 1});
  Value* res = Input(g, "r", {7, 16, 64, 64});
  g.outputs.push_back(Emit(g, "Relu", {Emit(g, "Add", {Emit(g, "Mul", {y, s}), res})}));
  g.outputs.push_back(y);
}

TEST(ConvEpilogue, OperandsThatStayAndAdvanceWithTheImages) {
  auto g = Make(ResidualTail);
  FusionReport r = test::FuseStatic(*g, "full");
  ASSERT_EQ(Count(*g, "ConvEpilogue"), 1) << FormatFusionReport(r);
  const Node* e = Find(*g, "ConvEpilogue");
  EXPECT_FALSE(e->inputs[2]);        // no bias
  EXPECT_EQ(e->outputs.size(), 2u);  // the cluster's result, and Y for the graph's output
  ExpectSameOutputs(ResidualTail);
}

// Softmax along the last axis of a convolution's output (Exp, ReduceSum over the last axis, Div), with the row sums
// an output of their own: a cluster with a row reduction, 7 images of [32, 40, 40] (200 KiB) in blocks of 4 and 3.
void RowSoftmax(Graph& g) {
  Value* y = Conv(g, Input(g, "x", {7, 4, 40, 40}), Weight(g, {32, 4, 3, 3}), Weight(g, {32}));
  Value* e = Emit(g, "Exp", {Emit(g, "Mul", {y, g.AddInitializer("k", Tensor::Scalar(0.25f))})});
  Value* sum = Emit(g, "ReduceSum", {e, g.AddInitializer("axes", Tensor::FromInt64({-1}, {1}))},
                    {{"keepdims", Attribute::Int(1)}});
  g.outputs.push_back(Emit(g, "Div", {e, sum}));
  g.outputs.push_back(sum);
}

TEST(ConvEpilogue, RowReductionsFoldAndKeepTheirRowOutputs) {
  auto g = Make(RowSoftmax);
  FusionReport r = test::FuseStatic(*g, "full");
  ASSERT_EQ(Count(*g, "ConvEpilogue"), 1) << FormatFusionReport(r);
  EXPECT_EQ(Count(*g, "FusedElementwise") + Count(*g, "Conv"), 0);
  EXPECT_EQ(Find(*g, "ConvEpilogue")->outputs.size(), 2u);
  ExpectSameOutputs(RowSoftmax);
}

// Negative twins: the graph keeps the convolution.
TEST(ConvEpilogue, NoFoldWhenLite) {
  auto g = Make([](Graph& g) { ConvRelu(g, DataType::kFloat32); });
  test::FuseStatic(*g, "lite");
  EXPECT_EQ(Count(*g, "ConvEpilogue"), 0);
  EXPECT_EQ(Count(*g, "Conv"), 1);
  EXPECT_EQ(Count(*g, "Relu"), 1);
}

TEST(ConvEpilogue, NoFoldWhenYIsBroadcastIntoALargerDomain) {
  auto g = Make([](Graph& g) {
    Value* y = Conv(g, Input(g, "x", {1, 3, 8, 8}), Weight(g, {4, 3, 3, 3}), nullptr);
    g.outputs.push_back(Emit(g, "Add", {y, Input(g, "z", {6, 4, 8, 8})}));
  });
  FusionReport r = test::FuseStatic(*g, "full");
  EXPECT_EQ(Count(*g, "ConvEpilogue"), 0);
  EXPECT_EQ(Count(*g, "Conv"), 1);
  EXPECT_TRUE(test::RefusedWith(r, "is not Y's shape")) << FormatFusionReport(r);
}

TEST(ConvEpilogue, NoFoldForFloat64OrConvTranspose) {
  auto g = Make([](Graph& g) {
    Value* y =
        Conv(g, Input(g, "x", {2, 3, 8, 8}, DataType::kFloat64), Weight(g, {4, 3, 3, 3}, DataType::kFloat64), nullptr);
    g.outputs.push_back(Emit(g, "Relu", {y}));
    Value* t = Emit(g, "ConvTranspose", {Input(g, "u", {2, 3, 8, 8}), Weight(g, {3, 4, 3, 3})},
                    {{"kernel_shape", Attribute::Ints({3, 3})}});
    g.outputs.push_back(Emit(g, "Relu", {t}));
  });
  test::FuseStatic(*g, "full");
  EXPECT_EQ(Count(*g, "ConvEpilogue"), 0);
  EXPECT_EQ(Count(*g, "Conv") + Count(*g, "ConvTranspose"), 2);
  EXPECT_EQ(Count(*g, "Relu"), 2);
}

}  // namespace
}  // namespace ot
