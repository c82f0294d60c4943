#include "passes/rematerialize.h"

#include <algorithm>
#include <unordered_map>

#include "graph/graph.h"
#include "graph/op_registry.h"
#include "passes/fuse_util.h"
#include "passes/memory_plan.h"

namespace ot {

namespace {

// The kernels cluster fusion makes (they were not in the unfused plan's facts).
bool IsFusedKernel(const Node* n) {
  return fuse::IsInternalOp(n, "FusedElementwise") || fuse::IsInternalOp(n, "MatMulEpilogue") ||
         fuse::IsInternalOp(n, "ConvEpilogue");
}

// The output of n that a recomputation may repeat (nullptr: none): n is one pass over its operands, no GEMM, and
// either has one output or computes output 0 alone when the others are omitted (OpSchema::trailing_outputs_optional).
Value* CheapOutput(const Node* n) {
  int outs = 0;
  Value* only = nullptr;
  for (Value* v : n->outputs)
    if (v) ++outs, only = v;
  if (outs == 0) return nullptr;
  if (fuse::IsInternalOp(n, "FusedElementwise")) return outs == 1 ? only : nullptr;
  const OpSchema* s = OpRegistry::Global().Find(n->domain, n->op_type);
  if (!s || !s->recompute_cheap) return nullptr;
  if (outs == 1) return only;
  return s->trailing_outputs_optional && n->has_output(0) ? n->outputs[0] : nullptr;
}

struct Model {
  std::vector<Node*> order;                   // the kernels in execution order
  std::unordered_map<const Node*, int> step;  // kernel -> step index
  std::unordered_map<const Value*, int> buf;  // value -> buffer index
  std::vector<PlanBuffer> bufs;
  std::vector<PlanStep> steps;
};

}  // namespace

int64_t RematerializePass::Peak(const Graph& g, int* peak_step) const {
  auto orig_v = [&](const Value* v) {
    auto it = value_alias_.find(v);
    return it == value_alias_.end() ? v : it->second;
  };
  auto orig_n = [&](const Node* n) {
    auto it = node_alias_.find(n);
    return it == node_alias_.end() ? n : it->second;
  };
  auto is_kernel = [&](const Node* n) { return sizes_.kernels.count(orig_n(n)) > 0 || IsFusedKernel(n); };
  Model m;
  for (Node* n : g.TopologicalOrder())
    if (is_kernel(n)) {
      m.step[n] = static_cast<int>(m.order.size());
      m.order.push_back(n);
    }
  std::unordered_map<const Value*, bool> is_output;
  for (const Value* v : g.outputs) is_output[v] = true;
  auto buffer = [&](const Value* v) {
    auto it = m.buf.find(v);
    if (it != m.buf.end()) return it->second;
    PlanBuffer b;
    auto f = sizes_.values.find(orig_v(v));
    if (f != sizes_.values.end() && !f->second.in_state)
      b.bytes = NumElements(f->second.dims.dims) * static_cast<int64_t>(SizeOf(f->second.dims.dtype));
    const bool made = v->producer && m.step.count(v->producer);
    b.resident = !made || (f != sizes_.values.end() && f->second.resident);
    b.to_end = !b.resident && is_output.count(v);
    const int idx = static_cast<int>(m.bufs.size());
    m.bufs.push_back(b);
    m.buf[v] = idx;
    return idx;
  };
  for (size_t s = 0; s < m.order.size(); ++s) {
    const Node* n = m.order[s];
    PlanStep ps;
    for (const Value* v : n->inputs) {
      const int b = v ? buffer(v) : -1;
      ps.inputs.push_back(b);
      if (b >= 0 && !m.bufs[static_cast<size_t>(b)].resident)
        m.bufs[static_cast<size_t>(b)].last = std::max(m.bufs[static_cast<size_t>(b)].last, static_cast<int>(s));
    }
    for (const Value* v : n->outputs) {
      const int b = v ? buffer(v) : -1;
      ps.outputs.push_back(b);
      if (b >= 0 && !m.bufs[static_cast<size_t>(b)].resident) m.bufs[static_cast<size_t>(b)].def = static_cast<int>(s);
    }
    auto k = sizes_.kernels.find(orig_n(n));
    if (k != sizes_.kernels.end()) {
      ps.workspace = k->second.workspace;
      for (auto [o, i] : k->second.inplace)
        if (o < static_cast<int>(ps.outputs.size()) && i < static_cast<int>(ps.inputs.size()) && ps.outputs[o] >= 0 &&
            ps.inputs[i] >= 0)
          ps.inplace.push_back({ps.outputs[o], ps.inputs[i]});
      for (auto [o, i] : k->second.views)
        if (o < static_cast<int>(ps.outputs.size()) && i < static_cast<int>(ps.inputs.size()) && ps.outputs[o] >= 0 &&
            ps.inputs[i] >= 0)
          ps.views.push_back({ps.outputs[o], ps.inputs[i]});
    }
    m.steps.push_back(std::move(ps));
  }
  return LivenessPeak(m.bufs, m.steps, peak_step);
}

bool RematerializePass::Run(Graph& g) {
  if (budget_ <= 0) return false;
  auto& value_alias = value_alias_;
  auto& node_alias = node_alias_;
  auto dims = [&](const Value* v) -> const ValueDims* {
    auto a = value_alias.find(v);
    auto f = sizes_.values.find(a == value_alias.end() ? v : a->second);
    return f == sizes_.values.end() ? nullptr : &f->second.dims;
  };
  bool changed = false;
  int64_t peak = Peak(g);
  for (int round = 0; round < 256 && peak > budget_; ++round) {
    // The step order and liveness now.
    int ps = -1;
    peak = Peak(g, &ps);
    if (peak <= budget_) break;
    std::unordered_map<const Node*, int> step;
    std::vector<Node*> order;
    for (Node* n : g.TopologicalOrder()) {
      const Node* o = node_alias.count(n) ? node_alias[n] : n;
      if (sizes_.kernels.count(o) || IsFusedKernel(n)) {
        step[n] = static_cast<int>(order.size());
        order.push_back(n);
      }
    }
    auto last_read = [&](const Value* v) {
      int last = -1;
      for (const Use& u : v->uses)
        if (step.count(u.node)) last = std::max(last, step[u.node]);
      return last;
    };
    auto resident = [&](const Value* v) {
      if (!v->producer || !step.count(v->producer)) return true;
      auto a = value_alias.find(v);
      auto f = sizes_.values.find(a == value_alias.end() ? v : a->second);
      return f != sizes_.values.end() && f->second.resident;
    };
    Node* best = nullptr;
    Value* best_v = nullptr;
    int64_t best_bytes = 0;
    int best_first_late = -1;
    for (int s = 0; s <= ps && s < static_cast<int>(order.size()); ++s) {
      Node* n = order[static_cast<size_t>(s)];
      Value* v = CheapOutput(n);
      if (!v) continue;
      if (std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end()) continue;
      const ValueDims* d = dims(v);
      if (!d) continue;
      int early = 0, first_late = -1;
      for (const Use& u : v->uses) {
        if (!step.count(u.node)) continue;
        const int r = step[u.node];
        if (r <= ps)
          ++early;
        else if (first_late < 0 || r < first_late)
          first_late = r;
      }
      if (early == 0 || first_late < 0) continue;
      bool inputs_alive = true;
      for (const Value* x : n->inputs)
        if (x && !resident(x) && last_read(x) < first_late) inputs_alive = false;
      if (!inputs_alive) continue;
      const int64_t bytes = NumElements(d->dims) * static_cast<int64_t>(SizeOf(d->dtype));
      if (bytes > best_bytes) {
        best = n;
        best_v = v;
        best_bytes = bytes;
        best_first_late = first_late;
      }
    }
    if (!best) break;
    Value* copy_v = g.AddValue(g.UniqueName(best_v->name + "/remat"));
    copy_v->dtype = best_v->dtype;
    copy_v->shape = best_v->shape;
    std::vector<Value*> outs;
    for (Value* o : best->outputs) outs.push_back(o == best_v ? copy_v : nullptr);
    Node* c = g.AddNode(best->op_type, best->inputs, outs, g.UniqueName(best->name + "/remat"));
    c->domain = best->domain;
    c->opset = best->opset;
    c->attrs = best->attrs;
    value_alias[copy_v] = value_alias.count(best_v) ? value_alias[best_v] : best_v;
    node_alias[c] = node_alias.count(best) ? node_alias[best] : best;
    const std::vector<Use> uses = best_v->uses;
    for (const Use& u : uses)
      if (step.count(u.node) && step[u.node] > ps) g.SetInput(u.node, u.input_index, copy_v);
    g.MoveNodeBefore(c, order[static_cast<size_t>(best_first_late)]);
    report_->rematerialized.push_back(best_v->name + " (" + std::to_string(best_bytes) + " bytes, " + best->op_type +
                                      " " + best->name + ") recomputed before " +
                                      order[static_cast<size_t>(best_first_late)]->op_type + " " +
                                      order[static_cast<size_t>(best_first_late)]->name);
    changed = true;
    peak = Peak(g);
  }
  report_->peak_after = peak;
  return changed;
}

}  // namespace ot
