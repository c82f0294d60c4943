// Rematerialization (passes/rematerialize.h) on a fake sizer (tests/passes/fake_sizer.h): under a budget the step's
// planned peak passes, a cheap saved value is recomputed before its late reader; with room to spare nothing changes.
#include "passes/rematerialize.h"

#include <gtest/gtest.h>

#include "tests/passes/fake_sizer.h"

namespace ot {
namespace {

using test::Count;
using test::Emit;
using test::FakeSizer;
using test::Input;

constexpr int64_t kN = 4096;       // elements of a unit
constexpr int64_t kUnit = kN * 4;  // bytes

// a = Relu(x) is read early (Neg) and late (the final Mul); the peak is at m2, with a live across it:
// a, e = Neg(a), m1 = Mul(y, e) [4 units], m2 = Neg(m1) [4], s = ReduceSum(m2) [1], d = Mul(s, a).
std::unique_ptr<Graph> Build() {
  return test::Make([](Graph& g) {
    Value* a = g.AddValue("a");
    g.AddNode("Relu", {Input(g, "x", {kN})}, {a}, "relu_a");
    Value* m1 = Emit(g, "Mul", {Input(g, "y", {4, kN}), Emit(g, "Neg", {a})});
    Value* m2 = Emit(g, "Neg", {m1});
    Value* axes = g.AddInitializer("axes", Tensor::FromInt64({0}, {1}));
    Value* s = Emit(g, "ReduceSum", {m2, axes}, {{"keepdims", Attribute::Int(0)}});
    g.outputs.push_back(Emit(g, "Mul", {s, a}));
  });
}

TEST(RematerializePass, RecomputesACheapSavedValueUnderTheBudget) {
  auto g = Build();
  FakeSizer sizer;
  const FusionSizes s = sizer.Measure(*g);
  FusionReport r;
  const int64_t before = RematerializePass(0, s, &r).Peak(*g);
  const int64_t budget = before - kUnit / 2;
  RematerializePass pass(budget, s, &r);
  EXPECT_TRUE(pass.Run(*g));
  ASSERT_EQ(r.rematerialized.size(), 1u);
  EXPECT_EQ(r.rematerialized[0].rfind("a", 0), 0u) << r.rematerialized[0];
  EXPECT_EQ(Count(*g, "Relu"), 2);
  // The copy feeds the late reader; the original feeds the early one.
  const Node* last = g->outputs[0]->producer;
  EXPECT_NE(last->inputs[1]->name, "a");
  EXPECT_EQ(last->inputs[1]->producer->op_type, "Relu");
  EXPECT_LE(pass.Peak(*g), budget);
  EXPECT_EQ(r.peak_after, pass.Peak(*g));
}

TEST(RematerializePass, NothingWithinTheBudget) {
  auto g = Build();
  FakeSizer sizer;
  const FusionSizes s = sizer.Measure(*g);
  FusionReport r;
  const int64_t before = RematerializePass(0, s, &r).Peak(*g);
  EXPECT_FALSE(RematerializePass(before, s, &r).Run(*g));
  EXPECT_TRUE(r.rematerialized.empty());
  EXPECT_EQ(Count(*g, "Relu"), 1);
}

}  // namespace
}  // namespace ot
