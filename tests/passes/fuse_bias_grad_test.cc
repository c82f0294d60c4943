// fuse_bias_grad: a Linear layer's weight-gradient Gemm and bias-gradient ReduceToShape over the same rows become one
// ai.onnxtrain.GemmSum; the step's numbers do not change (the CPU kernel runs the same GEMM and the same summation: bit
// for bit, float32 and float64, on fresh random inputs). Negative twins: an operand read the other way, a sum that
// keeps two axes, a pair whose fusion would make a cycle. Also GemmSum's schema errors.
#include "passes/fuse_bias_grad.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "executor/executor.h"
#include "graph/error.h"
#include "graph/graph.h"
#include "graph/op_registry.h"
#include "graph/printer.h"
#include "graph/verifier.h"
#include "passes/autodiff.h"
#include "passes/fold_transpose.h"
#include "tests/passes/grad_check.h"
#include "tests/test_util.h"

namespace ot {
namespace {

using test::Emit;

int Count(const Graph& g, const std::string& op) {
  int c = 0;
  for (const auto& n : g.nodes()) c += n->op_type == op;
  return c;
}

std::string Ops(const Graph& g) {
  std::string s;
  for (const Node* n : g.TopologicalOrder()) s += n->op_type + " ";
  return s;
}

Value* MatMulBias(Graph& g, Value* a, Value* w, Value* bias, bool transpose_w) {
  if (transpose_w) w = Emit(g, "Transpose", {w}, {{"perm", Attribute::Ints({1, 0})}});
  Value* y = Emit(g, "MatMulBias", {a, w, bias});
  y->producer->domain = kInternalDomain;
  y->producer->opset = 1;
  g.opset_imports[kInternalDomain] = 1;
  return y;
}

struct Case {
  std::string what;
  std::vector<int64_t> a, w;  // A's dims, the weight's dims (stored [N, K] when transposed)
  bool transpose_w;
  int sum_input;
};

// Linear layers under autodiff (+ fold_transpose): the weight and bias gradients fuse; the values stay the same bits.
TEST(FuseBiasGradPass, LinearLayersFuseAndKeepTheirNumbers) {
  const std::vector<Case> cases = {{"rank 3, PyTorch weight [N, K]", {2, 3, 6}, {5, 6}, true, 0},
                                   {"rank 2, PyTorch weight [N, K]", {4, 6}, {5, 6}, true, 0},
                                   {"rank 3, weight [K, N]", {2, 3, 6}, {6, 5}, false, 1},
                                   {"rank 4, weight [K, N]", {2, 2, 3, 6}, {6, 5}, false, 1}};
  for (DataType t : {DataType::kFloat32, DataType::kFloat64})
    for (const Case& c : cases) {
      SCOPED_TRACE(c.what + " " + DataTypeName(t));
      const std::vector<Tensor> params = {test::RandomTensor(t, c.a, -2, 2), test::RandomTensor(t, c.w),
                                          test::RandomTensor(t, {5})};
      std::vector<int64_t> out = c.a;
      out.back() = 5;
      const Tensor r = test::RandomTensor(t, out, 0.5, 1.5);
      std::vector<Tensor> results[2];
      for (int fused = 0; fused < 2; ++fused) {
        auto g = test::Build(
            params,
            [&](Graph& g, const std::vector<Value*>& p) { return MatMulBias(g, p[0], p[1], p[2], c.transpose_w); }, r,
            17);
        InferShapes(*g);
        ASSERT_TRUE(AutodiffPass({"loss", "^(r|k_.*)$"}).Run(*g));
        FoldTransposePass().Run(*g);
        if (fused) {
          ASSERT_EQ(Count(*g, "ReduceToShape"), 1) << Ops(*g);
          FuseBiasGradPass pass;
          ASSERT_TRUE(pass.Run(*g)) << PrintGraph(*g);
          EXPECT_EQ(pass.fused(), 1);
          EXPECT_EQ(Count(*g, "ReduceToShape"), 0) << Ops(*g);
          ASSERT_EQ(Count(*g, "GemmSum"), 1) << Ops(*g);
          for (const auto& n : g->nodes())
            if (n->op_type == "GemmSum") {
              EXPECT_EQ(n->attr_int("sum_input", -1), c.sum_input);
            }
          VerifyGraph(*g);
          InferShapes(*g, true);
          EXPECT_FALSE(FuseBiasGradPass().Run(*g));
        }
        results[fused] = Executor(*g).Run({});
      }
      ASSERT_EQ(results[0].size(), 4u);
      ASSERT_EQ(results[1].size(), 4u);
      for (size_t i = 0; i < 4; ++i) {
        SCOPED_TRACE("output " + std::to_string(i));
        test::ExpectClose(results[1][i], results[0][i], 0, 0);
      }
    }
}

// g [R, N] as an input, a ReduceToShape of it and a Gemm reading it; nothing else.
std::unique_ptr<Graph> Pair(const std::vector<int64_t>& gdims, const std::vector<int64_t>& sum_dims, bool trans_a,
                            bool cycle = false) {
  auto g = std::make_unique<Graph>();
  g->opset_imports[""] = 17;
  g->opset_imports[kInternalDomain] = 1;
  Value* gv = g->AddValue("g");
  gv->dtype = DataType::kFloat32;
  gv->shape = Shape::Static(gdims);
  Value* x = g->AddValue("x");
  x->dtype = DataType::kFloat32;
  x->shape = Shape::Static({gdims[0], 3});
  g->inputs = {gv, x};
  Tensor shape(DataType::kInt64, {static_cast<int64_t>(sum_dims.size())});
  for (size_t i = 0; i < sum_dims.size(); ++i)
    shape.SetDouble(static_cast<int64_t>(i), static_cast<double>(sum_dims[i]));
  Value* s = Emit(*g, "ReduceToShape", {gv, g->AddInitializer("shape", shape)});
  s->producer->domain = kInternalDomain;
  s->producer->opset = 1;
  Value* other = x;
  if (cycle) other = Emit(*g, "Add", {x, Emit(*g, "ReduceSum", {s}, {{"keepdims", Attribute::Int(0)}})});
  Value* y = trans_a ? Emit(*g, "Gemm", {gv, other}, {{"transA", Attribute::Int(1)}})
                     : Emit(*g, "Gemm", {gv, x}, {{"transB", Attribute::Int(1)}});
  g->outputs = {s, y};
  InferShapes(*g, true);
  return g;
}

void ExpectUnchanged(std::unique_ptr<Graph> g, const std::string& why) {
  SCOPED_TRACE(why);
  const std::string ops = Ops(*g);
  EXPECT_FALSE(FuseBiasGradPass().Run(*g));
  EXPECT_EQ(Ops(*g), ops);
}

TEST(FuseBiasGradPass, FusesThePairOnItsOwn) {
  auto g = Pair({8, 5}, {5}, true);
  ASSERT_TRUE(FuseBiasGradPass().Run(*g));
  EXPECT_EQ(Ops(*g), "GemmSum ");
}

TEST(FuseBiasGradPass, NoFuseWhenTheRowsAreReadTheOtherWay) {
  // Gemm(g, x) with transA = 0 reads g's rows as rows of the product: its sums are not over the reduced axis.
  ExpectUnchanged(Pair({8, 3}, {3}, false), "g as A without transA");
}

TEST(FuseBiasGradPass, NoFuseWhenTheSumKeepsMoreThanTheLastAxis) {
  ExpectUnchanged(Pair({8, 5}, {8, 5}, true), "ReduceToShape [8, 5] -> [8, 5]");
  ExpectUnchanged(Pair({8, 5}, {1, 5}, true), "ReduceToShape to [1, 5] (rank 2)");
}

TEST(FuseBiasGradPass, NoFuseWhenItWouldMakeACycle) {
  ExpectUnchanged(Pair({8, 5}, {5}, true, /*cycle=*/true), "the Gemm's other operand reads the sums");
}

TEST(GemmSum, SchemaErrorsNameTheProblem) {
  auto g = Pair({8, 5}, {5}, true);
  ASSERT_TRUE(FuseBiasGradPass().Run(*g));
  Node* n = g->nodes()[0].get();
  n->attrs["transA"] = Attribute::Int(0);
  try {
    InferShapes(*g, true);
    FAIL() << "sum_input 0 without transA must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sum_input 0 needs transA = 1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ot
