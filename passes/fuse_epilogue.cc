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
#include "passes/fuse_util.h"

namespace ot {

namespace {

int64_t Bytes(const ValueDims& d) { return NumElements(d.dims) * static_cast<int64_t>(SizeOf(d.dtype)); }
std::string Label(const Node* n) { return n->op_type + " " + n->name; }

// A GEMM whose result an epilogue may consume: MatMul, or MatMulBias without activation reading B [K, N] as stored.
// Not with trans_b (B stored [N, K], passes/fold_transpose.h): oneDNN rounds a row block of a product with a
// transposed B differently from the whole product, and the fused step must give the unfused one's numbers.
bool IsGemm(const Node* n) {
  if (fuse::IsOp(n, "MatMul")) return true;
  return fuse::IsInternalOp(n, "MatMulBias") && n->attr_string("activation", "none") == "none" &&
         n->attr_int("trans_b", 0) == 0;
}

// A convolution whose result an epilogue may consume: Conv of 1 to 3 spatial dims (the conv kernels' range). Its dtype
// is checked with Y's below (float64 runs the naive kernel of the gradient checks, which has no blocks).
// Not a channels-last one (passes/channels_last.h): ConvEpilogue's kernel reads NCHW.
bool IsConv(const Node* n) { return fuse::IsOp(n, "Conv") && n->attr_int("channels_last", 0) == 0; }

bool IsFused(const Node* n) { return fuse::IsInternalOp(n, "FusedElementwise"); }

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

// One GEMM or convolution G and the cluster consumer C it may fold into, as the checks find them.
struct Candidate {
  Node* G = nullptr;
  Node* c = nullptr;
  bool conv = false;
  const ValueDims* yd = nullptr;  // Y = G's result
  // C's program over its inputs and outputs, the row outputs' keepdims and the member labels (G's first).
  cluster::Program p;
  std::vector<Value*> ins, outs;
  std::vector<int64_t> keep;
  std::vector<std::string> ops;
  int j = -1;             // Y's position among C's inputs
  bool y_store = false;   // Y is written too (read besides C, or a step output)
  Value* twin = nullptr;  // a value of Y's shape that the shape-only readers of Y move to
  bool twin_is_input = false;
  int64_t extended = 0;  // bytes of G's inputs held until the fused node runs
};

// The checks and the rewrite of the pass, each a named step; every refusal goes to the report with its reason.
class Folder {
 public:
  Folder(Graph& g, const FuseOptions& opts, const FusionSizes& sizes, FusionReport* report)
      : g_(g), opts_(opts), sizes_(sizes), report_(report), graph_outputs_(g.outputs.begin(), g.outputs.end()) {}

  // GEMMs and convolutions that run as kernels.
  std::vector<Node*> Producers() const {
    std::vector<Node*> r;
    for (const auto& n : g_.nodes())
      if ((IsGemm(n.get()) || IsConv(n.get())) && sizes_.kernels.count(n.get())) r.push_back(n.get());
    return r;
  }

  // G's first cluster consumer and the operands' shapes and dtype.
  bool Match(Node* G, Candidate& k) {
    k.G = G;
    Value* y = G->outputs[0];
    for (const Use& u : y->uses)
      if ((IsFused(u.node) || (Lowerable(u.node) && IsKernel(u.node))) && !k.c) k.c = u.node;
    if (!k.c) return false;
    const ValueDims *ad = Dims(G->inputs[0]), *bd = Dims(G->inputs[1]);
    k.yd = Dims(y);
    if (!ad || !bd || !k.yd) return false;
    k.conv = IsConv(G);
    if (k.conv && (ad->dims.size() < 3 || ad->dims.size() > 5))
      return Refuse(k,
                    "a " + std::to_string(static_cast<int>(ad->dims.size()) - 2) + "-D convolution (1-D to 3-D fold)");
    if (!k.conv && (bd->dims.size() != 2 || ad->dims.size() < 2))
      return Refuse(k, "B " + DimsToString(bd->dims) + " is batched (only B [K, N] folds)");
    const DataType t = k.yd->dtype;
    return t == DataType::kFloat32 || t == DataType::kFloat16 || t == DataType::kBFloat16;
  }

  // C's program, its inputs and outputs: a FusedElementwise's own, or built for a single lowerable node.
  bool LoadProgram(Candidate& k) {
    Node* c = k.c;
    k.ops = {Label(k.G)};
    if (IsFused(c)) {
      try {
        k.p = cluster::ParseProgram(c->attr_string("program", ""));
      } catch (const std::invalid_argument& e) {
        throw Error(c->Describe() + ": bad program: " + e.what());
      }
      k.ins = c->inputs;
      k.outs = c->outputs;
      k.keep = c->attr_ints("row_keepdims");
      if (const Attribute* a = c->attr("fused_ops")) k.ops.insert(k.ops.end(), a->strings.begin(), a->strings.end());
    } else {
      std::vector<const Value*> escapes;
      for (const Value* v : c->outputs)
        if (v) escapes.push_back(v);
      BuiltCluster b = BuildClusterProgram(g_, {c}, escapes, [&](const Value* v) { return Dims(v); });
      if (!b.error.empty()) return Refuse(k, b.error);
      k.p = b.program;
      k.ins = b.inputs;
      k.outs = b.outputs;
      k.keep = b.row_keepdims;
      k.ops.push_back(Label(c));
    }
    const Value* y = k.G->outputs[0];
    k.j = static_cast<int>(std::find(k.ins.begin(), k.ins.end(), y) - k.ins.begin());
    return k.j != static_cast<int>(k.ins.size());
  }

  // The program iterates over exactly Y's shape and reduces at most the last axis.
  bool CheckDomain(Candidate& k) {
    bool y_full = false, y_row = false;
    std::vector<std::vector<int64_t>> full;
    std::vector<bool> seen(k.ins.size(), false);
    for (const cluster::Instr& in : k.p.code) {
      if (in.op != cluster::Op::kInput) continue;
      if (in.a == k.j) (in.row ? y_row : y_full) = true;
      if (!in.row && !seen[static_cast<size_t>(in.a)]) {
        seen[static_cast<size_t>(in.a)] = true;
        const ValueDims* d = Dims(k.ins[static_cast<size_t>(in.a)]);
        if (d) full.push_back(d->dims);
      }
    }
    std::vector<int64_t> domain;
    try {
      domain = BroadcastDims(full, k.c->Describe());
    } catch (const Error&) {
      return false;
    }
    if (!y_full || y_row || domain != k.yd->dims)
      return Refuse(k,
                    "the cluster's domain " + DimsToString(domain) + " is not Y's shape " + DimsToString(k.yd->dims));
    if (k.p.reduce_axes > 1)
      return Refuse(k, "the cluster reduces " + std::to_string(k.p.reduce_axes) + " axes (at most the last folds)");
    return true;
  }

  // Does Y leave the fused node? Shape-only readers move to a twin of Y's shape where there is one. No reader of Y
  // besides C may lead to C.
  bool PlaceY(Candidate& k) {
    Value* y = k.G->outputs[0];
    k.y_store = graph_outputs_.count(y) > 0;
    bool shape_reads = false;
    for (const Use& u : y->uses) {
      if (u.node == k.c) continue;
      if (ReadsOnlyShape(u.node))
        shape_reads = true;
      else
        k.y_store = true;
    }
    if (!k.y_store && shape_reads) {
      for (Value* w : k.ins)
        if (w != y && !(w && w->producer == k.G) && SameShape(y, w)) {
          k.twin = w;
          k.twin_is_input = true;
          break;
        }
      if (!k.twin)
        for (Value* w : k.outs)
          if (SameShape(y, w)) {
            k.twin = w;
            break;
          }
      if (!k.twin) k.y_store = true;
    }
    for (const Use& u : y->uses) {
      if (u.node == k.c || (k.twin_is_input && ReadsOnlyShape(u.node))) continue;
      if (Reaches(u.node, k.c))
        return Refuse(k, "another reader of Y leads to the cluster (the fused node would wait for itself)");
    }
    return true;
  }

  // Operands, registers and shared memory of the fused kernel.
  bool CheckLimits(Candidate& k) {
    const int n_in = 3 + k.p.num_inputs - 1, n_out = static_cast<int>(k.outs.size()) + (k.y_store ? 1 : 0);
    if (n_in + n_out > opts_.limits.operands)
      return Refuse(k,
                    std::to_string(n_in + n_out) + " operands (limit " + std::to_string(opts_.limits.operands) + ")");
    const cluster::Resources res = cluster::EstimateResources(k.p);
    if (res.registers + 2 * 3 > opts_.limits.registers || res.shared_bytes > opts_.limits.shared_bytes)
      return Refuse(k, "~" + std::to_string(res.registers + 6) + " registers per thread or " +
                           std::to_string(res.shared_bytes) + " bytes of shared memory past the kernel limits");
    return true;
  }

  // G's inputs that died at G now live until the fused node runs: within the budget, or refused.
  bool CheckMemory(Candidate& k) {
    std::unordered_map<const Node*, size_t> pos;
    for (const auto& n : g_.nodes()) pos.emplace(n.get(), pos.size());
    // Nothing is extended when no other kernel runs between them (in node order, which the executor's follows).
    bool between = false;
    for (const auto& n : g_.nodes())
      if (pos[n.get()] > pos[k.G] && pos[n.get()] < pos[k.c] && IsKernel(n.get())) between = true;
    k.extended = 0;
    for (const Value* x : k.G->inputs) {
      if (!between) break;
      if (!x) continue;
      auto f = sizes_.values.find(x);
      if (f == sizes_.values.end() || f->second.resident || f->second.output) continue;
      bool last = true;
      for (const Use& u : x->uses)
        if (u.node != k.G && pos[u.node] > pos[k.G]) last = false;
      if (last) k.extended += Bytes(f->second.dims);
    }
    // Y itself no longer exists between G and C when it is not stored: a fold whose held inputs are no larger than
    // Y lowers (or keeps) the live bytes at every step in between.
    if (!k.y_store && k.extended <= Bytes(*k.yd)) k.extended = 0;
    if (opts_.memory_budget > 0 && k.extended > 0 && report_->peak_after + k.extended > opts_.memory_budget)
      return Refuse(k, std::string("keeping the ") + (k.conv ? "convolution's" : "GEMM's") +
                           " inputs alive until the cluster runs (+" + std::to_string(k.extended) +
                           " bytes) would pass the memory budget");
    return true;
  }

  // G and C become one MatMulEpilogue / ConvEpilogue node at C's place, recorded in the report.
  void Rewrite(Candidate& k) {
    Node *G = k.G, *c = k.c;
    Value* y = G->outputs[0];
    cluster::Program& p = k.p;
    // The program over (Y, C's other inputs...): input j moves to 0.
    for (cluster::Instr& in : p.code)
      if (in.op == cluster::Op::kInput) in.a = in.a == k.j ? 0 : (in.a < k.j ? in.a + 1 : in.a);
    if (k.y_store) {
      int load = -1;
      for (size_t i = 0; i < p.code.size() && load < 0; ++i)
        if (p.code[i].op == cluster::Op::kInput && p.code[i].a == 0 && !p.code[i].row) load = static_cast<int>(i);
      p.outputs.push_back(load);
      k.keep.push_back(0);
    }
    try {
      cluster::Validate(p);
    } catch (const std::invalid_argument& e) {
      throw Error("epilogue: the folded program of " + c->Describe() + " is invalid: " + e.what());
    }
    Value* bias = nullptr;
    if (G->op_type == "MatMulBias" || (k.conv && G->inputs.size() > 2)) bias = G->inputs[2];
    std::vector<Value*> new_ins{G->inputs[0], G->inputs[1], bias};
    for (size_t i = 0; i < k.ins.size(); ++i)
      if (static_cast<int>(i) != k.j) new_ins.push_back(k.ins[i]);
    std::vector<Value*> new_outs = k.outs;
    if (k.y_store) new_outs.push_back(y);
    if (k.twin) {
      const std::vector<Use> uses = y->uses;
      for (const Use& u : uses)
        if (u.node != c && ReadsOnlyShape(u.node)) g_.SetInput(u.node, u.input_index, k.twin);
    }
    const Node* anchor = NodeAfter(c, G);
    FusedCluster fc = Record(k, new_ins, new_outs);
    const std::string name = g_.UniqueName("epilogue/" + G->name);
    // The convolution's geometry travels with it (ConvEpilogue reads Conv's attributes).
    std::map<std::string, Attribute> conv_attrs;
    if (k.conv) conv_attrs = G->attrs;
    const bool fused_c = IsFused(c);
    g_.RemoveNode(c);
    g_.RemoveNode(G);
    if (!g_.opset_imports.count(kInternalDomain)) g_.opset_imports[kInternalDomain] = 1;
    Node* f = g_.AddNode(k.conv ? "ConvEpilogue" : "MatMulEpilogue", new_ins, new_outs, name);
    f->domain = kInternalDomain;
    f->opset = 1;
    for (auto& [key, a] : conv_attrs) f->attrs[key] = a;
    SetClusterAttributes(f, p, k.keep, k.ops);
    if (anchor) g_.MoveNodeBefore(f, anchor);
    fc.name = name;
    fc.program = f->attrs["program"].s;
    report_->saved_bytes += fc.saved_bytes;
    report_->peak_after += k.extended;        // an upper bound: the inputs' bytes held over the whole interval
    report_->fused_nodes += fused_c ? 1 : 2;  // a FusedElementwise's members were counted by the cluster pass
    report_->clusters.push_back(std::move(fc));
  }

 private:
  const ValueDims* Dims(const Value* v) const {
    auto it = sizes_.values.find(v);
    return it == sizes_.values.end() ? nullptr : &it->second.dims;
  }
  bool IsKernel(const Node* n) const { return IsFused(n) || sizes_.kernels.count(n) > 0; }
  bool ReadsOnlyShape(const Node* n) const {
    if (IsKernel(n)) return false;
    const OpSchema* s = OpRegistry::Global().Find(n->domain, n->op_type);
    return s && !s->reads_input_data;
  }
  // Same concrete dims, and a dim of 1 is 1 in both symbolic shapes (it cannot be a batch of one that grows later).
  bool SameShape(const Value* v, const Value* w) const {
    const ValueDims *d = Dims(v), *e = Dims(w);
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
  }
  bool Refuse(const Candidate& k, const std::string& why) {
    report_->refused.push_back({k.G->name, k.c->name, "epilogue: " + why});
    return false;
  }
  // The first node after C in the node list other than G: the fused node goes before it.
  const Node* NodeAfter(const Node* c, const Node* G) const {
    bool after = false;
    for (const auto& n : g_.nodes()) {
      if (n.get() == c)
        after = true;
      else if (after && n.get() != G)
        return n.get();
    }
    return nullptr;
  }
  // The report's entry for the fold; a FusedElementwise's own entry is taken into it.
  FusedCluster Record(const Candidate& k, const std::vector<Value*>& new_ins, const std::vector<Value*>& new_outs) {
    FusedCluster fc;
    fc.ops = k.ops;
    fc.inputs = static_cast<int>(std::count_if(new_ins.begin(), new_ins.end(), [](const Value* v) { return v; }));
    fc.outputs = static_cast<int>(new_outs.size());
    for (const Value* v : new_ins)
      if (const ValueDims* d = v ? Dims(v) : nullptr) fc.input_bytes += Bytes(*d);
    for (const Value* v : new_outs)
      if (const ValueDims* d = Dims(v)) fc.output_bytes += Bytes(*d);
    // Y written and read once through memory before; now read from the block in cache (and written once if stored).
    fc.saved_bytes = (k.y_store ? 1 : 2) * Bytes(*k.yd);
    if (IsFused(k.c))
      for (auto it = report_->clusters.begin(); it != report_->clusters.end(); ++it)
        if (it->name == k.c->name) {
          report_->saved_bytes -= it->saved_bytes;
          fc.saved_bytes += it->saved_bytes;
          report_->clusters.erase(it);
          break;
        }
    return fc;
  }

  Graph& g_;
  const FuseOptions& opts_;
  const FusionSizes& sizes_;
  FusionReport* report_;
  std::unordered_set<const Value*> graph_outputs_;
};

}  // namespace

bool EpiloguePass::Run(Graph& g) {
  Folder folder(g, opts_, sizes_, report_);
  bool changed = false;
  for (Node* G : folder.Producers()) {
    Candidate k;
    if (!folder.Match(G, k) || !folder.LoadProgram(k) || !folder.CheckDomain(k) || !folder.PlaceY(k) ||
        !folder.CheckLimits(k) || !folder.CheckMemory(k))
      continue;
    folder.Rewrite(k);
    changed = true;
  }
  return changed;
}

}  // namespace ot
