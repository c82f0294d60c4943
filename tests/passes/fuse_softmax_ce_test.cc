// fuse_softmax_ce: LogSoftmax (or Log(Softmax)) along the class axis followed by NegativeLogLikelihoodLoss becomes
// one SoftmaxCrossEntropyLoss with the NLL's attributes; a softmax over another axis, log-probabilities read by
// another node, a Softmax output used elsewhere or mixed dtypes leave the graph as it is. The differential test runs
// the graph before and after, with the gradients autodiff builds for the scores, on seeded random inputs.
#include "passes/fuse_softmax_ce.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>

#include "executor/executor.h"
#include "graph/error.h"
#include "graph/op_registry.h"
#include "graph/verifier.h"
#include "passes/autodiff.h"
#include "tests/passes/grad_check.h"
#include "tests/test_util.h"

namespace ot {
namespace {

using test::Emit;

struct Spec {
  int opset = 13;
  std::vector<int64_t> dims = {6, 5};  // scores [N, C, d1...]
  bool has_axis = true;
  int64_t axis = 1;
  bool log_of_softmax = false;  // Log(Softmax(x)) instead of LogSoftmax(x)
  std::string reduction = "mean";
  bool ignore_index = false;  // ignore_index = 2 (and some targets are 2)
  bool weight = false;
  DataType weight_type = DataType::kFloat32;
  bool lp_output = false;   // the log-probabilities are also a graph output
  bool lp_used = false;     // ... or also feed a Neg node
  bool probs_used = false;  // the Softmax output (Log form) is also a graph output
  bool sigmoid = false;     // Log(Sigmoid(x)): no softmax at all
};

// Target [N, d1...] with classes in [0, C), a few equal to 2 (the ignore_index when set).
Tensor Target(const Spec& s) {
  std::vector<int64_t> td = {s.dims[0]};
  for (size_t i = 2; i < s.dims.size(); ++i) td.push_back(s.dims[i]);
  Tensor t(DataType::kInt64, td);
  for (int64_t i = 0; i < t.numel(); ++i) t.SetDouble(i, static_cast<double>((i * 7 + 3) % s.dims[1]));
  return t;
}

// The loss subgraph over `x`: appends nodes to g; returns the loss. Initializers named k_* are constants for the
// autodiff pass of the differential test.
Value* LossOf(Graph& g, Value* x, const Spec& s) {
  test::Attrs sa;
  if (s.has_axis) sa["axis"] = Attribute::Int(s.axis);
  Value* lp;
  if (s.sigmoid) {
    lp = Emit(g, "Log", {Emit(g, "Sigmoid", {x})});
  } else if (s.log_of_softmax) {
    Value* p = Emit(g, "Softmax", {x}, sa);
    if (s.probs_used) g.outputs.push_back(p);
    lp = Emit(g, "Log", {p});
  } else {
    lp = Emit(g, "LogSoftmax", {x}, sa);
  }
  lp->producer->name = "/model/log_softmax/LogSoftmax";
  if (s.lp_output) g.outputs.push_back(lp);
  if (s.lp_used) g.outputs.push_back(Emit(g, "Neg", {lp}));
  std::vector<Value*> ins = {lp, g.AddInitializer("k_target", Target(s))};
  if (s.weight) {
    Tensor w = test::RandomTensor(s.weight_type, {s.dims[1]}, 0.5, 2.0);
    ins.push_back(g.AddInitializer("k_weight", std::move(w)));
  }
  test::Attrs la = {{"reduction", Attribute::String(s.reduction)}};
  if (s.ignore_index) la["ignore_index"] = Attribute::Int(2);
  Value* loss = Emit(g, "NegativeLogLikelihoodLoss", ins, la);
  loss->producer->name = "/loss/NegativeLogLikelihoodLoss";
  return loss;
}

// scores (graph input) -> the pattern -> loss (graph output 0).
std::unique_ptr<Graph> CeGraph(const Spec& s) {
  auto g = std::make_unique<Graph>();
  g->opset_imports[""] = s.opset;
  Value* x = g->AddValue("scores");
  x->dtype = DataType::kFloat32;
  x->shape = Shape::Static(s.dims);
  g->inputs.push_back(x);
  Value* loss = LossOf(*g, x, s);
  g->outputs.insert(g->outputs.begin(), loss);
  for (const auto& n : g->nodes()) n->opset = s.opset;
  InferShapes(*g);
  return g;
}

std::string Ops(const Graph& g) {
  std::string s;
  for (const Node* n : g.TopologicalOrder()) s += n->op_type + " ";
  return s;
}

TEST(FuseSoftmaxCrossEntropyPass, LogSoftmaxThenNllBecomesOneNode) {
  struct Case {
    std::string what;
    Spec s;
  };
  std::vector<Case> cases;
  cases.push_back({"2-D, axis 1, mean", {}});
  {
    Spec s;
    s.axis = -1;
    s.reduction = "sum";
    s.weight = true;
    cases.push_back({"2-D, axis -1, sum, weight", s});
  }
  {
    Spec s;
    s.opset = 12;
    s.has_axis = false;
    s.ignore_index = true;
    cases.push_back({"opset 12, default axis", s});
  }
  {
    Spec s;
    s.opset = 12;
    s.axis = -1;
    s.reduction = "none";
    cases.push_back({"opset 12, axis -1, none", s});
  }
  {
    Spec s;
    s.dims = {3, 5, 4};
    s.weight = true;
    s.ignore_index = true;
    cases.push_back({"[N, C, D], axis 1", s});
  }
  {
    Spec s;
    s.dims = {3, 5, 4};
    s.axis = -2;
    s.reduction = "none";
    cases.push_back({"[N, C, D], axis -2", s});
  }
  {
    Spec s;
    s.log_of_softmax = true;
    s.weight = true;
    cases.push_back({"Log(Softmax)", s});
  }
  {
    Spec s;
    s.opset = 12;
    s.has_axis = false;
    s.log_of_softmax = true;
    cases.push_back({"Log(Softmax), opset 12", s});
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    auto g = CeGraph(c.s);
    Value* loss = g->outputs[0];
    FuseSoftmaxCrossEntropyPass pass;
    ASSERT_TRUE(pass.Run(*g));
    EXPECT_EQ(pass.fused(), 1);
    ASSERT_EQ(g->nodes().size(), 1u) << Ops(*g);
    const Node* n = g->nodes()[0].get();
    EXPECT_EQ(n->op_type, "SoftmaxCrossEntropyLoss");
    EXPECT_EQ(n->domain, "");
    EXPECT_EQ(n->opset, c.s.opset);
    EXPECT_EQ(n->name, "/loss/SoftmaxCrossEntropyLoss");
    EXPECT_EQ(n->attr_string("reduction", "?"), c.s.reduction);
    EXPECT_EQ(n->has_attr("ignore_index"), c.s.ignore_index);
    if (c.s.ignore_index) {
      EXPECT_EQ(n->attr_int("ignore_index", 0), 2);
    }
    ASSERT_EQ(n->inputs.size(), c.s.weight ? 3u : 2u);
    EXPECT_EQ(n->inputs[0], g->FindValue("scores"));
    EXPECT_EQ(n->inputs[1], g->FindValue("k_target"));
    if (c.s.weight) {
      EXPECT_EQ(n->inputs[2], g->FindValue("k_weight"));
    }
    ASSERT_EQ(n->outputs.size(), 1u);
    EXPECT_EQ(n->outputs[0], loss);  // the loss keeps its value (name, type, shape)
    VerifyGraph(*g);
    EXPECT_FALSE(FuseSoftmaxCrossEntropyPass().Run(*g));
  }
}

// Log-probabilities that are also a graph output (a model returning them beside its loss) become the fused node's
// second output log_prob, the same LogSoftmax along axis 1.
TEST(FuseSoftmaxCrossEntropyPass, PublicLogProbsBecomeTheLogProbOutput) {
  for (bool log_of_softmax : {false, true}) {
    Spec s;
    s.lp_output = true;
    s.log_of_softmax = log_of_softmax;
    auto g = CeGraph(s);
    Value* lp = g->outputs[1];
    ASSERT_TRUE(FuseSoftmaxCrossEntropyPass().Run(*g));
    ASSERT_EQ(g->nodes().size(), 1u) << Ops(*g);
    const Node* n = g->nodes()[0].get();
    ASSERT_EQ(n->outputs.size(), 2u);
    EXPECT_EQ(n->outputs[1], lp);
    EXPECT_EQ(g->outputs[1], lp);
    VerifyGraph(*g);
  }
}

void ExpectUnchanged(const Spec& s, const std::string& why) {
  SCOPED_TRACE(why);
  auto g = CeGraph(s);
  const std::string ops = Ops(*g);
  FuseSoftmaxCrossEntropyPass pass;
  EXPECT_FALSE(pass.Run(*g));
  EXPECT_EQ(pass.fused(), 0);
  EXPECT_EQ(Ops(*g), ops);
}

TEST(FuseSoftmaxCrossEntropyPass, NoFuseWhenTheSoftmaxIsOverAnotherAxis) {
  {
    Spec s;
    s.axis = 0;
    ExpectUnchanged(s, "2-D, axis 0 (over the batch)");
  }
  {
    Spec s;
    s.dims = {3, 5, 4};
    s.axis = -1;
    ExpectUnchanged(s, "[N, C, D], axis -1");
  }
  {
    Spec s;
    s.dims = {3, 5, 4};
    s.axis = 2;
    s.log_of_softmax = true;
    ExpectUnchanged(s, "Log(Softmax) axis 2");
  }
  // Before opset 13 axis 1 of a 3-D input flattens [C, D] into one softmax: not the class axis.
  {
    Spec s;
    s.opset = 12;
    s.dims = {3, 5, 4};
    ExpectUnchanged(s, "opset 12, [N, C, D], axis 1 (coerced to 2-D)");
  }
  {
    Spec s;
    s.opset = 12;
    s.dims = {3, 5, 4};
    s.has_axis = false;
    ExpectUnchanged(s, "opset 12, 3-D, default");
  }
}

TEST(FuseSoftmaxCrossEntropyPass, NoFuseWhenTheLogProbsAreUsedElsewhere) {
  {
    Spec s;
    s.lp_used = true;
    ExpectUnchanged(s, "log-probs also feed a Neg");
  }
  {
    Spec s;
    s.lp_used = true;
    s.log_of_softmax = true;
    ExpectUnchanged(s, "Log(Softmax) output also feeds a Neg");
  }
  {
    Spec s;
    s.log_of_softmax = true;
    s.probs_used = true;
    ExpectUnchanged(s, "the Softmax output is a graph output");
  }
}

TEST(FuseSoftmaxCrossEntropyPass, NoFuseWhenTheDtypesDiffer) {
  Spec s;
  s.weight = true;
  s.weight_type = DataType::kFloat64;
  ExpectUnchanged(s, "float64 weight for float32 scores");
}

TEST(FuseSoftmaxCrossEntropyPass, NoFuseWhenTheLogIsNotOfASoftmax) {
  Spec s;
  s.sigmoid = true;
  ExpectUnchanged(s, "Log(Sigmoid(x))");
}

// The log-probabilities held as training state (the next value of a state) must stay.
TEST(FuseSoftmaxCrossEntropyPass, NoFuseWhenTheLogProbsAreState) {
  auto g = CeGraph({});
  Value* lp = g->nodes()[0]->outputs[0];
  ASSERT_EQ(lp->producer->op_type, "LogSoftmax");
  Value* st = g->AddInitializer("k_state", Tensor(DataType::kFloat32, {6, 5}));
  g->update_bindings.push_back({st, lp});
  EXPECT_FALSE(FuseSoftmaxCrossEntropyPass().Run(*g));
  EXPECT_EQ(g->nodes().size(), 2u);
}

// Differential: loss = ReduceSum(pattern(p0) * R) before and after the pass, with autodiff's gradient of the scores
// p0 (the fused node's LossGrad against LogSoftmax's SoftmaxGrad of the NLL's one-hot gradient).
TEST(FuseSoftmaxCrossEntropyPass, DifferentialWithGradients) {
  std::vector<std::pair<std::string, Spec>> cases;
  {
    Spec s;
    s.weight = true;
    s.ignore_index = true;
    cases.push_back({"2-D mean, weight, ignore_index", s});
  }
  {
    Spec s;
    s.dims = {3, 5, 4};
    s.reduction = "none";
    s.weight = true;
    cases.push_back({"[N, C, D] none", s});
  }
  {
    Spec s;
    s.reduction = "sum";
    s.log_of_softmax = true;
    cases.push_back({"Log(Softmax) sum", s});
  }
  {
    Spec s;
    s.opset = 12;
    s.has_axis = false;
    s.axis = -1;
    cases.push_back({"opset 12", s});
  }
  {
    Spec s;
    s.lp_output = true;
    cases.push_back({"log_prob kept", s});
  }
  for (const auto& [what, s] : cases) {
    SCOPED_TRACE(what);
    const Tensor x = test::RandomTensor(DataType::kFloat32, s.dims, -4, 4);
    std::vector<int64_t> out_dims;
    if (s.reduction == "none") {
      out_dims = {s.dims[0]};
      for (size_t i = 2; i < s.dims.size(); ++i) out_dims.push_back(s.dims[i]);
    }
    const Tensor r = test::RandomTensor(DataType::kFloat32, out_dims, 0.5, 1.5);
    // The same weight in both graphs: draw it once, copy it in.
    Tensor w = test::RandomTensor(DataType::kFloat32, {s.dims[1]}, 0.5, 2.0);
    std::vector<Tensor> results[2];
    for (int fused = 0; fused < 2; ++fused) {
      auto g = test::Build(
          {x}, [&](Graph& g, const std::vector<Value*>& p) { return LossOf(g, p[0], s); }, r, s.opset);
      for (const auto& n : g->nodes()) n->opset = s.opset;
      if (Value* wv = g->FindValue("k_weight")) *wv->initializer = w.Clone();
      InferShapes(*g);
      if (fused) {
        ASSERT_TRUE(FuseSoftmaxCrossEntropyPass().Run(*g));
      }
      AutodiffPass ad({"loss", "^(r|k_.*)$"});
      ASSERT_TRUE(ad.Run(*g));
      ASSERT_EQ(ad.params().size(), 1u);
      results[fused] = Executor(*g).Run({});
    }
    ASSERT_EQ(results[0].size(), results[1].size());
    for (size_t i = 0; i < results[0].size(); ++i) {
      SCOPED_TRACE("output " + std::to_string(i));
      test::ExpectClose(results[1][i], results[0][i], 1e-5, 1e-6);
    }
  }
}

// The fused node reports a user error (a target that does not match the scores) naming itself.
TEST(FuseSoftmaxCrossEntropyPass, ErrorsOfTheFusedNodeNameIt) {
  auto g = CeGraph({});
  ASSERT_TRUE(FuseSoftmaxCrossEntropyPass().Run(*g));
  *g->FindValue("k_target")->initializer = Tensor(DataType::kInt64, {4});
  g->FindValue("k_target")->shape = Shape::Static({4});
  try {
    InferShapes(*g, true);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/loss/SoftmaxCrossEntropyLoss"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("target shape"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ot
