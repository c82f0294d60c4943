// fold_transpose: GEMMs read transposed operands through their flags (MatMulTrans, Gemm's transA/transB,
// MatMulBias's trans_b), Transpose chains compose, a transposed product swaps its operands. Structural tests with
// negative twins, differential tests of forward + autodiff's backward before and after the pass (float32 and
// float64, fresh random inputs), and the MatMulTrans kernel against a float64 reference in every float type.
#include "passes/fold_transpose.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "executor/executor.h"
#include "graph/graph.h"
#include "graph/op_registry.h"
#include "graph/verifier.h"
#include "passes/autodiff.h"
#include "tests/passes/grad_check.h"
#include "tests/test_util.h"

namespace ot {
namespace {

using test::Emit;

Value* Transpose(Graph& g, Value* x, std::vector<int64_t> perm) {
  return Emit(g, "Transpose", {x}, {{"perm", Attribute::Ints(perm)}});
}

Value* Internal(Graph& g, const std::string& op, std::vector<Value*> ins, test::Attrs attrs) {
  Value* y = Emit(g, op, std::move(ins), std::move(attrs));
  y->producer->domain = kInternalDomain;
  y->producer->opset = 1;
  g.opset_imports[kInternalDomain] = 1;
  return y;
}

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

struct Body {
  std::string what;
  std::vector<std::vector<int64_t>> params;
  std::vector<int64_t> out;
  test::BuildFn fn;
  int transposes_left;  // Transpose nodes in the step after the pass
};

std::vector<Body> Bodies() {
  std::vector<Body> b;
  // A Linear layer as PyTorch exports it: the weight [N, K] read through Transpose.
  b.push_back({"linear, rank 3 (MatMulBias)",
               {{2, 3, 6}, {5, 6}, {5}},
               {2, 3, 5},
               [](Graph& g, const std::vector<Value*>& p) {
                 return Internal(g, "MatMulBias", {p[0], Transpose(g, p[1], {1, 0}), p[2]}, {});
               },
               0});
  b.push_back({"linear, 2-D MatMul",
               {{4, 6}, {5, 6}},
               {4, 5},
               [](Graph& g, const std::vector<Value*>& p) {
                 return Emit(g, "MatMul", {p[0], Transpose(g, p[1], {1, 0})});
               },
               0});
  // Attention: S = Q K^T, P = softmax(S), O = P V; autodiff adds P^T, the swaps of Q, K and V and their chains.
  b.push_back({"attention",
               {{2, 3, 4, 8}, {2, 3, 4, 8}, {2, 3, 4, 8}},
               {2, 3, 4, 8},
               [](Graph& g, const std::vector<Value*>& p) {
                 Value* s = Emit(g, "MatMul", {p[0], Transpose(g, p[1], {0, 1, 3, 2})});
                 Value* pr = Emit(g, "Softmax", {s}, {{"axis", Attribute::Int(-1)}});
                 return Emit(g, "MatMul", {pr, p[2]});
               },
               0});
  // B broadcast over A's leading batch dim: its gradient is reduced over that dim by a ReduceToShape, which reads
  // the transposed B for its shape (so that Transpose stays), and transposed back after the reduction.
  b.push_back({"broadcast batch",
               {{2, 3, 4, 5}, {3, 6, 5}},
               {2, 3, 4, 6},
               [](Graph& g, const std::vector<Value*>& p) {
                 return Emit(g, "MatMul", {p[0], Transpose(g, p[1], {0, 2, 1})});
               },
               2});
  // A transposed A with a shared 2-D B (MatMulTrans cannot fold the batch into M).
  b.push_back({"transposed A, shared B",
               {{2, 6, 4}, {6, 5}},
               {2, 4, 5},
               [](Graph& g, const std::vector<Value*>& p) {
                 return Emit(g, "MatMul", {Transpose(g, p[0], {0, 2, 1}), p[1]});
               },
               0});
  // A head split: the (0, 2, 1, 3) Transpose moves a leading axis and stays; the swap behind it folds.
  b.push_back({"head split",
               {{2, 4, 3, 5}, {2, 3, 6, 5}},
               {2, 3, 4, 6},
               [](Graph& g, const std::vector<Value*>& p) {
                 return Emit(g, "MatMul", {Transpose(g, p[0], {0, 2, 1, 3}), Transpose(g, p[1], {0, 1, 3, 2})});
               },
               2});  // the forward head split and its gradient's inverse
  return b;
}

// Forward and autodiff's gradients of every parameter, before and after the pass, on the same random parameters.
TEST(FoldTransposePass, DifferentialWithGradients) {
  for (DataType t : {DataType::kFloat32, DataType::kFloat64})
    for (const Body& body : Bodies()) {
      SCOPED_TRACE(body.what + " " + DataTypeName(t));
      std::vector<Tensor> params;
      for (const auto& d : body.params) params.push_back(test::RandomTensor(t, d, -2, 2));
      const Tensor r = test::RandomTensor(t, body.out, 0.5, 1.5);
      std::vector<Tensor> results[2];
      for (int folded = 0; folded < 2; ++folded) {
        auto g = test::Build(params, body.fn, r, 17);
        InferShapes(*g);
        AutodiffPass ad({"loss", "^(r|k_.*)$"});
        ASSERT_TRUE(ad.Run(*g));
        ASSERT_EQ(ad.params().size(), body.params.size());
        const int before = Count(*g, "Transpose");
        if (folded) {
          FoldTransposePass pass;
          ASSERT_TRUE(pass.Run(*g));
          EXPECT_EQ(Count(*g, "Transpose"), body.transposes_left) << Ops(*g);
          EXPECT_EQ(pass.removed(), before - body.transposes_left);
          EXPECT_GT(pass.folded_operands(), 0);
          VerifyGraph(*g);
          InferShapes(*g, true);  // the new nodes' schemas agree with the shapes the old ones had
          EXPECT_FALSE(FoldTransposePass().Run(*g)) << "a second run changes nothing";
        }
        results[folded] = Executor(*g).Run({});
      }
      ASSERT_EQ(results[0].size(), results[1].size());
      ASSERT_EQ(results[0].size(), 1 + body.params.size());
      const double tol = t == DataType::kFloat64 ? 1e-12 : 2e-5;
      for (size_t i = 0; i < results[0].size(); ++i) {
        SCOPED_TRACE("output " + std::to_string(i));
        test::ExpectClose(results[1][i], results[0][i], tol, tol);
      }
    }
}

// The structure the pass makes of a Linear layer's step: the forward MatMulBias reads W [N, K] in place (trans_b),
// the data gradient reads W untransposed (the (W^T)^T chain composed away) and the weight gradient is one Gemm
// writing dW [N, K] directly (Transpose(Gemm(X, dY) {transA}) swapped into Gemm(dY, X) {transA}).
TEST(FoldTransposePass, LinearLayerStep) {
  const Tensor x = test::RandomTensor(DataType::kFloat32, {4, 6}), w = test::RandomTensor(DataType::kFloat32, {5, 6});
  const Tensor bias = test::RandomTensor(DataType::kFloat32, {5}), r = test::RandomTensor(DataType::kFloat32, {4, 5});
  auto g = test::Build(
      {x, w, bias},
      [](Graph& g, const std::vector<Value*>& p) {
        return Internal(g, "MatMulBias", {p[0], Transpose(g, p[1], {1, 0}), p[2]}, {});
      },
      r, 17);
  InferShapes(*g);
  ASSERT_TRUE(AutodiffPass({"loss", "^(r|k_.*)$"}).Run(*g));
  ASSERT_GE(Count(*g, "Transpose"), 2) << Ops(*g);
  FoldTransposePass pass;
  ASSERT_TRUE(pass.Run(*g));
  EXPECT_EQ(Count(*g, "Transpose"), 0) << Ops(*g);
  EXPECT_GE(pass.folded_results(), 1);
  const Value* wv = g->FindValue("p1");
  int readers = 0;
  for (const Use& u : wv->uses) {
    ++readers;
    if (u.node->op_type == "MatMulBias") {
      EXPECT_EQ(u.node->attr_int("trans_b", 0), 1);
    }
  }
  EXPECT_GE(readers, 2);  // the forward and the data gradient read W itself
  // dW [5, 6] comes straight from a Gemm.
  bool gemm_writes_dw = false;
  for (const auto& n : g->nodes())
    if (n->op_type == "Gemm" && n->outputs[0]->shape == Shape::Static({5, 6})) gemm_writes_dw = true;
  EXPECT_TRUE(gemm_writes_dw) << Ops(*g);
}

// Graph with input a [.., M, K]-ish values, body over them, one output; nothing to differentiate.
std::unique_ptr<Graph> Forward(const std::vector<std::vector<int64_t>>& ins,
                               const std::function<std::vector<Value*>(Graph&, const std::vector<Value*>&)>& body) {
  auto g = std::make_unique<Graph>();
  g->opset_imports[""] = 17;
  std::vector<Value*> vs;
  for (size_t i = 0; i < ins.size(); ++i) {
    Value* v = g->AddValue("in" + std::to_string(i));
    v->dtype = DataType::kFloat32;
    v->shape = Shape::Static(ins[i]);
    g->inputs.push_back(v);
    vs.push_back(v);
  }
  g->outputs = body(*g, vs);
  InferShapes(*g, true);
  return g;
}

void ExpectUnchanged(std::unique_ptr<Graph> g, const std::string& why) {
  SCOPED_TRACE(why);
  const std::string ops = Ops(*g);
  EXPECT_FALSE(FoldTransposePass().Run(*g));
  EXPECT_EQ(Ops(*g), ops);
}

TEST(FoldTransposePass, NoFoldWhenTheTransposeMovesABatchAxis) {
  ExpectUnchanged(Forward({{2, 5, 4}, {4, 2, 6}},
                          [](Graph& g, const std::vector<Value*>& v) {
                            return std::vector<Value*>{Emit(g, "MatMul", {v[0], Transpose(g, v[1], {1, 0, 2})})};
                          }),
                  "B = Transpose(X, (1, 0, 2))");
  ExpectUnchanged(Forward({{4, 2, 5, 3}, {2, 4, 3, 6}},
                          [](Graph& g, const std::vector<Value*>& v) {
                            return std::vector<Value*>{Emit(g, "MatMul", {Transpose(g, v[0], {1, 0, 2, 3}), v[1]})};
                          }),
                  "A = Transpose(X, (1, 0, 2, 3))");
}

TEST(FoldTransposePass, NoFoldWhenTheProductIsReadElsewhere) {
  ExpectUnchanged(Forward({{4, 6}, {6, 5}},
                          [](Graph& g, const std::vector<Value*>& v) {
                            Value* y = Emit(g, "MatMul", {v[0], v[1]});
                            return std::vector<Value*>{Transpose(g, y, {1, 0}), Emit(g, "Neg", {y})};
                          }),
                  "MatMul output also read by Neg");
  ExpectUnchanged(Forward({{4, 6}, {6, 5}},
                          [](Graph& g, const std::vector<Value*>& v) {
                            Value* y = Emit(g, "MatMul", {v[0], v[1]});
                            return std::vector<Value*>{Transpose(g, y, {1, 0}), y};
                          }),
                  "MatMul output is a graph output");
}

TEST(FoldTransposePass, NoFoldOfAGemmWithC) {
  ExpectUnchanged(Forward({{4, 6}, {6, 5}, {5}},
                          [](Graph& g, const std::vector<Value*>& v) {
                            return std::vector<Value*>{Transpose(g, Emit(g, "Gemm", {v[0], v[1], v[2]}), {1, 0})};
                          }),
                  "Transpose(Gemm(A, B, C))");
}

TEST(FoldTransposePass, NoFoldOfAnOneDimensionalOperand) {
  ExpectUnchanged(Forward({{6}, {5, 6}},
                          [](Graph& g, const std::vector<Value*>& v) {
                            return std::vector<Value*>{Emit(g, "MatMul", {v[0], Transpose(g, v[1], {1, 0})})};
                          }),
                  "MatMul(vector, Transpose(W))");
}

// A chain that composes to the identity but whose last Transpose is a graph output keeps a node (an identity
// Transpose reading the source) and the value; the values stay right.
TEST(FoldTransposePass, PinnedTransposeStaysAndComposes) {
  auto g = Forward({{3, 4, 5}}, [](Graph& g, const std::vector<Value*>& v) {
    Value* a = Transpose(g, v[0], {2, 0, 1});
    return std::vector<Value*>{Transpose(g, a, {1, 2, 0}), Emit(g, "Neg", {a})};
  });
  const Tensor x = test::RandomTensor(DataType::kFloat32, {3, 4, 5});
  const std::vector<Tensor> want = Executor(*g).Run({{"in0", x}});
  ASSERT_TRUE(FoldTransposePass().Run(*g));
  const Node* last = g->outputs[0]->producer;
  ASSERT_NE(last, nullptr);
  EXPECT_EQ(last->op_type, "Transpose");
  EXPECT_EQ(last->inputs[0], g->FindValue("in0"));
  EXPECT_EQ(last->attr_ints("perm"), (std::vector<int64_t>{0, 1, 2}));
  VerifyGraph(*g);
  const std::vector<Tensor> got = Executor(*g).Run({{"in0", x}});
  test::ExpectClose(got[0], want[0], 0, 0);
  test::ExpectClose(got[1], want[1], 0, 0);
}

// ai.onnxtrain.MatMulTrans on its own: every flag combination, a broadcast batch, every float type, against the
// float64 sum over the same rounded inputs; the output is pre-filled with NaN by nothing but the kernel writing it
// (a fresh arena), and checked element by element.
TEST(MatMulTrans, KernelMatchesAFloat64ReferenceInEveryFloatType) {
  struct Case {
    DataType t;
    double rtol, atol;
  };
  const int64_t M = 7, K = 33, N = 9;
  for (Case c : {Case{DataType::kFloat64, 1e-12, 1e-12}, Case{DataType::kFloat32, 1e-5, 1e-5},
                 Case{DataType::kFloat16, 2e-3, 4e-3}, Case{DataType::kBFloat16, 1.6e-2, 3e-2}})
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb)
        for (int shared_b = 0; shared_b < 2; ++shared_b) {
          SCOPED_TRACE(DataTypeName(c.t) + " trans_a " + std::to_string(ta) + " trans_b " + std::to_string(tb) +
                       (shared_b ? " B shared" : " B [3, 1, ..] broadcast"));
          const std::vector<int64_t> ad = ta ? std::vector<int64_t>{3, 2, K, M} : std::vector<int64_t>{3, 2, M, K};
          std::vector<int64_t> bd = tb ? std::vector<int64_t>{N, K} : std::vector<int64_t>{K, N};
          if (!shared_b) bd.insert(bd.begin(), {3, 1});
          const Tensor a = test::RandomTensor(c.t, ad), b = test::RandomTensor(c.t, bd);
          Graph g;
          g.opset_imports[""] = 17;
          g.opset_imports[kInternalDomain] = 1;
          Value* av = g.AddValue("a");
          av->dtype = c.t;
          av->shape = Shape::Static(ad);
          Value* bv = g.AddValue("b");
          bv->dtype = c.t;
          bv->shape = Shape::Static(bd);
          g.inputs = {av, bv};
          Value* y = g.AddValue("y");
          Node* n = g.AddNode("MatMulTrans", {av, bv}, {y}, "mmt");
          n->domain = kInternalDomain;
          n->opset = 1;
          n->attrs["trans_a"] = Attribute::Int(ta);
          n->attrs["trans_b"] = Attribute::Int(tb);
          g.outputs = {y};
          InferShapes(g, true);
          ASSERT_EQ(y->shape, Shape::Static({3, 2, M, N}));
          const Tensor out = Executor(g).Run({{"a", a}, {"b", b}})[0];
          ASSERT_EQ(out.dtype(), c.t);
          Tensor got(DataType::kFloat64, out.dims()), want(DataType::kFloat64, out.dims());
          for (int64_t i0 = 0; i0 < 3; ++i0)
            for (int64_t i1 = 0; i1 < 2; ++i1)
              for (int64_t m = 0; m < M; ++m)
                for (int64_t j = 0; j < N; ++j) {
                  const int64_t ab = (i0 * 2 + i1) * M * K, bb = shared_b ? 0 : i0 * K * N;
                  double s = 0;
                  for (int64_t k = 0; k < K; ++k)
                    s +=
                        a.GetDouble(ab + (ta ? k * M + m : m * K + k)) * b.GetDouble(bb + (tb ? j * K + k : k * N + j));
                  const int64_t o = ((i0 * 2 + i1) * M + m) * N + j;
                  want.SetDouble(o, s);
                  got.SetDouble(o, out.GetDouble(o));
                }
          test::ExpectClose(got, want, c.rtol, c.atol);
        }
}

TEST(MatMulTrans, SchemaErrorsNameTheProblem) {
  Graph g;
  g.opset_imports[""] = 17;
  Value* a = g.AddValue("a");
  a->dtype = DataType::kFloat32;
  a->shape = Shape::Static({4, 6});
  Value* b = g.AddValue("b");
  b->dtype = DataType::kFloat32;
  b->shape = Shape::Static({5, 6});
  g.inputs = {a, b};
  Value* y = g.AddValue("y");
  Node* n = g.AddNode("MatMulTrans", {a, b}, {y}, "mmt");
  n->domain = kInternalDomain;
  n->opset = 1;
  g.outputs = {y};
  try {
    InferShapes(g, true);
    FAIL() << "inner dimensions 6 and 5 must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("inner dimensions differ"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("mmt"), std::string::npos) << e.what();
  }
  n->attrs["trans_b"] = Attribute::Int(1);
  InferShapes(g, true);
  EXPECT_EQ(y->shape, Shape::Static({4, 5}));
}

}  // namespace
}  // namespace ot
