// Rematerialization under the memory budget (after cluster fusion; XLA's HloRematerialization, sized with the
// memory plan's model, passes/memory_plan.h). Fusion alone cannot bring a training step below the peak of its
// saved activations; recomputing cheap ones can.
//
// Rewrite. While the planned peak of the step (LivenessPeak over the executor's order: Graph::TopologicalOrder of
// the kernels, each kernel's declared workspace included) is above FuseOptions::memory_budget: among the values V
// live across the peak step that
//   - are made by a cheap kernel E: an op the registry marks recompute_cheap (fusible ops, norms, softmax,
//     transposes) or a FusedElementwise node -- one pass over its operands, no GEMM -- with V its only output, or
//     its output 0 when the op's other outputs are optional (LayerNormalization's Y; the copy omits Mean and
//     InvStdDev);
//   - are read both before or at the peak (the forward) and after it (the backward);
//   - have every input of E resident, or alive at V's first late reader anyway (so recomputing adds no live bytes
//     at the peak);
// the largest is recomputed: a copy of E (same op, attributes and inputs) right before V's first late reader
// feeds every late reader, and V dies after its early ones. Repeated until the peak fits or no candidate is left.
// The copy computes the same values bit for bit (same kernel, same inputs). Each recomputation is reported.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "passes/cluster_fusion.h"
#include "passes/pass.h"

namespace ot {

class RematerializePass : public Pass {
 public:
  // `sizes`: the unfused step's facts (values made since -- fused nodes' outputs are original values -- keep
  // theirs; copies take their original's); `report`: gains `rematerialized` and an updated peak_after.
  RematerializePass(int64_t budget, const FusionSizes& sizes, FusionReport* report)
      : budget_(budget), sizes_(sizes), report_(report) {}
  std::string name() const override { return "rematerialize"; }
  bool Run(Graph& g) override;
  // The planned liveness peak of `g` as this pass models it (for tests and the caller's check).
  int64_t Peak(const Graph& g, int* peak_step = nullptr) const;

 private:
  int64_t budget_;
  const FusionSizes& sizes_;
  FusionReport* report_;
  // Values and nodes this pass made, mapped to the originals they copy (their dims and kernel facts).
  std::unordered_map<const Value*, const Value*> value_alias_;
  std::unordered_map<const Node*, const Node*> node_alias_;
};

}  // namespace ot
