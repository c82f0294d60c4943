// Stage 2 of the pipeline (passes/fusion_stage.h) on a fake sizer: the passes in their order, each left out by name,
// the hook after each, the sizer asked again after folds and for the final peak, and --fuse=off doing nothing.
#include "passes/fusion_stage.h"

#include <gtest/gtest.h>

#include "graph/error.h"
#include "tests/passes/fake_sizer.h"

namespace ot {
namespace {

using test::Count;
using test::Emit;
using test::EmitInternal;
using test::FakeSizer;
using test::Input;

// A pool fold (MaxPoolGrad -> ReluGrad) beside an elementwise chain that cluster fusion takes.
std::unique_ptr<Graph> Build() {
  return test::Make([](Graph& g) {
    Value* r = Emit(g, "Relu", {Input(g, "x", {2, 3, 8, 8})});
    test::Attrs a{{"kernel_shape", Attribute::Ints({2, 2})}, {"strides", Attribute::Ints({2, 2})}};
    Value* dr = EmitInternal(g, "MaxPoolGrad", {Input(g, "dp", {2, 3, 4, 4}), r}, 1, a)[0];
    g.outputs.push_back(EmitInternal(g, "ReluGrad", {dr, r})[0]);
    g.outputs.push_back(Emit(g, "Exp", {Emit(g, "Neg", {Input(g, "z", {64, 32})})}));
  });
}

// Runs the stage, recording the passes that ran.
FusionReport RunStage(Graph& g, FuseOptions o, FakeSizer& sizer, std::vector<std::string>* ran,
                      std::vector<std::string> disabled = {}) {
  PipelineControl c;
  c.disabled = std::move(disabled);
  c.after_pass = [ran](const std::string& pass, const Graph&) { ran->push_back(pass); };
  return RunFusionStage(g, o, sizer, c);
}

TEST(FusionStage, NamesInOrder) {
  EXPECT_EQ(FusionPassNames(), (std::vector<std::string>{"fuse_pool_relu", "fuse_batch_norm", "fuse_residual_norm",
                                                         "cluster_fusion", "rematerialize", "fuse_epilogue"}));
}

TEST(FusionStage, FoldsThenClustersAndMeasuresAgain) {
  auto g = Build();
  FakeSizer sizer;
  std::vector<std::string> ran;
  FusionReport r = RunStage(*g, FuseOptions(), sizer, &ran);
  EXPECT_EQ(ran,
            (std::vector<std::string>{"fuse_pool_relu", "fuse_batch_norm", "fuse_residual_norm", "cluster_fusion"}));
  EXPECT_EQ(Count(*g, "ReluGrad"), 0);
  EXPECT_EQ(Count(*g, "FusedElementwise"), 1);
  ASSERT_EQ(r.clusters.size(), 2u);
  EXPECT_EQ(r.clusters[0].kind, "fold");  // folds come first in the report
  EXPECT_EQ(r.clusters[1].kind, "cluster");
  EXPECT_EQ(sizer.calls, 3);  // before the folds, after them, and the final peak
  EXPECT_EQ(r.peak_after, sizer.Measure(*g).planned_peak);
  EXPECT_LT(r.peak_after, r.peak_before);
}

TEST(FusionStage, DisabledPassesAndOptionsLeavePassesOut) {
  {
    auto g = Build();
    FakeSizer sizer;
    std::vector<std::string> ran;
    RunStage(*g, FuseOptions(), sizer, &ran, {"fuse_pool_relu", "fuse_batch_norm"});
    EXPECT_EQ(ran, (std::vector<std::string>{"fuse_residual_norm", "cluster_fusion"}));
    EXPECT_EQ(Count(*g, "MaxPoolGrad"), 1);
    EXPECT_EQ(test::Find(*g, "MaxPoolGrad")->attr_int("relu", 0), 0);
    EXPECT_EQ(sizer.calls, 2);  // nothing folded: no second measure
  }
  {
    auto g = Build();
    FakeSizer sizer;
    std::vector<std::string> ran;
    FuseOptions o;
    o.mode = FuseMode::kFull;
    o.kernel_folds = false;  // a device's fusion
    o.memory_budget = int64_t(1) << 40;
    RunStage(*g, o, sizer, &ran);
    EXPECT_EQ(ran, (std::vector<std::string>{"cluster_fusion", "rematerialize", "fuse_epilogue"}));
  }
  // Names of the step pipeline are taken (that stage leaves them out); others are refused, listing the choices.
  auto g = Build();
  FakeSizer sizer;
  std::vector<std::string> ran;
  EXPECT_NO_THROW(RunStage(*g, FuseOptions(), sizer, &ran, {"fold_transpose"}));
  try {
    RunStage(*g, FuseOptions(), sizer, &ran, {"cluster_fusions"});
    ADD_FAILURE() << "an unknown pass name was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--disable-pass cluster_fusions: no such pass"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("rematerialize"), std::string::npos) << e.what();
  }
}

TEST(FusionStage, OffRunsNothing) {
  auto g = Build();
  FakeSizer sizer;
  std::vector<std::string> ran;
  FuseOptions o;
  o.mode = FuseMode::kOff;
  FusionReport r = RunStage(*g, o, sizer, &ran);
  EXPECT_TRUE(ran.empty());
  EXPECT_EQ(sizer.calls, 0);
  EXPECT_EQ(r.mode, "off");
  EXPECT_EQ(g->nodes().size(), 5u);
}

}  // namespace
}  // namespace ot
