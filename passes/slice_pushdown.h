// slice_pushdown (step graph, before pattern fusion and autodiff): a Slice along leading axes of a linear layer's
// output moves to the layer's input, so the layer computes only the rows that are kept.
//
// Rewrite (the Slice's starts/ends/axes/steps constants; every sliced axis, normalized, before the last axis of the
// layer's output of rank r):
//   z = Slice(Add(MatMul(h, W), b))   ->  z = Add(MatMul(Slice(h), W), b)
//   z = Slice(MatMul(h, W))           ->  z = MatMul(Slice(h), W)
// with W 2-D, h of rank r, and the Add's other operand (bias) of rank <= r and of size 1 at every sliced axis (as
// broadcast from the right): each output row is then a function of the same row of h alone. Add may also be Sub,
// Mul or Div under the same condition; element-by-element unary ops (Cast, Relu, Tanh...) may come between. The
// MatMul, the Add and the Slice's input have no other consumer and are neither graph outputs nor training state;
// z's consumers read the Add's (or MatMul's) output instead.
// Why: a causal LM's loss drops the last position's logits (`logits[:, :-1]`): sliced after the vocabulary
// projection, that copies the [B, T, V] logits and its gradient pads them back -- two full passes over the model's
// largest tensors (67 MB each for a d256 LM at V 8192, batch 16, T 128; 823 MB for GPT-2 at batch 4, T 1024);
// sliced before it, the copies are of [B, T, d] and the projection does (T - 1) / T of the work.
#pragma once
#include "passes/pass.h"

namespace ot {

class SlicePushdownPass : public Pass {
 public:
  std::string name() const override { return "slice_pushdown"; }
  bool Run(Graph& g) override;
  int moved() const { return moved_; }  // after Run: Slices moved to a layer's input

 private:
  int moved_ = 0;
};

}  // namespace ot
