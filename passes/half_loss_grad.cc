#include "passes/half_loss_grad.h"

#include <algorithm>
#include <vector>

#include "graph/op_registry.h"
#include "passes/fuse_util.h"

namespace ot {

namespace {

using namespace fuse;

// Neither a graph output nor training state (it may have several readers).
bool Unpinned(const Graph& g, const Value* v) {
  if (std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end()) return false;
  for (const auto& b : g.update_bindings)
    if (b.next == v || b.state == v) return false;
  return true;
}

bool IsHalf(DataType t) { return t == DataType::kFloat16 || t == DataType::kBFloat16; }

// What a LossGrad's gradient flows into: the Reshape chain, the Casts to half and the ReduceToShape nodes at its end.
struct Match {
  std::vector<Value*> chain;  // d, then each Reshape's output; the last is d'
  std::vector<Node*> casts, sums;
  DataType half = DataType::kUndefined;
};

bool MatchGrad(const Graph& g, Node* lg, Match& m) {
  if (!IsInternalOp(lg, "LossGrad") || lg->attr_int("softmax", 0) != 1 || lg->has_attr("to")) return false;
  if (!lg->has_input(1) || lg->outputs.size() != 1 || !lg->has_output(0)) return false;
  const Value* x = lg->inputs[1];
  if (x->dtype != DataType::kFloat32 || !x->shape.known_rank() || x->shape.rank() != 2) return false;
  Value* cur = lg->outputs[0];
  if (cur->dtype != DataType::kFloat32) return false;
  m.chain = {cur};
  while (Private(g, cur) && IsOp(cur->uses.front().node, "Reshape") && cur->uses.front().input_index == 0) {
    cur = cur->uses.front().node->outputs[0];
    m.chain.push_back(cur);
  }
  if (!Unpinned(g, cur) || cur->uses.empty()) return false;
  for (const Use& u : cur->uses) {
    Node* n = u.node;
    if (u.input_index != 0) return false;
    if (IsOp(n, "Cast")) {
      const DataType to = static_cast<DataType>(n->attr_int("to", 0));
      if (!IsHalf(to) || (m.half != DataType::kUndefined && to != m.half) || !Unpinned(g, n->outputs[0])) return false;
      m.half = to;
      m.casts.push_back(n);
    } else if (IsInternalOp(n, "ReduceToShape") && n->outputs.size() == 1) {
      m.sums.push_back(n);
    } else {
      return false;
    }
  }
  return !m.casts.empty();
}

}  // namespace

bool HalfLossGradPass::Run(Graph& g) {
  rewritten_ = 0;
  std::vector<Node*> grads;
  for (const auto& up : g.nodes())
    if (IsInternalOp(up.get(), "LossGrad")) grads.push_back(up.get());
  for (Node* lg : grads) {
    Match m;
    if (!MatchGrad(g, lg, m)) continue;
    lg->attrs["to"] = Attribute::Int(static_cast<int64_t>(m.half));
    for (Value* v : m.chain) v->dtype = m.half;
    Value* end = m.chain.back();
    for (Node* c : m.casts) {
      Value* h = c->outputs[0];
      g.RemoveNode(c);
      g.ReplaceAllUses(h, end);
    }
    // Each bias gradient summed from the half gradient, then widened to the float32 value its readers expect.
    for (Node* r : m.sums) {
      Value* out = r->outputs[0];
      Value* half = g.AddValue(g.UniqueName(out->name + ".half"));
      half->dtype = m.half;
      half->shape = out->shape;
      out->producer = nullptr;
      out->producer_output = -1;
      r->outputs[0] = half;
      half->producer = r;
      half->producer_output = 0;
      Node* cast = g.AddNode("Cast", {half}, {out}, g.UniqueName(r->name + "/to_fp32"));
      cast->attrs["to"] = Attribute::Int(static_cast<int64_t>(DataType::kFloat32));
    }
    ++rewritten_;
  }
  if (rewritten_) InferShapes(g, /*strict=*/false);
  return rewritten_ > 0;
}

}  // namespace ot
