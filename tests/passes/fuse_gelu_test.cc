// fuse_gelu: GELU's Erf and Tanh decompositions (the forms exporters write) become one Gelu node; anything else
// stays as it is. Also the internal GeluGrad op (the Gelu gradient rule's fused backward): its kernel against a
// float64 formula in every float dtype, its finite-difference check, and its errors.
#include "passes/fuse_gelu.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <string>

#include "executor/executor.h"
#include "graph/error.h"
#include "graph/graph.h"
#include "graph/op_registry.h"
#include "graph/verifier.h"
#include "tests/passes/grad_check.h"
#include "tests/test_util.h"

namespace ot {
namespace {

using test::Emit;

// Constants as PyTorch writes them (Constant nodes) or as initializers.
Value* Const(Graph& g, double v, bool node, std::vector<int64_t> dims = {}) {
  Tensor t(DataType::kFloat32, dims);
  t.SetDouble(0, v);
  if (!node) return g.AddInitializer(g.UniqueName("k"), std::move(t));
  Value* out = g.AddValue(g.UniqueName("c"));
  Node* n = g.AddNode("Constant", {}, {out}, g.UniqueName("Constant"));
  n->attrs["value"] = Attribute::TensorValue(std::move(t));
  return out;
}

struct Spec {
  std::string form = "pytorch";  // pytorch | mul_rsqrt2 | half_first | half_of_a | div2 | tanh_pow | tanh_mul
  bool const_nodes = true;
  bool swap = false;  // the constants as first operands where the op commutes
  double half = 0.5;  // the 0.5 (0.6: a wrong constant)
  double coef = 0.044715;
  bool leak = false;         // an intermediate (Erf/Tanh output) also used by another node
  bool leak_output = false;  // ... or a graph output
};

// x [3, 7] -> the GELU decomposition `s` -> y (graph output).
std::unique_ptr<Graph> GeluGraph(const Spec& s, int opset = 15) {
  auto g = std::make_unique<Graph>();
  g->opset_imports[""] = opset;
  Value* x = g->AddValue("x");
  x->dtype = DataType::kFloat32;
  x->shape = Shape::Static({3, 7});
  g->inputs.push_back(x);
  auto C = [&](double v) { return Const(*g, v, s.const_nodes); };
  auto bin = [&](const char* op, Value* a, Value* c) {  // c is the constant operand
    const bool commutes = std::string(op) == "Mul" || std::string(op) == "Add";
    return s.swap && commutes ? Emit(*g, op, {c, a}) : Emit(*g, op, {a, c});
  };
  Value* inner;  // Erf(...) or Tanh(...)
  if (s.form.rfind("tanh", 0) == 0) {
    Value* cube = s.form == "tanh_pow" ? Emit(*g, "Pow", {x, C(3.0)}) : Emit(*g, "Mul", {Emit(*g, "Mul", {x, x}), x});
    Value* sum = Emit(*g, "Add", {x, bin("Mul", cube, C(s.coef))});
    inner = Emit(*g, "Tanh", {bin("Mul", sum, C(std::sqrt(2.0 / M_PI)))});
  } else if (s.form == "mul_rsqrt2") {
    inner = Emit(*g, "Erf", {bin("Mul", x, C(0.70710678))});
  } else {
    inner = Emit(*g, "Erf", {Emit(*g, "Div", {x, C(1.4142135)})});
  }
  if (s.leak) g->outputs.push_back(Emit(*g, "Neg", {inner}));
  if (s.leak_output) g->outputs.push_back(inner);
  Value* a = bin("Add", inner, C(1.0));
  Value* y;
  if (s.form == "half_first")
    y = Emit(*g, "Mul", {bin("Mul", x, C(s.half)), a});
  else if (s.form == "half_of_a")
    y = Emit(*g, "Mul", {x, bin("Mul", a, C(s.half))});
  else if (s.form == "div2")
    y = Emit(*g, "Div", {Emit(*g, "Mul", {x, a}), C(1.0 / s.half)});
  else
    y = bin("Mul", Emit(*g, "Mul", {x, a}), C(s.half));
  g->outputs.insert(g->outputs.begin(), y);
  InferShapes(*g);
  return g;
}

std::vector<Tensor> RunGraph(const Graph& g, const Tensor& x) { return Executor(g).Run({{"x", x}}); }

const char* kForms[] = {"pytorch", "mul_rsqrt2", "half_first", "half_of_a", "div2", "tanh_pow", "tanh_mul"};

TEST(FuseGeluPass, EveryExportedFormBecomesOneGeluNode) {
  for (const char* form : kForms)
    for (bool nodes : {true, false})
      for (bool swap : {false, true}) {
        Spec s;
        s.form = form;
        s.const_nodes = nodes;
        s.swap = swap;
        SCOPED_TRACE(std::string(form) + (nodes ? " constant nodes" : " initializers") + (swap ? " swapped" : ""));
        auto g = GeluGraph(s);
        Value* y = g->outputs[0];
        FuseGeluPass pass;
        ASSERT_TRUE(pass.Run(*g));
        EXPECT_EQ(pass.fused(), 1);
        ASSERT_EQ(g->nodes().size(), 1u);  // the Constant nodes went with the pattern
        const Node* n = g->nodes()[0].get();
        EXPECT_EQ(n->op_type, "Gelu");
        EXPECT_EQ(n->attr_string("approximate", "?"), s.form.rfind("tanh", 0) == 0 ? "tanh" : "none");
        ASSERT_EQ(n->inputs.size(), 1u);
        EXPECT_EQ(n->inputs[0], g->FindValue("x"));
        ASSERT_EQ(n->outputs.size(), 1u);
        EXPECT_EQ(n->outputs[0], y);  // the output keeps its value (name, type, shape)
        // ONNX has Gelu from opset 20; the model imports 15: the internal alias, and the import is unchanged.
        EXPECT_EQ(n->domain, kInternalDomain);
        EXPECT_EQ(n->opset, 1);
        EXPECT_EQ(g->OpsetOf(""), 15);
        VerifyGraph(*g);
        EXPECT_FALSE(FuseGeluPass().Run(*g));
      }
}

// The fused node computes what the decomposition did (fresh random x over GELU's curved range).
TEST(FuseGeluPass, DifferentialAgainstTheDecomposition) {
  for (const char* form : kForms) {
    SCOPED_TRACE(form);
    Spec s;
    s.form = form;
    auto before = GeluGraph(s), after = GeluGraph(s);
    ASSERT_TRUE(FuseGeluPass().Run(*after));
    Tensor x = test::RandomTensor(DataType::kFloat32, {3, 7}, -4, 4);
    test::ExpectClose(RunGraph(*after, x)[0], RunGraph(*before, x)[0], 1e-5, 1e-6);
  }
}

TEST(FuseGeluPass, KeepsTheOpsetOfANewerModel) {
  auto g = GeluGraph({}, 21);
  ASSERT_TRUE(FuseGeluPass().Run(*g));
  EXPECT_EQ(g->nodes()[0]->opset, 21);
  EXPECT_EQ(g->nodes()[0]->domain, "");
}

std::string Ops(const Graph& g) {
  std::string s;
  for (const Node* n : g.TopologicalOrder()) s += n->op_type + " ";
  return s;
}

void ExpectUnchanged(const Spec& s, const std::string& why) {
  SCOPED_TRACE(why + " (" + s.form + ")");
  auto g = GeluGraph(s);
  const std::string ops = Ops(*g);
  FuseGeluPass pass;
  EXPECT_FALSE(pass.Run(*g));
  EXPECT_EQ(pass.fused(), 0);
  EXPECT_EQ(Ops(*g), ops);
}

TEST(FuseGeluPass, NoFuseWhenAnIntermediateIsUsedElsewhere) {
  for (const char* form : {"pytorch", "tanh_pow"}) {
    Spec s;
    s.form = form;
    s.leak = true;
    ExpectUnchanged(s, "Erf/Tanh output also feeds a Neg");
    s.leak = false;
    s.leak_output = true;
    ExpectUnchanged(s, "Erf/Tanh output is a graph output");
  }
}

TEST(FuseGeluPass, NoFuseWhenAConstantIsWrong) {
  for (const char* form : {"pytorch", "half_first", "half_of_a", "tanh_mul"}) {
    Spec s;
    s.form = form;
    s.half = 0.6;
    ExpectUnchanged(s, "0.6 instead of 0.5");
  }
  Spec s;
  s.form = "tanh_pow";
  s.coef = 0.045;
  ExpectUnchanged(s, "0.045 instead of 0.044715");
  s.coef = 0.044715 * (1 + 1e-5);  // beyond the 1e-6 relative tolerance
  ExpectUnchanged(s, "0.044715 off by 1e-5");
}

TEST(FuseGeluPass, NoFuseWhenTheScaledValueIsNotX) {
  // Erf(x / sqrt 2) but multiplied by another value z: z * 0.5 * (1 + erf(x / sqrt 2)) is no GELU.
  auto g = std::make_unique<Graph>();
  g->opset_imports[""] = 15;
  Value* x = g->AddValue("x");
  Value* z = g->AddValue("z");
  for (Value* v : {x, z}) {
    v->dtype = DataType::kFloat32;
    v->shape = Shape::Static({4});
    g->inputs.push_back(v);
  }
  Value* a = Emit(*g, "Add", {Emit(*g, "Erf", {Emit(*g, "Div", {x, Const(*g, 1.4142135, true)})}), Const(*g, 1, true)});
  g->outputs.push_back(Emit(*g, "Mul", {Emit(*g, "Mul", {z, a}), Const(*g, 0.5, true)}));
  InferShapes(*g);
  EXPECT_FALSE(FuseGeluPass().Run(*g));
  EXPECT_EQ(g->nodes().size(), 8u);
}

// ---- GeluGrad ----

double GeluDerivative(double x, bool tanh_form) {
  if (tanh_form) {
    const double k = std::sqrt(2 / M_PI), a = 0.044715, t = std::tanh(k * (x + a * x * x * x));
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * a * x * x);
  }
  return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
}

std::unique_ptr<Graph> GeluGradGraph(DataType t, DataType xt, const std::string& approx, std::vector<int64_t> dims) {
  auto g = std::make_unique<Graph>();
  g->opset_imports[""] = 17;
  Value* dy = g->AddValue("dy");
  Value* x = g->AddValue("x");
  dy->dtype = t;
  x->dtype = xt;
  dy->shape = x->shape = Shape::Static(dims);
  g->inputs = {dy, x};
  Value* dx = g->AddValue("dx");
  Node* n = g->AddNode("GeluGrad", {dy, x}, {dx}, "gelu_grad");
  n->domain = kInternalDomain;
  n->opset = 1;
  n->attrs["approximate"] = Attribute::String(approx);
  g->outputs.push_back(dx);
  return g;
}

// Every float dtype against the float64 formula; halves at their rounding (fp32 math inside, one rounding), and
// a size that is not a multiple of the kernel's tile or block (a tail in both).
TEST(GeluGrad, KernelMatchesTheFormulaInEveryFloatType) {
  struct Case {
    DataType t;
    double rtol, atol;
  };
  for (Case c : {Case{DataType::kFloat64, 1e-12, 1e-13}, Case{DataType::kFloat32, 2e-6, 1e-6},
                 Case{DataType::kFloat16, 2e-3, 1e-3}, Case{DataType::kBFloat16, 1.6e-2, 8e-3}})
    for (const char* approx : {"none", "tanh"}) {
      SCOPED_TRACE(DataTypeName(c.t) + " " + approx);
      const std::vector<int64_t> dims = {3, 40001};
      auto g = GeluGradGraph(c.t, c.t, approx, dims);
      InferShapes(*g, true);
      Tensor dy = test::RandomTensor(c.t, dims, -2, 2), x = test::RandomTensor(c.t, dims, -5, 5);
      Tensor dx = Executor(*g).Run({{"dy", dy}, {"x", x}})[0];
      ASSERT_EQ(dx.dtype(), c.t);
      Tensor want(DataType::kFloat64, dims), got(DataType::kFloat64, dims);
      for (int64_t i = 0; i < dx.numel(); ++i) {
        want.SetDouble(i, dy.GetDouble(i) * GeluDerivative(x.GetDouble(i), std::string(approx) == "tanh"));
        got.SetDouble(i, dx.GetDouble(i));
      }
      test::ExpectClose(got, want, c.rtol, c.atol);
    }
}

TEST(GeluGrad, ErrorsNameTheNode) {
  // dY and X of different dtypes.
  auto g = GeluGradGraph(DataType::kFloat32, DataType::kFloat16, "none", {4});
  try {
    InferShapes(*g, true);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gelu_grad"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("dtype"), std::string::npos) << e.what();
  }
  // An unknown approximation.
  auto h = GeluGradGraph(DataType::kFloat32, DataType::kFloat32, "cubic", {4});
  try {
    InferShapes(*h, true);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gelu_grad"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cubic"), std::string::npos) << e.what();
  }
}

// The Gelu rule emits the one fused GeluGrad (no Erf/Exp/Tanh in the backward), and it is right: central
// differences in float64 for both approximations.
TEST(GradientCheck, GeluThroughGeluGrad) {
  for (const char* approx : {"none", "tanh"}) {
    SCOPED_TRACE(approx);
    test::CheckGradients(
        {{2, 9}}, {2, 9},
        [=](Graph& g, const std::vector<Value*>& p) {
          return Emit(g, "Gelu", {p[0]}, {{"approximate", Attribute::String(approx)}});
        },
        20, -3, 3);
    auto g = test::Build(
        {test::RandomTensor(DataType::kFloat64, {5})},
        [=](Graph& g, const std::vector<Value*>& p) {
          return Emit(g, "Gelu", {p[0]}, {{"approximate", Attribute::String(approx)}});
        },
        test::RandomTensor(DataType::kFloat64, {5}), 20);
    ASSERT_TRUE(AutodiffPass({"loss", "^(r|k_.*)$"}).Run(*g));
    int gelu_grad = 0, other = 0;
    for (const auto& n : g->nodes()) {
      if (n->op_type == "GeluGrad" && n->domain == kInternalDomain) {
        ++gelu_grad;
        EXPECT_EQ(n->attr_string("approximate", "?"), approx);
      }
      if (n->op_type == "Erf" || n->op_type == "Exp" || n->op_type == "Tanh") ++other;
    }
    EXPECT_EQ(gelu_grad, 1);
    EXPECT_EQ(other, 0);
  }
}

}  // namespace
}  // namespace ot
