// Softmax, LogSoftmax and SoftmaxGrad as row programs of a cluster (graph/ops/fuse_table.cc): which graphs fuse and
// which do not (negative twins), the rows each program reduces, and -- differential, on fresh random inputs -- the
// fused graph giving the unfused kernels' exact bits in float32 (cpu_ops/row_sum.h: both take the same float steps in
// the same summation order; a gradient that is zero in exact arithmetic, as the attention's key bias, is rounding noise
// that Adam scales to full updates, so "close" is not enough for --fuse=lite to follow --fuse=off).
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>

#include "executor/executor.h"
#include "graph/graph.h"
#include "graph/op_registry.h"
#include "graph/verifier.h"
#include "tests/executor/fusion_test_util.h"
#include "tests/test_util.h"
#include "training/fusion.h"

namespace ot {
namespace {

using test::Count;
using test::Emit;
using test::Input;
using test::Make;

FusionReport Fuse(Graph& g, const std::string& mode) { return test::FuseStatic(g, mode); }

// The fused graph's outputs equal the unfused graph's bit for bit on the same fresh inputs (NaN where NaN).
void ExpectSameBits(const test::GraphBuildFn& build, const std::string& mode = "lite") {
  const uint64_t seed = std::random_device{}();
  auto plain = Make(build, seed), fused = Make(build, seed);
  Fuse(*fused, mode);
  const auto feeds = test::Feeds(*plain, seed + 1);
  Executor a(*plain), b(*fused);
  const std::vector<Tensor> want = a.Run(feeds), got = b.Run(feeds);
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) test::ExpectClose(got[i], want[i], 0.0, 0.0);
}

Value* Scalar(Graph& g, float v, DataType t = DataType::kFloat32) {
  return g.AddInitializer(g.UniqueName("k"), Tensor::Scalar(v).CastTo(t));
}

// The attention's scores: Softmax(x / scale + mask) over the keys, mask [T, T] broadcast over [B, H, T, T] (a
// period of T*T elements, which the interpreter reads in place when the tiles fit in it). T = 32: 1024-element
// periods; T = 20: 400, too short to shrink the tiles to (its loads wrap around). In a half `type` as AMP's
// attention: every op in that type, the softmax's statistics in float inside the kernel.
test::GraphBuildFn Attention(int64_t t, DataType type = DataType::kFloat32) {
  return [t, type](Graph& g) {
    Value* x = Input(g, "x", {3, 4, t, t}, type);
    Value* mask = Input(g, "mask", {t, t}, type);
    Value* s = Emit(g, "Add", {Emit(g, "Div", {x, Scalar(g, 4.f, type)}), mask});
    g.outputs.push_back(Emit(g, "Softmax", {s}, {{"axis", Attribute::Int(-1)}}));
  };
}

TEST(SoftmaxFusion, LiteFusesScaleMaskAndSoftmaxBitForBit) {
  for (int64_t t : {32, 20, 16, 8, 72}) {  // 32, 16, 8: MapRows of fixed length; 20, 72: of run-time length
    SCOPED_TRACE("T = " + std::to_string(t));
    auto g = Make(Attention(t));
    const FusionReport r = Fuse(*g, "lite");
    ASSERT_EQ(Count(*g, "FusedElementwise"), 1) << FormatFusionReport(r);
    EXPECT_EQ(g->nodes().size(), 1u);
    EXPECT_NE(r.clusters[0].program.find("reduce_axes 1"), std::string::npos) << r.clusters[0].program;
    EXPECT_NE(r.clusters[0].program.find("reduce_max"), std::string::npos);
    ExpectSameBits(Attention(t));
  }
}

TEST(SoftmaxFusion, LogSoftmaxFusesBitForBit) {
  auto build = [](Graph& g) {
    Value* x = Input(g, "x", {7, 45});  // a row that is not a multiple of 4 or 8 (the sum's and max's lane tails)
    g.outputs.push_back(Emit(g, "LogSoftmax", {Emit(g, "Mul", {x, Scalar(g, 3.f)})}, {{"axis", Attribute::Int(1)}}));
  };
  auto g = Make(build);
  Fuse(*g, "lite");
  EXPECT_EQ(Count(*g, "FusedElementwise"), 1);
  EXPECT_EQ(Count(*g, "LogSoftmax"), 0);
  ExpectSameBits(build);
}

// Before opset 13 Softmax normalises the coerced 2-D rows from `axis` on: over [6, 5, 7] with axis 1, rows of 35.
TEST(SoftmaxFusion, LegacySoftmaxReducesTheCoercedRows) {
  auto build = [](Graph& g) {
    g.opset_imports[""] = 11;
    Value* x = Input(g, "x", {6, 5, 7});
    g.outputs.push_back(Emit(g, "Softmax", {Emit(g, "Sub", {x, Scalar(g, 0.5f)})}, {{"axis", Attribute::Int(1)}}));
  };
  auto g = Make(build);
  const FusionReport r = Fuse(*g, "lite");
  ASSERT_EQ(Count(*g, "FusedElementwise"), 1) << FormatFusionReport(r);
  EXPECT_NE(r.clusters[0].program.find("reduce_axes 2"), std::string::npos) << r.clusters[0].program;
  ExpectSameBits(build);
}

TEST(SoftmaxFusion, NoFuseOfASoftmaxOverAnAxisThatIsNotTheLast) {
  auto build = [](Graph& g) {
    Value* x = Input(g, "x", {6, 5, 7});
    g.outputs.push_back(Emit(g, "Softmax", {Emit(g, "Sub", {x, Scalar(g, 0.5f)})}, {{"axis", Attribute::Int(1)}}));
  };
  auto g = Make(build);  // opset 17: one axis, here the middle one
  const FusionReport r = Fuse(*g, "lite");
  EXPECT_EQ(Count(*g, "FusedElementwise"), 0) << FormatFusionReport(r);
  EXPECT_EQ(Count(*g, "Softmax"), 1);
  ExpectSameBits(build);
}

// A softmax's backward: SoftmaxGrad(dY, Y), then the gradient of a scale applied before the softmax (Div).
test::GraphBuildFn SoftmaxBackward(DataType type = DataType::kFloat32) {
  return [type](Graph& g) {
    Value* dy = Input(g, "dy", {3, 4, 32, 32}, type);
    Value* y = Input(g, "y", {3, 4, 32, 32}, type);
    Value* dx = g.AddValue("dx");
    Node* sg = g.AddNode("SoftmaxGrad", {dy, y}, {dx}, "sg");
    sg->domain = kInternalDomain;
    sg->attrs = {{"axis", Attribute::Int(-1)}, {"log", Attribute::Int(0)}, {"legacy", Attribute::Int(0)}};
    g.outputs.push_back(Emit(g, "Div", {dx, Scalar(g, 4.f, type)}));
  };
}

TEST(SoftmaxFusion, SoftmaxGradAndTheScaleGradientFuseBitForBit) {
  auto g = Make(SoftmaxBackward());
  const FusionReport r = Fuse(*g, "lite");
  ASSERT_EQ(Count(*g, "FusedElementwise"), 1) << FormatFusionReport(r);
  EXPECT_EQ(Count(*g, "SoftmaxGrad") + Count(*g, "Div"), 0);
  ExpectSameBits(SoftmaxBackward());
}

// bf16 and f16 clusters round every op's result to the type in the op's own loop (the interpreter's bf16 path) or
// in a pass after it: the same bits as the unfused half kernels, forward and backward, on every row-loop length.
TEST(SoftmaxFusion, HalfAttentionFusesBitForBit) {
  for (DataType type : {DataType::kBFloat16, DataType::kFloat16}) {
    for (int64_t t : {32, 20, 16, 8}) {
      SCOPED_TRACE(std::string(DataTypeName(type)) + ", T = " + std::to_string(t));
      auto g = Make(Attention(t, type));
      ASSERT_EQ(Count(*g, "FusedElementwise"), 0);
      Fuse(*g, "lite");
      ASSERT_EQ(Count(*g, "FusedElementwise"), 1);
      ExpectSameBits(Attention(t, type));
    }
    auto g = Make(SoftmaxBackward(type));
    Fuse(*g, "lite");
    ASSERT_EQ(Count(*g, "FusedElementwise"), 1);
    ExpectSameBits(SoftmaxBackward(type));
  }
}

// A LogSoftmax's gradient (log = 1): dX = dY - exp(Y) sum(dY). Its unfused kernel works in double, so the fused
// program (float steps) is close, not equal.
TEST(SoftmaxFusion, LogSoftmaxGradFusesWithinFloatRounding) {
  auto build = [](Graph& g) {
    Value* dy = Input(g, "dy", {9, 30});
    Value* y = Input(g, "y", {9, 30});
    Value* dx = g.AddValue("dx");
    Node* sg = g.AddNode("SoftmaxGrad", {dy, Emit(g, "Sub", {y, Scalar(g, 3.f)})}, {dx}, "sg");
    sg->domain = kInternalDomain;
    sg->attrs = {{"axis", Attribute::Int(1)}, {"log", Attribute::Int(1)}, {"legacy", Attribute::Int(0)}};
    g.outputs.push_back(dx);
  };
  auto g = Make(build);
  Fuse(*g, "lite");
  EXPECT_EQ(Count(*g, "FusedElementwise"), 1);
  const uint64_t seed = std::random_device{}();
  auto plain = Make(build, seed), fused = Make(build, seed);
  Fuse(*fused, "lite");
  const auto feeds = test::Feeds(*plain, seed + 1);
  const std::vector<Tensor> want = Executor(*plain).Run(feeds), got = Executor(*fused).Run(feeds);
  // |dY| <= 2, exp(Y) <= e^-1, |sum(dY)| <= 60: the terms are below ~25, float rounding of them ~1e-5.
  test::ExpectClose(got[0], want[0], 1e-6, 1e-5);
}

// ReduceToShape stays opaque even where the plan's shapes make it a copy: the fused graph is made for the first
// batch's shapes and runs for later ones, where it may reduce (a batch of one against a static dim that the first
// batch's size matched).
TEST(SoftmaxFusion, NoFuseOfAReduceToShape) {
  auto build = [](Graph& g) {
    Value* x = Input(g, "x", {4, 8});
    Value* r = g.AddValue("r");
    Node* rts = g.AddNode("ReduceToShape", {Emit(g, "Mul", {x, Scalar(g, 2.f)}), Emit(g, "Shape", {x})}, {r}, "rts");
    rts->domain = kInternalDomain;
    g.outputs.push_back(Emit(g, "Add", {r, x}));
  };
  auto g = Make(build);
  const FusionReport r = Fuse(*g, "lite");
  EXPECT_EQ(Count(*g, "ReduceToShape"), 1) << FormatFusionReport(r);
  EXPECT_EQ(Count(*g, "FusedElementwise"), 0);
  ExpectSameBits(build);
}

}  // namespace
}  // namespace ot
