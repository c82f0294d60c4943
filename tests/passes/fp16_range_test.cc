// fp16_range pass: attention masks beyond fp16's range and epsilons below it, after the amp pass made the region
// fp16 (golden structure with negative twins, and a differential run against fp32).
#include "passes/fp16_range.h"

#include <gtest/gtest.h>

#include <cmath>

#include "executor/executor.h"
#include "graph/error.h"
#include "graph/op_registry.h"
#include "graph/verifier.h"
#include "passes/amp.h"
#include "tests/test_util.h"

namespace ot {
namespace {
using namespace ot::test;

Value* Emit(Graph& g, const std::string& op, std::vector<Value*> ins, const std::string& name) {
  Value* out = g.AddValue(name + "_out");
  g.AddNode(op, ins, {out}, name);
  return out;
}

Node* NodeNamed(const Graph& g, const std::string& name) {
  for (const auto& n : g.nodes())
    if (n->name == name) return n.get();
  return nullptr;
}

// scores = x Wq; p = Softmax(scores + mask); y = p V. mask: 0 on and below the diagonal, `masked` above; row 0 of
// the mask is all masked when `full_row` (a padded query).
std::unique_ptr<Graph> Attention(float masked, bool full_row, uint64_t seed) {
  Rng().seed(seed);
  auto g = std::make_unique<Graph>();
  g->opset_imports[""] = 17;
  Value* x = g->AddValue("x");
  x->dtype = DataType::kFloat32;
  x->shape = Shape::Static({6, 8});
  g->inputs.push_back(x);
  Value* wq = g->AddInitializer("wq", RandomTensor(DataType::kFloat32, {8, 6}));
  Value* v = g->AddInitializer("v", RandomTensor(DataType::kFloat32, {6, 5}));
  Tensor m(DataType::kFloat32, {6, 6});
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 6; ++j) m.SetDouble(i * 6 + j, (j > i || (full_row && i == 0)) ? masked : 0.0);
  Value* mask = g->AddInitializer("mask", std::move(m));
  Value* s = Emit(*g, "Add", {Emit(*g, "MatMul", {x, wq}, "scores"), mask}, "masked");
  Value* p = Emit(*g, "Softmax", {s}, "softmax");
  g->outputs.push_back(Emit(*g, "MatMul", {p, v}, "out"));
  InferShapes(*g, true);
  return g;
}

void RunAmp(Graph& g, DataType h) {
  AmpOptions o;
  o.half = h;
  AmpPass(o).Run(g);
}

TEST(Fp16RangePass, ClampsAttentionMask) {
  auto g = Attention(-1e9f, false, 1);
  RunAmp(*g, DataType::kFloat16);
  Fp16RangePass pass;
  EXPECT_TRUE(pass.Run(*g));
  VerifyGraph(*g);
  ASSERT_EQ(pass.changes().size(), 1u);
  EXPECT_NE(pass.changes()[0].find("'mask'"), std::string::npos) << pass.changes()[0];
  EXPECT_NE(pass.changes()[0].find("15 value(s)"), std::string::npos) << pass.changes()[0];
  const Value* read = NodeNamed(*g, "masked")->inputs[1]->producer->inputs[0];
  ASSERT_TRUE(read->is_initializer());
  EXPECT_NE(read->name, "mask");
  for (int i = 0; i < 36; ++i) {
    const double want = (i % 6) > (i / 6) ? -1e4 : 0.0;
    EXPECT_EQ(read->initializer->GetDouble(i), want) << i;
  }
  // The original constant is left for fp32 readers.
  EXPECT_EQ(g->FindValue("mask")->initializer->GetDouble(1), -1e9f);
}

TEST(Fp16RangePass, NoChangeWhenMaskFitsOrRegionIsBf16) {
  auto g = Attention(-1e4f, false, 1);
  RunAmp(*g, DataType::kFloat16);
  EXPECT_FALSE(Fp16RangePass().Run(*g));
  auto g2 = Attention(-1e9f, false, 1);
  RunAmp(*g2, DataType::kBFloat16);
  EXPECT_FALSE(Fp16RangePass().Run(*g2));  // bf16 has fp32's range
}

// Differential: with the pass, the fp16 graph gives the fp32 graph's outputs, also for a fully masked row (fp32:
// uniform attention; fp16 without the pass: -inf - -inf = NaN).
TEST(Fp16RangePass, DifferentialAgainstFp32) {
  Tensor x = RandomTensor(DataType::kFloat32, {6, 8});
  auto ref = Attention(-1e9f, true, 3);
  auto fixed = Attention(-1e9f, true, 3);
  auto raw = Attention(-1e9f, true, 3);
  RunAmp(*fixed, DataType::kFloat16);
  RunAmp(*raw, DataType::kFloat16);
  Fp16RangePass().Run(*fixed);
  const Tensor a = Executor(*ref).Run({{"x", x}})[0];
  const Tensor b = Executor(*fixed).Run({{"x", x}})[0];
  const Tensor c = Executor(*raw).Run({{"x", x}})[0];
  ExpectClose(b, a, 5e-3, 5e-3);
  bool nan = false;
  for (int64_t i = 0; i < c.numel(); ++i) nan = nan || std::isnan(c.GetDouble(i));
  EXPECT_TRUE(nan) << "without the pass the fully masked row should be NaN in fp16";
}

// y = x / Sqrt(ReduceMean(x^2) + eps) as a decomposed norm would be written, in a forced fp16 region: the scalar eps
// 1e-12 feeding an Add is raised; the same constant as a Mul factor is not an epsilon and stays.
std::unique_ptr<Graph> EpsGraph(const std::string& op_with_eps) {
  auto g = std::make_unique<Graph>();
  g->opset_imports[""] = 17;
  Value* x = g->AddValue("x");
  x->dtype = DataType::kFloat32;
  x->shape = Shape::Static({4, 8});
  g->inputs.push_back(x);
  Value* w = g->AddInitializer("w", RandomTensor(DataType::kFloat32, {8, 8}));
  Value* w2 = g->AddInitializer("w2", RandomTensor(DataType::kFloat32, {8, 8}));
  Tensor e(DataType::kFloat32, {});
  e.SetDouble(0, 1e-12);
  Value* eps = g->AddInitializer("eps", std::move(e));
  Value* h = Emit(*g, "MatMul", {x, w}, "mm1");
  Value* k = Emit(*g, op_with_eps, {Emit(*g, "Relu", {h}, "relu"), eps}, "with_eps");
  g->outputs.push_back(Emit(*g, "MatMul", {Emit(*g, "Add", {h, k}, "res"), w2}, "mm2"));
  InferShapes(*g, true);
  return g;
}

TEST(Fp16RangePass, RaisesTinyEpsilonInAdd) {
  auto g = EpsGraph("Add");
  RunAmp(*g, DataType::kFloat16);
  Fp16RangePass pass;
  EXPECT_TRUE(pass.Run(*g));
  const Value* read = NodeNamed(*g, "with_eps")->inputs[1]->producer->inputs[0];
  EXPECT_NEAR(read->initializer->GetDouble(0), 1e-5, 1e-12);
  ASSERT_EQ(pass.changes().size(), 1u);
  EXPECT_NE(pass.changes()[0].find("1e-12"), std::string::npos) << pass.changes()[0];
}

TEST(Fp16RangePass, NoRaiseForAMulFactor) {
  auto g = EpsGraph("Mul");
  RunAmp(*g, DataType::kFloat16);
  EXPECT_FALSE(Fp16RangePass().Run(*g));
}

// Epsilon attributes: InstanceNormalization computes in the storage type (raised); LayerNormalization computes its
// statistics in fp32 inside (left alone).
TEST(Fp16RangePass, EpsilonAttributeOnlyWhenComputedInFp16) {
  for (const std::string op : {"InstanceNormalization", "LayerNormalization"}) {
    auto g = std::make_unique<Graph>();
    g->opset_imports[""] = 17;
    Value* x = g->AddValue("x");
    x->dtype = DataType::kFloat16;
    x->shape = Shape::Static({2, 3, 4});
    g->inputs.push_back(x);
    Value* sc = g->AddInitializer("scale", RandomTensor(DataType::kFloat16, {op == "LayerNormalization" ? 4 : 3}));
    Value* b = g->AddInitializer("b", RandomTensor(DataType::kFloat16, {op == "LayerNormalization" ? 4 : 3}));
    Value* y = g->AddValue("y");
    Node* n = g->AddNode(op, {x, sc, b}, {y}, "norm");
    n->attrs["epsilon"] = Attribute::Float(1e-12f);
    g->outputs.push_back(y);
    InferShapes(*g, true);
    Fp16RangePass pass;
    const bool changed = pass.Run(*g);
    EXPECT_EQ(changed, op == "InstanceNormalization") << op;
    EXPECT_EQ(n->attr_float("epsilon", 0), op == "InstanceNormalization" ? 1e-5f : 1e-12f) << op;
  }
}

TEST(Fp16RangePass, RejectsBadOptions) {
  auto g = Attention(-1e9f, false, 1);
  EXPECT_THROW(Fp16RangePass({1e6, 1e-5}).Run(*g), Error);
  EXPECT_THROW(Fp16RangePass({1e4, 1e-9}).Run(*g), Error);
}

}  // namespace
}  // namespace ot
