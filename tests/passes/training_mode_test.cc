// training_mode: BatchNormalization and Dropout switched to training mode for the step graph (running statistics
// become bound state) and back to inference mode for evaluation and the saved model.
#include "passes/training_mode.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "graph/error.h"
#include "graph/op_registry.h"
#include "graph/verifier.h"
#include "tests/test_util.h"

namespace ot {
namespace {

// x[4,3] -> BatchNormalization(opset, training_mode as given) -> y; optionally with its statistics outputs.
std::unique_ptr<Graph> BnGraph(int opset, int training_mode, bool stats_outputs) {
  auto g = std::make_unique<Graph>();
  g->opset_imports[""] = opset;
  Value* x = g->AddValue("x");
  x->dtype = DataType::kFloat32;
  x->shape = Shape::Static({4, 3});
  g->inputs.push_back(x);
  std::vector<Value*> ins = {x};
  for (const char* name : {"scale", "bias", "mean", "var"})
    ins.push_back(g->AddInitializer(name, test::RandomTensor(DataType::kFloat32, {3}, 0.5, 1.5)));
  std::vector<Value*> outs = {g->AddValue("y")};
  if (stats_outputs) {
    outs.push_back(g->AddValue("mean_out"));
    outs.push_back(g->AddValue("var_out"));
  }
  Node* n = g->AddNode("BatchNormalization", ins, outs, "bn");
  if (opset >= 14) n->attrs["training_mode"] = Attribute::Int(training_mode);
  g->outputs.push_back(outs[0]);
  InferShapes(*g);
  return g;
}

TEST(TrainingModePass, BatchNormGetsTrainingModeAndBoundRunningStatistics) {
  auto g = BnGraph(15, 0, false);
  EXPECT_TRUE(TrainingModePass(true).Run(*g));
  const Node* bn = g->FindValue("y")->producer;
  EXPECT_EQ(bn->attr_int("training_mode", 0), 1);
  ASSERT_TRUE(bn->has_output(1) && bn->has_output(2));
  ASSERT_EQ(g->update_bindings.size(), 2u);
  EXPECT_EQ(g->update_bindings[0].state->name, "mean");
  EXPECT_EQ(g->update_bindings[0].next, bn->outputs[1]);
  EXPECT_EQ(g->update_bindings[1].state->name, "var");
  EXPECT_EQ(g->update_bindings[1].next, bn->outputs[2]);
  EXPECT_EQ(bn->outputs[1]->shape, Shape::Static({3}));
  VerifyGraph(*g);
  // Running it again changes nothing (the statistics are bound once).
  EXPECT_FALSE(TrainingModePass(true).Run(*g));
  EXPECT_EQ(g->update_bindings.size(), 2u);
}

TEST(TrainingModePass, OldOpsetBatchNormTrainsByHavingStatisticsOutputs) {
  auto g = BnGraph(9, 0, false);
  EXPECT_TRUE(TrainingModePass(true).Run(*g));
  const Node* bn = g->FindValue("y")->producer;
  EXPECT_FALSE(bn->has_attr("training_mode"));
  EXPECT_TRUE(bn->has_output(1) && bn->has_output(2));
  EXPECT_EQ(g->update_bindings.size(), 2u);
}

TEST(TrainingModePass, InferenceModeDropsStatisticsOutputs) {
  auto g = BnGraph(15, 1, true);
  g->outputs.push_back(g->FindValue("mean_out"));  // exporters list them as outputs
  EXPECT_TRUE(TrainingModePass(false).Run(*g));
  const Node* bn = g->FindValue("y")->producer;
  EXPECT_EQ(bn->attr_int("training_mode", 1), 0);
  EXPECT_EQ(bn->outputs.size(), 1u);
  EXPECT_EQ(g->outputs.size(), 1u);
  EXPECT_TRUE(g->update_bindings.empty());
  VerifyGraph(*g);
}

TEST(TrainingModePass, NoChangeWhenAlreadyInInferenceMode) {
  auto g = BnGraph(15, 0, false);
  EXPECT_FALSE(TrainingModePass(false).Run(*g));
  EXPECT_EQ(g->FindValue("y")->producer->outputs.size(), 1u);
}

TEST(TrainingModePass, ConsumedStatisticsCannotBeDropped) {
  auto g = BnGraph(15, 1, true);
  Value* m = g->FindValue("mean_out");
  Value* z = g->AddValue("z");
  g->AddNode("Neg", {m}, {z}, "uses_stats");
  try {
    TrainingModePass(false).Run(*g);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("uses_stats"), std::string::npos) << e.what();
  }
}

// A float32 graph input of g (opset 13).
Value* FloatInput(Graph& g, const std::string& name, std::vector<int64_t> dims) {
  g.opset_imports[""] = 13;
  Value* v = g.AddValue(name);
  v->dtype = DataType::kFloat32;
  v->shape = Shape::Static(std::move(dims));
  g.inputs.push_back(v);
  return v;
}

TEST(TrainingModePass, DropoutTrainingModeInputFollowsTheMode) {
  Graph g;
  Value* x = FloatInput(g, "x", {8});
  Tensor r(DataType::kFloat32, {});
  r.SetDouble(0, 0.25);
  Value* ratio = g.AddInitializer("ratio", r);
  Value* y = g.AddValue("y");
  Node* d = g.AddNode("Dropout", {x, ratio}, {y}, "drop");
  g.outputs.push_back(y);
  InferShapes(g);
  EXPECT_TRUE(TrainingModePass(true).Run(g));
  ASSERT_TRUE(d->has_input(2));
  EXPECT_EQ(d->inputs[2]->initializer->GetDouble(0), 1.0);
  EXPECT_EQ(d->inputs[1], ratio);  // the ratio stays
  EXPECT_FALSE(TrainingModePass(true).Run(g));
  EXPECT_TRUE(TrainingModePass(false).Run(g));
  EXPECT_EQ(d->inputs[2]->initializer->GetDouble(0), 0.0);
}

// Dropout exported with p = 0 in training mode: an Identity where its mask is unread; a read mask, a nonzero ratio, a
// ratio fed at run time keep the Dropout.
TEST(TrainingModePass, ZeroRatioDropoutBecomesAnIdentity) {
  for (const int variant : {0, 1, 2, 3}) {
    Graph g;
    Value* x = FloatInput(g, "x", {8});
    Value* ratio;
    if (variant == 3) {
      ratio = FloatInput(g, "ratio", {});
    } else {
      Tensor r(DataType::kFloat32, {});
      r.SetDouble(0, variant == 2 ? 0.1 : 0.0);
      ratio = g.AddInitializer("ratio", r);
    }
    Value* y = g.AddValue("y");
    Value* mask = g.AddValue("mask");
    Node* d = g.AddNode("Dropout", {x, ratio}, {y, mask}, "drop");
    g.outputs.push_back(y);
    if (variant == 1) g.outputs.push_back(mask);
    InferShapes(g);
    EXPECT_TRUE(TrainingModePass(true).Run(g));
    SCOPED_TRACE(variant);
    if (variant == 0) {
      EXPECT_EQ(d->op_type, "Identity");
      ASSERT_EQ(d->inputs.size(), 1u);
      EXPECT_EQ(d->inputs[0], x);
      EXPECT_EQ(d->outputs.size(), 1u);
      EXPECT_TRUE(ratio->uses.empty());
      EXPECT_EQ(mask->producer, nullptr);
      EXPECT_NO_THROW(VerifyGraph(g));
    } else {
      EXPECT_EQ(d->op_type, "Dropout");
      EXPECT_EQ(d->inputs[2]->initializer->GetDouble(0), 1.0);
    }
  }
}

}  // namespace
}  // namespace ot
