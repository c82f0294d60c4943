#include "passes/fuse_residual_norm.h"

#include <unordered_map>
#include <unordered_set>

#include "graph/graph.h"
#include "passes/fold_report.h"
#include "passes/fuse_util.h"

namespace ot {

namespace {

bool IsLayerNorm(const Node* n) {
  return fuse::IsOp(n, "LayerNormalization") || fuse::IsInternalOp(n, "LayerNormalization");
}

}  // namespace

bool ResidualNormFoldPass::Run(Graph& g) {
  FoldReport rep(sizes_, report_, "residual norm");
  // Positions in the executor's order (the node list need not be one: pattern fusion appends its nodes).
  std::unordered_map<const Node*, size_t> pos;
  for (const Node* n : g.TopologicalOrder()) pos.emplace(n, pos.size());
  // Float32 values of one shape (the folds' kernels take no broadcast and no other dtype).
  auto same_f32 = [&](std::initializer_list<const Value*> vs) {
    const FusionSizes::Facts* first = rep.facts(*vs.begin());
    if (!first || first->dims.dtype != DataType::kFloat32) return false;
    for (const Value* v : vs) {
      const FusionSizes::Facts* f = rep.facts(v);
      if (!f || f->dims.dtype != DataType::kFloat32 || f->dims.dims != first->dims.dims) return false;
    }
    return true;
  };
  // Bytes a value holds longer when its reader `from` is replaced by a read at `to` (later in the order): all of it
  // when `from` was its last reader and it is neither resident nor a graph output.
  auto extended = [&](const Value* v, const Node* from, const Node* to) -> int64_t {
    const FusionSizes::Facts* f = rep.facts(v);
    if (!f || f->resident || f->output) return 0;
    for (const Use& u : v->uses)
      if (u.node != from && pos[u.node] >= pos[to]) return 0;
    return rep.bytes(v);
  };

  bool changed = false;
  std::vector<Node*> nodes;
  for (const auto& n : g.nodes()) nodes.push_back(n.get());
  // Nodes this pass removed (freed): `nodes` still lists them, so both loops skip them.
  std::unordered_set<const Node*> removed;
  for (Node* ln : nodes) {
    // add: Add -> LayerNormalization.
    if (removed.count(ln)) continue;
    if (!IsLayerNorm(ln) || !rep.kernel(ln) || ln->inputs.empty() || ln->attr_int("stash_type", 1) != 1) continue;
    Value* s = ln->inputs[0];
    Node* add = s ? s->producer : nullptr;
    if (!fuse::IsOp(add, "Add") || !rep.kernel(add) || add->inputs.size() != 2) continue;
    Value *x = add->inputs[0], *r = add->inputs[1];
    if (!same_f32({s, x, r})) {
      rep.Refuse(add, ln, "the residual Add folds for float32 operands of the sum's own shape only");
      continue;
    }
    const Node* early = nullptr;
    for (const Use& u : s->uses)
      if (u.node != ln && rep.kernel(u.node) && pos[u.node] < pos[ln]) early = u.node;  // Shape folds: no kernel
    if (early) {
      rep.Refuse(add, ln, "a reader of the sum, " + FoldReport::Label(early) + ", runs before the norm");
      continue;
    }
    const int64_t more = extended(x, add, ln) + (r != x ? extended(r, add, ln) : 0);
    if (opts_.memory_budget > 0 && more > 0 && peak_ + more > opts_.memory_budget) {
      rep.Refuse(add, ln,
                 "keeping the Add's operands alive until the norm (+" + std::to_string(more) +
                     " bytes) would pass the memory budget");
      continue;
    }
    peak_ += more;
    const std::string add_label = FoldReport::Label(add), ln_label = FoldReport::Label(ln);
    removed.insert(add);
    g.RemoveNode(add);
    g.SetInput(ln, 0, x);
    g.SetInput(ln, 3, r);
    if (ln->outputs.size() < 4) ln->outputs.resize(4, nullptr);
    ln->outputs[3] = s;
    s->producer = ln;
    s->producer_output = 3;
    ln->op_type = "ResidualLayerNorm";
    ln->domain = kInternalDomain;
    ln->opset = 1;
    if (!g.opset_imports.count(kInternalDomain)) g.opset_imports[kInternalDomain] = 1;
    rep.Record(ln, {ln_label, add_label}, rep.bytes(s));
    changed = true;
  }

  for (Node* lg : nodes) {
    // grad: LayerNormGrad -> Sum.
    if (!lg || removed.count(lg) || lg->domain != kInternalDomain || lg->op_type != "LayerNormGrad" ||
        !rep.kernel(lg) || lg->has_input(5) || lg->outputs.empty())
      continue;
    Value* dx = lg->outputs[0];
    if (!fuse::Private(g, dx)) continue;
    Node* sum = dx->uses[0].node;
    if (!fuse::IsOp(sum, "Sum") || !rep.kernel(sum)) continue;
    Value* addend = fuse::Other(sum, dx);
    if (!addend) continue;
    Value* out = sum->outputs[0];
    bool stats32 = true;
    for (int i = 3; i < 5; ++i)
      if (lg->has_input(i)) {
        const FusionSizes::Facts* f = rep.facts(lg->inputs[i]);
        stats32 = stats32 && f && f->dims.dtype == DataType::kFloat32;
      }
    if (!same_f32({dx, lg->inputs[0], lg->inputs[1], addend, out}) || !stats32) {
      rep.Refuse(lg, sum, "the gradient sum folds for float32 dY, X, dX and addend of one shape only");
      continue;
    }
    if (addend->producer && pos[addend->producer] > pos[lg]) {
      rep.Refuse(lg, sum, "the other addend is computed after LayerNormGrad");
      continue;
    }
    const std::string sum_label = FoldReport::Label(sum);
    removed.insert(sum);
    g.RemoveNode(sum);
    g.SetInput(lg, 5, addend);
    lg->outputs[0] = out;
    out->producer = lg;
    out->producer_output = 0;
    dx->producer = nullptr;
    rep.Record(lg, {FoldReport::Label(lg), sum_label}, 2 * rep.bytes(dx));
    changed = true;
  }
  return changed;
}

}  // namespace ot
