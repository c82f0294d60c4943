// GradientCheck.<Op> for graph/grad/activation_grad.cc: activations, variadic Sum/Mean and ReduceMax/ReduceMin,
// the autodiff pass's gradients against central finite differences in float64 (tests/passes/grad_check.h).
// Random inputs stay away from the kinks (a value within 1e-6 of one has probability ~1e-6).
#include <gtest/gtest.h>

#include <string>

#include "executor/executor.h"
#include "graph/error.h"
#include "passes/autodiff.h"
#include "tests/passes/grad_check.h"
#include "tests/test_util.h"

namespace ot {
namespace {

using test::Attrs;
using test::CheckGradients;
using test::Emit;

Value* Ints(Graph& g, const std::vector<int64_t>& v) {
  return g.AddInitializer(g.UniqueName("k_ints"), Tensor::FromInt64(v, {static_cast<int64_t>(v.size())}));
}

Value* Double(Graph& g, double v) {
  Tensor t(DataType::kFloat64, {});
  t.SetDouble(0, v);
  return g.AddInitializer(g.UniqueName("k_d"), std::move(t));
}

// One-input op, output of the input's shape.
void CheckUnary(const std::string& op, Attrs attrs = {}, double lo = -1, double hi = 1, int opset = 17) {
  SCOPED_TRACE(op);
  CheckGradients(
      {{3, 4}}, {3, 4}, [&](Graph& g, const std::vector<Value*>& p) { return Emit(g, op, {p[0]}, attrs); }, opset, lo,
      hi);
}

TEST(GradientCheck, Abs) { CheckUnary("Abs"); }
TEST(GradientCheck, LeakyRelu) {
  CheckUnary("LeakyRelu");
  CheckUnary("LeakyRelu", {{"alpha", Attribute::Float(0.3f)}});
}
TEST(GradientCheck, Elu) { CheckUnary("Elu", {{"alpha", Attribute::Float(0.7f)}}, -2, 2); }
TEST(GradientCheck, Selu) { CheckUnary("Selu", {}, -2, 2); }
TEST(GradientCheck, Celu) { CheckUnary("Celu", {{"alpha", Attribute::Float(1.5f)}}, -2, 2); }
TEST(GradientCheck, Softplus) { CheckUnary("Softplus", {}, -3, 3); }
TEST(GradientCheck, Softsign) { CheckUnary("Softsign", {}, -3, 3); }
// Both sides of the linear region (0 < alpha x + beta < 1 for -2.5 < x < 2.5 with the defaults).
TEST(GradientCheck, HardSigmoid) {
  CheckUnary("HardSigmoid", {}, -4, 4);
  CheckUnary("HardSigmoid", {{"alpha", Attribute::Float(1.f / 6)}, {"beta", Attribute::Float(0.5f)}}, -5, 5);
}
TEST(GradientCheck, HardSwish) { CheckUnary("HardSwish", {}, -5, 5); }
TEST(GradientCheck, Reciprocal) { CheckUnary("Reciprocal", {}, 0.5, 2); }
TEST(GradientCheck, SinCos) {
  CheckUnary("Sin", {}, -3, 3);
  CheckUnary("Cos", {}, -3, 3);
}

TEST(GradientCheck, ThresholdedReluShrink) {
  CheckUnary("ThresholdedRelu", {{"alpha", Attribute::Float(0.2f)}});
  CheckUnary("Shrink", {{"lambd", Attribute::Float(0.3f)}, {"bias", Attribute::Float(0.1f)}});
}

TEST(GradientCheck, TrigAndMish) {
  CheckUnary("Tan", {}, -1.2, 1.2);
  CheckUnary("Sinh", {}, -2, 2);
  CheckUnary("Cosh", {}, -2, 2);
  CheckUnary("Asin", {}, -0.9, 0.9);
  CheckUnary("Acos", {}, -0.9, 0.9);
  CheckUnary("Atan", {}, -3, 3);
  CheckUnary("Asinh", {}, -3, 3);
  CheckUnary("Acosh", {}, 1.1, 3);
  CheckUnary("Atanh", {}, -0.9, 0.9);
  CheckUnary("Mish", {}, -3, 3, 18);
}

// Piecewise constant: zero gradient (and the finite differences agree away from the jumps).
TEST(GradientCheck, PiecewiseConstantZero) {
  for (const char* op : {"Sign", "Floor", "Ceil", "Round"}) CheckUnary(op, {}, -2.9, 2.9);
}

TEST(GradientCheck, InstanceNormalization) {
  CheckGradients({{2, 3, 4, 3}, {3}, {3}}, {2, 3, 4, 3}, [](Graph& g, const std::vector<Value*>& p) {
    return Emit(g, "InstanceNormalization", {p[0], p[1], p[2]}, {{"epsilon", Attribute::Float(1e-3f)}});
  });
  CheckGradients(
      {{2, 2, 5}, {2}, {2}}, {2, 2, 5},
      [](Graph& g, const std::vector<Value*>& p) {
        return Emit(g, "InstanceNormalization", {p[0], p[1], p[2]});
      },
      18);
}

TEST(GradientCheck, MeanVarianceNormalization) {
  CheckGradients({{2, 3, 2, 3}}, {2, 3, 2, 3},
                 [](Graph& g, const std::vector<Value*>& p) { return Emit(g, "MeanVarianceNormalization", {p[0]}); });
  CheckGradients(
      {{3, 4, 2}}, {3, 4, 2},
      [](Graph& g, const std::vector<Value*>& p) {
        return Emit(g, "MeanVarianceNormalization", {p[0]}, {{"axes", Attribute::Ints({-1, 1})}});
      },
      18);
}

TEST(GradientCheck, LpNormalization) {
  for (int p : {1, 2}) {
    SCOPED_TRACE(p);
    CheckGradients({{3, 4, 2}}, {3, 4, 2}, [p](Graph& g, const std::vector<Value*>& ps) {
      return Emit(g, "LpNormalization", {ps[0]}, {{"p", Attribute::Int(p)}, {"axis", Attribute::Int(1)}});
    });
    CheckGradients(
        {{3, 5}}, {3, 5},
        [p](Graph& g, const std::vector<Value*>& ps) {
          return Emit(g, "LpNormalization", {ps[0]}, {{"p", Attribute::Int(p)}});
        },
        18);
  }
}

TEST(GradientCheck, PRelu) {
  CheckGradients({{2, 3}, {3}}, {2, 3}, [](Graph& g, const std::vector<Value*>& p) {
    return Emit(g, "PRelu", {p[0], p[1]});
  });
}

// Clip's min/max as constant inputs (opset 11+), one of them omitted, and as attributes (opset 6-10; the
// harness's loss needs opset 8).
TEST(GradientCheck, Clip) {
  CheckGradients({{4, 5}}, {4, 5}, [](Graph& g, const std::vector<Value*>& p) {
    return Emit(g, "Clip", {p[0], Double(g, -0.4), Double(g, 0.5)});
  });
  CheckGradients({{4, 5}}, {4, 5}, [](Graph& g, const std::vector<Value*>& p) {
    return Emit(g, "Clip", {p[0], nullptr, Double(g, 0.3)});
  });
  CheckGradients(
      {{4, 5}}, {4, 5},
      [](Graph& g, const std::vector<Value*>& p) {
        return Emit(g, "Clip", {p[0]}, {{"min", Attribute::Float(-0.25f)}, {"max", Attribute::Float(0.6f)}});
      },
      8);
}

// Broadcasting inputs: each gradient is reduced to its input's shape.
TEST(GradientCheck, SumMean) {
  for (const char* op : {"Sum", "Mean"}) {
    SCOPED_TRACE(op);
    CheckGradients({{2, 3}, {3}, {1}, {2, 1}}, {2, 3}, [op](Graph& g, const std::vector<Value*>& p) {
      return Emit(g, op, {p[0], p[1], p[2], p[3]});
    });
  }
  CheckGradients({{2, 3}}, {2, 3}, [](Graph& g, const std::vector<Value*>& p) { return Emit(g, "Mean", {p[0]}); });
}

TEST(GradientCheck, ReduceMaxMin) {
  for (const char* op : {"ReduceMax", "ReduceMin"}) {
    SCOPED_TRACE(op);
    // opset 13: axes attribute.
    CheckGradients(
        {{3, 4, 5}}, {3, 1, 5},
        [op](Graph& g, const std::vector<Value*>& p) {
          return Emit(g, op, {p[0]}, {{"axes", Attribute::Ints({-2})}});
        },
        13);
    CheckGradients(
        {{3, 4}}, {},
        [op](Graph& g, const std::vector<Value*>& p) {
          return Emit(g, op, {p[0]}, {{"keepdims", Attribute::Int(0)}});
        },
        13);
    // opset 18: axes input.
    CheckGradients(
        {{3, 4, 5}}, {4},
        [op](Graph& g, const std::vector<Value*>& p) {
          return Emit(g, op, {p[0], Ints(g, {0, 2})}, {{"keepdims", Attribute::Int(0)}});
        },
        18);
    // noop_with_empty_axes: Y = X.
    CheckGradients(
        {{2, 3}}, {2, 3},
        [op](Graph& g, const std::vector<Value*>& p) {
          return Emit(g, op, {p[0]}, {{"noop_with_empty_axes", Attribute::Int(1)}});
        },
        18);
  }
}

TEST(GradientCheck, ReduceSmooth) {
  for (const char* op : {"ReduceSumSquare", "ReduceL1", "ReduceL2", "ReduceLogSumExp", "ReduceLogSum"}) {
    SCOPED_TRACE(op);
    const bool positive = std::string(op) == "ReduceLogSum";
    CheckGradients(
        {{3, 4, 2}}, {3, 1, 2},
        [op](Graph& g, const std::vector<Value*>& p) {
          return Emit(g, op, {p[0]}, {{"axes", Attribute::Ints({1})}});
        },
        13, positive ? 0.5 : -1, positive ? 2 : 1);
    CheckGradients(
        {{3, 4, 2}}, {4},
        [op](Graph& g, const std::vector<Value*>& p) {
          return Emit(g, op, {p[0], Ints(g, {0, -1})}, {{"keepdims", Attribute::Int(0)}});
        },
        18, positive ? 0.5 : -1, positive ? 2 : 1);
  }
}

TEST(GradientCheck, ReduceProd) {
  CheckGradients(
      {{3, 4, 2}}, {3, 1, 2},
      [](Graph& g, const std::vector<Value*>& p) {
        return Emit(g, "ReduceProd", {p[0]}, {{"axes", Attribute::Ints({1})}});
      },
      13, 0.5, 1.5);
  CheckGradients(
      {{3, 4}}, {4},
      [](Graph& g, const std::vector<Value*>& p) {
        return Emit(g, "ReduceProd", {p[0], Ints(g, {0})}, {{"keepdims", Attribute::Int(0)}});
      },
      18);
}

// ReduceProd with zeros in X: the product of the others, exactly (ReduceProd is linear in each element, so the
// central differences agree there too).
TEST(GradientCheck, ReduceProdWithZeros) {
  Tensor x(DataType::kFloat64, {3, 3});
  const double v[] = {2, 0, 3, 0, 5, 0, -1, 4, 0.5};  // rows: one zero, two zeros, none
  for (int i = 0; i < 9; ++i) x.SetDouble(i, v[i]);
  Tensor r = test::RandomTensor(DataType::kFloat64, {3});
  auto body = [](Graph& g, const std::vector<Value*>& p) {
    return Emit(g, "ReduceProd", {p[0]}, {{"axes", Attribute::Ints({1})}, {"keepdims", Attribute::Int(0)}});
  };
  auto g = test::Build({x}, body, r, 13);
  AutodiffPass pass({"loss", "^r$"});
  ASSERT_TRUE(pass.Run(*g));
  Executor ex(*g);
  auto outs = ex.Run({});
  const double r0 = r.GetDouble(0), r2 = r.GetDouble(2);
  const std::vector<double> want = {0, 6 * r0, 0, 0, 0, 0, 2 * r2, -0.5 * r2, -4 * r2};
  for (int i = 0; i < 9; ++i) EXPECT_NEAR(outs[1].GetDouble(i), want[i], 1e-14) << i;
  const double eps = 1e-6;
  for (int i = 0; i < 9; ++i) {
    std::vector<Tensor> plus{x.Clone()}, minus{x.Clone()};
    plus[0].SetDouble(i, v[i] + eps);
    minus[0].SetDouble(i, v[i] - eps);
    EXPECT_NEAR((test::Loss(plus, body, r, 13) - test::Loss(minus, body, r, 13)) / (2 * eps), want[i], 1e-8) << i;
  }
}

// Ties split dY evenly (torch.amax). With two tied elements that is also the central difference: moving one up
// by eps raises the max by eps, moving it down leaves the max where the other one is.
TEST(GradientCheck, ReduceMaxTiesSplitEvenly) {
  Tensor x = Tensor::FromFloat({1, 3, 3, 0, 2, 0.5f, 2, 2}, {2, 4}).Clone();
  Tensor x64(DataType::kFloat64, {2, 4});
  for (int i = 0; i < 8; ++i) x64.SetDouble(i, x.GetDouble(i));
  Tensor r = test::RandomTensor(DataType::kFloat64, {2});
  auto body = [](Graph& g, const std::vector<Value*>& p) {
    return Emit(g, "ReduceMax", {p[0]}, {{"axes", Attribute::Ints({1})}, {"keepdims", Attribute::Int(0)}});
  };
  auto g = test::Build({x64}, body, r, 13);
  AutodiffPass pass({"loss", "^r$"});
  ASSERT_TRUE(pass.Run(*g));
  Executor ex(*g);
  auto outs = ex.Run({});
  ASSERT_EQ(outs.size(), 2u);
  const double r0 = r.GetDouble(0), r1 = r.GetDouble(1);
  const std::vector<double> want = {0, r0 / 2, r0 / 2, 0, r1 / 3, 0, r1 / 3, r1 / 3};
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(outs[1].GetDouble(i), want[i], 1e-15) << i;
  // The two-way tie agrees with central differences.
  const double eps = 1e-6;
  std::vector<Tensor> plus{x64.Clone()}, minus{x64.Clone()};
  plus[0].SetDouble(1, 3 + eps);
  minus[0].SetDouble(1, 3 - eps);
  EXPECT_NEAR((test::Loss(plus, body, r, 13) - test::Loss(minus, body, r, 13)) / (2 * eps), r0 / 2, 1e-8);
}

// A ReduceMax whose axes come from a computed (non-constant) value has no rule: the error names the node.
// Axes computed in the graph (Identity of a constant: no rule can read it as one), with and without keepdims.
TEST(GradientCheck, ReduceMaxComputedAxes) {
  for (int keep = 0; keep < 2; ++keep)
    CheckGradients(
        {{2, 3}}, keep ? std::vector<int64_t>{2, 1} : std::vector<int64_t>{2},
        [keep](Graph& g, const std::vector<Value*>& p) {
          Value* axes = Emit(g, "Identity", {Ints(g, {1})});
          return Emit(g, "ReduceMax", {p[0], axes}, {{"keepdims", Attribute::Int(keep)}});
        },
        18);
}

}  // namespace
}  // namespace ot
