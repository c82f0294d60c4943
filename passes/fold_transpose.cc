#include "passes/fold_transpose.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/op_registry.h"
#include "passes/fuse_util.h"

namespace ot {

namespace {

bool IsStd(const Node* n, const char* op) {
  return n && n->op_type == op && (n->domain.empty() || n->domain == "ai.onnx");
}
// A value the step hands out or keeps (graph output, state or the next value of state): its producer stays.
bool Pinned(const Graph& g, const Value* v) {
  if (std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end()) return true;
  for (const Graph::UpdateBinding& b : g.update_bindings)
    if (b.next == v || b.state == v) return true;
  return false;
}

// The perm of a Transpose node (its default, the reversed axes, when the attribute is absent); empty when unknown.
std::vector<int64_t> PermOf(const Node* t) {
  if (t->has_attr("perm")) return t->attr_ints("perm");
  const Shape& s = t->inputs[0]->shape;
  if (!s.known_rank()) return {};
  std::vector<int64_t> p(static_cast<size_t>(s.rank()));
  for (int i = 0; i < s.rank(); ++i) p[static_cast<size_t>(i)] = s.rank() - 1 - i;
  return p;
}

bool SwapsLastTwo(const std::vector<int64_t>& p) {
  const size_t r = p.size();
  if (r < 2) return false;
  for (size_t i = 0; i + 2 < r; ++i)
    if (p[i] != static_cast<int64_t>(i)) return false;
  return p[r - 2] == static_cast<int64_t>(r - 1) && p[r - 1] == static_cast<int64_t>(r - 2);
}

// X when v = Transpose(X) swaps X's last two axes and nothing else; nullptr otherwise.
Value* SwappedSource(const Value* v) {
  const Node* t = v ? v->producer : nullptr;
  if (!IsStd(t, "Transpose") || !t->has_input(0) || t->outputs.size() != 1) return nullptr;
  return SwapsLastTwo(PermOf(t)) ? t->inputs[0] : nullptr;
}

int RankOf(const Value* v) { return v && v->shape.known_rank() ? v->shape.rank() : -1; }

bool Flag(const Node* n, const char* k) { return n->attr_int(k, 0) != 0; }

// Gemm with optional C exists from opset 11; older models get MatMulTrans for 2-D products too.
bool GemmWithoutCAllowed(const Graph& g) { return g.OpsetOf("") >= 11; }

// Turns n into the product op(a) op(b): Gemm when both are 2-D (and the opset allows it), else MatMulTrans.
// `alpha` carries a Gemm's scale (1 otherwise).
void MakeProduct(Graph& g, Node* n, Value* a, Value* b, bool ta, bool tb, float alpha) {
  const bool gemm = RankOf(a) == 2 && RankOf(b) == 2 && GemmWithoutCAllowed(g);
  std::map<std::string, Attribute> attrs;
  if (gemm) {
    n->op_type = "Gemm";
    n->domain = "";
    n->opset = g.OpsetOf("");
    attrs["transA"] = Attribute::Int(ta ? 1 : 0);
    attrs["transB"] = Attribute::Int(tb ? 1 : 0);
    if (alpha != 1.0f) attrs["alpha"] = Attribute::Float(alpha);
  } else {
    n->op_type = "MatMulTrans";
    n->domain = kInternalDomain;
    n->opset = 1;
    if (!g.opset_imports.count(kInternalDomain)) g.opset_imports[kInternalDomain] = 1;
    attrs["trans_a"] = Attribute::Int(ta ? 1 : 0);
    attrs["trans_b"] = Attribute::Int(tb ? 1 : 0);
  }
  n->attrs = std::move(attrs);
  while (n->inputs.size() > 2 && !n->inputs.back()) n->inputs.pop_back();  // a Gemm's absent C
  g.SetInput(n, 0, a);
  g.SetInput(n, 1, b);
}

// Rule `compose`. True when it changed t.
bool Compose(Graph& g, Node* t) {
  if (!IsStd(t, "Transpose") || !t->has_input(0) || t->outputs.size() != 1) return false;
  if (t->outputs[0]->uses.empty() && !Pinned(g, t->outputs[0])) return false;  // dead: removed at the end
  const Node* inner = t->inputs[0]->producer;
  if (!IsStd(inner, "Transpose") || !inner->has_input(0)) return false;
  const std::vector<int64_t> p = PermOf(inner), q = PermOf(t);
  if (p.empty() || p.size() != q.size()) return false;
  std::vector<int64_t> c(q.size());
  bool identity = true;
  for (size_t i = 0; i < q.size(); ++i) {
    if (q[i] < 0 || q[i] >= static_cast<int64_t>(p.size())) return false;
    c[i] = p[static_cast<size_t>(q[i])];
    identity = identity && c[i] == static_cast<int64_t>(i);
  }
  // A swap of the last two axes that is not undone is left to the GEMMs reading it (rule `operand` folds it into
  // their flags); composed, it would become a Transpose no GEMM can read in place. Otherwise two copies become one
  // only when the inner Transpose has no other reader.
  if (!identity && (SwapsLastTwo(q) || inner->outputs[0]->uses.size() != 1 || Pinned(g, inner->outputs[0])))
    return false;
  Value* x = inner->inputs[0];
  Value* y = t->outputs[0];
  if (identity && !Pinned(g, y)) {
    g.ReplaceAllUses(y, x);
    return true;
  }
  t->attrs["perm"] = Attribute::Ints(c);
  g.SetInput(t, 0, x);
  return true;
}

// Rule `operand`. True when it changed n.
bool FoldOperands(Graph& g, Node* n) {
  if (IsStd(n, "MatMul") && n->inputs.size() == 2 && n->has_input(0) && n->has_input(1)) {
    Value* sa = SwappedSource(n->inputs[0]);
    Value* sb = SwappedSource(n->inputs[1]);
    if (!sa && !sb) return false;
    if (RankOf(n->inputs[0]) < 2 || RankOf(n->inputs[1]) < 2) return false;
    MakeProduct(g, n, sa ? sa : n->inputs[0], sb ? sb : n->inputs[1], sa != nullptr, sb != nullptr, 1.0f);
    return true;
  }
  if (fuse::IsInternalOp(n, "MatMulTrans")) {
    bool changed = false;
    for (int i = 0; i < 2; ++i) {
      Value* s = SwappedSource(n->inputs[static_cast<size_t>(i)]);
      if (!s) continue;
      const char* k = i == 0 ? "trans_a" : "trans_b";
      n->attrs[k] = Attribute::Int(Flag(n, k) ? 0 : 1);
      g.SetInput(n, i, s);
      changed = true;
    }
    return changed;
  }
  if (IsStd(n, "Gemm")) {
    bool changed = false;
    for (int i = 0; i < 2; ++i) {
      Value* s = n->has_input(i) ? SwappedSource(n->inputs[static_cast<size_t>(i)]) : nullptr;
      if (!s || RankOf(s) != 2) continue;
      const char* k = i == 0 ? "transA" : "transB";
      n->attrs[k] = Attribute::Int(Flag(n, k) ? 0 : 1);
      g.SetInput(n, i, s);
      changed = true;
    }
    return changed;
  }
  if (fuse::IsInternalOp(n, "MatMulBias") && n->has_input(1)) {
    Value* s = SwappedSource(n->inputs[1]);
    if (!s || RankOf(s) != 2) return false;
    n->attrs["trans_b"] = Attribute::Int(Flag(n, "trans_b") ? 0 : 1);
    g.SetInput(n, 1, s);
    return true;
  }
  return false;
}

// Rule `result`: t = Transpose(P's output). True when it replaced t and P (nodes removed: restart the walk).
bool FoldResult(Graph& g, Node* t) {
  if (!IsStd(t, "Transpose") || !t->has_input(0) || t->outputs.size() != 1 || !SwapsLastTwo(PermOf(t))) return false;
  Value* y = t->inputs[0];
  Node* p = y->producer;
  if (!p || y->uses.size() != 1 || Pinned(g, y) || p->outputs.size() != 1) return false;
  Value *a = nullptr, *b = nullptr;
  bool ta = false, tb = false;
  float alpha = 1.0f;
  if (IsStd(p, "MatMul") && p->inputs.size() == 2 && RankOf(p->inputs[0]) >= 2 && RankOf(p->inputs[1]) >= 2) {
    a = p->inputs[0], b = p->inputs[1];
  } else if (fuse::IsInternalOp(p, "MatMulTrans")) {
    a = p->inputs[0], b = p->inputs[1];
    ta = Flag(p, "trans_a"), tb = Flag(p, "trans_b");
  } else if (IsStd(p, "Gemm") && !p->has_input(2)) {
    a = p->inputs[0], b = p->inputs[1];
    ta = Flag(p, "transA"), tb = Flag(p, "transB");
    alpha = p->attr_float("alpha", 1.0f);
  } else {
    return false;
  }
  if (!a || !b) return false;
  // (op(A) op(B))^T = op(B)^T op(A)^T: P becomes the swapped product and takes over t's output value.
  Value* out = t->outputs[0];
  g.RemoveNode(t);
  MakeProduct(g, p, b, a, !tb, !ta, alpha);
  p->outputs[0] = out;
  out->producer = p;
  out->producer_output = 0;
  y->producer = nullptr;
  return true;
}

}  // namespace

bool FoldTransposePass::Run(Graph& g) {
  removed_ = operands_ = results_ = 0;
  InferShapes(g, /*strict=*/false);  // ranks and dtypes of every operand
  const size_t before = g.nodes().size();
  bool again = true;
  bool changed = false;
  while (again) {
    again = false;
    for (const auto& up : g.nodes()) {
      Node* n = up.get();
      if (Compose(g, n)) {
        again = changed = true;
      } else if (FoldOperands(g, n)) {
        ++operands_;
        again = changed = true;
      } else if (FoldResult(g, n)) {
        ++results_;
        again = changed = true;
        break;  // a node was removed: restart the walk
      }
    }
  }
  // Transposes nobody reads any more.
  for (bool dead = true; dead;) {
    dead = false;
    for (const auto& up : g.nodes()) {
      Node* n = up.get();
      if (IsStd(n, "Transpose") && n->outputs.size() == 1 && n->outputs[0]->uses.empty() && !Pinned(g, n->outputs[0])) {
        g.RemoveNode(n);
        dead = changed = true;
        break;
      }
    }
  }
  removed_ = static_cast<int>(before - g.nodes().size());
  return changed;
}

}  // namespace ot
