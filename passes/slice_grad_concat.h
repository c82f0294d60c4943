// slice_grad_concat (step graph, after autodiff): the gradients of Slices that split a tensor into adjacent pieces,
// summed, become one Concat of the pieces' gradients.
//
// Rewrite (one axis a, every piece's starts/ends constants, step 1; X's size D along a static):
//   dX = Sum(SliceGrad(dY1, Shape(X), s1, e1, a), ..., SliceGrad(dYk, Shape(X), sk, ek, a)[, others...])
// where the intervals [s_i, e_i) (normalized over D) tile [0, D) without gaps or overlaps, becomes
//   dX = Concat(dY_i in order of s_i, axis = a)              (no other Sum input)
//   dX = Sum(Concat(...), others...)                           (other gradients of X kept)
// Conditions: each SliceGrad's output is read only by the Sum and is neither a graph output nor training state;
// their shape inputs are Shape of the same X (or the same value). The Shape nodes left unread are removed.
// Why: nn.MultiheadAttention's in-projection is sliced into q, k and v; each SliceGrad wrote a zero-padded tensor of
// the whole projection and Sum added the three (a d256 LM: 10.8 ms of a 367 ms fp32 step, for a copy).
#pragma once
#include "passes/pass.h"

namespace ot {

class SliceGradConcatPass : public Pass {
 public:
  std::string name() const override { return "slice_grad_concat"; }
  bool Run(Graph& g) override;
  int concats() const { return concats_; }  // after Run: Sums of SliceGrads made Concats

 private:
  int concats_ = 0;
};

}  // namespace ot
