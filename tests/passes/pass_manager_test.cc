// PassManager: order, optional and required passes, names a later stage owns, the verifier naming the pass that
// broke the graph, passes that do not apply, the callback after each pass; the step pipeline's names.
#include "passes/pass_manager.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "graph/error.h"
#include "passes/step_graph.h"

namespace ot {
namespace {

// x -> Relu -> y.
std::unique_ptr<Graph> OneRelu() {
  auto g = std::make_unique<Graph>();
  Value* x = g->AddValue("x");
  Value* y = g->AddValue("y");
  g->inputs.push_back(x);
  g->AddNode("Relu", {x}, {y}, "r");
  g->outputs.push_back(y);
  return g;
}

TEST(PassManager, RunsInOrderSkipsWhatDoesNotApplyAndReportsChanges) {
  std::vector<std::string> ran, seen;
  PassManager pm;
  pm.Add(
      "a",
      [&](Graph&) {
        ran.push_back("a");
        return true;
      },
      "needed");
  pm.Add(
      "b",
      [&](Graph&) {
        ran.push_back("b");
        return false;
      },
      "", /*applies=*/false);
  pm.Add("c", [&](Graph&) {
    ran.push_back("c");
    return false;
  });
  pm.Add("d", [&](Graph&) {
    ran.push_back("d");
    return true;
  });
  pm.AfterEach([&](const std::string& p, const Graph&) { seen.push_back(p); });
  pm.Disable({"c"});
  auto g = OneRelu();
  EXPECT_EQ(pm.Run(*g), (std::vector<std::string>{"a", "d"}));
  EXPECT_EQ(ran, (std::vector<std::string>{"a", "d"}));
  EXPECT_EQ(seen, (std::vector<std::string>{"a", "d"}));
  EXPECT_EQ(pm.names(), (std::vector<std::string>{"a", "b", "c", "d"}));
  EXPECT_EQ(pm.optional_names(), (std::vector<std::string>{"b", "c", "d"}));
  EXPECT_TRUE(pm.disabled("c"));
}

TEST(PassManager, DisablingARequiredOrUnknownPassSaysWhyAndWhatCanBeLeftOut) {
  PassManager pm;
  pm.Add(
      "core", [](Graph&) { return false; }, "it makes the step");
  pm.Add("extra", [](Graph&) { return false; });
  try {
    pm.Disable({"core"}, {"later"});
    FAIL() << "a required pass was disabled";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "--disable-pass core: the step cannot be built without it (it makes the step); "
              "passes that can be disabled: extra, later");
  }
  try {
    pm.Disable({"nope"});
    FAIL() << "an unknown pass was disabled";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "--disable-pass nope: no such pass; passes that can be disabled: extra");
  }
  EXPECT_NO_THROW(pm.Disable({"later"}, {"later"}));  // a later stage's name passes through
  EXPECT_FALSE(pm.disabled("later"));
}

TEST(PassManager, TheVerifierNamesThePassThatBrokeTheGraph) {
  auto breaker = [](Graph& g) {
    g.outputs.push_back(g.AddValue("dangling"));  // an output nothing produces
    return true;
  };
  for (bool verify : {true, false}) {
    PassManager pm;
    pm.set_verify(verify);
    pm.Add("fine", [](Graph&) { return false; });
    pm.Add("breaker", breaker);
    auto g = OneRelu();
    if (!verify) {
      EXPECT_NO_THROW(pm.Run(*g));
      continue;
    }
    try {
      pm.Run(*g);
      FAIL() << "the broken graph passed";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("pass 'breaker' produced an invalid graph: ", 0), 0u) << e.what();
    }
  }
}

// Every test runs with ONNXTRAIN_VERIFY_PASSES=1 (tests/test_util.cc), so pipelines verify by default here.
TEST(PassManager, TestsVerifyByDefault) { EXPECT_TRUE(VerifyPassesByDefault()); }

// The one list's names and the order the design relies on -- a new pass needs no edit here (docs/ARCHITECTURE.md:
// adding a pass touches its file, its test and the list).
TEST(StepPipeline, NamesComeFromTheOneList) {
  const std::vector<std::string> names = StepPassNames();
  std::map<std::string, size_t> at;
  for (size_t i = 0; i < names.size(); ++i) EXPECT_TRUE(at.emplace(names[i], i).second) << names[i] << " twice";
  const std::vector<std::string> order = {"training_mode",  "loss",         "autodiff",       "optimizer",     "amp",
                                          "master_weights", "loss_scaling", "fold_transpose", "fuse_bias_grad"};
  for (size_t i = 0; i < order.size(); ++i) {
    ASSERT_TRUE(at.count(order[i])) << order[i];
    if (i > 0) EXPECT_LT(at[order[i - 1]], at[order[i]]) << order[i - 1] << " before " << order[i];
  }
  EXPECT_EQ(names.front(), "training_mode");
  EXPECT_EQ(names.back(), "fuse_bias_grad");       // last: after the fold, the weight gradients are the Gemms they stay
  EXPECT_LT(at["autodiff"], at["data_parallel"]);  // the gradients exist
  EXPECT_LT(at["data_parallel"], at["optimizer"]);  // the update reads the means
  EXPECT_LT(at["sync_batchnorm"], at["autodiff"]);  // differentiated through
  // Optional: the rewrites the step is correct without, then stage 2's names and the stage itself.
  const std::vector<std::string>& optional = OptionalPasses();
  for (const char* n :
       {"slice_pushdown", "pattern_fusion", "channels_last", "slice_grad_concat", "half_loss_grad", "fp16_range",
        "half_grad_update", "fold_transpose", "fuse_bias_grad", "cluster_fusion", "fuse_epilogue", "fusion"})
    EXPECT_NE(std::find(optional.begin(), optional.end(), n), optional.end()) << n;
  for (const char* n : {"training_mode", "loss", "autodiff", "data_parallel", "sync_batchnorm", "optimizer"})
    EXPECT_EQ(std::find(optional.begin(), optional.end(), n), optional.end()) << n << " cannot be left out";
  EXPECT_EQ(optional.back(), "fusion");
  EXPECT_THROW(CheckDisabledPasses({"autodiff"}), Error);
  EXPECT_THROW(CheckDisabledPasses({"epilogue"}), Error);
  EXPECT_NO_THROW(CheckDisabledPasses({"fusion", "fp16_range", "fuse_epilogue"}));
}

}  // namespace
}  // namespace ot
