// Issue 5's Done-when for the example models: trained with --fuse=lite and --fuse=full, every step's loss matches
// --fuse=off within 1e-5 relative or 1e-7 absolute (fp32), and so do the parameters after the last step -- and the
// fusion did fuse something (clusters are made for each model), so the comparison is not of two unfused runs.
#include <gtest/gtest.h>

#include <cmath>

#include "onnx_import/model_io.h"
#include "onnx_import/tensor_io.h"
#include "tests/executor/example_data.h"
#include "tests/test_util.h"
#include "training/data_loader.h"
#include "training/trainer.h"

namespace ot {
namespace {
using namespace ot::examples;

ExampleRun Train(const std::string& dir, const std::string& optimizer, const std::string& fuse, int steps,
                 DataType half) {
  return TrainExample(dir, optimizer, steps, [&](TrainerOptions& o) {
    o.fuse.mode = ParseFuseMode(fuse);
    o.amp.half = half;
  });
}

struct Example {
  std::string dir, optimizer;
  int steps;
};

class FusionExamples : public ::testing::TestWithParam<Example> {};

TEST_P(FusionExamples, LiteAndFullMatchOffAtEveryStep) {
  const Example& ex = GetParam();
  const ExampleRun off = Train(ex.dir, ex.optimizer, "off", ex.steps, DataType::kUndefined);
  EXPECT_TRUE(off.fusion.clusters.empty());
  for (const char* mode : {"lite", "full"}) {
    SCOPED_TRACE(ex.dir + " --fuse=" + mode);
    const ExampleRun fused = Train(ex.dir, ex.optimizer, mode, ex.steps, DataType::kUndefined);
    // The transformer has elementwise work outside its fused ops (attention scaling and masking, residual sums,
    // which its layer norms take in: passes/fuse_residual_norm.h);
    // in the MLP every elementwise op left after pattern fusion is a Relu whose output the backward's ReluGrad
    // reads, so fusing the two would put the layers between them on a cycle: nothing to fuse there. In the CNN the
    // kernels take them in: each Relu (batch norm), each ReluGrad (the max pool's gradient: each Relu feeds a MaxPool,
    // passes/fuse_pool_relu.h); not the conv bias sums, which batch norm's gradient takes in only over NCHW
    // (passes/fuse_batch_norm.h) and the CPU's CNN steps are channels-last (passes/channels_last.h).
    if (ex.dir == "fashion_cnn") {
      int forward = 0, pool = 0, sum = 0;
      for (const FusedCluster& c : fused.fusion.clusters) {
        std::vector<std::string> ops;
        for (const std::string& op : c.ops) ops.push_back(op.substr(0, op.find(' ')));
        forward += ops == std::vector<std::string>{"BatchNormalization", "Relu"};
        pool += ops == std::vector<std::string>{"MaxPoolGrad", "ReluGrad"};
        sum += ops == std::vector<std::string>{"BatchNormGrad", "ReduceSum"};
      }
      EXPECT_EQ(forward, 2) << FormatFusionReport(fused.fusion);
      EXPECT_EQ(pool, 2) << FormatFusionReport(fused.fusion);
      EXPECT_EQ(sum, 0) << FormatFusionReport(fused.fusion);
    } else if (ex.dir == "tiny_lm") {
      // Both attention blocks, forward (scale, mask, softmax) and backward (softmax gradient, scale gradient): the
      // exporter's Reshape targets are followed to named shapes (graph/ops/dims_value_table.cc), so no
      // ReduceToShape sits between SoftmaxGrad and the Div's gradient.
      int forward = 0, backward = 0;
      for (const FusedCluster& c : fused.fusion.clusters)
        for (const std::string& op : c.ops) {
          forward += op.rfind("Softmax ", 0) == 0;
          backward += op.rfind("SoftmaxGrad ", 0) == 0 && c.ops.size() > 1;
        }
      EXPECT_EQ(forward, 2) << FormatFusionReport(fused.fusion);
      EXPECT_EQ(backward, 2) << FormatFusionReport(fused.fusion);
      // The residual stream: Add -> LayerNormalization at every norm but the first (whose Add broadcasts the
      // positions), and LayerNormGrad -> Sum at the four in the blocks (the final norm's dX has other readers).
      int adds = 0, sums = 0;
      for (const FusedCluster& c : fused.fusion.clusters) {
        if (c.kind != "fold" || c.ops.size() != 2) continue;
        adds += c.ops[0].rfind("LayerNormalization ", 0) == 0 && c.ops[1].rfind("Add ", 0) == 0;
        sums += c.ops[0].rfind("LayerNormGrad ", 0) == 0 && c.ops[1].rfind("Sum ", 0) == 0;
      }
      EXPECT_EQ(adds, 4) << FormatFusionReport(fused.fusion);
      EXPECT_EQ(sums, 4) << FormatFusionReport(fused.fusion);
    } else
      EXPECT_FALSE(fused.fusion.refused.empty()) << FormatFusionReport(fused.fusion);
    ASSERT_EQ(fused.losses.size(), off.losses.size());
    for (size_t k = 0; k < off.losses.size(); ++k)
      EXPECT_NEAR(fused.losses[k], off.losses[k], std::max(1e-7, 1e-5 * std::fabs(off.losses[k]))) << "step " << k + 1;
    for (const auto& [name, t] : off.params) {
      SCOPED_TRACE(name);
      test::ExpectClose(fused.params.at(name), t, 1e-5, 1e-7);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Examples, FusionExamples,
                         ::testing::Values(Example{"digits_mlp", "adam", 8}, Example{"fashion_cnn", "sgd", 6},
                                           Example{"tiny_lm", "adam", 8}),
                         [](const auto& info) { return info.param.dir; });

// In bf16 the clusters round every value as the unfused kernels do; the trajectories stay together (row sums are
// accumulated in another order, so not bit for bit).
TEST(FusionExamplesBf16, TinyLmLiteFollowsOff) {
  const ExampleRun off = Train("tiny_lm", "adam", "off", 6, DataType::kBFloat16);
  const ExampleRun lite = Train("tiny_lm", "adam", "lite", 6, DataType::kBFloat16);
  EXPECT_FALSE(lite.fusion.clusters.empty());
  for (size_t k = 0; k < off.losses.size(); ++k)
    EXPECT_NEAR(lite.losses[k], off.losses[k], 2e-3 * std::fabs(off.losses[k])) << "step " << k + 1;
}

}  // namespace
}  // namespace ot
