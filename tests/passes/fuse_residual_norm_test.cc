// The residual folds (passes/fuse_residual_norm.h) on a fake sizer (tests/passes/fake_sizer.h): Add -> LayerNorm and
// LayerNormGrad -> Sum rewritten, refused for a broadcast residual, a float16 sum and an addend computed after the
// gradient. The fused kernels' numbers are tested in tests/executor/residual_norm_fold_test.cc.
#include "passes/fuse_residual_norm.h"

#include <gtest/gtest.h>

#include "tests/passes/fake_sizer.h"

namespace ot {
namespace {

using test::Count;
using test::Emit;
using test::FakeSizer;
using test::Input;

struct Block {
  bool broadcast_r = false;   // R of shape [c]
  bool addend_after = false;  // the Sum's other addend computed from LayerNormGrad's dScale
};

// S = X + R, Y = LayerNorm(S), S + Y (S read after the norm); LayerNormGrad(dY, S, Scale) -> dX; Sum(dX, G).
std::unique_ptr<Graph> Build(const Block& b) {
  return test::Make([&](Graph& g) {
    const std::vector<int64_t> d{3, 5, 67};
    Value* x = Input(g, "x", d);
    Value* r = Input(g, "r", b.broadcast_r ? std::vector<int64_t>{67} : d);
    Value* dy = Input(g, "dy", d);
    Value* gin = Input(g, "g", d);
    Value* scale = g.AddInitializer("scale", test::RandomTensor(DataType::kFloat32, {67}));
    Value* bias = g.AddInitializer("bias", test::RandomTensor(DataType::kFloat32, {67}));
    Value* s = Emit(g, "Add", {x, r});
    Value* y = Emit(g, "LayerNormalization", {s, scale, bias}, {{"axis", Attribute::Int(-1)}});
    g.outputs.push_back(Emit(g, "Add", {s, y}));
    auto grads = test::EmitInternal(g, "LayerNormGrad", {dy, s, scale}, 3, {{"axis", Attribute::Int(-1)}});
    g.outputs.push_back(grads[1]);
    g.outputs.push_back(grads[2]);
    Value* addend = b.addend_after ? Emit(g, "Add", {gin, grads[1]}) : gin;
    g.outputs.push_back(Emit(g, "Sum", {grads[0], addend}));
  });
}

FusionReport Fold(Graph& g, FakeSizer& sizer) {
  FusionReport r;
  const FusionSizes s = sizer.Measure(g);
  ResidualNormFoldPass(FuseOptions(), s, s.planned_peak, &r).Run(g);
  return r;
}

TEST(ResidualNormFoldPass, FoldsTheAddAndTheGradientSum) {
  auto g = Build({});
  FakeSizer sizer;
  FusionReport r = Fold(*g, sizer);
  EXPECT_EQ(Count(*g, "Sum"), 0) << test::Refusals(r);
  EXPECT_EQ(Count(*g, "Add"), 1);  // the next residual S + Y stays
  const Node* ln = test::Find(*g, "ResidualLayerNorm");
  ASSERT_NE(ln, nullptr) << test::Refusals(r);
  ASSERT_EQ(ln->outputs.size(), 4u);
  EXPECT_EQ(ln->outputs[3]->name, test::Find(*g, "Add")->inputs[0]->name);  // S, still read by S + Y
  const Node* lg = test::Find(*g, "LayerNormGrad");
  ASSERT_NE(lg, nullptr);
  ASSERT_GE(lg->inputs.size(), 6u);
  EXPECT_EQ(lg->inputs[5]->name, "g");
  EXPECT_EQ(lg->outputs[0], g->outputs.back());
  EXPECT_EQ(r.clusters.size(), 2u);
}

TEST(ResidualNormFoldPass, RefusesWhatItCannotFold) {
  {
    Block b;
    b.broadcast_r = true;
    auto g = Build(b);
    FakeSizer sizer;
    FusionReport r = Fold(*g, sizer);
    EXPECT_EQ(test::Find(*g, "ResidualLayerNorm"), nullptr);
    EXPECT_NE(test::Refusals(r).find("the sum's own shape"), std::string::npos) << test::Refusals(r);
  }
  {
    Block b;
    b.addend_after = true;
    auto g = Build(b);
    FakeSizer sizer;
    FusionReport r = Fold(*g, sizer);
    EXPECT_EQ(Count(*g, "Sum"), 1);
    EXPECT_NE(test::Refusals(r).find("computed after LayerNormGrad"), std::string::npos) << test::Refusals(r);
  }
  {
    auto g = Build({});
    FakeSizer sizer;  // the facts say the sum is float16: nothing folds
    sizer.edit = [](const Graph& g, FusionSizes& s) {
      for (auto& [v, f] : s.values)
        if (v->producer && v->producer->op_type == "Add") f.dims.dtype = DataType::kFloat16;
      (void)g;
    };
    FusionReport r = Fold(*g, sizer);
    EXPECT_EQ(test::Find(*g, "ResidualLayerNorm"), nullptr);
    EXPECT_NE(test::Refusals(r).find("float32 operands"), std::string::npos) << test::Refusals(r);
  }
}

}  // namespace
}  // namespace ot
