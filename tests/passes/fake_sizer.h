// A StepSizer for the fusion passes' tests (passes/fusion_stage.h), without the executor: every value's dims from its
// inferred static shape, graph inputs and initializers resident, graph outputs live to the end, every node a kernel
// unless named in `constants`, workspaces by node name, and the planned peak from the liveness model the passes price
// with (RematerializePass::Peak over the kernels in topological order). Tests edit a measure (`edit`) to put a fact
// where they want it, and count the calls.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/op_registry.h"
#include "passes/fusion_stage.h"
#include "passes/rematerialize.h"
#include "tests/passes/graph_build.h"

namespace ot::test {

class FakeSizer : public StepSizer {
 public:
  std::set<std::string> constants;                       // node names that are no kernels (folded when a plan is made)
  std::map<std::string, int64_t> workspace;              // bytes by node name
  std::function<void(const Graph&, FusionSizes&)> edit;  // changes a measure before it is returned
  int calls = 0;

  FusionSizes Measure(const Graph& g) override {
    ++calls;
    FusionSizes s;
    for (const auto& v : g.values()) {
      if (!v->shape.is_static() || v->dtype == DataType::kUndefined) continue;
      FusionSizes::Facts f;
      f.dims.dtype = v->dtype;
      f.dims.dims = v->shape.StaticDims();
      f.resident = v->is_initializer() || std::count(g.inputs.begin(), g.inputs.end(), v.get()) > 0;
      s.values[v.get()] = f;
    }
    for (const Value* v : g.outputs)
      if (auto it = s.values.find(v); it != s.values.end()) it->second.output = true;
    for (const auto& n : g.nodes()) {
      if (constants.count(n->name)) continue;
      FusionSizes::KernelFacts k;
      if (auto it = workspace.find(n->name); it != workspace.end()) k.workspace = it->second;
      s.kernels[n.get()] = k;
    }
    FusionReport unused;
    s.planned_peak = RematerializePass(0, s, &unused).Peak(g);
    if (edit) edit(g, s);
    return s;
  }
};

// The reasons of a report's refusals, one per line.
inline std::string Refusals(const FusionReport& r) {
  std::string s;
  for (const RefusedMerge& m : r.refused) s += m.producer + " -> " + m.consumer + ": " + m.reason + "\n";
  return s;
}

}  // namespace ot::test
