#include "passes/step_graph.h"

#include <algorithm>

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

StepGraphInfo BuildStepGraph(Graph& g, const StepOptions& o) {
  StepGraphInfo info;
  auto after = [&](const char* pass) {
    if (o.after_pass) o.after_pass(pass, g);
  };
  TrainingModePass(true).Run(g);
  after("training_mode");
  FuseGeluPass().Run(g);  // pattern fusion: before autodiff, so the fused ops' gradient rules apply
  FuseLayerNormPass().Run(g);
  FuseSoftmaxCrossEntropyPass().Run(g);
  FuseMatMulBiasPass().Run(g);
  after("pattern_fusion");
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
    if (o.amp.half == DataType::kFloat16) {
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
  FoldTransposePass().Run(g);
  after("fold_transpose");
  FuseBiasGradPass().Run(g);  // after the fold: the weight gradients are the Gemms they will stay
  after("fuse_bias_grad");
  if (EnableOptimizerStats(g)) {
    info.param_norm = g.outputs[g.outputs.size() - 2];
    info.zero_grad_fraction = g.outputs.back();
  }
  return info;
}

}  // namespace ot
