#include "passes/master_weights.h"

#include <algorithm>
#include <map>

#include "graph/error.h"
#include "graph/op_registry.h"
#include "graph/ops/optimizer_layout.h"
#include "passes/fuse_util.h"
#include "passes/optimizer_node.h"

namespace ot {

namespace {

bool IsHalf(DataType t) { return t == DataType::kFloat16 || t == DataType::kBFloat16; }

// The dtype a Cast node converts to (kUndefined when `to` is missing).
DataType CastTarget(const Node& n) { return static_cast<DataType>(n.attr_int("to", 0)); }

bool IsCast(const Node& n) { return fuse::IsOp(&n, "Cast"); }

}  // namespace

bool MasterWeightsPass::Run(Graph& g) {
  Node* opt = FindOptimizerNode(g);
  if (!opt) return false;
  const OptimizerLayout l = OptimizerLayout::Of(*opt);
  if (l.k < 0) throw Error(opt->Describe() + ": unknown optimizer kind");

  // Casts of trained parameters to a half dtype, per parameter index.
  std::map<int, std::vector<Node*>> casts;
  DataType dtype = l.m() ? static_cast<DataType>(l.half_dtype) : DataType::kUndefined;
  for (int i = 0; i < l.n; ++i) {
    Value* p = opt->inputs[l.param_in(i)];
    if (!p) continue;
    for (const Use& u : p->uses) {
      if (!IsCast(*u.node) || !IsHalf(CastTarget(*u.node))) continue;
      const DataType t = CastTarget(*u.node);
      if (dtype != DataType::kUndefined && t != dtype)
        throw Error("master-weights: " + u.node->Describe() + " casts parameter '" + p->name + "' to " +
                    DataTypeName(t) + " but other half copies are " + DataTypeName(dtype) +
                    "; all half copies of a step share one dtype");
      dtype = t;
      casts[i].push_back(u.node);
    }
  }
  if (casts.empty()) return false;

  // Existing half copies (a second run after more Casts appeared) keep their states; merged in index order.
  std::map<int, Value*> half_next;  // parameter index -> h' output
  for (int j = 0; j < l.m(); ++j) half_next[static_cast<int>(l.half_params[j])] = opt->outputs[l.half_out(j)];
  for (auto& [i, nodes] : casts) {
    Value* p = opt->inputs[l.param_in(i)];
    if (!p->initializer) throw Error("master-weights: parameter '" + p->name + "' is not an initializer");
    if (p->initializer->dtype() != DataType::kFloat32)
      throw Error("master-weights: parameter '" + p->name + "' is " + DataTypeName(p->initializer->dtype()) +
                  "; master weights must be float32");
    if (half_next.count(i))
      throw Error("master-weights: parameter '" + p->name + "' already has a half copy but is cast again by " +
                  nodes.front()->Describe());
    // round(P): float32 -> half, round to nearest even (Tensor::CastTo converts through the float value).
    Value* h = g.AddInitializer(FreshName(g, p->name + ".half"), p->initializer->CastTo(dtype));
    for (Node* c : nodes) {
      Value* out = c->outputs[0];
      g.RemoveNode(c);
      if (out) g.ReplaceAllUses(out, h);
    }
    Value* next = g.AddValue(FreshName(g, h->name + ".next"));
    half_next[i] = next;
    g.update_bindings.push_back({h, next});
  }

  // Rebuild the half-copy group of outputs in ascending parameter order.
  const int first = l.half_out(0);
  opt->outputs.erase(opt->outputs.begin() + first, opt->outputs.begin() + first + l.m());
  std::vector<int64_t> idx;
  std::vector<Value*> outs;
  for (auto& [i, v] : half_next) {
    idx.push_back(i);
    outs.push_back(v);
    v->producer = nullptr;  // InsertOutputs renumbers every output from `first` on
  }
  InsertOutputs(opt, first, outs);
  opt->attrs["half_params"] = Attribute::Ints(idx);
  opt->attrs["half_dtype"] = Attribute::Int(static_cast<int64_t>(dtype));
  InferNode(*opt);
  return true;
}

std::vector<std::pair<Value*, Value*>> HalfCopies(const Graph& g) {
  std::vector<std::pair<Value*, Value*>> r;
  const Node* opt = FindOptimizerNode(g);
  if (!opt) return r;
  const OptimizerLayout l = OptimizerLayout::Of(*opt);
  const std::vector<std::string> names =
      l.shard_master ? opt->attr_strings("master_names") : std::vector<std::string>{};
  for (int j = 0; j < l.m(); ++j) {
    const int i = static_cast<int>(l.half_params[j]);
    if (!opt->has_output(l.half_out(j)) || i < 0 || i >= l.n) continue;
    Value* half = BoundState(g, opt->outputs[l.half_out(j)]);
    Value* master = opt->inputs[l.param_in(i)];
    // Sharded masters (passes/shard_masters.h): the parameter's value, by name, without an initializer.
    if (!master && i < static_cast<int>(names.size())) master = g.FindValue(names[static_cast<size_t>(i)]);
    if (half && master) r.push_back({master, half});
  }
  return r;
}

}  // namespace ot
