// channels_last: a small CNN with every construct the pass converts (Conv, BatchNormalization + Relu, an overlapping
// MaxPool, a residual Add, a squeeze-and-excitation branch: ReduceMean over H, W -> 1x1 Conv -> Sigmoid -> Mul, a
// Concat of two branches, AveragePool, a per-channel parameter, then GlobalAveragePool -> Flatten -> Gemm) trained for
// three steps with and without the pass, from the same weights on the same batches: the losses and every trained state
// agree (float32: 1e-5; bf16 under --amp: the half types' tolerance), and the converted step has the structure promised
// -- the layout ops carry channels_last, the only Transposes are at the region's two edges (and their gradients).
// Negative twins: a graph without a Conv, a MaxPool whose Indices are read.
#include "passes/channels_last.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/op_registry.h"
#include "graph/verifier.h"
#include "passes/step_graph.h"
#include "tests/passes/amp_step_util.h"
#include "tests/passes/grad_check.h"
#include "tests/test_util.h"

namespace ot {
namespace {

using test::Emit;

constexpr int64_t kN = 4, kClasses = 5;

Value* Init(Graph& g, const std::string& name, std::vector<int64_t> dims, double lo = -0.4, double hi = 0.4) {
  return g.AddInitializer(name, test::RandomTensor(DataType::kFloat32, dims, lo, hi));
}

Value* Conv(Graph& g, Value* x, const std::string& name, int64_t cin, int64_t cout, int64_t k, int64_t pad) {
  Value* y = Emit(g, "Conv", {x, Init(g, name + ".w", {cout, cin, k, k}), Init(g, name + ".b", {cout})},
                  {{"pads", Attribute::Ints({pad, pad, pad, pad})}});
  return y;
}

Value* BnRelu(Graph& g, Value* x, const std::string& name, int64_t c) {
  Value* y =
      Emit(g, "BatchNormalization",
           {x, Init(g, name + ".scale", {c}, 0.8, 1.2), Init(g, name + ".bias", {c}),
            g.AddInitializer(name + ".mean", Tensor(DataType::kFloat32, {c})), Init(g, name + ".var", {c}, 1, 1)},
           {{"training_mode", Attribute::Int(1)}});
  return Emit(g, "Relu", {y});
}

// A graph with the input x [4, 3, 12, 12] and its first layer (Conv 3 -> 8, BatchNormalization, Relu) as h; seeded
// weights.
std::unique_ptr<Graph> WithStem(uint64_t seed, Value*& h) {
  test::Rng().seed(seed);
  auto g = std::make_unique<Graph>();
  g->opset_imports[""] = 15;
  Value* x = g->AddValue("x");
  x->dtype = DataType::kFloat32;
  x->shape = Shape::Static({kN, 3, 12, 12});
  g->inputs.push_back(x);
  h = BnRelu(*g, Conv(*g, x, "c1", 3, 8, 3, 1), "bn1", 8);
  return g;
}

// x [4, 3, 12, 12] -> logits [4, 5]; seeded weights.
std::unique_ptr<Graph> SmallCnn(uint64_t seed) {
  Value* h = nullptr;
  auto g = WithStem(seed, h);
  h = Emit(*g, "MaxPool", {h},
           {{"kernel_shape", Attribute::Ints({3, 3})},
            {"strides", Attribute::Ints({2, 2})},
            {"pads", Attribute::Ints({1, 1, 1, 1})}});  // [4, 8, 6, 6]
  Value* r = BnRelu(*g, Conv(*g, h, "c2", 8, 8, 3, 1), "bn2", 8);
  h = Emit(*g, "Relu", {Emit(*g, "Add", {r, h})});
  // Squeeze-and-excitation.
  Value* pooled = Emit(*g, "ReduceMean", {h}, {{"axes", Attribute::Ints({2, 3})}, {"keepdims", Attribute::Int(1)}});
  Value* s = Emit(*g, "Sigmoid", {Conv(*g, pooled, "se", 8, 8, 1, 0)});
  h = Emit(*g, "Mul", {h, s});
  // A per-channel constant [8, 1, 1], and a Concat of two branches along the channels.
  h = Emit(*g, "Add", {h, Init(*g, "shift", {8, 1, 1})});
  h = Emit(*g, "Concat", {Conv(*g, h, "b1", 8, 4, 1, 0), Conv(*g, h, "b2", 8, 6, 3, 1)}, {{"axis", Attribute::Int(1)}});
  h = Emit(*g, "AveragePool", {h}, {{"kernel_shape", Attribute::Ints({2, 2})}, {"strides", Attribute::Ints({2, 2})}});
  h = Emit(*g, "Flatten", {Emit(*g, "GlobalAveragePool", {h})});
  Value* logits = g->AddValue("logits");
  g->AddNode("Gemm", {h, Init(*g, "fc.w", {10, kClasses}), Init(*g, "fc.b", {kClasses})}, {logits}, "fc");
  g->outputs.push_back(logits);
  InferShapes(*g, true);
  return g;
}

Value* Ints(Graph& g, const std::vector<int64_t>& v) {
  return g.AddInitializer(g.UniqueName("k"), Tensor::FromInt64(v, {static_cast<int64_t>(v.size())}));
}

// A ShuffleNetV2 unit as PyTorch exports it: x.chunk(2, dim=1) as two Slices whose bounds come from Shape -> Gather
// -> Add -> Div -> Mul, one half through a 1x1 Conv + BN + Relu, Concat, the channel shuffle (Reshape to [N, 2, C/2,
// H, W] from Shape-built targets -> Transpose(0,2,1,3,4) -> Reshape back to the Concat's Shape), then a Conv and
// x.mean([2, 3]) (ReduceMean without keepdims) -> Gemm. x [4, 3, 12, 12] -> logits [4, 5].
std::unique_ptr<Graph> ShuffleUnit(uint64_t seed) {
  Value* h = nullptr;
  auto g = WithStem(seed, h);
  auto dim = [&](Value* v, int64_t i) { return Emit(*g, "Gather", {Emit(*g, "Shape", {v}), Ints(*g, {i})}); };
  Value* half = Emit(*g, "Div", {Emit(*g, "Add", {dim(h, 1), Ints(*g, {1})}), Ints(*g, {2})});
  Value* e1 = Emit(*g, "Mul", {half, Ints(*g, {1})});
  Value* e2 = Emit(*g, "Mul", {half, Ints(*g, {2})});
  Value* a = Emit(*g, "Slice", {h, Ints(*g, {0}), e1, Ints(*g, {1})});
  Value* b = Emit(*g, "Slice", {h, e1, e2, Ints(*g, {1})});
  b = BnRelu(*g, Conv(*g, b, "c2", 4, 4, 1, 0), "bn2", 4);
  Value* cat = Emit(*g, "Concat", {a, b}, {{"axis", Attribute::Int(1)}});
  Value* s5 =
      Emit(*g, "Concat",
           {dim(cat, 0), Ints(*g, {2}), Emit(*g, "Div", {dim(cat, 1), Ints(*g, {2})}), dim(cat, 2), dim(cat, 3)},
           {{"axis", Attribute::Int(0)}});
  Value* t = Emit(*g, "Transpose", {Emit(*g, "Reshape", {cat, s5})}, {{"perm", Attribute::Ints({0, 2, 1, 3, 4})}});
  h = Emit(*g, "Reshape", {t, Emit(*g, "Shape", {cat})});
  h = BnRelu(*g, Conv(*g, h, "c3", 8, 10, 3, 1), "bn3", 10);
  h = Emit(*g, "ReduceMean", {h}, {{"axes", Attribute::Ints({2, 3})}, {"keepdims", Attribute::Int(0)}});
  Value* logits = g->AddValue("logits");
  g->AddNode("Gemm", {h, Init(*g, "fc.w", {10, kClasses}), Init(*g, "fc.b", {kClasses})}, {logits}, "fc");
  g->outputs.push_back(logits);
  InferShapes(*g, true);
  return g;
}

// A PoolFormer block as timm exports it: GroupNorm with one group (Reshape to [N, 1, -1] -> InstanceNormalization ->
// Reshape back to the input's Shape -> Mul and Add by the [C, 1, 1] weight and bias), AveragePool(3, stride 1, pad 1)
// minus its input, a [C, 1, 1] layer scale, the residual Add, then GlobalAveragePool -> Flatten -> Gemm.
std::unique_ptr<Graph> PoolFormerBlock(uint64_t seed) {
  Value* h = nullptr;
  auto g = WithStem(seed, h);
  Value* r = Emit(*g, "Reshape", {h, Ints(*g, {0, 1, -1})});
  r = Emit(*g, "InstanceNormalization", {r, Init(*g, "gn.s", {1}, 1, 1), Init(*g, "gn.b", {1}, 0, 0)});
  r = Emit(*g, "Reshape", {r, Emit(*g, "Shape", {h})});
  r = Emit(*g, "Add",
           {Emit(*g, "Mul", {r, Init(*g, "gn.weight", {8, 1, 1}, 0.8, 1.2)}), Init(*g, "gn.bias", {8, 1, 1})});
  Value* pooled = Emit(*g, "AveragePool", {r},
                       {{"kernel_shape", Attribute::Ints({3, 3})},
                        {"pads", Attribute::Ints({1, 1, 1, 1})},
                        {"count_include_pad", Attribute::Int(0)}});
  h = Emit(*g, "Add", {h, Emit(*g, "Mul", {Emit(*g, "Sub", {pooled, r}), Init(*g, "ls", {8, 1, 1})})});
  h = Emit(*g, "Flatten", {Emit(*g, "GlobalAveragePool", {Conv(*g, h, "c2", 8, 10, 1, 0)})});
  Value* logits = g->AddValue("logits");
  g->AddNode("Gemm", {h, Init(*g, "fc.w", {10, kClasses}), Init(*g, "fc.b", {kClasses})}, {logits}, "fc");
  g->outputs.push_back(logits);
  InferShapes(*g, true);
  return g;
}

std::map<std::string, Tensor> Batch(int step) {
  test::Rng().seed(1000 + step);
  Tensor y(DataType::kInt64, {kN});
  for (int64_t i = 0; i < kN; ++i) y.data<int64_t>()[i] = static_cast<int64_t>(test::Rng()() % kClasses);
  return {{"x", test::RandomTensor(DataType::kFloat32, {kN, 3, 12, 12}, -2, 2)}, {"y", y}};
}

struct Trained {
  std::vector<double> losses;
  std::map<std::string, Tensor> states;
  std::map<std::string, int> ops;  // op type -> nodes of the step
  int channels_last = 0;           // nodes with the attribute
  int to_nchw = 0;                 // the pass's Transposes back to NCHW (forward)
};

Trained Train(bool last, DataType amp, uint64_t seed, std::unique_ptr<Graph> (*model)(uint64_t) = SmallCnn) {
  auto g = model(seed);
  StepOptions o;
  o.loss.kind = "cross_entropy";
  o.loss.logits = "logits";
  o.loss.labels = "y";
  // SGD: Adam's first step is lr * sign(g), which a rounding difference flips for a gradient element near zero.
  o.optimizer.kind = OptimizerKind::kSgd;
  o.optimizer.lr = 0.05;
  o.amp.half = amp;
  o.channels_last = last;
  const StepGraphInfo info = BuildStepGraph(*g, o);
  VerifyGraph(*g);
  Trained t;
  for (const auto& n : g->nodes()) {
    ++t.ops[n->op_type];
    t.channels_last += n->attr_int("channels_last", 0) != 0;
    t.to_nchw += n->name.rfind("channels_last/to_nchw", 0) == 0 && n->name.find("/grad/") == std::string::npos;
  }
  for (int s = 0; s < 3; ++s) {
    const std::vector<Tensor> outs = amp_test::RunStep(*g, Batch(s));
    t.losses.push_back(amp_test::OutputValue(*g, outs, info.loss));
  }
  for (const auto& b : g->update_bindings) t.states[b.state->name] = b.state->initializer->Clone();
  return t;
}

// b (channels-last) trained as a (NCHW): the same losses at every step and the same trained states (parameters and
// moments keep their ONNX shapes), within float32's or bf16's tolerance.
void ExpectSameTraining(const Trained& a, const Trained& b, DataType amp) {
  const double tol = amp == DataType::kUndefined ? 1e-5 : 2e-2;
  ASSERT_EQ(a.losses.size(), b.losses.size());
  for (size_t s = 0; s < a.losses.size(); ++s) {
    EXPECT_TRUE(std::isfinite(b.losses[s]));
    EXPECT_NEAR(b.losses[s], a.losses[s], tol * std::abs(a.losses[s])) << "step " << s;
  }
  EXPECT_NE(a.losses.front(), a.losses.back());  // it trained
  ASSERT_EQ(a.states.size(), b.states.size());
  for (const auto& [name, t] : a.states) {
    ASSERT_TRUE(b.states.count(name)) << name;
    const Tensor& u = b.states.at(name);
    ASSERT_EQ(t.dims(), u.dims()) << name;
    for (int64_t i = 0; i < t.numel(); ++i)
      ASSERT_NEAR(u.GetDouble(i), t.GetDouble(i), tol * 10 * (std::abs(t.GetDouble(i)) + 1e-3)) << name << " " << i;
  }
}

TEST(ChannelsLastPass, CnnTrainsAsInNchw) {
  const uint64_t seed = test::Rng()();
  for (const DataType amp : {DataType::kUndefined, DataType::kBFloat16}) {
    SCOPED_TRACE(amp == DataType::kUndefined ? "float32" : "bf16");
    const Trained a = Train(false, amp, seed), b = Train(true, amp, seed);
    EXPECT_EQ(a.channels_last, 0);
    // Forward: 5 Convs, 2 BN, 2 pools; backward: their gradient ops (5 ConvGradWeight, 4 ConvGradData -- the first
    // Conv reads the input --, 2 BatchNormGrad, MaxPoolGrad, AveragePoolGrad).
    EXPECT_EQ(b.channels_last, 5 + 2 + 2 + 5 + 4 + 2 + 2);
    EXPECT_EQ(b.ops.count("GlobalAveragePool"), 0u);  // ReduceMean over H, W now
    // Transposes: the input and the [8, 1, 1] parameter into the region, the pooled features out of it; the
    // gradients of the last two (the input needs none).
    EXPECT_EQ(b.ops.count("Transpose") ? b.ops.at("Transpose") : 0, 5);
    ExpectSameTraining(a, b, amp);
  }
}

// The ShuffleNet unit stays channels-last from the first Conv to the mean: the chunk's Slices move their axis, the
// shuffle becomes Reshape [N, H, W, 2, C/2] -> Transpose(0,1,2,4,3) -> Reshape, the Shapes read the NHWC values
// (gathered back to NCHW order), and the mean over H, W reads NHWC into its [N, C] output. The only Transposes are
// the input's and the shuffle's own (and its gradient); the training matches NCHW.
TEST(ChannelsLastPass, ShuffleNetUnitStaysChannelsLast) {
  const uint64_t seed = test::Rng()();
  for (const DataType amp : {DataType::kUndefined, DataType::kBFloat16}) {
    SCOPED_TRACE(amp == DataType::kUndefined ? "float32" : "bf16");
    const Trained a = Train(false, amp, seed, ShuffleUnit), b = Train(true, amp, seed, ShuffleUnit);
    EXPECT_EQ(a.ops.at("Transpose"), 2);  // the shuffle's and its gradient
    EXPECT_EQ(b.ops.at("Transpose"), 3);  // and the input's
    // Forward: 3 Convs, 3 BN; backward: 3 ConvGradWeight, 2 ConvGradData (the first Conv reads the input), 3 BN grads.
    EXPECT_EQ(b.channels_last, 3 + 3 + 3 + 2 + 3);
    ExpectSameTraining(a, b, amp);
  }
}

// The PoolFormer block stays channels-last: GroupNorm's one group normalizes the same values in either layout, so
// its Reshapes and InstanceNormalization read the NHWC value (the Reshape back takes the NHWC shape), and nothing
// goes back to NCHW before the pooled features.
TEST(ChannelsLastPass, GroupNormOfOneGroupStaysChannelsLast) {
  const uint64_t seed = test::Rng()();
  for (const DataType amp : {DataType::kUndefined, DataType::kBFloat16}) {
    SCOPED_TRACE(amp == DataType::kUndefined ? "float32" : "bf16");
    const Trained a = Train(false, amp, seed, PoolFormerBlock), b = Train(true, amp, seed, PoolFormerBlock);
    EXPECT_EQ(a.ops.count("Transpose"), 0u);
    // The input's, those of the three [C, 1, 1] parameters and the pooled features' way out (with their gradients);
    // the only way back to NCHW is the last.
    EXPECT_EQ(b.ops.at("Transpose"), 1 + 3 * 2 + 2);
    EXPECT_EQ(b.to_nchw, 1);
    // Forward: 2 Convs, BN, AveragePool; backward: 2 ConvGradWeight, 1 ConvGradData, BN grad, AveragePoolGrad.
    EXPECT_EQ(b.channels_last, 2 + 1 + 1 + 2 + 1 + 1 + 1);
    ExpectSameTraining(a, b, amp);
  }
}

TEST(ChannelsLastPass, LeavesGraphsWithoutConvAndIndicesReaders) {
  {
    Graph g;
    g.opset_imports[""] = 15;
    Value* x = g.AddInitializer("x", test::RandomTensor(DataType::kFloat32, {1, 4, 6, 6}));
    g.outputs.push_back(Emit(g, "MaxPool", {Emit(g, "Relu", {x})}, {{"kernel_shape", Attribute::Ints({2, 2})}}));
    InferShapes(g, true);
    EXPECT_FALSE(ChannelsLastPass().Run(g));
  }
  {
    // Conv -> MaxPool with Indices read: the Conv converts, the pool stays NCHW behind a Transpose back.
    Graph g;
    g.opset_imports[""] = 15;
    Value* x = g.AddInitializer("x", test::RandomTensor(DataType::kFloat32, {1, 4, 6, 6}));
    Value* c = Emit(g, "Conv", {x, g.AddInitializer("w", test::RandomTensor(DataType::kFloat32, {4, 4, 1, 1}))});
    std::vector<Value*> pool = test::EmitN(g, "MaxPool", {c}, 2, {{"kernel_shape", Attribute::Ints({2, 2})}});
    g.outputs = {pool[0], pool[1]};
    InferShapes(g, true);
    ChannelsLastPass pass;
    EXPECT_TRUE(pass.Run(g));
    EXPECT_EQ(pass.converted(), 1);
    EXPECT_EQ(pass.transposes(), 2);
    VerifyGraph(g);
    for (const auto& n : g.nodes())
      if (n->op_type == "MaxPool") {
        EXPECT_EQ(n->attr_int("channels_last", 0), 0);
        EXPECT_EQ(n->inputs[0]->shape.StaticDims(), (std::vector<int64_t>{1, 4, 6, 6}));
      }
  }
}

TEST(ChannelsLastPass, RunsBeforeAutodiff) {
  const std::vector<std::string> names = StepPassNames();
  const auto at = [&](const std::string& n) { return std::find(names.begin(), names.end(), n) - names.begin(); };
  ASSERT_LT(at("channels_last"), static_cast<long>(names.size()));
  EXPECT_LT(at("pattern_fusion"), at("channels_last"));
  EXPECT_LT(at("channels_last"), at("autodiff"));
}

}  // namespace
}  // namespace ot
