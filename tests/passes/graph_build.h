// Small graphs for the pass tests (tests/passes/) and the fusion tests (tests/executor/fusion_test_util.h): static
// inputs, a graph built and its shapes inferred, internal ops, and counting or finding nodes by op.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/op_registry.h"
#include "tests/passes/grad_check.h"
#include "tests/test_util.h"

namespace ot::test {

inline Value* Input(Graph& g, const std::string& name, std::vector<int64_t> dims, DataType t = DataType::kFloat32) {
  Value* v = g.AddValue(name);
  v->dtype = t;
  v->shape = Shape::Static(dims);
  g.inputs.push_back(v);
  return v;
}

// A graph built by `build` (opset 17), its shapes inferred. `seed`: the random draws of its weights (two graphs made
// with one seed hold the same weights).
inline std::unique_ptr<Graph> Make(const std::function<void(Graph&)>& build, uint64_t seed = 1) {
  Rng().seed(seed);
  auto g = std::make_unique<Graph>();
  g->opset_imports[""] = 17;
  build(*g);
  InferShapes(*g);
  return g;
}

// Puts node n in the internal domain (ai.onnxtrain, opset 1), as the passes that make internal ops do; returns n.
inline Node* MakeInternal(Graph& g, Node* n) {
  n->domain = kInternalDomain;
  n->opset = 1;
  g.opset_imports[kInternalDomain] = 1;
  return n;
}

// EmitN of an internal op.
inline std::vector<Value*> EmitInternal(Graph& g, const std::string& op, std::vector<Value*> ins, int nout = 1,
                                        Attrs attrs = {}) {
  std::vector<Value*> outs = EmitN(g, op, std::move(ins), nout, std::move(attrs));
  MakeInternal(g, outs[0]->producer);
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

}  // namespace ot::test
