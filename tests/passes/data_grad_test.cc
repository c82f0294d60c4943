// GradientCheck.<Op> for the data-movement and selection ops (graph/grad/data_grad.cc): the autodiff pass's
// gradients against central finite differences in float64 (the harness of autodiff_test.cc).
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

Value* Ints(Graph& g, const std::vector<int64_t>& v, std::vector<int64_t> dims = {}) {
  if (dims.empty()) dims = {static_cast<int64_t>(v.size())};
  return g.AddInitializer(g.UniqueName("c"), Tensor::FromInt64(v, dims));
}

Value* Double(Graph& g, double v) {
  Tensor t(DataType::kFloat64, {});
  t.SetDouble(0, v);
  return g.AddInitializer(g.UniqueName("d"), std::move(t));
}

TEST(GradientCheck, GatherAxis0RepeatedIndices) {
  CheckGradients({{5, 3}}, {4, 3}, [](Graph& g, const std::vector<Value*>& p) {
    return Emit(g, "Gather", {p[0], Ints(g, {0, 2, 2, -1})});
  });
}

TEST(GradientCheck, GatherAxis1MatrixIndices) {
  CheckGradients({{2, 4}}, {2, 2, 2}, [](Graph& g, const std::vector<Value*>& p) {
    return Emit(g, "Gather", {p[0], Ints(g, {1, 3, 1, 0}, {2, 2})}, {{"axis", Attribute::Int(1)}});
  });
}

TEST(GradientCheck, Concat) {
  CheckGradients({{2, 3}, {2, 1}, {2, 2}}, {2, 6}, [](Graph& g, const std::vector<Value*>& p) {
    return Emit(g, "Concat", {p[0], p[1], p[2]}, {{"axis", Attribute::Int(-1)}});
  });
}

// Output 1 reaches no loss: its part of dX is zero.
TEST(GradientCheck, Split) {
  CheckGradients({{2, 6}}, {2, 4}, [](Graph& g, const std::vector<Value*>& p) {
    std::vector<Value*> outs = {g.AddValue("s0"), g.AddValue("s1"), g.AddValue("s2")};
    Node* n = g.AddNode("Split", {p[0], Ints(g, {1, 2, 3})}, outs, "split");
    n->attrs["axis"] = Attribute::Int(1);
    return Emit(g, "Concat", {outs[2], outs[0]}, {{"axis", Attribute::Int(1)}});
  });
}

TEST(GradientCheck, Slice) {
  CheckGradients({{4, 5}}, {2, 4}, [](Graph& g, const std::vector<Value*>& p) {
    return Emit(g, "Slice", {p[0], Ints(g, {1, -4}), Ints(g, {3, 100}), Ints(g, {0, 1})});
  });
}

TEST(GradientCheck, SliceOpset9Attributes) {
  CheckGradients(
      {{3, 4}}, {3, 2},
      [](Graph& g, const std::vector<Value*>& p) {
        return Emit(g, "Slice", {p[0]},
                    {{"starts", Attribute::Ints({1})}, {"ends", Attribute::Ints({3})}, {"axes", Attribute::Ints({1})}});
      },
      9);
}

TEST(GradientCheck, PadConstant) {
  CheckGradients({{2, 3}}, {5, 4}, [](Graph& g, const std::vector<Value*>& p) {
    return Emit(g, "Pad", {p[0], Ints(g, {1, 0, 2, 1}), Double(g, 0.5)});
  });
}

// Negative pads crop (the gradient puts zeros back there); pads only on the given axes (opset 18); the opset-2
// attribute form.
TEST(GradientCheck, PadNegativeAxesAndAttribute) {
  CheckGradients({{4, 5}}, {5, 3}, [](Graph& g, const std::vector<Value*>& p) {
    return Emit(g, "Pad", {p[0], Ints(g, {2, -1, -1, -1})});
  });
  CheckGradients(
      {{2, 3, 4}}, {2, 4, 6},
      [](Graph& g, const std::vector<Value*>& p) {
        return Emit(g, "Pad", {p[0], Ints(g, {0, 1, 1, 1}), nullptr, Ints(g, {1, -1})});
      },
      18);
  CheckGradients(
      {{2, 3}}, {3, 2},
      [](Graph& g, const std::vector<Value*>& p) {
        return Emit(g, "Pad", {p[0]}, {{"pads", Attribute::Ints({1, -1, 0, 0})}});
      },
      9);
}

TEST(GradientCheck, Expand) {
  CheckGradients({{3, 1}}, {2, 3, 4}, [](Graph& g, const std::vector<Value*>& p) {
    return Emit(g, "Expand", {p[0], Ints(g, {2, 3, 4})});
  });
}

TEST(GradientCheck, Tile) {
  CheckGradients({{2, 3}}, {4, 6}, [](Graph& g, const std::vector<Value*>& p) {
    return Emit(g, "Tile", {p[0], Ints(g, {2, 2})});
  });
}

TEST(GradientCheck, Where) {
  CheckGradients({{2, 3}, {3}}, {2, 3}, [](Graph& g, const std::vector<Value*>& p) {
    Tensor c(DataType::kBool, {2, 3});
    const int bits[] = {1, 0, 0, 1, 1, 0};
    for (int i = 0; i < 6; ++i) c.SetDouble(i, bits[i]);
    return Emit(g, "Where", {g.AddInitializer("cond", std::move(c)), p[0], p[1]});
  });
}

TEST(GradientCheck, DropoutInferenceIsIdentity) {
  CheckGradients({{3, 4}}, {3, 4}, [](Graph& g, const std::vector<Value*>& p) { return Emit(g, "Dropout", {p[0]}); });
}

TEST(GradientCheck, DropoutTrainingThroughMask) {
  CheckGradients({{4, 5}}, {4, 5}, [](Graph& g, const std::vector<Value*>& p) {
    Tensor t(DataType::kBool, {});
    t.SetDouble(0, 1);
    Tensor ratio(DataType::kFloat32, {});
    ratio.SetDouble(0, 0.25);
    std::vector<Value*> outs = {g.AddValue("dy"), g.AddValue("mask")};
    g.AddNode("Dropout", {p[0], g.AddInitializer("ratio", std::move(ratio)), g.AddInitializer("train", std::move(t))},
              outs, "dropout");
    return outs[0];
  });
}

TEST(GradientCheck, DropoutTrainingWithoutMaskFails) {
  std::vector<Tensor> params = {test::RandomTensor(DataType::kFloat64, {3})};
  auto g = Build(
      params,
      [](Graph& g, const std::vector<Value*>& p) {
        Tensor t(DataType::kBool, {});
        t.SetDouble(0, 1);
        Tensor ratio(DataType::kFloat64, {});
        ratio.SetDouble(0, 0.5);
        return Emit(g, "Dropout",
                    {p[0], g.AddInitializer("ratio", std::move(ratio)), g.AddInitializer("train", std::move(t))});
      },
      test::RandomTensor(DataType::kFloat64, {3}), 17);
  AutodiffPass pass({"loss", "^r$"});
  EXPECT_THROW(pass.Run(*g), Error);
}

TEST(GradientCheck, MaxMin) {
  for (const char* op : {"Max", "Min"})
    CheckGradients({{2, 3}, {3}, {1}}, {2, 3}, [op](Graph& g, const std::vector<Value*>& p) {
      return Emit(g, op, {p[0], p[1], p[2]});
    });
}

TEST(GradientCheck, Cast) {
  CheckGradients({{3, 2}}, {3, 2}, [](Graph& g, const std::vector<Value*>& p) {
    return Emit(g, "Cast", {p[0]}, {{"to", Attribute::Int(static_cast<int64_t>(DataType::kFloat64))}});
  });
}

// Through float32 and back: dX = float64(float32(dY)) (= R rounded to float32).
TEST(GradientCheck, CastThroughFloat32) {
  Tensor r = test::RandomTensor(DataType::kFloat64, {4});
  auto g = Build(
      {test::RandomTensor(DataType::kFloat64, {4})},
      [](Graph& g, const std::vector<Value*>& p) {
        Value* f = Emit(g, "Cast", {p[0]}, {{"to", Attribute::Int(static_cast<int64_t>(DataType::kFloat32))}});
        return Emit(g, "Cast", {f}, {{"to", Attribute::Int(static_cast<int64_t>(DataType::kFloat64))}});
      },
      r, 17);
  AutodiffPass pass({"loss", "^r$"});
  ASSERT_TRUE(pass.Run(*g));
  Executor ex(*g);
  auto outs = ex.Run({});
  ASSERT_EQ(outs.size(), 2u);
  ASSERT_EQ(outs[1].dtype(), DataType::kFloat64);
  for (int64_t i = 0; i < 4; ++i)
    EXPECT_EQ(outs[1].GetDouble(i), static_cast<double>(static_cast<float>(r.GetDouble(i))));
}

}  // namespace
}  // namespace ot
