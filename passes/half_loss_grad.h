// half_loss_grad (step graph, after amp): the softmax cross-entropy gradient written in half where amp casts it to
// half anyway, instead of a float32 gradient, its Cast, and float32 reads of it.
//
// Rewrite (under --amp; H = float16 or bfloat16):
//   d  = LossGrad(dL, X, t) {softmax = 1}          float32 [N, C]
//   d' = Reshape(d, s) (zero or more)              float32
//   h  = Cast(d', to = H)                          read by the half GEMMs of the layer below
//   b  = ReduceToShape(d', s2) (zero or more)      float32: the layer's bias gradient
// becomes
//   d  = LossGrad(dL, X, t) {softmax = 1, to = H}  H (the same row computed in float, rounded once as the Cast did)
//   d' = Reshape(d, s)                             H; h's readers read d'
//   b  = Cast(ReduceToShape(d', s2), to = float32) the bias gradient summed from the half gradient (fp32 sums), as
//                                                  PyTorch's autocast computes a half Linear's bias gradient
// Conditions: X float32 of rank 2 (rows of C classes), d and every value of the Reshape chain read only by the next
// node, d' read only by Casts to H (at least one) and ReduceToShape nodes; none is a graph output or training state.
// Why: the LM's [B, T, V] gradient is the step's largest tensor; in float32 it was written (LossGrad), read and
// written again in half (Cast) and read for the bias (ReduceToShape): 3.5 B x V x T x B of traffic more than needed
// (a d256 LM at V 8192: 18 ms of a 157 ms bf16 step).
#pragma once
#include "passes/pass.h"

namespace ot {

class HalfLossGradPass : public Pass {
 public:
  std::string name() const override { return "half_loss_grad"; }
  bool Run(Graph& g) override;
  int rewritten() const { return rewritten_; }  // after Run: LossGrad nodes that now write half

 private:
  int rewritten_ = 0;
};

}  // namespace ot
