// GradientCheck.<Op>: the autodiff pass's gradients against central finite differences in float64, on fresh
// random inputs. Each check builds  loss = ReduceSum(op(params...) * R)  with a random R (so every output
// element matters), differentiates it, and compares every gradient element.
#include "passes/autodiff.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "executor/executor.h"
#include "graph/error.h"
#include "tests/passes/grad_check.h"
#include "tests/test_util.h"

namespace ot {
namespace {

using test::Attrs;
using test::Build;
using test::BuildFn;
using test::CheckGradients;
using test::Emit;
using test::EmitN;
using test::Loss;

BuildFn Unary(const std::string& op) {
  return [op](Graph& g, const std::vector<Value*>& p) { return Emit(g, op, {p[0]}); };
}
BuildFn Binary(const std::string& op) {
  return [op](Graph& g, const std::vector<Value*>& p) { return Emit(g, op, {p[0], p[1]}); };
}

TEST(GradientCheck, Add) { CheckGradients({{2, 3}, {3}}, {2, 3}, Binary("Add")); }
TEST(GradientCheck, Sub) { CheckGradients({{2, 1}, {2, 3}}, {2, 3}, Binary("Sub")); }
TEST(GradientCheck, Mul) { CheckGradients({{2, 3}, {1, 3}}, {2, 3}, Binary("Mul")); }
TEST(GradientCheck, Div) { CheckGradients({{2, 3}, {3}}, {2, 3}, Binary("Div"), 17, 0.5, 2.0); }
TEST(GradientCheck, Neg) { CheckGradients({{4}}, {4}, Unary("Neg")); }
TEST(GradientCheck, Identity) { CheckGradients({{4}}, {4}, Unary("Identity")); }
TEST(GradientCheck, Relu) { CheckGradients({{3, 4}}, {3, 4}, Unary("Relu")); }
TEST(GradientCheck, Sigmoid) { CheckGradients({{3, 4}}, {3, 4}, Unary("Sigmoid")); }
TEST(GradientCheck, Tanh) { CheckGradients({{3, 4}}, {3, 4}, Unary("Tanh")); }
TEST(GradientCheck, Exp) { CheckGradients({{5}}, {5}, Unary("Exp")); }
TEST(GradientCheck, Log) { CheckGradients({{5}}, {5}, Unary("Log"), 17, 0.5, 2.0); }
TEST(GradientCheck, Sqrt) { CheckGradients({{5}}, {5}, Unary("Sqrt"), 17, 0.5, 2.0); }
TEST(GradientCheck, MatMul) { CheckGradients({{3, 4}, {4, 2}}, {3, 2}, Binary("MatMul")); }
// B a [K, N] weight broadcast over A's batch dims: dB is one GEMM of A's and dY's flattened rows.
TEST(GradientCheck, MatMulBatchedBroadcast) {
  CheckGradients({{2, 3, 4}, {4, 2}}, {2, 3, 2}, Binary("MatMul"));
  CheckGradients({{2, 2, 3, 4}, {4, 2}}, {2, 2, 3, 2}, Binary("MatMul"));
}
// 1-D operands (numpy's matmul: a unit axis added, then removed from the result), at opsets 13 and 11.
TEST(GradientCheck, MatMulVectors) {
  for (int opset : {13, 11}) {
    CheckGradients({{4}, {4, 3}}, {3}, Binary("MatMul"), opset);
    CheckGradients({{2, 3, 4}, {4}}, {2, 3}, Binary("MatMul"), opset);
    CheckGradients({{4}, {2, 4, 3}}, {2, 3}, Binary("MatMul"), opset);
    CheckGradients({{4}, {4}}, {}, Binary("MatMul"), opset, -1, 1, {{5}, {5}});
  }
}

TEST(GradientCheck, Gemm) {
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      std::vector<int64_t> a = ta ? std::vector<int64_t>{4, 3} : std::vector<int64_t>{3, 4};
      std::vector<int64_t> b = tb ? std::vector<int64_t>{2, 4} : std::vector<int64_t>{4, 2};
      CheckGradients({a, b, {2}}, {3, 2}, [=](Graph& g, const std::vector<Value*>& p) {
        return Emit(g, "Gemm", {p[0], p[1], p[2]},
                    {{"transA", Attribute::Int(ta)},
                     {"transB", Attribute::Int(tb)},
                     {"alpha", Attribute::Float(0.5f)},
                     {"beta", Attribute::Float(2.0f)}});
      });
    }
}

TEST(GradientCheck, Transpose) {
  CheckGradients({{2, 3, 4}}, {4, 2, 3}, [](Graph& g, const std::vector<Value*>& p) {
    return Emit(g, "Transpose", {p[0]}, {{"perm", Attribute::Ints({2, 0, 1})}});
  });
}

TEST(GradientCheck, Reshape) {
  CheckGradients({{2, 6}}, {3, 4}, [](Graph& g, const std::vector<Value*>& p) {
    return Emit(g, "Reshape", {p[0], g.AddInitializer("shape", Tensor::FromInt64({3, 4}, {2}))});
  });
}

TEST(GradientCheck, Flatten) {
  for (int64_t axis : {1, 2, -1})
    CheckGradients({{2, 3, 4}}, axis == 1 ? std::vector<int64_t>{2, 12} : std::vector<int64_t>{6, 4},
                   [axis](Graph& g, const std::vector<Value*>& p) {
                     return Emit(g, "Flatten", {p[0]}, {{"axis", Attribute::Int(axis)}});
                   });
}

// Squeeze with axes as an input (opset 13) and as an attribute (opset 11).
TEST(GradientCheck, Squeeze) {
  CheckGradients({{2, 1, 3, 1}}, {2, 3, 1},
                 [](Graph& g, const std::vector<Value*>& p) {
                   return Emit(g, "Squeeze", {p[0], g.AddInitializer("axes", Tensor::FromInt64({1}, {1}))});
                 },
                 13, -1, 1, {{3, 1, 2, 1}});
  CheckGradients(
      {{2, 1, 3, 1}}, {2, 3},
      [](Graph& g, const std::vector<Value*>& p) {
        return Emit(g, "Squeeze", {p[0]}, {{"axes", Attribute::Ints({1, -1})}});
      },
      11);
}

// Unsqueeze with axes as an input (opset 13, a negative axis among them) and as an attribute (opset 11).
TEST(GradientCheck, Unsqueeze) {
  CheckGradients(
      {{2, 3}}, {2, 1, 3, 1},
      [](Graph& g, const std::vector<Value*>& p) {
        return Emit(g, "Unsqueeze", {p[0], g.AddInitializer("axes", Tensor::FromInt64({1, -1}, {2}))});
      },
      13);
  CheckGradients(
      {{2, 3}}, {1, 2, 3},
      [](Graph& g, const std::vector<Value*>& p) {
        return Emit(g, "Unsqueeze", {p[0]}, {{"axes", Attribute::Ints({0})}});
      },
      11);
}

TEST(GradientCheck, ReduceSumKeepAndDrop) {
  for (int keep = 0; keep < 2; ++keep)
    CheckGradients({{2, 3, 4}}, keep ? std::vector<int64_t>{2, 1, 4} : std::vector<int64_t>{2, 4},
                   [keep](Graph& g, const std::vector<Value*>& p) {
                     return Emit(g, "ReduceSum",
                                 {p[0], g.AddInitializer(g.UniqueName("axes"), Tensor::FromInt64({-2}, {1}))},
                                 {{"keepdims", Attribute::Int(keep)}});
                   });
}

TEST(GradientCheck, ReduceMeanAttributeAxes) {
  CheckGradients({{2, 3, 4}}, {3}, [](Graph& g, const std::vector<Value*>& p) {
    return Emit(g, "ReduceMean", {p[0]}, {{"axes", Attribute::Ints({0, 2})}, {"keepdims", Attribute::Int(0)}});
  });
}

// A value used twice: gradients are summed. y = x * x + x
TEST(GradientCheck, ValueUsedTwiceSumsGradients) {
  CheckGradients({{6}}, {6}, [](Graph& g, const std::vector<Value*>& p) {
    return Emit(g, "Add", {Emit(g, "Mul", {p[0], p[0]}), p[0]});
  });
}

// A two-layer MLP: Gemm -> Relu -> MatMul -> Add, every parameter checked.
TEST(GradientCheck, TwoLayerMlp) {
  CheckGradients({{5, 4}, {3, 4}, {3}, {3, 2}, {2}}, {5, 2}, [](Graph& g, const std::vector<Value*>& p) {
    Value* h = Emit(g, "Gemm", {p[0], p[1], p[2]}, {{"transB", Attribute::Int(1)}});
    return Emit(g, "Add", {Emit(g, "MatMul", {Emit(g, "Relu", {h}), p[3]}), p[4]});
  });
}

// Attention's scale 1/sqrt(head dim) as exporters write it, from Shape(q): a constant of the parameters. The
// gradient must not flow into it (before the fix, the Div's second input got a gradient -- a reduction of the whole
// activation to a scalar each step -- and Sqrt a gradient rule run for nothing).
BuildFn DivByShapeScale() {
  return [](Graph& g, const std::vector<Value*>& p) {
    Value* shape = Emit(g, "Shape", {p[0]});
    Tensor idx(DataType::kInt64, {});
    idx.SetDouble(0, -1);
    Value* d = Emit(g, "Gather", {shape, g.AddInitializer("k_idx", idx)});
    Value* f = Emit(g, "Cast", {d}, {{"to", Attribute::Int(static_cast<int64_t>(DataType::kFloat64))}});
    return Emit(g, "Div", {p[0], Emit(g, "Sqrt", {f})});
  };
}

TEST(GradientCheck, DivByAScaleComputedFromAShape) { CheckGradients({{3, 4}}, {3, 4}, DivByShapeScale()); }

TEST(Autodiff, NoGradientFlowsIntoValuesComputedFromShapes) {
  std::vector<Tensor> params = {test::RandomTensor(DataType::kFloat64, {3, 4})};
  auto g = Build(params, DivByShapeScale(), test::RandomTensor(DataType::kFloat64, {3, 4}), 17);
  AutodiffPass pass({"loss", "^(r|k_.*)$"});
  ASSERT_TRUE(pass.Run(*g));
  for (const auto& n : g->nodes()) {
    EXPECT_EQ(n->name.find("Sqrt/grad"), std::string::npos) << n->Describe();
    if (n->op_type == "ReduceToShape") ADD_FAILURE() << "a reduction to the divisor's shape: " << n->Describe();
  }
}

// loss = sum(r * r), r = (x w) reshaped to [batch,2,4]: the Reshape's target either from the exporter's chain
// Shape -> Gather -> Unsqueeze -> Concat (the batch stays named, so Mul's gradient needs no ReduceToShape) or from
// a graph input (unknown dims: ReduceToShape stays). Both give dL/dw = x^T (2 x w).
void CheckReshapedSquareGradient(bool target_from_shape_chain) {
  Graph g;
  g.opset_imports[""] = 17;
  Value* x = g.AddValue("x");
  x->dtype = DataType::kFloat64;
  x->shape = Shape({Dim::Symbol("batch"), Dim(8)});
  g.inputs.push_back(x);
  const Tensor w0 = test::RandomTensor(DataType::kFloat64, {8, 8});
  Value* w = g.AddInitializer("w", w0.Clone());
  Value* h = Emit(g, "MatMul", {x, w});
  Value* target;
  if (target_from_shape_chain) {
    Tensor zero(DataType::kInt64, {});
    Value* b = Emit(g, "Gather", {Emit(g, "Shape", {h}), g.AddInitializer("k_i", zero)});
    Value* b1 = Emit(g, "Unsqueeze", {b, g.AddInitializer("k_a", Tensor::FromInt64({0}, {1}))});
    target =
        Emit(g, "Concat", {b1, g.AddInitializer("k_t", Tensor::FromInt64({2, 4}, {2}))}, {{"axis", Attribute::Int(0)}});
  } else {
    target = g.AddValue("t");
    target->dtype = DataType::kInt64;
    target->shape = Shape({Dim(3)});
    g.inputs.push_back(target);
  }
  Value* r = Emit(g, "Reshape", {h, target});
  Value* loss = g.AddValue("loss");
  g.AddNode("ReduceSum", {Emit(g, "Mul", {r, r})}, {loss}, "sum")->attrs["keepdims"] = Attribute::Int(0);
  g.outputs.push_back(loss);
  AutodiffPass pass({"loss", "^k_.*$"});
  ASSERT_TRUE(pass.Run(g));
  ASSERT_EQ(pass.params().size(), 1u);
  int reductions = 0;
  for (const auto& n : g.nodes()) reductions += n->op_type == "ReduceToShape";
  if (target_from_shape_chain) {
    EXPECT_EQ(r->shape.ToString(), "[batch,2,4]");
    EXPECT_EQ(reductions, 0);
  } else {
    EXPECT_GT(reductions, 0);
  }
  const int64_t batch = 3;
  const Tensor xv = test::RandomTensor(DataType::kFloat64, {batch, 8});
  std::map<std::string, Tensor> feeds = {{"x", xv.Clone()}};
  if (!target_from_shape_chain) feeds["t"] = Tensor::FromInt64({batch, 2, 4}, {3});
  Executor ex(g);
  std::vector<Tensor> outs = ex.Run(feeds);
  ASSERT_EQ(outs.size(), 2u);
  const Tensor& dw = outs[1];
  ASSERT_EQ(dw.dims(), (std::vector<int64_t>{8, 8}));
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j) {
      double want = 0;
      for (int64_t n = 0; n < batch; ++n) {
        double hnj = 0;
        for (int k = 0; k < 8; ++k) hnj += xv.GetDouble(n * 8 + k) * w0.GetDouble(k * 8 + j);
        want += xv.GetDouble(n * 8 + i) * 2 * hnj;
      }
      EXPECT_NEAR(dw.GetDouble(i * 8 + j), want, 1e-12 + 1e-12 * std::fabs(want)) << i << "," << j;
    }
}

TEST(Autodiff, EqualNamedShapesNeedNoReduceToShape) { CheckReshapedSquareGradient(true); }
TEST(Autodiff, NoReduceToShapeElidedWhenTheTargetIsUnknown) { CheckReshapedSquareGradient(false); }

TEST(Autodiff, FrozenParametersGetNoGradient) {
  std::vector<Tensor> params = {test::RandomTensor(DataType::kFloat64, {3}),
                                test::RandomTensor(DataType::kFloat64, {3})};
  auto g = Build(params, Binary("Mul"), test::RandomTensor(DataType::kFloat64, {3}), 17);
  AutodiffPass pass({"loss", "^(p1|r)$"});
  pass.Run(*g);
  ASSERT_EQ(pass.params().size(), 1u);
  EXPECT_EQ(pass.params()[0]->name, "p0");
}

TEST(Autodiff, MissingRuleNamesTheOpAndNode) {
  std::vector<Tensor> params = {test::RandomTensor(DataType::kFloat64, {3})};
  auto g = Build(params, Unary("Hardmax"), test::RandomTensor(DataType::kFloat64, {3}), 17);
  AutodiffPass pass({"loss", ""});
  try {
    pass.Run(*g);
    FAIL() << "no error for an op without a gradient rule";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("Hardmax"), std::string::npos) << m;
    EXPECT_NE(m.find("no gradient rule"), std::string::npos) << m;
  }
}

TEST(Autodiff, NonScalarLossIsAnError) {
  Graph g;
  g.opset_imports[""] = 17;
  Value* p = g.AddInitializer("p", test::RandomTensor(DataType::kFloat32, {3}));
  Value* y = Emit(g, "Neg", {p});
  g.outputs.push_back(y);
  AutodiffPass pass({y->name, ""});
  EXPECT_THROW(pass.Run(g), Error);
}

}  // namespace
}  // namespace ot
