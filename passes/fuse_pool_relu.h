// Pool ReluGrad fold (--fuse=lite and full, before the batch-norm folds and cluster fusion; DESIGN.md "cluster
// fusion"). A CNN block's Relu feeds a MaxPool, so the backward computes MaxPoolGrad(dP, R) -> dR and then
// ReluGrad(dR, R) -> dY: a whole pass that reads dR and R again to zero the gradient where R <= 0. MaxPoolGrad
// already reads R to find each window's argmax, so it can drop dP there itself where R is not > 0.
//
// Rewrite, giving the separate ops' numbers bit for bit (every float type):
//   ReluGrad(dR, R) -> dY, where dR = MaxPoolGrad(dP, R) (the same R as its X input) is read by nothing else,
//   becomes MaxPoolGrad {relu = 1}(dP, R) -> dY (cpu_ops/pool_grad.h: dP routed to an argmax only where R > 0; an
//   element dR would have summed from several windows is zeroed as a whole, as ReluGrad zeroes it). dR is never
//   written or read. No value lives longer (R was read by MaxPoolGrad already), so no budget check is needed.
// Taken before the batch-norm folds: BatchNormGrad's own ReluGrad fold reads R a second time in both its passes,
// this one reads nothing more. A CPU kernel (the Trainer leaves the folds out on a device, and the CUDA MaxPoolGrad
// refuses relu = 1); each fold is recorded in the report as a cluster named after the MaxPoolGrad node
// (passes/fold_report.h).
#pragma once
#include "passes/fold_report.h"

namespace ot {

class PoolReluFoldPass : public FoldPass {
 public:
  using FoldPass::FoldPass;
  std::string name() const override { return "fuse_pool_relu"; }
  bool Run(Graph& g) override;
};

}  // namespace ot
