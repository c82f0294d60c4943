// Residual folds (--fuse=lite and full, before cluster fusion; DESIGN.md "cluster fusion"): a transformer's
// residual stream meets a LayerNormalization at every block, forward and backward, as an Add or a Sum that lite's
// clusters cannot take (the sum leaves for several readers: a multi-output cluster, full's). The norm kernels take
// them in instead, as fused add + layer-norm kernels do (Apex's FusedAddLayerNorm); the value between is never
// stored or read again.
//
// Rewrites, each giving the separate ops' numbers bit for bit (float32 only):
//   add       Add(X, R) -> S -> LayerNormalization(S, Scale, B) (ai.onnx or ai.onnxtrain), X, R and S of one shape,
//             becomes ai.onnxtrain.ResidualLayerNorm(X, Scale, B, R) -> Y, Mean, InvStdDev, S: S is written as Add
//             writes it and normalized while in cache (cpu_ops/norm.h ResidualLayerNormF32). S keeps its other
//             readers; those that run as kernels must come after the norm in the executor's (topological) order
//             (else refused: that order would change; a Shape of S is folded when the plan is made). X and R now
//             live until the norm; where that holds bytes longer than before and the planned peak plus them would
//             pass memory_budget, the fold is refused.
//   grad      LayerNormGrad(dY, X, Scale, ...) -> dX -> Sum(dX, G) (two inputs, one shape; dX read by nothing else)
//             becomes LayerNormGrad(dY, X, Scale, ..., G as input 5) -> the Sum's output: dX rounded to float, then
//             G added, Sum's float add. G must be computed before the LayerNormGrad in the executor's order (else
//             refused); it was live until the Sum anyway, so the peak does not grow.
// CPU kernels (the Trainer leaves the folds out on a device, as the epilogues); each fold is recorded in the report
// as a cluster named after the norm node (passes/fold_report.h), each refusal with its reason.
#pragma once
#include "passes/fold_report.h"

namespace ot {

class ResidualNormFoldPass : public FoldPass {
 public:
  using FoldPass::FoldPass;
  std::string name() const override { return "fuse_residual_norm"; }
  bool Run(Graph& g) override;
};

}  // namespace ot
