// GEMM epilogue fusion (passes/fuse_epilogue.h) under --fuse=full, sized by a real plan (training/fusion.h):
// which folds are made and refused (lite, batched B, a domain larger than Y, a cycle through another reader of Y,
// the memory budget), the MatMulEpilogue node they make, and -- differential -- the fused graph computing what the
// unfused one did on fresh random inputs, with Y cut into several row blocks and with row reductions.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>

#include "executor/executor.h"
#include "graph/graph.h"
#include "graph/op_registry.h"
#include "graph/verifier.h"
#include "tests/executor/fusion_test_util.h"
#include "tests/passes/grad_check.h"
#include "tests/test_util.h"
#include "training/fusion.h"

namespace ot {
namespace {

using test::Emit;

Value* MatMulBias(Graph& g, Value* a, Value* b, Value* bias) {
  return test::EmitInternal(g, "MatMulBias", {a, b, bias}, 1, {{"activation", Attribute::String("none")}})[0];
}

using BuildFn = test::GraphBuildFn;
using test::Count;
using test::Find;
using test::Input;
using test::Make;
using test::Weight;

// The fused graph (full) against the unfused one on the same fresh inputs; every output element compared.
void ExpectSameOutputs(const BuildFn& build, double rtol = 1e-5, double atol = 1e-6) {
  test::ExpectFusedMatches(build, "full", "MatMulEpilogue", rtol, atol);
}

// The MLP layer of a transformer: h = MatMulBias(x, W, b) read by Gelu and by a Mul (as GeluGrad reads it in a
// training step), so h is stored too. x [3, 2001, 32]: 6003 rows of 48 floats, cut into two blocks of unequal size.
void LayerWithGelu(Graph& g, DataType t) {
  g.opset_imports[""] = 20;  // Gelu
  Value* x = Input(g, "x", {3, 2001, 32}, t);
  Value* h = MatMulBias(g, x, Weight(g, {32, 48}, t), Weight(g, {48}, t));
  g.outputs.push_back(Emit(g, "Gelu", {h}));
  g.outputs.push_back(Emit(g, "Mul", {h, Input(g, "s", {3, 2001, 48}, t)}));
}

TEST(GemmEpilogue, FullFoldsTheClusterAfterAGemmAndStoresYWhereItIsRead) {
  auto g = Make([](Graph& g) { LayerWithGelu(g, DataType::kFloat32); });
  FusionReport r = test::FuseStatic(*g, "full");
  // The Gelu and the Mul are two one-op clusters reading h (lite/full make nothing of one op), the first folds.
  ASSERT_EQ(Count(*g, "MatMulEpilogue"), 1) << FormatFusionReport(r);
  EXPECT_EQ(Count(*g, "MatMulBias"), 0);
  const Node* e = Find(*g, "MatMulEpilogue");
  EXPECT_EQ(e->domain, kInternalDomain);
  EXPECT_EQ(e->outputs.size(), 2u);  // the folded op's result, and h for the other reader
  EXPECT_EQ(e->outputs[1]->name, g->outputs[1]->producer->inputs[0]->name);
  ASSERT_NE(e->attr("fused_ops"), nullptr);
  EXPECT_EQ(e->attr("fused_ops")->strings.size(), 2u);
  bool reported = false;
  for (const FusedCluster& c : r.clusters) reported = reported || c.name == e->name;
  EXPECT_TRUE(reported) << FormatFusionReport(r);
  // atol: the GEMM of a row block may add its 32 products (|x| <= 2, |W| <= 1, then times |s| <= 2) in another order
  // than the whole GEMM (oneDNN's kernel for a block's last rows), a few float ulps of the sum of their magnitudes
  // (~16): up to ~1e-6 was seen where cancellation leaves a small result, so 1e-6 failed one run in many.
  ExpectSameOutputs([](Graph& g) { LayerWithGelu(g, DataType::kFloat32); }, 1e-5, 1e-5);
}

TEST(GemmEpilogue, Bfloat16LayerMatchesTheUnfusedOne) {
  // bf16 outputs: one rounding of an fp32 value that blocking may change in its last bits.
  ExpectSameOutputs([](Graph& g) { LayerWithGelu(g, DataType::kBFloat16); }, 1e-2, 1e-2);
}

TEST(GemmEpilogue, NoFoldWhenLite) {
  auto g = Make([](Graph& g) { LayerWithGelu(g, DataType::kFloat32); });
  test::FuseStatic(*g, "lite");
  EXPECT_EQ(Count(*g, "MatMulEpilogue"), 0);
  EXPECT_EQ(Count(*g, "MatMulBias"), 1);
  EXPECT_EQ(Count(*g, "Gelu"), 1);
}

// Softmax over the rows of a plain MatMul, written out (Exp, ReduceSum over the last axis, Div): a cluster with a
// row reduction; 1000 rows of 300 floats run in two blocks, and the row sums are an output of their own.
void RowSoftmax(Graph& g) {
  Value* y = Emit(g, "MatMul", {Input(g, "x", {1000, 16}), Weight(g, {16, 300})});
  Value* e = Emit(g, "Exp", {Emit(g, "Mul", {y, g.AddInitializer("k", Tensor::Scalar(0.25f))})});
  Value* sum = Emit(g, "ReduceSum", {e, g.AddInitializer("axes", Tensor::FromInt64({-1}, {1}))},
                    {{"keepdims", Attribute::Int(1)}});
  g.outputs.push_back(Emit(g, "Div", {e, sum}));
  g.outputs.push_back(sum);
}

TEST(GemmEpilogue, RowReductionsFoldAndKeepTheirRowOutputs) {
  auto g = Make(RowSoftmax);
  FusionReport r = test::FuseStatic(*g, "full");
  ASSERT_EQ(Count(*g, "MatMulEpilogue"), 1) << FormatFusionReport(r);
  EXPECT_EQ(Count(*g, "FusedElementwise") + Count(*g, "MatMul"), 0);
  EXPECT_EQ(Find(*g, "MatMulEpilogue")->outputs.size(), 2u);
  ExpectSameOutputs(RowSoftmax);
}

// Negative twins: the fold is refused with its reason, and the graph keeps the GEMM.
TEST(GemmEpilogue, NoFoldWhenBIsBatched) {
  auto g = Make([](Graph& g) {
    Value* y = Emit(g, "MatMul", {Input(g, "x", {2, 8, 16}), Input(g, "w", {2, 16, 8})});
    g.outputs.push_back(Emit(g, "Relu", {y}));
  });
  FusionReport r = test::FuseStatic(*g, "full");
  EXPECT_EQ(Count(*g, "MatMulEpilogue"), 0);
  EXPECT_EQ(Count(*g, "MatMul"), 1);
  EXPECT_TRUE(test::RefusedWith(r, "batched")) << FormatFusionReport(r);
}

TEST(GemmEpilogue, NoFoldWhenYIsBroadcastIntoALargerDomain) {
  auto g = Make([](Graph& g) {
    Value* y = Emit(g, "MatMul", {Input(g, "x", {1, 16}), Weight(g, {16, 8})});
    g.outputs.push_back(Emit(g, "Add", {y, Input(g, "z", {32, 8})}));
  });
  FusionReport r = test::FuseStatic(*g, "full");
  EXPECT_EQ(Count(*g, "MatMulEpilogue"), 0);
  EXPECT_TRUE(test::RefusedWith(r, "is not Y's shape")) << FormatFusionReport(r);
}

// y = MatMul(x, W); the Add reads y and MatMul(y, W2): folding the Add into the first GEMM would make the fused node
// wait for the second GEMM, which waits for y.
TEST(GemmEpilogue, NoFoldWhenAnotherReaderOfYLeadsToTheCluster) {
  auto g = Make([](Graph& g) {
    Value* y = Emit(g, "MatMul", {Input(g, "x", {8, 8}), Weight(g, {8, 8})});
    g.outputs.push_back(Emit(g, "Add", {y, Emit(g, "MatMul", {y, Weight(g, {8, 8})})}));
  });
  FusionReport r = test::FuseStatic(*g, "full");
  EXPECT_TRUE(test::RefusedWith(r, "leads to the cluster")) << FormatFusionReport(r);
  // The second GEMM may take the Add as its own epilogue (its other operand, y, exists before it runs).
  EXPECT_EQ(Count(*g, "MatMul") + Count(*g, "MatMulEpilogue"), 2);
}

// a = Relu(x) dies at the first GEMM; its Add also reads a second GEMM's result, which runs in between: folding the
// Add into the first GEMM keeps a alive across the second. Refused under a budget that leaves no room (the second
// GEMM, right before the Add, still takes it), made without one.
void TwoGemmsIntoAnAdd(Graph& g) {
  Value* a = Emit(g, "Relu", {Input(g, "x", {64, 32})});
  Value* y = Emit(g, "MatMul", {a, Weight(g, {32, 16})});
  Value* u = Emit(g, "MatMul", {Input(g, "z", {64, 8}), Weight(g, {8, 16})});
  g.outputs.push_back(Emit(g, "Add", {y, u}));
}

TEST(GemmEpilogue, MemoryBudgetRefusesAFoldThatKeepsTheGemmInputsAlive) {
  auto tight = Make(TwoGemmsIntoAnAdd);
  FusionReport r = test::FuseStatic(*tight, "full", 1);
  EXPECT_TRUE(test::RefusedWith(r, "memory budget")) << FormatFusionReport(r);
  ASSERT_EQ(Count(*tight, "MatMul"), 1);
  EXPECT_EQ(Find(*tight, "MatMul")->inputs[0]->name, Find(*tight, "Relu")->outputs[0]->name);
  EXPECT_EQ(Count(*tight, "MatMulEpilogue"), 1);
  auto free = Make(TwoGemmsIntoAnAdd);
  FusionReport f = test::FuseStatic(*free, "full");
  EXPECT_FALSE(test::RefusedWith(f, "memory budget"));
  ASSERT_EQ(Count(*free, "MatMul"), 1);
  EXPECT_EQ(Find(*free, "MatMul")->inputs[0]->name, "z");  // the first GEMM took the Add
  ExpectSameOutputs(TwoGemmsIntoAnAdd);
}

}  // namespace
}  // namespace ot
