// loss pass: appends cross-entropy / MSE on named logits (values checked by running the graph), picks the
// model's scalar output, and names what is wrong otherwise.
#include "passes/loss.h"

#include <gtest/gtest.h>

#include <cmath>

#include "executor/executor.h"
#include "graph/error.h"
#include "tests/test_util.h"

namespace ot {
namespace {

// x:[batch,4] -> MatMul W:[4,3] -> logits
std::unique_ptr<Graph> Logits() {
  auto g = std::make_unique<Graph>();
  g->opset_imports[""] = 13;
  Value* x = g->AddValue("x");
  x->dtype = DataType::kFloat32;
  x->shape = Shape({Dim::Symbol("batch"), Dim(4)});
  g->inputs.push_back(x);
  Value* w = g->AddInitializer("w", test::RandomTensor(DataType::kFloat32, {4, 3}));
  Value* logits = g->AddValue("logits");
  g->AddNode("MatMul", {x, w}, {logits}, "mm");
  g->outputs.push_back(logits);
  return g;
}

TEST(LossPass, AppendsCrossEntropyOnNamedLogits) {
  auto g = Logits();
  LossPass pass({"", "cross_entropy", "logits", "y"});
  EXPECT_TRUE(pass.Run(*g));
  EXPECT_EQ(pass.loss_name(), "loss");
  Value* y = g->FindValue("y");
  ASSERT_NE(y, nullptr);
  EXPECT_EQ(y->dtype, DataType::kInt64);
  EXPECT_EQ(y->shape.ToString(), "[batch]");
  Tensor x = test::RandomTensor(DataType::kFloat32, {5, 4});
  Tensor labels = Tensor::FromInt64({0, 2, 1, 1, 0}, {5});
  std::vector<Tensor> out = Executor(*g).Run({{"x", x}, {"y", labels}});
  ASSERT_EQ(out.size(), 2u);
  // Reference: mean over rows of logsumexp(z) - z[label], z = x W, in double.
  const Tensor& w = *g->FindValue("w")->initializer;
  double ref = 0;
  for (int r = 0; r < 5; ++r) {
    double z[3], m = -1e300, s = 0;
    for (int c = 0; c < 3; ++c) {
      z[c] = 0;
      for (int k = 0; k < 4; ++k) z[c] += x.GetDouble(r * 4 + k) * w.GetDouble(k * 3 + c);
      m = std::max(m, z[c]);
    }
    for (double v : z) s += std::exp(v - m);
    ref += m + std::log(s) - z[labels.GetInt64(r)];
  }
  EXPECT_NEAR(out[1].GetDouble(0), ref / 5, 1e-5);
}

TEST(LossPass, AppendsMse) {
  auto g = Logits();
  LossPass pass({"", "mse", "logits", "target"});
  pass.Run(*g);
  Tensor x = test::RandomTensor(DataType::kFloat32, {2, 4}), t = test::RandomTensor(DataType::kFloat32, {2, 3});
  std::vector<Tensor> out = Executor(*g).Run({{"x", x}, {"target", t}});
  double ref = 0;
  for (int i = 0; i < 6; ++i) ref += std::pow(out[0].GetDouble(i) - t.GetDouble(i), 2);
  EXPECT_NEAR(out[1].GetDouble(0), ref / 6, 1e-5);
}

// Negative twin: a model with its scalar loss output is left as it is.
TEST(LossPass, NoChangeWhenTheModelHasItsScalarLoss) {
  auto g = Logits();
  Value* s = g->AddValue("total");
  Node* n = g->AddNode("ReduceSum", {g->FindValue("logits")}, {s}, "sum");
  n->attrs["keepdims"] = Attribute::Int(0);
  g->outputs.push_back(s);
  const size_t nodes = g->nodes().size(), inputs = g->inputs.size();
  LossPass pass({"", "", "", ""});
  EXPECT_FALSE(pass.Run(*g));
  EXPECT_EQ(pass.loss_name(), "total");
  EXPECT_EQ(g->nodes().size(), nodes);
  EXPECT_EQ(g->inputs.size(), inputs);
}

// x: [frames, batch, 3] -> Add(bias) -> logits, time-major as --loss ctc reads them.
std::unique_ptr<Graph> FrameLogits() {
  auto g = std::make_unique<Graph>();
  g->opset_imports[""] = 17;
  Value* x = g->AddValue("x");
  x->dtype = DataType::kFloat32;
  x->shape = Shape({Dim::Symbol("frames"), Dim::Symbol("batch"), Dim(3)});
  g->inputs.push_back(x);
  Value* b = g->AddInitializer("b", test::RandomTensor(DataType::kFloat32, {3}));
  Value* logits = g->AddValue("logits");
  g->AddNode("Add", {x, b}, {logits}, "add");
  g->outputs.push_back(logits);
  return g;
}

TEST(LossPass, AppendsCtcWithItsLengthInputs) {
  for (const char* red : {"mean", "sum"}) {
    auto g = FrameLogits();
    LossOptions o{"", "ctc", "logits", "y"};
    o.logit_lengths = "frames_n";
    o.label_lengths = "labels_n";
    o.ctc_reduction = red;
    LossPass pass(o);
    EXPECT_TRUE(pass.Run(*g));
    EXPECT_EQ(g->FindValue("y")->shape.ToString(), "[batch,y_width]");
    EXPECT_EQ(g->FindValue("y")->dtype, DataType::kInt64);
    EXPECT_EQ(g->FindValue("frames_n")->shape.ToString(), "[batch]");
    EXPECT_EQ(g->FindValue("labels_n")->dtype, DataType::kInt64);
    // Sample 0: one frame, label 2; sample 1: two frames (of 2), label 1.
    Tensor x = test::RandomTensor(DataType::kFloat32, {2, 2, 3});
    std::vector<Tensor> out = Executor(*g).Run({{"x", x},
                                                {"y", Tensor::FromInt64({2, 0, 1, 0}, {2, 2})},
                                                {"frames_n", Tensor::FromInt64({1, 2}, {2})},
                                                {"labels_n", Tensor::FromInt64({1, 1}, {2})}});
    const Tensor& bias = *g->FindValue("b")->initializer;
    auto prob = [&](int t, int b, int c) {  // softmax of x + bias
      double z = 0;
      for (int k = 0; k < 3; ++k) z += std::exp(x.GetDouble((t * 2 + b) * 3 + k) + bias.GetDouble(k));
      return std::exp(x.GetDouble((t * 2 + b) * 3 + c) + bias.GetDouble(c)) / z;
    };
    const double nll0 = -std::log(prob(0, 0, 2));
    const double nll1 =
        -std::log(prob(0, 1, 1) * prob(1, 1, 1) + prob(0, 1, 1) * prob(1, 1, 0) + prob(0, 1, 0) * prob(1, 1, 1));
    const double want = std::string(red) == "mean" ? (nll0 + nll1) / 2 : nll0 + nll1;
    EXPECT_NEAR(out[1].GetDouble(0), want, 1e-5 * want) << red;
  }
}

TEST(LossPass, CtcErrorsNameTheFlag) {
  auto msg = [](LossOptions o, bool rank2 = false) -> std::string {
    auto g = rank2 ? Logits() : FrameLogits();
    try {
      LossPass(o).Run(*g);
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  LossOptions o{"", "ctc", "logits", "y"};
  o.logit_lengths = "tn";
  o.label_lengths = "ln";
  EXPECT_EQ(msg(o), "no error");
  EXPECT_NE(msg(o, true).find("--loss ctc reads [frames, batch, classes]"), std::string::npos);
  LossOptions bad = o;
  bad.blank = 3;
  EXPECT_NE(msg(bad).find("--blank 3 is not a class of 'logits'"), std::string::npos);
  bad = o;
  bad.label_lengths = "tn";
  EXPECT_NE(msg(bad).find("--label-lengths: give a new input name"), std::string::npos);
  bad = o;
  bad.logit_lengths = "x";
  EXPECT_NE(msg(bad).find("--logit-lengths: give a new input name"), std::string::npos);
  bad = o;
  bad.logits_layout = "bct";
  EXPECT_NE(msg(bad).find("--logits-layout"), std::string::npos);
}

TEST(LossPass, ErrorsNameTheProblem) {
  auto msg = [](LossOptions o) -> std::string {
    auto g = Logits();
    try {
      LossPass(o).Run(*g);
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(msg({"", "", "", ""}).find("no scalar float output"), std::string::npos);
  EXPECT_NE(msg({"logits", "", "", ""}).find("not a scalar"), std::string::npos);
  EXPECT_NE(msg({"nope", "", "", ""}).find("no value 'nope'"), std::string::npos);
  EXPECT_NE(msg({"", "cross_entropy", "nope", "y"}).find("no value 'nope'"), std::string::npos);
  EXPECT_NE(msg({"", "cross_entropy", "logits", "x"}).find("--labels"), std::string::npos);
  EXPECT_NE(msg({"", "hinge", "logits", "y"}).find("unknown loss"), std::string::npos);
}

}  // namespace
}  // namespace ot
