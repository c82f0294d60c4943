// Transpose folding: a GEMM reads an operand through its transpose flags instead of a transposed copy (XLA's
// TransposeFolding for dots). Runs last in the step pipeline (passes/step_graph.h), when autodiff, AMP and the
// master weights have written every Transpose a GEMM reads. Rewrites, repeated until nothing changes:
//   compose   Transpose(Transpose(x, p), q) -> x itself when p[q[i]] is the identity (autodiff's dX = dY (W^T)^T
//             for a Linear whose forward read Transpose(W)); else -> Transpose(x, p[q[i]]) when the inner Transpose
//             has no other reader and q is not a swap of the last two axes (that one is left to rule `operand`);
//   operand   MatMul(A, B) whose A or B is Transpose(X) swapping the last two axes (leading axes in place, rank
//             >= 2) -> ai.onnxtrain.MatMulTrans(.., X, ..) {trans_a, trans_b} (Gemm {transA, transB} when both
//             operands are 2-D); MatMulTrans and Gemm toggle their flags the same way; MatMulBias(A, Transpose(W),
//             bias) -> MatMulBias(A, W, bias) {trans_b};
//   result    Transpose(P) swapping the last two axes of a product P = MatMul / MatMulTrans / Gemm without C whose
//             only reader is that Transpose -> the product of the swapped operands, (op(A) op(B))^T =
//             op(B)^T op(A)^T (the weight gradient autodiff writes as Transpose(Gemm(X, dY) {transA})).
// A Transpose left without readers is removed (one that is a graph output or bound to state stays). Values keep
// their names, shapes and dtypes; only the kernels that compute them change, so numbers change by GEMM rounding
// order at most. Never folded: a Transpose that moves a leading (batch) axis, a product read elsewhere as well
// (rule `result` would compute it twice), Gemm with C.
#pragma once
#include "passes/pass.h"

namespace ot {

class FoldTransposePass : public Pass {
 public:
  std::string name() const override { return "fold_transpose"; }
  bool Run(Graph& g) override;
  // What the last Run did: Transposes removed, operand flags set, products swapped.
  int removed() const { return removed_; }
  int folded_operands() const { return operands_; }
  int folded_results() const { return results_; }

 private:
  int removed_ = 0, operands_ = 0, results_ = 0;
};

}  // namespace ot
