// Small graphs for the fusion tests (cluster_fusion_test.cc, gemm_epilogue_test.cc, conv_epilogue_test.cc...):
// static inputs, seeded random weights, a graph made twice with the same weights, counting nodes, fusing for the
// graph's static shapes, and the fused graph held against the unfused one.
#pragma once
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "executor/executor.h"
#include "graph/graph.h"
#include "graph/op_registry.h"
#include "graph/verifier.h"
#include "tests/passes/graph_build.h"
#include "tests/test_util.h"
#include "training/fusion.h"

namespace ot::test {

inline Value* Weight(Graph& g, std::vector<int64_t> dims, DataType t = DataType::kFloat32) {
  return g.AddInitializer(g.UniqueName("w"), RandomTensor(t, dims));
}

using GraphBuildFn = std::function<void(Graph&)>;

// Fresh inputs in [-2, 2] for every real input.
inline std::map<std::string, Tensor> Feeds(const Graph& g, uint64_t seed) {
  Rng().seed(seed);
  std::map<std::string, Tensor> f;
  for (const Value* v : g.RealInputs()) f[v->name] = RandomTensor(v->dtype, v->shape.StaticDims(), -2, 2);
  return f;
}

// FuseForShapes for g's static input shapes with options `o`, then the verifier and a cycle check (throws on one).
inline FusionReport FuseStatic(Graph& g, const FuseOptions& o) {
  std::map<std::string, TensorDesc> descs;
  for (const Value* v : g.RealInputs()) descs[v->name] = TensorDesc{v->dtype, v->shape.StaticDims(), true};
  FusionReport r = FuseForShapes(g, o, descs, {});
  VerifyGraph(g);
  g.TopologicalOrder();
  return r;
}

inline FusionReport FuseStatic(Graph& g, const std::string& mode, int64_t budget = 0) {
  FuseOptions o;
  o.mode = ParseFuseMode(mode);
  o.memory_budget = budget;
  return FuseStatic(g, o);
}

// Whether the reason of some refused merge contains `text`.
inline bool RefusedWith(const FusionReport& r, const std::string& text) {
  for (const RefusedMerge& m : r.refused)
    if (m.reason.find(text) != std::string::npos) return true;
  return false;
}

// The graph `build` makes, fused under `mode` (at least one `op` node made) against the unfused one, both run on the
// same fresh inputs; every output element compared within rtol/atol.
inline void ExpectFusedMatches(const GraphBuildFn& build, const std::string& mode, const std::string& op, double rtol,
                               double atol) {
  const uint64_t seed = std::random_device{}();
  auto plain = Make(build, seed), fused = Make(build, seed);
  FuseStatic(*fused, mode);
  ASSERT_GE(Count(*fused, op), 1);
  const std::map<std::string, Tensor> feeds = Feeds(*plain, seed + 1);
  Executor a(*plain), b(*fused);
  const std::vector<Tensor> want = a.Run(feeds), got = b.Run(feeds);
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) ExpectClose(got[i], want[i], rtol, atol);
}

}  // namespace ot::test
