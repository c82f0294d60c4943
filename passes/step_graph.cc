#include "passes/step_graph.h"

#include <algorithm>
#include <map>

#include "graph/error.h"
#include "passes/autodiff.h"
#include "passes/fold_transpose.h"
#include "passes/fuse_bias_grad.h"
#include "passes/fuse_gelu.h"
#include "passes/fuse_layer_norm.h"
#include "passes/fuse_matmul_bias.h"
#include "passes/fuse_softmax_ce.h"
#include "passes/master_weights.h"
#include "passes/training_mode.h"

namespace ot {

namespace {
void AddOutput(Graph& g, Value* v) {
  if (std::find(g.outputs.begin(), g.outputs.end(), v) == g.outputs.end()) g.outputs.push_back(v);
}
}  // namespace

const std::vector<std::string>& OptionalPasses() {
  static const std::vector<std::string> kOptional = {"pattern_fusion", "fp16_range", "fold_transpose",
                                                     "fuse_bias_grad", "fusion"};
  return kOptional;
}

void CheckDisabledPasses(const std::vector<std::string>& names) {
  // The passes the step needs, with what the user may want instead.
  static const std::map<std::string, std::string> kRequired = {
      {"training_mode", "it makes the training step"}, {"loss", "it makes the training step"},
      {"autodiff", "it makes the training step"},      {"optimizer", "it makes the training step"},
      {"amp", "mixed precision follows --amp"},        {"master_weights", "mixed precision follows --amp"},
      {"loss_scaling", "use --loss-scale none"}};
  std::string optional;
  for (const std::string& p : OptionalPasses()) optional += (optional.empty() ? "" : ", ") + p;
  for (const std::string& n : names) {
    if (std::find(OptionalPasses().begin(), OptionalPasses().end(), n) != OptionalPasses().end()) continue;
    auto it = kRequired.find(n);
    throw Error("--disable-pass " + n + ": " +
                (it != kRequired.end() ? "the step cannot be built without it (" + it->second + ")" : "no such pass") +
                "; passes that can be disabled: " + optional);
  }
}

StepGraphInfo BuildStepGraph(Graph& g, const StepOptions& o) {
  CheckDisabledPasses(o.disabled_passes);
  auto enabled = [&](const char* pass) {
    return std::find(o.disabled_passes.begin(), o.disabled_passes.end(), pass) == o.disabled_passes.end();
  };
  StepGraphInfo info;
  auto after = [&](const char* pass) {
    if (o.after_pass) o.after_pass(pass, g);
  };
  TrainingModePass(true).Run(g);
  after("training_mode");
  if (enabled("pattern_fusion")) {
    FuseGeluPass().Run(g);  // pattern fusion: before autodiff, so the fused ops' gradient rules apply
    FuseLayerNormPass().Run(g);
    FuseSoftmaxCrossEntropyPass().Run(g);
    FuseMatMulBiasPass().Run(g);
    after("pattern_fusion");
  }
  LossPass loss(o.loss);
  loss.Run(g);
  info.loss = loss.loss_name();
  after("loss");
  AutodiffPass autodiff({info.loss, o.freeze});
  autodiff.Run(g);
  after("autodiff");
  if (autodiff.params().empty()) throw Error("no trainable parameter reaches the loss '" + info.loss + "'");
  info.params = autodiff.params();
  info.seed = autodiff.seed();
  OptimizerPass optimizer(o.optimizer, autodiff.params(), autodiff.grads());
  optimizer.Run(g);
  info.lr = optimizer.lr();
  info.step = optimizer.step();
  info.grad_norm = optimizer.grad_norm();
  info.skipped = optimizer.skipped();
  AddOutput(g, g.FindValue(info.loss));
  after("optimizer");
  if (o.amp.half != DataType::kUndefined) {
    AmpPass amp(o.amp);
    amp.Run(g);
    info.amp = amp.report();
    after("amp");
    if (o.amp.half == DataType::kFloat16 && enabled("fp16_range")) {
      Fp16RangePass range(o.fp16_range);
      range.Run(g);
      info.fp16_range_changes = range.changes();
      after("fp16_range");
    }
    MasterWeightsPass().Run(g);
    after("master_weights");
  }
  LossScaleOptions ls = o.loss_scale;
  if (ls.mode == "auto") ls.mode = o.amp.half == DataType::kFloat16 ? "dynamic" : "none";
  if (ls.mode != "none") {
    LossScalingPass scaling(ls, info.seed);
    scaling.Run(g);
    info.loss_scale = scaling.scale();
    after("loss_scaling");
  }
  info.loss_scaling = ls.mode;
  // Last: every Transpose a GEMM reads is written by now (autodiff's, AMP's Casts placed, master copies bound).
  if (enabled("fold_transpose")) {
    FoldTransposePass().Run(g);
    after("fold_transpose");
  }
  if (enabled("fuse_bias_grad")) {
    FuseBiasGradPass().Run(g);  // after the fold: the weight gradients are the Gemms they will stay
    after("fuse_bias_grad");
  }
  if (EnableOptimizerStats(g)) {
    info.param_norm = g.outputs[g.outputs.size() - 2];
    info.zero_grad_fraction = g.outputs.back();
  }
  return info;
}

}  // namespace ot
