// amp pass: the colouring rules (golden graphs, each with a negative twin), the Casts it inserts, and a
// differential test of the MLP step graph in fp32 and in bf16/fp16.
#include "passes/amp.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "executor/executor.h"
#include "graph/error.h"
#include "graph/op_registry.h"
#include "graph/ops/optimizer_layout.h"
#include "graph/verifier.h"
#include "passes/step_graph.h"
#include "tests/test_util.h"

namespace ot {
namespace {
using namespace ot::test;

Value* Emit(Graph& g, const std::string& op, std::vector<Value*> ins, const std::string& name = "") {
  const std::string n = name.empty() ? g.UniqueName(op) : name;
  Value* out = g.AddValue(n + "_out");
  g.AddNode(op, ins, {out}, n);
  return out;
}

Node* NodeNamed(const Graph& g, const std::string& name) {
  for (const auto& n : g.nodes())
    if (n->name == name) return n.get();
  ADD_FAILURE() << "no node " << name;
  return nullptr;
}

// The dtype a node reads its float input i in.
DataType InType(const Graph& g, const std::string& node, int i) { return NodeNamed(g, node)->inputs[i]->dtype; }
DataType OutType(const Graph& g, const std::string& node) { return NodeNamed(g, node)->outputs[0]->dtype; }

int CountCasts(const Graph& g) {
  int k = 0;
  for (const auto& n : g.nodes()) k += n->op_type == "Cast";
  return k;
}

// No value is cast twice to the same type (one Cast per producer output, shared by its consumers).
void ExpectCastsShared(const Graph& g) {
  std::set<std::pair<const Value*, int64_t>> seen;
  for (const auto& n : g.nodes())
    if (n->op_type == "Cast") {
      EXPECT_TRUE(seen.insert({n->inputs[0], n->attr_int("to", 0)}).second) << "second Cast of " << n->inputs[0]->name;
    }
}

std::unique_ptr<Graph> NewGraph() {
  auto g = std::make_unique<Graph>();
  g->opset_imports[""] = 17;
  return g;
}

Value* Input(Graph& g, const std::string& name, std::vector<int64_t> dims) {
  Value* v = g.AddValue(name);
  v->dtype = DataType::kFloat32;
  v->shape = Shape::Static(dims);
  g.inputs.push_back(v);
  return v;
}

AmpOptions Bf16() {
  AmpOptions o;
  o.half = DataType::kBFloat16;
  return o;
}

// MatMul (allow) -> Add (infer) -> Tanh (infer) -> MatMul (allow): the infer ops between half nodes are half, and
// the graph output keeps its name and float32 type.
TEST(AmpPass, InferBetweenAllowIsHalf) {
  auto g = NewGraph();
  Value* x = Input(*g, "x", {4, 8});
  Value* w1 = g->AddInitializer("w1", RandomTensor(DataType::kFloat32, {8, 8}));
  Value* b = g->AddInitializer("b", RandomTensor(DataType::kFloat32, {8}));
  Value* w2 = g->AddInitializer("w2", RandomTensor(DataType::kFloat32, {8, 3}));
  Value* h = Emit(*g, "Tanh", {Emit(*g, "Add", {Emit(*g, "MatMul", {x, w1}, "mm1"), b}, "add")}, "tanh");
  Value* y = Emit(*g, "MatMul", {h, w2}, "mm2");
  g->outputs.push_back(y);
  InferShapes(*g, true);
  AmpPass amp(Bf16());
  EXPECT_TRUE(amp.Run(*g));
  VerifyGraph(*g);
  for (const char* n : {"mm1", "add", "tanh"}) EXPECT_EQ(OutType(*g, n), DataType::kBFloat16) << n;
  EXPECT_EQ(InType(*g, "mm2", 0), DataType::kBFloat16);
  EXPECT_EQ(InType(*g, "mm2", 1), DataType::kBFloat16);
  ASSERT_EQ(g->outputs.size(), 1u);
  EXPECT_EQ(g->outputs[0]->name, "mm2_out");
  EXPECT_EQ(g->outputs[0]->dtype, DataType::kFloat32);
  EXPECT_EQ(g->outputs[0]->producer->op_type, "Cast");
  // Casts: x, w1, b, w2 to bf16 and the output back: 5.
  EXPECT_EQ(CountCasts(*g), 5);
  EXPECT_EQ(amp.report().casts_inserted, 5);
  EXPECT_EQ(amp.report().ops.at("MatMul").half, 2);
  ExpectCastsShared(*g);
}

TEST(AmpPass, NoChangeWhenAmpIsOff) {
  auto g = NewGraph();
  Value* x = Input(*g, "x", {4, 8});
  Value* w1 = g->AddInitializer("w1", RandomTensor(DataType::kFloat32, {8, 8}));
  g->outputs.push_back(Emit(*g, "Relu", {Emit(*g, "MatMul", {x, w1}, "mm1")}, "relu"));
  InferShapes(*g, true);
  const size_t nodes = g->nodes().size();
  AmpPass amp(AmpOptions{});
  EXPECT_FALSE(amp.Run(*g));
  EXPECT_EQ(g->nodes().size(), nodes);
  EXPECT_EQ(OutType(*g, "mm1"), DataType::kFloat32);
}

// Deny propagates forward: MatMul -> Exp (deny) -> Add -> Relu (infer, fp32 now) -> Reshape (clear right before the
// allow node: left free, then half) -> MatMul.
TEST(AmpPass, DenyPropagatesThroughInferUntilAllow) {
  auto g = NewGraph();
  Value* x = Input(*g, "x", {4, 8});
  Value* w1 = g->AddInitializer("w1", RandomTensor(DataType::kFloat32, {8, 8}));
  Value* w2 = g->AddInitializer("w2", RandomTensor(DataType::kFloat32, {8, 3}));
  Value* c = g->AddInitializer("c", RandomTensor(DataType::kFloat32, {8}));
  Tensor shape(DataType::kInt64, {2});
  shape.SetDouble(0, 4);
  shape.SetDouble(1, 8);
  Value* s = g->AddInitializer("shape", std::move(shape));
  Value* e = Emit(*g, "Exp", {Emit(*g, "MatMul", {x, w1}, "mm1")}, "exp");
  Value* r = Emit(*g, "Relu", {Emit(*g, "Add", {e, c}, "add")}, "relu");
  Value* y = Emit(*g, "MatMul", {Emit(*g, "Reshape", {r, s}, "reshape"), w2}, "mm2");
  g->outputs.push_back(y);
  InferShapes(*g, true);
  AmpPass amp(Bf16());
  amp.Run(*g);
  VerifyGraph(*g);
  EXPECT_EQ(OutType(*g, "mm1"), DataType::kBFloat16);
  EXPECT_EQ(InType(*g, "exp", 0), DataType::kFloat32);
  EXPECT_EQ(OutType(*g, "add"), DataType::kFloat32);
  EXPECT_EQ(OutType(*g, "relu"), DataType::kFloat32);
  EXPECT_EQ(OutType(*g, "reshape"), DataType::kBFloat16);
  EXPECT_EQ(OutType(*g, "mm2"), DataType::kBFloat16);
}

// Without the deny op the same chain is half all the way (the twin of the test above).
TEST(AmpPass, NoDenyWithoutDenyOp) {
  auto g = NewGraph();
  Value* x = Input(*g, "x", {4, 8});
  Value* w1 = g->AddInitializer("w1", RandomTensor(DataType::kFloat32, {8, 8}));
  Value* w2 = g->AddInitializer("w2", RandomTensor(DataType::kFloat32, {8, 3}));
  Value* c = g->AddInitializer("c", RandomTensor(DataType::kFloat32, {8}));
  Value* e = Emit(*g, "Sigmoid", {Emit(*g, "MatMul", {x, w1}, "mm1")}, "sig");
  Value* r = Emit(*g, "Relu", {Emit(*g, "Add", {e, c}, "add")}, "relu");
  g->outputs.push_back(Emit(*g, "MatMul", {r, w2}, "mm2"));
  InferShapes(*g, true);
  AmpPass(Bf16()).Run(*g);
  for (const char* n : {"sig", "add", "relu"}) EXPECT_EQ(OutType(*g, n), DataType::kBFloat16) << n;
}

// The softmax that feeds a loss stays fp32 (and the loss too); a softmax feeding a MatMul is half.
TEST(AmpPass, SoftmaxFeedingALossStaysFp32) {
  auto g = NewGraph();
  Value* x = Input(*g, "x", {4, 8});
  Value* labels = g->AddValue("labels");
  labels->dtype = DataType::kInt64;
  labels->shape = Shape::Static({4});
  g->inputs.push_back(labels);
  Value* w1 = g->AddInitializer("w1", RandomTensor(DataType::kFloat32, {8, 5}));
  Value* ls = Emit(*g, "LogSoftmax", {Emit(*g, "MatMul", {x, w1}, "mm1")}, "logsoftmax");
  g->outputs.push_back(Emit(*g, "NegativeLogLikelihoodLoss", {ls, labels}, "nll"));
  InferShapes(*g, true);
  AmpPass(Bf16()).Run(*g);
  EXPECT_EQ(OutType(*g, "mm1"), DataType::kBFloat16);
  EXPECT_EQ(InType(*g, "logsoftmax", 0), DataType::kFloat32);
  EXPECT_EQ(InType(*g, "nll", 0), DataType::kFloat32);
}

TEST(AmpPass, SoftmaxFeedingAMatMulIsHalf) {
  auto g = NewGraph();
  Value* x = Input(*g, "x", {4, 8});
  Value* w1 = g->AddInitializer("w1", RandomTensor(DataType::kFloat32, {8, 8}));
  Value* w2 = g->AddInitializer("w2", RandomTensor(DataType::kFloat32, {8, 3}));
  Value* sm = Emit(*g, "Softmax", {Emit(*g, "MatMul", {x, w1}, "mm1")}, "softmax");
  g->outputs.push_back(Emit(*g, "MatMul", {sm, w2}, "mm2"));
  InferShapes(*g, true);
  AmpPass(Bf16()).Run(*g);
  EXPECT_EQ(OutType(*g, "softmax"), DataType::kBFloat16);
}

// --keep-fp32 / --keep-fp32-node turn an op or a node fp32; unknown names are errors naming them.
TEST(AmpPass, KeepFp32Overrides) {
  for (int by_node = 0; by_node < 2; ++by_node) {
    auto g = NewGraph();
    Value* x = Input(*g, "x", {4, 8});
    Value* w1 = g->AddInitializer("w1", RandomTensor(DataType::kFloat32, {8, 8}));
    Value* w2 = g->AddInitializer("w2", RandomTensor(DataType::kFloat32, {8, 3}));
    Value* r = Emit(*g, "Relu", {Emit(*g, "MatMul", {x, w1}, "mm1")}, "relu");
    g->outputs.push_back(Emit(*g, "MatMul", {r, w2}, "mm2"));
    InferShapes(*g, true);
    AmpOptions o = Bf16();
    if (by_node)
      o.keep_fp32_nodes = {"relu"};
    else
      o.keep_fp32_ops = {"Relu"};
    AmpPass(o).Run(*g);
    EXPECT_EQ(OutType(*g, "relu"), DataType::kFloat32);
    EXPECT_EQ(OutType(*g, "mm1"), DataType::kBFloat16);
  }
  auto g = NewGraph();
  Value* x = Input(*g, "x", {4, 8});
  g->outputs.push_back(Emit(*g, "Relu", {x}, "relu"));
  AmpOptions o = Bf16();
  o.keep_fp32_nodes = {"nope"};
  try {
    AmpPass(o).Run(*g);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'nope'"), std::string::npos) << e.what();
  }
  o = Bf16();
  o.keep_fp32_ops = {"Reluu"};
  EXPECT_THROW(AmpPass(o).Run(*g), Error);
  EXPECT_THROW(ParseAmpDtype("fp8"), Error);
}

// A model that feeds fp16 data through Cast(fp16 -> fp32) into a MatMul: the fp16 run reads the data directly
// (the chain Cast(fp32 -> fp16) of Cast(fp16 -> fp32) folds away); in bf16 it becomes one Cast(fp16 -> bf16).
TEST(AmpPass, FoldsCastChains) {
  for (DataType h : {DataType::kFloat16, DataType::kBFloat16}) {
    auto g = NewGraph();
    Value* x = g->AddValue("x");
    x->dtype = DataType::kFloat16;
    x->shape = Shape::Static({4, 8});
    g->inputs.push_back(x);
    Value* w1 = g->AddInitializer("w1", RandomTensor(DataType::kFloat32, {8, 3}));
    Value* xf = g->AddValue("xf");
    g->AddNode("Cast", {x}, {xf}, "model_cast")->attrs["to"] = Attribute::Int(1);
    g->outputs.push_back(Emit(*g, "MatMul", {xf, w1}, "mm1"));
    InferShapes(*g, true);
    AmpOptions o;
    o.half = h;
    AmpPass amp(o);
    amp.Run(*g);
    VerifyGraph(*g);
    Value* in = NodeNamed(*g, "mm1")->inputs[0];
    if (h == DataType::kFloat16) {
      EXPECT_EQ(in, x);
    } else {
      ASSERT_NE(in->producer, nullptr);
      EXPECT_EQ(in->producer->op_type, "Cast");
      EXPECT_EQ(in->producer->inputs[0], x);
    }
    EXPECT_EQ(amp.report().casts_folded, 1);
  }
}

// BatchNormalization in a half region reads X in half and keeps its scale, bias and statistics fp32.
TEST(AmpPass, BatchNormKeepsStatisticsFp32) {
  auto g = NewGraph();
  Value* x = Input(*g, "x", {2, 3, 5, 5});
  Value* w = g->AddInitializer("w", RandomTensor(DataType::kFloat32, {4, 3, 3, 3}));
  Value* w2 = g->AddInitializer("w2", RandomTensor(DataType::kFloat32, {4, 4, 3, 3}));
  std::vector<Value*> bn_in = {Emit(*g, "Conv", {x, w}, "conv1")};
  for (const char* n : {"scale", "bias", "mean", "var"})
    bn_in.push_back(g->AddInitializer(n, RandomTensor(DataType::kFloat32, {4}, 0.5, 1)));
  Value* y = Emit(*g, "BatchNormalization", bn_in, "bn");
  g->outputs.push_back(Emit(*g, "Conv", {Emit(*g, "Relu", {y}, "relu"), w2}, "conv2"));
  InferShapes(*g, true);
  AmpPass(Bf16()).Run(*g);
  EXPECT_EQ(InType(*g, "bn", 0), DataType::kBFloat16);
  for (int i = 1; i <= 4; ++i) EXPECT_EQ(InType(*g, "bn", i), DataType::kFloat32) << i;
  EXPECT_EQ(OutType(*g, "bn"), DataType::kBFloat16);
  EXPECT_EQ(OutType(*g, "relu"), DataType::kBFloat16);
}

// The MLP's step graph: the forward and backward GEMMs (MatMulBias after pattern fusion) and ReLU's gradient are half;
// the loss, its gradient and the optimizer fp32; the update bindings keep float32 targets.
std::unique_ptr<Graph> MlpModel() {
  auto g = NewGraph();
  Value* x = Input(*g, "x", {16, 12});
  Value* w1 = g->AddInitializer("w1", RandomTensor(DataType::kFloat32, {12, 10}, -0.5, 0.5));
  Value* b1 = g->AddInitializer("b1", RandomTensor(DataType::kFloat32, {10}, -0.5, 0.5));
  Value* w2 = g->AddInitializer("w2", RandomTensor(DataType::kFloat32, {10, 4}, -0.5, 0.5));
  Value* h = Emit(*g, "Relu", {Emit(*g, "Add", {Emit(*g, "MatMul", {x, w1}, "mm1"), b1}, "add1")}, "relu");
  Value* logits = g->AddValue("logits");
  g->AddNode("MatMul", {h, w2}, {logits}, "mm2");
  g->outputs.push_back(logits);
  InferShapes(*g, true);
  return g;
}

StepOptions MlpStep(DataType half) {
  StepOptions o;
  o.loss.kind = "cross_entropy";
  o.loss.logits = "logits";
  o.loss.labels = "labels";
  o.optimizer.kind = OptimizerKind::kAdam;
  o.optimizer.lr = 0.01;
  o.amp.half = half;
  return o;
}

TEST(AmpPass, MlpStepGraphColours) {
  auto g = MlpModel();
  StepGraphInfo info = BuildStepGraph(*g, MlpStep(DataType::kBFloat16));
  VerifyGraph(*g);
  const AmpReport& r = info.amp;
  // Pattern fusion made the first layer one MatMulBias {relu}: its backward is a ReluGrad (from Y) and one Gemm for
  // dW1 (x needs no gradient); the second layer's MatMul has two backward MatMuls.
  EXPECT_EQ(r.ops.at("MatMulBias").half, 1);
  EXPECT_EQ(r.ops.at("MatMul").half, 3);
  EXPECT_EQ(r.ops.at("MatMul").fp32, 0);
  EXPECT_EQ(r.ops.at("Gemm").half, 1);
  EXPECT_EQ(r.ops.count("Relu"), 0u);
  EXPECT_EQ(r.ops.at("ReluGrad").half, 1);
  EXPECT_EQ(r.ops.at("SoftmaxCrossEntropyLoss").fp32, 1);
  EXPECT_EQ(r.ops.at("LossGrad").fp32, 1);
  EXPECT_EQ(r.ops.at("OptimizerUpdate").fp32, 1);
  ExpectCastsShared(*g);
  for (const auto& n : g->nodes()) {
    if (n->op_type != "OptimizerUpdate") continue;
    // Only the weight gradients may be bf16 (the update reads them as they are: passes/half_grad_update.h).
    const OptimizerLayout l = OptimizerLayout::Of(*n);
    for (size_t i = 0; i < n->inputs.size(); ++i)
      if (static_cast<int>(i) < l.grad_in(0) || static_cast<int>(i) >= l.grad_in(l.n))
        EXPECT_NE(n->inputs[i]->dtype, DataType::kBFloat16) << n->inputs[i]->name;
  }
  for (const auto& b : g->update_bindings) EXPECT_EQ(b.next->dtype, b.state->dtype) << b.state->name;
  EXPECT_EQ(g->FindValue("logits")->dtype, DataType::kFloat32);
  EXPECT_EQ(g->FindValue(info.loss)->dtype, DataType::kFloat32);
  const std::string table = FormatAmpReport(r, DataType::kBFloat16);
  EXPECT_NE(table.find("MatMul"), std::string::npos);
  EXPECT_NE(table.find("Casts inserted: " + std::to_string(r.casts_inserted)), std::string::npos);
}

// Differential: the step graph before and after the amp pass, one step on the same seeded data: the loss, the
// gradient norm and every updated state agree within the half type's precision.
TEST(AmpPass, DifferentialMlpStep) {
  for (DataType h : {DataType::kBFloat16, DataType::kFloat16}) {
    Rng().seed(7);
    auto g32 = MlpModel();
    Rng().seed(7);
    auto gh = MlpModel();
    // SGD: Adam's first step is lr * sign(g), which a rounding can flip for a gradient element near zero.
    StepOptions o32 = MlpStep(DataType::kUndefined), oh = MlpStep(h);
    o32.optimizer.kind = oh.optimizer.kind = OptimizerKind::kSgd;
    o32.optimizer.lr = oh.optimizer.lr = 0.1;
    BuildStepGraph(*g32, o32);
    BuildStepGraph(*gh, oh);
    Tensor x = RandomTensor(DataType::kFloat32, {16, 12});
    Tensor labels(DataType::kInt64, {16});
    for (int i = 0; i < 16; ++i) labels.SetDouble(i, (i * 7) % 4);
    // Outputs and next states by name; the amp step's extra states (half copies, loss scale) have no fp32 twin.
    auto run = [&](Graph& g) {
      const size_t base = g.outputs.size();
      std::vector<std::string> names;
      for (const Value* o : g.outputs) names.push_back(o->name);
      for (const auto& ub : g.update_bindings) {
        g.outputs.push_back(ub.next);
        names.push_back(ub.state->name);
      }
      Executor ex(g);
      std::vector<Tensor> outs = ex.Run({{"x", x}, {"labels", labels}});
      g.outputs.resize(base);
      std::map<std::string, Tensor> r;
      for (size_t i = 0; i < outs.size(); ++i) r[names[i]] = outs[i];
      return r;
    };
    std::map<std::string, Tensor> a = run(*g32), b = run(*gh);
    const double tol = h == DataType::kBFloat16 ? 3e-2 : 4e-3;
    int compared = 0;
    for (const auto& [name, t] : b) {
      if (!a.count(name)) {
        EXPECT_TRUE(name.find(".half") != std::string::npos || name.rfind("loss_scale", 0) == 0) << name;
        continue;
      }
      SCOPED_TRACE(name);
      ASSERT_EQ(t.dtype(), a[name].dtype());
      if (IsFloat(t.dtype())) ExpectClose(t, a[name], tol, tol * 0.1);
      ++compared;
    }
    EXPECT_EQ(compared, static_cast<int>(a.size()));
  }
}

}  // namespace
}  // namespace ot
