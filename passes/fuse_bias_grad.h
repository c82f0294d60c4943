// Bias-gradient fusion (after fold_transpose, the last pass of the step pipeline: passes/step_graph.h). A Linear
// layer's backward computes its weight gradient as a Gemm reading the output gradient G as rows [R, N] (G itself when
// 2-D, or Flatten(G, rank - 1)) and its bias gradient as ReduceToShape(G) -> [N]: the column sums of the same rows.
// Rewrite: Gemm(A, B) {transA, transB, alpha} with no C, whose A (transA = 1) or B (transB = 0) is those rows, and
// ReduceToShape(G, like) -> [N] become one ai.onnxtrain.GemmSum(A, B) {transA, transB, alpha, sum_input} writing both
// values (graph/ops/internal_fused.cc): on the GPU the sums come from cuBLASLt's bias-gradient epilogue instead of a
// second pass over G; on the CPU the kernel runs the same GEMM and the same summation, so the numbers do not change.
// Not fused: a Gemm with C, an operand read the other way (transA = 0 for A, transB = 1 for B), a ReduceToShape that
// keeps more than the last axis or changes the dtype, and a pair whose fusion would put a cycle in the graph (a
// reader of the sums leading to the Gemm).
#pragma once
#include "passes/pass.h"

namespace ot {

class FuseBiasGradPass : public Pass {
 public:
  std::string name() const override { return "fuse_bias_grad"; }
  bool Run(Graph& g) override;
  int fused() const { return fused_; }

 private:
  int fused_ = 0;
};

}  // namespace ot
