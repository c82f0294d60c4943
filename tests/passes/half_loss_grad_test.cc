// half_loss_grad: the softmax cross-entropy gradient that amp casts to half is written in half by LossGrad itself; the
// half gradient's bits are the Cast's (fresh random scores each run), the bias gradient (ReduceToShape, now summed from
// the half gradient) within half rounding of the float32 one. Negative twins: another reader of the float gradient,
// Casts to two half types, scores of rank 3, a graph-output gradient. In the step pipeline after amp.
#include "passes/half_loss_grad.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "executor/executor.h"
#include "graph/graph.h"
#include "graph/op_registry.h"
#include "graph/verifier.h"
#include "passes/step_graph.h"
#include "tests/passes/grad_check.h"
#include "tests/test_util.h"

namespace ot {
namespace {

using test::Emit;

struct Spec {
  int64_t b = 3, t = 5, c = 40;
  DataType half = DataType::kBFloat16;
  bool other_reader = false;  // a Neg also reads the float gradient
  bool mixed_casts = false;   // a second Cast to the other half type
  bool bias_sum = true;       // a ReduceToShape to [C] (the bias gradient)
  bool grad_output = false;   // the float gradient is a graph output
};

// dL (input "dl"), scores x [b*t, c] (input "x"), labels (input "t") -> LossGrad -> Reshape [b, t, c] -> Cast(half)
// -> Neg (output 0) and ReduceToShape(.., [c]) (output "bias").
std::unique_ptr<Graph> GradGraph(const Spec& s) {
  auto g = std::make_unique<Graph>();
  g->opset_imports[""] = 17;
  auto input = [&](const char* name, DataType t, std::vector<int64_t> dims) {
    Value* v = g->AddValue(name);
    v->dtype = t;
    v->shape = Shape::Static(dims);
    g->inputs.push_back(v);
    return v;
  };
  Value* dl = input("dl", DataType::kFloat32, {});
  Value* x = input("x", DataType::kFloat32, {s.b * s.t, s.c});
  Value* t = input("t", DataType::kInt64, {s.b * s.t});
  Value* d = Emit(*g, "LossGrad", {dl, x, t},
                  {{"softmax", Attribute::Int(1)},
                   {"reduction", Attribute::String("mean")},
                   {"ignore_index", Attribute::Int(-100)}});
  d->producer->domain = kInternalDomain;
  Value* shape = g->AddInitializer("shape", Tensor::FromInt64({s.b, s.t, s.c}, {3}));
  Value* r = Emit(*g, "Reshape", {d, shape});
  if (s.grad_output) g->outputs.push_back(r);
  // The half gradient's reader (the layer's GEMMs in a step; a Neg here, exact in any precision).
  g->outputs.push_back(
      Emit(*g, "Neg", {Emit(*g, "Cast", {r}, {{"to", Attribute::Int(static_cast<int64_t>(s.half))}})}));
  if (s.mixed_casts) {
    const DataType other = s.half == DataType::kBFloat16 ? DataType::kFloat16 : DataType::kBFloat16;
    g->outputs.push_back(Emit(*g, "Cast", {r}, {{"to", Attribute::Int(static_cast<int64_t>(other))}}));
  }
  if (s.bias_sum) {
    Value* to = g->AddInitializer("bias_shape", Tensor::FromInt64({s.c}, {1}));
    Value* sum = Emit(*g, "ReduceToShape", {r, to});
    sum->producer->domain = kInternalDomain;
    g->outputs.push_back(sum);
  }
  if (s.other_reader) g->outputs.push_back(Emit(*g, "Neg", {r}));
  InferShapes(*g, true);
  return g;
}

std::map<std::string, Tensor> Feeds(const Spec& s) {
  std::map<std::string, Tensor> f;
  f["dl"] = Tensor::Scalar(1.7f);
  f["x"] = test::RandomTensor(DataType::kFloat32, {s.b * s.t, s.c}, -4, 4);
  std::vector<int64_t> labels(static_cast<size_t>(s.b * s.t));
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = (static_cast<int64_t>(i) * 7 + 3) % s.c;
  labels[1] = -100;  // ignored
  f["t"] = Tensor::FromInt64(labels, {s.b * s.t});
  return f;
}

TEST(HalfLossGradPass, LossGradWritesTheHalfGradientItsCastMade) {
  for (const DataType half : {DataType::kBFloat16, DataType::kFloat16}) {
    Spec s;
    s.half = half;
    SCOPED_TRACE(DataTypeName(half));
    const std::map<std::string, Tensor> feeds = Feeds(s);
    auto before = GradGraph(s);
    auto after = GradGraph(s);
    HalfLossGradPass pass;
    ASSERT_TRUE(pass.Run(*after));
    EXPECT_EQ(pass.rewritten(), 1);
    VerifyGraph(*after);
    int casts = 0;
    for (const auto& n : after->nodes()) {
      if (n->op_type == "LossGrad") {
        EXPECT_EQ(n->attr_int("to", 0), static_cast<int64_t>(half));
        EXPECT_EQ(n->outputs[0]->dtype, half);
      }
      if (n->op_type == "ReduceToShape") EXPECT_EQ(n->outputs[0]->dtype, half);
      if (n->op_type == "Cast") {
        ++casts;
        EXPECT_EQ(n->attr_int("to", 0), static_cast<int64_t>(DataType::kFloat32));  // only the bias's widening
      }
    }
    EXPECT_EQ(casts, 1);
    ASSERT_EQ(after->outputs[0]->dtype, half);
    ASSERT_EQ(after->outputs[1]->dtype, DataType::kFloat32);
    const std::vector<Tensor> want = Executor(*before).Run(feeds);
    const std::vector<Tensor> got = Executor(*after).Run(feeds);
    ASSERT_EQ(got.size(), 2u);
    ASSERT_EQ(got[0].numel(), want[0].numel());
    for (int64_t i = 0; i < got[0].numel(); ++i) ASSERT_EQ(got[0].GetDouble(i), want[0].GetDouble(i)) << i;
    // The bias: sums of the rounded gradient, within the half type's rounding of each of its b * t terms and of the
    // sum itself (ReduceToShape now writes half, as the half Linear's bias gradient is under PyTorch's autocast).
    const double eps = half == DataType::kBFloat16 ? 1.0 / 256 : 1.0 / 2048;
    for (int64_t j = 0; j < s.c; ++j) {
      double bound = 0;
      for (int64_t i = 0; i < s.b * s.t; ++i) bound += std::abs(want[0].GetDouble(i * s.c + j));
      EXPECT_NEAR(got[1].GetDouble(j), want[1].GetDouble(j), eps * (bound + std::abs(want[1].GetDouble(j))) + 1e-7)
          << j;
    }
  }
}

TEST(HalfLossGradPass, OtherReadersAndShapesStay) {
  std::vector<std::pair<std::string, Spec>> cases;
  Spec s;
  s.other_reader = true;
  cases.push_back({"a Neg reads the float gradient", s});
  s = Spec();
  s.mixed_casts = true;
  cases.push_back({"Casts to two half types", s});
  s = Spec();
  s.grad_output = true;
  cases.push_back({"the float gradient is a graph output", s});
  for (const auto& [what, spec] : cases) {
    SCOPED_TRACE(what);
    auto g = GradGraph(spec);
    EXPECT_FALSE(HalfLossGradPass().Run(*g));
  }
  // Scores of rank 3 (classes on axis 1, positions after): the half rows path does not take them.
  Graph g;
  g.opset_imports[""] = 17;
  Value* dl = g.AddInitializer("dl", Tensor::Scalar(1.f));
  Value* x = g.AddInitializer("x", test::RandomTensor(DataType::kFloat32, {2, 5, 3}));
  Value* t = g.AddInitializer("t", Tensor::FromInt64({0, 1, 2, 3, 4, 0}, {2, 3}));
  Value* d = Emit(g, "LossGrad", {dl, x, t}, {{"softmax", Attribute::Int(1)}});
  d->producer->domain = kInternalDomain;
  g.outputs.push_back(Emit(g, "Cast", {d}, {{"to", Attribute::Int(static_cast<int64_t>(DataType::kBFloat16))}}));
  InferShapes(g, true);
  EXPECT_FALSE(HalfLossGradPass().Run(g));
}

TEST(HalfLossGradPass, InTheStepPipelineAfterAmp) {
  const std::vector<std::string> names = StepPassNames();
  const auto at = [&](const std::string& n) { return std::find(names.begin(), names.end(), n) - names.begin(); };
  ASSERT_LT(at("half_loss_grad"), static_cast<long>(names.size()));
  EXPECT_EQ(at("half_loss_grad"), at("amp") + 1);
}

}  // namespace
}  // namespace ot
