// slice_pushdown: a Slice along leading axes of a linear layer's output (MatMul, + a bias-like Add/Sub/Mul/Div)
// moves to the layer's input; the loss and autodiff's gradients of the input, weight and bias are those of the graph
// as written (fresh random values each run). Graphs where a row of the output depends on other rows, or where a
// value is read elsewhere, stay as they are.
#include "passes/slice_pushdown.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "executor/executor.h"
#include "graph/graph.h"
#include "graph/op_registry.h"
#include "graph/verifier.h"
#include "passes/autodiff.h"
#include "passes/step_graph.h"
#include "tests/passes/grad_check.h"
#include "tests/test_util.h"

namespace ot {
namespace {

using test::Emit;

struct Spec {
  std::vector<int64_t> h = {3, 5, 4};  // the layer's input; W is [K, N]
  int64_t n = 6;
  std::vector<int64_t> bias = {6};  // empty: no bias op
  std::string op = "Add";
  bool bias_first = false;
  std::vector<int64_t> starts = {0}, ends = {-1}, axes = {1}, steps;  // steps empty: the input left out
  bool mm_used = false;                                               // the MatMul output read elsewhere too
  std::vector<std::string> unary;  // element-by-element ops after the layer, before the Slice
  int opset = 17;
};

// z = Slice(layer(p0, p1[, p2])) with the Spec's constants.
Value* Body(Graph& g, const std::vector<Value*>& p, const Spec& s) {
  Value* y = Emit(g, "MatMul", {p[0], p[1]});
  if (s.mm_used) g.outputs.push_back(Emit(g, "Neg", {y}));
  if (!s.bias.empty()) y = s.bias_first ? Emit(g, s.op, {p[2], y}) : Emit(g, s.op, {y, p[2]});
  for (const std::string& op : s.unary)
    y = op == "Cast" ? Emit(g, op, {y}, {{"to", Attribute::Int(static_cast<int64_t>(DataType::kFloat32))}})
                     : Emit(g, op, {y});
  auto ints = [&](const std::string& name, const std::vector<int64_t>& v) {
    return g.AddInitializer(g.UniqueName(name), Tensor::FromInt64(v, {static_cast<int64_t>(v.size())}));
  };
  std::vector<Value*> ins = {y, ints("starts", s.starts), ints("ends", s.ends), ints("axes", s.axes)};
  if (!s.steps.empty()) ins.push_back(ints("steps", s.steps));
  return Emit(g, "Slice", ins);
}

// The dims of the Slice's output when the pass has run (empty when it has not).
std::vector<int64_t> Dims(const Value* v) {
  std::vector<int64_t> d;
  for (const Dim& x : v->shape.dims()) d.push_back(x.value);
  return d;
}

// Runs the graph before and after the pass, with autodiff's gradients of p0..p2: every output the same within float
// rounding; `moved` says whether the pass must apply.
void Differential(const Spec& s, bool moved, const std::vector<int64_t>& z_dims) {
  std::vector<Tensor> params = {test::RandomTensor(DataType::kFloat32, s.h, -2, 2),
                                test::RandomTensor(DataType::kFloat32, {s.h.back(), s.n})};
  if (!s.bias.empty()) params.push_back(test::RandomTensor(DataType::kFloat32, s.bias, 0.5, 1.5));
  const Tensor r = test::RandomTensor(DataType::kFloat32, z_dims, 0.5, 1.5);
  std::vector<Tensor> results[2];
  for (int pushed = 0; pushed < 2; ++pushed) {
    auto g = test::Build(
        params, [&](Graph& g, const std::vector<Value*>& p) { return Body(g, p, s); }, r, s.opset);
    InferShapes(*g, true);
    if (pushed) {
      SlicePushdownPass pass;
      ASSERT_EQ(pass.Run(*g), moved);
      if (!moved) return;
      EXPECT_EQ(pass.moved(), 1);
      VerifyGraph(*g);
      for (const auto& n : g->nodes()) {
        if (n->op_type == "Slice") {
          EXPECT_EQ(n->inputs[0]->name, "p0");  // on the layer's input now
        }
        if (n->op_type == "MatMul") {
          EXPECT_EQ(n->inputs[0]->producer->op_type, "Slice");
          std::vector<int64_t> want = z_dims;
          want.back() = s.n;
          EXPECT_EQ(Dims(n->outputs[0]), want);
        }
      }
    }
    AutodiffPass ad({"loss", "^(r|starts.*|ends.*|axes.*|steps.*)$"});
    ASSERT_TRUE(ad.Run(*g));
    results[pushed] = Executor(*g).Run({});
  }
  ASSERT_EQ(results[0].size(), results[1].size());
  ASSERT_EQ(results[0].size(), 1 + (s.bias.empty() ? 2u : 3u));
  for (size_t i = 0; i < results[0].size(); ++i) {
    SCOPED_TRACE("output " + std::to_string(i));
    test::ExpectClose(results[1][i], results[0][i], 1e-5, 1e-5);
  }
}

TEST(SlicePushdownPass, LeadingAxisSliceMovesBelowTheLayer) {
  {
    SCOPED_TRACE("causal LM shift: [3, 5, 6][:, :-1], bias [N]");
    Differential(Spec{}, true, {3, 4, 6});
  }
  {
    SCOPED_TRACE("bias first, [1, 1, N]");
    Spec s;
    s.bias = {1, 1, 6};
    s.bias_first = true;
    Differential(s, true, {3, 4, 6});
  }
  {
    SCOPED_TRACE("Tanh and a Cast to float after the layer (GPT-Neo casts its logits)");
    Spec s;
    s.unary = {"Tanh", "Cast"};
    Differential(s, true, {3, 4, 6});
  }
  {
    SCOPED_TRACE("no bias");
    Spec s;
    s.bias.clear();
    Differential(s, true, {3, 4, 6});
  }
  {
    SCOPED_TRACE("Div by a scalar, the layer second");
    Spec s;
    s.op = "Div";
    s.bias = {1};
    s.bias_first = true;
    Differential(s, true, {3, 4, 6});
  }
  {
    SCOPED_TRACE("rank 4, two axes, a step of 2, negative axis");
    Spec s;
    s.h = {4, 3, 5, 2};
    s.bias = {3, 1, 6};
    s.starts = {1, 0};
    s.ends = {4, 5};
    s.axes = {0, -2};
    s.steps = {1, 2};
    Differential(s, true, {3, 3, 3, 6});
  }
  {
    SCOPED_TRACE("rank 2, rows");
    Spec s;
    s.h = {7, 4};
    s.axes = {0};
    s.starts = {2};
    s.ends = {100};
    Differential(s, true, {5, 6});
  }
}

TEST(SlicePushdownPass, GraphsWhereARowDependsOnOthersStay) {
  {
    SCOPED_TRACE("the last axis");
    Spec s;
    s.axes = {-1};
    Differential(s, false, {3, 5, 5});
  }
  {
    SCOPED_TRACE("a bias that varies along the sliced axis");
    Spec s;
    s.bias = {5, 6};
    Differential(s, false, {3, 4, 6});
  }
  {
    SCOPED_TRACE("the MatMul output read elsewhere");
    Spec s;
    s.mm_used = true;
    auto g = test::Build(
        {test::RandomTensor(DataType::kFloat32, s.h), test::RandomTensor(DataType::kFloat32, {4, 6}),
         test::RandomTensor(DataType::kFloat32, {6})},
        [&](Graph& g, const std::vector<Value*>& p) { return Body(g, p, s); },
        test::RandomTensor(DataType::kFloat32, {3, 4, 6}), 17);
    InferShapes(*g, true);
    EXPECT_FALSE(SlicePushdownPass().Run(*g));
  }
  {
    SCOPED_TRACE("starts fed at run time");
    Graph g;
    g.opset_imports[""] = 17;
    Value* h = g.AddInitializer("h", test::RandomTensor(DataType::kFloat32, {3, 5, 4}));
    Value* w = g.AddInitializer("w", test::RandomTensor(DataType::kFloat32, {4, 6}));
    Value* starts = g.AddValue("starts");
    starts->dtype = DataType::kInt64;
    starts->shape = Shape::Static({1});
    g.inputs.push_back(starts);
    Value* ends = g.AddInitializer("ends", Tensor::FromInt64({-1}, {1}));
    Value* axes = g.AddInitializer("axes", Tensor::FromInt64({1}, {1}));
    g.outputs.push_back(Emit(g, "Slice", {Emit(g, "MatMul", {h, w}), starts, ends, axes}));
    InferShapes(g, true);
    EXPECT_FALSE(SlicePushdownPass().Run(g));
  }
}

TEST(SlicePushdownPass, InTheStepPipelineBeforePatternFusion) {
  const std::vector<std::string> names = StepPassNames();
  const auto at = [&](const std::string& n) { return std::find(names.begin(), names.end(), n) - names.begin(); };
  ASSERT_LT(at("slice_pushdown"), static_cast<long>(names.size()));
  EXPECT_LT(at("slice_pushdown"), at("pattern_fusion"));
}

}  // namespace
}  // namespace ot
