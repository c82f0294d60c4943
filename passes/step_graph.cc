#include "passes/step_graph.h"

#include <algorithm>
#include <map>
#include <memory>

#include "graph/error.h"
#include "passes/autodiff.h"
#include "passes/channels_last.h"
#include "passes/fold_transpose.h"
#include "passes/fuse_bias_grad.h"
#include "passes/fuse_gelu.h"
#include "passes/fuse_layer_norm.h"
#include "passes/fuse_matmul_bias.h"
#include "passes/fuse_softmax_ce.h"
#include "passes/fusion_stage.h"
#include "passes/half_grad_update.h"
#include "passes/half_loss_grad.h"
#include "passes/master_weights.h"
#include "passes/pass_manager.h"
#include "passes/shard_masters.h"
#include "passes/slice_grad_concat.h"
#include "passes/slice_pushdown.h"
#include "passes/sync_batchnorm.h"
#include "passes/training_mode.h"

namespace ot {

namespace {
void AddOutput(Graph& g, Value* v) {
  if (std::find(g.outputs.begin(), g.outputs.end(), v) == g.outputs.end()) g.outputs.push_back(v);
}
}  // namespace

namespace {

// The step's state as the passes produce it: what later passes and the caller read.
struct StepBuild {
  const StepOptions& o;
  StepGraphInfo info;
  std::unique_ptr<AutodiffPass> autodiff;
  std::vector<Value*> grads;  // what the optimizer reads: autodiff's gradients, or their means over the ranks
  std::vector<std::vector<size_t>> buckets;  // data_parallel's, for --shard-optimizer's groups
  LossScaleMode loss_scaling = LossScaleMode::kNone;
};

// Stage 1, the step, as one list (the only place these names are spelled). `b` may be a dry run's (names only).
PassManager StepPipeline(StepBuild& b) {
  const StepOptions& o = b.o;
  const bool amp = o.amp.half != DataType::kUndefined;
  const std::string step = "it makes the training step", mixed = "mixed precision follows --amp";
  b.loss_scaling = ResolveLossScale(o.loss_scale.mode, o.amp.half);
  PassManager pm;
  pm.Add(
      "training_mode", [](Graph& g) { return TrainingModePass(true).Run(g); }, step);
  pm.Add(
      "sync_batchnorm", [&b](Graph& g) { return SyncBatchNormPass(b.o.data_parallel.world).Run(g); },
      "it makes --sync-batchnorm", o.data_parallel.world > 1 && o.data_parallel.sync_batchnorm);
  // Before pattern fusion (it walks MatMul + Add, not the fused layer) and autodiff (the gradient is then of the
  // smaller slice).
  pm.Add("slice_pushdown", [](Graph& g) { return SlicePushdownPass().Run(g); });
  // Before autodiff, so the fused ops' gradient rules apply.
  pm.Add("pattern_fusion", [](Graph& g) { return RunPatternFusion(g, true); });
  // Before autodiff: the gradient ops inherit the layout (and the Transposes at the edges are differentiated).
  // Not with --sync-batchnorm: its global statistics are composed ops (ReduceMean, AllReduceSum) that follow the
  // NCHW kernel's order of summation, which 2 ranks x B following 1 process x 2B within 1e-5 relies on.
  pm.Add(
      "channels_last", [](Graph& g) { return ChannelsLastPass().Run(g); }, "",
      o.channels_last && !(o.data_parallel.world > 1 && o.data_parallel.sync_batchnorm));
  pm.Add(
      "loss",
      [&b](Graph& g) {
        LossPass loss(b.o.loss);
        const bool changed = loss.Run(g);
        b.info.loss = loss.loss_name();
        return changed;
      },
      step);
  pm.Add(
      "autodiff",
      [&b](Graph& g) {
        b.autodiff = std::make_unique<AutodiffPass>(AutodiffOptions{b.info.loss, b.o.freeze});
        const bool changed = b.autodiff->Run(g);
        if (b.autodiff->params().empty()) throw Error("no trainable parameter reaches the loss '" + b.info.loss + "'");
        b.info.params = b.autodiff->params();
        b.info.seed = b.autodiff->seed();
        b.grads = b.autodiff->grads();
        return changed;
      },
      step);
  pm.Add("slice_grad_concat", [](Graph& g) { return SliceGradConcatPass().Run(g); });
  pm.Add(
      "data_parallel",
      [&b](Graph& g) {
        DataParallelPass pass(b.o.data_parallel, b.autodiff->params(), b.grads);
        const bool changed = pass.Run(g);
        b.buckets = pass.buckets();
        return changed;
      },
      "it averages the ranks' gradients",
      (o.data_parallel.world > 1 || o.data_parallel.even_alone) && o.optimizer.accumulate == 1);
  pm.Add(
      "optimizer",
      [&b](Graph& g) {
        OptimizerOptions oo = b.o.optimizer;
        oo.world = b.o.data_parallel.world;  // with accumulation the update averages the sums over the ranks
        oo.shard = b.o.data_parallel.shard_optimizer;
        oo.shard_groups = b.buckets;
        OptimizerPass optimizer(oo, b.autodiff->params(), b.grads);
        const bool changed = optimizer.Run(g);
        b.info.lr = optimizer.lr();
        b.info.step = optimizer.step();
        b.info.grad_norm = optimizer.grad_norm();
        b.info.skipped = optimizer.skipped();
        AddOutput(g, g.FindValue(b.info.loss));
        return changed;
      },
      step);
  pm.Add(
      "amp",
      [&b](Graph& g) {
        AmpPass pass(b.o.amp);
        const bool changed = pass.Run(g);
        b.info.amp = pass.report();
        return changed;
      },
      mixed, amp);
  pm.Add(
      "half_loss_grad", [](Graph& g) { return HalfLossGradPass().Run(g); }, "", amp);
  pm.Add(
      "fp16_range",
      [&b](Graph& g) {
        Fp16RangePass range(b.o.fp16_range);
        const bool changed = range.Run(g);
        b.info.fp16_range_changes = range.changes();
        return changed;
      },
      "", amp && o.amp.half == DataType::kFloat16);
  pm.Add(
      "master_weights", [](Graph& g) { return MasterWeightsPass().Run(g); }, mixed, amp);
  pm.Add(
      "loss_scaling",
      [&b](Graph& g) {
        LossScaleOptions ls = b.o.loss_scale;
        ls.mode = b.loss_scaling;
        LossScalingPass scaling(ls, b.info.seed);
        const bool changed = scaling.Run(g);
        b.info.loss_scale = scaling.scale();
        return changed;
      },
      "use --loss-scale none", b.loss_scaling != LossScaleMode::kNone);
  // After amp and master_weights: every half weight gradient and the Cast before the update exist.
  pm.Add(
      "half_grad_update", [](Graph& g) { return HalfGradUpdatePass().Run(g); }, "", amp);
  pm.Add(
      "shard_masters", [&b](Graph& g) { return ShardMastersPass(b.o.data_parallel.rank).Run(g); }, "",
      amp && o.data_parallel.shard_optimizer && o.data_parallel.world > 1);
  // Last: every Transpose a GEMM reads is written by now (autodiff's, AMP's Casts placed, master copies bound).
  pm.Add("fold_transpose", [](Graph& g) { return FoldTransposePass().Run(g); });
  // After the fold: the weight gradients are the Gemms they will stay.
  pm.Add("fuse_bias_grad", [](Graph& g) { return FuseBiasGradPass().Run(g); });
  return pm;
}

// For --disable-pass: stage 2's passes (passes/fusion_stage.h) and the stage itself ("fusion", as --fuse=off).
std::vector<std::string> LaterStages() {
  std::vector<std::string> r = FusionPassNames();
  r.push_back("fusion");
  return r;
}

}  // namespace

bool RunPatternFusion(Graph& g, bool training) {
  bool changed = FuseGeluPass().Run(g);
  changed |= FuseLayerNormPass().Run(g);
  if (training) changed |= FuseSoftmaxCrossEntropyPass().Run(g);
  changed |= FuseMatMulBiasPass().Run(g);
  return changed;
}

namespace {
// The pipeline built once to read its names, never run (its passes refer to a StepBuild that lives as long).
const PassManager& NamesOnly() {
  static const StepOptions o;
  static StepBuild b{o, {}, nullptr, {}, {}, LossScaleMode::kNone};
  static const PassManager pm = StepPipeline(b);
  return pm;
}
}  // namespace

std::vector<std::string> StepPassNames() { return NamesOnly().names(); }

const std::vector<std::string>& OptionalPasses() {
  static const std::vector<std::string> kOptional = [] {
    std::vector<std::string> r = NamesOnly().optional_names();
    const std::vector<std::string> later = LaterStages();
    r.insert(r.end(), later.begin(), later.end());
    return r;
  }();
  return kOptional;
}

void CheckDisabledPasses(const std::vector<std::string>& names) {
  PassManager pm = NamesOnly();
  pm.Disable(names, LaterStages());
}

StepGraphInfo BuildStepGraph(Graph& g, const StepOptions& o) {
  StepBuild b{o, {}, nullptr, {}, {}, LossScaleMode::kNone};
  PassManager pm = StepPipeline(b);
  pm.Apply(o.control, LaterStages());
  pm.Run(g);
  b.info.loss_scaling = b.loss_scaling;
  if (EnableOptimizerStats(g)) {
    b.info.param_norm = g.outputs[g.outputs.size() - 2];
    b.info.zero_grad_fraction = g.outputs.back();
  }
  return b.info;
}

}  // namespace ot
