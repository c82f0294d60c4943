#include "passes/fusion_stage.h"

#include "passes/fuse_batch_norm.h"
#include "passes/fuse_epilogue.h"
#include "passes/fuse_pool_relu.h"
#include "passes/fuse_residual_norm.h"
#include "passes/rematerialize.h"
#include "passes/step_graph.h"

namespace ot {

namespace {

// The stage's state as its passes produce it.
struct FusionBuild {
  FuseOptions opts;
  StepSizer* sizer = nullptr;
  FusionSizes sizes;         // of the step as the next pass finds it (re-measured after folds)
  int64_t unfused_peak = 0;  // the runtime's planned peak before any pass
  int64_t fold_peak = 0;     // that peak plus the bytes the folds made live longer
  bool folded = false;
  FusionReport folds, report;
};

// A kernel fold, priced on the facts measured before the folds, each on the peak the folds before it left.
template <class FoldT>
PassManager::RunFn Fold(FusionBuild& b) {
  return [&b](Graph& g) {
    FoldT pass(b.opts, b.sizes, b.fold_peak, &b.folds);
    const bool changed = pass.Run(g);
    b.fold_peak = pass.peak();
    b.folded |= changed;
    return changed;
  };
}

// Stage 2 as one list (the only place these names are spelled). `b` may be a dry run's (names only).
PassManager FusionPipeline(FusionBuild& b) {
  const FuseOptions& o = b.opts;
  PassManager pm;
  pm.Add("fuse_pool_relu", Fold<PoolReluFoldPass>(b), "", o.kernel_folds);
  pm.Add("fuse_batch_norm", Fold<BatchNormFoldPass>(b), "", o.kernel_folds);
  pm.Add("fuse_residual_norm", Fold<ResidualNormFoldPass>(b), "", o.kernel_folds);
  pm.Add("cluster_fusion", [&b](Graph& g) {
    if (b.folded) b.sizes = b.sizer->Measure(g);
    ClusterFusionPass pass(b.opts, b.sizes);
    const bool changed = pass.Run(g);
    b.report = pass.report();
    return changed;
  });
  // Only under a budget the fused step does not meet (report.peak_after: the cluster pass's model of the plan).
  pm.Add(
      "rematerialize",
      [&b](Graph& g) {
        if (b.report.peak_after <= b.opts.memory_budget) return false;
        return RematerializePass(b.opts.memory_budget, b.sizes, &b.report).Run(g);
      },
      "", o.memory_budget > 0);
  pm.Add(
      "fuse_epilogue", [&b](Graph& g) { return EpiloguePass(b.opts, b.sizes, &b.report).Run(g); }, "",
      o.mode == FuseMode::kFull && o.epilogues);
  return pm;
}

// The passes of the step pipeline and the stage itself ("fusion"): names --disable-pass may give that another stage
// owns.
std::vector<std::string> OtherStages() {
  std::vector<std::string> r = StepPassNames();
  r.push_back("fusion");
  return r;
}

}  // namespace

std::vector<std::string> FusionPassNames() {
  FusionBuild b;
  return FusionPipeline(b).names();
}

FusionReport RunFusionStage(Graph& g, const FuseOptions& opts, StepSizer& sizer, const PipelineControl& control) {
  FusionBuild b;
  b.opts = opts;
  b.sizer = &sizer;
  b.report.mode = FuseModeName(opts.mode);
  b.report.memory_budget = opts.memory_budget;
  PassManager pm = FusionPipeline(b);
  pm.Apply(control, OtherStages());
  if (opts.mode == FuseMode::kOff) return b.report;
  b.sizes = sizer.Measure(g);
  b.unfused_peak = b.fold_peak = b.sizes.planned_peak;
  b.report.peak_before = b.report.peak_after = b.unfused_peak;
  const std::vector<std::string> changed = pm.Run(g);
  FusionReport& r = b.report;
  r.clusters.insert(r.clusters.begin(), b.folds.clusters.begin(), b.folds.clusters.end());
  r.refused.insert(r.refused.end(), b.folds.refused.begin(), b.folds.refused.end());
  r.saved_bytes += b.folds.saved_bytes;
  r.fused_nodes += b.folds.fused_nodes;
  if (b.folded) r.peak_before = b.unfused_peak;
  // The passes price with a model of the plan (conservative where epilogues hold inputs longer); the peak reported
  // is the plan the runtime will make of the result.
  if (!changed.empty() || opts.memory_budget > 0) {
    r.peak_after = sizer.Measure(g).planned_peak;
    if (opts.memory_budget > 0) r.budget_unreachable = r.peak_after > opts.memory_budget;
  }
  return r;
}

}  // namespace ot
