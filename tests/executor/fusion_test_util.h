// Small graphs for the fusion tests (cluster_fusion_test.cc, gemm_epilogue_test.cc): static inputs, seeded random
// weights, a graph made twice with the same weights, and counting nodes.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

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

inline Value* Weight(Graph& g, std::vector<int64_t> dims, DataType t = DataType::kFloat32) {
  return g.AddInitializer(g.UniqueName("w"), RandomTensor(t, dims));
}

using GraphBuildFn = std::function<void(Graph&)>;

// `seed`: the weights' random draws (two graphs made with one seed hold the same weights).
inline std::unique_ptr<Graph> Make(const GraphBuildFn& build, uint64_t seed = 1) {
  Rng().seed(seed);
  auto g = std::make_unique<Graph>();
  g->opset_imports[""] = 17;
  build(*g);
  InferShapes(*g);
  return g;
}

// Fresh inputs in [-2, 2] for every real input.
inline std::map<std::string, Tensor> Feeds(const Graph& g, uint64_t seed) {
  Rng().seed(seed);
  std::map<std::string, Tensor> f;
  for (const Value* v : g.RealInputs()) f[v->name] = RandomTensor(v->dtype, v->shape.StaticDims(), -2, 2);
  return f;
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
