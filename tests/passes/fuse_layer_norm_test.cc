// fuse_layer_norm: the ReduceMean/Sub/Pow/Sqrt/Div layer norm (with or without the affine Mul/Add) becomes one
// LayerNormalization node; other graphs stay as they are. And the pattern fusion on the real example: the tiny
// transformer's step graph holds 5 LayerNormalization and 2 Gelu nodes and trains to the unfused step's losses.
#include "passes/fuse_layer_norm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "executor/executor.h"
#include "graph/error.h"
#include "graph/graph.h"
#include "graph/op_registry.h"
#include "graph/verifier.h"
#include "onnx_import/model_io.h"
#include "onnx_import/tensor_io.h"
#include "passes/fuse_gelu.h"
#include "tests/passes/grad_check.h"
#include "tests/test_util.h"
#include "training/data_loader.h"
#include "training/trainer.h"

namespace ot {
namespace {

using test::Emit;

Value* Const(Graph& g, const Tensor& t, bool node) {
  if (!node) return g.AddInitializer(g.UniqueName("k"), t.Clone());
  Value* out = g.AddValue(g.UniqueName("c"));
  Node* n = g.AddNode("Constant", {}, {out}, g.UniqueName("Constant"));
  n->attrs["value"] = Attribute::TensorValue(t.Clone());
  return out;
}
Value* Scalar(Graph& g, double v, bool node = true) {
  Tensor t(DataType::kFloat32, {});
  t.SetDouble(0, v);
  return Const(g, t, node);
}

struct Spec {
  int opset = 15;
  std::vector<int64_t> axes = {-1};
  bool scale = true, bias = true;
  bool swap = false;        // Mul(scale, y), Add(bias, y), Add(eps, var)
  bool square_mul = false;  // Mul(d, d) instead of Pow(d, 2)
  bool const_nodes = true;
  int64_t keepdims = 1;
  bool leak_mean = false;         // the mean also feeds another node
  bool leak_d = false;            // d also feeds another node
  bool leak_norm = false;         // the normalized value (before scale) is a graph output
  std::vector<int64_t> var_axes;  // the variance's axes when they differ
};

// x [2, 3, 8] -> the decomposed layer norm -> y (graph output 0); scale/bias are initializers of shape [8] (or
// [3, 8] over two axes).
std::unique_ptr<Graph> LnGraph(const Spec& s) {
  auto g = std::make_unique<Graph>();
  g->opset_imports[""] = s.opset;
  Value* x = g->AddValue("x");
  x->dtype = DataType::kFloat32;
  x->shape = Shape::Static({2, 3, 8});
  g->inputs.push_back(x);
  auto mean = [&](Value* v, const std::vector<int64_t>& axes) {
    Node* n;
    Value* out = g->AddValue(g->UniqueName("mean"));
    if (s.opset >= 18) {
      n = g->AddNode("ReduceMean", {v, Const(*g, Tensor::FromInt64(axes, {int64_t(axes.size())}), s.const_nodes)},
                     {out}, g->UniqueName("ReduceMean"));
    } else {
      n = g->AddNode("ReduceMean", {v}, {out}, g->UniqueName("ReduceMean"));
      n->attrs["axes"] = Attribute::Ints(axes);
    }
    if (s.keepdims != 1) n->attrs["keepdims"] = Attribute::Int(s.keepdims);
    return out;
  };
  auto bin = [&](const char* op, Value* a, Value* b) { return s.swap ? Emit(*g, op, {b, a}) : Emit(*g, op, {a, b}); };
  Value* m = mean(x, s.axes);
  Value* d = Emit(*g, "Sub", {x, m});
  Value* sq = s.square_mul ? Emit(*g, "Mul", {d, d}) : Emit(*g, "Pow", {d, Scalar(*g, 2.0, s.const_nodes)});
  Value* var = mean(sq, s.var_axes.empty() ? s.axes : s.var_axes);
  Value* y = Emit(*g, "Div", {d, Emit(*g, "Sqrt", {bin("Add", var, Scalar(*g, 1e-5, s.const_nodes))})});
  if (s.leak_mean) g->outputs.push_back(Emit(*g, "Neg", {m}));
  if (s.leak_d) g->outputs.push_back(Emit(*g, "Neg", {d}));
  if (s.leak_norm) g->outputs.push_back(y);
  const std::vector<int64_t> nd = s.axes.size() == 2 ? std::vector<int64_t>{3, 8} : std::vector<int64_t>{8};
  if (s.scale) y = bin("Mul", y, g->AddInitializer("scale", test::RandomTensor(DataType::kFloat32, nd, 0.5, 1.5)));
  if (s.bias) y = bin("Add", y, g->AddInitializer("bias", test::RandomTensor(DataType::kFloat32, nd)));
  g->outputs.insert(g->outputs.begin(), y);
  InferShapes(*g);
  return g;
}

std::string Ops(const Graph& g) {
  std::string s;
  for (const Node* n : g.TopologicalOrder()) s += n->op_type + " ";
  return s;
}

TEST(FuseLayerNormPass, DecompositionBecomesOneNode) {
  struct Case {
    std::string what;
    Spec s;
  };
  std::vector<Case> cases;
  cases.push_back({"pytorch 1.13 (opset 15, scale and bias)", {}});
  {
    Spec s;
    s.swap = true;
    cases.push_back({"operands swapped", s});
  }
  {
    Spec s;
    s.square_mul = true;
    s.const_nodes = false;
    cases.push_back({"Mul(d, d), initializer constants", s});
  }
  {
    Spec s;
    s.opset = 18;
    cases.push_back({"opset 18 axes as input", s});
  }
  {
    Spec s;
    s.axes = {1, 2};
    cases.push_back({"last two axes", s});
  }
  {
    Spec s;
    s.bias = false;
    cases.push_back({"no bias", s});
  }
  {
    Spec s;
    s.scale = false;
    s.bias = false;
    cases.push_back({"no affine", s});
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    auto g = LnGraph(c.s);
    Value* y = g->outputs[0];
    FuseLayerNormPass pass;
    ASSERT_TRUE(pass.Run(*g));
    EXPECT_EQ(pass.fused(), 1);
    const Node* ln = y->producer;
    ASSERT_NE(ln, nullptr);
    EXPECT_EQ(ln->op_type, "LayerNormalization");
    EXPECT_EQ(ln->attr_int("axis", 0), -static_cast<int64_t>(c.s.axes.size()));
    EXPECT_FLOAT_EQ(ln->attr_float("epsilon", 0), 1e-5f);
    // From opset 17 the ONNX op at the model's opset, before it the internal alias.
    EXPECT_EQ(ln->domain, c.s.opset >= 17 ? "" : kInternalDomain);
    EXPECT_EQ(ln->opset, c.s.opset >= 17 ? c.s.opset : 1);
    ASSERT_GE(ln->inputs.size(), 2u);
    EXPECT_EQ(ln->inputs[0], g->FindValue("x"));
    if (c.s.scale) {
      EXPECT_EQ(ln->inputs[1]->name, "scale");
    } else {  // ones of the normalized shape, from a Constant node (not a trainable initializer)
      ASSERT_NE(ln->inputs[1]->producer, nullptr);
      EXPECT_EQ(ln->inputs[1]->producer->op_type, "Constant");
      EXPECT_EQ(ln->inputs[1]->shape, Shape::Static({8}));
    }
    EXPECT_EQ(ln->inputs.size(), c.s.bias ? 3u : 2u);
    if (c.s.bias) {
      EXPECT_EQ(ln->inputs[2]->name, "bias");
    }
    EXPECT_EQ(g->nodes().size(), c.s.scale ? 1u : 2u) << Ops(*g);
    VerifyGraph(*g);
    EXPECT_FALSE(FuseLayerNormPass().Run(*g));
  }
}

TEST(FuseLayerNormPass, DifferentialAgainstTheDecomposition) {
  for (int variant = 0; variant < 4; ++variant) {
    Spec s;
    if (variant == 1) s.axes = {-2, -1};
    if (variant == 2) s.scale = s.bias = false;
    if (variant == 3) s.opset = 18;
    SCOPED_TRACE(variant);
    auto before = LnGraph(s);
    // The same graph with the same scale and bias.
    auto after = LnGraph(s);
    for (const char* p : {"scale", "bias"})
      if (Value* v = after->FindValue(p)) *v->initializer = before->FindValue(p)->initializer->Clone();
    ASSERT_TRUE(FuseLayerNormPass().Run(*after));
    Tensor x = test::RandomTensor(DataType::kFloat32, {2, 3, 8}, -3, 5);
    test::ExpectClose(Executor(*after).Run({{"x", x}})[0], Executor(*before).Run({{"x", x}})[0], 1e-5, 1e-6);
  }
}

void ExpectUnchanged(const Spec& s, const std::string& why) {
  SCOPED_TRACE(why);
  auto g = LnGraph(s);
  const std::string ops = Ops(*g);
  FuseLayerNormPass pass;
  EXPECT_FALSE(pass.Run(*g));
  EXPECT_EQ(Ops(*g), ops);
}

TEST(FuseLayerNormPass, NoFuseWhenAnIntermediateIsUsedElsewhere) {
  {
    Spec s;
    s.leak_mean = true;
    ExpectUnchanged(s, "the mean also feeds a Neg");
  }
  {
    Spec s;
    s.leak_d = true;
    ExpectUnchanged(s, "x - mean also feeds a Neg");
  }
}

TEST(FuseLayerNormPass, NoFuseWhenTheReduceIsNotOverTheLastAxes) {
  {
    Spec s;
    s.axes = {1};
    ExpectUnchanged(s, "axes [1] of a rank-3 x");
  }
  {
    Spec s;
    s.axes = {0, 2};
    ExpectUnchanged(s, "axes [0, 2]");
  }
  {
    Spec s;
    s.var_axes = {1};
    ExpectUnchanged(s, "mean over -1, variance over 1");
  }
}

// The normalized value is a graph output: the Mul(scale)/Add(bias) cannot join, the normalization itself can.
TEST(FuseLayerNormPass, APublicNormalizedValueEndsThePatternBeforeTheAffine) {
  Spec s;
  s.leak_norm = true;
  auto g = LnGraph(s);
  ASSERT_TRUE(FuseLayerNormPass().Run(*g));
  const Node* ln = g->outputs[1]->producer;
  ASSERT_NE(ln, nullptr);
  EXPECT_EQ(ln->op_type, "LayerNormalization");
  EXPECT_EQ(ln->inputs.size(), 2u);  // ones as scale, no bias
  EXPECT_EQ(g->outputs[0]->producer->op_type, "Add");
}

// ---- the tiny transformer example (examples/tiny_lm: PyTorch 1.13, opset 15) ----

const std::string kTinyLm = std::string(OT_SOURCE_DIR) + "/examples/tiny_lm/";

// The first n losses of trajectory_adam.json (read without a JSON library: the "losses" array of numbers).
std::vector<double> ReferenceLosses(size_t n) {
  std::ifstream f(kTinyLm + "trajectory_adam.json");
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string s = ss.str();
  size_t p = s.find("\"losses\"");
  std::vector<double> out;
  if (p == std::string::npos) return out;
  p = s.find('[', p);
  const char* c = s.c_str() + p + 1;
  while (out.size() < n) {
    char* end;
    const double v = std::strtod(c, &end);
    if (end == c) break;
    out.push_back(v);
    c = end;
    while (*c == ',' || *c == ' ' || *c == '\n') ++c;
  }
  return out;
}

TrainerOptions TinyLmOptions() {
  TrainerOptions o;
  o.loss = {"", "cross_entropy", "logits", "y"};
  o.optimizer.kind = ParseOptimizerKind("adam");
  o.optimizer.lr = 0.001;
  return o;
}

std::vector<double> Train(Trainer& t, int steps) {
  std::map<std::string, Tensor> arrays;
  for (NamedTensor& nt : ReadNpz(kTinyLm + "data.npz")) arrays[nt.name] = nt.tensor;
  DataLoader data(std::move(arrays), 16, false, 0, "tiny_lm");
  std::vector<double> losses;
  for (int k = 0; k < steps; ++k) losses.push_back(t.Step(data.Get(0, k).arrays).loss);
  return losses;
}

int Count(const Graph& g, const std::string& op) {
  int c = 0;
  for (const auto& n : g.nodes()) c += n->op_type == op;
  return c;
}

TEST(PatternFusion, TinyLmStepHasFusedNormsAndGelusAndTrainsTheSame) {
  Trainer fused(LoadModel(kTinyLm + "model.onnx"), TinyLmOptions());
  const Graph& sg = fused.step_graph();
  // Two blocks of (ln1, ln2) plus the final ln; one GELU per block's MLP.
  EXPECT_EQ(Count(sg, "LayerNormalization"), 5);
  EXPECT_EQ(Count(sg, "Gelu"), 2);
  EXPECT_EQ(Count(sg, "Erf"), 0);
  EXPECT_EQ(Count(sg, "Sqrt"), 0);
  EXPECT_EQ(Count(sg, "Pow"), 0);
  int gelu_grad = 0, ln_grad = 0;
  for (const auto& n : sg.nodes()) {
    gelu_grad += n->op_type == "GeluGrad";
    ln_grad += n->op_type == "LayerNormGrad";
  }
  EXPECT_EQ(gelu_grad, 2);
  EXPECT_EQ(ln_grad, 5);

  // The unfused step: the same model with each pattern's first intermediate (the Erf output, the mean) made a
  // graph output, which the passes must respect.
  std::unique_ptr<Graph> model = LoadModel(kTinyLm + "model.onnx");
  int blocked = 0;
  for (const auto& n : model->nodes())
    if (n->op_type == "Erf" ||
        (n->op_type == "ReduceMean" && n->inputs[0]->producer && n->inputs[0]->producer->op_type != "Pow")) {
      model->outputs.push_back(n->outputs[0]);
      ++blocked;
    }
  ASSERT_EQ(blocked, 7);
  Trainer unfused(std::move(model), TinyLmOptions());
  EXPECT_EQ(Count(unfused.step_graph(), "LayerNormalization"), 0);
  EXPECT_EQ(Count(unfused.step_graph(), "Gelu"), 0);

  const int steps = 5;
  std::vector<double> a = Train(fused, steps), b = Train(unfused, steps), ref = ReferenceLosses(steps);
  ASSERT_EQ(ref.size(), static_cast<size_t>(steps));
  for (int k = 0; k < steps; ++k) {
    EXPECT_NEAR(a[k], b[k], 1e-4 * std::fabs(b[k])) << "step " << k + 1 << " fused vs unfused";
    EXPECT_NEAR(a[k], ref[k], 1e-4 * std::fabs(ref[k])) << "step " << k + 1 << " fused vs PyTorch";
    EXPECT_GT(std::fabs(a[k] - a[0]) + (k == 0), 0.0);  // it trains: the loss moves
  }
  EXPECT_LT(a[steps - 1], a[0]);
}

}  // namespace
}  // namespace ot
