// Stage 2 of the pipeline (docs/ARCHITECTURE.md): fusion of a step for the shapes it will run. The passes price
// their rewrites with facts of the graph as the runtime would run it -- every value's dims and storage, which nodes
// are kernels, their order, workspaces and in-place pairs -- which they ask for through StepSizer: the runtime
// answers by compiling a plan (training/fusion.h), a test with a fake (tests/passes/fake_sizer.h).
//
// The passes, in order (FusionPassNames; each may be left out by --disable-pass, "fusion" leaves the stage out):
//   fuse_pool_relu, fuse_batch_norm, fuse_residual_norm  kernel folds (CPU kernels; FuseOptions::kernel_folds): first,
//                         as they take Relu, ReluGrad and the residual sums that clusters would otherwise claim; the
//                         pool fold before the batch-norm folds, which would also take a ReluGrad
//   cluster_fusion        elementwise clusters, sized on the facts of the folded step
//   rematerialize         under a --memory-budget the fused step does not meet: cheap saved values recomputed
//                         (before the epilogues take the elementwise ops they would copy into GEMMs)
//   fuse_epilogue         full: clusters folded into GEMM and convolution epilogues (FuseOptions::epilogues)
// The report's peak_after is the runtime's planned peak of the result.
#pragma once
#include <string>
#include <vector>

#include "passes/cluster_fusion.h"
#include "passes/pass_manager.h"

namespace ot {

// What the fusion passes ask of the runtime.
class StepSizer {
 public:
  virtual ~StepSizer() = default;
  // The facts of `g` as it would run for the shapes fusion is for, planned_peak included. Nothing runs.
  virtual FusionSizes Measure(const Graph& g) = 0;
};

// The stage's passes in order (what --dump-after and --disable-pass know of stage 2).
std::vector<std::string> FusionPassNames();

// Runs stage 2 on `g` (opts.mode kOff: nothing; the report says so). `control`: passes left out, a hook after each
// pass, verification. Returns the fusion report: folds, clusters, refusals, rematerialized values, planned peaks.
FusionReport RunFusionStage(Graph& g, const FuseOptions& opts, StepSizer& sizer, const PipelineControl& control = {});

}  // namespace ot
