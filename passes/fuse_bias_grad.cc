#include "passes/fuse_bias_grad.h"

#include <deque>
#include <map>
#include <string>
#include <unordered_set>
#include <vector>

#include "graph/graph.h"
#include "graph/op_registry.h"

namespace ot {

namespace {

bool IsStd(const Node* n, const char* op) {
  return n && n->op_type == op && (n->domain.empty() || n->domain == "ai.onnx");
}

// True when a path of data edges leads from the readers of v to `target`.
bool Reaches(const Value* v, const Node* target) {
  std::unordered_set<const Node*> seen;
  std::deque<const Node*> todo;
  for (const Use& u : v->uses) todo.push_back(u.node);
  while (!todo.empty()) {
    const Node* n = todo.front();
    todo.pop_front();
    if (n == target) return true;
    if (!seen.insert(n).second) continue;
    for (const Value* o : n->outputs)
      if (o)
        for (const Use& u : o->uses) todo.push_back(u.node);
  }
  return false;
}

struct Match {
  Node* gemm = nullptr;
  int sum_input = -1;
};

// The Gemm reading `rows` ([R, N], the rows of G) as the operand whose column sums the fused kernel can write.
Match FindGemm(Value* rows, DataType t) {
  for (const Use& u : rows->uses) {
    Node* n = u.node;
    if (!IsStd(n, "Gemm") || n->has_input(2) || n->outputs.size() != 1 || !n->outputs[0]) continue;
    if (n->outputs[0]->dtype != t || !n->has_input(0) || !n->has_input(1)) continue;
    if (u.input_index == 0 && n->attr_int("transA", 0) != 0) return {n, 0};
    if (u.input_index == 1 && n->attr_int("transB", 0) == 0) return {n, 1};
  }
  return {};
}

}  // namespace

bool FuseBiasGradPass::Run(Graph& g) {
  fused_ = 0;
  InferShapes(g, /*strict=*/false);  // ranks and dtypes of every operand
  bool again = true;
  while (again) {  // restart after each rewrite: it removes nodes
    again = false;
    for (const auto& up : g.nodes()) {
      Node* r = up.get();
      if (r->op_type != "ReduceToShape" || r->domain != kInternalDomain || !r->has_input(0) || r->outputs.size() != 1)
        continue;
      Value* gv = r->inputs[0];
      Value* s = r->outputs[0];
      if (!s || !gv->shape.known_rank() || gv->shape.rank() < 2 || s->dtype != gv->dtype) continue;
      const int rank = gv->shape.rank();
      // The target shape: the output's when inferred, else that of the value whose Shape autodiff passed (the bias).
      Shape target = s->shape;
      const Node* sp = r->has_input(1) ? r->inputs[1]->producer : nullptr;
      if ((!target.known_rank() || !target.is_static()) && IsStd(sp, "Shape") && sp->has_input(0) &&
          sp->inputs[0]->shape.known_rank() && !sp->has_attr("start") && !sp->has_attr("end"))
        target = sp->inputs[0]->shape;
      // G's last dim is N: equal when both are known; when G's is not (a gradient whose dims come from a Shape at
      // plan time), a target N > 1 still pins it, since the target broadcasts to G's shape.
      if (!target.known_rank() || target.rank() != 1) continue;
      const Dim& last = gv->shape[rank - 1];
      const bool pinned = last == target[0] || (!last.is_static() && target[0].is_static() && target[0].value > 1);
      if (!pinned) continue;
      // The rows of G: G itself (2-D) or Flatten(G, rank - 1).
      Match m;
      if (rank == 2) m = FindGemm(gv, s->dtype);
      for (size_t i = 0; !m.gemm && i < gv->uses.size(); ++i) {
        const Node* f = gv->uses[i].node;
        if (IsStd(f, "Flatten") && f->attr_int("axis", 1) == rank - 1 && f->outputs.size() == 1 && f->outputs[0])
          m = FindGemm(f->outputs[0], s->dtype);
      }
      if (!m.gemm || Reaches(s, m.gemm)) continue;
      Node* gemm = m.gemm;
      Value* a = gemm->inputs[0];
      Value* b = gemm->inputs[1];
      Value* y = gemm->outputs[0];
      std::map<std::string, Attribute> attrs;
      attrs["transA"] = Attribute::Int(gemm->attr_int("transA", 0));
      attrs["transB"] = Attribute::Int(gemm->attr_int("transB", 0));
      if (gemm->attr_float("alpha", 1.0f) != 1.0f) attrs["alpha"] = Attribute::Float(gemm->attr_float("alpha", 1.0f));
      attrs["sum_input"] = Attribute::Int(m.sum_input);
      const std::string name = gemm->name + "/GemmSum";
      // The fused node runs where the Gemm ran.
      const Node* anchor = nullptr;
      bool after = false;
      for (const auto& n : g.nodes()) {
        if (n.get() == gemm)
          after = true;
        else if (after && n.get() != r) {
          anchor = n.get();
          break;
        }
      }
      g.RemoveNode(r);
      g.RemoveNode(gemm);
      if (!g.opset_imports.count(kInternalDomain)) g.opset_imports[kInternalDomain] = 1;
      Node* f = g.AddNode("GemmSum", {a, b}, {y, s}, g.UniqueName(name));
      f->domain = kInternalDomain;
      f->opset = 1;
      f->attrs = std::move(attrs);
      if (anchor) g.MoveNodeBefore(f, anchor);
      ++fused_;
      again = true;
      break;
    }
  }
  return fused_ > 0;
}

}  // namespace ot
