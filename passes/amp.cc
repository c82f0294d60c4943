#include "passes/amp.h"

#include <algorithm>
#include <cstdio>
#include <deque>
#include <functional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "graph/error.h"
#include "graph/op_registry.h"
#include "passes/fuse_util.h"

namespace ot {

DataType ParseAmpDtype(const std::string& s) {
  if (s == "fp16" || s == "float16" || s == "f16") return DataType::kFloat16;
  if (s == "bf16" || s == "bfloat16") return DataType::kBFloat16;
  throw Error("--amp: unknown precision '" + s + "' (choose fp16 or bf16)");
}

namespace {

bool IsCastNode(const Node* n) { return fuse::IsOp(n, "Cast"); }

// True when every value of type `a` is exactly representable in `b`, so Cast(Cast(x, b), c) == Cast(x, c).
bool ExactCast(DataType a, DataType b) {
  const bool b_float = b == DataType::kFloat32 || b == DataType::kFloat64;
  if ((a == DataType::kFloat16 || a == DataType::kBFloat16) && b_float) return true;
  if (a == DataType::kFloat32 && b == DataType::kFloat64) return true;
  if ((a == DataType::kBool || a == DataType::kInt8 || a == DataType::kUint8) &&
      (b_float || b == DataType::kFloat16 || b == DataType::kBFloat16))
    return true;
  if ((a == DataType::kInt16 || a == DataType::kUint16) && b_float) return true;
  return false;
}

struct Colouring {
  std::unordered_set<const Node*> half, fp32;
};

class Painter {
 public:
  Painter(const std::vector<Node*>& order, const std::unordered_set<const Value*>& f32,
          const std::unordered_map<const Node*, AmpClass>& cls)
      : order_(order), f32_(f32), cls_(cls) {}

  Colouring Paint() {
    Colouring c;
    // 1-2. fp32 seeds and deny propagation through clear/infer.
    std::unordered_set<const Node*> reach;  // R: reachable from a deny node through clear/infer nodes
    std::deque<const Node*> q;
    for (Node* n : order_)
      if (Cls(n) == AmpClass::kDeny) {
        c.fp32.insert(n);
        q.push_back(n);
      }
    while (!q.empty()) {
      const Node* n = q.front();
      q.pop_front();
      for (const Node* s : Succ(n))
        if (Free(s) && reach.insert(s).second) q.push_back(s);
    }
    // A clear node of R is fp32 when it leads (through R) to an infer node of R or to a deny node.
    std::unordered_map<const Node*, bool> leads;
    for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
      const Node* n = *it;
      if (!reach.count(n)) continue;
      bool l = false;
      for (const Node* s : Succ(n))
        if (Cls(s) == AmpClass::kDeny || (reach.count(s) && (Cls(s) == AmpClass::kInfer || leads[s]))) l = true;
      leads[n] = l;
      if (Cls(n) == AmpClass::kInfer || l) c.fp32.insert(n);
    }
    auto free_node = [&](const Node* n) { return Free(n) && !c.fp32.count(n); };
    for (Node* n : order_)
      if (Cls(n) == AmpClass::kAllow) c.half.insert(n);
    // 3. between half nodes.
    auto flood = [&](bool forward) {
      std::unordered_set<const Node*> seen;
      std::deque<const Node*> fq(c.half.begin(), c.half.end());
      while (!fq.empty()) {
        const Node* n = fq.front();
        fq.pop_front();
        for (const Node* m : forward ? Succ(n) : Pred(n))
          if (free_node(m) && seen.insert(m).second) fq.push_back(m);
      }
      return seen;
    };
    const auto down = flood(true), up = flood(false);
    for (const Node* n : down)
      if (up.count(n)) c.half.insert(n);
    // 4. follow: free nodes whose float inputs all come from half nodes (or constants).
    for (Node* n : order_) {
      if (!free_node(n) || c.half.count(n)) continue;
      bool any_half = false, all_ok = true;
      for (const Value* v : n->inputs) {
        if (!v || !f32_.count(v)) continue;
        if (v->producer && c.half.count(v->producer))
          any_half = true;
        else if (!(v->is_initializer() && !v->producer))
          all_ok = false;
      }
      if (any_half && all_ok) c.half.insert(n);
    }
    // 5. clear nodes connected to half nodes through clear nodes.
    std::deque<const Node*> cq(c.half.begin(), c.half.end());
    while (!cq.empty()) {
      const Node* n = cq.front();
      cq.pop_front();
      auto visit = [&](const Node* m) {
        if (Cls(m) == AmpClass::kClear && !c.fp32.count(m) && c.half.insert(m).second) cq.push_back(m);
      };
      for (const Node* m : Succ(n)) visit(m);
      for (const Node* m : Pred(n)) visit(m);
    }
    return c;
  }

 private:
  AmpClass Cls(const Node* n) const {
    auto it = cls_.find(n);
    return it == cls_.end() ? AmpClass::kUnset : it->second;
  }
  bool Free(const Node* n) const { return Cls(n) == AmpClass::kClear || Cls(n) == AmpClass::kInfer; }
  // Consumers / producers along float32 edges.
  std::vector<const Node*> Succ(const Node* n) const {
    std::vector<const Node*> r;
    for (const Value* o : n->outputs)
      if (o && f32_.count(o))
        for (const Use& u : o->uses) r.push_back(u.node);
    return r;
  }
  std::vector<const Node*> Pred(const Node* n) const {
    std::vector<const Node*> r;
    for (const Value* v : n->inputs)
      if (v && f32_.count(v) && v->producer) r.push_back(v->producer);
    return r;
  }

  const std::vector<Node*>& order_;
  const std::unordered_set<const Value*>& f32_;
  const std::unordered_map<const Node*, AmpClass>& cls_;
};

}  // namespace

namespace {

// Every --keep-fp32 op is an op, every --keep-fp32-node a node of the graph.
void CheckKeepLists(const std::set<std::string>& keep_ops, const std::set<std::string>& keep_nodes,
                    const std::vector<Node*>& order) {
  for (const std::string& op : keep_ops) {
    bool known = false;
    for (const OpSchema* s : OpRegistry::Global().All()) known = known || s->op_type == op;
    if (!known) throw Error("--keep-fp32: unknown op '" + op + "'");
  }
  for (const std::string& name : keep_nodes) {
    bool found = false;
    for (Node* n : order) found = found || n->name == name;
    if (!found) throw Error("--keep-fp32-node: the graph has no node named '" + name + "'");
  }
}

// Each node's AMP class: the registry's, deny for the kept ops and nodes, and deny for infer ops that feed only
// losses (the softmax before a cross-entropy stays fp32).
std::unordered_map<const Node*, AmpClass> Classes(const std::vector<Node*>& order,
                                                  const std::unordered_set<const Value*>& f32,
                                                  const std::set<std::string>& keep_ops,
                                                  const std::set<std::string>& keep_nodes) {
  const OpRegistry& reg = OpRegistry::Global();
  std::unordered_map<const Node*, AmpClass> cls;
  for (Node* n : order) {
    const OpSchema* s = reg.Find(n->domain, n->op_type);
    AmpClass c = s ? s->amp : AmpClass::kUnset;
    if (keep_ops.count(n->op_type) || keep_nodes.count(n->name)) c = AmpClass::kDeny;
    cls[n] = c;
  }
  for (Node* n : order) {
    if (cls[n] != AmpClass::kInfer) continue;
    bool any = false, all_loss = true;
    for (const Value* o : n->outputs)
      if (o && f32.count(o))
        for (const Use& u : o->uses) {
          any = true;
          const OpSchema* s = reg.Find(u.node->domain, u.node->op_type);
          all_loss = all_loss && s && s->amp_loss;
        }
    if (any && all_loss) cls[n] = AmpClass::kDeny;
  }
  return cls;
}

// The Casts the pass places: one per (value, dtype), shared by every consumer; `added` is every Cast it made.
class Casts {
 public:
  explicit Casts(Graph& g) : g_(g) {}

  Value* To(Value* v, DataType t) {
    // Undo one of our own casts instead of stacking a second on it (half -> fp32 -> half is the identity).
    if (IsCastNode(v->producer) && added.count(v->producer) && v->producer->inputs[0]->dtype == t &&
        ExactCast(t, v->dtype))
      return v->producer->inputs[0];
    auto key = std::make_pair(v, t);
    auto it = casts_.find(key);
    if (it != casts_.end()) return it->second;
    const char* suffix = t == DataType::kFloat16 ? ".fp16" : t == DataType::kBFloat16 ? ".bf16" : ".fp32";
    Value* out = g_.AddValue(g_.UniqueName(v->name + suffix));
    Node* c = g_.AddNode("Cast", {v}, {out}, g_.UniqueName("amp/" + v->name + suffix));
    c->attrs["to"] = Attribute::Int(static_cast<int64_t>(t));
    InferNode(*c);
    added.insert(c);
    casts_[key] = out;
    return out;
  }
  // The Cast of `v` to `t` made for its consumers, or null.
  Value* Made(Value* v, DataType t) const {
    auto it = casts_.find({v, t});
    return it == casts_.end() ? nullptr : it->second;
  }

  std::unordered_set<Node*> added;

 private:
  Graph& g_;
  std::map<std::pair<Value*, DataType>, Value*> casts_;
};

// Graph outputs and update-binding targets keep their names and fp32 type: a half result is renamed and Cast back
// to the pinned name; a Cast of it to fp32 made for its fp32 consumers is replaced by the pinned value itself.
void PinOutputs(Graph& g, const std::vector<Value*>& pinned, const std::unordered_set<const Value*>& f32,
                Casts& casts) {
  std::unordered_set<Value*> done;
  for (Value* o : pinned) {
    if (!o || !f32.count(o) || o->dtype == DataType::kFloat32 || !o->producer || !done.insert(o).second) continue;
    Node* p = o->producer;
    const int j = o->producer_output;
    Value* cached = casts.Made(o, DataType::kFloat32);
    Value* h = g.AddValue(g.UniqueName(o->name + ".half"));
    h->dtype = o->dtype;
    h->shape = o->shape;
    const auto uses = o->uses;
    for (const Use& u : uses) g.SetInput(u.node, u.input_index, h);
    p->outputs[j] = h;
    h->producer = p;
    h->producer_output = j;
    o->producer = nullptr;
    o->producer_output = -1;
    Node* c = g.AddNode("Cast", {h}, {o}, g.UniqueName("amp/" + o->name + ".fp32"));
    c->attrs["to"] = Attribute::Int(static_cast<int64_t>(DataType::kFloat32));
    InferNode(*c);
    casts.added.insert(c);
    if (cached) {
      const auto cached_uses = cached->uses;
      for (const Use& u : cached_uses) g.SetInput(u.node, u.input_index, o);
    }
  }
}

// Folds Cast chains whose first Cast is exact: Cast(Cast(x, B), C) -> Cast(x, C), or x when C is x's type; then drops
// the Casts nobody reads any more. Returns the chains folded.
int FoldCasts(Graph& g, const std::unordered_set<const Value*>& pinned, std::unordered_set<Node*>& added) {
  int folded = 0;
  for (Node* c2 : g.TopologicalOrder()) {
    if (!IsCastNode(c2) || !c2->inputs[0] || !IsCastNode(c2->inputs[0]->producer)) continue;
    if (!added.count(c2) && !added.count(c2->inputs[0]->producer)) continue;  // the model's own chains stay
    Value* x = c2->inputs[0]->producer->inputs[0];
    if (!x || !ExactCast(x->dtype, c2->inputs[0]->dtype)) continue;
    const DataType to = static_cast<DataType>(c2->attr_int("to", 0));
    if (to == x->dtype && !pinned.count(c2->outputs[0])) {
      Value* out = c2->outputs[0];
      const auto uses = out->uses;
      for (const Use& u : uses) g.SetInput(u.node, u.input_index, x);
    } else {
      g.SetInput(c2, 0, x);
    }
    ++folded;
  }
  for (bool again = true; again;) {
    again = false;
    for (Node* c : std::vector<Node*>(added.begin(), added.end())) {
      Value* out = c->outputs[0];
      if (out->uses.empty() && !pinned.count(out)) {
        g.RemoveNode(c);
        added.erase(c);
        again = true;
      }
    }
  }
  return folded;
}

}  // namespace

bool AmpPass::Run(Graph& g) {
  report_ = AmpReport();
  if (opts_.half == DataType::kUndefined) return false;
  if (opts_.half != DataType::kFloat16 && opts_.half != DataType::kBFloat16)
    throw Error("amp: the half type must be float16 or bfloat16, not " + DataTypeName(opts_.half));
  const DataType H = opts_.half;
  const std::vector<Node*> order = g.TopologicalOrder();
  const std::set<std::string> keep_ops(opts_.keep_fp32_ops.begin(), opts_.keep_fp32_ops.end());
  const std::set<std::string> keep_nodes(opts_.keep_fp32_nodes.begin(), opts_.keep_fp32_nodes.end());
  CheckKeepLists(keep_ops, keep_nodes, order);

  std::unordered_set<const Value*> f32;
  for (const auto& v : g.values())
    if (v->dtype == DataType::kFloat32) f32.insert(v.get());
  const std::unordered_map<const Node*, AmpClass> cls = Classes(order, f32, keep_ops, keep_nodes);
  const Colouring col = Painter(order, f32, cls).Paint();

  // Each node's float inputs in its colour (an input the op keeps fp32 stays so), and its outputs re-inferred.
  Casts casts(g);
  for (Node* n : order) {
    const bool half = col.half.count(n) != 0;
    const OpSchema* s = OpRegistry::Global().Find(n->domain, n->op_type);
    bool changed = false;
    for (int i = 0; i < static_cast<int>(n->inputs.size()); ++i) {
      Value* v = n->inputs[i];
      if (!v || !f32.count(v)) continue;
      const bool keep =
          s && std::find(s->amp_fp32_inputs.begin(), s->amp_fp32_inputs.end(), i) != s->amp_fp32_inputs.end();
      const DataType want = half && !keep ? H : DataType::kFloat32;
      if (v->dtype != want) {
        g.SetInput(n, i, casts.To(v, want));
        changed = true;
      }
    }
    // Re-infer where an input's type changed (a cast, or a half producer upstream).
    for (const Value* v : n->inputs) changed = changed || (v && f32.count(v) && v->dtype != DataType::kFloat32);
    if (changed) {
      try {
        InferNode(*n);
      } catch (const Error& e) {
        throw Error(std::string("amp: ") + e.what() + " (in " + DataTypeName(half ? H : DataType::kFloat32) +
                    "; keep it fp32 with --keep-fp32-node " + n->name + ")");
      }
    }
    if (half) report_.half_nodes.push_back(n->name);
    auto& oc = report_.ops[n->op_type];
    (half ? oc.half : oc.fp32)++;
  }

  std::vector<Value*> pinned(g.outputs.begin(), g.outputs.end());
  for (const auto& b : g.update_bindings) pinned.push_back(b.next);
  PinOutputs(g, pinned, f32, casts);
  report_.casts_folded = FoldCasts(g, std::unordered_set<const Value*>(pinned.begin(), pinned.end()), casts.added);
  report_.casts_inserted = static_cast<int>(casts.added.size());
  return !report_.half_nodes.empty() || report_.casts_inserted > 0;
}

std::string FormatAmpReport(const AmpReport& r, DataType half) {
  std::string out;
  char line[160];
  const std::string h = half == DataType::kFloat16 ? "fp16" : "bf16";
  std::snprintf(line, sizeof line, "%-28s %8s %8s\n", "op", h.c_str(), "fp32");
  out += line;
  int th = 0, tf = 0;
  for (const auto& [op, c] : r.ops) {
    std::snprintf(line, sizeof line, "%-28s %8d %8d\n", op.c_str(), c.half, c.fp32);
    out += line;
    th += c.half;
    tf += c.fp32;
  }
  std::snprintf(line, sizeof line, "%-28s %8d %8d\n", "total", th, tf);
  out += line;
  out += "Casts inserted: " + std::to_string(r.casts_inserted) + " (" + std::to_string(r.casts_folded) + " folded)\n";
  return out;
}

}  // namespace ot
