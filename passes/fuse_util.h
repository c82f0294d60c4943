// Helpers shared by the pattern-fusion passes (fuse_gelu, fuse_layer_norm): reading scalar constants (an
// initializer or a Constant node's output with one element), asking whether a value is private to a pattern
// (one consumer, not a graph output, not bound as training state), and removing the matched nodes together with
// the Constant nodes that only they used.
#pragma once
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace ot::fuse {

// The tensor a value always holds: its initializer or the `value` of the Constant node producing it (value_float
// and value_floats too); nullopt otherwise.
inline std::optional<Tensor> ConstantTensor(const Value* v) {
  if (!v) return std::nullopt;
  if (v->initializer) return *v->initializer;
  const Node* n = v->producer;
  if (!n || n->op_type != "Constant" || !(n->domain.empty() || n->domain == "ai.onnx")) return std::nullopt;
  if (const Attribute* a = n->attr("value"); a && a->kind == Attribute::Kind::kTensor) return a->t;
  if (const Attribute* a = n->attr("value_float")) return Tensor::Scalar(a->f);
  if (const Attribute* a = n->attr("value_floats")) return Tensor::FromFloat(a->floats, {int64_t(a->floats.size())});
  return std::nullopt;
}

// A float constant with one element (scalar or shape [1] / [1, 1]...): its value.
inline std::optional<double> ScalarConstant(const Value* v) {
  std::optional<Tensor> t = ConstantTensor(v);
  if (!t || t->numel() != 1 || !IsFloat(t->dtype())) return std::nullopt;
  return t->GetDouble(0);
}

// Rank of a constant (for the broadcast check: a [1, 1] constant would raise a rank-1 x's rank).
inline int ConstantRank(const Value* v) {
  std::optional<Tensor> t = ConstantTensor(v);
  return t ? static_cast<int>(t->dims().size()) : 0;
}

// |got - want| <= 1e-6 |want|: exporters write the constants in float32 (1.4142135 for sqrt 2).
inline bool Near(std::optional<double> got, double want) {
  return got && std::fabs(*got - want) <= 1e-6 * std::fabs(want);
}

inline bool IsOp(const Node* n, const char* op) {
  return n && n->op_type == op && (n->domain.empty() || n->domain == "ai.onnx");
}

// n is the internal op `op` (ai.onnxtrain); false for null.
inline bool IsInternalOp(const Node* n, const char* op) {
  return n && n->op_type == op && n->domain == kInternalDomain;
}

// True when v has exactly one consumer and is neither a graph output nor the next value of training state: the
// pattern may delete it.
inline bool Private(const Graph& g, const Value* v) {
  if (!v || v->uses.size() != 1) return false;
  if (std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end()) return false;
  for (const auto& b : g.update_bindings)
    if (b.next == v || b.state == v) return false;
  return true;
}

// The single consumer of v (nullptr when v is not private).
inline Node* OnlyUser(const Graph& g, const Value* v) { return Private(g, v) ? v->uses.front().node : nullptr; }

// For a binary node with `v` as one operand: the other operand (nullptr when v is neither or both).
inline Value* Other(const Node* n, const Value* v) {
  if (n->inputs.size() != 2) return nullptr;
  if (n->inputs[0] == v && n->inputs[1] != v) return n->inputs[1];
  if (n->inputs[1] == v && n->inputs[0] != v) return n->inputs[0];
  return nullptr;
}

// The scope of a node name as PyTorch writes it ("/blocks.0/gelu/Mul_1" -> "/blocks.0/gelu"), "" when none.
inline std::string Scope(const std::string& name) {
  const size_t p = name.rfind('/');
  return p == std::string::npos || p == 0 ? std::string() : name.substr(0, p);
}

// Removes the matched nodes, then every Constant node whose output lost its last use (and is no graph output).
inline void RemoveMatched(Graph& g, const std::vector<Node*>& nodes) {
  std::vector<Node*> consts;
  for (Node* n : nodes)
    for (Value* in : n->inputs)
      if (in && IsOp(in->producer, "Constant") && std::find(consts.begin(), consts.end(), in->producer) == consts.end())
        consts.push_back(in->producer);
  for (Node* n : nodes) g.RemoveNode(n);
  for (Node* c : consts)
    if (c->outputs.size() == 1 && c->outputs[0]->uses.empty() &&
        std::find(g.outputs.begin(), g.outputs.end(), c->outputs[0]) == g.outputs.end())
      g.RemoveNode(c);
}

}  // namespace ot::fuse
