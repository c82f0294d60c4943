#include "passes/fuse_epilogue.h"

#include <algorithm>
#include <deque>
#include <map>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "graph/error.h"
#include "graph/graph.h"
#include "graph/infer_util.h"
#include "graph/op_registry.h"
#include "kernel_common/cluster_program.h"
#include "kernel_common/cluster_resources.h"
#include "passes/cluster_program_builder.h"

namespace ot {

namespace {

int64_t Bytes(const ValueDims& d) { return NumElements(d.dims) * static_cast<int64_t>(SizeOf(d.dtype)); }
std::string Label(const Node* n) { return n->op_type + " " + n->name; }

// A GEMM whose result an epilogue may consume: MatMul, or MatMulBias without activation reading B [K, N] as stored.
// Not with trans_b (B stored [N, K], passes/fold_transpose.h): oneDNN rounds a row block of a product with a
// transposed B differently from the whole product, and the fused step must give the unfused one's numbers.
bool IsGemm(const Node* n) {
  if (n->domain.empty() && n->op_type == "MatMul") return true;
  return n->domain == kInternalDomain && n->op_type == "MatMulBias" && n->attr_string("activation", "none") == "none" &&
         n->attr_int("trans_b", 0) == 0;
}

// A convolution whose result an epilogue may consume: Conv of 1 to 3 spatial dims (the conv kernels' range). Its dtype
// is checked with Y's below (float64 runs the naive kernel of the gradient checks, which has no blocks).
bool IsConv(const Node* n) { return n->domain.empty() && n->op_type == "Conv"; }

bool IsFused(const Node* n) { return n->domain == kInternalDomain && n->op_type == "FusedElementwise"; }

bool Lowerable(const Node* n) {
  const OpSchema* s = OpRegistry::Global().Find(n->domain, n->op_type);
  return s && s->lower;
}

// True when a path of data edges leads from `from`'s results to `target`.
bool Reaches(const Node* from, const Node* target) {
  std::unordered_set<const Node*> seen{from};
  std::deque<const Node*> todo{from};
  while (!todo.empty()) {
    const Node* n = todo.front();
    todo.pop_front();
    for (const Value* v : n->outputs) {
      if (!v) continue;
      for (const Use& u : v->uses) {
        if (u.node == target) return true;
        if (seen.insert(u.node).second) todo.push_back(u.node);
      }
    }
  }
  return false;
}

}  // namespace

bool EpiloguePass::Run(Graph& g) {
  auto dims = [&](const Value* v) -> const ValueDims* {
    auto it = sizes_.values.find(v);
    return it == sizes_.values.end() ? nullptr : &it->second.dims;
  };
  auto is_kernel = [&](const Node* n) { return IsFused(n) || sizes_.kernels.count(n) > 0; };
  auto reads_only_shape = [&](const Node* n) {
    if (is_kernel(n)) return false;
    const OpSchema* s = OpRegistry::Global().Find(n->domain, n->op_type);
    return s && !s->reads_input_data;
  };
  // Same concrete dims, and a dim of 1 is 1 in both symbolic shapes (it cannot be a batch of one that grows later).
  auto same_shape = [&](const Value* v, const Value* w) {
    const ValueDims *d = dims(v), *e = dims(w);
    if (!d || !e || v == w || d->dims != e->dims) return false;
    for (size_t i = 0; i < d->dims.size(); ++i) {
      if (d->dims[i] != 1) continue;
      const int r = static_cast<int>(d->dims.size());
      if (!v->shape.known_rank() || !w->shape.known_rank() || v->shape.rank() != r || w->shape.rank() != r)
        return false;
      const Dim &a = v->shape[static_cast<int>(i)], &b = w->shape[static_cast<int>(i)];
      if (!(a.is_static() && b.is_static() && a.value == 1 && b.value == 1)) return false;
    }
    return true;
  };
  std::unordered_set<const Value*> graph_outputs(g.outputs.begin(), g.outputs.end());
  std::vector<Node*> producers;  // GEMMs and convolutions
  for (const auto& n : g.nodes())
    if ((IsGemm(n.get()) || IsConv(n.get())) && sizes_.kernels.count(n.get())) producers.push_back(n.get());
  bool changed = false;
  for (Node* G : producers) {
    Value* y = G->outputs[0];
    Node* c = nullptr;
    for (const Use& u : y->uses)
      if ((IsFused(u.node) || (Lowerable(u.node) && is_kernel(u.node))) && !c) c = u.node;
    if (!c) continue;
    auto refuse = [&](const std::string& why) { report_->refused.push_back({G->name, c->name, "epilogue: " + why}); };
    const ValueDims *ad = dims(G->inputs[0]), *bd = dims(G->inputs[1]), *yd = dims(y);
    if (!ad || !bd || !yd) continue;
    const bool conv = IsConv(G);
    if (conv && (ad->dims.size() < 3 || ad->dims.size() > 5)) {
      refuse("a " + std::to_string(static_cast<int>(ad->dims.size()) - 2) + "-D convolution (1-D to 3-D fold)");
      continue;
    }
    if (!conv && (bd->dims.size() != 2 || ad->dims.size() < 2)) {
      refuse("B " + DimsToString(bd->dims) + " is batched (only B [K, N] folds)");
      continue;
    }
    if (yd->dtype != DataType::kFloat32 && yd->dtype != DataType::kFloat16 && yd->dtype != DataType::kBFloat16)
      continue;

    // C's program, its inputs and outputs.
    cluster::Program p;
    std::vector<Value*> ins, outs;
    std::vector<int64_t> keep;
    std::vector<std::string> ops{Label(G)};
    if (IsFused(c)) {
      try {
        p = cluster::ParseProgram(c->attr_string("program", ""));
      } catch (const std::invalid_argument& e) {
        throw Error(c->Describe() + ": bad program: " + e.what());
      }
      ins = c->inputs;
      outs = c->outputs;
      keep = c->attr_ints("row_keepdims");
      if (const Attribute* a = c->attr("fused_ops")) ops.insert(ops.end(), a->strings.begin(), a->strings.end());
    } else {
      std::vector<const Value*> escapes;
      for (const Value* v : c->outputs)
        if (v) escapes.push_back(v);
      BuiltCluster b = BuildClusterProgram(g, {c}, escapes, dims);
      if (!b.error.empty()) {
        refuse(b.error);
        continue;
      }
      p = b.program;
      ins = b.inputs;
      outs = b.outputs;
      keep = b.row_keepdims;
      ops.push_back(Label(c));
    }
    const int j = static_cast<int>(std::find(ins.begin(), ins.end(), y) - ins.begin());
    if (j == static_cast<int>(ins.size())) continue;
    bool y_full = false, y_row = false;
    std::vector<std::vector<int64_t>> full;
    std::vector<bool> seen(ins.size(), false);
    for (const cluster::Instr& in : p.code) {
      if (in.op != cluster::Op::kInput) continue;
      if (in.a == j) (in.row ? y_row : y_full) = true;
      if (!in.row && !seen[static_cast<size_t>(in.a)]) {
        seen[static_cast<size_t>(in.a)] = true;
        const ValueDims* d = dims(ins[static_cast<size_t>(in.a)]);
        if (d) full.push_back(d->dims);
      }
    }
    std::vector<int64_t> domain;
    try {
      domain = BroadcastDims(full, c->Describe());
    } catch (const Error&) {
      continue;
    }
    if (!y_full || y_row || domain != yd->dims) {
      refuse("the cluster's domain " + DimsToString(domain) + " is not Y's shape " + DimsToString(yd->dims));
      continue;
    }
    if (p.reduce_axes > 1) {
      refuse("the cluster reduces " + std::to_string(p.reduce_axes) + " axes (at most the last folds)");
      continue;
    }

    // Does Y leave the fused node? Shape-only readers move to a twin of Y's shape where there is one.
    bool y_store = graph_outputs.count(y) > 0;
    bool shape_reads = false;
    for (const Use& u : y->uses) {
      if (u.node == c) continue;
      if (reads_only_shape(u.node))
        shape_reads = true;
      else
        y_store = true;
    }
    Value* twin = nullptr;
    bool twin_is_input = false;
    if (!y_store && shape_reads) {
      for (Value* w : ins)
        if (w != y && !(w && w->producer == G) && same_shape(y, w)) {
          twin = w;
          twin_is_input = true;
          break;
        }
      if (!twin)
        for (Value* w : outs)
          if (same_shape(y, w)) {
            twin = w;
            break;
          }
      if (!twin) y_store = true;
    }
    bool cycle = false;
    for (const Use& u : y->uses) {
      if (u.node == c || (twin_is_input && reads_only_shape(u.node))) continue;
      if (Reaches(u.node, c)) cycle = true;
    }
    if (cycle) {
      refuse("another reader of Y leads to the cluster (the fused node would wait for itself)");
      continue;
    }
    const int n_in = 3 + p.num_inputs - 1, n_out = static_cast<int>(outs.size()) + (y_store ? 1 : 0);
    if (n_in + n_out > opts_.limits.operands) {
      refuse(std::to_string(n_in + n_out) + " operands (limit " + std::to_string(opts_.limits.operands) + ")");
      continue;
    }
    const cluster::Resources res = cluster::EstimateResources(p);
    if (res.registers + 2 * 3 > opts_.limits.registers || res.shared_bytes > opts_.limits.shared_bytes) {
      refuse("~" + std::to_string(res.registers + 6) + " registers per thread or " + std::to_string(res.shared_bytes) +
             " bytes of shared memory past the kernel limits");
      continue;
    }
    // Memory: G's inputs that died at G now live until the fused node runs.
    std::unordered_map<const Node*, size_t> pos;
    for (const auto& n : g.nodes()) pos.emplace(n.get(), pos.size());
    // Nothing is extended when no other kernel runs between them (in node order, which the executor's follows).
    bool between = false;
    for (const auto& n : g.nodes())
      if (pos[n.get()] > pos[G] && pos[n.get()] < pos[c] && is_kernel(n.get())) between = true;
    int64_t extended = 0;
    for (const Value* x : G->inputs) {
      if (!between) break;
      if (!x) continue;
      auto f = sizes_.values.find(x);
      if (f == sizes_.values.end() || f->second.resident || f->second.output) continue;
      bool last = true;
      for (const Use& u : x->uses)
        if (u.node != G && pos[u.node] > pos[G]) last = false;
      if (last) extended += Bytes(f->second.dims);
    }
    // Y itself no longer exists between G and C when it is not stored: a fold whose held inputs are no larger than
    // Y lowers (or keeps) the live bytes at every step in between.
    if (!y_store && extended <= Bytes(*yd)) extended = 0;
    if (opts_.memory_budget > 0 && extended > 0 && report_->peak_after + extended > opts_.memory_budget) {
      refuse(std::string("keeping the ") + (conv ? "convolution's" : "GEMM's") +
             " inputs alive until the cluster runs (+" + std::to_string(extended) +
             " bytes) would pass the memory budget");
      continue;
    }

    // The program over (Y, C's other inputs...): input j moves to 0.
    for (cluster::Instr& in : p.code)
      if (in.op == cluster::Op::kInput) in.a = in.a == j ? 0 : (in.a < j ? in.a + 1 : in.a);
    if (y_store) {
      int load = -1;
      for (size_t k = 0; k < p.code.size() && load < 0; ++k)
        if (p.code[k].op == cluster::Op::kInput && p.code[k].a == 0 && !p.code[k].row) load = static_cast<int>(k);
      p.outputs.push_back(load);
      keep.push_back(0);
    }
    try {
      cluster::Validate(p);
    } catch (const std::invalid_argument& e) {
      throw Error("epilogue: the folded program of " + c->Describe() + " is invalid: " + e.what());
    }
    Value* bias = nullptr;
    if (G->op_type == "MatMulBias" || (conv && G->inputs.size() > 2)) bias = G->inputs[2];
    std::vector<Value*> new_ins{G->inputs[0], G->inputs[1], bias};
    for (size_t k = 0; k < ins.size(); ++k)
      if (static_cast<int>(k) != j) new_ins.push_back(ins[k]);
    std::vector<Value*> new_outs = outs;
    if (y_store) new_outs.push_back(y);
    if (twin) {
      const std::vector<Use> uses = y->uses;
      for (const Use& u : uses)
        if (u.node != c && reads_only_shape(u.node)) g.SetInput(u.node, u.input_index, twin);
    }
    const Node* anchor = nullptr;
    {
      bool after = false;
      for (const auto& n : g.nodes()) {
        if (n.get() == c)
          after = true;
        else if (after && n.get() != G) {
          anchor = n.get();
          break;
        }
      }
    }
    FusedCluster fc;
    fc.ops = ops;
    fc.inputs = static_cast<int>(std::count_if(new_ins.begin(), new_ins.end(), [](const Value* v) { return v; }));
    fc.outputs = static_cast<int>(new_outs.size());
    for (const Value* v : new_ins)
      if (const ValueDims* d = v ? dims(v) : nullptr) fc.input_bytes += Bytes(*d);
    for (const Value* v : new_outs)
      if (const ValueDims* d = dims(v)) fc.output_bytes += Bytes(*d);
    // Y written and read once through memory before; now read from the block in cache (and written once if stored).
    fc.saved_bytes = (y_store ? 1 : 2) * Bytes(*yd);
    const std::string name = g.UniqueName("epilogue/" + G->name);
    if (IsFused(c))
      for (auto it = report_->clusters.begin(); it != report_->clusters.end(); ++it)
        if (it->name == c->name) {
          report_->saved_bytes -= it->saved_bytes;
          fc.saved_bytes += it->saved_bytes;
          report_->clusters.erase(it);
          break;
        }
    // The convolution's geometry travels with it (ConvEpilogue reads Conv's attributes).
    std::map<std::string, Attribute> conv_attrs;
    if (conv) conv_attrs = G->attrs;
    g.RemoveNode(c);
    g.RemoveNode(G);
    if (!g.opset_imports.count(kInternalDomain)) g.opset_imports[kInternalDomain] = 1;
    Node* f = g.AddNode(conv ? "ConvEpilogue" : "MatMulEpilogue", new_ins, new_outs, name);
    f->domain = kInternalDomain;
    f->opset = 1;
    for (auto& [key, a] : conv_attrs) f->attrs[key] = a;
    SetClusterAttributes(f, p, keep, ops);
    if (anchor) g.MoveNodeBefore(f, anchor);
    fc.name = name;
    fc.program = f->attrs["program"].s;
    report_->saved_bytes += fc.saved_bytes;
    report_->peak_after += extended;             // an upper bound: the inputs' bytes held over the whole interval
    report_->fused_nodes += IsFused(c) ? 1 : 2;  // a FusedElementwise's members were counted by the cluster pass
    report_->clusters.push_back(std::move(fc));
    changed = true;
  }
  return changed;
}

}  // namespace ot
