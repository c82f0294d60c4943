// master_weights: trained parameters stay float32 state; their half copies become state too, refreshed by the
// optimizer's update kernel in the pass that updates the master (no Cast kernel per step).
//
// Runs after the amp pass. Input: a step graph in which the amp pass cast trained parameters to half precision,
// Cast(P, to = float16 | bfloat16), P being input 2+i of the OptimizerUpdate node (a trained parameter).
// Rewrite, for each such parameter P (all its Casts to that dtype; the amp pass shares one per producer):
//   - a new state initializer "P.half" (a fresh name when taken) holding round(P) in the half dtype, the value the
//     Cast computed before the first step;
//   - every use of the Cast's output now reads "P.half"; the Cast is deleted;
//   - OptimizerUpdate gets i in its half_params attribute (kept ascending) and half_dtype, and one more output
//     h' = round(P') (graph/ops/optimizer_layout.h places it), with update binding {P.half, h'}.
// Gradients still reach the optimizer as float32 (the amp pass casts them), moments stay float32: the node runs
// in fp32 (AMP class deny). All half copies share one dtype: Casts of parameters to both float16 and bfloat16
// are an Error. Casts of frozen initializers (not inputs of the update) are left alone. Returns true when some
// Cast was replaced; a graph without a Cast of a trained parameter is unchanged.
#pragma once
#include <utility>
#include <vector>

#include "passes/pass.h"

namespace ot {

class MasterWeightsPass : public Pass {
 public:
  std::string name() const override { return "master_weights"; }
  bool Run(Graph& g) override;
};

// (master, half copy) state pairs of the graph's OptimizerUpdate node, in parameter order; empty without one.
// The Trainer uses it for checkpoints: a half copy missing from a checkpoint (an fp32 run resumed with --amp) is
// recomputed from its master, and --save writes only the masters. A master sharded by passes/shard_masters.h is
// the parameter's value without an initializer (its float32 value is only in the master shard).
std::vector<std::pair<Value*, Value*>> HalfCopies(const Graph& g);

}  // namespace ot
