// GradientCheck.<Op> for graph/grad/index_grad.cc (Slice with any steps, GatherElements, GatherND,
// ScatterElements), einsum_grad.cc and conv_transpose_grad.cc (ConvTranspose, GlobalMaxPool): the autodiff
// pass's gradients against central finite differences in float64 (tests/passes/grad_check.h), and the errors
// of the forms that have no rule.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <utility>

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

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

Value* Ints(Graph& g, const std::vector<int64_t>& v, std::vector<int64_t> dims = {}) {
  if (dims.empty()) dims = {static_cast<int64_t>(v.size())};
  return g.AddInitializer(g.UniqueName("k_ints"), Tensor::FromInt64(v, dims));
}

// Runs autodiff on body's graph and expects an ot::Error whose message holds every one of `parts`.
void ExpectGradError(const std::vector<std::vector<int64_t>>& dims, const std::vector<int64_t>& out,
                     const test::BuildFn& body, const std::vector<std::string>& parts, int opset = 17) {
  std::vector<Tensor> params;
  for (const auto& d : dims) params.push_back(test::RandomTensor(DataType::kFloat64, d));
  auto g = test::Build(params, body, test::RandomTensor(DataType::kFloat64, out), opset);
  AutodiffPass pass({"loss", "^(r|k_.*)$"});
  try {
    pass.Run(*g);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

Value* Named(Graph& g, const std::string& op, const std::string& name, std::vector<Value*> ins, Attrs attrs = {}) {
  Value* y = g.AddValue(g.UniqueName(name + "_out"));
  Node* n = g.AddNode(op, ins, {y}, name);
  n->attrs = std::move(attrs);
  return y;
}

// ---- Slice ---------------------------------------------------------------------------------------------------

Value* SliceOf(Graph& g, Value* x, std::vector<int64_t> starts, std::vector<int64_t> ends, std::vector<int64_t> axes,
               std::vector<int64_t> steps) {
  return Emit(g, "Slice", {x, Ints(g, starts), Ints(g, ends), Ints(g, axes), Ints(g, steps)});
}

// Axis 0: 4, 2, 0 (negative step, end clamped to -1); axis 1: 1, 4 (step 3, past the end is clamped).
TEST(GradientCheck, SliceStepsNegativeAndStrided) {
  CheckGradients({{5, 7}}, {3, 2}, [](Graph& g, const std::vector<Value*>& p) {
    return SliceOf(g, p[0], {4, 1}, {-100, 7}, {0, 1}, {-2, 3});
  });
}

// Full reversal with the exporters' INT64_MIN end; one element taken by a large step; steps of 1 via the
// general rule.
TEST(GradientCheck, SliceReverseAndSingleElement) {
  CheckGradients({{3, 4}}, {3, 4},
                 [](Graph& g, const std::vector<Value*>& p) { return SliceOf(g, p[0], {-1}, {kMin}, {1}, {-1}); });
  CheckGradients({{6, 4}}, {1, 2}, [](Graph& g, const std::vector<Value*>& p) {
    return SliceOf(g, p[0], {2, -1}, {3, 0}, {0, -1}, {5, -2});
  });
  CheckGradients({{4, 5}}, {2, 4}, [](Graph& g, const std::vector<Value*>& p) {
    return SliceOf(g, p[0], {1, -4}, {3, kMax}, {0, 1}, {1, 1});
  });
}

// 3-D, negative axis, a step that does not divide the range, an axis left alone; and no axes input.
TEST(GradientCheck, Slice3DMixedSteps) {
  CheckGradients({{3, 8, 5}}, {2, 3, 5}, [](Graph& g, const std::vector<Value*>& p) {
    return SliceOf(g, p[0], {-100, 7}, {100, 0}, {0, -2}, {2, -3});
  });
  CheckGradients({{5, 4}}, {2, 2}, [](Graph& g, const std::vector<Value*>& p) {
    return Emit(g, "Slice", {p[0], Ints(g, {-1, 0}), Ints(g, {-4, 4}), nullptr, Ints(g, {-2, 2})});
  });
}

// An empty slice: Y has a zero dim, X's gradient is all zeros.
TEST(GradientCheck, SliceEmptyGivesZeros) {
  std::vector<Tensor> params = {test::RandomTensor(DataType::kFloat64, {3, 4})};
  auto body = [](Graph& g, const std::vector<Value*>& p) {
    Value* s = SliceOf(g, p[0], {2, 0}, {2, 4}, {0, 1}, {1, 2});  // [0, 2]
    return Emit(g, "ReduceSum", {s}, {{"keepdims", Attribute::Int(0)}});
  };
  auto g = test::Build(params, body, test::RandomTensor(DataType::kFloat64, {}), 17);
  AutodiffPass pass({"loss", "^(r|k_.*)$"});
  ASSERT_TRUE(pass.Run(*g));
  Executor ex(*g);
  auto outs = ex.Run({});
  ASSERT_EQ(outs[1].dims(), (std::vector<int64_t>{3, 4}));
  for (int64_t i = 0; i < 12; ++i) EXPECT_EQ(outs[1].GetDouble(i), 0.0);
}

// Starts, ends and steps computed in the graph (from X's own shape): the rule passes the forward's inputs on.
TEST(GradientCheck, SliceComputedIndices) {
  CheckGradients({{5, 4}}, {2, 4}, [](Graph& g, const std::vector<Value*>& p) {
    Value* rows = Emit(g, "Gather", {Emit(g, "Shape", {p[0]}), Ints(g, {0})});
    Value* steps = Emit(g, "Sub", {rows, Ints(g, {3})});   // 2 for 5 rows
    Value* starts = Emit(g, "Sub", {rows, Ints(g, {4})});  // 1
    return Named(g, "Slice", "strided", {p[0], starts, rows, Ints(g, {0}), steps});
  });
}

// ---- GatherElements / GatherND / ScatterElements -------------------------------------------------------------

// Repeated and negative indices accumulate.
TEST(GradientCheck, GatherElements) {
  CheckGradients({{3, 4}}, {3, 3}, [](Graph& g, const std::vector<Value*>& p) {
    return Emit(g, "GatherElements", {p[0], Ints(g, {0, 3, 3, -1, 1, 1, 2, 2, 0}, {3, 3})},
                {{"axis", Attribute::Int(1)}});
  });
  CheckGradients(
      {{3, 2}}, {4, 2},
      [](Graph& g, const std::vector<Value*>& p) {
        return Emit(g, "GatherElements", {p[0], Ints(g, {0, 2, 2, 2, 1, 0, 0, -3}, {4, 2})});
      },
      13);
}

TEST(GradientCheck, GatherND) {
  // Element tuples (one repeated) and slice tuples.
  CheckGradients({{3, 4, 2}}, {3, 2}, [](Graph& g, const std::vector<Value*>& p) {
    return Emit(g, "GatherND", {p[0], Ints(g, {0, 1, 2, 3, 0, 1}, {3, 2})});
  });
  CheckGradients({{3, 4}}, {2, 2, 4}, [](Graph& g, const std::vector<Value*>& p) {
    return Emit(g, "GatherND", {p[0], Ints(g, {2, 0, 2, -1}, {2, 2, 1})});
  });
}

TEST(GradientCheck, GatherNDBatchDimsFails) {
  ExpectGradError(
      {{2, 3}}, {2},
      [](Graph& g, const std::vector<Value*>& p) {
        return Named(g, "GatherND", "batched", {p[0], Ints(g, {0, 2}, {2, 1})}, {{"batch_dims", Attribute::Int(1)}});
      },
      {"batched", "GatherND", "batch_dims"});
}

// reduction none: distinct positions per column; data and updates both get gradients.
TEST(GradientCheck, ScatterElements) {
  CheckGradients({{3, 4}, {2, 4}}, {3, 4}, [](Graph& g, const std::vector<Value*>& p) {
    return Emit(g, "ScatterElements", {p[0], Ints(g, {0, 2, 1, 0, 2, 1, 0, -1}, {2, 4}), p[1]});
  });
  CheckGradients(
      {{2, 5}, {2, 2}}, {2, 5},
      [](Graph& g, const std::vector<Value*>& p) {
        return Emit(g, "ScatterElements", {p[0], Ints(g, {4, 0, 1, 3}, {2, 2}), p[1]}, {{"axis", Attribute::Int(-1)}});
      },
      13);
}

// reduction add: repeated indices are fine (each update's contribution is linear).
TEST(GradientCheck, ScatterElementsAdd) {
  CheckGradients({{3, 3}, {3, 3}}, {3, 3}, [](Graph& g, const std::vector<Value*>& p) {
    return Emit(g, "ScatterElements", {p[0], Ints(g, {1, 1, 0, 2, 2, 2, 1, 0, 0}, {3, 3}), p[1]},
                {{"axis", Attribute::Int(1)}, {"reduction", Attribute::String("add")}});
  });
}

TEST(GradientCheck, ScatterElementsMulFails) {
  ExpectGradError({{3, 3}, {1, 3}}, {3, 3},
                  [](Graph& g, const std::vector<Value*>& p) {
                    return Named(g, "ScatterElements", "scatter_mul", {p[0], Ints(g, {0, 1, 2}, {1, 3}), p[1]},
                                 {{"reduction", Attribute::String("mul")}});
                  },
                  {"scatter_mul", "reduction 'mul'"});
}

TEST(GradientCheck, ScatterND) {
  // reduction none, element and slice tuples (distinct).
  CheckGradients({{3, 4}, {2}}, {3, 4}, [](Graph& g, const std::vector<Value*>& p) {
    return Emit(g, "ScatterND", {p[0], Ints(g, {0, 3, 2, 1}, {2, 2}), p[1]});
  });
  CheckGradients({{3, 4}, {2, 4}}, {3, 4}, [](Graph& g, const std::vector<Value*>& p) {
    return Emit(g, "ScatterND", {p[0], Ints(g, {2, 0}, {2, 1}), p[1]});
  });
  // reduction add with a repeated tuple.
  CheckGradients({{3, 4}, {3}}, {3, 4}, [](Graph& g, const std::vector<Value*>& p) {
    return Emit(g, "ScatterND", {p[0], Ints(g, {1, 1, 1, 1, 2, 3}, {3, 2}), p[1]},
                {{"reduction", Attribute::String("add")}});
  });
}

TEST(GradientCheck, Trilu) {
  CheckGradients({{2, 4, 5}}, {2, 4, 5},
                 [](Graph& g, const std::vector<Value*>& p) { return Emit(g, "Trilu", {p[0]}); });
  CheckGradients({{4, 3}}, {4, 3}, [](Graph& g, const std::vector<Value*>& p) {
    return Emit(g, "Trilu", {p[0], g.AddInitializer(g.UniqueName("k_k"), Tensor::FromInt64({-1}, {}))},
                {{"upper", Attribute::Int(0)}});
  });
}

// ---- TopK / CumSum / DepthToSpace / SpaceToDepth ---------------------------------------------------------------

TEST(GradientCheck, TopK) {
  CheckGradients({{3, 5}}, {3, 2}, [](Graph& g, const std::vector<Value*>& p) {
    return test::EmitN(g, "TopK", {p[0], Ints(g, {2})}, 2)[0];
  });
  CheckGradients({{4, 3}}, {3, 3}, [](Graph& g, const std::vector<Value*>& p) {
    return test::EmitN(g, "TopK", {p[0], Ints(g, {3})}, 2,
                       {{"axis", Attribute::Int(0)}, {"largest", Attribute::Int(0)}})[0];
  });
  // Opset 10: Scatter instead of ScatterElements.
  CheckGradients(
      {{2, 4}}, {2, 1},
      [](Graph& g, const std::vector<Value*>& p) {
        return test::EmitN(g, "TopK", {p[0], Ints(g, {1})}, 2)[0];
      },
      10);
}

TEST(GradientCheck, CumSum) {
  for (int exclusive : {0, 1})
    for (int reverse : {0, 1}) {
      SCOPED_TRACE(std::to_string(exclusive) + std::to_string(reverse));
      CheckGradients({{3, 4}}, {3, 4}, [=](Graph& g, const std::vector<Value*>& p) {
        return Emit(g, "CumSum", {p[0], Ints(g, {-1}, {1})},
                    {{"exclusive", Attribute::Int(exclusive)}, {"reverse", Attribute::Int(reverse)}});
      });
    }
}

TEST(GradientCheck, DepthToSpaceSpaceToDepth) {
  for (const char* mode : {"DCR", "CRD"}) {
    SCOPED_TRACE(mode);
    CheckGradients({{2, 8, 2, 3}}, {2, 2, 4, 6}, [mode](Graph& g, const std::vector<Value*>& p) {
      return Emit(g, "DepthToSpace", {p[0]}, {{"blocksize", Attribute::Int(2)}, {"mode", Attribute::String(mode)}});
    });
  }
  CheckGradients({{1, 2, 4, 6}}, {1, 8, 2, 3}, [](Graph& g, const std::vector<Value*>& p) {
    return Emit(g, "SpaceToDepth", {p[0]}, {{"blocksize", Attribute::Int(2)}});
  });
}

// ---- Einsum --------------------------------------------------------------------------------------------------

Value* Einsum(Graph& g, const std::string& eq, std::vector<Value*> ins) {
  return Emit(g, "Einsum", std::move(ins), {{"equation", Attribute::String(eq)}});
}

TEST(GradientCheck, EinsumBatchMatMul) {
  CheckGradients({{2, 3, 4}, {2, 4, 5}}, {2, 3, 5}, [](Graph& g, const std::vector<Value*>& p) {
    return Einsum(g, "bij,bjk->bik", {p[0], p[1]});
  });
}

TEST(GradientCheck, EinsumAttentionScores) {
  CheckGradients({{2, 2, 3, 4}, {2, 2, 5, 4}}, {2, 2, 3, 5}, [](Graph& g, const std::vector<Value*>& p) {
    return Einsum(g, "bhqd, bhkd -> bhqk", {p[0], p[1]});
  });
}

TEST(GradientCheck, EinsumOneOperand) {
  CheckGradients({{3, 4}}, {4, 3}, [](Graph& g, const std::vector<Value*>& p) { return Einsum(g, "ij->ji", {p[0]}); });
  CheckGradients({{3, 4}}, {3}, [](Graph& g, const std::vector<Value*>& p) { return Einsum(g, "ij->i", {p[0]}); });
  CheckGradients({{3, 4}}, {}, [](Graph& g, const std::vector<Value*>& p) { return Einsum(g, "ij->", {p[0]}); });
  CheckGradients({{2, 3, 4}}, {4, 2},
                 [](Graph& g, const std::vector<Value*>& p) { return Einsum(g, "abc->ca", {p[0]}); });
}

// Implicit output ('ij,jk' -> 'ik'), a label summed over one operand alone ('l' in B), a scalar output, three
// operands, and upper-case labels.
TEST(GradientCheck, EinsumOtherForms) {
  CheckGradients({{3, 4}, {4, 2}}, {3, 2}, [](Graph& g, const std::vector<Value*>& p) {
    return Einsum(g, "ij,jk", {p[0], p[1]});
  });
  CheckGradients({{3, 4}, {4, 2, 3}}, {3}, [](Graph& g, const std::vector<Value*>& p) {
    return Einsum(g, "ij,jkl->i", {p[0], p[1]});
  });
  CheckGradients({{3, 4}, {3, 4}}, {}, [](Graph& g, const std::vector<Value*>& p) {
    return Einsum(g, "ij,ij->", {p[0], p[1]});
  });
  CheckGradients({{2, 3}, {3, 4}, {4, 2}}, {2, 2}, [](Graph& g, const std::vector<Value*>& p) {
    return Einsum(g, "ij,jk,kl->il", {p[0], p[1], p[2]});
  });
  CheckGradients({{2, 3}, {3}}, {3, 2}, [](Graph& g, const std::vector<Value*>& p) {
    return Einsum(g, "Nc,c->cN", {p[0], p[1]});
  });
}

// Ellipsis: a shorter ellipsis (B covers no dims), size-1 broadcast dims, letters before the ellipsis, the
// implicit output, and an ellipsis summed in a gradient (B has none).
TEST(GradientCheck, EinsumEllipsis) {
  CheckGradients({{2, 3, 4}, {4, 5}}, {2, 3, 5}, [](Graph& g, const std::vector<Value*>& p) {
    return Einsum(g, "...ij,...jk->...ik", {p[0], p[1]});
  });
  CheckGradients({{2, 1, 3, 4}, {1, 3, 4, 2}}, {2, 3, 3, 2}, [](Graph& g, const std::vector<Value*>& p) {
    return Einsum(g, "...ij,...jk", {p[0], p[1]});
  });
  CheckGradients({{2, 3, 4, 5}, {2, 6, 5}}, {2, 3, 4, 6}, [](Graph& g, const std::vector<Value*>& p) {
    return Einsum(g, "b...d,bkd->b...k", {p[0], p[1]});
  });
  CheckGradients({{3, 2, 4}}, {4, 3, 2},
                 [](Graph& g, const std::vector<Value*>& p) { return Einsum(g, "i...j->j i...", {p[0]}); });
}

TEST(GradientCheck, EinsumUnsupportedEquationsFail) {
  ExpectGradError({{3, 3}}, {3},
                  [](Graph& g, const std::vector<Value*>& p) {
                    return Named(g, "Einsum", "diag", {p[0]}, {{"equation", Attribute::String("ii->i")}});
                  },
                  {"diag", "Einsum", "'ii->i'", "diagonal"});
  ExpectGradError({{2, 3, 4}}, {3, 4},
                  [](Graph& g, const std::vector<Value*>& p) {
                    return Named(g, "Einsum", "ell_sum", {p[0]}, {{"equation", Attribute::String("...ij->ij")}});
                  },
                  {"ell_sum", "'...ij->ij'", "ellipsis"});
  ExpectGradError(
      {{2, 3, 4}, {5, 4}}, {2, 3, 5},
      [](Graph& g, const std::vector<Value*>& p) {
        return Named(g, "Einsum", "ell_mid", {p[0], p[1]}, {{"equation", Attribute::String("i...j,k...j->i...k")}});
      },
      {"ell_mid", "'i...j,k...j->i...k'", "letters before an ellipsis"});
}

// ---- ConvTranspose / GlobalMaxPool ---------------------------------------------------------------------------

// Stride 2, asymmetric pads, output_padding, bias.
TEST(GradientCheck, ConvTranspose2D) {
  CheckGradients({{1, 3, 3, 3}, {3, 2, 3, 2}, {2}}, {1, 2, 7, 6}, [](Graph& g, const std::vector<Value*>& p) {
    return Emit(g, "ConvTranspose", {p[0], p[1], p[2]},
                {{"strides", Attribute::Ints({2, 2})},
                 {"pads", Attribute::Ints({1, 0, 0, 1})},
                 {"output_padding", Attribute::Ints({1, 1})}});
  });
}

// Groups and dilations, no bias.
TEST(GradientCheck, ConvTransposeGroupDilation) {
  CheckGradients({{2, 4, 3}, {4, 1, 2}}, {2, 2, 5}, [](Graph& g, const std::vector<Value*>& p) {
    return Emit(g, "ConvTranspose", {p[0], p[1]}, {{"group", Attribute::Int(2)}, {"dilations", Attribute::Ints({2})}});
  });
}

// Pads from auto_pad and from output_shape.
TEST(GradientCheck, ConvTransposeAutoPadAndOutputShape) {
  CheckGradients({{1, 2, 3}, {2, 2, 3}}, {1, 2, 6}, [](Graph& g, const std::vector<Value*>& p) {
    return Emit(g, "ConvTranspose", {p[0], p[1]},
                {{"strides", Attribute::Ints({2})}, {"auto_pad", Attribute::String("SAME_UPPER")}});
  });
  CheckGradients({{1, 2, 3, 2}, {2, 1, 3, 3}}, {1, 1, 6, 4}, [](Graph& g, const std::vector<Value*>& p) {
    return Emit(g, "ConvTranspose", {p[0], p[1]},
                {{"strides", Attribute::Ints({2, 2})}, {"output_shape", Attribute::Ints({6, 4})}});
  });
}

// The float32 path (Conv forward and ConvGradWeight through oneDNN) against float64 on the same data.
std::vector<Tensor> ConvTransposeGrads(DataType t, const std::vector<Tensor>& params64, const Tensor& r64,
                                       const Attrs& attrs) {
  std::vector<Tensor> params;
  for (const auto& p : params64) params.push_back(p.CastTo(t));
  auto g = test::Build(
      params, [&](Graph& g, const std::vector<Value*>& p) { return Emit(g, "ConvTranspose", p, attrs); }, r64.CastTo(t),
      17);
  AutodiffPass pass({"loss", "^r$"});
  EXPECT_TRUE(pass.Run(*g));
  Executor ex(*g);
  auto outs = ex.Run({});
  return std::vector<Tensor>(outs.begin() + 1, outs.end());
}

TEST(GradientCheck, ConvTransposeFloat32MatchesFloat64) {
  const std::vector<std::pair<std::vector<std::vector<int64_t>>, std::vector<int64_t>>> cases = {
      {{{2, 3, 5, 4}, {3, 4, 3, 3}, {4}}, {2, 4, 10, 8}}, {{{2, 4, 6}, {4, 3, 4}}, {2, 6, 16}}};
  const std::vector<Attrs> attrs = {{{"strides", Attribute::Ints({2, 2})},
                                     {"pads", Attribute::Ints({1, 1, 1, 0})},
                                     {"output_padding", Attribute::Ints({1, 0})}},
                                    {{"strides", Attribute::Ints({2})},
                                     {"group", Attribute::Int(2)},
                                     {"dilations", Attribute::Ints({2})},
                                     {"pads", Attribute::Ints({1, 1})},
                                     {"output_padding", Attribute::Ints({1})}}};
  for (size_t k = 0; k < cases.size(); ++k) {
    SCOPED_TRACE(k);
    std::vector<Tensor> params;
    for (const auto& d : cases[k].first) params.push_back(test::RandomTensor(DataType::kFloat64, d));
    Tensor r = test::RandomTensor(DataType::kFloat64, cases[k].second);
    auto g64 = ConvTransposeGrads(DataType::kFloat64, params, r, attrs[k]);
    auto g32 = ConvTransposeGrads(DataType::kFloat32, params, r, attrs[k]);
    ASSERT_EQ(g32.size(), params.size());
    for (size_t p = 0; p < params.size(); ++p) {
      ASSERT_EQ(g32[p].dtype(), DataType::kFloat32);
      ASSERT_EQ(g32[p].dims(), g64[p].dims());
      for (int64_t i = 0; i < g64[p].numel(); ++i)
        EXPECT_NEAR(g32[p].GetDouble(i), g64[p].GetDouble(i), 1e-4 * (1 + std::fabs(g64[p].GetDouble(i))))
            << "p" << p << "[" << i << "]";
    }
  }
}

TEST(GradientCheck, GlobalMaxPool) {
  CheckGradients({{2, 3, 4, 5}}, {2, 3, 1, 1},
                 [](Graph& g, const std::vector<Value*>& p) { return Emit(g, "GlobalMaxPool", {p[0]}); });
  CheckGradients({{2, 2, 6}}, {2, 2, 1},
                 [](Graph& g, const std::vector<Value*>& p) { return Emit(g, "GlobalMaxPool", {p[0]}); });
}

}  // namespace
}  // namespace ot
