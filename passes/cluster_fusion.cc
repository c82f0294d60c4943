#include "passes/cluster_fusion.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "graph/error.h"
#include "graph/graph.h"
#include "graph/op_registry.h"
#include "kernel_common/cluster_resources.h"
#include "passes/memory_plan.h"

namespace ot {

FuseMode ParseFuseMode(const std::string& s) {
  if (s == "off") return FuseMode::kOff;
  if (s == "lite") return FuseMode::kLite;
  if (s == "full") return FuseMode::kFull;
  throw Error("--fuse: '" + s + "' is not a fusion mode (off, lite or full)");
}

const char* FuseModeName(FuseMode m) {
  switch (m) {
    case FuseMode::kOff:
      return "off";
    case FuseMode::kLite:
      return "lite";
    case FuseMode::kFull:
      return "full";
  }
  return "?";
}

namespace {

int64_t Bytes(const ValueDims& d) { return NumElements(d.dims) * static_cast<int64_t>(SizeOf(d.dtype)); }

std::string Label(const Node* n) { return n->op_type + " " + n->name; }

// The state of the contraction: kernels in topological order, their cluster ids, and the clusters' members.
class Clustering {
 public:
  Clustering(const Graph& g, const FusionSizes& sizes) : g_(g), sizes_(sizes) {
    dims_.reserve(sizes.values.size());
    for (const auto& [v, f] : sizes.values) dims_[v] = &f.dims;  // hashed: every program build asks for each value
    for (const Value* v : g.outputs) is_output_.insert(v);
    for (const auto& b : g.update_bindings) is_output_.insert(b.next);
    for (size_t i = 0; i < g.nodes().size(); ++i) list_pos_[g.nodes()[i].get()] = static_cast<int>(i);
    for (Node* n : g.TopologicalOrder())
      if (sizes.kernels.count(n)) {
        topo_[n] = static_cast<int>(kernels_.size());
        kernels_.push_back(n);
      }
    cid_.resize(kernels_.size());
    members_.resize(kernels_.size());
    loaded_.assign(kernels_.size(), 0);
    fusible_.assign(kernels_.size(), false);
    for (size_t k = 0; k < kernels_.size(); ++k) {
      cid_[k] = static_cast<int>(k);
      members_[k] = {static_cast<int>(k)};
      const OpSchema* s = OpRegistry::Global().Find(kernels_[k]->domain, kernels_[k]->op_type);
      if (!s || !s->lower) continue;
      BuiltCluster b = Build({static_cast<int>(k)});
      fusible_[k] = b.error.empty();
      loaded_[k] = b.work_bytes;
    }
  }

  const std::vector<Node*>& kernels() const { return kernels_; }
  int Kernel(const Node* n) const {
    auto it = topo_.find(n);
    return it == topo_.end() ? -1 : it->second;
  }
  int Cluster(int k) const { return cid_[k]; }
  const std::vector<int>& Members(int c) const { return members_[c]; }
  bool Fusible(int k) const { return fusible_[k]; }
  int64_t Loaded(int c) const { return loaded_[c]; }

  const ValueDims* Dims(const Value* v) const {
    auto it = dims_.find(v);
    return it == dims_.end() ? nullptr : it->second;
  }

  // Values computed by the cluster's members that something outside reads (or that the step returns), in member
  // order. A read by a node that only looks at the shape (Shape, Size: folded when the plan is made, so no kernel)
  // does not need the value stored when another value the fused node reads or writes has the same shape for any
  // input shapes: the rewrite points the shape reader at that twin (ShapeTwin).
  std::vector<const Value*> Escapes(const std::vector<int>& members) const {
    std::unordered_set<const Node*> in;
    for (int k : members) in.insert(kernels_[k]);
    std::vector<int> sorted = members;
    std::sort(sorted.begin(), sorted.end());
    std::vector<const Value*> out, shape_only;
    for (int k : sorted)
      for (const Value* v : kernels_[k]->outputs) {
        if (!v) continue;
        bool esc = is_output_.count(v) > 0, shape_read = false;
        for (const Use& u : v->uses) {
          if (in.count(u.node)) continue;
          if (ReadsOnlyShape(u.node))
            shape_read = true;
          else
            esc = true;
        }
        if (esc)
          out.push_back(v);
        else if (shape_read)
          shape_only.push_back(v);
      }
    for (const Value* v : shape_only)
      if (!ShapeTwin(members, v, out)) out.push_back(v);
    if (!shape_only.empty()) {  // keep member order
      std::vector<const Value*> ordered;
      for (int k : sorted)
        for (const Value* v : kernels_[k]->outputs)
          if (v && std::find(out.begin(), out.end(), v) != out.end()) ordered.push_back(v);
      out = ordered;
    }
    return out;
  }

  // A value of v's shape that the fused node of `members` reads from outside or stores (`escapes`), or null.
  const Value* ShapeTwin(const std::vector<int>& members, const Value* v,
                         const std::vector<const Value*>& escapes) const {
    const ValueDims* d = Dims(v);
    if (!d) return nullptr;
    // Inside one cluster every value broadcasts to the domain, so a dim > 1 that two of them share concretely is the
    // domain's dim for any input shapes; a dim of 1 may be a batch of one that grows later: those must be 1 in both
    // symbolic shapes.
    auto twin = [&](const Value* w) {
      const ValueDims* e = w ? Dims(w) : nullptr;
      if (!e || w == v || e->dims != d->dims) return false;
      for (size_t i = 0; i < d->dims.size(); ++i) {
        if (d->dims[i] != 1) continue;
        if (!v->shape.known_rank() || !w->shape.known_rank() || v->shape.rank() != static_cast<int>(d->dims.size()) ||
            w->shape.rank() != static_cast<int>(d->dims.size()))
          return false;
        const Dim &a = v->shape[static_cast<int>(i)], &b = w->shape[static_cast<int>(i)];
        if (!(a.is_static() && b.is_static() && a.value == 1 && b.value == 1)) return false;
      }
      return true;
    };
    // Inputs first: they exist before the fused node runs, so the shape reader cannot end up on a cycle.
    std::unordered_set<const Node*> in;
    for (int k : members) in.insert(kernels_[k]);
    for (int k : members)
      for (const Value* w : kernels_[k]->inputs)
        if (w && !(w->producer && in.count(w->producer)) && twin(w)) return w;
    for (const Value* w : escapes)
      if (twin(w)) return w;
    return nullptr;
  }

  bool ReadsOnlyShape(const Node* n) const {
    if (Kernel(n) >= 0) return false;
    const OpSchema* s = OpRegistry::Global().Find(n->domain, n->op_type);
    return s && !s->reads_input_data;
  }

  BuiltCluster Build(const std::vector<int>& members) const {
    std::vector<const Node*> nodes;
    for (int k : members) nodes.push_back(kernels_[k]);
    return BuildClusterProgram(g_, nodes, Escapes(members), [this](const Value* v) { return Dims(v); });
  }

  // True when contracting the clusters `set` into one would close a cycle: some path leaves the set and enters it
  // again through a cluster outside it. Clusters that start after the set's last kernel cannot lead back into it.
  bool MakesCycle(const std::vector<int>& set) const {
    std::unordered_set<int> in(set.begin(), set.end());
    int last = 0;
    for (int c : set)
      for (int k : members_[c]) last = std::max(last, k);
    std::vector<int> stack;
    std::unordered_set<int> seen;
    bool reentered = false;
    // Kernels reading v, directly or through nodes that are no kernels (a Shape of v folded when the plan is made,
    // the size arithmetic after it): after the rewrite such a reader hangs off the fused node, so a path through it
    // is a path like any other.
    std::unordered_set<const Node*> visited;
    std::function<void(const Value*, std::vector<std::pair<int, bool>>&, bool)> readers =
        [&](const Value* v, std::vector<std::pair<int, bool>>& out, bool direct) {
          for (const Use& u : v->uses) {
            const int uk = Kernel(u.node);
            if (uk >= 0) {
              out.push_back({uk, direct});
              continue;
            }
            if (!visited.insert(u.node).second) continue;
            for (const Value* w : u.node->outputs)
              if (w) readers(w, out, false);
          }
        };
    auto push_succ = [&](int c, bool from_set) {
      for (int k : members_[c])
        for (const Value* v : kernels_[k]->outputs) {
          if (!v) continue;
          std::vector<std::pair<int, bool>> ks;
          readers(v, ks, true);
          for (auto [uk, direct] : ks) {
            const int uc = cid_[uk];
            if (in.count(uc)) {
              // An edge inside the set is internal; one that leaves the set through a shape reader and comes back
              // would make the fused node wait for itself.
              if (!from_set || !direct) reentered = true;
              continue;
            }
            if (seen.insert(uc).second) stack.push_back(uc);
          }
        }
    };
    for (int c : set) push_succ(c, true);
    while (!stack.empty() && !reentered) {
      const int c = stack.back();
      stack.pop_back();
      int first = INT32_MAX;
      for (int k : members_[c]) first = std::min(first, k);
      if (first > last) continue;
      push_succ(c, false);
    }
    return reentered;
  }

  // Contracts `set` into its largest cluster.
  void Merge(const std::vector<int>& set, int64_t loaded) {
    int into = set.front();
    for (int c : set)
      if (members_[c].size() > members_[into].size()) into = c;
    for (int c : set) {
      if (c == into) continue;
      for (int k : members_[c]) {
        cid_[k] = into;
        members_[into].push_back(k);
      }
      members_[c].clear();
    }
    loaded_[into] = loaded;
  }

  // Every value's bytes and every kernel's workspace: an upper bound of the peak of any schedule and clustering.
  int64_t AllBytes() const {
    int64_t total = 0;
    for (const auto& [v, f] : sizes_.values) total += f.in_state ? 0 : Bytes(f.dims);
    for (const auto& [n, k] : sizes_.kernels) total += k.workspace;
    return total;
  }

  // The planned liveness peak of the step with the current clusters, optionally with the clusters `set` merged: the
  // model of passes/memory_plan.h over the order the executor will run (Kahn's order, ties by the position of a
  // cluster's first member in the node list, as Graph::TopologicalOrder breaks them).
  int64_t Peak(const std::vector<int>& set = {}) const {
    const int rep = set.empty() ? -1 : set.back();
    std::unordered_set<int> in_set(set.begin(), set.end());
    auto unit = [&](int k) {
      const int c = cid_[k];
      return in_set.count(c) ? rep : c;
    };
    const int n = static_cast<int>(kernels_.size());
    std::vector<int> prio(n, INT32_MAX), pending(n, 0);
    std::vector<std::vector<int>> succ(n);
    std::vector<char> live(n, 0);
    for (int k = 0; k < n; ++k) {
      const int u = unit(k);
      live[u] = 1;
      prio[u] = std::min(prio[u], list_pos_.at(kernels_[k]));
    }
    for (int k = 0; k < n; ++k)
      for (const Value* v : kernels_[k]->inputs) {
        if (!v || !v->producer) continue;
        const int p = Kernel(v->producer);
        if (p < 0 || unit(p) == unit(k)) continue;
        succ[unit(p)].push_back(unit(k));
        ++pending[unit(k)];
      }
    using Item = std::pair<int, int>;  // (priority, unit)
    std::priority_queue<Item, std::vector<Item>, std::greater<Item>> ready;
    for (int u = 0; u < n; ++u)
      if (live[u] && pending[u] == 0) ready.push({prio[u], u});
    std::vector<int> pos(n, -1);
    int next = 0;
    while (!ready.empty()) {
      const int u = ready.top().second;
      ready.pop();
      pos[u] = next++;
      for (int s : succ[u])
        if (--pending[s] == 0) ready.push({prio[s], s});
    }
    std::vector<PlanBuffer> bufs;
    std::vector<PlanStep> steps(next);
    std::unordered_map<const Value*, int> buf_of;
    auto buffer = [&](const Value* v) -> int {
      auto it = buf_of.find(v);
      if (it != buf_of.end()) return it->second;
      auto f = sizes_.values.find(v);
      if (f == sizes_.values.end()) return -1;
      PlanBuffer pb;
      pb.bytes = f->second.in_state ? 0 : Bytes(f->second.dims);
      const int p = v->producer ? Kernel(v->producer) : -1;
      if (f->second.resident || p < 0) {
        pb.resident = true;
      } else {
        pb.def = pos[unit(p)];
        pb.to_end = f->second.output;
      }
      bufs.push_back(pb);
      return buf_of[v] = static_cast<int>(bufs.size()) - 1;
    };
    for (int k = 0; k < n; ++k) {
      const Node* node = kernels_[k];
      const int u = unit(k);
      PlanStep& st = steps[pos[u]];
      const bool single = !in_set.count(cid_[k]) && members_[cid_[k]].size() == 1;
      std::vector<int> in_bufs(node->inputs.size(), -1), out_bufs(node->outputs.size(), -1);
      for (size_t i = 0; i < node->inputs.size(); ++i) {
        const Value* v = node->inputs[i];
        if (!v) continue;
        const int p = v->producer ? Kernel(v->producer) : -1;
        if (p >= 0 && unit(p) == u) continue;  // computed inside the cluster
        const int id = buffer(v);
        if (id < 0) continue;
        in_bufs[i] = id;
        st.inputs.push_back(id);
        bufs[id].last = std::max(bufs[id].last, pos[u]);
      }
      for (size_t i = 0; i < node->outputs.size(); ++i) {
        const Value* v = node->outputs[i];
        if (!v) continue;
        bool escapes = sizes_.values.count(v) && sizes_.values.at(v).output;
        for (const Use& use : v->uses) {
          const int c = Kernel(use.node);
          if (c < 0 || unit(c) != u) escapes = true;
        }
        if (!escapes) continue;
        const int id = buffer(v);
        if (id < 0) continue;
        out_bufs[i] = id;
        st.outputs.push_back(id);
      }
      auto kf = sizes_.kernels.find(node);
      if (single && kf != sizes_.kernels.end()) {
        st.workspace += kf->second.workspace;
        for (auto [o, i] : kf->second.inplace)
          if (o < static_cast<int>(out_bufs.size()) && i < static_cast<int>(in_bufs.size()) && out_bufs[o] >= 0 &&
              in_bufs[i] >= 0)
            st.inplace.push_back({out_bufs[o], in_bufs[i]});
        for (auto [o, i] : kf->second.views)
          if (o < static_cast<int>(out_bufs.size()) && i < static_cast<int>(in_bufs.size()) && out_bufs[o] >= 0 &&
              in_bufs[i] >= 0)
            st.views.push_back({out_bufs[o], in_bufs[i]});
      }
    }
    // A fused kernel may store an output over an input of the same dims and byte size (cluster_program.h).
    for (int k = 0; k < n; ++k) {
      const int u = unit(k);
      if (!in_set.count(cid_[k]) && members_[cid_[k]].size() == 1) continue;
      PlanStep& st = steps[pos[u]];
      if (!st.inplace.empty()) continue;  // done for this unit
      for (int o : st.outputs)
        for (int i : st.inputs)
          if (!bufs[i].resident && bufs[i].bytes == bufs[o].bytes) st.inplace.push_back({o, i});
    }
    return LivenessPeak(bufs, steps);
  }

 private:
  const Graph& g_;
  const FusionSizes& sizes_;
  std::unordered_map<const Node*, int> list_pos_, topo_;
  std::unordered_map<const Value*, const ValueDims*> dims_;
  std::vector<Node*> kernels_;
  std::vector<int> cid_;
  std::vector<std::vector<int>> members_;
  std::vector<int64_t> loaded_;
  std::vector<bool> fusible_;
  std::unordered_set<const Value*> is_output_;
};

}  // namespace

namespace {

// The edge contraction: consumers in topological order, each merge checked as the header says.
class Contraction {
 public:
  Contraction(Clustering& cl, const FuseOptions& opts, FusionReport* report)
      : cl_(cl), opts_(opts), report_(report), ks_(cl.kernels()) {
    peak_ = cl.Peak();
    report->peak_before = peak_;
    report->budget_unreachable = opts.memory_budget > 0 && peak_ > opts.memory_budget;
    // Each merge's planned peak is checked against the budget only when some order of the step could exceed it:
    // not when every value and workspace of the step together fit (the peak of any schedule is at most that sum).
    check_budget_ = opts.memory_budget > 0 && cl.AllBytes() > opts.memory_budget;
  }

  // A consumer first takes all its producer clusters at once (closing the diamonds of softmax and layer norm, whose
  // pairwise merges would each leave a second value outside), then, where that is refused, each producer cluster in
  // turn.
  void Run() {
    for (size_t c = 0; c < ks_.size(); ++c) {
      const int ck = static_cast<int>(c);
      if (!cl_.Fusible(ck)) continue;
      std::vector<std::pair<int, int>> producers;  // (kernel, cluster)
      for (const Value* v : ks_[ck]->inputs) {
        if (!v || !v->producer) continue;
        const int pk = cl_.Kernel(v->producer);
        if (pk < 0 || !cl_.Fusible(pk) || cl_.Cluster(pk) == cl_.Cluster(ck)) continue;
        bool dup = false;
        for (auto [k, cid] : producers) dup |= cid == cl_.Cluster(pk);
        if (!dup) producers.push_back({pk, cl_.Cluster(pk)});
      }
      if (producers.size() >= 2) {
        std::vector<int> set;
        for (auto [k, cid] : producers) set.push_back(cid);
        set.push_back(cl_.Cluster(ck));
        if (TryMerge(set, producers.front().first, ck, false)) continue;
      }
      for (auto [pk, unused] : producers) {
        const int a = cl_.Cluster(pk), b = cl_.Cluster(ck);
        if (a == b) continue;
        TryMerge({a, b}, pk, ck, true);
      }
    }
    report_->peak_after = cl_.Peak();
  }

 private:
  // Contracts the clusters `set` (the consumer's last) when every condition holds; `record`: note a refusal as a
  // merge of pk's cluster into ck's.
  bool TryMerge(const std::vector<int>& set, int pk, int ck, bool record) {
    auto no = [&](const std::string& why) {
      if (record) report_->refused.push_back({Label(ks_[pk]), Label(ks_[ck]), why});
      return false;
    };
    std::vector<int> merged;
    int64_t parts = 0;
    for (int c : set) {
      merged.insert(merged.end(), cl_.Members(c).begin(), cl_.Members(c).end());
      parts += cl_.Loaded(c);
    }
    if (static_cast<int>(merged.size()) > opts_.limits.nodes)
      return no("kernel limit: " + std::to_string(merged.size()) + " ops > " + std::to_string(opts_.limits.nodes));
    std::sort(merged.begin(), merged.end());  // the order the rewrite builds in (register estimates depend on it)
    BuiltCluster built = cl_.Build(merged);
    if (!built.error.empty()) return no("program: " + built.error);
    const std::string why = KernelRefusal(merged, built, parts);
    if (!why.empty()) return no(why);
    if (cl_.MakesCycle(set)) return no("cycle: another path leads from the producer to the consumer");
    if (check_budget_) {
      const int64_t p = cl_.Peak(set);
      if (p > opts_.memory_budget && p > peak_)
        return no("memory: planned peak " + std::to_string(p) + " bytes > budget " +
                  std::to_string(opts_.memory_budget));
      peak_ = p;
    }
    cl_.Merge(set, built.work_bytes);
    return true;
  }

  // Why the merged program cannot be one kernel, or does not pay (empty: it can and does).
  std::string KernelRefusal(const std::vector<int>& merged, const BuiltCluster& built, int64_t parts) const {
    if (opts_.mode != FuseMode::kFull && built.outputs.size() > 1) {
      std::string which;
      std::unordered_set<const Node*> inside;
      for (int k : merged) inside.insert(ks_[k]);
      for (const Value* v : built.outputs) {
        std::string readers;
        for (const Use& u : v->uses)
          if (!inside.count(u.node)) readers += (readers.empty() ? "" : ", ") + u.node->op_type;
        which += (which.empty() ? "" : "; ") + v->name + (readers.empty() ? " (a step output)" : " read by " + readers);
      }
      return "lite: " + std::to_string(built.outputs.size()) +
             " values would leave the cluster (full allows it): " + which;
    }
    const int operands = static_cast<int>(built.inputs.size() + built.outputs.size());
    if (operands > opts_.limits.operands)
      return "kernel limit: " + std::to_string(operands) + " operands > " + std::to_string(opts_.limits.operands);
    const cluster::Resources res = cluster::EstimateResources(built.program);
    if (res.registers > opts_.limits.registers)
      return "kernel limit: ~" + std::to_string(res.registers) + " registers per thread (" +
             std::to_string(res.max_live) + " values live at once) > " + std::to_string(opts_.limits.registers);
    if (res.shared_bytes > opts_.limits.shared_bytes)
      return "kernel limit: " + std::to_string(res.shared_bytes) + " bytes of shared memory > " +
             std::to_string(opts_.limits.shared_bytes);
    if (static_cast<double>(built.work_bytes) > (1.0 + opts_.margin) * static_cast<double>(parts))
      return "does not pay: touches " + std::to_string(built.work_bytes) + " bytes per run, the parts " +
             std::to_string(parts) + " (a broadcast producer would be recomputed per element)";
    return "";
  }

  Clustering& cl_;
  const FuseOptions& opts_;
  FusionReport* report_;
  const std::vector<Node*>& ks_;
  int64_t peak_ = 0;
  bool check_budget_ = false;
};

// The clusters to rewrite, as (first member, root) in node order: every cluster of two or more kernels -- unless at
// most one of them computes and the rest are plain copies (AMP's Identity -> Cast of a parameter's gradient):
// unfused, the copy runs in place where its input dies and the op alone is the one pass, so the cluster would save
// nothing (its interpreter cost 3-5x the Cast kernel on those small tensors).
std::vector<std::pair<int, int>> RewriteOrder(const Clustering& cl, FusionReport* report) {
  const auto& ks = cl.kernels();
  std::vector<std::pair<int, int>> order;
  for (size_t k = 0; k < ks.size(); ++k) {
    const int r = static_cast<int>(k);
    if (cl.Cluster(r) != r || cl.Members(r).size() < 2) continue;
    std::vector<int> members = cl.Members(r);
    std::sort(members.begin(), members.end());
    if (cluster::ComputingInstructions(cl.Build(members).program) < 2) {
      report->refused.push_back({Label(ks[members.front()]), Label(ks[members.back()]),
                                 "does not pay: one op and plain copies, which run in place unfused"});
      continue;
    }
    order.push_back({members.front(), r});
  }
  std::sort(order.begin(), order.end());
  return order;
}

// The node list as a linked list, rewritten cluster by cluster; the graph takes its order once at the end (a fused
// node goes where the first of its members was), so the rewrite stays linear in the graph.
class NodeList {
 public:
  explicit NodeList(const Graph& g) {
    for (const auto& n : g.nodes()) {
      pos_[n.get()] = static_cast<int>(pos_.size());
      prev_[n.get()] = tail_;
      if (tail_)
        next_[tail_] = n.get();
      else
        head_ = n.get();
      tail_ = n.get();
    }
    if (tail_) next_[tail_] = nullptr;
  }
  int Pos(const Node* n) const { return pos_.at(n); }  // in the list as it was
  const Node* Next(const Node* n) { return next_[n]; }
  void Unlink(const Node* n) {
    const Node *p = prev_[n], *q = next_[n];
    (p ? next_[p] : head_) = q;
    (q ? prev_[q] : tail_) = p;
  }
  void InsertBefore(const Node* n, const Node* at) {  // at == nullptr: at the end
    const Node* p = at ? prev_[at] : tail_;
    prev_[n] = p;
    next_[n] = at;
    (p ? next_[p] : head_) = n;
    (at ? prev_[at] : tail_) = n;
  }
  std::vector<const Node*> Order() {
    std::vector<const Node*> r;
    for (const Node* n = head_; n; n = next_[n]) r.push_back(n);
    return r;
  }

 private:
  std::unordered_map<const Node*, int> pos_;
  std::unordered_map<const Node*, const Node*> next_, prev_;
  const Node* head_ = nullptr;
  const Node* tail_ = nullptr;
};

// Replaces the members of one cluster by a FusedElementwise node before `list`'s first non-member after the
// earliest of them; the members go to `gone`, the cluster to the report.
void RewriteCluster(Graph& g, const Clustering& cl, std::vector<int> members, NodeList& list, std::vector<Node*>& gone,
                    FusionReport* report) {
  const auto& ks = cl.kernels();
  std::sort(members.begin(), members.end());
  BuiltCluster b = cl.Build(members);
  if (!b.error.empty()) throw Error("cluster fusion: a cluster that was accepted no longer builds: " + b.error);
  // The anchor: the first node after the earliest member (in the node list) that is not a member. Members are
  // nodes of the list as it was, which the rewrites keep in their relative order.
  std::unordered_set<const Node*> in;
  for (int k : members) in.insert(ks[k]);
  const Node* earliest = ks[members.front()];
  for (int k : members)
    if (list.Pos(ks[k]) < list.Pos(earliest)) earliest = ks[k];
  const Node* anchor = list.Next(earliest);
  while (anchor && in.count(anchor)) anchor = list.Next(anchor);
  FusedCluster fc;
  std::vector<std::string> ops;
  std::unordered_set<const Value*> escaping(b.outputs.begin(), b.outputs.end());
  for (int k : members) {
    ops.push_back(Label(ks[k]));
    for (const Value* v : ks[k]->outputs)
      if (v && !escaping.count(v))
        if (const ValueDims* d = cl.Dims(v)) fc.saved_bytes += 2 * Bytes(*d);
  }
  std::string name = g.UniqueName("fused/" + ks[members.front()]->name);
  // Readers outside the cluster of an internal value's shape read a value of that shape that leaves it.
  std::vector<const Value*> escapes(b.outputs.begin(), b.outputs.end());
  for (int k : members)
    for (Value* v : ks[k]->outputs) {
      if (!v || escaping.count(v)) continue;
      const std::vector<Use> uses = v->uses;
      for (const Use& u : uses) {
        if (in.count(u.node)) continue;
        const Value* twin = cl.ShapeTwin(members, v, escapes);
        if (!twin) throw Error("cluster fusion: no value of the shape of '" + v->name + "' for " + u.node->Describe());
        g.SetInput(u.node, u.input_index, const_cast<Value*>(twin));
      }
    }
  for (int k : members) {
    g.DetachNode(ks[k]);
    gone.push_back(ks[k]);
    list.Unlink(ks[k]);
  }
  Node* f = g.AddNode("FusedElementwise", b.inputs, b.outputs, name);
  f->domain = kInternalDomain;
  f->opset = 1;
  SetClusterAttributes(f, b.program, b.row_keepdims, ops);
  list.InsertBefore(f, anchor);
  fc.name = name;
  fc.ops = ops;
  fc.inputs = static_cast<int>(b.inputs.size());
  fc.outputs = static_cast<int>(b.outputs.size());
  for (const Value* v : b.inputs)
    if (const ValueDims* d = cl.Dims(v)) fc.input_bytes += Bytes(*d);
  for (const Value* v : b.outputs)
    if (const ValueDims* d = cl.Dims(v)) fc.output_bytes += Bytes(*d);
  fc.program = f->attrs["program"].s;
  report->saved_bytes += fc.saved_bytes;
  report->fused_nodes += static_cast<int>(members.size());
  report->clusters.push_back(std::move(fc));
}

}  // namespace

bool ClusterFusionPass::Run(Graph& g) {
  report_ = FusionReport();
  report_.mode = FuseModeName(opts_.mode);
  report_.memory_budget = opts_.memory_budget;
  if (opts_.mode == FuseMode::kOff) return false;
  Clustering cl(g, sizes_);
  Contraction(cl, opts_, &report_).Run();
  const std::vector<std::pair<int, int>> order = RewriteOrder(cl, &report_);
  if (order.empty()) return false;
  if (!g.opset_imports.count(kInternalDomain)) g.opset_imports[kInternalDomain] = 1;
  NodeList list(g);
  std::vector<Node*> gone;
  for (auto [first, r] : order) RewriteCluster(g, cl, cl.Members(r), list, gone, &report_);
  g.RemoveNodes(gone);
  g.OrderNodes(list.Order());
  return true;
}

std::string FormatFusionReport(const FusionReport& r, int max_refused) {
  auto mb = [](int64_t b) {
    char s[32];
    std::snprintf(s, sizeof s, "%.2f MB", static_cast<double>(b) / 1e6);
    return std::string(s);
  };
  std::string out = "fusion " + r.mode + ": " + std::to_string(r.clusters.size()) + " clusters of " +
                    std::to_string(r.fused_nodes) + " ops, " + mb(r.saved_bytes) +
                    " of memory traffic saved; planned peak " + mb(r.peak_before) + " -> " + mb(r.peak_after);
  if (r.memory_budget > 0) out += " (budget " + mb(r.memory_budget) + ")";
  out += "\n";
  if (r.budget_unreachable)
    out +=
        "  the budget is below what fusion and recomputation can reach; only merges that do not raise the peak were "
        "made\n";
  else if (r.memory_budget > 0 && r.peak_before > r.memory_budget)
    out += "  the budget is below the unfused step's planned peak: met by fusion and recomputing saved values\n";
  for (const std::string& v : r.rematerialized) out += "  recomputed: " + v + "\n";
  for (const FusedCluster& c : r.clusters) {
    out += "  " + c.name + (c.kind == "fold" ? " (fold)" : "") + ": " + std::to_string(c.ops.size()) + " ops, " +
           std::to_string(c.inputs) + " in (" + mb(c.input_bytes) + "), " + std::to_string(c.outputs) + " out (" +
           mb(c.output_bytes) + "), saves " + mb(c.saved_bytes) + ":";
    for (const std::string& op : c.ops) out += " " + op.substr(0, op.find(' '));
    out += "\n";
  }
  if (!r.refused.empty()) {
    std::map<std::string, int> by_kind;
    for (const RefusedMerge& m : r.refused) ++by_kind[m.reason.substr(0, m.reason.find(':'))];
    out += "merges refused: " + std::to_string(r.refused.size()) + " (";
    bool first = true;
    for (const auto& [k, n] : by_kind) {
      out += (first ? "" : ", ") + k + " " + std::to_string(n);
      first = false;
    }
    out += ")\n";
    int shown = 0;
    for (const RefusedMerge& m : r.refused) {
      if (m.reason.rfind("program", 0) == 0 && shown >= max_refused / 2) continue;
      if (shown++ >= max_refused) break;
      out += "  " + m.producer + " -> " + m.consumer + ": " + m.reason + "\n";
    }
  }
  return out;
}

}  // namespace ot
