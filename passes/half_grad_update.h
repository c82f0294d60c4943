// half_grad_update (step graph, last under --amp): the optimizer update reads each half weight gradient as it is,
// instead of a float32 copy that a Cast writes first.
//
// Rewrite (H = float16 or bfloat16; p a float32 master weight):
//   g32 = Cast(g, to = float32)         g of dtype H: the gradient of p's half copy
//   ... = OptimizerUpdate(..., g32, ...)
// becomes
//   ... = OptimizerUpdate(..., g, ...)  the update widens g chunk by chunk (exact: the same numbers, bit for bit)
// Conditions: g32 read only by the update (one use, not a graph output or training state); the update not sharded
// (--shard-optimizer reads float32 gradient slices).
// Why: the Cast writes 4 bytes and reads 2 per weight element and the update reads the 4 again; BERT-base at bf16
// spent 47 ms of a 706 ms step in those Casts.
#pragma once
#include "passes/pass.h"

namespace ot {

class HalfGradUpdatePass : public Pass {
 public:
  std::string name() const override { return "half_grad_update"; }
  bool Run(Graph& g) override;
  int folded() const { return folded_; }  // after Run: gradients the update now reads in half

 private:
  int folded_ = 0;
};

}  // namespace ot
