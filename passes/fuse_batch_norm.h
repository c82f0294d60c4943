// Batch-norm folds (--fuse=lite and full, before cluster fusion; DESIGN.md "cluster fusion"). XLA reaches the same
// by expanding batch norm into reductions and elementwise ops and clustering those with their neighbours; here the
// norm kernels take their elementwise neighbour in, so the value between them is never stored.
//
// Rewrites, each giving the separate ops' numbers bit for bit (float types; half Y: see cpu_ops/norm.h):
//   relu      BatchNormalization(X, ...) -> Y -> Relu -> R, where Relu is Y's only reader and Y is no graph output,
//             becomes ai.onnxtrain.BatchNormRelu(X, ...) -> R (the statistics outputs stay): Y is neither written
//             nor read again (2 x Y's bytes of traffic, and its buffer, saved).
//   relu grad ReluGrad(dR, R) -> dY -> BatchNormGrad(dY, X, ...), dY read by nothing else, becomes BatchNormGrad {relu
//             = 1}(dR, X, ..., R as input 5): the kernel masks dR itself. R now lives until BatchNormGrad runs; when
//             ReluGrad was its last reader that holds R's bytes longer, and the fold is refused where the planned
//             peak plus those bytes would pass memory_budget. Every float type: half planes (R among them) are
//             widened to float by the kernel, and R > 0 is the same test on the widened value.
//   bias sum  ReduceSum(dX, axes = every axis but 1) of BatchNormGrad's dX (a convolution's bias gradient, when the
//             convolution feeds the norm) becomes BatchNormGrad's output 3 {sum_keepdims}: each plane of dX summed
//             while in cache, as ReduceSum's kernel sums it (cpu_ops/reduce.h SumRun). Only where that kernel sums
//             plane by plane: float32/float64, more than one channel, at least 16 elements a plane.
// The folds are CPU kernels (the Trainer leaves them out on a device, as the epilogues). Each is recorded in the
// report as a cluster named after the norm node; refusals with their reason.
#pragma once
#include "passes/fold_report.h"

namespace ot {

class BatchNormFoldPass : public FoldPass {
 public:
  using FoldPass::FoldPass;
  std::string name() const override { return "fuse_batch_norm"; }
  bool Run(Graph& g) override;
};

}  // namespace ot
