// A StepSizer for the fusion passes' tests (passes/fusion_stage.h), without the executor: every value's dims from its
// inferred static shape, graph inputs and initializers resident, graph outputs live to the end, every node a kernel
// unless named in `constants`, workspaces by node name, and the planned peak from the liveness model the passes price
// with (RematerializePass::Peak over the kernels in topological order). Tests edit a measure (`edit`) to put a fact
// where they want it, and count the calls. Small graph builders for static inputs and internal ops come with it.
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
#include "tests/passes/grad_check.h"

namespace ot::test {

class FakeSizer : public StepSizer {
 public:
  std::set<std::string> constants;             // node names that are no kernels (folded when a plan is made)
  std::map<std::string, int64_t> workspace;    // bytes by node name
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

inline Value* Input(Graph& g, const std::string& name, std::vector<int64_t> dims, DataType t = DataType::kFloat32) {
  Value* v = g.AddValue(name);
  v->dtype = t;
  v->shape = Shape::Static(dims);
  g.inputs.push_back(v);
  return v;
}

// A graph built by `build` (opset 17), its shapes inferred.
inline std::unique_ptr<Graph> Make(const std::function<void(Graph&)>& build) {
  auto g = std::make_unique<Graph>();
  g->opset_imports[""] = 17;
  build(*g);
  InferShapes(*g);
  return g;
}

// An internal op (ai.onnxtrain, opset 1), as the passes that make internal ops emit it.
inline std::vector<Value*> EmitInternal(Graph& g, const std::string& op, std::vector<Value*> ins, int nout = 1,
                                        Attrs attrs = {}) {
  std::vector<Value*> outs = EmitN(g, op, std::move(ins), nout, std::move(attrs));
  outs[0]->producer->domain = kInternalDomain;
  outs[0]->producer->opset = 1;
  g.opset_imports[kInternalDomain] = 1;
  return outs;
}

inline int Count(const Graph& g, const std::string& op) {
  int n = 0;
  for (const auto& node : g.nodes()) n += node->op_type == op;
  return n;
}

inline const Node* Find(const Graph& g, const std::string& op) {
  for (const auto& node : g.nodes())
    if (node->op_type == op) return node.get();
  return nullptr;
}

// The reasons of a report's refusals, one per line.
inline std::string Refusals(const FusionReport& r) {
  std::string s;
  for (const RefusedMerge& m : r.refused) s += m.producer + " -> " + m.consumer + ": " + m.reason + "\n";
  return s;
}

}  // namespace ot::test
