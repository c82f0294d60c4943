#include "passes/fuse_gelu.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "graph/graph.h"
#include "graph/op_registry.h"
#include "passes/fuse_util.h"

namespace ot {

namespace {

using namespace fuse;

constexpr double kSqrt2 = 1.41421356237309504880;
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kTanhCoef = 0.044715;

// A match: the input x, the nodes to delete (the last one produces y), and the approximation.
struct Match {
  Value* x = nullptr;
  std::vector<Node*> nodes;
  bool tanh = false;
};

// Binary `op` node with constant operand ~= c; the other operand (nullptr when not). For Div and Sub the constant
// must be the second operand.
Value* WithConstant(const Node* n, const char* op, double c) {
  if (!IsOp(n, op) || n->inputs.size() != 2) return nullptr;
  const bool commutes = std::string(op) == "Mul" || std::string(op) == "Add";
  if (Near(ScalarConstant(n->inputs[1]), c)) return n->inputs[0];
  if (commutes && Near(ScalarConstant(n->inputs[0]), c)) return n->inputs[1];
  return nullptr;
}

// The constant operands of a match must not raise x's rank by broadcasting (a [1, 1] constant with a rank-1 x).
bool RanksOk(const Value* x, const std::vector<Node*>& nodes) {
  if (!x->shape.known_rank()) return false;
  for (const Node* n : nodes)
    for (const Value* in : n->inputs)
      if (in && ScalarConstant(in) && ConstantRank(in) > x->shape.rank()) return false;
  return true;
}

// x^3 as Pow(x, 3), Mul(Mul(x, x), x) or Mul(x, Mul(x, x)); returns x and appends the nodes.
Value* MatchCube(const Graph& g, Value* v, std::vector<Node*>& nodes) {
  Node* n = v->producer;
  if (IsOp(n, "Pow") && n->inputs.size() == 2 && Near(ScalarConstant(n->inputs[1]), 3.0)) {
    nodes.push_back(n);
    return n->inputs[0];
  }
  if (!IsOp(n, "Mul") || n->inputs.size() != 2) return nullptr;
  for (int i = 0; i < 2; ++i) {
    Value* sq = n->inputs[i];
    Value* x = n->inputs[1 - i];
    Node* s = sq->producer;
    if (IsOp(s, "Mul") && s->inputs.size() == 2 && s->inputs[0] == x && s->inputs[1] == x && Private(g, sq)) {
      nodes.push_back(n);
      nodes.push_back(s);
      return x;
    }
  }
  return nullptr;
}

// From the Erf/Tanh node `f` to a (= 1 + f(...)) and on to y. Fills m.nodes; false when the graph differs.
bool MatchTail(const Graph& g, Node* f, Match& m) {
  Node* add = OnlyUser(g, f->outputs[0]);
  if (!add || WithConstant(add, "Add", 1.0) != f->outputs[0]) return false;
  Value* a = add->outputs[0];
  Node* n1 = OnlyUser(g, a);
  if (!n1 || !IsOp(n1, "Mul") || n1->inputs.size() != 2) return false;
  m.nodes.push_back(add);
  m.nodes.push_back(n1);
  Value* other = Other(n1, a);
  if (!other) return false;
  if (other == m.x) {  // Mul(x, a), then * 0.5 or / 2
    Node* last = OnlyUser(g, n1->outputs[0]);
    if (!last ||
        !(WithConstant(last, "Mul", 0.5) == n1->outputs[0] || WithConstant(last, "Div", 2.0) == n1->outputs[0]))
      return false;
    m.nodes.push_back(last);
    return true;
  }
  if (Near(ScalarConstant(other), 0.5)) {  // h = Mul(a, 0.5), then Mul(x, h)
    Node* last = OnlyUser(g, n1->outputs[0]);
    if (!last || !IsOp(last, "Mul") || Other(last, n1->outputs[0]) != m.x) return false;
    m.nodes.push_back(last);
    return true;
  }
  // Mul(h, a) with h = Mul(x, 0.5), private to this Mul.
  Node* h = other->producer;
  if (!Private(g, other) || WithConstant(h, "Mul", 0.5) != m.x) return false;
  m.nodes.push_back(h);
  // The last node produces y: keep n1 last.
  std::swap(m.nodes[m.nodes.size() - 1], m.nodes[m.nodes.size() - 2]);
  return true;
}

bool MatchErf(const Graph& g, Node* erf, Match& m) {
  Value* in = erf->inputs.empty() ? nullptr : erf->inputs[0];
  if (!in || !Private(g, in)) return false;
  Node* scale = in->producer;
  m.x = WithConstant(scale, "Div", kSqrt2);
  if (!m.x) m.x = WithConstant(scale, "Mul", 1.0 / kSqrt2);
  if (!m.x) return false;
  m.nodes = {scale, erf};
  return MatchTail(g, erf, m);
}

bool MatchTanh(const Graph& g, Node* th, Match& m) {
  Value* u = th->inputs.empty() ? nullptr : th->inputs[0];
  if (!u || !Private(g, u)) return false;
  Node* mk = u->producer;
  Value* s = WithConstant(mk, "Mul", kSqrt2OverPi);  // k * (x + 0.044715 x^3)
  if (!s || !Private(g, s)) return false;
  Node* add = s->producer;
  if (!IsOp(add, "Add") || add->inputs.size() != 2) return false;
  m.nodes = {mk, add};
  for (int i = 0; i < 2; ++i) {
    Value* c = add->inputs[i];  // 0.044715 x^3
    Value* x = add->inputs[1 - i];
    if (!Private(g, c)) continue;
    Node* mc = c->producer;
    Value* cube = WithConstant(mc, "Mul", kTanhCoef);
    if (!cube || !Private(g, cube)) continue;
    std::vector<Node*> cn = {mc};
    if (MatchCube(g, cube, cn) != x) continue;
    m.x = x;
    m.nodes.insert(m.nodes.end(), cn.begin(), cn.end());
    m.nodes.push_back(th);
    return MatchTail(g, th, m);
  }
  return false;
}

}  // namespace

bool FuseGeluPass::Run(Graph& g) {
  fused_ = 0;
  InferShapes(g, /*strict=*/false);  // x's rank and dtype
  const OpSchema* gelu = OpRegistry::Global().Find("", "Gelu");
  const int min_opset = gelu ? gelu->min_opset : 20;
  bool again = true;
  while (again) {  // restart after each rewrite: it deletes nodes
    again = false;
    for (const auto& up : g.nodes()) {
      Node* f = up.get();
      Match m;
      if (IsOp(f, "Erf")) {
        if (!MatchErf(g, f, m)) continue;
      } else if (IsOp(f, "Tanh")) {
        if (!MatchTanh(g, f, m)) continue;
        m.tanh = true;
      } else {
        continue;
      }
      if (!IsFloat(m.x->dtype) || !RanksOk(m.x, m.nodes)) continue;
      Node* last = m.nodes.back();
      Value* y = last->outputs[0];
      if (y->dtype != m.x->dtype) continue;
      const std::string scope = Scope(last->name);
      const bool onnx_op = last->opset >= min_opset;  // else the internal alias (see the header)
      const int opset = last->opset;
      RemoveMatched(g, m.nodes);
      Node* n = g.AddNode("Gelu", {m.x}, {y}, scope.empty() ? g.UniqueName("Gelu") : scope + "/Gelu");
      n->domain = onnx_op ? "" : kInternalDomain;
      n->opset = onnx_op ? opset : 1;
      n->attrs["approximate"] = Attribute::String(m.tanh ? "tanh" : "none");
      ++fused_;
      again = true;
      break;
    }
  }
  return fused_ > 0;
}

}  // namespace ot
