// Epilogue fusion (--fuse=full, after cluster fusion; DESIGN.md "cluster fusion": full also fuses GEMM/conv
// epilogues). The CPU counterpart of a cuBLASLt epilogue or a oneDNN post-op, for any cluster program rather than
// a fixed menu.
//
// Rewrite. A kernel G whose result Y is read by a cluster consumer C -- a FusedElementwise node, or one node whose op
// has a cluster lowering -- becomes one node running C's program over Y block by block right after each block of G:
//   GEMM  MatMul (A of rank >= 2, B [K, N]) or MatMulBias {activation none} -> ai.onnxtrain.MatMulEpilogue(A, B,
//         bias or absent, C's other inputs...), blocks of Y's rows (executor/kernels/matmul_epilogue.cc);
//   conv  Conv (1-D to 3-D, float types) -> ai.onnxtrain.ConvEpilogue(X, W, B or absent, C's other inputs...) with
//         the Conv's attributes, blocks of images (executor/kernels/conv_epilogue.cc).
// When all of these hold, else the fold is refused and the reason recorded in the report:
//   domain    C's program iterates over exactly Y's shape (Y is not broadcast into a larger domain) and reduces at
//             most the last axis;
//   escapes   Y is stored too (an extra output) when something besides C reads its data or the step returns it; a
//             reader of Y's shape only (Shape: folded at plan time) is pointed at a value of Y's shape that C
//             reads or writes, where there is one;
//   no cycle  nothing that reads Y besides C leads to C (the fused node would wait for itself);
//   operands  inputs + outputs <= limits.operands;
//   memory    running G's work at C's place keeps G's inputs alive until then: their bytes (those G was the last
//             reader of) added to the planned peak stay within the budget (FuseOptions::memory_budget), unless Y
//             is not stored and at least as large (then no step in between holds more than before).
// Batched B (attention's Q K^T), Gemm and GEMMs reading a transposed operand (MatMulTrans, MatMulBias {trans_b})
// are not folded: oneDNN rounds a row block of a product with a transposed B differently from the whole.
// ConvTranspose, Conv of float64 (the gradient checks' naive kernel) and of more than 3-D are not folded either.
// The fused node takes C's place in the node list.
#pragma once
#include "passes/cluster_fusion.h"
#include "passes/pass.h"

namespace ot {

class EpiloguePass : public Pass {
 public:
  // `sizes`: the unfused step's facts (FuseForShapes); `report`: the cluster pass's report, extended with the
  // folds (clusters named "epilogue/...") and the refusals.
  EpiloguePass(FuseOptions opts, const FusionSizes& sizes, FusionReport* report)
      : opts_(std::move(opts)), sizes_(sizes), report_(report) {}
  std::string name() const override { return "fuse_epilogue"; }
  bool Run(Graph& g) override;

 private:
  FuseOptions opts_;
  const FusionSizes& sizes_;
  FusionReport* report_;
};

}  // namespace ot
