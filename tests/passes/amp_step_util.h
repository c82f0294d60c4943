// Test helpers of the master-weights and loss-scaling pass tests: a small MLP step graph, the Casts the amp pass
// inserts for its parameters, and one training step on the CPU executor. The step graph is made by the loss,
// autodiff and optimizer passes directly (BuildStepGraph's first stages), so these tests see exactly the input
// of the passes they test, whatever later stages the pipeline runs.
#pragma once
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "executor/executor.h"
#include "graph/error.h"
#include "graph/graph.h"
#include "graph/op_registry.h"
#include "graph/verifier.h"
#include "passes/autodiff.h"
#include "passes/loss.h"
#include "passes/optimizer.h"
#include "tests/test_util.h"

namespace ot::amp_test {

constexpr int64_t kBatch = 6, kIn = 8, kHidden = 16, kOut = 3;

// Initial weights, shared by the graphs a differential test compares.
struct Weights {
  Tensor w1, b1, w2, b2;
  static Weights Random() {
    return {test::RandomTensor(DataType::kFloat32, {kIn, kHidden}), test::RandomTensor(DataType::kFloat32, {kHidden}),
            test::RandomTensor(DataType::kFloat32, {kHidden, kOut}), test::RandomTensor(DataType::kFloat32, {kOut})};
  }
};

struct Step {
  std::unique_ptr<Graph> graph;
  std::string loss;       // the loss value's name
  Value* seed = nullptr;  // autodiff's loss gradient seed
};

// x [6,8] -> Gemm(W1, b1) -> Relu -> Gemm(W2, b2) -> logits; cross-entropy with labels y; the step graph.
// `shard_world` > 1: the optimizer sharded over that many ranks (one group: every parameter).
inline Step MakeStep(const Weights& w, const std::string& optimizer = "adam", int64_t accumulate = 1,
                     int shard_world = 1) {
  Step s;
  s.graph = std::make_unique<Graph>();
  Graph& g = *s.graph;
  g.opset_imports[""] = 15;
  Value* x = g.AddValue("x");
  x->dtype = DataType::kFloat32;
  x->shape = Shape::Static({kBatch, kIn});
  g.inputs.push_back(x);
  Value* w1 = g.AddInitializer("W1", w.w1.Clone());
  Value* b1 = g.AddInitializer("b1", w.b1.Clone());
  Value* w2 = g.AddInitializer("W2", w.w2.Clone());
  Value* b2 = g.AddInitializer("b2", w.b2.Clone());
  Value* h = g.AddValue("h");
  g.AddNode("Gemm", {x, w1, b1}, {h}, "fc1");
  Value* r = g.AddValue("r");
  g.AddNode("Relu", {h}, {r}, "relu");
  Value* logits = g.AddValue("logits");
  g.AddNode("Gemm", {r, w2, b2}, {logits}, "fc2");
  g.outputs.push_back(logits);
  InferShapes(g);
  LossPass loss({"", "cross_entropy", "logits", "y"});
  loss.Run(g);
  s.loss = loss.loss_name();
  AutodiffPass autodiff({s.loss, ""});
  autodiff.Run(g);
  s.seed = autodiff.seed();
  EXPECT_NE(s.seed, nullptr);
  OptimizerOptions o;
  o.kind = ParseOptimizerKind(optimizer);
  o.lr = 0.01;
  o.accumulate = accumulate;
  o.world = shard_world;
  o.shard = shard_world > 1;
  OptimizerPass opt(o, autodiff.params(), autodiff.grads());
  opt.Run(g);
  g.outputs.push_back(g.FindValue(s.loss));
  VerifyGraph(g);
  return s;
}

inline Node* UpdateNode(const Graph& g) {
  for (const auto& n : g.nodes())
    if (n->op_type == "OptimizerUpdate" && n->domain == kInternalDomain) return n.get();
  return nullptr;
}

// What the amp pass does to a parameter P that half-precision ops read: one Cast(P, to = half) shared by every
// reader. The readers here stay float32 ops (so the CPU runs them anywhere), reading Cast(Cast(P, half), float):
// the numbers are those of a half-precision weight. Returns the half Cast nodes.
inline std::vector<Node*> InsertAmpCasts(Graph& g, const std::vector<std::string>& params, DataType half) {
  Node* opt = UpdateNode(g);
  std::vector<Node*> casts;
  for (const std::string& name : params) {
    Value* p = g.FindValue(name);
    std::vector<Use> readers;
    for (const Use& u : p->uses)
      if (u.node != opt) readers.push_back(u);
    Value* hv = g.AddValue(name + "_" + DataTypeName(half));
    Node* c = g.AddNode("Cast", {p}, {hv}, "amp/Cast_" + name);
    c->attrs["to"] = Attribute::Int(static_cast<int64_t>(half));
    InferNode(*c);
    Value* fv = g.AddValue(name + "_" + DataTypeName(half) + "_f32");
    Node* back = g.AddNode("Cast", {hv}, {fv}, "amp/CastBack_" + name);
    back->attrs["to"] = Attribute::Int(static_cast<int64_t>(DataType::kFloat32));
    InferNode(*back);
    for (const Use& u : readers) g.SetInput(u.node, u.input_index, fv);
    casts.push_back(c);
  }
  VerifyGraph(g);
  return casts;
}

// Seeded random batch (x, y).
inline std::map<std::string, Tensor> Batch() {
  Tensor y(DataType::kInt64, {kBatch});
  for (int64_t i = 0; i < kBatch; ++i) y.data<int64_t>()[i] = static_cast<int64_t>(test::Rng()() % kOut);
  return {{"x", test::RandomTensor(DataType::kFloat32, {kBatch, kIn}, -2, 2)}, {"y", y}};
}

// One step: runs the graph with every update binding's next value as an extra output and writes them into the
// state initializers (the Trainer's loop). Returns the graph outputs (without the extras).
inline std::vector<Tensor> RunStep(Graph& g, const std::map<std::string, Tensor>& feeds) {
  const size_t base = g.outputs.size();
  for (const auto& ub : g.update_bindings) g.outputs.push_back(ub.next);
  std::vector<Tensor> outs;
  {
    Executor ex(g);
    outs = ex.Run(feeds);
  }
  g.outputs.resize(base);
  for (size_t i = 0; i < g.update_bindings.size(); ++i)
    g.update_bindings[i].state->initializer = std::make_shared<Tensor>(outs[base + i]);
  outs.resize(base);
  return outs;
}

inline double OutputValue(const Graph& g, const std::vector<Tensor>& outs, const std::string& name) {
  for (size_t i = 0; i < g.outputs.size(); ++i)
    if (g.outputs[i]->name == name) return outs[i].GetDouble(0);
  ADD_FAILURE() << "no graph output " << name;
  return 0;
}

// Counts of what a pass may change, for the negative twins.
struct Shape_ {
  size_t values, nodes, bindings, outputs, inputs_of_update, outputs_of_update;
  bool operator==(const Shape_& o) const {
    return values == o.values && nodes == o.nodes && bindings == o.bindings && outputs == o.outputs &&
           inputs_of_update == o.inputs_of_update && outputs_of_update == o.outputs_of_update;
  }
};
inline Shape_ Snapshot(const Graph& g) {
  const Node* u = UpdateNode(g);
  return {g.values().size(), g.nodes().size(),         g.update_bindings.size(),
          g.outputs.size(),  u ? u->inputs.size() : 0, u ? u->outputs.size() : 0};
}

// Every output of `n` records n as producer at its index (what inserting outputs must keep).
inline void ExpectProducersConsistent(const Node* n) {
  for (size_t i = 0; i < n->outputs.size(); ++i)
    if (n->outputs[i]) {
      EXPECT_EQ(n->outputs[i]->producer, n) << n->outputs[i]->name;
      EXPECT_EQ(n->outputs[i]->producer_output, static_cast<int>(i)) << n->outputs[i]->name;
    }
}

}  // namespace ot::amp_test
