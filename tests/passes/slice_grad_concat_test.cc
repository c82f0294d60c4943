// slice_grad_concat: a tensor split by Slices into adjacent pieces (as nn.MultiheadAttention splits its in-projection
// into q, k, v) gets its gradient as one Concat of the pieces' gradients instead of a Sum of zero-padded SliceGrads;
// the gradients are bit for bit those autodiff built (fresh random values each run). Pieces that leave a gap or
// overlap, or use steps, stay as they were; another gradient of the same tensor is kept in the Sum.
#include "passes/slice_grad_concat.h"

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

struct Piece {
  int64_t start, end, step = 1;
};

struct Spec {
  std::vector<int64_t> x = {2, 3, 9};
  int64_t axis = 2;
  std::vector<Piece> pieces = {{6, 9}, {0, 3}, {3, 6}};  // out of order, as exporters may write them
  bool direct_use = false;                               // X also read by a Tanh (a second gradient term)
};

int Count(const Graph& g, const std::string& op) {
  int c = 0;
  for (const auto& n : g.nodes()) c += n->op_type == op;
  return c;
}

// y = sum over pieces of Slice(p0)_i * (i + 1) (each piece read differently), concatenated back so the loss's r has
// one shape: y = Concat(pieces scaled) along the axis, in the pieces' order.
Value* Body(Graph& g, const std::vector<Value*>& p, const Spec& s) {
  std::vector<Value*> scaled;
  for (size_t i = 0; i < s.pieces.size(); ++i) {
    const Piece& q = s.pieces[i];
    auto ints = [&](int64_t v) { return g.AddInitializer(g.UniqueName("k_i"), Tensor::FromInt64({v}, {1})); };
    std::vector<Value*> ins = {p[0], ints(q.start), ints(q.end), ints(s.axis)};
    if (q.step != 1) ins.push_back(ints(q.step));
    Value* piece = Emit(g, "Slice", ins);
    scaled.push_back(Emit(g, "Mul", {piece, g.AddInitializer(g.UniqueName("k_s"), Tensor::Scalar(1.5f + i))}));
  }
  Value* y = Emit(g, "Concat", scaled, {{"axis", Attribute::Int(s.axis)}});
  if (s.direct_use) {
    // y + Tanh(X) summed to y's shape (both [.., 9] along the axis).
    y = Emit(g, "Add", {y, Emit(g, "Tanh", {p[0]})});
  }
  return y;
}

std::vector<int64_t> YDims(const Spec& s) {
  std::vector<int64_t> d = s.x;
  const int a = static_cast<int>(s.axis < 0 ? s.axis + static_cast<int64_t>(s.x.size()) : s.axis);
  d[a] = 0;
  for (const Piece& q : s.pieces) d[a] += (std::min(q.end, s.x[a]) - q.start + q.step - 1) / q.step;
  return d;
}

// Autodiff's gradient of p0 with and without the pass; `concat` says whether the pass must apply.
void Differential(const Spec& s, bool concat) {
  const std::vector<Tensor> params = {test::RandomTensor(DataType::kFloat32, s.x, -2, 2)};
  const Tensor r = test::RandomTensor(DataType::kFloat32, YDims(s), 0.5, 1.5);
  std::vector<Tensor> results[2];
  for (int pass = 0; pass < 2; ++pass) {
    auto g = test::Build(
        params, [&](Graph& g, const std::vector<Value*>& p) { return Body(g, p, s); }, r, 17);
    InferShapes(*g, true);
    AutodiffPass ad({"loss", "^(r|k_.*)$"});
    ASSERT_TRUE(ad.Run(*g));
    const int slice_grads = Count(*g, "SliceGrad");
    if (pass) {
      SliceGradConcatPass p;
      ASSERT_EQ(p.Run(*g), concat);
      if (!concat) return;
      EXPECT_EQ(p.concats(), 1);
      VerifyGraph(*g);
      EXPECT_EQ(Count(*g, "SliceGrad"), slice_grads - static_cast<int>(s.pieces.size()));
      EXPECT_EQ(Count(*g, "Sum"), s.direct_use ? 1 : 0);
    }
    results[pass] = Executor(*g).Run({});
  }
  ASSERT_EQ(results[0].size(), 2u);
  ASSERT_EQ(results[1].size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_EQ(results[1][i].numel(), results[0][i].numel());
    for (int64_t k = 0; k < results[0][i].numel(); ++k)
      ASSERT_EQ(results[1][i].GetDouble(k), results[0][i].GetDouble(k)) << "output " << i << " element " << k;
  }
}

TEST(SliceGradConcatPass, AdjacentPiecesBecomeOneConcat) {
  {
    SCOPED_TRACE("q, k, v of an in-projection, written out of order");
    Differential(Spec{}, true);
  }
  {
    SCOPED_TRACE("a negative axis, unequal pieces, an end past the dim");
    Spec s;
    s.x = {4, 7, 2};
    s.axis = -2;
    s.pieces = {{0, 2}, {2, 3}, {3, 100}};
    Differential(s, true);
  }
  {
    SCOPED_TRACE("another gradient of X kept in the Sum");
    Spec s;
    s.direct_use = true;
    Differential(s, true);
  }
}

TEST(SliceGradConcatPass, GapsOverlapsAndStepsStay) {
  {
    SCOPED_TRACE("a gap");
    Spec s;
    s.pieces = {{0, 3}, {4, 9}};
    Differential(s, false);
  }
  {
    SCOPED_TRACE("an overlap");
    Spec s;
    s.pieces = {{0, 5}, {4, 9}};
    Differential(s, false);
  }
  {
    SCOPED_TRACE("a step of 2");
    Spec s;
    s.pieces = {{0, 9, 2}, {1, 9, 2}};
    Differential(s, false);
  }
}

TEST(SliceGradConcatPass, InTheStepPipelineAfterAutodiff) {
  const std::vector<std::string> names = StepPassNames();
  const auto at = [&](const std::string& n) { return std::find(names.begin(), names.end(), n) - names.begin(); };
  ASSERT_LT(at("slice_grad_concat"), static_cast<long>(names.size()));
  EXPECT_EQ(at("slice_grad_concat"), at("autodiff") + 1);
}

}  // namespace
}  // namespace ot
