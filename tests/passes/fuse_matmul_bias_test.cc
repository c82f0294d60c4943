// fuse_matmul_bias: MatMul + Add(bias) becomes Gemm (2-D A) or ai.onnxtrain.MatMulBias (A of rank > 2, or any
// rank with a following Relu folded in); other graphs stay as they are. Also the MatMulBias op itself: its CPU
// kernel in every float dtype against a float64 reference (outputs pre-filled with NaN, so every element must be
// written), its gradient rule by finite differences in float64, its schema's errors, and a differential test of the
// pass with the gradients autodiff builds.
#include "passes/fuse_matmul_bias.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <thread>

#include "executor/executor.h"
#include "executor/kernel_registry.h"
#include "graph/error.h"
#include "graph/graph.h"
#include "graph/op_registry.h"
#include "graph/verifier.h"
#include "passes/amp.h"
#include "passes/autodiff.h"
#include "passes/step_graph.h"
#include "tests/passes/grad_check.h"
#include "tests/test_util.h"

namespace ot {
namespace {

using test::Emit;

struct Spec {
  std::vector<int64_t> a = {4, 6};  // A's dims; B is [K, N] with K = a.back()
  int64_t n = 5;
  std::vector<int64_t> bias = {5};  // the bias's dims
  std::vector<int64_t> b;           // B's dims when not [K, N] (a batched B)
  bool bias_first = false;          // Add(bias, MatMul(...))
  bool relu = false;                // Relu after the Add
  bool mm_output = false;           // the MatMul output is also a graph output
  bool mm_used = false;             // ... or also feeds a Neg
  bool add_used = false;            // the Add output also feeds a Neg (with relu: the Relu stays apart)
  std::string add_op = "Add";       // Sub: no bias add
};

// A (input "a"), B and bias (initializers "w", "bias") -> the linear layer -> y (graph output 0).
Value* Linear(Graph& g, Value* a, Value* w, Value* bias, const Spec& s) {
  Value* mm = Emit(g, "MatMul", {a, w});
  mm->producer->name = "/fc1/MatMul";
  if (s.mm_output) g.outputs.push_back(mm);
  if (s.mm_used) g.outputs.push_back(Emit(g, "Neg", {mm}));
  Value* y = s.bias_first ? Emit(g, s.add_op, {bias, mm}) : Emit(g, s.add_op, {mm, bias});
  if (s.add_used) g.outputs.push_back(Emit(g, "Neg", {y}));
  if (s.relu) y = Emit(g, "Relu", {y});
  return y;
}

std::vector<int64_t> BDims(const Spec& s) { return s.b.empty() ? std::vector<int64_t>{s.a.back(), s.n} : s.b; }

std::unique_ptr<Graph> LinearGraph(const Spec& s, int opset = 17) {
  auto g = std::make_unique<Graph>();
  g->opset_imports[""] = opset;
  Value* a = g->AddValue("a");
  a->dtype = DataType::kFloat32;
  a->shape = Shape::Static(s.a);
  g->inputs.push_back(a);
  Value* w = g->AddInitializer("w", test::RandomTensor(DataType::kFloat32, BDims(s)));
  Value* bias = g->AddInitializer("bias", test::RandomTensor(DataType::kFloat32, s.bias));
  Value* y = Linear(*g, a, w, bias, s);
  g->outputs.insert(g->outputs.begin(), y);
  for (const auto& n : g->nodes()) n->opset = opset;
  InferShapes(*g);
  return g;
}

std::string Ops(const Graph& g) {
  std::string s;
  for (const Node* n : g.TopologicalOrder()) s += n->op_type + " ";
  return s;
}

TEST(FuseMatMulBiasPass, TwoDimensionalLayerBecomesGemm) {
  struct Case {
    std::string what;
    Spec s;
  };
  std::vector<Case> cases = {{"bias [N]", {}}};
  {
    Spec s;
    s.bias = {1, 5};
    cases.push_back({"bias [1, N]", s});
  }
  {
    Spec s;
    s.bias_first = true;
    cases.push_back({"Add(bias, MatMul)", s});
  }
  {
    Spec s;
    s.bias = {1, 5};
    s.relu = true;
    cases.push_back({"bias [1, N] with Relu: Gemm, the Relu stays", s});
  }
  {
    Spec s;
    s.relu = true;
    s.add_used = true;
    cases.push_back({"Add output also used: Gemm, the Relu stays", s});
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    auto g = LinearGraph(c.s);
    const Value* y = c.s.relu ? g->outputs[0]->producer->inputs[0] : g->outputs[0];
    FuseMatMulBiasPass pass;
    ASSERT_TRUE(pass.Run(*g));
    EXPECT_EQ(pass.gemms(), 1);
    EXPECT_EQ(pass.matmul_biases(), 0);
    const Node* n = y->producer;
    ASSERT_NE(n, nullptr);
    EXPECT_EQ(n->op_type, "Gemm");
    EXPECT_EQ(n->domain, "");
    EXPECT_EQ(n->opset, 17);
    EXPECT_EQ(n->name, "/fc1/Gemm");
    EXPECT_EQ(n->attr_int("transA", 0), 0);
    EXPECT_EQ(n->attr_int("transB", 0), 0);
    EXPECT_EQ(n->attr_float("alpha", 1), 1.0f);
    EXPECT_EQ(n->attr_float("beta", 1), 1.0f);
    ASSERT_EQ(n->inputs.size(), 3u);
    EXPECT_EQ(n->inputs[0], g->FindValue("a"));
    EXPECT_EQ(n->inputs[1], g->FindValue("w"));
    EXPECT_EQ(n->inputs[2], g->FindValue("bias"));
    const int relus = c.s.relu ? 1 : 0, negs = c.s.add_used ? 1 : 0;
    EXPECT_EQ(g->nodes().size(), static_cast<size_t>(1 + relus + negs)) << Ops(*g);
    VerifyGraph(*g);
    EXPECT_FALSE(FuseMatMulBiasPass().Run(*g));
  }
}

TEST(FuseMatMulBiasPass, BatchedActivationsOrAReluBecomeMatMulBias) {
  struct Case {
    std::string what;
    Spec s;
    std::string act;
  };
  std::vector<Case> cases;
  {
    Spec s;
    s.a = {2, 3, 6};
    cases.push_back({"[B, T, C] x [C, N] + [N]", s, "none"});
  }
  {
    Spec s;
    s.a = {2, 3, 6};
    s.bias_first = true;
    s.relu = true;
    cases.push_back({"[B, T, C] with Relu", s, "relu"});
  }
  {
    Spec s;
    s.a = {2, 2, 3, 6};
    cases.push_back({"rank 4", s, "none"});
  }
  {
    Spec s;
    s.relu = true;
    cases.push_back({"2-D with Relu", s, "relu"});
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    auto g = LinearGraph(c.s);
    Value* y = g->outputs[0];
    FuseMatMulBiasPass pass;
    ASSERT_TRUE(pass.Run(*g));
    EXPECT_EQ(pass.gemms(), 0);
    EXPECT_EQ(pass.matmul_biases(), 1);
    ASSERT_EQ(g->nodes().size(), 1u) << Ops(*g);
    const Node* n = g->nodes()[0].get();
    EXPECT_EQ(n->op_type, "MatMulBias");
    EXPECT_EQ(n->domain, kInternalDomain);
    EXPECT_EQ(n->opset, 1);
    EXPECT_EQ(n->name, "/fc1/MatMulBias");
    EXPECT_EQ(n->attr_string("activation", "?"), c.act);
    ASSERT_EQ(n->inputs.size(), 3u);
    EXPECT_EQ(n->inputs[0], g->FindValue("a"));
    EXPECT_EQ(n->inputs[1], g->FindValue("w"));
    EXPECT_EQ(n->inputs[2], g->FindValue("bias"));
    ASSERT_EQ(n->outputs.size(), 1u);
    EXPECT_EQ(n->outputs[0], y);  // y keeps its value (name, type, shape)
    InferShapes(*g, true);        // the schema infers what the MatMul + Add did
    std::vector<int64_t> want = c.s.a;
    want.back() = c.s.n;
    EXPECT_EQ(y->shape, Shape::Static(want));
    VerifyGraph(*g);
    EXPECT_FALSE(FuseMatMulBiasPass().Run(*g));
  }
}

void ExpectUnchanged(const Spec& s, const std::string& why) {
  SCOPED_TRACE(why);
  auto g = LinearGraph(s);
  const std::string ops = Ops(*g);
  FuseMatMulBiasPass pass;
  EXPECT_FALSE(pass.Run(*g));
  EXPECT_EQ(Ops(*g), ops);
}

TEST(FuseMatMulBiasPass, NoFuseWhenTheMatMulOutputIsUsedElsewhere) {
  {
    Spec s;
    s.mm_output = true;
    ExpectUnchanged(s, "the MatMul output is a graph output");
  }
  {
    Spec s;
    s.mm_used = true;
    ExpectUnchanged(s, "the MatMul output also feeds a Neg");
  }
  {
    Spec s;
    s.a = {2, 3, 6};
    s.mm_used = true;
    s.relu = true;
    ExpectUnchanged(s, "rank 3 with Relu, MatMul shared");
  }
}

TEST(FuseMatMulBiasPass, NoFuseWhenTheBiasDoesNotBroadcastAlongTheLastDim) {
  {
    Spec s;
    s.bias = {4, 5};
    ExpectUnchanged(s, "a full [M, N] addend");
  }
  {
    Spec s;
    s.bias = {4, 1};
    ExpectUnchanged(s, "a column [M, 1]");
  }
  {
    Spec s;
    s.bias = {1};
    ExpectUnchanged(s, "a scalar-like [1]");
  }
  {
    Spec s;
    s.a = {2, 3, 6};
    s.bias = {1, 5};
    ExpectUnchanged(s, "[1, N] with a rank-3 A (MatMulBias takes [N])");
  }
  {
    Spec s;
    s.a = {2, 3, 6};
    s.bias = {3, 5};
    ExpectUnchanged(s, "[T, N] with a rank-3 A");
  }
}

TEST(FuseMatMulBiasPass, NoFuseWhenBIsNotOneMatrix) {
  Spec s;
  s.a = {2, 3, 6};
  s.b = {2, 6, 5};  // a batched B: one matrix per batch
  ExpectUnchanged(s, "B [2, K, N]");
}

TEST(FuseMatMulBiasPass, NoFuseWhenTheAddIsNotAnAdd) {
  Spec s;
  s.add_op = "Sub";
  ExpectUnchanged(s, "MatMul - bias");
}

// Differential: loss = ReduceSum(layer(p0, p1, p2) * R) before and after the pass, with autodiff's gradients of A,
// B and the bias (A and the bias as params: every gradient of the fused op's rule is compared).
TEST(FuseMatMulBiasPass, DifferentialWithGradients) {
  std::vector<std::pair<std::string, Spec>> cases;
  cases.push_back({"2-D [N] -> Gemm", {}});
  {
    Spec s;
    s.bias = {1, 5};
    cases.push_back({"2-D [1, N] -> Gemm", s});
  }
  {
    Spec s;
    s.relu = true;
    cases.push_back({"2-D relu -> MatMulBias", s});
  }
  {
    Spec s;
    s.a = {2, 3, 6};
    cases.push_back({"rank 3 -> MatMulBias", s});
  }
  {
    Spec s;
    s.a = {2, 3, 6};
    s.relu = true;
    s.bias_first = true;
    cases.push_back({"rank 3 relu", s});
  }
  {
    Spec s;
    s.a = {2, 2, 3, 6};
    s.relu = true;
    cases.push_back({"rank 4 relu", s});
  }
  for (const auto& [what, s] : cases) {
    SCOPED_TRACE(what);
    const std::vector<Tensor> params = {test::RandomTensor(DataType::kFloat32, s.a, -2, 2),
                                        test::RandomTensor(DataType::kFloat32, BDims(s)),
                                        test::RandomTensor(DataType::kFloat32, s.bias)};
    std::vector<int64_t> out = s.a;
    out.back() = s.n;
    const Tensor r = test::RandomTensor(DataType::kFloat32, out, 0.5, 1.5);
    std::vector<Tensor> results[2];
    for (int fused = 0; fused < 2; ++fused) {
      auto g = test::Build(
          params, [&](Graph& g, const std::vector<Value*>& p) { return Linear(g, p[0], p[1], p[2], s); }, r, 17);
      InferShapes(*g);
      if (fused) {
        ASSERT_TRUE(FuseMatMulBiasPass().Run(*g));
        EXPECT_EQ(Ops(*g).find("MatMul "), std::string::npos) << Ops(*g);
      }
      AutodiffPass ad({"loss", "^(r|k_.*)$"});
      ASSERT_TRUE(ad.Run(*g));
      ASSERT_EQ(ad.params().size(), 3u);
      results[fused] = Executor(*g).Run({});
    }
    ASSERT_EQ(results[0].size(), 4u);
    ASSERT_EQ(results[1].size(), 4u);
    for (size_t i = 0; i < 4; ++i) {
      SCOPED_TRACE("output " + std::to_string(i));
      test::ExpectClose(results[1][i], results[0][i], 1e-5, 1e-5);
    }
  }
}

// In the step pipeline (pattern_fusion before autodiff and amp): an MLP's MatMul + Add + Relu is one MatMulBias
// {relu} whose backward is a Gemm (dW; x needs no gradient) and a ReluGrad, and under --amp=bf16 it runs in half
// (AMP allow) with A, B and the bias cast to bf16, like the MatMul after it.
TEST(FuseMatMulBiasPass, MlpStepUnderAmpRunsTheFusedLayerInHalf) {
  Spec s;
  s.a = {16, 12};
  s.n = 10;
  s.bias = {10};
  s.relu = true;
  auto g = LinearGraph(s);
  Value* h = g->outputs[0];
  Value* w2 = g->AddInitializer("w2", test::RandomTensor(DataType::kFloat32, {10, 4}));
  Value* logits = g->AddValue("logits");
  g->AddNode("MatMul", {h, w2}, {logits}, "mm2");
  g->outputs = {logits};
  InferShapes(*g, true);
  StepOptions o;
  o.loss.kind = "cross_entropy";
  o.loss.logits = "logits";
  o.loss.labels = "labels";
  o.amp.half = DataType::kBFloat16;
  StepGraphInfo info = BuildStepGraph(*g, o);
  VerifyGraph(*g);
  const AmpReport& r = info.amp;
  EXPECT_EQ(r.ops.at("MatMulBias").half, 1);
  EXPECT_EQ(r.ops.count("Relu"), 0u);
  EXPECT_EQ(r.ops.count("Add"), 0u);
  EXPECT_EQ(r.ops.at("ReluGrad").half, 1);
  EXPECT_EQ(r.ops.at("Gemm").half, 1);
  EXPECT_EQ(r.ops.at("MatMul").half, 3);  // mm2 forward, its dA and dB
  EXPECT_EQ(r.ops.at("MatMul").fp32, 0);
  for (const auto& n : g->nodes())
    if (n->op_type == "MatMulBias") {
      for (const Value* v : n->inputs) EXPECT_EQ(v->dtype, DataType::kBFloat16) << v->name;
    }
}

// ---- MatMulBias ----

// Runs the MatMulBias kernel directly on a, b, bias (outputs pre-filled with NaN) and returns Y.
Tensor RunMatMulBias(const Tensor& a, const Tensor& b, const Tensor& bias, const std::string& act) {
  Graph g;
  g.opset_imports[""] = 17;
  std::vector<Value*> ins;
  std::vector<TypeShape> ts;
  std::vector<TensorDesc> descs;
  for (const Tensor* t : {&a, &b, &bias}) {
    Value* v = g.AddValue(g.UniqueName("in"));
    v->dtype = t->dtype();
    v->shape = Shape::Static(t->dims());
    ins.push_back(v);
    ts.push_back({t->dtype(), v->shape, true});
    descs.push_back({t->dtype(), t->dims(), true});
  }
  Node* n = g.AddNode("MatMulBias", ins, {g.AddValue("y")}, "mmb");
  n->domain = kInternalDomain;
  n->opset = 1;
  n->attrs["activation"] = Attribute::String(act);
  InferContext ictx(*n, ts, {nullptr, nullptr, nullptr}, 1);
  OpRegistry::Global().Find(kInternalDomain, "MatMulBias")->infer(ictx);
  const TypeShape& o = ictx.outputs()[0];
  EXPECT_TRUE(o.present && o.shape.is_static());
  KernelContext kctx{*n, descs, {nullptr, nullptr, nullptr}, {{o.dtype, o.shape.StaticDims(), true}}};
  const KernelFactory* f = KernelRegistry::Cpu().Find(kInternalDomain, "MatMulBias");
  EXPECT_NE(f, nullptr);
  KernelInfo k = (*f)(kctx);
  EXPECT_EQ(k.exclusive, a.dtype() != DataType::kFloat64);  // oneDNN runs its own OpenMP team
  Tensor y(o.dtype, o.shape.StaticDims());
  for (int64_t i = 0; i < y.numel(); ++i) y.SetDouble(i, std::numeric_limits<double>::quiet_NaN());
  const void* in_ptrs[16] = {a.raw(), b.raw(), bias.raw()};
  void* out_ptrs[16] = {y.raw()};
  std::thread([&] { k.fn(KernelIO{in_ptrs, out_ptrs}); }).join();
  return y;
}

// Every float dtype against the float64 sum bias[j] + sum_k A[m, k] B[k, j] (then max(0, .)), computed from the
// same rounded inputs; halves at a tolerance for their rounding of the output (fp32 accumulation inside).
TEST(MatMulBias, KernelMatchesAFloat64ReferenceInEveryFloatType) {
  struct Case {
    DataType t;
    double rtol, atol;
  };
  const std::vector<int64_t> ad = {3, 5, 37}, bd = {37, 19};
  for (Case c : {Case{DataType::kFloat64, 1e-12, 1e-12}, Case{DataType::kFloat32, 1e-5, 1e-5},
                 Case{DataType::kFloat16, 2e-3, 4e-3}, Case{DataType::kBFloat16, 1.6e-2, 3e-2}})
    for (const char* act : {"none", "relu"}) {
      SCOPED_TRACE(DataTypeName(c.t) + " " + act);
      const Tensor a = test::RandomTensor(c.t, ad), b = test::RandomTensor(c.t, bd),
                   bias = test::RandomTensor(c.t, {19});
      const Tensor y = RunMatMulBias(a, b, bias, act);
      ASSERT_EQ(y.dtype(), c.t);
      ASSERT_EQ(y.dims(), (std::vector<int64_t>{3, 5, 19}));
      Tensor got(DataType::kFloat64, y.dims()), want(DataType::kFloat64, y.dims());
      int zeros = 0;
      for (int64_t m = 0; m < 15; ++m)
        for (int64_t j = 0; j < 19; ++j) {
          double s = bias.GetDouble(j);
          for (int64_t k = 0; k < 37; ++k) s += a.GetDouble(m * 37 + k) * b.GetDouble(k * 19 + j);
          if (std::string(act) == "relu" && s < 0) {
            s = 0;
            ++zeros;
          }
          want.SetDouble(m * 19 + j, s);
          got.SetDouble(m * 19 + j, y.GetDouble(m * 19 + j));
        }
      test::ExpectClose(got, want, c.rtol, c.atol);  // NaN (an element not written) fails here
      if (std::string(act) == "relu") {
        EXPECT_GT(zeros, 20);  // the mask did something
      }
    }
}

// A NaN in A stays NaN through the ReLU (max(0, NaN) propagates, as the Relu kernel does).
TEST(MatMulBias, ReluKeepsNaN) {
  for (DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}) {
    SCOPED_TRACE(DataTypeName(t));
    Tensor a = test::RandomTensor(t, {2, 3}), b = test::RandomTensor(t, {3, 4}), bias = test::RandomTensor(t, {4});
    a.SetDouble(0, std::numeric_limits<double>::quiet_NaN());
    const Tensor y = RunMatMulBias(a, b, bias, "relu");
    for (int j = 0; j < 4; ++j) EXPECT_TRUE(std::isnan(y.GetDouble(j))) << j;
    for (int j = 4; j < 8; ++j) EXPECT_GE(y.GetDouble(j), 0.0) << j;
  }
}

Value* EmitMatMulBias(Graph& g, const std::vector<Value*>& p, const std::string& act, bool trans_b = false) {
  Value* y = Emit(g, "MatMulBias", {p[0], p[1], p[2]},
                  {{"activation", Attribute::String(act)}, {"trans_b", Attribute::Int(trans_b ? 1 : 0)}});
  y->producer->domain = kInternalDomain;
  y->producer->opset = 1;
  return y;
}

// The rule's dA, dB and dbias against central differences in float64, for 2-D, 3-D and 4-D A and both activations
// (the relu mask taken from the output).
TEST(GradientCheck, MatMulBias) {
  for (const char* act : {"none", "relu"})
    for (std::vector<int64_t> a : {std::vector<int64_t>{4, 3}, {2, 3, 3}, {2, 2, 2, 3}}) {
      SCOPED_TRACE(std::string(act) + " rank " + std::to_string(a.size()));
      std::vector<int64_t> out = a;
      out.back() = 5;
      test::CheckGradients(
          {a, {3, 5}, {5}}, out, [=](Graph& g, const std::vector<Value*>& p) { return EmitMatMulBias(g, p, act); }, 17,
          -2, 2);
    }
}

// The same with B stored [N, K] (trans_b, what passes/fold_transpose makes of a Linear's transposed weight).
TEST(GradientCheck, MatMulBiasTransB) {
  for (const char* act : {"none", "relu"})
    for (std::vector<int64_t> a : {std::vector<int64_t>{4, 3}, {2, 3, 3}}) {
      SCOPED_TRACE(std::string(act) + " rank " + std::to_string(a.size()));
      std::vector<int64_t> out = a;
      out.back() = 5;
      test::CheckGradients(
          {a, {5, 3}, {5}}, out,
          [=](Graph& g, const std::vector<Value*>& p) { return EmitMatMulBias(g, p, act, true); }, 17, -2, 2);
    }
}

// The rule's backward for a rank-3 A is one [K, M'] x [M', N] Gemm for dB (no batched product reduced later) and a
// ReduceToShape for the bias.
TEST(GradientCheck, MatMulBiasBackwardOps) {
  auto g = test::Build(
      {test::RandomTensor(DataType::kFloat64, {2, 3, 4}), test::RandomTensor(DataType::kFloat64, {4, 5}),
       test::RandomTensor(DataType::kFloat64, {5})},
      [](Graph& g, const std::vector<Value*>& p) { return EmitMatMulBias(g, p, "relu"); },
      test::RandomTensor(DataType::kFloat64, {2, 3, 5}), 17);
  ASSERT_TRUE(AutodiffPass({"loss", "^(r|k_.*)$"}).Run(*g));
  int gemm = 0, relu_grad = 0, reduce = 0, matmul = 0;
  for (const auto& n : g->nodes()) {
    gemm += n->op_type == "Gemm";
    relu_grad += n->op_type == "ReluGrad";
    reduce += n->op_type == "ReduceToShape";
    matmul += n->op_type == "MatMul";
  }
  EXPECT_EQ(gemm, 1);
  EXPECT_EQ(relu_grad, 1);
  EXPECT_EQ(reduce, 1);
  EXPECT_EQ(matmul, 1);  // dA = G B^T
}

TEST(MatMulBias, AmpClassIsAllow) {
  const OpSchema* s = OpRegistry::Global().Find(kInternalDomain, "MatMulBias");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->amp, AmpClass::kAllow);
  EXPECT_TRUE(s->amp_fp32_inputs.empty());  // the bias goes to half with A and B, as Gemm's C does
  EXPECT_TRUE(static_cast<bool>(s->grad));
}

// Schema errors name the node and what is wrong.
TEST(MatMulBias, ErrorsNameTheNode) {
  struct Case {
    std::vector<int64_t> a, b, bias;
    std::string act, want;
  };
  for (const Case& c : {Case{{2, 3, 4}, {4, 5}, {6}, "none", "bias [6] does not match N"},
                        Case{{2, 3, 4}, {3, 5}, {5}, "none", "inner dimensions differ"},
                        Case{{2, 3, 4}, {2, 4, 5}, {5}, "none", "B must be 2-D"},
                        Case{{2, 3, 4}, {4, 5}, {1, 5}, "none", "bias must be 1-D"},
                        Case{{2, 3, 4}, {4, 5}, {5}, "gelu", "activation = 'gelu'"}}) {
    SCOPED_TRACE(c.want);
    Graph g;
    g.opset_imports[""] = 17;
    std::vector<Value*> ins;
    for (const auto& d : {c.a, c.b, c.bias}) {
      Value* v = g.AddValue(g.UniqueName("in"));
      v->dtype = DataType::kFloat32;
      v->shape = Shape::Static(d);
      g.inputs.push_back(v);
      ins.push_back(v);
    }
    Value* y = EmitMatMulBias(g, ins, c.act);
    y->producer->name = "/fc1/MatMulBias";
    g.outputs.push_back(y);
    try {
      InferShapes(g, true);
      FAIL() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("/fc1/MatMulBias"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(c.want), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace ot
