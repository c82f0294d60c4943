// GradientCheck.<Op> for the norm/loss family (graph/grad/norm_grad.cc): the autodiff pass's gradients against
// central finite differences in float64. Like tests/passes/autodiff_test.cc's harness, with constants that are
// not parameters: float initializers named "k_..." are frozen, integer ones (labels) never are parameters.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "executor/executor.h"
#include "graph/error.h"
#include "passes/autodiff.h"
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

Tensor Doubles(const std::vector<double>& v, std::vector<int64_t> dims) {
  Tensor t = test::RandomTensor(DataType::kFloat64, dims);
  for (size_t i = 0; i < v.size(); ++i) t.SetDouble(static_cast<int64_t>(i), v[i]);
  return t;
}

Attribute I(int64_t v) { return Attribute::Int(v); }
Attribute S(const std::string& s) { return Attribute::String(s); }

TEST(GradientCheck, Softmax) {
  for (int64_t axis : {-1, 1, 0})
    CheckGradients({{2, 3, 4}}, {2, 3, 4}, [=](Graph& g, const std::vector<Value*>& p) {
      return Emit(g, "Softmax", {p[0]}, {{"axis", I(axis)}});
    });
}

TEST(GradientCheck, LogSoftmax) {
  for (int64_t axis : {-1, 1})
    CheckGradients({{2, 3, 4}}, {2, 3, 4}, [=](Graph& g, const std::vector<Value*>& p) {
      return Emit(g, "LogSoftmax", {p[0]}, {{"axis", I(axis)}});
    });
}

// Opset 11: the input is coerced to 2-D at `axis` (the normalization runs over all trailing dims).
TEST(GradientCheck, SoftmaxLegacyCoerced2D) {
  for (const char* op : {"Softmax", "LogSoftmax"})
    CheckGradients(
        {{2, 3, 4}}, {2, 3, 4},
        [=](Graph& g, const std::vector<Value*>& p) {
          return Emit(g, op, {p[0]}, {{"axis", I(1)}});
        },
        11);
}

Value* Labels(Graph& g, std::vector<int64_t> v, std::vector<int64_t> dims) {
  return g.AddInitializer(g.UniqueName("labels"), Tensor::FromInt64(v, dims));
}
Value* Weights(Graph& g) { return g.AddInitializer(g.UniqueName("k_w"), Doubles({0.5, 2.0, 1.5}, {3})); }

// Scores (N=2, C=3, D=2), labels (2, 2) with one ignored (-1) element where ignore_index is set. The labels are the
// leading [N, D] of a larger table, sliced by the scores' own shape (as a model sliced by its input's length), so
// the symbolic check's second size takes more of them.
void CheckLoss(const std::string& op, const std::string& red, bool weights, bool ignore) {
  SCOPED_TRACE(op + " " + red + (weights ? " weights" : "") + (ignore ? " ignore_index" : ""));
  std::vector<int64_t> out = red == "none" ? std::vector<int64_t>{2, 2} : std::vector<int64_t>{};
  CheckGradients({{2, 3, 2}}, out, [=](Graph& g, const std::vector<Value*>& p) {
    Value* table = Labels(g, {2, ignore ? -1 : 0, 1, 1, 2, 0, 0, 2, 2, 1, 0, 1}, {4, 3});
    Value* nd = Emit(g, "Gather", {Emit(g, "Shape", {p[0]}), Labels(g, {0, 2}, {2})});
    Value* labels = Emit(g, "Slice", {table, Labels(g, {0, 0}, {2}), nd});
    std::vector<Value*> ins = {p[0], labels};
    if (weights) ins.push_back(Weights(g));
    std::map<std::string, Attribute> a = {{"reduction", S(red)}};
    if (ignore) a["ignore_index"] = I(-1);
    return Emit(g, op, ins, a);
  });
}

TEST(GradientCheck, SoftmaxCrossEntropyLoss) {
  for (const char* red : {"none", "sum", "mean"})
    for (bool w : {false, true})
      for (bool ig : {false, true}) CheckLoss("SoftmaxCrossEntropyLoss", red, w, ig);
}

TEST(GradientCheck, NegativeLogLikelihoodLoss) {
  for (const char* red : {"none", "sum", "mean"})
    for (bool w : {false, true})
      for (bool ig : {false, true}) CheckLoss("NegativeLogLikelihoodLoss", red, w, ig);
}

// N x C scores, the log_prob output used as well: both gradients add up.
TEST(GradientCheck, SoftmaxCrossEntropyLossWithLogProb) {
  CheckGradients({{3, 4}}, {3, 4}, [](Graph& g, const std::vector<Value*>& p) {
    auto o = EmitN(g, "SoftmaxCrossEntropyLoss", {p[0], Labels(g, {3, 0, 1}, {3})}, 2, {{"reduction", S("mean")}});
    return Emit(g, "Add", {o[1], o[0]});
  });
}

TEST(GradientCheck, LayerNormalization) {
  // One trailing axis, then two.
  CheckGradients({{3, 4}, {4}, {4}}, {3, 4}, [](Graph& g, const std::vector<Value*>& p) {
    return Emit(g, "LayerNormalization", {p[0], p[1], p[2]}, {{"axis", I(-1)}, {"epsilon", Attribute::Float(1e-3f)}});
  });
  CheckGradients({{2, 3, 4}, {3, 4}, {3, 4}}, {2, 3, 4}, [](Graph& g, const std::vector<Value*>& p) {
    return Emit(g, "LayerNormalization", {p[0], p[1], p[2]}, {{"axis", I(1)}});
  });
  // Scale and B broadcast over the normalized dims (2, 3): Scale (3, 1), B (3).
  CheckGradients({{2, 2, 3, 4}, {3, 1}, {4}}, {2, 2, 3, 4}, [](Graph& g, const std::vector<Value*>& p) {
    return Emit(g, "LayerNormalization", {p[0], p[1], p[2]}, {{"axis", I(-2)}});
  });
  // No bias.
  CheckGradients({{2, 5}, {5}}, {2, 5}, [](Graph& g, const std::vector<Value*>& p) {
    return Emit(g, "LayerNormalization", {p[0], p[1]});
  });
}

// Opset 15, training_mode = 1: gradients through the batch statistics (running stats are constants).
TEST(GradientCheck, BatchNormalizationTraining) {
  CheckGradients(
      {{2, 3, 2, 2}, {3}, {3}}, {2, 3, 2, 2},
      [](Graph& g, const std::vector<Value*>& p) {
        Value* m = g.AddInitializer(g.UniqueName("k_mean"), Doubles({0.1, -0.2, 0.3}, {3}));
        Value* v = g.AddInitializer(g.UniqueName("k_var"), Doubles({1.0, 0.5, 2.0}, {3}));
        return EmitN(g, "BatchNormalization", {p[0], p[1], p[2], m, v}, 3,
                     {{"training_mode", I(1)}, {"epsilon", Attribute::Float(1e-3f)}})[0];
      },
      15);
}

TEST(GradientCheck, BatchNormalizationInference) {
  CheckGradients(
      {{2, 3, 2}, {3}, {3}}, {2, 3, 2},
      [](Graph& g, const std::vector<Value*>& p) {
        Value* m = g.AddInitializer(g.UniqueName("k_mean"), Doubles({0.1, -0.2, 0.3}, {3}));
        Value* v = g.AddInitializer(g.UniqueName("k_var"), Doubles({1.0, 0.5, 2.0}, {3}));
        return Emit(g, "BatchNormalization", {p[0], p[1], p[2], m, v});
      },
      15);
}

TEST(GradientCheck, Erf) {
  CheckGradients({{6}}, {6}, [](Graph& g, const std::vector<Value*>& p) { return Emit(g, "Erf", {p[0]}); });
}

TEST(GradientCheck, Pow) {
  CheckGradients(
      {{2, 3}, {3}}, {2, 3},
      [](Graph& g, const std::vector<Value*>& p) {
        return Emit(g, "Pow", {p[0], p[1]});
      },
      17, 0.5, 2.0);
  // Integer exponent (a constant): the base only.
  CheckGradients({{5}}, {5}, [](Graph& g, const std::vector<Value*>& p) {
    return Emit(g, "Pow", {p[0], Labels(g, {3}, {})});
  });
}

TEST(GradientCheck, Gelu) {
  for (const char* approx : {"none", "tanh"})
    CheckGradients(
        {{7}}, {7},
        [=](Graph& g, const std::vector<Value*>& p) {
          return Emit(g, "Gelu", {p[0]}, {{"approximate", S(approx)}});
        },
        20, -3, 3);
}

// The float32 kernels agree with the float64 ones (LayerNorm, BatchNorm in training, SoftmaxCrossEntropyLoss).
TEST(NormGrad, Float32MatchesFloat64) {
  auto grads = [](DataType t, const std::vector<Tensor>& src) {
    Graph g;
    g.opset_imports[""] = 17;
    std::vector<Value*> p;
    for (size_t i = 0; i < src.size(); ++i) {
      Tensor c = test::RandomTensor(t, src[i].dims());
      for (int64_t j = 0; j < c.numel(); ++j) c.SetDouble(j, src[i].GetDouble(j));
      p.push_back(g.AddInitializer("p" + std::to_string(i), std::move(c)));
    }
    Value* ln = Emit(g, "LayerNormalization", {p[0], p[1], p[2]}, {{"axis", I(1)}});
    Value* bn = Emit(g, "BatchNormalization", {ln, p[3], p[4], p[5], p[6]}, {{"training_mode", I(1)}});
    Value* labels = g.AddInitializer("labels", Tensor::FromInt64({0, 2, 1, 3}, {4}));
    Value* loss = g.AddValue("loss");
    g.AddNode("SoftmaxCrossEntropyLoss", {bn, labels}, {loss}, "sce");
    g.outputs.push_back(loss);
    AutodiffPass pass({"loss", "^p[56]$"});
    pass.Run(g);
    Executor ex(g);
    return ex.Run({});
  };
  std::vector<Tensor> src = {
      test::RandomTensor(DataType::kFloat64, {4, 5}),       test::RandomTensor(DataType::kFloat64, {5}),
      test::RandomTensor(DataType::kFloat64, {5}),          test::RandomTensor(DataType::kFloat64, {5}),
      test::RandomTensor(DataType::kFloat64, {5}),          test::RandomTensor(DataType::kFloat64, {5}),
      test::RandomTensor(DataType::kFloat64, {5}, 0.5, 1.5)};
  std::vector<Tensor> a = grads(DataType::kFloat32, src), b = grads(DataType::kFloat64, src);
  ASSERT_EQ(a.size(), 6u);
  ASSERT_EQ(b.size(), 6u);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].dtype(), DataType::kFloat32);
    for (int64_t j = 0; j < a[i].numel(); ++j)
      EXPECT_NEAR(a[i].GetDouble(j), b[i].GetDouble(j), 1e-4 + 1e-4 * std::fabs(b[i].GetDouble(j)))
          << i << "[" << j << "]";
  }
}

// float16 and bfloat16 (computed in float): Softmax -> LayerNorm -> SoftmaxCrossEntropyLoss against float64.
TEST(NormGrad, HalfPrecisionMatchesFloat64) {
  auto grads = [](DataType t, const std::vector<Tensor>& src) {
    Graph g;
    g.opset_imports[""] = 17;
    std::vector<Value*> p;
    for (size_t i = 0; i < src.size(); ++i) {
      Tensor c = test::RandomTensor(t, src[i].dims());
      for (int64_t j = 0; j < c.numel(); ++j) c.SetDouble(j, src[i].GetDouble(j));
      p.push_back(g.AddInitializer("p" + std::to_string(i), std::move(c)));
    }
    Value* sm = Emit(g, "Softmax", {p[0]}, {{"axis", I(1)}});
    Value* ln = Emit(g, "LayerNormalization", {sm, p[1], p[2]});
    Value* labels = g.AddInitializer("labels", Tensor::FromInt64({0, 2, 1, 3}, {4}));
    Value* loss = g.AddValue("loss");
    g.AddNode("SoftmaxCrossEntropyLoss", {ln, labels}, {loss}, "sce");
    g.outputs.push_back(loss);
    AutodiffPass pass({"loss", ""});
    pass.Run(g);
    Executor ex(g);
    return ex.Run({});
  };
  std::vector<Tensor> src = {test::RandomTensor(DataType::kFloat64, {4, 5}, -2, 2),
                             test::RandomTensor(DataType::kFloat64, {5}), test::RandomTensor(DataType::kFloat64, {5})};
  // Round the inputs to float16 first so that both runs see the same values.
  for (auto& t : src)
    for (int64_t j = 0; j < t.numel(); ++j) {
      Tensor h = test::RandomTensor(DataType::kFloat16, {1});
      h.SetDouble(0, t.GetDouble(j));
      t.SetDouble(j, h.GetDouble(0));
    }
  std::vector<Tensor> b = grads(DataType::kFloat64, src);
  for (DataType t : {DataType::kFloat16, DataType::kBFloat16}) {
    std::vector<Tensor> a = grads(t, src);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].dtype(), t);
      for (int64_t j = 0; j < a[i].numel(); ++j)
        EXPECT_NEAR(a[i].GetDouble(j), b[i].GetDouble(j), 3e-2 + 3e-2 * std::fabs(b[i].GetDouble(j)))
            << DataTypeName(t) << " " << i << "[" << j << "]";
    }
  }
}

TEST(GradientCheck, BatchNormalizationOpset9Inference) {
  CheckGradients(
      {{2, 3}, {3}, {3}}, {2, 3},
      [](Graph& g, const std::vector<Value*>& p) {
        Value* m = g.AddInitializer(g.UniqueName("k_mean"), Doubles({0.1, -0.2, 0.3}, {3}));
        Value* v = g.AddInitializer(g.UniqueName("k_var"), Doubles({1.0, 0.5, 2.0}, {3}));
        return Emit(g, "BatchNormalization", {p[0], p[1], p[2], m, v});
      },
      9);
}

}  // namespace
}  // namespace ot
